"""The console's login in the web layer (the checks themselves: roost.console.login): the form at
/login, /logout, and the middleware that lets nothing but the login page and the static files
through without a session cookie or HTTP basic auth.

Without a login a page (GET) is sent to /login?next=<path>; an API request or a change gets 401
(with `WWW-Authenticate: Basic` when it carried no session cookie at all, so that a script is
told to use basic auth while a page whose session ran out shows its error instead of a browser
dialog). Every refusal of a password is delayed and logged with the user name tried and the
client's address, never the password.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from urllib.parse import quote

from aiohttp import web

from roost.console.assets import STATIC
from roost.console.context import console_of
from roost.console.login import COOKIE, FAILED_LOGIN_DELAY_S, MAX_CREDENTIAL_BYTES, LoginGate, safe_next

log = logging.getLogger("roost.console")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
LOGIN, LOGOUT = "/login", "/logout"
OPEN_PATHS = (LOGIN,)  # and the static files: the login page's style sheet

routes = web.RouteTableDef()


async def refuse_slowly(request: web.Request) -> None:
    """Every refused password waits FAILED_LOGIN_DELAY_S, one refusal after another: guesses sent
    in parallel get no more than 1 / FAILED_LOGIN_DELAY_S answers a second between them (a right
    password never waits)."""
    async with console_of(request).login_refusals:
        await asyncio.sleep(FAILED_LOGIN_DELAY_S)


def see_other(location: str) -> web.Response:
    return web.Response(status=303, headers={"Location": location})


def gate_of(request: web.Request) -> LoginGate | None:
    return console_of(request).login


@web.middleware
async def require_login(request: web.Request, handler: Handler) -> web.StreamResponse:
    gate = gate_of(request)
    if gate is None or request.path in OPEN_PATHS or request.path.startswith(STATIC):
        return await handler(request)
    if gate.session_ok(request.cookies.get(COOKIE)) or gate.basic_ok(request.headers.get("Authorization")):
        return await handler(request)
    if request.headers.get("Authorization"):
        log.warning("console: refused basic auth from %s", request.remote)
        await refuse_slowly(request)
    if request.method in ("GET", "HEAD") and not request.path.startswith("/api/"):
        return see_other(f"{LOGIN}?next={quote(request.path_qs, safe='/')}")
    headers = {} if COOKIE in request.cookies else {"WWW-Authenticate": 'Basic realm="roost console", charset="UTF-8"'}
    return web.json_response({"error": "log in first: the console needs a login (the form at /login, "
                                       "or HTTP basic auth)"}, status=401, headers=headers)


def login_page(request: web.Request, next_path: str | None, status: int = 200, failed: bool = False) -> web.Response:
    console = console_of(request)
    html = console.templates.get_template("login.html").render(
        title="Log in", static=console.assets.url, failed=failed, next=safe_next(next_path))
    return web.Response(text=html, content_type="text/html", status=status)


@routes.get(LOGIN)
async def show_login(request: web.Request) -> web.StreamResponse:
    if gate_of(request) is None:
        return see_other("/")
    return login_page(request, request.query.get("next"))


@routes.post(LOGIN)
async def log_in(request: web.Request) -> web.StreamResponse:
    gate = gate_of(request)
    if gate is None:
        return see_other("/")
    form = await request.post()
    username, password = str(form.get("username", "")), str(form.get("password", ""))
    if not gate.password_ok(username, password):
        log.warning("console: failed login for user %r from %s", username[:MAX_CREDENTIAL_BYTES // 16], request.remote)
        await refuse_slowly(request)
        return login_page(request, str(form.get("next", "/")), status=401, failed=True)
    log.info("console: user %r logged in from %s", username, request.remote)
    response = see_other(safe_next(str(form.get("next", "/"))))
    response.set_cookie(COOKIE, gate.open_session(), httponly=True, samesite="Strict", path="/",
                        secure=console_of(request).settings.tls is not None,
                        max_age=int(gate.login.session_s))
    return response


@routes.post(LOGOUT)
async def log_out(request: web.Request) -> web.StreamResponse:
    gate = gate_of(request)
    if gate is not None:
        gate.close_session(request.cookies.get(COOKIE))
    response = see_other(LOGIN if gate is not None else "/")
    response.del_cookie(COOKIE, path="/")
    return response
