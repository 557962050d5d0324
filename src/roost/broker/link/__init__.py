"""Cluster links: a destination cluster mirrors topics of a source cluster with the same records at
the same offsets (docs/cluster-links.md).

- `filters`: which topics and groups a link takes (MM2's names and defaults).
- `configs`: which topic configs follow the source (MM2's DefaultConfigPropertyFilter).
- `core`: the pure decisions: one mirrored partition's state (validate against the source's
  leader epochs, fetch, truncate, start over, back off), lag, group offset syncs, promotion.
- `settings`: a link's settings, checked, stored in ZooKeeper at /config/cluster-links/<name>.
- `service`: the shell on every destination broker: it fetches what this broker leads from the
  source's leaders and appends the batches as they are through the replica manager's door.
"""
