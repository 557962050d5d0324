"""Differential conformance: the same requests to Apache Kafka 3.9 (ZooKeeper mode) and to a Roost
broker with the same settings, their answers compared field by field after normalising what
legitimately differs between two clusters (tests/referees/differential.py: node ids, ports,
cluster and topic ids, clocks, throttles, log dirs, free text of error messages).

Requests are raw (Roost's own codec, tests/support/kafka_wire.py) at chosen versions, so every field
is ours. The cases are generated: every API and version both sides advertise with a minimal
request (the schema's defaults); CreateTopics with bad names, partition counts, replication factors
and, for every topic config Kafka lists, a valid and an invalid value (validate_only); DescribeConfigs
of every topic config. Each difference Roost keeps on purpose is named below with its reason and on
docs/kafka-differences.md; any other difference fails the test. The case count is printed.

One Kafka JVM (the session's `kafka39`) and one Roost broker (the package's: tests/referees/conftest.py)
serve every case.
"""

from __future__ import annotations

import uuid
from typing import Any

from roost import message_format_version
from roost.wire.kafka.apis import APIS
from tests.referees.differential import Count, ask_settled, intersection, normalise
from tests.support.kafka_wire import WireClient

API_VERSIONS, CREATE_TOPICS, DESCRIBE_CONFIGS = 18, 19, 32
TOPIC, BROKER = 2, 4  # config resource types
# Controller-to-broker and broker-to-controller requests: not sent, they would act on the
# referee's own replicas (and Roost's); ApiVersions is compared by its own test.
NOT_SWEPT = frozenset({4, 5, 6, 7, 27, 56, API_VERSIONS})
# The schema's defaults, except where a default asks for no answer (Produce's acks 0).
MINIMAL: dict[int, dict[str, Any]] = {0: {"acks": -1, "timeout_ms": 1000}}

# -- the differences Roost keeps on purpose (docs/kafka-differences.md says why) ----------------

# ApiVersions: what only one side serves, and the ranges that differ (Kafka 3.9 still serves the
# versions KIP-896 removes in Kafka 4.0; Roost serves what Kafka 4 serves from the start).
ONLY_KAFKA_3_9 = {38, 39, 40, 41, 57, 58, 67}  # delegation tokens, features, Envelope, AllocateProducerIds
LAST_KAFKA_3_9_API = 69
ONLY_ROOST = {74, 75}  # ListConfigResources (KIP-1142), DescribeTopicPartitions (KIP-966)
RANGES: dict[int, tuple[tuple[int, int], tuple[int, int]]] = {  # api key: (Kafka 3.9, Roost)
    1: ((0, 17), (4, 17)), 2: ((0, 9), (1, 7)), 3: ((0, 12), (1, 12)), 4: ((0, 7), (5, 7)),
    5: ((0, 4), (3, 4)), 6: ((0, 8), (5, 8)), 8: ((0, 9), (2, 9)), 9: ((0, 9), (1, 9)),
    11: ((0, 9), (0, 7)), 13: ((0, 5), (0, 4)), 18: ((0, 4), (0, 3)),
    19: ((0, 7), (2, 5)), 20: ((0, 6), (1, 5)), 22: ((0, 5), (0, 4)), 24: ((0, 5), (0, 3)),
    25: ((0, 4), (0, 3)), 26: ((0, 4), (0, 3)), 27: ((0, 1), (1, 1)), 28: ((0, 4), (0, 3)),
    32: ((0, 4), (1, 3)), 34: ((0, 2), (1, 2)), 35: ((0, 4), (1, 4)), 37: ((0, 3), (0, 2)),
    56: ((0, 3), (2, 3)), 68: ((0, 0), (0, 1)),
}
SWEEP_DIFFERENCES = {
    # A minimal request with an empty or UNKNOWN filter: Kafka closes the connection (its parser
    # throws on the UNKNOWN(0) resource type / an empty group batch); Roost answers with the error.
    ("OffsetFetch", 8): "Kafka never answers an empty `groups`; Roost answers no groups",
    ("OffsetFetch", 9): "Kafka never answers an empty `groups`; Roost answers no groups",
    **{("DescribeAcls", v): "Kafka closes the connection on resource type UNKNOWN; Roost answers "
       "SECURITY_DISABLED (no authorizer)" for v in range(4)},
    ("ConsumerGroupHeartbeat", 0): "Kafka 3.9 in ZooKeeper mode has no KIP-848 groups "
                                   "(UNSUPPORTED_VERSION); Roost serves them in ZooKeeper mode",
}


def _ranges(address: str) -> dict[int, tuple[int, int]]:
    client = WireClient(address)
    try:
        answer = client.request(API_VERSIONS, 3, {"client_software_name": "roost-differential",
                                                  "client_software_version": "1"})
    finally:
        client.close()
    assert answer["error_code"] == 0
    return {entry["api_key"]: (entry["min_version"], entry["max_version"]) for entry in answer["api_keys"]}


