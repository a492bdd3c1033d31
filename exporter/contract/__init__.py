"""The contract every part of fednode agrees on, with no heavy imports (no jinja2, pyarrow,
jsonschema or renderer), so that the sidecar and the hub load it cheaply:

- `wire`: the bytes clients read (JSON encoding, times, URLs, list pages, error bodies), the
  collections, scopes and limits.
- `feed`: the one event type, what each caller may learn of events, and the NDJSON sync
  files (public snapshots and the public change list).
- `bundle`: the private bundle's file names, columns and typed `Meta`, written by the
  exporter and read by the sidecar.
- `builds`: which build a reader reads, and the locks that keep exports out of it.
- `errors`: `FednodeError`, the base of every error a user can cause and fix.
- `addresses`: the addresses and networks of the proxies the sidecar trusts.
- `licences`: the licences a hub knows by name (SPDX ids and their URLs).
"""
