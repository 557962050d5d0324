"""Chaos for the replicated cluster, bounded in rounds and time: while a producer streams keyed
messages with acks=all and idempotence and a group of three consumers reads and commits, kill or
stop a random broker (the controller among them), wait, restart it, wait until every replica is
back in sync, and again. At most one broker is down at a time (replication factor 3,
min.insync.replicas 2 tolerates one).

Afterwards: every acknowledged message is in the log once and in order per key, the group has
received every one, and no committed offset of the group ever went back (sampled all along).
Used by tests/cluster/test_chaos.py (a few rounds in CI) and scripts/cluster_chaos.py (long runs).
"""

from __future__ import annotations

import random
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import NewTopic

from tests.cluster.clients import Acks, ConfluentProducer, GroupMember, n_of
from tests.cluster.verify import NeverBack, check_log, read_log, stored_batches
from tests.support.cluster import LocalCluster
from tests.support.workload import messages

TOPIC = "chaos"
GROUP = "chaos-group"
PARTITIONS = 3


@dataclass
class ChaosReport:
    rounds: list[str] = field(default_factory=list)
    acked: int = 0
    failed: int = 0
    offsets_checked: int = 0


class OffsetWatcher(threading.Thread):
    """Samples the group's committed offsets; any that goes back is a failure."""

    def __init__(self, bootstrap: Callable[[], str], stop: threading.Event) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.stop = bootstrap, stop
        self.seen = NeverBack("committed offset")

    def run(self) -> None:
        while not self.stop.wait(1.0):
            try:
                probe = Consumer({"bootstrap.servers": self.bootstrap(), "group.id": GROUP,
                                  "enable.auto.commit": False})
                try:
                    found = probe.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=5)
                finally:
                    probe.close()
            except Exception:
                continue  # the coordinator is moving: sample again later
            for tp in found:
                if tp.error is None and tp.offset >= 0:
                    self.seen.see(tp.partition, tp.offset)


def run_chaos(cluster: LocalCluster, rounds: int, seed: int, say: Callable[[str], None] = lambda line: None,
              rate: int = 1000, deadline_s: float = 600.0) -> ChaosReport:
    rng = random.Random(seed)
    report = ChaosReport()
    admin = cluster.admin()
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})])[TOPIC].result(30)
    cluster.wait_for_isr(TOPIC)
    stop_group, stop_all = threading.Event(), threading.Event()
    members = [GroupMember("confluent", cluster.bootstrap, GROUP, TOPIC, stop_group) for _ in range(3)]
    for member in members:
        member.start()
    watcher = OffsetWatcher(cluster.running_bootstrap, stop_all)
    watcher.start()
    acks = Acks()
    sent = [0]

    def produce() -> None:
        producer = ConfluentProducer(cluster.bootstrap, acks)
        start = time.monotonic()
        try:
            for n, message in enumerate(messages(10**9, TOPIC)):
                if stop_all.is_set():
                    break
                delay = start + n / rate - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                producer.send(TOPIC, message, n)
                sent[0] = n + 1
        finally:
            producer.close()

    producing = threading.Thread(target=produce, daemon=True)
    producing.start()
    ends_at = time.monotonic() + deadline_s
    try:
        for round_index in range(rounds):
            if time.monotonic() > ends_at:
                say(f"deadline reached after {round_index} rounds")
                break
            controller = cluster.controller()
            victim = controller if rng.random() < 0.3 else rng.choice(sorted(cluster.brokers))
            how = rng.choice(["kill -9", "SIGTERM"])
            down = rng.uniform(0.2, 3.0)
            line = (f"round {round_index + 1}: {how} broker {victim}"
                    f"{' (the controller)' if victim == controller else ''}, down {down:.1f} s")
            say(line)
            report.rounds.append(line)
            if how == "kill -9":
                cluster.kill(victim)
            else:
                cluster.brokers[victim].process.stop(signal.SIGTERM, timeout=60)  # type: ignore[union-attr]
            time.sleep(down)
            cluster.restart(victim)
            cluster.wait_for_brokers(set(cluster.brokers), timeout=90)
            cluster.wait_for_isr(TOPIC, full=True, timeout=120)
            time.sleep(rng.uniform(0.5, 2.0))
    finally:
        stop_all.set()
        producing.join(180)
        watcher.join(30)
    acked = set(acks.ok)
    report.acked, report.failed = len(acked), len(acks.failed)
    say(f"sent {sent[0]}, acknowledged {len(acked)}, failed {len(acks.failed)}")

    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and not acked <= {n_of(r.value) for m in members for r in list(m.received)}:
        time.sleep(0.5)
    stop_group.set()
    for member in members:
        member.join(60)
    got = {n_of(r.value) for m in members for r in m.received}
    missing = acked - got
    assert not missing, f"the group never received {len(missing)} acknowledged messages, e.g. {sorted(missing)[:10]}"
    for member in members:
        assert not member.errors, member.errors
    assert not watcher.seen.regressions, watcher.seen.regressions
    report.offsets_checked = watcher.seen.samples
    check_log(read_log(cluster, TOPIC, PARTITIONS), acked, stored_batches(cluster, TOPIC))
    return report
