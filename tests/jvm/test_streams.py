"""Kafka Streams (3.9) with exactly_once_v2, a state store and a repartition topic, against the
shared three-broker Roost cluster, through kill -9 of a broker mid-stream: every word's counts,
read read_committed, are exactly 1..n (tests/jvm/streams_eos.py says why that shows
exactly-once). The longer version, with more records and kills: scripts/streams_eos.py."""

from __future__ import annotations

from pathlib import Path

from tests.jvm import streams_eos
from tests.support.cluster import LocalCluster


def test_word_count_is_exactly_once_through_a_broker_kill(roost3: LocalCluster, java_classes: Path,
                                                           tmp_path: Path) -> None:
    lines: list[str] = []
    try:
        outcome = streams_eos.run(roost3, java_classes, tmp_path, records=3000, words=40, kills=1,
                                  app_id="eos-words", log=lines.append)
    finally:
        # The shared cluster is whole again for whoever comes next.
        for broker_id, node in roost3.brokers.items():
            if not node.running:
                roost3.restart(broker_id)
    assert outcome.killed, "no broker was killed"
    assert outcome.problems() == [], "\n".join(lines)
    topics = roost3.metadata().topics
    # The topology's internal topics are on Roost: the repartition topic and the store's changelog.
    assert "eos-words-by-word-repartition" in topics and "eos-words-word-counts-changelog" in topics
