"""Roost's own librdkafka clients refresh metadata every second unless told otherwise, so that a
leader whose machine is cut off (no RST) is left soon after new leaders are named
(`bench/cut_failover_bench.py` measures it; docs/cluster.md, "A cut-off machine")."""

from __future__ import annotations

from roost.admin.target import Target
from roost.cli.records.record_io import client_config
from roost.client_settings import FAILOVER_SETTINGS
from roost.spark.kafka_io import consumer_config
from roost.spark.sink_io import producer_config
from roost.testing.clients import KafkaHelpers

SETTING = "topic.metadata.refresh.interval.ms"


class _Helpers(KafkaHelpers):
    bootstrap = "127.0.0.1:9092"


def test_every_roost_client_refreshes_metadata_every_second_by_default() -> None:
    assert FAILOVER_SETTINGS[SETTING] == 1000
    configs = {
        "roost produce/consume": client_config(Target("127.0.0.1:9092"), {}),
        "spark source": consumer_config({}),
        "spark sink": producer_config({}),
        "pytest plugin": _Helpers().client_config(),
    }
    assert {name: config.get(SETTING) for name, config in configs.items()} == dict.fromkeys(configs, 1000)


def test_the_users_settings_override_the_default() -> None:
    assert client_config(Target("127.0.0.1:9092", {SETTING: "60000"}), {})[SETTING] == "60000"
    assert consumer_config({SETTING: "60000"})[SETTING] == "60000"
    assert producer_config({SETTING: "60000"})[SETTING] == "60000"
    assert _Helpers().client_config({SETTING: 60000})[SETTING] == 60000
