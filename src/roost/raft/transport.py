"""Peer TCP transport for raft messages (asyncio Protocols).

Each member listens on its peer port and dials every other member; a member sends its messages on
the connection it dialled and receives on the ones it accepted. A connection opens with a hello
naming the dialling member. Sending never blocks: a message is dropped (raft retransmits) when the
link is down and its small backlog is full, or when the socket's write buffer is over its bound.
A peer that sends garbage has its connection closed with a log line; the others carry on.
"""

from __future__ import annotations

import asyncio
import logging
import random
import ssl
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

from roost.raft.codec import (
    DEFAULT_MAX_FRAME,
    HELLO_SIZE,
    CodecError,
    FrameDecoder,
    decode_hello,
    encode_hello,
    encode_message,
)
from roost.raft.messages import Message

log = logging.getLogger(__name__)

Address = tuple[str, int]


@dataclass(frozen=True, slots=True)
class TransportConfig:
    max_frame: int = DEFAULT_MAX_FRAME
    max_write_buffer: int = 64 << 20  # bytes queued in one socket before we drop messages
    max_backlog: int = 1024  # messages kept while a link is (re)connecting
    reconnect_min: float = 0.02
    reconnect_max: float = 1.0
    connect_timeout: float = 2.0
    # Mutual TLS between members (the keeper's sslQuorum): the listener's context asks for and
    # checks the dialler's certificate; the dialler's presents its own and checks the listener's.
    server_ssl: ssl.SSLContext | None = None
    client_ssl: ssl.SSLContext | None = None
    ssl_handshake_timeout: float = 5.0


class _InboundProtocol(asyncio.Protocol):
    def __init__(self, owner: PeerTransport) -> None:
        self.owner = owner
        self.transport: asyncio.Transport | None = None
        self.peer_id: int | None = None
        self.hello = bytearray()
        self.decoder = FrameDecoder(owner.config.max_frame)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, only alike.
        self.transport = cast(asyncio.Transport, transport)
        self.owner._inbound.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.owner._inbound.discard(self)

    def data_received(self, data: bytes) -> None:
        try:
            if self.peer_id is None:
                need = HELLO_SIZE - len(self.hello)
                self.hello += data[:need]
                data = data[need:]
                if len(self.hello) < HELLO_SIZE:
                    return
                self.peer_id = decode_hello(bytes(self.hello))
                if self.peer_id not in self.owner.peers:
                    raise CodecError(f"hello from unknown member {self.peer_id}")
                self.owner._links[self.peer_id].poke()  # it is back: dial it now, not after backoff
            delivered = False
            try:
                for message in self.decoder.feed(data):
                    if message.src != self.peer_id or message.dst != self.owner.node_id:
                        raise CodecError(f"message {message.src}->{message.dst} on the link from {self.peer_id}")
                    self.owner.on_message(message)
                    delivered = True
            finally:
                if delivered and self.owner.on_input_done is not None:
                    self.owner.on_input_done()
        except CodecError as exc:
            peer = self.transport.get_extra_info("peername") if self.transport else None
            log.warning("raft %d: closing peer connection from %s: %s", self.owner.node_id, peer, exc)
            if self.transport is not None:
                self.transport.abort()


class _OutboundProtocol(asyncio.Protocol):
    def __init__(self) -> None:
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes) -> None:
        pass  # the listener never talks back on this connection

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)


class _Link:
    """The connection this member dials to one peer, with reconnects and a bounded backlog."""

    def __init__(self, owner: PeerTransport, peer_id: int) -> None:
        self.owner = owner
        self.peer_id = peer_id
        self.transport: asyncio.Transport | None = None
        self.backlog: deque[bytes] = deque()
        self.task: asyncio.Task[None] | None = None
        self.dropped = 0
        self.connects = 0
        self.closed = False
        self._poked = asyncio.Event()

    def send(self, frame: bytes) -> bool:
        transport = self.transport
        if transport is not None and not transport.is_closing():
            if transport.get_write_buffer_size() > self.owner.config.max_write_buffer:
                self.dropped += 1
                return False
            transport.write(frame)
            return True
        if len(self.backlog) >= self.owner.config.max_backlog:
            self.backlog.popleft()
            self.dropped += 1
        self.backlog.append(frame)
        return False

    async def run(self) -> None:
        config = self.owner.config
        delay = config.reconnect_min
        loop = asyncio.get_running_loop()
        # The `closed` flag backs up cancellation: Python 3.11's wait_for can swallow a cancel that
        # races with a failing connect.
        while not self.closed:
            host, port = self.owner.peers[self.peer_id]
            try:
                async with asyncio.timeout(config.connect_timeout):
                    if config.client_ssl is not None:
                        raw, protocol = await loop.create_connection(
                            _OutboundProtocol, host, port, ssl=config.client_ssl,
                            ssl_handshake_timeout=config.ssl_handshake_timeout)
                    else:
                        raw, protocol = await loop.create_connection(_OutboundProtocol, host, port)
            except (TimeoutError, OSError) as exc:
                if isinstance(exc, ConnectionRefusedError) and self.owner.on_peer_gone is not None:
                    # Nothing listens on its peer port: its process is gone (a timeout says nothing).
                    self.owner.on_peer_gone(self.peer_id)
                self._poked.clear()
                try:
                    async with asyncio.timeout(delay * (0.5 + self.owner._rng.random())):
                        await self._poked.wait()
                    delay = config.reconnect_min
                except TimeoutError:
                    delay = min(delay * 2, config.reconnect_max)
                continue
            transport = raw
            self.connects += 1
            transport.write(encode_hello(self.owner.node_id))
            while self.backlog:
                transport.write(self.backlog.popleft())
            self.transport = transport
            delay = config.reconnect_min
            try:
                await protocol.closed
            finally:
                self.transport = None
                transport.abort()

    def poke(self) -> None:
        """Cut a reconnect backoff short."""
        self._poked.set()

    def close(self) -> None:
        self.closed = True
        if self.task is not None:
            self.task.cancel()
        if self.transport is not None:
            self.transport.abort()
            self.transport = None


