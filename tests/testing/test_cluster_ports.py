"""roost_cluster's ports are chosen free just before its processes start; when another process
takes one in between (a concurrent run, e.g. pytest-xdist), the start is tried again on new ports."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from roost.cli.servers import cluster_plan as planning
from roost.testing.cluster import RoostCluster


def test_a_port_taken_between_choice_and_bind_is_retried_on_new_ports(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    taken_port = taken.getsockname()[1]
    real_choose = planning.choose_ports
    plans: list[list[int]] = []

    def losing_the_first_race(host: str, wanted: list[int | None]) -> list[int]:
        ports = real_choose(host, wanted)
        if not plans:
            ports[0] = taken_port  # the keeper's client port, bound by someone else meanwhile
        plans.append(ports)
        return ports

    monkeypatch.setattr(planning, "choose_ports", losing_the_first_race)
    try:
        cluster = RoostCluster.start(tmp_path, brokers=1, keepers=1)
        try:
            assert len(plans) == 2
            assert cluster.keepers[1].address[1] != taken_port
            assert "already in use" in (tmp_path / "attempt-1" / "keeper-1.log").read_text()
            assert cluster.registered_brokers() == {1}
        finally:
            cluster.close()
        assert not any(member.running for member in cluster.members())
    finally:
        taken.close()

