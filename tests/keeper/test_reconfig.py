"""Dynamic reconfiguration with kazoo's `reconfig` against real `roost keeper` processes.

One ensemble for the module: three members with `reconfigEnabled` and a super digest, and two
more started beside them (their config files list all five, as ZooKeeper's joining servers' do)
that take part only once a reconfig adds them. Checks: `/zookeeper/config` is readable and
watchable and carries `version=`; refusals (NoAuth for an unauthenticated client, BadArguments
for a bad address, BadVersion for a stale config id); and, while two clients write, adding a
4th and a 5th member and then removing the leader, after which every acknowledged write is on
every member of the new ensemble.
"""

from __future__ import annotations

import re
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadArgumentsError,
    BadVersionError,
    KazooException,
    NewConfigNoQuorumError,
    NoAuthError,
    ReconfigInProcessError,
)

from roost.keeper.acl import digest_id
from tests.keeper.zkharness import (
    ZK_VERSIONS,
    four_letter,
    keeper_config,
    require_zookeeper,
    wait_until,
    zookeeper_reconfigurable,
)
from tests.support.procs import ROOST, RoostProcess, free_ports, start_roost

pytestmark = pytest.mark.slow

SUPER = "super:s3cret"
SETTINGS = {"reconfigEnabled": True, "superDigest": digest_id(SUPER)}


@dataclass
class Ensemble:
    directory: Path
    peer_ports: dict[int, int]
    client_ports: dict[int, int]
    procs: dict[int, RoostProcess] = field(default_factory=dict)

    def start(self, sid: int) -> None:
        config = keeper_config(self.directory / f"keeper{sid}", client_port=self.client_ports[sid],
                               servers=self.peer_ports, myid=sid, extra=SETTINGS)
        self.procs[sid] = start_roost(["keeper", "--config", str(config)], expect=("keeper",))

    def address(self, sid: int) -> str:
        return f"127.0.0.1:{self.client_ports[sid]}"

    def spec(self, sid: int) -> str:
        port = self.peer_ports[sid]
        return f"server.{sid}=127.0.0.1:{port}:{port}:participant;127.0.0.1:{self.client_ports[sid]}"

    def mode(self, sid: int) -> str:
        try:
            text = four_letter(self.address(sid), "srvr", timeout=5.0)
        except OSError:
            return ""
        return next((line[6:] for line in text.splitlines() if line.startswith("Mode: ")), "")

    def leader(self, among: list[int]) -> int:
        found: list[int] = []

        def one() -> bool:
            found[:] = [sid for sid in among if self.mode(sid) == "leader"]
            return len(found) == 1

        wait_until(one, 60, f"one leader among {among}", interval=0.1)
        return found[0]


@pytest.fixture(scope="module")
def ensemble(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ensemble]:
    ports = free_ports(10)
    ens = Ensemble(Path(tmp_path_factory.mktemp("reconfig")),
                   {sid: ports[sid - 1] for sid in range(1, 4)},
                   {sid: ports[4 + sid] for sid in range(1, 6)})
    try:
        for sid in (1, 2, 3):
            ens.start(sid)
        ens.leader([1, 2, 3])
        # The joiners know all five; the ensemble does not know them yet.
        ens.peer_ports.update({4: ports[3], 5: ports[4]})
        for sid in (4, 5):
            ens.start(sid)
        yield ens
    finally:
        for proc in ens.procs.values():
            proc.stop()


def connect(hosts: str, auth: bool = False) -> KazooClient:
    client = KazooClient(hosts=hosts, timeout=10.0, auth_data=[("digest", SUPER)] if auth else None,
                         connection_retry={"max_tries": -1, "delay": 0.05, "max_delay": 0.5})
    client.start(timeout=30)
    return client


def config_lines(client: KazooClient) -> tuple[dict[str, str], int]:
    client.sync("/zookeeper/config")
    data, stat = client.get("/zookeeper/config")
    lines = dict(line.split("=", 1) for line in data.decode().splitlines())
    return lines, stat.mzxid


def test_config_node_shows_the_members_and_a_version(ensemble: Ensemble) -> None:
    client = connect(ensemble.address(1))
    try:
        wait_until(lambda: "version" in config_lines(client)[0], 30, "the initial configuration")
        lines, _ = config_lines(client)
        assert sorted(k for k in lines if k.startswith("server.")) == ["server.1", "server.2", "server.3"]
        assert lines["server.1"].startswith(f"127.0.0.1:{ensemble.peer_ports[1]}:")
        assert lines["server.1"].endswith(":participant")
        int(lines["version"], 16)
        conf = four_letter(ensemble.address(2), "conf")
        assert "server.3=" in conf and "version=" in conf
    finally:
        client.stop()
        client.close()


