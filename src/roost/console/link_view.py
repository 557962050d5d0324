"""The cluster links' pages, from what `roost link list|describe` read: the link's settings in the
destination's ZooKeeper (/config/cluster-links/<name>, JSON) and the status each destination
broker publishes for the mirrors it leads (/cluster-links-status/<name>/<broker id>, ephemeral
JSON, every two seconds): per partition the source's high watermark, the mirrored end, the lag in
records and milliseconds, the last error and whether the mirror has stopped (failed).

State, per partition: `mirroring` (fetching; `retrying` while its last attempt failed and it
backs off), `failed` (stopped until an operator acts: authorization, a recreated source topic),
`paused` (the link is), and `promoted`: a topic this console saw as one of the link's mirrors
that is now writable (its `roost.mirror.link` config removed). Promotion leaves no mark of its
own in the cluster, so a promotion before the console started is not shown as one.

The paths are the broker's (roost.broker.link.settings, which the console may not import: a test
checks they agree). Pure: KeeperSide and KafkaSide fetch, `link_rows` and `link_summary` decide."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

LINKS_PATH = "/config/cluster-links"
STATUS_PATH = "/cluster-links-status"
SECRETS = frozenset({"sasl.password", "ssl.key.password"})
UNKNOWN = -1  # the brokers' "not known yet" for a lag or a high watermark
# The link's state as its brokers report it, worst first (roost.broker.link.core.LinkState).
LINK_STATES = ("FAILED", "SOURCE_UNAVAILABLE", "PAUSED", "ACTIVE")


class LinkDataError(ValueError):
    """A znode that is not what a link's brokers write."""


def link_settings(name: str, data: bytes) -> dict[str, Any]:
    """The settings a link was created with (those not at their defaults), secrets hidden."""
    try:
        document = json.loads(data.decode())
        config = document["config"]
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        raise LinkDataError(f"{LINKS_PATH}/{name} is not a link's settings") from None
    if not isinstance(config, dict):
        raise LinkDataError(f"{LINKS_PATH}/{name} is not a link's settings")
    return {str(k): ("(hidden)" if k in SECRETS and v else v) for k, v in sorted(config.items())}


def broker_status(data: bytes) -> dict[str, Any] | None:
    """One broker's published status, or None when it is not one (a torn or foreign znode)."""
    try:
        status = json.loads(data.decode())
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(status, dict) or not isinstance(status.get("partitions", []), list):
        return None
    return status


def link_state(statuses: Iterable[Mapping[str, Any]]) -> str:
    """The link's state: the worst its brokers report; NO_BROKER_REPORTING when none does."""
    states = {s.get("state") for s in statuses}
    for state in LINK_STATES:
        if state in states:
            return state
    return "NO_BROKER_REPORTING"


def known(value: Any) -> int | None:
    return value if isinstance(value, int) and value >= 0 else None


def partition_state(link_paused: bool, entry: Mapping[str, Any]) -> str:
    if link_paused:
        return "paused"
    if entry.get("failed"):
        return "failed"
    return "retrying" if entry.get("error") else "mirroring"


def link_rows(statuses: Iterable[Mapping[str, Any]], promoted: Mapping[str, int]) -> list[dict[str, Any]]:
    """One row per mirror partition a broker reports, and one per partition of each promoted
    topic (`promoted`: topic -> its partition count), sorted by topic and partition."""
    rows = []
    mirrored: set[str] = set()
    for status in statuses:
        paused = status.get("state") == "PAUSED"
        for entry in status.get("partitions", []):
            topic = str(entry.get("topic"))
            mirrored.add(topic)
            rows.append({"topic": topic, "partition": int(entry.get("partition", -1)),
                         "broker": status.get("broker"), "state": partition_state(paused, entry),
                         "source_high_watermark": known(entry.get("source_high_watermark")),
                         "mirrored_end": known(entry.get("mirrored_end")),
                         "lag_records": known(entry.get("lag_records")), "lag_ms": known(entry.get("lag_ms")),
                         "error": entry.get("error") or None})
    for topic, count in promoted.items():
        if topic in mirrored:
            continue  # a broker still mirrors it: its status is the truth
        rows += [{"topic": topic, "partition": index, "broker": None, "state": "promoted",
                  "source_high_watermark": None, "mirrored_end": None, "lag_records": None, "lag_ms": None,
                  "error": None} for index in range(count)]
    return sorted(rows, key=lambda r: (r["topic"], r["partition"]))


def link_summary(name: str, settings: Mapping[str, Any], statuses: Sequence[Mapping[str, Any]],
                 promoted: Mapping[str, int]) -> dict[str, Any]:
    """A link's page: its source, state, errors, totals and the per-partition rows."""
    rows = link_rows(statuses, promoted)
    lags = [r["lag_records"] for r in rows if r["lag_records"] is not None]
    lag_ms = [r["lag_ms"] for r in rows if r["lag_ms"] is not None]
    errors = [{"broker": s.get("broker"), "error": s["error"]} for s in statuses if s.get("error")]
    errors += [{"broker": r["broker"], "error": f"{r['topic']}[{r['partition']}]: {r['error']}"}
               for r in rows if r["error"]]
    return {"link": name, "source": settings.get("bootstrap.servers"), "state": link_state(statuses),
            "settings": dict(settings), "brokers_reporting": sorted(s.get("broker") for s in statuses),
            "topics": sorted({r["topic"] for r in rows}), "partitions": rows,
            "lag_records": sum(lags) if lags else None, "max_lag_ms": max(lag_ms) if lag_ms else None,
            "errors": errors}
