"""Differential conformance: the same kazoo scenarios against a real Apache ZooKeeper 3.8 and a
keeper; their normalised results must be equal (ZooKeeper is the referee).

Each scenario records every call's outcome (values, stats, exceptions, watch events) through a
`Recorder`, which makes zxids relative to the scenario's first create and session ids roles, so
the two servers' records compare exactly.
"""

from __future__ import annotations

import contextlib

import pytest
from kazoo.protocol.states import KazooState
from kazoo.security import make_acl, make_digest_acl

from roost.keeper.acl import OPEN_ACL_UNSAFE
from roost.wire.zk.constants import CreateMode, OpCode
from roost.wire.zk.records import CreateRequest, PathWatchRequest
from tests.keeper.conftest import differential
from tests.keeper.zkharness import RawClient, Recorder, four_letter, kazoo, wait_until

pytestmark = pytest.mark.zookeeper


@contextlib.contextmanager
def other_client(address: str, rec: Recorder | None = None, name: str = "other"):
    client = kazoo(address)
    try:
        if rec is not None:
            rec.name_session(client, name)
        yield client
    finally:
        client.stop()
        client.close()


# ------------------------------------------------------------------------------- scenarios


def crud_with_versions(address: str, rec: Recorder) -> None:
    zk, r = rec.zk, rec.root
    rec.start(b"root data")
    rec.do("create", lambda: zk.create(f"{r}/a", b"hello"))
    rec.do("get", lambda: zk.get(f"{r}/a"))
    rec.do("set at version 0", lambda: zk.set(f"{r}/a", b"world", version=0))
    rec.do("set at stale version 0", lambda: zk.set(f"{r}/a", b"lost", version=0))
    rec.do("get after failed set", lambda: zk.get(f"{r}/a"))
    rec.do("set any version", lambda: zk.set(f"{r}/a", b"", version=-1))
    rec.do("create existing", lambda: zk.create(f"{r}/a"))
    rec.do("create without parent", lambda: zk.create(f"{r}/x/y"))
    rec.do("create2 with stat", lambda: zk.create(f"{r}/b", b"bee", include_data=True))
    rec.do("create empty", lambda: zk.create(f"{r}/empty"))
    rec.do("get empty", lambda: zk.get(f"{r}/empty"))
    rec.do("delete at wrong version", lambda: zk.delete(f"{r}/a", version=7))
    rec.do("delete at version 2", lambda: zk.delete(f"{r}/a", version=2))
    rec.do("get deleted", lambda: zk.get(f"{r}/a"))
    rec.do("exists deleted", lambda: zk.exists(f"{r}/a"))
    rec.do("set deleted", lambda: zk.set(f"{r}/a", b"x"))
    rec.do("delete deleted", lambda: zk.delete(f"{r}/a"))
    rec.do("create child", lambda: zk.create(f"{r}/b/c", b"c"))
    rec.do("delete non-empty", lambda: zk.delete(f"{r}/b"))
    rec.do("children", lambda: sorted(zk.get_children(r)))
    rec.do("children with stat", lambda: (lambda cs: (sorted(cs[0]), cs[1]))(
        zk.get_children(r, include_data=True)))
    rec.do("root stat", lambda: zk.exists(r))
    rec.do("sync", lambda: zk.sync(r))
    rec.note("last zxid seen", rec.zxid(zk.last_zxid))
    rec.do("binary data", lambda: zk.create(f"{r}/bin", bytes(range(256))))
    rec.do("get binary", lambda: zk.get(f"{r}/bin"))
    rec.do("unicode name", lambda: zk.create(f"{r}/\u00e9t\u00e9-\u00a0"))
    rec.do("children after all", lambda: sorted(zk.get_children(r)))


