"""The client's sans-IO parts: connect strings and chroot paths, the watch book, error mapping."""

from __future__ import annotations

import pytest

from roost.wire.zk.constants import EventType
from roost.zkclient import (
    BadVersionError,
    ConnectionLossError,
    NoNodeError,
    SessionExpiredError,
    ZkError,
    error_for,
    parse_connect_string,
)
from roost.zkclient.errors import ApiError, SystemZkError
from roost.zkclient.watches import WatchKind, WatchRegistry


def test_connect_strings() -> None:
    parsed = parse_connect_string("zk1:2181,zk2:2182, zk3 ,[::1]:2183/kafka/cluster-a")
    assert parsed.hosts == (("zk1", 2181), ("zk2", 2182), ("zk3", 2181), ("::1", 2183))
    assert parsed.chroot == "/kafka/cluster-a"
    assert parse_connect_string("127.0.0.1:2181").chroot == ""
    assert parse_connect_string("127.0.0.1:2181/").chroot == ""
    for bad in ("", "h:0", "h:x", "h:70000", "::1:2181", "[::1", "h:1/bad/", "a,,b", "h:1//x"):
        with pytest.raises(ValueError):
            parse_connect_string(bad)


def test_chroot_paths() -> None:
    cs = parse_connect_string("h:1/kafka")
    assert cs.to_server("/") == "/kafka"
    assert cs.to_server("/brokers/ids") == "/kafka/brokers/ids"
    assert cs.to_server("/seq-", sequential=True) == "/kafka/seq-"
    assert cs.to_server("/dir/", sequential=True) == "/kafka/dir/"
    assert cs.to_client("/kafka") == "/"
    assert cs.to_client("/kafka/brokers") == "/brokers"
    assert cs.to_client("/kafkaesque") is None and cs.to_client("/other") is None
    plain = parse_connect_string("h:1")
    assert plain.to_server("/a") == "/a" and plain.to_client("/a") == "/a"
    for bad in ("a", "/a/", "/a//b", "/a/./b", "/a/../b", ""):
        with pytest.raises(ValueError):
            cs.to_server(bad)


def test_watch_book_follows_zookeeper_rules() -> None:
    book = WatchRegistry()

    def a(_event: object) -> None: ...

    def b(_event: object) -> None: ...

    book.add(WatchKind.DATA, "/n", a)
    book.add(WatchKind.DATA, "/n", a)  # the same watcher twice fires once
    book.add(WatchKind.EXIST, "/n", b)
    book.add(WatchKind.CHILD, "/n", b)
    assert len(book) == 3
    assert book.pop_for(EventType.NODE_DATA_CHANGED, "/n") == [a, b]
    assert book.pop_for(EventType.NODE_DATA_CHANGED, "/n") == []  # one-shot
    assert book.pop_for(EventType.NODE_CHILDREN_CHANGED, "/n") == [b]
    book.add(WatchKind.DATA, "/d", a)
    book.add(WatchKind.CHILD, "/d", b)
    assert book.pop_for(EventType.NODE_DELETED, "/d") == [a, b]
    book.add(WatchKind.EXIST, "/e", a)
    assert book.pop_for(EventType.NODE_CREATED, "/e") == [a]
    assert book.pop_for(99, "/e") == [] and len(book) == 0


def test_set_watches_are_batched_and_cover_every_watch() -> None:
    book = WatchRegistry()
    paths = [f"/p/{i:05d}" for i in range(3000)]
    for i, path in enumerate(paths):
        book.add((WatchKind.DATA, WatchKind.EXIST, WatchKind.CHILD)[i % 3], path, print)
    requests = list(book.set_watches_requests(77, max_bytes=4096))
    assert len(requests) > 1 and all(r.relative_zxid == 77 for r in requests)
    for request in requests:
        size = sum(4 + len(p) for p in request.data_watches + request.exist_watches + request.child_watches)
        assert size <= 4096
    covered = sorted(p for r in requests for p in r.data_watches + r.exist_watches + r.child_watches)
    assert covered == paths
    assert list(WatchRegistry().set_watches_requests(1)) == []


def test_error_codes_map_to_classes() -> None:
    assert isinstance(error_for(-101), NoNodeError) and isinstance(error_for(-101), ApiError)
    assert isinstance(error_for(-103), BadVersionError)
    assert isinstance(error_for(-112), SessionExpiredError)
    assert isinstance(error_for(-4), ConnectionLossError) and isinstance(error_for(-4), SystemZkError)
    unknown = error_for(-999, "odd")
    assert type(unknown) is ZkError and unknown.code == -999 and str(unknown) == "odd"
    assert "NO_NODE" in str(error_for(-101))
