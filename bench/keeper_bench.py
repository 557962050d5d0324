"""Keeper benchmark: the keeper and a real Apache ZooKeeper 3.8 side by side, in one run.

Prints figures and never passes or fails:
  * kazoo create / set / get latency (p50, p99) and rate from one synchronous client;
  * pipelined throughput with kazoo's async API from several client processes (one kazoo
    connection alone tops out at a few thousand ops/s: the client is the limit);
  * both standalone and as a three-member ensemble (clients spread over the members);
  * leader kill -9 in the ensemble -> first successful write, over N kills;
  * owner kill -9 -> its ephemeral znode gone, against the session timeout.

    python bench/keeper_bench.py                 # everything (a few minutes)
    python bench/keeper_bench.py --quick         # smaller counts
    python bench/keeper_bench.py --only standalone --skip-zookeeper

Conditions: loopback, tickTime 2000 ms, fsync on for both (ZooKeeper's forceSync default), the
same machine running servers and clients.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from tests.keeper.zkharness import (
    RawClient,
    four_letter,
    keeper_ensemble,
    keeper_process,
    wait_serving,
    zookeeper_available,
    zookeeper_ensemble,
    zookeeper_standalone,
)
from tests.support.procs import start_roost

from roost.keeper.acl import OPEN_ACL_UNSAFE
from roost.wire.zk.connection import ReplyEvent
from roost.wire.zk.constants import OpCode
from roost.wire.zk.records import CreateRequest, PathWatchRequest, SetDataRequest

TICK_MS = 2000
KEEPER_SETTINGS = {"tickTime": TICK_MS, "forceSync": True}


def connect(hosts: str, timeout: float = 10.0) -> KazooClient:
    client = KazooClient(hosts=hosts, timeout=timeout)
    client.start(timeout=60)
    return client


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


# ------------------------------------------------------------------------- measurements


SyncSamples = dict[str, tuple[list[float], float]]  # op -> (latencies in ms, seconds spent)


def sync_latency(hosts: str, count: int, tag: str) -> SyncSamples:
    """Latencies of `count` creates, sets and gets from one synchronous client, and the time each
    op's loop took."""
    client = connect(hosts)
    try:
        root = f"/bench-sync-{tag}-{os.getpid()}-{time.monotonic_ns()}"
        client.create(root)
        results = {}
        for op, call in (
            ("create", lambda i: client.create(f"{root}/n{i}", b"x" * 100)),
            ("set", lambda i: client.set(f"{root}/n{i}", b"y" * 100)),
            ("get", lambda i: client.get(f"{root}/n{i}")),
        ):
            samples = []
            started = time.perf_counter()
            for i in range(count):
                t0 = time.perf_counter()
                call(i)
                samples.append((time.perf_counter() - t0) * 1000)
            results[op] = (samples, time.perf_counter() - started)
        return results
    finally:
        client.stop()
        client.close()


def _pipelined_worker(hosts: str, op: str, root: str, count: int, window: int, worker: int,
                      barrier, results) -> None:
    client = connect(hosts)
    try:
        mine = f"{root}/w{worker}"
        if op == "get":
            client.ensure_path(mine)
            client.set(mine, b"z" * 100)
        else:
            client.ensure_path(mine)
        barrier.wait(120)
        outstanding: deque = deque()
        started = time.perf_counter()
        for i in range(count):
            if op == "create":
                outstanding.append(client.create_async(f"{mine}/n{i}", b"x" * 100))
            elif op == "set":
                outstanding.append(client.set_async(mine, b"y" * 100))
            else:
                outstanding.append(client.get_async(mine))
            if len(outstanding) >= window:
                outstanding.popleft().get(timeout=60)
        while outstanding:
            outstanding.popleft().get(timeout=60)
        results.put((count, time.perf_counter() - started))
    finally:
        client.stop()
        client.close()


def _run_workers(worker, per_worker_args: list[tuple], root: str, host: str) -> float:
    """Create `root`, run one process per argument tuple (they start together), and return the
    aggregate ops/s: all operations over the slowest worker's time."""
    setup = connect(host)
    setup.ensure_path(root)
    setup.stop()
    setup.close()
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(len(per_worker_args))
    results = ctx.Queue()
    workers = [ctx.Process(target=worker, args=(*args, i, barrier, results))
               for i, args in enumerate(per_worker_args)]
    for process in workers:
        process.start()
    try:
        done = [results.get(timeout=600) for _ in workers]
    finally:
        for process in workers:
            process.join(60)
            if process.is_alive():
                process.kill()
    return sum(count for count, _ in done) / max(elapsed for _, elapsed in done)


