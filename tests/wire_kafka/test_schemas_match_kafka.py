"""Our schemas against Apache Kafka's own message JSON files.

kafka-python (a test dependency) ships a copy of Kafka's `common/message/*.json` (from Kafka 4.x).
The ZooKeeper-mode inter-broker messages that Kafka 4.0 removed are kept as reference data in
`kafka_json/` beside this file (see its README for where they come from). Every field we declare
must match Kafka's field of the same position: name, type, versions, nullable versions, tagged
versions, tag and default; and we must declare every field Kafka has, in the same order (the wire
order). This is the check that the schemas were transcribed right.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import pytest

from roost.wire.kafka.schema import HIGHEST_VERSION, UNSET, Field, Message, VersionRange
from roost.wire.kafka.schemas import API_MESSAGES, EMBEDDED_STRUCTS
from tests.support import referees


def _kafka_json_dir() -> Path | None:
    spec = importlib.util.find_spec("kafka")
    if spec is None or spec.origin is None:
        return None
    resources = Path(spec.origin).parent / "protocol" / "schemas" / "resources"
    return resources if resources.is_dir() else None


RESOURCES = _kafka_json_dir()
# Kafka's 3.x definitions of the messages Kafka 4.0 removed (kafka-python's copy lacks them).
REFERENCE = Path(__file__).parent / "kafka_json"
pytestmark = referees.skip_unless(RESOURCES is not None, referees.KAFKA_JSON)

# Kafka 4.1's share-group state partition records: the JSON definitions bundled with
# kafka-python 3.0.12 (what this test reads) predate them.
NOT_IN_THE_BUNDLED_DEFINITIONS = frozenset({"ShareGroupStatePartitionMetadataKey",
                                            "ShareGroupStatePartitionMetadataValue"})
ALL_MESSAGES = [message for message in [m for pair in API_MESSAGES for m in pair] + list(EMBEDDED_STRUCTS.values())
                if message.name not in NOT_IN_THE_BUNDLED_DEFINITIONS]

# Versions Kafka 4.0 dropped from validVersions while its field versions still describe them:
# Produce 0-2 (still sent by librdkafka) and OffsetForLeaderEpoch 0-1 (3.x listed "0-4").
LOWEST_VERSION_BEFORE_KAFKA_4 = {
    "ProduceRequest": 0, "ProduceResponse": 0,
    "OffsetForLeaderEpochRequest": 0, "OffsetForLeaderEpochResponse": 0,
    "DescribeAclsRequest": 0, "DescribeAclsResponse": 0, "CreateAclsRequest": 0, "CreateAclsResponse": 0,
    "DeleteAclsRequest": 0, "DeleteAclsResponse": 0,
}


def _json_path(name: str) -> Path:
    """Where Kafka's definition of `name` is: our reference copy or kafka-python's, never both."""
    reference = REFERENCE / f"{name}.json"
    bundled = RESOURCES / f"{name}.json" if RESOURCES is not None else None
    if reference.exists():
        assert bundled is None or not bundled.exists(), f"{name}: in kafka_json/ and in kafka-python"
        return reference
    if bundled is None:
        pytest.skip("kafka-python's copy of Kafka's JSON is absent")
    return bundled


def _load(name: str) -> dict[str, Any]:
    text = _json_path(name).read_text()
    # Kafka's JSON has // comments, only at the start of lines.
    return json.loads("\n".join(line for line in text.splitlines() if not line.strip().startswith("//")))


def _range(spec: str | None) -> tuple[int, int]:
    parsed = VersionRange(spec or "none")
    return (parsed.low, parsed.high) if not parsed.empty else (1, 0)


def _kafka_default(field: dict[str, Any]) -> Any:
    """Kafka's default as a Python value, or UNSET where the JSON gives none."""
    if "default" not in field:
        return UNSET
    value = field["default"]
    if value == "null":
        return None
    if field["type"] == "bool":
        return value in (True, "true")
    if field["type"].startswith("int") or field["type"].startswith("uint"):
        return int(value, 0) if isinstance(value, str) else int(value)
    return value


