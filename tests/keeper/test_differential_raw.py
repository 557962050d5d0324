"""Differential conformance for what kazoo does not send: setWatches after a reconnect,
persistent and recursive watches (addWatch), checkWatches/removeWatches, containers, multiRead,
getAllChildrenNumber, getEphemerals, reconfig, create2 and sync, through our raw protocol client,
against a real ZooKeeper 3.8 and a keeper."""

from __future__ import annotations

from typing import Any

import pytest
from kazoo.protocol.states import ZnodeStat

from roost.keeper.acl import OPEN_ACL_UNSAFE
from roost.wire.zk.connection import ReplyEvent
from roost.wire.zk.constants import AddWatchMode, CreateMode, OpCode, WatcherType
from roost.wire.zk.records import (
    CreateRequest,
    CreateResult,
    ErrorResult,
    GetChildrenResult,
    GetDataResult,
    MultiRequest,
    PathModeRequest,
    PathRequest,
    PathWatchRequest,
    ReconfigRequest,
    Request,
    SetDataResult,
    SetWatchesRequest,
    Stat,
)
from tests.keeper.conftest import differential
from tests.keeper.zkharness import RawClient, Recorder

pytestmark = pytest.mark.zookeeper
OPEN = list(OPEN_ACL_UNSAFE)


def plain(rec: Recorder, value: Any) -> Any:
    """Raw records to values the Recorder can normalise."""
    if isinstance(value, Stat):
        return ZnodeStat(*value)
    if isinstance(value, CreateResult):
        return ("create", value.path, plain(rec, value.stat))
    if isinstance(value, SetDataResult):
        return ("setData", plain(rec, value.stat))
    if isinstance(value, ErrorResult):
        return ("error", value.err)
    if isinstance(value, GetDataResult):
        return ("getData", value.data, plain(rec, value.stat))
    if isinstance(value, GetChildrenResult):
        return ("getChildren", sorted(value.children))
    if isinstance(value, list | tuple):
        return [plain(rec, item) for item in value]
    return value


def ask(rec: Recorder, raw: RawClient, label: str, request: Request) -> ReplyEvent:
    reply = raw.request(request)
    rec.note(label, (reply.err, plain(rec, reply.result)))
    return reply


def events(rec: Recorder, raw: RawClient, label: str) -> None:
    """Record (and forget) the watch events the raw client has received so far, after a round
    trip that flushes any the server already sent."""
    raw.request(PathWatchRequest("/", False, OpCode.EXISTS))
    seen = raw.watch_events()
    new = seen[getattr(raw, "_events_recorded", 0):]
    raw._events_recorded = len(seen)
    rec.note(label, [(kind, path) for kind, path in new])


def set_watches_after_reconnect(address: str, rec: Recorder) -> None:
    zk, r = rec.zk, rec.root
    rec.start()
    for name in ("changed", "unchanged", "deleted", "kids", "quietkids"):
        zk.create(f"{r}/{name}", b"v")
    first = RawClient(address, timeout_ms=10_000)
    for name in ("changed", "unchanged", "deleted"):
        ask(rec, first, f"data watch {name}", PathWatchRequest(f"{r}/{name}", True, OpCode.GET_DATA))
    ask(rec, first, "exist watch", PathWatchRequest(f"{r}/appears", True, OpCode.EXISTS))
    ask(rec, first, "child watch", PathWatchRequest(f"{r}/kids", True, OpCode.GET_CHILDREN))
    ask(rec, first, "quiet child watch", PathWatchRequest(f"{r}/quietkids", True, OpCode.GET_CHILDREN))
    seen_zxid = first.request(PathWatchRequest(r, False, OpCode.EXISTS)).zxid
    session, passwd = first.response.session_id, first.response.passwd
    first.abandon()  # the connection drops: its watches are gone with it
    zk.set(f"{r}/changed", b"w")
    zk.delete(f"{r}/deleted")
    zk.create(f"{r}/appears")
    zk.create(f"{r}/kids/k")
    second = RawClient(address, timeout_ms=10_000, session_id=session, passwd=passwd, last_zxid_seen=seen_zxid)
    ask(rec, second, "set watches", SetWatchesRequest(
        seen_zxid, [f"{r}/changed", f"{r}/unchanged", f"{r}/deleted"], [f"{r}/appears", f"{r}/never"],
        [f"{r}/kids", f"{r}/quietkids"]))
    events(rec, second, "missed events fire at once")
    zk.set(f"{r}/unchanged", b"now")
    zk.create(f"{r}/never")
    zk.create(f"{r}/quietkids/q")
    events(rec, second, "re-registered watches fire later")
    second.abandon()


