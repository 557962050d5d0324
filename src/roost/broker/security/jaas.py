"""Kafka's JAAS option syntax as brokers take it in `sasl.jaas.config`:
`org.apache.kafka.common.security.plain.PlainLoginModule required username="admin"
password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";`

`username`/`password` are the broker's own login (to other brokers); `user_<name>` entries are the
PLAIN users a listener accepts. Pure parsing, no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_OPTION = re.compile(r'([A-Za-z0-9_.\-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;"]+))')
_HEADER = re.compile(r"^\s*([A-Za-z0-9_.$]+)\s+(required|requisite|sufficient|optional)\b")


@dataclass(frozen=True)
class JaasConfig:
    login_module: str = ""
    options: dict[str, str] = field(default_factory=dict)

    @property
    def username(self) -> str | None:
        return self.options.get("username")

    @property
    def password(self) -> str | None:
        return self.options.get("password")

    def plain_users(self) -> dict[str, str]:
        return {name.removeprefix("user_"): pw for name, pw in self.options.items() if name.startswith("user_")}

    def __repr__(self) -> str:  # never the passwords
        return f"JaasConfig({self.login_module!r}, options={sorted(self.options)})"


def parse_jaas(text: str) -> JaasConfig:
    """ValueError (naming no secret) when `text` is not one login module with its options."""
    if not text.strip():
        return JaasConfig()
    header = _HEADER.match(text)
    if header is None:
        raise ValueError("sasl.jaas.config must start with a login module class and a control flag "
                         "(e.g. org.apache.kafka.common.security.plain.PlainLoginModule required)")
    rest = text[header.end():].strip()
    if not rest.endswith(";"):
        raise ValueError("sasl.jaas.config must end with ';'")
    options: dict[str, str] = {}
    position = 0
    body = rest[:-1]
    for match in _OPTION.finditer(body):
        if body[position:match.start()].strip():
            raise ValueError("sasl.jaas.config has text that is not a name=\"value\" option")
        quoted, bare = match.group(2), match.group(3)
        options[match.group(1)] = re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else bare
        position = match.end()
    if body[position:].strip():
        raise ValueError("sasl.jaas.config has text that is not a name=\"value\" option")
    return JaasConfig(header.group(1), options)
