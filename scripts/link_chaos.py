#!/usr/bin/env python3
"""Two regions and a cluster link between them, then the source region lost: RPO, RTO, failback.

Region A (the source) and region B (the destination) are network namespaces this script creates
(`links-a`, `links-b`: it must run as root), each with a keeper and three brokers on its own
address, joined by one veth pair: the inter-region link. The clusters reach each other through a
gateway in each region (tests/support/faultproxy.py run as a program, listening on the region's
address) that holds every byte --region-delay-ms each way (tc netem does not work on this
machine): each broker has a second listener, REGION, advertised at its gateway's address, and the
links (the forward one and failback's reverse one) bootstrap from there; clients in a region use
its PLAINTEXT listener. Then:

1. an acks=all idempotent producer and a transactional one write to topic `chaos` on A, a
   consumer group reads it on A; link `chaos` on B mirrors it (same offsets);
2. the inter-region link is cut (`ip link set down`: tc netem does not work on this machine) for
   --cut-seconds while the producers go on; a broker is killed and restarted on each side during
   the cut; the link heals and the mirror catches up (the catch-up time is printed);
3. with the producers paused, every partition on B is compared with A batch by batch (bytes,
   offsets) and read_committed on both sides must give the same records;
4. region A is lost: every process in it killed at once, while the producers write (by default
   the link was cut --loss-cut-seconds before, so that A acknowledged records B never got). B fails over
   (`roost link failover --all`). Printed: **RPO** = the records A acknowledged that B does not
   hold, with the age of the oldest and of the newest of them at the loss; **RTO** = from the loss
   to the first produce accepted on B and to the group's first record read on B (this run fails
   over at once: a real RTO adds detecting the loss and deciding); the group's re-reads (records
   after its last offset sync); a check that every acknowledged record B had mirrored is there;
5. region A comes back (the same data) and `roost link failback --all` runs while a producer
   writes to B: A's divergent suffix (what it acknowledged and never sent, and anything after)
   is cut and reported, A takes B's writes, is promoted again and B mirrors it again. Then A and B
   must hold the same batches, and every record B acknowledged must be on A.

With Spark (the default; `--no-spark` leaves it out): a structured-streaming query on Roost's
Spark source reads `chaos` in region A from the start, with its checkpoint on the host's file
system (standing for storage both regions reach), and dies with region A. After the failover the
same query (same checkpoint directory) starts in region B against B's brokers. Printed and
checked (scripts/link_chaos_spark.py): every record the checkpoint had committed below the
promotion point is on B at the same offset with the same value; every record B holds past the
checkpoint is read by the resumed query; the re-reads (the micro-batch not committed at the
loss, replayed); the records the query had read on A that B never got, and B's new writes at the
offsets the checkpoint had passed (never read: counted); the Spark RTO, the loss to the resumed
query's first micro-batch on B.

    sudo .venv/bin/python scripts/link_chaos.py                   # about 4 minutes with the 60 s cut
    sudo .venv/bin/python scripts/link_chaos.py --cut-seconds 15 --rate 200
    sudo .venv/bin/python scripts/link_chaos.py --no-spark        # without the Spark query (its JVM)

Exit status 0 only if every check held. Every namespace and process is removed at the end, also
on a failure or Ctrl-C (each process this run starts carries the run's directory in its
environment, so that Spark's JVM and Python workers are found and killed too); a namespace left
by an earlier killed run is removed first. The CI runs
the loopback tests of tests/link instead (two clusters on 127.0.0.1): this run does not fit its
budget.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "scripts"))

import link_chaos_spark as spark_half  # noqa: E402 - found through the path set just above

NS_A, NS_B = "links-a", "links-b"
ADDRESS = {NS_A: "10.213.1.1", NS_B: "10.213.2.1"}  # each region's service address (on its lo)
VETH = {NS_A: ("links-ab", "10.213.0.1"), NS_B: ("links-ba", "10.213.0.2")}  # the inter-region link
TOPIC, LINK, GROUP, PARTITIONS = "chaos", "chaos", "chaos-readers", 4
KEEPER_PORT, BROKER_PORT = 2181, 9091
REGION_PORT, GATEWAY_PORT = 9191, 9291  # + broker id: a broker's REGION listener, its gateway's address
PYTHON = sys.executable


# -- pure measures (tests/link/test_link_chaos_measures.py) -----------------------------------------
@dataclass(frozen=True)
class Ack:
    partition: int
    offset: int
    value: str
    at: float  # wall-clock seconds when the producer was told


@dataclass(frozen=True)
class Rpo:
    lost: int
    oldest_age_s: float | None  # at the loss, of the oldest acknowledged record lost
    newest_age_s: float | None  # at the loss, of the newest acknowledged record lost
    per_partition: dict[int, int]


def rpo(acks: Sequence[Ack], mirror_ends: dict[int, int], lost_at: float) -> Rpo:
    """The records acknowledged on the source (before `lost_at`) at or past the mirror's end
    (`mirror_ends`: per partition, the first offset the mirror did not hold)."""
    lost = [a for a in acks if a.at <= lost_at and a.offset >= mirror_ends.get(a.partition, 0)]
    per: dict[int, int] = {}
    for ack in lost:
        per[ack.partition] = per.get(ack.partition, 0) + 1
    if not lost:
        return Rpo(0, None, None, per)
    return Rpo(len(lost), lost_at - min(a.at for a in lost), lost_at - max(a.at for a in lost), per)


def missing_below_end(acks: Sequence[Ack], mirror_ends: dict[int, int],
                      held: dict[tuple[int, int], str]) -> list[Ack]:
    """Acknowledged records the mirror should hold (below its end) that it does not, or holds
    with another value: must be none."""
    return [a for a in acks if a.offset < mirror_ends.get(a.partition, 0)
            and held.get((a.partition, a.offset)) != a.value]


def promotion_points(first_accepted: dict[int, int], controls: dict[int, set[int]]) -> dict[int, int]:
    """Where each promoted partition's mirrored log ended: below the first record B accepted,
    less the abort markers the promotion wrote for transactions left open on the mirror (control
    batches of one offset each, just below the first accepted record). Taking the first accepted
    offset as the end counts A's records at the markers' offsets as mirrored: they are lost."""
    ends = {}
    for partition, end in first_accepted.items():
        while end - 1 in controls.get(partition, set()):
            end -= 1
        ends[partition] = end
    return ends


def group_skipped(last_commit: dict[int, int], first_read: dict[int, int],
                  held: dict[tuple[int, int], str]) -> list[tuple[int, int]]:
    """Records a group resumed on B never reads: B's read_committed records from the group's last
    commit on A up to where it first read on B (aborted records and markers between them are no
    records to read)."""
    return sorted((p, o) for p, o in held if last_commit.get(p, o + 1) <= o < first_read.get(p, -1))


TXN_RECORDS = 20  # records per transaction of the transactional producer (role_produce)


def unmarked_commits(missing: Sequence[Ack], aborted_at_promotion: int) -> tuple[list[Ack], list[Ack]]:
    """Split records missing below the promotion point into those of committed transactions whose
    markers the mirror never got (a client's commit is acknowledged once the coordinator logged
    it, before the markers are written: the promotion aborts them, so they are part of the RPO),
    at most as many transactions as the promotion aborted, and the rest (a real loss)."""
    txn = [a for a in missing if a.value.startswith("txn-")]
    transactions = {int(a.value.split("-")[1]) // TXN_RECORDS for a in txn}
    if len(transactions) > aborted_at_promotion:
        return [], list(missing)
    return txn, [a for a in missing if not a.value.startswith("txn-")]


def read_acks(path: Path) -> list[Ack]:
    found = []
    if path.exists():
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) == 4:
                found.append(Ack(int(parts[0]), int(parts[1]), parts[2], float(parts[3])))
    return found


# -- helpers run inside a namespace (python scripts/link_chaos.py --role ...) -------------------------
def role_produce(args: argparse.Namespace) -> None:
    """Write `args.rate` records a second until the stop file exists; log each acknowledged one."""
    from confluent_kafka import KafkaException, Producer

    out = open(args.out, "a", buffering=1)  # noqa: SIM115 - one line per ack, until killed
    stop, pause = Path(args.stop), Path(args.pause)
    config = {"bootstrap.servers": args.bootstrap, "acks": "all", "linger.ms": 5, "message.timeout.ms": 30000}
    if args.transactional:
        config["transactional.id"] = f"chaos-{os.getpid()}"
    else:
        config["enable.idempotence"] = True
    producer = Producer(config)
    pending: list[tuple[int, int, str]] = []

    def delivered(error: Any, message: Any) -> None:
        if error is None:
            entry = (message.partition(), message.offset(), message.value().decode())
            if args.transactional:
                pending.append(entry)  # acknowledged only once its transaction commits
            else:
                out.write(f"{entry[0]} {entry[1]} {entry[2]} {time.time():.6f}\n")

    if args.transactional:
        producer.init_transactions(60)
    sequence, started = 0, time.monotonic()
    while not stop.exists():
        if pause.exists():
            producer.flush(1)
            time.sleep(0.1)
            continue
        try:
            if args.transactional:
                producer.begin_transaction()
            for _ in range(TXN_RECORDS):
                value = f"{args.tag}-{sequence}"
                producer.produce(args.topic, value=value.encode(), partition=sequence % PARTITIONS,
                                 on_delivery=delivered)
                sequence += 1
            if args.transactional:
                producer.flush(30)
                if sequence % 100 == 0:  # every fifth transaction is aborted
                    producer.abort_transaction(30)
                    pending.clear()
                else:
                    producer.commit_transaction(30)
                    now = time.time()
                    for p, o, v in pending:
                        out.write(f"{p} {o} {v} {now:.6f}\n")
                    pending.clear()
            else:
                producer.poll(0)
        except (KafkaException, BufferError) as error:
            print(f"producer {args.tag}: {error}", file=sys.stderr, flush=True)
            if args.transactional:
                pending.clear()
                with contextlib.suppress(KafkaException):
                    producer.abort_transaction(10)
            time.sleep(0.5)
        # Pace: `rate` records a second overall.
        ahead = sequence / max(args.rate, 1) - (time.monotonic() - started)
        if ahead > 0:
            time.sleep(min(ahead, 1.0))
    producer.flush(30)


def role_consume(args: argparse.Namespace) -> None:
    """The group reads `args.topic` and commits every second; each commit is logged."""
    from confluent_kafka import Consumer, KafkaException

    out = open(args.out, "a", buffering=1)  # noqa: SIM115
    consumer = Consumer({"bootstrap.servers": args.bootstrap, "group.id": GROUP, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    consumer.subscribe([args.topic])
    positions: dict[int, int] = {}
    next_commit = time.monotonic() + 1.0
    while not Path(args.stop).exists():
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            if args.first_read and message.partition() not in positions:
                out.write(f"first-read {time.time():.6f} {message.partition()} {message.offset()}\n")
            positions[message.partition()] = message.offset() + 1
        if time.monotonic() >= next_commit and positions:
            next_commit = time.monotonic() + 1.0
            with contextlib.suppress(KafkaException):
                consumer.commit(asynchronous=False)
                out.write("commit " + " ".join(f"{p}:{o}" for p, o in sorted(positions.items())) + "\n")
    consumer.close()


def role_probe(args: argparse.Namespace) -> None:
    """On B from before the loss: produce to every partition until each takes a record (a mirror
    refuses them); log when and at which offset (the mirror's end at promotion); then go on
    writing (the writes a failback must carry back) until the stop file exists."""
    from confluent_kafka import Producer

    out = open(args.out, "a", buffering=1)  # noqa: SIM115
    # Not idempotent: a mirror's INVALID_REQUEST must fail the record, not the producer.
    producer = Producer({"bootstrap.servers": args.bootstrap, "acks": "all", "message.timeout.ms": 5000})
    first: dict[int, int] = {}
    sequence = 0

    def delivered(error: Any, message: Any) -> None:
        if error is None:
            p, o = message.partition(), message.offset()
            if p not in first:
                first[p] = o
                out.write(f"first-accepted {p} {o} {time.time():.6f}\n")
            out.write(f"ack {p} {o} {message.value().decode()} {time.time():.6f}\n")

    while not Path(args.stop).exists():
        for p in range(PARTITIONS):
            if len(first) < PARTITIONS and p in first:
                continue
            producer.produce(args.topic, value=f"probe-{sequence}".encode(), partition=p, on_delivery=delivered)
            sequence += 1
        producer.flush(6)
        time.sleep(0.05 if len(first) < PARTITIONS else 0.2)
    producer.flush(10)


def role_dump(args: argparse.Namespace) -> None:
    """Print, per partition, each batch's base offset and sha256, and read_committed's records."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition
    from tests.link.raw import batches

    found: dict[str, Any] = {"batches": {}, "records": []}
    found["controls"] = {}
    for p in range(PARTITIONS):
        raw = batches(args.bootstrap, args.topic, p, max_rounds=100_000)
        found["batches"][str(p)] = [[int.from_bytes(b[:8], "big"), hashlib.sha256(b).hexdigest()] for b in raw]
        found["controls"][str(p)] = [int.from_bytes(b[:8], "big") for b in raw if b[22] & 0x20]
    consumer = Consumer({"bootstrap.servers": args.bootstrap, "group.id": f"dump-{os.getpid()}",
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "enable.partition.eof": True, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(args.topic, p, 0) for p in range(PARTITIONS)])
    ended: set[int] = set()
    deadline = time.monotonic() + 120
    while len(ended) < PARTITIONS and time.monotonic() < deadline:
        for message in consumer.consume(1000, 0.5):
            if message.error() is not None:
                if message.error().code() == KafkaError._PARTITION_EOF:
                    ended.add(message.partition())
                continue
            found["records"].append([message.partition(), message.offset(), message.value().decode()])
    consumer.close()
    found["complete"] = len(ended) == PARTITIONS
    print(json.dumps(found))


def role_ready(args: argparse.Namespace) -> None:
    """Exit 0 once the cluster at `args.bootstrap` lists `args.brokers` brokers."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            if len(admin.list_topics(timeout=5).brokers) >= args.brokers:
                return
        time.sleep(0.5)
    raise SystemExit(f"{args.bootstrap}: fewer than {args.brokers} brokers after 90 s")


def role_create_topic(args: argparse.Namespace) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    admin.create_topics([NewTopic(args.topic, PARTITIONS, 3, config={"min.insync.replicas": "2"})])[
        args.topic].result(60)


def role_spark(args: argparse.Namespace) -> None:
    """The Spark structured-streaming query (scripts/link_chaos_spark.py) until the stop file exists."""
    if spark_half.run_query(args.bootstrap, args.topic, args.checkpoint, args.out, args.stop):
        raise SystemExit(1)


ROLES = {"produce": role_produce, "consume": role_consume, "probe": role_probe, "dump": role_dump,
         "ready": role_ready, "create-topic": role_create_topic, "spark": role_spark}
RUN_MARK = "ROOST_LINK_CHAOS_RUN"  # in every process this run starts: found by it at the end


# -- the orchestrator ------------------------------------------------------------------------------
def sh(*command: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(command), capture_output=True, text=True, timeout=60, check=check)


def in_ns(ns: str, *command: str) -> list[str]:
    return ["ip", "netns", "exec", ns, *command]


@dataclass
class Region:
    ns: str
    root: Path
    brokers: dict[int, Any] = field(default_factory=dict)
    keeper: Any = None
    gateway: subprocess.Popen[Any] | None = None

    @property
    def address(self) -> str:
        return ADDRESS[self.ns]

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{self.address}:{BROKER_PORT + i}" for i in (1, 2, 3))

    @property
    def region_bootstrap(self) -> str:
        """The brokers as the other region reaches them: through this region's delaying gateway."""
        return ",".join(f"{self.address}:{GATEWAY_PORT + i}" for i in (1, 2, 3))

    @property
    def zookeeper(self) -> str:
        return f"{self.address}:{KEEPER_PORT}"


class Run:
    """Everything started, to be removed at the end."""

    def __init__(self, root: Path, say: Any, region_delay_ms: float = 0.0) -> None:
        self.root = root
        self.say = say
        self.region_delay_ms = region_delay_ms
        self.procs: list[subprocess.Popen[Any]] = []
        self.logs: dict[int, Path] = {}
        self.regions: list[Region] = []
        self.env = {**os.environ, "PYTHONPATH": f"{REPO / 'src'}:{REPO}", "PYTHONUNBUFFERED": "1",
                    RUN_MARK: str(root)}

    # namespaces -------------------------------------------------------------------------------
    def make_regions(self) -> None:
        self.remove_namespaces()
        for ns in (NS_A, NS_B):
            sh("ip", "netns", "add", ns)
        sh("ip", "link", "add", VETH[NS_A][0], "type", "veth", "peer", "name", VETH[NS_B][0])
        for ns in (NS_A, NS_B):
            device, address = VETH[ns]
            sh("ip", "link", "set", device, "netns", ns)
            sh(*in_ns(ns, "ip", "link", "set", "lo", "up"))
            sh(*in_ns(ns, "ip", "addr", "add", f"{ADDRESS[ns]}/32", "dev", "lo"))
            sh(*in_ns(ns, "ip", "addr", "add", f"{address}/30", "dev", device))
        self.heal()

    def cut(self) -> None:
        for ns in (NS_A, NS_B):
            sh(*in_ns(ns, "ip", "link", "set", VETH[ns][0], "down"))

    def heal(self) -> None:
        for ns in (NS_A, NS_B):
            sh(*in_ns(ns, "ip", "link", "set", VETH[ns][0], "up"))
        for ns, other in ((NS_A, NS_B), (NS_B, NS_A)):
            # Routes through a device go when it goes down: put the other region's route back.
            sh(*in_ns(ns, "ip", "route", "replace", f"{ADDRESS[other]}/32", "via", VETH[other][1]))

    @staticmethod
    def remove_namespaces() -> None:
        for ns in (NS_A, NS_B):
            sh("ip", "netns", "del", ns, check=False)

    # processes --------------------------------------------------------------------------------
    def start_region(self, region: Region) -> None:
        from tests.support.cluster import TEST_BROKER_SETTINGS, write_toml
        from tests.support.procs import start_roost

        command = in_ns(region.ns, PYTHON, "-m", "roost.cli.main")
        keeper_config = region.root / "keeper.toml"
        write_toml(keeper_config, {"tickTime": 500, "dataDir": str(region.root / "keeper"),
                                   "clientPort": KEEPER_PORT, "clientPortAddress": region.address})
        region.keeper = start_roost(["keeper", "--config", str(keeper_config)], expect=("keeper",),
                                    env=self.env, new_session=True, command=command)
        self.procs.append(region.keeper.popen)
        self.start_gateway(region)
        for broker_id in (1, 2, 3):
            config = region.root / f"broker-{broker_id}.toml"
            if not config.exists():
                plain = f"PLAINTEXT://{region.address}:{BROKER_PORT + broker_id}"
                write_toml(config, {"broker.id": broker_id, "zookeeper.connect": region.zookeeper,
                                    "listeners": f"{plain},REGION://{region.address}:{REGION_PORT + broker_id}",
                                    "advertised.listeners": f"{plain},REGION://{region.address}:"
                                                            f"{GATEWAY_PORT + broker_id}",
                                    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,REGION:PLAINTEXT",
                                    "inter.broker.listener.name": "PLAINTEXT",
                                    "log.dirs": str(region.root / f"broker-{broker_id}"),
                                    "offsets.topic.replication.factor": 3,
                                    "transaction.state.log.replication.factor": 3, "default.replication.factor": 3,
                                    **TEST_BROKER_SETTINGS})
            self.start_broker(region, broker_id, wait=False)
        for broker in region.brokers.values():
            broker.wait_ready(90)
        self.helper(region.ns, "ready", "--bootstrap", region.bootstrap, "--brokers", "3")

    def start_gateway(self, region: Region) -> None:
        """The region's door for the other region: each broker's REGION listener behind a delay."""
        pairs = [f"--pair={region.address}:{GATEWAY_PORT + i}={region.address}:{REGION_PORT + i}" for i in (1, 2, 3)]
        log_path = self.root / f"gateway-{region.ns}.log"
        log = open(log_path, "a")  # noqa: SIM115
        gateway = subprocess.Popen(
            in_ns(region.ns, PYTHON, "-m", "tests.support.faultproxy", *pairs, "--delay-ms", f"{self.region_delay_ms:g}"),
            stdout=log, stderr=subprocess.STDOUT, env=self.env, start_new_session=True, cwd=REPO)
        region.gateway = gateway
        self.procs.append(gateway)
        wait_until(f"the gateway of {region.ns}", 30,
                   lambda: gateway.poll() is not None or "forwarding" in log_path.read_text(), interval=0.2)
        if gateway.poll() is not None:
            raise RuntimeError(f"the gateway of {region.ns} exited: {log_path.read_text()[-800:]}")

    def start_broker(self, region: Region, broker_id: int, wait: bool = True) -> None:
        from tests.support.procs import start_roost

        command = in_ns(region.ns, PYTHON, "-m", "roost.cli.main")
        proc = start_roost(["broker", "--config", str(region.root / f"broker-{broker_id}.toml")],
                           expect=(f"broker {broker_id} kafka",), env=self.env,
                           new_session=True, command=command, wait=wait, timeout=90)
        region.brokers[broker_id] = proc
        self.procs.append(proc.popen)

    def kill(self, popen: subprocess.Popen[Any]) -> None:
        if popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(popen.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            popen.wait(15)

    def kill_tree(self, popen: subprocess.Popen[Any]) -> None:
        """A process, its group and its descendants in other groups (Spark's Python daemon makes its
        own), at once: SIGKILL, as a region lost."""
        doomed = descendants(popen.pid) if popen.poll() is None else []
        self.kill(popen)
        for pid in doomed:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def kill_marked(self) -> None:
        """Any process still carrying this run's mark (one whose parent died first), by pid."""
        mark = f"{RUN_MARK}={self.root}".encode()
        for environ in Path("/proc").glob("[0-9]*/environ"):
            with contextlib.suppress(OSError, ValueError):
                pid = int(environ.parent.name)
                if pid != os.getpid() and mark in environ.read_bytes().split(b"\0"):
                    os.kill(pid, signal.SIGKILL)

    def kill_region(self, region: Region) -> None:
        for proc in [*region.brokers.values(), region.keeper]:
            if proc is not None:
                self.kill(proc.popen)
        if region.gateway is not None:
            self.kill(region.gateway)

    def spawn(self, ns: str, role: str, *args: str) -> subprocess.Popen[Any]:
        path = self.root / f"{role}-{ns}-{len(self.procs)}.log"
        log = open(path, "w")  # noqa: SIM115
        popen = subprocess.Popen(in_ns(ns, PYTHON, str(Path(__file__).resolve()), "--role", role, *args),
                                 stdout=log, stderr=subprocess.STDOUT, env=self.env, start_new_session=True)
        self.procs.append(popen)
        self.logs[popen.pid] = path
        return popen

    def helper(self, ns: str, role: str, *args: str, timeout: float = 300) -> str:
        done = subprocess.run(in_ns(ns, PYTHON, str(Path(__file__).resolve()), "--role", role, *args),
                              capture_output=True, text=True, env=self.env, timeout=timeout, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{role} in {ns} failed: {done.stderr.strip()[-800:]}")
        return done.stdout

    def roost(self, ns: str, *args: str, timeout: float = 600) -> str:
        done = subprocess.run(in_ns(ns, PYTHON, "-m", "roost.cli.main", *args), capture_output=True, text=True,
                              env=self.env, timeout=timeout, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"roost {' '.join(args[:2])} failed: {(done.stdout + done.stderr).strip()[-1500:]}")
        return done.stdout

    def close(self, regions: Sequence[Region] = ()) -> None:
        for popen in reversed(self.procs):
            self.kill(popen)
        self.kill_marked()
        self.remove_namespaces()
        for region in regions:  # what the brokers said, for a failure's post-mortem
            for broker_id, proc in region.brokers.items():
                with contextlib.suppress(OSError):
                    (self.root / f"{region.ns}-broker-{broker_id}.log").write_text(proc.text())


def descendants(pid: int) -> list[int]:
    """Every living descendant of `pid` (Linux /proc)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            children.setdefault(parent, []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def link_partitions(run: Run, b: Region) -> list[dict[str, Any]]:
    out = run.roost(NS_B, "link", "describe", LINK, "--zookeeper", b.zookeeper, "--format", "json")
    return json.loads(out)["partitions"]


def wait_until(what: str, timeout_s: float, check: Any, interval: float = 1.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(RuntimeError, ValueError, KeyError, OSError):
            found = check()
            if found:
                return found
        time.sleep(interval)
    raise AssertionError(f"{what}: not within {timeout_s:g} s")


def caught_up(run: Run, b: Region) -> bool:
    parts = link_partitions(run, b)
    return len(parts) == PARTITIONS and all(p["lag_records"] == 0 and not p["error"] for p in parts)


def same_logs(run: Run, a: Region, b: Region, what: str) -> dict[str, Any]:
    """A and B hold the same batches at the same offsets and read_committed gives the same records."""
    left = json.loads(run.helper(NS_A, "dump", "--bootstrap", a.bootstrap, "--topic", TOPIC))
    right = json.loads(run.helper(NS_B, "dump", "--bootstrap", b.bootstrap, "--topic", TOPIC))
    assert left["complete"] and right["complete"], f"{what}: a read_committed dump did not reach the end"
    for p in map(str, range(PARTITIONS)):
        assert left["batches"][p] == right["batches"][p], (
            f"{what}: partition {p} differs: {len(left['batches'][p])} batches on A, {len(right['batches'][p])} on B")
    assert sorted(map(tuple, left["records"])) == sorted(map(tuple, right["records"])), f"{what}: read_committed"
    batches = sum(len(v) for v in left["batches"].values())
    run.say(f"  {what}: {batches} batches equal byte for byte at the same offsets, "
            f"{len(left['records'])} read_committed records equal")
    return right


class QueryExited(AssertionError):
    def __init__(self, code: int | None, log: str) -> None:
        super().__init__(f"the Spark query on B exited ({code}): {log[-1500:]}")
        self.log = log


def check_spark(run: Run, query: subprocess.Popen[Any], files: dict[str, Path],
                checkpointed: tuple[int | None, dict[int, int]], planned: tuple[int | None, dict[int, int]],
                ends: dict[int, int], held: dict[tuple[int, int], str], lost_at: float, stop: Path) -> None:
    """The Spark query resumed on B from its checkpoint: its RTO, what it re-read, lost or skipped."""
    batch, committed = checkpointed
    assert batch is not None, "the Spark query on A had committed no micro-batch before the loss"
    read_a = spark_half.parse_reads(files["spark-a"].read_text())[0]
    lost_reads = {(r.partition, r.offset) for r in read_a if r.offset >= ends.get(r.partition, 0)}
    ahead = {p: o - ends.get(p, 0) for p, o in sorted(committed.items()) if o > ends.get(p, 0)}
    planned_ahead = {p: o - ends.get(p, 0) for p, o in sorted(planned[1].items()) if o > ends.get(p, 0)}
    run.say(f"Spark: checkpoint at the loss: micro-batch {batch} committed, next offsets "
            f"{dict(sorted(committed.items()))}"
            + (f"; micro-batch {planned[0]} planned to {dict(sorted(planned[1].items()))}, not committed"
               if planned[0] != batch else "") + f"; promotion point {dict(sorted(ends.items()))}")
    run.say(f"  the query had read {len(lost_reads)} records on A that B never got; its checkpoint past the "
            f"promotion point by {ahead or 0} (committed), {planned_ahead or 0} (planned)")

    def reads_b() -> tuple[list[spark_half.SparkRead], list[tuple[int, float, int]]]:
        if query.poll() is not None:
            raise QueryExited(query.returncode, run.logs[query.pid].read_text() if query.pid in run.logs else "")
        return spark_half.parse_reads(files["spark-b"].read_text() if files["spark-b"].exists() else "")

    try:
        first = wait_until("the Spark query's first micro-batch on B", 300, lambda: reads_b()[1])[0]
    except QueryExited as exited:
        reason = next((ln for ln in exited.log.splitlines() if "DataLossError:" in ln), "")
        if not (reason and (ahead or planned_ahead)):
            raise
        # B's log ends before the checkpoint (its new writes have not reached it): Spark's data-loss
        # rule stops the query rather than read offsets that will name other records.
        run.say("  the resumed query on B stopped with the source's data-loss error, as it should for a checkpoint "
                "past B's log end: " + reason.split("DataLossError: ", 1)[1].split(" Some data may", 1)[0])
        run.say("  no Spark RTO: the query does not resume on B by itself in this case (docs/cluster-links.md, "
                "Limits)")
        return
    wait_until("the Spark query on B reading to B's end", 300, lambda: spark_half.read_to(reads_b()[0], held))
    read_b = reads_b()[0]
    stop.touch()
    with contextlib.suppress(subprocess.TimeoutExpired):
        query.wait(60)
    run.kill_tree(query)
    found = spark_half.spark_resume(read_a, committed, ends, held, read_b)
    run.say(f"  {found.checked} records committed in the checkpoint below the promotion point: on B at the same "
            f"offsets with the same values except {len(found.changed)}; {found.lost_with_a} more the query had "
            f"committed on A were never mirrored (lost with A)")
    run.say(f"  Spark RTO: {first[1] - lost_at:.2f} s from the loss to the resumed query's first micro-batch on B "
            f"(micro-batch {first[0]}, {first[2]} records; a new JVM and SparkSession included)")
    run.say(f"  resumed on B: {found.must_read} records B holds past the checkpoint, {len(found.missing)} of them "
            f"not read; {found.rereads} re-read (the micro-batch uncommitted at the loss, replayed), "
            f"{found.duplicates_on_b} read twice on B; {len(found.skipped_on_b)} of B's new writes at offsets the "
            f"checkpoint had passed, never read" + (" (a known limit: docs/cluster-links.md)" if found.skipped_on_b
                                                     else ""))
    assert not found.changed, f"checkpointed records changed or gone on B: {found.changed[:5]}"
    assert not found.missing, f"records on B past the checkpoint the resumed query did not read: {found.missing[:5]}"


def scenario(run: Run, args: argparse.Namespace) -> None:
    say = run.say
    a, b = Region(NS_A, run.root / "a"), Region(NS_B, run.root / "b")
    run.regions = [a, b]
    run.make_regions()
    say(f"regions: {NS_A} ({a.address}) and {NS_B} ({b.address}), joined by {VETH[NS_A][0]}/{VETH[NS_B][0]}; "
        f"the links go through each region's gateway, {run.region_delay_ms:g} ms each way")
    run.start_region(a)
    run.start_region(b)
    say(f"  region A: keeper {a.zookeeper}, brokers {a.bootstrap}; region B: keeper {b.zookeeper}, {b.bootstrap}")
    run.helper(NS_A, "create-topic", "--bootstrap", a.bootstrap, "--topic", TOPIC)
    files = {name: run.root / f"{name}.txt"
             for name in ("acks", "txn-acks", "group-a", "group-b", "probe", "spark-a", "spark-b")}
    stop_a, pause_a, stop_b = run.root / "stop-a", run.root / "pause-a", run.root / "stop-b"
    common = ["--bootstrap", a.bootstrap, "--topic", TOPIC, "--stop", str(stop_a), "--pause", str(pause_a)]
    in_a = [
        run.spawn(NS_A, "produce", *common, "--rate", str(args.rate), "--out", str(files["acks"]), "--tag", "idem"),
        run.spawn(NS_A, "produce", *common, "--rate", str(max(args.rate // 4, 20)), "--out",
                  str(files["txn-acks"]), "--tag", "txn", "--transactional"),
        run.spawn(NS_A, "consume", *common, "--out", str(files["group-a"]))]
    checkpoint, stop_spark = run.root / "spark-checkpoint", run.root / "stop-spark"
    spark_args = ["--topic", TOPIC, "--checkpoint", str(checkpoint), "--stop", str(stop_spark)]
    if not args.no_spark:
        in_a.append(run.spawn(NS_A, "spark", "--bootstrap", a.bootstrap, *spark_args, "--out", str(files["spark-a"])))
    run.roost(NS_B, "link", "create", LINK, "--zookeeper", b.zookeeper, "--source-bootstrap", a.region_bootstrap,
              "-c", f"topics=literal:{TOPIC}", "-c", "consumer.offset.sync.ms=2000", "-c", "metadata.max.age.ms=1000")
    say(f"link {LINK} on B mirrors {TOPIC} from A; producers (idempotent {args.rate}/s, transactional) and group "
        f"{GROUP} on A")
    time.sleep(args.warm_seconds)
    wait_until("the mirror caught up before the cut", 120, lambda: caught_up(run, b))

    say(f"cutting the inter-region link for {args.cut_seconds:g} s (a broker killed and restarted on each side)")
    run.cut()
    cut_at = time.monotonic()
    time.sleep(min(5.0, args.cut_seconds / 4))
    for region in (a, b):
        run.kill(region.brokers[3].popen)
    time.sleep(min(5.0, args.cut_seconds / 4))
    for region in (a, b):
        run.start_broker(region, 3)
    time.sleep(max(0.0, args.cut_seconds - (time.monotonic() - cut_at)))
    status = link_partitions(run, b)
    run.heal()
    healed = time.monotonic()
    say(f"  healed after {healed - cut_at:.1f} s; roost link describe then: lag up to "
        f"{max(p['lag_ms'] for p in status) / 1000:.1f} s (the records lag is unknown while the source is "
        f"silent: {sum(max(p['lag_records'], 0) for p in status)} as last seen)")
    wait_until("the mirror caught up after the cut", 300, lambda: caught_up(run, b), interval=0.5)
    say(f"  caught up {time.monotonic() - healed:.1f} s after the heal")
    run.kill(a.brokers[1].popen)  # a source leader killed with the link up
    run.start_broker(a, 1)
    pause_a.touch()
    time.sleep(2.0)
    wait_until("the mirror caught up with the producers paused", 120, lambda: caught_up(run, b), interval=0.5)
    time.sleep(3.0)  # the last published statuses
    wait_until("the mirror caught up with the producers paused", 120, lambda: caught_up(run, b), interval=0.5)
    same_logs(run, a, b, "after the cut and the kills")
    pause_a.unlink()
    if not args.no_spark:  # the query on A near the head at the loss: past what A had acknowledged by now
        acked: dict[int, int] = {}
        for ack in read_acks(files["acks"]) + read_acks(files["txn-acks"]):
            acked[ack.partition] = max(acked.get(ack.partition, 0), ack.offset + 1)
        wait_until("the Spark query on A reading to the acknowledged end", 300, lambda: all(
            spark_half.checkpoint_offsets(checkpoint, TOPIC)[1].get(p, 0) >= o for p, o in acked.items()))

    # The region lost, the destination promoted.
    run.spawn(NS_B, "probe", "--bootstrap", b.bootstrap, "--topic", TOPIC, "--stop", str(stop_b),
              "--out", str(files["probe"]))
    time.sleep(args.warm_seconds)
    if args.loss_cut_seconds > 0:
        say(f"the inter-region link cut {args.loss_cut_seconds:g} s before the loss (A goes on acknowledging)")
        run.cut()
        time.sleep(args.loss_cut_seconds)
    lost_at = time.time()
    run.kill_region(a)
    for popen in in_a:  # the producers, the group and the Spark query in region A go with it
        run.kill_tree(popen)
    say("region A lost: every process in it killed")
    failover = run.roost(NS_B, "link", "failover", LINK, "--all", "-b", b.bootstrap, "--zookeeper", b.zookeeper,
                         "--timeout", "30")
    failed_over_at = time.time()
    say("  " + failover.strip().replace("\n", "\n  "))
    spark_b = None
    if not args.no_spark:  # the same query, the same checkpoint, B's brokers
        checkpointed = spark_half.checkpoint_offsets(checkpoint, TOPIC)
        planned = spark_half.planned_offsets(checkpoint, TOPIC)
        spark_b = run.spawn(NS_B, "spark", "--bootstrap", b.bootstrap, *spark_args, "--out", str(files["spark-b"]))
    probe = wait_until("produce accepted on every promoted partition", 120,
                       lambda: (lines := [ln.split() for ln in files["probe"].read_text().splitlines()
                                          if ln.startswith("first-accepted")]) and len(lines) == PARTITIONS and lines)
    first_produce = min(float(t) for *_, t in probe)
    run.spawn(NS_B, "consume", "--bootstrap", b.bootstrap, "--topic", TOPIC, "--stop", str(stop_b), "--pause",
              str(run.root / "never"), "--out", str(files["group-b"]), "--first-read")
    first_read = wait_until("the group reading on B", 120, lambda: [
        float(ln.split()[1]) for ln in files["group-b"].read_text().splitlines() if ln.startswith("first-read")])[0]
    # Read after the group's first record: the dump takes minutes and is no part of the RTO.
    dump_b = json.loads(run.helper(NS_B, "dump", "--bootstrap", b.bootstrap, "--topic", TOPIC))
    held = {(p, o): v for p, o, v in dump_b["records"]}
    ends = promotion_points({int(p): int(o) for _, p, o, _ in probe},
                            {int(p): set(offsets) for p, offsets in dump_b["controls"].items()})
    acks = read_acks(files["acks"]) + read_acks(files["txn-acks"])
    loss = rpo(acks, ends, lost_at)
    say(f"RPO: {loss.lost} acknowledged records lost of {len(acks)} acknowledged on A "
        f"(per partition {dict(sorted(loss.per_partition.items()))}); "
        + (f"the oldest lost was {loss.oldest_age_s:.3f} s old at the loss, the newest {loss.newest_age_s:.3f} s"
           if loss.lost else "none lost"))
    say(f"RTO: {first_produce - lost_at:.2f} s from the loss to the first produce accepted on B "
        f"(failover command done at +{failed_over_at - lost_at:.2f} s), {first_read - lost_at:.2f} s to the "
        f"group's first record read on B (failover started at once: detection and decision not included)")
    commits_a = [ln for ln in files["group-a"].read_text().splitlines() if ln.startswith("commit")]
    if commits_a:
        last_a = {int(p): int(o) for p, o in (x.split(":") for x in commits_a[-1].split()[1:])}
        first_b = wait_until("the group reading every partition on B", 60, lambda: (found := {
            int(p): int(o) for _, _, p, o in (ln.split() for ln in files["group-b"].read_text().splitlines()
                                              if ln.startswith("first-read"))}) and len(found) == PARTITIONS and found)
        rereads = sum(max(0, last_a.get(p, 0) - o) for p, o in first_b.items())
        skipped = group_skipped(last_a, first_b, held)
        say(f"  group {GROUP}: last commit on A {dict(sorted(last_a.items()))}, resumed on B at "
            f"{dict(sorted(first_b.items()))}: {rereads} records re-read (committed on A after the last offset "
            f"sync, every 2 s here); records skipped: {len(skipped)}")
        assert not skipped, f"the group skipped records on B: {skipped[:5]}"
    aborted = next((int(words[-1]) for words in map(str.split, failover.splitlines())
                    if words[:1] == [TOPIC] and words[-1].isdigit()), 0)
    unmarked, missing = unmarked_commits(missing_below_end(acks, ends, held), aborted)
    say(f"  acknowledged records below the promotion point ({sum(ends.values())} offsets) missing on B "
        f"(read_committed): {len(missing) + len(unmarked)}"
        + (f"; {len(unmarked)} of them of committed transactions whose markers B never got (the promotion "
           f"aborted {aborted} open transactions): lost, part of the RPO" if unmarked else ""))
    if spark_b is not None:  # checked and printed before a failure above stops the run
        check_spark(run, spark_b, files, checkpointed, planned, ends, held, lost_at, stop_spark)
    assert not missing, f"acknowledged records B had mirrored are missing: {missing[:5]}"

    # Failback: A returns with its divergent suffix.
    say("region A back (same data); roost link failback while a producer writes to B")
    run.heal()
    run.start_region(a)
    back = run.roost(NS_B, "link", "failback", LINK, "--all", "--source-zookeeper", a.zookeeper, "--source-bootstrap",
                     a.bootstrap, "--reverse-bootstrap", b.region_bootstrap, "-b", b.bootstrap,
                     "--zookeeper", b.zookeeper, "--timeout", "30",
                     "-c", "metadata.max.age.ms=1000", "-c", "consumer.offset.sync.ms=2000",
                     "--catch-up-timeout", "300")
    say("  " + back.strip().replace("\n", "\n  "))
    stop_b.touch()
    time.sleep(2.0)
    dump = same_logs(run, a, b, "after failback")
    held = {(p, o): v for p, o, v in dump["records"]}
    probe_acks = [Ack(int(p), int(o), v, float(t)) for _, p, o, v, t in
                  (ln.split() for ln in files["probe"].read_text().splitlines() if ln.startswith("ack "))]
    lost_b = [x for x in probe_acks if held.get((x.partition, x.offset)) != x.value]
    assert not lost_b, f"records B acknowledged are not on A after failback: {lost_b[:5]}"
    say(f"  all {len(probe_acks)} records B acknowledged are on A; A is the source again and B mirrors it")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--role", choices=sorted(ROLES), help=argparse.SUPPRESS)
    parser.add_argument("--bootstrap", help=argparse.SUPPRESS)
    parser.add_argument("--topic", default=TOPIC, help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--stop", help=argparse.SUPPRESS)
    parser.add_argument("--pause", default="/nonexistent", help=argparse.SUPPRESS)
    parser.add_argument("--tag", default="r", help=argparse.SUPPRESS)
    parser.add_argument("--transactional", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--first-read", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--brokers", type=int, default=3, help=argparse.SUPPRESS)
    parser.add_argument("--checkpoint", help=argparse.SUPPRESS)
    parser.add_argument("--no-spark", action="store_true",
                        help="leave out the Spark streaming query (a JVM of about 1.5 GB and a minute of start-up)")
    parser.add_argument("--rate", type=int, default=400, help="records a second from the idempotent producer")
    parser.add_argument("--cut-seconds", type=float, default=60.0, help="how long the inter-region link is cut")
    parser.add_argument("--warm-seconds", type=float, default=10.0, help="producing before the cut and the loss")
    parser.add_argument("--loss-cut-seconds", type=float, default=5.0,
                        help="the link is cut this long before region A is lost (0: lost with the link up)")
    parser.add_argument("--region-delay-ms", type=float, default=20.0,
                        help="added each way between the regions by their gateways (a 40 ms round trip by default)")
    parser.add_argument("--keep", action="store_true", help="keep the run's directory (logs) at the end")
    args = parser.parse_args()
    if args.role:
        ROLES[args.role](args)
        return 0
    if os.geteuid() != 0:
        print("link_chaos.py makes network namespaces: run it as root", file=sys.stderr)
        return 2

    def interrupted(*_: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupted)
    started = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix="links-chaos-"))
    run = Run(root, lambda line: print(f"[{time.monotonic() - started:6.1f}s] {line}", flush=True),
              region_delay_ms=args.region_delay_ms)
    try:
        scenario(run, args)
    except (AssertionError, RuntimeError) as failure:
        print(f"FAILED: {failure}\nlogs: {root}", flush=True)
        args.keep = True
        return 1
    finally:
        run.close(run.regions)
        if not args.keep:
            with contextlib.suppress(OSError):
                subprocess.run(["rm", "-rf", str(root)], check=False, timeout=60)
    print(f"OK in {time.monotonic() - started:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
