r"""`roost consume`: read records from one or more topics and print them.

    roost consume orders                          # everything, then keep following
    roost consume orders -o :end                  # everything there is now, then exit
    roost consume orders -o @-1h:end --json       # the last hour, as JSON lines
    roost consume orders -f '%k %v\n' -n 10       # ten records as key, space, value
    roost consume 'orders\..*' -r -g audit        # every matching topic, as group `audit`
    roost consume orders --value-schema           # Avro/JSON Schema/Protobuf values as JSON

Without -g the command reads the chosen partitions directly (nothing is committed) and every
-o form works. With -g it joins the group, commits what it printed, and -o start|end only say
where to begin when the group has no committed offset.

Ctrl-C (SIGINT) stops reading between two records, closes the consumer (a group member commits
exactly what it printed, then leaves its group) and exits with status 130, the shell's convention
for an interrupted command; a second Ctrl-C interrupts at once. A read that ends by itself (-n, -e
or a bounded -o) exits 0.
"""

from __future__ import annotations

import re
import signal
import time
from dataclasses import dataclass
from typing import Any

import click
from confluent_kafka import OFFSET_END, Consumer, KafkaError, KafkaException, TopicPartition

from roost.admin.offset_spec import OffsetSpec, OffsetSpecError, parse_offset_spec, resolve
from roost.admin.target import Target
from roost.cli.client.client_options import CliError, kafka_target_options
from roost.cli.records import schema_codec
from roost.cli.records.record_format import FormatError, RecordFormat
from roost.cli.records.record_io import (
    client_config,
    fetch_topics,
    make_client,
    message_record,
    require_topics,
    stdout_bytes,
    timestamp_type_name,
    warn,
)
from roost.cli.records.record_json import record_to_json

BATCH = 500
POLL_S = 0.2  # a short poll keeps Ctrl-C prompt while waiting for records
INTERRUPTED = 130

PartitionKey = tuple[str, int]


@dataclass
class Plan:
    """Where each assigned partition starts and (if bounded) the offset it stops before."""

    starts: dict[PartitionKey, int]
    stops: dict[PartitionKey, int | None]