def normalised_config(data: bytes) -> list[str]:
    """`/zookeeper/config`'s lines with ports, ids and the version's digits masked."""
    out = []
    for line in data.decode().splitlines():
        line = re.sub(r"^server\.\d+=", "server.N=", line)
        line = re.sub(r":\d+", ":<port>", line)
        out.append(re.sub(r"^version=[0-9a-f]+$", "version=<hex>", line))
    return sorted(set(out))


def reconfig_scenario(address: str) -> list[tuple[str, object]]:
    """What a plain and a super client see of the configuration and of refused and no-op
    reconfigs; the same on a one-member ZooKeeper and on the keeper ensemble."""
    plain = connect(address)
    superuser = connect(address, auth=True)
    records: list[tuple[str, object]] = []

    def attempt(name: str, client: KazooClient, **kwargs: object) -> None:
        try:
            data, _ = client.reconfig(**{"leaving": None, "joining": None, "new_members": None, **kwargs})
            records.append((name, normalised_config(data)))
        except KazooException as exc:
            records.append((name, type(exc).__name__))

    try:
        wait_until(lambda: b"version=" in plain.get("/zookeeper/config")[0], 30, "a configuration")
        data, stat = plain.get("/zookeeper/config")
        records.append(("config", normalised_config(data)))
        records.append(("stat", (stat.czxid, stat.ctime, stat.version, stat.aversion, stat.ephemeralOwner,
                                 stat.numChildren, stat.dataLength == len(data))))
        records.append(("acl", [(acl.perms, acl.id.scheme, acl.id.id) for acl in plain.get_acls("/zookeeper/config")[0]]))
        p1, p2, p3 = free_ports(3)
        observer = f"server.9=127.0.0.1:{p1}:{p2}:observer;127.0.0.1:{p3}"
        attempt("unauthenticated", plain, joining=observer)
        # The caller's right is checked before the arguments: NoAuth whatever they are.
        attempt("unauthenticated, bad address", plain, joining="server.9=not-an-address")
        attempt("unauthenticated, no participant left", plain, leaving="1,2,3")
        attempt("unauthenticated, stale version", plain, joining=observer, from_config=0x1234)
        attempt("unauthenticated, leave a non-member", plain, leaving="99")
        attempt("bad address", superuser, joining="server.9=not-an-address")
        attempt("stale version", superuser, joining=observer, from_config=0x1234)
        attempt("no participant left", superuser, leaving="1,2,3")
        fired = threading.Event()
        superuser.get("/zookeeper/config", watch=lambda event: fired.set())
        before = superuser.get("/zookeeper/config")[1].mzxid
        attempt("leave a non-member", superuser, leaving="99")
        records.append(("watch fired", fired.wait(10)))
        records.append(("new version", superuser.get("/zookeeper/config")[1].mzxid > before))
        return records
    finally:
        for client in (plain, superuser):
            client.stop()
            client.close()


@pytest.mark.parametrize("version", ZK_VERSIONS)
def test_the_same_as_zookeeper(ensemble: Ensemble, tmp_path_factory: pytest.TempPathFactory, version: str) -> None:
    require_zookeeper(version)
    with zookeeper_reconfigurable(tmp_path_factory.mktemp("zk-reconfig"), SETTINGS["superDigest"],
                                  version=version) as zk:
        expected = reconfig_scenario(zk.address)
    actual = reconfig_scenario(ensemble.address(1))
    assert actual == expected
    assert dict(expected)["unauthenticated"] == "NoAuthError"


def test_refusals(ensemble: Ensemble) -> None:
    plain = connect(ensemble.address(1))
    superuser = connect(ensemble.address(2), auth=True)
    try:
        wait_until(lambda: "version" in config_lines(plain)[0], 30, "the initial configuration")
        with pytest.raises(NoAuthError):
            plain.reconfig(joining=ensemble.spec(4), leaving=None, new_members=None)
        with pytest.raises(BadArgumentsError):
            superuser.reconfig(joining="server.4=not-an-address", leaving=None, new_members=None)
        with pytest.raises(BadArgumentsError):  # no participant left
            superuser.reconfig(joining=None, leaving="1,2,3", new_members=None)
        with pytest.raises(BadVersionError):
            superuser.reconfig(joining=ensemble.spec(4), leaving=None, new_members=None, from_config=0x1234)
        lines, _ = config_lines(plain)
        assert "server.4" not in lines, "a refused reconfig changed the configuration"
    finally:
        for client in (plain, superuser):
            client.stop()
            client.close()


