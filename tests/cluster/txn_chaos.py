"""Chaos for transactions (issue 20), bounded in rounds and time: a consume-transform-produce
application (tests/cluster/txn_app.py, its own process) turns every input record into one output
record inside transactions that also commit its consumed offsets, while each round kill -9s, in the
middle of transactions, one of: the broker coordinating the application's transactional.id, the
leader of an output partition, or the application itself (then started again). A killed broker is
restarted after a moment and the round ends when every replica is back in sync; at most one broker
is down at a time (replication factor 3, min.insync.replicas 2).

Afterwards: the output, read with read_committed, holds every input record exactly once; no
transaction is left open (the coordinator lists none Ongoing, and every output partition's LSO has
reached its high watermark); and the output partitions' LSO, sampled all along, never went back.
Used by tests/cluster/test_txn_chaos.py (a few rounds in CI) and scripts/txn_chaos.py (long runs).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from confluent_kafka import Consumer, IsolationLevel, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from roost.admin.target import Target
from roost.admin.transactions import coordinator_of, list_transactions
from roost.broker.metadata.catalog import TRANSACTION_STATE_TOPIC
from roost.broker.txn.records import txn_partition_for
from tests.cluster.verify import NeverBack
from tests.support.cluster import LocalCluster
from tests.support.procs import stop_process, wait_for
from tests.support.reading import read_to_end

INPUT, OUTPUT = "txn-chaos-in", "txn-chaos-out"
GROUP, TRANSACTIONAL_ID = "txn-chaos-group", "txn-chaos-app"
PARTITIONS = 3
TXN_STATE_PARTITIONS = 3
# Settings for LocalCluster.start: few transaction-state partitions, so the coordinator is easy to
# name and quick to load.
CLUSTER_SETTINGS = {"transaction.state.log.num.partitions": TXN_STATE_PARTITIONS}
FAULTS = ("coordinator", "output leader", "application")
REPO = Path(__file__).resolve().parents[2]


@dataclass
class TxnChaosReport:
    rounds: list[str] = field(default_factory=list)
    faults: list[str] = field(default_factory=list)  # each round's kind, one of FAULTS
    records: int = 0  # input records, each expected once in the committed output
    committed_output: int = 0
    aborted_output: int = 0  # records in the log that read_committed skips (aborted transactions)
    app_starts: int = 0
    app_exits: dict[int, int] = field(default_factory=dict)  # exit status -> count (-9: killed by us)
    app_aborts: int = 0  # abort_transaction calls the application made itself
    lso_samples: int = 0
    mid_transaction: int = 0  # rounds that struck while an output partition held undecided records
    seconds: float = 0.0


# the application process ---------------------------------------------------------------------
class Application:
    """The application's current process, restarted whenever it ends until told to stop: a
    killed or failed instance is replaced as a real deployment's supervisor would."""

    def __init__(self, bootstrap: str, logs: Path, report: TxnChaosReport, idle_s: float) -> None:
        self.bootstrap, self.logs, self.report, self.idle_s = bootstrap, logs, report, idle_s
        self.lock = threading.Lock()
        self.process: subprocess.Popen[bytes] | None = None
        self.log: IO[bytes] | None = None
        self.wanted = True
        self.stop = threading.Event()
        self.watcher = threading.Thread(target=self._keep_running, daemon=True)

    def start(self) -> None:
        with self.lock:
            self._spawn()
        self.watcher.start()

    def _spawn(self) -> None:
        self.report.app_starts += 1
        self.log = (self.logs / f"app-{self.report.app_starts}.log").open("wb")
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "src"), str(REPO)]), PYTHONUNBUFFERED="1")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.cluster.txn_app", "--bootstrap", self.bootstrap, "--input", INPUT,
             "--output", OUTPUT, "--group", GROUP, "--transactional-id", TRANSACTIONAL_ID,
             "--idle-s", str(self.idle_s)],
            cwd=REPO, env=env, stdout=self.log, stderr=subprocess.STDOUT)

    def _reap(self, status: int) -> None:
        self.report.app_exits[status] = self.report.app_exits.get(status, 0) + 1
        if self.log is not None:
            self.log.close()
        self.process = None

    def _keep_running(self) -> None:
        while not self.stop.wait(0.2):
            with self.lock:
                if self.process is not None and (status := self.process.poll()) is not None:
                    self._reap(status)
                    if self.wanted:
                        self._spawn()

    def kill9(self) -> None:
        with self.lock:
            if self.process is not None:
                self._reap(stop_process(self.process, signal.SIGKILL))
            self._spawn()

    def close(self) -> None:
        """SIGTERM (it finishes its transaction), escalating to SIGKILL; no restart after."""
        with self.lock:
            self.wanted = False
            if self.process is not None:
                self._reap(stop_process(self.process, signal.SIGTERM, timeout=30))
        self.stop.set()
        if self.watcher.is_alive():
            self.watcher.join(10)

    def aborts(self) -> int:
        return sum((self.logs / f"app-{n}.log").read_text(errors="replace").count(" aborted\n")
                   for n in range(1, self.report.app_starts + 1))


