"""Prometheus metrics of a real `roost keeper --metrics-port 0`, scraped over HTTP while kazoo
creates znodes, ephemerals and watches: ZooKeeper's Prometheus provider names (no prefix), and
values that move by exactly what the client did."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.keeper.zkharness import kazoo, keeper_config, unique_root
from tests.support.procs import RoostProcess, free_ports, start_roost, wait_for
from tests.support.scrape import Samples, names, scrape, value

KEEPER_SERIES = {
    "znode_count", "watch_count", "ephemerals_count", "approximate_data_size", "outstanding_requests",
    "num_alive_connections", "global_sessions", "local_sessions", "packets_received", "packets_sent",
    "avg_latency", "min_latency", "max_latency", "uptime", "open_file_descriptor_count", "quorum_size",
}


@pytest.fixture(scope="module")
def keeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RoostProcess]:
    config = keeper_config(tmp_path_factory.mktemp("metrics-keeper"))
    proc = start_roost(["keeper", "--config", str(config), "--metrics-port", "0"], expect=("keeper", "keeper metrics"))
    yield proc
    proc.stop()


def test_keeper_series_follow_znodes_watches_and_sessions(keeper: RoostProcess) -> None:
    metrics = keeper.address("keeper metrics")
    before = scrape(metrics)
    assert names(before) >= KEEPER_SERIES, KEEPER_SERIES - names(before)
    assert not any(name.startswith("kafka_") for name in names(before))
    assert value(before, "quorum_size") == 1
    assert "learners" not in names(before)  # leader-only, and a standalone keeper leads no one
    client = kazoo(keeper.address("keeper"))
    try:
        root = unique_root("metrics")
        client.create(root, b"r")
        for i in range(5):
            client.create(f"{root}/n{i}", b"x" * 100)
        client.create(f"{root}/e", b"", ephemeral=True)
        for i in range(3):
            client.get(f"{root}/n{i}", watch=lambda event: None)
        client.exists(f"{root}/n4", watch=lambda event: None)
        during = scrape(metrics)
        assert value(during, "znode_count") == value(before, "znode_count") + 7
        assert value(during, "ephemerals_count") == value(before, "ephemerals_count") + 1
        assert value(during, "watch_count") == value(before, "watch_count") + 4
        assert value(during, "global_sessions") == value(before, "global_sessions") + 1
        assert value(during, "num_alive_connections") == value(before, "num_alive_connections") + 1
        assert value(during, "approximate_data_size") >= value(before, "approximate_data_size") + 500
        assert value(during, "packets_received") > value(before, "packets_received")
    finally:
        client.stop()
        client.close()
    # The session closed: its ephemeral and its watches go.
    def once_closed() -> Samples | None:
        samples = scrape(metrics)
        return samples if value(samples, "global_sessions") == value(before, "global_sessions") else None

    after = wait_for(once_closed, what="the session to close")
    assert value(after, "ephemerals_count") == value(before, "ephemerals_count")
    assert value(after, "watch_count") == value(before, "watch_count")


def test_roost_keeper_serves_no_metrics_unless_asked(tmp_path: Path) -> None:
    proc = start_roost(["keeper", "--config", str(keeper_config(tmp_path / "k"))], expect=("keeper",))
    try:
        assert "keeper metrics" not in proc.listeners
    finally:
        proc.stop()
    assert "metrics listening" not in proc.text()


def test_zookeepers_metrics_provider_settings_work_in_the_config_file(tmp_path: Path) -> None:
    config = keeper_config(tmp_path / "k", extra={
        "metricsProvider.className": "org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider",
        "metricsProvider.httpPort": 0})
    proc = start_roost(["keeper", "--config", str(config)], expect=("keeper", "keeper metrics"))
    try:
        assert value(scrape(proc.address("keeper metrics")), "quorum_size") == 1
    finally:
        proc.stop()


def test_in_an_ensemble_only_the_leader_reports_its_followers(tmp_path: Path) -> None:
    ports = dict(zip((1, 2, 3), free_ports(3), strict=True))
    procs: list[RoostProcess] = []
    try:
        for sid in ports:
            config = keeper_config(tmp_path / f"k{sid}", servers=ports, myid=sid)
            procs.append(start_roost(["keeper", "--config", str(config), "--metrics-port", "0"],
                                     expect=("keeper", "keeper metrics")))

        def settled() -> list[Samples] | None:
            scraped = [scrape(proc.address("keeper metrics")) for proc in procs]
            leaders = [s for s in scraped if "learners" in names(s)]
            if len(leaders) == 1 and value(leaders[0], "synced_followers") == 2:
                return scraped
            return None

        scraped = wait_for(settled, timeout=60, what="a leader with two synced followers")
        assert [value(s, "quorum_size") for s in scraped] == [3, 3, 3]
        (leader,) = [s for s in scraped if "learners" in names(s)]
        assert value(leader, "learners") == 2
    finally:
        for proc in procs:
            proc.stop()
