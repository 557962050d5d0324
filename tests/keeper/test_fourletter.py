"""The four-letter words of a member that is not serving (an ensemble member without a leader)
answer as ZooKeeper's do: the words about the running server say so; ruok and envi still answer."""

from __future__ import annotations

from roost.keeper.fourletter import NOT_SERVING, ServerFacts, answer


def facts(serving: bool) -> ServerFacts:
    return ServerFacts(mode="follower", zxid=0x100000005, node_count=4, connections=1, outstanding=0,
                       packets_received=10, packets_sent=9, min_latency_ms=0, avg_latency_ms=0.5,
                       max_latency_ms=3, watch_count=0, watched_paths=0, ephemerals_count=0,
                       approximate_data_size=12, sessions=1, uptime_ms=1000, client_lines=[],
                       config_lines=["clientPort=2181"], serving=serving)


def test_words_about_the_server_say_it_is_not_serving() -> None:
    for word in ("srvr", "stat", "mntr", "conf", "cons", "wchs"):
        assert answer(word, facts(serving=True), None) != NOT_SERVING
        assert answer(word, facts(serving=False), None) == NOT_SERVING
    assert "Mode: follower" in answer("srvr", facts(serving=True), None)


def test_ruok_and_envi_answer_regardless() -> None:
    idle = facts(serving=False)
    assert answer("ruok", idle, None) == "imok"
    assert "zookeeper.version=" in answer("envi", idle, None)

