"""Connect strings (`host:port,host:port[/chroot]`, Kafka's `zookeeper.connect`) and chroot paths.

As in ZooKeeper's Java client: hosts are separated by commas, a host without a port uses 2181,
IPv6 hosts are written in brackets (`[::1]:2181`), and everything from the first `/` on is the
chroot, under which every path the client uses lives (a chroot of `/` means none).
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_PORT = 2181


@dataclass(frozen=True, slots=True)
class ConnectString:
    hosts: tuple[tuple[str, int], ...]
    chroot: str  # "" when there is none

    def to_server(self, path: str, sequential: bool = False) -> str:
        """The server's path for the client's `path`. A sequential create may end in '/' (the
        server appends the counter), as ZooKeeper's own client allows."""
        validate_path(path + "1" if sequential else path)
        if not self.chroot:
            return path
        return self.chroot if path == "/" else self.chroot + path

    def to_client(self, server_path: str) -> str | None:
        """The client's path for a server path, or None if it lies outside the chroot."""
        chroot = self.chroot
        if not chroot:
            return server_path
        if server_path == chroot:
            return "/"
        if server_path.startswith(chroot) and server_path[len(chroot)] == "/":
            return server_path[len(chroot):]
        return None


def validate_path(path: str) -> None:
    """Refuse paths ZooKeeper would refuse (PathUtils.validatePath), before anything is sent."""
    if not isinstance(path, str) or not path.startswith("/"):
        raise ValueError(f"a znode path must start with '/': {path!r}")
    if len(path) == 1:
        return
    if path.endswith("/"):
        raise ValueError(f"a znode path must not end with '/': {path!r}")
    for part in path[1:].split("/"):
        if part in ("", ".", ".."):
            raise ValueError(f"empty, '.' or '..' component in znode path {path!r}")
    if "\x00" in path:
        raise ValueError(f"NUL character in znode path {path!r}")


def _parse_host(text: str) -> tuple[str, int]:
    text = text.strip()
    if not text:
        raise ValueError("empty host in the connect string")
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            raise ValueError(f"unclosed '[' in host {text!r}")
        host, rest = text[1:end], text[end + 1:]
        if rest and not rest.startswith(":"):
            raise ValueError(f"unexpected {rest!r} after IPv6 host {text!r}")
        port_text = rest[1:]
    elif text.count(":") == 1:
        host, port_text = text.split(":")
    elif ":" in text:
        raise ValueError(f"IPv6 hosts need brackets: {text!r}")
    else:
        host, port_text = text, ""
    if not host:
        raise ValueError(f"empty host name in {text!r}")
    if not port_text:
        return host, DEFAULT_PORT
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ValueError(f"bad port in {text!r}")
    return host, int(port_text)


def parse_connect_string(text: str) -> ConnectString:
    """Parse `host:port,host:port[/chroot]`; raises ValueError on a malformed string."""
    slash = text.find("/")
    hosts_part, chroot = (text, "") if slash < 0 else (text[:slash], text[slash:])
    if chroot == "/":
        chroot = ""
    if chroot:
        validate_path(chroot)
    hosts = tuple(_parse_host(part) for part in hosts_part.split(","))
    return ConnectString(hosts, chroot)
