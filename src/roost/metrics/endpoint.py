"""`GET /metrics` over HTTP, served on the event loop of the servers it describes.

Why not prometheus-client's own server: it answers from a thread, and the collectors read the
broker's and keeper's live state (dicts of partitions, groups, sessions) that the loop mutates;
reading them from another thread could see a dict change size mid-iteration or a half-made
update. Here a scrape is one loop callback like any request: every collector reads a consistent
state, and the hot paths take no locks. The cost is that a scrape's rendering runs on the loop
(about a millisecond per few hundred series).

One endpoint can show several registries (`roost up` hosts a broker and a keeper in one process):
their series names do not overlap, so their texts are concatenated.

Guarded (settings metrics.ssl.keystore.location and metrics.bearer.token): over TLS only, and a
scrape must send `Authorization: Bearer <token>` (Prometheus' `authorization` / `bearer_token_file`
in a scrape config); without the right token the answer is 401 and no metric. The token is
compared in constant time and never logged; refusals are logged at most once per
REFUSAL_LOG_INTERVAL_S, with the scraper's address.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import ssl
import time
from collections.abc import Sequence

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

log = logging.getLogger("roost.console.metrics")

MAX_REQUEST_HEAD = 16 * 1024  # a scraper's request line and headers fit easily
READ_TIMEOUT_S = 10.0
PATHS = frozenset({"/metrics", "/"})
REFUSAL_LOG_INTERVAL_S = 60.0


def token_ok(head: bytes, token: str) -> bool:
    """Whether the request head carries `Authorization: Bearer <token>`."""
    for line in head.split(b"\r\n")[1:]:
        name, sep, value = line.partition(b":")
        if sep and name.strip().lower() == b"authorization":
            scheme, _, given = value.strip().partition(b" ")
            return scheme.lower() == b"bearer" and hmac.compare_digest(given.strip(), token.encode())
    return False


class MetricsEndpoint:
    def __init__(self, registries: Sequence[CollectorRegistry], token: str | None = None,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        assert registries, "an endpoint with nothing to show"
        assert token is None or token, "an empty token would let everyone in"
        self._registries = list(registries)
        self._token = token
        self._ssl = ssl_context
        self._server: asyncio.Server | None = None
        self._clients: set[asyncio.Task[None]] = set()
        self._last_refusal_logged = -REFUSAL_LOG_INTERVAL_S
        self.refused = 0

    async def start(self, host: str, port: int) -> tuple[str, int]:
        """Listen on host:port (0: a free port); returns where it listens."""
        self._server = await asyncio.start_server(self._serve, host, port, reuse_address=True,
                                                  limit=MAX_REQUEST_HEAD, ssl=self._ssl,
                                                  ssl_handshake_timeout=READ_TIMEOUT_S if self._ssl else None)
        bound = self._server.sockets[0].getsockname()
        return bound[0], bound[1]

    async def stop(self) -> None:
        if self._server is None:
            return
        self._server.close()
        for task in list(self._clients):
            task.cancel()
        await self._server.wait_closed()

    def render(self) -> bytes:
        return b"".join(generate_latest(registry) for registry in self._registries)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._clients.add(task)
        try:
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT_S)
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ConnectionError,
                    ssl.SSLError):
                return
            method, path = _request_line(head)
            headers = ""
            if self._token is not None and not token_ok(head, self._token):
                self._log_refusal(writer)
                status, body, kind = "401 Unauthorized", b"a bearer token is needed\n", "text/plain"
                headers = 'WWW-Authenticate: Bearer realm="roost metrics"\r\n'
            elif method not in ("GET", "HEAD"):
                status, body, kind = "405 Method Not Allowed", b"only GET\n", "text/plain"
            elif path.split("?", 1)[0] not in PATHS:
                status, body, kind = "404 Not Found", b"try /metrics\n", "text/plain"
            else:
                status, body, kind = "200 OK", self.render(), CONTENT_TYPE_LATEST
            writer.write(f"HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {len(body)}\r\n"
                         f"{headers}Connection: close\r\n\r\n".encode())
            if method != "HEAD":
                writer.write(body)
            with contextlib.suppress(ConnectionError):
                await writer.drain()
        except Exception:
            log.exception("metrics request failed")
        finally:
            writer.close()
            self._clients.discard(task)


    def _log_refusal(self, writer: asyncio.StreamWriter) -> None:
        self.refused += 1
        now = time.monotonic()
        if now - self._last_refusal_logged >= REFUSAL_LOG_INTERVAL_S:
            self._last_refusal_logged = now
            log.warning("metrics: refused a scrape from %s without the right bearer token (%d refused so far)",
                        writer.get_extra_info("peername"), self.refused)


def _request_line(head: bytes) -> tuple[str, str]:
    parts = head.split(b"\r\n", 1)[0].decode("latin-1").split()
    if len(parts) < 2:
        return "", ""
    return parts[0], parts[1]
