"""`roost up` settings: TOML and flags with Kafka's names, refused with a message naming the
setting when wrong; settings take effect; the connection cap holds."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from tests.broker.conftest import StartBroker
from tests.support.kafka_wire import WireClient
from tests.support.procs import ROOST, retry

API_VERSIONS = 18


def run_up(*args: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ROOST, "up", "--data-dir", str(tmp_path / "d"), "--kafka-port", "0", "--keeper-port", "0", *args],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(("args", "named"), [
    (["--num.partitions", "zero"], "num.partitions"),
    (["--num-partitions", "0"], "num.partitions"),
    (["--log.retention.ms", "-7"], "log.retention.ms"),
    (["--auto.create.topics.enable", "maybe"], "auto.create.topics.enable"),
    (["--log.cleanup.policy", "shred"], "log.cleanup.policy"),
])
def test_bad_flag_is_refused_naming_the_setting(tmp_path: Path, args: list[str], named: str) -> None:
    result = run_up(*args, tmp_path=tmp_path)
    assert result.returncode == 2
    assert f"'{named}'" in result.stderr
    assert "listening" not in result.stdout


def test_bad_toml_is_refused_naming_the_setting(tmp_path: Path) -> None:
    config = tmp_path / "roost.toml"
    config.write_text('num.partitions = 3\nlog.segment.bytes = "big"\n')
    result = run_up("--config", str(config), tmp_path=tmp_path)
    assert result.returncode == 2 and "'log.segment.bytes'" in result.stderr

    config.write_text("no.such.setting = 1\n")
    result = run_up("--config", str(config), tmp_path=tmp_path)
    assert result.returncode == 2 and "unknown setting 'no.such.setting'" in result.stderr

    config.write_text("num.partitions = = 3\n")
    result = run_up("--config", str(config), tmp_path=tmp_path)
    assert result.returncode == 2 and "not valid TOML" in result.stderr

    result = run_up("--config", str(tmp_path / "missing.toml"), tmp_path=tmp_path)
    assert result.returncode == 2 and "does not exist" in result.stderr


def test_bad_port_is_refused(tmp_path: Path) -> None:
    result = subprocess.run([*ROOST, "up", "--kafka-port", "70000"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "port must be between 0 and 65535" in result.stderr


def test_toml_settings_take_effect_and_flags_override(start_broker: StartBroker, tmp_path: Path) -> None:
    config = tmp_path / "roost.toml"
    config.write_text("num.partitions = 4\n\n[log]\nretention.ms = 123456\n")
    broker = start_broker("--config", str(config), "--log.segment.bytes", "1048576")
    admin = AdminClient({"bootstrap.servers": broker.address("kafka")})
    metadata = admin.list_topics("auto-made", timeout=30)  # auto-created by the Metadata request
    assert len(metadata.topics["auto-made"].partitions) == 4
    from confluent_kafka.admin import ConfigResource
    described = next(iter(admin.describe_configs([ConfigResource("topic", "auto-made")]).values())).result(30)
    assert described["retention.ms"].value == "123456"
    assert described["segment.bytes"].value == "1048576"


def test_connection_cap(start_broker: StartBroker) -> None:
    broker = start_broker("--max.connections", "2")
    address = broker.address("kafka")
    body = {"client_software_name": "t", "client_software_version": "1"}
    first, second = WireClient(address), WireClient(address)
    try:
        assert first.request(API_VERSIONS, 3, body)["error_code"] == 0
        assert second.request(API_VERSIONS, 3, body)["error_code"] == 0
        third = WireClient(address)
        assert third.is_closed_by_peer(), "a connection past max.connections was kept"
        third.close()
        second.close()
        # Once one goes, a new client gets in again (the broker counted the close). The broker may
        # see the new connection before the close, and refuse it: try again, but never give up
        # silently.
        def admitted() -> WireClient:
            client = WireClient(address)
            try:
                assert client.request(API_VERSIONS, 3, body)["error_code"] == 0
            except BaseException:
                client.close()
                raise
            return client

        fourth = retry(admitted, retry_on=(ConnectionError,), what="a new client after one closed")
        fourth.close()
        assert "max.connections reached" in broker.text()
    finally:
        first.close()


def test_roost_up_hosts_a_keeper_beside_the_broker(start_broker: StartBroker, tmp_path: Path) -> None:
    from kazoo.client import KazooClient

    config = tmp_path / "roost.toml"
    config.write_text("num.partitions = 2\n\n[keeper]\ntickTime = 500\n")
    node = start_broker("--config", str(config))
    assert "keeper" in node.listeners and "kafka" in node.listeners
    zk = KazooClient(hosts=node.address("keeper"), timeout=30)
    zk.start(30)
    try:
        zk.create("/roost-up/hello", b"world", makepath=True)
        assert zk.get("/roost-up/hello")[0] == b"world"
    finally:
        zk.stop()
        zk.close()
    node.stop()
    again = start_broker("--config", str(config))
    zk = KazooClient(hosts=again.address("keeper"), timeout=30)
    zk.start(30)
    try:
        assert zk.get("/roost-up/hello")[0] == b"world", "the embedded keeper's data survives a restart"
    finally:
        zk.stop()
        zk.close()


def test_bad_keeper_setting_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "roost.toml"
    config.write_text("[keeper]\ntickTime = -5\n")
    result = run_up("--config", str(config), tmp_path=tmp_path)
    assert result.returncode == 2 and "tickTime" in result.stderr
