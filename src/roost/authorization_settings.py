"""The authorizer's settings as the broker's configuration checks them: which
`authorizer.class.name` values switch Roost's authorizer on, and `super.users` parsed into
principals. Apart from the authorizer (broker/security/authorizer.py) so that config.py can
check them without importing the broker."""

from __future__ import annotations

from roost.principal import KafkaPrincipal

# The names Roost's authorizer answers to in `authorizer.class.name`: Kafka's ZooKeeper-mode
# class (so a Kafka server.properties carries over), its older name, and Roost's own.
AUTHORIZER_CLASS_NAMES = frozenset({
    "kafka.security.authorizer.AclAuthorizer",
    "kafka.security.auth.SimpleAclAuthorizer",
    "roost.AclAuthorizer",
})


class UnknownAuthorizerError(ValueError):
    pass


def authorizer_enabled(class_name: str) -> bool:
    """Whether `authorizer.class.name` switches the authorizer on; an unknown class is refused."""
    name = class_name.strip()
    if not name:
        return False
    if name not in AUTHORIZER_CLASS_NAMES:
        raise UnknownAuthorizerError(
            f"authorizer.class.name = {name!r} is not an authorizer Roost has; use one of "
            f"{', '.join(sorted(AUTHORIZER_CLASS_NAMES))} (or leave it empty for no authorization)")
    return True


def parse_super_users(text: str) -> frozenset[str]:
    """`User:Bob;User:Alice` (Kafka's `super.users`) as a set of principal strings."""
    users = set()
    for item in text.split(";"):
        item = item.strip()
        if item:
            users.add(str(KafkaPrincipal.parse(item)))
    return frozenset(users)
