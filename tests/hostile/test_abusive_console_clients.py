"""Slow clients on the console's web port (docs/hostile-input.md, "Abusive clients"; issue 35):
connections that trickle a request's headers a byte at a time, ones that open and send nothing,
and, on the HTTPS console, ones that never finish the TLS handshake. Each is closed within
`--header-timeout` of opening, the console writes one line for the lot, and a browserless client
(urllib, and aiohttp's client over HTTPS) keeps getting pages meanwhile; a slow page or a
keep-alive connection in use is never cut, an idle one is.

One real broker (`roost up --no-keeper`) and two real `roost console` processes in front of it,
plain HTTP and HTTPS (a throw-away CA from trustme), with a header timeout of 1.5 s.
The large version, with RSS: `scripts/abuse_run.py console-loris`.
"""

from __future__ import annotations

import asyncio
import http.client
import ssl
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from tests.hostile.test_abusive_tls_clients import make_certificates
from tests.support.abuse import (
    client_hello,
    close_all,
    connect,
    count_open,
    open_idle,
    rss_mib,
    send_each,
    wait_closed,
)
from tests.support.procs import RoostProcess, start_roost, wait_for

HEADER_TIMEOUT_S = 1.5
SUMMARY = "that sent no whole request within"  # the console's one line for them


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RoostProcess]:
    proc = start_roost(["up", "--no-keeper", "--data-dir", str(tmp_path_factory.mktemp("console-abuse")),
                        "--kafka-port", "0"])
    yield proc
    proc.stop()


def console_args(bootstrap: str, *more: str) -> list[str]:
    """`roost console` on a free loopback port (shared with scripts/abuse_run.py)."""
    return ["console", "-b", bootstrap, "--port", "0", *more]


@pytest.fixture(scope="module")
def console(broker: RoostProcess) -> Iterator[RoostProcess]:
    proc = start_roost(console_args(broker.address("kafka"), "--header-timeout", str(HEADER_TIMEOUT_S)),
                       expect=("console",))
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def https_console(broker: RoostProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RoostProcess, Path]]:
    ca, pem = make_certificates(tmp_path_factory.mktemp("console-tls"))
    proc = start_roost(console_args(broker.address("kafka"), "--header-timeout", str(HEADER_TIMEOUT_S),
                                    "--tls-cert", str(pem)), expect=("console",))
    yield proc, ca
    proc.stop()


def page(console: RoostProcess, path: str = "/api/topics") -> int:
    with urllib.request.urlopen(f"http://{console.address('console')}{path}", timeout=10) as answer:
        answer.read()
        return answer.status


def test_slow_and_silent_clients_are_closed_and_pages_still_served(console: RoostProcess) -> None:
    host, port = console.listeners["console"]
    before = rss_mib(console.popen.pid)
    started = time.monotonic()
    silent = open_idle(host, port, 60)
    trickle = [connect(host, port) for _ in range(60)]
    head = b"GET /api/topics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 200
    for sock in trickle:
        sock.sendall(head[:1])
    try:
        opened = time.monotonic()
        if opened - started < HEADER_TIMEOUT_S - 0.5:  # (a loaded machine may be slower to open them)
            assert count_open(silent + trickle) == 120, "closed before --header-timeout"
        sent, served = 1, 0
        while count_open(trickle) and time.monotonic() - opened < HEADER_TIMEOUT_S + 3:
            send_each(trickle, head[sent:sent + 1])  # one more byte of the head every 0.2 s: never idle, never whole
            sent += 1
            assert page(console) == 200  # a well-behaved client meanwhile
            served += 1
            time.sleep(0.2)
        held = rss_mib(console.popen.pid)
        assert count_open(trickle) == 0, "a client trickling its headers kept its connection"
        wait_closed(silent, 2)
        elapsed = time.monotonic() - opened
        print(f"120 slow or silent connections closed {elapsed:.1f} s after the last opened; {served} pages served "
              f"meanwhile; console RSS {before:.0f} -> {held:.0f} MiB")
        assert time.monotonic() - started >= HEADER_TIMEOUT_S - 0.2
    finally:
        close_all(silent)
        close_all(trickle)
    assert page(console, "/") == 200
    # One line for them (the cuts of the first second or so counted in it; later ones wait for
    # the next line, a minute on), not one per connection.
    wait_for(lambda: SUMMARY in console.text(), 10, what="the console's summary line")
    time.sleep(0.5)
    assert console.text().count(SUMMARY) == 1, console.text()[-3000:]
    line = next(line for line in console.text().splitlines() if SUMMARY in line)
    assert "sent part of a request head" in line and "sent nothing after connecting" in line, line
    print(line)


def test_a_kept_alive_connection_in_use_is_not_cut_and_an_idle_one_is(console: RoostProcess) -> None:
    host, port = console.listeners["console"]
    kept = http.client.HTTPConnection(host, port, timeout=10)
    try:
        deadline = time.monotonic() + HEADER_TIMEOUT_S + 0.5  # past the timeout from its opening
        asked = 0
        while time.monotonic() < deadline:  # a request on the same connection every half second
            kept.request("GET", "/api/topics")
            answer = kept.getresponse()
            answer.read()
            assert answer.status == 200
            asked += 1
            time.sleep(0.5)
        assert asked >= 4
        # Idle past the timeout: closed (quietly: browsers keep such connections as a matter of course).
        time.sleep(HEADER_TIMEOUT_S + 0.7)
        assert count_open([kept.sock]) == 0, "an idle kept-alive connection was not closed"
    finally:
        kept.close()


def test_https_handshakes_never_finished_are_cut_and_pages_still_served(
        https_console: tuple[RoostProcess, Path]) -> None:
    proc, ca = https_console
    host, port = proc.listeners["console"]
    silent = open_idle(host, port, 40)
    hello = client_hello()
    stalled = [connect(host, port) for _ in range(20)]
    for sock in stalled:
        sock.sendall(hello[:len(hello) // 2])
    started = time.monotonic()

    async def fetch_pages() -> int:  # aiohttp's client over HTTPS, checking the console's certificate
        context = ssl.create_default_context(cafile=str(ca))
        served = 0
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context)) as session:
            while time.monotonic() - started < HEADER_TIMEOUT_S + 0.5:
                async with session.get(f"https://{host}:{port}/api/topics") as answer:
                    assert answer.status == 200
                    await answer.read()
                served += 1
                await asyncio.sleep(0.1)
        return served

    try:
        assert asyncio.run(fetch_pages()) >= 5
        wait_closed(silent + stalled, HEADER_TIMEOUT_S + 3)
    finally:
        close_all(silent)
        close_all(stalled)
    wait_for(lambda: SUMMARY in proc.text(), 10, what="the HTTPS console's summary line")
    line = next(line for line in proc.text().splitlines() if SUMMARY in line)
    assert "60 did not finish the TLS handshake" in line, line


def test_the_consoles_survived(console: RoostProcess, https_console: tuple[RoostProcess, Path]) -> None:
    for proc in (console, https_console[0]):
        assert proc.popen.poll() is None
        assert "Traceback" not in proc.text(), proc.text()[-3000:]