class PeerTransport:
    def __init__(self, node_id: int, peers: dict[int, Address], listen: Address,
                 on_message: Callable[[Message], None], config: TransportConfig | None = None,
                 on_input_done: Callable[[], None] | None = None,
                 on_peer_gone: Callable[[int], None] | None = None) -> None:
        """`on_message` gets each message; `on_input_done`, if given, is called once after the
        messages of one read were all delivered (so that their work can be done together);
        `on_peer_gone`, if given, gets a peer whose peer port refused a connection (after a lost
        connection the link redials at once, so a process that died is known within a round trip)."""
        self.node_id = node_id
        self.peers = {i: a for i, a in peers.items() if i != node_id}
        self.listen = listen
        self.on_message = on_message
        self.on_input_done = on_input_done
        self.on_peer_gone = on_peer_gone
        self.config = config or TransportConfig()
        self._rng = random.Random()
        self._server: asyncio.Server | None = None
        self._links = {i: _Link(self, i) for i in self.peers}
        self._inbound: set[_InboundProtocol] = set()

    @property
    def address(self) -> Address:
        assert self._server is not None and self._server.sockets
        host, port = self._server.sockets[0].getsockname()[:2]
        return host, port

    def set_peer_address(self, peer_id: int, address: Address) -> None:
        """Where to dial `peer_id` from the next (re)connect on (tests learn ports late)."""
        assert peer_id in self.peers
        self.peers[peer_id] = address
        link = self._links[peer_id]
        if link.transport is not None:
            link.transport.abort()

    def add_peer(self, peer_id: int, address: Address) -> None:
        """A member that joined the ensemble: dial it (and accept its connections) from now on."""
        if peer_id == self.node_id:
            return
        if peer_id in self.peers:
            if self.peers[peer_id] != address:
                self.set_peer_address(peer_id, address)
            return
        self.peers[peer_id] = address
        link = _Link(self, peer_id)
        self._links[peer_id] = link
        if self._server is not None:
            link.task = asyncio.create_task(link.run(), name=f"raft-link-{self.node_id}-{peer_id}")

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        config = self.config
        self._server = await loop.create_server(
            lambda: _InboundProtocol(self), self.listen[0], self.listen[1], reuse_address=True,
            ssl=config.server_ssl, ssl_handshake_timeout=None if config.server_ssl is None else config.ssl_handshake_timeout)
        for link in self._links.values():
            link.task = asyncio.create_task(link.run(), name=f"raft-link-{self.node_id}-{link.peer_id}")

    def send(self, message: Message) -> bool:
        link = self._links.get(message.dst)
        if link is None:
            return False
        return link.send(encode_message(message))

    def send_many(self, messages: list[Message]) -> None:
        """Send in order, with one write per peer: a Ready's messages to one member leave together."""
        if len(messages) == 1:
            self.send(messages[0])
            return
        frames: dict[int, list[bytes]] = {}
        for message in messages:
            frames.setdefault(message.dst, []).append(encode_message(message))
        for dst, parts in frames.items():
            link = self._links.get(dst)
            if link is not None:
                link.send(parts[0] if len(parts) == 1 else b"".join(parts))

    def connected(self, peer_id: int) -> bool:
        link = self._links[peer_id]
        return link.transport is not None and not link.transport.is_closing()

    async def stop(self) -> None:
        for link in self._links.values():
            link.close()
        tasks = [link.task for link in self._links.values() if link.task is not None]
        if self._server is not None:
            self._server.close()
        for protocol in list(self._inbound):
            if protocol.transport is not None:
                protocol.transport.abort()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None
