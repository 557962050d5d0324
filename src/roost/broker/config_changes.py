"""A topic's new set of config overrides from an AlterConfigs or IncrementalAlterConfigs request,
checked with the rules CreateTopics uses (`parse_topic_configs`).

AlterConfigs replaces the topic's whole set of overrides (what it does not name goes back to the
broker's default); IncrementalAlterConfigs changes the named ones: SET, DELETE (back to the
default), and APPEND / SUBTRACT on list-typed configs. A refusal carries Kafka's error code.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from roost.config import FIXED_TOPIC_CONFIGS, TOPIC_SETTINGS, ConfigError, parse_topic_configs
from roost.wire.kafka.errors import ErrorCode

OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3
# Kafka's LIST-typed topic configs that Roost has (the others, such as
# leader.replication.throttled.replicas, are not topic configs here).
LIST_CONFIGS = frozenset({"cleanup.policy"})


class RefusedChange(Exception):
    """The change is refused: `code` is the error the client gets, `message` says why."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def render(value: Any) -> str:
    """A typed config value as Kafka writes it (ZooKeeper, DescribeConfigs)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _known(name: str, topic: str) -> None:
    if name not in TOPIC_SETTINGS and name not in FIXED_TOPIC_CONFIGS:
        raise RefusedChange(ErrorCode.INVALID_CONFIG, f"unknown topic config name '{name}' (topic '{topic}')")


def _no_duplicates(names: list[str], topic: str) -> None:
    doubled = sorted({name for name in names if names.count(name) > 1})
    if doubled:
        raise RefusedChange(ErrorCode.INVALID_REQUEST, f"config keys named twice for topic '{topic}': {doubled}")


def _checked(raw: Mapping[str, str | None], topic: str) -> dict[str, Any]:
    try:
        return parse_topic_configs(raw, f"topic '{topic}'")
    except ConfigError as error:
        raise RefusedChange(ErrorCode.INVALID_CONFIG, str(error)) from None


def replaced_overrides(topic: str, entries: Iterable[tuple[str, str | None]]) -> dict[str, Any]:
    """AlterConfigs: the entries become the topic's overrides (a null value: that config's
    default, as Kafka drops null entries)."""
    pairs = list(entries)
    _no_duplicates([name for name, _ in pairs], topic)
    for name, _ in pairs:
        _known(name, topic)
    return _checked(dict(pairs), topic)


def incremental_overrides(topic: str, current: Mapping[str, Any], defaults: Mapping[str, Any],
                          operations: Iterable[tuple[str, int, str | None]]) -> dict[str, Any]:
    """IncrementalAlterConfigs: `current` overrides with each (name, operation, value) applied in
    order; `defaults` give a list config's value to APPEND to or SUBTRACT from when the topic does
    not override it."""
    ops = list(operations)
    _no_duplicates([name for name, _, _ in ops], topic)
    raw: dict[str, str | None] = {name: render(value) for name, value in current.items()}
    for name, operation, value in ops:
        _known(name, topic)
        if operation == OP_SET:
            if value is None:
                raise RefusedChange(ErrorCode.INVALID_REQUEST, f"SET of '{name}' without a value")
            raw[name] = value
        elif operation == OP_DELETE:
            raw.pop(name, None)
        elif operation in (OP_APPEND, OP_SUBTRACT):
            if name not in LIST_CONFIGS:
                verb = "append" if operation == OP_APPEND else "subtract"
                raise RefusedChange(ErrorCode.INVALID_CONFIG,
                                    f"config value {verb} is not allowed for config key '{name}': not a list")
            base = raw.get(name) or render(defaults[name])
            items = [item.strip() for item in base.split(",") if item.strip()]
            given = [item.strip() for item in (value or "").split(",") if item.strip()]
            if operation == OP_APPEND:
                items += [item for item in dict.fromkeys(given) if item not in items]
            else:
                items = [item for item in items if item not in given]
            raw[name] = ",".join(items)
        else:
            raise RefusedChange(ErrorCode.INVALID_REQUEST, f"unknown config operation {operation} for '{name}'")
    return _checked(raw, topic)
