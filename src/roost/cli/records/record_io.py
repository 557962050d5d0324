"""What `roost produce` and `roost consume` share on the Kafka side: quiet client settings, a
metadata fetch that turns an unreachable cluster or an unknown topic into one line, and a
confluent-kafka message as a format-language Record."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any, BinaryIO, TypeVar

from confluent_kafka import TIMESTAMP_CREATE_TIME, TIMESTAMP_NOT_AVAILABLE, KafkaException, Message

from roost.admin.target import Target
from roost.cli.client.client_options import CliError
from roost.cli.records.record_format import Record
from roost.client_settings import FAILOVER_SETTINGS

# librdkafka logs each failed connection attempt on stderr; the commands report failures
# themselves in one line, so only critical log lines get through (-X log_level=7 shows all).
QUIET = {"log_level": 2}

T = TypeVar("T")


def client_config(target: Target, defaults: dict[str, Any], **required: Any) -> dict[str, Any]:
    """Failover settings and `defaults` (which -X may override), then the target's bootstrap and -X, then `required`."""
    return {**QUIET, **FAILOVER_SETTINGS, **defaults, **target.client_config(**required)}


def make_client(kind: type[T], config: dict[str, Any]) -> T:
    """A Producer or Consumer; a setting librdkafka refuses (e.g. a bad -X) is a one-line error."""
    try:
        return kind(config)  # type: ignore[call-arg]
    except (KafkaException, ValueError, TypeError) as error:
        detail = error.args[0].str() if isinstance(error, KafkaException) else str(error)
        raise CliError(f"client settings: {detail}") from None


def fetch_topics(client: Any, target: Target) -> dict[str, Any]:
    """Topic name -> TopicMetadata from a producer or consumer, within --timeout."""
    try:
        metadata = client.list_topics(timeout=target.timeout_s)
    except KafkaException as error:
        raise CliError(f"cannot reach the cluster at {target.bootstrap} within {target.timeout_s:g}s: "
                       f"{error.args[0].str()}") from None
    return dict(metadata.topics)


def require_topics(known: dict[str, Any], names: Iterable[str]) -> None:
    for name in names:
        if name not in known:
            raise CliError(f"unknown topic {name!r}")
        error = known[name].error
        if error is not None:
            raise CliError(f"topic {name!r}: {error.str()}")


def message_record(message: Message) -> Record:
    timestamp_type, timestamp = message.timestamp()
    return Record(
        topic=message.topic() or "",
        partition=message.partition(),
        offset=message.offset(),
        timestamp_ms=None if timestamp_type == TIMESTAMP_NOT_AVAILABLE else timestamp,
        key=message.key(),
        value=message.value(),
        headers=[(name, value) for name, value in (message.headers() or [])],
    )


def timestamp_type_name(message: Message) -> str | None:
    timestamp_type = message.timestamp()[0]
    if timestamp_type == TIMESTAMP_NOT_AVAILABLE:
        return None
    return "create" if timestamp_type == TIMESTAMP_CREATE_TIME else "log_append"


_STDOUT: BinaryIO | None = None


def stdout_bytes() -> BinaryIO:
    """Standard output as a buffered byte stream, even under PYTHONUNBUFFERED (a syscall per
    record would be slow): the commands flush it after each batch."""
    global _STDOUT
    if _STDOUT is None:
        _STDOUT = open(sys.stdout.fileno(), "wb", buffering=1 << 16, closefd=False)  # noqa: SIM115
    return _STDOUT


def warn(message: str) -> None:
    sys.stderr.write(f"roost: {message}\n")
    sys.stderr.flush()
