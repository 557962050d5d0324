"""Setting a share group's configs (the GROUP resource) the way an application does, and waiting
until the brokers that will act on them have them.

A broker takes IncrementalAlterConfigs on a GROUP at once, but the other brokers of a cluster
learn it through ZooKeeper's config change notification (as Kafka's learn it from the metadata
log): a ShareFetch sent to another broker right after the answer can still initialize the
share-partition with the old `share.auto.offset.reset` and hand out nothing. Tests that fetch
from a partition leader name it in `seen_by`, and this waits (bounded) until it reports the
values through DescribeConfigs, which every broker answers from its own copy.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping

from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from roost.broker.share.group_configs import RESOURCE_GROUP
from roost.wire.kafka import ApiKey
from tests.support.kafka_wire import WireClient


def described_group_configs(address: str, group: str) -> dict[str, str | None]:
    """The GROUP resource's configs as the broker at `address` answers DescribeConfigs."""
    client = WireClient(address, timeout=15)
    try:
        answer = client.request(ApiKey.DESCRIBE_CONFIGS, 1, {
            "resources": [{"resource_type": RESOURCE_GROUP, "resource_name": group, "configuration_keys": None}],
            "include_synonyms": False})
    finally:
        client.close()
    (result,) = answer["results"]
    assert result["error_code"] == 0, result
    return {entry["name"]: entry["value"] for entry in result["configs"]}


def set_group_configs(admin: AdminClient | str, group: str, configs: Mapping[str, str],
                      seen_by: Iterable[str] = (), timeout: float = 30.0) -> None:
    """SET `configs` on share group `group` through `admin` (or a new client of that bootstrap),
    then wait until every broker address in `seen_by` describes them."""
    client = AdminClient({"bootstrap.servers": admin}) if isinstance(admin, str) else admin
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET) for key, value in configs.items()])
    for future in client.incremental_alter_configs([resource]).values():
        future.result(timeout)
    deadline = time.monotonic() + timeout
    for address in seen_by:
        while True:
            described = described_group_configs(address, group)
            if all(described.get(key) == value for key, value in configs.items()):
                break
            assert time.monotonic() < deadline, f"{address} still describes {group} as {described}, not {configs}"
            time.sleep(0.05)


def read_from_earliest(admin: AdminClient | str, group: str, seen_by: Iterable[str] = ()) -> None:
    """`share.auto.offset.reset` earliest: records produced before the group first fetches are handed out."""
    set_group_configs(admin, group, {"share.auto.offset.reset": "earliest"}, seen_by)
