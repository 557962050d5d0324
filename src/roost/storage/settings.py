"""What storage reads of the broker's settings: a value by its Kafka name (`log.dirs`,
`log.cleaner.backoff.ms`, ...). `roost.config.BrokerConfig` is one; storage does not import it,
so the disks' room depends on the log alone (docs/architecture.md, the import contracts)."""

from __future__ import annotations

from typing import Any, Protocol


class Settings(Protocol):
    def __getitem__(self, name: str, /) -> Any: ...
