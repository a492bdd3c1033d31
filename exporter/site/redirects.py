"""`site_out/_redirects`: the CDN's routing rules (Netlify's format), computed from the
endpoint table and the sidecar's address, at every export.

The rules, in the order Netlify tries them (the first that matches applies):

1. Every endpoint the static files cannot answer (keyed or dynamic: not `public` in the
   table) is proxied to the sidecar, forced (`200!`), whatever the static files hold.
2. A static list with a query parameter the static files cannot answer goes to the sidecar:
   one rule per parameter, each with a bare target, because Netlify forwards the whole query
   string to a bare target (a target with a query string of its own drops the others).
3. An open endpoint whose file is not at its URL (`Endpoint.static`) is rewritten to that
   file (`200`, not forced: a file at the URL itself would win). A record's file sits in a
   shard folder named by part of its id (`contract.layout`), which no placeholder can
   express: each public record gets a rule of its own while the node has at most
   RECORD_RULES_MAX of them; past that (and for ids no rule names) the record rule sends
   the request to the sidecar, not forced. On Netlify the Edge Function rewrites anonymous
   record reads to the shard file before these rules (netlify/edge-functions/keyed.ts).

4. A page's address without its final slash (`/search`, `/species`) is sent to the page
   (`301`), as the sidecar sends it (`routing.Router.slashed`).

5. Any other path under /api/ gets the contract's JSON 404, not the CDN's page: one segment
   (`/api/plants`, no file there) the body the sidecar answers for a collection that does
   not exist (`NO_COLLECTION_FILE`), any other path the one for a path without an endpoint
   (`NO_ENDPOINT_FILE`). Those files' own URLs are such paths: forced rules, first, answer
   them with the 404 (a file at its URL would otherwise be served with 200).

Every other open path (pages, sync files, PDFs, /api/openapi.json) is a file at its own URL
and needs no rule. Netlify placeholders match whole path segments only; `{name}` segments
of the table become `:name` placeholders, one for one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from exporter.contract.endpoints import ENDPOINTS
from exporter.contract.layout import RECORD_RULES_MAX, record_file
from exporter.contract.wire import COLLECTIONS, NO_COLLECTION_FILE, NO_ENDPOINT_FILE

FILE = "_redirects"
_SEGMENT = re.compile(r"\{(\w+)\}")


def _pattern(path: str) -> str:
    return _SEGMENT.sub(r":\1", path)


def rules(sidecar_url: str, records: Sequence[tuple[str, str]]
          ) -> list[tuple[str, str, str, str]]:
    """(from, query condition, to, status) for every rule, in order. `records`: the
    (collection, id) of every public record (a restricted one must never be named here)."""
    sidecar = sidecar_url.rstrip("/")
    # Rule 5's bodies are files at their own URLs too: there they are the same 404s, not 200.
    out: list[tuple[str, str, str, str]] = [("/" + body, "", "/" + body, "404!")
                                            for body in (NO_ENDPOINT_FILE, NO_COLLECTION_FILE)]
    for e in ENDPOINTS:
        if not e.public:
            out.append((_pattern(e.path), "", sidecar + _pattern(e.path), "200!"))
    for e in ENDPOINTS:
        if e.public and e.params:
            for param in e.params:
                out.append((_pattern(e.path), f"{param.name}=:{param.name}",
                            sidecar + _pattern(e.path), "200!"))
    for e in ENDPOINTS:
        if not (e.public and e.static):
            continue
        if "{shard}" not in e.static:
            # One rule per collection, not a `:collection` placeholder: a rewrite to a file
            # that is not there ends in the CDN's own 404 page, where a path no rule names
            # reaches rule 5's JSON.
            names = COLLECTIONS if "{collection}" in e.path else ("",)
            out.extend((_pattern(e.path.replace("{collection}", name)), "",
                        _pattern(e.static.replace("{collection}", name)), "200")
                       for name in names)
            continue
        if len(records) <= RECORD_RULES_MAX:
            out.extend((f"/api/{collection}/{record_id}", "",
                        "/" + record_file(collection, record_id), "200")
                       for collection, record_id in records)
        out.append((_pattern(e.path), "", sidecar + _pattern(e.path), "200"))
    for e in ENDPOINTS:
        if e.page and e.path.endswith("/") and e.path != "/":
            names = COLLECTIONS if "{collection}" in e.path else ("",)
            out.extend((path[:-1], "", path, "301")
                        for path in (e.path.replace("{collection}", name) for name in names))
    out.append(("/api/:collection", "", "/" + NO_COLLECTION_FILE, "404"))
    out.append(("/api/*", "", "/" + NO_ENDPOINT_FILE, "404"))
    return out


def redirects_file(sidecar_url: str, records: Sequence[tuple[str, str]]) -> bytes:
    lines = ["# Generated by `fednode export` from the endpoint table and content/node.toml",
             "# (sidecar_url); do not edit: change those and export again. docs/operations.md",
             "# explains the rules."]
    found = rules(sidecar_url, records)
    width = max(len(source) for source, _, _, _ in found if ":" in source)
    for source, query, target, status in found:
        condition = f"  {query}" if query else ""
        lines.append(f"{source.ljust(width)}{condition}  {target}  {status}")
    return ("\n".join(lines) + "\n").encode()

