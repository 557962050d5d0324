"""Open transactions: each transaction that has begun and is not complete (Ongoing,
PrepareCommit, PrepareAbort, PrepareEpochFence), with its producer id and epoch, partitions and age,
as the coordinators describe it (`roost txn list|describe`'s requests). A read: shown in read-only
mode too."""

from __future__ import annotations

from aiohttp import web

from roost.console.context import console_of

routes = web.RouteTableDef()


@routes.get("/transactions")
async def transactions_page(request: web.Request) -> web.Response:
    return console_of(request).page("transactions.html", "Open transactions")


@routes.get("/api/transactions")
async def transactions_api(request: web.Request) -> web.Response:
    console = console_of(request)
    return web.json_response({"transactions": await console.run(console.kafka.transactions)})
