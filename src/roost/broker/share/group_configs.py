"""Share group configs: the GROUP resource (type 32) of IncrementalAlterConfigs / DescribeConfigs,
with Kafka 4.2's keys (GroupConfig.java), checked against the broker's `group.share.*` bounds.

The keys are exactly Kafka 4.2.0's share keys:

- `share.session.timeout.ms` and `share.heartbeat.interval.ms`: within the broker's min/max,
  and the session longer than the heartbeat interval;
- `share.record.lock.duration.ms`: at least 1000 and within the broker's min/max;
- `share.auto.offset.reset`: `latest` (the default), `earliest` or `by_duration:<ISO-8601>`;
- `share.isolation.level`: `read_uncommitted` (the default) or `read_committed`.

And one of Roost's own, not Kafka's (clients that only know Kafka never set it):

- `roost.share.dead.letter.topic`: a legal topic name; the group's rejected records and those
  that reach the delivery limit are copied there before they are archived (share/dead_letter.py).

Configs may be set before the group exists (confluent-kafka sets `share.auto.offset.reset` on
every share consumer's creation). Unknown keys, null values and values out of bounds are
INVALID_CONFIG. Kafka's `consumer.*` and `streams.*` group keys are refused here: Roost applies
no per-group config to those groups.

`pure` parts: `validate_share_group_configs`, `ShareGroupSettings.effective`. The store
(`GroupConfigStore`) keeps every group's configs in memory; in a cluster it is backed by
ZooKeeper (/config/groups/<group>, with a config change notification like a topic's) so every
broker sees the same values, the partition leaders and the group coordinator alike.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from roost.broker.metadata.catalog import INTERNAL_TOPICS, topic_name_problem
from roost.config import BrokerConfig
from roost.wire.kafka.errors import ErrorCode

log = logging.getLogger("roost.broker.share")

RESOURCE_GROUP = 32
SESSION_TIMEOUT = "share.session.timeout.ms"
HEARTBEAT_INTERVAL = "share.heartbeat.interval.ms"
LOCK_DURATION = "share.record.lock.duration.ms"
AUTO_OFFSET_RESET = "share.auto.offset.reset"
ISOLATION_LEVEL = "share.isolation.level"
DEAD_LETTER_TOPIC = "roost.share.dead.letter.topic"  # Roost's own (share/dead_letter.py), not Kafka's
SHARE_GROUP_KEYS = (SESSION_TIMEOUT, HEARTBEAT_INTERVAL, LOCK_DURATION, AUTO_OFFSET_RESET, ISOLATION_LEVEL,
                    DEAD_LETTER_TOPIC)
ISOLATION_LEVELS = ("read_uncommitted", "read_committed")
MAX_GROUPS_WITH_CONFIGS = 100_000  # a bound on the store (each entry is a handful of strings)

_ISO_DURATION = re.compile(
    r"^P(?:(?P<d>\d+)D)?(?:T(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?$")


class InvalidGroupConfig(ValueError):
    """A group config Kafka would refuse with INVALID_CONFIG; the message says which and why."""


def parse_iso_duration_ms(text: str) -> int | None:
    """Java's Duration.parse for the day/time forms Kafka's by_duration takes ("P1D", "PT15M")."""
    match = _ISO_DURATION.match(text)
    if match is None or text in ("P", "PT") or text.endswith("T"):
        return None
    days, hours, minutes = (int(match[k] or 0) for k in ("d", "h", "m"))
    seconds = float(match["s"] or 0)
    return int(((days * 24 + hours) * 60 + minutes) * 60_000 + seconds * 1000)


@dataclass(frozen=True)
class AutoOffsetReset:
    """latest, earliest, or by_duration (records newer than now - duration_ms)."""

    strategy: str
    duration_ms: int = 0

    @classmethod
    def parse(cls, text: str) -> AutoOffsetReset:
        value = text.strip().lower()
        if value in ("latest", "earliest"):
            return cls(value)
        if value.startswith("by_duration:"):
            duration = parse_iso_duration_ms(text.strip()[len("by_duration:"):].upper())
            if duration is None or duration < 0:
                raise InvalidGroupConfig(f"{AUTO_OFFSET_RESET}: '{text}' is not by_duration:<ISO-8601 duration>")
            return cls("by_duration", duration)
        raise InvalidGroupConfig(f"{AUTO_OFFSET_RESET}: '{text}' must be latest, earliest or by_duration:<duration>")


def _int(key: str, raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise InvalidGroupConfig(f"{key}: '{raw}' is not an integer") from None


def validate_share_group_configs(configs: Mapping[str, str | None], broker: BrokerConfig) -> dict[str, str]:
    """The group's configs as they would be stored, or InvalidGroupConfig (Kafka's
    GroupConfig.validate with the broker's bounds)."""
    checked: dict[str, str] = {}
    for key, raw in configs.items():
        if key not in SHARE_GROUP_KEYS:
            raise InvalidGroupConfig(f"Unknown group config name: {key}")
        if raw is None:
            raise InvalidGroupConfig(f"{key}: a group config cannot be null")
        checked[key] = raw.strip()

    def bounded(key: str, low_setting: str, high_setting: str, floor: int = 1) -> int | None:
        if key not in checked:
            return None
        value = _int(key, checked[key])
        low, high = max(floor, broker[low_setting]), broker[high_setting]
        if not low <= value <= high:
            raise InvalidGroupConfig(f"{key} must be between {low} and {high} "
                                     f"({low_setting}, {high_setting}), not {value}")
        return value

    session = bounded(SESSION_TIMEOUT, "group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms")
    heartbeat = bounded(HEARTBEAT_INTERVAL, "group.share.min.heartbeat.interval.ms",
                        "group.share.max.heartbeat.interval.ms")
    bounded(LOCK_DURATION, "group.share.min.record.lock.duration.ms", "group.share.max.record.lock.duration.ms",
            floor=1000)
    effective_session = session if session is not None else broker["group.share.session.timeout.ms"]
    effective_heartbeat = heartbeat if heartbeat is not None else broker["group.share.heartbeat.interval.ms"]
    if (session is not None or heartbeat is not None) and effective_session <= effective_heartbeat:
        raise InvalidGroupConfig(f"{SESSION_TIMEOUT} ({effective_session}) must be greater than "
                                 f"{HEARTBEAT_INTERVAL} ({effective_heartbeat})")
    if AUTO_OFFSET_RESET in checked:
        AutoOffsetReset.parse(checked[AUTO_OFFSET_RESET])
    if DEAD_LETTER_TOPIC in checked:
        problem = topic_name_problem(checked[DEAD_LETTER_TOPIC])
        if problem is not None or checked[DEAD_LETTER_TOPIC] in INTERNAL_TOPICS:
            raise InvalidGroupConfig(f"{DEAD_LETTER_TOPIC}: {problem or 'an internal topic cannot be one'}")
    if ISOLATION_LEVEL in checked and checked[ISOLATION_LEVEL].lower() not in ISOLATION_LEVELS:
        raise InvalidGroupConfig(f"{ISOLATION_LEVEL}: '{checked[ISOLATION_LEVEL]}' must be one of "
                                 f"{', '.join(ISOLATION_LEVELS)}")
    return checked