def _equivalent_default(ours: Any, kafka: Any, field: Field) -> bool:
    if ours is kafka or ours == kafka:
        return True
    # A default equal to the type's natural one may be written or left out.
    natural = {"bool": False, "int8": 0, "int16": 0, "int32": 0, "int64": 0, "string": ""}
    if UNSET in (ours, kafka) and field.type in natural:
        other = kafka if ours is UNSET else ours
        return other == natural[field.type]
    return False


def _compare(path: str, ours: tuple[Field, ...], kafka: list[dict[str, Any]],
             common: dict[str, list[dict[str, Any]]]) -> list[str]:
    problems: list[str] = []
    ours_names = [field.name for field in ours]
    kafka_names = [field["name"] for field in kafka]
    if ours_names != kafka_names:
        return [f"{path}: fields {ours_names} != Kafka's {kafka_names}"]
    for mine, theirs in zip(ours, kafka, strict=True):
        where = f"{path}.{mine.name}"
        if mine.type != theirs["type"]:
            problems.append(f"{where}: type {mine.type} != {theirs['type']}")
        for attribute, key in (("versions", "versions"), ("nullable", "nullableVersions"),
                               ("tagged", "taggedVersions")):
            ours_range = getattr(mine, attribute)
            ours_pair = (ours_range.low, ours_range.high) if not ours_range.empty else (1, 0)
            if ours_pair != _range(theirs.get(key)):
                problems.append(f"{where}: {key} {ours_range!r} != {theirs.get(key)}")
        if mine.tag != theirs.get("tag"):
            problems.append(f"{where}: tag {mine.tag} != {theirs.get('tag')}")
        if not mine.is_struct and not _equivalent_default(mine.default, _kafka_default(theirs), mine):
            problems.append(f"{where}: default {mine.default!r} != {theirs.get('default')!r}")
        if mine.is_struct:
            nested = theirs.get("fields") or common.get(mine.element_type, [])
            problems.extend(_compare(where, mine.fields, nested, common))
    return problems


@pytest.mark.parametrize("message", ALL_MESSAGES, ids=lambda message: message.name)
def test_schema_matches_kafka_json(message: Message) -> None:
    kafka = _load(message.name)
    if message.api_key is not None:
        assert kafka["apiKey"] == message.api_key
    assert _range(kafka.get("flexibleVersions")) == (message.flexible.low, message.flexible.high) or \
        (message.flexible.empty and kafka.get("flexibleVersions") == "none")
    common = {struct["name"]: struct["fields"] for struct in kafka.get("commonStructs", [])}
    assert _compare(message.name, message.fields, kafka["fields"], common) == []


@pytest.mark.parametrize("message", ALL_MESSAGES, ids=lambda message: message.name)
def test_implemented_versions_are_valid_in_kafka(message: Message) -> None:
    """Every version we implement is one Kafka defines (see LOWEST_VERSION_BEFORE_KAFKA_4)."""
    kafka = _load(message.name)
    low, high = _range(kafka["validVersions"])
    low = min(low, LOWEST_VERSION_BEFORE_KAFKA_4.get(message.name, low))
    assert low <= message.versions.low and message.versions.high <= high < HIGHEST_VERSION


def test_reference_files_are_all_used() -> None:
    """Every file in kafka_json/ is the definition of a message we implement."""
    names = {message.name for message in ALL_MESSAGES}
    assert {path.stem for path in REFERENCE.glob("*.json")} <= names


def test_snake_case_keys_are_kafka_names() -> None:
    pattern = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$")
    for message in ALL_MESSAGES:
        stack = list(message.fields)
        while stack:
            field = stack.pop()
            assert pattern.match(field.key), field.key
            assert field.key.replace("_", "") == field.name.lower()
            stack.extend(field.fields)
