"""The cluster settings and the checks of `roost broker` and `roost up --brokers`: a bad setting is
refused with a message naming it and exit status 2, before any process starts."""

from __future__ import annotations

import socket
import subprocess
import tomllib
from pathlib import Path

import pytest

from roost.cli.main import main
from roost.cli.servers.supervisor import relabel
from roost.config import BrokerConfig, ConfigError
from tests.support.procs import ROOST, start_roost


def build(**settings: object) -> BrokerConfig:
    return BrokerConfig.build([("test", {name.replace("_", "."): value for name, value in settings.items()})])


def test_cluster_defaults_are_the_fast_failover_ones() -> None:
    config = BrokerConfig.build([])
    assert config["zookeeper.connect"] == ""
    assert config["zookeeper.session.timeout.ms"] == 4000  # scripts/pause_run.py: no election for 1.5 s pauses
    assert config["replica.lag.time.max.ms"] == 10000
    assert config["replica.fetch.wait.max.ms"] == 500
    assert config["offsets.topic.replication.factor"] == 1
    assert config["unclean.leader.election.enable"] is False
    assert config["controlled.shutdown.enable"] is True
    assert config.topic_defaults()["unclean.leader.election.enable"] is False


def test_replica_lag_must_exceed_the_session_timeout() -> None:
    with pytest.raises(ConfigError, match=r"'replica.lag.time.max.ms' = 4000 must exceed "
                                          r"'zookeeper.session.timeout.ms' = 4000"):
        BrokerConfig.build([("f", {"replica.lag.time.max.ms": 4000})])
    with pytest.raises(ConfigError, match=r"'replica\.lag\.time\.max\.ms' = 10000 must exceed"):
        BrokerConfig.build([("f", {"zookeeper.session.timeout.ms": 12000})])
    assert BrokerConfig.build([("f", {"zookeeper.session.timeout.ms": 6000})])["replica.lag.time.max.ms"] == 10000


def test_replica_fetch_wait_must_stay_below_the_lag_limit() -> None:
    with pytest.raises(ConfigError, match=r"'replica\.fetch\.wait\.max\.ms' = 10000 must be below"):
        BrokerConfig.build([("f", {"replica.fetch.wait.max.ms": 10000})])


@pytest.mark.parametrize(("name", "value", "complaint"), [
    ("zookeeper.connect", "zk1:notaport", "host:port"),
    ("listeners", "PLAINTEXT://h:1,PLAINTEXT://h:2", "twice"),
    ("listeners", "PLAIN TEXT://h:9093", "NAME://host:port"),
    ("listeners", "A://h:9093,B://h:9093", "same port"),
    ("listener.security.protocol.map", "A:TLS", "NAME:PROTOCOL"),
    ("log.dirs", "/a,,/b", "none empty"),
    ("log.dirs", "/a,/a", "twice"),
    ("log.dir", "/a,/b", "one directory"),
    ("leader.imbalance.per.broker.percentage", 101, "between 0 and 100"),
    ("offsets.commit.required.acks", 0, "-1 or >= 1"),
    ("controlled.shutdown.enable", "sometimes", "expects bool"),
])
def test_bad_cluster_values_are_refused_naming_the_setting(name: str, value: object, complaint: str) -> None:
    with pytest.raises(ConfigError, match=f"setting '{name}'") as raised:
        BrokerConfig.build([("f", {name: value})])
    assert complaint in str(raised.value)


def test_listeners_may_pick_a_free_port_but_not_advertise_the_wildcard() -> None:
    assert build(listeners="PLAINTEXT://127.0.0.1:0")["listeners"] == "PLAINTEXT://127.0.0.1:0"
    with pytest.raises(ConfigError, match=r"'advertised\.listeners' is required"):
        build(listeners="PLAINTEXT://0.0.0.0:9092")
    ok = BrokerConfig.build([("f", {"listeners": "PLAINTEXT://0.0.0.0:9092",
                                    "advertised.listeners": "PLAINTEXT://kafka1.example.com:9092"})])
    assert ok["advertised.listeners"] == "PLAINTEXT://kafka1.example.com:9092"


