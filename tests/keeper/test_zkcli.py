"""Apache ZooKeeper's own shell, zkCli (Debian's `zookeeper` package), against the keeper
(README: "kazoo, zkCli and the other ZooKeeper clients work unmodified"): create, get, set, ls,
stat and delete, with kazoo on the other side to see that they were real. The same script runs
against a real ZooKeeper, and both must print the same."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from tests.keeper.zkharness import kazoo, unique_root

pytestmark = pytest.mark.zookeeper  # zkCli is ZooKeeper's (Java, Debian's package)

ZKCLI = Path("/usr/share/zookeeper/bin/zkCli.sh")
# What differs between two servers whatever they do: their clocks, their zxids, the address; and
# what zkCli's watcher thread prints on its own time (its connection events: the last one, Closed,
# races the JVM's exit after `quit` and is printed in some runs only, seen under load in CI).
VOLATILE = re.compile(r"^(ctime|mtime|cZxid|mZxid|pZxid) = |^Connecting to |^WATCHER::$|^WatchedEvent state:|^$")


@pytest.fixture(params=["keeper", "zookeeper"])
def server(request: pytest.FixtureRequest) -> str:
    return request.getfixturevalue(request.param)


def zkcli(server: str, *commands: str) -> tuple[int, list[str], list[str]]:
    """Run the commands in one zkCli session (ended with `quit`, which closes it): its exit status
    (that of the last command), its stdout lines but the volatile ones (and blank ones), its
    stderr lines but the logger's."""
    if not ZKCLI.exists() or shutil.which("java") is None:
        pytest.skip("needs java and Debian's zookeeper package (make test installs them)")
    result = subprocess.run([str(ZKCLI), "-server", server], input="\n".join([*commands, "quit", ""]),
                            capture_output=True, text=True, timeout=120)
    out = [line for line in result.stdout.splitlines() if not VOLATILE.match(line)]
    err = [line for line in result.stderr.splitlines() if not line.startswith("SLF4J")]
    return result.returncode, out, err


def stat_of(lines: list[str]) -> dict[str, str]:
    return dict(line.split(" = ", 1) for line in lines if " = " in line)


def test_zkcli_create_get_set_ls_stat_delete(server: str) -> None:
    root = unique_root("zkcli")
    client: KazooClient = kazoo(server)
    try:
        client.create(root, b"from kazoo")
        status, out, err = zkcli(server, f"get {root}", f"set {root} world", f"create {root}/child c", f"ls {root}")
        assert status == 0 and "from kazoo" in out and "[child]" in out, (out, err)
        assert err == [f"Created {root}/child"]
        data, stat = client.get(root)
        assert (data, stat.version, stat.numChildren) == (b"world", 1, 1)  # zkCli's writes are real
        assert client.get(f"{root}/child")[0] == b"c"

        client.set(f"{root}/child", b"from kazoo again")
        status, out, err = zkcli(server, f"stat {root}", f"get {root}/child", f"delete {root}/child",
                                 f"ls {root}", f"delete {root}", f"stat {root}")
        stat = stat_of(out)
        assert (stat["dataVersion"], stat["cversion"], stat["numChildren"], stat["dataLength"],
                stat["ephemeralOwner"], stat["aclVersion"]) == ("1", "1", "1", "5", "0x0", "0")
        assert "from kazoo again" in out and "[]" in out, out
        assert status == 1 and err == [f"Node does not exist: {root}"]  # the last command's failure
        assert client.exists(root) is None
    finally:
        client.stop()
        client.close()


def test_zkcli_prints_the_same_for_the_keeper_and_zookeeper(keeper: str, zookeeper: str) -> None:
    root = unique_root("zkcli-same")  # the same path on both servers: the outputs name it
    script = [f"create {root} one", f"create -e {root}/eph e", f"create -s {root}/seq- s", f"ls {root}",
              f"get {root}", f"set {root} two", f"stat {root}",
              # zkCli creates a node given no data with null data, and prints it as "null".
              f"create {root}/nodata", f"get {root}/nodata", f"stat {root}/nodata",
              f"delete {root}", f"deleteall {root}", f"stat {root}"]
    on_keeper, on_zookeeper = zkcli(keeper, *script), zkcli(zookeeper, *script)
    assert on_keeper == on_zookeeper
    assert "null" in on_keeper[1] and "dataLength = 0" in on_keeper[1], on_keeper
    assert f"Node not empty: {root}" in on_keeper[2]


def test_zkcli_digest_auth_the_same_on_the_keeper_and_zookeeper(keeper: str, zookeeper: str) -> None:
    """zkCli's `addauth digest` and a digest ACL: its owner reads and changes the node, a session
    without it is refused (zkCli prints "Insufficient permission"), on both servers alike."""
    from roost.keeper.acl import digest_id

    root = unique_root("zkcli-digest")
    owner = ["addauth digest carol:carol-pw", f"create {root} secret digest:{digest_id('carol:carol-pw')}:cdrwa",
             f"get {root}", f"set {root} changed", f"getAcl {root}"]
    stranger = [f"get {root}", f"set {root} mine", f"ls {root}", "addauth digest carol:wrong", f"get {root}"]
    runs = {name: (zkcli(server, *owner), zkcli(server, *stranger), zkcli(server, f"delete {root}"))
            for name, server in (("keeper", keeper), ("zookeeper", zookeeper))}
    (_, owner_out, _), (_, _, stranger_err), _ = runs["keeper"]
    assert "secret" in owner_out and f"'digest,'carol:{digest_id('carol:carol-pw').split(':', 1)[1]}" in owner_out
    assert stranger_err.count(f"Insufficient permission : {root}") == 4, stranger_err
    assert runs["keeper"] == runs["zookeeper"]
