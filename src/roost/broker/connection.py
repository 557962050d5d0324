"""One client connection: Kafka framing, in-order responses, and the per-connection limits.

Kafka clients pipeline requests and expect responses in request order on each connection. Each
request takes a slot in `_slots`; a slot is filled at once for synchronous handlers or later for
ones that wait (a fetch waiting for data, a produce waiting for fsync, a JoinGroup waiting for the
group). The head of the queue is written as soon as it is ready.

Limits (principle 4): a frame larger than `socket.request.max.bytes`, a frame too short to hold a
request header, or a request the codec cannot decode closes this connection with a log line. Past
`queued.max.requests` slots in flight, or while the socket's send buffer is over its high-water
mark, the connection stops reading, so one greedy client cannot make the broker buffer without end.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from roost.wire.kafka import KafkaCodecError, RequestHeader, peek_request_header

if TYPE_CHECKING:
    from roost.broker.dispatcher import Dispatcher

log = logging.getLogger("roost.broker.connection")

SIZE = struct.Struct(">i")
MIN_REQUEST_FRAME = 8  # api_key, api_version, correlation_id (client_id may be null)
NO_RESPONSE = object()  # a handler's answer when the request gets no response (acks=0)

Buffers = list[bytes | bytearray | memoryview]


@dataclass
class ConnectionLimits:
    max_frame_bytes: int
    max_inflight_requests: int
    max_buffered_bytes: int


class _Slot:
    """The place of one request in the connection's response order."""

    __slots__ = ("buffers", "done")

    def __init__(self) -> None:
        self.buffers: Buffers | None = None
        self.done = False


class KafkaConnection(asyncio.Protocol):
    def __init__(self, dispatcher: Dispatcher, limits: ConnectionLimits,
                 on_close: Callable[[KafkaConnection], None]) -> None:
        self._dispatcher = dispatcher
        self._limits = limits
        self._on_close = on_close
        self._transport: asyncio.Transport | None = None
        self._buffer = bytearray()
        self._slots: deque[_Slot] = deque()
        self._reading_paused = False
        self._writing_paused = False
        self._handling = False  # inside _handle_buffered
        self._closed = False
        self.peer = "?"
        self.tasks: set[asyncio.Task[Any]] = set()
        self.reject_reason: str | None = None  # set before connection_made: refuse this client

    # asyncio.Protocol -------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport's methods without subclassing it.
        self._transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        # Responses can be large (fetch); let the kernel buffer absorb them before we pause.
        transport.set_write_buffer_limits(high=self._limits.max_buffered_bytes // 4)
        if self.reject_reason is not None:
            self.abort(self.reject_reason)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._buffer and not self._closed:
            log.warning("connection from %s closed in the middle of a frame (%d bytes of it received)",
                        self.peer, len(self._buffer))
        self._closed = True
        for task in list(self.tasks):
            task.cancel()
        self._slots.clear()
        self._buffer.clear()
        self._on_close(self)

    def pause_writing(self) -> None:
        self._writing_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._update_reading()

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        self._handle_buffered()

    def _handle_buffered(self) -> None:
        """Handle the whole frames received, stopping while reading is paused: frames that came in
        the same read as the request that reached a limit wait too, as unread bytes would."""
        if self._handling:
            return  # a resume from inside a handler: the loop below goes on by itself
        self._handling = True
        try:
            self._handle_frames()
        finally:
            self._handling = False

    def _handle_frames(self) -> None:
        buffer = self._buffer
        position = 0
        available = len(buffer)
        while available - position >= 4 and not self._closed and not self._reading_paused:
            (size,) = SIZE.unpack_from(buffer, position)
            if size < MIN_REQUEST_FRAME or size > self._limits.max_frame_bytes:
                self.abort(f"frame size {size} outside [{MIN_REQUEST_FRAME}, {self._limits.max_frame_bytes}]")
                return
            end = position + 4 + size
            if end > available:
                break
            # A writable copy: produce rewrites base offsets inside the records it carries.
            frame = buffer[position + 4:end]
            position = end
            self._handle_frame(frame)
        if position:
            del buffer[:position]

    # requests ---------------------------------------------------------------------------------
    def _handle_frame(self, frame: bytearray) -> None:
        try:
            header = peek_request_header(frame)
        except KafkaCodecError as error:
            self.abort(f"undecodable request header: {error}")
            return
        slot = _Slot()
        self._slots.append(slot)
        try:
            result = self._dispatcher.dispatch(self, header, frame)
        except KafkaCodecError as error:
            self.abort(f"bad request api_key={header.api_key} v{header.api_version}: {error}")
            return
        except Exception:
            log.exception("handler failed for api_key=%d from %s; closing", header.api_key, self.peer)
            self.abort("internal error")
            return
        if isinstance(result, Awaitable):
            task = asyncio.ensure_future(result)
            self.tasks.add(task)
            task.add_done_callback(lambda t, s=slot: self._finish_async(t, s, header))
        else:
            self._fill(slot, result)
        self._update_reading()

    def _finish_async(self, task: asyncio.Task[Any], slot: _Slot, header: RequestHeader) -> None:
        self.tasks.discard(task)
        if task.cancelled() or self._closed:
            return
        error = task.exception()
        if error is not None:
            log.error("handler failed for api_key=%d from %s: %r; closing", header.api_key, self.peer, error,
                      exc_info=error)
            self.abort("internal error")
            return
        self._fill(slot, task.result())

    def _fill(self, slot: _Slot, result: Any) -> None:
        slot.done = True
        slot.buffers = None if result is NO_RESPONSE else result
        self._flush_ready()

    def _flush_ready(self) -> None:
        transport = self._transport
        slots = self._slots
        while slots and slots[0].done:
            slot = slots.popleft()
            if slot.buffers is not None and transport is not None and not self._closed:
                transport.writelines(slot.buffers)
        self._update_reading()

    def _update_reading(self) -> None:
        if self._transport is None or self._closed:
            return
        should_pause = self._writing_paused or len(self._slots) >= self._limits.max_inflight_requests
        if should_pause and not self._reading_paused:
            self._reading_paused = True
            self._transport.pause_reading()
        elif not should_pause and self._reading_paused:
            self._reading_paused = False
            self._transport.resume_reading()
            if self._buffer:
                self._handle_buffered()

    def abort(self, reason: str) -> None:
        """Close this connection at once because the client broke the protocol or a limit."""
        if self._closed:
            return
        log.warning("closing connection from %s: %s", self.peer, reason)
        self._closed = True
        if self._transport is not None:
            self._transport.abort()
