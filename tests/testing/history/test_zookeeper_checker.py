"""The ZooKeeper-guarantees checker on hand-made histories: each guarantee kept passes, each one
broken is found."""

from __future__ import annotations

from roost.testing.history.model import OK, Op
from roost.testing.history.zookeeper import check


def read(session: str, t: float, data: bytes, version: int, path: str = "/r") -> Op:
    return Op(session, "read", t, t + 0.1, OK, path, (data, version))


def write(session: str, t: float, data: bytes, version: int, path: str = "/r") -> Op:
    return Op(session, "write", t, t + 0.1, OK, path, data, version)


def kinds(ops: list[Op]) -> set[str]:
    return {p.split(":")[0] for p in check(ops).problems}


def test_a_session_reading_its_writes_in_order_passes() -> None:
    ops = [write("s1", 0, b"a", 1), read("s1", 1, b"a", 1), read("s2", 1, b"", 0), write("s2", 2, b"b", 2),
           read("s1", 3, b"b", 2)]
    assert check(ops).valid is True


def test_a_session_going_back_a_version_is_found() -> None:
    ops = [write("s1", 0, b"a", 1), write("s1", 1, b"b", 2), read("s1", 2, b"a", 1)]
    verdict = check(ops)
    assert kinds(ops) == {"session went back"}
    assert [o.index for o in verdict.witness] == [-1, -1] or len(verdict.witness) == 2


def test_two_values_at_one_version_is_found() -> None:
    assert kinds([write("s1", 0, b"a", 1), read("s2", 1, b"x", 1)]) == {"two values at one version"}


def watch(session: str, t: float, version: int, registration: int, path: str = "/r") -> Op:
    return Op(session, "watch-set", t, t + 0.1, OK, path, version, registration)


def event(session: str, t: float, registration: int, path: str = "/r") -> Op:
    return Op(session, "watch-event", t, t, OK, path, registration)


def test_a_watch_firing_once_before_the_new_data_is_read_passes() -> None:
    ops = [watch("s1", 0, 0, 7), write("s2", 1, b"a", 1), event("s1", 1.2, 7), read("s1", 1.5, b"a", 1)]
    assert check(ops).valid is True


def test_a_watch_firing_twice_never_or_after_the_data_is_found() -> None:
    assert "watch fired twice" in kinds([watch("s1", 0, 0, 7), write("s2", 1, b"a", 1), event("s1", 1.2, 7),
                                         event("s1", 1.3, 7)])
    assert "watch never fired" in kinds([watch("s1", 0, 0, 7), write("s2", 1, b"a", 1), read("s1", 5, b"a", 1)])
    assert "data before its watch event" in kinds([watch("s1", 0, 0, 7), write("s2", 1, b"a", 1),
                                                   read("s1", 1.5, b"a", 1), event("s1", 2, 7)])


def test_an_ephemeral_seen_after_its_session_expired_is_found() -> None:
    created = Op("s1", "create-ephemeral", 0, 0.1, OK, "/e/1")
    expired = Op("s1", "expired", 5, 5, OK)
    gone = Op("s2", "exists-synced", 6, 6.1, OK, "/e/1", None, False)
    still = Op("s2", "exists-synced", 6, 6.1, OK, "/e/1", None, True)
    before = Op("s2", "exists-synced", 4, 4.1, OK, "/e/1", None, True)
    assert check([created, expired, gone, before]).valid is True
    assert kinds([created, expired, still]) == {"ephemeral outlived its session"}


def test_a_queue_losing_or_repeating_an_item_or_numbering_back_is_found() -> None:
    def enqueue(t: float, value: str, node: str) -> Op:
        return Op("s1", "enqueue", t, t + 0.1, OK, "/q", value, node)

    def dequeue(t: float, node: str, value: str) -> Op:
        return Op("s2", "dequeue", t, t + 0.1, OK, "/q", node, value)

    a, b = enqueue(0, "a", "/q/item-0000000001"), enqueue(1, "b", "/q/item-0000000002")
    drain_b = Op("final", "queue-drain", 5, 5.1, OK, "/q", None, ("b",))
    assert check([a, b, dequeue(2, a.result, "a"), drain_b]).valid is True
    assert kinds([a, b, drain_b]) == {"queue lost an item"}
    timed_out = Op("s2", "dequeue", 2, 7, "unknown", "/q", a.result, "a")  # its delete may have happened
    assert check([a, b, timed_out, drain_b]).valid is True
    assert "dequeued twice" in kinds([a, b, dequeue(2, a.result, "a"), dequeue(3, a.result, "a"), drain_b])
    assert kinds([enqueue(0, "a", "/q/item-0000000005"), enqueue(1, "b", "/q/item-0000000002")]) == {
        "sequence went back"}