def sequential_naming(address: str, rec: Recorder) -> None:
    zk, r = rec.zk, rec.root
    rec.start()
    for i in range(3):
        rec.do(f"sequential {i}", lambda: zk.create(f"{r}/s-", b"", sequence=True))
    rec.do("plain child", lambda: zk.create(f"{r}/p"))
    rec.do("delete plain child", lambda: zk.delete(f"{r}/p"))
    rec.do("sequential after a delete", lambda: zk.create(f"{r}/s-", sequence=True))
    rec.do("ephemeral sequential", lambda: zk.create(f"{r}/e-", ephemeral=True, sequence=True))
    rec.do("failed create below", lambda: zk.create(f"{r}/nope/q"))
    rec.do("failed sequential create", lambda: zk.create(f"{r}/nope/q-", sequence=True))
    rec.do("sequential after failures", lambda: zk.create(f"{r}/s-", sequence=True))
    rec.do("parent stat", lambda: zk.exists(r))

    def two_in_a_multi():
        t = zk.transaction()
        t.create(f"{r}/m-", sequence=True)
        t.create(f"{r}/m-", sequence=True)
        return t.commit()

    rec.do("two sequential in one multi", two_in_a_multi)

    def failed_multi():
        t = zk.transaction()
        t.create(f"{r}/f-", sequence=True)
        t.create(f"{r}/nope/x")
        return t.commit()

    rec.do("failed multi with a sequential", failed_multi)
    rec.do("sequential after failed multi", lambda: zk.create(f"{r}/s-", sequence=True))
    rec.do("new parent", lambda: zk.create(f"{r}/n"))
    rec.do("sequential with empty name", lambda: zk.create(f"{r}/n/", sequence=True))
    rec.do("trailing slash without sequence", lambda: zk.create(f"{r}/n/"))
    rec.do("children", lambda: sorted(zk.get_children(r)))
    rec.do("parent stat at end", lambda: zk.exists(r))


def children_cversion_pzxid(address: str, rec: Recorder) -> None:
    zk, r = rec.zk, rec.root
    rec.start()
    c = f"{r}/c"
    rec.do("create parent", lambda: zk.create(c, b"p"))
    rec.do("stat fresh", lambda: zk.exists(c))
    rec.do("add 1", lambda: zk.create(f"{c}/1"))
    rec.do("add 2", lambda: zk.create(f"{c}/2", b"22"))
    rec.do("stat with two", lambda: zk.exists(c))
    rec.do("remove 1", lambda: zk.delete(f"{c}/1"))
    rec.do("stat after remove", lambda: zk.exists(c))
    rec.do("set parent data", lambda: zk.set(c, b"pp"))
    rec.do("stat after set", lambda: zk.exists(c))
    rec.do("set child data", lambda: zk.set(f"{c}/2", b"2"))
    rec.do("stat after child set", lambda: zk.exists(c))
    rec.do("re-add 1", lambda: zk.create(f"{c}/1"))
    rec.do("children2", lambda: (lambda cs: (sorted(cs[0]), cs[1]))(zk.get_children(c, include_data=True)))
    rec.do("remove missing child", lambda: zk.delete(f"{c}/9"))
    rec.do("stat after failed remove", lambda: zk.exists(c))
    rec.do("grandchild", lambda: zk.create(f"{c}/1/g"))
    rec.do("stat after grandchild", lambda: zk.exists(c))
    rec.do("child stat", lambda: zk.exists(f"{c}/1"))


def multi_all_or_nothing(address: str, rec: Recorder) -> None:
    zk, r = rec.zk, rec.root
    rec.start()

    def commit(*ops):
        t = zk.transaction()
        for op, *args in ops:
            getattr(t, op)(*args)
        return t.commit()

    rec.do("success", lambda: commit(("create", f"{r}/a", b"a"), ("create", f"{r}/b", b"b"),
                                     ("set_data", f"{r}/a", b"aa"), ("check", f"{r}/b", 0),
                                     ("delete", f"{r}/b")))
    rec.do("after success", lambda: (zk.get(f"{r}/a"), zk.exists(f"{r}/b")))
    rec.do("fails in the middle", lambda: commit(("create", f"{r}/c"), ("check", f"{r}/a", 5),
                                                ("create", f"{r}/d")))
    rec.do("nothing applied", lambda: (zk.exists(f"{r}/c"), zk.exists(f"{r}/d"), zk.get(f"{r}/a")))
    rec.do("fails first", lambda: commit(("delete", f"{r}/missing"), ("create", f"{r}/e")))
    rec.do("fails last", lambda: commit(("create", f"{r}/e"), ("set_data", f"{r}/a", b"x", 99)))
    rec.do("e not there", lambda: zk.exists(f"{r}/e"))
    rec.do("dependent ops", lambda: commit(("create", f"{r}/p"), ("create", f"{r}/p/q", b"q"),
                                           ("set_data", f"{r}/p/q", b"qq", 0)))
    rec.do("dependent stat", lambda: zk.get(f"{r}/p/q"))
    rec.do("delete then recreate", lambda: commit(("delete", f"{r}/p/q"), ("create", f"{r}/p/q", b"new")))
    rec.do("recreated", lambda: zk.get(f"{r}/p/q"))
    rec.do("child of new ephemeral", lambda: commit(("create", f"{r}/eph", b"", None, True),
                                                    ("create", f"{r}/eph/child")))
    rec.do("not empty delete", lambda: commit(("delete", f"{r}/p")))
    rec.do("existing create", lambda: commit(("create", f"{r}/a")))
    rec.do("empty multi", lambda: commit())
    rec.do("check only", lambda: commit(("check", f"{r}/a", 1)))
    rec.do("root after all", lambda: zk.exists(r))


