"""What every route of the console shares: the Console (settings, the blocking cluster layers, the
thread pool they run in, the page templates), found on a request by `console_of`, and the JSON
body of a write. The routes import this module, and the application (app.py) imports the routes:
no route imports the application or another route."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import jinja2
from aiohttp import web

from roost.console.assets import Assets
from roost.console.balancer_side import BalancerSide
from roost.console.browse import Browser
from roost.console.errors import ConsoleError
from roost.console.history import History, TopicRates
from roost.console.kafka_side import KafkaSide
from roost.console.keeper_side import KeeperSide
from roost.console.links_side import LinksSide
from roost.console.login import LoginGate
from roost.console.registry_side import RegistrySide
from roost.console.settings import ConsoleSettings

HERE = Path(__file__).parent
T = TypeVar("T")
FIRST_ANSWER_WAIT_S = 0.5


class Console:
    """What every handler shares: settings, the cluster layers, the thread pool."""

    def __init__(self, settings: ConsoleSettings, kafka: KafkaSide | None = None,
                 keeper: KeeperSide | None = None) -> None:
        self.settings = settings
        self.kafka = kafka or KafkaSide(settings)
        self.keeper = keeper if keeper is not None else (KeeperSide(settings) if settings.zookeeper else None)
        self.login = LoginGate(settings.login, time.monotonic) if settings.login is not None else None
        self.login_refusals = asyncio.Lock()  # refused passwords wait their delay one at a time
        self.registry = RegistrySide(settings.schema_registry, settings.request_timeout_s)
        self.browser = Browser(self.kafka, settings.bounds, self.registry)
        self.links = LinksSide(self.keeper, self.kafka)
        self.balancer = BalancerSide(settings, self.keeper)
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
            has_keeper=self.keeper is not None, has_login=self.login is not None,
            has_registry=self.registry.url is not None, static=self.assets.url, first_answer=first_answer, **context)
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


async def json_body(request: web.Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ConsoleError(400, "the request body is not JSON") from None
    if not isinstance(body, dict):
        raise ConsoleError(400, "the request body must be a JSON object")
    return body
