"""`roost zk`: zkCli's znode commands over kazoo, for any ZooKeeper-protocol server (Roost's
keeper or Apache ZooKeeper), one-shot or in an interactive shell.

\b
    roost zk --server HOST:PORT[,...] ls -R /app
    roost zk get -s /app/config                 # data, then the Stat as zkCli prints it
    roost zk create -e -s /app/lock- ""         # prints `Created /app/lock-0000000007`
    roost zk setAcl /app world:anyone:r,digest:bob:<hash>:cdrwa
    roost zk --auth digest:bob:secret whoami
    roost zk --timeout 60 addWatch -m PERSISTENT_RECURSIVE /app --events 5
    roost zk config -s                          # the ensemble's members (/zookeeper/config)
    roost zk --auth digest:super:pw reconfig -add "server.4=10.0.0.4:2888:3888;2181" -remove 2
    roost zk export /app > app.json && roost zk import app.json /copy
    roost zk                                    # the shell (also `roost zk shell`)

The server comes from --server, else ROOST_ZOOKEEPER, else 127.0.0.1:2181. --timeout bounds
the connect, every request, and how long a one-shot command waits for a watch it set (-w) to
fire. Errors print one line (`roost: Node does not exist: /app`) and exit with status 1.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from roost.cli.client.client_options import DEFAULT_ZOOKEEPER, CliError
from roost.cli.zk.kazoo_session import ZkSession, split_auth
from roost.cli.zk.node_format import acl_lines, parse_acl, stat_lines
from roost.cli.zk.raw_requests import (
    ADD_WATCH_MODES,
    CONTAINER_FLAGS,
    TTL_FLAGS,
    AddWatch,
    CreateContainer,
    CreateTTL,
    GetAllChildrenNumber,
    GetEphemerals,
    WhoAmI,
    call,
)
from roost.cli.zk.tree_transfer import delete_all, export_tree, import_tree, read_export, subtree


class ZkGroup(click.Group):
    """zkCli's command names (getAcl, addWatch) also answer in any letter case."""

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        found = super().get_command(ctx, cmd_name)
        if found is None:
            folded = {name.lower(): name for name in self.list_commands(ctx)}
            if cmd_name.lower() in folded:
                found = super().get_command(ctx, folded[cmd_name.lower()])
        return found


@click.group("zk", cls=ZkGroup, invoke_without_command=True, help=__doc__,
             short_help="zkCli's znode commands and shell (ls, get, create, setAcl, export, ...)",
             context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--zookeeper", "--server", "server", envvar="ROOST_ZOOKEEPER", default=DEFAULT_ZOOKEEPER,
              show_default=True, metavar="HOST:PORT[,...]",
              help="the ensemble to connect to, as for every roost command (--server: zkCli's name; env ROOST_ZOOKEEPER)")
@click.option("--timeout", type=click.FloatRange(min=0.1), default=10.0, show_default=True, metavar="SECONDS",
              help="bounds the connect, each request, and a one-shot command's wait for its watch")
@click.option("--auth", multiple=True, metavar="SCHEME:CREDENTIAL",
              help="authenticate the session, e.g. digest:user:password (repeatable)")
@click.pass_context
def command(ctx: click.Context, server: str, timeout: float, auth: tuple[str, ...]) -> None:
    if not isinstance(ctx.obj, ZkSession):  # the shell passes its own session to each line
        session = ZkSession(server, timeout, [split_auth(value) for value in auth])
        ctx.obj = session
        ctx.call_on_close(session.close)
    if ctx.invoked_subcommand is None:
        ctx.invoke(shell)


pass_session = click.pass_obj


def _print_stat(stat: Any) -> None:
    click.echo("\n".join(stat_lines(stat)))


def _await_watch(session: ZkSession, watching: bool) -> None:
    """One-shot mode: a watch that was set fires before the process exits, or --timeout ends
    the wait (the shell prints events whenever they come)."""
    if watching and not session.interactive:
        session.print_events(limit=1)