def pipelined_throughput(hosts_per_client: list[str], op: str, count: int, window: int, tag: str) -> float:
    """Aggregate ops/s of len(hosts_per_client) processes, each pipelining `window` requests."""
    root = f"/bench-pipe-{tag}-{op}-{os.getpid()}-{time.monotonic_ns()}"
    return _run_workers(_pipelined_worker, [(hosts, op, root, count, window) for hosts in hosts_per_client],
                        root, hosts_per_client[0])


def _owner(hosts: str, path: str, timeout: float, ready: str) -> None:
    client = connect(hosts, timeout=timeout)
    client.create(path, b"owner", ephemeral=True)
    Path(ready).write_text("ok")
    time.sleep(3600)


def ephemeral_gone_after_kill(hosts: str, runs: int, session_timeout: float, tag: str) -> list[float]:
    """Seconds from kill -9 of the owner to the deletion event, per run."""
    observer = connect(hosts)
    delays = []
    try:
        for run in range(runs):
            path = f"/bench-eph-{tag}-{os.getpid()}-{run}"
            with tempfile.TemporaryDirectory() as scratch:
                ready = os.path.join(scratch, "ready")
                owner = subprocess.Popen([sys.executable, "-c",
                                          "import sys; sys.path.insert(0, sys.argv[1]); "
                                          "from bench.keeper_bench import _owner; "
                                          "_owner(sys.argv[2], sys.argv[3], float(sys.argv[4]), sys.argv[5])",
                                          str(Path(__file__).resolve().parents[1]), hosts, path,
                                          str(session_timeout), ready])
                try:
                    deadline = time.monotonic() + 60
                    while not os.path.exists(ready) and time.monotonic() < deadline:
                        time.sleep(0.01)
                    gone = threading.Event()
                    assert observer.exists(path, watch=lambda event, gone=gone: gone.set()) is not None
                    killed = time.monotonic()
                    owner.kill()
                    gone.wait(120)
                    delays.append(time.monotonic() - killed)
                finally:
                    owner.kill()
                    owner.wait(30)
    finally:
        observer.stop()
        observer.close()
    return delays


def _mode(address: str) -> str:
    try:
        for line in four_letter(address, "srvr", timeout=2).splitlines():
            if line.startswith("Mode:"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "down"


def leader_kill_recovery(addresses: list[str], kill: Callable[[int], None], restart: Callable[[int], None],
                         kills: int, tag: str) -> list[float]:
    """Seconds from kill -9 of the leader to the first successful kazoo write, per kill."""
    client = connect(",".join(addresses), timeout=10.0)
    delays = []
    try:
        client.ensure_path(f"/bench-kill-{tag}")
        for round_ in range(kills):
            deadline = time.monotonic() + 120
            while True:
                modes = [_mode(address) for address in addresses]
                if "leader" in modes and modes.count("follower") == len(addresses) - 1:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"ensemble not healthy: {modes}")
                time.sleep(0.1)
            leader = modes.index("leader")
            killed = time.monotonic()
            kill(leader)
            while True:
                try:
                    client.create(f"/bench-kill-{tag}/k{round_}-", sequence=True)
                    break
                except KazooException:
                    if time.monotonic() - killed > 120:
                        raise
                    time.sleep(0.005)
            delays.append(time.monotonic() - killed)
            restart(leader)
    finally:
        client.stop()
        client.close()
    return delays


def _raw_pipelined_worker(address: str, op: str, root: str, count: int, window: int, worker: int,
                          barrier, results) -> None:
    client = RawClient(address, timeout_ms=10_000)
    acl = list(OPEN_ACL_UNSAFE)
    mine = f"{root}/w{worker}"
    client.request(CreateRequest(mine, b"z" * 100, acl, 0))
    make = {
        "create": lambda i: CreateRequest(f"{mine}/n{i}", b"x" * 100, acl, 0),
        "set": lambda i: SetDataRequest(mine, b"y" * 100, -1),
        "get": lambda i: PathWatchRequest(mine, False, OpCode.GET_DATA),
    }[op]
    barrier.wait(120)
    sent = answered = 0
    started = time.perf_counter()
    while answered < count:
        frames = []
        while sent < count and sent - answered < window:
            frames.append(client.codec.send(make(sent))[1])
            sent += 1
        if frames:
            client.sock.sendall(b"".join(frames))
        data = client.sock.recv(1 << 20)
        if not data:
            raise ConnectionError("server closed the connection")
        answered += sum(1 for event in client.codec.receive_data(data) if isinstance(event, ReplyEvent))
    results.put((count, time.perf_counter() - started))
    client.abandon()


