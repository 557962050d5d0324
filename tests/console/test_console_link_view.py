"""The link pages' pure part (roost.console.link_view): settings shown with secrets hidden, the
brokers' published status read (torn or foreign znodes skipped), each partition's state, the
link's worst state, promoted topics, totals; and the names it shares with the broker."""

from __future__ import annotations

import json

import pytest

from roost.broker.link import settings as broker_settings
from roost.broker.link.configs import MIRROR_LINK_CONFIG
from roost.broker.link.core import LinkState
from roost.console import links_side
from roost.console.link_view import (
    LINK_STATES,
    LINKS_PATH,
    SECRETS,
    STATUS_PATH,
    LinkDataError,
    broker_status,
    link_rows,
    link_settings,
    link_state,
    link_summary,
)


def entry(topic: str, partition: int, **extra: object) -> dict[str, object]:
    return {"topic": topic, "partition": partition, "source_high_watermark": 30, "mirrored_end": 25,
            "lag_records": 5, "lag_ms": 1200, "error": None, "failed": False, **extra}


def test_the_names_are_the_brokers():
    assert (LINKS_PATH, STATUS_PATH, SECRETS) == (broker_settings.LINKS_PATH, broker_settings.STATUS_PATH,
                                                  broker_settings.SECRETS)
    assert links_side.MIRROR_LINK_CONFIG == MIRROR_LINK_CONFIG
    assert set(LINK_STATES) == {state.value for state in LinkState}


def test_settings_are_shown_with_their_secrets_hidden():
    made = broker_settings.LinkSettings.parse("eu", {"bootstrap.servers": "eu1:9092", "security.protocol": "SASL_SSL",
                                                    "sasl.username": "link", "sasl.password": "s3cret"})
    shown = link_settings("eu", made.encode())
    assert shown["sasl.password"] == "(hidden)" and "s3cret" not in json.dumps(shown)
    assert shown["bootstrap.servers"] == "eu1:9092" and shown["sasl.username"] == "link"
    with pytest.raises(LinkDataError):
        link_settings("eu", b"not json")
    with pytest.raises(LinkDataError):
        link_settings("eu", b'{"config": [1]}')


def test_a_status_that_is_not_one_is_skipped():
    assert broker_status(b"\xff") is None
    assert broker_status(b"[1, 2]") is None
    assert broker_status(b'{"partitions": 3}') is None
    assert broker_status(b'{"state": "ACTIVE", "partitions": []}') == {"state": "ACTIVE", "partitions": []}


def test_the_link_state_is_the_worst_its_brokers_report():
    assert link_state([{"state": "ACTIVE"}, {"state": "SOURCE_UNAVAILABLE"}]) == "SOURCE_UNAVAILABLE"
    assert link_state([{"state": "FAILED"}, {"state": "SOURCE_UNAVAILABLE"}]) == "FAILED"
    assert link_state([]) == "NO_BROKER_REPORTING"


def test_partition_states_unknown_figures_and_promoted_topics():
    statuses = [
        {"broker": 1, "state": "FAILED", "error": None, "partitions": [
            entry("orders", 0), entry("orders", 1, error="TOPIC_AUTHORIZATION_FAILED", failed=True),
            entry("orders", 2, error="timed out", lag_records=-1, lag_ms=-1, source_high_watermark=-1)]},
        {"broker": 2, "state": "PAUSED", "error": None, "partitions": [entry("audit", 0)]},
    ]
    rows = link_rows(statuses, {"payments": 2, "orders": 3})
    states = {(r["topic"], r["partition"]): r["state"] for r in rows}
    assert states == {("audit", 0): "paused", ("orders", 0): "mirroring", ("orders", 1): "failed",
                      ("orders", 2): "retrying", ("payments", 0): "promoted", ("payments", 1): "promoted"}
    retrying = next(r for r in rows if r["partition"] == 2)
    assert (retrying["lag_records"], retrying["lag_ms"], retrying["source_high_watermark"]) == (None, None, None)
    summary = link_summary("eu", {"bootstrap.servers": "eu1:9092"}, statuses, {"payments": 2})
    assert summary["state"] == "FAILED" and summary["source"] == "eu1:9092"
    assert summary["lag_records"] == 15 and summary["max_lag_ms"] == 1200  # orders 0, 1 and audit 0
    assert summary["topics"] == ["audit", "orders", "payments"]
    assert [e["error"] for e in summary["errors"]] == ["orders[1]: TOPIC_AUTHORIZATION_FAILED", "orders[2]: timed out"]


def test_a_link_level_error_is_shown_with_its_broker():
    statuses = [{"broker": 3, "state": "SOURCE_UNAVAILABLE", "error": "cannot reach 127.0.0.1:1", "partitions": []}]
    summary = link_summary("x", {"bootstrap.servers": "127.0.0.1:1"}, statuses, {})
    assert summary["errors"] == [{"broker": 3, "error": "cannot reach 127.0.0.1:1"}]
    assert summary["lag_records"] is None and summary["partitions"] == []


def test_without_a_keeper_the_pages_say_how_to_get_one():
    from roost.console.errors import ConsoleError

    with pytest.raises(ConsoleError) as refused:
        links_side.LinksSide(None, None).links()  # type: ignore[arg-type]
    assert refused.value.status == 404 and "--zookeeper" in refused.value.message
