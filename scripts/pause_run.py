"""No false failovers: a cluster at load whose brokers are paused (SIGSTOP, then SIGCONT) must
elect no new leader. Issue 22 asks that a broker stopped for 1.5 s, a loop stalled for a second or
a long collection pause never cost an election at the default settings.

Three brokers and three keepers with Roost's default settings (`--session-ms` and `--lag-ms`
change the two that decide), on loopback; the load: acks=all idempotent producers on a topic of 6
partitions (replication 3, min.insync.replicas 2), a consumer group reading it, a compacted topic
the cleaner works on, and a reassignment of a follower every minute. Every `--every` seconds a
random broker is paused for `--pause` seconds. Leaders are read from Metadata twice a second: a
partition whose leader changes is an election no kill caused (there are no kills). The brokers'
logs say why (a session that expired, a broker declared dead, an ISR shrink).

    .venv/bin/python scripts/pause_run.py                       # 10 minutes, 1.5 s pauses
    .venv/bin/python scripts/pause_run.py --minutes 2 --session-ms 6000

Prints the settings, the machine's load, every pause and every election; exit status 1 when any
election happened. Bounded by --minutes; every process it starts is stopped.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import NewTopic
from kafka.admin import KafkaAdminClient
from kafka.structs import TopicPartition as KafkaPythonTopicPartition
from tests.support.cluster import LocalCluster

from roost.config import SETTINGS_BY_NAME

TOPIC, COMPACTED, MOVING = "paused-load", "paused-compacted", "paused-moving"
# What the brokers log when something that can lead to an election happens.
CAUSES = ("session expired", "declared dead", "asking to shrink the ISR", "resigns")


def defaults(session_ms: int | None, lag_ms: int | None) -> dict[str, object]:
    """Roost's defaults for what LocalCluster's test settings change, and the two chosen here."""
    names = ("zookeeper.session.timeout.ms", "replica.lag.time.max.ms", "replica.fetch.wait.max.ms",
             "leader.imbalance.check.interval.seconds", "group.initial.rebalance.delay.ms")
    chosen: dict[str, object] = {name: SETTINGS_BY_NAME[name].default for name in names}
    if session_ms is not None:
        chosen["zookeeper.session.timeout.ms"] = session_ms
    if lag_ms is not None:
        chosen["replica.lag.time.max.ms"] = lag_ms
    return chosen


def leaders(cluster: LocalCluster) -> dict[tuple[str, int], int]:
    found: dict[tuple[str, int], int] = {}
    for topic in (TOPIC, COMPACTED, MOVING):
        for partition, (leader, _, _) in cluster.partitions(topic).items():
            found[(topic, partition)] = leader
    return found


def produce(cluster: LocalCluster, stop: threading.Event, rate: int, counts: dict[str, int]) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 5})

    def report(error: object, _message: object) -> None:
        counts["failed" if error else "acknowledged"] += 1

    n = 0
    started = time.monotonic()
    while not stop.is_set():
        n += 1
        for _attempt in range(100):  # bounded: a full queue empties within the message timeout
            try:
                producer.produce(TOPIC, f"v{n}".encode(), f"k{n % 64}".encode(), on_delivery=report)
                producer.produce(COMPACTED, f"v{n}".encode(), f"k{n % 16}".encode(), on_delivery=report)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
        delay = started + n / rate - time.monotonic()
        if delay > 0:
            stop.wait(delay)
    producer.flush(30)


def consume(cluster: LocalCluster, stop: threading.Event, counts: dict[str, int]) -> None:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "paused-readers",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([TOPIC])
    try:
        while not stop.is_set():
            counts["consumed"] += sum(1 for m in consumer.consume(500, 0.5) if not m.error())
    finally:
        consumer.close()


def reassign_a_follower(cluster: LocalCluster, admin: KafkaAdminClient) -> str:
    """Moves one follower of the replication-2 topic's partition 0 to the broker that has none,
    keeping the leader first: a reassignment that needs no election."""
    leader, replicas, _ = cluster.partitions(MOVING)[0]
    spare = next(b for b in cluster.brokers if b not in replicas)
    target = [leader, spare]
    admin.alter_partition_reassignments({KafkaPythonTopicPartition(MOVING, 0): target})
    return f"{MOVING}-0 {replicas} -> {target}"


def run(args: argparse.Namespace) -> int:
    rng = random.Random(args.seed)
    settings = defaults(args.session_ms, args.lag_ms)
    print(f"# pause_run: seed {args.seed}, {args.minutes:g} min, a {args.pause:g} s pause of a random broker every "
          f"{args.every:g} s; settings {settings}; {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}", flush=True)
    with tempfile.TemporaryDirectory(prefix="roost-pause-run-") as root:
        cluster = LocalCluster.start(Path(root), brokers=3, keepers=3, settings=settings)
        stop = threading.Event()
        threads: list[threading.Thread] = []
        counts = {"acknowledged": 0, "failed": 0, "consumed": 0}
        try:
            admin = cluster.admin()
            for topic in [NewTopic(TOPIC, 6, 3, config={"min.insync.replicas": "2"}),
                          NewTopic(COMPACTED, 3, 3, config={"cleanup.policy": "compact", "segment.ms": "10000",
                                                            "min.cleanable.dirty.ratio": "0.01"}),
                          NewTopic(MOVING, 1, 2)]:
                admin.create_topics([topic])[topic.topic].result(60)
                cluster.wait_for_isr(topic.topic, full=True, timeout=60)
            kafka_admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
            threads = [threading.Thread(target=produce, args=(cluster, stop, args.rate, counts), daemon=True),
                       threading.Thread(target=consume, args=(cluster, stop, counts), daemon=True)]
            for thread in threads:
                thread.start()
            time.sleep(5)  # the group settles; the first leaders are the baseline
            before = leaders(cluster)
            outputs = {b: len(cluster.broker_output(b)) for b in cluster.brokers}
            elections: list[str] = []
            pauses = 0
            started = time.monotonic()
            end = started + args.minutes * 60
            next_pause, next_move = started + args.every, started + 60
            while time.monotonic() < end:
                now = time.monotonic()
                if now >= next_pause:
                    victim = rng.choice(sorted(cluster.brokers))
                    process = cluster.brokers[victim].process
                    assert process is not None
                    os.kill(process.popen.pid, signal.SIGSTOP)
                    try:
                        time.sleep(args.pause)
                    finally:
                        os.kill(process.popen.pid, signal.SIGCONT)
                    pauses += 1
                    print(f"{now - started:7.1f} s  paused broker {victim} for {args.pause:g} s", flush=True)
                    next_pause = now + args.every
                if now >= next_move:
                    print(f"{now - started:7.1f} s  reassigned {reassign_a_follower(cluster, kafka_admin)}", flush=True)
                    next_move = now + 60
                current = leaders(cluster)
                for tp, leader in current.items():
                    if tp in before and leader >= 0 and leader != before[tp]:
                        elections.append(f"{tp[0]}-{tp[1]}: {before[tp]} -> {leader}")
                        print(f"{now - started:7.1f} s  ELECTION {elections[-1]}", flush=True)
                        before[tp] = leader
                time.sleep(0.5)
            stop.set()
            for thread in threads:
                thread.join(60)
            kafka_admin.close()
            causes = {cause: 0 for cause in CAUSES}
            for broker, offset in outputs.items():
                later = cluster.broker_output(broker)[offset:]
                for cause in CAUSES:
                    causes[cause] += later.count(cause)
            print(f"\n{pauses} pauses of {args.pause:g} s in {args.minutes:g} min: {len(elections)} elections; "
                  f"brokers' log: {causes}; records acknowledged {counts['acknowledged']}, failed {counts['failed']}, "
                  f"consumed {counts['consumed']}; load {os.getloadavg()[0]:.1f}", flush=True)
            return 1 if elections else 0
        finally:
            stop.set()
            cluster.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--pause", type=float, default=1.5, help="seconds each pause lasts")
    parser.add_argument("--every", type=float, default=10.0, help="seconds between pauses")
    parser.add_argument("--rate", type=int, default=500, help="records per second offered to each topic")
    parser.add_argument("--session-ms", type=int, default=None, help="zookeeper.session.timeout.ms (Roost's default)")
    parser.add_argument("--lag-ms", type=int, default=None, help="replica.lag.time.max.ms (Roost's default)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if args.minutes <= 0 or args.pause <= 0 or args.every <= args.pause:
        parser.error("--minutes and --pause must be positive and --every longer than --pause")
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
