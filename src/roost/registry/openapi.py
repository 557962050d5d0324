"""The OpenAPI 3 document of the schema registry and the REST proxy, served at /openapi.json.
tests/registry/test_openapi.py keeps it true: every route the app serves is in it and every path
in it is served; schemathesis fuzzes every operation from it."""

from __future__ import annotations

from typing import Any

ANY_JSON: dict[str, Any] = {}
SCHEMA_BODY = {"type": "object", "properties": {
    "schema": {"type": "string"}, "schemaType": {"type": "string", "enum": ["AVRO", "JSON", "PROTOBUF"]},
    "references": {"type": "array", "items": {"type": "object", "properties": {
        "name": {"type": "string"}, "subject": {"type": "string"}, "version": {"type": "integer"}}}},
    "metadata": {"type": "object"}, "ruleSet": {"type": "object"}, "id": {"type": "integer"},
    "version": {"type": "integer"}}, "required": ["schema"]}
CONFIG_BODY = {"type": "object", "properties": {"compatibility": {"type": "string"}, "normalize": {"type": "boolean"}}}
MODE_BODY = {"type": "object", "properties": {"mode": {"type": "string"}}, "required": ["mode"]}
RECORD_PART = {"type": "object", "properties": {"type": {"type": "string"}, "data": {}, "schema_id": {"type": "integer"},
                                                "subject": {"type": "string"}}}
V3_RECORD = {"type": "object", "properties": {"partition_id": {"type": "integer"}, "key": RECORD_PART,
                                              "value": RECORD_PART, "headers": {"type": "array"}}}
V2_RECORDS = {"type": "object", "properties": {"records": {"type": "array", "items": {"type": "object"}}},
              "required": ["records"]}
CONSUMER = {"type": "object", "properties": {"name": {"type": "string"}, "format": {"type": "string"},
                                             "auto.offset.reset": {"type": "string"}}}
SUBSCRIPTION = {"type": "object", "properties": {"topics": {"type": "array", "items": {"type": "string"}}}}
OFFSETS = {"type": "object", "properties": {"offsets": {"type": "array", "items": {"type": "object"}}}}
TOPIC = {"type": "object", "properties": {"topic_name": {"type": "string"}, "partitions_count": {"type": "integer"},
                                          "replication_factor": {"type": "integer"}}, "required": ["topic_name"]}
BOOL = {"type": "string", "enum": ["true", "false", "True", "False"]}