def raw_throughput(addresses: list[str], op: str, count: int, window: int, tag: str) -> float:
    """Aggregate ops/s of lean protocol clients (our codec, no kazoo): the server's capacity."""
    root = f"/bench-raw-{tag}-{op}-{os.getpid()}-{time.monotonic_ns()}"
    return _run_workers(_raw_pipelined_worker, [(address, op, root, count, window) for address in addresses],
                        root, addresses[0])


# ------------------------------------------------------------------------------- report


def row(label: str, keeper: float | None, zookeeper: float | None, unit: str, higher_is_better: bool) -> str:
    def fmt(value: float | None) -> str:
        return "-" if value is None else f"{value:,.2f}"

    ratio = ""
    if keeper and zookeeper:
        ratio = f"{(keeper / zookeeper if higher_is_better else zookeeper / keeper):.2f}x"
    return f"  {label:<42} {fmt(keeper):>12} {fmt(zookeeper):>12} {unit:<6} {ratio:>7}"


def header(title: str) -> None:
    print(f"\n{title}\n  {'':<42} {'keeper':>12} {'zookeeper':>12} {'unit':<6} {'ratio*':>7}", flush=True)


@contextlib.contextmanager
def standalone_servers(work: Path, with_zookeeper: bool) -> Iterator[dict[str, str]]:
    with contextlib.ExitStack() as stack:
        servers = {"keeper": stack.enter_context(keeper_process(work / "keeper", KEEPER_SETTINGS)).address("keeper")}
        if with_zookeeper:
            servers["zookeeper"] = stack.enter_context(zookeeper_standalone(work / "zk", tick_ms=TICK_MS)).address
        yield servers


