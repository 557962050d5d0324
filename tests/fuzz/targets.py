"""The fuzz targets: every decoder that reads bytes from outside, each with the one error type its
module documents.

A target's contract (what `check` enforces, for atheris in scripts/fuzz.py and for the corpus
replay in CI): given any bytes, the decoder returns a value or raises the documented error, and
nothing else (no IndexError, struct.error, UnicodeDecodeError, RecursionError, MemoryError ...).
Hangs are caught by atheris' per-input timeout, memory by an address-space limit in the fuzzing
process and by tracemalloc in the corpus replay: a length prefix must not make a decoder allocate
more than its input can back.

Targets are built lazily (`setup()` imports the modules), so scripts/fuzz.py can import the
decoders inside `atheris.instrument_imports` and get coverage feedback from them.

Seeds (`seeds()`) are encoded with Roost's own client side and, where the protocol has one, a
real client library's encoder (kazoo for ZooKeeper, scramp for SCRAM): the committed corpora in
tests/fuzz/corpus/<target>/ are these plus whatever the long runs found worth keeping.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

Decoder = Callable[[bytes], object]


@dataclass(frozen=True)
class FuzzTarget:
    name: str
    doc: str
    setup: Callable[[], Decoder]  # imports the decoders, returns the function to feed
    expected: Callable[[], tuple[type[BaseException], ...]]  # the documented error types
    seeds: Callable[[], Iterator[bytes]]
    instrument: tuple[str, ...]  # module prefixes atheris instruments for coverage
    max_len: int = 4096
    # Legitimate peak memory per input (tracemalloc) beyond this is a lying-length bug.
    memory_limit: int = 32 << 20
    notes: list[str] = field(default_factory=list)


def check(target: FuzzTarget, decode: Decoder, expected: tuple[type[BaseException], ...], data: bytes) -> None:
    """Feed `data`; the documented errors are fine, anything else propagates (a finding)."""
    try:
        decode(data)
    except expected:
        pass


# ------------------------------------------------------------------------------------ Kafka

def _kafka_framing():
    """A framing over codecs generated exactly as the broker's, each function instrumented when
    atheris is fuzzing (generated code is exec'd, so instrument_imports never sees it)."""
    from roost.wire.kafka.apis import CodecTable
    from roost.wire.kafka.codegen import generate_struct
    from roost.wire.kafka.framing import KafkaFraming
    from roost.wire.kafka.struct_codec import StructCodec

    try:
        import atheris  # only in the fuzzing process; the corpus replay needs no coverage
        fuzzing = atheris.instrument_func if _INSTRUMENT_GENERATED else None
    except ImportError:
        fuzzing = None

    def compile_struct(name: str, fields: tuple, version: int, flexible: bool) -> StructCodec:
        codec = generate_struct(name, fields, version, flexible)
        if fuzzing is None:
            return codec
        return StructCodec(fuzzing(codec.read), codec.write, codec.defaults, codec.source)

    return KafkaFraming(CodecTable("fuzzed", compile_struct))


_INSTRUMENT_GENERATED = False  # scripts/fuzz.py sets it before setup()


def _advertised_pairs() -> list[tuple[int, int]]:
    """Every (api key, version) a broker advertises in ApiVersions (clustered, the widest set)."""
    from roost.broker.broker import CLUSTER_VERSIONS
    from roost.broker.net.dispatcher import ADVERTISED_VERSIONS, clip_to_codec

    versions = clip_to_codec({**ADVERTISED_VERSIONS, **CLUSTER_VERSIONS})
    return [(int(key), v) for key, (low, high) in sorted(versions.items()) for v in range(low, high + 1)]


def _kafka_request_setup() -> Decoder:
    framing = _kafka_framing()

    def decode(data: bytes) -> object:
        return framing.decode_request(data, strict=True)
    return decode


def _kafka_errors() -> tuple[type[BaseException], ...]:
    from roost.wire.kafka import KafkaCodecError
    return (KafkaCodecError,)


def _kafka_request_seeds() -> Iterator[bytes]:
    from roost.wire.kafka import RequestHeader, encode_request
    from tests.wire_kafka.samples import client_id_for, message_of, nondefault_body, sample_body

    for api_key, version in _advertised_pairs():
        rng = random.Random(f"request {api_key} {version}")  # a new API changes no other seed
        header = RequestHeader(api_key, version, 7, client_id_for(api_key, version, "rdkafka"))
        message = message_of(api_key, True)
        for body in (sample_body(message, version, rng), nondefault_body(message, version, rng)):
            yield b"".join(encode_request(header, body))[4:]


def _kafka_response_setup() -> Decoder:
    framing = _kafka_framing()

    def decode(data: bytes) -> object:
        if len(data) < 4:
            return None
        api_key, version = struct.unpack_from(">hh", data)
        return framing.decode_response(api_key, version, data[4:])
    return decode


def _kafka_response_seeds() -> Iterator[bytes]:
    from roost.wire.kafka import RequestHeader, encode_response
    from tests.wire_kafka.samples import message_of, nondefault_body, sample_body

    for api_key, version in _advertised_pairs():
        rng = random.Random(f"response {api_key} {version}")
        message = message_of(api_key, False)
        for body in (sample_body(message, version, rng), nondefault_body(message, version, rng)):
            frame = b"".join(encode_response(RequestHeader(api_key, version, 7, None), body))[4:]
            yield struct.pack(">hh", api_key, version) + frame


def _consumer_protocol_setup() -> Decoder:
    from roost.wire.kafka import decode_consumer_assignment, decode_consumer_subscription

    def decode(data: bytes) -> object:
        if not data:
            return None
        return (decode_consumer_subscription if data[0] & 1 else decode_consumer_assignment)(data[1:])
    return decode


def _consumer_protocol_seeds() -> Iterator[bytes]:
    from roost.wire.kafka import encode_consumer_assignment, encode_consumer_subscription

    for version in range(4):
        yield b"\x01" + encode_consumer_subscription(version, {
            "topics": ["orders", "payments"], "user_data": b"\x00\x01",
            "owned_partitions": [{"topic": "orders", "partitions": [0, 2]}], "generation_id": 3,
            "rack_id": "r1"})
        yield b"\x00" + encode_consumer_assignment(min(version, 3), {
            "assigned_partitions": [{"topic": "orders", "partitions": [0, 1]}], "user_data": b"u"})


# ------------------------------------------------------------------------------ record batches

def _records_setup() -> Decoder:
    from roost.wire.kafka.record_columns import RecordColumns, decode_records_into, decode_records_into_py
    from roost.wire.kafka.records import (
        HEADER_SIZE,
        decode_batch_records,
        decompress,
        iter_batch_headers,
        validate_batches,
    )

    limit = 4 << 20  # what a fuzzed 4 KiB batch may decompress to before the limit refuses it

    def decode(data: bytes) -> object:
        # The first byte says whether the CRC is checked: unchecked, mutations reach the codecs
        # and the record parser (what a follower or a client reads after its own CRC check).
        verify = bool(data[:1]) and data[0] & 1 == 1
        buf = data[1:]
        if verify:
            return validate_batches(buf)
        for pos, header in iter_batch_headers(buf):
            batch = buf[pos:pos + header.size]
            decode_batch_records(batch, verify_crc=False, max_decompressed_bytes=limit)
            records = decompress(header.compression, bytes(batch[HEADER_SIZE:]), limit)
            for twin in (decode_records_into_py, decode_records_into):
                twin(RecordColumns(), header, bytes(records), header.base_offset, header.next_offset)
        return None
    return decode


def _records_errors() -> tuple[type[BaseException], ...]:
    from roost.wire.kafka.records import InvalidRecordBatch
    return (InvalidRecordBatch,)


def _records_seeds() -> Iterator[bytes]:
    from roost.wire.kafka.records import Record, build_batch

    records = [Record(b"k1", b"v" * 40, [("h", b"x"), ("n", None)]), Record(None, b"tombstone?"),
               Record(b"k3", None)]
    for codec in range(5):  # none, gzip, snappy, lz4, zstd
        for transactional in (False, True):
            batch = build_batch(records, base_offset=100, timestamp_ms=1_700_000_000_000, producer_id=9,
                                producer_epoch=1, base_sequence=0, compression=codec,
                                is_transactional=transactional, partition_leader_epoch=4)
            yield b"\x00" + batch
            yield b"\x01" + batch + batch
        # The codec's own bytes damaged behind a header that holds: each library's error must come
        # out as InvalidRecordBatch.
        damaged = bytearray(build_batch(records, timestamp_ms=1, compression=codec))
        for position in range(61, len(damaged), 7):
            damaged[position] ^= 0x5A
        yield b"\x00" + bytes(damaged)
    yield b"\x00" + build_batch([Record(b"\x00\x00\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00")],
                                timestamp_ms=0, is_control=True, is_transactional=True, producer_id=1)


# ---------------------------------------------------------------------------------- ZooKeeper

def _zk_errors() -> tuple[type[BaseException], ...]:
    from roost.wire.zk.errors import ZkCodecError
    return (ZkCodecError,)


def _zk_server_setup() -> Decoder:
    from roost.wire.zk.connection import ServerConnection

    def decode(data: bytes) -> object:
        return ServerConnection(max_frame=1 << 20).receive_data(data)
    return decode


def _zk_server_seeds() -> Iterator[bytes]:
    """A kazoo session's bytes, as kazoo's own serializers write them: connect, then requests."""
    from kazoo.protocol import serialization as k
    from kazoo.security import OPEN_ACL_UNSAFE

    def frame(body: bytes) -> bytes:
        return struct.pack(">i", len(body)) + body

    connect = frame(bytes(k.Connect(0, 0, 10000, 0, b"\x00" * 16, False).serialize()))
    acl = list(OPEN_ACL_UNSAFE)
    requests = [
        k.Create("/app/lock-", b"data", acl, 3), k.Create2("/a", b"", acl, 0), k.Delete("/a", -1),
        k.Exists("/a", True), k.GetData("/a", True), k.SetData("/a", b"x" * 20, 3), k.GetACL("/a"),
        k.SetACL("/a", acl, 0), k.GetChildren("/", True), k.Sync("/"), k.GetChildren2("/", False),
        k.CheckVersion("/a", 1), k.Auth(0, "digest", "user:password"), k.SASL(b"\x00" * 8), k.Ping(),
        k.Reconfig("server.4=h:1:2;3", None, None, -1), k.Close(),
    ]
    txn = k.Transaction([k.Create("/t", b"", acl, 0), k.CheckVersion("/t", 0), k.SetData("/t", b"1", -1),
                         k.Delete("/t", -1)])
    requests.append(txn)
    stream = [connect]
    for xid, request in enumerate(requests, 1):
        xid_for = -2 if request.type == 11 else (-4 if request.type == 100 else xid)
        stream.append(frame(struct.pack(">ii", xid_for, request.type) + bytes(request.serialize())))
    yield b"".join(stream)
    for piece in stream[1:]:
        yield connect + piece
    yield b"ruok"


def _zk_client_setup() -> Decoder:
    from roost.wire.zk.connection import ClientConnection
    from roost.wire.zk.constants import OpCode
    from roost.wire.zk.records import (
        CreateRequest,
        EmptyRequest,
        MultiRequest,
        PathRequest,
        PathWatchRequest,
        SetDataRequest,
    )

    def pending() -> list:
        return [PathWatchRequest("/a", True, OpCode.GET_DATA), PathWatchRequest("/", False, OpCode.GET_CHILDREN2),
                CreateRequest("/c", b"", [], 0, OpCode.CREATE2), SetDataRequest("/a", b"", -1),
                MultiRequest([]), PathRequest("/a", OpCode.GET_ACL), EmptyRequest(OpCode.WHO_AM_I),
                PathWatchRequest("/a", False, OpCode.EXISTS)]

    def decode(data: bytes) -> object:
        client = ClientConnection(max_frame=1 << 20)
        client.connected = bool(data[:1]) and data[0] & 1 == 1
        for request in pending():
            client.send(request)
        return client.receive_data(data[1:])
    return decode


def _zk_client_seeds() -> Iterator[bytes]:
    from roost.wire.zk.connection import encode_connect_response, encode_reply, encode_watch_event
    from roost.wire.zk.jute import JuteWriter
    from roost.wire.zk.records import ConnectResponse, Stat

    stat = Stat(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)
    get_data = JuteWriter().buffer(b"value").stat(stat).getvalue()
    children = JuteWriter().ustring_vector(["a", "b"]).stat(stat).getvalue()
    created = JuteWriter().ustring("/c").stat(stat).getvalue()
    set_data = JuteWriter().stat(stat).getvalue()
    replies = [encode_reply(1, 10, 0, get_data), encode_reply(2, 11, 0, children), encode_reply(3, 12, 0, created),
               encode_reply(4, 13, 0, set_data), encode_reply(5, 14, -101),
               encode_watch_event(3, 3, "/a"), encode_reply(-2, 15, 0)]
    yield b"\x01" + b"".join(replies)
    yield b"\x00" + encode_connect_response(ConnectResponse(0, 10000, 0x1234, b"\x01" * 16, False)) + replies[0]


def _keeper_setup() -> Decoder:
    from roost.keeper.commands import Batch
    from roost.keeper.core import decode_touches
    from roost.keeper.tree import DataTree

    decoders = (Batch.decode, DataTree.from_snapshot, decode_touches)

    def decode(data: bytes) -> object:
        if not data:
            return None
        return decoders[data[0] % 3](data[1:])
    return decode


def _keeper_seeds() -> Iterator[bytes]:
    from roost.keeper.commands import Batch, Command, CommandKind
    from roost.keeper.core import encode_touches
    from roost.keeper.tree import DataTree
    from roost.wire.zk.constants import OpCode

    batch = Batch(1, 2, 0, 3, 4, [
        Command(CommandKind.CREATE_SESSION, 5, timeout=4000, passwd=b"p" * 16),
        Command(CommandKind.REQUEST, 5, xid=1, opcode=OpCode.CREATE, body=b"\x00" * 20),
        Command(CommandKind.DELETE_CONTAINER, 0, path="/c")]).encode()
    yield b"\x00" + batch
    yield b"\x01" + DataTree().snapshot()
    yield b"\x02" + encode_touches([1, 2, 3])


# -------------------------------------------------------------------------------------- Raft

def _raft_setup() -> Decoder:
    from roost.raft.codec import FrameDecoder, decode_body, decode_hello

    def decode(data: bytes) -> object:
        if not data:
            return None
        kind, rest = data[0] % 3, data[1:]
        if kind == 0:
            return decode_body(rest)  # what arrives behind a good CRC
        if kind == 1:
            return FrameDecoder(max_frame=1 << 20).feed(rest)
        return decode_hello(rest)
    return decode


def _raft_errors() -> tuple[type[BaseException], ...]:
    from roost.raft.codec import CodecError
    return (CodecError,)


def _raft_seeds() -> Iterator[bytes]:
    from roost.raft.codec import encode_hello, encode_message
    from roost.raft.messages import Entry, EntryKind, Membership, Message, MessageType, Snapshot

    membership = Membership(frozenset({1, 2, 3}), frozenset({4}), b"ctx")
    messages = [
        Message(MessageType.APPEND, 1, 2, term=3, log_term=2, index=10, commit=9, entries=(
            Entry(3, 11, b"batch"), Entry(3, 12, b"", EntryKind.NOOP),
            Entry(3, 13, membership.encode(), EntryKind.CONFIG))),
        Message(MessageType.APPEND_RESP, 2, 1, term=3, index=13, reject=True, hint_index=5, hint_term=2),
        Message(MessageType.HEARTBEAT, 1, 3, term=3, commit=13, context=77),
        Message(MessageType.PROPOSE, 3, 1, entries=(Entry(0, 0, b"w"),), request_ids=(5,)),
    ]
    for message_type in MessageType:
        if message_type.name.startswith("SNAP"):
            messages.append(Message(message_type, 1, 2, term=3, snapshot=Snapshot(10, 2, membership, b"tree")))
    for message in messages:
        try:
            frame = encode_message(message)
        except (AssertionError, TypeError, ValueError):
            continue
        yield b"\x00" + frame[9:]
        yield b"\x01" + frame
    yield b"\x02" + encode_hello(3)


# -------------------------------------------------------------------------------- SASL / SCRAM

def _sasl_setup() -> Decoder:
    from roost.broker.security.sasl import SaslAuthenticator, SaslSettings
    from roost.broker.security.scram import make_credential
    from roost.wire.kafka.framing import FrameSplitter

    credential = make_credential("SCRAM-SHA-256", "secret", 4096)
    settings = SaslSettings(["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"], plain_users=lambda: {"alice": "pw"},
                            scram_credentials=lambda user, mech: credential if user == "alice" else None)

    def decode(data: bytes) -> object:
        authenticator = SaslAuthenticator(settings)
        for frame in FrameSplitter(1 << 16).split(data)[:8]:
            step = authenticator.on_frame(frame)
            if authenticator.state.name in ("COMPLETE", "FAILED") or step.action.name in ("FAIL", "CLOSE"):
                break
        return None
    return decode


def _sasl_errors() -> tuple[type[BaseException], ...]:
    from roost.wire.kafka import FrameSizeError
    return (FrameSizeError,)  # the splitter's one error; the authenticator itself never raises


def _sasl_seeds() -> Iterator[bytes]:
    import scramp

    from roost.wire.kafka import RequestHeader, encode_request

    def frame(api_key: int, version: int, body: dict) -> bytes:
        return b"".join(encode_request(RequestHeader(api_key, version, 1, "c"), body))

    client = scramp.ScramClient(["SCRAM-SHA-256"], "alice", "secret")
    first = client.get_client_first().encode()
    api_versions = frame(18, 3, {"client_software_name": "librdkafka", "client_software_version": "2.6"})
    for mechanism, token in (("SCRAM-SHA-256", first), ("PLAIN", b"\x00alice\x00pw"),
                             ("SCRAM-SHA-512", b"n,,n=bob,r=abc")):
        yield api_versions + frame(17, 1, {"mechanism": mechanism}) + frame(36, 2, {"auth_bytes": token}) \
            + frame(36, 2, {"auth_bytes": b"c=biws,r=abcXYZ,p=cHJvb2Y="})
        yield frame(17, 0, {"mechanism": mechanism}) + struct.pack(">i", len(token)) + token


# ------------------------------------------------------------------------- console and settings

def _console_setup() -> Decoder:
    from roost.console.params import int_param, payload

    def decode(data: bytes) -> object:
        text = data.decode("utf-8", "replace")
        encoding, _, value = text.partition("\n")
        int_param(value, "offset", default=0, low=-2, high=2**63 - 1)
        return payload(value, encoding[:8], "value")
    return decode


def _console_errors() -> tuple[type[BaseException], ...]:
    from roost.console.errors import ConsoleError
    return (ConsoleError,)


def _console_seeds() -> Iterator[bytes]:
    yield b"text\nhello"
    yield b"base64\naGVsbG8="
    yield b"hex\n68656c6c6f"
    yield b"text\n12345"
    yield b"utf32\n-2"


def _settings_setup() -> Decoder:
    from roost.config import BrokerConfig, parse_toml_text

    def decode(data: bytes) -> object:
        return BrokerConfig.build([("fuzz.toml", parse_toml_text(data, "fuzz.toml"))])
    return decode


def _settings_errors() -> tuple[type[BaseException], ...]:
    from roost.config import ConfigError
    return (ConfigError,)


def _settings_seeds() -> Iterator[bytes]:
    yield b'listeners = "PLAINTEXT://127.0.0.1:9092"\nlog.dirs = "/tmp/x"\nbroker.id = 1\n'
    yield b'[log]\nretention.ms = 604800000\nsegment.bytes = 1073741824\n[num]\npartitions = 3\n'
    yield b'zookeeper.connect = "127.0.0.1:2181/roost"\nsasl.enabled.mechanisms = "PLAIN,SCRAM-SHA-256"\n'
    yield (b'listener.security.protocol.map = "PLAINTEXT:PLAINTEXT,SASL:SASL_PLAINTEXT"\n'
           b'listeners = "PLAINTEXT://:9092,SASL://:9093"\nadvertised.listeners = "PLAINTEXT://h:9092,SASL://h:9093"\n')
    yield b'auto.create.topics.enable = false\nmessage.max.bytes = 1048588\ndefault.replication.factor = 3\n'


TARGETS: dict[str, FuzzTarget] = {target.name: target for target in (
    FuzzTarget("kafka_request", "a Kafka request frame (header and body) of every advertised API and version",
               _kafka_request_setup, _kafka_errors, _kafka_request_seeds, ("roost.wire.kafka",), max_len=16384),
    FuzzTarget("kafka_response", "a Kafka response body (api key, version in front): what Roost's clients read",
               _kafka_response_setup, _kafka_errors, _kafka_response_seeds, ("roost.wire.kafka",), max_len=16384),
    FuzzTarget("consumer_protocol", "JoinGroup subscription and SyncGroup assignment metadata",
               _consumer_protocol_setup, _kafka_errors, _consumer_protocol_seeds, ("roost.wire.kafka",)),
    FuzzTarget("record_batch", "RecordBatch v2: CRC, header, every codec, the record and columnar decoders",
               _records_setup, _records_errors, _records_seeds, ("roost.wire.kafka.record",),
               memory_limit=96 << 20),
    FuzzTarget("zk_server", "a ZooKeeper client's byte stream as the keeper reads it (connect, jute requests)",
               _zk_server_setup, _zk_errors, _zk_server_seeds, ("roost.wire.zk",)),
    FuzzTarget("zk_client", "a ZooKeeper server's replies and watch events as the broker's client reads them",
               _zk_client_setup, _zk_errors, _zk_client_seeds, ("roost.wire.zk",)),
    FuzzTarget("keeper_state", "the keeper's replicated batches, tree snapshots and touch messages",
               _keeper_setup, _zk_errors, _keeper_seeds, ("roost.keeper", "roost.wire.zk")),
    FuzzTarget("raft", "Raft peer messages: frame stream, body behind the CRC, hello",
               _raft_setup, _raft_errors, _raft_seeds, ("roost.raft",)),
    FuzzTarget("sasl", "SASL before login: ApiVersions, SaslHandshake, SaslAuthenticate, PLAIN, SCRAM, raw v0 tokens",
               _sasl_setup, _sasl_errors, _sasl_seeds, ("roost.broker.security",)),
    FuzzTarget("console_params", "the console's numeric and payload query/body values",
               _console_setup, _console_errors, _console_seeds, ("roost.console.params",)),
    FuzzTarget("settings_toml", "a broker settings file (TOML) and every setting's parser",
               _settings_setup, _settings_errors, _settings_seeds, ("roost.config",)),
)}
