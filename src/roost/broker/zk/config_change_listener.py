"""Every broker's watch on /config/changes (Kafka's ZkNodeChangeNotificationListener for configs):
an AlterConfigs, served by any broker, writes /config/topics/<topic> (or /config/brokers/<id>) and
then a sequential `config_change_<seq>` naming that entity; each broker is told the entities named
by notifications newer than the last it handled, re-reads their configs and applies them.

Notifications already there when the broker starts are not replayed: partitions opened later read
their topic's configs from ZooKeeper anyway. The watching, ordering and expiry are
`change_notifications.ChangeNotificationListener`'s.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from roost.broker.zk import layout
from roost.broker.zk.change_notifications import EXPIRY_MS, ChangeNotificationListener
from roost.zkclient import ZkClient, ZkError

log = logging.getLogger("roost.broker.zk")


class ConfigChangeListener(ChangeNotificationListener):
    def __init__(self, zk: ZkClient, on_change: Callable[[str], Awaitable[None]],
                 expiry_ms: int = EXPIRY_MS) -> None:
        super().__init__(zk, layout.CONFIG_CHANGES, layout.CONFIG_CHANGE_PREFIX, self._told, "config change",
                         expiry_ms)
        self.on_change = on_change

    async def start(self) -> None:
        await self.arm()
        self.listen()

    async def _told(self, child: str, data: bytes) -> None:
        try:
            entity = layout.decode_entity_change(data)
        except layout.LayoutError as error:
            log.warning("ignoring config change %s: %s", child, error)
            return
        try:
            await self.on_change(entity)
        except ZkError:
            raise  # ZooKeeper unreachable: this notification is handled again later
        except Exception:  # what the entity holds is unusable: not retried forever
            log.exception("applying the config change %s (%s) failed", child, entity)
