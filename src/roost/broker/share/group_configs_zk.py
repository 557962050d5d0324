"""The share group configs' ZooKeeper backing: /config/groups/<group, sanitized> holding
{"version":1,"config":{...}} as a topic's configs are kept, and a config change notification
naming `groups/<group>` so every broker reloads that group (the same listener as topics').
"""

from __future__ import annotations

import logging

from roost.broker.security.scram import desanitize, sanitize
from roost.broker.share.group_configs import GroupConfigStore
from roost.broker.zk.layout import decode_topic_config, entity_config_path
from roost.broker.zk.membership import ClusterMembership
from roost.zkclient import NoNodeError

log = logging.getLogger("roost.broker.share")

GROUPS_ENTITY = "groups/"
CONFIG_GROUPS = "/config/groups"
MAX_LOADED = 100_000


def entity_path(group_id: str) -> str:
    return GROUPS_ENTITY + sanitize(group_id)


class ZkGroupConfigs:
    def __init__(self, membership: ClusterMembership) -> None:
        self.membership = membership

    async def persist(self, group_id: str, configs: dict[str, str], store: GroupConfigStore) -> None:
        await self.membership.change_entity_config(entity_path(group_id), configs)
        await self.reload(store, sanitize(group_id))  # what ZooKeeper holds now, with its version

    async def load_all(self, store: GroupConfigStore) -> None:
        try:
            children = await self.membership.zk.get_children(CONFIG_GROUPS)
        except NoNodeError:
            return
        for child in children[:MAX_LOADED]:
            await self.reload(store, child)
        if children:
            log.info("%d groups with configs", len(children))

    async def reload(self, store: GroupConfigStore, sanitized: str) -> None:
        """Read the group's znode and keep it unless a newer one was kept meanwhile (a reload
        started before a change may end after it: the znode's mzxid orders them)."""
        path = entity_config_path(GROUPS_ENTITY + sanitized)
        try:
            data, stat = await self.membership.zk.get(path)
        except NoNodeError:
            store.learn(desanitize(sanitized), {}, version=None)
            return
        store.learn(desanitize(sanitized), decode_topic_config(path, data), version=stat.mzxid)
