#!/usr/bin/env python3
"""Abusive clients against a real `roost` broker (and keeper), at sizes too large for the suite:
prints the broker's RSS and CPU time and a well-behaved client's latency before, during and after
each abuse, with the conditions. The bounded versions are tests/hostile/.

    .venv/bin/python scripts/abuse_run.py                         # every scenario, default sizes
    .venv/bin/python scripts/abuse_run.py idle --connections 10000
    .venv/bin/python scripts/abuse_run.py loris --connections 2000
    .venv/bin/python scripts/abuse_run.py noread --clients 50 --topic-mib 64
    .venv/bin/python scripts/abuse_run.py partial --connections 200 --sent-mib 4
    .venv/bin/python scripts/abuse_run.py keeper --connections 5000
    .venv/bin/python scripts/abuse_run.py tls-loris --connections 2000
    .venv/bin/python scripts/abuse_run.py console-loris --connections 1000

Scenarios:
- idle: N connections that never send a byte (the broker's max.connections raised above N), held
  for a while and then left to `connections.max.idle.ms`.
- loris: N connections sending a length prefix and then one byte every second, cut off by
  `request.receive.timeout.ms`.
- noread: clients that pipeline 100 Fetches of the whole topic each and never read.
- partial: connections that send part of a declared 100 MiB request quickly, then nothing: the
  memory a partial request holds, until its receive deadline.
- keeper: N connections to the keeper's port from one address over maxClientCnxns, and N that
  never ask for a session, while kazoo works.
- tls-loris: on a broker's SSL listener, N/2 connections that never begin the TLS handshake, N/4
  that send half a ClientHello and stall (both cut by `ssl.handshake.timeout.ms`), and N/4 that
  finish the handshake and then trickle a request one byte a second (`request.receive.timeout.ms`),
  while a confluent-kafka client produces and consumes over TLS.
- console-loris: on `roost console`, N/2 connections trickling a request's headers one byte a
  second and N/2 that send nothing, cut by `--header-timeout`, while urllib fetches pages.

Only loopback; every process started is stopped; every wait is bounded.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.abuse import (
    Latency,
    client_hello,
    close_all,
    connect,
    consume_all,
    count_open,
    fill_topic,
    never_reader,
    open_idle,
    produce_latency,
    push_partial,
    raise_open_files,
    rss_mib,
    send_each,
    start_slow_loris,
    tls_connect,
)
from tests.support.procs import RoostProcess, start_roost

CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime + stime


class Broker:
    def __init__(self, data_dir: Path, *flags: str, args: list[str] | None = None, listener: str = "kafka",
                 client: dict[str, str] | None = None) -> None:
        """A `roost up --no-keeper` broker (`args`: other arguments for `roost`); the well-behaved
        client uses `listener` with the `client` settings."""
        self.proc: RoostProcess = start_roost(
            (args or ["up", "--no-keeper", "--data-dir", str(data_dir), "--kafka-port", "0"])
            + ["--group.initial.rebalance.delay.ms", "500", *flags], expect=(listener,))
        self.host, self.port = self.proc.listeners[listener]
        self.bootstrap = f"{self.host}:{self.port}"
        self.pid = self.proc.popen.pid
        self.client = client

    def figures(self, label: str, topic: str | None = None) -> None:
        line = f"  {label:<28} RSS {rss_mib(self.pid):7.1f} MiB   CPU {cpu_s(self.pid):7.2f} s"
        if topic is not None:
            latency = produce_latency(self.bootstrap, topic, 300, settings=self.client)
            line += f"   produce acks=all {latency}"
            assert consume_all(self.bootstrap, topic, 301, settings=self.client) == 301, \
                "the well-behaved consumer did not get its records"
            line += "; consumer read all back"
        print(line, flush=True)

    def stop(self) -> None:
        self.proc.stop()
        if "Traceback" in self.proc.text():
            print("  !! the broker's log has a traceback")


def wait_until_closed(sockets: list, limit_s: float) -> float:
    started = time.monotonic()
    while count_open(sockets) and time.monotonic() - started < limit_s:
        time.sleep(0.2)
    return time.monotonic() - started


def idle(args: argparse.Namespace, work: Path) -> None:
    n = args.connections
    raise_open_files(n + 2000)
    idle_ms = 20_000
    broker = Broker(work / "idle", "--max.connections", str(n + 1000), "--connections.max.idle.ms", str(idle_ms))
    print(f"idle: {n} connections that send nothing; connections.max.idle.ms={idle_ms}")
    try:
        broker.figures("unloaded", "idle-before")
        started = time.monotonic()
        sockets = open_idle(broker.host, broker.port, n)
        print(f"  opened {n} in {time.monotonic() - started:.1f} s; {count_open(sockets)} open")
        broker.figures(f"{n} idle held", "idle-held")
        waited = wait_until_closed(sockets, idle_ms / 1000 + 60)
        print(f"  {n - count_open(sockets)} of {n} closed by the idle timeout, "
              f"{time.monotonic() - started:.1f} s after opening")
        close_all(sockets)
        time.sleep(1)
        broker.figures("after", "idle-after")
        del waited
    finally:
        broker.stop()


def loris(args: argparse.Namespace, work: Path) -> None:
    n = args.connections
    raise_open_files(n + 2000)
    broker = Broker(work / "loris", "--max.connections", str(n + 1000))
    print(f"loris: {n} connections sending a length prefix and one byte a second; "
          "request.receive.timeout.ms=30000 (the default)")
    try:
        broker.figures("unloaded", "loris-before")
        sockets = [start_slow_loris(broker.host, broker.port, 1000, 1) for _ in range(n)]
        started = time.monotonic()
        measured = False
        while count_open(sockets) and time.monotonic() - started < 120:
            send_each(sockets, b"\x00")
            if not measured and time.monotonic() - started > 5:
                broker.figures(f"{n} slow-loris held", "loris-held")
                measured = True
            time.sleep(1)
        print(f"  all {n} cut off {time.monotonic() - started:.1f} s after their first byte"
              if not count_open(sockets) else f"  {count_open(sockets)} still open after 120 s")
        close_all(sockets)
        broker.figures("after", "loris-after")
    finally:
        broker.stop()


def noread(args: argparse.Namespace, work: Path) -> None:
    idle_ms = 30_000
    broker = Broker(work / "noread", "--connections.max.idle.ms", str(idle_ms))
    print(f"noread: {args.clients} clients each pipelining 100 Fetches of a {args.topic_mib} MiB topic "
          f"(50 MiB each answer at most) and reading none; connection.max.buffered.bytes default; "
          f"connections.max.idle.ms={idle_ms}")
    try:
        fill_topic(broker.bootstrap, "noread", args.topic_mib)
        broker.figures("unloaded, topic written", "noread-before")
        sockets = [never_reader(broker.host, broker.port, "noread", 100) for _ in range(args.clients)]
        started = time.monotonic()
        time.sleep(2)
        broker.figures(f"{args.clients} never-readers held", "noread-held")
        wait_until_closed(sockets, idle_ms / 1000 + 60)
        print(f"  {args.clients - count_open(sockets)} of {args.clients} closed (reset) "
              f"{time.monotonic() - started:.1f} s after they sent their fetches")
        close_all(sockets)
        broker.figures("after", "noread-after")
    finally:
        broker.stop()


def partial(args: argparse.Namespace, work: Path) -> None:
    n, sent = args.connections, args.sent_mib << 20
    budget = ["--queued.max.request.bytes", str(args.request_memory_mib << 20)] if args.request_memory_mib else []
    broker = Broker(work / f"partial-{args.request_memory_mib}", "--max.connections", str(n + 1000), *budget)
    print(f"partial: {n} connections each sending {args.sent_mib} MiB of a declared 100 MiB request, then "
          "nothing; request.receive.timeout.ms=30000, request.receive.min.bytes.per.second=65536 (defaults); "
          + (f"queued.max.request.bytes={args.request_memory_mib} MiB" if budget else "no queued.max.request.bytes"))
    try:
        broker.figures("unloaded", "partial-before")
        started = time.monotonic()
        sockets = [push_partial(broker.host, broker.port, 100 << 20, sent, 0.2)[0] for _ in range(n)]
        time.sleep(1)
        broker.figures(f"{n} x {args.sent_mib} MiB held", "partial-held")
        limit = 30 + sent / 65536 + 30
        wait_until_closed(sockets, limit)
        print(f"  {n - count_open(sockets)} of {n} cut off {time.monotonic() - started:.1f} s after they began "
              f"(deadline 30 s + {sent / 65536:.0f} s earned by the bytes sent)")
        close_all(sockets)
        time.sleep(1)
        broker.figures("after", "partial-after")
    finally:
        broker.stop()


def keeper(args: argparse.Namespace, work: Path) -> None:
    from kazoo.client import KazooClient
    from tests.keeper.zkharness import keeper_process

    n = args.connections
    raise_open_files(2 * n + 2000)
    with keeper_process(work / "keeper", extra={"maxClientCnxns": 60}) as proc:
        host, port = proc.listeners["keeper"]
        pid = proc.popen.pid

        def kazoo_ms() -> float:
            client = KazooClient(hosts=f"{host}:{port}", timeout=10)
            started = time.perf_counter()
            client.start(timeout=10)
            client.create("/abuse/n", b"x", makepath=True, sequence=True)
            elapsed = (time.perf_counter() - started) * 1000
            client.stop()
            client.close()
            return elapsed

        print(f"keeper: {n} connections from 127.0.0.2 (maxClientCnxns=60) and {n}, 50 per address from "
              "127.0.0.3 on, that never ask for a session (zookeeper.nio.sessionlessCnxnTimeout=10000, the default)")
        print(f"  unloaded: RSS {rss_mib(pid):.1f} MiB, kazoo connect+create {kazoo_ms():.1f} ms")
        flood = []
        for _ in range(n):
            try:
                flood.append(connect(host, port, source="127.0.0.2"))
            except OSError:
                break
        # 50 from each of 127.0.0.3, 127.0.0.4, ... (under the cap of 60 per address).
        silent = [connect(host, port, source=f"127.0.{3 + i // 50 // 250}.{3 + i // 50 % 250}") for i in range(n)]
        time.sleep(0.5)
        print(f"  held: {count_open(flood)} of {len(flood)} from 127.0.0.2 open; RSS {rss_mib(pid):.1f} MiB, "
              f"kazoo connect+create {kazoo_ms():.1f} ms")
        started = time.monotonic()
        wait_until_closed(silent, 40)
        print(f"  {n - count_open(silent)} of {n} sessionless connections closed within "
              f"{time.monotonic() - started:.1f} s more")
        close_all(flood)
        close_all(silent)
        print(f"  after: RSS {rss_mib(pid):.1f} MiB, kazoo connect+create {kazoo_ms():.1f} ms; "
              f"refusal lines in the log: {proc.text().count('too many connections')}")


def tls_loris(args: argparse.Namespace, work: Path) -> None:
    from tests.hostile.test_abusive_tls_clients import SSL_LISTENER, make_certificates, tls_broker_args

    n = args.connections
    raise_open_files(n + 2000)
    (work / "tls").mkdir()
    ca, pem = make_certificates(work / "tls")
    broker = Broker(work / "tls", "--max.connections", str(n + 1000),
                    args=tls_broker_args(work / "tls" / "data", pem), listener=SSL_LISTENER,
                    client={"security.protocol": "SSL", "ssl.ca.location": str(ca)})
    silent_n, stalled_n = n // 2, n // 4
    trickle_n = n - silent_n - stalled_n
    print(f"tls-loris: on the SSL listener, {silent_n} connections that never begin the TLS handshake, "
          f"{stalled_n} that send half a ClientHello, {trickle_n} that finish it and trickle a request one byte "
          "a second; ssl.handshake.timeout.ms=10000, request.receive.timeout.ms=30000 (the defaults); "
          "the well-behaved client over TLS")
    try:
        broker.figures("unloaded", "tls-before")
        started = time.monotonic()
        silent = open_idle(broker.host, broker.port, silent_n)
        hello = client_hello()
        stalled = [connect(broker.host, broker.port) for _ in range(stalled_n)]
        for sock in stalled:
            sock.sendall(hello[:len(hello) // 2])
        trickle = [tls_connect(broker.host, broker.port, ca) for _ in range(trickle_n)]
        for sock in trickle:
            sock.sendall(b"\x00\x00\x03\xe8\x00")  # a 1000-byte request's length prefix and one byte
        print(f"  opened {n} in {time.monotonic() - started:.1f} s")
        broker.figures(f"{n} held", "tls-held")
        handshakes = wait_until_closed(silent + stalled, 60)
        print(f"  {len(silent) + len(stalled) - count_open(silent + stalled)} of {len(silent) + len(stalled)} "
              f"handshakes cut {time.monotonic() - started:.1f} s after the first opened ({handshakes:.1f} s of waiting)")
        while count_open(trickle) and time.monotonic() - started < 120:
            send_each(trickle, b"\x00")
            time.sleep(1)
        print(f"  {trickle_n - count_open(trickle)} of {trickle_n} trickling senders cut "
              f"{time.monotonic() - started:.1f} s after opening")
        close_all(silent)
        close_all(stalled)
        close_all(trickle)
        time.sleep(1)
        broker.figures("after", "tls-after")
        text = broker.proc.text()
        print(f"  log lines: {text.count('TLS handshake not done within')} for the handshakes, "
              f"{text.count('still incomplete')} for the trickled requests")
    finally:
        broker.stop()


def console_loris(args: argparse.Namespace, work: Path) -> None:
    import urllib.request

    from tests.hostile.test_abusive_console_clients import SUMMARY, console_args

    n = args.connections
    raise_open_files(n + 2000)
    broker = Broker(work / "console-broker")
    console = start_roost(console_args(broker.bootstrap), expect=("console",))
    host, port = console.listeners["console"]
    pid = console.popen.pid

    def pages(count: int = 100) -> Latency:
        times = []
        for _ in range(count):
            began = time.perf_counter()
            with urllib.request.urlopen(f"http://{host}:{port}/api/topics", timeout=10) as answer:
                answer.read()
            times.append((time.perf_counter() - began) * 1000)
        times.sort()
        return Latency(times[len(times) // 2], times[int(len(times) * 0.99)], times[-1], len(times))

    def figures(label: str) -> None:
        print(f"  {label:<28} console RSS {rss_mib(pid):7.1f} MiB   CPU {cpu_s(pid):7.2f} s   "
              f"GET /api/topics {pages()}", flush=True)

    print(f"console-loris: {n // 2} connections trickling a request's headers one byte a second, {n - n // 2} "
          "that send nothing; --header-timeout 20 (the default); urllib fetching /api/topics")
    try:
        figures("unloaded")
        started = time.monotonic()
        trickle = [connect(host, port) for _ in range(n // 2)]
        silent = open_idle(host, port, n - n // 2)
        head = b"GET /api/topics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 1000
        print(f"  opened {n} in {time.monotonic() - started:.1f} s")
        measured, sent = False, 0
        while count_open(trickle + silent) and time.monotonic() - started < 90:
            for sock in trickle:
                try:
                    sock.send(head[sent:sent + 1])
                except OSError:
                    pass
            sent += 1
            if not measured and time.monotonic() - started > 5:
                figures(f"{n} held")
                measured = True
            time.sleep(1)
        print(f"  {n - count_open(trickle + silent)} of {n} closed {time.monotonic() - started:.1f} s after opening")
        close_all(trickle)
        close_all(silent)
        time.sleep(2)
        figures("after")
        print(f"  summary lines in the console's log: {console.text().count(SUMMARY)}")
    finally:
        console.stop()
        broker.stop()


SCENARIOS: dict[str, Callable[[argparse.Namespace, Path], None]] = {
    "idle": idle, "loris": loris, "noread": noread, "partial": partial, "keeper": keeper,
    "tls-loris": tls_loris, "console-loris": console_loris}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scenario", nargs="*", choices=[*SCENARIOS, []], help="default: all")
    parser.add_argument("--connections", type=int, default=0,
                        help="idle 10000, loris 2000, partial 200, keeper 5000, tls-loris 2000, console-loris 1000")
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--topic-mib", type=int, default=64)
    parser.add_argument("--sent-mib", type=int, default=4)
    parser.add_argument("--request-memory-mib", type=int, default=0,
                        help="partial: queued.max.request.bytes in MiB (default: none, as Kafka)")
    args = parser.parse_args()
    defaults = {"idle": 10_000, "loris": 2_000, "partial": 200, "keeper": 5_000, "tls-loris": 2_000,
                "console-loris": 1_000}
    print(f"machine: {os.cpu_count()} cores; python {sys.version.split()[0]}; every figure on loopback")
    with tempfile.TemporaryDirectory(prefix="roost-abuse-") as work:
        for name in args.scenario or list(SCENARIOS):
            run = argparse.Namespace(**vars(args))
            run.connections = args.connections or defaults.get(name, 0)
            SCENARIOS[name](run, Path(work))
    return 0


if __name__ == "__main__":
    sys.exit(main())
