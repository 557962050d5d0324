"""librdkafka settings that Roost's own clients use by default (the `roost` command's producer and
consumer, the Spark source and sink, the pytest plugin's clients); user settings override them.

A leader whose machine is cut off sends no RST: librdkafka's connection to it stays open, its
requests simply wait, and nothing makes it ask for metadata, so at its defaults it keeps sending
to the cut-off leader for the whole cut (`topic.metadata.refresh.interval.ms` is 5 minutes) even
though the cluster named new leaders seconds earlier. Refreshing every second lets it find them
about a second after they are named. Measured with `bench/cut_failover_bench.py` (docs/cluster.md,
"A cut-off machine"); it costs one small Metadata request a second per client.
"""

from __future__ import annotations

from typing import Any

FAILOVER_SETTINGS: dict[str, Any] = {"topic.metadata.refresh.interval.ms": 1000}
