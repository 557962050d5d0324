"""Kafka's client quotas, pure: the quota entities, where each is stored, which entity's quota a
request falls under, and how long a client over its quota is throttled.

Entities are what DescribeClientQuotas and AlterClientQuotas name: a set of (type, name) parts,
types `user`, `client-id` (alone or together) or `ip` (alone), a name of None meaning the default
(`<default>` in ZooKeeper). Each is stored where Kafka's ZooKeeper mode stores it:

    users/<user>                 users/<default>
    clients/<client-id>          clients/<default>
    users/<user>/clients/<id>    users/<user>/clients/<default>    users/<default>/clients/<id> ...
    ips/<ip>                     ips/<default>

under /config, as {"version":1,"config":{"producer_byte_rate":"1048576"}} (names sanitized as
Kafka's Sanitizer does), with a /config/changes notification naming the path.

Which entity applies (Kafka's DefaultQuotaCallback), for each quota kind on its own, first found:
user+client-id, user+<default> client, user, <default> user+client-id, <default> user+<default>
client, <default> user, client-id, <default> client-id. Clients that share the matched entity
share one rate: a `users/alice` quota is one budget for every client id alice uses, while a
`users/<default>` quota gives each user a budget of its own.

`ClientQuotaManager` is Kafka's ClientQuotaManager for one kind (produce bytes, fetch bytes,
request time): `record(user, client_id, value, now_ms)` adds the value to the entity's rate and
returns the throttle time in ms (0 within the quota). Time is passed in.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from roost.broker.quotas.rate import SampledRate, throttle_ms

USER: Final = "user"
CLIENT_ID: Final = "client-id"
IP: Final = "ip"
DEFAULT: Final = "<default>"

PRODUCER_BYTE_RATE: Final = "producer_byte_rate"
CONSUMER_BYTE_RATE: Final = "consumer_byte_rate"
REQUEST_PERCENTAGE: Final = "request_percentage"
CONTROLLER_MUTATION_RATE: Final = "controller_mutation_rate"
CONNECTION_CREATION_RATE: Final = "connection_creation_rate"

# The keys each kind of entity takes (Kafka's QuotaConfigs: user and client-id entities, and ip).
CLIENT_KEYS: Final = frozenset({PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE,
                                CONTROLLER_MUTATION_RATE})
IP_KEYS: Final = frozenset({CONNECTION_CREATION_RATE})
WHOLE_NUMBER_KEYS: Final = frozenset({PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, CONNECTION_CREATION_RATE})

# An entity: its (type, name or None for the default) parts, sorted by type.
Entity = tuple[tuple[str, str | None], ...]


class QuotaError(ValueError):
    """An entity or a quota value Kafka would refuse (answered INVALID_REQUEST)."""


def make_entity(parts: Iterable[tuple[str, str | None]]) -> Entity:
    """Check the parts of an entity as Kafka's AlterClientQuotas does and put them in order."""
    found: dict[str, str | None] = {}
    for kind, name in parts:
        if kind not in (USER, CLIENT_ID, IP):
            raise QuotaError(f"unknown quota entity type {kind!r}")
        if kind in found:
            raise QuotaError(f"quota entity type {kind!r} given twice")
        if name == "":
            raise QuotaError(f"an empty {kind} name (use null for the default)")
        found[kind] = name
    if not found:
        raise QuotaError("a quota entity needs at least one part")
    if IP in found and len(found) > 1:
        raise QuotaError("an ip quota entity cannot be combined with user or client-id")
    return tuple(sorted(found.items(), key=lambda part: (part[0] != USER, part[0])))


def entity_keys(entity: Entity) -> frozenset[str]:
    return IP_KEYS if entity[0][0] == IP else CLIENT_KEYS


def check_value(entity: Entity, key: str, value: float) -> float:
    if key not in entity_keys(entity):
        raise QuotaError(f"invalid quota key {key!r} for entity {describe(entity)}")
    if not value > 0:
        raise QuotaError(f"quota {key} must be greater than 0, got {value}")
    if key in WHOLE_NUMBER_KEYS and value != int(value):
        raise QuotaError(f"quota {key} must be a whole number, got {value}")
    return float(value)


def sanitize(name: str) -> str:
    """Kafka's Sanitizer: URL-encoding, with `*` as %2A (so `<default>` never collides)."""
    return urllib.parse.quote(name, safe="").replace("*", "%2A")


def desanitize(node: str) -> str:
    return urllib.parse.unquote(node)


_PATH_TYPE: Final = {USER: "users", CLIENT_ID: "clients", IP: "ips"}
_TYPE_OF_PATH: Final = {value: key for key, value in _PATH_TYPE.items()}


