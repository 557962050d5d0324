"""The cluster link's pure core: filters, config sync, epoch truncation (mirror and failback),
per-partition steps, lag, throttle, group offset sync, promotion."""

from __future__ import annotations

import bisect

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roost.broker.link.configs import config_exclusions, configs_to_copy
from roost.broker.link.core import (
    Append,
    AskEpoch,
    Failed,
    FetchFrom,
    Hold,
    LinkState,
    OpenTransaction,
    PartitionMirror,
    Refresh,
    StartOver,
    Throttle,
    Truncate,
    WriteOrigin,
    backoff_ms,
    group_offsets_to_sync,
    leader_log_epoch,
    link_state,
    promotion_epoch,
    source_recreated,
    topics_to_promote,
    transactions_to_abort,
    truncation_for,
    write_allowed,
)
from roost.broker.link.filters import FilterError, is_internal_topic, parse_patterns, topic_filter
from roost.broker.link.settings import LinkSettings, LinkSettingsError
from roost.wire.kafka.errors import ErrorCode


class Epochs:
    """An in-memory leader-epoch cache built from each offset's epoch (as a log's batches carry)."""

    def __init__(self, per_offset: list[int]) -> None:
        self.entries: list[tuple[int, int]] = []
        for offset, epoch in enumerate(per_offset):
            if not self.entries or epoch > self.entries[-1][0]:
                self.entries.append((epoch, offset))

    @property
    def latest_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else -1

    def end_offset_for(self, requested: int, log_end_offset: int) -> tuple[int, int]:
        epochs = [e for e, _ in self.entries]
        i = bisect.bisect_right(epochs, requested)
        if i == 0:
            return -1, -1
        if i == len(self.entries):
            return self.entries[-1][0], log_end_offset
        return self.entries[i - 1][0], self.entries[i][1]


# -- filters and configs ---------------------------------------------------------------------------
def test_filters_literal_prefix_regex_and_excludes() -> None:
    f = topic_filter("literal:orders, prefix:pay., regex:audit-\\d+, clicks.*", "prefix:pay.secret")
    assert f.matches("orders") and not f.matches("orders2")
    assert f.matches("pay.eu") and not f.matches("pay.secret.x")
    assert f.matches("audit-12") and not f.matches("audit-x")
    assert f.matches("clicks-eu")
    assert not f.matches("other")


def test_mm2_default_excludes_and_internal_topics() -> None:
    f = topic_filter()
    assert f.matches("orders")
    for name in ("__consumer_offsets", "mm2-offsets.a.internal", "x-internal", "t.replica"):
        assert not f.matches(name)
    assert is_internal_topic(".hidden") and is_internal_topic("__x") and not is_internal_topic("orders")


def test_bad_patterns_are_refused() -> None:
    with pytest.raises(FilterError):
        parse_patterns("regex:([")
    with pytest.raises(FilterError):
        parse_patterns("literal:")


def test_config_sync_skips_mm2_exclusions_and_defaults() -> None:
    source = {"retention.ms": ("1000", False), "cleanup.policy": ("delete", True),
              "min.insync.replicas": ("2", False), "follower.replication.throttled.replicas": ("*", False),
              "leader.replication.throttled.replicas": ("*", False), "message.timestamp.type": ("LogAppendTime", False),
              "unclean.leader.election.enable": ("true", False), "roost.mirror.link": ("other", False),
              "confluent.only": ("x", False)}
    copied = configs_to_copy(source, config_exclusions(), known=frozenset({"retention.ms", "cleanup.policy"}))
    assert copied == {"retention.ms": "1000"}


# -- truncation by leader epochs ----------------------------------------------------------------------
epoch_runs = st.lists(st.integers(min_value=1, max_value=5), min_size=1, max_size=6)


def expand(runs: list[int], first_epoch: int = 0, step: int = 1) -> list[int]:
    per_offset, epoch = [], first_epoch
    for length in runs:
        per_offset += [epoch] * length
        epoch += step
    return per_offset


@given(epoch_runs, st.integers(min_value=0, max_value=40), st.lists(st.integers(0, 3), max_size=8))
@settings(max_examples=100, deadline=None)
def test_mirror_of_a_prefix_never_truncates(runs: list[int], cut: int, extra: list[int]) -> None:
    """A mirror holding a prefix of the source's log keeps all of it, however the source grew."""
    source = expand(runs, step=2)
    mirror = source[:min(cut, len(source))]
    grown = source + [source[-1] + e for e in sorted(extra)]
    if not mirror:
        return
    mine = Epochs(mirror)
    epoch, end = Epochs(grown).end_offset_for(mine.latest_epoch, len(grown))
    assert truncation_for(mine, len(mirror), epoch, end) == len(mirror)


