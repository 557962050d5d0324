"""Every operation and its error codes, against a keeper and a real ZooKeeper (the `server`
fixture runs each test on both)."""

from __future__ import annotations

import asyncio

import pytest

from roost.zkclient import (
    BadVersionError,
    Check,
    Create,
    Delete,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    RequestTooLargeError,
    RolledBackError,
    RuntimeInconsistencyError,
    SessionState,
    SetData,
    ZkClient,
    ZkError,
)
from tests.zkclient.conftest import Server
from tests.zkclient.support import connected, run, unique


def test_create_modes_and_returned_paths(server: Server) -> None:
    async def scenario() -> None:
        zk, _ = await connected(server.address)
        root = unique("create")
        try:
            assert await zk.create(root, b"r") == root
            assert await zk.create(f"{root}/p", b"persistent") == f"{root}/p"
            eph = await zk.create(f"{root}/e", b"ephemeral", ephemeral=True)
            seq = await zk.create(f"{root}/s-", b"", sequential=True)
            eseq = await zk.create(f"{root}/es-", b"", ephemeral=True, sequential=True)
            assert eph == f"{root}/e"
            assert seq == f"{root}/s-0000000002"  # the parent's cversion: two children before it
            assert eseq == f"{root}/es-0000000003"
            _data, p_stat = await zk.get(f"{root}/p")
            _data, e_stat = await zk.get(eph)
            _data, es_stat = await zk.get(eseq)
            _data, s_stat = await zk.get(seq)
            assert p_stat.ephemeral_owner == 0 and s_stat.ephemeral_owner == 0
            assert e_stat.ephemeral_owner == zk.session_id == es_stat.ephemeral_owner
            # A sequential create may name only the parent (the server appends the counter).
            assert (await zk.create(f"{root}/", sequential=True)).startswith(f"{root}/00000000")
            path, stat = await zk.create_with_stat(f"{root}/w", b"abc")
            assert path == f"{root}/w" and stat.data_length == 3 and stat.czxid == stat.mzxid > 0
            assert stat == (await zk.get(path))[1]
        finally:
            await zk.close()

    run(scenario)


def test_create_errors_and_makepath(server: Server) -> None:
    async def scenario() -> None:
        zk, _ = await connected(server.address)
        root = unique("create-errors")
        try:
            with pytest.raises(NoNodeError, match="NO_NODE"):
                await zk.create(f"{root}/a/b")
            assert await zk.create(f"{root}/a/b/c", b"deep", makepath=True) == f"{root}/a/b/c"
            assert (await zk.get(f"{root}/a/b/c"))[0] == b"deep"
            assert (await zk.get(f"{root}/a"))[0] == b""
            with pytest.raises(NodeExistsError) as caught:
                await zk.create(f"{root}/a")
            assert caught.value.code == -110 and f"{root}/a" in str(caught.value)
            await zk.create(f"{root}/eph", ephemeral=True)
            with pytest.raises(NoChildrenForEphemeralsError):
                await zk.create(f"{root}/eph/child")
            await zk.ensure_path(f"{root}/a/b/x/y")  # partly there already: fine
            assert await zk.exists(f"{root}/a/b/x/y") is not None
            with pytest.raises(ValueError):
                await zk.create("no-slash")
            with pytest.raises(ValueError):
                await zk.get(f"{root}/")
            with pytest.raises(ValueError):
                await zk.get(f"{root}//a")
        finally:
            await zk.close()

    run(scenario)


def test_get_exists_children_set_delete(server: Server) -> None:
    async def scenario() -> None:
        zk, _ = await connected(server.address)
        root = unique("rw")
        try:
            await zk.create(root, b"v0")
            data, stat = await zk.get(root)
            assert data == b"v0" and stat.version == 0 and stat.num_children == 0
            assert await zk.exists(root) == stat
            assert await zk.exists(f"{root}/none") is None
            with pytest.raises(NoNodeError):
                await zk.get(f"{root}/none")
            with pytest.raises(NoNodeError):
                await zk.get_children(f"{root}/none")
            stat1 = await zk.set(root, b"v1", version=0)
            assert stat1.version == 1 and stat1.mzxid > stat.mzxid
            with pytest.raises(BadVersionError) as caught:
                await zk.set(root, b"stale", version=0)
            assert caught.value.code == -103
            assert (await zk.get(root))[0] == b"v1"
            assert (await zk.set(root, b"v2")).version == 2  # -1: any version
            with pytest.raises(NoNodeError):
                await zk.set(f"{root}/none", b"")
            for name in ("b", "a", "c"):
                await zk.create(f"{root}/{name}")
            assert sorted(await zk.get_children(root)) == ["a", "b", "c"]
            assert await zk.get_children(f"{root}/a") == []
            with pytest.raises(NotEmptyError):
                await zk.delete(root)
            with pytest.raises(BadVersionError):
                await zk.delete(f"{root}/a", version=3)
            await zk.delete(f"{root}/a", version=0)
            await zk.delete(f"{root}/b")
            with pytest.raises(NoNodeError):
                await zk.delete(f"{root}/b")
            assert await zk.get_children(root) == ["c"]
            empty_data = await zk.create(f"{root}/empty")
            assert (await zk.get(empty_data))[0] == b""
            await zk.sync(root)
            await zk.sync()
        finally:
            await zk.close()

    run(scenario)


