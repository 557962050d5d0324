"""The keeper ensemble under failure: three real `roost keeper` processes on loopback, every peer
link (one per direction) through a fault-injecting proxy, driven by kazoo clients.

* kill -9 the leader while two clients (connected to different members) stream writes: a new
  leader is elected, the writes resume, every acknowledged write is on every survivor (each read
  directly after `sync`), the clients keep their sessions and ephemerals; the old leader,
  restarted, catches up to the same tree.
* cut one member (the leader, or a follower) off from its peers: a client pinned to it gets no
  write acknowledged while the majority carries on; after healing, all three members hold the
  same tree with the same zxids.
* a follower the leader's messages no longer reach: `sync` then read there never misses a write
  acknowledged before the sync.

The leader is found with the `srvr` four-letter word (`Mode: leader|follower`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionLoss
from kazoo.interfaces import IAsyncResult
from kazoo.protocol.states import KazooState

from tests.keeper.zkharness import RawClient, four_letter, keeper_config, unique_root, wait_until
from tests.support.faultproxy import ThreadedFaultProxy
from tests.support.procs import RoostProcess, free_ports, start_roost

pytestmark = pytest.mark.slow

SESSION_TIMEOUT = 10.0  # seconds: the most a keeper with tickTime 500 ms grants (20 ticks)
SETTLE_TIMEOUT = 60.0  # generous: the machine is shared, and kazoo fails in-flight requests on reconnect
QUICK_RECONNECTS = {"max_tries": -1, "delay": 0.05, "backoff": 1.5, "max_delay": 0.5}


# ------------------------------------------------------------------------------- the ensemble


@dataclass
class Ensemble:
    """Three keeper processes whose peer links run through one proxy per direction: member i
    dials member j at `proxies[(i, j)]`, which forwards to j's real peer port."""

    directory: Path
    peer_ports: dict[int, int]
    proxies: dict[tuple[int, int], ThreadedFaultProxy] = field(default_factory=dict)
    procs: dict[int, RoostProcess] = field(default_factory=dict)

    @property
    def ids(self) -> list[int]:
        return sorted(self.peer_ports)

    def start(self, sid: int) -> None:
        servers = {peer: self.proxies[(sid, peer)].address[1] for peer in self.ids if peer != sid}
        servers[sid] = self.peer_ports[sid]  # where this member itself listens
        config = keeper_config(self.directory / f"keeper{sid}", servers=servers, myid=sid)
        self.procs[sid] = start_roost(["keeper", "--config", str(config)], expect=("keeper",))

    def restart(self, sid: int) -> None:
        assert self.procs[sid].popen.poll() is not None, "stop it first"
        self.procs[sid] = start_roost(self.procs[sid].args, expect=("keeper",))

    def kill9(self, sid: int) -> None:
        self.procs[sid].kill9()

    def address(self, sid: int) -> str:
        return self.procs[sid].address("keeper")

    def srvr(self, sid: int) -> dict[str, str]:
        """The member's `srvr` answer as a dict (empty if it does not answer)."""
        try:
            text = four_letter(self.address(sid), "srvr", timeout=5.0)
        except OSError:
            return {}
        return dict(line.split(": ", 1) for line in text.splitlines() if ": " in line)

    def serving(self, sid: int) -> bool:
        """False once the member says it is not serving (it knows no leader: no quorum)."""
        try:
            return "not currently serving" not in four_letter(self.address(sid), "srvr", timeout=5.0)
        except OSError:
            return False

    def zxid(self, sid: int) -> int:
        return int(self.srvr(sid).get("Zxid", "-0x1"), 16)

    def leader(self, among: list[int], timeout: float = 60.0) -> int:
        """Wait until exactly one of `among` says it leads and the others say they follow."""
        found: list[int] = []

        def one_leader() -> bool:
            modes = {sid: self.srvr(sid).get("Mode") for sid in among}
            leaders = [sid for sid, mode in modes.items() if mode == "leader"]
            found[:] = leaders
            return len(leaders) == 1 and all(mode in ("leader", "follower") for mode in modes.values())

        wait_until(one_leader, timeout, f"one leader among members {among}", interval=0.1)
        return found[0]

    def isolate(self, sid: int) -> None:
        """Blackhole every peer link into and out of `sid` (connections stay up, bytes vanish)."""
        for (src, dst), proxy in self.proxies.items():
            if sid in (src, dst):
                proxy.blackhole()

    def heal(self) -> None:
        for proxy in self.proxies.values():
            proxy.heal()

    def converged(self, among: list[int], timeout: float = 60.0) -> int:
        """Wait until every member of `among` has applied the same last zxid; returns it."""
        zxids: dict[int, int] = {}

        def same() -> bool:
            zxids.update({sid: self.zxid(sid) for sid in among})
            return len(set(zxids.values())) == 1 and zxids[among[0]] > 0

        wait_until(same, timeout, f"members {among} to reach the same zxid", interval=0.1)
        return zxids[among[0]]


