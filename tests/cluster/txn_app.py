"""The consume-transform-produce application of the transaction chaos loop (tests/cluster/txn_chaos.py),
run as its own process so that the harness can kill -9 it.

It reads the input topic as a member of a group (read_committed, no auto commit) and, for each
batch polled, writes b"out-" + value (keyed by the input value) to the output topic and commits
the batch's consumed offsets in the same transaction (send_offsets_to_transaction). A fixed
transactional.id means a restarted application fences the one before it, whose open transaction
the coordinator aborts.

Errors: a retriable commit is retried; any other transaction error aborts when it can and exits
with EXIT_ABORTED (the harness starts a new process, which resumes from the group's committed
offsets: the simplest correct rewind). A fatal error exits with EXIT_FATAL. Bounded: it exits 0
after `--idle-s` without input, after `--max-runtime-s`, or on SIGTERM (between transactions).

Prints one line per event (`committed <n>`, `aborted`, `fatal ...`) for the harness's log.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

EXIT_ABORTED = 3
EXIT_FATAL = 4
COMMIT_ATTEMPTS = 10
INIT_ATTEMPTS = 10


def say(line: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {line}", flush=True)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--transactional-id", required=True)
    parser.add_argument("--batch", type=int, default=100, help="records per transaction at most")
    parser.add_argument("--hold-ms", type=int, default=100,
                        help="how long each transaction stays open after its records are written (so faults land "
                             "inside transactions)")
    parser.add_argument("--idle-s", type=float, default=20.0)
    parser.add_argument("--max-runtime-s", type=float, default=600.0)
    return parser.parse_args(argv)


def make_producer(args: argparse.Namespace) -> Producer:
    return Producer({"bootstrap.servers": args.bootstrap, "transactional.id": args.transactional_id,
                     "transaction.timeout.ms": 10000, "linger.ms": 5})


def make_consumer(args: argparse.Namespace) -> Consumer:
    debug = {"debug": os.environ["TXN_APP_CONSUMER_DEBUG"]} if os.environ.get("TXN_APP_CONSUMER_DEBUG") else {}
    return Consumer({"bootstrap.servers": args.bootstrap, "group.id": args.group,
                     "isolation.level": "read_committed", "enable.auto.commit": False,
                     "auto.offset.reset": "earliest", "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
                     **debug})


def retrying(what: str, call: Callable[[], None], attempts: int, pause_s: float) -> None:
    """`call`, again after a retriable failure (at most `attempts` times); any other failure, or
    the last, is raised."""
    for attempt in range(attempts):
        try:
            call()
            return
        except KafkaException as failure:
            error: KafkaError = failure.args[0]
            if not error.retriable() or attempt + 1 == attempts:
                raise
            say(f"{what} retriable: {error}")
            time.sleep(pause_s)


def init_transactions(producer: Producer) -> None:
    """Fences the previous instance (its open transaction is aborted); the coordinator may be
    moving or still finishing that abort, which is retriable."""
    retrying("init_transactions", lambda: producer.init_transactions(30), INIT_ATTEMPTS, 0.5)


def consumed_offsets(records: list[Message]) -> list[TopicPartition]:
    """The next offset to read of each partition the batch came from: exactly what this
    transaction consumed (positions of partitions not polled yet would be invalid)."""
    after: dict[tuple[str, int], int] = {}
    for record in records:
        where = (record.topic(), record.partition())
        after[where] = max(after.get(where, 0), record.offset() + 1)
    return [TopicPartition(topic, partition, offset) for (topic, partition), offset in after.items()]


def describe(records: list[Message]) -> str:
    """The input offsets a transaction consumed, per partition (first-last), for the story of a
    failure."""
    spans: dict[int, tuple[int, int]] = {}
    for record in records:
        first, last = spans.get(record.partition(), (record.offset(), record.offset()))
        spans[record.partition()] = (min(first, record.offset()), max(last, record.offset()))
    return " ".join(f"{p}:{first}-{last}" for p, (first, last) in sorted(spans.items()))


def produce(producer: Producer, topic: str, value: bytes) -> None:
    for _ in range(1000):  # the queue frees as deliveries come back; bounded all the same
        try:
            producer.produce(topic, b"out-" + value, key=value)
            return
        except BufferError:
            producer.poll(0.05)
    raise RuntimeError("the producer's queue stayed full")


def commit(producer: Producer) -> None:
    retrying("commit", lambda: producer.commit_transaction(30), COMMIT_ATTEMPTS, 0.0)


def transform(producer: Producer, consumer: Consumer, args: argparse.Namespace, records: list[Message]) -> None:
    """One transaction: the transformed batch and the offsets it consumed, all or nothing."""
    producer.begin_transaction()
    for record in records:
        produce(producer, args.output, record.value())
    producer.flush(30)  # the records are in the log, undecided, while the transaction is held open
    time.sleep(args.hold_ms / 1000)
    producer.send_offsets_to_transaction(consumed_offsets(records), consumer.consumer_group_metadata(), 30)
    commit(producer)


def run(args: argparse.Namespace, stopping: list[bool]) -> int:
    producer = make_producer(args)
    init_transactions(producer)
    consumer = make_consumer(args)
    consumer.subscribe([args.input])
    say("started")
    started = last_input = time.monotonic()
    try:
        while not stopping and time.monotonic() - started < args.max_runtime_s:
            records = [m for m in consumer.consume(args.batch, 0.5) if not m.error()]
            if not records:
                if time.monotonic() - last_input > args.idle_s:
                    say("idle: done")
                    break
                continue
            last_input = time.monotonic()
            try:
                transform(producer, consumer, args, records)
            except KafkaException as failure:
                return on_failure(producer, failure.args[0])
            say(f"committed {len(records)}: {describe(records)}")
        return 0
    finally:
        consumer.close()


def on_failure(producer: Producer, error: KafkaError) -> int:
    if error.fatal():
        say(f"fatal: {error}")
        return EXIT_FATAL
    say(f"transaction failed: {error}")
    try:
        producer.abort_transaction(30)
        say("aborted")
    except KafkaException as failure:
        say(f"abort failed: {failure.args[0]}")  # the next instance's init_transactions aborts it
    return EXIT_ABORTED


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    stopping: list[bool] = []

    def stop(*_: Any) -> None:
        stopping.append(True)

    signal.signal(signal.SIGTERM, stop)
    return run(args, stopping)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
