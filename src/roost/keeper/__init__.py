"""The keeper: a ZooKeeper-compatible coordination service.

Modules: `tree` (the data tree as a deterministic state machine), `commands` (its replicated log
entries), `watches`, `sessions`, `reads`, `acl`, `paths`, `core` (a member's request pipeline,
sans-IO), `server` (the asyncio shell), `config`, `fourletter`, `embedded`.
"""
