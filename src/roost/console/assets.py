"""The console's static files (its stylesheets and the esbuild bundle in static/) and how a
browser may keep them.

A page names each file with its content's hash in the URL (/static/console.js?v=HASH, aiohttp's
append_version), and the bundle's chunks carry esbuild's content hash in their names
(static/chunks/charts-HASH.js), so an answer for such a URL never changes: it is sent with
Cache-Control immutable and a browser reuses it without asking again. Any other /static/ URL
(an old or missing hash) must be revalidated (aiohttp answers If-None-Match with 304). The hashes
are taken once, when the console starts: the files are part of the installed package.
"""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

from aiohttp import web

STATIC = "/static/"
CHUNKS = "chunks/"
VERSION_KEY = "v"  # aiohttp's own name for the query parameter (StaticResource.VERSION_KEY)
FOREVER = "public, max-age=31536000, immutable"
REVALIDATE = "no-cache"


def content_hash(data: bytes) -> str:
    """As aiohttp's StaticResource._get_file_hash: URL-safe base64 of the SHA-256."""
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode("ascii")


class Assets:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.hashes = {path.relative_to(directory).as_posix(): content_hash(path.read_bytes())
                       for path in sorted(directory.rglob("*")) if path.is_file()}

    def url(self, name: str) -> str:
        """The URL a page names `name` (a path under static/) by; its hash changes with its content."""
        assert name in self.hashes, f"no static file {name!r}"
        return f"{STATIC}{name}?{VERSION_KEY}={self.hashes[name]}"

    def cache_control(self, request: web.Request) -> str:
        name = request.path[len(STATIC):]
        named_by_content = name.startswith(CHUNKS) or request.query.get(VERSION_KEY) == self.hashes.get(name)
        return FOREVER if named_by_content and name in self.hashes else REVALIDATE
