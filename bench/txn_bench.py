"""Transactions against idempotent produce, and read_committed against read_uncommitted, in one
run on one broker (issue 20's targets: transactional produce with transactions of 1,000 records at
least 70 % of idempotent produce; read_committed caught-up reads at least 90 % of
read_uncommitted).

Prints figures with their conditions; never asserts.

    .venv/bin/python bench/txn_bench.py [--records 50000] [--per-txn 1000] [--rounds 2]

Over a socket: `roost up --no-keeper` (a lone broker), confluent-kafka (librdkafka) clients in
this process: a producer of 100 B records to one 2-partition topic, `enable.idempotence` against
`transactional.id` committing every `--per-txn` records (linger.ms 5 both); then consumers reading
the whole topic (written by the transactional run, so read_committed has markers to skip and LSOs
to respect) from the start with each isolation level. Rounds alternate the kinds so a noisy
machine favours neither. The broker's CPU (user + system, from /proc) is printed per phase.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from broker_bench import running_broker as lone_broker
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from process_cpu import cpu_seconds

PAYLOAD = b"x" * 100


@contextmanager
def running_broker() -> Iterator[tuple[int, str]]:
    with lone_broker("--transaction.state.log.num.partitions", "5") as broker:
        yield broker.popen.pid, broker.bootstrap


def new_topic(bootstrap: str) -> str:
    name = f"txn-bench-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # held until the answer
    admin.create_topics([NewTopic(name, 2, 1)])[name].result(30)
    return name


def produce(bootstrap: str, topic: str, records: int, per_txn: int | None) -> float:
    """Records per second; `per_txn` None: idempotent, else a transaction every `per_txn` records."""
    config = {"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True}
    if per_txn is not None:
        config["transactional.id"] = f"bench-{uuid.uuid4().hex[:6]}"
    producer = Producer(config)
    # Warm up out of the clock: connections, metadata, the producer id (and the coordinator).
    if per_txn is not None:
        producer.init_transactions(30)
        producer.begin_transaction()
    producer.produce(topic, PAYLOAD, partition=0)
    producer.produce(topic, PAYLOAD, partition=1)
    if per_txn is not None:
        producer.commit_transaction(30)
    assert producer.flush(30) == 0
    started = time.perf_counter()
    sent = 0
    while sent < records:
        chunk = min(per_txn or records, records - sent)
        if per_txn is not None:
            producer.begin_transaction()
        for i in range(chunk):
            while True:
                try:
                    producer.produce(topic, PAYLOAD, partition=(sent + i) % 2)
                    break
                except BufferError:
                    producer.poll(0.01)
        if per_txn is not None:
            producer.commit_transaction(60)
        sent += chunk
    assert producer.flush(60) == 0
    return records / (time.perf_counter() - started)


def consume(bootstrap: str, topic: str, expected: int, isolation: str) -> float:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:6]}",
                         "isolation.level": isolation, "enable.auto.commit": False, "fetch.wait.max.ms": 10})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(2)])
    seen = 0
    started = time.perf_counter()
    deadline = started + 120
    while seen < expected and time.perf_counter() < deadline:
        for message in consumer.consume(1000, 0.5):
            if not message.error():
                seen += 1
    elapsed = time.perf_counter() - started
    consumer.close()
    assert seen == expected, (seen, expected)
    return seen / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--per-txn", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    print(f"# {platform.node()} {platform.machine()}, {os.cpu_count()} cores (shared: figures are noisy); "
          f"python {platform.python_version()}; {args.records} records of {len(PAYLOAD)} B, 2 partitions")
    results: dict[str, list[float]] = {"idempotent": [], "transactional": [], "read_uncommitted": [],
                                       "read_committed": []}
    cpu: dict[str, list[float]] = {k: [] for k in results}
    with running_broker() as (pid, bootstrap):
        for round_ in range(args.rounds):
            kinds = ["idempotent", "transactional"] if round_ % 2 == 0 else ["transactional", "idempotent"]
            for kind in kinds:
                topic = new_topic(bootstrap)
                before = cpu_seconds(pid)
                results[kind].append(produce(bootstrap, topic, args.records,
                                             args.per_txn if kind == "transactional" else None))
                cpu[kind].append(cpu_seconds(pid) - before)
                if kind == "transactional":
                    reads = ["read_uncommitted", "read_committed"] if round_ % 2 == 0 else \
                        ["read_committed", "read_uncommitted"]
                    for isolation in reads:
                        before = cpu_seconds(pid)
                        results[isolation].append(consume(bootstrap, topic, args.records + 2, isolation))
                        cpu[isolation].append(cpu_seconds(pid) - before)
    for kind, rates in results.items():
        print(f"{kind:>17}: {statistics.median(rates):>9,.0f} records/s (median of {len(rates)}: "
              f"{', '.join(f'{r:,.0f}' for r in rates)}); broker CPU {statistics.median(cpu[kind]):.2f} s per run")
    produce_ratio = statistics.median(results["transactional"]) / statistics.median(results["idempotent"])
    read_ratio = statistics.median(results["read_committed"]) / statistics.median(results["read_uncommitted"])
    print(f"transactional / idempotent produce ({args.per_txn} records per transaction): {produce_ratio:.0%} "
          f"(target >= 70 %)")
    print(f"read_committed / read_uncommitted: {read_ratio:.0%} (target >= 90 %)")


if __name__ == "__main__":
    main()
