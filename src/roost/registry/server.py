"""The registry as a server: its settings, the `_schemas` replay, the HTTP listener (and the REST
proxy beside it when `kafka.rest.enable`). Used by `roost schema-registry` and by every broker
with `schema.registry.listeners` set (which runs that command as a child of its own).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web

from roost.config import REGISTRY_SETTINGS, ConfigError
from roost.registry.api import RegistryApi, make_app
from roost.registry.kafka_log import KafkaLog
from roost.registry.security import security_of
from roost.registry.service import Registry
from roost.registry.store import RegistryState
from roost.secret_ref import resolve_secret

log = logging.getLogger("roost.registry")
LISTENING = "roost: schema registry listening on "
DEFAULTS: dict[str, Any] = {s.name: s.default for s in REGISTRY_SETTINGS}
BY_NAME = {s.name: s for s in REGISTRY_SETTINGS}
STOP_DEADLINE_S = 15.0
KAFKA_STOP_SHARE_S = 10.0  # of the stop deadline, what the Kafka clients' closing may take
HTTP_SHUTDOWN_S = 3.0  # requests in flight when stopping get this long to finish


def registry_settings(given: dict[str, Any], source: str) -> dict[str, Any]:
    """The registry's settings: defaults, then `given` (checked by the config registry's rules)."""
    values = dict(DEFAULTS)
    for name, raw in given.items():
        setting = BY_NAME.get(name)
        if setting is None:
            raise ConfigError(f"{source}: unknown setting '{name}'")
        values[name] = setting.parse(raw, source)
    listener = values["schema.registry.listeners"]
    if listener:
        parts = urlsplit(listener)
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.port is None:
            raise ConfigError(f"{source}: setting 'schema.registry.listeners' = {listener!r} is not http(s)://HOST:PORT")
        if (parts.scheme == "https") != bool(values["schema.registry.ssl.keystore.location"]):
            raise ConfigError(f"{source}: an https:// listener needs schema.registry.ssl.keystore.location, and "
                              "that setting an https:// listener")
    return values


def server_ssl(values: dict[str, Any]) -> ssl.SSLContext | None:
    pem = values["schema.registry.ssl.keystore.location"]
    if not pem:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    password = resolve_secret(values["schema.registry.ssl.key.password"]) or None
    context.load_cert_chain(pem, password=password)
    return context


def client_ssl(values: dict[str, Any]) -> ssl.SSLContext | None:
    ca = values["schema.registry.ssl.truststore.location"]
    return ssl.create_default_context(cafile=ca) if ca else None


@dataclass
class RunningRegistry:
    url: str
    runner: web.AppRunner
    kafka_log: KafkaLog
    registry: Registry

    async def stop(self, deadline_s: float = STOP_DEADLINE_S) -> None:
        """Stop serving and close the Kafka clients, within `deadline_s` whatever hangs."""
        loop = asyncio.get_running_loop()
        end = loop.time() + deadline_s
        try:
            await asyncio.wait_for(self.runner.cleanup(), max(0.1, end - loop.time() - KAFKA_STOP_SHARE_S))
        except TimeoutError:
            log.warning("schema registry: its HTTP listener did not stop in time; carrying on")
        await self.kafka_log.stop(max(0.1, end - loop.time()))


async def start_registry(values: dict[str, Any], bootstrap: str, client_settings: dict[str, str]) -> RunningRegistry:
    """Bind the listener, replay `_schemas` to its end, then serve. Raises OSError when the port is taken."""
    parts = urlsplit(values["schema.registry.listeners"])
    host, port = parts.hostname or "127.0.0.1", 8081 if parts.port is None else parts.port
    security = security_of(values["schema.registry.basic.auth.users"], values["schema.registry.bearer.tokens"],
                           values["schema.registry.subject.acls"], values["schema.registry.super.users"])
    state = RegistryState()
    # The socket first, so that the URL the election announces is the bound one (port 0).
    sock = socket.create_server((host, port), reuse_port=False)
    sock.setblocking(False)
    bound_port = sock.getsockname()[1]
    own_url = values["schema.registry.advertised.url"] or f"{parts.scheme}://{host}:{bound_port}"
    kafka_log = KafkaLog(state, bootstrap, client_settings, values["schema.registry.kafkastore.topic"],
                         values["schema.registry.group.id"], own_url,
                         eligible=values["schema.registry.leader.eligibility"],
                         session_timeout_ms=values["schema.registry.group.session.timeout.ms"],
                         write_timeout_s=values["schema.registry.kafkastore.timeout.ms"] / 1000,
                         replication_factor=values["schema.registry.kafkastore.topic.replication.factor"])
    registry = Registry(state, kafka_log)
    api = RegistryApi(registry, kafka_log, security, client_ssl(values),
                      write_timeout_s=values["schema.registry.kafkastore.timeout.ms"] / 1000)
    extra = []
    if values["kafka.rest.enable"]:
        from roost.restproxy.api import RestProxy

        proxy = RestProxy(bootstrap, client_settings, registry, security, own_url)
        extra = proxy.routes()
    app = make_app(api, extra)
    if values["kafka.rest.enable"]:
        app.on_cleanup.append(lambda _app: proxy.close())
    try:
        await kafka_log.start()
    except BaseException:
        sock.close()
        await kafka_log.stop()
        raise
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.SockSite(runner, sock, ssl_context=server_ssl(values), shutdown_timeout=HTTP_SHUTDOWN_S)
    await site.start()
    return RunningRegistry(own_url, runner, kafka_log, registry)