def error_codes_and_paths(address: str, rec: Recorder) -> None:
    zk, r = rec.zk, rec.root
    rec.start()
    for label, path in [
        ("control character", f"{r}/bad\x01name"),
        ("del character", f"{r}/bad\x7fname"),
        ("c1 control", f"{r}/bad\u0085name"),
        ("private use", f"{r}/bad\ue000name"),
        ("non-BMP", f"{r}/bad\U0001f600name"),
        ("special", f"{r}/bad\ufff0name"),
        ("dot", f"{r}/."),
        ("dot dot", f"{r}/a/.."),
        ("double slash", f"{r}//a"),
        ("dot inside name", f"{r}/a.b"),
        ("dots inside name", f"{r}/..a"),
    ]:
        rec.do(f"create {label}", lambda path=path: zk.create(path))
    rec.do("delete /", lambda: zk.delete("/"))
    rec.do("delete /zookeeper", lambda: zk.delete("/zookeeper"))
    rec.do("delete /zookeeper/quota", lambda: zk.delete("/zookeeper/quota"))
    rec.do("delete /zookeeper/config", lambda: zk.delete("/zookeeper/config"))
    rec.do("set /zookeeper/config", lambda: zk.set("/zookeeper/config", b"x"))
    rec.do("get /zookeeper/config", lambda: zk.get("/zookeeper/config"))
    rec.do("acl /zookeeper/config", lambda: zk.get_acls("/zookeeper/config"))
    rec.do("children /zookeeper", lambda: sorted(zk.get_children("/zookeeper")))
    rec.do("stat /zookeeper", lambda: zk.exists("/zookeeper"))
    rec.do("stat /zookeeper/quota", lambda: zk.exists("/zookeeper/quota"))
    rec.do("ephemeral", lambda: zk.create(f"{r}/e", ephemeral=True))
    rec.do("child of ephemeral", lambda: zk.create(f"{r}/e/c"))
    rec.do("sequential child of ephemeral", lambda: zk.create(f"{r}/e/c", sequence=True))
    rec.do("get children of missing", lambda: zk.get_children(f"{r}/missing"))
    rec.do("get acl of missing", lambda: zk.get_acls(f"{r}/missing"))
    rec.do("set acl of missing", lambda: zk.set_acls(f"{r}/missing", list(OPEN_ACL_UNSAFE_KAZOO)))
    rec.do("root after all", lambda: zk.exists(r))


OPEN_ACL_UNSAFE_KAZOO = [make_acl("world", "anyone", all=True)]


