"""Watch real server processes with strace, and check that they answer only after they fsync.

A claim like "fsync before every acknowledgement" is invisible from outside a crash test: the page
cache survives a process kill, so data written but never fsynced still comes back. strace shows it
directly, without knowing anything about the server's code: which bytes went to which file, when
an fsync of that file began and ended, and when the answer's first byte went to the client socket.

Ordering. One strace traces every process and thread of interest, and its output is in the order
in which it handled the syscall stops. A thread stopped at a syscall stays stopped until strace
has written that line, so when one event causes another (an fsync returns, its thread wakes the
event loop, which writes the answer) the cause's line always comes first. So "the fsync's exit
line precedes the answer's entry line" is exactly "the fsync had returned before the answer began
to leave", whichever thread did what; and an answer sent before (or without) the fsync shows up as
such, because nothing then orders the fsync first.

    with SyscallTrace([proc.popen.pid], tmp_path / "trace.txt") as trace:
        ...drive the server with real clients...
    exchanges = kafka_exchanges(trace.calls, [port])  # requests paired with their answers
    durable = durable_before_answer(trace.calls, exchange, probe, is_log_file)

strace's ptrace attach needs CAP_SYS_PTRACE or a permissive kernel.yama.ptrace_scope; where it is
not available the tests using this skip as for a missing referee (tests/support/referees.py).
"""

from __future__ import annotations

import contextlib
import re
import shutil
import signal
import struct
import subprocess
import threading
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.support import referees

DATA_WRITES = frozenset({"write", "writev", "pwrite64", "pwritev", "pwritev2"})
SOCKET_WRITES = frozenset({"write", "writev", "sendto", "sendmsg"})
SOCKET_READS = frozenset({"read", "readv", "recvfrom", "recvmsg"})
SYNCS = frozenset({"fsync", "fdatasync"})
CLONES = frozenset({"clone", "clone3"})
TRACED = sorted(DATA_WRITES | SOCKET_WRITES | SOCKET_READS | SYNCS | CLONES)

REFEREE = "strace able to attach to a process (Debian's strace package and ptrace permission)"

_LINE = re.compile(r"^(?P<pid>\d+)\s+(?P<rest>.*)$")  # strace pads the pid column
_RESUMED = re.compile(r"^<\.\.\. (?P<name>\w+) resumed>(?P<rest>.*)$")
_CALL = re.compile(r"^(?P<name>\w+)\((?P<rest>.*)$")
# The first argument of every traced call is an fd that -yy decodes: a socket as
# "TCP:[local->remote]", anything else (paths, pipes) hex-escaped like the data (-xx).
_FD = re.compile(r"^(?P<fd>\d+)<(?P<desc>[A-Z0-9-]+:\[[^\]]*\]|(?:\\x[0-9a-f]{2})*)>")
_STRING = re.compile(r'"(?P<hex>(?:\\x[0-9a-f]{2})*)"(?P<cut>\.\.\.)?')
_UNFINISHED_FOREVER = re.compile(r"\)\s+= \?( <unavailable>)?$|<detached \.\.\.>$")
_RESULT = re.compile(r"\)\s+= (?P<value>-?\d+)(?: [A-Z]+ \(.*\))?$")


def _unhex(escaped: str) -> bytes:
    return bytes.fromhex(escaped.replace("\\x", ""))


@dataclass
class Syscall:
    """One traced syscall. `entry` and `exit` are the positions of its first and last line in
    the trace (equal when strace printed it on one line). `tid` is the thread that made it,
    `pid` its process (filled in by `SyscallTrace`)."""

    tid: int
    name: str
    fd: int
    target: str  # the fd's path, or "TCP:[local->remote]"
    data: bytes  # bytes written, or read (as many as the call returned)
    result: int
    entry: int
    exit: int
    pid: int = 0

    @property
    def ok(self) -> bool:
        return self.result >= 0