def test_api_versions_ranges(kafka: str, roost: str) -> None:
    theirs, ours = _ranges(kafka), _ranges(roost)
    Count.cases += len(set(theirs) | set(ours))
    assert set(theirs) - set(ours) == ONLY_KAFKA_3_9
    # What only Roost serves is newer than Kafka 3.9 (whose last API is ConsumerGroupDescribe, 69).
    assert set(ours) - set(theirs) >= ONLY_ROOST and all(key > LAST_KAFKA_3_9_API for key in set(ours) - set(theirs))
    common = set(theirs) & set(ours)
    assert all(max(theirs[k][0], ours[k][0]) <= min(theirs[k][1], ours[k][1]) for k in common), \
        "an API both serve with no version in common"
    differing = {key: (theirs[key], ours[key]) for key in common if theirs[key] != ours[key]}
    # Only the documented ranges differ (a range Roost widens towards Kafka's may leave the list).
    assert differing.keys() <= RANGES.keys(), {k: v for k, v in differing.items() if k not in RANGES}


def test_every_api_and_version_with_a_minimal_request(kafka: str, roost: str) -> None:
    """The schema's defaults as the request body, for every version both sides serve."""
    cases = [(key, version) for key, version in intersection(_ranges(kafka), _ranges(roost))
             if key not in NOT_SWEPT]
    assert len(cases) > 150
    differences = {}
    for key, version in cases:
        body = MINIMAL.get(key, {})
        # Every answer here comes within a fraction of a second; 5 s bounds the ones never sent.
        theirs = normalise(ask_settled(kafka, key, version, body, timeout=5.0))
        ours = normalise(ask_settled(roost, key, version, body, timeout=5.0))
        if theirs != ours:
            differences[(APIS[key].name, version)] = (theirs, ours)
    Count.cases += len(cases)
    unexplained = {case: answers for case, answers in differences.items() if case not in SWEEP_DIFFERENCES}
    assert not unexplained, "\n".join(f"{case}:\n  kafka {a}\n  roost {b}" for case, (a, b) in unexplained.items())
    assert set(differences) == set(SWEEP_DIFFERENCES), "a documented difference is gone: update the lists"


# Topic configs Kafka 3.9 takes and Roost refuses as unknown (INVALID_CONFIG): none left.
UNIMPLEMENTED_TOPIC_CONFIGS: frozenset[str] = frozenset()
CREATE_TOPICS_DIFFERENCES = {
    *(f"{key}=default" for key in UNIMPLEMENTED_TOPIC_CONFIGS),
    "retention.bytes=-5",  # Kafka takes any long (below 0: no limit); Roost asks -1 or >= 0
    "preallocate=true",  # Roost's recovery reads a segment to its file's end: no preallocated zeros
}


def _topic(name: str, partitions: int = 1, replication: int = 1,
           configs: tuple[tuple[str, str], ...] = ()) -> dict[str, Any]:
    return {"name": name, "num_partitions": partitions, "replication_factor": replication, "assignments": [],
            "configs": [{"name": key, "value": value} for key, value in configs]}


def _create(address: str, topics: list[dict[str, Any]], validate_only: bool = True) -> dict[str, Any]:
    answer = ask_settled(address, CREATE_TOPICS, 5, {"topics": topics, "timeout_ms": 10000,
                                                     "validate_only": validate_only})
    assert isinstance(answer, dict), answer
    return answer


def _kafka_topic_configs(kafka: str) -> dict[str, str]:
    """Every topic config Kafka lists for a topic, with its default value."""
    name = f"probe-{uuid.uuid4().hex[:8]}"
    assert _create(kafka, [_topic(name)], validate_only=False)["topics"][0]["error_code"] == 0
    described = ask_settled(kafka, DESCRIBE_CONFIGS, 3, {
        "resources": [{"resource_type": TOPIC, "resource_name": name, "configuration_keys": None}],
        "include_synonyms": False, "include_documentation": False})
    return {entry["name"]: entry["value"] for entry in described["results"][0]["configs"]}


