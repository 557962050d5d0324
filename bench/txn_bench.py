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
sys.path.insert(0, str(Path(__file__).parent.parent))  # tests.support's wire client

from broker_bench import running_broker as lone_broker
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from process_cpu import cpu_seconds
from tests.support.kafka_wire import WireClient

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


def consume_transform_produce(bootstrap: str, source: str, records: int, batch: int, transactional: bool) -> float:
    """Records per second through a consume-transform-produce loop reading `source` (which holds at
    least `records` committed records) from the start into a new topic: poll up to `batch`
    records, write each (upper-cased) and commit the input offsets — in one transaction with
    send_offsets_to_transaction (exactly once), or with a plain idempotent producer and a consumer
    commit after the writes are flushed (at least once), the loop people would otherwise run."""
    sink = new_topic(bootstrap)
    group = f"ctp-{uuid.uuid4().hex[:6]}"
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False, "fetch.wait.max.ms": 10})
    settings = {"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True}
    if transactional:
        settings["transactional.id"] = f"ctp-{uuid.uuid4().hex[:6]}"
    producer = Producer(settings)
    if transactional:
        producer.init_transactions(30)
    consumer.subscribe([source])
    done = 0
    started = None
    deadline = time.monotonic() + 120
    try:
        while done < records and time.monotonic() < deadline:
            polled = [m for m in consumer.consume(batch, 0.5) if not m.error()]
            if not polled:
                continue
            if started is None:
                started = time.perf_counter()  # from the first records: the group's join is not the loop
            if transactional:
                producer.begin_transaction()
            for message in polled:
                producer.produce(sink, message.value().upper(), partition=message.partition())
            if transactional:
                producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                                     consumer.consumer_group_metadata(), 30)
                producer.commit_transaction(30)
            else:
                assert producer.flush(30) == 0
                consumer.commit(asynchronous=False)
            done += len(polled)
    finally:
        consumer.close()
    assert done >= records and started is not None, (done, records)
    return done / (time.perf_counter() - started)


def produce_aiokafka(bootstrap: str, topic: str, records: int, per_txn: int | None) -> float:
    """As `produce`, with aiokafka (pure Python): records per second, idempotent or transactional."""
    import asyncio

    from aiokafka import AIOKafkaProducer

    async def run() -> float:
        settings: dict = {"bootstrap_servers": bootstrap, "linger_ms": 5, "enable_idempotence": True}
        if per_txn is not None:
            settings["transactional_id"] = f"bench-aio-{uuid.uuid4().hex[:6]}"
        producer = AIOKafkaProducer(**settings)
        await producer.start()
        try:
            async def send(count: int, first: int) -> list[asyncio.Future]:
                return [await producer.send(topic, PAYLOAD, partition=(first + i) % 2) for i in range(count)]

            # Warm up out of the clock, as `produce`. Deliveries are awaited after a commit, which
            # itself flushes (awaiting them inside the transaction would add linger.ms to each).
            if per_txn is not None:
                async with producer.transaction():
                    warm_up = await send(2, 0)
            else:
                warm_up = await send(2, 0)
            await asyncio.gather(*warm_up)
            started = time.perf_counter()
            sent = 0
            pending: list[asyncio.Future] = []  # idempotent: a stream, awaited at its end
            while sent < records:
                chunk = min(per_txn or 1000, records - sent)
                if per_txn is not None:
                    async with producer.transaction():
                        deliveries = await send(chunk, sent)
                    await asyncio.gather(*deliveries)
                else:
                    pending += await send(chunk, sent)
                sent += chunk
            await asyncio.gather(*pending)
            return records / (time.perf_counter() - started)
        finally:
            await producer.stop()

    return asyncio.run(run())


def transaction_floor(pid: int, bootstrap: str, topic: str,
                      seconds: float = 3.0) -> tuple[list[float], float, float]:
    """Back-to-back transactions of one record per partition (two records): what a transaction
    costs beyond its records. Returns each transaction's seconds, and the broker's and this
    process's (the client's) CPU seconds per transaction."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "transactional.id": f"floor-{uuid.uuid4().hex[:6]}"})
    producer.init_transactions(30)
    for _ in range(50):  # warm up: connections, the coordinator, the producer's state
        producer.begin_transaction()
        producer.produce(topic, PAYLOAD, partition=0)
        producer.produce(topic, PAYLOAD, partition=1)
        producer.commit_transaction(30)
    times: list[float] = []
    before, client_before = cpu_seconds(pid), cpu_seconds(os.getpid())
    started = time.perf_counter()
    while time.perf_counter() - started < seconds and len(times) < 100_000:
        began = time.perf_counter()
        producer.begin_transaction()
        producer.produce(topic, PAYLOAD, partition=0)
        producer.produce(topic, PAYLOAD, partition=1)
        producer.commit_transaction(30)
        times.append(time.perf_counter() - began)
    count = len(times)
    return times, (cpu_seconds(pid) - before) / count, (cpu_seconds(os.getpid()) - client_before) / count


def request_round_trip(bootstrap: str, count: int = 2000) -> list[float]:
    """Seconds per ApiVersions round trip (a request the broker does nothing for), from a plain
    blocking socket client: the floor under every request of the transaction's chain."""
    client = WireClient(bootstrap)
    body = {"client_software_name": "bench", "client_software_version": "1"}
    try:
        for _ in range(200):
            client.request(18, 3, body)
        times = []
        for _ in range(count):
            began = time.perf_counter()
            client.request(18, 3, body)
            times.append(time.perf_counter() - began)
    finally:
        client.close()
    return times


