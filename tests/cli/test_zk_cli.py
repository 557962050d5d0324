"""`roost zk`, zkCli's commands over kazoo: the same commands against Roost's keeper and a real
Apache ZooKeeper 3.8 print the same (zxids, times and session ids normalised), one-shot and in
the shell driven through stdin; errors are one line naming the path, with exit status 1.

One keeper and one ZooKeeper serve the whole module; each test works under its own root."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from kazoo.security import make_digest_acl

from roost.cli.zk.command_group import command
from roost.cli.zk.interactive_shell import ZkShell
from roost.cli.zk.kazoo_session import ZkSession
from tests.keeper.zkharness import (
    kazoo,
    keeper_process,
    unique_root,
    zookeeper_available,
    zookeeper_standalone,
)
from tests.support import referees
from tests.support.procs import ROOST, free_ports

BOB_DIGEST = "bob:ikIaKsbtGweaHnb/jKn7OHqbunM="  # DigestAuthenticationProvider's hash of bob:pw
JAVA_DATE = r"[A-Z][a-z]{2} [A-Z][a-z]{2} \d{2} \d{2}:\d{2}:\d{2} \S+ \d{4}"
VOLATILE = [  # (pattern, replacement): what differs between two servers whatever they do
    (re.compile(r"^(cZxid|mZxid|pZxid) = 0x[0-9a-f]+$"), r"\1 = <zxid>"),
    (re.compile(rf"^(ctime|mtime) = {JAVA_DATE}$"), r"\1 = <time>"),
    (re.compile(r"^ephemeralOwner = 0x[0-9a-f]*[1-9a-f][0-9a-f]*$"), "ephemeralOwner = <session>"),
]


@pytest.fixture(scope="module")
def keeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with keeper_process(tmp_path_factory.mktemp("keeper")) as proc:
        yield proc.address("keeper")


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if not zookeeper_available():
        referees.skip(referees.ZOOKEEPER)
    with zookeeper_standalone(tmp_path_factory.mktemp("zookeeper")) as process:
        yield process.address


@pytest.fixture(scope="module")
def servers(keeper: str, zookeeper: str) -> dict[str, str]:
    return {"keeper": keeper, "zookeeper": zookeeper}


def roost_zk(server: str, *args: str, stdin: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ROOST, "zk", "--server", server, *args], input=stdin if stdin is not None else "",
                          capture_output=True, text=True, timeout=timeout)


def on_both(servers: dict[str, str], run: Callable[[str], Any]) -> dict[str, Any]:
    """`run(address)` against both servers at once (they are independent)."""
    with ThreadPoolExecutor(2) as pool:
        futures = {name: pool.submit(run, address) for name, address in servers.items()}
        return {name: future.result() for name, future in futures.items()}


def normalised(text: str) -> list[str]:
    lines = []
    for line in text.splitlines():
        for pattern, replacement in VOLATILE:
            line = pattern.sub(replacement, line)
        lines.append(line)
    return lines


def assert_one_line_error(result: subprocess.CompletedProcess[str], expected: str) -> None:
    assert result.returncode == 1, result
    assert result.stderr.splitlines() == [expected], result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_a_shell_script_prints_the_same_on_the_keeper_and_zookeeper(servers: dict[str, str]) -> None:
    root = unique_root("zkcli-same")  # the same path on both servers: the outputs name it
    script = [
        f"create {root} one", f"create {root}/b bee", f"create {root}/a ay", f"create {root}/a/x ex",
        f"ls {root}", f"ls -R {root}", f"ls -s {root}", f"get -s {root}/a",
        f"create -e -s {root}/e- eph", f"getEphemerals {root}", f"stat {root}/e-0000000002",
        f"set -v 0 {root}/a ay2", f"set -v 0 {root}/a stale", f"set -s {root}/b bee2",
        f"delete {root}/a", f"delete -v 5 {root}/b", f"create {root}/a", f"get {root}/none",
        f"create -c {root}/cont", f"create -t 500 {root}/ttl", f"getAllChildrenNumber {root}",
        f"getAllChildrenNumber {root}/none", f"getAcl {root}", f"setAcl {root}/b world:anyone:r", f"getAcl -s {root}/b",
        f"setAcl -R {root}/a world:anyone:cdr", f"getAcl {root}/a/x",
        f"addWatch {root}/a", f"create {root}/a/y", "addauth digest bob:pw", f"create {root}/sec s auth::cdrwa", f"getAcl {root}/sec",
        f"setAcl {root}/b nonsense", f"setAcl {root}/b world:anyone:rx", f"sync {root}", f"deleteall {root}", f"ls {root}",
    ]
    runs = on_both(servers, lambda address: roost_zk(address, "shell", stdin="\n".join(script) + "\n"))
    keeper, zookeeper = runs["keeper"], runs["zookeeper"]
    assert normalised(keeper.stdout) == normalised(zookeeper.stdout)
    assert keeper.stderr == zookeeper.stderr
    assert keeper.returncode == zookeeper.returncode == 1  # the last command's status, as zkCli
    out = normalised(keeper.stdout)
    assert out[:4] == [f"Created {root}", f"Created {root}/b", f"Created {root}/a", f"Created {root}/a/x"]
    assert out[4:10] == ["[a, b]", root, f"{root}/a", f"{root}/b", f"{root}/a/x", "[a, b]"]
    assert out[10:21] == ["cZxid = <zxid>", "ctime = <time>", "mZxid = <zxid>", "mtime = <time>",
                          "pZxid = <zxid>", "cversion = 2", "dataVersion = 0", "aclVersion = 0",
                          "ephemeralOwner = 0x0", "dataLength = 3", "numChildren = 2"]
    assert out[21:23] == ["ay", "cZxid = <zxid>"]
    assert f"Created {root}/e-0000000002" in out and f"[{root}/e-0000000002]" in out
    assert "ephemeralOwner = <session>" in out and f"Created {root}/cont" in out
    assert out[out.index(f"Created {root}/cont") + 1] == "5"  # getAllChildrenNumber: a, a/x, b, e-, cont
    assert out[out.index("'world,'anyone") + 2:][:2] == ["'world,'anyone", ": r"]  # getAcl -s of b
    event = "WatchedEvent state:SyncConnected type:{} path:{}".format
    assert out[-23:] == [
        "'world,'anyone", ": cdr",  # getAcl of a/x after setAcl -R
        f"Created {root}/a/y", "", "WATCHER::", "", event("NodeCreated", f"{root}/a/y"),  # addWatch's
        f"Created {root}/sec", f"'digest,'{BOB_DIGEST}", ": cdrwa", "Sync is OK",
        *[line for path in ("a/y", "a/x", "a") for line in ("", "WATCHER::", "", event("NodeDeleted", f"{root}/{path}"))],
    ]
    assert keeper.stderr.splitlines() == [
        f"roost: version No is not valid : {root}/a",
        f"roost: Node not empty: {root}/a",
        f"roost: version No is not valid : {root}/b",
        f"roost: Node already exists: {root}/a",
        f"roost: Node does not exist: {root}/none",
        f"roost: KeeperErrorCode = Unimplemented for {root}/ttl (not supported by this server)",
        f"roost: Node does not exist: {root}/none",
        "roost: bad ACL 'nonsense': expected scheme:id:perm (e.g. world:anyone:cdrwa)",
        "roost: bad ACL 'world:anyone:rx': permissions are letters of cdrwa, got 'rx'",
        f"roost: Node does not exist: {root}",
    ]


def test_whoami_after_auth_one_shot_and_addauth_in_the_shell(servers: dict[str, str]) -> None:
    def whoami(address: str) -> tuple[list[str], list[str], list[str]]:
        anonymous = roost_zk(address, "whoami")
        one_shot = roost_zk(address, "--auth", "digest:bob:pw", "whoami")
        shell = roost_zk(address, stdin="addauth digest bob:pw\nwhoami\n")
        assert anonymous.returncode == one_shot.returncode == shell.returncode == 0
        return anonymous.stdout.splitlines(), one_shot.stdout.splitlines(), shell.stdout.splitlines()

    runs = on_both(servers, whoami)
    # ZooKeeper keeps a connection's identities in a hash set: compare them as sets
    for anonymous, one_shot, shell in runs.values():
        assert anonymous == ["Auth scheme: User", "ip: 127.0.0.1"]
        assert one_shot[0] == shell[0] == "Auth scheme: User"
        assert sorted(one_shot[1:]) == sorted(shell[1:]) == ["digest: bob", "ip: 127.0.0.1"]


def test_errors_are_one_line_naming_the_path(servers: dict[str, str]) -> None:
    root = unique_root("zkcli-errors")

    def errors(address: str) -> None:
        client = kazoo(address)
        try:
            client.create(f"{root}/child", b"c", makepath=True)
            client.create(f"{root}/locked", b"l", acl=[make_digest_acl("bob", "pw", all=True)])
        finally:
            client.stop()
            client.close()
        assert_one_line_error(roost_zk(address, "get", f"{root}/none"), f"roost: Node does not exist: {root}/none")
        assert_one_line_error(roost_zk(address, "set", "-v", "7", root, "x"),
                              f"roost: version No is not valid : {root}")
        assert_one_line_error(roost_zk(address, "get", f"{root}/locked"),
                              f"roost: Insufficient permission : {root}/locked")
        authorised = roost_zk(address, "--auth", "digest:bob:pw", "get", f"{root}/locked")
        assert (authorised.returncode, authorised.stdout) == (0, "l\n")
        assert_one_line_error(roost_zk(address, "deleteall", root),  # its children cannot be listed
                              f"roost: Insufficient permission : {root}/locked")
        assert roost_zk(address, "--auth", "digest:bob:pw", "deleteall", root).returncode == 0

    on_both(servers, errors)
    (nobody,) = free_ports(1)
    assert_one_line_error(roost_zk(f"127.0.0.1:{nobody}", "--timeout", "1", "ls", "/", timeout=30),
                          f"roost: cannot connect to 127.0.0.1:{nobody} within 1s")
    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts connections, never answers
        address = f"127.0.0.1:{silent.getsockname()[1]}"
        assert_one_line_error(roost_zk(address, "--timeout", "1", "ls", "/", timeout=30),
                              f"roost: cannot connect to {address} within 1s")
    bad_auth = roost_zk(f"127.0.0.1:{nobody}", "--auth", "bob", "ls", "/")
    assert_one_line_error(bad_auth, "roost: bad --auth 'bob': expected SCHEME:CREDENTIAL (e.g. digest:user:password)")


def test_a_watch_prints_its_event_before_the_one_shot_command_exits(servers: dict[str, str]) -> None:
    root = unique_root("zkcli-watch")

    def watch(address: str) -> list[str]:
        client = kazoo(address)
        try:
            client.create(root, b"v0")
            lines = []
            for args, change in ((["get", "-w", root], lambda: client.set(root, b"v1")),
                                 (["ls", "-w", root], lambda: client.create(f"{root}/kid")),
                                 (["stat", "-w", root], lambda: client.set(root, b"v2"))):
                lines += _until_event(address, args, change)
            return [*lines, *_persistent_events(address, client, root)]
        finally:
            client.delete(root, recursive=True)
            client.stop()
            client.close()

    runs = on_both(servers, watch)
    assert runs["keeper"] == runs["zookeeper"]
    lines = runs["keeper"]
    assert lines[:4] == [
        "v0", f"WatchedEvent state:SyncConnected type:NodeDataChanged path:{root}",
        "[]", f"WatchedEvent state:SyncConnected type:NodeChildrenChanged path:{root}"]
    assert lines[4] == "cZxid = <zxid>" and lines[10] == "dataVersion = 1"
    assert lines[15:] == [f"WatchedEvent state:SyncConnected type:NodeDataChanged path:{root}"] + \
        [f"WatchedEvent state:SyncConnected type:NodeDataChanged path:{root}/kid"] * 2
    silent = roost_zk(servers["keeper"], "--timeout", "0.5", "get", "-w", "/")
    assert silent.returncode == 0 and silent.stdout == "\n"  # no event: --timeout ends the wait


def _until_event(address: str, args: list[str], change: Callable[[], Any]) -> list[str]:
    """Run a one-shot `roost zk ARGS` that sets a watch, make `change` once it printed its
    result (the watch is set by then), and return its output lines, normalised."""
    # stderr joins stdout (an error line would show in the output); the output is read from
    # the one buffered stream (communicate() would miss what readline() buffered)
    proc = subprocess.Popen([*ROOST, "zk", "--server", address, "--timeout", "60", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        change()
        rest = proc.stdout.read()  # to the end: the command exits after its event or in 60 s
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 0
    return normalised(first + rest)


def _persistent_events(address: str, client: Any, root: str) -> list[str]:
    """`addWatch` one-shot until 2 events: changes under `root` are made until it has seen two
    (it prints nothing before, so the test cannot tell when its watch is on)."""
    proc = subprocess.Popen([*ROOST, "zk", "--server", address, "--timeout", "60", "addWatch",
                             "-m", "PERSISTENT_RECURSIVE", root, "--events", "2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(600):  # at most 30 s
            if proc.poll() is not None:
                break
            client.set(f"{root}/kid", b"x")
            time.sleep(0.05)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 0 and err == "", err
    return out.splitlines()


def test_export_then_import_round_trips_a_subtree(servers: dict[str, str], tmp_path: Path) -> None:
    root = unique_root("zkcli-export")
    secret = make_digest_acl("bob", "pw", all=True)

    def round_trip(address: str) -> dict[str, Any]:
        client = kazoo(address, auth_data=[("digest", "bob:pw")])
        try:
            client.create(root, b"top")
            client.create(f"{root}/bin", b"\xff\x00\x01")
            client.create(f"{root}/bin/text", "héllo".encode())
            seq = client.create(f"{root}/seq-", b"s", sequence=True)[len(root):]
            assert seq == "/seq-0000000001"
            client.create(f"{root}/secret", b"hidden", acl=[secret])
            client.create(f"{root}/eph", b"e", ephemeral=True)
            exported = roost_zk(address, "--auth", "digest:bob:pw", "export", root)
            assert exported.returncode == 0, exported.stderr
            path = tmp_path / f"{address.replace(':', '_')}.json"
            path.write_text(exported.stdout)
            copy = f"{root}-copy"
            imported = roost_zk(address, "--auth", "digest:bob:pw", "import", str(path), copy)
            assert imported.returncode == 0, imported.stderr
            assert imported.stdout == "Imported 5 nodes\n"
            assert imported.stderr == f"roost: skipped ephemeral {copy}/eph (it would end with this session)\n"
            for name in ("", "/bin", "/bin/text", seq, "/secret"):
                assert client.get(copy + name)[0] == client.get(root + name)[0]
                assert client.get_acls(copy + name)[0] == client.get_acls(root + name)[0]
            assert client.exists(f"{copy}/eph") is None
            again = roost_zk(address, "--auth", "digest:bob:pw", "import", str(path), copy)
            assert_one_line_error(again, f"roost: Node already exists: {copy}")
            document = json.loads(exported.stdout)
            client.delete(copy, recursive=True)
            client.delete(root, recursive=True)
            return document
        finally:
            client.stop()
            client.close()

    documents = on_both(servers, round_trip)
    assert documents["keeper"] == documents["zookeeper"]
    nodes = {node["path"]: node for node in documents["keeper"]["nodes"]}
    assert documents["keeper"]["path"] == root
    assert list(nodes) == ["", "/bin", "/eph", "/secret", "/seq-0000000001", "/bin/text"]
    assert (nodes["/bin"]["data"], nodes["/bin"]["encoding"]) == ("/wAB", "base64")
    assert (nodes["/bin/text"]["data"], nodes["/bin/text"]["encoding"]) == ("héllo", "utf-8")
    assert nodes["/eph"]["kind"] == "ephemeral" and nodes["/bin"]["kind"] == "persistent"
    assert nodes["/seq-0000000001"]["sequential"] and not nodes["/bin"]["sequential"]
    assert nodes["/secret"]["acl"] == [f"digest:{BOB_DIGEST}:cdrwa"]
    assert nodes[""]["acl"] == ["world:anyone:cdrwa"]


def test_the_shell_completes_commands_and_paths(keeper: str) -> None:
    root = unique_root("zkcli-complete")
    client = kazoo(keeper)
    session = ZkSession(keeper, 10.0)
    try:
        for child in ("alpha", "alps", "beta"):
            client.create(f"{root}/{child}", makepath=True)
        shell = ZkShell(command, session, interactive=False)
        assert shell.completenames("get") == ["get", "getAcl", "getAllChildrenNumber", "getEphemerals"]
        assert "shell" not in shell.completenames("")
        assert shell.complete_path(f"{root}/al") == [f"{root}/alpha", f"{root}/alps"]
        assert shell.complete_path(f"{root}/") == [f"{root}/alpha", f"{root}/alps", f"{root}/beta"]
        assert root in shell.complete_path(root[:-3])
        assert shell.complete_path(f"{root}/none/x") == [] and shell.complete_path("rel") == []
    finally:
        session.close()
        client.delete(root, recursive=True)
        client.stop()
        client.close()


def test_the_shell_on_a_terminal_completes_with_tab_and_keeps_history(keeper: str, tmp_path: Path) -> None:
    root = unique_root("zkcli-tty")
    client = kazoo(keeper)
    client.create(f"{root}/unique-child", b"found it", makepath=True)
    history = tmp_path / "history"
    env = dict(os.environ, ROOST_ZK_HISTORY=str(history), TERM="dumb")
    pid, terminal = pty.fork()
    if pid == 0:  # the child: roost zk on the pseudo-terminal (never back into pytest)
        try:
            os.execve(ROOST[0], [*ROOST, "zk", "--server", keeper], env)
        finally:
            os._exit(127)
    seen = bytearray()

    def read_until(marker: bytes) -> None:
        deadline = time.monotonic() + 30
        while marker not in seen:
            assert time.monotonic() < deadline, f"no {marker!r} in {bytes(seen)!r}"
            if select.select([terminal], [], [], 0.5)[0]:
                seen.extend(os.read(terminal, 4096))

    try:
        prompt = f"[zk: {keeper}] ".encode()
        read_until(prompt)
        os.write(terminal, f"get {root}/uni\t\n".encode())  # tab completes the path
        read_until(b"found it")
        os.write(terminal, b"getEph\t /\n")  # and the command name
        read_until(b"[]")
        os.write(terminal, b"quit\n")
        _, status = os.waitpid(pid, 0)
        pid = 0
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        if pid:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(terminal)
        client.delete(root, recursive=True)
        client.stop()
        client.close()
    assert history.read_text().splitlines() == [f"get {root}/unique-child", "getEphemerals /", "quit"]


def test_the_shell_reports_bad_lines_and_goes_on(keeper: str) -> None:
    root = unique_root("zkcli-lines")
    # the ephemeral under the persistent watch is deleted as the session closes: no event then
    lines = ["bogus", "ls", 'get "unclosed', "help", "help get", "shell", f"create -c -e {root}", f"create {root}",
             f"create -e {root}/eph", f"addWatch {root}", "GETACL /", "quit", "ls /"]
    result = roost_zk(keeper, stdin="\n".join(lines) + "\n")
    assert result.returncode == 0, result  # `quit` was the last command
    assert result.stderr.splitlines() == [
        "roost: No such command 'bogus'.",
        "roost: ls: Missing argument 'PATH'.",
        "roost: cannot parse the line: No closing quotation",
        "roost: already in the shell",
        "roost: create -c cannot be combined with -e, -s or -t",
    ]
    assert "  getAcl          Print the ACL of PATH." in result.stdout.splitlines()
    assert "Usage: roost zk get [OPTIONS] PATH" in result.stdout
    assert result.stdout.endswith("'world,'anyone\n: cdrwa\n")  # nothing ran after quit


def test_help_lists_the_zkcli_commands() -> None:
    result = subprocess.run([*ROOST, "zk", "--help"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0
    for word in ("ls", "get", "stat", "create", "set", "delete", "deleteall", "getAcl", "setAcl", "addauth",
                 "addWatch", "getEphemerals", "getAllChildrenNumber", "sync", "whoami", "export", "import", "shell"):
        assert f"\n  {word} " in result.stdout, word


def test_create_without_data_makes_null_data_as_zkcli_does(servers: dict[str, str]) -> None:
    root = unique_root("zkcli-null")
    script = "\n".join([f"create {root} r", f"create {root}/nodata", f"create {root}/empty ''",
                        f"get {root}/nodata", f"get {root}/empty", "quit"]) + "\n"
    results = on_both(servers, lambda address: roost_zk(address, "shell", stdin=script))
    for name, result in results.items():
        assert result.returncode == 0, (name, result.stderr)
        assert result.stdout.splitlines()[-2:] == ["null", ""], (name, result.stdout)  # as zkCli prints them
    for address in servers.values():  # what the server holds, read by another client
        client = kazoo(address)
        try:
            assert client.get(f"{root}/nodata")[0] is None
            assert client.get(f"{root}/empty")[0] == b""
        finally:
            client.delete(root, recursive=True)
            client.stop()
