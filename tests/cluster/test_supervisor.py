"""`roost up --brokers N`: keepers and brokers as supervised child processes, and `roost broker` on
its own. Real processes, real clients (kazoo, confluent-kafka); every process started is stopped.

Replication itself is not tested here; this is about starting, naming, reporting and stopping.
"""

from __future__ import annotations

import os
import signal
import socket
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from tests.keeper.zkharness import (
    four_letter,
    kazoo,
    keeper_process,
    zookeeper_available,
    zookeeper_standalone,
)
from tests.support import referees
from tests.support.procs import RoostProcess, process_alive, start_roost, wait_for

KEEPERS = ("keeper 1", "keeper 2", "keeper 3")
BROKERS = ("broker 1 kafka", "broker 2 kafka")


def children_of(pid: int) -> dict[int, str]:
    """The live child processes of `pid`: pid -> command line."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue  # exited meanwhile
        # The command name (field 2) is in parentheses and may hold spaces: split after it.
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            found[int(entry.name)] = cmdline
    return found


def pid_of(supervisor: RoostProcess, name: str) -> int:
    """The pid of the child `name` ("broker-2", "keeper-1") of a `roost up --brokers` process."""
    matches = [pid for pid, cmdline in children_of(supervisor.popen.pid).items() if f"/{name}.toml " in cmdline]
    assert len(matches) == 1, (name, children_of(supervisor.popen.pid))
    return matches[0]


def answers_kafka(address: str) -> bool:
    admin = AdminClient({"bootstrap.servers": address, "socket.timeout.ms": 10000})
    metadata = admin.list_topics(timeout=10)
    return len(metadata.brokers) >= 1


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RoostProcess, Path]]:
    data_dir = tmp_path_factory.mktemp("cluster")
    proc = start_roost(["up", "--brokers", "2", "--keepers", "3", "--data-dir", str(data_dir)],
                       expect=KEEPERS + BROKERS)
    try:
        yield proc, data_dir
    finally:
        proc.stop()


def test_every_listener_line_is_printed_and_each_listens(cluster: tuple[RoostProcess, Path]) -> None:
    proc, data_dir = cluster
    assert set(proc.listeners) == set(KEEPERS + BROKERS)
    assert len({port for _, port in proc.listeners.values()}) == 5
    for name in KEEPERS + BROKERS:
        with socket.create_connection(proc.listeners[name], timeout=10):
            pass
    wait_for(lambda: "roost: cluster ready" in proc.text(), 30, what="the ready line")
    text = proc.text()
    assert f"each one's log goes to {data_dir}/<name>.log" in text
    # Keepers first: the brokers' config needs the ensemble's addresses.
    assert max(text.index(f"roost: {k} listening") for k in KEEPERS) < \
        min(text.index(f"roost: {b} listening") for b in BROKERS)
    for name in ("keeper-1", "keeper-2", "keeper-3", "broker-1", "broker-2"):
        assert (data_dir / f"{name}.log").stat().st_size > 0  # each child's stderr went to its log


def test_brokers_get_their_settings_and_answer_kafka_clients(cluster: tuple[RoostProcess, Path]) -> None:
    proc, data_dir = cluster
    keepers = ",".join(proc.address(k) for k in KEEPERS)
    for broker_id in (1, 2):
        settings = tomllib.loads((data_dir / f"broker-{broker_id}.toml").read_text())
        assert settings["broker.id"] == broker_id
        assert settings["zookeeper.connect"] == keepers
        assert settings["log.dirs"] == str(data_dir / f"broker-{broker_id}")
        assert settings["listeners"] == f"PLAINTEXT://{proc.address(f'broker {broker_id} kafka')}"
        assert settings["offsets.topic.replication.factor"] == settings["default.replication.factor"] == 2
        assert (data_dir / f"broker-{broker_id}" / "meta").is_dir()  # the broker keeps its data there
        assert answers_kafka(proc.address(f"broker {broker_id} kafka"))


def test_keepers_form_one_ensemble(cluster: tuple[RoostProcess, Path]) -> None:
    proc, _ = cluster
    first, second = kazoo(proc.address("keeper 1")), kazoo(proc.address("keeper 3"))
    try:
        path = f"/supervisor-test-{os.getpid()}"
        first.create(path, b"written through keeper 1")
        second.sync(path)  # keeper 3 catches up with the leader before it answers the read
        assert second.get(path)[0] == b"written through keeper 1"
        first.delete(path)
    finally:
        first.stop()
        second.stop()
    modes = [four_letter(proc.address(k), "srvr") for k in KEEPERS]
    assert sum("Mode: leader" in mode for mode in modes) == 1, modes
    assert sum("Mode: follower" in mode for mode in modes) == 2, modes


def test_a_killed_child_is_reported_and_the_rest_keep_running(cluster: tuple[RoostProcess, Path]) -> None:
    proc, _ = cluster
    victim = pid_of(proc, "broker-2")
    os.kill(victim, signal.SIGKILL)
    wait_for(lambda: "roost: broker 2 exited with status -9" in proc.text(), 30, what="the exit report")
    assert proc.popen.poll() is None
    for name in ("keeper-1", "keeper-2", "keeper-3", "broker-1"):
        assert process_alive(pid_of(proc, name))
    assert answers_kafka(proc.address("broker 1 kafka"))


def test_sigterm_stops_every_child_brokers_first(cluster: tuple[RoostProcess, Path]) -> None:
    """Runs last in this module: it stops the shared cluster."""
    proc, _ = cluster
    pids = children_of(proc.popen.pid)
    assert len(pids) >= 4  # broker 2 may be gone (killed by the test before)
    assert proc.stop(signal.SIGTERM) == 0
    assert not [pid for pid in pids if process_alive(pid)]
    text = proc.text()
    assert text.rstrip().endswith("roost: stopped")
    assert "roost: broker 1 stopped" in text
    last_broker = text.index("roost: broker 1 stopped")
    assert all(text.index(f"roost: {k} stopped") > last_broker for k in KEEPERS)
    assert "did not stop" not in text  # nobody needed SIGKILL


def test_roost_broker_runs_and_stops_cleanly(tmp_path: Path) -> None:
    """One `roost broker` on its own, with a keeper for zookeeper.connect and port 0 in listeners."""
    with keeper_process(tmp_path / "keeper") as keeper:
        config = tmp_path / "broker.toml"
        config.write_text(f'broker.id = 7\nzookeeper.connect = "{keeper.address("keeper")}"\n'
                          'listeners = "PLAINTEXT://127.0.0.1:0"\n'
                          f'log.dirs = "{tmp_path / "logs"}"\nbroker.rack = "r1"\n')
        broker = start_roost(["broker", "--config", str(config)], expect=("broker 7 kafka",))
        try:
            assert broker.port("broker 7 kafka") != 0
            assert answers_kafka(broker.address("broker 7 kafka"))
        finally:
            status = broker.stop(signal.SIGTERM)
        assert status == 0
        assert "roost: broker 7 stopped" in broker.text()
        assert (tmp_path / "logs" / "meta").is_dir()


def test_a_child_that_cannot_start_stops_the_rest(tmp_path: Path) -> None:
    (tmp_path / "broker-1").write_text("a file where broker 1's log directory should be")
    proc = start_roost(["up", "--brokers", "1", "--data-dir", str(tmp_path)], expect=("keeper 1",))
    try:
        status = proc.popen.wait(60)
    finally:
        proc.stop()
    assert status == 1
    text = proc.text()
    assert "roost: broker 1 exited with status 1 before listening" in text
    assert f"cannot use the data directory {tmp_path / 'broker-1'}" in text  # its log's tail, printed
    assert "roost: keeper 1 stopped" in text
    assert text.rstrip().endswith("roost: stopped")
    assert not children_of(proc.popen.pid)


def test_with_zookeeper_no_keeper_starts_and_ctrl_c_stops_all(tmp_path: Path) -> None:
    """--zookeeper with a real Apache ZooKeeper; stopped as a terminal's Ctrl-C does: SIGINT to
    the supervisor's whole process group (the children are in groups of their own)."""
    if not zookeeper_available():
        referees.skip(referees.ZOOKEEPER)
    with zookeeper_standalone(tmp_path / "zk") as zookeeper:
        proc = start_roost(["up", "--brokers", "2", "--zookeeper", zookeeper.address, "--data-dir",
                            str(tmp_path / "cluster")], expect=BROKERS, new_session=True)
        try:
            children = children_of(proc.popen.pid)
            assert len(children) == 2 and all(" broker " in cmdline for cmdline in children.values())
            assert not any(name.startswith("keeper") for name in proc.listeners)
            settings = tomllib.loads((tmp_path / "cluster" / "broker-2.toml").read_text())
            assert settings["zookeeper.connect"] == zookeeper.address
            os.killpg(proc.popen.pid, signal.SIGINT)
            assert proc.popen.wait(60) == 0
        finally:
            proc.stop()
        assert not [pid for pid in children if process_alive(pid)]
        text = proc.text()
        assert "roost: broker 1 stopped" in text and "roost: broker 2 stopped" in text
        assert "roost: keeper" not in text