def test_multi_results_and_failures(server: Server) -> None:
    async def scenario() -> None:
        zk, _ = await connected(server.address)
        root = unique("multi")
        try:
            await zk.create(root, b"")
            await zk.create(f"{root}/epoch", b"0")
            results = await zk.multi([
                Check(f"{root}/epoch", 0),
                Create(f"{root}/new", b"n"),
                Create(f"{root}/seq-", b"", ephemeral=True, sequential=True),
                SetData(f"{root}/epoch", b"1", 0),
                Create(f"{root}/gone", b""),
                Delete(f"{root}/gone", 0),
            ])
            assert results[0] is None and results[4] == f"{root}/gone" and results[5] is None
            assert results[1] == f"{root}/new"
            assert isinstance(results[2], str) and results[2].startswith(f"{root}/seq-")
            assert results[3].version == 1
            assert await zk.multi([]) == []
            before = await zk.get(f"{root}/epoch")
            children_before = sorted(await zk.get_children(root))

            # A failing check op: nothing changes, and the error names that op.
            with pytest.raises(BadVersionError) as caught:
                await zk.multi([Create(f"{root}/never"), Check(f"{root}/epoch", 0),
                                SetData(f"{root}/epoch", b"fenced")])
            error = caught.value
            assert error.op_index == 1 and error.op == Check(f"{root}/epoch", 0)
            assert "check" in str(error) and "BAD_VERSION" in str(error)
            assert [type(e) for e in error.results] == [RolledBackError, BadVersionError,
                                                        RuntimeInconsistencyError]
            assert await zk.get(f"{root}/epoch") == before
            assert sorted(await zk.get_children(root)) == children_before

            with pytest.raises(NodeExistsError) as caught:
                await zk.multi([SetData(f"{root}/epoch", b"x"), Create(f"{root}/new")])
            assert caught.value.op_index == 1
            with pytest.raises(NoNodeError) as caught:
                await zk.multi([Check(f"{root}/missing", 0)])
            assert caught.value.op_index == 0
            assert await zk.get(f"{root}/epoch") == before
        finally:
            await zk.close()

    run(scenario)


def test_ephemerals_vanish_when_the_session_is_closed(server: Server) -> None:
    async def scenario() -> None:
        owner, owner_events = await connected(server.address)
        observer, _ = await connected(server.address)
        root = unique("ephemeral")
        try:
            await observer.create(root)
            await owner.create(f"{root}/mine", b"", ephemeral=True)
            await owner.create(f"{root}/seq-", b"", ephemeral=True, sequential=True)
            assert len(await observer.get_children(root)) == 2
            session = owner.session_id
            await owner.close()
            assert owner.state is SessionState.CLOSED
            closed = await owner_events.state(SessionState.CLOSED)
            assert closed.session_id == session
            await observer.sync(root)
            assert await observer.get_children(root) == []
            with pytest.raises(ZkError):
                await owner.get(root)
        finally:
            await owner.close()
            await observer.close()

    run(scenario)


def test_chroot(server: Server) -> None:
    async def scenario() -> None:
        chroot = unique("chroot") + "/kafka"
        zk = ZkClient(server.address + chroot, session_timeout=10)
        await zk.start()
        plain, _ = await connected(server.address)
        try:
            assert zk.chroot == chroot
            with pytest.raises(NoNodeError):
                await zk.create("/brokers")
            await zk.ensure_chroot()
            await zk.ensure_chroot()  # idempotent
            assert await zk.create("/brokers/ids/1", b"b1", makepath=True) == "/brokers/ids/1"
            assert (await plain.get(f"{chroot}/brokers/ids/1"))[0] == b"b1"
            assert await zk.get_children("/") == ["brokers"]
            assert await zk.create("/seq-", sequential=True) == "/seq-0000000001"
            results = await zk.multi([Create("/m"), Check("/brokers", 0)])
            assert results == ["/m", None]
            with pytest.raises(NoNodeError) as caught:
                await zk.get("/nothing")
            assert "/nothing" in str(caught.value) and chroot not in str(caught.value)
            events: list = []
            await zk.get("/m", watch=events.append)
            await plain.set(f"{chroot}/m", b"changed")
            await zk.exists("/")
            assert [(e.type.name, e.path) for e in events] == [("NODE_DATA_CHANGED", "/m")]
            assert (await zk.get("/"))[1] == (await plain.get(chroot))[1]
        finally:
            await zk.close()
            await plain.close()

    run(scenario)


def test_limits_outstanding_and_request_size(server: Server) -> None:
    async def scenario() -> None:
        zk, _ = await connected(server.address, max_outstanding=4, max_request=64 * 1024)
        root = unique("limits")
        try:
            await zk.create(root, b"x")
            in_flight: list[int] = []

            async def get() -> bytes:
                link = zk._link
                if link is not None:
                    in_flight.append(link.codec.pending)
                return (await zk.get(root))[0]

            assert await asyncio.gather(*(get() for _ in range(200))) == [b"x"] * 200
            assert max(in_flight) <= 4
            with pytest.raises(RequestTooLargeError):
                await zk.set(root, b"y" * (64 * 1024))
            assert (await zk.get(root))[0] == b"x"  # refused unsent; the session carries on
            assert zk.state is SessionState.CONNECTED
        finally:
            await zk.close()

    run(scenario)
