"""The REST proxy: Confluent REST Proxy v3 (clusters, topics, partitions, produce records) and v2
(topics, produce, consumers: create, subscribe, read, commit, delete), on the schema registry's
listener and with its authentication. Kafka is reached through confluent-kafka clients, never
the broker's insides; schema-encoded records go through the registry in this same process.

Limits: at most MAX_CONSUMERS consumer instances (an instance idle for
consumer.instance.timeout.ms, 5 minutes, is closed), MAX_RECORDS_PER_PRODUCE records per request,
bodies bounded by the app's client_max_size, reads bounded by max_bytes and timeout.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from roost.registry import errors, schemas
from roost.registry.security import Security
from roost.registry.service import RegisterRequest, Registry
from roost.restproxy import codec

V2 = "application/vnd.kafka.v2+json"
MAX_CONSUMERS = 100
MAX_RECORDS_PER_PRODUCE = 1000
INSTANCE_TIMEOUT_S = 300.0
MAX_READ_TIMEOUT_MS = 30_000
FORMATS = ("binary", "json", "avro", "jsonschema", "protobuf")
SCHEMA_TYPES = {"AVRO": schemas.AVRO, "JSONSCHEMA": schemas.JSON, "PROTOBUF": schemas.PROTOBUF}


def reply(body: Any, status: int = 200, content_type: str = "application/json") -> web.Response:
    return web.Response(text=json.dumps(body), status=status, content_type=content_type)


def refuse(status: int, code: int, message: str) -> errors.RegistryError:
    return errors.RegistryError(status, code, message)


async def json_body(request: web.Request) -> Any:
    raw = await request.read()
    try:
        return json.loads(raw) if raw else {}
    except (ValueError, RecursionError):
        raise refuse(400, 400, "the request body is not JSON") from None


@dataclass
class Instance:
    group: str
    name: str
    format: str
    consumer: Consumer
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    used: float = field(default_factory=time.monotonic)


class RestProxy:
    def __init__(self, bootstrap: str, client_settings: dict[str, str], registry: Registry, security: Security,
                 base_url: str) -> None:
        self.base = {"bootstrap.servers": bootstrap, **client_settings}
        self.registry = registry
        self.security = security
        self.base_url = base_url.rstrip("/")
        self._admin: AdminClient | None = None
        self._producer: Producer | None = None
        self._poller: asyncio.Task[None] | None = None
        self._watermarks: Consumer | None = None
        self.instances: dict[tuple[str, str], Instance] = {}

    # ---- clients ----

    def admin(self) -> AdminClient:
        if self._admin is None:
            self._admin = AdminClient({**self.base, "client.id": "roost-rest-proxy"})
        return self._admin

    def producer(self) -> Producer:
        if self._producer is None:
            self._producer = Producer({**self.base, "client.id": "roost-rest-proxy", "acks": "all",
                                       "enable.idempotence": True, "linger.ms": 1})
            self._poller = asyncio.ensure_future(self._poll())
        return self._producer

    def watermark_client(self) -> Consumer:
        if self._watermarks is None:
            self._watermarks = Consumer({**self.base, "group.id": f"roost-rest-proxy-watermarks-{uuid.uuid4()}",
                                         "enable.auto.commit": False, "client.id": "roost-rest-proxy watermarks"})
        return self._watermarks

    async def _poll(self) -> None:
        while True:
            assert self._producer is not None
            await asyncio.to_thread(self._producer.poll, 0.1)

    async def close(self) -> None:
        if self._poller is not None:
            self._poller.cancel()
        if self._producer is not None:
            await asyncio.to_thread(self._producer.flush, 5)
        for instance in list(self.instances.values()):
            await asyncio.to_thread(instance.consumer.close)
        self.instances.clear()
        if self._watermarks is not None:
            await asyncio.to_thread(self._watermarks.close)

    async def metadata(self, topic: str | None = None) -> Any:
        try:
            return await asyncio.to_thread(self.admin().list_topics, topic, 10)
        except KafkaException as error:
            raise refuse(500, 50002, f"Kafka did not answer: {error}") from None

    async def cluster_id(self) -> str:
        return str((await self.metadata()).cluster_id)

    async def check_cluster(self, request: web.Request) -> str:
        cluster = await self.cluster_id()
        if request.match_info["cluster"] != cluster:
            raise refuse(404, 404, f"Cluster {request.match_info['cluster']} not found")
        return cluster

    async def topic_metadata(self, name: str) -> Any:
        found = (await self.metadata()).topics.get(name)
        if found is None or found.error is not None:
            raise refuse(404, 40401, f"Topic {name} not found.")
        return found

    def authorize(self, request: web.Request, operation: str, topic: str) -> None:
        """Topic access under the registry's rules (PATTERN matched against the topic)."""
        if not self.security.allowed(request["principal"], operation, topic):
            raise refuse(403, 40301, f"{request['principal']} may not {operation.lower()} topic {topic!r}")

    # ---- v3: clusters, topics, partitions ----

    def _url(self, *parts: object) -> str:
        return "/".join([self.base_url, "v3", "clusters", *[str(p) for p in parts]])

    def _cluster_body(self, cluster: str) -> dict[str, Any]:
        return {"kind": "KafkaCluster", "metadata": {"self": self._url(cluster), "resource_name": f"crn:///kafka={cluster}"},
                "cluster_id": cluster, "topics": {"related": self._url(cluster, "topics")}}

    def _topic_body(self, cluster: str, topic: Any) -> dict[str, Any]:
        partitions = topic.partitions
        return {"kind": "KafkaTopic", "metadata": {"self": self._url(cluster, "topics", topic.topic),
                                                   "resource_name": f"crn:///kafka={cluster}/topic={topic.topic}"},
                "cluster_id": cluster, "topic_name": topic.topic, "is_internal": topic.topic.startswith("__"),
                "replication_factor": len(partitions[0].replicas) if partitions else 0,
                "partitions_count": len(partitions),
                "partitions": {"related": self._url(cluster, "topics", topic.topic, "partitions")}}

    def _partition_body(self, cluster: str, topic: str, partition: Any) -> dict[str, Any]:
        return {"kind": "KafkaPartition",
                "metadata": {"self": self._url(cluster, "topics", topic, "partitions", partition.id)},
                "cluster_id": cluster, "topic_name": topic, "partition_id": partition.id,
                "leader": {"related": self._url(cluster, "brokers", partition.leader)}}

    async def clusters(self, request: web.Request) -> web.Response:
        cluster = await self.cluster_id()
        return reply({"kind": "KafkaClusterList", "metadata": {"self": self._url(), "next": None},
                      "data": [self._cluster_body(cluster)]})

    async def cluster(self, request: web.Request) -> web.Response:
        return reply(self._cluster_body(await self.check_cluster(request)))

    async def topics(self, request: web.Request) -> web.Response:
        cluster = await self.check_cluster(request)
        metadata = await self.metadata()
        data = [self._topic_body(cluster, t) for name, t in sorted(metadata.topics.items())
                if t.error is None and self.security.allowed(request["principal"], "READ", name)]
        return reply({"kind": "KafkaTopicList", "metadata": {"self": self._url(cluster, "topics"), "next": None},
                      "data": data})

    async def topic(self, request: web.Request) -> web.Response:
        cluster = await self.check_cluster(request)
        name = request.match_info["topic"]
        self.authorize(request, "READ", name)
        return reply(self._topic_body(cluster, await self.topic_metadata(name)))

    async def create_topic(self, request: web.Request) -> web.Response:
        cluster = await self.check_cluster(request)
        body = await json_body(request)
        if not isinstance(body, dict) or not isinstance(body.get("topic_name"), str) or not body["topic_name"]:
            raise refuse(400, 400, "topic_name (a string) is required")
        name = body["topic_name"]
        self.authorize(request, "WRITE", name)
        partitions = body.get("partitions_count", -1)
        replication = body.get("replication_factor", -1)
        configs = body.get("configs") or []
        if not isinstance(partitions, int) or not isinstance(replication, int) or not isinstance(configs, list):
            raise refuse(400, 400, "partitions_count and replication_factor are integers, configs a list")
        try:
            config = {str(c["name"]): str(c["value"]) for c in configs}
        except (KeyError, TypeError):
            raise refuse(400, 400, "each config is {\"name\", \"value\"}") from None
        future = self.admin().create_topics([NewTopic(name, partitions, replication, config=config)])[name]
        try:
            await asyncio.to_thread(future.result, 30)
        except KafkaException as error:
            kafka_error = error.args[0]
            status = 409 if kafka_error.name() == "TOPIC_ALREADY_EXISTS" else 400
            raise refuse(status, 40002 if status == 409 else 400, kafka_error.str()) from None
        return reply(self._topic_body(cluster, await self.topic_metadata(name)), 201)

    async def delete_topic(self, request: web.Request) -> web.Response:
        await self.check_cluster(request)
        name = request.match_info["topic"]
        self.authorize(request, "WRITE", name)
        await self.topic_metadata(name)
        future = self.admin().delete_topics([name])[name]
        try:
            await asyncio.to_thread(future.result, 30)
        except KafkaException as error:
            raise refuse(400, 400, error.args[0].str()) from None
        return web.Response(status=204)

    async def partitions(self, request: web.Request) -> web.Response:
        cluster = await self.check_cluster(request)
        name = request.match_info["topic"]
        self.authorize(request, "READ", name)
        topic = await self.topic_metadata(name)
        return reply({"kind": "KafkaPartitionList", "metadata": {"self": self._url(cluster, "topics", name, "partitions"),
                                                                 "next": None},
                      "data": [self._partition_body(cluster, name, p) for _, p in sorted(topic.partitions.items())]})

    async def partition(self, request: web.Request) -> web.Response:
        cluster = await self.check_cluster(request)
        name = request.match_info["topic"]
        self.authorize(request, "READ", name)
        topic = await self.topic_metadata(name)
        try:
            found = topic.partitions[int(request.match_info["partition"])]
        except (KeyError, ValueError):
            raise refuse(404, 40402, f"Partition {request.match_info['partition']} not found.") from None
        return reply(self._partition_body(cluster, name, found))

    # ---- v3: produce ----

    def _encode_v3(self, topic: str, part: Any, is_key: bool) -> tuple[bytes | None, str | None]:
        """One key or value of a v3 produce request: (bytes, type)."""
        if part is None:
            return None, None
        if not isinstance(part, dict):
            raise refuse(400, 400, "key and value are objects: {\"type\", \"data\", ...}")
        kind = str(part.get("type") or ("AVRO" if "schema_id" in part or "schema" in part else "BINARY")).upper()
        data = part.get("data")
        if kind == "BINARY":
            if data is None:
                return None, kind
            try:
                return base64.b64decode(str(data), validate=True), kind
            except (binascii.Error, ValueError):
                raise refuse(400, 400, "BINARY data must be base64") from None
        if kind == "STRING":
            return (None if data is None else str(data).encode()), kind
        if kind == "JSON":
            return json.dumps(data).encode(), kind
        if kind not in SCHEMA_TYPES:
            raise refuse(400, 400, f"unknown type {kind}: BINARY, JSON, STRING, AVRO, JSONSCHEMA or PROTOBUF")
        schema_id = self._schema_id_for(topic, part, SCHEMA_TYPES[kind], is_key)
        return codec.encode_with_schema(self.registry, schema_id, data), kind

    def _schema_id_for(self, topic: str, part: dict[str, Any], schema_type: str, is_key: bool) -> int:
        if isinstance(part.get("schema_id"), int):
            return int(part["schema_id"])
        subject = part.get("subject") or f"{topic}-{'key' if is_key else 'value'}"
        if isinstance(part.get("schema"), str):
            record = self.registry.lookup(subject, RegisterRequest(part["schema"], schema_type, [], None, None),
                                          False, False)
            return record.id
        version = part.get("schema_version", -1)
        return self.registry.version_or_404(str(subject), int(version) if isinstance(version, int) else -1, False).id

    async def _produce(self, topic: str, partition: int | None, key: bytes | None, value: bytes | None,
                       headers: list[tuple[str, bytes]], timestamp: int | None) -> Any:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[Any] = loop.create_future()

        def delivered(error: Any, message: Any) -> None:
            def settle() -> None:
                if not done.done():
                    if error is not None:
                        done.set_exception(refuse(500, 50002, str(error)))
                    else:
                        done.set_result(message)
            loop.call_soon_threadsafe(settle)

        kwargs: dict[str, Any] = {"key": key, "value": value, "on_delivery": delivered, "headers": headers or None}
        if partition is not None:
            kwargs["partition"] = partition
        if timestamp is not None:
            kwargs["timestamp"] = timestamp
        try:
            self.producer().produce(topic, **kwargs)
        except (KafkaException, BufferError, TypeError, ValueError) as error:
            raise refuse(400, 400, f"cannot produce: {error}") from None
        return await asyncio.wait_for(done, 60)

    async def produce_v3(self, request: web.Request) -> web.Response:
        cluster = await self.check_cluster(request)
        topic = request.match_info["topic"]
        self.authorize(request, "WRITE", topic)
        await self.topic_metadata(topic)
        raw = (await request.read()).decode(errors="replace")
        decoder, position, answers = json.JSONDecoder(), 0, []
        # One task per record, started in order: each hands its record to the producer in its
        # first step, so the records are pipelined (and kept in order by the idempotent producer).
        while position < len(raw) and len(answers) < MAX_RECORDS_PER_PRODUCE:
            while position < len(raw) and raw[position].isspace():
                position += 1
            if position >= len(raw):
                break
            try:
                body, position = decoder.raw_decode(raw, position)
            except (ValueError, RecursionError):
                raise refuse(400, 400, "the body is not a JSON object (or a stream of them)") from None
            answers.append(asyncio.ensure_future(self._produce_one(cluster, topic, body)))
        if not answers:
            raise refuse(400, 400, "no record given")
        done = await asyncio.gather(*answers, return_exceptions=True)
        failed = next((d for d in done if isinstance(d, BaseException)), None)
        if failed is not None and len(done) == 1:
            raise failed
        lines = [json.dumps(d.body() if isinstance(d, errors.RegistryError) else d) for d in done
                 if not isinstance(d, BaseException) or isinstance(d, errors.RegistryError)]
        if failed is not None and not isinstance(failed, errors.RegistryError):
            raise failed
        return web.Response(text="\n".join(lines), content_type="application/json")

    async def _produce_one(self, cluster: str, topic: str, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise refuse(400, 400, "a record is a JSON object")
        partition = body.get("partition_id")
        if partition is not None and not isinstance(partition, int):
            raise refuse(400, 400, "partition_id is an integer")
        headers = []
        for header in body.get("headers") or []:
            if not isinstance(header, dict) or not isinstance(header.get("name"), str):
                raise refuse(400, 400, "a header is {\"name\", \"value\" (base64)}")
            try:
                headers.append((header["name"], base64.b64decode(str(header.get("value") or ""), validate=True)))
            except (binascii.Error, ValueError):
                raise refuse(400, 400, "a header's value is base64") from None
        key, key_type = self._encode_v3(topic, body.get("key"), True)
        value, value_type = self._encode_v3(topic, body.get("value"), False)
        timestamp = body.get("timestamp")
        stamp = None
        if isinstance(timestamp, str):
            from datetime import datetime

            try:
                stamp = int(datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp() * 1000)
            except ValueError:
                raise refuse(400, 400, "timestamp is an ISO-8601 date-time") from None
        message = await self._produce(topic, partition, key, value, headers, stamp)
        _, millis = message.timestamp()
        answer: dict[str, Any] = {"error_code": 200, "cluster_id": cluster, "topic_name": topic,
                                  "partition_id": message.partition(), "offset": message.offset(),
                                  "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(millis / 1000))
                                  + f".{millis % 1000:03d}Z"}
        if key_type is not None:
            answer["key"] = {"type": key_type, "size": len(key or b"")}
        if value_type is not None:
            answer["value"] = {"type": value_type, "size": len(value or b"")}
        return answer

    # ---- v2: topics and produce ----

    async def topics_v2(self, request: web.Request) -> web.Response:
        metadata = await self.metadata()
        names = sorted(n for n, t in metadata.topics.items()
                       if t.error is None and self.security.allowed(request["principal"], "READ", n))
        return reply(names, content_type=V2)

    async def brokers_v2(self, request: web.Request) -> web.Response:
        metadata = await self.metadata()
        return reply({"brokers": sorted(metadata.brokers)}, content_type=V2)

    def _partitions_v2(self, topic: Any) -> list[dict[str, Any]]:
        return [{"partition": number, "leader": p.leader,
                 "replicas": [{"broker": r, "leader": r == p.leader, "in_sync": r in p.isrs} for r in p.replicas]}
                for number, p in sorted(topic.partitions.items())]

    async def topic_v2(self, request: web.Request) -> web.Response:
        name = request.match_info["topic"]
        self.authorize(request, "READ", name)
        topic = await self.topic_metadata(name)
        configs: dict[str, str] = {}
        resource = ConfigResource(ConfigResource.Type.TOPIC, name)
        try:
            described = await asyncio.to_thread(self.admin().describe_configs([resource])[resource].result, 10)
            configs = {k: v.value for k, v in described.items() if not v.is_default and v.value is not None}
        except KafkaException as error:
            raise refuse(500, 50002, f"Kafka did not answer: {error}") from None
        return reply({"name": name, "configs": configs, "partitions": self._partitions_v2(topic)}, content_type=V2)

    async def partitions_v2(self, request: web.Request) -> web.Response:
        name = request.match_info["topic"]
        self.authorize(request, "READ", name)
        return reply(self._partitions_v2(await self.topic_metadata(name)), content_type=V2)

    async def _partition_v2(self, request: web.Request) -> tuple[str, int, dict[str, Any]]:
        name = request.match_info["topic"]
        self.authorize(request, "READ", name)
        topic = await self.topic_metadata(name)
        try:
            number = int(request.match_info["partition"])
        except ValueError:
            number = -1
        found = next((p for p in self._partitions_v2(topic) if p["partition"] == number), None)
        if found is None:
            raise refuse(404, 40402, f"Partition {request.match_info['partition']} not found.")
        return name, number, found

    async def partition_v2(self, request: web.Request) -> web.Response:
        return reply((await self._partition_v2(request))[2], content_type=V2)

    async def partition_offsets_v2(self, request: web.Request) -> web.Response:
        """{"beginning_offset", "end_offset"}: the log start and the high watermark, asked of the
        partition's leader (its metadata refreshed first: a leader that moved is found)."""
        name, number, _ = await self._partition_v2(request)

        def watermarks() -> tuple[int, int]:
            consumer = self.watermark_client()
            consumer.list_topics(name, timeout=10)
            low, high = consumer.get_watermark_offsets(TopicPartition(name, number), 10, False)
            return int(low), int(high)
        try:
            low, high = await asyncio.to_thread(watermarks)
        except KafkaException as error:
            raise refuse(500, 50002, f"Kafka did not answer: {error}") from None
        return reply({"beginning_offset": low, "end_offset": high}, content_type=V2)

    async def produce_v2(self, request: web.Request) -> web.Response:
        topic = request.match_info["topic"]
        self.authorize(request, "WRITE", topic)
        await self.topic_metadata(topic)
        kind = (request.content_type or "").removeprefix("application/vnd.kafka.").split(".")[0]
        body = await json_body(request)
        if not isinstance(body, dict) or not isinstance(body.get("records"), list):
            raise refuse(422, 422, "the body is {\"records\": [...]}")
        if len(body["records"]) > MAX_RECORDS_PER_PRODUCE:
            raise refuse(422, 422, f"at most {MAX_RECORDS_PER_PRODUCE} records per request")
        value_schema_id = body.get("value_schema_id")
        key_schema_id = body.get("key_schema_id")
        if kind in ("avro", "jsonschema", "protobuf"):
            schema_type = {"avro": schemas.AVRO, "jsonschema": schemas.JSON, "protobuf": schemas.PROTOBUF}[kind]
            if value_schema_id is None and isinstance(body.get("value_schema"), str):
                value_schema_id = (await self.registry.register(f"{topic}-value", RegisterRequest(
                    body["value_schema"], schema_type, [], None, None), False)).id
            if key_schema_id is None and isinstance(body.get("key_schema"), str):
                key_schema_id = (await self.registry.register(f"{topic}-key", RegisterRequest(
                    body["key_schema"], schema_type, [], None, None), False)).id
            if value_schema_id is None:
                raise refuse(422, 42202, "value_schema or value_schema_id is needed for this format")
        offsets = []
        for record in body["records"]:
            if not isinstance(record, dict):
                raise refuse(422, 422, "a record is an object")
            key = self._encode_v2(kind, record.get("key"), key_schema_id)
            value = self._encode_v2(kind, record.get("value"), value_schema_id)
            partition = record.get("partition")
            message = await self._produce(topic, partition if isinstance(partition, int) else None, key, value, [], None)
            offsets.append({"partition": message.partition(), "offset": message.offset(), "error_code": None,
                            "error": None})
        return reply({"key_schema_id": key_schema_id, "value_schema_id": value_schema_id, "offsets": offsets},
                     content_type=V2)

    def _encode_v2(self, kind: str, data: Any, schema_id: Any) -> bytes | None:
        if data is None:
            return None
        if kind == "binary":
            try:
                return base64.b64decode(str(data), validate=True)
            except (binascii.Error, ValueError):
                raise refuse(422, 422, "binary keys and values are base64") from None
        if kind in ("avro", "jsonschema", "protobuf"):
            if schema_id is None:
                raise refuse(422, 42201, "key_schema or key_schema_id is needed for this format")
            return codec.encode_with_schema(self.registry, int(schema_id), data)
        return json.dumps(data).encode()

    # ---- v2: consumers ----

    def _instance(self, request: web.Request) -> Instance:
        self._expire()
        found = self.instances.get((request.match_info["group"], request.match_info["instance"]))
        if found is None:
            raise refuse(404, 40403, "Consumer instance not found.")
        found.used = time.monotonic()
        return found

    def _expire(self) -> None:
        now = time.monotonic()
        for key, instance in list(self.instances.items()):
            if now - instance.used > INSTANCE_TIMEOUT_S:
                del self.instances[key]
                instance.consumer.close()

    async def create_consumer(self, request: web.Request) -> web.Response:
        group = request.match_info["group"]
        body = await json_body(request)
        if not isinstance(body, dict):
            raise refuse(422, 422, "the body is a JSON object")
        self._expire()
        if len(self.instances) >= MAX_CONSUMERS:
            raise refuse(429, 42901, f"at most {MAX_CONSUMERS} consumer instances")
        name = str(body.get("name") or f"rest-consumer-{uuid.uuid4()}")
        if (group, name) in self.instances:
            raise refuse(409, 40902, f"Consumer with specified consumer ID {name} already exists in group {group}.")
        form = str(body.get("format") or "binary").lower()
        if form not in FORMATS:
            raise refuse(422, 42204, f"Invalid format {form}: one of {', '.join(FORMATS)}")
        reset = str(body.get("auto.offset.reset") or "latest")
        if reset not in ("earliest", "latest", "smallest", "largest"):
            raise refuse(422, 422, "auto.offset.reset is earliest or latest")
        auto_commit = str(body.get("auto.commit.enable", "false")).lower() == "true"
        consumer = Consumer({**self.base, "group.id": group, "client.id": f"roost-rest-proxy {name}",
                             "auto.offset.reset": reset, "enable.auto.commit": auto_commit})
        self.instances[(group, name)] = Instance(group, name, form, consumer)
        return reply({"instance_id": name, "base_uri": f"{self.base_url}/consumers/{group}/instances/{name}"},
                     content_type=V2)

    async def delete_consumer(self, request: web.Request) -> web.Response:
        instance = self._instance(request)
        del self.instances[(instance.group, instance.name)]
        async with instance.lock:
            await asyncio.to_thread(instance.consumer.close)
        return web.Response(status=204)

    async def subscribe(self, request: web.Request) -> web.Response:
        instance = self._instance(request)
        body = await json_body(request)
        topics = body.get("topics") if isinstance(body, dict) else None
        pattern = body.get("topic_pattern") if isinstance(body, dict) else None
        if isinstance(pattern, str):
            topics = ["^" + pattern]
        if not isinstance(topics, list) or not topics or not all(isinstance(t, str) and t for t in topics):
            raise refuse(422, 422, "topics (a list of names) or topic_pattern is required")
        for topic in topics:
            self.authorize(request, "READ", topic)
        async with instance.lock:
            await asyncio.to_thread(instance.consumer.subscribe, topics)
        return web.Response(status=204)

    async def subscription(self, request: web.Request) -> web.Response:
        instance = self._instance(request)
        async with instance.lock:
            assignment = await asyncio.to_thread(instance.consumer.assignment)
        return reply({"topics": sorted({tp.topic for tp in assignment})}, content_type=V2)

    async def unsubscribe(self, request: web.Request) -> web.Response:
        instance = self._instance(request)
        async with instance.lock:
            await asyncio.to_thread(instance.consumer.unsubscribe)
        return web.Response(status=204)

    async def records(self, request: web.Request) -> web.Response:
        instance = self._instance(request)
        wanted = (request.headers.get("Accept") or "").removeprefix("application/vnd.kafka.").split(".")[0]
        if wanted in FORMATS and wanted != instance.format:
            raise refuse(406, 40601, "The requested embedded data format does not match the deserializer for this "
                                     "consumer instance")
        try:
            timeout_ms = min(MAX_READ_TIMEOUT_MS, max(0, int(request.query.get("timeout", "1000"))))
            max_bytes = max(1, int(request.query.get("max_bytes", str(1 << 20))))
        except ValueError:
            raise refuse(422, 422, "timeout and max_bytes are integers") from None
        out, size = [], 0
        deadline = time.monotonic() + timeout_ms / 1000
        async with instance.lock:
            while size < max_bytes:
                left = deadline - time.monotonic()
                messages = await asyncio.to_thread(instance.consumer.consume, 500, max(0.0, min(left, 0.5)))
                for message in messages:
                    if message.error() is not None:
                        continue
                    size += len(message.value() or b"") + len(message.key() or b"")
                    out.append({"topic": message.topic(), "key": self._decode(instance.format, message.key()),
                                "value": self._decode(instance.format, message.value()),
                                "partition": message.partition(), "offset": message.offset()})
                if out or time.monotonic() >= deadline:
                    break
        return reply(out, content_type=f"application/vnd.kafka.{instance.format}.v2+json")

    def _decode(self, form: str, data: bytes | None) -> Any:
        if data is None:
            return None
        if form == "binary":
            return codec.b64(data)
        if form == "json":
            try:
                return json.loads(data)
            except ValueError:
                return data.decode(errors="replace")
        try:
            return codec.decode_with_schema(self.registry, data)
        except (ValueError, errors.RegistryError) as error:
            return {"error": f"cannot decode: {error}"}

    async def commit(self, request: web.Request) -> web.Response:
        instance = self._instance(request)
        body = await json_body(request)
        offsets = body.get("offsets") if isinstance(body, dict) else None
        async with instance.lock:
            try:
                if offsets:
                    partitions = [TopicPartition(str(o["topic"]), int(o["partition"]), int(o["offset"]) + 1)
                                  for o in offsets]
                    await asyncio.to_thread(instance.consumer.commit, offsets=partitions, asynchronous=False)
                else:
                    await asyncio.to_thread(instance.consumer.commit, asynchronous=False)
            except (KeyError, TypeError, ValueError):
                raise refuse(422, 422, "each offset is {\"topic\", \"partition\", \"offset\"}") from None
            except KafkaException as error:
                if error.args[0].name() != "_NO_OFFSET":
                    raise refuse(500, 50002, error.args[0].str()) from None
        return web.Response(status=204)

    async def committed(self, request: web.Request) -> web.Response:
        instance = self._instance(request)
        body = await json_body(request) if request.can_read_body else {}
        wanted = body.get("partitions") if isinstance(body, dict) else None
        async with instance.lock:
            try:
                partitions = [TopicPartition(str(p["topic"]), int(p["partition"])) for p in wanted] if wanted \
                    else await asyncio.to_thread(instance.consumer.assignment)
            except (KeyError, TypeError, ValueError):
                raise refuse(422, 422, "each partition is {\"topic\", \"partition\"}") from None
            found = await asyncio.to_thread(instance.consumer.committed, partitions, 10) if partitions else []
        return reply({"offsets": [{"topic": tp.topic, "partition": tp.partition,
                                   "offset": tp.offset - 1 if tp.offset >= 0 else tp.offset, "metadata": ""}
                                  for tp in found]}, content_type=V2)

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/v3/clusters", self.clusters),
            web.get("/v3/clusters/{cluster}", self.cluster),
            web.get("/v3/clusters/{cluster}/topics", self.topics),
            web.post("/v3/clusters/{cluster}/topics", self.create_topic),
            web.get("/v3/clusters/{cluster}/topics/{topic}", self.topic),
            web.delete("/v3/clusters/{cluster}/topics/{topic}", self.delete_topic),
            web.get("/v3/clusters/{cluster}/topics/{topic}/partitions", self.partitions),
            web.get("/v3/clusters/{cluster}/topics/{topic}/partitions/{partition}", self.partition),
            web.post("/v3/clusters/{cluster}/topics/{topic}/records", self.produce_v3),
            web.get("/topics", self.topics_v2),
            web.get("/topics/{topic}", self.topic_v2),
            web.get("/topics/{topic}/partitions", self.partitions_v2),
            web.get("/topics/{topic}/partitions/{partition}", self.partition_v2),
            web.get("/topics/{topic}/partitions/{partition}/offsets", self.partition_offsets_v2),
            web.get("/brokers", self.brokers_v2),
            web.post("/topics/{topic}", self.produce_v2),
            web.post("/consumers/{group}", self.create_consumer),
            web.delete("/consumers/{group}/instances/{instance}", self.delete_consumer),
            web.post("/consumers/{group}/instances/{instance}/subscription", self.subscribe),
            web.get("/consumers/{group}/instances/{instance}/subscription", self.subscription),
            web.delete("/consumers/{group}/instances/{instance}/subscription", self.unsubscribe),
            web.get("/consumers/{group}/instances/{instance}/records", self.records),
            web.post("/consumers/{group}/instances/{instance}/offsets", self.commit),
            web.get("/consumers/{group}/instances/{instance}/offsets", self.committed),
        ]
