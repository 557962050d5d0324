"""Brokers that authenticate to their ensemble and protect their znodes (`zookeeper.set.acl`),
against the keepers and against a real Apache ZooKeeper 3.8 (SASL DIGEST-MD5 set up as ZooKeeper's
docs say): two brokers under a chroot create a topic; a stranger's kazoo client can read the
brokers' znodes but change none of them, nor read the sensitive ones; the brokers themselves (one
SASL identity) go on working on each other's znodes. Also: a broker with a wrong password stops
at start with a clear message and no password in its output; the broker's client speaks digest
too, with the same ACLs, on both servers.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import AuthFailedError, NoAuthError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.security import make_acl

from roost.broker.zk.security import secure_acls
from roost.zkclient import NoAuthError as ZkNoAuthError
from roost.zkclient import ZkClient
from tests.keeper.zkharness import (
    four_letter,
    kazoo,
    keeper_process,
    unique_root,
    zookeeper_available,
    zookeeper_secured,
)
from tests.support import referees
from tests.support.cluster import LocalCluster
from tests.support.procs import start_roost, wait_for

PASSWORD = "brokers-zk-secret"
USERS = {"kafka": PASSWORD}
CHROOT = "/secured-kafka"
# What a stranger must not change: the chroot itself and the brokers' znodes beneath it.
PROTECTED = ["", "/brokers", "/brokers/ids", "/brokers/ids/1", "/brokers/topics", "/brokers/topics/orders",
             "/brokers/topics/orders/partitions/0/state", "/config", "/config/topics", "/config/topics/orders",
             "/config/changes", "/controller", "/controller_epoch", "/admin", "/admin/delete_topics",
             "/isr_change_notification", "/cluster/id"]
OPEN = [make_acl("world", "anyone", all=True)]
BROKER_SETTINGS = {"zookeeper.set.acl": True, "zookeeper.sasl.client.username": "kafka",
                   "zookeeper.sasl.client.password": PASSWORD}


@pytest.fixture(scope="module", params=["keeper", "zookeeper"])
def ensemble(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    directory = tmp_path_factory.mktemp(f"secured-{request.param}")
    if request.param == "keeper":
        with keeper_process(directory, {"sasl.users.kafka": PASSWORD}) as proc:
            yield proc.address("keeper")
    else:
        if not zookeeper_available():
            referees.skip(referees.ZOOKEEPER)
        with zookeeper_secured(directory, USERS) as process:
            yield process.address


def test_a_stranger_cannot_change_the_brokers_znodes(ensemble: str, tmp_path: Path) -> None:
    cluster = LocalCluster.start(tmp_path / "cluster", brokers=2, zookeeper=ensemble + CHROOT,
                                 settings=BROKER_SETTINGS)
    stranger: KazooClient | None = None
    try:
        from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic("orders", 1, 2)])["orders"].result(30)
        # The broker's own password is a secret: DescribeConfigs answers null, flagged sensitive.
        resource = ConfigResource(ResourceType.BROKER, "1")
        entries = admin.describe_configs([resource])[resource].result(30)
        secret = entries["zookeeper.sasl.client.password"]
        assert (secret.value, secret.is_sensitive) == (None, True)
        assert entries["zookeeper.sasl.client.username"].value == "kafka"
        stranger = kazoo(ensemble)
        refused: list[str] = []
        for relative in PROTECTED:
            path = CHROOT + relative
            stranger.get(path)  # world-readable
            for name, attempt in (("set", lambda p=path: stranger.set(p, b"stranger")),
                                  ("create under", lambda p=path: stranger.create(p + "/intruder")),
                                  ("set acl", lambda p=path: stranger.set_acls(p, OPEN)),
                                  ("delete under", lambda p=path: stranger.delete(p + "/0"))):
                try:
                    attempt()
                except NoAuthError:
                    refused.append(f"{name} {relative or '/'}")
        assert len(refused) == 4 * len(PROTECTED), sorted(
            {f"{n} {r or '/'}" for r in PROTECTED for n in ("set", "create under", "set acl", "delete under")}
            - set(refused))
        acl = stranger.get_acls(CHROOT + "/brokers/ids/1")[0]
        assert [(a.perms, a.id.scheme, a.id.id) for a in acl] == [(31, "sasl", "kafka"), (1, "world", "anyone")]
        # The brokers (one identity) still work on each other's znodes: the partition's leader
        # moves when its broker stops, and the controller rewrites the state znode.
        state, _ = stranger.get(CHROOT + "/brokers/topics/orders/partitions/0/state")
        cluster.stop_broker(1)
        wait_for(lambda: stranger.get(CHROOT + "/brokers/topics/orders/partitions/0/state")[0] != state,
                 30, what="the controller to rewrite the partition state")
    finally:
        if stranger is not None:
            stranger.stop()
            stranger.close()
        cluster.close()


def test_a_broker_with_a_wrong_password_stops_with_a_clear_message(ensemble: str, tmp_path: Path) -> None:
    from tests.support.cluster import write_toml

    config = tmp_path / "broker.toml"
    write_toml(config, {"broker.id": 7, "zookeeper.connect": ensemble + "/wrong-password",
                        "listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "logs"),
                        **BROKER_SETTINGS, "zookeeper.sasl.client.password": "${env:ROOST_TEST_WRONG_PW}"})
    proc = start_roost(["broker", "--config", str(config)], expect=(), wait=False,
                       env={"ROOST_TEST_WRONG_PW": "not-the-password"})
    try:
        assert proc.popen.wait(60) == 1
    finally:
        proc.stop()
    output = proc.text()
    assert "SASL DIGEST-MD5 authentication failed" in output, output[-2000:]
    assert "not-the-password" not in output


async def _digest_client_scenario(address: str, root: str) -> list[str]:
    outcomes = []
    # Under a chroot, as Kafka's paths are: the provider sees "/config/users".
    async with ZkClient(address + root, auth_data=[("digest", b"broker:broker-pw")], acl_provider=secure_acls) as zk:
        await zk.ensure_chroot()
        await zk.create("/config", b"")
        await zk.create("/config/users", b"")
        outcomes.append("created")
    async with ZkClient(address + root) as other:
        for path in ("/", "/config"):
            await other.get(path)
            try:
                await other.set(path, b"x")
            except ZkNoAuthError:
                outcomes.append(f"set {path} refused")
        try:
            await other.get("/config/users")
        except ZkNoAuthError:
            outcomes.append("sensitive read refused")
    return outcomes


def test_the_brokers_client_speaks_digest_with_kafkas_acls(ensemble: str) -> None:
    root = unique_root("digest-acl")
    assert asyncio.run(_digest_client_scenario(ensemble, root)) == [
        "created", "set / refused", "set /config refused", "sensitive read refused"]
    owner = kazoo(ensemble, auth_data=[("digest", "broker:broker-pw")])
    try:
        owner.delete(root, recursive=True)
    finally:
        owner.stop()
        owner.close()


def test_no_password_in_the_four_letter_words(ensemble: str) -> None:
    for word in ("conf", "envi", "stat", "cons"):
        assert PASSWORD not in four_letter(ensemble, word)


def test_kazoo_sasl_on_both(ensemble: str) -> None:
    """kazoo's SASL DIGEST-MD5 against the keepers and ZooKeeper alike: the right password gets
    `sasl:kafka` (seen through an `auth` ACL), a wrong one ends the session."""
    root = unique_root("kazoo-sasl")
    client = kazoo(ensemble, sasl_options={"mechanism": "DIGEST-MD5", "username": "kafka", "password": PASSWORD})
    try:
        client.create(root, acl=[make_acl("auth", "", all=True)])
        assert [(a.id.scheme, a.id.id) for a in client.get_acls(root)[0]] == [("sasl", "kafka")]
        client.delete(root)
    finally:
        client.stop()
        client.close()
    refused = KazooClient(hosts=ensemble, timeout=5, connection_retry={"max_tries": 0},
                          sasl_options={"mechanism": "DIGEST-MD5", "username": "kafka", "password": "guess"})
    try:
        with contextlib.suppress(AuthFailedError, KazooTimeoutError):
            refused.start(timeout=5)
        wait_for(lambda: not refused.connected, 10, what="the refused session to end")
    finally:
        refused.stop()
        refused.close()
