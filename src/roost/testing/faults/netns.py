"""Network namespaces for the nodes of a fault run, one bridge joining them, nftables for partitions.

Layout (all created here, all named `rfh<run id>…`, all removed by `close()`):

    root namespace (clients) ── bridge rfh<id>-br  10.<a>.<b>.254/24
                                   ├─ veth rfh<id>-v1 ── eth0 10.<a>.<b>.1 in namespace rfh<id>-n1
                                   ├─ veth rfh<id>-v2 ── eth0 10.<a>.<b>.2 in namespace rfh<id>-n2
                                   └─ ...

Partitions are nftables rules inside a node's namespace that *drop* packets (never reject), so a
cut-off peer sees what a pulled cable shows: silence, no RST, connections that time out. Rules
name peers by address, so any grouping works: one node isolated from everyone (clients too), a
majority/minority split among nodes with clients still reaching all, a node cut from its peers
only, or one direction only. `tc netem` is not used (its module is absent here).

A run writes its pid to /run/roost-fault/<id>.pid; `remove_leftovers()` removes namespaces and
links of runs whose process is gone (a run killed before its finally), never another live run's.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import shutil
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

PREFIX = "rfh"
RUN_DIR = Path("/run/roost-fault")
TABLE = "roostfault"
COMMAND_TIMEOUT_S = 20


class NetnsUnavailable(RuntimeError):
    """Namespaces, veth pairs or nftables cannot be used here (not root, or the kernel says no)."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check, timeout=COMMAND_TIMEOUT_S)


def _nft(namespace: str, script: str) -> None:
    subprocess.run(["ip", "netns", "exec", namespace, "nft", "-f", "-"], input=script, capture_output=True,
                   text=True, check=True, timeout=COMMAND_TIMEOUT_S)


