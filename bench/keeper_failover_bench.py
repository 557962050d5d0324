"""Keeper ensemble failover: kill -9 of the leader of a 3-member ensemble -> first successful write.

A kazoo client connected to the whole ensemble writes a sequential znode every few milliseconds
while the leader is killed; the figure is the time from the kill to the first create that
succeeds, over N kills (the member is restarted and the ensemble healthy again before the next).
Each kill also checks that the client kept its session (same session id, its ephemeral znode
still there) and says whether the client had been connected to the member that died (it then
first has to reconnect to another member).

    python bench/keeper_failover_bench.py                  # 20 kills of keepers, default settings
    python bench/keeper_failover_bench.py --kills 5 --zookeeper   # also a real ZooKeeper 3.8

Conditions printed with the figures: the keepers' defaults (`roost keeper` as `roost up --keepers
3` starts them: tickTime 2000 ms, fsync on; raft ticks of 40 ms, election timeout 0.4-0.8 s),
kazoo's defaults with a 10 s session timeout, loopback, this machine shared with other work (the
figures are noisy). CPU: the two surviving members' CPU seconds from the kill to the first write.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import logging

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from process_cpu import cpu_seconds
from tests.keeper.zkharness import (
    four_letter,
    keeper_ensemble,
    wait_serving,
    zookeeper_available,
    zookeeper_ensemble,
)
from tests.support.procs import start_roost


@dataclass
class Kill:
    seconds: float
    client_on_leader: bool
    session_kept: bool
    survivors_cpu: float


def _mode(address: str) -> str:
    try:
        for line in four_letter(address, "srvr", timeout=2).splitlines():
            if line.startswith("Mode:"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "down"


def _connected_port(client: KazooClient) -> int | None:
    """The member's client port kazoo is connected to (kazoo keeps no public accessor)."""
    try:
        return client._connection._socket.getpeername()[1]
    except (AttributeError, OSError):
        return None


def leader_kills(addresses: list[str], pids: Callable[[], list[int]], kill: Callable[[int], None],
                 restart: Callable[[int], None], kills: int, tag: str) -> list[Kill]:
    client = KazooClient(hosts=",".join(addresses), timeout=10.0)
    client.start(timeout=15)
    results = []
    try:
        client.ensure_path(f"/failover-{tag}")
        for round_ in range(kills):
            deadline = time.monotonic() + 120
            while True:
                modes = [_mode(address) for address in addresses]
                if "leader" in modes and modes.count("follower") == len(addresses) - 1:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"ensemble not healthy: {modes}")
                time.sleep(0.1)
            ephemeral = client.create(f"/failover-{tag}/owner-{round_}", ephemeral=True)
            session = client.client_id[0]
            leader = modes.index("leader")
            on_leader = _connected_port(client) == int(addresses[leader].rsplit(":", 1)[1])
            survivors = [pid for k, pid in enumerate(pids()) if k != leader]
            cpu_before = sum(cpu_seconds(pid) for pid in survivors)
            killed = time.monotonic()
            kill(leader)
            while True:
                try:
                    client.create(f"/failover-{tag}/k{round_}-", sequence=True)
                    break
                except KazooException:
                    if time.monotonic() - killed > 120:
                        raise
                    time.sleep(0.002)
            seconds = time.monotonic() - killed
            cpu = sum(cpu_seconds(pid) for pid in survivors) - cpu_before
            kept = client.client_id[0] == session and client.exists(ephemeral) is not None
            results.append(Kill(seconds, on_leader, kept, cpu))
            print(f"  kill {round_ + 1}: {seconds:.3f} s, client on the dead leader: {on_leader}, "
                  f"session kept: {kept}, survivors' CPU {cpu:.3f} s", flush=True)
            restart(leader)
    finally:
        client.stop()
        client.close()
    return results


def summary(label: str, kills: list[Kill]) -> None:
    def line(name: str, values: list[float]) -> None:
        if values:
            print(f"{label:>10} {name:<34} n={len(values):>2}  min {min(values):.3f}  "
                  f"median {statistics.median(values):.3f}  max {max(values):.3f} s")

    line("first write after leader kill", [k.seconds for k in kills])
    line("  ... client was on a follower", [k.seconds for k in kills if not k.client_on_leader])
    line("  ... client was on the leader", [k.seconds for k in kills if k.client_on_leader])
    line("survivors' CPU, kill to write", [k.survivors_cpu for k in kills])
    print(f"{label:>10} sessions kept: {sum(k.session_kept for k in kills)}/{len(kills)}")


def run_keepers(work: Path, kills: int) -> list[Kill]:
    with contextlib.ExitStack() as stack:
        keepers = stack.enter_context(keeper_ensemble(work / "keepers", fixed_client_ports=True))
        addresses = [proc.address("keeper") for proc in keepers]

        def restart(index: int) -> None:
            keepers[index] = start_roost(keepers[index].args, expect=("keeper",))
            stack.callback(keepers[index].stop)

        return leader_kills(addresses, lambda: [proc.popen.pid for proc in keepers],
                            lambda index: keepers[index].kill9(), restart, kills, "keeper")


def run_zookeeper(work: Path, kills: int) -> list[Kill]:
    with zookeeper_ensemble(work / "zks") as zks:
        def restart(index: int) -> None:
            zks[index].restart()
            wait_serving(zks[index])

        return leader_kills([zk.address for zk in zks], lambda: [zk.popen.pid for zk in zks],
                            lambda index: zks[index].kill9(), restart, kills, "zk")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--zookeeper", action="store_true", help="also a real ZooKeeper 3.8 ensemble")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)  # kazoo narrates every reconnect otherwise
    print(f"conditions: 3 members on loopback, defaults, kazoo session timeout 10 s, {os.cpu_count()} CPUs "
          f"shared, load average {os.getloadavg()[0]:.1f}, python {sys.version.split()[0]}")
    started_cpu = time.process_time()
    with tempfile.TemporaryDirectory(prefix="keeper-failover-") as scratch:
        results = {"keeper": run_keepers(Path(scratch), args.kills)}
        if args.zookeeper and zookeeper_available():
            results["zookeeper"] = run_zookeeper(Path(scratch), args.kills)
    for label, kills in results.items():
        summary(label, kills)
    print(f"bench process CPU {time.process_time() - started_cpu:.1f} s, load average now {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