def entity_path(entity: Entity) -> str:
    """Where under /config the entity's quotas live: `users/alice/clients/<default>`."""
    return "/".join(f"{_PATH_TYPE[kind]}/{DEFAULT if name is None else sanitize(name)}" for kind, name in entity)


def parse_entity_path(path: str) -> Entity | None:
    """The entity a /config path (or a change notification's entity_path) names, or None when it
    names no quota entity (topics/..., brokers/...)."""
    pieces = path.strip("/").split("/")
    if len(pieces) not in (2, 4) or (len(pieces) == 4 and pieces[0] != "users"):
        return None
    parts = []
    for index in range(0, len(pieces), 2):
        kind = _TYPE_OF_PATH.get(pieces[index])
        if kind is None or not pieces[index + 1]:
            return None
        name = pieces[index + 1]
        parts.append((kind, None if name == DEFAULT else desanitize(name)))
    try:
        return make_entity(parts)
    except QuotaError:
        return None


def describe(entity: Entity) -> str:
    return ", ".join(f"{kind}={DEFAULT if name is None else name}" for kind, name in entity)


def parse_stored(entity: Entity, config: Mapping[str, str]) -> dict[str, float]:
    """The quota keys of a stored config (other keys, such as a user's SCRAM credentials, and
    values Kafka would not have written, are left out)."""
    quotas = {}
    for key, raw in config.items():
        if key in entity_keys(entity):
            try:
                quotas[key] = check_value(entity, key, float(raw))
            except (QuotaError, ValueError):
                continue
    return quotas


class QuotaConfigs:
    """Every entity's quotas as this broker knows them."""

    def __init__(self) -> None:
        self._by_entity: dict[Entity, dict[str, float]] = {}
        self.version = 0  # grows with every change: managers re-resolve their rates when it moves

    def set(self, entity: Entity, quotas: Mapping[str, float]) -> None:
        if quotas:
            self._by_entity[entity] = dict(quotas)
        else:
            self._by_entity.pop(entity, None)
        self.version += 1

    def get(self, entity: Entity) -> dict[str, float]:
        return dict(self._by_entity.get(entity, {}))

    def items(self) -> list[tuple[Entity, dict[str, float]]]:
        return [(entity, dict(quotas)) for entity, quotas in sorted(self._by_entity.items(), key=lambda e: str(e[0]))]

    def resolve(self, key: str, user: str, client_id: str) -> tuple[tuple[str, str], float] | None:
        """((user tag, client-id tag), quota) of the entity whose `key` quota applies, or None."""
        candidates: tuple[tuple[Entity, tuple[str, str]], ...] = (
            (((USER, user), (CLIENT_ID, client_id)), (user, client_id)),
            (((USER, user), (CLIENT_ID, None)), (user, client_id)),
            (((USER, user),), (user, "")),
            (((USER, None), (CLIENT_ID, client_id)), (user, client_id)),
            (((USER, None), (CLIENT_ID, None)), (user, client_id)),
            (((USER, None),), (user, "")),
            (((CLIENT_ID, client_id),), ("", client_id)),
            (((CLIENT_ID, None),), ("", client_id)),
        )
        for entity, tags in candidates:
            value = self._by_entity.get(entity, {}).get(key)
            if value is not None:
                return tags, value
        return None

    def ip_quota(self, ip: str) -> float | None:
        for entity in (((IP, ip),), ((IP, None),)):
            value = self._by_entity.get(entity, {}).get(CONNECTION_CREATION_RATE)
            if value is not None:
                return value
        return None

    def matching(self, components: list[tuple[str, int, str | None]], strict: bool) -> list[tuple[Entity, dict[str, float]]]:
        """DescribeClientQuotas' filter: each component (type, match type 0 exact / 1 default /
        2 any name, name) must match a part; `strict`: the entity has no other parts."""
        found = []
        for entity, quotas in self.items():
            parts = dict(entity)
            if strict and set(parts) != {kind for kind, _, _ in components}:
                continue
            if all(kind in parts and _matches(parts[kind], match_type, name)
                   for kind, match_type, name in components):
                found.append((entity, quotas))
        return found


def _matches(have: str | None, match_type: int, name: str | None) -> bool:
    if match_type == 0:
        return have == name
    if match_type == 1:
        return have is None
    return have is not None  # 2: any specified name


@dataclass(slots=True)
class _Sensor:
    rate: SampledRate
    last_used_ms: int