@pytest.fixture
def ensemble(tmp_path: Path) -> Iterator[Ensemble]:
    peer_ports = dict(zip((1, 2, 3), free_ports(3), strict=True))  # all at once: none repeats
    cluster = Ensemble(tmp_path, peer_ports)
    try:
        for src in cluster.ids:
            for dst in cluster.ids:
                if src != dst:
                    cluster.proxies[(src, dst)] = ThreadedFaultProxy(("127.0.0.1", peer_ports[dst]))
        for sid in cluster.ids:
            cluster.start(sid)
        yield cluster
    finally:
        for proc in cluster.procs.values():
            proc.stop()
        for proxy in cluster.proxies.values():
            proxy.close()


# -------------------------------------------------------------------------------- clients


class Client:
    """A kazoo client that records every state it passes through."""

    def __init__(self, addresses: list[str]) -> None:
        self.states: list[KazooState] = []
        self.zk = KazooClient(hosts=",".join(addresses), randomize_hosts=False, timeout=SESSION_TIMEOUT,
                              connection_retry=QUICK_RECONNECTS)
        self.zk.add_listener(self.states.append)
        self.zk.start(timeout=60)

    def connected_to(self) -> str:
        host, port = self.zk._connection._socket.getpeername()[:2]
        return f"{host}:{port}"

    def close(self) -> None:
        self.zk.stop()
        self.zk.close()


@dataclass
class Write:
    """One write a client sent: a create of `path` with `data`, or a set of the counter to `data`."""

    path: str
    data: bytes
    is_create: bool
    result: IAsyncResult
    sent_at: float

    def acknowledged(self) -> bool:
        return self.result.ready() and self.result.successful()


class Writer(threading.Thread):
    """Sends writes one at a time (each waits for its reply) until told to stop: three creates of
    fresh znodes, then a set of the writer's counter. A write that fails or times out is recorded
    and the writer goes on with the next one (a new name: a retry could not tell a lost create
    from a committed one)."""

    def __init__(self, client: Client, root: str, name: str, max_writes: int = 5000,
                 op_timeout: float = 30.0) -> None:
        super().__init__(name=f"writer-{name}", daemon=True)
        self.zk = client.zk
        self.root = root
        self.prefix = name
        self.counter = f"{root}/{name}-counter"
        self.max_writes = max_writes
        self.op_timeout = op_timeout
        self.writes: list[Write] = []
        self.acked = 0
        self.failures: list[str] = []
        self.halt = threading.Event()

    def run(self) -> None:
        for i in range(self.max_writes):
            if self.halt.is_set():
                return
            data = f"{self.prefix}:{i}".encode()
            if i % 4 == 3:
                write = Write(self.counter, data, False, self.zk.set_async(self.counter, data), time.monotonic())
            else:
                path = f"{self.root}/{self.prefix}-{i:06d}"
                write = Write(path, data, True, self.zk.create_async(path, data), time.monotonic())
            self.writes.append(write)
            try:
                write.result.get(timeout=self.op_timeout)
                self.acked += 1
            except Exception as exc:  # ConnectionLoss while failing over, or a timeout
                self.failures.append(f"{write.path}: {exc!r}")
                self.halt.wait(0.02)  # do not spin while kazoo reconnects

    def finish(self) -> None:
        self.halt.set()
        self.join(SETTLE_TIMEOUT)
        assert not self.is_alive(), f"{self.name} did not stop"

    def acknowledged(self) -> list[Write]:
        return [write for write in self.writes if write.acknowledged()]


