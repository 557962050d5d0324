"""The `_schemas` replay: Confluent's record layout, the records it refuses, and ids that stay
unique when a writer writes from a stale view (a new writer that has not read everything, or two
nodes that both believe they write)."""

from __future__ import annotations

import asyncio
import json

from roost.registry.service import RegisterRequest, Registry
from roost.registry.store import NOOP_KEY, RegistryState, schema_key, subject_key


def value(subject: str, version: int, schema_id: int, schema: str, md5: str, deleted: bool = False) -> bytes:
    return json.dumps({"subject": subject, "version": version, "id": schema_id, "md5": md5, "references": [],
                       "schema": schema, "deleted": deleted}).encode()


def test_keys_are_confluents() -> None:
    assert schema_key("s", 1) == b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}'
    assert subject_key("CONFIG", None) == b'{"keytype":"CONFIG","magic":0}'
    assert subject_key("MODE", "s") == b'{"keytype":"MODE","subject":"s","magic":0}'
    assert NOOP_KEY == b'{"keytype":"NOOP","magic":0}'


def test_an_id_rebound_to_another_schema_is_refused_on_replay() -> None:
    state = RegistryState()
    assert state.apply(0, schema_key("a", 1), value("a", 1, 1, '"int"', "m1")) is None
    assert state.apply(1, schema_key("b", 1), value("b", 1, 1, '"long"', "m2")) is not None
    assert "b" not in state.versions
    assert state.apply(2, schema_key("a", 1), value("a", 1, 2, '"int"', "m1")) is not None  # version rebound


def test_soft_delete_tombstones_config_and_unknown_records() -> None:
    state = RegistryState()
    state.apply(0, schema_key("a", 1), value("a", 1, 1, '"int"', "m1"))
    state.apply(1, schema_key("a", 2), value("a", 2, 2, '"long"', "m2"))
    state.apply(2, subject_key("DELETE_SUBJECT", "a"), b'{"subject":"a","version":2}')
    assert state.live("a") == [] and len(state.live("a", deleted=True)) == 2
    state.apply(3, schema_key("a", 1), None)
    state.apply(4, schema_key("a", 2), None)
    assert "a" not in state.versions and state.entry(".", 1) is None
    assert state.next_id(".") == 3  # an id once given is never given again
    state.apply(5, subject_key("CONFIG", None), b'{"compatibilityLevel":"FULL"}')
    assert state.config(None) == {"compatibilityLevel": "FULL"}
    state.apply(6, b'{"keytype":"SOMETHING_NEW","magic":0}', b"{}")
    state.apply(7, b"not json", b"{")
    state.apply(8, NOOP_KEY, None)
    assert state.applied_offset == 8


class SharedTopic:
    """One topic, many replicas: each node's log writes to it and replays it into its state, except
    that a stale node skips its first catch-up (it plans from an old view)."""

    def __init__(self) -> None:
        self.records: list[tuple[bytes, bytes | None]] = []

    def log_for(self, state: RegistryState, stale: bool = False) -> NodeLog:
        return NodeLog(self, state, stale)


class NodeLog:
    def __init__(self, topic: SharedTopic, state: RegistryState, stale: bool) -> None:
        self.topic, self.state, self.stale = topic, state, stale

    def catch_up(self) -> None:
        for offset in range(self.state.applied_offset + 1, len(self.topic.records)):
            self.state.apply(offset, *self.topic.records[offset])

    async def write(self, records: list[tuple[bytes, bytes | None]]) -> None:
        self.topic.records.extend(records)
        self.catch_up()

    async def sync(self) -> None:
        if self.stale:
            self.stale = False
            return
        self.catch_up()


def request(schema: str) -> RegisterRequest:
    return RegisterRequest(schema, "AVRO", [], None, None)


def test_a_writer_with_a_stale_view_does_not_reuse_an_id() -> None:
    async def scenario() -> None:
        topic = SharedTopic()
        old_state, new_state = RegistryState(), RegistryState()
        old_writer = Registry(old_state, topic.log_for(old_state))
        new_writer = Registry(new_state, topic.log_for(new_state, stale=True))
        first = await old_writer.register("s1", request('"int"'), False)
        # the new writer has not read the first record: it plans id 1 and version 1 too
        second = await new_writer.register("s2", request('"long"'), False)
        assert (first.id, second.id) == (1, 2)
        check = RegistryState()
        for offset, record in enumerate(topic.records):
            check.apply(offset, *record)
        ids = {(s, v): r.id for s, versions in check.versions.items() for v, r in versions.items()}
        assert ids == {("s1", 1): 1, ("s2", 1): 2}
        assert check.entry(".", 1).schema == '"int"' and check.entry(".", 2).schema == '"long"'

    asyncio.run(scenario())


def test_two_replicas_replaying_the_same_records_agree() -> None:
    async def scenario() -> None:
        topic = SharedTopic()
        state = RegistryState()
        registry = Registry(state, topic.log_for(state))
        for n in range(20):
            await registry.register(f"s{n % 3}", request(json.dumps({"type": "enum", "name": "E",
                                                                     "symbols": [f"S{i}" for i in range(n + 1)]})),
                                    False)
        await registry.delete_version("s1", 1, False)
        replica = RegistryState()
        for offset, record in enumerate(topic.records):
            replica.apply(offset, *record)
        assert {k: sorted(v) for k, v in replica.versions.items()} == {k: sorted(v) for k, v in state.versions.items()}
        assert replica.ids.keys() == state.ids.keys()
        assert len(set(state.ids)) == len(state.ids) == 20

    asyncio.run(scenario())
