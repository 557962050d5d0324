"""The sink's transactional mode (`.option("transactional", "true")`): each write task puts its share
of a micro-batch in one Kafka transaction, so read_committed readers see all of it or none.

- **Fencing.** The task's `transactional.id` is `roost-sink-<sink id>-<task partition>`: the same for
  every attempt of the task and across restarts of the query from its checkpoint (the sink id is
  the query id). `init_transactions()` of a new attempt bumps the epoch: the coordinator aborts
  whatever transaction an earlier attempt left open (a task that died mid-batch), and a zombie
  attempt still running is refused from then on (PRODUCER_FENCED).
- **Exactly once across re-runs.** With the records the transaction commits, through
  `send_offsets_to_transaction`, the offset `batch + 1` of partition 0 of the sink's commit-log
  topic for the group `roost-sink-<sink id>-<task partition>` (Kafka Streams' way: the progress
  record commits atomically with the output). A run of batch B first reads that group's committed
  offset, stable (librdkafka asks with require_stable, so a pending commit is waited out): at
  B + 1 or beyond, an earlier run of this task committed B, and the task writes nothing.
- **What is atomic.** One task's share. A micro-batch written by several tasks becomes visible task
  by task as each commits (a Kafka transaction belongs to one producer; committing several
  producers' transactions as one needs a two-phase commit, KIP-939, which Roost does not have).
  Write with one task (`coalesce(1)`) for a whole micro-batch in one transaction.

Records carry no extra header. The assumptions of `roost.spark.exactly_once` hold (a deterministic
query); unlike that mode a zombie attempt is fenced rather than assumed dead.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from roost.spark.kafka_io import consumer_config
from roost.spark.sink_io import produce_one, producer_config

TXN_PREFIX = "roost-sink-"
TXN_CALL_TIMEOUT_S = 120.0  # init, offsets, commit: ride out a coordinator failover
TRANSACTION_TIMEOUT_MS = 60_000  # librdkafka's default
NO_OFFSET = -1001  # librdkafka's OFFSET_INVALID: nothing committed

Row = tuple[str, "int | None", "bytes | None", "bytes | None", list[tuple[str, "bytes | None"]]]


def transactional_id(sink_id: str, task: int) -> str:
    return f"{TXN_PREFIX}{sink_id}-{task}"


class TransactionalTask:
    """One task attempt's transactional producer and the consumer that names its progress group."""

    def __init__(self, settings: dict[str, str], sink_id: str, task: int, log_topic: str) -> None:
        self.id = transactional_id(sink_id, task)
        # A transaction left open by a dead attempt holds read_committed readers back until the next
        # attempt fences it or this timeout aborts it; librdkafka wants message.timeout.ms no longer.
        config = {**producer_config({}), "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS,
                  "message.timeout.ms": TRANSACTION_TIMEOUT_MS, **settings}
        config.pop("enable.idempotence", None)  # implied by transactional.id
        self.producer = Producer({**config, "transactional.id": self.id})
        self.consumer = Consumer({**consumer_config(settings), "group.id": self.id})
        self.progress = KafkaTopicPartition(log_topic, 0)
        self._errors: list[str] = []

    def close(self) -> None:
        self.consumer.close()

    def fence(self) -> None:
        """Take over the transactional id: earlier attempts' open transactions are aborted."""
        self.producer.init_transactions(TXN_CALL_TIMEOUT_S)

    def committed_batches(self) -> int:
        """How many batches this task has committed (the stable committed offset, 0 for none)."""
        (found,) = self.consumer.committed([self.progress], timeout=TXN_CALL_TIMEOUT_S)
        if found.error is not None:
            raise KafkaException(found.error)
        return max(0, found.offset) if found.offset != NO_OFFSET else 0

    def _on_delivery(self, error: Any, _message: Any) -> None:
        if error is not None:
            self._errors.append(str(error))

    def write(self, rows: Iterable[Row], batch_id: int) -> int:
        """Every row and the progress offset in one transaction; the count written. A failure
        aborts the transaction (the task fails, Spark runs it again)."""
        self.producer.begin_transaction()
        written = 0
        try:
            for topic, partition, key, value, headers in rows:
                produce_one(self.producer, topic, key, value, partition, headers, self._on_delivery)
                written += 1
            self.producer.flush(TXN_CALL_TIMEOUT_S)
            if self._errors:
                raise RuntimeError(f"roost sink: {len(self._errors)} records failed, first: {self._errors[0]}")
            self.producer.send_offsets_to_transaction(
                [KafkaTopicPartition(self.progress.topic, 0, batch_id + 1)], self.consumer.consumer_group_metadata(),
                TXN_CALL_TIMEOUT_S)
            self.producer.commit_transaction(TXN_CALL_TIMEOUT_S)
        except BaseException:
            try:
                self.producer.abort_transaction(TXN_CALL_TIMEOUT_S)
            except KafkaException:
                pass  # fenced or fatal: the next attempt's init_transactions aborts it
            raise
        return written
