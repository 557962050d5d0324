"""The console's aiohttp application: the middlewares that guard it, the page shells and the JSON
API they use, and the blocking cluster layers (roost.console.kafka_side and keeper_side) run in a
thread pool.

Guards, in order: a request whose Host is not the console's own (a DNS-rebinding page) is
refused when the console listens on loopback; a write (any method but GET and HEAD) must send
JSON, so a cross-site form cannot post to it (a browser preflights a cross-site JSON request, and
the console answers no CORS); in read-only mode every write is refused with 403; with a login
configured (roost.console.routes_login) nothing but the login form and the static files is served
without a session or HTTP basic auth; every answer
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

import logging
import time
from collections.abc import Awaitable, Callable

from aiohttp import web

from roost.console import (
    routes_balancer,
    routes_groups,
    routes_keeper,
    routes_links,
    routes_login,
    routes_messages,
    routes_overview,
    routes_schemas,
    routes_share_groups,
    routes_topics,
    routes_transactions,
)
from roost.console.assets import STATIC
from roost.console.context import CONSOLE, HERE, Console, console_of
from roost.console.errors import ConsoleError
from roost.console.kafka_side import KafkaSide
from roost.console.keeper_side import KeeperSide
from roost.console.settings import ConsoleSettings

log = logging.getLogger("roost.console")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'")
READS = ("GET", "HEAD")
LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")


def error_response(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


@web.middleware
async def server_timing(request: web.Request, handler: Handler) -> web.StreamResponse:
    begin = time.perf_counter()
    response = await handler(request)
    if not response.prepared and not request.path.startswith(STATIC):  # a stream has sent its headers
        response.headers["Server-Timing"] = f"app;dur={(time.perf_counter() - begin) * 1000:.1f}"
    return response


def from_another_site(request: web.Request) -> bool:
    """A browser says where a form was posted from: Sec-Fetch-Site (every current browser), else
    an Origin. The console's own pages send `Origin: null` (their Referrer-Policy is no-referrer),
    which tells nothing either way."""
    site = request.headers.get("Sec-Fetch-Site")
    if site is not None:
        return site not in ("same-origin", "none")
    origin = request.headers.get("Origin")
    return origin not in (None, "null") and origin.split("://", 1)[-1] != request.host


@web.middleware
async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    console = console_of(request)
    settings = console.settings
    if settings.host in LOOPBACK:
        host = request.host.rsplit(":", 1)[0] if not request.host.startswith("[") else request.host.split("]")[0] + "]"
        if host not in LOOPBACK:
            return error_response(421, f"this console answers to localhost only, not to Host {request.host!r}")
    if request.path in (routes_login.LOGIN, routes_login.LOGOUT):
        # Forms (so they work without the page's script), in read-only mode too; a form posted
        # from another site's page is refused.
        if request.method not in READS and from_another_site(request):
            return error_response(403, "a login from another site's page is refused")
    # A reset preview is POSTed (it carries a target) but changes nothing.
    elif request.method not in READS and not request.path.endswith("/reset-preview"):
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


def create_app(settings: ConsoleSettings, kafka: KafkaSide | None = None,
               keeper: KeeperSide | None = None) -> web.Application:
    app = web.Application(middlewares=[server_timing, guard, routes_login.require_login], client_max_size=4 * 1024 * 1024)
    console = Console(settings, kafka, keeper)
    app[CONSOLE] = console
    for module in (routes_login, routes_overview, routes_topics, routes_messages, routes_groups, routes_keeper,
                   routes_transactions, routes_share_groups, routes_links, routes_schemas, routes_balancer):
        app.router.add_routes(module.routes)
    app.router.add_static(STATIC, HERE / "static")

    async def closing(_app: web.Application) -> None:
        await console.close()

    app.on_cleanup.append(closing)
    app.on_response_prepare.append(common_headers)
    return app