def test_a_joiner_that_never_catches_up_leaves_no_quorum_and_blocks_a_concurrent_change(
        ensemble: Ensemble) -> None:
    """A participant nobody can reach cannot be promoted: NewConfigNoQuorum, and the learner
    added on the way is taken out again. Meanwhile a second reconfig gets ReconfigInProcess."""
    first = connect(ensemble.address(1), auth=True)
    second = connect(ensemble.address(2), auth=True)
    try:
        wait_until(lambda: "version" in config_lines(first)[0], 30, "the initial configuration")
        before, mzxid = config_lines(first)
        dead = free_ports(1)[0]  # nothing listens there
        attempt = first.reconfig_async(joining=f"server.9=127.0.0.1:{dead}:{dead}:participant",
                                       leaving=None, new_members=None, from_config=-1)
        # Removing every voter is a bad argument, unless a change is in progress (checked first,
        # as in ZooKeeper): from when the first change has added 9 as a learner (on its way to
        # becoming a voter) until it ends.
        outcomes: list[str] = []

        def second_is_refused_as_in_progress() -> bool:
            try:
                second.reconfig(joining=None, leaving="1,2,3", new_members=None)
            except (BadArgumentsError, ReconfigInProcessError) as exc:
                outcomes.append(type(exc).__name__)
            return outcomes[-1] == "ReconfigInProcessError"

        wait_until(second_is_refused_as_in_progress, 20, "a concurrent reconfig refused", interval=0.05)
        with pytest.raises(NewConfigNoQuorumError):
            attempt.get(timeout=60)
        after, mzxid_after = config_lines(first)
        assert after == before and mzxid_after == mzxid, "a failed reconfig made a new version"
        # Rolled back, and over: a bad argument again.
        wait_until(lambda: not second_is_refused_as_in_progress() and outcomes[-1] == "BadArgumentsError",
                   20, "the learner taken out again", interval=0.1)
    finally:
        for client in (first, second):
            client.stop()
            client.close()


class Writer(threading.Thread):
    def __init__(self, hosts: str, name: str, stop: threading.Event) -> None:
        super().__init__(daemon=True)
        self.hosts, self.tag, self.stop_event = hosts, name, stop
        self.acknowledged: list[str] = []
        self.failures = 0

    def run(self) -> None:
        client = connect(self.hosts)
        try:
            for i in range(100_000):  # bounded; stopped by the event long before
                if self.stop_event.is_set():
                    return
                path = f"/acked/{self.tag}-{i}"
                try:
                    client.create(path, b"x", makepath=True)
                    self.acknowledged.append(path)
                except KazooException:
                    self.failures += 1
                    time.sleep(0.05)
        finally:
            client.stop()
            client.close()


def test_grow_to_five_and_remove_the_leader_while_clients_write(ensemble: Ensemble) -> None:
    admin = connect(",".join(ensemble.address(s) for s in (1, 2, 3)), auth=True)
    stop = threading.Event()
    writers = [Writer(",".join(ensemble.address(s) for s in hosts), f"w{k}", stop)
               for k, hosts in enumerate([(1, 2, 3), (3, 2, 1)])]
    try:
        wait_until(lambda: "version" in config_lines(admin)[0], 30, "the initial configuration")
        mzxid_before = admin.get("/zookeeper/config")[1].mzxid
        watched = threading.Event()
        admin.get("/zookeeper/config", watch=lambda event: watched.set())
        for writer in writers:
            writer.start()
        wait_until(lambda: all(len(w.acknowledged) >= 5 for w in writers), 30, "writes flowing")
        data, stat = admin.reconfig(joining=ensemble.spec(4), leaving=None, new_members=None)
        assert "server.4=" in data.decode() and stat.mzxid > mzxid_before and stat.version == -1
        assert watched.wait(10), "the /zookeeper/config watch did not fire"
        data, _ = admin.reconfig(joining=ensemble.spec(5), leaving=None, new_members=None)
        assert {"server.4", "server.5"} <= set(dict(x.split("=", 1) for x in data.decode().splitlines()))
        assert ensemble.mode(4) in ("follower", "leader") and ensemble.mode(5) in ("follower", "leader")
        leader = ensemble.leader([1, 2, 3, 4, 5])
        lines, _ = config_lines(admin)
        data, _ = admin.reconfig(joining=None, leaving=str(leader), new_members=None,
                                 from_config=int(lines["version"], 16))
        assert f"server.{leader}=" not in data.decode()
        remaining = [sid for sid in (1, 2, 3, 4, 5) if sid != leader]
        new_leader = ensemble.leader(remaining)
        assert new_leader != leader
        count = sum(len(w.acknowledged) for w in writers)
        wait_until(lambda: sum(len(w.acknowledged) for w in writers) >= count + 10, 30,
                   "writes flowing after the leader left")
    finally:
        stop.set()
        for writer in writers:
            writer.join(30)
        admin.stop()
        admin.close()
    acknowledged = [path for w in writers for path in w.acknowledged]
    assert acknowledged
    for sid in remaining:
        client = connect(ensemble.address(sid))
        try:
            client.sync("/acked")
            present = {f"/acked/{name}" for name in client.get_children("/acked")}
            missing = [p for p in acknowledged if p not in present]
            assert not missing, f"member {sid} lacks {len(missing)} acknowledged writes, e.g. {missing[:3]}"
        finally:
            client.stop()
            client.close()