def settle(writes: list[Write], timeout: float = SETTLE_TIMEOUT) -> None:
    """Wait until every write has an outcome (kazoo answers or fails each one)."""
    wait_until(lambda: all(write.result.ready() for write in writes), timeout,
               "every sent write to get a reply or fail")


Tree = dict[str, tuple[bytes, int, int, int, int]]  # path -> (data, czxid, mzxid, version, owner)


def write_until_acknowledged(client: Client, prefix: str, attempts: int = 20) -> str:
    """Create `prefix`-N for N = 0, 1, ... until one create is acknowledged; returns its path.
    (A ConnectionLoss leaves a create's outcome unknown: the next try uses a new name.)"""
    failures: list[str] = []
    for attempt in range(attempts):
        path = f"{prefix}-{attempt}"
        try:
            return client.zk.create_async(path, b"w").get(timeout=SETTLE_TIMEOUT)
        except ConnectionLoss as exc:
            failures.append(repr(exc))
    raise AssertionError(f"no write acknowledged in {attempts} attempts: {failures}")


def read_tree(address: str, root: str) -> Tree:
    """The znodes under `root` as served by the member at `address` alone, after `sync`."""
    zk = KazooClient(hosts=address, timeout=SESSION_TIMEOUT, connection_retry=QUICK_RECONNECTS)
    zk.start(timeout=60)
    try:
        zk.sync(root)
        names = zk.get_children(root)
        replies = {name: zk.get_async(f"{root}/{name}") for name in names}
        tree: Tree = {}
        for name, reply in replies.items():
            data, stat = reply.get(timeout=60)
            tree[f"{root}/{name}"] = (data, stat.czxid, stat.mzxid, stat.version, stat.ephemeralOwner)
        data, stat = zk.get(root)
        tree[root] = (data, stat.czxid, stat.mzxid, stat.version, stat.ephemeralOwner)
        return tree
    finally:
        zk.stop()
        zk.close()


def assert_has_acknowledged(tree: Tree, writers: list[Writer], where: str) -> None:
    """Every acknowledged create is there with its data; every counter holds its last acknowledged
    value or a later one (a later set whose reply was lost may have landed too)."""
    for writer in writers:
        acked = writer.acknowledged()
        assert acked, f"{writer.name} had no write acknowledged"
        missing = [w.path for w in acked if w.is_create and tree.get(w.path, (None,))[0] != w.data]
        assert not missing, f"{where}: {len(missing)} acknowledged creates of {writer.name} lost: {missing[:5]}"
        sets = [w for w in acked if not w.is_create]
        if sets:
            last = max(int(w.data.split(b":")[1]) for w in sets)
            assert writer.counter in tree, f"{where}: {writer.counter} is missing"
            now = int(tree[writer.counter][0].split(b":")[1])
            assert now >= last, f"{where}: {writer.counter} went back from {last} to {now}"


# ---------------------------------------------------------------------------------- tests


