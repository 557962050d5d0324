"""Which topic configs a mirror takes from its source.

MM2's DefaultConfigPropertyFilter (`config.properties.exclude`, Kafka 3.x) never copies:
follower.replication.throttled.replicas, leader.replication.throttled.replicas,
message.timestamp.difference.max.ms, message.timestamp.type, unclean.leader.election.enable,
min.insync.replicas. Throttles name the other cluster's brokers; durability settings are the
destination's own choice (the facts' trap: set them on the destination). Like MM2 with
`use.defaults.from = target`, only configs the source topic sets explicitly are copied; the
destination's defaults apply to the rest. Roost adds its own mirror marker (`roost.mirror.link`,
which the link sets itself) and refuses to copy a timestamp type: a mirror keeps the source's
timestamps as they are in the batches, so `message.timestamp.type` is always CreateTime on a
mirror (LogAppendTime would not rewrite them anyway: mirror batches are appended as they are).
"""

from __future__ import annotations

from collections.abc import Mapping

from roost.broker.link.filters import NameFilter, parse_patterns

MIRROR_LINK_CONFIG = "roost.mirror.link"
# The id of the source topic a mirror copies (set by its link): a source topic of the same name
# with another id was deleted and recreated, and the mirror stops rather than mix the two.
SOURCE_TOPIC_ID_CONFIG = "roost.mirror.source.topic.id"
DEFAULT_CONFIG_EXCLUDE = (r"follower\.replication\.throttled\.replicas, leader\.replication\.throttled\.replicas, "
                          r"message\.timestamp\.difference\.max\.ms, message\.timestamp\.type, "
                          r"unclean\.leader\.election\.enable, min\.insync\.replicas")
NEVER_COPIED = frozenset({MIRROR_LINK_CONFIG, SOURCE_TOPIC_ID_CONFIG})


def config_exclusions(raw: str = DEFAULT_CONFIG_EXCLUDE) -> NameFilter:
    """The configs never copied: matching these patterns (an include-only filter)."""
    return NameFilter(parse_patterns(raw))


def configs_to_copy(source: Mapping[str, tuple[str | None, bool]], exclusions: NameFilter,
                    known: frozenset[str] | None = None) -> dict[str, str]:
    """The source topic's configs to set on its mirror. `source`: name -> (value, is the source's
    default). `known`: the config names the destination accepts (others are left out: a Kafka
    source has configs Roost does not)."""
    copied: dict[str, str] = {}
    for name, (value, is_default) in source.items():
        if is_default or value is None or name in NEVER_COPIED or exclusions.matches(name):
            continue
        if known is not None and name not in known:
            continue
        copied[name] = value
    return copied


def config_changes(wanted: Mapping[str, str], current: Mapping[str, str]) -> dict[str, str | None]:
    """What to alter on the mirror so that its synced configs are `wanted`: set or changed values,
    and None for a synced config the source no longer sets (the marker and excluded configs,
    which are the destination's own, are never touched)."""
    changes: dict[str, str | None] = {k: v for k, v in wanted.items() if current.get(k) != v}
    return changes
