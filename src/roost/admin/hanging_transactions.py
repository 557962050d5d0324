"""Hanging transactions, as kafka-transactions.sh finds and aborts them (KIP-664).

A transaction hangs on a partition when the partition holds transactional records of a producer
with no marker after them, and no coordinator will ever write one: the producer's transactional id
is unknown, or its coordinator's transaction does not list the partition (a client that wrote
before AddPartitionsToTxn, a marker lost to a bug). The partition's last stable offset stays at
the transaction's first offset, so read_committed consumers stop there and the cleaner cannot
pass it.

    describe_producers(target, [("t", 0)])     # DescribeProducers: each producer's open transaction
    find_hanging(target, topic="t")            # open for longer than transaction.max.timeout.ms, unknown
    abort_at_offset(target, "t", 0, 1234)      # the ABORT marker for the transaction starting there

`find_hanging` takes what DescribeProducers reports as open for longer than the maximum
transaction timeout (so that no coordinator could still be running it), asks ListTransactions
which transactional ids those producer ids belong to and DescribeTransactions whether those
transactions include the partition. The abort is a WriteTxnMarkers request (ABORT, the
producer's epoch and the coordinator epoch of its last marker) sent to the partition's leader,
which checks both epochs as it does for a coordinator's marker; Kafka's brokers ask for
CLUSTER_ACTION (or ALTER) on the cluster for it.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka.admin import ClusterMetadata

from roost.admin.errors import AdminError
from roost.admin.kafka_client import fetch_metadata, open_admin
from roost.admin.target import Target
from roost.admin.transactions import UNANSWERED, ask, describe_state, list_transactions, require_plaintext
from roost.wire.kafka import ApiKey
from roost.wire.kafka.errors import ErrorCode

DESCRIBE_PRODUCERS_VERSION, WRITE_TXN_MARKERS_VERSION = 0, 1
# Kafka's tool asks about at most this many partitions in one DescribeProducers request.
MAX_PARTITIONS_PER_REQUEST = 500
DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN = 15  # transaction.max.timeout.ms's default, as the tool's
# Errors after which the abort asks for fresh metadata and tries again (a leader moved).
RETRIABLE = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                       ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                       ErrorCode.REQUEST_TIMED_OUT})
RETRY_PAUSE_S = 0.2

Partition = tuple[str, int]


@dataclass(frozen=True)
class OpenTransaction:
    """An open transaction of one producer on one partition, as DescribeProducers reports it."""

    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    start_offset: int
    last_timestamp: int

    def row(self, now_ms: int) -> dict[str, Any]:
        return {"topic": self.topic, "partition": self.partition, "producer_id": self.producer_id,
                "producer_epoch": self.producer_epoch, "coordinator_epoch": self.coordinator_epoch,
                "start_offset": self.start_offset, "last_timestamp": self.last_timestamp,
                "duration_min": (now_ms - self.last_timestamp) // 60_000}


# ---- DescribeProducers --------------------------------------------------------------------------
def _leader(metadata: ClusterMetadata, topic: str, index: int) -> int:
    info = metadata.topics.get(topic)
    if info is None or (info.error is not None and not info.partitions):
        raise AdminError(f"topic {topic} does not exist")
    placement = info.partitions.get(index)
    if placement is None:
        raise AdminError(f"{topic} has no partition {index}")
    if placement.leader < 0:
        raise AdminError(f"{topic}-{index} has no leader")
    return int(placement.leader)


def _broker(metadata: ClusterMetadata, broker_id: int) -> tuple[str, int]:
    broker = metadata.brokers.get(broker_id)
    if broker is None:
        raise AdminError(f"broker {broker_id} is not in the cluster")
    return broker.host, broker.port


def describe_producers(target: Target, partitions: Iterable[Partition], broker_id: int | None = None,
                       metadata: ClusterMetadata | None = None) -> dict[Partition, list[dict[str, Any]]]:
    """The active producers of each partition, as its leader (or the replica on `broker_id`) knows
    them: producer id and epoch, last sequence and timestamp, the coordinator epoch of its last
    marker, the first offset of its open transaction (-1 for none)."""
    require_plaintext(target)
    if metadata is None:
        metadata = fetch_metadata(open_admin(target), target)
    by_broker: dict[int, list[Partition]] = {}
    for topic, index in partitions:
        destination = broker_id if broker_id is not None else _leader(metadata, topic, index)
        by_broker.setdefault(destination, []).append((topic, index))
    found: dict[Partition, list[dict[str, Any]]] = {}
    for destination, wanted in sorted(by_broker.items()):
        host, port = _broker(metadata, destination)
        for start in range(0, len(wanted), MAX_PARTITIONS_PER_REQUEST):
            chunk = wanted[start:start + MAX_PARTITIONS_PER_REQUEST]
            topics: dict[str, list[int]] = {}
            for topic, index in chunk:
                topics.setdefault(topic, []).append(index)
            try:
                answer = ask(host, port, ApiKey.DESCRIBE_PRODUCERS, DESCRIBE_PRODUCERS_VERSION,
                             {"topics": [{"name": t, "partition_indexes": ix} for t, ix in topics.items()]},
                             target.timeout_s)
            except UNANSWERED as error:
                raise AdminError(f"describe producers: broker {destination} did not answer ({error})") from None
            for topic in answer["topics"]:
                for result in topic["partitions"]:
                    where = f"{topic['name']}-{result['partition_index']}"
                    if result["error_code"] != ErrorCode.NONE:
                        raise AdminError(f"describe producers of {where} on broker {destination}: "
                                         f"{ErrorCode(result['error_code']).name}")
                    found[(topic["name"], result["partition_index"])] = [
                        {"producer_id": p["producer_id"], "producer_epoch": p["producer_epoch"],
                         "coordinator_epoch": p["coordinator_epoch"], "last_sequence": p["last_sequence"],
                         "last_timestamp": p["last_timestamp"], "current_txn_start_offset": p["current_txn_start_offset"]}
                        for p in result["active_producers"]]
    return found


# ---- abort --------------------------------------------------------------------------------------
def abort_transaction(target: Target, topic: str, index: int, producer_id: int, producer_epoch: int,
                      coordinator_epoch: int) -> dict[str, Any]:
    """Write the ABORT marker of `producer_id`'s transaction on `topic`-`index` (at its leader).
    A coordinator epoch below 0 (DescribeProducers' answer for a producer that never had a
    marker) is sent as 0, as Kafka's tool does: no leader epoch is smaller."""
    require_plaintext(target)
    coordinator_epoch = max(0, coordinator_epoch)
    spec = {"topic": topic, "partition": index, "producer_id": producer_id, "producer_epoch": producer_epoch,
            "coordinator_epoch": coordinator_epoch}
    body = {"markers": [{"producer_id": producer_id, "producer_epoch": producer_epoch, "transaction_result": False,
                         "topics": [{"name": topic, "partition_indexes": [index]}],
                         "coordinator_epoch": coordinator_epoch}]}
    deadline = time.monotonic() + target.timeout_s
    admin = open_admin(target)
    while True:
        metadata = fetch_metadata(admin, target)
        leader = _leader(metadata, topic, index)
        host, port = _broker(metadata, leader)
        try:
            answer = ask(host, port, ApiKey.WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION, body, target.timeout_s)
        except UNANSWERED as error:
            raise AdminError(f"abort on {topic}-{index}: broker {leader} did not answer ({error})") from None
        codes = [r["error_code"] for m in answer["markers"] for t in m["topics"] for r in t["partitions"]]
        code = ErrorCode(codes[0]) if len(codes) == 1 else ErrorCode.UNKNOWN_SERVER_ERROR
        if code == ErrorCode.NONE:
            return {**spec, "leader": leader}
        if code not in RETRIABLE or time.monotonic() > deadline:
            raise AdminError(f"abort of producer {producer_id} (epoch {producer_epoch}) on {topic}-{index}: "
                             f"{code.name}{_hint(code)}")
        time.sleep(RETRY_PAUSE_S)