@given(epoch_runs, st.integers(min_value=1, max_value=40), st.lists(st.integers(0, 2), min_size=1, max_size=8),
       st.integers(min_value=1, max_value=10), st.integers(min_value=0, max_value=10))
@settings(max_examples=100, deadline=None)
def test_failback_truncates_exactly_the_divergent_suffix(runs: list[int], cut: int, old_suffix: list[int],
                                                         promoted_records: int, controller_epoch: int) -> None:
    """The old source A wrote after the mirror B stopped at `cut`; B was promoted and wrote in its
    promotion epoch. A, now mirroring B, cuts exactly its records past `cut`."""
    history = expand(runs, step=2)
    cut = min(cut, len(history))
    shared = history[:cut]
    last = shared[-1]
    # A went on in its epoch and in later ones (elections there), all below B's promotion epoch.
    a_log = shared + [last + e for e in sorted(old_suffix)]
    p = promotion_epoch(controller_epoch, max(shared))
    assert p > max(shared)
    b_log = shared + [p] * promoted_records
    if max(a_log) >= p:
        return  # documented limit: the old side elected past the promotion epoch
    a = Epochs(a_log)
    epoch, end = Epochs(b_log).end_offset_for(a.latest_epoch, len(b_log))
    assert truncation_for(a, len(a_log), epoch, end) == cut


def validate(mirror_log: list[int], source_log: list[int]) -> list[int]:
    """Drive a PartitionMirror's validation against a source log (one epoch per offset) until it
    fetches: the mirror's log then."""
    m = PartitionMirror("t", 0)
    m.source_moved(1, 0)
    log = list(mirror_log)
    for _ in range(len(mirror_log) + 2):
        mine = Epochs(log)
        step = m.next_step(len(log), mine.latest_epoch, 0)
        if isinstance(step, FetchFrom):
            assert step.offset == len(log)
            return log
        assert isinstance(step, AskEpoch), step
        epoch, end = Epochs(source_log).end_offset_for(step.epoch, len(source_log))
        action = m.on_epoch_answer(0, epoch, end, mine, len(log), 0)
        if isinstance(action, Truncate):
            assert action.offset < len(log)
            log = log[:action.offset]
    raise AssertionError("validation did not settle within a round per offset")


@given(epoch_runs, st.integers(min_value=1, max_value=40), st.lists(st.integers(0, 6), min_size=1, max_size=8),
       st.integers(min_value=1, max_value=10), st.integers(min_value=0, max_value=10))
@settings(max_examples=200, deadline=None)
def test_failback_cuts_an_old_source_that_wrote_in_epochs_the_promoted_side_never_had(
        runs: list[int], cut: int, old_suffix: list[int], promoted_records: int, controller_epoch: int) -> None:
    """A went on after the cut in its epoch and in later ones of its own (restart elections in
    which its transaction coordinator wrote markers), numbered by A's controller, some above B's
    promotion epoch: the validation rounds still cut exactly A's records past `cut`, unless A used
    the promotion epoch's very number (the documented limit)."""
    history = expand(runs, step=2)
    cut = min(cut, len(history))
    shared = history[:cut]
    last = shared[-1]
    suffix = [last + e for e in sorted(old_suffix)]
    p = promotion_epoch(controller_epoch, max(shared))
    if p in suffix:
        return  # documented limit: the same epoch number on both sides with different records
    b_log = shared + [p] * promoted_records
    assert validate(shared + suffix, b_log) == shared


def test_failback_after_the_old_source_wrote_markers_in_a_later_epoch() -> None:
    """The two-region run's case: B promoted in epoch 4 at offset 6; A had gone on in epoch 3 to
    offset 9 and, restarted, its coordinator wrote a marker in epoch 6. One round cuts the marker
    only; the next cuts epoch 3's records B never had."""
    shared = [0, 0, 1, 1, 3, 3]
    assert validate([*shared, 3, 3, 3, 6], [*shared, 4, 4, 4, 4, 4]) == shared


def test_unknown_epoch_at_the_source_keeps_the_mirror() -> None:
    assert truncation_for(Epochs([3, 3, 4]), 3, -1, -1) == 3


def test_promotion_and_leader_epochs_only_grow() -> None:
    assert promotion_epoch(2, 7) == 8 and promotion_epoch(9, 7) == 9
    assert leader_log_epoch(5, 4) == 5 and leader_log_epoch(3, 8) == 9 and leader_log_epoch(4, 4) == 4


