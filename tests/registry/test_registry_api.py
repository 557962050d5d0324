"""The registry's HTTP API as Confluent's answers it, through confluent-kafka's SchemaRegistryClient
and plain HTTP (the cases the facts list: codes, booleans as True/False, %2F, deleted=true, modes)."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

warnings.filterwarnings("ignore", category=DeprecationWarning)
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient  # noqa: E402
from confluent_kafka.schema_registry.error import SchemaRegistryError  # noqa: E402

from roost.registry.security import security_of  # noqa: E402
from tests.registry.local_registry import local_registry  # noqa: E402


@pytest.fixture(scope="module")
def served() -> Iterator[str]:
    with local_registry() as (url, _registry):
        yield url


def call(url: str, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url + path, data=data, method=method, headers={
        "Content-Type": "application/vnd.schemaregistry.v1+json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            return reply.status, json.loads(reply.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def avro(name: str, *fields: tuple[str, str]) -> str:
    return json.dumps({"type": "record", "name": name, "fields": [{"name": n, "type": t} for n, t in fields]})


def test_register_is_idempotent_and_ids_are_shared_across_subjects(served: str) -> None:
    sr = SchemaRegistryClient({"url": served})
    schema = Schema(avro("A", ("x", "int")))
    first = sr.register_schema("ida", schema)
    assert sr.register_schema("ida", schema) == first
    assert sr.register_schema("idb", schema) == first
    assert sr.get_versions("ida") == [1]
    assert sorted(sr.get_subjects()) == sorted({*sr.get_subjects(), "ida", "idb"})
    status, body = call(served, "GET", f"/schemas/ids/{first}/versions")
    assert status == 200 and {"subject": "ida", "version": 1} in body and {"subject": "idb", "version": 1} in body
    assert call(served, "GET", f"/schemas/ids/{first}/subjects")[1] == ["ida", "idb"]
    # the id is served whatever subject the deserializer names (it only selects the context)
    assert call(served, "GET", f"/schemas/ids/{first}?subject=elsewhere")[0] == 200


def test_lookup_and_its_errors(served: str) -> None:
    sr = SchemaRegistryClient({"url": served})
    schema = Schema(avro("L", ("x", "int")))
    schema_id = sr.register_schema("look", schema)
    # whitespace and key order do not matter
    spaced = Schema(json.dumps(json.loads(schema.schema_str), indent=4))
    found = sr.lookup_schema("look", spaced)
    assert (found.schema_id, found.version) == (schema_id, 1)
    with pytest.raises(SchemaRegistryError) as missing_subject:
        sr.lookup_schema("never", schema)
    assert missing_subject.value.error_code == 40401
    with pytest.raises(SchemaRegistryError) as missing_schema:
        sr.lookup_schema("look", Schema(avro("L", ("y", "int"))))
    assert missing_schema.value.error_code == 40403


def test_versions_latest_and_bad_versions(served: str) -> None:
    for value in ("0", "-2", "a"):
        status, body = call(served, "GET", f"/subjects/any/versions/{value}")
        assert (status, body["error_code"]) == (422, 42202)
    SchemaRegistryClient({"url": served}).register_schema("lat", Schema('"int"'))
    assert call(served, "GET", "/subjects/lat/versions/LATEST")[1]["version"] == 1
    assert call(served, "GET", "/subjects/lat/versions/-1")[1]["version"] == 1
    assert "schemaType" not in call(served, "GET", "/subjects/lat/versions/1")[1]  # AVRO: omitted


def test_subjects_with_a_slash_stay_whole(served: str) -> None:
    sr = SchemaRegistryClient({"url": served})
    schema_id = sr.register_schema("team/orders-value", Schema('"string"'))
    assert sr.get_latest_version("team/orders-value").schema_id == schema_id
    assert "team/orders-value" in call(served, "GET", "/subjects")[1]


def test_booleans_as_python_prints_them(served: str) -> None:
    sr = SchemaRegistryClient({"url": served})
    sr.register_schema("bools", Schema('"long"'))
    sr.delete_version("bools", 1)
    assert call(served, "GET", "/subjects/bools/versions/1?deleted=True")[0] == 200
    assert call(served, "GET", "/subjects/bools/versions/1?deleted=False")[1]["error_code"] == 40401
    assert "bools" in call(served, "GET", "/subjects?deleted=True")[1]
    assert "bools" in call(served, "GET", "/subjects?deletedOnly=true")[1]
    assert "bools" in call(served, "GET", "/subjects?deleted_only=true")[1]


def test_soft_deleted_versions_and_re_registration(served: str) -> None:
    sr = SchemaRegistryClient({"url": served})
    schema = Schema(avro("D", ("x", "int")))
    first = sr.register_schema("soft", schema)
    assert sr.delete_version("soft", 1) == 1
    _, body = call(served, "DELETE", "/subjects/soft/versions/1")
    assert body["error_code"] == 40406
    again = sr.register_schema("soft", schema)
    assert again == first  # same id, a new version
    assert sr.get_versions("soft") == [2]
    assert call(served, "DELETE", "/subjects/soft/versions/2?permanent=true")[1]["error_code"] == 40407


def test_references_block_deletes_and_are_listed(served: str) -> None:
    sr = SchemaRegistryClient({"url": served})
    sr.register_schema("ref-base", Schema(json.dumps({"type": "record", "name": "Base", "namespace": "r",
                                                       "fields": [{"name": "x", "type": "int"}]})))
    user_id = sr.register_schema("ref-user", Schema(
        json.dumps({"type": "record", "name": "U", "fields": [{"name": "b", "type": "r.Base"}]}), "AVRO",
        [SchemaReference("r.Base", "ref-base", 1)]))
    assert call(served, "GET", "/subjects/ref-base/versions/1/referencedby")[1] == [user_id]
    with pytest.raises(SchemaRegistryError) as referenced:
        sr.delete_subject("ref-base")
    assert referenced.value.error_code == 42206
    body = call(served, "GET", f"/schemas/ids/{user_id}")[1]
    assert body["references"] == [{"name": "r.Base", "subject": "ref-base", "version": 1}]
    status, body = call(served, "POST", "/subjects/ref-x/versions", {"schema": json.dumps(
        {"type": "record", "name": "V", "fields": [{"name": "b", "type": "r.Missing"}]})})
    assert (status, body["error_code"]) == (422, 42201)


def test_config_as_confluent_names_it(served: str) -> None:
    assert call(served, "GET", "/config")[1]["compatibilityLevel"] == "BACKWARD"
    assert call(served, "PUT", "/config/cfg-s", {"compatibility": "none"})[1] == {"compatibility": "NONE"}
    assert call(served, "GET", "/config/cfg-s")[1]["compatibilityLevel"] == "NONE"
    assert call(served, "GET", "/config/cfg-none")[1]["error_code"] == 40408
    assert call(served, "GET", "/config/cfg-none?defaultToGlobal=true")[1]["compatibilityLevel"] == "BACKWARD"
    assert call(served, "PUT", "/config", {"compatibility": "SIDEWAYS"})[1]["error_code"] == 42203
    assert call(served, "DELETE", "/config/cfg-s")[1]["compatibilityLevel"] == "NONE"
    assert call(served, "GET", "/config/cfg-s")[1]["error_code"] == 40408


def test_compatibility_endpoint(served: str) -> None:
    sr = SchemaRegistryClient({"url": served})
    sr.register_schema("cmp", Schema(avro("C", ("x", "int"))))
    bad = Schema(avro("C", ("x", "int"), ("y", "int")))
    assert sr.test_compatibility("cmp", bad) is False
    _, body = call(served, "POST", "/compatibility/subjects/cmp/versions/latest?verbose=true",
                        {"schema": bad.schema_str})
    assert body["is_compatible"] is False and "READER_FIELD_MISSING_DEFAULT_VALUE" in body["messages"][0]
    assert call(served, "POST", "/compatibility/subjects/empty/versions/latest", {"schema": '"int"'})[1] == {
        "is_compatible": True}
    assert call(served, "POST", "/compatibility/subjects/cmp/versions/9", {"schema": '"int"'})[1]["error_code"] == 40402


def test_modes_readonly_and_import_with_explicit_ids(served: str) -> None:
    assert call(served, "GET", "/mode")[1] == {"mode": "READWRITE"}
    assert call(served, "PUT", "/mode/ro", {"mode": "READONLY"})[1] == {"mode": "READONLY"}
    status, body = call(served, "POST", "/subjects/ro/versions", {"schema": '"int"'})
    assert (status, body["error_code"]) == (422, 42205)
    assert call(served, "PUT", "/mode/imp", {"mode": "IMPORT"})[1] == {"mode": "IMPORT"}
    status, body = call(served, "POST", "/subjects/imp/versions", {"schema": '"bytes"', "id": 7777, "version": 3})
    assert status == 200 and body["id"] == 7777 and body["version"] == 3
    status, body = call(served, "POST", "/subjects/imp/versions", {"schema": '"boolean"', "id": 7777, "version": 4})
    assert (status, body["error_code"]) == (422, 42207)
    assert call(served, "PUT", "/mode", {"mode": "SIDEWAYS"})[1]["error_code"] == 42204
    assert call(served, "GET", "/mode/nomode")[1]["error_code"] == 40409
    # ids given by IMPORT are never handed out again
    fresh = SchemaRegistryClient({"url": served}).register_schema("after-import", Schema('"float"'))
    assert fresh > 7777


def test_metadata_and_rule_sets_are_carried_as_given(served: str) -> None:
    body = {"schema": '"double"', "metadata": {"properties": {"owner": "team-a"}},
            "ruleSet": {"domainRules": [{"name": "r", "kind": "CONDITION", "mode": "WRITE", "type": "CEL",
                                         "expr": "true"}]}}
    status, registered = call(served, "POST", "/subjects/meta/versions", body)
    assert status == 200
    got = call(served, "GET", "/subjects/meta/versions/1")[1]
    assert got["metadata"] == body["metadata"] and got["ruleSet"] == body["ruleSet"]
    assert call(served, "GET", "/subjects/meta/metadata?key=owner&value=team-a")[1]["version"] == 1
    plain = call(served, "POST", "/subjects/meta2/versions", {"schema": '"double"'})[1]
    assert plain["id"] != registered["id"]  # other metadata: another schema, another id


def test_protobuf_json_types_and_schema_types(served: str) -> None:
    from google.protobuf import descriptor_pb2

    assert call(served, "GET", "/schemas/types")[1] == ["AVRO", "JSON", "PROTOBUF"]
    file = descriptor_pb2.FileDescriptorProto(name="t.proto", package="t", syntax="proto3")
    file.message_type.add(name="M").field.add(name="f", number=1, type=5, label=1)
    encoded = base64.b64encode(file.SerializeToString()).decode()
    status, body = call(served, "POST", "/subjects/pb/versions", {"schema": encoded, "schemaType": "PROTOBUF"})
    assert status == 200
    got = call(served, "GET", f"/schemas/ids/{body['id']}?format=serialized")[1]
    assert got["schemaType"] == "PROTOBUF"
    assert descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(got["schema"])) == file


def test_client_conventions(served: str) -> None:
    assert call(served, "GET", "/")[1] == {}
    assert call(served, "GET", "/associations/resources/-/orders?resourceType=topic&associationType=value")[1] == []
    assert call(served, "GET", "/contexts")[1] == ["."]
    status, _ = call(served, "POST", "/subjects/x/versions", None)
    assert status == 422
    request = urllib.request.Request(served + "/subjects/x/versions", data=b"{not json", method="POST")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 422


def test_basic_and_bearer_authentication_and_subject_rules() -> None:
    security = security_of("alice:wonder,bob:builder", "svc:tok-123", "User:bob:READ:*;User:bob:WRITE:bob-*", "")
    with local_registry(security) as (url, _registry):
        with pytest.raises(SchemaRegistryError) as anonymous:
            SchemaRegistryClient({"url": url}).get_subjects()
        assert anonymous.value.http_status_code == 401
        with pytest.raises(SchemaRegistryError) as wrong:
            SchemaRegistryClient({"url": url, "basic.auth.user.info": "alice:nope"}).get_subjects()
        assert wrong.value.http_status_code == 401
        bob = SchemaRegistryClient({"url": url, "basic.auth.user.info": "bob:builder"})
        assert bob.register_schema("bob-orders", Schema('"int"')) == 1
        with pytest.raises(SchemaRegistryError) as forbidden:
            bob.register_schema("alice-orders", Schema('"int"'))
        assert forbidden.value.http_status_code == 403
        alice = SchemaRegistryClient({"url": url, "basic.auth.user.info": "alice:wonder"})
        assert alice.get_subjects() == []  # rules exist and none names alice: she sees nothing
        with pytest.raises(SchemaRegistryError) as not_hers:
            alice.register_schema("x", Schema('"int"'))
        assert not_hers.value.http_status_code == 403
        token = SchemaRegistryClient({"url": url, "bearer.auth.credentials.source": "STATIC_TOKEN",
                                      "bearer.auth.token": "tok-123", "bearer.auth.logical.cluster": "lsrc-1",
                                      "bearer.auth.identity.pool.id": "pool-1"})
        assert token.get_subjects() == []  # svc has no rule: it sees no subject
        status, body = call(url, "GET", "/subjects", headers={"Authorization": "Bearer tok-123"})
        assert status == 200
        assert "builder" not in json.dumps(body)
