"""The reference pages are generated from the code (scripts/docs_reference.py), so a setting,
command, metric or API cannot be missing from them; these tests hold that each one also says
what it is: a setting, command or metric without a description fails here, before it reaches
the site."""

from __future__ import annotations

import pytest

from roost.config import BROKER_SETTINGS
from roost.keeper import config as keeper_config
from tests.docs.reference import ROOT, load

docs_reference = load()


def test_every_broker_setting_has_a_description() -> None:
    rows = docs_reference.broker_settings()
    assert [row[0] for row in rows] == [s.name for s in BROKER_SETTINGS]
    undescribed = [name for name, _kind, _default, _topic, meaning in rows if len(meaning.strip()) < 10]
    assert not undescribed, f"broker settings without a description: {undescribed}"


def test_every_keeper_setting_the_loader_accepts_is_described() -> None:
    described = set(keeper_config.SETTINGS_HELP) - {"server.N"}
    assert described == set(keeper_config._KNOWN), "keeper settings accepted and described differ"
    rows = docs_reference.keeper_settings()
    assert not [name for name, _default, meaning in rows if len(meaning.strip()) < 10]
    # The defaults are read from a KeeperConfig, so they are the loader's.
    defaults = {name: default for name, default, _meaning in rows}
    assert defaults["tickTime"] == "2000" and defaults["clientPort"] == "2181" and defaults["forceSync"] == "true"


def test_every_command_has_a_description_and_its_help() -> None:
    helps = docs_reference.commands()
    paths = {item.path for item in helps}
    for expected in ("roost up", "roost broker", "roost keeper", "roost topic create", "roost produce",
                     "roost consume", "roost group seek", "roost cluster status", "roost zk get", "roost console"):
        assert expected in paths
    undescribed = [item.path for item in helps if not item.summary.strip()]
    assert not undescribed, f"commands without a description: {undescribed}"
    for item in helps:
        assert "usage:" in item.text.lower(), f"{item.path}: no usage in its help"
    # The servers' argparse help comes through the click group: their settings flags are there.
    up = next(item for item in helps if item.path == "roost up")
    assert "--kafka-port" in up.text and "--brokers" in up.text


def test_every_metric_has_a_type_and_a_description() -> None:
    found = docs_reference.metrics()
    names = {item.name for item in found}
    for expected in ("kafka_server_brokertopicmetrics_messagesin_total", "kafka_network_requestmetrics_totaltimems",
                     "kafka_consumergroup_lag", "kafka_brokers", "znode_count", "learners"):
        assert expected in names
    undescribed = [item.name for item in found if len(item.help.strip()) < 5]
    assert not undescribed, f"metrics without a description: {undescribed}"
    assert {item.kind for item in found} <= {"counter", "gauge", "summary"}
    labels = {item.name: item.labels for item in found}
    assert labels["kafka_network_requestmetrics_totaltimems"] == ("request", "quantile")
    assert labels["kafka_consumergroup_lag"] == ("consumergroup", "topic", "partition")


def test_the_apis_page_lists_what_a_broker_advertises() -> None:
    from roost.broker.net.dispatcher import ADVERTISED_VERSIONS
    rows = {name: (low, high) for name, _key, low, high, _who in docs_reference.kafka_apis()}
    assert len(rows) >= len(ADVERTISED_VERSIONS)
    assert rows["Fetch"] == ADVERTISED_VERSIONS[next(k for k in ADVERTISED_VERSIONS if k.name == "FETCH")]


@pytest.mark.parametrize("page", ["security.md", "acls.md", "fault-testing.md"])
def test_a_pending_page_is_in_the_navigation_only_once_its_file_exists(page: str) -> None:
    config = {"docs_dir": str(ROOT / "docs"), "extra": {"pending_pages": [page]},
              "nav": [{"Home": "index.md"}, {"Guides": [{"It": page}, {"Other": "cli.md"}]}]}
    pruned = docs_reference.on_config(dict(config))["nav"]
    if (ROOT / "docs" / page).exists():
        assert pruned == config["nav"]
    else:
        assert pruned == [{"Home": "index.md"}, {"Guides": [{"Other": "cli.md"}]}]
