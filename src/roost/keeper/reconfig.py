"""ZooKeeper's dynamic reconfiguration (`reconfig`, opcode 16) on raft membership.

The ensemble's configuration is a raft `Membership`: voters (ZooKeeper's participants),
learners (observers), and as context a JSON object mapping each member id to its ZooKeeper
server spec ("host:peerPort:electionPort:role;clientHost:clientPort"). Every member renders the
configuration it applies into `/zookeeper/config` as ZooKeeper does: one `server.N=spec` line per
member, then `version=<hex zxid of the change>`.

`plan` checks a request against the current configuration and answers with ZooKeeper's error
codes, or the configuration to move to; the server then walks raft there one member at a time.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from roost.keeper.config import KeeperConfig, ServerSpec, parse_server_spec
from roost.raft.messages import Membership
from roost.wire.zk.constants import Err
from roost.wire.zk.records import ReconfigRequest


def encode_context(specs: dict[int, ServerSpec], mtime_ms: int) -> bytes:
    """The members' specs, and when the change was asked for (`/zookeeper/config`'s mtime)."""
    raw: dict[str, object] = {str(sid): spec.zk_line() for sid, spec in sorted(specs.items())}
    raw["mtime"] = mtime_ms
    return json.dumps(raw, sort_keys=True).encode()


def decode_context(context: bytes) -> dict[int, ServerSpec]:
    """The members' specs from a membership's context (empty if it has none)."""
    if not context:
        return {}
    raw = json.loads(context)
    return {int(sid): parse_server_spec(line) for sid, line in raw.items() if sid.isdigit()}


def context_mtime(context: bytes) -> int:
    return int(json.loads(context).get("mtime", 0)) if context else 0


def initial_membership(config: KeeperConfig, now_ms: int = 0) -> Membership:
    """The configuration a static config file describes."""
    # Like ZooKeeper's from a static zoo.cfg, without client addresses (a member knows only its own).
    specs = {sid: ServerSpec(peer.host, peer.port, None, sid in config.observers)
             for sid, peer in config.servers.items()}
    voters = frozenset(sid for sid in config.servers if sid not in config.observers)
    return Membership(voters, frozenset(config.observers), encode_context(specs, now_ms))


def is_complete(membership: Membership, specs: dict[int, ServerSpec]) -> bool:
    """True if the context describes exactly these members in these roles: a configuration a
    reconfig asked for, not a step on the way to one."""
    return set(specs) == membership.members and all(
        spec.observer == (sid in membership.learners) for sid, spec in specs.items())


def render(membership: Membership, version: int) -> bytes:
    """`/zookeeper/config`'s data for `membership`, whose change had zxid `version`."""
    specs = decode_context(membership.context)
    lines = []
    for sid in sorted(membership.members):
        spec = specs.get(sid)
        if spec is None:
            continue
        role = sid in membership.learners
        if spec.observer != role:
            spec = ServerSpec(spec.host, spec.peer_port, spec.election_port, role, spec.client)
        lines.append(f"server.{sid}={spec.zk_line()}")
    lines.append(f"version={version:x}")
    return "\n".join(lines).encode()


def same_servers(a: bytes | None, b: bytes | None) -> bool:
    """True if two renderings list the same members (whatever their versions)."""
    def servers(data: bytes | None) -> list[bytes]:
        return [line for line in (data or b"").splitlines() if line.startswith(b"server.")]
    return servers(a) == servers(b)


def config_version(data: bytes | None) -> int:
    """The `version=` of `/zookeeper/config`'s data (0 if none yet)."""
    for line in (data or b"").decode(errors="replace").splitlines():
        if line.startswith("version="):
            try:
                return int(line.removeprefix("version="), 16)
            except ValueError:
                return 0
    return 0


@dataclass(frozen=True, slots=True)
class Refusal:
    err: Err
    reason: str


def plan(request: ReconfigRequest, current: Membership, version: int, now_ms: int) -> Membership | Refusal:
    """The configuration `request` asks for, or why not (in ZooKeeper 3.8's order: the version,
    then the spec). As in ZooKeeper, leaving ids that are no members are ignored, and a request
    that changes nothing still makes a new version. Whether reconfig is enabled and in progress
    are the caller's checks before this; authorisation its check after."""
    if request.config_id != -1 and request.config_id != version:
        return Refusal(Err.BAD_VERSION, f"config version is {version:x}, not {request.config_id:x}")
    specs = decode_context(current.context)
    try:
        if request.new_members:
            if request.joining or request.leaving:
                return Refusal(Err.BAD_ARGUMENTS, "new members with joining or leaving servers")
            wanted = _parse_servers(request.new_members)
        else:
            wanted = {sid: _with_role(specs.get(sid), sid in current.learners)
                      for sid in current.members if sid in specs}
            for sid in _parse_ids(request.leaving or ""):
                wanted.pop(sid, None)
            if request.joining:
                wanted.update(_parse_servers(request.joining))
    except ValueError as exc:
        return Refusal(Err.BAD_ARGUMENTS, str(exc))
    voters = frozenset(sid for sid, spec in wanted.items() if not spec.observer)
    if not voters:
        return Refusal(Err.BAD_ARGUMENTS, "the new configuration has no participant")
    learners = frozenset(wanted) - voters
    return Membership(voters, learners, encode_context(wanted, now_ms))


def _with_role(spec: ServerSpec | None, observer: bool) -> ServerSpec:
    assert spec is not None
    return ServerSpec(spec.host, spec.peer_port, spec.election_port, observer, spec.client)


def _parse_servers(text: str) -> dict[int, ServerSpec]:
    """"server.N=spec" items, comma- or newline-separated."""
    out: dict[int, ServerSpec] = {}
    for item in text.replace("\n", ",").split(","):
        item = item.strip()
        if not item:
            continue
        key, eq, value = item.partition("=")
        if not eq or not key.startswith("server.") or not key[7:].isdigit():
            raise ValueError(f"{item!r} is not server.N=host:port:port[:role][;client]")
        sid = int(key[7:])
        if not 1 <= sid <= 127:
            raise ValueError(f"server id {sid} is outside [1, 127]")
        if sid in out:
            raise ValueError(f"server {sid} given twice")
        out[sid] = parse_server_spec(value.strip())
    if not out:
        raise ValueError("no server given")
    return out


def _parse_ids(text: str) -> list[int]:
    ids = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        if not item.isdigit():
            raise ValueError(f"{item!r} is not a server id")
        ids.append(int(item))
    return ids
