"""The data tree as a deterministic state machine: zxids, stats, multi, sessions, snapshots."""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from roost.keeper.acl import OPEN_ACL_UNSAFE, digest_id
from roost.keeper.commands import Batch, Command, CommandKind
from roost.keeper.tree import CONTAINER_OWNER, TTL_MASK, DataTree
from roost.wire.zk.constants import CreateMode, Err, EventType, OpCode, Perms
from roost.wire.zk.jute import JuteReader
from roost.wire.zk.records import (
    ACL,
    CheckVersionRequest,
    CreateRequest,
    DeleteRequest,
    Id,
    MultiRequest,
    Request,
    SetACLRequest,
    SetDataRequest,
    encode_request_body,
    read_multi_response,
)

OPEN = list(OPEN_ACL_UNSAFE)
SESSION = 0x0100000000000001


def session(tree: DataTree, session_id: int = SESSION, time_ms: int = 1) -> None:
    result = tree.apply(Command(CommandKind.CREATE_SESSION, session_id, timeout=4000, passwd=b"p" * 16), time_ms)
    assert result.err == Err.OK


def command(request: Request, session_id: int = SESSION, auth: tuple[Id, ...] = ()) -> Command:
    return Command(CommandKind.REQUEST, session_id, xid=1, opcode=request.opcode, auth_ids=auth,
                   body=encode_request_body(request))


def run(tree: DataTree, request: Request, session_id: int = SESSION, time_ms: int = 1000,
        auth: tuple[Id, ...] = ()):
    return tree.apply(command(request, session_id, auth), time_ms)


def create(path: str, data: bytes | None = b"", flags: int = 0, acl: list[ACL] | None = None) -> CreateRequest:
    return CreateRequest(path, data, OPEN if acl is None else acl, flags)


def test_every_command_consumes_exactly_one_zxid_even_when_it_fails() -> None:
    tree = DataTree()
    session(tree)
    assert tree.last_zxid == 1
    assert run(tree, create("/a")).zxid == 2
    failed = run(tree, create("/a"))
    assert (failed.zxid, failed.err) == (3, Err.NODE_EXISTS)
    assert run(tree, SetDataRequest("/a", b"x", 5)).err == Err.BAD_VERSION
    assert tree.last_zxid == 4
    assert tree.get("/a").mzxid == 2
    assert run(tree, create("/b")).zxid == 5
    assert tree.get("/b").czxid == 5


def test_reported_cversion_counts_creates_and_deletes_sequence_names_count_creates() -> None:
    tree = DataTree()
    session(tree)
    run(tree, create("/p"))
    names = [run(tree, create("/p/s-", flags=CreateMode.PERSISTENT_SEQUENTIAL)).body for _ in range(2)]
    assert [JuteReader(n).path() for n in names] == ["/p/s-0000000000", "/p/s-0000000001"]
    run(tree, DeleteRequest("/p/s-0000000000", -1))
    parent = tree.get("/p")
    assert parent.stat().cversion == 3 and parent.stat().num_children == 1
    third = run(tree, create("/p/s-", flags=CreateMode.PERSISTENT_SEQUENTIAL))
    assert JuteReader(third.body).path() == "/p/s-0000000002"
    # ZooKeeper's root starts with cversion -1 (one child it did not count as a create).
    assert DataTree().get("/").stat().cversion == -1


def test_multi_is_all_or_nothing() -> None:
    tree = DataTree()
    session(tree)
    run(tree, create("/a", b"1"))
    before = tree.digest()
    failed = run(tree, MultiRequest([create("/b"), SetDataRequest("/a", b"2", 0), CheckVersionRequest("/a", 0),
                                      create("/c")]))
    assert failed.err == Err.OK and not failed.triggers
    results = read_multi_response(JuteReader(failed.body))
    assert [r.err for r in results] == [Err.OK, Err.OK, Err.BAD_VERSION, Err.RUNTIME_INCONSISTENCY]
    assert tree.digest()[1:] == before[1:]
    assert tree.last_zxid == before[0] + 1
    ok = run(tree, MultiRequest([create("/b"), create("/b/c"), DeleteRequest("/b/c", 0)]))
    assert [type(r).__name__ for r in read_multi_response(JuteReader(ok.body))] == [
        "CreateResult", "CreateResult", "DeleteResult"]
    assert tree.get("/b").czxid == ok.zxid and tree.get("/b/c") is None


