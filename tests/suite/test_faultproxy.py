"""The fault-injecting proxy: pass, blackhole, cut, heal (threaded flavour, blocking sockets)."""

from __future__ import annotations

import socket
import socketserver
import threading

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
