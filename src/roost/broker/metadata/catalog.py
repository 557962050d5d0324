"""The topic catalog: names, ids, partition counts and per-topic configs, kept durable on disk.

The single broker keeps this in one JSON file written atomically (temp file, fsync, rename); the
replicated cluster keeps the same records as znodes in the keeper.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from roost.log.files import atomic_write

MAX_TOPIC_NAME_LENGTH = 249
LEGAL_TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]+$")
OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
SHARE_GROUP_STATE_TOPIC = "__share_group_state"
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, SHARE_GROUP_STATE_TOPIC})


def topic_name_problem(name: str | None) -> str | None:
    """Kafka's topic name rules; returns why `name` is invalid, or None."""
    if not name:
        return "topic name is empty"
    if name in (".", ".."):
        return f"topic name cannot be '{name}'"
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return f"topic name is longer than {MAX_TOPIC_NAME_LENGTH} characters"
    if not LEGAL_TOPIC_NAME.match(name):
        return f"topic name '{name}' has characters other than ASCII alphanumerics, '.', '_' and '-'"
    return None


@dataclass
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, Any] = field(default_factory=dict)  # only the overrides

    @property
    def is_internal(self) -> bool:
        return self.name in INTERNAL_TOPICS

    def to_json(self) -> dict[str, Any]:
        return {"id": str(self.topic_id), "partitions": self.partitions, "configs": self.configs}

    @classmethod
    def from_json(cls, name: str, data: Mapping[str, Any]) -> TopicInfo:
        return cls(name, uuid.UUID(data["id"]), int(data["partitions"]), dict(data.get("configs", {})))


class TopicCatalog:
    """The durable set of topics of a single broker."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._topics: dict[str, TopicInfo] = {}
        self._by_id: dict[uuid.UUID, TopicInfo] = {}
        if path.exists():
            data = json.loads(path.read_text())
            for name, entry in data.get("topics", {}).items():
                self._remember(TopicInfo.from_json(name, entry))

    def _remember(self, info: TopicInfo) -> None:
        self._topics[info.name] = info
        self._by_id[info.topic_id] = info

    def __contains__(self, name: object) -> bool:
        return name in self._topics

    def __iter__(self) -> Iterator[TopicInfo]:
        return iter(list(self._topics.values()))

    def get(self, name: str) -> TopicInfo | None:
        return self._topics.get(name)

    def by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return self._by_id.get(topic_id)

    def add(self, name: str, partitions: int, configs: dict[str, Any]) -> TopicInfo:
        assert name not in self._topics, name
        assert partitions >= 1
        info = TopicInfo(name, uuid.uuid4(), partitions, dict(configs))
        self._remember(info)
        self._save()
        return info

    def set_partitions(self, name: str, partitions: int) -> None:
        info = self._topics[name]
        assert partitions >= info.partitions, "partitions never shrink"
        info.partitions = partitions
        self._save()

    def set_configs(self, name: str, configs: dict[str, Any]) -> None:
        """Make `configs` the topic's whole set of overrides (AlterConfigs)."""
        self._topics[name].configs = dict(configs)
        self._save()

    def remove(self, name: str) -> TopicInfo:
        info = self._topics.pop(name)
        del self._by_id[info.topic_id]
        self._save()
        return info

    def _save(self) -> None:
        data = {"topics": {name: info.to_json() for name, info in self._topics.items()}}
        atomic_write(self._path, json.dumps(data, indent=1, sort_keys=True).encode())