def test_closing_a_session_deletes_its_ephemerals_in_order() -> None:
    tree = DataTree()
    session(tree)
    session(tree, SESSION + 1)
    run(tree, create("/e"))
    for name in ("b", "a", "c"):
        run(tree, create(f"/e/{name}", flags=CreateMode.EPHEMERAL))
    run(tree, create("/e/other", flags=CreateMode.EPHEMERAL), session_id=SESSION + 1)
    assert run(tree, create("/e/a/child")).err == Err.NO_CHILDREN_FOR_EPHEMERALS
    result = tree.apply(Command(CommandKind.EXPIRE_SESSION, SESSION), 2000)
    assert result.closed_session == SESSION
    deleted = [path for kind, path in result.triggers if kind == EventType.NODE_DELETED]
    assert deleted == ["/e/a", "/e/b", "/e/c"]
    assert sorted(tree.get("/e").children) == ["other"]
    assert tree.get("/e").pzxid == result.zxid
    assert run(tree, create("/x")).err == Err.SESSION_EXPIRED
    assert SESSION not in tree.sessions and tree.ephemerals == {SESSION + 1: {"/e/other"}}


def test_acls_are_checked_when_applied() -> None:
    tree = DataTree()
    session(tree)
    me = (Id("digest", digest_id("u:p")),)
    run(tree, create("/s", b"secret", acl=[ACL(Perms.ALL, "digest", me[0].id)]))
    assert run(tree, SetDataRequest("/s", b"x", -1)).err == Err.NO_AUTH
    assert run(tree, SetDataRequest("/s", b"x", -1), auth=me).err == Err.OK
    assert run(tree, create("/s/c")).err == Err.NO_AUTH
    assert run(tree, create("/mine", acl=[ACL(Perms.ALL, "auth", "")])).err == Err.INVALID_ACL
    assert run(tree, create("/mine", acl=[ACL(Perms.ALL, "auth", "")]), auth=me).err == Err.OK
    assert tree.get("/mine").acl == (ACL(Perms.ALL, "digest", me[0].id),)
    assert run(tree, SetACLRequest("/mine", OPEN, 0)).err == Err.NO_AUTH
    assert run(tree, SetACLRequest("/mine", OPEN, 0), auth=me).err == Err.OK
    assert tree.get("/mine").aversion == 1


def test_containers_and_ttl_nodes_are_reapable() -> None:
    tree = DataTree(extended_types_enabled=True)
    session(tree)
    container = CreateRequest("/box", b"", OPEN, CreateMode.CONTAINER, OpCode.CREATE_CONTAINER)
    assert run(tree, container).err == Err.OK
    assert tree.get("/box").ephemeral_owner == CONTAINER_OWNER
    assert tree.reapable(10_000, 10) == []  # never had a child
    run(tree, create("/box/item"))
    run(tree, DeleteRequest("/box/item", -1))
    assert tree.reapable(10_000, 10) == ["/box"]
    ttl = CreateRequest("/ttl", b"", OPEN, CreateMode.PERSISTENT_WITH_TTL, OpCode.CREATE_TTL, ttl=500)
    assert run(tree, ttl, time_ms=1000).err == Err.OK
    assert tree.get("/ttl").ephemeral_owner == TTL_MASK | 500
    assert "/ttl" not in tree.reapable(1400, 10) and "/ttl" in tree.reapable(1600, 10)
    result = tree.apply(Command(CommandKind.DELETE_CONTAINER, 0, path="/box"), 2000)
    assert result.err == Err.OK and tree.get("/box") is None
    plain = DataTree()
    session(plain)
    assert run(plain, ttl).err == Err.UNIMPLEMENTED


def test_a_batch_abandoned_by_its_proposer_is_skipped_once_a_newer_epoch_applied() -> None:
    tree = DataTree()
    assert tree.admit(1, 77, 0)
    assert tree.admit(1, 77, 2)
    assert not tree.admit(1, 77, 1)  # arrived late: its clients were already told to go away
    assert tree.admit(1, 77, 2)
    assert tree.admit(2, 5, 0)  # other members are independent
    assert tree.admit(1, 99, 0)  # a new process of member 1 starts its own epochs
    restored = DataTree.from_snapshot(tree.snapshot())
    assert restored.origins == tree.origins
    assert not restored.admit(2, 5, -1)


# ------------------------------------------------------------------------ determinism


PATHS = ["/a", "/a/b", "/a/b/c", "/d", "/d/e", "/f"]


def random_data(rng: random.Random, size: int) -> bytes | None:
    """Znode data for generated commands: sometimes null, sometimes empty, else `size` bytes."""
    roll = rng.random()
    if roll < 0.15:
        return None
    return b"" if roll < 0.3 else rng.randbytes(size)