@dataclass(frozen=True)
class ShareGroupSettings:
    """What a share group runs with: its configs where set, else the broker's."""

    session_timeout_ms: int
    heartbeat_interval_ms: int
    lock_duration_ms: int
    auto_offset_reset: AutoOffsetReset
    read_committed: bool
    delivery_limit: int
    max_record_locks: int
    dead_letter_topic: str | None = None  # Roost's roost.share.dead.letter.topic

    @classmethod
    def effective(cls, configs: Mapping[str, str], broker: BrokerConfig) -> ShareGroupSettings:
        def number(key: str, setting: str) -> int:
            return int(configs[key]) if key in configs else int(broker[setting])
        try:
            reset = AutoOffsetReset.parse(configs.get(AUTO_OFFSET_RESET, "latest"))
        except InvalidGroupConfig:
            reset = AutoOffsetReset("latest")
        return cls(
            session_timeout_ms=number(SESSION_TIMEOUT, "group.share.session.timeout.ms"),
            heartbeat_interval_ms=number(HEARTBEAT_INTERVAL, "group.share.heartbeat.interval.ms"),
            lock_duration_ms=number(LOCK_DURATION, "group.share.record.lock.duration.ms"),
            auto_offset_reset=reset,
            read_committed=configs.get(ISOLATION_LEVEL, "read_uncommitted").lower() == "read_committed",
            delivery_limit=int(broker["group.share.delivery.count.limit"]),
            max_record_locks=int(broker["group.share.partition.max.record.locks"]),
            dead_letter_topic=configs.get(DEAD_LETTER_TOPIC) or None,
        )