def parse_partitions(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        partitions = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise click.BadParameter(f"expected partition numbers like 0,2, got {text!r}", param_hint="-p") from None
    if not partitions or partitions[0] < 0:
        raise click.BadParameter(f"expected partition numbers like 0,2, got {text!r}", param_hint="-p")
    return partitions


def choose_topics(requested: list[str], known: dict[str, Any], regex: bool) -> list[str]:
    if not regex:
        require_topics(known, requested)
        return requested
    try:
        patterns = [re.compile(pattern) for pattern in requested]
    except re.error as error:
        raise CliError(f"bad topic pattern: {error}") from None
    chosen = sorted(name for name in known if any(p.fullmatch(name) for p in patterns))
    if not chosen:
        raise CliError(f"no topic matches {', '.join(requested)}")
    return chosen


def plan_partitions(consumer: Consumer, target: Target, topics: list[str], known: dict[str, Any],
                    partitions: list[int] | None, spec: OffsetSpec, exit_at_end: bool) -> Plan:
    keys: list[PartitionKey] = []
    for topic in topics:
        available = set(known[topic].partitions)
        if partitions is not None:
            missing = [p for p in partitions if p not in available]
            if missing:
                raise CliError(f"topic {topic!r} has no partition {', '.join(map(str, missing))} "
                               f"(it has {len(available)})")
        keys += [(topic, p) for p in sorted(available) if partitions is None or p in partitions]

    def fail(error: KafkaException) -> CliError:
        return CliError(f"listing offsets: {error.args[0].str()}")

    marks: dict[PartitionKey, tuple[int, int]] = {}
    for key in keys:
        try:
            marks[key] = consumer.get_watermark_offsets(TopicPartition(*key), timeout=target.timeout_s, cached=False)
        except KafkaException as error:
            raise fail(error) from None
    times = sorted({pos.value for pos in (spec.begin, spec.until) if pos is not None and pos.kind == "time"})
    found: dict[tuple[PartitionKey, int], int] = {}
    for moment in times:  # ListOffsets by timestamp: the first offset at or after the time
        try:
            answers = consumer.offsets_for_times([TopicPartition(t, p, moment) for t, p in keys],
                                                 timeout=target.timeout_s)
        except KafkaException as error:
            raise fail(error) from None
        for answer in answers:
            if answer.error is not None:
                raise CliError(f"listing offsets by time for {answer.topic}[{answer.partition}]: "
                               f"{answer.error.str()}")
            found[((answer.topic, answer.partition), moment)] = answer.offset

    plan = Plan({}, {})
    for key in keys:
        low, high = marks[key]

        def offset_for_time(moment: int, key: PartitionKey = key, high: int = high) -> int:
            offset = found[(key, moment)]
            return high if offset < 0 or offset == OFFSET_END else offset

        start, stop = resolve(spec, low, high, offset_for_time)
        if exit_at_end:
            stop = high if stop is None else min(stop, high)
            stop = max(stop, start)
        plan.starts[key] = start
        plan.stops[key] = stop
    return plan


class Printer:
    """Writes records to stdout as bytes (a value's bytes never meet the terminal's encoding)."""

    def __init__(self, record_format: RecordFormat | None, null_marker: str,
                 decode_key: schema_codec.Decode | None = None, decode_value: schema_codec.Decode | None = None) -> None:
        self.record_format = record_format
        self.null_marker = null_marker
        self.decode_key = decode_key
        self.decode_value = decode_value
        self.out = stdout_bytes()

    def write(self, message: Any) -> None:
        record = message_record(message)
        if self.decode_key is not None:
            record.key = self.decode_key(record.key, record.topic)
        if self.decode_value is not None:
            record.value = self.decode_value(record.value, record.topic)
        if self.record_format is None:
            text = record_to_json(record, timestamp_type_name(message)) + "\n"
        else:
            text = self.record_format.render(record, self.null_marker)
        self.out.write(text.encode("utf-8"))

    def flush(self) -> None:
        self.out.flush()


class Bounds:
    """Reading without a group: each bounded partition stops before its stop offset."""

    def __init__(self, consumer: Consumer, stops: dict[PartitionKey, int], following: bool) -> None:
        self.consumer = consumer
        self.stops = stops
        self.following = following
        self.done: set[PartitionKey] = set()  # a batch may still hold records past their stop

    def finished(self) -> bool:
        return not self.following and not self.stops

    def accept(self, message: Any) -> bool:
        key = (message.topic(), message.partition())
        if key in self.done:
            return False
        stop = self.stops.get(key)
        if stop is not None and message.offset() >= stop:
            self._finish(key)
            return False
        return True

    def printed(self, message: Any) -> None:
        key = (message.topic(), message.partition())
        stop = self.stops.get(key)
        if stop is not None and message.offset() + 1 >= stop:
            self._finish(key)

    def at_end(self, key: PartitionKey, offset: int) -> None:
        # The end of what is there now. Transaction markers can sit below the stop offset, so
        # reaching the end at or beyond it also finishes the partition; one bounded beyond the
        # end (-o 0:100 of 50 records) keeps waiting.
        stop = self.stops.get(key)
        if stop is not None and offset >= stop:
            self._finish(key)

    def _finish(self, key: PartitionKey) -> None:
        del self.stops[key]
        self.done.add(key)
        self.consumer.pause([TopicPartition(*key)])


class GroupBounds:
    """Reading as a group: store each printed offset for the commit; with -e, finished once
    every assigned partition has reported reaching its end (librdkafka's partition EOF)."""

    def __init__(self, consumer: Consumer, exit_at_end: bool) -> None:
        self.consumer = consumer
        self.exit_at_end = exit_at_end
        self.assignment: set[PartitionKey] = set()
        self.ended: set[PartitionKey] = set()
        self.assigned_once = False
        self.next_offsets: dict[PartitionKey, int] = {}

    def on_assign(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.assigned_once = True
        self.assignment.update((tp.topic, tp.partition) for tp in partitions)

    def on_revoke(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            self.assignment.discard((tp.topic, tp.partition))

    def finished(self) -> bool:
        return self.exit_at_end and self.assigned_once and self.assignment <= self.ended

    def accept(self, message: Any) -> bool:
        return True

    def printed(self, message: Any) -> None:
        self.consumer.store_offsets(message)  # auto-commit sends it now and then
        key = (message.topic(), message.partition())
        self.next_offsets[key] = message.offset() + 1
        self.ended.discard(key)

    def commit_printed(self) -> None:
        """Commit what was printed, synchronously, before leaving the group (closing alone does
        not always send the last stored offsets when it races a Ctrl-C)."""
        if not self.next_offsets:
            return
        offsets = [TopicPartition(t, p, o) for (t, p), o in self.next_offsets.items()
                   if (t, p) in self.assignment]
        try:
            if offsets:
                self.consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as error:
            warn(f"committing the group's offsets: {error.args[0].str()}")

    def at_end(self, key: PartitionKey, offset: int) -> None:
        self.ended.add(key)


class StopRequest:
    """Ctrl-C while reading: the first SIGINT asks the loop to stop between records (so a record
    is never printed without its offset being stored for the group's commit); a second one
    interrupts at once."""

    def __init__(self) -> None:
        self.requested = False
        self._previous: Any = None

    def __enter__(self) -> StopRequest:
        self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        signal.signal(signal.SIGINT, self._previous)

    def _handle(self, signum: int, frame: Any) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True


def consume_loop(consumer: Consumer, printer: Printer, bounds: Bounds | GroupBounds, limit: int | None,
                 stop: StopRequest) -> int:
    """Print records until `limit` are printed, `bounds` is finished or Ctrl-C; returns how many."""
    printed = 0
    while not bounds.finished() and not stop.requested:
        wanted = BATCH if limit is None else min(BATCH, limit - printed)
        for message in consumer.consume(num_messages=wanted, timeout=POLL_S):
            if stop.requested:
                break
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    bounds.at_end((message.topic(), message.partition()), message.offset())
                    continue
                if error.fatal() or error.code() in (KafkaError.UNKNOWN_TOPIC_OR_PART,
                                                     KafkaError.TOPIC_AUTHORIZATION_FAILED):
                    raise CliError(f"consuming: {error.str()}")
                warn(f"consuming: {error.str()}")
                continue
            if not bounds.accept(message):
                continue
            printer.write(message)
            printed += 1
            bounds.printed(message)
            if printed == limit:
                printer.flush()
                return printed
        printer.flush()
    return printed


@click.command("consume")
@click.argument("topics", metavar="TOPIC[,TOPIC...]")
@click.option("-o", "--offset", "offset_text", default="start", show_default=True, metavar="SPEC",
              help="where to start and stop: start, end, N, +N, -N, A:B, :end, @TIME, @T1:T2, @-1h:end")
@click.option("-n", "--num", "limit", type=click.IntRange(min=1), help="stop after N records")
@click.option("-e", "--exit-at-end", is_flag=True,
              help="stop when each partition reaches the end offset it had when reading began")
@click.option("-p", "--partitions", "partitions_text", metavar="P[,P...]", help="only these partitions")
@click.option("-g", "--group", help="consume as this consumer group, committing what is printed")
@click.option("-r", "--regex", is_flag=True, help="TOPICs are regular expressions (matching whole names)")
@click.option("-f", "--format", "fmt", default="%v\\n", show_default=True, metavar="FMT|json",
              help="how to print each record (%t %k %v %p %o %h %T %d %d{strftime}, "
                   "{hex}/{base64} on %k/%v, \\n \\t); `json` is --json")
@click.option("--json", "as_json", is_flag=True, help="one JSON object per record (the same as -f json)")
@click.option("-Z", "--null-marker", default="", metavar="STR", help="print a null key or value as STR")
@click.option("--value-schema", "value_schema", is_flag=True,
              help="decode each value (Confluent wire format) by its schema id through the registry; print JSON")
@click.option("--key-schema", "key_schema", is_flag=True, help="the same for each key")
@schema_codec.registry_options
@kafka_target_options
def command(target: Target, topics: str, offset_text: str, limit: int | None, exit_at_end: bool,
            partitions_text: str | None, group: str | None, regex: bool, fmt: str, as_json: bool,
            null_marker: str, value_schema: bool, key_schema: bool, registry_url: str,
            registry_user: str | None) -> None:
    """Read records from TOPIC (several with commas; patterns with -r) and print them.

    \b
      roost consume orders -o :end                 everything there is now, then exit
      roost consume orders -o @-1h:end --json      the last hour, one JSON object a line
      roost consume orders -o @2026-11-23T10:00:00Z:1h -f '%d %k %v\\n'
      roost consume orders -g audit                as group `audit`, committing what it printed

    \b
    Offsets (-o): start | end | N | +N (after start) | -N (before end) | A:B (B exclusive;
    `end` = the end when reading began) | @T | @T1:T2 | @T:end | @:T | @T:1h, where T is
    epoch ms, an ISO-8601 date or date-time (UTC unless it says), now, or -1h/-30m/+10s.

    \b
    Format (-f): %t topic  %p partition  %o offset  %k key  %v value  %h headers (k=v,...)
    %T timestamp (ms)  %d timestamp (ISO-8601 UTC)  %d{strftime}  %k{hex} %v{base64} ...
    %%  \\n  \\t. Bytes that are not UTF-8 print escaped as \\xNN; use {hex}, {base64} or --json
    for exact bytes. --json prints topic, partition, offset, timestamp (ISO-8601 UTC),
    timestamp_ms, timestamp_type, key, value, headers; non-UTF-8 bytes as base64, marked by
    key_encoding/value_encoding (or a header's encoding) = "base64".

    Ctrl-C stops between records and exits with status 130.
    """
    try:
        record_format = None if as_json or fmt == "json" else RecordFormat(fmt)
    except FormatError as error:
        raise CliError(f"bad format {fmt!r}: {error}") from None
    try:
        spec = parse_offset_spec(offset_text, now_ms=int(time.time() * 1000))
    except OffsetSpecError as error:
        raise CliError(f"bad offset {offset_text!r}: {error}") from None
    partitions = parse_partitions(partitions_text)
    requested = [name for name in topics.split(",") if name]
    if not requested:
        raise CliError("no topic given")
    if group is not None:
        if spec.bounded or spec.begin.kind not in ("start", "end"):
            raise CliError("with -g, -o may only be start or end (where to begin without a committed offset)")
        if partitions is not None:
            raise CliError("with -g the group assigns the partitions; -p is for reading without a group")

    consumer = make_client(Consumer, client_config(
        target, {},
        **{"group.id": group or "roost-consume",  # librdkafka wants one even when nothing is committed
           "enable.auto.commit": group is not None,
           "enable.auto.offset.store": False,  # a group commits only what was printed
           "enable.partition.eof": True,
           "auto.offset.reset": "latest" if spec.begin.kind == "end" else "earliest"}))
    interrupted = False
    problem: str | None = None
    bounds: Bounds | GroupBounds | None = None
    try:
        known = fetch_topics(consumer, target)
        chosen = choose_topics(requested, known, regex)
        decode_key = decode_value = None
        if key_schema or value_schema:
            client = schema_codec.registry_client(registry_url, registry_user)
            decode_key = schema_codec.Decoder(client, True, warn) if key_schema else None
            decode_value = schema_codec.Decoder(client, False, warn) if value_schema else None
        printer = Printer(record_format, null_marker, decode_key, decode_value)
        if group is None:
            plan = plan_partitions(consumer, target, chosen, known, partitions, spec, exit_at_end)
            stops = dict(plan.stops)
            following = any(stop is None for stop in stops.values())
            for key, stop in list(stops.items()):
                if stop is not None and plan.starts[key] >= stop:
                    del stops[key]  # nothing to read there
            assigned = [TopicPartition(t, p, plan.starts[(t, p)]) for (t, p) in stops]
            if assigned:
                consumer.assign(assigned)
            bounded = {key: stop for key, stop in stops.items() if stop is not None}
            bounds = Bounds(consumer, bounded, following)
            with StopRequest() as ctrl_c:
                consume_loop(consumer, printer, bounds, limit, ctrl_c)
            interrupted = ctrl_c.requested
        else:
            bounds = GroupBounds(consumer, exit_at_end)
            consumer.subscribe(chosen, on_assign=bounds.on_assign, on_revoke=bounds.on_revoke)
            with StopRequest() as ctrl_c:
                consume_loop(consumer, printer, bounds, limit, ctrl_c)
            interrupted = ctrl_c.requested
    except KeyboardInterrupt:
        interrupted = True
    except FormatError as error:  # a key or value that --key-schema/--value-schema cannot decode
        problem = str(error)
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly; stdout cannot take even a flush now.
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    finally:
        try:
            if isinstance(bounds, GroupBounds):
                bounds.commit_printed()
            consumer.close()
        except (KafkaException, RuntimeError, KeyboardInterrupt):
            pass
    if interrupted:
        raise SystemExit(INTERRUPTED)
    if problem is not None:
        raise CliError(problem)
