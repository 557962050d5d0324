"""One fault run: namespaces up, nodes started, workload and nemesis for `duration` seconds, every
fault healed, the history checked, the report written, everything removed.

    python scripts/fault_run.py --system keeper --seed 7 --duration 1800 --out runs/keeper-7
    python scripts/fault_run.py --system broker --faults kill,partition,powercut --duration 600
    python scripts/fault_run.py --system share --duration 600    # share groups (also scripts/share_chaos.py)

Exit status: 0 every checker valid; 1 a checker found a violation; 2 a checker could not decide
(the linearizability search gave up) or the run could not finish its drain; 77 namespaces are
unavailable here (not root, no nftables): nothing was run.
"""

from __future__ import annotations

import argparse
import logging
import random
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from roost.testing.faults import report, share_run
from roost.testing.faults.broker_workload import BrokerWorkload
from roost.testing.faults.keeper_workload import INITIAL, KEY_LIFETIME_S, KeeperWorkload
from roost.testing.faults.nemesis import KINDS, Nemesis
from roost.testing.faults.netns import Network, remove_leftovers, why_unavailable
from roost.testing.faults.nodes import (
    BROKER_PORT,
    KEEPER_CLIENT_PORT,
    Node,
    broker_nodes,
    keeper_mode,
    keeper_nodes,
)
from roost.testing.faults.recorder import Recorder
from roost.testing.history import broker as broker_checker
from roost.testing.history import linearizable, zookeeper
from roost.testing.history.model import History, Verdict

UNAVAILABLE = 77
SETTLE_S = 3.0


@dataclass
class Outcome:
    valid: bool | None
    verdicts: list[Verdict]
    history: History
    report: Path
    faults: dict[str, int]
    run_id: str  # in the names of its namespaces and links


def check_keeper(history: History) -> list[Verdict]:
    ops = history.client_ops()
    # Every write writes data unique in the run, so unknown writes can be settled before the search.
    return [linearizable.check(ops, lambda key: linearizable.versioned_register(INITIAL, 0), budget=5_000_000,
                               settle_unknowns=True),
            zookeeper.check(ops, grace_s=2.0, event_slack_s=1.0)]


def check_broker(history: History) -> list[Verdict]:
    return [broker_checker.check(history.client_ops())]


