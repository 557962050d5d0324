"""`roost keeper` (config, start, SIGTERM, restart durability), `roost zk`, and the embedded
keeper helper that `roost up` uses."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from roost.keeper.acl import OPEN_ACL_UNSAFE
from roost.keeper.config import ConfigError, KeeperConfig
from roost.keeper.embedded import start_embedded_keeper
from roost.wire.zk.constants import Err
from roost.wire.zk.records import CreateRequest
from tests.keeper.zkharness import RawClient, kazoo, keeper_config, keeper_process, unique_root
from tests.support.procs import ROOST, start_roost


def test_config_reads_zookeeper_names_and_the_ensemble(tmp_path: Path) -> None:
    path = tmp_path / "keeper.toml"
    path.write_text(
        'tickTime = 500\ndataDir = "data"\nclientPort = 0\nclientPortAddress = "127.0.0.1"\n'
        'jute.maxbuffer = 4096\n"4lw.commands.whitelist" = "ruok, srvr"\nmyid = 2\nsnapCount = 50\n'
        'server.1 = "10.0.0.1:2888"\nserver.2 = "10.0.0.2:2888:3888;2181"\nserver.3 = "h3:2888"\n'
    )
    config = KeeperConfig.load(path)
    assert config.data_dir == tmp_path / "data"
    assert (config.tick_time, config.min_session_timeout, config.max_session_timeout) == (500, 1000, 10000)
    assert config.jute_max_buffer == 4096
    assert config.four_letter_whitelist == frozenset({"ruok", "srvr"})
    assert {sid: (p.host, p.port) for sid, p in config.servers.items()} == {
        1: ("10.0.0.1", 2888), 2: ("10.0.0.2", 2888), 3: ("h3", 2888)}
    assert config.is_ensemble and config.myid == 2
    assert config.snap_count == 50
    assert KeeperConfig.from_mapping({"dataDir": "d"}).snap_count == 20_000


@pytest.mark.parametrize(("settings", "named"), [
    ({"tickTime": 0}, "tickTime"),
    ({"tickTime": "fast"}, "tickTime"),
    ({"clientPort": 70000}, "clientPort"),
    ({"minSessionTimeout": 9000, "maxSessionTimeout": 8000}, "minSessionTimeout"),
    ({"maxClientCnxns": -1}, "maxClientCnxns"),
    ({"jute.maxbuffer": 10}, "jute.maxbuffer"),
    ({"myid": 0}, "myid"),
    ({"forceSync": "maybe"}, "forceSync"),
    ({"tickTme": 100}, "tickTme"),
    ({"server": {"1": "nohost"}}, "server.1"),
    ({"server": {"1": "a:1", "2": "b:1"}}, "server"),
    ({"myid": 4, "server": {"1": "a:1", "2": "b:1", "3": "c:1"}}, "myid"),
    ({"4lw.commands.whitelist": "ruok,toolong"}, "4lw.commands.whitelist"),
    ({"snapCount": 0}, "snapCount"),
    ({"superDigest": "super:not-a-hash"}, "superDigest"),
    ({"sasl": {"users": {"bob": "${env:ROOST_TEST_SURELY_UNSET_VARIABLE}"}}}, "sasl.users.bob"),
    ({"sasl": {"users": {"bob": "${file:/nonexistent/bob.password}"}}}, "sasl.users.bob"),
    ({"sasl": {"users": {"bob": ""}}}, "sasl.users.bob"),
    ({"sasl": {"people": {}}}, "sasl"),
    ({"ssl.keyStore.location": "/etc/hosts"}, "ssl.keyStore.location"),  # no secureClientPort
    ({"secureClientPort": 2281}, "ssl.keyStore.location"),
    ({"secureClientPort": 2281, "ssl.keyStore.location": "/nonexistent.pem"}, "ssl.keyStore.location"),
    ({"secureClientPort": 2281, "ssl.keyStore.location": "/etc/hosts", "ssl.clientAuth": "maybe"},
     "ssl.clientAuth"),
    ({"secureClientPort": 2281, "ssl.keyStore.location": "/etc/hosts", "ssl.keyStore.type": "JKS"},
     "ssl.keyStore.type"),
    ({"secureClientPort": 2281, "ssl.keyStore.location": "/etc/hosts", "ssl.protocol": "TLSv1"},
     "ssl.protocol"),
    ({"sslQuorum": True, "ssl.quorum.keyStore.location": "/etc/hosts", "ssl.quorum.clientAuth": "none"},
     "ssl.quorum.clientAuth"),
])
def test_invalid_settings_are_refused_by_name(settings: dict, named: str) -> None:
    with pytest.raises(ConfigError, match=f"'{named}'"):
        KeeperConfig.from_mapping({"dataDir": "/tmp/x", **settings})
    with pytest.raises(ConfigError, match="'dataDir'"):
        KeeperConfig.from_mapping({})


def test_roost_keeper_refuses_a_bad_config_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('dataDir = "d"\nmaxSessionTimeout = "long"\n')
    result = subprocess.run([*ROOST, "keeper", "--config", str(path)], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 2
    assert "maxSessionTimeout" in result.stderr


def test_keeper_stops_on_sigterm_and_keeps_its_data_across_restarts(tmp_path: Path) -> None:
    config = keeper_config(tmp_path / "k")
    root = unique_root("durable")
    proc = start_roost(["keeper", "--config", str(config)], expect=("keeper",))
    try:
        client = kazoo(proc.address("keeper"))
        client.create(root, b"kept")
        client.create(f"{root}/child", b"c")
        client.stop()
        client.close()
    finally:
        assert proc.stop(signal.SIGTERM) == 0
    assert "roost: keeper stopped" in proc.text()
    proc = start_roost(["keeper", "--config", str(config)], expect=("keeper",))
    try:
        client = kazoo(proc.address("keeper"))
        assert client.get(root)[0] == b"kept"
        assert client.get_children(root) == ["child"]
        client.set(root, b"after restart")
        client.stop()
        client.close()
    finally:
        proc.kill9()
    proc = start_roost(["keeper", "--config", str(config)], expect=("keeper",))
    try:
        client = kazoo(proc.address("keeper"))
        assert client.get(root)[0] == b"after restart"  # acknowledged before the kill -9
        client.stop()
        client.close()
    finally:
        assert proc.stop(signal.SIGINT) == 0


def test_the_first_client_right_after_start_is_served(tmp_path: Path) -> None:
    # Regression: the replicator's first leadership news (after start) once made the keeper give
    # up on the first batch, closing the first client's connection.
    for attempt in range(3):
        with keeper_process(tmp_path / f"fresh{attempt}") as proc:
            raw = RawClient(proc.address("keeper"))
            try:
                created = raw.request(CreateRequest("/first", b"", list(OPEN_ACL_UNSAFE), 0))
                assert created.err == Err.OK
            finally:
                raw.abandon()


def _zk(address: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ROOST, "zk", "--server", address, *args], capture_output=True, text=True,
                          timeout=timeout)


def test_roost_zk_shell(keeper: str) -> None:
    root = unique_root("shell")
    assert _zk(keeper, "create", root, "hello").stdout == f"Created {root}\n"
    assert _zk(keeper, "get", root).stdout == "hello\n"
    assert _zk(keeper, "set", "-v", "0", root, "world").returncode == 0
    stale = _zk(keeper, "set", "-v", "0", root, "x")
    assert stale.returncode == 1 and stale.stderr == f"roost: version No is not valid : {root}\n"
    sequential = _zk(keeper, "create", "-s", f"{root}/item-", "v").stdout.strip()
    assert sequential == f"Created {root}/item-0000000000"
    assert _zk(keeper, "create", "-e", f"{root}/eph").returncode == 0
    assert _zk(keeper, "ls", root).stdout == "[item-0000000000]\n"  # the ephemeral went with its session
    stat = dict(line.split(" = ") for line in _zk(keeper, "stat", root).stdout.splitlines())
    assert stat["dataVersion"] == "1" and stat["numChildren"] == "1"
    missing = _zk(keeper, "get", f"{root}/missing")
    assert missing.returncode == 1 and missing.stderr == f"roost: Node does not exist: {root}/missing\n"
    assert _zk(keeper, "delete", root).returncode == 1
    assert _zk(keeper, "deleteall", root).returncode == 0
    assert _zk(keeper, "stat", root).returncode == 1


def test_roost_zk_watch_prints_events(keeper: str) -> None:
    root = unique_root("watch")
    client = kazoo(keeper)
    try:
        client.create(root, b"v0")
        watcher = subprocess.Popen([*ROOST, "zk", "--server", keeper, "watch", root, "--events", "4",
                                    "--timeout", "120"], stdout=subprocess.PIPE, text=True)
        try:
            assert watcher.stdout is not None
            assert watcher.stdout.readline().strip() == f"data {root} v0"
            assert watcher.stdout.readline().strip() == f"children {root}"
            client.set(root, b"v1")
            assert watcher.stdout.readline().strip() == f"changed {root} v1"
            client.create(f"{root}/kid")
            assert watcher.stdout.readline().strip() == f"children changed {root} kid"
            # One change at a time: the watcher re-registers its child watch before it prints, so
            # reading its line first means the next change cannot slip in between (a recursive
            # delete could remove the node before the re-registration and lose the event).
            client.delete(f"{root}/kid")
            assert watcher.stdout.readline().strip() == f"children changed {root}"
            client.delete(root)
            rest = watcher.communicate(timeout=60)[0]
            assert rest.splitlines() == [f"deleted {root}"]
            assert watcher.returncode == 0
        finally:
            if watcher.poll() is None:
                watcher.kill()
                watcher.wait(10)
    finally:
        client.stop()
        client.close()


def test_embedded_keeper(tmp_path: Path) -> None:
    async def scenario() -> None:
        handle = await start_embedded_keeper(tmp_path / "embedded", "127.0.0.1", 0, {"tickTime": 500})
        try:
            host, port = handle.address
            assert host == "127.0.0.1" and port > 0

            def use() -> bytes:
                client = kazoo(f"{host}:{port}")
                try:
                    client.create("/embedded", b"yes")
                    return client.get("/embedded")[0]
                finally:
                    client.stop()
                    client.close()

            assert await asyncio.to_thread(use) == b"yes"
        finally:
            await handle.close()
        with pytest.raises(ConfigError, match="tickTime"):
            await start_embedded_keeper(tmp_path / "bad", "127.0.0.1", 0, {"tickTime": -1})

    asyncio.run(scenario())


def test_help_lists_the_keeper_commands() -> None:
    result = subprocess.run([sys.executable, "-m", "roost.cli.main", "zk", "--help"], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0
    for word in ("ls", "get", "set", "create", "delete", "stat", "watch"):
        assert word in result.stdout


def test_secrets_are_never_echoed_in_errors(tmp_path: Path) -> None:
    from roost.config import BrokerConfig
    from roost.config import ConfigError as BrokerConfigError

    with pytest.raises(BrokerConfigError) as refused:
        BrokerConfig.build([("file", {"zookeeper.digest": "no-colon-secret-here"})])
    assert "no-colon-secret-here" not in str(refused.value) and "zookeeper.digest" in str(refused.value)
    with pytest.raises(BrokerConfigError, match="go together"):
        BrokerConfig.build([("file", {"zookeeper.sasl.client.username": "kafka"})])
    with pytest.raises(BrokerConfigError, match="needs an identity for the brokers"):
        BrokerConfig.build([("file", {"zookeeper.set.acl": True})])
    with pytest.raises(BrokerConfigError, match="ROOST_TEST_SURELY_UNSET_VARIABLE"):
        BrokerConfig.build([("file", {"zookeeper.sasl.client.username": "kafka",
                                      "zookeeper.sasl.client.password": "${env:ROOST_TEST_SURELY_UNSET_VARIABLE}"})])
    secret = tmp_path / "pw"
    secret.write_text("from-a-file\n")
    config = BrokerConfig.build([("file", {"zookeeper.set.acl": True, "zookeeper.sasl.client.username": "kafka",
                                           "zookeeper.sasl.client.password": f"${{file:{secret}}}"})])
    from roost.broker.zk.security import zk_client_options

    options = zk_client_options(config)
    assert options["sasl"].password == "from-a-file" and "from-a-file" not in repr(options["sasl"])
