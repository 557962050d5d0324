"""A topic's `compression.type` applied to the batches a client produces (Kafka's LogValidator):
`producer` keeps each batch as the producer compressed it; a codec name makes the leader store
every batch in that codec, recompressing those that use another one at the topic's
`compression.<codec>.level`. Batches already in the topic's codec are kept byte for byte, as Kafka
keeps them (it cannot know their level). Followers and cluster links copy the leader's bytes, so
only the leader's client appends come here.

Decisions only: which batches change and how; the bytes are rebuilt by `recompress_batch`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from roost.wire.kafka.records import (
    COMPRESSION_GZIP,
    COMPRESSION_LZ4,
    COMPRESSION_NONE,
    COMPRESSION_SNAPPY,
    COMPRESSION_ZSTD,
    BatchHeader,
    parse_header,
    recompress_batch,
)

# Kafka's BrokerCompressionType names; `producer` is absent: it means "keep".
CODEC_OF: Final[Mapping[str, int]] = {"uncompressed": COMPRESSION_NONE, "gzip": COMPRESSION_GZIP,
                                      "snappy": COMPRESSION_SNAPPY, "lz4": COMPRESSION_LZ4,
                                      "zstd": COMPRESSION_ZSTD}
# The topic config holding each codec's level (KIP-390); snappy has none.
_LEVEL_CONFIG: Final[Mapping[int, str]] = {COMPRESSION_GZIP: "compression.gzip.level",
                                           COMPRESSION_LZ4: "compression.lz4.level",
                                           COMPRESSION_ZSTD: "compression.zstd.level"}


def target_codec(configs: Mapping[str, Any]) -> int | None:
    """The codec a topic stores its batches in; None for `producer` (as sent)."""
    return CODEC_OF.get(configs.get("compression.type", "producer"))


def codec_level(configs: Mapping[str, Any], codec: int) -> int | None:
    """The level to compress `codec` at; None: the library's default (gzip's -1 means that too)."""
    name = _LEVEL_CONFIG.get(codec)
    if name is None or name not in configs:
        return None
    level = int(configs[name])
    return None if codec == COMPRESSION_GZIP and level == -1 else level


def recompress_for_topic(records: bytes | bytearray | memoryview, batches: Sequence[tuple[int, BatchHeader]],
                         configs: Mapping[str, Any]) -> tuple[bytearray, list[tuple[int, BatchHeader]]] | None:
    """`records` with every batch in the topic's codec, and the batches' new positions and
    headers; None when nothing changes (the topic keeps the producer's codec, or every batch is
    in the topic's already). Raises InvalidRecordBatch for a block that does not decompress."""
    codec = target_codec(configs)
    if codec is None or all(header.compression == codec for _, header in batches):
        return None
    level = codec_level(configs, codec)
    view = memoryview(records)
    out = bytearray()
    rebuilt: list[tuple[int, BatchHeader]] = []
    for pos, header in batches:
        start = len(out)
        if header.compression == codec:
            out += view[pos : pos + header.size]
        else:
            out += recompress_batch(view, pos, header, codec, level)
        rebuilt.append((start, parse_header(out, start)))
    assert len(rebuilt) == len(batches)
    assert sum(header.records_count for _, header in rebuilt) == sum(h.records_count for _, h in batches)
    return out, rebuilt
