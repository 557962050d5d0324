"""Which source topics and consumer groups a link mirrors.

Patterns, comma-separated: `literal:orders` (that name), `prefix:orders.` (names starting so),
`regex:orders-\\d+` or a bare pattern (a Java-style regex matched against the whole name, MM2's
form). MM2's defaults: `topics = .*`, `topics.exclude = .*[\\-\\.]internal, .*\\.replica, __.*`,
`groups = .*`, `groups.exclude = console-consumer-.*, connect-.*, __.*`
(connect/mirror DefaultTopicFilter, DefaultGroupFilter). Internal topics are never mirrored,
whatever the filters say (MM2's ReplicationPolicy.isInternalTopic: names starting `__` or `.`,
ending `.internal` or `-internal`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DEFAULT_TOPICS = ".*"
DEFAULT_TOPICS_EXCLUDE = r".*[\-\.]internal, .*\.replica, __.*"
DEFAULT_GROUPS = ".*"
DEFAULT_GROUPS_EXCLUDE = "console-consumer-.*, connect-.*, __.*"
MAX_PATTERNS = 1000  # a filter is a setting, not a database


class FilterError(ValueError):
    """A pattern that cannot be used (a bad regex, an empty literal)."""


@dataclass(frozen=True)
class Pattern:
    kind: str  # literal | prefix | regex
    text: str

    def matches(self, name: str) -> bool:
        if self.kind == "literal":
            return name == self.text
        if self.kind == "prefix":
            return name.startswith(self.text)
        return _compiled(self.text).fullmatch(name) is not None


_CACHE: dict[str, re.Pattern[str]] = {}


def _compiled(text: str) -> re.Pattern[str]:
    found = _CACHE.get(text)
    if found is None:
        if len(_CACHE) > 4 * MAX_PATTERNS:
            _CACHE.clear()
        found = _CACHE[text] = re.compile(text)
    return found


def parse_patterns(raw: str) -> tuple[Pattern, ...]:
    """`raw` as a list of patterns (empty: none). FilterError names a bad one."""
    patterns = []
    for item in (part.strip() for part in raw.split(",")):
        if not item:
            continue
        kind, sep, text = item.partition(":")
        if sep and kind in ("literal", "prefix", "regex"):
            item_kind, item_text = kind, text.strip()
        else:
            item_kind, item_text = "regex", item
        if not item_text:
            raise FilterError(f"empty {item_kind} pattern in {raw!r}")
        if item_kind == "regex":
            try:
                _compiled(item_text)
            except re.error as error:
                raise FilterError(f"bad regex {item_text!r}: {error}") from None
        patterns.append(Pattern(item_kind, item_text))
    if len(patterns) > MAX_PATTERNS:
        raise FilterError(f"more than {MAX_PATTERNS} patterns")
    return tuple(patterns)


def is_internal_topic(name: str) -> bool:
    """Never mirrored: Kafka's internal topics and MM2's (ReplicationPolicy.isInternalTopic)."""
    return name.startswith(("__", ".")) or name.endswith((".internal", "-internal"))


@dataclass(frozen=True)
class NameFilter:
    """Names matching one of `include` and none of `exclude`."""

    include: tuple[Pattern, ...]
    exclude: tuple[Pattern, ...] = ()

    @classmethod
    def parse(cls, include: str, exclude: str) -> NameFilter:
        return cls(parse_patterns(include), parse_patterns(exclude))

    def matches(self, name: str) -> bool:
        return any(p.matches(name) for p in self.include) and not any(p.matches(name) for p in self.exclude)


def topic_filter(include: str = DEFAULT_TOPICS, exclude: str = DEFAULT_TOPICS_EXCLUDE) -> NameFilter:
    return NameFilter.parse(include, exclude)


def group_filter(include: str = DEFAULT_GROUPS, exclude: str = DEFAULT_GROUPS_EXCLUDE) -> NameFilter:
    return NameFilter.parse(include, exclude)


def should_mirror_topic(topics: NameFilter, name: str) -> bool:
    return not is_internal_topic(name) and topics.matches(name)
