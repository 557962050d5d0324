"""kazoo's recipes work against the keeper: Lock, Election, Barrier, DoubleBarrier, Counter,
Queue, LockingQueue, Party, DataWatch, ChildrenWatch (and a few more that come for free)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient

from tests.keeper.zkharness import kazoo, unique_root, wait_until

WAIT = 30.0


@pytest.fixture
def clients(keeper: str) -> Iterator[list[KazooClient]]:
    made = [kazoo(keeper) for _ in range(3)]
    try:
        yield made
    finally:
        for client in made:
            client.stop()
            client.close()


def test_lock_is_exclusive_and_handed_over(clients: list[KazooClient]) -> None:
    a, b, _ = clients
    path = unique_root("lock")
    lock_a = a.Lock(path, "a")
    lock_b = b.Lock(path, "b")
    assert lock_a.acquire(timeout=WAIT)
    assert not lock_b.acquire(blocking=False)
    assert lock_a.contenders() == ["a"]
    got = threading.Event()

    def contend() -> None:
        if lock_b.acquire(timeout=WAIT):
            got.set()

    waiter = threading.Thread(target=contend)
    waiter.start()
    wait_until(lambda: len(lock_a.contenders()) == 2, WAIT, "b to queue for the lock")
    assert lock_a.contenders() == ["a", "b"]
    assert not got.is_set()
    lock_a.release()
    assert got.wait(WAIT)
    waiter.join(WAIT)
    assert lock_b.contenders() == ["b"]
    lock_b.release()


def test_lock_released_when_holder_session_closes(clients: list[KazooClient], keeper: str) -> None:
    path = unique_root("lock-close")
    holder = kazoo(keeper)
    try:
        assert holder.Lock(path, "holder").acquire(timeout=WAIT)
    finally:
        holder.stop()
        holder.close()
    assert clients[0].Lock(path, "next").acquire(timeout=WAIT)


def test_read_write_locks_and_semaphore(clients: list[KazooClient]) -> None:
    a, b, c = clients
    path = unique_root("rw")
    read_a, read_b = a.ReadLock(path), b.ReadLock(path)
    assert read_a.acquire(timeout=WAIT) and read_b.acquire(timeout=WAIT)
    write = c.WriteLock(path)
    assert not write.acquire(blocking=False)
    read_a.release()
    read_b.release()
    assert write.acquire(timeout=WAIT)
    write.release()
    sem_path = unique_root("sem")
    sem_a, sem_b, sem_c = (client.Semaphore(sem_path, max_leases=2) for client in clients)
    assert sem_a.acquire(timeout=WAIT) and sem_b.acquire(timeout=WAIT)
    assert not sem_c.acquire(blocking=False)
    sem_a.release()
    assert sem_c.acquire(timeout=WAIT)
    assert len(sem_c.lease_holders()) == 2
    sem_b.release()
    sem_c.release()


def test_election_picks_one_leader_then_the_next(clients: list[KazooClient]) -> None:
    path = unique_root("election")
    leaders: list[str] = []
    stop = {name: threading.Event() for name in ("a", "b")}
    lead_started = threading.Event()
    elections = {name: client.Election(path, name) for name, client in zip("ab", clients, strict=False)}

    def run(name: str) -> None:
        def lead() -> None:
            leaders.append(name)
            lead_started.set()
            stop[name].wait(WAIT)

        elections[name].run(lead)

    threads = [threading.Thread(target=run, args=(name,)) for name in "ab"]
    threads[0].start()
    assert lead_started.wait(WAIT)
    threads[1].start()
    wait_until(lambda: len(elections["a"].contenders()) == 2, WAIT, "both contenders")
    assert elections["b"].contenders() == ["a", "b"]
    assert leaders == ["a"]
    lead_started.clear()
    stop["a"].set()
    assert lead_started.wait(WAIT)
    assert leaders == ["a", "b"]
    stop["b"].set()
    for thread in threads:
        thread.join(WAIT)


def test_barrier_and_double_barrier(clients: list[KazooClient]) -> None:
    a, b, _ = clients
    path = unique_root("barrier")
    barrier = a.Barrier(path)
    barrier.create()
    assert b.Barrier(path).wait(timeout=0.2) is False
    released = threading.Event()
    waiter = threading.Thread(target=lambda: b.Barrier(path).wait(timeout=WAIT) and released.set())
    waiter.start()
    barrier.remove()
    assert released.wait(WAIT)
    waiter.join(WAIT)

    double = unique_root("double")
    entered = []

    def participant(client: KazooClient, name: str) -> None:
        barrier = client.DoubleBarrier(double, 2, identifier=name)
        barrier.enter()
        entered.append(name)
        barrier.leave()

    threads = [threading.Thread(target=participant, args=(client, name))
               for client, name in zip(clients[:2], ("x", "y"), strict=True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
    assert sorted(entered) == ["x", "y"]


def test_counter_from_several_clients(clients: list[KazooClient]) -> None:
    path = unique_root("counter")
    counters = [client.Counter(path) for client in clients]

    def bump(counter) -> None:
        for _ in range(20):
            counter += 1

    threads = [threading.Thread(target=bump, args=(counter,)) for counter in counters]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
    assert clients[0].Counter(path).value == 60
    float_counter = clients[1].Counter(unique_root("fcounter"), default=0.5)
    float_counter += 2.0
    float_counter -= 1.0
    assert float_counter.value == 1.5


def test_queue_and_locking_queue(clients: list[KazooClient]) -> None:
    a, b, _ = clients
    path = unique_root("queue")
    queue = a.Queue(path)
    queue.put(b"one")
    queue.put(b"two")
    queue.put(b"urgent", priority=1)
    assert len(queue) == 3
    consumer = b.Queue(path)
    assert [consumer.get(), consumer.get(), consumer.get(), consumer.get()] == [b"urgent", b"one", b"two", None]

    locking_path = unique_root("lqueue")
    producer = a.LockingQueue(locking_path)
    producer.put_all([b"a", b"b"])
    worker = b.LockingQueue(locking_path)
    assert worker.get(timeout=WAIT) == b"a"
    assert worker.holds_lock()
    other = clients[2].LockingQueue(locking_path)
    assert other.get(timeout=WAIT) == b"b"  # "a" is held by the first worker
    assert worker.consume()
    assert other.release()  # "b" goes back to the queue
    assert len(producer) == 1
    assert worker.get(timeout=WAIT) == b"b"
    assert worker.consume()
    assert len(producer) == 0


def test_party_and_shallow_party(clients: list[KazooClient]) -> None:
    path = unique_root("party")
    parties = [client.Party(path, f"member-{i}") for i, client in enumerate(clients)]
    for party in parties:
        party.join()
    assert sorted(parties[0]) == ["member-0", "member-1", "member-2"]
    parties[1].leave()
    assert len(parties[2]) == 2
    shallow_path = unique_root("shallow")
    shallow = [client.ShallowParty(shallow_path, f"s{i}") for i, client in enumerate(clients)]
    for party in shallow:
        party.join()
    assert sorted(shallow[0]) == ["s0", "s1", "s2"]


def test_data_watch_and_children_watch(clients: list[KazooClient]) -> None:
    watcher, writer, _ = clients
    path = unique_root("watched")
    seen: list[bytes | None] = []
    children_seen: list[list[str]] = []

    @watcher.DataWatch(path)
    def on_data(data, stat) -> None:
        seen.append(data)

    wait_until(lambda: seen == [None], WAIT, "initial DataWatch call")
    writer.create(path, b"v1")
    wait_until(lambda: seen[-1:] == [b"v1"], WAIT, "creation")
    writer.set(path, b"v2")
    wait_until(lambda: seen[-1:] == [b"v2"], WAIT, "change")

    @watcher.ChildrenWatch(path)
    def on_children(children) -> None:
        children_seen.append(sorted(children))

    wait_until(lambda: children_seen == [[]], WAIT, "initial ChildrenWatch call")
    writer.create(f"{path}/a")
    writer.create(f"{path}/b")
    wait_until(lambda: children_seen[-1:] == [["a", "b"]], WAIT, "children")
    writer.delete(f"{path}/a")
    wait_until(lambda: children_seen[-1:] == [["b"]], WAIT, "child removal")
    writer.delete(path, recursive=True)
    wait_until(lambda: seen[-1:] == [None], WAIT, "deletion")


def test_tree_cache_and_lease(clients: list[KazooClient]) -> None:
    from kazoo.recipe.cache import TreeCache
    from kazoo.recipe.lease import NonBlockingLease

    a, b, _ = clients
    path = unique_root("cache")
    a.ensure_path(f"{path}/x")
    cache = TreeCache(b, path)
    cache.start()
    try:
        a.set(f"{path}/x", b"cached")
        wait_until(lambda: (cache.get_data(f"{path}/x") or None) and cache.get_data(f"{path}/x").data == b"cached",
                   WAIT, "the tree cache to see the change")
    finally:
        with contextlib.suppress(Exception):
            cache.close()
    import datetime

    lease_path = unique_root("lease")
    assert NonBlockingLease(a, lease_path, datetime.timedelta(minutes=1), identifier="a")
    assert not NonBlockingLease(b, lease_path, datetime.timedelta(minutes=1), identifier="b")
