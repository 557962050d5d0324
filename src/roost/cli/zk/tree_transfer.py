"""Whole subtrees for `roost zk`: listing (ls -R, deleteall, setAcl -R), export to JSON and
import back.

The export format (one JSON document):

    {"roost_zk_export": 1, "path": "/app",
     "nodes": [{"path": "", "data": "text", "encoding": "utf-8",
                "acl": ["world:anyone:cdrwa"], "kind": "persistent", "sequential": false},
               {"path": "/lock-0000000003", "data": "AAE=", "encoding": "base64",
                "acl": [...], "kind": "ephemeral", "sequential": true}, ...]}

`path` is relative to the exported root ("" is the root itself), parents before children.
`encoding` is "utf-8" when the data decodes as UTF-8, else "base64". `kind` is "ephemeral" or
"persistent", from the Stat's ephemeralOwner (servers show containers and TTL nodes as
persistent: a client cannot tell them apart); `sequential` says the name ends in a 10-digit
sequence number (the server keeps no other trace of it). Import creates the persistent nodes
under the target with their names as exported (sequence numbers included), data and ACLs, and
skips ephemeral nodes (they would end with the importing session), telling which on stderr.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections import deque
from typing import Any

import click

from roost.cli.client.client_options import CliError
from roost.cli.zk.kazoo_session import ZkSession
from roost.cli.zk.node_format import acl_text, node_kind, parse_acl

EXPORT_VERSION = 1
SEQUENTIAL_NAME = re.compile(r"\d{10}$")
SYSTEM_SUBTREE = "/zookeeper"  # the server's own (quotas, config): never exported


def join(parent: str, child: str) -> str:
    return f"{parent.rstrip('/')}/{child}"


def children(session: ZkSession, path: str) -> list[str]:
    return sorted(session.wait(session.client.get_children_async(path), path))


def subtree(session: ZkSession, root: str) -> list[str]:
    """`root` and every node under it, breadth first, children in name order (zkCli's ls -R
    order, but sorted: servers return children in no set order)."""
    found = [root]
    pending = deque([root])
    while pending:
        path = pending.popleft()
        for child in children(session, path):
            full = join(path, child)
            found.append(full)
            pending.append(full)
    return found


def delete_all(session: ZkSession, root: str) -> None:
    """Delete `root` and its subtree, deepest first; an error names the node it happened on."""
    from kazoo.exceptions import NoNodeError

    for path in reversed(subtree(session, root)):
        result = session.client.delete_async(path)
        with session.errors(path):
            try:
                result.get(timeout=session.timeout)
            except NoNodeError:
                pass  # gone meanwhile (an ephemeral whose session ended): what deleteall wanted


def export_tree(session: ZkSession, root: str) -> dict[str, Any]:
    nodes = []
    for path in subtree(session, root):
        if path == SYSTEM_SUBTREE or path.startswith(SYSTEM_SUBTREE + "/"):
            continue
        data, stat = session.wait(session.client.get_async(path), path)
        acls, _ = session.wait(session.client.get_acls_async(path), path)
        node: dict[str, Any] = {"path": path[len(root.rstrip("/")):] if path != root else ""}
        data = data or b""
        try:
            node["data"], node["encoding"] = data.decode("utf-8"), "utf-8"
        except UnicodeDecodeError:
            node["data"], node["encoding"] = base64.b64encode(data).decode("ascii"), "base64"
        node["acl"] = [acl_text(acl) for acl in acls]
        node["kind"] = node_kind(stat.ephemeralOwner)
        node["sequential"] = bool(SEQUENTIAL_NAME.search(path.rsplit("/", 1)[-1]))
        nodes.append(node)
    return {"roost_zk_export": EXPORT_VERSION, "path": root, "nodes": nodes}


def _decode(node: dict[str, Any], source: str) -> bytes:
    try:
        if node.get("encoding", "utf-8") == "base64":
            return base64.b64decode(node.get("data", ""), validate=True)
        return str(node.get("data", "")).encode("utf-8")
    except (binascii.Error, ValueError) as error:
        raise CliError(f"{source}: node {node.get('path')!r}: bad data: {error}") from None


def read_export(text: str, source: str) -> dict[str, Any]:
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise CliError(f"{source}: not JSON: {error}") from None
    if not isinstance(document, dict) or document.get("roost_zk_export") != EXPORT_VERSION \
            or not isinstance(document.get("nodes"), list):
        raise CliError(f"{source}: not a `roost zk export` document (version {EXPORT_VERSION})")
    for node in document["nodes"]:
        if not isinstance(node, dict) or not isinstance(node.get("path"), str):
            raise CliError(f"{source}: a node without a path: {node!r}")
    return document


def import_tree(session: ZkSession, document: dict[str, Any], target: str, source: str) -> int:
    """Create the exported nodes under `target`; returns how many were created.

    Nodes are created open (world:anyone:cdrwa) parents first, then their ACLs are set deepest
    first, so that an ACL that denies us CREATE on a parent cannot stop its children."""
    from kazoo.security import OPEN_ACL_UNSAFE

    created: list[tuple[str, list[Any]]] = []
    for node in document["nodes"]:
        path = target.rstrip("/") + node["path"] if node["path"] else target
        path = path or "/"
        if node.get("kind") == "ephemeral":
            click.echo(f"roost: skipped ephemeral {path} (it would end with this session)", err=True)
            continue
        acl = parse_acl(",".join(node.get("acl") or ["world:anyone:cdrwa"]))
        data = _decode(node, source)
        if path == "/":  # the root always exists: take its data and ACL only
            session.wait(session.client.set_async(path, data), path)
            created.append((path, acl))
            continue
        session.wait(session.client.create_async(path, data, acl=OPEN_ACL_UNSAFE), path)
        created.append((path, acl))
    for path, acl in reversed(created):
        session.wait(session.client.set_acls_async(path, acl), path)
    return len(created)
