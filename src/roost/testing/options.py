"""The plugin's command-line and ini options: an external cluster instead of a started one.

`--roost-bootstrap HOST:PORT[,...]` (ini `roost_bootstrap`) points the fixtures at a cluster
started elsewhere, e.g. in CI; `--roost-zookeeper HOST:PORT[,...]` (ini `roost_zookeeper`) gives
its ZooKeeper address. The command line wins over the ini file.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

GROUP = "roost"


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup(GROUP, "Roost broker and keeper fixtures (roost.testing)")
    group.addoption("--roost-bootstrap", dest="roost_bootstrap", metavar="HOST:PORT[,...]", default=None,
                    help="use this Kafka cluster instead of starting a Roost node (no fault injection)")
    group.addoption("--roost-zookeeper", dest="roost_zookeeper", metavar="HOST:PORT[,...]", default=None,
                    help="with --roost-bootstrap: the external cluster's ZooKeeper address")
    parser.addini("roost_bootstrap", "use this Kafka cluster instead of starting a Roost node", default="")
    parser.addini("roost_zookeeper", "with roost_bootstrap: the external cluster's ZooKeeper address",
                  default="")


@dataclass(frozen=True)
class External:
    """An external cluster's addresses."""

    bootstrap: str
    zookeeper: str | None


def _setting(config: pytest.Config, name: str) -> str | None:
    value = config.getoption(name) or config.getini(name)
    return str(value).strip() or None


def external_cluster(config: pytest.Config) -> External | None:
    """The external cluster the options name, or None to start one."""
    bootstrap = _setting(config, "roost_bootstrap")
    zookeeper = _setting(config, "roost_zookeeper")
    if bootstrap is None:
        if zookeeper is not None:
            raise pytest.UsageError("--roost-zookeeper (roost_zookeeper) needs --roost-bootstrap (roost_bootstrap)")
        return None
    return External(bootstrap, zookeeper)