def acls_and_auth(address: str, rec: Recorder) -> None:
    zk, r = rec.zk, rec.root
    rec.start()
    with other_client(address, rec, "other") as other:
        rec.do("digest acl", lambda: zk.create(f"{r}/d", b"secret", acl=[make_digest_acl("u", "p", all=True)]))
        rec.do("read without auth", lambda: other.get(f"{r}/d"))
        rec.do("acl without auth", lambda: other.get_acls(f"{r}/d"))
        rec.do("exists needs no auth", lambda: other.exists(f"{r}/d"))
        rec.do("add auth", lambda: other.add_auth("digest", "u:p"))
        rec.do("read with auth", lambda: other.get(f"{r}/d"))
        rec.do("acl with auth", lambda: other.get_acls(f"{r}/d"))
        rec.do("read-only digest acl", lambda: zk.create(
            f"{r}/ro", b"x", acl=[make_digest_acl("u", "p", read=True)]))
        rec.do("redacted acl without admin", lambda: other.get_acls(f"{r}/ro"))
        rec.do("write without write perm", lambda: other.set(f"{r}/ro", b"y"))
        rec.do("set acl without admin", lambda: other.set_acls(f"{r}/ro", OPEN_ACL_UNSAFE_KAZOO))
        rec.do("auth scheme acl", lambda: other.create(f"{r}/mine", acl=[make_acl("auth", "", all=True)]))
        rec.do("auth scheme acl shown", lambda: other.get_acls(f"{r}/mine"))
        rec.do("auth scheme without auth", lambda: zk.create(f"{r}/x", acl=[make_acl("auth", "", all=True)]))
        rec.do("world nobody", lambda: zk.create(f"{r}/x", acl=[make_acl("world", "nobody", all=True)]))
        rec.do("digest without colon", lambda: zk.create(f"{r}/x", acl=[make_acl("digest", "nocolon", all=True)]))
        rec.do("bad ip", lambda: zk.create(f"{r}/x", acl=[make_acl("ip", "300.1.1.1", all=True)]))
        rec.do("unknown scheme", lambda: zk.create(f"{r}/x", acl=[make_acl("sasl", "bob", all=True)]))
        rec.do("ip acl matching", lambda: zk.create(f"{r}/ip", b"i", acl=[make_acl("ip", "127.0.0.1", all=True)]))
        rec.do("ip acl read", lambda: zk.get(f"{r}/ip"))
        rec.do("ip subnet acl", lambda: zk.create(f"{r}/net", acl=[make_acl("ip", "10.0.0.0/8", all=True)]))
        rec.do("ip subnet read", lambda: zk.get(f"{r}/net"))
        rec.do("parent without delete perm", lambda: zk.create(
            f"{r}/nodel", acl=[make_acl("world", "anyone", read=True, write=True, create=True, admin=True)]))
        rec.do("child", lambda: zk.create(f"{r}/nodel/c"))
        rec.do("delete child", lambda: zk.delete(f"{r}/nodel/c"))
        rec.do("set acl", lambda: zk.set_acls(f"{r}/nodel", OPEN_ACL_UNSAFE_KAZOO, version=0))
        rec.do("set acl stale version", lambda: zk.set_acls(f"{r}/nodel", OPEN_ACL_UNSAFE_KAZOO, version=0))
        rec.do("acl after", lambda: zk.get_acls(f"{r}/nodel"))
        rec.do("delete child now", lambda: zk.delete(f"{r}/nodel/c"))
        rec.do("duplicate acl entries", lambda: zk.create(f"{r}/dup", acl=OPEN_ACL_UNSAFE_KAZOO * 2))
        rec.do("duplicates removed", lambda: zk.get_acls(f"{r}/dup"))


def watch_events(address: str, rec: Recorder) -> None:
    zk, r = rec.zk, rec.root
    rec.start()
    w = f"{r}/w"
    with other_client(address, rec, "other") as other:
        rec.do("exists watch on missing", lambda: zk.exists(w, watch=rec.watcher("exists")))
        rec.do("create", lambda: other.create(w, b"0"))
        rec.flush_events("created", expect=1)
        rec.do("data watch", lambda: zk.get(w, watch=rec.watcher("data")))
        rec.do("child watch", lambda: sorted(zk.get_children(w, watch=rec.watcher("child"))))
        rec.do("set", lambda: other.set(w, b"1"))
        rec.do("set again", lambda: other.set(w, b"2"))
        rec.do("add child", lambda: other.create(f"{w}/c"))
        rec.do("add another child", lambda: other.create(f"{w}/d"))
        rec.flush_events("one event per watch", expect=2)
        rec.do("watch child's creation and parent's children",
               lambda: (zk.exists(f"{w}/e", watch=rec.watcher("exists e")),
                        sorted(zk.get_children(w, watch=rec.watcher("child again")))))
        rec.do("create e", lambda: other.create(f"{w}/e"))
        rec.flush_events("created before children changed", expect=2)
        rec.do("data and child watch on a leaf", lambda: (
            zk.get(f"{w}/c", watch=rec.watcher("leaf data")),
            zk.get_children(f"{w}/c", watch=rec.watcher("leaf child")),
            zk.exists(f"{w}/c", watch=rec.watcher("leaf exists"))))
        rec.do("parent child watch", lambda: sorted(zk.get_children(w, watch=rec.watcher("parent child"))))
        rec.do("delete leaf", lambda: other.delete(f"{w}/c"))
        rec.flush_events("delete fires data, child and parent watches", expect=3)
        rec.do("watch on missing via get", lambda: zk.get(f"{w}/none", watch=rec.watcher("none")))
        rec.do("create none", lambda: other.create(f"{w}/none"))
        rec.do("watch set data-only", lambda: zk.exists(f"{w}/d", watch=rec.watcher("d exists")))
        rec.do("set acl fires nothing", lambda: other.set_acls(f"{w}/d", OPEN_ACL_UNSAFE_KAZOO))
        rec.do("set d", lambda: other.set(f"{w}/d", b"d"))
        rec.flush_events("no event for getData on a missing node", expect=1)
        rec.do("own change fires own watch", lambda: zk.get(f"{w}/d", watch=rec.watcher("own")))
        rec.do("own set", lambda: zk.set(f"{w}/d", b"mine"))
        rec.flush_events("own change", expect=1)
        rec.do("multi fires watches", lambda: (zk.exists(f"{w}/m1", watch=rec.watcher("m1")),
                                                sorted(zk.get_children(w, watch=rec.watcher("children m")))))

        def multi():
            t = other.transaction()
            t.create(f"{w}/m1")
            t.create(f"{w}/m2")
            return t.commit()

        rec.do("multi", multi)
        rec.flush_events("multi events", expect=2)
        rec.do("failed multi fires nothing", lambda: (zk.get(f"{w}/m1", watch=rec.watcher("m1 data")),))

        def failed_multi():
            t = other.transaction()
            t.set_data(f"{w}/m1", b"x")
            t.create(f"{w}/m1")
            return t.commit()

        rec.do("failed multi", failed_multi)
        rec.do("then a set", lambda: other.set(f"{w}/m1", b"y"))
        rec.flush_events("only the later set", expect=1)


