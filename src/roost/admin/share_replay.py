"""`roost share-group replay`: a share group's dead letters (Roost's own dead-letter topic, see
roost.broker.share.dead_letter) produced back to where they came from.

Each record of the dead-letter topic that names the group (header `roost.dlt.group`) goes back
to its origin topic, to its origin partition while the topic still has it (else the producer's
partitioner picks one), with its own key, value, timestamp and headers (the `roost.dlt.*` ones
dropped). Bounded: at most `limit` records, and only those in the topic when the replay started
(its high watermarks then). What was replayed is remembered as the committed offsets of the
consumer group `roost.replay.<group>`, so a second replay goes on after it instead of repeating
it; a dry run produces and commits nothing. The dead-letter topic keeps every record.

The header names are the broker's (admin speaks to the servers over the wire only, so they are
repeated here; a test checks the two agree). confluent-kafka clients, as the other commands.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition

from roost.admin.errors import AdminError
from roost.admin.share_groups import DEAD_LETTER_TOPIC_CONFIG, share_group_configs
from roost.admin.target import Target

HEADER_PREFIX = "roost.dlt."
ORIGIN_TOPIC, ORIGIN_PARTITION, ORIGIN_OFFSET = (HEADER_PREFIX + "origin.topic", HEADER_PREFIX + "origin.partition",
                                                 HEADER_PREFIX + "origin.offset")
GROUP, DELIVERY_COUNT, REASON = HEADER_PREFIX + "group", HEADER_PREFIX + "delivery.count", HEADER_PREFIX + "reason"
MAX_LIMIT = 1_000_000
POLL_S = 0.5
IDLE_POLLS = 20  # polls that return nothing before the replay gives up on reaching the watermarks


@dataclass(frozen=True)
class DeadLetter:
    offset: int  # in the dead-letter topic
    dlt_partition: int
    topic: str
    partition: int
    origin_offset: int
    reason: str
    delivery_count: str
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, str | bytes | None]]
    timestamp: int | None


def _parse(message: Any, group: str) -> DeadLetter | None:
    """The dead letter in `message`, if it is one of `group`'s."""
    headers = list(message.headers() or [])
    found = {name: value for name, value in headers if name.startswith(HEADER_PREFIX)}
    try:
        if found.get(GROUP, b"").decode() != group:
            return None
        topic = found[ORIGIN_TOPIC].decode()
        partition, origin_offset = int(found[ORIGIN_PARTITION]), int(found[ORIGIN_OFFSET])
    except (KeyError, ValueError, AttributeError, UnicodeDecodeError):
        return None
    kind, stamp = message.timestamp()
    return DeadLetter(message.offset(), message.partition(), topic, partition, origin_offset,
                      (found.get(REASON) or b"").decode(errors="replace"),
                      (found.get(DELIVERY_COUNT) or b"").decode(errors="replace"), message.key(), message.value(),
                      [(n, v) for n, v in headers if not n.startswith(HEADER_PREFIX)], stamp if kind else None)


def replay(target: Target, group: str, dead_letter_topic: str | None, limit: int, dry_run: bool) -> list[dict[str, Any]]:
    if not 1 <= limit <= MAX_LIMIT:
        raise AdminError(f"--limit {limit}: between 1 and {MAX_LIMIT}")
    topic = dead_letter_topic or share_group_configs(target, group).get(DEAD_LETTER_TOPIC_CONFIG)
    if not topic:
        raise AdminError(f"share group {group} has no dead-letter topic ({DEAD_LETTER_TOPIC_CONFIG}); "
                         "name one with --from-dead-letter-topic")
    consumer = Consumer(target.client_config(**{"group.id": f"roost.replay.{group}", "enable.auto.commit": False,
                                                "enable.partition.eof": False}))
    producer = None if dry_run else Producer(target.client_config(**{"acks": "all", "enable.idempotence": True}))
    rows: list[dict[str, Any]] = []
    failures: list[str] = []

    def delivered(error: Any, _message: Any) -> None:
        if error is not None:
            failures.append(str(error))
    try:
        metadata = consumer.list_topics(topic, timeout=target.timeout_s)
        described = metadata.topics.get(topic)
        if described is None or described.error is not None:
            raise AdminError(f"dead-letter topic {topic}: {described.error if described else 'not found'}")
        partitions = sorted(described.partitions)
        committed = {tp.partition: tp.offset for tp in consumer.committed(
            [TopicPartition(topic, p) for p in partitions], timeout=target.timeout_s)}
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=target.timeout_s)[1]
                for p in partitions}
        starts = {p: committed[p] if committed[p] >= 0 else OFFSET_BEGINNING for p in partitions}
        remaining = {p for p in partitions if ends[p] > max(0, committed[p])}
        consumer.assign([TopicPartition(topic, p, starts[p]) for p in sorted(remaining)])
        origins: dict[str, int] = {}  # origin topic -> its partition count now
        done: dict[int, int] = {}  # dead-letter partition -> next offset (what to commit)
        idle = 0
        problem: str | None = None
        while remaining and len(rows) < limit and idle < IDLE_POLLS:
            message = consumer.poll(POLL_S)
            if message is None:
                idle += 1
                continue
            idle = 0
            if message.error() is not None:
                raise AdminError(f"reading {topic}: {message.error()}")
            p, at = message.partition(), message.offset()
            assert p is not None and at is not None  # a record, not an event
            if at >= ends[p]:
                remaining.discard(p)
                continue
            if at + 1 >= ends[p]:
                remaining.discard(p)
            done[p] = at + 1
            letter = _parse(message, group)
            if letter is None:
                continue  # another group's, or not a dead letter
            if letter.topic not in origins:
                found = consumer.list_topics(letter.topic, timeout=target.timeout_s).topics.get(letter.topic)
                if found is None or found.error is not None or not found.partitions:
                    done[p] = at  # not replayed: the next replay starts here again
                    problem = (f"dead letter {topic}-{p}@{message.offset()}: its origin topic {letter.topic} "
                               "does not exist; create it, then replay again (what came before was replayed)")
                    break
                origins[letter.topic] = len(found.partitions)
            same = letter.partition < origins[letter.topic]
            row = {"origin": f"{letter.topic}-{letter.partition}@{letter.origin_offset}", "reason": letter.reason,
                   "delivery_count": letter.delivery_count, "dead_letter": f"{topic}-{p}@{message.offset()}",
                   "to": f"{letter.topic}-{letter.partition}" if same else f"{letter.topic} (any partition)"}
            if producer is not None:
                extra: dict[str, Any] = {"partition": letter.partition} if same else {}
                if letter.timestamp is not None:
                    extra["timestamp"] = letter.timestamp
                producer.produce(letter.topic, key=letter.key, value=letter.value, headers=letter.headers,
                                 on_delivery=delivered, **extra)
                producer.poll(0)
            rows.append(row)
        if producer is not None:
            if producer.flush(target.timeout_s * 3) != 0 or failures:
                raise AdminError("replay: some records were not acknowledged by their origin topics "
                                 f"({'; '.join(failures[:3]) or 'timed out'}); nothing committed: replaying "
                                 "again repeats this batch")
            if done:
                consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in done.items()], asynchronous=False)
        if problem is not None:
            raise AdminError(problem)
    except KafkaException as error:
        raise AdminError(f"replay share group {group}: {error}") from None
    finally:
        consumer.close()
    return rows
