"""The console's aiohttp application: the middlewares that guard it, the page shells and the JSON
API they use, and the blocking cluster layers (roost.console.kafka_side and keeper_side) run in a
thread pool.

Guards, in order: a request whose Host is not the console's own (a DNS-rebinding page) is
refused when the console listens on loopback; a write (any method but GET and HEAD) must send
JSON, so a cross-site form cannot post to it (a browser preflights a cross-site JSON request, and
the console answers no CORS); in read-only mode every write is refused with 403; every answer
carries a Content-Security-Policy that allows the console's own scripts only.

The shells of the overview, the topic list and a topic's messages carry the answer to the page's
first API request, when it is ready within FIRST_ANSWER_WAIT_S, as a JSON data block (not a
script: the policy has nothing to allow; Jinja's tojson escapes <, > and & in it), so the page
fills its table as soon as its script runs: asking for it from the script, even preloaded, took the browser 15 to
25 ms more to hand over. A page without it (too slow, an error) asks the API, and shows the error.

Every answer the console makes (not the static files) says how long the console took over it in
a Server-Timing header, which the browser's network panel and its Resource Timing API show: a slow
page load splits into the console's share and the browser's.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import jinja2
from aiohttp import web

from roost.console.assets import STATIC, Assets
from roost.console.browse import Browser
from roost.console.errors import ConsoleError
from roost.console.history import History, TopicRates
from roost.console.kafka_side import KafkaSide
from roost.console.keeper_side import KeeperSide
from roost.console.settings import ConsoleSettings

log = logging.getLogger("roost.console")
HERE = Path(__file__).parent
T = TypeVar("T")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'")
READS = ("GET", "HEAD")
LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")
FIRST_ANSWER_WAIT_S = 0.5


class Console:
    """What every handler shares: settings, the cluster layers, the thread pool."""

    def __init__(self, settings: ConsoleSettings, kafka: KafkaSide | None = None,
                 keeper: KeeperSide | None = None) -> None:
        self.settings = settings
        self.kafka = kafka or KafkaSide(settings)
        self.keeper = keeper if keeper is not None else (KeeperSide(settings) if settings.zookeeper else None)
        self.browser = Browser(self.kafka, settings.bounds)
        self.history = History()
        self.topic_rates = TopicRates()
        self.pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="roost-console")
        self.assets = Assets(HERE / "static")
        self.templates = jinja2.Environment(loader=jinja2.FileSystemLoader(HERE / "templates"),
                                            autoescape=True, undefined=jinja2.StrictUndefined)

    async def run(self, call: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self.pool, call, *args)

    def need_keeper(self) -> KeeperSide:
        if self.keeper is None:
            raise ConsoleError(404, "no keeper configured: start the console with --zookeeper HOST:PORT")
        return self.keeper

    def page(self, template: str, title: str, first_answer: dict[str, Any] | None = None,
             **context: Any) -> web.Response:
        html = self.templates.get_template(template).render(
            title=title, read_only=self.settings.read_only, bootstrap=self.settings.bootstrap,
            has_keeper=self.keeper is not None, static=self.assets.url, first_answer=first_answer, **context)
        return web.Response(text=html, content_type="text/html")

    async def first_answer(self, path: str, answer: Awaitable[dict[str, Any]]) -> dict[str, Any] | None:
        """What a shell carries for its page's first GET of `path`: {"path", "answer"}, or None
        when the answer failed or is not ready within FIRST_ANSWER_WAIT_S (the page then asks)."""
        task = asyncio.ensure_future(answer)
        task.add_done_callback(lambda done: done.cancelled() or done.exception())  # a late failure is nobody's
        try:
            return {"path": path, "answer": await asyncio.wait_for(asyncio.shield(task), FIRST_ANSWER_WAIT_S)}
        except (TimeoutError, ConsoleError):
            return None

    async def close(self) -> None:
        await self.run(self.browser.close)
        await self.run(self.kafka.close)
        if self.keeper is not None:
            await self.run(self.keeper.close)
        self.pool.shutdown(wait=False, cancel_futures=True)


CONSOLE = web.AppKey("console", Console)


def console_of(request: web.Request) -> Console:
    return request.app[CONSOLE]


def error_response(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


@web.middleware
async def server_timing(request: web.Request, handler: Handler) -> web.StreamResponse:
    begin = time.perf_counter()
    response = await handler(request)
    if not response.prepared and not request.path.startswith(STATIC):  # a stream has sent its headers
        response.headers["Server-Timing"] = f"app;dur={(time.perf_counter() - begin) * 1000:.1f}"
    return response


@web.middleware
async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    console = console_of(request)
    settings = console.settings
    if settings.host in LOOPBACK:
        host = request.host.rsplit(":", 1)[0] if not request.host.startswith("[") else request.host.split("]")[0] + "]"
        if host not in LOOPBACK:
            return error_response(421, f"this console answers to localhost only, not to Host {request.host!r}")
    # A reset preview is POSTed (it carries a target) but changes nothing.
    if request.method not in READS and not request.path.endswith("/reset-preview"):
        if settings.read_only:
            return error_response(403, "read-only console: changes are disabled (started with --read-only)")
        if request.content_type != "application/json":
            return error_response(415, "a change must be sent as application/json")
    try:
        response = await handler(request)
    except ConsoleError as error:
        response = error_response(error.status, error.message)
    except web.HTTPException as error:
        if error.status >= 400 and request.path.startswith("/api/"):
            response = error_response(error.status, error.reason)
        else:
            raise
    except Exception:  # one request failing must not take the console down; the log has the why
        log.exception("console request %s %s failed", request.method, request.path)
        response = error_response(500, "internal error: see the console's log")
    return response


async def common_headers(request: web.Request, response: web.StreamResponse) -> None:
    if request.path.startswith(STATIC):
        response.headers.setdefault("Cache-Control", console_of(request).assets.cache_control(request))
    response.headers.setdefault("Content-Security-Policy", CSP)
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    response.headers.setdefault("Referrer-Policy", "no-referrer")


async def json_body(request: web.Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ConsoleError(400, "the request body is not JSON") from None
    if not isinstance(body, dict):
        raise ConsoleError(400, "the request body must be a JSON object")
    return body


def create_app(settings: ConsoleSettings, kafka: KafkaSide | None = None,
               keeper: KeeperSide | None = None) -> web.Application:
    from roost.console import routes_groups, routes_keeper, routes_messages, routes_overview, routes_topics

    app = web.Application(middlewares=[server_timing, guard], client_max_size=4 * 1024 * 1024)
    console = Console(settings, kafka, keeper)
    app[CONSOLE] = console
    for module in (routes_overview, routes_topics, routes_messages, routes_groups, routes_keeper):
        app.router.add_routes(module.routes)
    app.router.add_static(STATIC, HERE / "static")

    async def closing(_app: web.Application) -> None:
        await console.close()

    app.on_cleanup.append(closing)
    app.on_response_prepare.append(common_headers)
    return app