def watch_before_data(address: str, rec: Recorder) -> None:
    """ZooKeeper's ordering guarantee: the watch event reaches the client before any reply that
    shows the change (seen on the wire with a raw client)."""
    zk, r = rec.zk, rec.root
    rec.start()
    raw = RawClient(address)
    try:
        rec.do("watch", lambda: raw.request(PathWatchRequest(r, True, OpCode.GET_DATA)).err)
        rec.do("change", lambda: zk.set(r, b"changed"))
        rec.do("read", lambda: raw.request(PathWatchRequest(r, False, OpCode.GET_DATA)).result[0])
        rec.note("frame order", [kind.replace(rec.root, "<root>") for kind in raw.order()])
    finally:
        raw.abandon()


def ephemerals_on_close(address: str, rec: Recorder) -> None:
    zk, r = rec.zk, rec.root
    rec.start()
    with other_client(address, rec, "owner") as owner:
        rec.do("ephemeral", lambda: owner.create(f"{r}/eph", b"e", ephemeral=True))
        rec.do("ephemeral sequential", lambda: owner.create(f"{r}/es-", ephemeral=True, sequence=True))
        rec.do("stat", lambda: zk.exists(f"{r}/eph", watch=rec.watcher("eph")))
        rec.do("children watch", lambda: sorted(zk.get_children(r, watch=rec.watcher("children"))))
        owner.stop()
    rec.flush_events("closing the session deletes its ephemerals", expect=2, sort=True)
    rec.do("gone", lambda: (zk.exists(f"{r}/eph"), sorted(zk.get_children(r))))
    rec.do("parent stat", lambda: zk.exists(r))


def ephemerals_on_expiry(address: str, rec: Recorder) -> None:
    zk, r = rec.zk, rec.root
    rec.start()
    owner = RawClient(address, timeout_ms=1000)
    rec.note("negotiated timeout", owner.response.timeout)
    created = owner.request(CreateRequest(f"{r}/eph", b"e", list(OPEN_ACL_UNSAFE), CreateMode.EPHEMERAL))
    rec.note("create", (created.err, created.result))
    rec.do("stat", lambda: zk.exists(f"{r}/eph", watch=rec.watcher("eph")))
    owner.abandon()  # no closeSession: only expiry can remove the node
    rec.flush_events("expiry deletes the ephemeral", expect=1, timeout=30)
    rec.do("gone", lambda: zk.exists(f"{r}/eph"))
    again = RawClient(address, timeout_ms=1000, session_id=owner.response.session_id,
                      passwd=owner.response.passwd)
    rec.note("reconnect to the expired session",
             (again.response.timeout, again.response.session_id, again.closed_by_server()))
    again.abandon()


