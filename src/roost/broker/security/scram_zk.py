"""SCRAM credentials in ZooKeeper, where Kafka keeps them: read at start, re-read for each
`users/<name>` change notification, written (with the notification) by AlterUserScramCredentials.

A user written into /config/users by any ZooKeeper client (kafka-configs --zookeeper did that)
logs in without a broker restart, as long as it also writes the notification; one written before
the broker starts is read at start.
"""

from __future__ import annotations

import logging

from roost.broker.security.scram import (
    ScramCredential,
    ScramCredentialStore,
    decode_user_node,
    desanitize,
    encode_user_node,
    sanitize,
)
from roost.broker.zk.layout import CONFIG_CHANGE_PREFIX, CONFIG_CHANGES, encode_entity_change
from roost.zkclient import ZkClient
from roost.zkclient.errors import BadVersionError, NodeExistsError, NoNodeError

log = logging.getLogger("roost.broker.security")

CONFIG_USERS = "/config/users"
WRITE_ATTEMPTS = 5


class ZkScramCredentials:
    def __init__(self, zk: ZkClient, store: ScramCredentialStore) -> None:
        self.zk = zk
        self.store = store

    async def load_all(self) -> None:
        try:
            children = await self.zk.get_children(CONFIG_USERS)
        except NoNodeError:
            return
        for child in children:
            await self.reload_user(child)
        log.info("%d users with SCRAM credentials", len(self.store.users()))

    async def reload_user(self, sanitized: str) -> None:
        user = desanitize(sanitized)
        try:
            data, _ = await self.zk.get(f"{CONFIG_USERS}/{sanitized}")
        except NoNodeError:
            self.store.set_user(user, {})
            return
        try:
            credentials, _ = decode_user_node(data)
        except ValueError as error:
            log.warning("%s/%s is not a usable user config (%s); its logins are refused", CONFIG_USERS,
                        sanitized, error)
            credentials = {}
        self.store.set_user(user, credentials)
        log.info("user %r: SCRAM credentials for %s", user, ", ".join(sorted(credentials)) or "none")

    async def alter_user(self, user: str, upserts: dict[str, ScramCredential], deletions: set[str]) -> None:
        """Change one user's credentials in ZooKeeper (keeping its other configs), then notify
        every broker; retried when another writer changed the node meanwhile."""
        path = f"{CONFIG_USERS}/{sanitize(user)}"
        for _ in range(WRITE_ATTEMPTS):
            try:
                data, stat = await self.zk.get(path)
                version = stat.version
            except NoNodeError:
                data, version = None, -2
            credentials, other = decode_user_node(data) if data else ({}, {})
            for mechanism in deletions:
                credentials.pop(mechanism, None)
            credentials.update(upserts)
            body = encode_user_node(credentials, other)
            try:
                if version == -2:
                    await self.zk.create(path, body, makepath=True)
                else:
                    await self.zk.set(path, body, version)
            except (NodeExistsError, BadVersionError):
                continue
            await self.zk.create(f"{CONFIG_CHANGES}/{CONFIG_CHANGE_PREFIX}",
                                 encode_entity_change(f"users/{sanitize(user)}"), sequential=True, makepath=True)
            self.store.set_user(user, credentials)
            return
        raise RuntimeError(f"{path} kept changing under us; try again")
