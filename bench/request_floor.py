"""The floor under one request's broker CPU on this machine: what the cheapest servers cost.

Prints figures with their conditions; never asserts.

    .venv/bin/python bench/request_floor.py [--requests 20000] [--rounds 3]

The same client as `bench/request_cost.py`'s socket view (one 154-byte frame at a time over
loopback TCP with TCP_NODELAY, waiting for each answer) against servers that do nothing but answer:

- **C, epoll**: a server in C (compiled here with the machine's `cc`) that waits in `epoll_wait`,
  `read`s and `write`s 12 bytes back: three system calls per request, no user-space work to speak of.
  Its CPU is the kernel's price of one request and answer on loopback TCP (on loopback the write also
  runs the receiver's side of TCP and wakes it).
- **Python, uvloop Protocol**: the shape of Roost's connection with nothing behind it: an
  `asyncio.Protocol` on uvloop that splits length-prefixed frames in `data_received` and writes an
  answer of 12 bytes for each.
- **a 170-byte `pwrite` append** to a file in the page cache: what the log append costs the kernel.

An unbatched message costs the broker at least two such requests (the producer's Produce and the
consumer's Fetch) and one append, so these rows bound what any broker on this machine can reach
per message.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from process_cpu import user_system_seconds  # a sibling module

BODY = b"x" * 150
FRAME = struct.pack(">i", len(BODY)) + BODY

C_SERVER = r"""
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

int main(void) {
    int listener = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in address = {0};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    if (bind(listener, (struct sockaddr *)&address, sizeof address) || listen(listener, 4)
        || getsockname(listener, (struct sockaddr *)&address, &length)) return 1;
    printf("%d\n", ntohs(address.sin_port));
    fflush(stdout);
    int client = accept(listener, 0, 0), on = 1, poller = epoll_create1(0);
    setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    fcntl(client, F_SETFL, O_NONBLOCK);
    struct epoll_event interest = {.events = EPOLLIN, .data.fd = client}, ready[8];
    epoll_ctl(poller, EPOLL_CTL_ADD, client, &interest);
    static char buffer[65536];
    for (;;) {
        int count = epoll_wait(poller, ready, 8, -1);
        for (int i = 0; i < count; i++) {
            ssize_t got = read(client, buffer, sizeof buffer);
            if (got <= 0) return 0;
            if (write(client, buffer, 12) != 12) return 1;
        }
    }
}
"""

PYTHON_SERVER = r"""
import asyncio, struct, sys
import uvloop

class Answering(asyncio.Protocol):
    def connection_made(self, transport):
        self.transport = transport
        self.pending = b""

    def data_received(self, data):
        buffered = self.pending + data if self.pending else data
        while len(buffered) >= 4:
            (size,) = struct.unpack_from(">i", buffered)
            if len(buffered) < 4 + size:
                break
            frame, buffered = buffered[4:4 + size], buffered[4 + size:]
            self.transport.writelines([b"\x00\x00\x00\x08", frame[4:12]])
        self.pending = buffered

async def main():
    server = await asyncio.get_running_loop().create_server(Answering, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await asyncio.sleep(3600)

uvloop.run(main())
"""


@contextmanager
def server_process(command: list[str]) -> Iterator[tuple[int, int]]:
    """Start a server that prints its port; yield (pid, port); stop it."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        port = int(process.stdout.readline())
        yield process.pid, port
    finally:
        process.kill()
        process.wait(10)


def cost_per_request(pid: int, port: int, requests: int) -> dict[str, float]:
    """One request at a time: the server's user and system CPU per request, in µs."""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def round_trip() -> None:
            sock.sendall(FRAME)
            received = 0
            while received < 12:
                chunk = sock.recv(64)
                assert chunk, "the server closed the connection"
                received += len(chunk)

        for _ in range(1000):
            round_trip()
        user0, system0 = user_system_seconds(pid)
        started = time.perf_counter()
        for _ in range(requests):
            round_trip()
        wall = time.perf_counter() - started
        user1, system1 = user_system_seconds(pid)
    return {"user": (user1 - user0) / requests * 1e6, "system": (system1 - system0) / requests * 1e6,
            "round trip": wall / requests * 1e6}


def append_cost(appends: int) -> dict[str, float]:
    """CPU per 170-byte `pwrite` at the end of a file in the page cache (this process's own)."""
    with tempfile.TemporaryDirectory() as directory:
        fd = os.open(Path(directory, "segment"), os.O_RDWR | os.O_CREAT)
        try:
            record = b"x" * 170
            before = os.times()
            for n in range(appends):
                os.pwrite(fd, record, n * len(record))
            after = os.times()
        finally:
            os.close(fd)
    return {"user": (after.user - before.user) / appends * 1e6, "system": (after.system - before.system) / appends * 1e6}


def build_c_server(directory: Path) -> Path | None:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return None
    source, binary = directory / "answer.c", directory / "answer"
    source.write_text(C_SERVER)
    subprocess.run([compiler, "-O2", "-o", str(binary), str(source)], check=True)
    return binary


def median_row(label: str, figures: list[dict[str, float]]) -> dict[str, float]:
    row = {key: statistics.median(f[key] for f in figures) for key in figures[0]}
    parts = f"user {row['user']:5.1f} µs + system {row['system']:5.1f} µs = {row['user'] + row['system']:5.1f} µs"
    trip = f", round trip {row['round trip']:.0f} µs" if "round trip" in row else ""
    rounds = ", ".join(f"{f['user'] + f['system']:.1f}" for f in figures)
    print(f"  {label:<34} {parts}{trip}   (rounds: {rounds})")
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=3, help="rounds; medians are printed")
    args = parser.parse_args()
    load = os.getloadavg()
    print(f"roost request floor — {platform.node()} {os.cpu_count()} CPUs, Python {platform.python_version()}, "
          f"{time.strftime('%Y-%m-%d %H:%M')}, load {load[0]:.1f}/{load[1]:.1f}/{load[2]:.1f}, "
          f"{args.requests} requests per figure, medians of {args.rounds} rounds")
    with tempfile.TemporaryDirectory() as directory:
        c_server = build_c_server(Path(directory))
        servers: dict[str, list[str]] = {"Python, uvloop Protocol": [sys.executable, "-c", PYTHON_SERVER]}
        if c_server is not None:
            servers = {"C, epoll (3 system calls)": [str(c_server)], **servers}
        else:
            print("  (no C compiler here: the C row is left out)")
        figures: dict[str, list[dict[str, float]]] = {name: [] for name in servers}
        appends: list[dict[str, float]] = []
        for _ in range(args.rounds):
            for name, command in servers.items():
                with server_process(command) as (pid, port):
                    figures[name].append(cost_per_request(pid, port, args.requests))
            appends.append(append_cost(args.requests * 5))
    print("\n== the server's CPU per request and answer (154 B in, 12 B out, one at a time) ==")
    rows = {name: median_row(name, runs) for name, runs in figures.items()}
    print("\n== the log append's kernel cost ==")
    append = median_row("pwrite of 170 B at the file's end", appends)
    print("\n== so one unbatched message (a Produce and a Fetch, one append) costs at least ==")
    for name, row in rows.items():
        floor = 2 * (row["user"] + row["system"]) + append["user"] + append["system"]
        print(f"  {name:<34} {floor:5.1f} µs of server CPU per message")


if __name__ == "__main__":
    main()
