"""The lines of a child's output as `roost up` relays them (roost.cli.servers.launch.child_lines)."""

from __future__ import annotations

import asyncio

from roost.cli.servers.launch import child_lines


def test_a_line_past_the_limit_is_skipped_and_the_lines_after_it_still_come() -> None:
    async def main() -> list[str]:
        stream = asyncio.StreamReader(limit=64)
        stream.feed_data(b"roost: kafka listening on 127.0.0.1:9092\n" + b"x" * 500 + b"\n" + b"caf\xc3\xa9 \xff\n")
        stream.feed_data(b"last line without an end")
        stream.feed_eof()
        return [line async for line in child_lines(stream)]

    assert asyncio.run(main()) == ["roost: kafka listening on 127.0.0.1:9092", "café \ufffd", "last line without an end"]
