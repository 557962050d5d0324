"""The authorizer's decision (pure core): Kafka's AclAuthorizer rules, one per test."""

from __future__ import annotations

import pytest

from roost.authorization_settings import UnknownAuthorizerError, authorizer_enabled, parse_super_users
from roost.broker.security import acl_znodes as znodes
from roost.broker.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclError,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from roost.broker.security.authorizer import (
    Authorizer,
)
from roost.principal import KafkaPrincipal

ALICE = KafkaPrincipal.parse("User:alice")
BOB = KafkaPrincipal.parse("User:bob")
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
Op = AclOperation


def entry(principal: str, operation: AclOperation, permission: AclPermissionType = ALLOW,
          host: str = "*") -> AccessControlEntry:
    return AccessControlEntry(principal, host, operation, permission)


def authorizer_with(*acls: tuple[ResourcePattern, AccessControlEntry], **settings: object) -> Authorizer:
    authorizer = Authorizer(**settings)  # type: ignore[arg-type]
    by_pattern: dict[ResourcePattern, set[AccessControlEntry]] = {}
    for pattern, acl in acls:
        by_pattern.setdefault(pattern, set()).add(acl)
    for pattern, entries in by_pattern.items():
        authorizer.replace(pattern, entries)
    return authorizer


def topic(name: str, pattern: PatternType = LITERAL) -> ResourcePattern:
    return ResourcePattern(TOPIC, name, pattern)


def test_no_acl_denies_by_default_and_allows_when_configured() -> None:
    assert not Authorizer().authorize(ALICE, "1.2.3.4", Op.READ, TOPIC, "orders")
    assert Authorizer(allow_if_no_acl=True).authorize(ALICE, "1.2.3.4", Op.READ, TOPIC, "orders")


def test_allow_if_no_acl_does_not_apply_once_the_resource_has_acls() -> None:
    authorizer = authorizer_with((topic("orders"), entry("User:bob", Op.READ)), allow_if_no_acl=True)
    assert not authorizer.authorize(ALICE, "h", Op.READ, TOPIC, "orders")
    assert authorizer.authorize(ALICE, "h", Op.READ, TOPIC, "other")


def test_literal_allow_grants_only_that_operation_principal_and_name() -> None:
    authorizer = authorizer_with((topic("orders"), entry("User:alice", Op.WRITE)))
    assert authorizer.authorize(ALICE, "h", Op.WRITE, TOPIC, "orders")
    assert not authorizer.authorize(ALICE, "h", Op.READ, TOPIC, "orders")
    assert not authorizer.authorize(BOB, "h", Op.WRITE, TOPIC, "orders")
    assert not authorizer.authorize(ALICE, "h", Op.WRITE, TOPIC, "orders2")
    assert not authorizer.authorize(ALICE, "h", Op.WRITE, GROUP, "orders")


def test_deny_beats_allow_even_from_a_wildcard() -> None:
    authorizer = authorizer_with((topic("orders"), entry("User:alice", Op.ALL)),
                                 (topic("*"), entry("User:*", Op.READ, DENY)))
    assert not authorizer.authorize(ALICE, "h", Op.READ, TOPIC, "orders")
    assert authorizer.authorize(ALICE, "h", Op.WRITE, TOPIC, "orders")


def test_prefixed_pattern_covers_names_that_start_with_it() -> None:
    authorizer = authorizer_with((topic("sales-", PREFIXED), entry("User:alice", Op.READ)))
    assert authorizer.authorize(ALICE, "h", Op.READ, TOPIC, "sales-eu")
    assert authorizer.authorize(ALICE, "h", Op.READ, TOPIC, "sales-")
    assert not authorizer.authorize(ALICE, "h", Op.READ, TOPIC, "sale")
    assert not authorizer.authorize(ALICE, "h", Op.READ, TOPIC, "xsales-eu")