def parse(lines: Iterable[str], threads: dict[int, int] | None = None) -> list[Syscall]:
    """Syscalls from `strace -f -xx -yy -s N -o FILE` output, in the order strace handled them.
    `threads` maps the thread ids alive when tracing began to their process ids; threads started
    later are found from the clone calls. Clone calls themselves are left out of the result."""
    parent: dict[int, int] = {}  # a thread started during the trace -> the thread that started it
    calls: list[Syscall] = []
    pending: dict[int, tuple[str, str, int]] = {}  # pid -> (name, text so far, entry position)
    for position, line in enumerate(lines):
        match = _LINE.match(line.rstrip("\n"))
        if match is None:
            continue
        pid, rest = int(match["pid"]), match["rest"]
        resumed = _RESUMED.match(rest)
        if resumed is not None:
            if pid not in pending:
                continue  # its entry happened before we attached
            name, head, entry = pending.pop(pid)
            text = head + resumed["rest"]
        else:
            call = _CALL.match(rest)
            if call is None:
                continue  # signals, exits
            name, text, entry = call["name"], call["rest"], position
            if text.endswith(" <unfinished ...>"):
                pending[pid] = (name, text.removesuffix(" <unfinished ...>"), entry)
                continue
        parsed = _syscall(pid, name, text, entry, position)
        if parsed is None:
            continue
        if parsed.name in CLONES:
            if parsed.ok and parsed.target == "thread":
                parent[parsed.result] = parsed.tid
            continue
        calls.append(parsed)
    # A new thread can make syscalls before strace reports its parent's clone returning: map
    # threads to processes once the whole trace is read.
    process_of = dict(threads or {})

    def process(tid: int) -> int:
        chain = [tid]
        while chain[-1] not in process_of and chain[-1] in parent:
            chain.append(parent[chain[-1]])
        found = process_of.get(chain[-1], chain[-1])
        for member in chain:
            process_of[member] = found
        return found

    for call in calls:
        call.pid = process(call.tid)
    return calls


def _syscall(tid: int, name: str, text: str, entry: int, exit_: int) -> Syscall | None:
    if name not in TRACED or _UNFINISHED_FOREVER.search(text):
        return None  # a call the process (or strace's detach) interrupted: it has no result
    result = _RESULT.search(text)
    if result is None:
        raise ValueError(f"cannot read the result of strace line {entry}: {name}({text}")
    if name in CLONES:
        same_process = "CLONE_THREAD" in text
        return Syscall(tid, name, -1, "thread" if same_process else "process", b"", int(result["value"]),
                       entry, exit_)
    fd = _FD.match(text)
    if fd is None:
        raise ValueError(f"cannot read the fd of strace line {entry}: {name}({text}")
    desc = fd["desc"]
    target = desc if ":[" in desc else _unhex(desc).decode(errors="replace")
    value = int(result["value"])
    data = b""
    if name not in SYNCS and value > 0:
        pieces = []
        for string in _STRING.finditer(text[fd.end():result.start()]):
            if string["cut"]:
                raise AssertionError(f"strace cut the data of {name} on {target}: raise -s")
            pieces.append(_unhex(string["hex"]))
        data = b"".join(pieces)[:value]
    return Syscall(tid, name, int(fd["fd"]), target, data, value, entry, exit_)


