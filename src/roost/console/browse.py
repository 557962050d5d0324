"""Reading messages for the console: browse a topic from the newest, the oldest, an offset or a
time, per partition or merged in time order, optionally keeping only those whose key, value or
headers contain a text; and tail it (what came after given positions).

Every read is bounded: messages returned, records and key+value bytes read, and wall time. The
answer lists each bound that stopped it (`bounds_hit`), so the page can say the result is partial.
A read never goes past the end offsets the partitions had when it began, so it always ends.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import OffsetSpec

from roost.console.display import header_list, shown_bytes
from roost.console.errors import ConsoleError, bad_request, not_found
from roost.console.kafka_side import KafkaSide, client_config
from roost.console.registry_side import RegistrySide
from roost.console.schema_view import decode_value, wire_schema_id
from roost.console.settings import Bounds

STARTS = ("newest", "oldest", "offset", "timestamp")
SEARCH_FIELDS = ("key", "value", "headers")
POLL_BATCH = 500
FIRST_SEARCH_CHUNK = 100  # records per partition read first by a search from the newest
# Idle consumers kept for the next read: opening one costs about 10 ms (a connection, ApiVersions,
# Metadata) per request. Reads that run at once beyond this take a fresh one, closed after.
IDLE_CONSUMERS = 4


@dataclass(frozen=True)
class BrowseRequest:
    topic: str
    partition: int | None = None  # None: every partition, merged in time order
    start: str = "newest"
    position: int = 0  # the offset (start=offset) or Unix ms (start=timestamp)
    limit: int = 50
    search: str = ""
    search_in: tuple[str, ...] = SEARCH_FIELDS


@dataclass
class Scan:
    """What one bounded read found and how far it went."""

    records: list[Any] = field(default_factory=list)
    scanned: int = 0
    scanned_bytes: int = 0
    bounds_hit: list[str] = field(default_factory=list)


def validate(request: BrowseRequest, bounds: Bounds) -> None:
    if request.start not in STARTS:
        raise bad_request(f"start must be one of {', '.join(STARTS)}")
    if not 1 <= request.limit <= bounds.max_messages:
        raise bad_request(f"limit must be between 1 and {bounds.max_messages}")
    unknown = set(request.search_in) - set(SEARCH_FIELDS)
    if unknown:
        raise bad_request(f"search_in: unknown field {', '.join(sorted(unknown))}")


class Browser:
    def __init__(self, kafka: KafkaSide, bounds: Bounds, schemas: RegistrySide | None = None) -> None:
        self.kafka = kafka
        self.bounds = bounds
        self.schemas = schemas  # a registry to decode values in Confluent's wire format by (None: ids only)
        self._idle: list[Consumer] = []  # assigned nothing, ready for the next read
        self._lock = threading.Lock()
        self.consumers_opened = 0

    def _checkout(self) -> Consumer:
        with self._lock:
            if self._idle:
                return self._idle.pop()
            self.consumers_opened += 1
        # Assigned partitions only, never subscribed: the group id is never used to join or commit.
        return Consumer({**client_config(self.kafka.settings), "group.id": f"roost-console-{uuid.uuid4()}",
                         "enable.auto.commit": False, "enable.partition.eof": True,
                         "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100,
                         "max.partition.fetch.bytes": 1024 * 1024})

    def _checkin(self, consumer: Consumer, healthy: bool) -> None:
        """Back to the idle ones with nothing assigned (librdkafka drops what it fetched for the
        old assignment), or closed when a read failed or enough are idle."""
        if healthy:
            try:
                consumer.unassign()
            except KafkaException:
                healthy = False
        with self._lock:
            if healthy and len(self._idle) < IDLE_CONSUMERS:
                self._idle.append(consumer)
                return
        consumer.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for consumer in idle:
            consumer.close()

    def partitions_of(self, topic: str, partition: int | None) -> list[int]:
        found = self.kafka.metadata().topics.get(topic)
        if found is None or not found.partitions:
            found = self.kafka.metadata(fresh=True).topics.get(topic)
        if found is None or not found.partitions:
            raise not_found(f"topic {topic}")
        indexes = sorted(found.partitions)
        if partition is None:
            return indexes
        if partition not in found.partitions:
            raise not_found(f"partition {topic}[{partition}]")
        return [partition]

    def watermarks(self, topic: str, indexes: list[int]) -> dict[int, tuple[int, int]]:
        keys = [(topic, i) for i in indexes]
        starts = self.kafka.offsets(keys, OffsetSpec.earliest())
        ends = self.kafka.offsets(keys, OffsetSpec.latest())
        # A partition that cannot answer (offline) is read as empty rather than failing the page.
        return {i: (starts[(topic, i)] or 0, ends[(topic, i)] or 0) for i in indexes
                if starts[(topic, i)] is not None and ends[(topic, i)] is not None}

    def browse(self, request: BrowseRequest) -> dict[str, Any]:
        validate(request, self.bounds)
        indexes = self.partitions_of(request.topic, request.partition)
        marks = self.watermarks(request.topic, indexes)
        needle = request.search.encode()
        searching = bool(needle)
        begin = self.start_offsets(request, marks, searching)
        newest = request.start == "newest"
        end = {i: marks[i][1] for i in begin}
        if newest and searching:
            scan = self.search_backwards(request, marks, needle)
        else:
            if not newest and not searching:
                # A forward read needs at most `limit` records of each partition for any merge;
                # a forward search reads on to the log end, stopped by `limit` matches or a bound.
                end = {i: min(end[i], begin[i] + request.limit) for i in begin}
            scan = self.read(request.topic, begin, end, needle, request.search_in,
                             None if newest else request.limit)
        records = scan.records
        if request.start == "newest":
            records.sort(key=lambda r: (r.timestamp()[1], r.offset()), reverse=True)
        else:
            records.sort(key=lambda r: (r.timestamp()[1], r.partition(), r.offset()))
        if len(records) > request.limit:
            records = records[:request.limit]
            if searching and "max_messages" not in scan.bounds_hit:
                scan.bounds_hit.append("max_messages")
        return {"topic": request.topic, "messages": self.all_shown(records),
                "scanned": scan.scanned, "scanned_bytes": scan.scanned_bytes, "bounds_hit": scan.bounds_hit,
                "partitions": {str(i): {"start_offset": lo, "end_offset": hi} for i, (lo, hi) in marks.items()}}

    def start_offsets(self, request: BrowseRequest, marks: dict[int, tuple[int, int]], searching: bool) -> dict[int, int]:
        if request.start == "oldest":
            return {i: lo for i, (lo, _) in marks.items()}
        if request.start == "offset":
            return {i: min(max(request.position, lo), hi) for i, (lo, hi) in marks.items()}
        if request.start == "timestamp":
            at = self.kafka.offsets([(request.topic, i) for i in marks], OffsetSpec.for_timestamp(request.position))
            return {i: hi if at[(request.topic, i)] in (None, -1) else max(at[(request.topic, i)], lo)
                    for i, (lo, hi) in marks.items()}
        # newest: the last `limit` records of each partition (the merge keeps the newest of them).
        return {i: max(lo, hi - request.limit) for i, (lo, hi) in marks.items()}

    def search_backwards(self, request: BrowseRequest, marks: dict[int, tuple[int, int]], needle: bytes) -> Scan:
        """A search from the newest: read back from each partition's end in chunks that double,
        until `limit` records matched, the log starts are reached, or a bound stops it; so the
        scan bounds are spent on the newest records first."""
        scan = Scan()
        deadline = time.monotonic() + self.bounds.max_seconds
        top = {i: hi for i, (_, hi) in marks.items()}
        chunk = FIRST_SEARCH_CHUNK
        while len(scan.records) < request.limit and not scan.bounds_hit:
            begin = {i: max(marks[i][0], top[i] - chunk) for i in top}
            if all(begin[i] >= top[i] for i in top):
                break
            self.read(request.topic, begin, top, needle, request.search_in, None, scan, deadline)
            top, chunk = begin, chunk * 2
        return scan

    def read(self, topic: str, begin: dict[int, int], end: dict[int, int], needle: bytes = b"",
             search_in: tuple[str, ...] = SEARCH_FIELDS, keep_limit: int | None = None,
             scan: Scan | None = None, deadline: float | None = None) -> Scan:
        """Records of each partition i in [begin[i], end[i]), those containing `needle` (when
        given) in `search_in`; a search stops once it kept `keep_limit`. Adds to `scan` (and
        counts against the bounds what it already read) when given."""
        scan = Scan() if scan is None else scan
        todo = {i for i in begin if begin[i] < end[i]}
        if not todo:
            return scan
        consumer = self._checkout()
        healthy = False
        try:
            consumer.assign([TopicPartition(topic, i, begin[i]) for i in sorted(todo)])
            position = dict(begin)  # the next offset expected of each partition
            if deadline is None:
                deadline = time.monotonic() + self.bounds.max_seconds
            while todo and not scan.bounds_hit:
                bound = self.bound_reached(scan, deadline, keep_limit if needle else None)
                if bound is not None:
                    scan.bounds_hit.append(bound)
                    break
                # Ask for no more records than are left: librdkafka's consume waits out its
                # timeout for a batch it cannot fill (an end-of-partition event, too, comes only
                # after a fetch at the log end has waited fetch.wait.max.ms).
                left = sum(end[i] - position[i] for i in todo)
                for message in consumer.consume(max(1, min(POLL_BATCH, left)), timeout=0.2):
                    index = message.partition()
                    error = message.error()
                    if error is not None:
                        if error.code() == KafkaError._PARTITION_EOF:
                            todo.discard(index)
                        continue
                    if index not in todo or message.offset() >= end[index]:
                        todo.discard(index)
                        continue
                    # Checked before each record, so a bound is never overshot by a batch.
                    bound = self.bound_reached(scan, deadline, keep_limit if needle else None)
                    if bound is not None:
                        scan.bounds_hit.append(bound)
                        break
                    position[index] = message.offset() + 1
                    scan.scanned += 1
                    scan.scanned_bytes += len(message.key() or b"") + len(message.value() or b"")
                    if message.offset() + 1 >= end[index]:
                        todo.discard(index)
                    if not needle or contains(message, needle, search_in):
                        scan.records.append(message)
            healthy = True
        finally:
            self._checkin(consumer, healthy)
        return scan

    def bound_reached(self, scan: Scan, deadline: float, keep_limit: int | None) -> str | None:
        if keep_limit is not None and len(scan.records) >= keep_limit:
            return "max_messages"
        if scan.scanned_bytes >= self.bounds.max_scan_bytes:
            return "max_scan_bytes"
        if scan.scanned >= self.bounds.max_scan_messages:
            return "max_scan_messages"
        if time.monotonic() > deadline:
            return "max_seconds"
        return None

    def tail(self, topic: str, partition: int | None, after: dict[int, int] | None, limit: int) -> dict[str, Any]:
        """Records after `after` (partition -> next offset to show), oldest first; without it,
        only the current end offsets, where the next call starts."""
        indexes = self.partitions_of(topic, partition)
        marks = self.watermarks(topic, indexes)
        ends = {i: hi for i, (_, hi) in marks.items()}
        if after is None:
            return {"topic": topic, "messages": [], "next": {str(i): hi for i, hi in ends.items()}, "bounds_hit": []}
        begin = {i: min(max(after.get(i, ends[i]), marks[i][0]), ends[i]) for i in ends}
        scan = self.read(topic, begin, {i: min(ends[i], begin[i] + limit) for i in ends})
        following = {i: min(ends[i], begin[i] + limit) for i in ends} if not scan.bounds_hit else dict(begin)
        records = sorted(scan.records, key=lambda r: (r.timestamp()[1], r.partition(), r.offset()))
        if len(records) > limit or scan.bounds_hit:
            records = records[:limit]
            following = dict(begin)
            for record in records:
                following[record.partition()] = max(following[record.partition()], record.offset() + 1)
            if "max_messages" not in scan.bounds_hit:
                scan.bounds_hit.append("max_messages")
        return {"topic": topic, "messages": self.all_shown(records),
                "next": {str(i): o for i, o in following.items()}, "bounds_hit": scan.bounds_hit}

    def all_shown(self, records: list[Any]) -> list[dict[str, Any]]:
        failed: dict[int, str] = {}  # schema ids the registry did not give, asked once per read
        return [self.shown(r, failed) for r in records]

    def shown(self, record: Any, failed: dict[int, str] | None = None) -> dict[str, Any]:
        kind, stamp = record.timestamp()
        limit = self.bounds.display_bytes
        value = shown_bytes(record.value(), limit)
        schema_id = wire_schema_id(record.value())
        if value is not None and schema_id is not None:
            value["schema_id"] = schema_id
            if self.schemas is not None and self.schemas.url is not None and len(record.value()) <= limit:
                value["decoded"] = self.decoded(schema_id, record.value(), {} if failed is None else failed)
        return {"partition": record.partition(), "offset": record.offset(), "timestamp": stamp,
                "timestamp_type": {1: "create", 2: "log-append"}.get(kind, "none"),
                "key": shown_bytes(record.key(), limit), "value": value,
                "headers": header_list(record.headers(), limit)}

    def decoded(self, schema_id: int, data: bytes, failed: dict[int, str]) -> dict[str, Any]:
        """The value decoded by its schema; a schema the registry does not give is said so (the
        value may only look like the wire format: its first byte 0)."""
        assert self.schemas is not None
        if schema_id in failed:
            return {"schema_id": schema_id, "error": failed[schema_id]}
        try:
            schema = self.schemas.schema(schema_id)
        except ConsoleError as error:
            failed[schema_id] = f"schema {schema_id}: {error.message}"
            return {"schema_id": schema_id, "error": failed[schema_id]}
        return decode_value(schema, data)


def contains(record: Any, needle: bytes, fields: tuple[str, ...]) -> bool:
    if "key" in fields and needle in (record.key() or b""):
        return True
    if "value" in fields and needle in (record.value() or b""):
        return True
    if "headers" in fields:
        for name, value in record.headers() or []:
            if needle in name.encode() or needle in (value or b""):
                return True
    return False