class ClientQuotaManager:
    """Kafka's ClientQuotaManager for one quota key: rates per matched entity, throttle times."""

    INACTIVE_MS: Final = 3_600_000  # a rate unused for an hour is dropped (Kafka's sensor expiry)
    MAX_SENSORS: Final = 100_000  # and never more than this many (each a few hundred bytes)

    def __init__(self, key: str, configs: QuotaConfigs, samples: int = 11, window_ms: int = 1000,
                 bounded: bool = False) -> None:
        self.key = key
        self.configs = configs
        self.samples = samples
        self.window_ms = window_ms
        # The request-time quota bounds its throttle at one window (ClientRequestQuotaManager);
        # the bandwidth quotas do not.
        self.max_throttle_ms = window_ms if bounded else None
        self._sensors: dict[tuple[str, str], _Sensor] = {}
        self._last_prune_ms = 0

    def quota(self, user: str, client_id: str) -> float | None:
        found = self.configs.resolve(self.key, user, client_id)
        return None if found is None else found[1]

    def record(self, user: str, client_id: str, value: float, now_ms: int) -> int:
        """Add `value` to the rate of the entity (`user`, `client_id`) falls under; the throttle
        time in ms (0 when within its quota or when no quota applies)."""
        found = self.configs.resolve(self.key, user, client_id)
        if found is None:
            return 0
        tags, bound = found
        sensor = self._sensors.get(tags)
        if sensor is None:
            self._prune(now_ms)
            sensor = self._sensors[tags] = _Sensor(SampledRate(self.samples, self.window_ms, now_ms), now_ms)
        sensor.last_used_ms = now_ms
        sensor.rate.record(value, now_ms)  # recorded even when over the quota, as Kafka does
        return throttle_ms(sensor.rate, bound, now_ms, self.max_throttle_ms)

    def record_unless_over(self, user: str, client_id: str, value: float, now_ms: int) -> int:
        """As `record`, but a value that would put the entity over its quota is taken back (Kafka
        unrecords a fetch it answers empty instead): the throttle time, and 0 when `value` was
        counted."""
        throttle = self.record(user, client_id, value, now_ms)
        if throttle > 0:
            self.record(user, client_id, -value, now_ms)
        return throttle

    def throttle_now(self, user: str, client_id: str, now_ms: int) -> int:
        """The throttle time of the entity (`user`, `client_id`) falls under with nothing more
        recorded: > 0 while it is over its quota (0 when no quota applies)."""
        found = self.configs.resolve(self.key, user, client_id)
        if found is None:
            return 0
        sensor = self._sensors.get(found[0])
        return 0 if sensor is None else throttle_ms(sensor.rate, found[1], now_ms, self.max_throttle_ms)

    def max_in_window(self, user: str, client_id: str) -> int | None:
        """The most one request may charge without being throttled for certain, even after a
        quiet spell (Kafka's maxValueInQuotaWindow: the quota over all but the current window);
        None when no quota applies."""
        found = self.configs.resolve(self.key, user, client_id)
        if found is None:
            return None
        return max(1, int(found[1] * (self.samples - 1) * self.window_ms / 1000))

    def rate(self, user: str, client_id: str, now_ms: int) -> float:
        """The measured rate of the entity (`user`, `client_id`) falls under (0 if none)."""
        found = self.configs.resolve(self.key, user, client_id)
        sensor = self._sensors.get(found[0]) if found is not None else None
        return sensor.rate.per_second(now_ms) if sensor is not None else 0.0

    def _prune(self, now_ms: int) -> None:
        if now_ms - self._last_prune_ms < 60_000 and len(self._sensors) < self.MAX_SENSORS:
            return
        self._last_prune_ms = now_ms
        for tags in [t for t, s in self._sensors.items() if now_ms - s.last_used_ms > self.INACTIVE_MS]:
            del self._sensors[tags]
        while len(self._sensors) >= self.MAX_SENSORS:  # the least recently used go first
            del self._sensors[min(self._sensors, key=lambda t: self._sensors[t].last_used_ms)]


class ClientQuotas:
    """The three client quota managers of a broker, over one set of configs: the door handlers
    call (produce bytes, fetch bytes, request time) and get a throttle time back."""

    def __init__(self, configs: QuotaConfigs, samples: int = 11, window_ms: int = 1000) -> None:
        self.configs = configs
        self.produce = ClientQuotaManager(PRODUCER_BYTE_RATE, configs, samples, window_ms)
        self.fetch = ClientQuotaManager(CONSUMER_BYTE_RATE, configs, samples, window_ms)
        self.request = ClientQuotaManager(REQUEST_PERCENTAGE, configs, samples, window_ms, bounded=True)

    def record_request_time(self, user: str, client_id: str, seconds: float, now_ms: int) -> int:
        """Handler time as Kafka's request quota counts it: percent of one thread per second."""
        return self.request.record(user, client_id, seconds * 100.0, now_ms)