def why_unavailable() -> str | None:
    """None if this process can make namespaces, veth pairs and nftables rules; else why not."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "nft"):
        if shutil.which(tool) is None:
            return f"`{tool}` is not installed (Debian: iproute2, nftables)"
    probe = f"{PREFIX}probe{os.getpid() % 10000}"
    try:
        _ip("netns", "add", probe)
        try:
            _nft(probe, f"add table inet {TABLE}\n")
            _ip("link", "add", f"{probe}a", "type", "veth", "peer", "name", f"{probe}b")
            _ip("link", "del", f"{probe}a", check=False)
        finally:
            _ip("netns", "del", probe, check=False)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as error:
        stderr = getattr(error, "stderr", "") or ""
        return f"network namespaces, veth or nftables refused: {stderr.strip() or error}"
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_leftovers() -> list[str]:
    """Remove the namespaces and links of fault runs whose process has gone; returns their names."""
    owners: dict[str, bool] = {}

    def run_of(name: str) -> str | None:
        match = re.match(rf"^{PREFIX}([0-9a-f]{{4}})-", name)
        return match.group(1) if match else None

    def orphan(run: str) -> bool:
        if run not in owners:
            pid_file = RUN_DIR / f"{run}.pid"
            try:
                owners[run] = not _alive(int(pid_file.read_text()))
            except (FileNotFoundError, ValueError):
                owners[run] = True
        return owners[run]

    removed = []
    for line in _ip("netns", "list", check=False).stdout.splitlines():
        name = line.split()[0] if line.strip() else ""
        run = run_of(name)
        if run and orphan(run):
            _ip("netns", "del", name, check=False)
            removed.append(name)
    for line in _ip("-o", "link", "show", check=False).stdout.splitlines():
        match = re.match(r"^\d+: ([^:@]+)", line)
        name = match.group(1) if match else ""
        run = run_of(name)
        if run and orphan(run):
            _ip("link", "del", name, check=False)
            removed.append(name)
    for run, gone in owners.items():
        if gone:
            with contextlib.suppress(FileNotFoundError):
                (RUN_DIR / f"{run}.pid").unlink()
    return removed


@dataclass
class Network:
    """`size` namespaces on one bridge. Node i (1-based) is `namespace(i)` at `address(i)`."""

    size: int
    run_id: str = field(default_factory=lambda: f"{random.SystemRandom().randrange(16**4):04x}")
    subnet: str = ""
    _made: list[tuple[str, str]] = field(default_factory=list)  # ("netns"|"link", name), for close()

    def __post_init__(self) -> None:
        assert 1 <= self.size <= 200
        if not self.subnet:
            self.subnet = self._free_subnet()

    def _free_subnet(self) -> str:
        routes = _ip("-4", "route", "show", check=False).stdout
        start = int(self.run_id, 16)
        for step in range(250):
            candidate = f"10.213.{(start + step) % 250}"
            if f"{candidate}.0/24" not in routes:
                return candidate
        raise NetnsUnavailable("no free 10.213.x.0/24 subnet")

    def namespace(self, i: int) -> str:
        return f"{PREFIX}{self.run_id}-n{i}"

    def address(self, i: int) -> str:
        return f"{self.subnet}.{i}"

    @property
    def client_address(self) -> str:
        return f"{self.subnet}.254"

    @property
    def bridge(self) -> str:
        return f"{PREFIX}{self.run_id}-br"

    def veth(self, i: int) -> str:
        return f"{PREFIX}{self.run_id}-v{i}"

    def exec_prefix(self, i: int) -> list[str]:
        return ["ip", "netns", "exec", self.namespace(i)]

    def open(self) -> Network:
        RUN_DIR.mkdir(parents=True, exist_ok=True)
        (RUN_DIR / f"{self.run_id}.pid").write_text(str(os.getpid()))
        try:
            _ip("link", "add", self.bridge, "type", "bridge")
            self._made.append(("link", self.bridge))
            _ip("addr", "add", f"{self.client_address}/24", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")
            for i in range(1, self.size + 1):
                ns, veth = self.namespace(i), self.veth(i)
                _ip("netns", "add", ns)
                self._made.append(("netns", ns))
                _ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
                self._made.append(("link", veth))
                _ip("link", "set", veth, "master", self.bridge)
                _ip("link", "set", veth, "up")
                _ip("-n", ns, "link", "set", "lo", "up")
                _ip("-n", ns, "addr", "add", f"{self.address(i)}/24", "dev", "eth0")
                _ip("-n", ns, "link", "set", "eth0", "up")
                self.heal_node(i)
        except BaseException:
            self.close()
            raise
        return self

    # partitions -----------------------------------------------------------------------------
    def heal_node(self, i: int) -> None:
        _nft(self.namespace(i), f"table inet {TABLE} {{}}\ndelete table inet {TABLE}\n"
                                f"table inet {TABLE} {{\n"
                                f"  chain input {{ type filter hook input priority 0; policy accept; }}\n"
                                f"  chain output {{ type filter hook output priority 0; policy accept; }}\n}}\n")

    def heal(self) -> None:
        for i in range(1, self.size + 1):
            self.heal_node(i)

    def drop_between(self, i: int, peers: Iterable[str], inbound: bool = True, outbound: bool = True) -> None:
        """Node i drops packets from (inbound) and to (outbound) the addresses `peers`."""
        addresses = ", ".join(sorted(set(peers)))
        if not addresses:
            return
        rules = []
        if inbound:
            rules.append(f"add rule inet {TABLE} input ip saddr {{ {addresses} }} drop\n")
        if outbound:
            rules.append(f"add rule inet {TABLE} output ip daddr {{ {addresses} }} drop\n")
        _nft(self.namespace(i), "".join(rules))

    def isolate(self, i: int) -> None:
        """Node i hears no one and no one hears it: clients included."""
        _nft(self.namespace(i), f'add rule inet {TABLE} input iifname "eth0" drop\n'
                                f'add rule inet {TABLE} output oifname "eth0" drop\n')

    def split(self, groups: Sequence[Sequence[int]]) -> None:
        """Nodes hear only the nodes of their own group (and the clients, who hear everyone)."""
        for group in groups:
            others = [self.address(j) for other in groups if other is not group for j in other]
            for i in group:
                self.drop_between(i, others)

    def close(self) -> None:
        for kind, name in reversed(self._made):
            if kind == "netns":
                _ip("netns", "del", name, check=False)
            else:
                _ip("link", "del", name, check=False)
        self._made.clear()
        with contextlib.suppress(FileNotFoundError):
            (RUN_DIR / f"{self.run_id}.pid").unlink()

    def __enter__(self) -> Network:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()
