"""The pure quota core against Kafka's own numbers: the windowed rate, the throttle time, which
entity's quota applies, where each entity is stored, DescribeClientQuotas' filters."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roost.broker.quotas.connections import ConnectionQuotas
from roost.broker.quotas.core import (
    ClientQuotaManager,
    QuotaConfigs,
    QuotaError,
    check_value,
    entity_path,
    make_entity,
    parse_entity_path,
)
from roost.broker.quotas.rate import SampledRate, throttle_ms


def test_throttle_time_is_kafkas_for_a_fresh_rate() -> None:
    # Kafka's QuotaUtilsTest.testThrottleTimeObservedRateAboveQuota: quota 50, observed 100 with
    # 3 samples of 1 s: the rate is measured over 2 windows, so 2000 ms to come back to 50.
    rate = SampledRate(3, 1000, now_ms=0)
    rate.record(200.0, now_ms=0)
    assert rate.per_second(0) == 100.0
    assert throttle_ms(rate, 50.0, 0) == 2000
    assert throttle_ms(rate, 100.0, 0) == 0  # at the bound: no throttle
    assert throttle_ms(rate, 50.0, 0, max_ms=1000) == 1000  # boundedThrottleTime


def test_the_rate_spans_at_least_samples_minus_one_windows_and_forgets_old_windows() -> None:
    rate = SampledRate(11, 1000, now_ms=0)
    rate.record(1000.0, 0)
    assert rate.span_ms(0) == 10_000 and rate.per_second(0) == 100.0
    for second in range(1, 30):
        rate.record(1000.0, second * 1000)
    # Eleven live windows of 1000 each, the oldest started 10 s ago.
    assert rate.per_second(29_000) == pytest.approx(11_000 / 10.0)
    assert rate.per_second(29_000 + 11_000) == 0.0  # all expired


@settings(max_examples=6, deadline=None, derandomize=True)
@given(fraction=st.floats(0.02, 0.25), gap_ms=st.integers(2, 50), bound=st.floats(1e5, 1e7))
def test_a_greedy_client_that_honours_its_throttle_times_averages_its_quota(fraction: float, gap_ms: int,
                                                                            bound: float) -> None:
    # A client sending requests of `size` (a fraction of a second's quota) as fast as it may,
    # waiting each throttle time it is given, moves at its
    # quota (the minute after the first 20 s): at most 12 % above (Kafka's windowed arithmetic lets
    # a greedy client run about 10 % over: a throttle time assumes the measuring span grows by the
    # wait, while the oldest window expires meanwhile), and not far below when it could go faster.
    size = bound * fraction
    manager = ClientQuotaManager("producer_byte_rate", QuotaConfigs(), 11, 1000)
    manager.configs.set(make_entity([("user", "u")]), {"producer_byte_rate": bound})
    now, sent = 0, []
    while now < 80_000:
        wait = manager.record("u", "c", size, now)
        sent.append((now, size))
        now += max(wait, gap_ms, 1)
    steady = sum(value for at, value in sent if 20_000 <= at < 80_000) / 60.0
    assert steady <= bound * 1.12
    if gap_ms * bound / 1000 < size:  # the client could go faster than its quota
        assert steady >= bound * 0.8


def test_precedence_of_quota_entities_is_kafkas() -> None:
    configs = QuotaConfigs()
    order = [
        [("client-id", None)], [("client-id", "app")], [("user", None)], [("user", None), ("client-id", None)],
        [("user", None), ("client-id", "app")], [("user", "alice")], [("user", "alice"), ("client-id", None)],
        [("user", "alice"), ("client-id", "app")],
    ]
    expected_tags = [("", "app"), ("", "app"), ("alice", ""), ("alice", "app"), ("alice", "app"),
                     ("alice", ""), ("alice", "app"), ("alice", "app")]
    for rank, (parts, tags) in enumerate(zip(order, expected_tags, strict=True)):
        configs.set(make_entity(parts), {"producer_byte_rate": float(rank + 1)})
        assert configs.resolve("producer_byte_rate", "alice", "app") == (tags, float(rank + 1)), parts
    assert configs.resolve("consumer_byte_rate", "alice", "app") is None
    assert configs.resolve("producer_byte_rate", "bob", "other")[1] == 4.0  # <default> user + <default> client


def test_clients_of_one_user_share_its_quota_and_default_users_each_get_one() -> None:
    configs = QuotaConfigs()
    configs.set(make_entity([("user", "alice")]), {"producer_byte_rate": 100.0})
    configs.set(make_entity([("user", None)]), {"producer_byte_rate": 100.0})
    manager = ClientQuotaManager("producer_byte_rate", configs, samples=3, window_ms=1000)
    assert manager.record("alice", "a", 200, 0) == 0
    assert manager.record("alice", "b", 200, 0) > 0  # the same budget as client a
    assert manager.record("bob", "x", 200, 0) == 0 and manager.record("carol", "y", 200, 0) == 0


@pytest.mark.parametrize(("parts", "path"), [
    ([("user", "alice")], "users/alice"),
    ([("user", None)], "users/<default>"),
    ([("client-id", "app 1")], "clients/app%201"),
    ([("client-id", "a*b"), ("user", "CN=x,O=y")], "users/CN%3Dx%2CO%3Dy/clients/a%2Ab"),
    ([("user", None), ("client-id", None)], "users/<default>/clients/<default>"),
    ([("ip", "10.0.0.1")], "ips/10.0.0.1"),
])
def test_entities_are_stored_where_kafka_stores_them(parts, path) -> None:
    entity = make_entity(parts)
    assert entity_path(entity) == path
    assert parse_entity_path(path) == entity


@pytest.mark.parametrize("parts", [[], [("user", "a"), ("user", "b")], [("ip", "1.2.3.4"), ("user", "a")],
                                   [("topic", "t")], [("user", "")]])
def test_bad_entities_are_refused(parts) -> None:
    with pytest.raises(QuotaError):
        make_entity(parts)


def test_bad_values_are_refused() -> None:
    user, ip = make_entity([("user", "a")]), make_entity([("ip", "1.2.3.4")])
    for entity, key, value in [(user, "producer_byte_rate", 0.0), (user, "producer_byte_rate", 1.5),
                               (user, "connection_creation_rate", 5.0), (ip, "producer_byte_rate", 5.0),
                               (user, "no_such_quota", 1.0), (user, "request_percentage", -1.0)]:
        with pytest.raises(QuotaError):
            check_value(entity, key, value)
    assert check_value(user, "request_percentage", 12.5) == 12.5


def test_describe_filters_match_as_kafkas() -> None:
    configs = QuotaConfigs()
    for parts in ([("user", "alice")], [("user", "alice"), ("client-id", "app")], [("user", None)],
                  [("client-id", "app")]):
        configs.set(make_entity(parts), {"producer_byte_rate": 1.0})

    def names(components, strict=False):
        return sorted(entity_path(e) for e, _ in configs.matching(components, strict))

    assert names([]) == ["clients/app", "users/<default>", "users/alice", "users/alice/clients/app"]
    assert names([("user", 0, "alice")]) == ["users/alice", "users/alice/clients/app"]
    assert names([("user", 0, "alice")], strict=True) == ["users/alice"]
    assert names([("user", 1, None)]) == ["users/<default>"]
    assert names([("user", 2, None)]) == ["users/alice", "users/alice/clients/app"]
    assert names([("client-id", 0, "app")], strict=True) == ["clients/app"]


def test_connection_limits_per_address_with_overrides_and_creation_rate() -> None:
    configs = QuotaConfigs()
    limits = ConnectionQuotas(2, {"10.0.0.9": 4}, configs)
    assert limits.admit("10.0.0.1", 0) is None and limits.admit("10.0.0.1", 0) is None
    assert "max.connections.per.ip" in limits.admit("10.0.0.1", 0)
    limits.release("10.0.0.1")
    assert limits.admit("10.0.0.1", 0) is None
    assert all(limits.admit("10.0.0.9", 0) is None for _ in range(4))
    configs.set(make_entity([("ip", None)]), {"connection_creation_rate": 1.0})
    rated = ConnectionQuotas(100, {}, configs, samples=2, window_ms=1000)
    assert rated.admit("10.0.0.2", 0) is None
    assert "connection_creation_rate" in rated.admit("10.0.0.2", 10)
    assert rated.admit("10.0.0.3", 10) is None  # another address has a rate of its own
    assert limits.should_log("10.0.0.2", 0) and not limits.should_log("10.0.0.2", 30_000)
    assert limits.should_log("10.0.0.2", 61_000)
