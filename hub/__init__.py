"""fednode hub client: keep a local index of one node in sync (`fednode sync`), and a
network's members, each in its own index (`fednode hub sync`).

- `sync`: the steps of one run (open the index, check the node and the caller, load or
  follow, check the counts).
- `public` / `keyed`: the two ways to follow a node, without a key and with one.
- `apply`: fetch a batch of changed records and apply it in one transaction.
- `node`: HTTP to the node (one origin, bounded retries, waits and body sizes).
- `messages`: what the hub accepts from a node (manifest, pages, items, records).
- `index`: the hub's DuckDB file; `views`: a view per collection.
- `waits`: Retry-After and back-off; `terminal`: progress on a terminal, a log file.
- `report`: what a run did; `errors`: SyncError, the one error a user sees.
- `members`: a hub folder's hub.toml (its members: address, key variable, private or not);
  `network`: every member synced at once within bounds, each isolated from the others;
  `status`: each member's last attempt and last success, beside its index.
"""

import logging

logging.getLogger("fednode.hub").addHandler(logging.NullHandler())
