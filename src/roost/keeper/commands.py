"""The keeper's replicated log entries: a batch of commands for the data tree.

A member collects the writes of its clients (and, on the leader, session expiries) into one
batch and proposes it as a single log entry. Every member applies every batch in log order; the
commands carry everything the tree needs (session id, auth ids, the request body, the time), so
applying is deterministic. Requests are carried as the client's raw jute body: the data tree
validates them at apply time, so a failing request still consumes a zxid as in ZooKeeper.

Entry layout (jute): int magic (`BATCH_MAGIC`, or the older `BATCH_MAGIC_V2`), int origin node
id, long origin incarnation, long origin epoch, long batch sequence, long time (ms since the
epoch), int command count, then per command an int kind, a long session id and the kind's fields
(see `Command.write`).

The epoch guards ordering: a member proposes one batch at a time, but when it gives up on a
batch (no quorum, or the leader changed under it) it closes that batch's clients and moves to a
new epoch. If the abandoned batch still reaches the log after a batch of the new epoch, every
member skips it (`DataTree.admit`), so a client's writes never apply out of order.

Format 3 differs from format 2 in meaning only: a request's null data (a jute buffer of length
-1) stays null in the tree, where format 2 keepers stored it as empty. Entries of format 2 (logs
written before) are still read, and their commands apply as they did then (`null_as_empty`), so
that replaying an old log rebuilds exactly the tree its keeper had and its snapshots hold.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

from roost.wire.zk.errors import ZkCodecError
from roost.wire.zk.jute import JuteReader, JuteWriter
from roost.wire.zk.records import Id, Request, read_id_list, write_id_list

BATCH_MAGIC = 0x524B5A03  # "RKZ" + format version 3: null znode data stays null
BATCH_MAGIC_V2 = 0x524B5A02  # format version 2: null znode data was applied as empty


class CommandKind(IntEnum):
    REQUEST = 1  # a client's write request (create, delete, setData, setACL, multi, ...)
    CREATE_SESSION = 2
    CLOSE_SESSION = 3  # the client asked to close its session
    EXPIRE_SESSION = 4  # the leader saw no heartbeat within the session timeout
    DELETE_CONTAINER = 5  # the leader's container/TTL reaper


@dataclass(slots=True)
class Command:
    kind: CommandKind
    session_id: int
    xid: int = 0
    opcode: int = 0
    auth_ids: tuple[Id, ...] = ()
    body: bytes = b""
    timeout: int = 0  # CREATE_SESSION
    passwd: bytes = b""  # CREATE_SESSION
    path: str = ""  # DELETE_CONTAINER
    # Read from a format 2 entry: apply null data as empty, as the keeper that wrote it did.
    null_as_empty: bool = field(default=False, compare=False)
    # The decoded request, kept by the member that built the command so that it need not decode
    # the body again when the entry comes back; never serialised.
    request: Request | None = field(default=None, compare=False)

    def write(self, w: JuteWriter) -> None:
        w.int(self.kind).long(self.session_id)
        kind = self.kind
        if kind == CommandKind.REQUEST:
            w.int(self.xid).int(self.opcode)
            write_id_list(w, self.auth_ids)
            w.buffer(self.body)
        elif kind == CommandKind.CREATE_SESSION:
            w.int(self.timeout).buffer(self.passwd)
        elif kind == CommandKind.CLOSE_SESSION:
            w.int(self.xid)
        elif kind == CommandKind.DELETE_CONTAINER:
            w.ustring(self.path)

    @classmethod
    def read(cls, r: JuteReader, null_as_empty: bool = False) -> Command:
        raw_kind = r.int()
        session_id = r.long()
        try:
            kind = CommandKind(raw_kind)
        except ValueError:
            raise ZkCodecError(f"unknown command kind {raw_kind}") from None
        if kind == CommandKind.REQUEST:
            xid = r.int()
            opcode = r.int()
            auth_ids = tuple(read_id_list(r))
            body = r.buffer() or b""
            return cls(kind, session_id, xid=xid, opcode=opcode, auth_ids=auth_ids, body=body,
                       null_as_empty=null_as_empty)
        if kind == CommandKind.CREATE_SESSION:
            timeout = r.int()
            return cls(kind, session_id, timeout=timeout, passwd=r.buffer() or b"")
        if kind == CommandKind.CLOSE_SESSION:
            return cls(kind, session_id, xid=r.int())
        if kind == CommandKind.DELETE_CONTAINER:
            return cls(kind, session_id, path=r.path())
        return cls(kind, session_id)


@dataclass(slots=True)
class Batch:
    origin_node: int
    origin_incarnation: int
    origin_epoch: int
    sequence: int
    time_ms: int
    commands: list[Command]
    # Decoded from a format 2 entry (see the module docstring); new batches are format 3.
    null_as_empty: bool = False

    def encode(self) -> bytes:
        w = JuteWriter()
        assert all(c.null_as_empty == self.null_as_empty for c in self.commands
                   if c.kind == CommandKind.REQUEST), "a batch's commands share its format"
        w.int(BATCH_MAGIC_V2 if self.null_as_empty else BATCH_MAGIC)
        w.int(self.origin_node).long(self.origin_incarnation).long(self.origin_epoch)
        w.long(self.sequence)
        w.long(self.time_ms).int(len(self.commands))
        for command in self.commands:
            command.write(w)
        return w.getvalue()

    @classmethod
    def decode_header(cls, data: bytes) -> tuple[Batch, JuteReader]:
        """The batch's header (with no commands yet) and a reader positioned at the commands."""
        r = JuteReader(data)
        magic = r.int()
        if magic not in (BATCH_MAGIC, BATCH_MAGIC_V2):
            raise ZkCodecError(f"not a keeper batch (magic {magic:#x})")
        origin_node = r.int()
        incarnation = r.long()
        epoch = r.long()
        sequence = r.long()
        time_ms = r.long()
        return cls(origin_node, incarnation, epoch, sequence, time_ms, [], magic == BATCH_MAGIC_V2), r

    def read_commands(self, r: JuteReader) -> None:
        """Read the commands that follow the header into `self.commands`, up to the end."""
        count = r.vector_length(12)
        self.commands = [Command.read(r, self.null_as_empty) for _ in range(count)]
        r.expect_end("keeper batch")

    @classmethod
    def decode(cls, data: bytes) -> Batch:
        batch, r = cls.decode_header(data)
        batch.read_commands(r)
        return batch


def command_size(command: Command) -> int:
    """An upper bound of the command's encoded size, for batch size limits."""
    return 64 + len(command.body) + len(command.passwd) + 4 * len(command.path) + sum(
        8 + 4 * (len(i.scheme) + len(i.id)) for i in command.auth_ids
    )
