"""The OpenAPI document is true (every route served is in it, every path in it is served) and a
schemathesis property fuzz of every registry operation in it finds no 5xx answer and no crash.
A brief run here (a few examples per operation); scripts/registry_fuzz.py runs it long, and
against a real node with the REST proxy's operations too."""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator

import pytest

warnings.filterwarnings("ignore", category=DeprecationWarning)
schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, settings  # noqa: E402

from roost.registry.api import AlwaysWriter, RegistryApi, make_app  # noqa: E402
from roost.registry.memory_log import MemoryLog  # noqa: E402
from roost.registry.openapi import document  # noqa: E402
from roost.registry.security import Security  # noqa: E402
from roost.registry.service import Registry  # noqa: E402
from roost.registry.store import RegistryState  # noqa: E402
from roost.restproxy.api import RestProxy  # noqa: E402
from tests.registry.local_registry import local_registry  # noqa: E402

EXAMPLES = int(os.environ.get("ROOST_REGISTRY_FUZZ_EXAMPLES", "6"))
SCHEMA = schemathesis.openapi.from_dict(document(with_proxy=False))


def _templates(app) -> set[tuple[str, str]]:
    found = set()
    for route in app.router.routes():
        info = route.resource.get_info() if route.resource is not None else {}
        path = info.get("path") or info.get("formatter")
        if route.method != "HEAD" and path:
            found.add((route.method.lower(), path))
    return found


def test_the_document_names_every_route_and_only_routes() -> None:
    state = RegistryState()
    registry = Registry(state, MemoryLog(state))
    api = RegistryApi(registry, AlwaysWriter(), Security())
    proxy = RestProxy("127.0.0.1:1", {}, registry, Security(), "http://127.0.0.1:1")
    app = make_app(api, proxy.routes())
    documented = {(method, path) for path, methods in document(with_proxy=True)["paths"].items() for method in methods}
    assert _templates(app) == documented


@pytest.fixture(scope="module")
def served() -> Iterator[str]:
    with local_registry() as (url, _registry):
        yield url


@SCHEMA.parametrize()
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_operation_answers_5xx(case, served: str) -> None:
    response = case.call(base_url=served, timeout=20)
    assert response.status_code < 500, f"{case.method} {case.formatted_path}: {response.status_code} {response.text[:300]}"