# -- one partition -----------------------------------------------------------------------------------
def test_steps_validate_then_fetch_then_fenced_revalidates() -> None:
    m = PartitionMirror("t", 0)
    assert isinstance(m.next_step(0, -1, 0), Hold)  # no source leader known
    m.source_moved(1, 4)
    assert m.next_step(0, -1, 0) == FetchFrom(0)  # an empty mirror has nothing to check
    m.source_moved(2, 5)
    assert m.next_step(10, 4, 0) == AskEpoch(4)
    assert m.on_epoch_answer(0, 4, 8, Epochs([3] * 5 + [4] * 5), 10, 0) == Truncate(8)
    assert m.truncations == [(10, 8)]
    assert m.next_step(8, 4, 0) == AskEpoch(4)  # asked again after a cut, until an answer cuts nothing
    assert m.on_epoch_answer(0, 4, 8, Epochs([3] * 5 + [4] * 3), 8, 0) is None
    assert m.next_step(8, 4, 0) == FetchFrom(8)
    assert m.on_fetch_answer(ErrorCode.FENCED_LEADER_EPOCH, -1, -1, False, 8, 1000) == Refresh()
    assert isinstance(m.next_step(8, 4, 1000), Hold)  # backing off
    assert isinstance(m.next_step(8, 4, 1000 + backoff_ms(1)), Hold)  # the source's metadata first
    m.source_moved(2, 5)
    assert m.next_step(8, 4, 1000 + backoff_ms(1)) == AskEpoch(4)


def test_fetch_answers_lag_and_out_of_range() -> None:
    m = PartitionMirror("t", 0)
    m.source_moved(1, 0)
    assert m.on_fetch_answer(0, 100, 0, True, 0, 1000) == Append()
    m.appended(40, 1000, 40, 4000)
    assert m.lag_records() == 60 and m.lag_ms(1500) == 500
    m.appended(100, 2000, 60, 6000)
    assert m.lag_records() == 0 and m.lag_ms(5000) == 0
    assert m.records_mirrored == 100 and m.bytes_mirrored == 10_000
    assert m.on_fetch_answer(ErrorCode.OFFSET_OUT_OF_RANGE, -1, 500, False, 100, 3000) == StartOver(500)
    assert m.on_fetch_answer(ErrorCode.OFFSET_OUT_OF_RANGE, -1, 0, False, 100, 3000) == Refresh()
    assert not m.validated  # past the source's end: its metadata, then its epochs again
    assert isinstance(m.next_step(100, 0, 3000), Hold)
    m.source_moved(1, 0)
    assert m.next_step(100, 0, 3000) == AskEpoch(0)
    m.on_epoch_answer(0, 0, 100, Epochs([0] * 100), 100, 3000)
    m.on_fetch_answer(0, 100, 0, False, 100, 4000)
    assert m.lag_records() == 0 and m.lag_ms(5000) == 0
    m.unreachable("cut", 6000)  # the source silent: the records lag is stale, the age bound grows
    assert m.lag_records() == 0 and m.lag_ms(9000) == 5000
    m.on_fetch_answer(0, 100, 0, False, 100, 9500)
    assert m.lag_ms(9600) == 0
    assert m.lag_ms(9500 + 6000) == 6000  # no answer (and no error yet) for 6 s: counted as lag


def test_a_recreated_source_topic_stops_the_mirror_before_any_truncation() -> None:
    """The source topic deleted and recreated: the mirror's next fetch is out of range (or
    fenced), the mirror waits for the source's metadata, sees another topic id and stops (FAILED,
    the reason named) instead of truncating to the new topic's epochs and appending its records."""
    old, new = "7b0d1c9e-0000-4000-8000-000000000001", "7b0d1c9e-0000-4000-8000-000000000002"
    m = PartitionMirror("t", 0)
    assert m.source_moved(1, 3, old, old) is None
    assert m.next_step(50, 3, 0) == AskEpoch(3)
    assert m.on_epoch_answer(0, 3, 50, Epochs([3] * 50), 50, 0) is None
    assert m.next_step(50, 3, 0) == FetchFrom(50)
    assert m.on_fetch_answer(ErrorCode.OFFSET_OUT_OF_RANGE, 4, 0, False, 50, 10) == Refresh()
    assert isinstance(m.next_step(50, 3, 10), Hold)  # never AskEpoch before the metadata
    action = m.source_moved(2, 0, new, old)
    assert isinstance(action, Failed) and "recreated" in action.reason and new in action.reason
    assert link_state(True, [m]) is LinkState.FAILED
    for now in (20, 20_000, 200_000):
        assert isinstance(m.next_step(50, 3, now), Hold)
    assert m.source_moved(2, 0, new, old) is None  # reported once
    m.retry()  # a changed setting does not clear it: the metadata is read again first
    assert isinstance(m.next_step(50, 3, 0), Hold)
    assert isinstance(m.source_moved(2, 0, new, old), Failed)
    # Ids unknown on either side (an old source, a mirror made before ids were recorded): no verdict.
    assert not source_recreated("", new) and not source_recreated(old, None) and source_recreated(old, new)
    same = PartitionMirror("t", 0)
    assert same.source_moved(1, 0, old, old) is None and same.next_step(0, -1, 0) == FetchFrom(0)


