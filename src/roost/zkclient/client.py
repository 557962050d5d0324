"""`ZkClient`: an asyncio ZooKeeper client on Roost's sans-IO jute codec.

One session at a time over one connection to one member of the ensemble. Everything runs on the
event loop that called `start()`: protocol callbacks, timers and one task that keeps a connection
open. Nothing blocks the loop (no blocking socket call, no thread, no lock held across an await).

Sessions
    `start()` opens a session on one of the connect string's hosts. When the connection ends, the
    client reports SUSPENDED and reconnects, trying the hosts in turn (the next host first), with
    the same session id and password, so the session, its ephemeral nodes and its watches live on;
    the watches are re-armed with SetWatches from the last zxid seen, so a change made while
    disconnected fires at once. If the server answers that the session expired, or if no server
    answered within the session timeout (counted from the newest request a server answered: past
    it the server may have expired the session, so the client stops trusting it, as Apache
    Curator does), the client reports EXPIRED, fails what was waiting, tells every watcher (an
    event of type NONE, state EXPIRED), and at once starts a NEW session, reported as CONNECTED
    with `new_session=True`. A session the client gave up on locally but that a server still
    holds is closed by the client when it next reaches a server, so its ephemerals go at once.

Requests
    Replies come in request order. A call made while disconnected waits for the connection
    (bounded: at the latest the session is declared expired a session timeout after the last
    answered request, and waiting calls then fail with SessionExpiredError); a call whose
    connection drops before its reply fails with ConnectionLossError (it may or may not have been
    applied). At most `max_outstanding` calls are in flight or waiting; further callers wait for a
    slot. Requests above `max_request` bytes (jute.maxbuffer) are refused unsent; replies above
    `max_frame` bytes, or malformed, drop the connection (a clear log line, ConnectionLossError
    naming the cause for the calls in flight) and the client reconnects.

Watches and session events are delivered on the loop with `call_soon`, in the order the server
sent them, before the reply of any later request resumes its caller. A callback may be a plain
function or a coroutine function (run as a task); `asyncio.Queue.put_nowait` works as a watcher
for callers that prefer `await queue.get()`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import inspect
import logging
import random
import secrets
import ssl
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from roost.wire.zk.connection import ReplyEvent, WatchEvent
from roost.wire.zk.constants import DEFAULT_MAX_BUFFER, Err, EventType, KeeperState, OpCode, Perms
from roost.wire.zk.digest_md5 import DigestMd5Client, SaslFailure
from roost.wire.zk.errors import ZkCodecError
from roost.wire.zk.records import (
    ACL,
    AuthRequest,
    ConnectRequest,
    ConnectResponse,
    CreateRequest,
    DeleteRequest,
    EmptyRequest,
    ErrorResult,
    MultiRequest,
    PathRequest,
    PathWatchRequest,
    Request,
    SaslRequest,
    SetDataRequest,
    Stat,
)
from roost.zkclient.connect_string import ConnectString, parse_connect_string
from roost.zkclient.errors import (
    AuthFailedError,
    ClientClosedError,
    ConnectionLossError,
    NodeExistsError,
    NoNodeError,
    RequestTooLargeError,
    SessionExpiredError,
    ZkError,
    error_for,
)
from roost.zkclient.link import Call, ServerLink
from roost.zkclient.ops import Create, Op, OpOutcome, SetData, describe, outcome, to_request
from roost.zkclient.watches import WatchedEvent, Watcher, WatchKind, WatchRegistry

log = logging.getLogger("roost.zkclient")

OPEN_ACL_UNSAFE = (ACL(Perms.ALL, "world", "anyone"),)
NO_PASSWORD = bytes(16)


class SessionState(enum.Enum):
    CONNECTING = "connecting"  # started, no session yet
    CONNECTED = "connected"
    SUSPENDED = "suspended"  # the connection was lost; the session may still live
    EXPIRED = "expired"  # the session ended; a new one is being opened
    CLOSED = "closed"


@dataclass(frozen=True, slots=True)
class SessionEvent:
    """A change of the session's state, told to listeners.

    CONNECTED: `session_id` is the session now in use, `new_session` is true when it is not the
    one the client had before (first start, or after EXPIRED), `server` is "host:port".
    SUSPENDED / EXPIRED: `session_id` is the session concerned, `reason` says why."""

    state: SessionState
    session_id: int
    new_session: bool = False
    server: str = ""
    reason: str = ""


SessionListener = Callable[[SessionEvent], Any]


@dataclass(frozen=True, slots=True)
class SaslCredentials:
    """SASL DIGEST-MD5 credentials (Kafka's JAAS `Client` section's username and password)."""

    username: str
    password: str = dataclasses.field(repr=False)


class _Outcome(enum.Enum):
    FAILED = "failed"  # no session on this connection: count it towards the backoff
    ESTABLISHED = "established"  # the session ran on this connection until it ended
    RETRY_NOW = "retry now"  # expiry learned or a stale session closed: open a new one at once


class ZkClient:
    def __init__(
        self,
        hosts: str,
        *,
        session_timeout: float = 6.0,
        connect_timeout: float | None = None,
        randomize_hosts: bool = True,
        max_outstanding: int = 1000,
        max_request: int = DEFAULT_MAX_BUFFER,
        max_frame: int = 4 * 1024 * 1024,
        min_backoff: float = 0.02,
        max_backoff: float = 1.0,
        default_acl: Iterable[ACL] = OPEN_ACL_UNSAFE,
        acl_provider: Callable[[str], Sequence[ACL]] | None = None,
        auth_data: Iterable[tuple[str, bytes]] = (),
        sasl: SaslCredentials | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self._cs: ConnectString = parse_connect_string(hosts)
        if session_timeout <= 0 or max_outstanding < 1 or not 0 < min_backoff <= max_backoff:
            raise ValueError("session_timeout, max_outstanding and backoffs must be positive")
        self._hosts = list(self._cs.hosts)
        self._host_index = random.randrange(len(self._hosts)) if randomize_hosts else 0
        if randomize_hosts:
            random.shuffle(self._hosts)
        self._requested_timeout = session_timeout
        # ZooKeeper's Java client gives each host sessionTimeout / hostCount to answer.
        self._connect_timeout = connect_timeout or max(0.5, session_timeout / len(self._hosts))
        self._max_outstanding = max_outstanding
        self._max_request = max_request
        self._max_frame = max_frame
        self._min_backoff = min_backoff
        self._max_backoff = max_backoff
        self._default_acl = tuple(default_acl)
        # The ACL of a node created without one, from its path (the caller's, chroot aside), as
        # kazoo's and Curator's ACL providers; default: `default_acl` everywhere.
        self._acl_provider = acl_provider
        # Sent on every connection before anything else: SASL first (its exchange must end before
        # any request, as ZooKeeper's Java client does), then each addAuth packet.
        self._auth_data = tuple(auth_data)
        self._sasl = sasl
        self._ssl_context = ssl_context
        self._auth_failure: AuthFailedError | None = None

        self._loop: asyncio.AbstractEventLoop | None = None
        self._slots: asyncio.Semaphore | None = None
        self._state = SessionState.CONNECTING
        self._session_id = 0
        self._passwd = NO_PASSWORD
        self._timeout = 0.0  # negotiated, seconds
        self._last_zxid = 0
        self._link: ServerLink | None = None  # the connection the session runs on, if any
        self._unsent: deque[Call] = deque()
        self._watches = WatchRegistry()
        self._listeners: list[SessionListener] = []
        self._tasks: set[asyncio.Task[Any]] = set()
        self._run_task: asyncio.Task[None] | None = None
        self._expiry_timer: asyncio.TimerHandle | None = None
        self._stale: tuple[int, bytes] | None = None  # a session given up locally, to close
        self._connected = asyncio.Event()
        self._closing = False

    # ------------------------------------------------------------------------------ properties

    @property
    def state(self) -> SessionState:
        return self._state

    @property
    def session_id(self) -> int:
        return self._session_id

    @property
    def client_id(self) -> tuple[int, bytes]:
        """(session id, password), as ZooKeeper's clients expose them (0 while there is none)."""
        return self._session_id, self._passwd

    @property
    def session_timeout(self) -> float:
        """The negotiated session timeout in seconds (0 before the first session)."""
        return self._timeout

    @property
    def server(self) -> str | None:
        """"host:port" of the member the session runs on now, or None while disconnected."""
        return self._link.name if self._link is not None else None

    @property
    def last_zxid(self) -> int:
        return self._last_zxid

    @property
    def chroot(self) -> str:
        return self._cs.chroot

    def add_listener(self, listener: SessionListener) -> None:
        self._listeners.append(listener)

    def remove_listener(self, listener: SessionListener) -> None:
        self._listeners.remove(listener)

    # ------------------------------------------------------------------------------ lifecycle

    async def start(self, timeout: float = 30.0) -> None:
        """Open the first session; raises ConnectionLossError if none opens within `timeout`."""
        if self._loop is not None:
            raise RuntimeError("ZkClient.start() called twice")
        self._loop = asyncio.get_running_loop()
        self._slots = asyncio.Semaphore(self._max_outstanding)
        self._run_task = self._loop.create_task(self._run(), name="zkclient-connect")
        self._run_task.add_done_callback(self._run_ended)
        try:
            async with asyncio.timeout(timeout):
                await self._connected.wait()
        except TimeoutError:
            await self.close()
            hosts = ",".join(f"{h}:{p}" for h, p in self._hosts)
            raise ConnectionLossError(f"no ZooKeeper server of {hosts} answered within {timeout} s") from None
        if self._auth_failure is not None:
            raise self._auth_failure

    async def close(self, timeout: float = 5.0) -> None:
        """Close the session (its ephemerals go at once) and stop. Idempotent."""
        if self._closing:
            return
        self._closing = True
        link = self._link
        if link is not None:
            try:
                link.send(self._internal_call(EmptyRequest(OpCode.CLOSE_SESSION)))
                async with asyncio.timeout(timeout):
                    await asyncio.shield(link.closed)  # the server closes after its reply
            except (TimeoutError, ZkCodecError):
                pass
            link.fail(ClientClosedError("client closed"))
        if self._run_task is not None:
            self._run_task.cancel()
            await asyncio.gather(self._run_task, return_exceptions=True)
        self._cancel_expiry_timer()
        self._fail_unsent(ClientClosedError("client closed"))
        old = self._session_id
        self._session_id = 0
        self._emit(SessionEvent(SessionState.CLOSED, old, reason="closed by the client"))

    async def __aenter__(self) -> ZkClient:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ------------------------------------------------------------------------------ operations

    async def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False,
                     sequential: bool = False, makepath: bool = False,
                     acl: Iterable[ACL] | None = None) -> str:
        """Create a znode; returns its path (with the sequence number, if sequential). With
        `makepath`, missing parents are created first (persistent, empty)."""
        path_created, _stat = await self._create(OpCode.CREATE, path, data, ephemeral, sequential,
                                                 makepath, acl)
        return path_created

    async def create_with_stat(self, path: str, data: bytes = b"", *, ephemeral: bool = False,
                               sequential: bool = False, makepath: bool = False,
                               acl: Iterable[ACL] | None = None) -> tuple[str, Stat]:
        """As `create`, also returning the new node's Stat (its czxid is, for instance, a Kafka
        broker's epoch)."""
        path_created, stat = await self._create(OpCode.CREATE2, path, data, ephemeral, sequential,
                                                makepath, acl)
        assert stat is not None
        return path_created, stat

    async def _create(self, opcode: int, path: str, data: bytes, ephemeral: bool, sequential: bool,
                      makepath: bool, acl: Iterable[ACL] | None) -> tuple[str, Stat | None]:
        op = Create(path, data, ephemeral, sequential, tuple(acl) if acl is not None else self._acl_for(path))
        request = to_request(op, self._cs, self._default_acl)
        assert isinstance(request, CreateRequest)
        request.opcode = opcode
        try:
            result = await self._submit(request)
        except NoNodeError:
            parent = path.rsplit("/", 1)[0] or "/"
            if not makepath or parent == "/":
                raise
            await self.ensure_path(parent)
            result = await self._submit(request)
        if opcode == OpCode.CREATE:
            return self._client_path(result), None
        created, stat = result
        return self._client_path(created), stat

    async def ensure_path(self, path: str) -> None:
        """Create `path` and its missing ancestors (persistent, empty); existing ones are fine."""
        self._cs.to_server(path)  # validates
        parts = path.strip("/").split("/") if path != "/" else []
        prefix = ""
        for part in parts:
            prefix += "/" + part
            try:
                await self.create(prefix)
            except NodeExistsError:
                pass

    async def ensure_chroot(self) -> None:
        """Create the chroot path itself if missing (Kafka does so at start-up)."""
        if not self._cs.chroot:
            return
        prefix = ""
        for part in self._cs.chroot.strip("/").split("/"):
            prefix += "/" + part
            request = CreateRequest(prefix, b"", list(self._acl_for(prefix)), 0)
            try:
                await self._submit(request)
            except NodeExistsError:
                pass

    async def get(self, path: str, watch: Watcher | None = None) -> tuple[bytes, Stat]:
        """Data and Stat of `path`; `watch` (one-shot) fires on its next change or deletion."""
        request = PathWatchRequest(self._cs.to_server(path), watch is not None, OpCode.GET_DATA)
        return await self._submit(request, watch, WatchKind.DATA)

    async def get_children(self, path: str, watch: Watcher | None = None) -> list[str]:
        """Child names of `path`; `watch` fires when children come or go, or `path` is deleted."""
        request = PathWatchRequest(self._cs.to_server(path), watch is not None, OpCode.GET_CHILDREN)
        return await self._submit(request, watch, WatchKind.CHILD)

    async def exists(self, path: str, watch: Watcher | None = None) -> Stat | None:
        """Stat of `path` or None; `watch` fires on its creation, change or deletion."""
        request = PathWatchRequest(self._cs.to_server(path), watch is not None, OpCode.EXISTS)
        return await self._submit(request, watch, WatchKind.DATA, no_node_ok=True)

    async def set(self, path: str, data: bytes, version: int = -1) -> Stat:
        """Set the data of `path` if its version is `version` (-1: any); returns the new Stat."""
        request = to_request(SetData(path, data, version), self._cs, self._default_acl)
        assert isinstance(request, SetDataRequest)
        return await self._submit(request)

    async def delete(self, path: str, version: int = -1) -> None:
        await self._submit(DeleteRequest(self._cs.to_server(path), version))

    async def sync(self, path: str = "/") -> None:
        """Wait until the member this client talks to has applied every write committed before."""
        await self._submit(PathRequest(self._cs.to_server(path), OpCode.SYNC))

    async def multi(self, ops: Iterable[Op]) -> list[OpOutcome]:
        """Run `ops` all or none. On success, one outcome per op (see roost.zkclient.ops). On
        failure, raises the failing op's error (e.g. BadVersionError for a failed Check) with
        `op_index`, `op` and `results` (one ZkError per op) set."""
        ops = list(ops)
        request = MultiRequest([to_request(self._with_acl(op), self._cs, self._default_acl) for op in ops])
        results = await self._submit(request)
        if len(results) != len(ops):
            raise ConnectionLossError(f"multi of {len(ops)} ops answered with {len(results)} results")
        if not any(isinstance(result, ErrorResult) for result in results):
            return [outcome(result, self._cs) for result in results]
        errors = [error_for(r.err) if isinstance(r, ErrorResult) else error_for(Err.OK) for r in results]
        index = next((i for i, r in enumerate(results) if isinstance(r, ErrorResult)
                      and r.err not in (Err.OK, Err.RUNTIME_INCONSISTENCY)), None)
        if index is None:  # only rollbacks reported: name the first non-OK one
            index = next(i for i, r in enumerate(results) if isinstance(r, ErrorResult) and r.err != Err.OK)
        failed = results[index]
        assert isinstance(failed, ErrorResult)
        error = error_for(failed.err, f"multi op {index} of {len(ops)} ({describe(ops[index])}) failed: "
                                     f"{_err_name(failed.err)}")
        error.op_index, error.op, error.results = index, ops[index], errors
        raise error

    # ------------------------------------------------------------------------------ internals

    def _acl_for(self, path: str) -> tuple[ACL, ...]:
        if self._acl_provider is None:
            return self._default_acl
        return tuple(self._acl_provider(path))

    def _with_acl(self, op: Op) -> Op:
        if isinstance(op, Create) and op.acl is None:
            return dataclasses.replace(op, acl=self._acl_for(op.path))
        return op

    def _client_path(self, server_path: str) -> str:
        path = self._cs.to_client(server_path)
        return server_path if path is None else path

    async def _submit(self, request: Request, watcher: Watcher | None = None,
                      watch_kind: WatchKind | None = None, no_node_ok: bool = False) -> Any:
        if self._closing:
            raise ClientClosedError("client closed")
        if self._loop is None or self._slots is None:
            raise RuntimeError("call ZkClient.start() first")
        await self._slots.acquire()  # released when the call completes, however it completes
        if self._closing:  # closed while this caller waited for a slot
            self._slots.release()
            raise ClientClosedError("client closed")
        future = self._loop.create_future()
        future.add_done_callback(self._release_slot)
        call = Call(request, future, watcher, watch_kind, no_node_ok)
        link = self._link
        if link is not None and not link.paused and not self._unsent:
            self._send(link, call)
        else:
            self._unsent.append(call)
        # A cancelled caller leaves the call to complete on its own, so that its slot stays taken
        # for as long as the request may be on the wire.
        return await asyncio.shield(future)

    def _release_slot(self, future: asyncio.Future[Any]) -> None:
        assert self._slots is not None
        self._slots.release()
        if not future.cancelled():
            future.exception()  # retrieved: a cancelled caller may have left it behind

    def _internal_call(self, request: Request) -> Call:
        """A call nobody awaits (SetWatches, closeSession): its reply is only logged."""
        return Call(request, None)

    def _send(self, link: ServerLink, call: Call) -> None:
        try:
            link.send(call)
        except ZkCodecError as exc:
            if call.future is not None and not call.future.done():
                call.future.set_exception(RequestTooLargeError(str(exc)))

    def _flush_unsent(self, link: ServerLink) -> None:
        unsent = self._unsent
        while unsent and self._link is link and not link.paused:
            call = unsent.popleft()
            self._send(link, call)

    def _fail_unsent(self, error: ZkError) -> None:
        calls, self._unsent = self._unsent, deque()
        for call in calls:
            if call.future is not None and not call.future.done():
                call.future.set_exception(error)

    def _emit(self, event: SessionEvent) -> None:
        self._state = event.state
        if event.state is SessionState.CONNECTED:
            self._connected.set()
        else:
            self._connected.clear()
        loop = self._loop
        if loop is None:
            return
        for listener in list(self._listeners):
            loop.call_soon(self._invoke, listener, event)

    def _invoke(self, callback: Callable[[Any], Any], argument: Any) -> None:
        result = callback(argument)
        if inspect.isawaitable(result):
            task = asyncio.ensure_future(result)
            self._tasks.add(task)
            task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("zkclient: a watch or session callback failed", exc_info=task.exception())

    def _deliver(self, watcher: Watcher, event: WatchedEvent) -> None:
        assert self._loop is not None
        self._loop.call_soon(self._invoke, watcher, event)

    # ----------------------------------------------------------------------- connection upkeep

    async def _run(self) -> None:
        failures = 0
        backoff = self._min_backoff
        while not self._closing:
            if self._auth_failure is not None:
                # As ZooKeeper's Java client (AUTH_FAILED is final): wrong credentials do not get
                # better by retrying, and a server would log every attempt.
                self._closing = True
                self._fail_unsent(self._auth_failure)
                self._emit(SessionEvent(SessionState.CLOSED, self._session_id, reason=str(self._auth_failure)))
                self._connected.set()  # start() wakes and raises the failure
                return
            host = self._hosts[self._host_index]
            self._host_index = (self._host_index + 1) % len(self._hosts)
            result = await self._attempt(host)
            if result is not _Outcome.FAILED:
                failures, backoff = 0, self._min_backoff
                continue
            failures += 1
            if failures % len(self._hosts) == 0:  # every host failed once: back off, bounded
                await asyncio.sleep(backoff * random.uniform(0.5, 1.0))
                backoff = min(backoff * 2, self._max_backoff)

    def _run_ended(self, task: asyncio.Task[None]) -> None:
        """The connection task ends only when closed; if a bug ended it, say so and fail callers
        rather than leave them waiting for a connection that will never come."""
        if task.cancelled() or task.exception() is None:
            return
        log.error("zkclient: the connection task failed; the client is closed", exc_info=task.exception())
        self._closing = True
        if self._link is not None:
            self._link.fail(ClientClosedError(f"zkclient failed: {task.exception()!r}"))
        self._fail_unsent(ClientClosedError(f"zkclient failed: {task.exception()!r}"))
        self._emit(SessionEvent(SessionState.CLOSED, self._session_id, reason=repr(task.exception())))

    async def _attempt(self, host: tuple[str, int]) -> _Outcome:
        assert self._loop is not None
        link = ServerLink(self, host, self._max_frame, self._max_request)
        try:
            return await self._attempt_on(link, host)
        except asyncio.CancelledError:  # closing: leave no socket behind
            link.fail(ClientClosedError("client closed"))
            raise

    async def _attempt_on(self, link: ServerLink, host: tuple[str, int]) -> _Outcome:
        assert self._loop is not None
        try:
            async with asyncio.timeout(self._connect_timeout):
                await self._loop.create_connection(
                    lambda: link, host[0], host[1], ssl=self._ssl_context,
                    server_hostname=host[0] if self._ssl_context is not None else None,
                    ssl_handshake_timeout=self._connect_timeout if self._ssl_context is not None else None)
                link.send_connect(self._connect_request())
                result = await asyncio.shield(link.handshake)
        except (OSError, TimeoutError, ZkError, SaslFailure) as exc:
            link.fail(ConnectionLossError(f"connecting to {link.name}: {exc or type(exc).__name__}"))
            log.debug("zkclient: no session on %s: %s", link.name, exc or type(exc).__name__)
            return _Outcome.FAILED
        if result is not _Outcome.ESTABLISHED:
            try:  # the server closes the connection after expiring or closing a session
                async with asyncio.timeout(self._connect_timeout):
                    await asyncio.shield(link.closed)
            except TimeoutError:
                pass
            link.fail(ConnectionLossError("done with this connection"))
            return result
        await asyncio.shield(link.closed)
        return result

    def _connect_request(self) -> ConnectRequest:
        session_id, passwd = self._stale or (self._session_id, self._passwd)
        timeout_ms = int(self._requested_timeout * 1000)
        return ConnectRequest(0, self._last_zxid, timeout_ms, session_id, passwd, False)

    # ServerLink's owner interface (called from protocol callbacks, on the loop) ------------------

    def on_handshake(self, link: ServerLink, response: ConnectResponse) -> None:
        requested = link.requested_session
        if self._stale is not None and requested == self._stale[0]:
            self._stale = None
            if response.timeout > 0:
                log.info("zkclient: closing session 0x%x, given up on after the session timeout", requested)
                self._send(link, self._internal_call(EmptyRequest(OpCode.CLOSE_SESSION)))
            link.handshake.set_result(_Outcome.RETRY_NOW)
            return
        if response.timeout <= 0:
            if not requested:  # refused a new session: treat as an unusable server
                link.handshake.set_result(_Outcome.FAILED)
                return
            link.handshake.set_result(_Outcome.RETRY_NOW)
            self._expire(requested, f"{link.name} reports the session expired")
            return
        if requested and response.session_id != requested:
            link.fail(ConnectionLossError(f"{link.name} answered session 0x{requested:x} "
                                          f"with session 0x{response.session_id:x}"))
            return
        if self._closing or (requested and requested != self._session_id):
            link.fail(ConnectionLossError("session no longer wanted"))
            return
        new_session = requested == 0
        self._session_id = response.session_id
        self._passwd = response.passwd
        self._timeout = response.timeout / 1000
        if self._sasl is not None:
            assert self._loop is not None
            task = self._loop.create_task(self._sasl_then_ready(link, response, new_session))
            self._tasks.add(task)
            task.add_done_callback(self._task_done)
            return
        self._session_ready(link, response, new_session)

    async def _sasl_then_ready(self, link: ServerLink, response: ConnectResponse, new_session: bool) -> None:
        """The SASL DIGEST-MD5 exchange on a new connection, then the session is ready. Nothing
        else is sent meanwhile (`_link` is not set yet)."""
        assert self._sasl is not None and self._loop is not None
        exchange = DigestMd5Client(self._sasl.username, self._sasl.password, secrets.token_bytes(16))
        try:
            async with asyncio.timeout(self._connect_timeout):
                token = exchange.step(None)
                while token is not None:
                    future = self._loop.create_future()
                    link.send(Call(SaslRequest(token), future))
                    token = exchange.step(await future)
        except AuthFailedError:
            self._auth_failed(link, "SASL DIGEST-MD5 authentication failed (wrong user or password?)")
            return
        except SaslFailure as exc:
            self._auth_failed(link, f"SASL DIGEST-MD5 failed: {exc}")
            return
        except (TimeoutError, ZkError) as exc:
            if not link.handshake.done():
                link.fail(ConnectionLossError(f"SASL exchange with {link.name}: {exc or type(exc).__name__}"))
            return
        if link.closed.done() or link.handshake.done():
            return
        log.info("zkclient: authenticated to %s with SASL DIGEST-MD5 as %r", link.name, self._sasl.username)
        self._session_ready(link, response, new_session)

    def _auth_failed(self, link: ServerLink, reason: str) -> None:
        log.error("zkclient: %s: %s; giving up (check the ZooKeeper credentials)", link.name, reason)
        self._auth_failure = AuthFailedError(f"{link.name}: {reason}")
        if not link.handshake.done():
            link.handshake.set_result(_Outcome.FAILED)
        link.fail(self._auth_failure)

    def on_auth_reply(self, link: ServerLink, err: int) -> None:
        if err != 0:
            self._auth_failed(link, f"addAuth refused ({_err_name(err)})")

    def _session_ready(self, link: ServerLink, response: ConnectResponse, new_session: bool) -> None:
        self._link = link
        for scheme, auth in self._auth_data:
            link.send_auth(AuthRequest(0, scheme, auth))
        self._cancel_expiry_timer()
        link.start_heartbeat(self._timeout)
        if not new_session:
            for request in self._watches.set_watches_requests(self._last_zxid):
                self._send(link, self._internal_call(request))
        self._flush_unsent(link)
        log.info("zkclient: session 0x%x %s on %s (timeout %d ms)", self._session_id,
                 "opened" if new_session else "resumed", link.name, response.timeout)
        self._emit(SessionEvent(SessionState.CONNECTED, self._session_id, new_session, link.name))
        link.handshake.set_result(_Outcome.ESTABLISHED)

    def on_reply(self, link: ServerLink, call: Call, event: ReplyEvent) -> None:
        if event.zxid > 0:
            self._last_zxid = max(self._last_zxid, event.zxid)
        future = call.future
        err = event.err
        if future is None:
            if err:
                log.warning("zkclient: %s", self._describe_failure(call.request, err))
            return
        if err == 0:
            if call.watcher is not None:
                self._watches.add(call.watch_kind, call.request.path, call.watcher)  # type: ignore[attr-defined]
            result = event.result
        elif err == Err.NO_NODE and call.no_node_ok:
            if call.watcher is not None:
                self._watches.add(WatchKind.EXIST, call.request.path, call.watcher)  # type: ignore[attr-defined]
            result = None
        else:
            if not future.done():
                future.set_exception(error_for(err, self._describe_failure(call.request, err)))
            return
        if not future.done():
            future.set_result(result)

    def on_watch(self, link: ServerLink, event: WatchEvent) -> None:
        notification = event.event
        watchers = self._watches.pop_for(notification.type, notification.path)
        if not watchers:
            return
        path = self._cs.to_client(notification.path)
        if path is None:
            return
        watched = WatchedEvent(EventType(notification.type), KeeperState.SYNC_CONNECTED, path)
        for watcher in watchers:
            self._deliver(watcher, watched)

    def on_lost(self, link: ServerLink, calls: list[Call], error: ZkError) -> None:
        for call in calls:
            if not call.future.done():
                call.future.set_exception(error)
        if link is not self._link:
            return
        self._link = None
        if self._closing:
            return
        log.info("zkclient: session 0x%x suspended: %s", self._session_id, error)
        self._emit(SessionEvent(SessionState.SUSPENDED, self._session_id, reason=str(error)))
        # Past this deadline the server may have expired the session: stop trusting it.
        assert self._loop is not None
        acked = link.last_acked_send or time.monotonic()
        delay = max(acked + self._timeout - time.monotonic(), 0.0)
        self._cancel_expiry_timer()
        self._expiry_timer = self._loop.call_later(delay, self._expire_locally, self._session_id)

    def on_writable(self, link: ServerLink) -> None:
        self._flush_unsent(link)

    def _describe_failure(self, request: Request, err: int) -> str:
        """"get /a/b: NO_NODE" with the caller's path (chroot removed)."""
        try:
            op = OpCode(request.opcode).name.lower()
        except ValueError:
            op = str(request.opcode)
        server_path = getattr(request, "path", None)
        if server_path is None:
            return f"{op}: {_err_name(err)}"
        return f"{op} {self._client_path(server_path)}: {_err_name(err)}"

    # ------------------------------------------------------------------------------- expiry

    def _expire_locally(self, session_id: int) -> None:
        self._expiry_timer = None
        if self._link is not None or self._session_id != session_id or self._closing:
            return
        self._stale = (session_id, self._passwd)
        self._expire(session_id, f"no server answered within the session timeout "
                                 f"({self._timeout * 1000:.0f} ms)")

    def _expire(self, session_id: int, reason: str) -> None:
        log.warning("zkclient: session 0x%x expired: %s", session_id, reason)
        self._cancel_expiry_timer()
        self._session_id = 0
        self._passwd = NO_PASSWORD
        error = SessionExpiredError(f"session 0x{session_id:x} expired: {reason}")
        self._fail_unsent(error)
        for server_path, watcher in self._watches.pop_all():
            path = self._cs.to_client(server_path) or server_path
            self._deliver(watcher, WatchedEvent(EventType.NONE, KeeperState.EXPIRED, path))
        self._emit(SessionEvent(SessionState.EXPIRED, session_id, reason=reason))

    def _cancel_expiry_timer(self) -> None:
        if self._expiry_timer is not None:
            self._expiry_timer.cancel()
            self._expiry_timer = None


def _err_name(code: int) -> str:
    try:
        return Err(code).name
    except ValueError:
        return str(code)