def _hint(code: ErrorCode) -> str:
    if code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED:
        return " (aborting needs CLUSTER_ACTION or ALTER on the cluster)"
    if code == ErrorCode.INVALID_PRODUCER_EPOCH:
        return " (the producer has a newer epoch there: that transaction is over)"
    if code == ErrorCode.TRANSACTION_COORDINATOR_FENCED:
        return " (a newer coordinator epoch wrote a marker for this producer there)"
    return ""


def transaction_starting_at(producers: list[dict[str, Any]], start_offset: int) -> dict[str, Any] | None:
    """The producer whose open transaction starts at `start_offset`, if any."""
    for producer in producers:
        if producer["current_txn_start_offset"] >= 0 and producer["current_txn_start_offset"] == start_offset:
            return producer
    return None


def abort_at_offset(target: Target, topic: str, index: int, start_offset: int) -> dict[str, Any]:
    """Abort the open transaction that starts at `start_offset` (its producer, epoch and
    coordinator epoch from DescribeProducers at the leader)."""
    producers = describe_producers(target, [(topic, index)])[(topic, index)]
    found = transaction_starting_at(producers, start_offset)
    if found is None:
        raise AdminError(f"no open transaction starts at offset {start_offset} of {topic}-{index}")
    return abort_transaction(target, topic, index, found["producer_id"], found["producer_epoch"],
                             found["coordinator_epoch"])


