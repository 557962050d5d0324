"""The keeper's access control with kazoo over real sockets: ACLs on every operation (the same
answers as a real ZooKeeper 3.8 for a stranger, op by op, multi included), digest and the super
digest, and the four-letter-word whitelist's default (ZooKeeper's: `srvr` alone).

One keeper process for the module, configured as an operator would secure it (a super digest, no
whitelist given); the differential scenario runs on the suite's shared keeper and ZooKeeper.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import AuthFailedError, NoAuthError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.security import make_acl, make_digest_acl

from roost.keeper.acl import digest_id
from tests.keeper.conftest import differential
from tests.keeper.zkharness import Recorder, four_letter, kazoo, keeper_config, unique_root, wait_until
from tests.support.procs import RoostProcess, start_roost

SUPER = "super:test"  # kazoo's own tests use this super user
OWNER = make_digest_acl("bob", "bob-secret", all=True)


KAFKA_PASSWORD = "kafka-zk-secret"  # given to the keeper through an environment variable
ADMIN_PASSWORD = "admin-zk-secret"  # through a file


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RoostProcess]:
    directory = tmp_path_factory.mktemp("secured-keeper")
    (directory / "admin.password").write_text(ADMIN_PASSWORD + "\n")
    config = keeper_config(directory, extra={
        "superDigest": digest_id(SUPER),
        "4lw.commands.whitelist": None,  # None drops the harness's "*": ZooKeeper's default applies
        "sasl.users.kafka": "${env:ROOST_TEST_ZK_KAFKA_PASSWORD}",
        "sasl.users.admin": f"${{file:{directory / 'admin.password'}}}",
        "zookeeper.superUser": "admin",
    })
    proc = start_roost(["keeper", "--config", str(config)], expect=("keeper",),
                       env={"ROOST_TEST_ZK_KAFKA_PASSWORD": KAFKA_PASSWORD})
    try:
        yield proc
    finally:
        proc.stop()


def sasl(username: str, password: str) -> dict[str, str]:
    return {"mechanism": "DIGEST-MD5", "username": username, "password": password}


def close(*clients: KazooClient) -> None:
    for client in clients:
        client.stop()
        client.close()


def test_four_letter_words_default_to_srvr_alone(secured: RoostProcess) -> None:
    address = secured.address("keeper")
    assert "Mode: standalone" in four_letter(address, "srvr")
    for word in ("envi", "conf", "cons", "stat", "mntr", "ruok", "wchs", "dump"):
        assert four_letter(address, word) == f"{word} is not executed because it is not in the whitelist.\n"
    assert "superDigest" not in secured.text() and digest_id(SUPER) not in secured.text()


def stranger_everywhere(address: str, rec: Recorder) -> None:
    """A stranger (no auth) against nodes only bob may touch: every op kind, alone and in multi;
    then a read-only world entry, and what bob may do."""
    zk, r = rec.zk, rec.root
    rec.start()
    zk.add_auth("digest", "bob:bob-secret")
    rec.do("create locked", lambda: zk.create(f"{r}/locked", b"x", acl=[OWNER]))
    rec.do("create child", lambda: zk.create(f"{r}/locked/child", b"c", acl=[OWNER]))
    rec.do("create readable", lambda: zk.create(
        f"{r}/readable", b"r", acl=[OWNER, make_acl("world", "anyone", read=True)]))
    stranger = kazoo(address)
    wrong = kazoo(address, auth_data=[("digest", "bob:guessed")])
    try:
        for who, client in (("stranger", stranger), ("wrong password", wrong)):
            rec.do(f"{who} get", lambda c=client: c.get(f"{r}/locked"))
            rec.do(f"{who} children", lambda c=client: c.get_children(f"{r}/locked"))
            rec.do(f"{who} children2", lambda c=client: c.get_children(f"{r}/locked", include_data=True))
            rec.do(f"{who} exists", lambda c=client: c.exists(f"{r}/locked"))
            rec.do(f"{who} set", lambda c=client: c.set(f"{r}/locked", b"mine"))
            rec.do(f"{who} create under", lambda c=client: c.create(f"{r}/locked/new"))
            rec.do(f"{who} delete under", lambda c=client: c.delete(f"{r}/locked/child"))
            rec.do(f"{who} get acl", lambda c=client: c.get_acls(f"{r}/locked"))
            rec.do(f"{who} set acl", lambda c=client: c.set_acls(f"{r}/locked", [make_acl("world", "anyone", all=True)]))
            for op in ("create", "delete", "set_data", "check"):
                def multi(c: KazooClient = client, op: str = op) -> object:
                    transaction = c.transaction()
                    if op == "create":
                        transaction.create(f"{r}/locked/m")
                    elif op == "delete":
                        transaction.delete(f"{r}/locked/child")
                    elif op == "set_data":
                        transaction.set_data(f"{r}/locked", b"m")
                    else:
                        transaction.check(f"{r}/locked", 0)
                    return transaction.commit()
                rec.do(f"{who} multi {op}", multi)
            rec.do(f"{who} get readable", lambda c=client: c.get(f"{r}/readable")[0])
            rec.do(f"{who} set readable", lambda c=client: c.set(f"{r}/readable", b"no"))
            rec.do(f"{who} acl of readable", lambda c=client: c.get_acls(f"{r}/readable")[0])
        rec.do("nothing changed", lambda: (zk.get(f"{r}/locked")[0], zk.get_children(f"{r}/locked")))
        rec.do("bob reads", lambda: zk.get(f"{r}/locked")[0])
        rec.do("bob sets", lambda: zk.set(f"{r}/locked", b"y").version)
        rec.do("bob deletes", lambda: zk.delete(f"{r}/locked/child"))
    finally:
        close(stranger, wrong)


def test_a_stranger_is_refused_every_operation_as_by_zookeeper(zookeeper: str, keeper: str) -> None:
    records = dict(differential(zookeeper, keeper, stranger_everywhere))
    assert records["stranger get"] == "raised NoAuthError"
    assert records["wrong password multi set_data"] == ["raised NoAuthError"]
    assert records["bob sets"] == 1


def test_digest_and_the_super_digest(secured: RoostProcess) -> None:
    address = secured.address("keeper")
    root = unique_root("digest")
    bob = kazoo(address, auth_data=[("digest", "bob:bob-secret")])
    admin = kazoo(address, auth_data=[("digest", SUPER)])
    stranger = kazoo(address)
    try:
        bob.create(root, b"bob's", acl=[OWNER])
        bob.create(f"{root}/c", b"", acl=[OWNER])
        with pytest.raises(NoAuthError):
            stranger.get(root)
        stranger.add_auth("digest", "bob:bob-secret")  # addauth on a live session
        assert stranger.get(root)[0] == b"bob's"
        # The super digest passes every check, reads and writes alike.
        assert admin.get(root)[0] == b"bob's"
        assert admin.get_children(root) == ["c"]
        admin.set(root, b"super's")
        admin.delete(f"{root}/c")
        admin.set_acls(root, [make_acl("world", "anyone", all=True)])
        assert bob.get(root)[0] == b"super's"
    finally:
        admin.delete(root, recursive=True)
        close(bob, admin, stranger)
    log = secured.text()
    assert "bob-secret" not in log and "super:test" not in log


def test_sasl_digest_md5_as_kazoo_speaks_it(secured: RoostProcess) -> None:
    address = secured.address("keeper")
    root = unique_root("sasl")
    kafka = kazoo(address, sasl_options=sasl("kafka", KAFKA_PASSWORD))
    admin = kazoo(address, sasl_options=sasl("admin", ADMIN_PASSWORD))
    stranger = kazoo(address)
    try:
        # Kafka's secure ACL: the creator (here the SASL identity, through `auth`) all, world read.
        kafka.create(root, b"brokers", acl=[make_acl("auth", "", all=True), make_acl("world", "anyone", read=True)])
        assert [(a.perms, a.id.scheme, a.id.id) for a in kafka.get_acls(root)[0]] == [
            (31, "sasl", "kafka"), (1, "world", "anyone")]
        assert stranger.get(root)[0] == b"brokers"
        with pytest.raises(NoAuthError):
            stranger.set(root, b"rewritten")
        with pytest.raises(NoAuthError):
            stranger.create(f"{root}/intruder")
        kafka.set(root, b"still the brokers'")
        # zookeeper.superUser: the SASL user `admin` passes every check.
        admin.set_acls(root, [make_acl("sasl", "admin", all=True)])
        with pytest.raises(NoAuthError):
            kafka.get(root)
    finally:
        admin.delete(root)
        close(kafka, admin, stranger)
    assert KAFKA_PASSWORD not in secured.text() and ADMIN_PASSWORD not in secured.text()


@pytest.mark.parametrize("username, password", [("kafka", "guessed"), ("nobody", KAFKA_PASSWORD)])
def test_a_wrong_sasl_password_or_user_is_refused_and_the_keeper_serves_on(
        secured: RoostProcess, username: str, password: str) -> None:
    address = secured.address("keeper")
    failures_before = secured.text().count("SASL authentication failed: wrong password or unknown user")
    refused = KazooClient(hosts=address, timeout=5, sasl_options=sasl(username, password),
                          connection_retry={"max_tries": 0})
    try:
        # kazoo reports the session up before its SASL exchange ends, so start() may return (or
        # time out): either way the session ends in AUTH_FAILED.
        with contextlib.suppress(AuthFailedError, KazooTimeoutError):
            refused.start(timeout=5)
        wait_until(lambda: not refused.connected, 10, "the refused session to end")
        wait_until(lambda: secured.text().count("SASL authentication failed: wrong password or unknown user")
                   > failures_before, 10, "the keeper to log the refusal")
    finally:
        refused.stop()
        refused.close()
    other = kazoo(address, sasl_options=sasl("kafka", KAFKA_PASSWORD))
    try:
        assert other.get("/")[1] is not None  # the keeper serves everyone else
    finally:
        close(other)
    assert password not in secured.text()