def described_entries(configs: Mapping[str, str], broker: BrokerConfig) -> list[tuple[str, str, bool]]:
    """(name, value, is the group's own) of every share group config, for DescribeConfigs."""
    defaults = {
        SESSION_TIMEOUT: str(broker["group.share.session.timeout.ms"]),
        HEARTBEAT_INTERVAL: str(broker["group.share.heartbeat.interval.ms"]),
        LOCK_DURATION: str(broker["group.share.record.lock.duration.ms"]),
        AUTO_OFFSET_RESET: "latest",
        ISOLATION_LEVEL: "read_uncommitted",
    }
    # The dead-letter topic only when set (it has no default): looked up in `defaults` only when
    # the group has no value of its own (an eager default raised KeyError for it: a crash).
    return [(key, configs[key] if key in configs else defaults[key], key in configs) for key in SHARE_GROUP_KEYS
            if key in defaults or key in configs]


# The store ------------------------------------------------------------------------------------

Persist = Callable[[str, dict[str, str], "GroupConfigStore"], Awaitable[None]]


class GroupConfigStore:
    """Every group's configs, in memory; `persist` (ZooKeeper in a cluster) keeps them."""

    def __init__(self, broker: BrokerConfig, persist: Persist | None = None) -> None:
        self.broker = broker
        self._persist = persist
        self._configs: dict[str, dict[str, str]] = {}
        self._versions: dict[str, int] = {}  # the backing's version of what is kept (ZooKeeper's mzxid)
        self.listeners: list[Callable[[str], None]] = []  # told the group whose configs changed

    def configs(self, group_id: str) -> dict[str, str]:
        return dict(self._configs.get(group_id, {}))

    def settings(self, group_id: str) -> ShareGroupSettings:
        return ShareGroupSettings.effective(self._configs.get(group_id, {}), self.broker)

    def learn(self, group_id: str, configs: Mapping[str, str], version: int | None = None) -> None:
        """Configs read from the store's backing (at start, or after a change notification);
        a `version` older than the one kept is ignored (a stale read)."""
        if version is not None:
            if version < self._versions.get(group_id, -1):
                return
            self._versions[group_id] = version
        if configs:
            if group_id not in self._configs and len(self._configs) >= MAX_GROUPS_WITH_CONFIGS:
                log.warning("more than %d groups have configs: not keeping those of %s", MAX_GROUPS_WITH_CONFIGS,
                            group_id)
                return
            self._configs[group_id] = dict(configs)
        else:
            self._configs.pop(group_id, None)
        for listener in self.listeners:
            listener(group_id)

    def set(self, group_id: str, configs: dict[str, str]) -> Awaitable[ErrorCode] | ErrorCode:
        """Store the group's complete new configs (already validated); with a backing, they are
        kept once it has them (and its version)."""
        if self._persist is None:
            self.learn(group_id, configs)
            return ErrorCode.NONE
        persist = self._persist

        async def persisted() -> ErrorCode:
            try:
                await persist(group_id, configs, self)
            except asyncio.CancelledError:
                raise
            except Exception as error:  # ZooKeeper unreachable: the change is not kept
                log.warning("could not store the configs of group %s: %r", group_id, error)
                return ErrorCode.UNKNOWN_SERVER_ERROR
            return ErrorCode.NONE
        return persisted()


def incremental(current: Mapping[str, str], operations: list[tuple[str, int, str | None]]) -> dict[str, Any]:
    """IncrementalAlterConfigs' SET (0) and DELETE (1) on a group's configs; APPEND (2) and
    SUBTRACT (3) are for list configs, which groups have none of: INVALID_CONFIG."""
    new = dict(current)
    for name, operation, value in operations:
        if operation == 0:
            if value is None:
                raise InvalidGroupConfig(f"{name}: a group config cannot be null")
            new[name] = value
        elif operation == 1:
            new.pop(name, None)
        else:
            raise InvalidGroupConfig(f"{name}: APPEND and SUBTRACT are for list configs")
    return new