def test_unclean_election_is_a_topic_config_too() -> None:
    from roost.config import parse_topic_configs
    assert parse_topic_configs({"unclean.leader.election.enable": "true"}, "t") == \
        {"unclean.leader.election.enable": True}


# ------------------------------------------------------------------------------ roost broker


def run_main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    status = main(argv)
    return status, capsys.readouterr().err


def test_roost_broker_exits_2_naming_a_bad_setting(tmp_path: Path) -> None:
    """Through the real entry point: the status and the message a user sees."""
    config = tmp_path / "broker.toml"
    config.write_text('broker.id = 1\nzookeeper.connect = "127.0.0.1:2181"\n'
                      f'log.dirs = "{tmp_path / "logs"}"\nreplica.lag.time.max.ms = 1500\n')
    result = subprocess.run([*ROOST, "broker", "--config", str(config)], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 2
    assert "roost broker: setting 'replica.lag.time.max.ms' = 1500 must exceed" in result.stderr
    assert "listening" not in result.stdout
    assert not (tmp_path / "logs").exists()


@pytest.mark.parametrize(("args", "message"), [
    (["--set", "no.such.setting=1"], "--set: unknown setting 'no.such.setting'"),
    (["--set", "broker.id"], "expected NAME=VALUE"),
    (["--broker.id", "-3"], "setting 'broker.id' = '-3' must be >= 0"),
    (["--set", "zookeeper.session.timeout.ms=soon"], "setting 'zookeeper.session.timeout.ms' expects int"),
    (["--set", "listeners=PLAINTEXT://127.0.0.1"], "setting 'listeners'"),
])
def test_roost_broker_refuses_bad_settings(args: list[str], message: str, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    base = ["broker", "--set", "zookeeper.connect=127.0.0.1:2181", "--set", f"log.dirs={tmp_path}"]
    status, err = run_main([*base, *args], capsys)
    assert status == 2
    assert message in err


def test_roost_broker_requires_zookeeper_connect_and_log_dirs(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    status, err = run_main(["broker", "--set", f"log.dirs={tmp_path}"], capsys)
    assert status == 2 and "setting 'zookeeper.connect' is required" in err
    status, err = run_main(["broker", "--set", "zookeeper.connect=127.0.0.1:2181"], capsys)
    assert status == 2 and "setting 'log.dirs' is required" in err


def test_settings_layers_file_then_set_then_flags(tmp_path: Path) -> None:
    from roost.cli.main import build_parser
    from roost.cli.servers.broker_command import cluster_member_config
    config = tmp_path / "broker.toml"
    config.write_text('zookeeper.connect = "zk1:2181"\nlog.dirs = "/data"\nbroker.id = 1\nbroker.rack = "a"\n'
                      "[replica.fetch]\nbackoff.ms = 50\n")
    args = build_parser().parse_args(["broker", "--config", str(config), "--set", "broker.id=2",
                                      "--set", "broker.rack=b", "--broker.rack", "c"])
    built = cluster_member_config(args)
    assert (built["broker.id"], built["broker.rack"], built["replica.fetch.backoff.ms"]) == (2, "c", 50)


# ------------------------------------------------------------------------- roost up --brokers


@pytest.mark.parametrize(("args", "message"), [
    (["--keepers", "3"], "--keepers needs --brokers N"),
    (["--zookeeper", "127.0.0.1:2181"], "--zookeeper needs --brokers N"),
    (["--brokers", "2", "--keepers", "2"], "--keepers 2: an ensemble has 1, 3, 5 or 7 members"),
    (["--brokers", "2", "--keepers", "3", "--zookeeper", "127.0.0.1:2181"], "exclude each other"),
    (["--brokers", "2", "--zookeeper", "127.0.0.1:port"], "--zookeeper '127.0.0.1:port'"),
    (["--brokers", "2", "--no-keeper"], "give --zookeeper"),
    (["--brokers", "2", "--set", "broker.id=4"], "setting 'broker.id' is chosen per broker"),
    (["--brokers", "2", "--log.dirs", "/x"], "setting 'log.dirs' is chosen per broker"),
    (["--brokers", "2", "--zookeeper.connect", "127.0.0.1:2181"], "give --zookeeper HOST:PORT"),
    (["--brokers", "2", "--listeners", "PLAINTEXT://127.0.0.1:0"], "setting 'listeners' is chosen per broker"),
    (["--brokers", "2", "--offsets.topic.replication.factor", "3"],
     "'offsets.topic.replication.factor' = 3 needs at least 3 brokers; --brokers is 2"),
    (["--brokers", "1", "--schema.registry.kafkastore.topic.replication.factor", "2"],
     "'schema.registry.kafkastore.topic.replication.factor' = 2 needs at least 2 brokers; --brokers is 1"),
    (["--brokers", "2", "--replica.lag.time.max.ms", "100"], "'replica.lag.time.max.ms' = 100 must exceed"),
    (["--brokers", "1", "--bogus.setting", "1"], "unrecognized arguments: --bogus.setting 1"),  # argparse
])
def test_roost_up_cluster_refusals(args: list[str], message: str, tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["up", "--data-dir", str(tmp_path / "d"), *args]
    status, err = run_main(argv, capsys)
    assert status == 2
    assert message in err
    assert not (tmp_path / "d").exists()  # refused before anything was written or started


def _taken_after_a_free_port() -> socket.socket:
    """A listening socket whose port's predecessor is free: broker 1 asks port - 1, broker 2 the
    taken port, and another process on the machine may hold port - 1 (bounded retries)."""
    for _attempt in range(50):
        taken = socket.socket()
        taken.bind(("127.0.0.1", 0))
        if _is_free(taken.getsockname()[1] - 1):
            taken.listen()
            return taken
        taken.close()
    raise AssertionError("no ephemeral port with a free predecessor in 50 tries")


def _is_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def test_a_given_port_in_use_is_refused_before_anything_starts(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    with _taken_after_a_free_port() as taken:
        port = taken.getsockname()[1]
        status, err = run_main(["up", "--brokers", "2", "--kafka-port", str(port - 1), "--data-dir",
                                str(tmp_path / "d")], capsys)
    assert status == 2 and f"cannot listen on 127.0.0.1:{port}" in err
    assert not (tmp_path / "d").exists()


def test_keeper_settings_that_are_per_member_are_refused(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "roost.toml"
    config.write_text("[keeper]\nclientPort = 2181\n")
    status, err = run_main(["up", "--brokers", "1", "--config", str(config), "--data-dir", str(tmp_path / "d")],
                           capsys)
    assert status == 2 and "keeper setting 'clientPort' is chosen per keeper" in err
    config.write_text('[keeper]\ntickTime = "often"\n')
    status, err = run_main(["up", "--brokers", "1", "--config", str(config), "--data-dir", str(tmp_path / "d")],
                           capsys)
    assert status == 2 and "keeper setting 'tickTime': must be an integer, got 'often'" in err
    config.write_text("[keeper]\ntickTime = -5\n")
    status, err = run_main(["up", "--brokers", "1", "--config", str(config), "--data-dir", str(tmp_path / "d")],
                           capsys)
    assert status == 2 and "keeper 1: setting 'tickTime'" in err


def test_plan_gives_each_broker_its_own_settings_and_shares_the_users(tmp_path: Path) -> None:
    from roost.cli.main import build_parser
    from roost.cli.servers import cluster_plan as cluster
    from roost.cli.servers.node_runner import given_settings
    args = build_parser().parse_args(["up", "--brokers", "4", "--data-dir", str(tmp_path), "--kafka-port", "19092",
                                      "--set", "num.partitions=6", "--default.replication.factor", "2",
                                      "--zookeeper.session.timeout.ms", "15000", "--replica.lag.time.max.ms", "20000"])
    plan = cluster.plan_from_args(args, given_settings(args))
    assert [k.ident for k in plan.keepers] == [1, 2, 3]
    assert {k.config["server"]["2"] for k in plan.keepers} == {plan.keepers[0].config["server"]["2"]}
    assert all(k.config["tickTime"] == 500 and k.config["maxSessionTimeout"] == 15000 for k in plan.keepers)
    assert len({k.address for k in plan.keepers}) == 3
    assert [b.address[1] for b in plan.brokers] == [19092, 19093, 19094, 19095]
    plan.write_configs()
    broker3 = tomllib.loads(plan.brokers[2].config_path.read_text())
    assert broker3 == {
        "broker.id": 3, "listeners": "PLAINTEXT://127.0.0.1:19094", "log.dirs": str(tmp_path / "broker-3"),
        "zookeeper.connect": plan.zookeeper_connect, "num.partitions": 6, "default.replication.factor": 2,
        "offsets.topic.replication.factor": 3, "transaction.state.log.replication.factor": 3,
        "schema.registry.kafkastore.topic.replication.factor": 3,  # the registry's _schemas, min(3, N) too
        "zookeeper.session.timeout.ms": 15000,
        "replica.lag.time.max.ms": 20000,
        "balancer.mode": "continuous"}  # a local cluster balances itself (docs/balancing.md)
    assert plan.zookeeper_connect == ",".join(f"127.0.0.1:{k.address[1]}" for k in plan.keepers)


def test_relabel_names_each_childs_lines() -> None:
    assert relabel("roost: keeper listening on 127.0.0.1:5", "keeper", 2) == "roost: keeper 2 listening on 127.0.0.1:5"
    assert relabel("roost: keeper stopped", "keeper", 2) == "roost: keeper 2 stopped"
    assert relabel("roost: broker 1 kafka listening on 127.0.0.1:5", "broker", 1) == \
        "roost: broker 1 kafka listening on 127.0.0.1:5"
    assert relabel("something else", "broker", 3) == "roost: broker 3: something else"


def test_plain_up_binds_listeners_and_keeps_data_in_log_dirs(tmp_path: Path) -> None:
    """`listeners` and `log.dirs` work for the single-process default too, over --kafka-port and
    --data-dir."""
    proc = start_roost(["up", "--data-dir", str(tmp_path / "node"), "--kafka-port", "1",
                        "--set", "listeners=PLAINTEXT://127.0.0.1:0", "--log.dirs", str(tmp_path / "logs")],
                       expect=("keeper", "kafka"))
    try:
        assert proc.port("kafka") not in (0, 1)
    finally:
        assert proc.stop() == 0
    assert proc.text().rstrip().endswith("roost: stopped")
    assert (tmp_path / "logs" / "meta").is_dir()
    assert (tmp_path / "node" / "keeper").is_dir() and not (tmp_path / "node" / "meta").exists()


def test_the_data_directory_is_the_first_log_dir_or_log_dir(tmp_path: Path) -> None:
    from roost.cli.servers.node_runner import log_directory
    from roost.storage.directories import configured_log_dirs

    first, second = tmp_path / "a", tmp_path / "b"
    several = BrokerConfig.build([("f", {"log.dirs": f"{first}, {second}"})])
    assert log_directory(several, None) == first
    assert configured_log_dirs(several, first) == [first, second]
    one = BrokerConfig.build([("f", {"log.dir": str(second)})])
    assert log_directory(one, tmp_path / "default") == second
    assert configured_log_dirs(one, second) == [second]
    # roost up: --data-dir when neither is set.
    assert log_directory(BrokerConfig.build([]), tmp_path / "default") == tmp_path / "default"
