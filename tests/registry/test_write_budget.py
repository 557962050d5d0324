"""A write's one budget (schema.registry.kafkastore.timeout.ms) while the writer moves, through
confluent-kafka's SchemaRegistryClient and plain HTTP against a registry served on loopback:
within the budget a write waits for an election and for the next writer after a dead one; past
it the answer is Confluent's code (50002/50003/50004, 50001 for a store failure), never a bare
500 and never a hang. And the Kafka side's stop, which gives up at its deadline."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
import urllib.error
import urllib.request
import warnings
from typing import Any

import pytest

warnings.filterwarnings("ignore", category=DeprecationWarning)
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient  # noqa: E402
from confluent_kafka.schema_registry.error import SchemaRegistryError  # noqa: E402

from roost.registry.api import DEADLINE_HEADER, FORWARDED_HEADER  # noqa: E402
from roost.registry.kafka_log import KafkaLog  # noqa: E402
from roost.registry.memory_log import MemoryLog  # noqa: E402
from roost.registry.store import RegistryState  # noqa: E402
from tests.registry.local_registry import local_registry  # noqa: E402

pytestmark = pytest.mark.timeout(60)
BUDGET_S = 1.5
SCHEMA = Schema(json.dumps({"type": "record", "name": "R", "fields": [{"name": "f", "type": "int"}]}), "AVRO")


class Switching:
    """An election whose outcome changes at `at` (monotonic): before it `before`, then `after`,
    each (is_writer, writer_url)."""

    def __init__(self, before: tuple[bool, str | None], after: tuple[bool, str | None], delay_s: float) -> None:
        self.before, self.after = before, after
        self.at = time.monotonic() + delay_s

    def _now(self) -> tuple[bool, str | None]:
        return self.after if time.monotonic() >= self.at else self.before

    def is_writer(self) -> bool:
        return self._now()[0]

    def writer_url(self) -> str | None:
        return self._now()[1]


class FailingLog(MemoryLog):
    """A topic whose client fails (as a KafkaException would) or never answers."""

    def __init__(self, state: RegistryState, stall: bool) -> None:
        super().__init__(state)
        self.stall = stall

    async def sync(self) -> None:
        if self.stall:
            await asyncio.sleep(3600)
        raise RuntimeError("KafkaError{code=_TRANSPORT,str=\"the broker is gone\"}")


def refusing_url() -> str:
    """A loopback URL where nothing listens (its port bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def client(url: str) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": url, "max.retries": 0, "timeout": 30})


def post(url: str, path: str, body: Any, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    request = urllib.request.Request(url + path, data=json.dumps(body).encode(), method="POST", headers={
        "Content-Type": "application/vnd.schemaregistry.v1+json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())  # a bare aiohttp 500 is not JSON: the test fails


def test_no_writer_elected_answers_50004_at_the_budget() -> None:
    with local_registry(leadership=Switching((False, None), (False, None), 0), write_timeout_s=BUDGET_S) as (url, _):
        started = time.monotonic()
        with pytest.raises(SchemaRegistryError) as refused:
            client(url).register_schema("s", SCHEMA)
        took = time.monotonic() - started
    assert (refused.value.http_status_code, refused.value.error_code) == (500, 50004)
    assert BUDGET_S * 0.8 <= took < BUDGET_S + 10, took  # it waited for an election, then gave up


def test_a_write_waits_for_the_election_within_its_budget() -> None:
    with local_registry(leadership=Switching((False, None), (True, None), 0.5), write_timeout_s=10) as (url, _):
        assert client(url).register_schema("s", SCHEMA) == 1


def test_a_forward_to_a_writer_that_refuses_connections_waits_for_the_next_writer() -> None:
    """The dead writer is still named by the group for a moment: the write asks again, and this
    node, elected next, takes it."""
    leadership = Switching((False, refusing_url()), (True, None), 0.8)
    with local_registry(leadership=leadership, write_timeout_s=10) as (url, registry):
        assert client(url).register_schema("s", SCHEMA) == 1
        assert registry.state.live("s")[0].id == 1


def test_a_writer_that_never_comes_back_answers_50003_at_the_budget() -> None:
    leadership = Switching((False, refusing_url()), (False, refusing_url()), 0)
    with local_registry(leadership=leadership, write_timeout_s=BUDGET_S) as (url, _):
        started = time.monotonic()
        with pytest.raises(SchemaRegistryError) as refused:
            client(url).register_schema("s", SCHEMA)
        took = time.monotonic() - started
    assert (refused.value.http_status_code, refused.value.error_code) == (500, 50003)
    assert took < BUDGET_S + 10, took


def test_a_store_failure_answers_50001_as_json_and_the_server_keeps_serving() -> None:
    state = RegistryState()
    with local_registry(log=FailingLog(state, stall=False)) as (url, _):
        status, body = post(url, "/subjects/s/versions", {"schema": '"int"'})
        assert status == 500 and body["error_code"] == 50001 and "the broker is gone" in body["message"]
        with urllib.request.urlopen(url + "/schemas/types", timeout=10) as reply:
            assert reply.status == 200 and "AVRO" in json.loads(reply.read())


def test_a_stalled_store_answers_50002_within_the_budget_a_forwarder_passed_on() -> None:
    """A forwarded write carries what is left of the forwarder's budget: the writer does not
    start a 30 s budget of its own."""
    state = RegistryState()
    with local_registry(log=FailingLog(state, stall=True), write_timeout_s=30) as (url, _):
        started = time.monotonic()
        status, body = post(url, "/subjects/s/versions", {"schema": '"int"'},
                            {FORWARDED_HEADER: "1", DEADLINE_HEADER: str(int(BUDGET_S * 1000))})
        took = time.monotonic() - started
    assert (status, body["error_code"]) == (500, 50002)
    assert took < BUDGET_S + 10, took


class HangingClose:
    """Stands in for a Kafka client whose close() never returns (librdkafka waiting on a group
    coordinator that no longer answers)."""

    def __init__(self, released: threading.Event) -> None:
        self.released = released

    def close(self) -> None:
        self.released.wait(60)


@pytest.mark.timeout(20)
def test_the_kafka_side_stop_gives_up_at_its_deadline() -> None:
    """A close that hangs must not hang the broker (or the test) that stops the registry."""
    log = KafkaLog(RegistryState(), "127.0.0.1:1", {}, "_schemas", "g", "http://127.0.0.1:1")
    released = threading.Event()
    log.reader = HangingClose(released)  # type: ignore[assignment]
    started = time.monotonic()
    try:
        asyncio.run(log.stop(deadline_s=0.5))
        assert time.monotonic() - started < 10
    finally:
        released.set()


ASSIGNED_SCHEMAS_0 = b"\x00\x00\x00\x00\x00\x01\x00\x08_schemas\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00"


def test_the_writer_is_the_member_assigned_partition_0_as_describe_groups_shows_it() -> None:
    """The assignment bytes as a Roost broker's DescribeGroups returned them for the writer."""
    from roost.registry.kafka_log import CLIENT_ID_PREFIX, assigned_partitions, writer_of

    assert assigned_partitions(ASSIGNED_SCHEMAS_0) == {"_schemas": [0]}
    members = [(CLIENT_ID_PREFIX + "http://a:1", b""), ("someone-else", ASSIGNED_SCHEMAS_0),
               (CLIENT_ID_PREFIX + "http://b:2", ASSIGNED_SCHEMAS_0)]
    assert writer_of(members, "_schemas") == "http://b:2"  # only a registry's client id counts
    assert writer_of(members[:2], "_schemas") is None
    assert writer_of(members, "other") is None
    for broken in (ASSIGNED_SCHEMAS_0[:9], ASSIGNED_SCHEMAS_0[:-9], b"\x00\x00\xff\xff\xff\xff", b"\x00"):
        assert assigned_partitions(broken) == {}, broken
