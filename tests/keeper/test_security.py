"""The keeper's access control with kazoo over real sockets: ACLs on every operation (the same
answers as a real ZooKeeper 3.8 for a stranger, op by op, multi included), digest and the super
digest, and the four-letter-word whitelist's default (ZooKeeper's: `srvr` alone).

One keeper process for the module, configured as an operator would secure it (a super digest, no
whitelist given); the differential scenario runs on the suite's shared keeper and ZooKeeper.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import make_acl, make_digest_acl

from roost.keeper.acl import digest_id
from tests.keeper.conftest import differential
from tests.keeper.zkharness import Recorder, four_letter, kazoo, keeper_process, unique_root
from tests.support.procs import RoostProcess

SUPER = "super:test"  # kazoo's own tests use this super user
OWNER = make_digest_acl("bob", "bob-secret", all=True)


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RoostProcess]:
    # No whitelist given (None drops the test harness's "*"): ZooKeeper's default applies.
    with keeper_process(tmp_path_factory.mktemp("secured-keeper"),
                        {"superDigest": digest_id(SUPER), "4lw.commands.whitelist": None}) as proc:
        yield proc


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
