"""`roost schema`: register, get, list, delete and check schemas in a Confluent-compatible schema
registry (Roost's own, docs/schema-registry.md, or Confluent's), as its REST API has them.

    roost schema register orders-value order.avsc            # prints the id
    roost schema register order-value order.json --type JSON --reference customer=customer:1
    roost schema register pb-value order.desc --type PROTOBUF   # a FileDescriptorSet (protoc -o)
    roost schema get orders-value [--version 2]   |   roost schema get --id 7
    roost schema list                 |   roost schema list orders-value     # its versions
    roost schema delete orders-value [--version 2] [--permanent]
    roost schema check orders-value order-v2.avsc     # exit status 1 when incompatible

The registry is --registry URL (or ROOST_SCHEMA_REGISTRY_URL; default http://127.0.0.1:8081);
--user USER:PASSWORD (the password may be ${env:NAME} or ${file:/path}) sends basic auth. The type
is taken from the file's extension (.avsc AVRO, .json JSON, .desc/.pb PROTOBUF) unless --type.
"""

from __future__ import annotations

import base64
import json
import os
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import click

from roost.cli.client.client_options import CliError

DEFAULT_URL = "http://127.0.0.1:8081"
CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
TYPES = ("AVRO", "JSON", "PROTOBUF")


class Registry:
    def __init__(self, url: str, user: str | None) -> None:
        self.url = url.rstrip("/")
        self.headers = {"Content-Type": CONTENT_TYPE, "Accept": CONTENT_TYPE}
        if user:
            from roost.secret_ref import resolve_secret

            name, _, password = user.partition(":")
            try:
                secret = resolve_secret(password)
            except ValueError as error:
                raise CliError(f"--user: {error}") from None
            self.headers["Authorization"] = "Basic " + base64.b64encode(f"{name}:{secret}".encode()).decode()

    def call(self, method: str, path: str, body: Any = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method, headers=self.headers)
        try:
            with urllib.request.urlopen(request, timeout=60) as reply:
                raw = reply.read()
                return json.loads(raw) if raw else None
        except urllib.error.HTTPError as error:
            try:
                detail = json.loads(error.read())
                message = f"{detail.get('message')} (HTTP {error.code}, error code {detail.get('error_code')})"
            except ValueError:
                message = f"HTTP {error.code}"
            raise CliError(message) from None
        except (urllib.error.URLError, OSError) as error:
            raise CliError(f"cannot reach the schema registry at {self.url}: {getattr(error, 'reason', error)}") \
                from None


def quoted(subject: str) -> str:
    return urllib.parse.quote(subject, safe="")


def schema_body(path: Path, schema_type: str | None, references: tuple[str, ...]) -> dict[str, Any]:
    kind = (schema_type or {".avsc": "AVRO", ".json": "JSON", ".desc": "PROTOBUF", ".pb": "PROTOBUF",
                             ".proto": "PROTOBUF"}.get(path.suffix.lower(), "AVRO")).upper()
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise CliError(f"cannot read {path}: {error.strerror}") from None
    text = _descriptor(path, raw) if kind == "PROTOBUF" else raw.decode()
    body: dict[str, Any] = {"schema": text, "schemaType": kind, "references": []}
    for item in references:
        name, sep, target = item.partition("=")
        subject, sep2, version = target.rpartition(":")
        if not sep or not sep2 or not version.isdigit():
            raise CliError(f"--reference {item!r}: expected NAME=SUBJECT:VERSION")
        body["references"].append({"name": name, "subject": subject, "version": int(version)})
    return body


def _descriptor(path: Path, raw: bytes) -> str:
    """The registered form of a Protobuf schema: a base64 FileDescriptorProto (the last file of a
    FileDescriptorSet, as `protoc --include_imports -o` writes it)."""
    from google.protobuf import descriptor_pb2
    from google.protobuf.message import DecodeError

    if path.suffix.lower() == ".proto":
        raise CliError(f"{path}: give a descriptor set (protoc -o {path.stem}.desc {path.name}), not .proto text")
    files = descriptor_pb2.FileDescriptorSet()
    try:
        files.ParseFromString(raw)
    except DecodeError:
        raise CliError(f"{path}: not a FileDescriptorSet") from None
    if not files.file:
        raise CliError(f"{path}: the descriptor set is empty")
    return base64.b64encode(files.file[-1].SerializeToString()).decode()


