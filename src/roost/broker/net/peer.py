"""A broker's own Kafka client for talking to other brokers (replica fetches, the controller's
requests, AlterPartition, ControlledShutdown): one pipelined connection per peer, on asyncio.

Requests get correlation ids and futures; responses resolve them. The connection is opened on
first use and again after it breaks; a broken connection fails every request in flight with
PeerError (the caller decides whether to retry). Bounded: responses larger than
`max_frame_bytes` break the connection, and at most `max_in_flight` requests wait at once.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import ssl
from collections.abc import Callable
from typing import Any

from roost.broker.security.listener import PeerSecurity
from roost.wire.kafka import (
    FrameSizeError,
    FrameSplitter,
    KafkaCodecError,
    RequestHeader,
    decode_response,
    encode_request,
    encode_response,
)

log = logging.getLogger("roost.broker.net.peer")

DEFAULT_MAX_FRAME_BYTES = 128 * 1024 * 1024
CONNECT_TIMEOUT_S = 5.0


class PeerError(Exception):
    """The request could not be answered: the connection failed, broke or timed out."""


SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
LOGIN_TIMEOUT_S = 10.0


PLAINTEXT_PEERS = PeerSecurity()


class _PeerProtocol(asyncio.Protocol):
    def __init__(self, peer: KafkaPeer) -> None:
        self._peer = peer
        self._frames = FrameSplitter(peer.max_frame_bytes)
        self.transport: asyncio.Transport | None = None
        self.lost = False  # connection_lost was called (possibly before the peer adopted it)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        try:
            frames = self._frames.split(data)
        except FrameSizeError as error:
            self._peer._broken(self, f"bad response frame: {error}")
            return
        for frame in frames:
            self._peer._response(self, frame)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self._peer._broken(self, f"connection lost: {exc or 'closed by the peer'}")


class KafkaPeer:
    def __init__(self, node_id: int, host: str, port: int, client_id: str, *,
                 max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES, max_in_flight: int = 1000,
                 security: PeerSecurity = PLAINTEXT_PEERS) -> None:
        self.node_id = node_id
        self.security = security
        self.host = host
        self.port = port
        self.client_id = client_id
        self.max_frame_bytes = max_frame_bytes
        self._slots = asyncio.Semaphore(max_in_flight)
        self._protocol: _PeerProtocol | None = None
        self._connecting: asyncio.Future[_PeerProtocol] | None = None
        self._pending: dict[int, tuple[asyncio.Future[dict[str, Any]], int, int]] = {}
        self._correlation = 0
        self._closed = False
        self._logging_in: _PeerProtocol | None = None  # connected, SASL login not done yet

    def __repr__(self) -> str:
        return f"KafkaPeer({self.node_id}@{self.host}:{self.port})"

    async def request(self, api_key: int, version: int, body: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Send one request and wait for its response body (PeerError on failure or timeout)."""
        if self._closed:
            raise PeerError(f"{self!r} is closed")
        async with self._slots:
            protocol = await asyncio.wait_for(self._connected(), CONNECT_TIMEOUT_S + LOGIN_TIMEOUT_S)
            return await self._exchange(protocol, api_key, version, body, timeout)

    async def _exchange(self, protocol: _PeerProtocol, api_key: int, version: int, body: dict[str, Any],
                        timeout: float) -> dict[str, Any]:
        """One request on `protocol` (also during its login, before it is the connection)."""
        self._correlation = (self._correlation + 1) & 0x7FFFFFFF
        correlation = self._correlation
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[correlation] = (future, api_key, version)
        try:
            frame = encode_request(RequestHeader(api_key, version, correlation, self.client_id), body)
        except KafkaCodecError:
            del self._pending[correlation]
            raise
        transport = protocol.transport
        if self._closed or protocol not in (self._protocol, self._logging_in) or transport is None \
                or transport.is_closing():
            # The connection broke (or the peer was closed) while this request waited for
            # its answer from _connected(): wait_for hands the result over a loop turn late.
            del self._pending[correlation]
            if protocol is self._protocol:
                self._broken(protocol, "connection closing")  # so that the next request connects again
            raise PeerError(f"{self!r}: connection closed before the request was sent")
        transport.writelines(frame)
        try:
            return await asyncio.wait_for(future, timeout)
        except TimeoutError:
            raise PeerError(f"{self!r}: no answer to api {api_key} within {timeout:.1f} s") from None
        finally:
            self._pending.pop(correlation, None)

    async def _connected(self) -> _PeerProtocol:
        if self._protocol is not None:
            return self._protocol
        if self._connecting is None:
            self._connecting = asyncio.ensure_future(self._connect())
        try:
            return await asyncio.shield(self._connecting)
        finally:
            if self._connecting is not None and self._connecting.done():
                self._connecting = None

    async def _connect(self) -> _PeerProtocol:
        loop = asyncio.get_running_loop()
        security = self.security
        try:
            _, protocol = await asyncio.wait_for(loop.create_connection(
                lambda: _PeerProtocol(self), self.host, self.port, ssl=security.tls,
                server_hostname=(self.host if security.check_hostname else "") if security.tls else None),
                CONNECT_TIMEOUT_S)
        except (OSError, ssl.SSLError, TimeoutError) as error:
            raise PeerError(f"{self!r}: cannot connect: {error}") from None
        if protocol.lost:
            # Accepted and closed at once (a listener refusing over max.connections, a process
            # going down, a cut network path): connection_lost came before this connection was
            # adopted, so _broken ignored it. Adopting it would hand every later request a dead
            # connection that nothing replaces.
            raise PeerError(f"{self!r}: connection closed as soon as it opened")
        if security.mechanism is not None:
            self._logging_in = protocol
            try:
                await self._login(protocol)
            except BaseException:
                if protocol.transport is not None:
                    protocol.transport.abort()
                raise
            finally:
                self._logging_in = None
            if protocol.lost:
                raise PeerError(f"{self!r}: connection closed during the login")
        self._protocol = protocol
        return protocol

    async def _login(self, protocol: _PeerProtocol) -> None:
        """SaslHandshake v1 and SaslAuthenticate v1 rounds as this broker's own user."""
        security = self.security
        mechanism = security.mechanism
        assert mechanism is not None
        answer = await self._exchange(protocol, SASL_HANDSHAKE, 1, {"mechanism": mechanism}, LOGIN_TIMEOUT_S)
        if answer["error_code"] != 0:
            raise PeerError(f"{self!r}: SASL mechanism {mechanism} refused (error {answer['error_code']})")
        if mechanism == "PLAIN":
            tokens = [f"\0{security.username}\0{security.password}".encode()]
            answer = await self._exchange(protocol, SASL_AUTHENTICATE, 1, {"auth_bytes": tokens[0]}, LOGIN_TIMEOUT_S)
            if answer["error_code"] != 0:
                raise PeerError(f"{self!r}: login as {security.username!r} failed: {answer['error_message']}")
            return
        from scramp import ScramClient, ScramException
        client = ScramClient([mechanism], security.username, security.password)
        first = await self._exchange(protocol, SASL_AUTHENTICATE, 1, {"auth_bytes": client.get_client_first().encode()},
                                     LOGIN_TIMEOUT_S)
        if first["error_code"] != 0:
            raise PeerError(f"{self!r}: login as {security.username!r} failed: {first['error_message']}")
        try:
            client.set_server_first(bytes(first["auth_bytes"]).decode())
            final = await self._exchange(protocol, SASL_AUTHENTICATE, 1,
                                         {"auth_bytes": client.get_client_final().encode()}, LOGIN_TIMEOUT_S)
            if final["error_code"] != 0:
                raise PeerError(f"{self!r}: login as {security.username!r} failed: {final['error_message']}")
            client.set_server_final(bytes(final["auth_bytes"]).decode())  # the peer knows our key too
        except ScramException as error:
            raise PeerError(f"{self!r}: SCRAM exchange failed: {error}") from None

    def _response(self, protocol: _PeerProtocol, frame: bytearray) -> None:
        if len(frame) < 4:
            self._broken(protocol, "response frame too short")
            return
        correlation = int.from_bytes(frame[:4], "big", signed=True)
        entry = self._pending.get(correlation)
        if entry is None:
            return  # its caller timed out and left
        future, api_key, version = entry
        try:
            _, body = decode_response(api_key, version, frame)
        except KafkaCodecError as error:
            self._broken(protocol, f"undecodable response to api {api_key} v{version}: {error}")
            return
        if not future.done():
            future.set_result(body)

    def _broken(self, protocol: _PeerProtocol, reason: str) -> None:
        if protocol is self._logging_in:
            self._logging_in = None
        elif protocol is not self._protocol:
            return
        self._protocol = None
        if protocol.transport is not None:
            protocol.transport.abort()
        if self._pending:
            log.info("%r: %s; failing %d requests in flight", self, reason, len(self._pending))
        pending, self._pending = self._pending, {}
        for future, _, _ in pending.values():
            if not future.done():
                future.set_exception(PeerError(f"{self!r}: {reason}"))

    def close(self) -> None:
        self._closed = True
        if self._protocol is not None:
            self._broken(self._protocol, "closed")
        if self._connecting is not None:
            self._connecting.cancel()