def random_commands(seed: int, count: int) -> list[Command]:
    rng = random.Random(seed)
    sessions = [SESSION]
    commands = [Command(CommandKind.CREATE_SESSION, SESSION, timeout=4000, passwd=b"a" * 16)]
    for _ in range(count):
        sid = rng.choice(sessions)
        roll = rng.random()
        path = rng.choice(PATHS)
        if roll < 0.05:
            new = SESSION + len(sessions)
            sessions.append(new)
            commands.append(Command(CommandKind.CREATE_SESSION, new, timeout=4000, passwd=bytes([len(sessions)]) * 16))
        elif roll < 0.08:
            commands.append(Command(CommandKind.CLOSE_SESSION, sid, xid=1))
        elif roll < 0.45:
            commands.append(command(create(path, random_data(rng, rng.randint(1, 8)), rng.randint(0, 3)), sid))
        elif roll < 0.6:
            commands.append(command(DeleteRequest(path, rng.choice([-1, 0, 1])), sid))
        elif roll < 0.8:
            commands.append(command(SetDataRequest(path, random_data(rng, 4), rng.choice([-1, 0, 1, 2])), sid))
        elif roll < 0.9:
            ops = [create(rng.choice(PATHS), random_data(rng, 2)),
                   SetDataRequest(rng.choice(PATHS), random_data(rng, 1), -1),
                   DeleteRequest(rng.choice(PATHS), -1), CheckVersionRequest(rng.choice(PATHS), 0)]
            commands.append(command(MultiRequest(rng.sample(ops, rng.randint(1, 4))), sid))
        else:
            commands.append(command(SetACLRequest(path, OPEN, rng.choice([-1, 0])), sid))
    return commands


def replay(commands: list[Command], tree: DataTree | None = None, start: int = 0) -> tuple[DataTree, list[tuple]]:
    tree = tree or DataTree()
    outcomes = []
    for i, cmd in enumerate(commands, start):
        # Through the wire format, as a member that did not build the command would see it.
        decoded = Batch.decode(Batch(1, 1, 0, i, 1000 + i, [cmd]).encode()).commands[0]
        result = tree.apply(decoded, 1000 + i)
        outcomes.append((result.zxid, result.err, result.body, tuple(result.triggers)))
    return tree, outcomes


def test_same_commands_same_state_and_results() -> None:
    for seed in range(5):
        commands = random_commands(seed, 400)
        first, first_outcomes = replay(commands)
        second, second_outcomes = replay(commands)
        assert first.digest() == second.digest()
        assert first_outcomes == second_outcomes
        assert any(err != Err.OK for _, err, _, _ in first_outcomes)


def test_snapshot_mid_way_then_continue() -> None:
    commands = random_commands(99, 500)
    whole, _ = replay(commands)
    head, _ = replay(commands[:250])
    blob = head.snapshot()
    restored = DataTree.from_snapshot(blob)
    assert restored.digest() == head.digest()
    assert restored.snapshot() == blob
    continued, _ = replay(commands[250:], restored, start=250)
    assert continued.digest() == whole.digest()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from([OpCode.CREATE, OpCode.CREATE2, OpCode.DELETE, OpCode.SET_DATA, OpCode.SET_ACL,
                        OpCode.CHECK, OpCode.MULTI, OpCode.CREATE_TTL, OpCode.CREATE_CONTAINER,
                        OpCode.RECONFIG, OpCode.GET_DATA, 12345]),
       st.binary(max_size=200))
def test_any_request_body_applies_without_raising(opcode: int, body: bytes) -> None:
    tree = DataTree()
    session(tree)
    before = tree.last_zxid
    result = tree.apply(Command(CommandKind.REQUEST, SESSION, xid=1, opcode=opcode, body=body), 5)
    assert result.zxid == before + 1


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=12), st.integers(-2, 8), st.binary(max_size=8))
def test_any_create_applies_without_raising(path: str, flags: int, data: bytes) -> None:
    tree = DataTree()
    session(tree)
    result = run(tree, create(path, data, flags))
    assert result.err in (Err.OK, Err.BAD_ARGUMENTS, Err.NO_NODE, Err.NODE_EXISTS, Err.UNIMPLEMENTED,
                          Err.NO_CHILDREN_FOR_EPHEMERALS)


def test_null_data_is_kept_apart_from_empty_data() -> None:
    tree = DataTree()
    session(tree)
    assert run(tree, create("/null", None)).err == Err.OK
    assert run(tree, create("/empty", b"")).err == Err.OK
    assert run(tree, create("/full", b"abc")).err == Err.OK
    assert (tree.get("/null").data, tree.get("/empty").data) == (None, b"")
    # ZooKeeper's Stat gives dataLength 0 for null data as for empty data.
    assert tree.get("/null").stat().data_length == tree.get("/empty").stat().data_length == 0
    assert run(tree, SetDataRequest("/full", None, 0)).err == Err.OK
    assert tree.get("/full").data is None and tree.get("/full").version == 1
    assert run(tree, SetDataRequest("/null", b"", -1)).err == Err.OK
    assert tree.get("/null").data == b""
    multi = MultiRequest([create("/m", None), SetDataRequest("/empty", None, 0), create("/m2", b"")])
    assert run(tree, multi).err == Err.OK
    assert [tree.get(p).data for p in ("/m", "/empty", "/m2")] == [None, None, b""]
    restored = DataTree.from_snapshot(tree.snapshot())
    assert restored.digest() == tree.digest()
    assert [restored.get(p).data for p in ("/m", "/empty", "/m2", "/full", "/null")] == [
        None, None, b"", None, b""]