@command.command("ls")
@click.option("-R", "recursive", is_flag=True, help="the whole subtree, one path a line")
@click.option("-s", "with_stat", is_flag=True, help="print the Stat too")
@click.option("-w", "watch", is_flag=True, help="watch the children")
@click.argument("path")
@pass_session
def ls(session: ZkSession, recursive: bool, with_stat: bool, watch: bool, path: str) -> None:
    """List the children of PATH (`[a, b]`)."""
    client = session.client
    if recursive:
        click.echo("\n".join(subtree(session, path)))
        return
    watcher = session.watcher() if watch else None
    if with_stat:
        kids, stat = session.wait(client.get_children_async(path, watcher, include_data=True), path)
    else:
        kids, stat = session.wait(client.get_children_async(path, watcher), path), None
    click.echo(f"[{', '.join(sorted(kids))}]")
    if stat is not None:
        _print_stat(stat)
    _await_watch(session, watch)


@command.command("get")
@click.option("-s", "with_stat", is_flag=True, help="print the Stat too")
@click.option("-w", "watch", is_flag=True, help="watch the data")
@click.argument("path")
@pass_session
def get(session: ZkSession, with_stat: bool, watch: bool, path: str) -> None:
    """Print the data of PATH (as UTF-8; `null` for none)."""
    _print_data(session, path, with_stat, watch, none_as="null")


def _print_data(session: ZkSession, path: str, with_stat: bool, watch: bool, none_as: str) -> None:
    """`get` and `config`: the znode's data as UTF-8 (`none_as` for null data), its Stat when
    asked, then wait for the watch when one was set."""
    data, stat = session.wait(session.client.get_async(path, session.watcher() if watch else None), path)
    click.echo(none_as if data is None else data.decode("utf-8", errors="replace"))
    if with_stat:
        _print_stat(stat)
    _await_watch(session, watch)


@command.command("stat")
@click.option("-w", "watch", is_flag=True, help="watch the node")
@click.argument("path")
@pass_session
def stat(session: ZkSession, watch: bool, path: str) -> None:
    """Print the Stat of PATH."""
    found = session.wait(session.client.exists_async(path, session.watcher() if watch else None), path)
    if found is None:
        raise CliError(f"Node does not exist: {path}")
    _print_stat(found)
    _await_watch(session, watch)


@command.command("create")
@click.option("-e", "ephemeral", is_flag=True, help="ephemeral (one-shot: gone when this command exits)")
@click.option("-s", "sequential", is_flag=True, help="append a sequence number to the name")
@click.option("-c", "container", is_flag=True, help="a container (deleted with its last child)")
@click.option("-t", "ttl", type=click.IntRange(min=1), metavar="TTL_MS",
              help="a TTL node (the server needs extendedTypesEnabled)")
@click.argument("path")
@click.argument("data", required=False)
@click.argument("acl", required=False)
@pass_session
def create(session: ZkSession, ephemeral: bool, sequential: bool, container: bool, ttl: int | None,
           path: str, data: str | None, acl: str | None) -> None:
    """Create PATH with DATA and ACL (default world:anyone:cdrwa); prints `Created PATH`."""
    from kazoo.security import OPEN_ACL_UNSAFE

    if container and (ephemeral or sequential or ttl):
        raise CliError("create -c cannot be combined with -e, -s or -t")
    if ttl and ephemeral:
        raise CliError("create -t cannot be combined with -e (TTL nodes are persistent)")
    acls = parse_acl(acl) if acl else list(OPEN_ACL_UNSAFE)
    value = None if data is None else data.encode("utf-8")  # no DATA: null data, as zkCli creates
    client = session.client
    if container or ttl:
        request: Any = CreateContainer(session.server_path(path), value, acls, CONTAINER_FLAGS) if container \
            else CreateTTL(session.server_path(path), value, acls, TTL_FLAGS[sequential], ttl or 0)
        with session.errors(path):
            created, _ = call(client, request, session.timeout)
        created = client.unchroot(created)
    else:
        created = session.wait(client.create_async(path, value, acl=acls, ephemeral=ephemeral,
                                                   sequence=sequential), path)
    click.echo(f"Created {created}")


@command.command("set")
@click.option("-s", "with_stat", is_flag=True, help="print the new Stat")
@click.option("-v", "version", type=int, default=-1, help="expected data version (default any)")
@click.argument("path")
@click.argument("data")
@pass_session
def set_(session: ZkSession, with_stat: bool, version: int, path: str, data: str) -> None:
    """Set the data of PATH (only at VERSION with -v)."""
    new_stat = session.wait(session.client.set_async(path, data.encode("utf-8"), version), path)
    if with_stat:
        _print_stat(new_stat)


@command.command("delete")
@click.option("-v", "version", type=int, default=-1, help="expected data version (default any)")
@click.argument("path")
@pass_session
def delete(session: ZkSession, version: int, path: str) -> None:
    """Delete PATH, which must have no children."""
    session.wait(session.client.delete_async(path, version), path)