def session_handshakes(address: str, rec: Recorder) -> None:
    zk, r = rec.zk, rec.root
    rec.start()
    low = RawClient(address, timeout_ms=1)
    high = RawClient(address, timeout_ms=10_000_000)
    rec.note("negotiated", (low.response.timeout, high.response.timeout))
    high.abandon()
    session_id, passwd = low.response.session_id, low.response.passwd
    low.abandon()
    same = RawClient(address, timeout_ms=1, session_id=session_id, passwd=passwd)
    rec.note("reconnect keeps the session", (same.response.session_id == session_id,
                                            same.response.timeout, same.response.passwd == passwd))
    created = same.request(CreateRequest(f"{r}/e", b"", list(OPEN_ACL_UNSAFE), CreateMode.EPHEMERAL))
    rec.note("session usable", created.err)
    wrong = RawClient(address, timeout_ms=1, session_id=session_id, passwd=b"x" * 16)
    rec.note("wrong password", (wrong.response.timeout, wrong.response.session_id, wrong.closed_by_server()))
    wrong.abandon()
    rec.do("wrong password does not end the session", lambda: zk.exists(f"{r}/e"))
    same.abandon()
    try:
        ahead = RawClient(address, timeout_ms=1000, last_zxid_seen=zk.last_zxid + 1_000_000)
        rec.note("client ahead of the server", ("answered", ahead.response.timeout))
        ahead.abandon()
    except OSError:
        rec.note("client ahead of the server", "closed")


def data_size_limit(address: str, rec: Recorder) -> None:
    zk, r = rec.zk, rec.root
    rec.start()
    session = zk.client_id
    rec.do("just under jute.maxbuffer", lambda: zk.create(f"{r}/big", b"x" * (0xFFFFF - 200)))
    rec.do("read it back", lambda: zk.get(f"{r}/big")[1])
    rec.do("set just under", lambda: zk.set(f"{r}/big", b"y" * (0xFFFFF - 200)))
    rec.do("over the limit", lambda: zk.create(f"{r}/huge", b"x" * (1 << 20)))
    wait_until(lambda: zk.state == KazooState.CONNECTED, 30, "kazoo to reconnect")
    rec.do("not created", lambda: zk.exists(f"{r}/huge"))
    rec.note("same session after the cut", zk.client_id == session)
    rec.do("set over the limit", lambda: zk.set(f"{r}/big", b"z" * (1 << 20)))
    wait_until(lambda: zk.state == KazooState.CONNECTED, 30, "kazoo to reconnect")
    rec.do("unchanged", lambda: zk.get(f"{r}/big")[0][:1])


def four_letter_words(address: str, rec: Recorder) -> None:
    rec.start()
    rec.note("ruok", four_letter(address, "ruok"))
    envi = four_letter(address, "envi")
    rec.note("envi has the version", "zookeeper.version=3.8." in envi)
    rec.note("server_version", rec.zk.server_version())
    srvr = four_letter(address, "srvr")
    rec.note("srvr fields", sorted(line.split(":")[0] for line in srvr.splitlines() if ":" in line))
    rec.note("srvr mode", [line for line in srvr.splitlines() if line.startswith("Mode:")])
    stat = four_letter(address, "stat")
    rec.note("stat has clients", "Clients:" in stat)
    mntr = dict(line.split("\t", 1) for line in four_letter(address, "mntr").splitlines() if "\t" in line)
    wanted = ["zk_version", "zk_server_state", "zk_znode_count", "zk_num_alive_connections",
              "zk_outstanding_requests", "zk_watch_count", "zk_ephemerals_count", "zk_packets_received"]
    rec.note("mntr keys", [key in mntr for key in wanted])
    rec.note("mntr state", mntr.get("zk_server_state"))


def auth_failure(address: str, rec: Recorder) -> None:
    rec.start()
    for label, scheme, credential in [("unknown scheme", "nosuchscheme", "x"),
                                      ("bad digest", "digest", "nocolon"),
                                      ("good digest", "digest", "u:p")]:
        with other_client(address) as other:
            rec.do(label, lambda other=other, s=scheme, c=credential: other.add_auth(s, c))


# ---------------------------------------------------------------------------------- tests


@pytest.mark.parametrize("scenario", [
    crud_with_versions,
    sequential_naming,
    children_cversion_pzxid,
    multi_all_or_nothing,
    error_codes_and_paths,
    acls_and_auth,
    watch_events,
    watch_before_data,
    ephemerals_on_close,
    ephemerals_on_expiry,
    session_handshakes,
    data_size_limit,
    four_letter_words,
])
def test_matches_zookeeper(zookeepers: str, keeper: str, scenario) -> None:
    differential(zookeepers, keeper, scenario)


def test_auth_failure_matches_zookeeper(zookeepers: str, keeper: str) -> None:
    differential(zookeepers, keeper, auth_failure)
