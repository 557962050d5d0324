"""The new set of a topic's overrides that AlterConfigs and IncrementalAlterConfigs make, and the
error codes of refused changes (the rules themselves are CreateTopics': roost.config)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from roost.broker.admin.config_alterations import (
    OP_APPEND,
    OP_DELETE,
    OP_SET,
    OP_SUBTRACT,
    RefusedChange,
    incremental_overrides,
    replaced_overrides,
    topic_rules,
)
from roost.config import BrokerConfig
from roost.wire.kafka.errors import ErrorCode

DEFAULTS = BrokerConfig.build([]).topic_defaults()
RULES = topic_rules("t")


def refusal(action: Callable[[], object]) -> RefusedChange:
    with pytest.raises(RefusedChange) as caught:
        action()
    return caught.value


def test_set_and_delete_keep_what_they_do_not_name() -> None:
    current = {"retention.ms": 1000, "segment.bytes": 4096}
    new = incremental_overrides(RULES, current, DEFAULTS, [("retention.ms", OP_SET, "2000"),
                                                         ("segment.bytes", OP_DELETE, None),
                                                         ("flush.ms", OP_DELETE, None)])
    assert new == {"retention.ms": 2000}
    assert current == {"retention.ms": 1000, "segment.bytes": 4096}  # not changed in place


def test_append_and_subtract_on_a_list_start_from_the_default() -> None:
    appended = incremental_overrides(RULES, {}, DEFAULTS, [("cleanup.policy", OP_APPEND, "compact")])
    assert appended == {"cleanup.policy": "delete,compact"}
    again = incremental_overrides(RULES, appended, DEFAULTS, [("cleanup.policy", OP_APPEND, "compact,delete")])
    assert again == appended
    assert incremental_overrides(RULES, appended, DEFAULTS, [("cleanup.policy", OP_SUBTRACT, "delete")]) == \
        {"cleanup.policy": "compact"}
    emptied = refusal(lambda: incremental_overrides(RULES, {}, DEFAULTS, [("cleanup.policy", OP_SUBTRACT, "delete")]))
    assert emptied.code == ErrorCode.INVALID_CONFIG  # an empty policy is not one of the allowed values


@pytest.mark.parametrize(("change", "code"), [
    (("no.such.config", OP_SET, "1"), ErrorCode.INVALID_CONFIG),
    (("no.such.config", OP_DELETE, None), ErrorCode.INVALID_CONFIG),
    (("retention.ms", OP_SET, "soon"), ErrorCode.INVALID_CONFIG),
    (("retention.ms", OP_SET, "-2"), ErrorCode.INVALID_CONFIG),
    (("retention.ms", OP_APPEND, "1"), ErrorCode.INVALID_CONFIG),
    (("compression.type", OP_SET, "brotli"), ErrorCode.INVALID_CONFIG),
    (("retention.ms", OP_SET, None), ErrorCode.INVALID_REQUEST),
    (("retention.ms", 7, "1"), ErrorCode.INVALID_REQUEST),
])
def test_refused_incremental_changes(change: tuple[str, int, str | None], code: ErrorCode) -> None:
    assert refusal(lambda: incremental_overrides(RULES, {}, DEFAULTS, [change])).code == code


def test_a_config_named_twice_is_an_invalid_request() -> None:
    doubled = [("retention.ms", OP_SET, "1"), ("retention.ms", OP_DELETE, None)]
    assert refusal(lambda: incremental_overrides(RULES, {}, DEFAULTS, doubled)).code == ErrorCode.INVALID_REQUEST
    legacy = [("retention.ms", "1"), ("retention.ms", "2")]
    assert refusal(lambda: replaced_overrides(RULES, legacy)).code == ErrorCode.INVALID_REQUEST


def test_alter_configs_replaces_and_drops_nulls() -> None:
    assert replaced_overrides(RULES, [("retention.ms", "5000"), ("segment.ms", None),
                                    ("compression.type", "producer")]) == {"retention.ms": 5000,
                                                                           "compression.type": "producer"}
    assert replaced_overrides(RULES, []) == {}
    assert refusal(lambda: replaced_overrides(RULES, [("segment.bytes", "10")])).code == ErrorCode.INVALID_CONFIG
    assert refusal(lambda: replaced_overrides(RULES, [("nope", "1")])).code == ErrorCode.INVALID_CONFIG