# the input ------------------------------------------------------------------------------------
def value_of(n: int) -> bytes:
    return b"in-%d" % n


def fill_input(bootstrap: str, first: int, count: int) -> None:
    """Records first..first+count-1, acknowledged by all in-sync replicas (idempotent, so a retry
    never writes one twice)."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    failures: list[str] = []
    for n in range(first, first + count):
        while True:
            try:
                producer.produce(INPUT, value_of(n), key=value_of(n),
                                 on_delivery=lambda error, _m: error and failures.append(str(error)))
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0, "input records left undelivered"
    assert not failures, f"input records failed: {failures[:3]}"


class Feeder(threading.Thread):
    """Adds input records at `rate` per second while the rounds run, so that the application is
    in the middle of a transaction whenever a fault strikes; and on demand a burst, so that its
    consumer holds records fetched but not yet handed to it (the fetch path's failovers must not
    skip them)."""

    def __init__(self, bootstrap: str, first: int, rate: int) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.next, self.rate = bootstrap, first, rate
        self.stop = threading.Event()
        self.failure: BaseException | None = None
        self.lock = threading.Lock()
        self.extra = 0  # a burst asked for, written with the next batch
        self.written = threading.Condition(self.lock)

    def run(self) -> None:
        try:
            while not self.stop.wait(0.5):
                with self.lock:
                    count, self.extra = max(1, self.rate // 2) + self.extra, 0
                fill_input(self.bootstrap, self.next, count)
                with self.lock:
                    self.next += count
                    self.written.notify_all()
        except BaseException as failure:  # reported by the harness, which checks it
            self.failure = failure

    def burst(self, count: int, timeout: float = 60.0) -> None:
        """`count` more records with the next batch; returns once they are written (or after
        `timeout`: the harness checks the feeder's failure at the end)."""
        with self.lock:
            self.extra += count
            target = self.next + count
            self.written.wait_for(lambda: self.next >= target or self.failure is not None, timeout)


# offsets --------------------------------------------------------------------------------------
def offsets_admin(bootstrap: str) -> AdminClient:
    """A client for ListOffsets; replaced after an error (see wait_for_open_transaction)."""
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 10000})


def end_offsets(admin_client: AdminClient, topic: str, isolation: IsolationLevel) -> dict[int, int]:
    """The partitions' ends: the high watermark, or with READ_COMMITTED the LSO (ListOffsets
    LATEST under read_committed)."""
    asked = {TopicPartition(topic, p): OffsetSpec.latest() for p in range(PARTITIONS)}
    found = admin_client.list_offsets(asked, isolation_level=isolation, request_timeout=10)
    return {tp.partition: future.result(15).offset for tp, future in found.items()}