def test_prefixed_deny_overrides_literal_allow() -> None:
    authorizer = authorizer_with((topic("sales-eu"), entry("User:alice", Op.READ)),
                                 (topic("sales-", PREFIXED), entry("User:alice", Op.READ, DENY)))
    assert not authorizer.authorize(ALICE, "h", Op.READ, TOPIC, "sales-eu")


def test_wildcard_name_and_principal() -> None:
    authorizer = authorizer_with((topic("*"), entry("User:*", Op.DESCRIBE)))
    assert authorizer.authorize(BOB, "h", Op.DESCRIBE, TOPIC, "anything")


def test_host_must_match_unless_wildcard() -> None:
    authorizer = authorizer_with((topic("orders"), entry("User:alice", Op.READ, host="10.0.0.1")))
    assert authorizer.authorize(ALICE, "10.0.0.1", Op.READ, TOPIC, "orders")
    assert not authorizer.authorize(ALICE, "10.0.0.2", Op.READ, TOPIC, "orders")


@pytest.mark.parametrize("granted", [Op.READ, Op.WRITE, Op.DELETE, Op.ALTER])
def test_describe_is_implied_by_read_write_delete_alter(granted: AclOperation) -> None:
    authorizer = authorizer_with((topic("orders"), entry("User:alice", granted)))
    assert authorizer.authorize(ALICE, "h", Op.DESCRIBE, TOPIC, "orders")


def test_describe_configs_implied_by_alter_configs_and_implication_is_allow_only() -> None:
    authorizer = authorizer_with((topic("orders"), entry("User:alice", Op.ALTER_CONFIGS)),
                                 (topic("other"), entry("User:alice", Op.DESCRIBE)),
                                 (topic("other"), entry("User:alice", Op.READ, DENY)))
    assert authorizer.authorize(ALICE, "h", Op.DESCRIBE_CONFIGS, TOPIC, "orders")
    assert not authorizer.authorize(ALICE, "h", Op.ALTER_CONFIGS, TOPIC, "other")
    # A DENY of READ does not deny DESCRIBE (implication never extends a DENY).
    assert authorizer.authorize(ALICE, "h", Op.DESCRIBE, TOPIC, "other")


def test_all_grants_every_operation_and_deny_all_refuses_every_one() -> None:
    authorizer = authorizer_with((ResourcePattern(CLUSTER, "kafka-cluster", LITERAL), entry("User:alice", Op.ALL)),
                                 (ResourcePattern(CLUSTER, "kafka-cluster", LITERAL), entry("User:bob", Op.ALL, DENY)),
                                 (ResourcePattern(CLUSTER, "kafka-cluster", LITERAL), entry("User:*", Op.DESCRIBE)))
    assert authorizer.authorize(ALICE, "h", Op.CLUSTER_ACTION, CLUSTER, "kafka-cluster")
    assert not authorizer.authorize(BOB, "h", Op.DESCRIBE, CLUSTER, "kafka-cluster")


def test_super_users_may_do_anything_even_against_a_deny() -> None:
    authorizer = authorizer_with((topic("orders"), entry("User:*", Op.ALL, DENY)),
                                 super_users=parse_super_users("User:alice; User:admin"))
    assert authorizer.authorize(ALICE, "h", Op.DELETE, TOPIC, "orders")
    assert not authorizer.authorize(BOB, "h", Op.DESCRIBE, TOPIC, "orders")


def test_a_change_empties_the_cache() -> None:
    authorizer = Authorizer()
    assert not authorizer.authorize(ALICE, "h", Op.READ, TOPIC, "orders")
    authorizer.replace(topic("orders"), {entry("User:alice", Op.READ)})
    assert authorizer.authorize(ALICE, "h", Op.READ, TOPIC, "orders")
    authorizer.replace(topic("orders"), set())
    assert not authorizer.authorize(ALICE, "h", Op.READ, TOPIC, "orders")