def _sync_report(title: str, servers: dict[str, str], ops: int, rounds: int) -> None:
    """The systems take turns, `rounds` times, with ops/rounds operations each: on this shared
    machine the background load drifts within a minute, and alternating keeps it from favouring
    whichever system ran first. Percentiles are over all samples of a system."""
    header(f"{title} ({ops} ops each, in {rounds} alternating rounds)")
    per_round = max(1, ops // rounds)
    merged: dict[str, dict[str, tuple[list[float], float]]] = {name: {} for name in servers}
    for round_ in range(rounds):
        for name, host in servers.items():
            for op, (samples, seconds) in sync_latency(host, per_round, f"{name}-r{round_}").items():
                total, spent = merged[name].get(op, ([], 0.0))
                merged[name][op] = (total + samples, spent + seconds)

    def figures(name: str, op: str) -> tuple[float, float, float] | None:
        if op not in merged.get(name, {}):
            return None
        samples, seconds = merged[name][op]
        return percentile(samples, 0.5), percentile(samples, 0.99), len(samples) / seconds

    for op in ("create", "set", "get"):
        k, z = figures("keeper", op), figures("zookeeper", op)
        assert k is not None
        print(row(f"{op} p50", k[0], z and z[0], "ms", False))
        print(row(f"{op} p99", k[1], z and z[1], "ms", False))
        print(row(f"{op} rate", k[2], z and z[2], "ops/s", True))


def run_load(servers: dict[str, list[str]], args: argparse.Namespace, title: str) -> None:
    if all(len(hosts) == 1 for hosts in servers.values()):
        _sync_report(f"{title}: one synchronous kazoo client", {name: hosts[0] for name, hosts in servers.items()},
                     args.ops, args.rounds)
    else:
        # Which member the client lands on decides the path of a write (a follower forwards it
        # to the leader and learns the commit back), so each system is measured both ways.
        leaders = {name: [_mode(host) for host in hosts].index("leader") for name, hosts in servers.items()}
        _sync_report(f"{title}: one synchronous kazoo client on the leader",
                     {name: hosts[leaders[name]] for name, hosts in servers.items()}, args.ops, args.rounds)
        _sync_report(f"{title}: one synchronous kazoo client on a follower",
                     {name: hosts[(leaders[name] + 1) % len(hosts)] for name, hosts in servers.items()}, args.ops,
                     args.rounds)
    if args.sync_only:
        return
    header(f"{title}: pipelined async, {args.clients} client processes x window {args.window}")
    for op in ("create", "set", "get"):
        figures = {}
        for name, hosts in servers.items():
            per_client = [hosts[i % len(hosts)] for i in range(args.clients)]
            figures[name] = pipelined_throughput(per_client, op, args.pipeline_ops, args.window, name)
        print(row(f"{op} throughput", figures["keeper"], figures.get("zookeeper"), "ops/s", True))
    header(f"{title}: lean pipelined protocol clients (no kazoo), one per member, window 500")
    for op in ("create", "set", "get"):
        figures = {name: raw_throughput(hosts, op, args.pipeline_ops * 2, 500, name)
                   for name, hosts in servers.items()}
        print(row(f"{op} throughput", figures["keeper"], figures.get("zookeeper"), "ops/s", True))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller counts")
    parser.add_argument("--only", choices=["standalone", "ensemble"], help="run one part")
    parser.add_argument("--skip-zookeeper", action="store_true", help="keeper only")
    parser.add_argument("--sync-only", action="store_true",
                        help="only the synchronous latency part (no pipelined load, kills or expiry)")
    parser.add_argument("--ops", type=int, default=2000, help="ops per synchronous measurement")
    parser.add_argument("--rounds", type=int, default=4,
                        help="alternating rounds the synchronous ops are split into")
    parser.add_argument("--pipeline-ops", type=int, default=20000, help="ops per client process")
    parser.add_argument("--clients", type=int, default=4, help="client processes for pipelined load")
    parser.add_argument("--window", type=int, default=200, help="outstanding requests per client")
    parser.add_argument("--kills", type=int, default=10, help="leader kills in the ensemble")
    parser.add_argument("--ephemeral-runs", type=int, default=5)
    parser.add_argument("--session-timeout", type=float, default=4.0)
    args = parser.parse_args()
    if args.quick:
        args.ops, args.pipeline_ops, args.kills, args.ephemeral_runs = 300, 3000, 3, 2
    with_zookeeper = not args.skip_zookeeper and zookeeper_available()
    if not with_zookeeper:
        print("(real ZooKeeper not run: --skip-zookeeper or java/zookeeper missing)")
    print(f"conditions: loopback, tickTime {TICK_MS} ms, fsync on, {os.cpu_count()} CPUs, "
          f"python {sys.version.split()[0]}")
    print("* ratio: how many times better the keeper is (>1 better, <1 worse)")
    with tempfile.TemporaryDirectory(prefix="keeper-bench-") as scratch:
        work = Path(scratch)
        if args.only in (None, "standalone"):
            with standalone_servers(work / "standalone", with_zookeeper) as servers:
                run_load({name: [address] for name, address in servers.items()}, args, "standalone")
                if not args.sync_only:
                    header(f"standalone: owner kill -9 -> ephemeral gone (session timeout {args.session_timeout} s)")
                    gone = {name: ephemeral_gone_after_kill(address, args.ephemeral_runs, args.session_timeout, name)
                            for name, address in servers.items()}
                    for label, pick in (("min", min), ("median", statistics.median), ("max", max)):
                        print(row(f"gone after kill, {label}", pick(gone["keeper"]),
                                  pick(gone["zookeeper"]) if "zookeeper" in gone else None, "s", False))
        if args.only in (None, "ensemble"):
            run_ensemble(work / "ensemble", args, with_zookeeper)
    return 0


def run_ensemble(work: Path, args: argparse.Namespace, with_zookeeper: bool) -> None:
    with contextlib.ExitStack() as stack:
        keepers = stack.enter_context(keeper_ensemble(work / "keepers", extra=KEEPER_SETTINGS,
                                                      fixed_client_ports=True))
        servers = {"keeper": [proc.address("keeper") for proc in keepers]}
        zks = []
        if with_zookeeper:
            zks = stack.enter_context(zookeeper_ensemble(work / "zks", tick_ms=TICK_MS))
            servers["zookeeper"] = [zk.address for zk in zks]
        time.sleep(1.0)
        run_load(servers, args, "3-member ensemble")
        if args.sync_only:
            return
        header(f"3-member ensemble: leader kill -9 -> first successful write ({args.kills} kills)")

        def kill_keeper(index: int) -> None:
            keepers[index].kill9()

        def restart_keeper(index: int) -> None:
            keepers[index] = start_roost(keepers[index].args, expect=("keeper",))
            stack.callback(keepers[index].stop)

        def kill_zk(index: int) -> None:
            zks[index].kill9()

        def restart_zk(index: int) -> None:
            zks[index].restart()
            wait_serving(zks[index])

        figures = {"keeper": leader_kill_recovery(servers["keeper"], kill_keeper, restart_keeper, args.kills, "keeper")}
        if with_zookeeper:
            figures["zookeeper"] = leader_kill_recovery(servers["zookeeper"], kill_zk, restart_zk, args.kills, "zk")
        for label, pick in (("min", min), ("median", statistics.median), ("max", max)):
            print(row(f"first write after leader kill, {label}", pick(figures["keeper"]),
                      pick(figures["zookeeper"]) if "zookeeper" in figures else None, "s", False))


if __name__ == "__main__":
    sys.exit(main())