class LsoWatcher(threading.Thread):
    """Samples the output partitions' LSO; any that goes back is a failure."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap = bootstrap
        self.admin = offsets_admin(bootstrap)
        self.stop = threading.Event()
        self.seen = NeverBack(f"LSO of {OUTPUT}")

    def run(self) -> None:
        while not self.stop.wait(0.3):
            try:
                found = end_offsets(self.admin, OUTPUT, IsolationLevel.READ_COMMITTED)
            except KafkaException:
                self.admin = offsets_admin(self.bootstrap)  # a stale leader epoch: see wait_for_open_transaction
                continue  # a leader is moving: sample again later
            for partition, lso in found.items():
                if lso >= 0:
                    self.seen.see(partition, lso)


def committed_offsets(bootstrap: str) -> dict[int, int]:
    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False,
                      "isolation.level": "read_committed"})
    try:
        found = probe.committed([TopicPartition(INPUT, p) for p in range(PARTITIONS)], timeout=10)
    finally:
        probe.close()
    return {tp.partition: tp.offset for tp in found if tp.error is None}


def all_consumed(bootstrap: str) -> bool:
    """The group's committed offsets (made visible by transaction commits) reached the input's end."""
    try:
        ends = end_offsets(offsets_admin(bootstrap), INPUT, IsolationLevel.READ_UNCOMMITTED)
        return committed_offsets(bootstrap) == ends
    except KafkaException:
        return False


# reading back ---------------------------------------------------------------------------------
def read_all(bootstrap: str, topic: str, isolation: str, timeout: float = 60.0) -> list[bytes]:
    """Every value of `topic` from offset 0 up to each partition's end (for read_committed its
    LSO), as a consumer with `isolation` sees it."""
    return read_to_end(bootstrap, topic, PARTITIONS, isolation, timeout=timeout, must_reach_end=True)


def check_output(bootstrap: str, records: int, report: TxnChaosReport) -> None:
    committed = read_all(bootstrap, OUTPUT, "read_committed")
    everything = read_all(bootstrap, OUTPUT, "read_uncommitted")
    report.committed_output, report.aborted_output = len(committed), len(everything) - len(committed)
    expected = {b"out-" + value_of(n) for n in range(records)}
    seen: dict[bytes, int] = {}
    for value in committed:
        seen[value] = seen.get(value, 0) + 1
    twice = sorted(v for v, count in seen.items() if count > 1)
    missing = sorted(expected - seen.keys())
    strange = sorted(seen.keys() - expected)
    assert not missing and not twice and not strange, (
        f"output is not the input exactly once: {len(missing)} missing (e.g. {missing[:5]}), "
        f"{len(twice)} twice (e.g. {twice[:5]}), {len(strange)} unexpected (e.g. {strange[:5]})")


def open_transactions(bootstrap: str) -> str:
    """What is still undecided: transactions a coordinator lists as not finished, and output
    partitions whose LSO is behind the high watermark; empty when nothing is."""
    unfinished = list_transactions(Target(bootstrap), ["Ongoing", "PrepareCommit", "PrepareAbort"])
    admin_client = offsets_admin(bootstrap)
    lso = end_offsets(admin_client, OUTPUT, IsolationLevel.READ_COMMITTED)
    high = end_offsets(admin_client, OUTPUT, IsolationLevel.READ_UNCOMMITTED)
    behind = {p: (lso[p], high[p]) for p in lso if lso[p] != high[p]}
    return (f"unfinished {unfinished} " if unfinished else "") + (f"LSO behind HW {behind}" if behind else "")


def check_no_open_transaction(bootstrap: str, timeout: float = 30.0) -> None:
    """Nothing undecided stays: a commit's last markers and its Complete state may take a moment
    after the offsets became visible, and an orphan is aborted after transaction.timeout.ms (10 s)
    plus the coordinator's check interval (10 s); past that, a transaction stays open for ever."""
    deadline = time.monotonic() + timeout
    while (left := open_transactions(bootstrap)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not left, f"a transaction stays open after {timeout} s: {left}"


# faults ---------------------------------------------------------------------------------------
def open_transaction(admin_client: AdminClient) -> bool:
    """Whether an output partition holds undecided records right now: its LSO is below a high
    watermark read just before (so below the current one too). Seeing it also shows that
    ListOffsets under read_committed answers the LSO, not the high watermark."""
    high = end_offsets(admin_client, OUTPUT, IsolationLevel.READ_UNCOMMITTED)
    lso = end_offsets(admin_client, OUTPUT, IsolationLevel.READ_COMMITTED)
    return any(lso[p] < high[p] for p in lso)


def wait_for_open_transaction(bootstrap: str, timeout: float = 30.0) -> str:
    """Until a transaction is in flight: "" then, else why none was seen in `timeout` seconds."""
    deadline = time.monotonic() + timeout
    errors: list[str] = []
    admin_client = offsets_admin(bootstrap)
    while time.monotonic() < deadline:
        try:
            if open_transaction(admin_client):
                return ""
        except KafkaException as error:
            errors.append(str(error.args[0]))
            # librdkafka's admin client keeps a stale leader epoch after an ISR change (every
            # ListOffsets then fails FENCED_LEADER_EPOCH): a new client learns the current one.
            admin_client = offsets_admin(bootstrap)
        time.sleep(0.02)
    return f"no transaction seen open in {timeout:.0f} s" + (f"; {len(errors)} errors, the last {errors[-1]}"
                                                               if errors else "")


def wait_healthy(cluster: LocalCluster) -> None:
    cluster.wait_for_brokers(set(cluster.brokers), timeout=90)
    for topic in (INPUT, OUTPUT, TRANSACTION_STATE_TOPIC, "__consumer_offsets"):
        cluster.wait_for_isr(topic, full=True, timeout=120)


def kill_broker(cluster: LocalCluster, topic: str, partition: int, what: str, rng: random.Random) -> str:
    """kill -9 the leader of `topic`-`partition`; mostly it stays down until another broker leads
    that partition (the failover path), sometimes it is back before its session ends."""
    victim = cluster.partitions(topic)[partition][0]
    if topic == TRANSACTION_STATE_TOPIC:
        # The placement computed here must be the brokers' (a leader moving meanwhile settles).
        def agreed() -> int:
            named = coordinator_of(Target(cluster.running_bootstrap()), TRANSACTIONAL_ID)["node_id"]
            return named if named == cluster.partitions(topic)[partition][0] else 0
        victim = wait_for(agreed, 15, interval=0.2, what=f"FindCoordinator to name the leader of {topic}-{partition}")
    cluster.kill(victim)
    killed = time.monotonic()
    # Its output goes with the process: kept for the story of a failure.
    (cluster.root / f"broker-{victim}-killed-{time.strftime('%H%M%S')}.out").write_text(cluster.broker_output(victim))
    if rng.random() < 0.25:
        time.sleep(rng.uniform(0.3, 1.5))
        how = "back before its session ended"
    else:
        wait_for(lambda: cluster.partitions(topic).get(partition, (-1,))[0] not in (-1, victim), 30,
                 interval=0.1, what=f"a new leader of {topic}-{partition}")
        how = f"{topic}-{partition} led by {cluster.partitions(topic)[partition][0]} after {time.monotonic() - killed:.1f} s"
        time.sleep(rng.uniform(0.0, 2.0))
    cluster.restart(victim)
    return f"kill -9 broker {victim} ({what}), {how}, down {time.monotonic() - killed:.1f} s"


def strike(cluster: LocalCluster, app: Application, fault: str, rng: random.Random) -> str:
    """Delivers the fault; returns what was done."""
    if fault == "application":
        app.kill9()
        return "kill -9 the application (a new one started)"
    if fault == "coordinator":
        return kill_broker(cluster, TRANSACTION_STATE_TOPIC, txn_partition_for(TRANSACTIONAL_ID, TXN_STATE_PARTITIONS),
                           "the transaction coordinator", rng)
    return kill_broker(cluster, OUTPUT, rng.randrange(PARTITIONS), "an output leader", rng)


def fault_plan(rounds: int, rng: random.Random) -> list[str]:
    """Every kind once in the first three rounds (in a seeded order), then at random."""
    first = rng.sample(FAULTS, len(FAULTS))
    return [first[i] if i < len(first) else rng.choice(FAULTS) for i in range(rounds)]


def create_topics(cluster: LocalCluster) -> None:
    admin = cluster.admin()
    topics = [NewTopic(name, PARTITIONS, 3, config={"min.insync.replicas": "2"}) for name in (INPUT, OUTPUT)]
    for future in admin.create_topics(topics).values():
        future.result(30)
    for name in (INPUT, OUTPUT):
        cluster.wait_for_isr(name)


def run_txn_chaos(cluster: LocalCluster, rounds: int, seed: int, say: Callable[[str], None] = lambda line: None,
                  deadline_s: float = 600.0, records: int = 500, rate: int = 200) -> TxnChaosReport:
    """`records` input records first, then `rate` per second while the rounds run, and a burst of
    `records` more before half the rounds' faults (at random)."""
    rng = random.Random(seed)
    started = time.monotonic()
    ends_at = started + deadline_s
    report = TxnChaosReport()
    create_topics(cluster)
    fill_input(cluster.bootstrap, 0, records)
    app = Application(cluster.bootstrap, cluster.root, report, idle_s=30.0)
    feeder = Feeder(cluster.bootstrap, records, rate)
    watcher = LsoWatcher(cluster.bootstrap)
    try:
        app.start()
        watcher.start()
        feeder.start()
        for round_index, fault in enumerate(fault_plan(rounds, rng)):
            if time.monotonic() > ends_at:
                say(f"deadline reached after {round_index} rounds")
                break
            backlog = rng.random() < 0.5
            if backlog:
                feeder.burst(records)
            not_seen = wait_for_open_transaction(cluster.bootstrap)
            report.mid_transaction += not not_seen
            line = f"round {round_index + 1}: {strike(cluster, app, fault, rng)}"
            line += f" after a burst of {records} records" if backlog else ""
            line += f" ({not_seen})" if not_seen else ""
            say(line)
            report.rounds.append(line)
            report.faults.append(fault)
            wait_healthy(cluster)
            time.sleep(rng.uniform(0.2, 1.5))
        feeder.stop.set()
        feeder.join(60)
        assert feeder.failure is None, f"feeding the input failed: {feeder.failure!r}"
        report.records = feeder.next
        say(f"{report.records} input records; waiting for the application to consume them all")
        wait_for(lambda: all_consumed(cluster.running_bootstrap()), max(30.0, ends_at - time.monotonic()),
                 interval=0.5, what="the application to commit every input record")
    finally:
        feeder.stop.set()
        app.close()
        watcher.stop.set()
        watcher.join(30)
    report.app_aborts = app.aborts()
    report.lso_samples = watcher.seen.samples
    check_no_open_transaction(cluster.running_bootstrap())
    check_output(cluster.running_bootstrap(), report.records, report)
    assert not watcher.seen.regressions, f"the LSO went back: {watcher.seen.regressions}"
    report.seconds = time.monotonic() - started
    return report