# path -> {method: (summary, body schema or None, [query parameters], content type of the body)}
REGISTRY_CT = "application/vnd.schemaregistry.v1+json"
OPERATIONS: dict[str, dict[str, tuple[str, Any, list[tuple[str, Any]], str]]] = {
    "/": {"get": ("root", None, [], ""), "post": ("root", ANY_JSON, [], REGISTRY_CT)},
    "/schemas/types": {"get": ("the schema types", None, [], "")},
    "/schemas": {"get": ("schemas, latest or all versions", None,
                         [("subjectPrefix", {"type": "string"}), ("deleted", BOOL), ("latestOnly", BOOL)], "")},
    "/schemas/ids/{id}": {"get": ("a schema by id", None, [("subject", {"type": "string"}),
                                                          ("format", {"type": "string"})], "")},
    "/schemas/ids/{id}/schema": {"get": ("a schema's text by id", None, [], "")},
    "/schemas/ids/{id}/subjects": {"get": ("subjects of an id", None, [("deleted", BOOL)], "")},
    "/schemas/ids/{id}/versions": {"get": ("subject versions of an id", None, [("deleted", BOOL)], "")},
    "/schemas/guids/{guid}": {"get": ("a schema by guid", None, [], "")},
    "/subjects": {"get": ("subjects", None, [("deleted", BOOL), ("deletedOnly", BOOL), ("subjectPrefix",
                                                                                        {"type": "string"})], "")},
    "/subjects/{subject}": {"post": ("look a schema up", SCHEMA_BODY, [("normalize", BOOL), ("deleted", BOOL)],
                                     REGISTRY_CT),
                            "delete": ("delete a subject", None, [("permanent", BOOL)], "")},
    "/subjects/{subject}/versions": {"get": ("versions", None, [("deleted", BOOL)], ""),
                                     "post": ("register", SCHEMA_BODY, [("normalize", BOOL)], REGISTRY_CT)},
    "/subjects/{subject}/versions/{version}": {"get": ("a version", None, [("deleted", BOOL)], ""),
                                               "delete": ("delete a version", None, [("permanent", BOOL)], "")},
    "/subjects/{subject}/versions/{version}/schema": {"get": ("a version's schema text", None, [], "")},
    "/subjects/{subject}/versions/{version}/referencedby": {"get": ("ids referencing a version", None, [], "")},
    "/subjects/{subject}/metadata": {"get": ("latest version with metadata", None,
                                             [("key", {"type": "string"}), ("value", {"type": "string"})], "")},
    "/compatibility/subjects/{subject}/versions": {"post": ("test against all versions", SCHEMA_BODY,
                                                            [("verbose", BOOL)], REGISTRY_CT)},
    "/compatibility/subjects/{subject}/versions/{version}": {"post": ("test against a version", SCHEMA_BODY,
                                                                      [("verbose", BOOL)], REGISTRY_CT)},
    "/config": {"get": ("global config", None, [], ""), "put": ("set global config", CONFIG_BODY, [], REGISTRY_CT),
                "delete": ("reset global config", None, [], "")},
    "/config/{subject}": {"get": ("subject config", None, [("defaultToGlobal", BOOL)], ""),
                          "put": ("set subject config", CONFIG_BODY, [], REGISTRY_CT),
                          "delete": ("delete subject config", None, [], "")},
    "/mode": {"get": ("global mode", None, [], ""), "put": ("set global mode", MODE_BODY, [("force", BOOL)],
                                                            REGISTRY_CT)},
    "/mode/{subject}": {"get": ("subject mode", None, [("defaultToGlobal", BOOL)], ""),
                        "put": ("set subject mode", MODE_BODY, [("force", BOOL)], REGISTRY_CT),
                        "delete": ("delete subject mode", None, [], "")},
    "/contexts": {"get": ("contexts", None, [], "")},
    "/roost/writer": {"get": ("which node writes", None, [], "")},
    "/associations/resources/{namespace}/{resource}": {"get": ("associations (always none)", None, [], "")},
    "/associations": {"post": ("create an association (refused)", ANY_JSON, [], REGISTRY_CT)},
    "/openapi.json": {"get": ("this document", None, [], "")},
}
PROXY_OPERATIONS: dict[str, dict[str, tuple[str, Any, list[tuple[str, Any]], str]]] = {
    "/v3/clusters": {"get": ("clusters", None, [], "")},
    "/v3/clusters/{cluster}": {"get": ("a cluster", None, [], "")},
    "/v3/clusters/{cluster}/topics": {"get": ("topics", None, [], ""),
                                      "post": ("create a topic", TOPIC, [], "application/json")},
    "/v3/clusters/{cluster}/topics/{topic}": {"get": ("a topic", None, [], ""),
                                              "delete": ("delete a topic", None, [], "")},
    "/v3/clusters/{cluster}/topics/{topic}/partitions": {"get": ("partitions", None, [], "")},
    "/v3/clusters/{cluster}/topics/{topic}/partitions/{partition}": {"get": ("a partition", None, [], "")},
    "/v3/clusters/{cluster}/topics/{topic}/records": {"post": ("produce records", V3_RECORD, [], "application/json")},
    "/topics": {"get": ("topic names (v2)", None, [], "")},
    "/topics/{topic}": {"post": ("produce (v2)", V2_RECORDS, [], "application/vnd.kafka.json.v2+json"),
                        "get": ("a topic: configs and partitions (v2)", None, [], "")},
    "/topics/{topic}/partitions": {"get": ("partitions (v2)", None, [], "")},
    "/topics/{topic}/partitions/{partition}": {"get": ("a partition (v2)", None, [], "")},
    "/topics/{topic}/partitions/{partition}/offsets": {"get": ("beginning and end offsets (v2)", None, [], "")},
    "/brokers": {"get": ("broker ids (v2)", None, [], "")},
    "/consumers/{group}": {"post": ("create a consumer", CONSUMER, [], "application/vnd.kafka.v2+json")},
    "/consumers/{group}/instances/{instance}": {"delete": ("delete a consumer", None, [], "")},
    "/consumers/{group}/instances/{instance}/subscription": {
        "post": ("subscribe", SUBSCRIPTION, [], "application/vnd.kafka.v2+json"),
        "get": ("subscription", None, [], ""), "delete": ("unsubscribe", None, [], "")},
    "/consumers/{group}/instances/{instance}/records": {"get": ("read records", None, [
        ("timeout", {"type": "integer", "minimum": 0, "maximum": 2000}), ("max_bytes", {"type": "integer"})], "")},
    "/consumers/{group}/instances/{instance}/offsets": {
        "post": ("commit offsets", OFFSETS, [], "application/vnd.kafka.v2+json"),
        "get": ("committed offsets", None, [], "")},
}


def _operation(path: str, summary: str, body: Any, query: list[tuple[str, Any]], content_type: str) -> dict[str, Any]:
    parameters = [{"name": name, "in": "path", "required": True, "schema": {"type": "string", "minLength": 1}}
                  for name in (p[1:-1] for p in path.split("/") if p.startswith("{"))]
    parameters += [{"name": name, "in": "query", "required": False, "schema": schema} for name, schema in query]
    operation: dict[str, Any] = {"summary": summary, "parameters": parameters, "responses": {
        "200": {"description": "done"}, "204": {"description": "done, no body"},
        "4XX": {"description": "refused: {error_code, message}"}}}
    if body is not None:
        operation["requestBody"] = {"required": True, "content": {content_type: {"schema": body}}}
    return operation


def document(with_proxy: bool = True) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for table in (OPERATIONS, PROXY_OPERATIONS) if with_proxy else (OPERATIONS,):
        for path, methods in table.items():
            paths[path] = {method: _operation(path, *spec) for method, spec in methods.items()}
    return {"openapi": "3.0.3", "info": {"title": "Roost schema registry and REST proxy", "version": "1"},
            "paths": paths}
