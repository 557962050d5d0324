"""`roost up --security sasl_ssl` (through the pytest plugin's RoostNode) and `roost user`:
the node prints how to connect without the password, the plugin's clients reach it, and SCRAM
users made with `roost user create` log in."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from roost.testing.node import RoostNode

USER, PASSWORD = "frank", "frank-secret-99"


@pytest.fixture(scope="module")
def dev_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RoostNode]:
    node = RoostNode.start(tmp_path_factory.mktemp("dev-secured"), security="sasl_ssl")
    try:
        yield node
    finally:
        node.stop()


def roost(node: RoostNode, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    flags = [item for key, value in node.security_settings.items() for item in ("-X", f"{key}={value}")]
    return subprocess.run([sys.executable, "-m", "roost.cli.main", *args, "-b", node.bootstrap, *flags],
                          input=stdin, capture_output=True, text=True, timeout=60)


def test_the_node_says_how_to_connect_and_never_the_password(dev_node: RoostNode) -> None:
    assert dev_node.process is not None and dev_node.data_dir is not None
    password = (dev_node.data_dir / "security" / "admin.password").read_text().strip()
    text = dev_node.process.log_text()
    assert "roost: security sasl_ssl:" in text and "password in" in text
    assert f"kcat -F {dev_node.data_dir / 'security' / 'client.properties'}" in text
    assert password not in text
    assert password not in "".join(p.read_text() for p in Path(dev_node.data_dir).glob("*.toml"))


def test_the_plugin_clients_produce_and_consume(dev_node: RoostNode) -> None:
    dev_node.create_topic("dev-secured")
    dev_node.produce("dev-secured", [b"a", b"b"])
    assert [m.value for m in dev_node.consume("dev-secured", 2)] == [b"a", b"b"]


def test_roost_user_create_list_delete(dev_node: RoostNode) -> None:
    created = roost(dev_node, "user", "create", USER, "--password-stdin", stdin=PASSWORD + "\n")
    assert created.returncode == 0, created.stderr
    listed = roost(dev_node, "user", "list", "--format", "json")
    assert listed.returncode == 0, listed.stderr
    assert USER in listed.stdout and "SCRAM-SHA-512 (4096)" in listed.stdout
    for output in (created, listed):
        assert PASSWORD not in output.stdout + output.stderr
    config = {**dev_node.client_config(), "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": USER,
              "sasl.password": PASSWORD}
    producer = Producer(config)
    producer.produce("dev-secured", b"from frank")
    assert producer.flush(30) == 0
    deleted = roost(dev_node, "user", "delete", USER)
    assert deleted.returncode == 0, deleted.stderr
    assert USER not in roost(dev_node, "user", "list", "--format", "json").stdout


def test_a_profile_points_at_the_password_file(dev_node: RoostNode, tmp_path: Path) -> None:
    assert dev_node.data_dir is not None
    settings = dict(dev_node.security_settings)
    settings["sasl.password"] = "${file:" + str(dev_node.data_dir / "security" / "admin.password") + "}"
    profiles = tmp_path / "profiles.toml"
    profiles.write_text("[dev]\n" + f'bootstrap = "{dev_node.bootstrap}"\n[dev.settings]\n'
                        + "".join(f'"{key}" = "{value}"\n' for key, value in settings.items()))
    listed = subprocess.run([sys.executable, "-m", "roost.cli.main", "topic", "list", "--profile", "dev"],
                            capture_output=True, text=True, timeout=60,
                            env={**os.environ, "ROOST_PROFILES_FILE": str(profiles)})
    assert listed.returncode == 0, listed.stderr
    assert "dev-secured" in listed.stdout