def test_authorize_any_sees_allows_on_some_topic_but_not_denied_ones() -> None:
    authorizer = authorizer_with((topic("orders"), entry("User:alice", Op.WRITE)))
    assert authorizer.authorize_any(ALICE, "h", Op.WRITE, TOPIC)
    assert not authorizer.authorize_any(BOB, "h", Op.WRITE, TOPIC)
    authorizer.replace(topic("*"), {entry("User:alice", Op.WRITE, DENY)})
    assert not authorizer.authorize_any(ALICE, "h", Op.WRITE, TOPIC)


def test_authorizer_class_names() -> None:
    assert authorizer_enabled("kafka.security.authorizer.AclAuthorizer")
    assert authorizer_enabled("roost.AclAuthorizer")
    assert not authorizer_enabled("")
    with pytest.raises(UnknownAuthorizerError, match="not an authorizer Roost has"):
        authorizer_enabled("org.apache.kafka.metadata.authorizer.StandardAuthorizer")


@pytest.mark.parametrize("binding", [
    AclBinding(ResourcePattern(CLUSTER, "my-cluster", LITERAL), entry("User:a", Op.ALTER)),
    AclBinding(topic(""), entry("User:a", Op.READ)),
    AclBinding(topic("t"), entry("alice", Op.READ)),
    AclBinding(topic("t"), entry("User:a", Op.CLUSTER_ACTION)),
    AclBinding(ResourcePattern(TOPIC, "t", PatternType.MATCH), entry("User:a", Op.READ)),
    AclBinding(topic("t"), entry("User:a", Op.ANY)),
])
def test_bindings_kafka_refuses(binding: AclBinding) -> None:
    with pytest.raises(AclError):
        binding.check()


def test_filters_any_literal_prefixed_and_match() -> None:
    literal = AclBinding(topic("sales-eu"), entry("User:a", Op.READ))
    prefixed = AclBinding(topic("sales-", PREFIXED), entry("User:a", Op.READ))
    wildcard = AclBinding(topic("*"), entry("User:b", Op.WRITE))
    every = [literal, prefixed, wildcard]
    assert [b for b in every if AclBindingFilter().matches(b)] == every
    assert [b for b in every if AclBindingFilter(TOPIC, "sales-", PatternType.ANY).matches(b)] == [prefixed]
    assert [b for b in every if AclBindingFilter(TOPIC, "sales-eu", PatternType.MATCH).matches(b)] == every
    assert [b for b in every if AclBindingFilter(principal="User:b").matches(b)] == [wildcard]
    assert [b for b in every if AclBindingFilter(pattern_type=PREFIXED).matches(b)] == [prefixed]


def test_znode_formats_are_kafkas() -> None:
    entries = frozenset({entry("User:alice", Op.READ), entry("User:bob", Op.IDEMPOTENT_WRITE, DENY, "10.0.0.1")})
    data = znodes.encode_entries(entries)
    assert data == (b'{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read",'
                    b'"host":"*"},{"principal":"User:bob","permissionType":"Deny","operation":"IdempotentWrite",'
                    b'"host":"10.0.0.1"}]}')
    assert znodes.decode_entries(data) == entries
    assert znodes.znode_path(ResourcePattern(ResourceType.TRANSACTIONAL_ID, "tx", LITERAL)) == \
        "/kafka-acl/TransactionalId/tx"
    assert znodes.znode_path(topic("ord", PREFIXED)) == "/kafka-acl-extended/prefixed/Topic/ord"
    assert znodes.encode_change(topic("orders")) == b"TOPIC:orders"
    assert znodes.encode_change(topic("ord", PREFIXED)) == \
        b'{"version":1,"resourceType":"TOPIC","name":"ord","patternType":"PREFIXED"}'
    assert znodes.decode_change(LITERAL, b"Topic:orders") == topic("orders")
    assert znodes.decode_change(PREFIXED, znodes.encode_change(topic("ord", PREFIXED))) == topic("ord", PREFIXED)
    with pytest.raises(AclError):
        znodes.decode_entries(b'{"version":1}')