def roost_zk(server: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ROOST, "zk", "--server", server, *args], capture_output=True, text=True,
                          timeout=90)


def test_roost_zk_config_and_reconfig(ensemble: Ensemble) -> None:
    """Last: the command line shows the configuration and changes it (removes member 5)."""
    members = [sid for sid in (1, 2, 3, 4, 5) if ensemble.mode(sid) in ("leader", "follower")]
    server = ensemble.address(members[0])
    shown = roost_zk(server, "config", "-s")
    assert shown.returncode == 0, shown.stderr
    assert "server.5=" in shown.stdout and "version=" in shown.stdout and "mZxid = " in shown.stdout
    refused = roost_zk(server, "reconfig", "-remove", "5")
    assert refused.returncode == 1 and "Insufficient permission" in refused.stderr
    bad = roost_zk(server, "--auth", f"digest:{SUPER}", "reconfig", "-add", "server.6=nowhere")
    assert bad.returncode == 1 and "BadArguments" in bad.stderr
    version = next(line for line in shown.stdout.splitlines() if line.startswith("version="))[8:]
    done = roost_zk(server, "--auth", f"digest:{SUPER}", "reconfig", "-remove", "5", "-v", version)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Committed new configuration:") and "server.5=" not in done.stdout
    after = roost_zk(server, "config")
    assert "server.5=" not in after.stdout
    conf = four_letter(ensemble.address(members[0]), "conf")
    assert "membership: " in conf and "server.5=" not in conf


def test_a_whole_new_member_list_brings_a_removed_member_back_as_an_observer(ensemble: Ensemble) -> None:
    """Last: non-incremental reconfig. Member 5, removed by the previous test (its process still
    running), comes back as an observer: it learns that from the log, and serves as one."""
    members = [sid for sid in (1, 2, 3, 4, 5) if ensemble.mode(sid) in ("leader", "follower")]
    admin = connect(ensemble.address(members[0]), auth=True)
    try:
        lines, _ = config_lines(admin)
        servers = [f"{key}={value}" for key, value in lines.items() if key.startswith("server.")]
        observer = ensemble.spec(5).replace(":participant;", ":observer;")
        data, _ = admin.reconfig(joining=None, leaving=None, new_members=",".join([*servers, observer]))
        assert observer in data.decode()
        wait_until(lambda: ensemble.mode(5) == "observer", 30, "member 5 serving as an observer")
        on_observer = connect(ensemble.address(5))
        try:
            on_observer.create("/back-as-observer", b"hello")  # forwarded to the leader
            admin.sync("/back-as-observer")
            assert admin.get("/back-as-observer")[0] == b"hello"
        finally:
            on_observer.stop()
            on_observer.close()
    finally:
        admin.stop()
        admin.close()


def test_a_restarted_original_member_follows_the_new_configuration(ensemble: Ensemble) -> None:
    """Last: a member whose config file still lists only servers 1-3 is restarted; it takes the
    configuration from its log (members 4 and 5 included, reachable) and serves the latest data."""
    members = [sid for sid in (1, 2, 3) if ensemble.mode(sid) == "follower"]
    assert members, "no original member left as a follower"
    sid = members[0]
    ensemble.procs[sid].stop()
    ensemble.procs[sid] = start_roost(ensemble.procs[sid].args, expect=("keeper",))
    wait_until(lambda: ensemble.mode(sid) == "follower", 60, f"member {sid} following again")
    conf = four_letter(ensemble.address(sid), "conf")
    assert "server.4=" in conf and "server.5=" in conf and ":observer" in conf
    client = connect(ensemble.address(sid))
    try:
        client.sync("/back-as-observer")
        assert client.get("/back-as-observer")[0] == b"hello"
    finally:
        client.stop()
        client.close()
