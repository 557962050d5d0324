"""The transaction coordinator's shell on a real replica manager and real logs (the harness of
test_group_service.py, no sockets): `__transaction_state` loaded on election with
COORDINATOR_LOAD_IN_PROGRESS meanwhile, the last record per id winning (and no reload when
only the leader epoch moves), idle ids expired to tombstones; a commit's markers
appended to the data partition through the append door and its Complete record written; a new
leader (a higher coordinator epoch) sending the markers of a transaction it found prepared, and
the old coordinator's marker then refused; requests to a broker that resigned answer
NOT_COORDINATOR."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from roost.broker.handlers import txn as txn_handlers
from roost.broker.metadata.cache import PartitionInfo
from roost.broker.metadata.catalog import TRANSACTION_STATE_TOPIC
from roost.broker.replica.partition import Partition
from roost.broker.txn.core import TxnState
from roost.broker.txn.records import txn_partition_for
from roost.broker.txn.service import TxnService, transaction_state_configs
from roost.clock import now_ms
from roost.log.transactions import read_marker
from roost.wire.kafka import ApiKey
from roost.wire.kafka.errors import ErrorCode
from roost.wire.kafka.records import iter_batch_headers
from tests.broker.test_append_door import lead_user_topic
from tests.broker.test_group_service import ME, PEER, USER_TOPIC, WAIT_S, Node, request
from tests.broker.test_group_service import run as run_groups

TXN_PARTITIONS = 2
TXN_TOPIC_ID = uuid.uuid4()
T = next(t for i in range(100) if txn_partition_for(t := f"txn-{i}", TXN_PARTITIONS) == 0)


class InProcessPeer:
    """What PeerPool.serve_locally gives the broker for itself: its own handler, called in-process."""

    ctx: txn_handlers.TxnContext  # set once the service it serves exists

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def get(self, node_id: int, host: str, port: int) -> InProcessPeer:
        assert node_id == ME, "every partition of these tests is led here"
        return self

    async def request(self, api_key: int, version: int, body: dict[str, Any], timeout: float) -> dict[str, Any]:
        assert api_key == ApiKey.WRITE_TXN_MARKERS
        self.sent.append(body)
        return await txn_handlers.handle_write_txn_markers(self.ctx, request(ApiKey.WRITE_TXN_MARKERS, 1, body))


def run(tmp_path: Path, scenario: Callable[[Node, TxnService, InProcessPeer], Coroutine[Any, Any, None]]) -> None:
    async def with_txns(node: Node) -> None:
        peers = InProcessPeer()
        ids = iter(range(1000, 2000))
        service = TxnService(node.config, node.replicas, node.metadata, peers, lambda: next(ids))  # type: ignore[arg-type]
        peers.ctx = txn_handlers.TxnContext(service, node.groups, node.replicas,
                                            lambda topic, index: node.metadata.partition(topic, index) is not None)
        service.start()
        try:
            await scenario(node, service, peers)
        finally:
            await service.stop()

    run_groups(tmp_path, with_txns, **{"transaction.state.log.num.partitions": TXN_PARTITIONS})


async def lead_txn_partition(node: Node, index: int, epoch: int, leader: int = ME) -> Partition:
    body = {"controller_id": PEER, "controller_epoch": node.controller_epoch, "broker_epoch": -1,
            "topic_states": [{"topic_name": TRANSACTION_STATE_TOPIC, "topic_id": TXN_TOPIC_ID, "partition_states": [{
                "partition_index": index, "leader": leader, "leader_epoch": epoch, "partition_epoch": epoch,
                "replicas": [ME, PEER], "isr": [ME] if leader == ME else [ME, PEER]}]}]}

    async def configs_for(topic: str) -> dict[str, Any]:
        return transaction_state_configs(node.config)

    answer = await node.replicas.leader_and_isr(body, configs_for)
    assert answer["topics"][0]["partition_errors"][0]["error_code"] == ErrorCode.NONE
    node.metadata.set_partition(TRANSACTION_STATE_TOPIC, index, PartitionInfo(leader, epoch, (ME, PEER), (ME,)),
                                TXN_TOPIC_ID)
    partition = node.replicas.partition(TRANSACTION_STATE_TOPIC, index)
    assert partition is not None
    return partition


async def loaded(service: TxnService, transactional_id: str) -> None:
    for _ in range(10_000):
        if service.status(transactional_id) != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            break
        await asyncio.sleep(0)
    assert service.status(transactional_id) == ErrorCode.NONE


async def until(check: Callable[[], bool]) -> None:
    for _ in range(int(WAIT_S / 0.01)):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not reached")


def markers_in(partition: Partition) -> list[tuple[int, int, bool, int]]:
    """(offset, producer epoch, commit, coordinator epoch) of each marker in the partition."""
    data = b"".join(bytes(b) for b in partition.read_to_log_end(0, 1 << 20).buffers)
    found = []
    for pos, header in iter_batch_headers(data):
        marker = read_marker(header, data[pos:pos + header.size])
        if marker is not None:
            found.append((header.base_offset, header.producer_epoch, marker.commit, marker.coordinator_epoch))
    return found


def test_commit_writes_markers_then_complete_and_a_new_leader_reloads_the_state(tmp_path: Path) -> None:
    async def scenario(node: Node, service: TxnService, peers: InProcessPeer) -> None:
        data = await lead_user_topic(node, isr=(ME,))
        assert service.status(T) == ErrorCode.NOT_COORDINATOR
        # What a request would hear right after the election, before the load has run.
        heard: list[ErrorCode] = []
        node.replicas.leadership_listeners.append(lambda partition, leader: heard.append(service.status(T)))
        await lead_txn_partition(node, 0, epoch=3)
        assert heard == [ErrorCode.COORDINATOR_LOAD_IN_PROGRESS]
        await loaded(service, T)
        code, pid, epoch = await service.init_producer_id(T, 60_000, -1, -1)
        assert (code, pid, epoch) == (ErrorCode.NONE, 1000, 0)
        assert await service.add_partitions(T, pid, epoch, [(USER_TOPIC, 0)]) == ErrorCode.NONE
        assert await service.end_txn(T, pid, epoch, commit=True) == ErrorCode.NONE
        await until(lambda: service.core.txns[T].state == TxnState.COMPLETE_COMMIT)
        assert markers_in(data) == [(0, 0, True, 3)]
        # The controller bumps the leader epoch (an ISR shrink) while we stay leader: still the
        # coordinator, with the epoch of our election.
        await lead_txn_partition(node, 0, epoch=4)
        assert service.status(T) == ErrorCode.NONE
        code, _, epoch = await service.init_producer_id(T, 60_000, -1, -1)
        assert (code, epoch) == (ErrorCode.NONE, 1)
        # Resignation, then election in a higher epoch: the state comes back from the log.
        await lead_txn_partition(node, 0, epoch=5, leader=PEER)
        assert service.status(T) == ErrorCode.NOT_COORDINATOR and T not in service.core.txns
        assert await service.end_txn(T, pid, epoch, commit=True) == ErrorCode.NOT_COORDINATOR
        await lead_txn_partition(node, 0, epoch=6)
        await loaded(service, T)
        md = service.core.txns[T]
        assert (md.producer_id, md.producer_epoch, md.state) == (pid, 1, TxnState.EMPTY)
        code, _, bumped = await service.init_producer_id(T, 60_000, -1, -1)
        assert (code, bumped) == (ErrorCode.NONE, 2)
        # Idle past transactional.id.expiration.ms: its tombstone is written, a new leader knows
        # nothing of it, and it starts again with a new producer id.
        service.expire_transactional_ids(now_ms() + 10**10)
        await until(lambda: T not in service.core.txns)
        await lead_txn_partition(node, 0, epoch=7, leader=PEER)
        await lead_txn_partition(node, 0, epoch=8)
        await loaded(service, T)
        assert T not in service.core.txns
        code, fresh, epoch = await service.init_producer_id(T, 60_000, -1, -1)
        assert code == ErrorCode.NONE and fresh != pid and epoch == 0

    run(tmp_path, scenario)


def test_a_new_leader_finishes_a_prepared_transaction_and_the_old_coordinator_is_fenced(tmp_path: Path) -> None:
    async def scenario(node: Node, service: TxnService, peers: InProcessPeer) -> None:
        data = await lead_user_topic(node, isr=(ME,))
        await lead_txn_partition(node, 0, epoch=1)
        await loaded(service, T)
        _, pid, epoch = await service.init_producer_id(T, 60_000, -1, -1)
        assert await service.add_partitions(T, pid, epoch, [(USER_TOPIC, 0)]) == ErrorCode.NONE
        # PrepareAbort is written, then leadership moves before any marker is sent.
        decided = service.core.end_txn(0, T, pid, epoch, commit=False)
        assert not isinstance(decided, (ErrorCode, type(None)))
        assert await service._write(decided) == ErrorCode.NONE
        assert service.core.txns[T].state == TxnState.PREPARE_ABORT and markers_in(data) == []
        await lead_txn_partition(node, 0, epoch=2, leader=PEER)
        await lead_txn_partition(node, 0, epoch=7)
        await loaded(service, T)
        await until(lambda: service.core.txns[T].state == TxnState.COMPLETE_ABORT)
        assert markers_in(data) == [(0, 0, False, 7)]
        # A marker from the old coordinator (epoch 1) arriving late is refused.
        late = await txn_handlers.handle_write_txn_markers(peers.ctx, request(ApiKey.WRITE_TXN_MARKERS, 1, {
            "markers": [{"producer_id": pid, "producer_epoch": epoch, "transaction_result": True,
                         "coordinator_epoch": 1, "topics": [{"name": USER_TOPIC, "partition_indexes": [0]}]}]}))
        code = late["markers"][0]["topics"][0]["partitions"][0]["error_code"]
        assert code == ErrorCode.TRANSACTION_COORDINATOR_FENCED
        assert len(markers_in(data)) == 1

    run(tmp_path, scenario)
