"""One client connection: Kafka framing, in-order responses, and the per-connection limits.

Kafka clients pipeline requests and expect responses in request order on each connection. Each
request takes a slot in `_slots`; a slot is filled at once for synchronous handlers or later for
ones that wait (a fetch waiting for data, a produce waiting for fsync, a JoinGroup waiting for the
group). The head of the queue is written as soon as it is ready.

"Where is it" answers (Metadata, FindCoordinator) are decided when their turn comes, not when they
arrive: behind an acks=all produce that waits on the connection, an answer decided at arrival
would reach the client as stale as the wait is long (after a leader's death, the dead leader
again, half a second later). Kafka reads a connection's next request only once the previous
answer is sent, so its answers are as fresh as this.

Limits (principle 4): a frame larger than `socket.request.max.bytes`, a frame too short to hold a
request header, or a request the codec cannot decode closes this connection with a log line. Past
`queued.max.requests` slots in flight, or while the socket's send buffer is over its high-water
mark, the connection stops reading, so one greedy client cannot make the broker buffer without end.
A connection idle for `connections.max.idle.ms`, or holding a partial request past
`request.receive.timeout.ms` (roost.broker.net.deadlines), is closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import struct
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Protocol

from roost.broker.net.deadlines import ConnectionClock, Deadlines, expired, next_check
from roost.broker.net.request import NO_RESPONSE, Deferred
from roost.broker.net.request_memory import RequestMemory
from roost.broker.security.listener import PLAINTEXT_LISTENER, ListenerSecurity
from roost.broker.security.sasl import Action, SaslAuthenticator
from roost.principal import ANONYMOUS, KafkaPrincipal
from roost.wire.kafka import (
    ApiKey,
    FrameSizeError,
    FrameSplitter,
    KafkaCodecError,
    RequestHeader,
    encode_response,
    read_request_header,
)

log = logging.getLogger("roost.broker.net.connection")

NO_DEADLINES: Final = Deadlines(idle_s=0.0, receive_s=0.0, min_bytes_per_s=0.0)
LINGER_RESET: Final = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close() resets the connection
MIN_REQUEST_FRAME = 8  # api_key, api_version, correlation_id (client_id may be null)

Buffers = list[bytes | bytearray | memoryview]


@dataclass
class ConnectionLimits:
    max_frame_bytes: int
    max_inflight_requests: int
    max_buffered_bytes: int
    deadlines: Deadlines = NO_DEADLINES
    # queued.max.request.bytes: the broker's one budget of requests being received (None: none).
    request_memory: RequestMemory | None = None


class RequestRouter(Protocol):
    """Where a connection sends each request: returns the encoded response buffers, NO_RESPONSE,
    or an awaitable of either; raises KafkaCodecError for a request it cannot decode."""

    def route(self, header: RequestHeader, frame: bytearray, client_host: str, header_end: int = -1,
              principal: KafkaPrincipal = ANONYMOUS, listener: str = "",
              mute: Callable[[int], None] | None = None, connection: object = None) -> Any: ...


# Answered with the state at their turn in the response order (see the module's docstring).
DECIDED_AT_THEIR_TURN = frozenset({ApiKey.METADATA, ApiKey.FIND_COORDINATOR})


class _Slot:
    """The place of one request in the connection's response order."""

    __slots__ = ("buffers", "done", "held")

    def __init__(self) -> None:
        self.buffers: Buffers | None = None
        self.done = False
        # A request routed only when every earlier answer is out: (header, frame, header end).
        self.held: tuple[RequestHeader, bytearray, int] | None = None


