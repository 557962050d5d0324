"""Where client quotas are kept: ZooKeeper for a broker in a cluster (Kafka's paths, see
quotas/core.py; other keys in the same znode, such as a user's SCRAM credentials, are kept as
they are), a JSON file in the data directory for a broker alone.

Both fill one `QuotaConfigs`: at start (`load_all`), and in a cluster again for every
/config/changes notification naming a quota entity (`reload`), so a quota set through any broker,
or written into ZooKeeper by Kafka's own tools with a notification, applies on every broker.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from roost.broker.quotas.core import (
    DEFAULT,
    Entity,
    QuotaConfigs,
    describe,
    entity_path,
    parse_entity_path,
    parse_stored,
)
from roost.broker.zk.layout import CONFIG_CHANGE_PREFIX, CONFIG_CHANGES, encode_entity_change
from roost.log.files import atomic_write
from roost.zkclient import ZkClient
from roost.zkclient.errors import BadVersionError, NodeExistsError, NoNodeError

log = logging.getLogger("roost.broker.quotas")

WRITE_ATTEMPTS = 5


def _format(value: float) -> str:
    """As Kafka writes a quota: a whole number without a fraction."""
    return str(int(value)) if value == int(value) else repr(value)


class QuotaStore:
    def __init__(self, configs: QuotaConfigs) -> None:
        self.configs = configs

    async def load_all(self) -> None:
        raise NotImplementedError

    async def alter(self, entity: Entity, upserts: dict[str, float], removals: set[str]) -> None:
        raise NotImplementedError


class LocalQuotaStore(QuotaStore):
    """A broker without a keeper: every entity's quotas in one JSON file."""

    def __init__(self, configs: QuotaConfigs, path: Path) -> None:
        super().__init__(configs)
        self.path = path

    async def load_all(self) -> None:
        if not self.path.exists():
            return
        try:
            stored = json.loads(self.path.read_text())
        except (OSError, ValueError) as error:
            log.error("cannot read the client quotas in %s (%s): no quotas apply until they are set again",
                      self.path, error)
            return
        for path, config in stored.items():
            entity = parse_entity_path(path)
            if entity is not None and isinstance(config, dict):
                self.configs.set(entity, parse_stored(entity, {k: str(v) for k, v in config.items()}))

    async def alter(self, entity: Entity, upserts: dict[str, float], removals: set[str]) -> None:
        quotas = self.configs.get(entity)
        for key in removals:
            quotas.pop(key, None)
        quotas.update(upserts)
        self.configs.set(entity, quotas)
        atomic_write(self.path, json.dumps({entity_path(e): {k: _format(v) for k, v in q.items()}
                                            for e, q in self.configs.items()}, sort_keys=True).encode())
        log.info("client quotas of %s now %s", describe(entity), quotas or "none")


class ZkQuotaStore(QuotaStore):
    def __init__(self, configs: QuotaConfigs, zk: ZkClient) -> None:
        super().__init__(configs)
        self.zk = zk

    async def load_all(self) -> None:
        paths = []
        for top in ("users", "clients", "ips"):
            for child in await self._children(f"/config/{top}"):
                paths.append(f"{top}/{child}")
                if top == "users":
                    paths += [f"users/{child}/clients/{c}" for c in await self._children(f"/config/users/{child}/clients")]
        for path in paths:
            await self.reload(path)
        log.info("%d quota entities loaded from ZooKeeper", len(self.configs.items()))

    async def _children(self, path: str) -> list[str]:
        try:
            return await self.zk.get_children(path)
        except NoNodeError:
            return []

    async def reload(self, path: str) -> bool:
        """Re-read one entity named by a change notification; False if `path` names none."""
        entity = parse_entity_path(path)
        if entity is None:
            return False
        try:
            data, _ = await self.zk.get(f"/config/{path}")
        except NoNodeError:
            self.configs.set(entity, {})
            return True
        self.configs.set(entity, parse_stored(entity, _config_of(data, path)))
        return True

    async def alter(self, entity: Entity, upserts: dict[str, float], removals: set[str]) -> None:
        """Change one entity's quotas (keeping the znode's other keys), then notify every broker;
        retried when another writer changed the znode meanwhile."""
        path = entity_path(entity)
        znode = f"/config/{path}"
        for _ in range(WRITE_ATTEMPTS):
            try:
                data, stat = await self.zk.get(znode)
                version = stat.version
            except NoNodeError:
                data, version = b"", -2
            config = _config_of(data, path) if data else {}
            for key in removals:
                config.pop(key, None)
            config.update({key: _format(value) for key, value in upserts.items()})
            body = json.dumps({"version": 1, "config": config}).encode()
            try:
                if version == -2:
                    await self.zk.create(znode, body, makepath=True)
                else:
                    await self.zk.set(znode, body, version)
            except (NodeExistsError, BadVersionError):
                continue
            await self.zk.create(f"{CONFIG_CHANGES}/{CONFIG_CHANGE_PREFIX}", encode_entity_change(path),
                                 sequential=True, makepath=True)
            self.configs.set(entity, parse_stored(entity, config))
            log.info("client quotas of %s now %s", describe(entity), self.configs.get(entity) or "none")
            return
        raise RuntimeError(f"{znode} kept changing under us; try again")


def _config_of(data: bytes, path: str) -> dict[str, str]:
    try:
        value = json.loads(data)
        config = value.get("config") if isinstance(value, dict) else None
    except ValueError:
        config = None
    if not isinstance(config, dict):
        log.warning("/config/%s is not Kafka's config JSON; read as empty", path)
        return {}
    return {str(k): str(v) for k, v in config.items()}


__all__ = ["DEFAULT", "LocalQuotaStore", "QuotaStore", "ZkQuotaStore"]
