"""`roost schema register|get|list|delete|check` against a registry served over HTTP."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from roost.cli.main import main
from tests.registry.local_registry import local_registry


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with local_registry() as (served, _registry):
        yield served


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(list(args))
    out = capsys.readouterr()
    return status, out.out, out.err


def test_register_get_list_check_delete(url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    v1 = tmp_path / "user.avsc"
    v1.write_text(json.dumps({"type": "record", "name": "U", "fields": [{"name": "a", "type": "int"}]}))
    bad = tmp_path / "bad.avsc"
    bad.write_text(json.dumps({"type": "record", "name": "U", "fields": [{"name": "a", "type": "int"},
                                                                         {"name": "b", "type": "int"}]}))
    status, out, _ = run(capsys, "schema", "register", "team/users-value", str(v1), "--registry", url)
    assert status == 0 and out.startswith("1")
    status, out, _ = run(capsys, "schema", "get", "team/users-value", "--registry", url)
    assert json.loads(out)["version"] == 1
    assert run(capsys, "schema", "list", "--registry", url)[1].split() == ["team/users-value"]
    status, out, err = run(capsys, "schema", "check", "team/users-value", str(bad), "--registry", url)
    assert status == 1 and "READER_FIELD_MISSING_DEFAULT_VALUE" in out and "incompatible" in err
    status, out, err = run(capsys, "schema", "register", "team/users-value", str(bad), "--registry", url)
    assert status == 1 and "error code 409" in err
    assert run(capsys, "schema", "check", "team/users-value", str(v1), "--registry", url)[1].strip() == "compatible"
    assert run(capsys, "schema", "delete", "team/users-value", "--registry", url)[1].strip() == "deleted [1]"
    assert run(capsys, "schema", "list", "--registry", url)[1].split() == []
    status, _, err = run(capsys, "schema", "get", "--id", "99", "--registry", url)
    assert status == 1 and "40403" in err


def test_protobuf_descriptor_sets_and_an_unreachable_registry(url: str, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    from google.protobuf import descriptor_pb2

    files = descriptor_pb2.FileDescriptorSet()
    proto = files.file.add(name="m.proto", package="m", syntax="proto3")
    proto.message_type.add(name="M").field.add(name="f", number=1, type=5, label=1)
    path = tmp_path / "m.desc"
    path.write_bytes(files.SerializeToString())
    status, _out, _ = run(capsys, "schema", "register", "m-value", str(path), "--registry", url)
    assert status == 0
    text = tmp_path / "m.proto"
    text.write_text('syntax = "proto3";')
    assert "descriptor set" in run(capsys, "schema", "register", "m-value", str(text), "--registry", url)[2]
    status, _, err = run(capsys, "schema", "list", "--registry", "http://127.0.0.1:9")
    assert status == 1 and "cannot reach" in err
