"""A Roost node for tests: `roost up` (a broker and, in the same process, a keeper) on free
loopback ports with its data in a directory of its own; or, in external mode, only the addresses
of a cluster started elsewhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from roost.testing.clients import KafkaHelpers
from roost.testing.process import START_TIMEOUT_S, ServerProcess

# Settings for a node under test, on top of Roost's defaults: a consumer group forms at once
# instead of waiting 3 s for more members.
NODE_TEST_SETTINGS: dict[str, Any] = {"group.initial.rebalance.delay.ms": 0}


def _set_flags(settings: Mapping[str, Any]) -> list[str]:
    flags: list[str] = []
    for name, value in settings.items():
        text = str(value).lower() if isinstance(value, bool) else str(value)
        flags += ["--set", f"{name}={text}"]
    return flags


class RoostNode(KafkaHelpers):
    """A node the tests talk to: `bootstrap` (HOST:PORT for Kafka clients) and `zookeeper`
    (HOST:PORT for ZooKeeper clients; None for an external cluster given without one), with the
    helpers of KafkaHelpers. `process` is None for an external cluster."""

    def __init__(self, bootstrap: str, zookeeper: str | None, process: ServerProcess | None = None,
                 data_dir: Path | None = None, security_settings: Mapping[str, str] | None = None) -> None:
        self.bootstrap = bootstrap
        self.zookeeper = zookeeper
        self.process = process
        self.data_dir = data_dir
        # What clients need to reach a secured node (security.protocol, the CA, the admin user's
        # login): part of every client_config().
        self.security_settings: dict[str, str] = dict(security_settings or {})

    def client_config(self, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return {"bootstrap.servers": self.bootstrap, **self.security_settings, **(extra or {})}

    @classmethod
    def start(cls, data_dir: Path, settings: Mapping[str, Any] | None = None,
              timeout: float = START_TIMEOUT_S, security: str = "plaintext") -> RoostNode:
        """Run `roost up` with its data in `data_dir` and return once its broker and keeper both
        listen. The server binds port 0 itself and prints the ports it got, so no port is chosen
        here and none can be lost to a concurrent test run (pytest-xdist) in between.

        `security` (ssl, sasl_plaintext, sasl_ssl) starts a secured node as `roost up --security`
        does; its client settings (with the admin user's password) are then in every
        `client_config()`."""
        args = ["up", "--data-dir", str(data_dir), "--host", "127.0.0.1", "--kafka-port", "0", "--no-schema-registry",
                "--keeper-port", "0", "--no-console", "--security", security,
                *_set_flags({**NODE_TEST_SETTINGS, **(settings or {})})]
        process = ServerProcess.launch(args, data_dir / "roost.log")
        listeners = process.wait_listening(("kafka", "keeper"), timeout)
        kafka_host, kafka_port = listeners["kafka"]
        keeper_host, keeper_port = listeners["keeper"]
        security_settings: dict[str, str] = {}
        if security != "plaintext":
            from roost.cli.servers.dev_security import prepare
            prepared = prepare(data_dir, security, "127.0.0.1")  # made by the node already: read back
            assert prepared is not None
            security_settings = prepared.client_settings(with_password=True)
        return cls(f"{kafka_host}:{kafka_port}", f"{keeper_host}:{keeper_port}", process, data_dir, security_settings)

    @classmethod
    def external(cls, bootstrap: str, zookeeper: str | None) -> RoostNode:
        """A cluster started elsewhere: only its addresses; nothing to start or stop."""
        return cls(bootstrap, zookeeper)

    @property
    def pids(self) -> list[int]:
        """The processes this fixture started (none for an external cluster)."""
        return [] if self.process is None else [self.process.pid]

    @property
    def log_path(self) -> Path | None:
        """Where the node's output goes (None for an external cluster)."""
        return None if self.process is None else self.process.log_path

    def ensure_running(self) -> None:
        """Raise, with the end of its log, if the node has exited during the session (a later
        test would otherwise only see refused connections)."""
        if self.process is not None and not self.process.running:
            raise RuntimeError(f"the Roost node (pid {self.process.pid}) exited with status "
                               f"{self.process.popen.returncode} during the session; its log "
                               f"{self.process.log_path} ends:\n{self.process.log_tail()}")

    def stop(self) -> int | None:
        """Stop the node (SIGTERM, then SIGKILL if it does not stop in time); its exit status,
        or None for an external cluster."""
        self.close_clients()
        return None if self.process is None else self.process.stop()

    def __repr__(self) -> str:
        where = "external" if self.process is None else f"pid {self.process.pid}"
        return f"RoostNode(bootstrap={self.bootstrap!r}, zookeeper={self.zookeeper!r}, {where})"
