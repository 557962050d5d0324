"""The automatic balancer's decisions (roost.broker.balance.autocore), pure, on random clusters:
only the active controller acts, never while something is moving; nothing moves while a broker
is down for less than balancer.broker.unavailable.delay.ms, and past it continuous mode heals
exactly the brokers gone; node_add never heals; a broker below its share of replicas gets it;
the delay is counted from the first time a broker was seen gone. And the executor side of
healing: a broker already dead when the plan was made does not stop the execution."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from roost.broker.balance.autocore import (
    BrokerLoad,
    Facts,
    Kind,
    Settings,
    below_share,
    decide,
    skew,
    track_missing,
)
from roost.broker.balance.executor import Executor, Observed, Phase
from roost.broker.balance.planner import Proposal

DELAY_MS = 60_000


@st.composite
def clusters(draw: st.DrawFn) -> tuple[Settings, Facts]:
    mode = draw(st.sampled_from(["off", "node_add", "continuous"]))
    brokers = draw(st.lists(st.integers(1, 9), min_size=1, max_size=9, unique=True))
    live = frozenset(draw(st.lists(st.sampled_from(brokers), min_size=1, unique=True)))
    loads = {b: BrokerLoad(draw(st.integers(0, 50)), draw(st.integers(0, 20)), draw(st.floats(0, 1e6)))
             for b in brokers}
    now = draw(st.integers(DELAY_MS * 2, DELAY_MS * 10))
    missing = {b: now - draw(st.integers(0, DELAY_MS * 2)) for b in brokers if b not in live and loads[b].replicas}
    busy = draw(st.sampled_from(["", "3 reassignments in progress"]))
    return (Settings(mode, DELAY_MS, draw(st.sampled_from([0.0, 0.1, 0.5]))),
            Facts(now, draw(st.booleans()), live, loads, missing, busy))


@settings(max_examples=300, deadline=None)
@given(clusters())
def test_only_the_active_controller_acts_and_never_while_something_moves(case: tuple[Settings, Facts]) -> None:
    config, facts = case
    decision = decide(config, facts)
    if config.mode == "off" or not facts.in_charge or facts.busy:
        assert decision.kind is Kind.HOLD, decision
    assert decide(config, facts) == decision  # deterministic


@settings(max_examples=300, deadline=None)
@given(clusters())
def test_nothing_moves_while_a_broker_is_down_for_less_than_the_delay(case: tuple[Settings, Facts]) -> None:
    config, facts = case
    decision = decide(config, facts)
    recent = [b for b, since in facts.missing_since.items() if facts.now_ms - since < config.unavailable_delay_ms]
    if recent or (facts.missing_since and config.mode == "node_add"):
        assert decision.kind is Kind.HOLD, (decision, recent)
    if decision.kind is Kind.HEAL:
        assert config.mode == "continuous"
        assert decision.heal == frozenset(facts.missing_since)
        assert all(facts.now_ms - since >= config.unavailable_delay_ms for since in facts.missing_since.values())
    else:
        assert not decision.heal
    if decision.acts and decision.kind is not Kind.HEAL:
        assert not facts.missing_since  # a plan made with a broker down would heal it


def test_past_the_delay_continuous_heals_and_node_add_does_not() -> None:
    loads = {1: BrokerLoad(10, 4), 2: BrokerLoad(10, 3), 3: BrokerLoad(10, 3), 4: BrokerLoad(10, 0)}
    live = frozenset({1, 2, 3})
    for gone_ms, expected in ((DELAY_MS - 1, Kind.HOLD), (DELAY_MS, Kind.HEAL)):
        facts = Facts(1_000_000, True, live, loads, {4: 1_000_000 - gone_ms})
        decision = decide(Settings("continuous", DELAY_MS), facts)
        assert decision.kind is expected, decision
        assert decide(Settings("node_add", DELAY_MS), facts).kind is Kind.HOLD
    assert "healing after 60 s" in decide(Settings("continuous", DELAY_MS), Facts(
        1_000_000, True, live, loads, {4: 999_000})).reason


def test_a_new_broker_gets_its_share_in_both_modes_and_skew_only_in_continuous() -> None:
    joined = {1: BrokerLoad(12, 4), 2: BrokerLoad(12, 4), 3: BrokerLoad(12, 4), 4: BrokerLoad(0, 0)}
    for mode in ("node_add", "continuous"):
        decision = decide(Settings(mode), Facts(0, True, frozenset(joined), joined, {}))
        assert decision.kind is Kind.NODE_ADD and "broker 4 holds 0 replicas" in decision.reason
    leaders = {1: BrokerLoad(12, 10), 2: BrokerLoad(12, 1), 3: BrokerLoad(12, 1)}
    assert decide(Settings("node_add"), Facts(0, True, frozenset(leaders), leaders, {})).kind is Kind.HOLD
    assert decide(Settings("continuous"), Facts(0, True, frozenset(leaders), leaders, {})).kind is Kind.SKEW
    even = {b: BrokerLoad(12, 4, 1000.0) for b in (1, 2, 3)}
    assert decide(Settings("continuous"), Facts(0, True, frozenset(even), even, {})).reason == "balanced"


def test_skew_waits_for_the_load_measured_after_the_last_moves_and_node_add_does_not() -> None:
    """A moved leader reports no rate for a window: skew judged then would move a hot partition
    as a cold one (leaders flapped in bench/balance_skew_bench.py). A new broker's share is
    counted from the metadata, so node_add does not wait."""
    settings_ = Settings("continuous", remeasure_ms=8000)
    leaders = {1: BrokerLoad(12, 10), 2: BrokerLoad(12, 1), 3: BrokerLoad(12, 1)}
    held = decide(settings_, Facts(10_000, True, frozenset(leaders), leaders, {}, last_moved_ms=5000))
    assert held.kind is Kind.HOLD and "measured again" in held.reason and "3.0 s more" in held.reason
    assert decide(settings_, Facts(13_000, True, frozenset(leaders), leaders, {}, last_moved_ms=5000)).kind \
        is Kind.SKEW
    assert decide(settings_, Facts(10_000, True, frozenset(leaders), leaders, {})).kind is Kind.SKEW
    joined = {1: BrokerLoad(12, 4), 2: BrokerLoad(12, 4), 3: BrokerLoad(12, 4), 4: BrokerLoad(0, 0)}
    assert decide(settings_, Facts(6000, True, frozenset(joined), joined, {}, last_moved_ms=5000)).kind \
        is Kind.NODE_ADD


@given(st.dictionaries(st.integers(1, 9), st.integers(0, 50), min_size=1), st.floats(0, 0.5))
def test_below_share_is_at_least_a_replica_under_the_mean(counts: dict[int, int], threshold: float) -> None:
    loads = {b: BrokerLoad(n) for b, n in counts.items()}
    mean = sum(counts.values()) / len(counts)
    for broker, _ in below_share(loads, counts, threshold):
        assert counts[broker] < mean * (1 - threshold) and counts[broker] <= mean - 1
    worst, _ = skew(loads, counts)
    assert worst >= 0


@given(st.lists(st.tuples(st.frozensets(st.integers(1, 6)), st.frozensets(st.integers(1, 6))), min_size=1,
                max_size=20))
def test_the_delay_counts_from_the_first_time_a_broker_was_seen_gone(steps: list[tuple[frozenset[int],
                                                                                    frozenset[int]]]) -> None:
    missing: dict[int, int] = {}
    for now, (live, hosting) in enumerate(steps):
        after = track_missing(missing, live, hosting, now)
        assert set(after) == set(hosting) - set(live)
        for broker, since in after.items():
            assert since == missing.get(broker, now) <= now
        missing = after


def test_a_broker_dead_before_the_plan_does_not_stop_the_healing_execution() -> None:
    heal = Proposal(("t", 0), (1, 2, 3), (1, 2, 4), 1, 1)
    seen = {("t", 0): Observed((1, 2, 3), (1, 2), 1, False, 2)}
    executor = Executor([heal], dead_at_start=frozenset({3}))
    assert executor.throttled_brokers() == {1, 2, 4}  # no throttle asked of the dead broker
    assert [t.key for t in executor.next_batch(seen, {1, 2, 4})] == [("t", 0)]  # live replicas in sync: go
    executor.observe({("t", 0): Observed((1, 2, 4, 3), (1, 2), 1, True, 2)}, {1, 2, 4})
    assert executor.phase is Phase.INTER_BROKER_REPLICA_MOVEMENT
    executor.observe({("t", 0): Observed((1, 2, 4), (1, 2, 4), 1, False, 2)}, {1, 2, 4})
    assert executor.phase is Phase.COMPLETED
    unaware = Executor([heal])  # without it, the dead broker is taken as dying under the move
    unaware.next_batch({("t", 0): Observed((1, 2, 3), (1, 2, 3), 1, False, 2)}, {1, 2, 3, 4})
    unaware.observe({("t", 0): Observed((1, 2, 4, 3), (1, 2), 1, True, 2)}, {1, 2, 4})
    assert unaware.phase is Phase.STOPPING