def test_authorization_failure_fails_the_mirror_until_retried() -> None:
    m = PartitionMirror("t", 0)
    m.source_moved(1, 0)
    action = m.on_fetch_answer(ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1, -1, False, 0, 0)
    assert isinstance(action, Failed) and "READ" in action.reason
    assert link_state(True, [m]) is LinkState.FAILED
    assert isinstance(m.next_step(0, -1, 0), Hold)
    m.retry()
    assert isinstance(m.next_step(0, -1, 0), Hold)  # the source's metadata is read again first
    m.source_moved(1, 0)
    assert m.next_step(0, -1, 0) == FetchFrom(0)
    assert link_state(False, [m]) is LinkState.SOURCE_UNAVAILABLE and link_state(True, [m]) is LinkState.ACTIVE


@given(st.integers(0, 50))
def test_backoff_is_bounded_and_grows(failures: int) -> None:
    assert 0 <= backoff_ms(failures) <= 10_000
    assert backoff_ms(failures + 1) >= backoff_ms(failures)


def test_throttle_spreads_bytes_over_time() -> None:
    t = Throttle(1000, 0)
    assert t.wait_ms(0) == 0
    t.spend(3000, 0)
    assert t.wait_ms(0) >= 2000
    assert t.wait_ms(3001) == 0
    unlimited = Throttle(-1, 0)
    unlimited.spend(10**9, 0)
    assert unlimited.wait_ms(0) == 0 and unlimited.fetch_max_bytes(5) == 5


# -- writes, groups, promotion ----------------------------------------------------------------------
def test_write_rules() -> None:
    assert not write_allowed("L", WriteOrigin.CLIENT)
    assert write_allowed("", WriteOrigin.CLIENT)
    assert write_allowed("L", WriteOrigin.LINK, "L")
    assert not write_allowed("L", WriteOrigin.LINK, "other")
    assert not write_allowed("", WriteOrigin.LINK, "L")  # promoted: no mirror writes


offsets_maps = st.dictionaries(st.tuples(st.sampled_from("ab"), st.integers(0, 2)), st.integers(-1, 100), max_size=6)


@given(offsets_maps, offsets_maps, offsets_maps, st.sampled_from(["", "Empty", "Stable", "PreparingRebalance", "Dead"]))
def test_group_sync_never_backwards_never_past_the_mirror(source: dict, dest: dict, ends: dict, state: str) -> None:
    ends = {tp: max(0, e) for tp, e in ends.items()}
    out = group_offsets_to_sync(source, dest, state, ends)
    if state in ("Stable", "PreparingRebalance"):
        assert out == {}
    for tp, offset in out.items():
        assert offset > dest.get(tp, -1)
        assert offset <= ends[tp] and offset <= source[tp]


def test_group_sync_keeps_a_later_destination_offset() -> None:
    tp = ("orders", 0)
    # The group moved further on the destination than the source: nothing is committed.
    assert group_offsets_to_sync({tp: 10}, {tp: 40}, "Empty", {tp: 100}) == {}
    assert group_offsets_to_sync({tp: 50}, {tp: 40}, "Empty", {tp: 100}) == {tp: 50}
    assert group_offsets_to_sync({tp: 500}, {}, "", {tp: 100}) == {tp: 100}  # clamped to the mirror
    assert group_offsets_to_sync({tp: 50}, {tp: 40}, "Stable", {tp: 100}) == {}


def test_topics_to_promote() -> None:
    mirrors = {"a.x": "L", "a.y": "L", "b": "L", "c": "other"}
    assert topics_to_promote(mirrors, "L") == ["a.x", "a.y", "b"]
    assert topics_to_promote(mirrors, "L", prefix="a.") == ["a.x", "a.y"]
    assert topics_to_promote(mirrors, "L", topics=["b", "c"]) == ["b"]


