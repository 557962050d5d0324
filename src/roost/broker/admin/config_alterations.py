"""The new set of dynamic configs of a topic or of the brokers from an AlterConfigs or
IncrementalAlterConfigs request, checked with the rules that already apply to them (CreateTopics'
`parse_topic_configs`; the broker settings' own checks).

AlterConfigs replaces the resource's whole set (what it does not name goes back to the default);
IncrementalAlterConfigs changes the named ones: SET, DELETE (back to the default), and APPEND /
SUBTRACT on list-typed configs. A refusal carries Kafka's error code.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from roost.config import (
    DYNAMIC_BROKER_SETTINGS,
    SETTINGS_BY_NAME,
    TOPIC_SETTINGS,
    ConfigError,
    NotDynamicError,
    parse_dynamic_broker_configs,
    parse_topic_configs,
)
from roost.wire.kafka.errors import ErrorCode

OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3


class RefusedChange(Exception):
    """The change is refused: `code` is the error the client gets, `message` says why."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class ConfigRules:
    """What a kind of resource accepts: `parse` checks a whole set of raw values (ConfigError);
    `lists` are the LIST-typed names (APPEND and SUBTRACT apply to them only)."""

    what: str
    known: Callable[[str], bool]
    parse: Callable[[Mapping[str, str | None], str], dict[str, Any]]
    lists: frozenset[str]
    # Kafka configs Roost does not have, whose DELETE is a no-op (nothing can have set them) and
    # whose SET is refused with a reason: the replication throttles.
    absent: Mapping[str, str] = field(default_factory=dict)


# Kafka configs Roost does not have (none today: the replication throttles of KIP-73 are real
# since issue 33, roost.broker.replica.throttle).
ABSENT_BROKER_CONFIGS: Mapping[str, str] = {}
ABSENT_TOPIC_CONFIGS: Mapping[str, str] = {}


def topic_rules(topic: str) -> ConfigRules:
    # Kafka's LIST-typed topic configs that Roost has.
    return ConfigRules(f"topic '{topic}'", lambda name: name in TOPIC_SETTINGS,
                       parse_topic_configs, frozenset({"cleanup.policy"}), ABSENT_TOPIC_CONFIGS)


def broker_rules(entity: str) -> ConfigRules:
    return ConfigRules(entity, lambda name: name in SETTINGS_BY_NAME, parse_dynamic_broker_configs,
                       frozenset({"log.cleanup.policy"}) & DYNAMIC_BROKER_SETTINGS, ABSENT_BROKER_CONFIGS)


def render(value: Any) -> str:
    """A typed config value as Kafka writes it (ZooKeeper, DescribeConfigs)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _known(rules: ConfigRules, name: str) -> None:
    if name in rules.absent:
        raise RefusedChange(ErrorCode.INVALID_CONFIG, f"config '{name}' ({rules.what}): {rules.absent[name]}")
    if not rules.known(name):
        raise RefusedChange(ErrorCode.INVALID_CONFIG, f"unknown config name '{name}' ({rules.what})")


def _no_duplicates(rules: ConfigRules, names: list[str]) -> None:
    doubled = sorted({name for name in names if names.count(name) > 1})
    if doubled:
        raise RefusedChange(ErrorCode.INVALID_REQUEST, f"config keys named twice for {rules.what}: {doubled}")


def _checked(rules: ConfigRules, raw: Mapping[str, str | None]) -> dict[str, Any]:
    try:
        return rules.parse(raw, rules.what)
    except NotDynamicError as error:  # Kafka: InvalidRequestException for a read-only config
        raise RefusedChange(ErrorCode.INVALID_REQUEST, str(error)) from None
    except ConfigError as error:
        raise RefusedChange(ErrorCode.INVALID_CONFIG, str(error)) from None


def replaced_overrides(rules: ConfigRules, entries: Iterable[tuple[str, str | None]]) -> dict[str, Any]:
    """AlterConfigs: the entries become the resource's dynamic configs (a null value: that
    config's default, as Kafka drops null entries)."""
    pairs = list(entries)
    _no_duplicates(rules, [name for name, _ in pairs])
    for name, _ in pairs:
        _known(rules, name)
    return _checked(rules, dict(pairs))


def incremental_overrides(rules: ConfigRules, current: Mapping[str, Any], defaults: Mapping[str, Any],
                          operations: Iterable[tuple[str, int, str | None]]) -> dict[str, Any]:
    """IncrementalAlterConfigs: `current` with each (name, operation, value) applied in order;
    `defaults` give a list config's value to APPEND to or SUBTRACT from when `current` lacks it."""
    ops = list(operations)
    _no_duplicates(rules, [name for name, _, _ in ops])
    raw: dict[str, str | None] = {name: render(value) for name, value in current.items()}
    for name, operation, value in ops:
        if operation == OP_DELETE and name in rules.absent:
            continue  # never set, so already deleted
        _known(rules, name)
        if operation == OP_SET:
            if value is None:
                raise RefusedChange(ErrorCode.INVALID_REQUEST, f"SET of '{name}' without a value")
            raw[name] = value
        elif operation == OP_DELETE:
            raw.pop(name, None)
        elif operation in (OP_APPEND, OP_SUBTRACT):
            if name not in rules.lists:
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
    return _checked(rules, raw)