registry_option = click.option("--registry", "url", default=lambda: os.environ.get("ROOST_SCHEMA_REGISTRY_URL",
                                                                                   DEFAULT_URL),
                               show_default=DEFAULT_URL, help="the schema registry's URL")
user_option = click.option("--user", help="USER:PASSWORD for basic auth (password may be a ${file:} reference)")
type_option = click.option("--type", "schema_type", type=click.Choice(TYPES, case_sensitive=False),
                           help="the schema's type (default: from the file's extension)")
reference_option = click.option("--reference", "references", multiple=True, metavar="NAME=SUBJECT:VERSION",
                                help="a schema this one references (repeatable)")


@click.group("schema", help="Register, get, list, delete and check schemas in a schema registry.")
def command() -> None:
    pass


@command.command("register")
@click.argument("subject")
@click.argument("file", type=click.Path(path_type=Path))
@type_option
@reference_option
@click.option("--normalize", is_flag=True, help="normalize the schema before registering it")
@registry_option
@user_option
def register(subject: str, file: Path, schema_type: str | None, references: tuple[str, ...], normalize: bool,
             url: str, user: str | None) -> None:
    """Register FILE under SUBJECT and print its id."""
    answer = Registry(url, user).call("POST", f"/subjects/{quoted(subject)}/versions"
                                      f"?normalize={'true' if normalize else 'false'}",
                                      schema_body(file, schema_type, references))
    click.echo(f"{answer['id']}" + (f" (version {answer['version']})" if "version" in answer else ""))


@command.command("get")
@click.argument("subject", required=False)
@click.option("--version", default="latest", show_default=True)
@click.option("--id", "schema_id", type=int, help="get the schema with this id instead")
@registry_option
@user_option
def get(subject: str | None, version: str, schema_id: int | None, url: str, user: str | None) -> None:
    """Print a subject's version (or the schema with --id) as JSON."""
    registry = Registry(url, user)
    if schema_id is not None:
        answer = registry.call("GET", f"/schemas/ids/{schema_id}")
    elif subject:
        answer = registry.call("GET", f"/subjects/{quoted(subject)}/versions/{quoted(version)}")
    else:
        raise CliError("give a SUBJECT or --id")
    click.echo(json.dumps(answer, indent=2))


@command.command("list")
@click.argument("subject", required=False)
@click.option("--deleted", is_flag=True, help="include soft-deleted subjects or versions")
@registry_option
@user_option
def list_(subject: str | None, deleted: bool, url: str, user: str | None) -> None:
    """List the subjects (or SUBJECT's versions)."""
    flag = "?deleted=true" if deleted else ""
    path = f"/subjects/{quoted(subject)}/versions{flag}" if subject else f"/subjects{flag}"
    for item in Registry(url, user).call("GET", path):
        click.echo(item)


@command.command("delete")
@click.argument("subject")
@click.option("--version", help="delete only this version")
@click.option("--permanent", is_flag=True, help="delete for good (after a soft delete)")
@registry_option
@user_option
def delete(subject: str, version: str | None, permanent: bool, url: str, user: str | None) -> None:
    """Soft-delete SUBJECT (or one version); --permanent deletes for good."""
    path = f"/subjects/{quoted(subject)}" + (f"/versions/{quoted(version)}" if version else "")
    answer = Registry(url, user).call("DELETE", path + ("?permanent=true" if permanent else ""))
    click.echo(f"deleted {answer}")


@command.command("check")
@click.argument("subject")
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--version", default="latest", show_default=True, help="the version to check against")
@type_option
@reference_option
@registry_option
@user_option
def check(subject: str, file: Path, version: str, schema_type: str | None, references: tuple[str, ...], url: str,
          user: str | None) -> None:
    """Is FILE compatible with SUBJECT's version under its level? Exit status 1 if not."""
    answer = Registry(url, user).call("POST", f"/compatibility/subjects/{quoted(subject)}/versions/"
                                      f"{quoted(version)}?verbose=true", schema_body(file, schema_type, references))
    if answer.get("is_compatible"):
        click.echo("compatible")
        return
    for message in answer.get("messages") or []:
        click.echo(message)
    raise CliError("incompatible")