def run(system: str, seed: int, duration: float, kinds: tuple[str, ...], out: Path, nodes_count: int = 3,
        clients: int = 4, say=print, hold_s: tuple[float, float] = (2.0, 6.0),
        quiet_s: tuple[float, float] = (2.0, 5.0), key_lifetime_s: float = KEY_LIFETIME_S) -> Outcome:
    """One run; faults go on past `duration` until each kind has happened once. `key_lifetime_s`:
    how long the keeper workload uses each register before moving to a fresh one."""
    assert system in ("keeper", "broker")
    for kind in kinds:
        assert kind in KINDS, f"unknown fault {kind!r}: {', '.join(KINDS)}"
    out.mkdir(parents=True, exist_ok=True)
    remove_leftovers()
    rng = random.Random(seed)
    recorder = Recorder()
    keepers_n = nodes_count if system == "keeper" else 1
    size = keepers_n + (nodes_count if system == "broker" else 0)
    network = Network(size)
    nodes: list[Node] = []
    workload: KeeperWorkload | BrokerWorkload | None = None
    nemesis: Nemesis | None = None
    drained = True
    try:
        network.open()
        say(f"network {network.subnet}.0/24, namespaces {network.namespace(1)}..{network.namespace(size)}")
        power = "powercut" in kinds
        keepers = keeper_nodes(network, list(range(1, keepers_n + 1)), out,
                               track_syncs=power and system == "keeper")
        nodes += keepers
        for node in keepers:
            node.start(wait=False)
        for node in keepers:
            node.wait_ready()
        zk = ",".join(f"{node.address}:{KEEPER_CLIENT_PORT}" for node in keepers)
        if system == "keeper":
            targets, bystanders = keepers, []
            workload = KeeperWorkload(zk, recorder, workers=clients, seed=seed, key_lifetime_s=key_lifetime_s)
        else:
            brokers = broker_nodes(network, list(range(keepers_n + 1, size + 1)), zk, out, track_syncs=power)
            nodes += brokers
            for node in brokers:
                node.start(wait=False)
            for node in brokers:
                node.wait_ready()
            targets, bystanders = brokers, [node.index for node in keepers]
            bootstrap = ",".join(f"{node.address}:{BROKER_PORT}" for node in brokers)
            workload = BrokerWorkload(bootstrap, recorder, producers=max(1, clients // 2))
        say(f"{len(nodes)} nodes up; workload starting")
        workload.start()
        nemesis = Nemesis(network, targets, recorder, rng, kinds, hold_s=hold_s, quiet_s=quiet_s,
                          bystanders=bystanders)
        if system == "keeper":
            nemesis.leader = lambda: next((n.index for n in keepers if keeper_mode(n) == "leader"), None)
        end = recorder.t() + duration
        nemesis_thread = threading.Thread(target=nemesis.run, args=(end,), name="nemesis", daemon=True)
        nemesis_thread.start()
        while nemesis_thread.is_alive() and recorder.t() < end + 120:
            nemesis_thread.join(1.0)
        nemesis.stop.set()
        nemesis_thread.join(60)
        t = recorder.t()
        nemesis.heal_all()
        recorder.fault("heal-all", t)
        say(f"faults done {dict(nemesis.counts)}; healed; settling")
        time.sleep(SETTLE_S)
        if isinstance(workload, KeeperWorkload):
            workload.join(30)
            workload.drain()
        else:
            workload.stop_producing(60)
            drained = workload.drain()
            workload.stop_consuming(30)
        if workload.errors:
            say(f"workload errors: {workload.errors[:5]}")
        if isinstance(workload, BrokerWorkload) and workload.replaced_producers:
            say(f"producers replaced after a fatal (gapless) error: {workload.replaced_producers}")
    finally:
        if nemesis is not None:
            nemesis.stop.set()
        if workload is not None:
            workload.stop.set()
            if isinstance(workload, BrokerWorkload):
                workload.stop_consumers.set()
        for node in nodes:
            try:
                node.stop()
            except Exception as error:  # keep removing the rest
                say(f"stopping node {node.index}: {error!r}")
        network.close()
    history = recorder.history()
    history.dump(out / "history.jsonl")  # first, so that a checker's crash still leaves it
    say(f"{len(history)} operations recorded; checking")
    verdicts = check_keeper(history) if system == "keeper" else check_broker(history)
    valid: bool | None = all(v.valid for v in verdicts) if all(v.valid is not None for v in verdicts) else (
        False if any(v.valid is False for v in verdicts) else None)
    if not drained and valid:
        valid = None
    settings = {"system": system, "seed": seed, "duration": duration, "faults": ",".join(kinds),
                "nodes": nodes_count, "clients": clients, "drained": drained}
    if system == "keeper":
        settings["key_lifetime_s"] = key_lifetime_s
    path = report.write(out, history, verdicts, settings)
    return Outcome(valid, verdicts, history, path, dict(nemesis.counts) if nemesis else {},
                   network.run_id)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--system", choices=["keeper", "broker", "share"], required=True,
                        help="share: share groups under kill -9 of the data leader and the share coordinator "
                             "(share_run.py; --duration bounds the kills, one every ~20 s)")
    parser.add_argument("--seed", type=int, default=int(time.time()) % 100000)
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of faults (default 60)")
    parser.add_argument("--faults", default=",".join(KINDS), help=f"comma-separated, of {', '.join(KINDS)}")
    parser.add_argument("--nodes", type=int, default=3, help="keepers (keeper) or brokers (broker); default 3")
    parser.add_argument("--clients", type=int, default=4, help="client sessions / producers+consumers")
    parser.add_argument("--key-lifetime", type=float, default=KEY_LIFETIME_S,
                        help=f"keeper: seconds each register is used before a fresh one (default {KEY_LIFETIME_S:g})")
    parser.add_argument("--out", type=Path, default=None, help="output directory (default runs/SYSTEM-SEED)")
    args = parser.parse_args(argv)
    logging.getLogger("kazoo").setLevel(logging.CRITICAL)  # every reconnect under faults is expected
    why = why_unavailable()
    if why:
        print(f"fault_run: cannot run here: {why}", file=sys.stderr)
        return UNAVAILABLE
    out = args.out or Path("runs") / f"{args.system}-{args.seed}"
    if args.system == "share":
        shared = share_run.run(args.seed, max(2, int(args.duration // 20)), out, consumers=args.clients,
                               deadline_s=args.duration, hold_s=(1.0, 4.0), quiet_s=(3.0, 8.0))
        print(shared.verdict.explain())
        print(f"kills {dict(shared.kills)}; quiesced {shared.quiesced}; report: {shared.report}")
        return {True: 0, False: 1, None: 2}[shared.valid]
    kinds = tuple(k.strip() for k in args.faults.split(",") if k.strip())
    outcome = run(args.system, args.seed, args.duration, kinds, out, args.nodes, args.clients,
                  key_lifetime_s=args.key_lifetime)
    for verdict in outcome.verdicts:
        print(verdict.explain())
    print(f"report: {outcome.report}")
    return {True: 0, False: 1, None: 2}[outcome.valid]