# ---- find-hanging -------------------------------------------------------------------------------
def open_longer_than(producers: Mapping[Partition, list[dict[str, Any]]], now_ms: int,
                     max_timeout_ms: int) -> list[OpenTransaction]:
    """The open transactions whose producer last wrote more than `max_timeout_ms` ago."""
    return [OpenTransaction(topic, index, p["producer_id"], p["producer_epoch"], p["coordinator_epoch"],
                            p["current_txn_start_offset"], p["last_timestamp"])
            for (topic, index), found in sorted(producers.items()) for p in found
            if p["current_txn_start_offset"] >= 0 and now_ms - p["last_timestamp"] > max_timeout_ms]


def hanging_among(candidates: list[OpenTransaction], ids_by_producer: Mapping[int, str],
                  descriptions: Mapping[str, dict[str, Any] | None]) -> list[OpenTransaction]:
    """The candidates no coordinator will finish: their producer id has no transactional id, the
    id is unknown to its coordinator, or its transaction does not list the partition (a listed
    one still gets its marker, in Ongoing or Prepare*)."""
    hanging = []
    for candidate in candidates:
        transactional_id = ids_by_producer.get(candidate.producer_id)
        description = descriptions.get(transactional_id) if transactional_id is not None else None
        if description is None or f"{candidate.topic}-{candidate.partition}" not in description["partitions"]:
            hanging.append(candidate)
    return hanging


def partitions_to_search(metadata: ClusterMetadata, broker_id: int | None, topic: str | None,
                         partition: int | None) -> list[Partition]:
    if topic is not None and partition is not None:
        return [(topic, partition)]
    if topic is not None:
        if topic not in metadata.topics:
            raise AdminError(f"topic {topic} does not exist")
        topics = [topic]
    else:
        topics = sorted(metadata.topics)
    found = []
    for name in topics:
        for index, placement in sorted(metadata.topics[name].partitions.items()):
            if broker_id is None or broker_id in placement.replicas:
                found.append((name, index))
    return found


def find_hanging(target: Target, broker_id: int | None = None, topic: str | None = None,
                 partition: int | None = None, max_timeout_min: int = DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN,
                 now_ms: int | None = None) -> list[dict[str, Any]]:
    """Hanging transactions on the partitions of `topic` (or one `partition` of it), or on every
    partition with a replica on `broker_id` (asked of that broker)."""
    if topic is None and broker_id is None:
        raise AdminError("find-hanging needs --topic or --broker-id to limit the search")
    if partition is not None and topic is None:
        raise AdminError("--partition needs --topic")
    if max_timeout_min < 0:
        raise AdminError("--max-transaction-timeout must be 0 or more minutes")
    now = int(time.time() * 1000) if now_ms is None else now_ms
    metadata = fetch_metadata(open_admin(target), target)
    producers = describe_producers(target, partitions_to_search(metadata, broker_id, topic, partition), broker_id,
                                   metadata)
    candidates = open_longer_than(producers, now, max_timeout_min * 60_000)
    if not candidates:
        return []
    producer_ids = sorted({c.producer_id for c in candidates})
    ids_by_producer = {t["producer_id"]: t["transactional_id"] for t in list_transactions(target, [], producer_ids)
                       if t["producer_id"] in producer_ids}
    descriptions = {transactional_id: describe_state(target, transactional_id)
                    for transactional_id in sorted(set(ids_by_producer.values()))}
    return [c.row(now) for c in hanging_among(candidates, ids_by_producer, descriptions)]
