"""Kafka's deprecated `message.format.version` (topic) and `log.message.format.version` (broker):
which values Apache Kafka 3.9 accepts, so that a topic config copied from a Kafka cluster (by
MirrorMaker 2, Connect, or a script) is taken or refused as Kafka would.

The setting does nothing in either system: Kafka ignores it once `inter.broker.protocol.version`
is 3.0 or later, and Roost always writes v2 batches. Only its validation matters. Kafka checks the
value against its MetadataVersion names; the table below is that list as Kafka 3.9 has it
(checked value by value against a Kafka 3.9 broker by tests/referees/test_kafka_differential.py).
No library carries Kafka's version names, hence this table.
"""

from __future__ import annotations

DEFAULT = "3.0-IV1"  # Kafka 3.9's default, shown by DescribeConfigs

# Each release's short name and how many IV (inter-version) variants Kafka 3.9 names for it:
# "2.8" with 2 means "2.8", "2.8-IV0" and "2.8-IV1".
_RELEASES: dict[str, int] = {
    "0.8.0": 0, "0.8.1": 0, "0.8.2": 0, "0.9.0": 0, "0.10.0": 2, "0.10.1": 3, "0.10.2": 1,
    "0.11.0": 3, "1.0": 1, "1.1": 1, "2.0": 2, "2.1": 3, "2.2": 2, "2.3": 2, "2.4": 2, "2.5": 1,
    "2.6": 1, "2.7": 3, "2.8": 2, "3.0": 2, "3.1": 1, "3.2": 1, "3.3": 4, "3.4": 1, "3.5": 3,
    "3.6": 3, "3.7": 5, "3.8": 1, "3.9": 1,
}
NAMES = frozenset(
    [*_RELEASES, *(f"{release}-IV{i}" for release, count in _RELEASES.items() for i in range(count))])


def is_valid(value: str) -> bool:
    """Kafka's parse: the value trimmed, cut to its first three dot-separated parts for a 0.x
    version and two otherwise (so "3.0.1" and "0.10.2.1" name a release), then looked up."""
    parts = value.strip().split(".")
    return ".".join(parts[:3 if parts[0] == "0" else 2]) in NAMES


def complaint(value: str) -> str | None:
    """A setting check (roost.config.Check): None when Kafka 3.9 would take `value`."""
    return None if is_valid(value) else f"is not a valid version: Version {value} is not a valid version"