@command.command("deleteall")
@click.argument("path")
@pass_session
def deleteall(session: ZkSession, path: str) -> None:
    """Delete PATH and everything under it."""
    delete_all(session, path)


@command.command("getAcl")
@click.option("-s", "with_stat", is_flag=True, help="print the Stat too")
@click.argument("path")
@pass_session
def get_acl(session: ZkSession, with_stat: bool, path: str) -> None:
    """Print the ACL of PATH."""
    acls, found = session.wait(session.client.get_acls_async(path), path)
    click.echo("\n".join(acl_lines(acls)))
    if with_stat:
        _print_stat(found)


@command.command("setAcl")
@click.option("-s", "with_stat", is_flag=True, help="print the new Stat")
@click.option("-v", "version", type=int, default=-1, help="expected ACL version (default any)")
@click.option("-R", "recursive", is_flag=True, help="the whole subtree")
@click.argument("path")
@click.argument("acl")
@pass_session
def set_acl(session: ZkSession, with_stat: bool, version: int, recursive: bool, path: str, acl: str) -> None:
    """Set the ACL of PATH: scheme:id:perms[,...], e.g. world:anyone:r,digest:user:hash:cdrwa."""
    acls = parse_acl(acl)
    targets = subtree(session, path) if recursive else [path]
    new_stat = None
    for target in targets:
        found = session.wait(session.client.set_acls_async(target, acls, version), target)
        new_stat = found if target == path else new_stat
    if with_stat and new_stat is not None:
        _print_stat(new_stat)


@command.command("addauth")
@click.argument("scheme")
@click.argument("credential")
@pass_session
def addauth(session: ZkSession, scheme: str, credential: str) -> None:
    """Authenticate this session (digest USER:PASSWORD); one-shot, use --auth instead."""
    session.wait(session.client.add_auth_async(scheme, credential), f"{scheme} auth")


@command.command("whoami")
@pass_session
def whoami(session: ZkSession) -> None:
    """Print the identities this session is authenticated as."""
    with session.errors("whoami"):
        identities = call(session.client, WhoAmI(), session.timeout)
    click.echo("Auth scheme: User")
    for scheme, user in identities:
        click.echo(f"{scheme}: {user}")


@command.command("addWatch")
@click.option("-m", "mode", type=click.Choice(list(ADD_WATCH_MODES)), default="PERSISTENT_RECURSIVE",
              show_default=True, help="PERSISTENT: the node and its children; _RECURSIVE: the subtree")
@click.option("--events", type=click.IntRange(min=0), default=0, metavar="N",
              help="one-shot: stop after N events (0: at --timeout)")
@click.argument("path")
@pass_session
def add_watch(session: ZkSession, mode: str, events: int, path: str) -> None:
    """Add a persistent watch on PATH; one-shot, print its events until --events or --timeout."""
    client = session.client
    session.add_persistent_watch(path, recursive=mode == "PERSISTENT_RECURSIVE")
    with session.errors(path):
        call(client, AddWatch(session.server_path(path), ADD_WATCH_MODES[mode]), session.timeout)
    if not session.interactive:
        session.print_events(events)


@command.command("getEphemerals")
@click.argument("path", required=False, default="/")
@pass_session
def get_ephemerals(session: ZkSession, path: str) -> None:
    """List this session's ephemeral nodes (under PATH)."""
    client = session.client
    with session.errors(path):
        found = call(client, GetEphemerals(session.server_path(path)), session.timeout)
    click.echo(f"[{', '.join(sorted(client.unchroot(p) for p in found))}]")


@command.command("getAllChildrenNumber")
@click.argument("path")
@pass_session
def get_all_children_number(session: ZkSession, path: str) -> None:
    """Count the nodes under PATH, at every depth."""
    with session.errors(path):
        click.echo(call(session.client, GetAllChildrenNumber(session.server_path(path)), session.timeout))


@command.command("sync")
@click.argument("path")
@pass_session
def sync(session: ZkSession, path: str) -> None:
    """Make the server this session is on catch up with the leader."""
    session.wait(session.client.sync_async(path), path)
    click.echo("Sync is OK")


@command.command("export")
@click.argument("path")
@pass_session
def export(session: ZkSession, path: str) -> None:
    """Print PATH's subtree as JSON: data (base64 when not UTF-8), ACLs, kinds."""
    click.echo(json.dumps(export_tree(session, path), indent=2, ensure_ascii=False))