class SyscallTrace:
    """strace attached to running processes (all their threads, and threads they start later)
    from `__enter__` to `__exit__`; `calls` holds the parsed trace afterwards."""

    def __init__(self, pids: Sequence[int], output: Path, max_string: int = 1 << 20) -> None:
        self.pids = list(pids)
        self.output = output
        self.max_string = max_string
        self.calls: list[Syscall] = []
        self.threads: dict[int, int] = {}  # thread id -> process id, for the threads at attach time
        self._strace: subprocess.Popen[str] | None = None
        self._stderr: list[str] = []

    def __enter__(self) -> SyscallTrace:
        strace = shutil.which("strace")
        if strace is None:
            referees.skip(REFEREE + ": strace is not installed")
        command = [strace, "-f", "-xx", "-yy", "-s", str(self.max_string), "-e", "trace=" + ",".join(TRACED),
                   "-o", str(self.output)]
        for pid in self.pids:
            command += ["-p", str(pid)]
        self._strace = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
        attached: set[int] = set()
        done = threading.Event()

        def read_stderr() -> None:
            assert self._strace is not None and self._strace.stderr is not None
            for line in self._strace.stderr:
                self._stderr.append(line)
                found = re.search(r"strace: Process (\d+) attached", line)
                if found:
                    attached.add(int(found[1]))
                    if attached >= set(self.pids):
                        done.set()
            done.set()

        threading.Thread(target=read_stderr, daemon=True).start()
        # strace attaches every thread of a process before it reports the process attached.
        if not done.wait(30) or not attached >= set(self.pids):
            self._stop()
            referees.skip(f"{REFEREE}: {''.join(self._stderr).strip() or 'attach timed out'}")
        for pid in self.pids:
            for task in Path(f"/proc/{pid}/task").iterdir():
                self.threads[int(task.name)] = pid
        return self

    def _stop(self) -> None:
        if self._strace is None:
            return
        if self._strace.poll() is None:
            self._strace.send_signal(signal.SIGINT)  # detach from the tracees, which run on
            try:
                self._strace.wait(30)
            except subprocess.TimeoutExpired:
                self._strace.kill()
                self._strace.wait(30)
        self._strace = None

    def __exit__(self, *exc: object) -> None:
        self._stop()
        with contextlib.suppress(FileNotFoundError), self.output.open(errors="replace") as handle:
            self.calls = parse(handle, self.threads)


# ------------------------------------------------------------------------- request / answer


@dataclass
class Exchange:
    """A request and its answer on one client connection, seen from the server."""

    pid: int
    connection: str
    request: bytes  # the request frame without its length prefix
    received: int  # position of the read that completed the request
    answered: int | None = None  # position of the write that began the answer (None: no answer)


@dataclass
class _Stream:
    data: bytearray = field(default_factory=bytearray)
    # (offset of the first byte of a call's data in the stream, the call)
    calls: list[tuple[int, Syscall]] = field(default_factory=list)

    def frames(self) -> Iterator[tuple[bytes, Syscall, Syscall]]:
        """(frame without its length, the call holding its first byte, the one holding its last)."""
        offset = 0
        while offset + 4 <= len(self.data):
            (size,) = struct.unpack_from(">i", self.data, offset)
            end = offset + 4 + size
            if size < 0 or end > len(self.data):
                return
            yield bytes(self.data[offset + 4:end]), self._call_at(offset), self._call_at(end - 1)
            offset = end

    def _call_at(self, offset: int) -> Syscall:
        found = None
        for start, call in self.calls:
            if start > offset:
                break
            found = call
        assert found is not None
        return found


def _streams(calls: Iterable[Syscall], names: frozenset[str]) -> dict[tuple[int, str], _Stream]:
    streams: dict[tuple[int, str], _Stream] = defaultdict(_Stream)
    for call in calls:
        if call.name in names and call.target.startswith("TCP:[") and call.ok and call.data:
            stream = streams[(call.pid, call.target)]
            stream.calls.append((len(stream.data), call))
            stream.data += call.data
    return streams


def local_port(target: str) -> int | None:
    """The server's own port in a -yy socket description "TCP:[host:port->peer:port]"."""
    found = re.match(r"TCP:\[[^\]]*?:(\d+)->", target)
    return int(found[1]) if found else None


def remote_port(target: str) -> int | None:
    """The peer's port in a -yy socket description "TCP:[host:port->peer:port]"."""
    found = re.match(r"TCP:\[[^\]]*->[^\]]*?:(\d+)\]", target)
    return int(found[1]) if found else None


@dataclass
class SentRequest:
    """A Kafka request a traced process sent as a client (a broker's requests to another)."""

    pid: int
    connection: str
    api_key: int
    frame: bytes  # without its length prefix
    sent: int  # position of the write that began it


def kafka_requests_sent(calls: Sequence[Syscall], pid: int, ports: Collection[int],
                        api_keys: Iterable[int] | None = None) -> list[SentRequest]:
    """The Kafka requests (of `api_keys`, or all) that process `pid` sent to servers listening on
    `ports`, in the order their first bytes left."""
    keys = None if api_keys is None else set(api_keys)
    found = []
    for (sender, target), stream in _streams(calls, SOCKET_WRITES).items():
        if sender != pid or remote_port(target) not in ports:
            continue
        for frame, first, _ in stream.frames():
            (api_key,) = struct.unpack_from(">h", frame)
            if keys is None or api_key in keys:
                found.append(SentRequest(pid, target, api_key, frame, first.entry))
    return sorted(found, key=lambda request: request.sent)