def test_leader_kill9_during_writes_then_restart(ensemble: Ensemble) -> None:
    leader = ensemble.leader(ensemble.ids)
    # Ensemble members run on uvloop, as standalone keepers do.
    assert all("event loop: uvloop" in proc.text() for proc in ensemble.procs.values())
    followers = [sid for sid in ensemble.ids if sid != leader]
    addresses = {sid: ensemble.address(sid) for sid in ensemble.ids}
    # One client starts on the leader, one on a follower; both may move to the others.
    on_leader = Client([addresses[leader], *(addresses[sid] for sid in followers)])
    on_follower = Client([addresses[sid] for sid in (*followers, leader)])
    writers: list[Writer] = []
    try:
        assert on_leader.connected_to() == addresses[leader]
        assert on_follower.connected_to() == addresses[followers[0]]
        root = unique_root("kill-leader")
        on_leader.zk.create(root, b"root")
        sessions = {name: client.zk.client_id for name, client in
                    (("on-leader", on_leader), ("on-follower", on_follower))}
        ephemerals = {
            f"{root}/eph-on-leader": (on_leader, on_leader.zk.create(f"{root}/eph-on-leader", b"a", ephemeral=True)),
            f"{root}/eph-on-follower": (on_follower, on_follower.zk.create(f"{root}/eph-on-follower", b"b",
                                                                           ephemeral=True)),
        }
        for name, client in (("a", on_leader), ("b", on_follower)):
            client.zk.create(f"{root}/{name}-counter", b"-:-1")
            writers.append(Writer(client, root, name))
        for writer in writers:
            writer.start()
        wait_until(lambda: all(w.acked >= 500 for w in writers), 120, "500 writes from each client")

        ensemble.kill9(leader)
        acked_at_kill = [w.acked for w in writers]
        new_leader = ensemble.leader(followers)
        wait_until(lambda: all(w.acked >= at + 500 for w, at in zip(writers, acked_at_kill, strict=True)),
                   120, "500 more writes from each client after the kill")
        for writer in writers:
            writer.finish()
        every_write = [write for writer in writers for write in writer.writes]
        settle(every_write)
        assert sum(len(w.writes) for w in writers) >= 2000

        # Both clients kept their sessions, and moved off the dead member.
        for name, client in (("on-leader", on_leader), ("on-follower", on_follower)):
            assert client.zk.client_id == sessions[name], f"{name} got a new session"
            assert KazooState.LOST not in client.states, f"{name}'s session expired: {client.states}"
            assert client.zk.state == KazooState.CONNECTED
            assert client.connected_to() != addresses[leader]

        trees = {sid: read_tree(addresses[sid], root) for sid in followers}
        for sid, tree in trees.items():
            assert_has_acknowledged(tree, writers, f"survivor {sid}")
            for path, (client, _) in ephemerals.items():
                assert path in tree, f"ephemeral {path} is gone from survivor {sid}"
                assert tree[path][4] == client.zk.client_id[0], f"{path} changed owner"
        assert trees[followers[0]] == trees[followers[1]], "the survivors disagree"

        # The old leader comes back as a member and catches up to the same tree.
        ensemble.restart(leader)
        addresses[leader] = ensemble.address(leader)
        ensemble.converged(ensemble.ids)
        # It rejoins under one leader. Its stale term cannot depose the leader the others elected
        # (pre-vote; tests/raft/test_core.py proves it), so while that leader stays it follows;
        # on a loaded machine a leader can still miss its heartbeats and lose a fair election
        # (once in a package run), so which member leads afterwards is not asserted.
        if ensemble.leader(ensemble.ids) == new_leader:
            assert ensemble.srvr(leader).get("Mode") == "follower"
        restarted = read_tree(addresses[leader], root)
        assert restarted == trees[new_leader], "the restarted member did not catch up"
    finally:
        for writer in writers:
            writer.halt.set()
        for client in (on_leader, on_follower):
            client.close()