class KafkaConnection(asyncio.Protocol):
    def __init__(self, router: RequestRouter, limits: ConnectionLimits,
                 on_close: Callable[[KafkaConnection], None], security: ListenerSecurity = PLAINTEXT_LISTENER) -> None:
        self._router = router
        self._limits = limits
        self._on_close = on_close
        self._transport: asyncio.Transport | None = None
        self.security = security
        self.listener = security.name
        # Before a SASL login: Kafka's cap on a token (sasl.server.max.receive.size), checked on the
        # length prefix so a huge token is never buffered, and no lower bound (a raw v0 token may
        # be a few bytes).
        self._sasl = SaslAuthenticator(security.sasl) if security.sasl is not None else None
        self._session_expires: float | None = None  # loop time a KIP-368 session ends (None: never)
        self._frames = FrameSplitter(limits.max_frame_bytes, MIN_REQUEST_FRAME) if self._sasl is None else \
            FrameSplitter(min(limits.max_frame_bytes, security.max_sasl_token_bytes), 0)
        self._waiting: deque[bytearray] = deque()  # whole frames not handled yet (reading paused)
        self._handling = False
        self._slots: deque[_Slot] = deque()
        self._reading_paused = False
        self._writing_paused = False
        self._muted_until = 0.0  # loop time until which a client over its quota is not read (KIP-219)
        self._closed = False
        self.peer = "?"
        self.client_host = "?"
        self.principal: KafkaPrincipal = ANONYMOUS  # replaced once TLS or SASL authenticates the client
        self.tasks: set[asyncio.Future[Any]] = set()  # responses still to come (cancelled on close)
        self.reject_reason: str | None = None  # set before connection_made: refuse this client
        # Asked once the client's address is known: why to refuse it (per-address limits), or None.
        self.admit: Callable[[KafkaConnection], str | None] | None = None
        self.admitted = False  # counted by `admit`, to be released when it closes
        # Told before a deadline closes this connection (the broker logs it, rate-limited).
        self.on_expired: Callable[[KafkaConnection, str, str], None] | None = None
        # On a TLS listener, the broker's look once the handshake must be over (roost.broker.net.
        # tls_handshakes): cancelled once the handshake is done, so that it holds nothing after.
        self.handshake_timer: asyncio.TimerHandle | None = None
        # The idle and partial-request deadlines (roost.broker.net.deadlines): one timer, looked
        # at lazily (an activity only notes the time; the timer, when it fires, looks again).
        self._loop: asyncio.AbstractEventLoop | None = None
        self._clock = ConnectionClock(last_activity=0.0)
        self._timer: asyncio.TimerHandle | None = None
        self._output_seen = 0  # the write buffer's size when last looked at (a change: the client reads)
        # queued.max.request.bytes (roost.broker.net.request_memory): what the request being
        # received has reserved, and whether reading waits for room (with the receive deadline
        # held still meanwhile: the wait is the broker's).
        self._reserved = 0
        self._memory_paused = False
        self._memory_paused_at = 0.0
        self._held_frame_started: float | None = None
        self._memory_available_callback = self._memory_available  # one object, to forget it by

    @property
    def made(self) -> bool:
        """Whether the loop has handed this connection its transport (on a TLS listener: once the
        handshake is done; the loop never says when one fails, see roost.broker.net.tls_handshakes)."""
        return self._transport is not None

    @property
    def requests_in_flight(self) -> int:
        """Requests received and not yet answered, and whole frames waiting to be handled."""
        return len(self._slots) + len(self._waiting)

    # asyncio.Protocol -------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport's methods without subclassing it.
        self._transport = transport  # type: ignore[assignment]
        if self.handshake_timer is not None:
            self.handshake_timer.cancel()
            self.handshake_timer = None
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.client_host = peer[0] if peer else "?"
        # Responses can be large (fetch); let the kernel buffer absorb them before we pause.
        transport.set_write_buffer_limits(high=self._limits.max_buffered_bytes // 4)
        if self.reject_reason is None and self.admit is not None:
            self.reject_reason = self.admit(self)
            self.admitted = self.reject_reason is None
        if self.reject_reason is not None:
            # The admission logged it (once a minute per address, not once per connection).
            self._closed = True
            transport.abort()  # type: ignore[attr-defined]
            return
        self._loop = asyncio.get_running_loop()
        self._clock.last_activity = self._loop.time()
        self._arm_deadlines()
        tls = self.security.tls
        if tls is not None:
            # asyncio calls connection_made once the TLS handshake is done.
            principal = tls.principal(transport.get_extra_info("ssl_object"))
            if principal is None:
                self.abort("the client certificate's subject matches no ssl.principal.mapping.rules rule")
                return
            self.principal = principal
            if principal is not ANONYMOUS:
                log.info("connection from %s on listener %s: TLS client certificate proves %s", self.peer,
                         self.listener, principal)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._frames.buffered and not self._closed:
            log.warning("connection from %s closed in the middle of a frame (%d bytes of it received)",
                        self.peer, self._frames.buffered)
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        memory = self._limits.request_memory
        if memory is not None:
            if self._memory_paused:
                memory.forget(self._memory_available_callback)
            if self._reserved:
                reserved, self._reserved = self._reserved, 0
                memory.release(reserved)
        for task in list(self.tasks):
            task.cancel()
        self._slots.clear()
        self._frames.clear()
        self._waiting.clear()
        self._on_close(self)

    def pause_writing(self) -> None:
        self._writing_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._note_activity()
        self._update_reading()

    def data_received(self, data: bytes) -> None:
        try:
            frames = self._frames.split(data)
        except FrameSizeError as error:
            self.abort(str(error))
            return
        loop, clock = self._loop, self._clock
        if loop is not None:
            now = clock.last_activity = loop.time()
            buffered = self._frames.buffered
            if buffered:
                clock.frame_received = buffered
                if frames or clock.frame_started is None:  # a new frame began in this read
                    clock.frame_started = now
                    clock.frame_size = self._frames.pending_size
                    self._arm_deadlines()
                elif clock.frame_size < 0:
                    clock.frame_size = self._frames.pending_size
            else:
                clock.frame_started = None
        if self._limits.request_memory is not None:
            self._account_memory(self._limits.request_memory, bool(frames))
        self._waiting.extend(frames)
        self._handle_waiting()

    # queued.max.request.bytes -----------------------------------------------------------------
    def _account_memory(self, memory: RequestMemory, completed: bool) -> None:
        if self._reserved and (completed or not self._frames.buffered):  # the reserved request is whole
            reserved, self._reserved = self._reserved, 0
            memory.release(reserved)
        if self._reserved or not self._frames.buffered or self._closed:
            return
        size = self._frames.pending_size
        if size < 0:
            return  # (under four bytes: the size is not known yet)
        if memory.try_reserve(size + 4):
            self._reserved = size + 4
            return
        # No room: read nothing more until there is; the receive deadline waits too.
        self._memory_paused = True
        if self._loop is not None:
            self._memory_paused_at = self._loop.time()
        self._held_frame_started, self._clock.frame_started = self._clock.frame_started, None
        memory.wait(self._memory_available_callback)
        self._update_reading()

    def _memory_available(self) -> None:
        memory = self._limits.request_memory
        if self._closed or memory is None or not self._memory_paused:
            return
        size = self._frames.pending_size
        if not memory.try_reserve(size + 4):
            memory.wait(self._memory_available_callback)
            return
        self._reserved = size + 4
        self._memory_paused = False
        if self._held_frame_started is not None and self._loop is not None:
            self._clock.frame_started = self._held_frame_started + (self._loop.time() - self._memory_paused_at)
            self._held_frame_started = None
            self._arm_deadlines()
        self._update_reading()

    # deadlines --------------------------------------------------------------------------------
    def _note_activity(self) -> None:
        if self._loop is not None:
            self._clock.last_activity = self._loop.time()

    def _arm_deadlines(self) -> None:
        """(Re)schedule the timer for the earliest deadline, if it is not due sooner already."""
        loop = self._loop
        if loop is None or self._closed:
            return
        limits = self._limits.deadlines
        if limits.idle_s <= 0 and limits.receive_s <= 0:
            return
        now = loop.time()
        when = next_check(limits, self._clock, now)
        if when is None:  # nothing can expire now: look again a while later
            when = now + max(limits.idle_s, limits.receive_s)
        if self._timer is not None:
            if self._timer.when() <= when:
                return
            self._timer.cancel()
        self._timer = loop.call_at(when, self._check_deadlines)

    def _check_deadlines(self) -> None:
        self._timer = None
        if self._closed or self._loop is None or self._transport is None:
            return
        now = self._loop.time()
        clock = self._clock
        output = self._transport.get_write_buffer_size()
        if output != self._output_seen:  # the client took some of its answers, or more were queued
            self._output_seen = output
            clock.last_activity = now
        # Waiting on the broker: an answer owed and not worked out yet (not merely unsent).
        clock.waiting_on_broker = self._memory_paused or \
            (not self._writing_paused and any(not slot.done for slot in self._slots))
        verdict = expired(self._limits.deadlines, clock, now)
        if verdict is not None:
            self._close_expired(*verdict)
            return
        self._arm_deadlines()

    def _close_expired(self, kind: str, reason: str) -> None:
        # Idle connections are closed as a matter of course (Kafka logs them at debug); a partial
        # request that timed out is worth a line, said once a minute per address by the broker.
        if self.on_expired is not None:
            self.on_expired(self, kind, reason)
        self._closed = True
        transport = self._transport
        if transport is not None:
            # A reset, not a FIN queued behind answers the client never takes (ZooKeeper's
            # fastCloseSock does the same): the kernel drops the unsent bytes at once and the
            # client learns of the close even though it does not read.
            sock = transport.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, LINGER_RESET)
            transport.abort()

    def _handle_waiting(self) -> None:
        """Handle the whole frames received, stopping while reading is paused: frames that came in
        the same read as the request that reached a limit wait too, as unread bytes would."""
        if self._handling:
            return  # a resume from inside a handler: the loop below goes on by itself
        self._handling = True
        try:
            waiting = self._waiting
            while waiting and not self._closed and not self._reading_paused:
                self._handle_frame(waiting.popleft())
        finally:
            self._handling = False

    # requests ---------------------------------------------------------------------------------
    def _handle_frame(self, frame: bytearray) -> None:
        if self._sasl is not None:
            if self._sasl.complete and self._session_expires is not None:
                if len(frame) >= 2 and int.from_bytes(frame[:2], "big") == ApiKey.SASL_HANDSHAKE:
                    # KIP-368: the client logs in again on this connection.
                    self._sasl = SaslAuthenticator(self._sasl.settings, reauthenticating=True)
                elif asyncio.get_running_loop().time() > self._session_expires:
                    self.abort(f"SASL session of {self.principal} expired (connections.max.reauth.ms); "
                               "the client did not log in again")
                    return
            if not self._sasl.complete and not self._sasl_step(frame):
                return
        try:
            header, header_end = read_request_header(frame)
        except KafkaCodecError as error:
            self.abort(f"undecodable request header: {error}")
            return
        if self._slots and header.api_key in DECIDED_AT_THEIR_TURN:
            slot = _Slot()
            slot.held = (header, frame, header_end)
            self._slots.append(slot)
            self._update_reading()
            return
        result = self._route(header, frame, header_end)
        if result is None:
            return
        if type(result) is not Deferred and not self._slots:
            # Answered at once with no earlier answer outstanding (the usual case): straight out,
            # without a place in the response order.
            if result is not NO_RESPONSE and self._transport is not None and not self._closed:
                self._transport.writelines(result)
            return
        slot = _Slot()
        self._slots.append(slot)
        self._place(slot, result)
        self._flush_ready()

    def _route(self, header: RequestHeader, frame: bytearray, header_end: int) -> Any:
        """The router's answer (buffers, NO_RESPONSE or Deferred); None when the request closed
        the connection."""
        try:
            return self._router.route(header, frame, self.client_host, header_end, self.principal, self.listener,
                                      self.mute_for, self)
        except KafkaCodecError as error:
            self.abort(f"bad request api_key={header.api_key} v{header.api_version}: {error}")
        except Exception:
            log.exception("handler failed for api_key=%d from %s; closing", header.api_key, self.peer)
            self.abort("internal error")
        return None

    def _place(self, slot: _Slot, result: Any) -> None:
        """Put a routed request's answer in its slot, now or when its future is done."""
        if type(result) is Deferred:
            future = result.future
            self.tasks.add(future)
            future.add_done_callback(lambda f, s=slot, h=result.header: self._finish_deferred(f, s, h))
        else:
            slot.done = True
            slot.buffers = None if result is NO_RESPONSE else result

    def _sasl_step(self, frame: bytearray) -> bool:
        """Give a frame to the SASL login; True when it is a request to route as usual."""
        assert self._sasl is not None
        try:
            step = self._sasl.on_frame(frame)
        except Exception:
            log.exception("SASL login from %s failed unexpectedly; closing", self.peer)
            self.abort("internal error during SASL login")
            return False
        if step.action is Action.ROUTE:
            return True
        if step.action is Action.CLOSE:
            self.abort(step.reason)
            return False
        if step.action is Action.FAIL:
            self._fail_authentication(step.reason, step.reply)
            return False
        if step.action is Action.DONE:
            assert step.principal is not None
            if self._session_expires is not None and step.principal != self.principal:
                self._fail_authentication(f"re-login as {step.principal} on a connection of {self.principal} "
                                          "(the principal may not change)", [])
                return False
            reauth_ms = self._sasl.settings.reauth_ms
            if reauth_ms > 0:
                self._session_expires = asyncio.get_running_loop().time() + reauth_ms / 1000
            relogin = self.principal == step.principal
            self.principal = step.principal  # on SASL_SSL the SASL identity wins over a certificate
            self._frames.max_frame_bytes = self._limits.max_frame_bytes
            self._frames.min_frame_bytes = MIN_REQUEST_FRAME
            log.info("connection from %s on listener %s: %s%s", self.peer, self.listener, step.reason,
                     " again (KIP-368)" if relogin else "")
        self._reply_in_order(step.reply)
        return False

    def _reply_in_order(self, buffers: list[bytes]) -> None:
        """A login answer: at once, or after the answers still owed (a re-login may come while
        earlier requests wait)."""
        if self._slots:
            slot = _Slot()
            self._slots.append(slot)
            self._fill(slot, buffers)
        elif self._transport is not None and not self._closed:
            self._transport.writelines(buffers)

    def _fail_authentication(self, reason: str, reply: list[bytes]) -> None:
        """Kafka's answer to a failed login: the reply (if any) and the close come after
        connection.failed.authentication.delay.ms, so guessing passwords is slow; nothing more
        is read meanwhile."""
        log.warning("connection from %s on listener %s: %s; closing", self.peer, self.listener, reason)
        self._closed = True  # nothing else is handled on this connection
        transport = self._transport
        if transport is None:
            return
        transport.pause_reading()

        def close() -> None:
            if not transport.is_closing():
                transport.writelines(reply)
                transport.close()

        asyncio.get_running_loop().call_later(self.security.failed_auth_delay_s, close)

    def _finish_deferred(self, future: asyncio.Future[Any], slot: _Slot, header: RequestHeader) -> None:
        self.tasks.discard(future)
        if future.cancelled() or self._closed:
            return
        error = future.exception()
        if error is not None:
            log.error("handler failed for api_key=%d from %s: %r; closing", header.api_key, self.peer, error,
                      exc_info=error)
            self.abort("internal error")
            return
        body = future.result()
        if body is NO_RESPONSE:
            self._fill(slot, NO_RESPONSE)
            return
        try:
            self._fill(slot, encode_response(header, body))
        except KafkaCodecError as error:
            log.error("cannot encode the answer to api_key=%d for %s: %s; closing", header.api_key, self.peer, error)
            self.abort("internal error")

    def _fill(self, slot: _Slot, result: Any) -> None:
        self._note_activity()  # the wait for this answer was the broker's, not the client's idling
        slot.done = True
        slot.buffers = None if result is NO_RESPONSE else result
        self._flush_ready()

    def _flush_ready(self) -> None:
        transport = self._transport
        slots = self._slots
        while slots and not self._closed:
            head = slots[0]
            if head.held is not None:
                # Its turn: decide it now, with what the broker knows now.
                header, frame, header_end = head.held
                head.held = None
                result = self._route(header, frame, header_end)
                if result is None:
                    return  # it closed the connection
                self._place(head, result)
            if not head.done:
                break
            slots.popleft()
            if head.buffers is not None and transport is not None:
                transport.writelines(head.buffers)
        self._update_reading()

    def mute_for(self, ms: int) -> None:
        """Read nothing more for `ms` (a client over its quota, as Kafka mutes a throttled
        channel): requests already received wait too; answers still go out."""
        if ms <= 0 or self._closed:
            return
        loop = asyncio.get_running_loop()
        until = loop.time() + ms / 1000
        if until <= self._muted_until:
            return
        self._muted_until = until
        self._update_reading()
        loop.call_at(until, self._unmute)

    def _unmute(self) -> None:
        loop = asyncio.get_running_loop()
        if self._muted_until - loop.time() > 0.002:  # muted again for longer meanwhile
            loop.call_at(self._muted_until, self._unmute)
            return
        self._muted_until = 0.0
        self._update_reading()

    def _update_reading(self) -> None:
        if self._transport is None or self._closed:
            return
        should_pause = self._writing_paused or len(self._slots) >= self._limits.max_inflight_requests \
            or self._muted_until > 0 or self._memory_paused
        if should_pause and not self._reading_paused:
            self._reading_paused = True
            self._transport.pause_reading()
        elif not should_pause and self._reading_paused:
            self._reading_paused = False
            self._transport.resume_reading()
            if self._waiting:
                self._handle_waiting()

    def abort(self, reason: str) -> None:
        """Close this connection at once because the client broke the protocol or a limit."""
        if self._closed:
            return
        log.warning("closing connection from %s: %s", self.peer, reason)
        self._closed = True
        if self._transport is not None:
            self._transport.abort()
