"""The broker's half of the balancer's load sampling (the shell around `load.LoadWindows`): every
`balancer.load.sample.interval.ms` it reads the counters of its hosted partitions and its process
CPU time, adds the sample to its windows and publishes the smoothed load as JSON at
/roost/balancer/load/<broker id> (ephemeral: a dead broker's load goes with its session), where
`roost balance` reads every broker's. One small znode per broker per interval: cheaper than a
metrics topic, and readable with any ZooKeeper client."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable
from typing import Any

from roost.broker.balance.load import LoadWindows, PartitionCounters, Sample
from roost.broker.balance.model import Resource
from roost.broker.replica.manager import ReplicaManager
from roost.config import BrokerConfig
from roost.zkclient import ZkError

log = logging.getLogger("roost.broker.balance")

LOAD_PATH = "/roost/balancer/load"
# Roost settings -> the model's resources (Cruise Control's capacity.json DISK, NW_IN, NW_OUT, CPU).
CAPACITY_SETTINGS = {Resource.DISK: "balancer.capacity.disk.bytes",
                     Resource.NW_IN: "balancer.capacity.network.in.bytes.per.second",
                     Resource.NW_OUT: "balancer.capacity.network.out.bytes.per.second",
                     Resource.CPU: "balancer.capacity.cpu.cores"}


def capacities(config: BrokerConfig) -> dict[Resource, float]:
    """The capacities configured for this broker (a value <= 0: unknown, so unlimited)."""
    return {resource: float(config[name]) for resource, name in CAPACITY_SETTINGS.items() if float(config[name]) > 0}


class LoadSampler:
    def __init__(self, broker_id: int, zk: Any, replicas: ReplicaManager, config: BrokerConfig,
                 clock_ms: Callable[[], int], cpu_seconds: Callable[[], float] = time.process_time) -> None:
        self.broker_id = broker_id
        self.zk = zk
        self.replicas = replicas
        self.config = config
        self.clock_ms = clock_ms
        self.cpu_seconds = cpu_seconds
        self.interval_s = config["balancer.load.sample.interval.ms"] / 1000.0
        self.windows = LoadWindows(config["balancer.load.windows"])
        self._task: asyncio.Task[None] | None = None

    def sample(self) -> Sample:
        counters = {(p.topic, p.index): PartitionCounters(p.is_leader, p.bytes_in, p.bytes_out, p.messages_in,
                                                          p.size_bytes)
                    for p in self.replicas.hosted()}
        return Sample(self.clock_ms(), self.cpu_seconds(), counters)

    def document(self) -> dict[str, Any]:
        return self.windows.document(self.broker_id, self.config["broker.rack"] or None, capacities(self.config),
                                     self.clock_ms())

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            try:
                self.windows.add(self.sample())
                await self._publish(json.dumps(self.document(), sort_keys=True).encode())
            except asyncio.CancelledError:
                raise
            except ZkError as error:
                log.debug("balancer load not published: %r", error)
            except Exception:
                log.exception("balancer load sampling: unexpected error")
            await asyncio.sleep(self.interval_s)

    async def _publish(self, data: bytes) -> None:
        path = f"{LOAD_PATH}/{self.broker_id}"
        if await self.zk.exists(path) is None:
            await self.zk.ensure_path(LOAD_PATH)
            await self.zk.create(path, data, ephemeral=True)
        else:
            await self.zk.set(path, data)
