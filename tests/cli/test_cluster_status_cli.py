"""`roost cluster status` run as a process: against a single `roost up` (healthy, a keeper address
that is down, no brokers at all), and against a cluster of 2 brokers and 3 keepers that loses a
broker and a keeper. What it reports is checked against Metadata read by another client."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import NewTopic

from tests.cli.kafka_cli import assert_one_line_error, dead_address, run_cli, run_json, start_module_broker
from tests.support.cluster import LocalCluster
from tests.support.procs import ROOST, RoostProcess, wait_for


@pytest.fixture(scope="module")
def single(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RoostProcess]:
    yield from start_module_broker(tmp_path_factory)


def status(*args: str, env: dict[str, str] | None = None) -> tuple[int, dict]:
    done = run_cli("cluster", "status", *args, "--format", "json", env=env)
    assert done.returncode in (0, 2), done.stderr
    return done.returncode, json.loads(done.stdout)


def test_a_single_node_is_healthy(single: RoostProcess) -> None:
    code, report = status("-b", single.address("kafka"), "--zookeeper", single.address("keeper"))
    assert code == 0, report["problems"]
    (summary,) = report["summary"]
    assert summary["healthy"] is True and summary["brokers"] == 1
    (broker,) = report["brokers"]
    assert broker["address"] == single.address("kafka") and summary["controller"] == broker["id"]
    assert report["partitions"] == [] and report["problems"] == []
    assert [(k["address"], k["role"]) for k in report["keepers"]] == [(single.address("keeper"), "standalone")]

    text = run_cli("cluster", "status", "-b", single.address("kafka"), "--zookeeper", single.address("keeper"))
    assert text.returncode == 0 and "standalone" in text.stdout


def test_the_keeper_address_comes_from_the_environment(single: RoostProcess) -> None:
    code, report = status("-b", single.address("kafka"), env={"ROOST_ZOOKEEPER": single.address("keeper")})
    assert code == 0 and [k["role"] for k in report["keepers"]] == ["standalone"]


def test_a_keeper_member_that_is_down_makes_it_unhealthy(single: RoostProcess) -> None:
    down = dead_address()
    code, report = status("-b", single.address("kafka"), "--zookeeper", f"{single.address('keeper')},{down}")
    assert code == 2
    roles = {k["address"]: k["role"] for k in report["keepers"]}
    assert roles == {single.address("keeper"): "standalone", down: "down"}
    assert report["problems"] == [{"problem": f"keeper {down} is down"}]


def test_no_reachable_broker_is_a_one_line_error() -> None:
    done = run_cli("cluster", "status", "-b", dead_address(), "--zookeeper", dead_address(), "--timeout", "1",
                   timeout=30)
    assert_one_line_error(done, "cannot reach the cluster")
    assert done.returncode == 1


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    started = LocalCluster.start(tmp_path, brokers=2, keepers=3)
    yield started
    started.close()


def test_a_cluster_losing_a_broker_and_a_keeper_is_unhealthy(cluster: LocalCluster) -> None:
    admin = cluster.admin()
    for future in admin.create_topics([NewTopic("replicated", 2, 2),
                                       NewTopic("lonely", 1, replica_assignment=[[2]])]).values():
        future.result(30)
    cluster.wait_for_isr("replicated")
    cluster.wait_for_isr("lonely")

    code, report = status("-b", cluster.bootstrap, "--zookeeper", cluster.zookeeper)
    assert code == 0, report["problems"]
    assert sorted(b["id"] for b in report["brokers"]) == [1, 2]
    assert sorted(k["role"] for k in report["keepers"]) == ["follower", "follower", "leader"]

    cluster.kill(2)

    def unhealthy_report() -> dict | None:
        done = run_cli("cluster", "status", "-b", cluster.running_bootstrap(), "--zookeeper", cluster.zookeeper,
                       "--format", "json")
        if done.returncode != 2:
            return None
        found = json.loads(done.stdout)
        return found if len(found["partitions"]) == 3 and len(found["brokers"]) == 1 else None

    report = wait_for(unhealthy_report, timeout=60, interval=0.5, what="status to show broker 2 gone")
    unhealthy = {(p["topic"], p["partition"]): (p["leader"], p["problem"]) for p in report["partitions"]}
    assert unhealthy[("replicated", 0)] == unhealthy[("replicated", 1)] == (1, "under-replicated")
    assert unhealthy[("lonely", 0)][0] == -1 and "offline" in unhealthy[("lonely", 0)][1]
    # The same facts, from Metadata read by another client (which may reach a broker that learns
    # them a moment later: ask until one answer shows them).
    wait_for(lambda: {p: (leader, isr) for p, (leader, _, isr) in cluster.partitions("replicated").items()} == {
        0: (1, [1]), 1: (1, [1])} and cluster.partitions("lonely")[0][0] == -1, 30, interval=0.2,
        what="Metadata to show the same facts")

    # The topic commands' health filters see the same partitions.
    bootstrap = cluster.running_bootstrap()
    assert [t["name"] for t in run_json("topic", "list", "--offline", "-b", bootstrap)] == ["lonely"]
    assert "replicated" in [t["name"] for t in run_json("topic", "list", "--under-replicated", "-b", bootstrap)]
    described = run_json("topic", "describe", "replicated", "--under-replicated", "-b", bootstrap)
    assert [(p["partition"], p["isr"]) for p in described["partitions"]] == [(0, [1]), (1, [1])]
    # An offline partition is described (its offsets unknown), not an error.
    lonely = run_json("topic", "describe", "lonely", "--offline", "-b", bootstrap, "--timeout", "3")
    assert [(p["partition"], p["leader"], p["log_end_offset"]) for p in lonely["partitions"]] == [(0, -1, None)]
    problems = {p["problem"] for p in report["problems"]}
    assert {"1 offline partition(s)", "2 under-replicated partition(s)", "replica broker(s) not live: 2"} <= problems

    # A follower keeper stopped (a follower: the ensemble keeps its leader and needs no election).
    roles = {k["address"]: k["role"] for k in report["keepers"]}
    lost_keeper = next(k for k in cluster.keepers.values() if roles[k.address] == "follower")
    assert lost_keeper.process is not None
    lost_keeper.process.stop()
    code, report = status("-b", cluster.running_bootstrap(), "--zookeeper", cluster.zookeeper)
    assert code == 2
    roles = {k["address"]: k["role"] for k in report["keepers"]}
    assert roles[lost_keeper.address] == "down"
    assert sorted(r for a, r in roles.items() if a != lost_keeper.address) == ["follower", "leader"]
    assert f"keeper {lost_keeper.address} is down" in {p["problem"] for p in report["problems"]}




def test_the_keepers_come_from_the_brokers_zookeeper_connect_on_any_ports(single: RoostProcess) -> None:
    """A node on free ports (not 9092, not 2181), asked with nothing but -b: the keeper's address
    is the brokers' zookeeper.connect, read with DescribeConfigs, so the node is healthy."""
    assert single.port("keeper") != 2181
    env = {k: v for k, v in os.environ.items() if k not in ("ROOST_ZOOKEEPER", "ROOST_PROFILE")}
    done = subprocess.run([*ROOST, "cluster", "status", "-b", single.address("kafka"), "--format", "json"],
                          capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert [(k["address"], k["role"]) for k in report["keepers"]] == [(single.address("keeper"), "standalone")]
    assert report["summary"][0]["healthy"] is True


def test_server_is_an_alias_of_the_ensemble_option(single: RoostProcess) -> None:
    down = dead_address()
    code, report = status("-b", single.address("kafka"), "--server", down)
    assert code == 2 and [(k["address"], k["role"]) for k in report["keepers"]] == [(down, "down")]
