r"""`roost produce`: send records read from stdin or a file.

    echo hello | roost produce greetings                    # one record per line, value only
    roost produce orders -f '%k %v\n' --file orders.txt     # key, space, value per line
    roost produce orders -f json < export.jsonl             # what `consume --json` printed
    roost produce orders -k user-7 -H source=cli -Z NULL    # a line `NULL` is a tombstone
    roost produce orders -o 'partition %p offset %o\n'      # say where each record landed
    roost produce orders --value-schema order.avsc          # JSON lines in, Avro out (registry)

The same -f format that `roost consume -f` prints with reads the input (see record_format). The
command line decides over the input: records go to TOPIC (%t and a JSON "topic" are read and
ignored, as is the offset), -p overrides %p or a JSON partition, -k a JSON key. A partition or
timestamp read from the input is kept, so `consume --json | produce -f json` copies records with
their partitions and timestamps.
Every failed delivery is reported on stderr; the exit status is 1 if any record was not
delivered. Ctrl-C stops reading, waits (within --timeout) for what was sent, and exits 130.
"""

from __future__ import annotations

import functools
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import click
from confluent_kafka import KafkaError, KafkaException, Message, Producer

from roost.admin.target import Target
from roost.cli.client.client_options import CliError, kafka_target_options, parse_settings
from roost.cli.records import schema_codec
from roost.cli.records.record_format import FormatError, Record, RecordFormat
from roost.cli.records.record_io import (
    client_config,
    fetch_topics,
    make_client,
    message_record,
    require_topics,
    stdout_bytes,
    warn,
)
from roost.cli.records.record_json import record_from_json

COMPRESSIONS = ("none", "gzip", "snappy", "lz4", "zstd")
INTERRUPTED = 130
FLUSH_MARGIN_S = 5.0


def json_records(stream: BinaryIO) -> Iterator[Record]:
    for number, line in enumerate(stream, start=1):
        if not line.strip():
            continue
        try:
            yield record_from_json(line.decode("utf-8"))
        except (FormatError, UnicodeDecodeError) as error:
            raise FormatError(f"input line {number}: {error}") from None


class ProgressReader:
    """A binary stream that advances a rich progress bar (on stderr) by the bytes read."""

    def __init__(self, stream: BinaryIO, total: int | None) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

        self._stream = stream
        self.progress = Progress(TextColumn("producing"), BarColumn(), DownloadColumn(), TimeRemainingColumn(),
                                 console=Console(stderr=True), transient=False)
        self._task = self.progress.add_task("producing", total=total)

    def read1(self, size: int = -1) -> bytes:
        data = self._stream.read1(size)  # type: ignore[attr-defined]
        self.progress.advance(self._task, len(data))
        return data

    def read(self, size: int = -1) -> bytes:
        data = self._stream.read(size)
        self.progress.advance(self._task, len(data))
        return data

    def __iter__(self) -> Iterator[bytes]:
        for line in self._stream:
            self.progress.advance(self._task, len(line))
            yield line


class Deliveries:
    """Counts and reports delivery results (librdkafka calls `report` from poll and flush)."""

    def __init__(self, echo: RecordFormat | None) -> None:
        self.echo = echo
        self.sent = 0
        self.delivered = 0
        self.failed = 0
        self.out = stdout_bytes()
        self._lock = threading.Lock()

    def report(self, error: KafkaError | None, message: Message, headers: list[tuple[str, bytes | None]]) -> None:
        """A delivery report; `headers` are the record's (librdkafka's reports do not carry them)."""
        with self._lock:  # reports are served by the poller thread and by the main thread's flush
            if error is not None:
                self.failed += 1
                where = message.topic() if message.partition() < 0 else f"{message.topic()}[{message.partition()}]"
                warn(f"record not delivered to {where}: {error.str()}")
                return
            self.delivered += 1
            if self.echo is not None:
                delivered = message_record(message)
                delivered.headers = headers
                self.out.write(self.echo.render(delivered).encode("utf-8"))
                self.out.flush()


class DeliveryPoller:
    """Serves delivery reports while the main thread waits for input, so that whoever types
    records sees each one's echo or error when the broker answers, not at the next line."""

    def __init__(self, producer: Producer) -> None:
        self._producer = producer
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="delivery-poller", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._producer.poll(0.1)

    def __enter__(self) -> DeliveryPoller:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)


