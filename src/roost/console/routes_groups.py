"""Consumer groups: the list, one group's state, members, assignment and lag per partition (with
its total lag over time for the chart), and offset resets: a preview of the new offsets, then an
apply that must name the same target and confirm. Both refuse a group with live members."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from roost.admin.errors import SeekTargetError
from roost.admin.seek import SeekTarget, parse_seek_target
from roost.console.context import console_of, json_body
from roost.console.errors import bad_request

routes = web.RouteTableDef()


@routes.get("/groups")
async def groups_page(request: web.Request) -> web.Response:
    return console_of(request).page("groups.html", "Consumer groups")


@routes.get("/groups/{name}")
async def group_page(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    return console_of(request).page("group.html", f"Group {name}", group=name)


@routes.get("/api/groups")
async def groups_api(request: web.Request) -> web.Response:
    console = console_of(request)
    return web.json_response({"groups": await console.run(console.kafka.groups)})


@routes.get("/api/groups/{name}")
async def group_api(request: web.Request) -> web.Response:
    console = console_of(request)
    name = request.match_info["name"]
    found = await console.run(console.kafka.group, name)
    found["lag_history"] = console.history.record_lag(name, found["total_lag"])
    return web.json_response(found)


def reset_target(body: dict[str, Any]) -> tuple[SeekTarget, list[str] | None]:
    """`to`: start, end, OFFSET, @TIME, +N or -N (as `roost group seek --to`); `topics`: a list."""
    to = body.get("to")
    if not isinstance(to, str):
        raise bad_request("to is required: start, end, OFFSET, @TIME, +N or -N")
    try:
        target = parse_seek_target(to)
    except SeekTargetError as error:
        raise bad_request(f"to: {error.message}") from None
    topics = body.get("topics")
    if topics is not None and (not isinstance(topics, list) or not all(isinstance(t, str) for t in topics)):
        raise bad_request("topics must be a list of topic names")
    return target, topics or None


@routes.post("/api/groups/{name}/reset-preview")
async def reset_preview_api(request: web.Request) -> web.Response:
    """A preview changes nothing, so it is a read: allowed in read-only mode too."""
    console = console_of(request)
    target, topics = reset_target(await json_body(request))
    plan = await console.run(console.kafka.reset_plan, request.match_info["name"], target, topics)
    return web.json_response({"group": request.match_info["name"], "plan": plan})


@routes.post("/api/groups/{name}/reset")
async def reset_api(request: web.Request) -> web.Response:
    console = console_of(request)
    name = request.match_info["name"]
    body = await json_body(request)
    if body.get("confirm") is not True:
        raise bad_request("a reset rewrites committed offsets: preview it, then send \"confirm\": true")
    target, topics = reset_target(body)
    plan = await console.run(console.kafka.reset_plan, name, target, topics)
    await console.run(console.kafka.reset_apply, name, plan)
    return web.json_response({"group": name, "plan": plan, "applied": True})