# -- settings ------------------------------------------------------------------------------------------
def test_settings_round_trip_and_hide_secrets() -> None:
    s = LinkSettings.parse("eu-to-us", {"bootstrap.servers": "h:9092", "security.protocol": "sasl_ssl",
                                        "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "link",
                                        "sasl.password": "s3cret", "topics": "prefix:orders"})
    assert "s3cret" not in repr(s)
    again = LinkSettings.decode("eu-to-us", s.encode())
    assert again.values == s.values and again.topics.matches("orders.eu") and not again.topics.matches("x")
    assert s.bootstrap() == [("h", 9092)]
    with pytest.raises(LinkSettingsError, match=r"bootstrap\.servers"):
        LinkSettings.parse("x", {})
    with pytest.raises(LinkSettingsError, match="unknown"):
        LinkSettings.parse("x", {"bootstrap.servers": "h:1", "nope": 1})
    with pytest.raises(LinkSettingsError, match=r"sasl\.username"):
        LinkSettings.parse("x", {"bootstrap.servers": "h:1", "security.protocol": "SASL_PLAINTEXT"})
    with pytest.raises(LinkSettingsError, match="link name"):
        LinkSettings.parse("bad/name", {"bootstrap.servers": "h:1"})


# -- ACL sync --------------------------------------------------------------------------------------
def test_acl_sync_copies_literal_topic_acls_of_mirrored_topics_renamed_and_only_missing() -> None:
    from roost.broker.link.acls import LITERAL, TOPIC, Binding, acl_changes

    read, write, allow, deny = 3, 4, 3, 2
    def acl(name: str, operation: int = read, principal: str = "User:app", resource: int = TOPIC,
            pattern: int = LITERAL, permission: int = allow) -> Binding:
        return Binding(resource, name, pattern, principal, "*", operation, permission)

    source = [acl("orders"), acl("orders", write), acl("orders", read, "User:bad", permission=deny),
              acl("payments"), acl("ord", pattern=4), acl("orders", resource=3), acl("__consumer_offsets"),
              acl("other")]
    topics = topic_filter("literal:orders, literal:payments, literal:__consumer_offsets")
    changes = acl_changes(source, [acl("eu.payments")], [], topics, lambda t: f"eu.{t}")
    assert changes.create == sorted([acl("eu.orders"), acl("eu.orders", write), acl("eu.orders", read, "User:bad",
                                                                                    permission=deny)])
    assert changes.delete == []
    assert acl_changes(source, [*changes.create, acl("eu.payments")], changes.create, topics,
                       lambda t: f"eu.{t}").create == []


def test_acl_sync_removes_only_the_acls_it_created_once_the_source_drops_them() -> None:
    from roost.broker.link.acls import LITERAL, TOPIC, Binding, acl_changes, synced_after

    def acl(name: str, principal: str = "User:app", operation: int = 3) -> Binding:
        return Binding(TOPIC, name, LITERAL, principal, "*", operation, 3)

    topics = topic_filter("literal:orders, literal:payments")
    def same(topic: str) -> str:
        return topic
    # The link created orders/app and orders/peeker; the destination's administrators made
    # orders/ops and payments/app (which the source has too).
    synced = [acl("orders"), acl("orders", "User:peeker")]
    destination = [*synced, acl("orders", "User:ops"), acl("payments")]
    # The source dropped orders/peeker.
    source = [acl("orders"), acl("payments")]
    changes = acl_changes(source, destination, synced, topics, same)
    assert changes.delete == [acl("orders", "User:peeker")]
    assert changes.create == []
    assert synced_after(synced, destination, [], changes.delete) == [acl("orders")]
    # A filter that stops taking orders: the link's own orders ACLs go; the administrators' stay.
    narrowed = acl_changes(source, destination, synced, topic_filter("literal:payments"), same)
    assert narrowed.delete == sorted(synced)
    # An ACL the link created that someone removed on the destination leaves the record (the next
    # sync creates it again while the source has it, and records it then).
    assert synced_after(synced, [acl("orders")], [], []) == [acl("orders")]
    # Nothing recorded (an older link, or the record lost): nothing removed.
    assert acl_changes([], destination, [], topics, same).delete == []


def test_promotion_aborts_every_open_transaction_oldest_first() -> None:
    """Each transaction open on a mirror at promotion is the source's (no coordinator here knows
    it): all are aborted, in the order they began, each with its producer's epoch."""
    open_now = [OpenTransaction(9, 3, 2, first_offset=40), OpenTransaction(4, 0, -1, first_offset=12),
                OpenTransaction(7, 1, 5, first_offset=12)]
    assert transactions_to_abort(open_now) == [open_now[1], open_now[2], open_now[0]]
    assert transactions_to_abort([]) == []