def test_create_topics_validation(kafka: str, roost: str) -> None:
    """validate_only CreateTopics: names, partition counts, replication factors, and every topic
    config Kafka lists with its default, a nonsense and a negative value; each answer's error
    code, partition count and replication factor compared."""
    configs = _kafka_topic_configs(kafka)
    assert len(configs) > 30
    cases: list[tuple[str, dict[str, Any]]] = []
    for name in ("", ".", "..", "a" * 249, "a" * 250, "a/b", "a b", "ü", "ok.name_1-x", "__consumer_offsets"):
        cases.append((f"name {name[:20]!r}", _topic(name)))
    cases += [(f"partitions {n}", _topic(f"p{n}", partitions=n)) for n in (0, -1, -2, 1, 3)]
    cases += [(f"replication {n}", _topic(f"r{n}", replication=n)) for n in (0, -1, -2, 2, 3)]
    for key, default in sorted(configs.items()):
        name = "c-" + key.replace(".", "-")
        cases += [(f"{key}={label}", _topic(name, configs=((key, value),)))
                  for label, value in (("default", default), ("bogus", "bogus-value"), ("-5", "-5"))
                  if value is not None]
    cases.append(("an unknown config", _topic("unknown-config", configs=(("no.such.config", "1"),))))
    # Values the default/bogus/-5 triple does not reach: tiered storage asked for (refused by a
    # broker without it, as both are), preallocation asked for (Roost refuses it).
    cases += [(f"{key}=true", _topic(f"t-{key.replace('.', '-')}", configs=((key, "true"),)))
              for key in ("remote.storage.enable", "preallocate")]
    differences = {}
    for label, topic in cases:
        theirs, ours = (
            [(t["error_code"], t.get("num_partitions"), t.get("replication_factor")) for t in answer["topics"]]
            for answer in (_create(kafka, [topic]), _create(roost, [topic])))
        if theirs != ours:
            differences[label] = (theirs, ours)
    Count.cases += len(cases)
    unexplained = {label: pair for label, pair in differences.items() if label not in CREATE_TOPICS_DIFFERENCES}
    assert not unexplained, unexplained
    assert set(differences) == CREATE_TOPICS_DIFFERENCES, "a documented difference is gone: update the lists"


def test_message_format_version_values(kafka: str, roost: str) -> None:
    """The deprecated message.format.version takes exactly Kafka's version names (every name
    Roost's table holds, its next IV, parse variants, neighbours): each taken or refused alike."""
    values = [*sorted(message_format_version.NAMES), "0.8.0-IV0", "2.8-IV2", "3.9-IV1", "3.0-IV2",
              "3.0.1", "3.0.1.5", "0.10.2.1", "0.10.0.1-IV0", " 3.0", "0.8", "0.7.0", "0.12.0", "2.9",
              "3.10", "4.0", "bogus", "-5", ""]
    differences = {}
    for value in values:
        topic = _topic("mfv", configs=(("message.format.version", value),))
        theirs, ours = ([t["error_code"] for t in _create(address, [topic])["topics"]] for address in (kafka, roost))
        if theirs != ours:
            differences[value] = (theirs, ours)
    Count.cases += len(values)
    assert not differences, differences


# DescribeConfigs of a topic: Roost lists its broker default as a synonym where Kafka's broker
# setting has no default of its own (log.retention.ms, log.roll.ms, log.roll.jitter.ms and
# log.flush.interval.ms fall back to an hours or scheduler setting in Kafka, and Kafka then lists
# none); roost.* are Roost's own.
DESCRIBE_SYNONYM_DIFFERENCES = frozenset({"retention.ms", "segment.ms", "segment.jitter.ms", "flush.ms"})


def _describe_topic(address: str, name: str) -> dict[str, tuple[Any, ...]]:
    answer = ask_settled(address, DESCRIBE_CONFIGS, 3, {
        "resources": [{"resource_type": TOPIC, "resource_name": name, "configuration_keys": None}],
        "include_synonyms": True, "include_documentation": False})
    (result,) = answer["results"]
    assert result["error_code"] == 0, result
    return {entry["name"]: (entry["value"], entry["read_only"], entry["config_source"], entry["is_sensitive"],
                            entry["config_type"], [(s["name"], s["source"]) for s in entry["synonyms"]])
            for entry in result["configs"]}


def test_describe_configs_of_a_topic(kafka: str, roost: str) -> None:
    """Every topic config both list: value, read-only, source, sensitivity, type and synonyms, for a
    topic with two configs set and the rest at their defaults."""
    name = f"described-{uuid.uuid4().hex[:8]}"
    topic = _topic(name, configs=(("retention.ms", "12345"), ("cleanup.policy", "compact")))
    for address in (kafka, roost):
        assert _create(address, [topic], validate_only=False)["topics"][0]["error_code"] == 0
    theirs, ours = _describe_topic(kafka, name), _describe_topic(roost, name)
    assert set(theirs) - set(ours) == UNIMPLEMENTED_TOPIC_CONFIGS
    assert all(key.startswith("roost.") for key in set(ours) - set(theirs))
    common = sorted(set(theirs) & set(ours))
    Count.cases += len(common)
    differing = {}
    for key in common:
        (*fields_k, synonyms_k), (*fields_r, synonyms_r) = theirs[key], ours[key]
        if fields_k != fields_r or (synonyms_k != synonyms_r and key not in DESCRIBE_SYNONYM_DIFFERENCES):
            differing[key] = (theirs[key], ours[key])
    assert not differing, "\n".join(f"{key}:\n  kafka {a}\n  roost {b}" for key, (a, b) in differing.items())
