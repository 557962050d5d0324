"""The authorization rules' refusals are valid responses at every version the broker advertises
(the codec refuses a field a version does not have), and each names Kafka's error code; no I/O."""

from __future__ import annotations

import pytest

from roost.broker.broker import CLUSTER_VERSIONS
from roost.broker.handlers.api_rules import RULES, Check
from roost.broker.metadata.cache import MetadataCache
from roost.broker.net.dispatcher import ADVERTISED_VERSIONS
from roost.broker.net.request import Request
from roost.broker.security import acl
from roost.broker.security.acl import AccessControlEntry, AclPermissionType, PatternType, ResourcePattern
from roost.broker.security.authorizer import Authorizer
from roost.principal import KafkaPrincipal
from roost.wire.kafka import RequestHeader, decode_response, encode_response
from tests.security.test_acl_matrix import ROWS, Row

NOBODY = KafkaPrincipal("User", "nobody")
VERSIONS = {int(k): v for k, v in {**ADVERTISED_VERSIONS, **CLUSTER_VERSIONS}.items()}
CASES = [(row, version) for row in ROWS for version in range(VERSIONS[row.api][0], VERSIONS[row.api][1] + 1)]


@pytest.mark.parametrize(("row", "version"), CASES, ids=[f"{row.name}-v{version}" for row, version in CASES])
def test_a_refusal_encodes_at_every_advertised_version(row: Row, version: int) -> None:
    header = RequestHeader(row.api, version, 7, "rules-test")
    body = row.body()
    body.setdefault("replica_id", body.get("replica_id", -1))
    authorizer = Authorizer()
    for kind, name, operation in row.grants[:-1]:  # as in the matrix: only the row's last ACL is missing
        pattern = ResourcePattern(acl.resource_type(kind), name, PatternType.LITERAL)
        authorizer.replace(pattern, authorizer.entries(pattern) | {
            AccessControlEntry(str(NOBODY), "*", acl.operation(operation), AclPermissionType.ALLOW)})
    outcome = RULES[row.api](Check(authorizer, MetadataCache(), Request(header, body, "10.0.0.1", NOBODY), True))
    if outcome is None:
        pytest.fail(f"{row.name} v{version} went through with no ACL at all")
    answer = outcome if isinstance(outcome, dict) else outcome({})
    frame = b"".join(bytes(part) for part in encode_response(header, answer))
    correlation, decoded = decode_response(row.api, version, frame[4:])
    assert correlation == 7
    if isinstance(outcome, dict):
        try:
            code = row.code(decoded)
        except (KeyError, IndexError):
            return  # the version has no field for it (e.g. OffsetFetch v1's top-level error)
        assert code == row.refused


def test_create_topics_shows_configs_only_to_who_may_describe_them() -> None:
    authorizer = Authorizer()
    authorizer.replace(ResourcePattern(acl.ResourceType.TOPIC, "t", PatternType.PREFIXED), {
        AccessControlEntry(str(NOBODY), "*", acl.AclOperation.CREATE, AclPermissionType.ALLOW)})
    authorizer.replace(ResourcePattern(acl.ResourceType.TOPIC, "t-seen", PatternType.LITERAL), {
        AccessControlEntry(str(NOBODY), "*", acl.AclOperation.DESCRIBE_CONFIGS, AclPermissionType.ALLOW)})
    body = {"topics": [{"name": "t-hidden"}, {"name": "t-seen"}]}
    header = RequestHeader(19, 5, 1, "rules-test")
    merge = RULES[19](Check(authorizer, MetadataCache(), Request(header, body, "10.0.0.1", NOBODY), True))
    assert callable(merge)
    configs = [{"name": "retention.ms", "value": "1", "read_only": False, "config_source": 5, "is_sensitive": False}]
    answer = merge({"throttle_time_ms": 0, "topics": [
        {"name": name, "error_code": 0, "error_message": None, "num_partitions": 1, "replication_factor": 1,
         "configs": list(configs)} for name in ("t-hidden", "t-seen")]})
    by_name = {t["name"]: t for t in answer["topics"]}
    assert by_name["t-hidden"]["configs"] is None and by_name["t-hidden"]["topic_config_error_code"] == 29
    assert by_name["t-seen"]["configs"] == configs and "topic_config_error_code" not in by_name["t-seen"]
    encode_response(header, answer)
