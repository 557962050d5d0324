"""The append door's LINK origin on a real replica manager and real logs: a mirror takes its
link's batches byte for byte at their own offsets (leader epochs, producer ids kept), refuses a
gap, refuses clients and other links; once promoted it refuses mirror writes and its clients
write in an epoch above every mirrored one, at the next offset; a source transaction still open
on the mirror when it is promoted is aborted there (its marker written in the promotion epoch),
so the last stable offset moves on."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from roost.broker.metadata.cache import PartitionInfo
from roost.broker.replica.append import AppendOrigin
from roost.broker.replica.partition import Partition
from roost.log.transactions import build_marker
from roost.wire.kafka.errors import ErrorCode
from roost.wire.kafka.records import build_batch
from tests.broker.test_group_service import ME, PEER, USER_TOPIC, Node, run

LINK = "eu"


async def lead_mirror(node: Node, epoch: int = 1, mirror: bool = True) -> Partition:
    body = {"controller_id": PEER, "controller_epoch": node.controller_epoch, "broker_epoch": -1,
            "topic_states": [{"topic_name": USER_TOPIC, "topic_id": None, "partition_states": [{
                "partition_index": 0, "leader": ME, "leader_epoch": epoch, "partition_epoch": epoch,
                "replicas": [ME], "isr": [ME]}]}]}

    async def configs_for(topic: str) -> dict[str, Any]:
        return {"roost.mirror.link": LINK} if mirror else {}

    reply = await node.replicas.leader_and_isr(body, configs_for)
    assert reply["topics"][0]["partition_errors"][0]["error_code"] == ErrorCode.NONE
    node.metadata.set_partition(USER_TOPIC, 0, PartitionInfo(ME, epoch, (ME,), (ME,)))
    partition = node.replicas.partition(USER_TOPIC, 0)
    assert partition is not None and partition.mirror_link == (LINK if mirror else "")
    return partition


def source_batch(base: int, count: int, epoch: int, producer_id: int = 5, sequence: int = 0,
                 transactional: bool = False, producer_epoch: int = 0) -> bytes:
    now = int(time.time() * 1000)
    return bytes(build_batch([(b"k", f"v{base + i}".encode()) for i in range(count)], base_offset=base,
                             timestamp_ms=now - 60_000, producer_id=producer_id, producer_epoch=producer_epoch,
                             base_sequence=sequence, partition_leader_epoch=epoch, is_transactional=transactional))


def source_marker(base: int, epoch: int, producer_id: int, commit: bool, producer_epoch: int = 0) -> bytes:
    """A control batch as the source's coordinator wrote it (at `base`, in the source's `epoch`)."""
    marker = bytearray(build_marker(producer_id, producer_epoch, commit=commit, coordinator_epoch=3,
                                    timestamp_ms=int(time.time() * 1000)))
    marker[0:8] = base.to_bytes(8, "big")
    marker[12:16] = epoch.to_bytes(4, "big", signed=True)  # partitionLeaderEpoch: outside the CRC
    return bytes(marker)


def append(node: Node, records: bytes, origin: AppendOrigin, link: str | None = LINK) -> Any:
    appending = node.replicas.append([((USER_TOPIC, 0), bytearray(records))], 1, origin, 5.0, link=link)
    return appending.outcomes[0]


def log_bytes(partition: Partition) -> bytes:
    read = partition.log.read(0, 1 << 20, max_offset=partition.log.log_end_offset, min_one_batch=True)
    return b"".join(bytes(b) for b in read.buffers)


def test_link_batches_keep_bytes_offsets_and_epochs(tmp_path: Path) -> None:
    async def scenario(node: Node) -> None:
        partition = await lead_mirror(node, epoch=1)
        first, second = source_batch(0, 3, epoch=7), source_batch(3, 2, epoch=9, sequence=3)
        assert append(node, first, AppendOrigin.LINK).error == ErrorCode.NONE
        assert append(node, second, AppendOrigin.LINK).error == ErrorCode.NONE
        assert log_bytes(partition) == first + second  # byte for byte: offsets, epochs, CRCs
        assert partition.log.leader_epochs.latest_epoch == 9  # the source's history, not ours (1)
        # After a gap (the source compacted offsets 5-9 away) the batch keeps its offset, never
        # renumbered to the log end; one before the log end is refused.
        gap = append(node, source_batch(10, 1, epoch=9, sequence=5), AppendOrigin.LINK)
        assert gap.error == ErrorCode.NONE and gap.base_offset == 10 and partition.log_end_offset == 11
        assert append(node, source_batch(4, 1, epoch=9, sequence=6), AppendOrigin.LINK).error \
            == ErrorCode.OFFSET_OUT_OF_RANGE
        # Clients, and another link, may not write to the mirror.
        assert append(node, source_batch(0, 1, epoch=-1, producer_id=-1, sequence=-1), AppendOrigin.CLIENT,
                      None).error == ErrorCode.INVALID_REQUEST
        assert append(node, source_batch(11, 1, epoch=9, sequence=6), AppendOrigin.LINK,
                      "other").error == ErrorCode.INVALID_REQUEST
        assert partition.log_end_offset == 11

    run(tmp_path, scenario)


def test_promoted_mirror_takes_clients_in_a_new_epoch_and_no_mirror_writes(tmp_path: Path) -> None:
    async def scenario(node: Node) -> None:
        partition = await lead_mirror(node, epoch=1)
        assert append(node, source_batch(0, 4, epoch=6), AppendOrigin.LINK).error == ErrorCode.NONE
        node.replicas.apply_topic_configs(USER_TOPIC, {})  # roost.mirror.link removed: promoted
        assert partition.mirror_link == ""
        late = append(node, source_batch(4, 1, epoch=6, sequence=4), AppendOrigin.LINK)
        assert late.error == ErrorCode.INVALID_REQUEST and partition.log_end_offset == 4
        mine = append(node, source_batch(0, 2, epoch=-1, producer_id=-1, sequence=-1), AppendOrigin.CLIENT, None)
        assert mine.error == ErrorCode.NONE and mine.base_offset == 4
        assert partition.log.leader_epochs.latest_epoch == 7  # above every mirrored epoch
        assert partition.log.leader_epochs.end_offset_for(6, partition.log_end_offset) == (6, 4)

    run(tmp_path, scenario)


def test_promotion_aborts_the_source_transactions_left_open_on_the_mirror(tmp_path: Path) -> None:
    """Producer 5's transaction committed on the source (marker mirrored); producer 6's was open
    when the link stopped (data mirrored, no marker); plain records follow it. Promotion writes an
    ABORT marker for producer 6 only, in the promotion epoch, after the mirrored records: the LSO,
    held at 6's first record, reaches the high watermark, and 6's records are listed aborted."""
    async def scenario(node: Node) -> None:
        partition = await lead_mirror(node, epoch=1)
        mirrored = [source_batch(0, 2, epoch=4, producer_id=5, transactional=True),
                    source_marker(2, epoch=4, producer_id=5, commit=True),
                    source_batch(3, 3, epoch=4, producer_id=6, transactional=True, producer_epoch=2),
                    source_batch(6, 2, epoch=4, producer_id=7)]
        for batch in mirrored:
            assert append(node, batch, AppendOrigin.LINK).error == ErrorCode.NONE
        assert partition.high_watermark == 8
        assert partition.last_stable_offset == 3  # held by producer 6's open transaction
        node.replicas.apply_topic_configs(USER_TOPIC, {})  # promoted
        assert partition.log_end_offset == 9, "one marker: producer 5's transaction had ended"
        assert log_bytes(partition).startswith(b"".join(mirrored)), "the mirrored records stay as they were"
        read = partition.log.read(8, 1 << 20, max_offset=9, min_one_batch=True)
        marker = b"".join(bytes(b) for b in read.buffers)
        assert marker[22] & 0x20 and marker[22] & 0x10, "a transactional control batch"
        assert int.from_bytes(marker[43:51], "big") == 6 and int.from_bytes(marker[51:53], "big") == 2
        assert int.from_bytes(marker[12:16], "big") == 5, "written in the promotion epoch"
        assert not partition.log.producer_state.ongoing
        assert partition.high_watermark == 9 and partition.last_stable_offset == 9
        assert partition.aborted_transactions(0, 9) == [(6, 3)]
        # The topic goes on: a client's record at the next offset, readable under read_committed.
        mine = append(node, source_batch(0, 1, epoch=-1, producer_id=-1, sequence=-1), AppendOrigin.CLIENT, None)
        assert mine.error == ErrorCode.NONE and mine.base_offset == 9 and partition.last_stable_offset == 10

    run(tmp_path, scenario)


def test_a_partition_becoming_a_mirror_drops_the_epochs_it_wrote_nothing_in(tmp_path: Path) -> None:
    """Failback's old source: promoted earlier (epoch 1 at its end, nothing written in it), then
    led again after a restart (epoch 3 at its end, nothing written), it becomes a mirror of the
    promoted side, whose writes came in that side's promotion epoch 2. Its epoch history must be
    its batches' own: 2 starts at offset 4. Had it kept the empty epoch 3, the batches of epoch 2
    would append unrecorded under it: its followers (asking with epoch 2) would be told to diverge
    on every fetch, and once promoted it would tell the other side that epoch 2 ends at 4, the
    other side then cutting every record it had acknowledged since."""
    async def scenario(node: Node) -> None:
        partition = await lead_mirror(node, epoch=1)
        assert append(node, source_batch(0, 4, epoch=0), AppendOrigin.LINK).error == ErrorCode.NONE
        node.replicas.apply_topic_configs(USER_TOPIC, {})  # promoted: epoch 1 from offset 4
        await lead_mirror(node, epoch=3, mirror=False)  # a restart's election: epoch 3 from offset 4
        assert partition.log.leader_epochs.latest_epoch == 3
        node.replicas.apply_topic_configs(USER_TOPIC, {"roost.mirror.link": LINK})  # failback's reverse step
        assert partition.log.leader_epochs.latest_epoch == 0, "the empty epochs 1 and 3 are dropped"
        theirs = source_batch(4, 3, epoch=2, producer_id=8)  # the promoted side's writes, its epoch 2
        assert append(node, theirs, AppendOrigin.LINK).error == ErrorCode.NONE
        epochs = partition.log.leader_epochs
        assert epochs.latest_epoch == 2 and epochs.end_offset_for(0, 7) == (0, 4)
        node.replicas.apply_topic_configs(USER_TOPIC, {})  # promoted again (the switch-back)
        assert epochs.latest_epoch == 3  # max(leader epoch 3, mirrored 2 + 1)
        # The other side, now mirroring this one, asks where its epoch 2 ends: at 7, all it has.
        assert epochs.end_offset_for(2, partition.log_end_offset) == (2, 7)

    run(tmp_path, scenario)


def test_a_mirror_cut_below_where_its_leadership_began_still_knows_its_high_watermark(tmp_path: Path) -> None:
    """Failback's old source, restarted, leads from its log end (4), becomes a mirror and cuts
    its divergent suffix below that (to 3): its leadership now begins at its log end, so its
    high watermark is known (ListOffsets would answer OFFSET_NOT_AVAILABLE while it stays below
    where the leadership began, which a source that writes nothing more never ends)."""
    async def scenario(node: Node) -> None:
        partition = await lead_mirror(node, epoch=1)
        for batch in (source_batch(0, 3, epoch=0), source_batch(3, 1, epoch=0, sequence=3)):
            assert append(node, batch, AppendOrigin.LINK).error == ErrorCode.NONE
        node.replicas.apply_topic_configs(USER_TOPIC, {})  # promoted
        await lead_mirror(node, epoch=3, mirror=False)  # a restart: leader from offset 4
        assert partition.leader_epoch_start_offset == 4
        node.replicas.apply_topic_configs(USER_TOPIC, {"roost.mirror.link": LINK})
        node.replicas.truncate_mirror(partition, 3)  # the source never had offset 3
        assert partition.log_end_offset == 3 and partition.high_watermark == 3
        assert partition.leader_epoch_start_offset <= partition.high_watermark

    run(tmp_path, scenario)
