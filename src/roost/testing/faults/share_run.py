"""One share-group fault run: a keeper and three brokers in network namespaces, the share workload
(share_workload.py), and kill -9 of the two brokers a share group's durability depends on, in
turn: the leader of the data partition (its share-partition's in-flight state dies with it: the
next leader rebuilds it from the share coordinator) and the share-partition's share coordinator
(the leader of its `__share_group_state` partition: the next one replays the log), each killed
while acknowledgements are in flight and restarted after a hold. Then the producer stops, the
consumers work until the coordinator's start offset passes every record (quiescence), and the
history is judged by roost.testing.history.share (and the report written, as fault_run's).

    python scripts/share_chaos.py --kills 10 --minutes 10          # the long run
    tests/faults/test_share_fault_run.py                           # two kills, in CI
"""

from __future__ import annotations

import random
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from roost.testing.faults import report
from roost.testing.faults.netns import Network, remove_leftovers
from roost.testing.faults.nodes import BROKER_PORT, KEEPER_CLIENT_PORT, Node, broker_nodes, keeper_nodes
from roost.testing.faults.recorder import Recorder
from roost.testing.faults.share_workload import LOCK_MS, ShareWorkload
from roost.testing.history import share as share_checker
from roost.testing.history.model import History, Verdict

ROLES = ("data leader", "share coordinator")
PROGRESS_RECORDS = 100  # acknowledged between two faults, so that each kill lands mid-stream
PROGRESS_WAIT_S = 30.0
SHARE_SETTINGS = {
    "group.share.min.record.lock.duration.ms": 1000,  # the workload's 5 s lock is allowed
    "group.share.min.heartbeat.interval.ms": 1000,
    "group.share.heartbeat.interval.ms": 1000,  # members get their assignment a second after joining
    "share.coordinator.state.topic.num.partitions": 3,
    "share.coordinator.write.timeout.ms": 3000,
}


@dataclass
class ShareOutcome:
    valid: bool | None
    verdict: Verdict
    history: History
    report: Path
    kills: Counter[str] = field(default_factory=Counter)
    quiesced: bool = False
    seconds: float = 0.0
    run_id: str = ""


def run(seed: int, kills: int, out: Path, consumers: int = 3, rate: float = 100.0,
        hold_s: tuple[float, float] = (1.0, 3.0), quiet_s: tuple[float, float] = (2.0, 4.0),
        deadline_s: float = 600.0, quiesce_s: float = 60.0, say=print) -> ShareOutcome:
    """`kills` kills, alternating the two roles (the first: the data leader), each after a quiet
    spell of `quiet_s` with records flowing; stops starting new ones after `deadline_s`."""
    started = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    remove_leftovers()
    rng = random.Random(seed)
    recorder = Recorder()
    network = Network(4)
    nodes: list[Node] = []
    workload: ShareWorkload | None = None
    done: Counter[str] = Counter()
    quiesced = False
    try:
        network.open()
        (keeper,) = keeper_nodes(network, [1], out)
        brokers = broker_nodes(network, [2, 3, 4], f"{keeper.address}:{KEEPER_CLIENT_PORT}", out,
                               settings=SHARE_SETTINGS)
        nodes += [keeper, *brokers]
        for node in nodes:  # all at once: a broker's imports outlast the keeper's start
            node.start(wait=False)
        for node in nodes:
            node.wait_ready()
        by_id = {broker_id: node for broker_id, node in enumerate(brokers, start=1)}
        workload = ShareWorkload(",".join(f"{n.address}:{BROKER_PORT}" for n in brokers), recorder,
                                 consumers=consumers, rate=rate)
        workload.start()
        say(f"4 nodes up; {consumers} share consumers, {rate:g} records/s; {kills} kills")
        for n in range(kills):
            if time.monotonic() - started > deadline_s:
                break
            # mid-stream: a quiet spell, and records acknowledged since the last fault
            time.sleep(rng.uniform(*quiet_s))
            _progress(workload, PROGRESS_RECORDS, PROGRESS_WAIT_S)
            role = ROLES[n % 2]
            victim, both = _victim(workload, role, by_id)
            if victim is None:
                say(f"kill {n + 1}: nobody is {role} now; skipped")
                continue
            t = recorder.t()
            victim.kill()
            recorder.fault("kill", t, {"node": victim.index, "role": role, "both roles": both})
            done[role] += 1
            done["both roles"] += both
            say(f"kill {n + 1}: {role} (node {victim.index}{', both roles' if both else ''}) at {t:.1f} s, "
                f"{len(workload.ended)} records ended")
            time.sleep(rng.uniform(*hold_s))
            t = recorder.t()
            last = n == kills - 1 or time.monotonic() - started > deadline_s
            victim.start(wait=not last)  # the last one starts while the run quiesces (not waited for:
            # it may still be starting when the run ends; kill -9 ends it as it ends the others)
            recorder.fault("restart", t, {"node": victim.index})
        recorder.fault("heal-all", recorder.t())
        workload.stop_producing(60)
        say(f"producer stopped: {workload.acked_sends} records acknowledged; quiescing")
        # An accept left unanswered by a dead leader comes back after its lock: allow a few locks.
        quiesced = workload.quiesce(quiesce_s + 3 * LOCK_MS / 1000)
        if workload.errors:
            say(f"workload errors: {workload.errors[:5]}")
    finally:
        if workload is not None:
            workload.stop_producer.set()
            workload.stop_consumers.set()
            for thread in workload.threads:
                thread.join(30)
        for node in nodes:  # the history is complete: kill -9 is the quickest end, and all it needs
            try:
                node.kill()
            except Exception as error:  # keep removing the rest
                say(f"stopping node {node.index}: {error!r}")
        network.close()
    history = recorder.history()
    history.dump(out / "history.jsonl")
    verdict = share_checker.check(history.ops)  # the kills too: a count may go back across one
    valid: bool | None = verdict.valid if quiesced or verdict.valid is False else None
    settings = {"system": "share", "seed": seed, "kills": kills, "consumers": consumers, "rate": rate,
                "quiesced": quiesced, "lock_ms": LOCK_MS}
    path = report.write(out, history, [verdict], settings)
    return ShareOutcome(valid, verdict, history, path, done, quiesced, time.monotonic() - started, network.run_id)


def _progress(workload: ShareWorkload, records: int, timeout: float) -> None:
    """Wait (at most `timeout`) until `records` more records were accepted or rejected."""
    target = len(workload.ended) + records
    deadline = time.monotonic() + timeout
    while len(workload.ended) < target and time.monotonic() < deadline:
        time.sleep(0.2)


def _victim(workload: ShareWorkload, role: str, by_id: dict[int, Node]) -> tuple[Node | None, bool]:
    """The broker in `role` now, and whether it holds the other role too (the share coordinator
    and the data leader are often one broker: both partitions prefer the same one)."""
    for _ in range(20):  # bounded: the cluster answers within seconds of the last restart
        leader, coordinator = workload.where()
        holder = coordinator[0] if coordinator else None
        broker = leader if role == ROLES[0] else holder
        if broker in by_id and by_id[broker].running:
            return by_id[broker], leader == holder
        time.sleep(0.5)
    return None, False
