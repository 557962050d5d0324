"""KIP-848 consumer groups for `roost group describe`: ConsumerGroupDescribe asked of the group's
coordinator (FindCoordinator key type 0), for the figures confluent-kafka's AdminClient (2.16)
does not expose: the group epoch, the assignment epoch, and each member's epoch and target.

Over a plain socket with Roost's own codec, as `transactions` does; plaintext listeners only
(elsewhere the caller shows what the AdminClient gives).
"""

from __future__ import annotations

from typing import Any

from roost.admin.errors import AdminError
from roost.admin.target import Target
from roost.admin.transactions import UNANSWERED, ask  # the plain-socket exchange both use
from roost.wire.kafka import ApiKey
from roost.wire.kafka.errors import ErrorCode

DESCRIBE_VERSION, FIND_COORDINATOR_VERSION = 0, 3


def _partitions(assignment: dict[str, Any]) -> str:
    return " ".join(f"{t['topic_name'] or t['topic_id']}:{','.join(map(str, sorted(t['partitions'])))}"
                    for t in sorted(assignment["topic_partitions"], key=lambda t: t["topic_name"]))


def describe_consumer_group(target: Target, group: str) -> dict[str, Any] | None:
    """The group as its coordinator describes it (epochs, members' epochs and targets); None when
    the group is no consumer-protocol group or the listener is not plaintext."""
    if target.settings.get("security.protocol", "plaintext").lower() != "plaintext":
        return None
    host, _, port = target.bootstrap.split(",")[0].strip().rpartition(":")
    try:
        found = ask(host, int(port), ApiKey.FIND_COORDINATOR, FIND_COORDINATOR_VERSION,
                    {"key": group, "key_type": 0}, target.timeout_s)
        if found["error_code"] != ErrorCode.NONE:
            raise AdminError(f"describe group {group}: no coordinator ({ErrorCode(found['error_code']).name})")
        answer = ask(found["host"], found["port"], ApiKey.CONSUMER_GROUP_DESCRIBE, DESCRIBE_VERSION,
                     {"group_ids": [group], "include_authorized_operations": False}, target.timeout_s)
    except UNANSWERED as error:
        raise AdminError(f"describe group {group}: no answer ({error})") from None
    (described,) = answer["groups"]
    if described["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND:
        return None
    if described["error_code"] != ErrorCode.NONE:
        raise AdminError(f"describe group {group}: {ErrorCode(described['error_code']).name}")
    return {
        "group_epoch": described["group_epoch"], "assignment_epoch": described["assignment_epoch"],
        "assignor": described["assignor_name"], "state": described["group_state"].lower(),
        "members": {m["member_id"]: {"member_epoch": m["member_epoch"], "target": _partitions(m["target_assignment"]),
                                     "subscribed": ",".join(m["subscribed_topic_names"])
                                     + (f" /{m['subscribed_topic_regex']}/" if m["subscribed_topic_regex"] else "")}
                    for m in described["members"]},
    }
