"""Kafka's `ssl.principal.mapping.rules`: how a TLS client certificate's subject becomes a name.

Rules are `RULE:<regex>/<replacement>/[L|U]` or `DEFAULT`, separated by commas; the first rule
whose pattern matches the whole distinguished name (RFC 2253 form, `CN=alice,OU=x,O=y`) gives the
name, with `$1`-style groups replaced and `L`/`U` lower- or upper-casing it; DEFAULT gives the
distinguished name itself. No rule matching is an error (the client is refused), as in Kafka.
Pure functions: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_RULE = re.compile(r"\s*(?:(DEFAULT)|RULE:((?:\\/|[^/])*)/((?:\\/|[^/])*)/([LU]?))\s*(?:,|$)")


@dataclass(frozen=True)
class MappingRule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""  # "", "L" or "U"

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        match = self.pattern.fullmatch(dn)
        if match is None:
            return None
        name = re.sub(r"\$(\d+)", lambda m: match.group(int(m.group(1))) or "", self.replacement)
        return name.lower() if self.case == "L" else name.upper() if self.case == "U" else name


def parse_rules(text: str) -> list[MappingRule]:
    """The rules of `text`; ValueError naming the part that is not a rule."""
    rules: list[MappingRule] = []
    position = 0
    text = text.strip()
    while position < len(text):
        match = _RULE.match(text, position)
        if match is None or match.end() == position:
            raise ValueError(f"invalid ssl.principal.mapping.rules at {text[position:]!r}: expected "
                             "RULE:pattern/replacement/[LU] or DEFAULT")
        default, pattern, replacement, case = match.groups()
        if default:
            rules.append(MappingRule(None))
        else:
            try:
                compiled = re.compile(pattern.replace("\\/", "/"))
            except re.error as error:
                raise ValueError(f"invalid regular expression {pattern!r} in ssl.principal.mapping.rules: "
                                 f"{error}") from None
            rules.append(MappingRule(compiled, replacement.replace("\\/", "/"), case))
        position = match.end()
    return rules or [MappingRule(None)]


def map_subject(rules: list[MappingRule], dn: str) -> str | None:
    """The principal name of the certificate subject `dn`, or None when no rule matches."""
    for rule in rules:
        name = rule.apply(dn)
        if name is not None:
            return name
    return None
