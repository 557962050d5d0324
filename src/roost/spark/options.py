"""The roost data source's options, parsed and checked before anything touches the network.

Names and meanings follow Spark's own Kafka source and sink, so users' habits carry over:
`kafka.bootstrap.servers`, `subscribe` / `subscribePattern`, `startingOffsets`, `endingOffsets`,
`maxOffsetsPerTrigger`, `failOnDataLoss`, `topic`. Spark hands options over case-insensitively
(as a CaseInsensitiveDict), so every lookup here goes through lower-cased keys.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from roost.spark.offsets import EARLIEST, LATEST, TopicPartition


class OptionError(ValueError):
    """An option is missing, unknown in value, or malformed; the message names the option."""


# librdkafka settings passed through with the `kafka.` prefix (like Spark's Kafka source), except the
# ones the connector owns: it manages offsets itself and never joins a consumer group.
_RESERVED_KAFKA_SETTINGS = frozenset({
    "group.id", "enable.auto.commit", "auto.offset.reset", "enable.partition.eof",
    "key.deserializer", "value.deserializer", "key.serializer", "value.serializer",
})

DEFAULT_POLL_TIMEOUT_MS = 120_000

# The settings Roost's own consumer honours; any other `kafka.*` setting is librdkafka's to honour,
# so with one of those the source's tasks read through librdkafka (option `consumer`).
ROOST_CONSUMER_SETTINGS = frozenset({"bootstrap.servers", "client.id"})
CONSUMERS = ("auto", "roost", "librdkafka")


def _lowered(options: Mapping[str, str]) -> dict[str, str]:
    return {str(key).lower(): str(value) for key, value in options.items()}


def _parse_bool(name: str, text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise OptionError(f"option '{name}' must be true or false, got {text!r}")


def _parse_positive_int(name: str, text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise OptionError(f"option '{name}' must be an integer, got {text!r}") from None
    if value <= 0:
        raise OptionError(f"option '{name}' must be positive, got {value}")
    return value


def kafka_settings(options: Mapping[str, str]) -> dict[str, str]:
    """librdkafka settings from the `kafka.*` options; `kafka.bootstrap.servers` is required."""
    lowered = _lowered(options)
    settings = {key[len("kafka."):]: value for key, value in lowered.items() if key.startswith("kafka.")}
    if not settings.get("bootstrap.servers"):
        raise OptionError("option 'kafka.bootstrap.servers' is required (host:port[,host:port...])")
    reserved = sorted(_RESERVED_KAFKA_SETTINGS & settings.keys())
    if reserved:
        raise OptionError(f"option 'kafka.{reserved[0]}' is not supported: the roost source manages it")
    return settings


@dataclass(frozen=True)
class Subscription:
    """Which topics a reader follows: an explicit list, or every topic whose whole name matches."""

    topics: tuple[str, ...] = ()
    pattern: str | None = None

    def __post_init__(self) -> None:
        assert bool(self.topics) != (self.pattern is not None), "exactly one of topics / pattern"

    def matches(self, topic: str) -> bool:
        if self.pattern is None:
            return topic in self.topics
        # Internal topics (__consumer_offsets, the sink's commit logs) are never subscribed by a
        # pattern, as Kafka's consumers exclude internal topics by default.
        return not topic.startswith("__") and re.fullmatch(self.pattern, topic) is not None

    def describe(self) -> str:
        return f"pattern {self.pattern!r}" if self.pattern is not None else f"topics {list(self.topics)}"


def parse_subscription(options: Mapping[str, str]) -> Subscription:
    lowered = _lowered(options)
    given = [name for name in ("subscribe", "subscribepattern", "assign") if name in lowered]
    if "assign" in given:
        raise OptionError("option 'assign' is not supported; use 'subscribe' or 'subscribePattern'")
    if len(given) != 1:
        raise OptionError("exactly one of the options 'subscribe' and 'subscribePattern' is required")
    if given[0] == "subscribe":
        topics = tuple(t.strip() for t in lowered["subscribe"].split(",") if t.strip())
        if not topics:
            raise OptionError("option 'subscribe' names no topic")
        return Subscription(topics=topics)
    pattern = lowered["subscribepattern"]
    try:
        re.compile(pattern)
    except re.error as error:
        raise OptionError(f"option 'subscribePattern' is not a valid regular expression: {error}") from None
    return Subscription(pattern=pattern)


@dataclass(frozen=True)
class OffsetSpec:
    """`earliest`, `latest`, or explicit offsets per partition (-2 = earliest, -1 = latest)."""

    kind: str  # "earliest" | "latest" | "specific"
    specific: Mapping[TopicPartition, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        assert self.kind in ("earliest", "latest", "specific"), self.kind


def parse_offset_spec(name: str, text: str | None, default: str, *, allow_earliest: bool = True) -> OffsetSpec:
    """Parse `startingOffsets` / `endingOffsets` as Spark does: a keyword or JSON per partition."""
    value = (text if text is not None else default).strip()
    if value.lower() == "earliest":
        if not allow_earliest:
            raise OptionError(f"option '{name}' cannot be 'earliest'")
        return OffsetSpec("earliest")
    if value.lower() == "latest":
        return OffsetSpec("latest")
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError:
        raise OptionError(
            f"option '{name}' must be 'earliest', 'latest' or JSON such as "
            f"{{\"topic\":{{\"0\":23,\"1\":-2}}}}, got {value!r}") from None
    if not isinstance(parsed, dict) or not parsed:
        raise OptionError(f"option '{name}' JSON must map topics to {{partition: offset}} objects")
    specific: dict[TopicPartition, int] = {}
    for topic, partitions in parsed.items():
        if not isinstance(partitions, dict):
            raise OptionError(f"option '{name}': topic {topic!r} must map partitions to offsets")
        for partition, offset in partitions.items():
            try:
                index = int(partition)
            except ValueError:
                raise OptionError(f"option '{name}': partition {partition!r} of {topic!r} is not a number") from None
            if not isinstance(offset, int) or isinstance(offset, bool) or offset < EARLIEST:
                raise OptionError(f"option '{name}': offset {offset!r} of {topic}-{index} must be >= -2")
            if offset == EARLIEST and not allow_earliest:
                raise OptionError(f"option '{name}': -2 (earliest) is not allowed for {topic}-{index}")
            specific[TopicPartition(topic, index)] = offset
    return OffsetSpec("specific", specific)


def _settings_only_librdkafka_honours(kafka: Mapping[str, str]) -> list[str]:
    return sorted(key for key, value in kafka.items() if key not in ROOST_CONSUMER_SETTINGS
                  and not (key == "security.protocol" and value.strip().lower() == "plaintext"))


def parse_consumer(text: str | None, kafka: Mapping[str, str]) -> str:
    """Which client the tasks read with: "roost" (its own, the default when it honours every
    `kafka.*` option given) or "librdkafka"."""
    chosen = (text or "auto").strip().lower()
    if chosen not in CONSUMERS:
        raise OptionError(f"option 'consumer' must be one of {', '.join(CONSUMERS)}, got {text!r}")
    foreign = _settings_only_librdkafka_honours(kafka)
    if chosen == "roost" and foreign:
        raise OptionError(f"option 'consumer' roost does not honour 'kafka.{foreign[0]}': use "
                          "consumer librdkafka (or auto)")
    if chosen == "auto":
        return "librdkafka" if foreign else "roost"
    return chosen


@dataclass(frozen=True)
class ReaderOptions:
    kafka: dict[str, str]
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec
    max_offsets_per_trigger: int | None
    fail_on_data_loss: bool
    poll_timeout_ms: int
    min_partitions: int | None
    consumer: str = "roost"  # "roost" or "librdkafka": see parse_consumer


# Options of Spark's Kafka source that this source does not implement: refused rather than ignored.
_UNSUPPORTED_READER_OPTIONS = {
    "startingtimestamp": "startingOffsets", "startingoffsetsbytimestamp": "startingOffsets",
    "endingtimestamp": "endingOffsets", "endingoffsetsbytimestamp": "endingOffsets",
    "minoffsetspertrigger": "maxOffsetsPerTrigger", "maxtriggerdelay": "maxOffsetsPerTrigger",
}


def parse_reader_options(options: Mapping[str, str], *, streaming: bool) -> ReaderOptions:
    lowered = _lowered(options)
    for name, instead in _UNSUPPORTED_READER_OPTIONS.items():
        if name in lowered:
            raise OptionError(f"option '{name}' is not supported by the roost source; use '{instead}'")
    if lowered.get("includeheaders", "true").strip().lower() != "true":
        raise OptionError("option 'includeHeaders' cannot be false: the roost source always has a headers column")
    if streaming and "endingoffsets" in lowered:
        raise OptionError("option 'endingOffsets' is for batch queries (spark.read) only")
    if not streaming and "maxoffsetspertrigger" in lowered:
        raise OptionError("option 'maxOffsetsPerTrigger' is for streaming queries (spark.readStream) only")
    starting = parse_offset_spec("startingOffsets", lowered.get("startingoffsets"),
                                 "latest" if streaming else "earliest")
    if not streaming and starting.kind == "latest":
        raise OptionError("option 'startingOffsets' cannot be 'latest' for a batch query")
    if not streaming and starting.kind == "specific" and LATEST in starting.specific.values():
        raise OptionError("option 'startingOffsets' cannot use -1 (latest) for a batch query")
    ending = parse_offset_spec("endingOffsets", lowered.get("endingoffsets"), "latest", allow_earliest=False)
    max_offsets = lowered.get("maxoffsetspertrigger")
    min_partitions = lowered.get("minpartitions")
    kafka = kafka_settings(lowered)
    return ReaderOptions(
        kafka=kafka,
        subscription=parse_subscription(lowered),
        starting=starting,
        ending=ending,
        max_offsets_per_trigger=None if max_offsets is None
        else _parse_positive_int("maxOffsetsPerTrigger", max_offsets),
        fail_on_data_loss=_parse_bool("failOnDataLoss", lowered.get("failondataloss", "true")),
        poll_timeout_ms=_parse_positive_int(
            "kafkaConsumer.pollTimeoutMs", lowered.get("kafkaconsumer.polltimeoutms", str(DEFAULT_POLL_TIMEOUT_MS))),
        min_partitions=None if min_partitions is None else _parse_positive_int("minPartitions", min_partitions),
        consumer=parse_consumer(lowered.get("consumer"), kafka),
    )


@dataclass(frozen=True)
class WriterOptions:
    kafka: dict[str, str]
    topic: str | None
    exactly_once: bool
    sink_id: str | None
    transactional: bool = False  # each task's share of a batch in one Kafka transaction (roost.spark.sink_txn)


def parse_writer_options(options: Mapping[str, str]) -> WriterOptions:
    lowered = _lowered(options)
    return WriterOptions(
        kafka=kafka_settings(lowered),
        topic=lowered.get("topic") or None,
        exactly_once=_parse_bool("exactlyOnce", lowered.get("exactlyonce", "true")),
        sink_id=lowered.get("sinkid") or None,
        transactional=_parse_bool("transactional", lowered.get("transactional", "false")),
    )
