"""A `_schemas` log held in memory: the records in order, replayed into the state as written.
For tests of the registry's rules and API without a cluster; the servers use kafka_log.KafkaLog."""

from __future__ import annotations

from roost.registry.store import RegistryState


class MemoryLog:
    def __init__(self, state: RegistryState) -> None:
        self.state = state
        self.records: list[tuple[bytes, bytes | None]] = []

    async def write(self, records: list[tuple[bytes, bytes | None]]) -> None:
        for key, value in records:
            self.records.append((key, value))
            self.state.apply(len(self.records) - 1, key, value)

    async def sync(self) -> None:
        return None