LocalRouter = Callable[[RequestHeader, bytearray], Any]


class LocalPeer:
    """This broker as its own peer (the controller telling itself, a leader asking its own
    controller): the request takes the codec's round trip, as on the wire, but no socket (it
    would count against max.connections and cost two system calls each way)."""

    def __init__(self, node_id: int, client_id: str, route: LocalRouter) -> None:
        self.node_id = node_id
        self.client_id = client_id
        self._route = route
        self._correlation = 0

    async def request(self, api_key: int, version: int, body: dict[str, Any], timeout: float) -> dict[str, Any]:
        self._correlation = (self._correlation + 1) & 0x7FFFFFFF
        header = RequestHeader(api_key, version, self._correlation, self.client_id)
        frame = bytearray(b"".join(bytes(b) for b in encode_request(header, body))[4:])
        try:
            answer = self._route(header, frame)
            deferred = getattr(answer, "future", None)  # a Deferred: the body comes later
            if deferred is not None:
                answer = encode_response(header, await asyncio.wait_for(deferred, timeout))
            elif inspect.isawaitable(answer):
                answer = await asyncio.wait_for(answer, timeout)
        except TimeoutError:
            raise PeerError(f"broker {self.node_id} (local): no answer to api {api_key} within {timeout:.1f} s") from None
        response = b"".join(bytes(b) for b in answer)
        _, decoded = decode_response(api_key, version, memoryview(response)[4:])
        return decoded

    def close(self) -> None:
        pass


class PeerPool:
    """One KafkaPeer per broker id, re-made when the broker's address changes; this broker itself
    through a LocalPeer once `serve_locally` was called."""

    def __init__(self, client_id: str, security: PeerSecurity = PLAINTEXT_PEERS) -> None:
        self.client_id = client_id
        self.security = security
        self._peers: dict[int, KafkaPeer] = {}
        self._local: LocalPeer | None = None

    def serve_locally(self, node_id: int, route: LocalRouter) -> None:
        self._local = LocalPeer(node_id, self.client_id, route)

    def get(self, node_id: int, host: str, port: int) -> KafkaPeer:
        if self._local is not None and node_id == self._local.node_id:
            return self._local  # type: ignore[return-value]
        peer = self._peers.get(node_id)
        if peer is None or (peer.host, peer.port) != (host, port):
            if peer is not None:
                peer.close()
            peer = self._peers[node_id] = KafkaPeer(node_id, host, port, self.client_id, security=self.security)
        return peer

    def drop(self, node_id: int) -> None:
        peer = self._peers.pop(node_id, None)
        if peer is not None:
            peer.close()

    def close(self) -> None:
        for peer in self._peers.values():
            peer.close()
        self._peers.clear()