@pytest.mark.parametrize("role", ["leader", "follower"])
def test_cut_off_member_takes_no_writes_then_converges(ensemble: Ensemble, role: str) -> None:
    leader = ensemble.leader(ensemble.ids)
    cut = leader if role == "leader" else next(sid for sid in ensemble.ids if sid != leader)
    majority = [sid for sid in ensemble.ids if sid != cut]
    addresses = {sid: ensemble.address(sid) for sid in ensemble.ids}
    pinned = Client([addresses[cut]])  # can only ever talk to the cut member
    others = Client([addresses[sid] for sid in majority])
    clients = [pinned, others]
    try:
        root = unique_root(f"cut-{role}")
        pinned.zk.create(root, b"root")
        pinned.zk.create(f"{root}/before-the-cut", b"x")
        others.zk.create(f"{root}/m-counter", b"-:-1")

        ensemble.isolate(cut)
        # Writes sent to the cut member after the cut: none may be acknowledged while it is cut
        # off, since no majority can have them.
        minority_writes = [
            Write(f"{root}/minority-{i}", b"m", True, pinned.zk.create_async(f"{root}/minority-{i}", b"m"),
                  time.monotonic())
            for i in range(5)
        ]
        ensemble.leader(majority)
        # The cut member finds out that it has no quorum (a leader's lease runs out, a follower's
        # election timer fires and its pre-votes go unanswered) and says so.
        wait_until(lambda: not ensemble.serving(cut), 60, "the cut member to stop serving")
        with pytest.raises(ConnectionError):  # and takes no new sessions
            RawClient(addresses[cut]).abandon()
        majority_writer = Writer(others, root, "m")
        majority_writer.start()
        try:
            wait_until(lambda: majority_writer.acked >= 200, 120, "the majority to take 200 writes")
        finally:
            majority_writer.finish()
        settle(majority_writer.writes)
        # The cut member's client: its writes failed or are still waiting, never acknowledged.
        assert not any(write.acknowledged() for write in minority_writes), \
            "the cut member acknowledged a write without a majority"
        majority_trees = {sid: read_tree(addresses[sid], root) for sid in majority}
        for sid, tree in majority_trees.items():
            assert_has_acknowledged(tree, [majority_writer], f"majority member {sid}")
            assert f"{root}/before-the-cut" in tree
            assert not any(w.path in tree for w in minority_writes), "a write sent to the cut member committed"

        ensemble.heal()
        # The pinned client gets through again once its member rejoins.
        settle(minority_writes)
        assert any(not write.result.successful() for write in minority_writes)
        wait_until(lambda: ensemble.serving(cut), 60, "the healed member to serve again")
        healed = write_until_acknowledged(pinned, f"{root}/after-the-heal")
        ensemble.leader(ensemble.ids)
        for client in clients:
            client.close()
        clients = []
        ensemble.converged(ensemble.ids)
        trees = {sid: read_tree(addresses[sid], root) for sid in ensemble.ids}
        assert trees[cut] == trees[majority[0]] == trees[majority[1]], "the members did not converge"
        assert_has_acknowledged(trees[cut], [majority_writer], f"healed member {cut}")
        late_acks = [w.path for w in minority_writes if w.acknowledged()]
        assert all(path in trees[cut] for path in late_acks)
        assert healed in trees[cut]
    finally:
        for client in clients:
            client.close()



def test_sync_on_a_lagging_follower_waits_for_what_the_leader_committed(ensemble: Ensemble) -> None:
    """ZooKeeper's `sync` then read: the read sees every write acknowledged before the sync began,
    even on a follower that has not received it. The leader's link to one follower is blackholed
    (the follower still reaches the leader: its read barrier asks the leader's commit index, and
    then waits to apply up to it); a write acknowledged by the leader and the other follower is
    then invisible to the lagging one until the link heals."""
    leader = ensemble.leader(ensemble.ids)
    lagging = next(sid for sid in ensemble.ids if sid != leader)
    on_leader = Client([ensemble.address(leader)])
    on_lagging = Client([ensemble.address(lagging)])
    try:
        path = f"{unique_root('sync-barrier')}"
        on_leader.zk.create(path, b"old")
        on_lagging.zk.sync(path)
        assert on_lagging.zk.get(path)[0] == b"old"

        ensemble.proxies[(leader, lagging)].blackhole()
        on_leader.zk.set(path, b"new")  # acknowledged: the leader and the other follower hold it
        synced = on_lagging.zk.sync_async(path)
        synced.wait(3.0)  # it may fail instead (the member stops serving once it misses the leader)
        if synced.ready() and synced.successful():
            # Only once the lagging member applied the write may its sync return.
            assert on_lagging.zk.get(path)[0] == b"new", "a read after sync missed an acknowledged write"
        ensemble.heal()
        settle_until = time.monotonic() + SETTLE_TIMEOUT
        while time.monotonic() < settle_until:  # bounded: the member catches up once healed
            try:
                on_lagging.zk.sync(path)
                break
            except ConnectionLoss:
                time.sleep(0.2)
        assert on_lagging.zk.get(path)[0] == b"new"
    finally:
        ensemble.heal()
        on_leader.close()
        on_lagging.close()
