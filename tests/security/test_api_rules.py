"""The authorization rules' refusals are valid responses at every version the broker advertises
(the codec refuses a field a version does not have), and each names Kafka's error code; no I/O."""

from __future__ import annotations

import pytest

from roost.broker.broker import CLUSTER_VERSIONS
from roost.broker.dispatcher import ADVERTISED_VERSIONS
from roost.broker.metadata.cache import MetadataCache
from roost.broker.request import Request
from roost.broker.security import acl
from roost.broker.security.acl import AccessControlEntry, AclPermissionType, PatternType, ResourcePattern
from roost.broker.security.api_rules import RULES, Check
from roost.broker.security.authorizer import Authorizer
from roost.broker.security.principal import KafkaPrincipal
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