def print_floor(pid: int, bootstrap: str, idempotent_rate: float, per_txn: int) -> None:
    """Why the produce target is or is not within reach: a transaction of `per_txn` records may
    cost at most (1/0.7 - 1) times its records' idempotent time on top of them."""
    round_trips = request_round_trip(bootstrap)
    times, broker_cpu, client_cpu = transaction_floor(pid, bootstrap, new_topic(bootstrap))
    budget = (1 / 0.7 - 1) * per_txn / idempotent_rate
    median = statistics.median(times)
    print(f"floor: ApiVersions round trip median {statistics.median(round_trips) * 1e6:.0f} µs; a transaction of "
          f"2 records: median {median * 1e3:.2f} ms, best {min(times) * 1e3:.2f} ms ({len(times)} back to back); "
          f"CPU per transaction: broker {broker_cpu * 1e3:.2f} ms, client {client_cpu * 1e3:.2f} ms")
    print(f"floor: at {idempotent_rate:,.0f} records/s idempotent, 70 % leaves a transaction of {per_txn} records "
          f"{budget * 1e3:.2f} ms beyond its records; outside the (single-threaded) broker's busy time a "
          f"transaction takes at least {(median - broker_cpu) * 1e3:.2f} ms (median less broker CPU)")


def consume(bootstrap: str, topic: str, expected: int, isolation: str) -> float:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:6]}",
                         "isolation.level": isolation, "enable.auto.commit": False, "fetch.wait.max.ms": 10})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(2)])
    seen = 0
    started = None  # at the first record: connecting and the first metadata are not the read
    deadline = time.perf_counter() + 120
    while seen < expected and time.perf_counter() < deadline:
        for message in consumer.consume(1000, 0.5):
            if not message.error():
                if started is None:
                    started = time.perf_counter()
                seen += 1
    elapsed = time.perf_counter() - (started or 0.0)
    consumer.close()
    assert seen == expected, (seen, expected)
    return seen / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--per-txn", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--no-floor", action="store_true", help="skip the per-transaction floor figures")
    parser.add_argument("--aiokafka-records", type=int, default=20_000,
                        help="records per aiokafka produce run (0: no aiokafka runs)")
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
        loops: dict[str, list[float]] = {"at least once": [], "exactly once": []}
        for round_ in range(args.rounds):
            source = new_topic(bootstrap)
            produce(bootstrap, source, args.records, args.per_txn)  # committed input, as a pipeline's
            for kind in (["at least once", "exactly once"] if round_ % 2 == 0 else ["exactly once", "at least once"]):
                loops[kind].append(consume_transform_produce(bootstrap, source, args.records, args.per_txn,
                                                             kind == "exactly once"))
        for kind, rates in loops.items():
            print(f"consume-transform-produce, {kind:>13}: {statistics.median(rates):>9,.0f} records/s (median of "
                  f"{len(rates)}: {', '.join(f'{r:,.0f}' for r in rates)}; polls of up to {args.per_txn})")
        if not args.no_floor:
            print_floor(pid, bootstrap, statistics.median(results["idempotent"]), args.per_txn)
        aio: dict[str, list[float]] = {"idempotent": [], "transactional": []}
        for round_ in range(args.rounds if args.aiokafka_records else 0):
            for kind in (["idempotent", "transactional"] if round_ % 2 == 0 else ["transactional", "idempotent"]):
                aio[kind].append(produce_aiokafka(bootstrap, new_topic(bootstrap), args.aiokafka_records,
                                                  args.per_txn if kind == "transactional" else None))
        if args.aiokafka_records:
            for kind, rates in aio.items():
                print(f"aiokafka {kind:>13}: {statistics.median(rates):>9,.0f} records/s (median of {len(rates)}: "
                      f"{', '.join(f'{r:,.0f}' for r in rates)}; {args.aiokafka_records} records per run)")
            print(f"aiokafka transactional / idempotent produce ({args.per_txn} records per transaction): "
                  f"{statistics.median(aio['transactional']) / statistics.median(aio['idempotent']):.0%} "
                  f"(target >= 70 %)")
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
