"""The fault-injecting proxy: pass, blackhole, cut, heal (threaded flavour, blocking sockets)."""

from __future__ import annotations

import socket
import socketserver
import threading
import time

from tests.support.faultproxy import ThreadedFaultProxy
from tests.support.procs import wait_for


class Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while data := self.request.recv(4096):
            self.request.sendall(data)


def test_pass_blackhole_heal_cut() -> None:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Echo)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with ThreadedFaultProxy(server.server_address) as proxy:
            conn = socket.create_connection(proxy.address, timeout=10)
            conn.sendall(b"ping")
            assert conn.recv(4) == b"ping"
            proxy.blackhole()
            conn.sendall(b"lost")
            wait_for(lambda: proxy.proxy.bytes_dropped == 4, what="the proxy to swallow the bytes")
            proxy.heal()
            conn.sendall(b"pong")
            assert conn.recv(4) == b"pong"  # "lost" vanished: the next bytes are the new ones
            proxy.cut()
            assert conn.recv(4) == b""  # closed by the proxy
            refused = socket.create_connection(proxy.address, timeout=10)
            assert refused.recv(4) == b""  # new connections are closed at once while cut
            proxy.heal()
            again = socket.create_connection(proxy.address, timeout=10)
            again.sendall(b"back")
            assert again.recv(4) == b"back"
            for s in (conn, refused, again):
                s.close()
    finally:
        server.shutdown()
        server.server_close()


def test_lose_reply_once_after_the_request_reached_the_server() -> None:
    received: list[bytes] = []

    class RecordingEcho(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            while data := self.request.recv(4096):
                received.append(data)
                self.request.sendall(data)

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), RecordingEcho)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with ThreadedFaultProxy(server.server_address) as proxy:
            proxy.lose_reply(b"MARK")
            conn = socket.create_connection(proxy.address, timeout=10)
            conn.sendall(b"plain")
            assert conn.recv(5) == b"plain"  # armed, but this request does not carry the marker
            conn.sendall(b"with MARK")
            assert conn.recv(16) == b""  # its answer never comes: the proxy closed the connection
            assert b"with MARK" in b"".join(received)  # though the server got the request
            again = socket.create_connection(proxy.address, timeout=10)
            again.sendall(b"MARK again")  # the fault fired once: a retry goes through
            assert again.recv(16) == b"MARK again"
            assert (proxy.proxy.replies_lost, proxy.proxy.marker_seen) == (1, 2)
            for s in (conn, again):
                s.close()
    finally:
        server.shutdown()
        server.server_close()


def test_a_delayed_proxy_adds_its_delay_each_way_and_keeps_every_byte_in_order() -> None:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Echo)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    delay_s = 0.08
    try:
        with ThreadedFaultProxy(server.server_address, delay_s=delay_s) as proxy:
            conn = socket.create_connection(proxy.address, timeout=10)
            started = time.monotonic()
            conn.sendall(b"ping")
            assert conn.recv(4) == b"ping"
            round_trip = time.monotonic() - started
            assert round_trip >= 2 * delay_s, f"a round trip of {round_trip:.3f} s through a {delay_s} s delay each way"
            # Many chunks on their way at once arrive whole and in order (a stream, not datagrams).
            payload = bytes(i % 251 for i in range(3 << 20))
            sender = threading.Thread(target=conn.sendall, args=(payload,))
            sender.start()
            echoed = bytearray()
            while len(echoed) < len(payload):
                chunk = conn.recv(1 << 16)
                assert chunk, f"closed after {len(echoed)} of {len(payload)} bytes"
                echoed += chunk
            sender.join(10)
            assert bytes(echoed) == payload
            conn.close()
    finally:
        server.shutdown()
        server.server_close()