@click.command("produce")
@click.argument("topic")
@click.option("-f", "--format", "fmt", default="%v\\n", show_default=True, metavar="FMT|json",
              help="how to read each record (the language of consume -f); `json`: consume --json's lines")
@click.option("-k", "--key", help="the key of every record")
@click.option("-H", "--header", "headers", multiple=True, metavar="K=V", help="a header on every record (repeatable)")
@click.option("-Z", "--null-marker", metavar="STR", help="a key or value equal to STR is null (a tombstone)")
@click.option("-p", "--partition", type=click.IntRange(min=0), help="send every record to this partition")
@click.option("-z", "--compression", type=click.Choice(COMPRESSIONS), default="none", show_default=True)
@click.option("--acks", type=click.Choice(["0", "1", "all", "-1"]), default="all", show_default=True)
@click.option("--file", "input_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="read this file instead of stdin (with a progress bar on a terminal)")
@click.option("--progress/--no-progress", default=None, help="show the progress bar of --file (default: on a terminal)")
@click.option("-o", "--output", "echo_fmt", metavar="FMT",
              help="print each delivered record with FMT, e.g. 'partition %p offset %o\\n'")
@click.option("--value-schema", "value_schema", type=click.Path(path_type=Path), metavar="FILE",
              help="serialize each value (JSON) with this schema through the registry: .avsc Avro, .json JSON "
                   "Schema, .desc Protobuf (a descriptor set)")
@click.option("--key-schema", "key_schema", type=click.Path(path_type=Path), metavar="FILE",
              help="the same for each key")
@click.option("--value-schema-type", type=click.Choice(schema_codec.TYPES, case_sensitive=False),
              help="the --value-schema's type (default: from its extension)")
@click.option("--key-schema-type", type=click.Choice(schema_codec.TYPES, case_sensitive=False),
              help="the --key-schema's type (default: from its extension)")
@click.option("--value-message", metavar="NAME", help="Protobuf: the value's message (default: the first)")
@click.option("--key-message", metavar="NAME", help="Protobuf: the key's message (default: the first)")
@schema_codec.registry_options
@kafka_target_options
def command(target: Target, topic: str, fmt: str, key: str | None, headers: tuple[str, ...],
            null_marker: str | None, partition: int | None, compression: str, acks: str,
            input_path: Path | None, progress: bool | None, echo_fmt: str | None,
            value_schema: Path | None, key_schema: Path | None, value_schema_type: str | None,
            key_schema_type: str | None, value_message: str | None, key_message: str | None,
            registry_url: str, registry_user: str | None) -> None:
    """Send records to TOPIC, one per line of stdin (or --file) unless -f says otherwise.

    \b
      echo hello | roost produce greetings         one record per line, value only
      roost produce orders -f '%k %v\\n' --file orders.txt
      roost consume orders --json | roost produce orders-copy -f json
      roost produce orders -Z NULL -o 'partition %p offset %o\\n'

    -f reads with the language `roost consume -f` prints with (%k %v %h %p %T %d %d{strftime},
    {hex}/{base64} on %k/%v; see `roost consume --help`): each field reads up to the text that
    follows it. TOPIC decides over %t; -p over %p. Every failed record is reported on stderr and
    the exit status is 1 if any was not delivered; Ctrl-C exits with status 130.
    """
    try:
        record_format = None if fmt == "json" else RecordFormat(fmt)
        if record_format is not None:
            record_format.check_readable()
    except FormatError as error:
        raise CliError(f"bad format {fmt!r}: {error}") from None
    try:
        echo = None if echo_fmt is None else RecordFormat(echo_fmt)
    except FormatError as error:
        raise CliError(f"bad output format {echo_fmt!r}: {error}") from None
    if key is not None and record_format is not None and "k" in record_format.fields:
        raise CliError("-k and %k both give the key; use one")
    parse_settings(headers, "-H")  # checks the k=v shape; a key may repeat, so the pairs are kept
    fixed_headers = [(name, value.encode()) for name, _, value in (pair.partition("=") for pair in headers)]
    fixed_key = None if key is None else key.encode()
    marker = None if null_marker is None else null_marker.encode()

    encode_key = encode_value = None
    if key_schema is not None or value_schema is not None:
        client = schema_codec.registry_client(registry_url, registry_user)
        if key_schema is not None:
            encode_key = schema_codec.make_encoder(client, topic, True, key_schema, key_schema_type, key_message)
        if value_schema is not None:
            encode_value = schema_codec.make_encoder(client, topic, False, value_schema, value_schema_type,
                                                     value_message)

    deliveries = Deliveries(echo)
    producer = make_client(Producer, client_config(
        target,
        # A record not delivered within --timeout fails (and is reported) instead of being retried
        # for librdkafka's default five minutes; -X message.timeout.ms overrides it.
        {"linger.ms": 5, "message.timeout.ms": int(target.timeout_s * 1000)},
        **{"acks": acks, "compression.type": compression}))
    known = fetch_topics(producer, target)
    require_topics(known, [topic])
    if partition is not None and partition not in known[topic].partitions:
        raise CliError(f"topic {topic!r} has no partition {partition} (it has {len(known[topic].partitions)})")

    source: BinaryIO = sys.stdin.buffer if input_path is None else input_path.open("rb")
    stream: Any = source
    reader: ProgressReader | None = None
    show_progress = progress if progress is not None else (input_path is not None and sys.stderr.isatty())
    if show_progress:
        total = input_path.stat().st_size if input_path is not None else None
        reader = ProgressReader(stream, total)
        reader.progress.start()
        stream = reader
    interrupted = False
    problem: str | None = None
    try:
        records = json_records(stream) if record_format is None else record_format.read(stream, marker)
        with DeliveryPoller(producer):
            for record in records:
                send(producer, deliveries, record, topic, fixed_key, fixed_headers, partition, marker,
                     from_json=record_format is None, encode_key=encode_key, encode_value=encode_value)
    except FormatError as error:
        problem = str(error)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        if reader is not None:
            reader.progress.stop()
        if input_path is not None:
            source.close()
    try:
        # Past message.timeout.ms every record has an outcome (delivered or failed); the margin
        # lets librdkafka report the last failures before the command gives up waiting.
        unconfirmed = producer.flush(target.timeout_s + FLUSH_MARGIN_S)
    except KeyboardInterrupt:
        interrupted = True
        unconfirmed = len(producer)
    stdout_bytes().flush()
    if unconfirmed:
        warn(f"{unconfirmed} records not confirmed within {target.timeout_s + FLUSH_MARGIN_S:g}s")
    if interrupted:
        raise SystemExit(INTERRUPTED)
    if problem is not None:
        raise CliError(f"{problem} ({deliveries.delivered} records before it delivered)")
    if deliveries.failed or unconfirmed:
        raise CliError(f"{deliveries.failed + unconfirmed} of {deliveries.sent} records not delivered")


def send(producer: Producer, deliveries: Deliveries, record: Record, default_topic: str,
         fixed_key: bytes | None, fixed_headers: list[tuple[str, bytes]], fixed_partition: int | None,
         marker: bytes | None, from_json: bool, encode_key: schema_codec.Encode | None = None,
         encode_value: schema_codec.Encode | None = None) -> None:
    """Produce one parsed record, waiting for queue space when librdkafka's queue is full."""
    # The command line decides over the input: TOPIC over %t, -p over %p, -k over a JSON key.
    key = fixed_key if fixed_key is not None else record.key
    value = record.value
    if from_json and marker is not None and value == marker:
        value = None  # JSON input: the format reader applies the marker itself
    if encode_key is not None:
        key = encode_key(key)  # a FormatError ends the run, as a malformed line does
    if encode_value is not None:
        value = encode_value(value)
    extra: dict[str, Any] = {}
    chosen_partition = fixed_partition if fixed_partition is not None else record.partition
    if chosen_partition is not None:
        extra["partition"] = chosen_partition
    if record.timestamp_ms is not None:
        extra["timestamp"] = record.timestamp_ms
    headers = fixed_headers + record.headers
    if headers:
        extra["headers"] = headers
    for _ in range(10_000):  # each wait serves delivery reports, which frees queue space (~1000 s)
        try:
            producer.produce(default_topic, value=value, key=key,
                             on_delivery=functools.partial(deliveries.report, headers=headers), **extra)
            break
        except BufferError:
            producer.poll(0.1)
        except KafkaException as error:
            raise FormatError(f"cannot send a record: {error.args[0].str()}") from None
    else:
        raise FormatError("librdkafka's queue stayed full")
    deliveries.sent += 1
