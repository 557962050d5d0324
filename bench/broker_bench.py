"""Broker benchmark with confluent-kafka against a real `roost up` on loopback.

Prints figures with their conditions and the CPU seconds of broker and client; never asserts.

    .venv/bin/python bench/broker_bench.py            # everything (~2-3 minutes)
    .venv/bin/python bench/broker_bench.py produce    # or: consume, raw, latency, fan-in
    .venv/bin/python bench/broker_bench.py latency --repeat 3 --compare ../roost-before
                                                      # each row against another checkout, in turn

Conditions are printed with every figure. The machine is shared and noisy: compare rows of the
same run, and repeat (`--repeat N` reports the median of N runs per row).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import platform
import shutil
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from paced_latency import Hooks, paced_latencies
from process_cpu import cpu_seconds

from roost.wire.kafka import RequestHeader, decode_response, encode_request
from roost.wire.kafka.framing import FRAME_SIZE
from roost.wire.kafka.records import iter_batch_headers


@dataclass
class Broker:
    popen: subprocess.Popen[str]
    bootstrap: str
    metrics_address: str | None = None  # where /metrics is served, with --metrics-port

    def cpu_seconds(self) -> float:
        """User + system CPU seconds the broker process has used so far."""
        return cpu_seconds(self.popen.pid)


# The Roost trees whose brokers are measured: this one, and with --compare another checkout (say
# the commit before a change), run by run in turn so that a noisy machine favours neither.
SOURCES: dict[str, str | None] = {"this tree": None}


@contextmanager
def running_broker(*flags: str, source: str | None = None, data_dir: Path | None = None) -> Iterator[Broker]:
    """One `roost up --no-keeper` broker on a free port, stopped on leaving. In a fresh temporary
    data directory unless `data_dir` is given (a benchmark that writes files there first)."""
    env = dict(os.environ)
    if source is not None:
        env["PYTHONPATH"] = str(Path(source, "src"))
    with contextlib.ExitStack() as stack:
        data = str(data_dir) if data_dir is not None else stack.enter_context(
            tempfile.TemporaryDirectory(prefix="roost-bench-"))
        popen = subprocess.Popen(
            [sys.executable, "-m", "roost.cli.main", "up", "--data-dir", data, "--kafka-port", "0", "--no-console", "--no-schema-registry",
             "--log-level", "WARNING", "--no-keeper", *flags],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
        assert popen.stdout is not None
        bootstrap = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = popen.stdout.readline()
            if not line:
                break
            if line.startswith("roost: kafka listening on "):
                bootstrap = line.split()[-1]
                break
        metrics_address = None
        while "--metrics-port" in flags and metrics_address is None and time.monotonic() < deadline:
            line = popen.stdout.readline()
            if not line:
                break
            if line.startswith("roost: metrics listening on "):
                metrics_address = line.split()[-1]
        if bootstrap is None or ("--metrics-port" in flags and metrics_address is None):
            popen.kill()
            raise RuntimeError("roost did not start")
        try:
            yield Broker(popen, bootstrap, metrics_address)
        finally:
            popen.terminate()
            popen.wait(30)


class SyscallCount:
    """Counts the system calls a process makes while it runs (`perf stat` on the
    raw_syscalls:sys_enter tracepoint; cheap, unlike strace). None where perf cannot."""

    def __init__(self, pid: int) -> None:
        self.count: int | None = None
        self._perf: subprocess.Popen[str] | None = None
        if shutil.which("perf") is None:
            return
        self._perf = subprocess.Popen(
            ["perf", "stat", "-x", ",", "-e", "raw_syscalls:sys_enter", "-p", str(pid)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def stop(self) -> int | None:
        if self._perf is None:
            return None
        self._perf.send_signal(signal.SIGINT)
        try:
            _, err = self._perf.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self._perf.kill()
            self._perf.communicate()
            return None
        for line in err.splitlines():
            fields = line.split(",")
            if len(fields) > 2 and fields[2] == "raw_syscalls:sys_enter" and fields[0].isdigit():
                self.count = int(fields[0])
        return self.count


class RequestTally:
    """Requests a librdkafka client has sent, from its statistics (`tx` per broker connection)."""

    def __init__(self) -> None:
        self.sent = 0
        self._lock = threading.Lock()

    def config(self) -> dict[str, object]:
        return {"statistics.interval.ms": 100, "stats_cb": self._on_stats}

    def _on_stats(self, text: str) -> None:
        stats = json.loads(text)
        with self._lock:
            self.sent = sum(broker.get("tx", 0) for broker in stats.get("brokers", {}).values())


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])[name].result(30)


@dataclass
class Measured:
    seconds: float
    broker_cpu: float
    client_cpu: float


def measure(broker: Broker, work: Callable[[], None]) -> Measured:
    cpu0, client0, wall0 = broker.cpu_seconds(), time.process_time(), time.perf_counter()
    work()
    return Measured(time.perf_counter() - wall0, broker.cpu_seconds() - cpu0, time.process_time() - client0)


def produce_run(broker: Broker, topic: str, count: int, size: int, batch_size: int, linger_ms: int,
                extra: dict[str, object] | None = None) -> Measured:
    payload = os.urandom(size // 2).hex().encode()[:size]
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": linger_ms,
                         "batch.size": batch_size, "queue.buffering.max.messages": 1_000_000,
                         "queue.buffering.max.kbytes": 1_048_576, "acks": 1, **(extra or {})})
    producer.list_topics(topic, timeout=30)  # connect and learn metadata before the clock starts

    def work() -> None:
        produce = producer.produce
        for _ in range(count):
            try:
                produce(topic, payload)
            except BufferError:
                producer.poll(0.01)
                produce(topic, payload)
        remaining = producer.flush(120)
        assert remaining == 0

    return measure(broker, work)


def print_row(label: str, count: int, size: int, runs: list[Measured]) -> None:
    seconds = statistics.median(m.seconds for m in runs)
    broker_cpu = statistics.median(m.broker_cpu for m in runs)
    client_cpu = statistics.median(m.client_cpu for m in runs)
    print(f"  {label:<34} {count / seconds:>11,.0f} msg/s {count * size / seconds / 1e6:>8.1f} MB/s"
          f"   broker {broker_cpu:5.2f} s CPU ({broker_cpu / count * 1e6:5.2f} µs/msg)"
          f"   client {client_cpu:5.2f} s CPU", flush=True)


def tree_label(name: str) -> str:
    return f" [{name}]" if len(SOURCES) > 1 else ""


def bench_produce(repeat: int) -> None:
    print("\n== produce: confluent-kafka, acks=1, 1 producer, 6 partitions, no compression, no fsync ==")
    cases = [(100, 16384, 0), (100, 65536, 5), (100, 262144, 5), (100, 1048576, 20),
             (1024, 65536, 5), (1024, 1048576, 20)]
    with ExitStack() as stack:
        brokers = {name: stack.enter_context(running_broker(source=source)) for name, source in SOURCES.items()}
        for broker in brokers.values():
            create_topic(broker.bootstrap, "produce-bench", 6)
        for size, batch_size, linger in cases:
            count = 1_000_000 if size <= 100 else 300_000
            runs: dict[str, list[Measured]] = {name: [] for name in brokers}
            for _ in range(repeat):
                for name, broker in brokers.items():
                    runs[name].append(produce_run(broker, "produce-bench", count, size, batch_size, linger))
            for name in brokers:
                print_row(f"{size} B, batch.size {batch_size // 1024} KiB, linger {linger} ms{tree_label(name)}",
                          count, size, runs[name])


# glibc returns freed heap to the kernel and maps fresh zeroed pages for the next fetch response
# and the next message objects: in a consumer of caught-up data that page-fault and zeroing work
# was about half of the client's CPU (perf: exc_page_fault, clear_page_erms, brk). These settings
# of the client process keep the memory: they are the only difference between the two variants.
TUNED_MALLOC = {"MALLOC_TRIM_THRESHOLD_": str(1 << 30), "MALLOC_MMAP_THRESHOLD_": str(1 << 30),
                "MALLOC_TOP_PAD_": str(256 << 20)}
CONSUMER_CONFIG = {"fetch.max.bytes": 16 << 20, "max.partition.fetch.bytes": 2 << 20,
                   "queued.max.messages.kbytes": 1 << 20, "enable.auto.commit": False}


def consumer_worker(bootstrap: str, topic: str, partitions: int, count: int, size: int) -> None:
    """Runs in its own process (so that its environment can differ): read `count` messages from
    offset 0 and print `seconds cpu_seconds` for all but the first message (the clock starts once
    the consumer is connected and its first fetch is in)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", **CONSUMER_CONFIG})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    received = len(consumer.consume(1, 30))
    # Ask for about one fetch's worth at a time: consume(n) waits until n messages are there.
    batch = max(100, min(10_000, CONSUMER_CONFIG["fetch.max.bytes"] // size))
    started, cpu0 = time.perf_counter(), time.process_time()
    deadline = time.monotonic() + 300
    while received < count and time.monotonic() < deadline:
        received += len(consumer.consume(batch, 0.5))
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu0
    consumer.close()
    assert received == count, received
    print(seconds, cpu)


def bench_consume(repeat: int) -> None:
    print("\n== consume caught-up data: confluent-kafka, 1 consumer process, assign from offset 0, 6 partitions,"
          f" {CONSUMER_CONFIG['fetch.max.bytes'] >> 20} MiB per fetch ==")
    print("   (the clock starts after the first message; 'tuned' = the consumer process runs with"
          f" {' '.join(f'{k}={v}' for k, v in TUNED_MALLOC.items())})")
    with running_broker() as broker:
        for size, count in ((1024, 999_999), (65536, 48_000)):
            topic = f"consume-bench-{size}"
            create_topic(broker.bootstrap, topic, 6)
            for _ in range(3):  # in parts: the producer's queue holds 1 GiB
                produce_run(broker, topic, count // 3, size, 1048576, 20)
            assert count % 3 == 0
            for variant, extra_env in (("glibc defaults", {}), ("tuned", TUNED_MALLOC)):
                runs = []
                for _ in range(repeat):
                    cpu0 = broker.cpu_seconds()
                    out = subprocess.run(
                        [sys.executable, __file__, "consumer-worker", broker.bootstrap, topic, "6", str(count),
                         str(size)],
                        capture_output=True, text=True, timeout=600, env={**os.environ, **extra_env}, check=True)
                    seconds, client_cpu = map(float, out.stdout.split()[-2:])
                    runs.append(Measured(seconds, broker.cpu_seconds() - cpu0, client_cpu))
                print_row(f"{size} B ({count * size / 1e9:.1f} GB), {variant}", count - 1, size, runs)


class RawFetcher:
    """Fetches with roost's own codec and throws the bytes away: how fast the broker serves,
    without a client library's per-message work in the way."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, tls: ssl.SSLContext | None = None) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)))
        if tls is not None:  # security_bench: the same reads over a TLS listener
            self.sock = tls.wrap_socket(self.sock, server_hostname=host)
        self.topic = topic
        self.offsets = dict.fromkeys(range(partitions), 0)
        self.buffer = bytearray(64 << 20)
        self.correlation = 0

    def _frame(self) -> memoryview:
        # Reads straight into one preallocated buffer (FrameSplitter would copy every response,
        # and this client must cost as little as possible to measure the broker's serve rate).
        view = memoryview(self.buffer)
        got = 0
        while got < 4:
            got += self.sock.recv_into(view[got:4])
        (size,) = FRAME_SIZE.unpack(view[:4])
        assert 0 <= size <= len(self.buffer) - 4
        got = 0
        while got < size:
            got += self.sock.recv_into(view[4 + got:4 + size])
        return view[4:4 + size]

    def fetch_all(self) -> int:
        total = 0
        while True:
            self.correlation += 1
            body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 50 << 20,
                    "isolation_level": 0, "session_id": 0, "session_epoch": -1, "rack_id": "",
                    "forgotten_topics_data": [],
                    "topics": [{"topic": self.topic, "partitions": [
                        {"partition": p, "current_leader_epoch": -1, "fetch_offset": o, "log_start_offset": -1,
                         "partition_max_bytes": 8 << 20} for p, o in self.offsets.items()]}]}
            request = encode_request(RequestHeader(1, 11, self.correlation, "bench"), body)
            self.sock.sendall(b"".join(bytes(b) for b in request))
            _, response = decode_response(1, 11, self._frame())
            got = 0
            for partition in response["responses"][0]["partitions"]:
                records = partition["records"] or b""
                last = None
                for _, header in iter_batch_headers(records):
                    last = header
                if last is not None:
                    self.offsets[partition["partition_index"]] = last.next_offset
                got += len(records)
            if got == 0:
                return total
            total += got


def bench_raw_fetch(repeat: int) -> None:
    print("\n== broker serve rate: roost's own fetch client, 6 partitions, 8 MiB per partition per fetch ==")
    size, count = 65536, 16_000
    with ExitStack() as stack:
        brokers = {name: stack.enter_context(running_broker(source=source)) for name, source in SOURCES.items()}
        for broker in brokers.values():
            create_topic(broker.bootstrap, "raw-bench", 6)
            produce_run(broker, "raw-bench", count, size, 1048576, 20)
        runs: dict[str, list[Measured]] = {name: [] for name in brokers}
        for _ in range(repeat):
            for name, broker in brokers.items():
                fetcher = RawFetcher(broker.bootstrap, "raw-bench", 6)
                total = 0

                def work(fetcher: RawFetcher = fetcher) -> None:
                    nonlocal total
                    total = fetcher.fetch_all()

                runs[name].append(measure(broker, work))
                assert total >= count * size
                fetcher.sock.close()
        for name in brokers:
            print_row(f"{size} B messages ({count * size / 1e6:.0f} MB){tree_label(name)}", count, size, runs[name])


LATENCY_VARIANTS: dict[str, tuple[str, ...]] = {
    "page cache": (),
    "fsync before ack": ("--log.flush.interval.messages", "1"),
}


@dataclass
class LatencyRun:
    latencies_ms: list[float]  # sorted
    broker_cpu: float
    requests: int  # sent by the producer and the consumer while measured
    syscalls: int | None

    def pct(self, p: float) -> float:
        values = self.latencies_ms
        return values[min(len(values) - 1, int(p / 100 * len(values)))] if values else float("nan")

    def per_message_us(self) -> float:
        return self.broker_cpu / max(1, len(self.latencies_ms)) * 1e6


def bench_latency(rate: int, seconds: float, repeat: int) -> None:
    print(f"\n== end-to-end latency: {rate} msg/s for {seconds:.0f} s, 100 B, linger.ms 0, acks=all, "
          "1 partition, producer and consumer in this process ==")
    print("   (variants alternate run by run; broker CPU per message and per request (requests from the "
          "clients' statistics), system calls per message from perf stat)")
    results: dict[str, list[LatencyRun]] = {}
    for _ in range(repeat):
        for variant, flags in LATENCY_VARIANTS.items():
            for name, source in SOURCES.items():
                label = variant + tree_label(name)
                with running_broker(*flags, source=source) as broker:
                    run = latency_run(broker, rate, seconds)
                results.setdefault(label, []).append(run)
                print_latency(label, [run])
    if repeat > 1:
        print(f"   medians of {repeat} runs (worst run's p99 in brackets):")
        for label, runs in results.items():
            print_latency(label, runs)


def print_latency(label: str, runs: list[LatencyRun]) -> None:
    def median(values: list[float]) -> float:
        return statistics.median(values)

    n = median([len(r.latencies_ms) for r in runs])
    p99s = [r.pct(99) for r in runs]
    worst = f" [{max(p99s):.2f}]" if len(runs) > 1 else ""
    per_request = median([r.broker_cpu / max(1, r.requests) * 1e6 for r in runs])
    requests = median([r.requests / max(1, len(r.latencies_ms)) for r in runs])
    counted = [r.syscalls / max(1, len(r.latencies_ms)) for r in runs if r.syscalls is not None]
    syscalls = f"{median(counted):4.1f}" if counted else " n/a"
    print(f"  {label:<30} n={n:<6.0f} p50 {median([r.pct(50) for r in runs]):6.2f} ms  "
          f"p99 {median(p99s):6.2f}{worst} ms  p99.9 {median([r.pct(99.9) for r in runs]):6.2f} ms   "
          f"broker {median([r.per_message_us() for r in runs]):5.1f} µs/msg, {per_request:5.1f} µs/request, "
          f"{requests:.2f} requests/msg, {syscalls} syscalls/msg", flush=True)


def latency_run(broker: Broker, rate: int, seconds: float) -> LatencyRun:
    create_topic(broker.bootstrap, "latency", 1)
    consumer_requests, producer_requests = RequestTally(), RequestTally()
    counters: dict[str, Any] = {}

    def started(producer: Producer) -> None:
        producer.poll(0.2)  # fresh statistics before the clock starts
        counters.update(syscalls=SyscallCount(broker.popen.pid), cpu0=broker.cpu_seconds(),
                        requests0=consumer_requests.sent + producer_requests.sent)

    def ended(producer: Producer) -> None:
        counters.update(cpu=broker.cpu_seconds() - counters["cpu0"], syscalls=counters["syscalls"].stop())
        producer.poll(0.25)  # statistics are at most 100 ms old: the consumer thread polls on
        time.sleep(0.25)
        counters["requests"] = consumer_requests.sent + producer_requests.sent - counters["requests0"]

    latencies = paced_latencies(broker.bootstrap, "latency", rate, seconds, hooks=Hooks(started, ended),
                                producer_config=producer_requests.config(),
                                consumer_config=consumer_requests.config())
    return LatencyRun(latencies, counters["cpu"], counters["requests"], counters["syscalls"])


def bench_fan_in(producers: int, rate_each: int, seconds: float) -> None:
    print(f"\n== fan-in: {producers} producers x {rate_each} msg/s for {seconds:.0f} s, 100 B, linger.ms 0, "
          "acks=all, 1 partition, page cache, producers in this process ==")
    for name, source in SOURCES.items():
        fan_in_run(name, source, producers, rate_each, seconds)


def fan_in_run(name: str, source: str | None, producers: int, rate_each: int, seconds: float) -> None:
    with running_broker(source=source) as broker:
        create_topic(broker.bootstrap, "fan-in", 1)
        clients = [Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "acks": "all"})
                   for _ in range(producers)]
        for client in clients:
            client.list_topics("fan-in", timeout=30)
        payload = b"x" * 100
        total = int(producers * rate_each * seconds)
        interval = 1.0 / (producers * rate_each)
        cpu0, start = broker.cpu_seconds(), time.perf_counter()
        for n in range(total):
            delay = start + n * interval - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            client = clients[n % producers]
            client.produce("fan-in", payload)
            client.poll(0)
        for client in clients:
            assert client.flush(60) == 0
        wall, broker_cpu = time.perf_counter() - start, broker.cpu_seconds() - cpu0
        # Destroyed before the broker stops, so that librdkafka does not log 20 disconnections.
        del client, clients
        gc.collect()
    offered = producers * rate_each
    print(f"  {name:<12} offered {offered:,} msg/s, all {total:,} acknowledged in {wall:.1f} s = {total / wall:,.0f} msg/s: "
          f"broker {broker_cpu:.2f} s CPU = {broker_cpu / wall:.2f} cores ({broker_cpu / total * 1e6:.1f} µs/msg)",
          flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", nargs="*", default=["produce", "consume", "raw", "latency", "fan-in"])
    parser.add_argument("--repeat", type=int, default=1, help="runs per row; the median is printed")
    parser.add_argument("--rate", type=int, default=5000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--compare", metavar="CHECKOUT",
                        help="another Roost checkout (its src/ is used) measured in turn with this one")
    if sys.argv[1:2] == ["consumer-worker"]:
        bootstrap, topic, partitions, count, size = sys.argv[2:7]
        consumer_worker(bootstrap, topic, int(partitions), int(count), int(size))
        return
    args = parser.parse_args()
    if args.compare:
        if not Path(args.compare, "src", "roost").is_dir():
            parser.error(f"--compare {args.compare}: no src/roost there")
        SOURCES[Path(args.compare).name] = str(Path(args.compare).resolve())
    print(f"roost broker benchmark — {platform.node()} {os.cpu_count()} CPUs, Python {platform.python_version()}, "
          f"{time.strftime('%Y-%m-%d %H:%M')}, data dir on {Path(tempfile.gettempdir())}")
    if "produce" in args.what:
        bench_produce(args.repeat)
    if "consume" in args.what:
        bench_consume(args.repeat)
    if "raw" in args.what:
        bench_raw_fetch(args.repeat)
    if "latency" in args.what:
        bench_latency(args.rate, args.seconds, args.repeat)
    if "fan-in" in args.what:
        bench_fan_in(20, 1000, args.seconds)


if __name__ == "__main__":
    main()
