"""The controller a broker names in Metadata: learnt from UpdateMetadata, and sooner from the
broker's own /controller watch, but only once the new controller is a broker it lists (clients
send admin requests to the broker Metadata names, so it must be one they can reach)."""

from __future__ import annotations

from roost.broker.metadata.cache import BrokerEndpoint, MetadataCache


def test_the_watch_names_a_listed_controller_at_once_and_an_unlisted_one_not_yet() -> None:
    cache = MetadataCache()
    cache.set_brokers([BrokerEndpoint(1, "127.0.0.1", 9001), BrokerEndpoint(2, "127.0.0.1", 9002)], 1)
    cache.learn_controller(2)
    assert cache.controller_id == 2
    cache.learn_controller(3)  # not yet listed by any UpdateMetadata: keep naming one that is
    assert cache.controller_id == 2
    cache.set_brokers([BrokerEndpoint(b, "127.0.0.1", 9000 + b) for b in (1, 2, 3)], 3)
    assert cache.controller_id == 3
