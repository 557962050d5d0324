"""Where a client of the cluster connects, and how: what every CLI client command and the
admin library share."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

DEFAULT_ZOOKEEPER = "127.0.0.1:2181"


@dataclass(frozen=True)
class Target:
    """Where a client command connects, and how."""

    bootstrap: str
    settings: Mapping[str, str] = field(default_factory=dict)
    zookeeper: str = DEFAULT_ZOOKEEPER
    timeout_s: float = 10.0

    def client_config(self, **overrides: Any) -> dict[str, Any]:
        """A confluent-kafka configuration: bootstrap, the user's -X settings, then `overrides`
        (which the command needs to work as documented)."""
        return {"bootstrap.servers": self.bootstrap, **self.settings, **overrides}