@command.command("import")
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
@click.argument("path", required=False)
@pass_session
def import_(session: ZkSession, file: str, path: str | None) -> None:
    """Create the nodes of an export FILE (`-`: stdin) under PATH (default: where they came from)."""
    try:
        text = sys.stdin.read() if file == "-" else Path(file).read_text(encoding="utf-8")
    except OSError as error:
        raise CliError(f"cannot read {file}: {error.strerror}") from None
    document = read_export(text, file)
    count = import_tree(session, document, path or str(document.get("path") or "/"), file)
    click.echo(f"Imported {count} nodes")


@command.command("watch")
@click.argument("path")
@click.option("--events", type=click.IntRange(min=0), default=0, help="stop after this many events (0: no limit)")
@click.option("--timeout", "watch_timeout", type=float, default=0.0,
              help="stop after this many seconds (0: no limit)")
@pass_session
def watch(session: ZkSession, path: str, events: int, watch_timeout: float) -> None:
    """Follow PATH's data and children, one line per change (a roost extra, not zkCli's)."""
    from roost.cli.zk.follow import follow

    follow(session, path, events, watch_timeout)


@command.command("config")
@click.option("-s", "with_stat", is_flag=True, help="print the Stat too")
@click.option("-w", "watch", is_flag=True, help="watch the configuration")
@pass_session
def config(session: ZkSession, with_stat: bool, watch: bool) -> None:
    """Print the ensemble's configuration (/zookeeper/config: server.N lines and its version)."""
    _print_data(session, "/zookeeper/config", with_stat, watch, none_as="")


@command.command("reconfig")
@click.option("-add", "--add", "joining", multiple=True, metavar="server.N=HOST:PORT:PORT[:ROLE][;CLIENT]",
              help="a member to add (repeatable, or comma-separated)")
@click.option("-remove", "--remove", "leaving", multiple=True, metavar="ID[,ID...]",
              help="members to remove (repeatable, or comma-separated)")
@click.option("-members", "--members", "members", metavar="server.N=...[,...]",
              help="the whole new member list (instead of -add/-remove)")
@click.option("-file", "--file", "members_file", type=click.Path(dir_okay=False, allow_dash=True),
              help="read the whole new member list from a file of server.N= lines")
@click.option("-v", "version", type=str, default="-1", metavar="HEX",
              help="only if the configuration's version is still this (hex, as `config` prints)")
@click.option("-s", "with_stat", is_flag=True, help="print the Stat too")
@pass_session
def reconfig(session: ZkSession, joining: tuple[str, ...], leaving: tuple[str, ...], members: str | None,
             members_file: str | None, version: str, with_stat: bool) -> None:
    """Change the ensemble's members (ZooKeeper 3.5+'s dynamic reconfiguration; a super user's
    right), as zkCli: incrementally with -add/-remove, or a whole new list with -members/-file."""
    if members_file is not None:
        try:
            text = sys.stdin.read() if members_file == "-" else Path(members_file).read_text(encoding="utf-8")
        except OSError as error:
            raise CliError(f"cannot read {members_file}: {error.strerror}") from None
        members = ",".join(line.strip() for line in text.splitlines()
                           if line.strip().startswith("server."))
    if members is not None and (joining or leaving):
        raise CliError("reconfig: give -members (or -file), or -add/-remove, not both")
    if members is None and not joining and not leaving:
        raise CliError("reconfig: nothing to change (give -add, -remove, -members or -file)")
    try:
        from_config = -1 if version == "-1" else int(version.removeprefix("0x"), 16)
    except ValueError:
        raise CliError(f"reconfig: -v {version!r} is not a hexadecimal version") from None
    path = "/zookeeper/config"
    data, stat = session.wait(session.client.reconfig_async(
        ",".join(joining) or None, ",".join(leaving) or None, members, from_config), path)
    click.echo("Committed new configuration:")
    click.echo("" if data is None else data.decode("utf-8", errors="replace"))
    if with_stat:
        _print_stat(stat)


@command.command("shell")
@pass_session
def shell(session: ZkSession) -> None:
    """An interactive shell of these commands (history, tab completion of commands and paths)."""
    from roost.cli.zk.interactive_shell import run_shell

    if session.interactive:
        raise CliError("already in the shell")
    status = run_shell(command, session)
    if status:
        raise SystemExit(status)