def persistent_and_recursive_watches(address: str, rec: Recorder) -> None:
    zk, r = rec.zk, rec.root
    rec.start()
    raw = RawClient(address)
    ask(rec, raw, "persistent", PathModeRequest(f"{r}/p", AddWatchMode.PERSISTENT, OpCode.ADD_WATCH))
    ask(rec, raw, "recursive", PathModeRequest(f"{r}/t", AddWatchMode.PERSISTENT_RECURSIVE, OpCode.ADD_WATCH))
    zk.create(f"{r}/p", b"1")
    zk.set(f"{r}/p", b"2")
    zk.set(f"{r}/p", b"3")
    zk.create(f"{r}/p/child")
    zk.create(f"{r}/t")
    zk.create(f"{r}/t/a")
    zk.create(f"{r}/t/a/b", b"x")
    zk.set(f"{r}/t/a/b", b"y")
    zk.delete(f"{r}/t/a/b")
    events(rec, raw, "persistent events")
    ask(rec, raw, "check persistent", PathModeRequest(f"{r}/p", WatcherType.ANY, OpCode.CHECK_WATCHES))
    ask(rec, raw, "remove persistent", PathModeRequest(f"{r}/p", WatcherType.ANY, OpCode.REMOVE_WATCHES))
    ask(rec, raw, "check removed", PathModeRequest(f"{r}/p", WatcherType.ANY, OpCode.CHECK_WATCHES))
    ask(rec, raw, "remove again", PathModeRequest(f"{r}/p", WatcherType.ANY, OpCode.REMOVE_WATCHES))
    zk.set(f"{r}/p", b"4")
    events(rec, raw, "after removal")
    ask(rec, raw, "data watch", PathWatchRequest(f"{r}/p", True, OpCode.GET_DATA))
    ask(rec, raw, "check data", PathModeRequest(f"{r}/p", WatcherType.DATA, OpCode.CHECK_WATCHES))
    ask(rec, raw, "check children", PathModeRequest(f"{r}/p", WatcherType.CHILDREN, OpCode.CHECK_WATCHES))
    raw.abandon()


def other_operations(address: str, rec: Recorder) -> None:
    r = rec.root
    rec.start()
    raw = RawClient(address)
    ask(rec, raw, "create2", CreateRequest(f"{r}/c2", b"data", OPEN, 0, OpCode.CREATE2))
    ask(rec, raw, "container", CreateRequest(f"{r}/box", b"", OPEN, CreateMode.CONTAINER, OpCode.CREATE_CONTAINER))
    ask(rec, raw, "ttl without extended types",
        CreateRequest(f"{r}/ttl", b"", OPEN, CreateMode.PERSISTENT_WITH_TTL, OpCode.CREATE_TTL, ttl=1000))
    ask(rec, raw, "bad flags", CreateRequest(f"{r}/bad", b"", OPEN, 42))
    ask(rec, raw, "ephemeral", CreateRequest(f"{r}/e1", b"", OPEN, CreateMode.EPHEMERAL))
    ask(rec, raw, "ephemeral in container", CreateRequest(f"{r}/box/e2", b"", OPEN, CreateMode.EPHEMERAL))
    reply = raw.request(PathRequest(r, OpCode.GET_EPHEMERALS))
    rec.note("ephemerals (any order)", (reply.err, sorted(reply.result)))
    ask(rec, raw, "ephemerals under box", PathRequest(f"{r}/box", OpCode.GET_EPHEMERALS))
    ask(rec, raw, "all children number", PathRequest(r, OpCode.GET_ALL_CHILDREN_NUMBER))
    ask(rec, raw, "all children number missing", PathRequest(f"{r}/missing", OpCode.GET_ALL_CHILDREN_NUMBER))
    ask(rec, raw, "multi read", MultiRequest([
        PathWatchRequest(f"{r}/c2", False, OpCode.GET_DATA),
        PathWatchRequest(f"{r}/missing", False, OpCode.GET_DATA),
        PathWatchRequest(f"{r}/box", False, OpCode.GET_CHILDREN)], OpCode.MULTI_READ))
    ask(rec, raw, "multi with create2", MultiRequest([CreateRequest(f"{r}/m", b"m", OPEN, 0, OpCode.CREATE2)]))
    ask(rec, raw, "multi with a container", MultiRequest([
        CreateRequest(f"{r}/box2", b"", OPEN, CreateMode.CONTAINER, OpCode.CREATE_CONTAINER),
        CreateRequest(f"{r}/box2/x", b"", OPEN, 0)]))
    ask(rec, raw, "reconfig", ReconfigRequest(None, None, "server.1=127.0.0.1:1:2", -1))
    ask(rec, raw, "sync", PathRequest(r, OpCode.SYNC))
    ask(rec, raw, "exists with nul", PathWatchRequest(f"{r}/a\x00b", False, OpCode.EXISTS))
    raw.abandon()


@pytest.mark.parametrize("scenario", [
    set_watches_after_reconnect,
    persistent_and_recursive_watches,
    other_operations,
])
def test_raw_protocol_matches_zookeeper(zookeepers: str, keeper: str, scenario) -> None:
    differential(zookeepers, keeper, scenario)