def _exchanges(calls: Sequence[Syscall], ports: Collection[int], request_id: Callable[[int, bytes], int | None],
               answer_id: Callable[[bytes], int | None]) -> list[Exchange]:
    found: list[Exchange] = []
    answers = _streams(calls, SOCKET_WRITES)
    for key, stream in _streams(calls, SOCKET_READS).items():
        if local_port(key[1]) not in ports:
            continue  # not a client connection of this protocol (a raft peer link, say)
        waiting: dict[int, Exchange] = {}
        for number, (frame, _, last) in enumerate(stream.frames()):
            ident = request_id(number, frame)
            if ident is not None:
                waiting[ident] = Exchange(key[0], key[1], frame, last.exit)
                found.append(waiting[ident])
        for frame, first, _ in answers[key].frames() if key in answers else ():
            ident = answer_id(frame)
            exchange = waiting.pop(ident, None) if ident is not None else None
            if exchange is not None:
                exchange.answered = first.entry
    return found


def kafka_exchanges(calls: Sequence[Syscall], ports: Collection[int],
                    api_keys: Iterable[int] | None = None) -> list[Exchange]:
    """Kafka requests (of `api_keys`, or all) that clients sent to the servers' `ports`, paired
    with their responses by correlation id."""
    keys = None if api_keys is None else set(api_keys)

    def request_id(_: int, frame: bytes) -> int | None:
        api_key, _version, correlation = struct.unpack_from(">hhi", frame)
        return correlation if keys is None or api_key in keys else None

    return _exchanges(calls, ports, request_id, lambda frame: struct.unpack_from(">i", frame)[0])


def zookeeper_exchanges(calls: Sequence[Syscall], ports: Collection[int]) -> list[Exchange]:
    """ZooKeeper requests that clients sent to the servers' `ports`, paired with their replies by
    xid. A connection's first frame is the handshake (no xid); xid -1 marks a watch event, -2 a
    ping."""

    def request_id(number: int, frame: bytes) -> int | None:
        if number == 0:
            return None
        (xid,) = struct.unpack_from(">i", frame)
        return xid if xid >= 0 else None

    return _exchanges(calls, ports, request_id, lambda frame: struct.unpack_from(">i", frame)[0])


# ------------------------------------------------------------------------------- durability


@dataclass
class Durability:
    """What the trace shows about one answer: per process, whether the log write carrying the
    request's probe (made after the request arrived and before the answer left) was fsynced
    before the answer left."""

    exchange: Exchange
    probe: bytes
    written: set[int] = field(default_factory=set)  # pids that wrote the probe to a log file
    synced: set[int] = field(default_factory=set)  # ... and fsynced it before the answer

    def describe(self) -> str:
        return (f"answer on {self.exchange.connection} (pid {self.exchange.pid}) to the request "
                f"carrying {self.probe!r}: log writes in pids {sorted(self.written)}, fsynced "
                f"before the answer in {sorted(self.synced)}")


def durable_before_answer(calls: Sequence[Syscall], exchange: Exchange, probe: bytes,
                          is_log_file: Callable[[str], bool]) -> Durability:
    """For each traced process: did a write of `probe` to one of its log files, between the
    request's arrival and the answer's first byte, end before an fsync of that file that began
    after the write and returned before the answer?"""
    assert exchange.answered is not None, "the request was never answered"
    result = Durability(exchange, probe)
    for write in calls:
        if (write.name in DATA_WRITES and write.ok and probe in write.data and is_log_file(write.target)
                and exchange.received < write.entry and write.exit < exchange.answered):
            result.written.add(write.pid)
            if any(sync.pid == write.pid and sync.name in SYNCS and sync.ok and sync.target == write.target
                   and write.exit < sync.entry and sync.exit < exchange.answered for sync in calls):
                result.synced.add(write.pid)
    return result
