"""The measures scripts/link_chaos.py prints (RPO) and the checks it makes (nothing acknowledged
below the promotion point missing; the Spark query's checkpoint valid on the destination and its
resumed reads complete), on made-up acknowledgements, reads and checkpoints: the run itself needs
root and minutes, so only these pure parts run in the CI."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

spec = importlib.util.spec_from_file_location("link_chaos", Path(__file__).resolve().parents[2] / "scripts/link_chaos.py")
assert spec is not None and spec.loader is not None
chaos = importlib.util.module_from_spec(spec)
sys.modules["link_chaos"] = chaos  # its dataclasses look their module up
spec.loader.exec_module(chaos)
Ack = chaos.Ack
spark = chaos.spark_half
Read = spark.SparkRead


def test_rpo_counts_acknowledged_records_past_the_mirror_end_and_their_ages() -> None:
    acks = [Ack(0, o, f"v{o}", 100.0 + o) for o in range(10)] + [Ack(1, o, f"w{o}", 100.5 + o) for o in range(4)]
    loss = chaos.rpo(acks, {0: 7, 1: 4}, lost_at=110.0)
    assert loss.lost == 3 and loss.per_partition == {0: 3}
    assert loss.oldest_age_s == 3.0 and loss.newest_age_s == 1.0
    assert chaos.rpo(acks, {0: 10, 1: 4}, 110.0).lost == 0
    assert chaos.rpo(acks, {0: 0, 1: 0}, 103.2).lost == 7  # acknowledged after the loss: not counted


def test_missing_below_end_names_lost_or_changed_records() -> None:
    acks = [Ack(0, 0, "a", 1.0), Ack(0, 1, "b", 2.0), Ack(0, 2, "c", 3.0)]
    assert chaos.missing_below_end(acks, {0: 2}, {(0, 0): "a", (0, 1): "b"}) == []
    assert chaos.missing_below_end(acks, {0: 2}, {(0, 0): "a", (0, 1): "x"}) == [acks[1]]
    assert chaos.missing_below_end(acks, {0: 3}, {(0, 0): "a", (0, 1): "b"}) == [acks[2]]


def test_promotion_points_leave_out_the_abort_markers_of_the_promotion() -> None:
    # Partition 0: the promotion aborted two open transactions (markers at 16378 and 16379), the
    # first record accepted after it at 16380; a marker mirrored earlier (16370) is not adjacent.
    controls = {0: {16370, 16378, 16379}, 1: {5}}
    assert chaos.promotion_points({0: 16380, 1: 9, 2: 4}, controls) == {0: 16378, 1: 9, 2: 4}
    # A's records at the markers' offsets were never mirrored: counted as lost, not as missing.
    acks = [Ack(0, 16378, "idem-1", 1.0), Ack(0, 16377, "idem-0", 0.5)]
    ends = chaos.promotion_points({0: 16380}, controls)
    assert chaos.missing_below_end(acks, ends, {(0, 16377): "idem-0"}) == []
    assert chaos.rpo(acks, ends, lost_at=2.0).lost == 1


def test_group_skipped_ignores_offsets_without_a_visible_record() -> None:
    # Offsets 5-7 of partition 0 hold an aborted transaction and its marker: no record there.
    held = {(0, o): f"v{o}" for o in (3, 4, 8, 9)} | {(1, o): f"w{o}" for o in range(6)}
    assert chaos.group_skipped({0: 5, 1: 2}, {0: 8, 1: 1}, held) == []
    assert chaos.group_skipped({0: 4, 1: 2}, {0: 8, 1: 4}, held) == [(0, 4), (1, 2), (1, 3)]


def test_unmarked_commits_are_at_most_the_transactions_the_promotion_aborted() -> None:
    # txn-40..44: one transaction (20 records each), idem-7: not transactional.
    txn = [Ack(2, 100 + n, f"txn-{40 + n}", 1.0) for n in range(5)]
    idem = [Ack(1, 9, "idem-7", 1.0)]
    assert chaos.unmarked_commits(txn + idem, 1) == (txn, idem)
    assert chaos.unmarked_commits(txn, 0) == ([], txn)  # nothing aborted: a real loss
    two = [*txn, Ack(3, 7, "txn-60", 1.0)]
    assert chaos.unmarked_commits(two, 1) == ([], two)  # more transactions than were aborted
    assert chaos.unmarked_commits(two, 2) == (two, [])


def test_checkpoint_offsets_are_the_last_committed_batch_end(tmp_path: Path) -> None:
    assert spark.checkpoint_offsets(tmp_path, "chaos") == (None, {})
    (tmp_path / "commits").mkdir()
    (tmp_path / "offsets").mkdir()
    for batch, end in enumerate(({"0": 3, "1": 2}, {"0": 9, "1": 5}, {"0": 20, "1": 8})):
        meta = json.dumps({"batchWatermarkMs": 0, "batchTimestampMs": 1})
        # Spark keeps a Python data source's offset as its JSON text, one line per source.
        (tmp_path / "offsets" / str(batch)).write_text(f"v1\n{meta}\n{json.dumps({'chaos': end})}")
        if batch < 2:  # batch 2 planned, its sink not done when the driver died
            (tmp_path / "commits" / str(batch)).write_text("v1\n{}")
    assert spark.checkpoint_offsets(tmp_path, "chaos") == (1, {0: 9, 1: 5})
    assert spark.planned_offsets(tmp_path, "chaos") == (2, {0: 20, 1: 8})


def test_parse_reads_drops_a_line_cut_by_the_kill() -> None:
    reads, batches = spark.parse_reads("batch 3 17.5 2\nread 3 0 4 idem-8\nread 3 1 0 txn-1\nread 3 1 1 tx")
    assert batches == [(3, 17.5, 2)]
    assert reads == [Read(3, 0, 4, "idem-8"), Read(3, 1, 0, "txn-1")]


def test_spark_resume_checks_values_counts_rereads_losses_and_skips() -> None:
    # A: partition 0 committed to 4 (promotion point 6), partition 1 committed to 5 past its promotion
    # point 3: A's records 3 and 4 of partition 1 were never mirrored. Batch 2 (0:4-5) not committed.
    read_a = [Read(0, 0, o, f"a{o}") for o in range(4)] + [Read(1, 1, o, f"b{o}") for o in range(5)]
    read_a += [Read(2, 0, 4, "a4"), Read(2, 0, 5, "a5")]
    committed, promotion = {0: 4, 1: 5}, {0: 6, 1: 3}
    held_b = {(0, o): f"a{o}" for o in range(6)} | {(0, 6): "new0"}
    held_b |= {(1, o): f"b{o}" for o in range(3)} | {(1, 3): "new1", (1, 4): "new2", (1, 5): "new3"}
    read_b = [Read(0, 0, o, held_b[(0, o)]) for o in (4, 5, 6)] + [Read(1, 1, 5, "new3"), Read(2, 0, 6, "new0")]
    found = spark.spark_resume(read_a, committed, promotion, held_b, read_b)
    assert found.checked == 7 and found.changed == [] and found.lost_with_a == 2
    assert found.skipped_on_b == [(1, 3), (1, 4)]
    assert found.must_read == 4 and found.missing == []
    assert found.rereads == 2 and found.duplicates_on_b == 1
    assert spark.read_to(read_b, held_b)
    assert not spark.read_to(read_b[:2], held_b)

    # The same offset holding another record on B, a record past the checkpoint not read, one read
    # with another value than B holds: each named.
    changed = held_b | {(0, 2): "other"}
    assert spark.spark_resume(read_a, committed, promotion, changed, read_b).changed == [(0, 2)]
    assert spark.spark_resume(read_a, committed, promotion, held_b, read_b[1:]).missing == [(0, 4)]
    wrong = [*read_b[:3], Read(1, 1, 5, "other")]
    assert spark.spark_resume(read_a, committed, promotion, held_b, wrong).missing == [(1, 5)]
