"""Following a node with a key: every list page the key may read for a full load, then the
keyed changes feed (`/api/changes`).

The feed's contract: `since` is exclusive, `until` is the next `since`, `next` links are
followed as given (the cursor inside them is the node's business). The first `since` is
the `until` of `/api/changes?since=1970-01-01T00:00:00Z&limit=1`, read before the lists, so
a change made while they are read is in the feed afterwards. A feed that repeats items
(an inclusive `since`) costs a little time and changes nothing. The index remembers
`since` and the `next` link of a feed run it has not finished, so an interrupted run
resumes after the last page applied."""

from __future__ import annotations

import logging

from .apply import FullLoad, apply_items
from .errors import SyncError
from .index import Index
from .messages import KeyInfo, parse_feed_page, parse_key, parse_list_page
from .node import Node
from .report import SyncReport

log = logging.getLogger("fednode.hub")
EPOCH = "1970-01-01T00:00:00Z"
PAGE = 200  # records per list page and items per feed page
ROUNDS = 4  # passes over a node that changes while it is read, before giving up


async def read_key(node: Node) -> KeyInfo:
    url = node.url("/api/keys/me")
    body = await node.get(url, cap=node.limits.json_bytes)
    assert body is not None
    return parse_key(body, str(url))


async def latest_until(node: Node) -> str:
    """The time of the latest change this key may see (the first `since` of a load)."""
    url = node.url(f"/api/changes?since={EPOCH}&limit=1")
    body = await node.get(url, cap=node.limits.json_bytes)
    assert body is not None
    return parse_feed_page(body, str(url)).until


async def follow(node: Node, index: Index, node_id: str, key: KeyInfo,
                 report: SyncReport) -> None:
    """Bring the index to what the key sees; check it against the lists' totals."""
    forced: str | None = None
    for _ in range(ROUNDS):
        until = await latest_until(node)
        since = index.state("since")
        reason = forced
        if since is not None and until < since:
            reason = (f"the node's changes feed went back from {since} to {until} (restored "
                      f"from a backup?)")
        if reason is not None:
            report.notes.append(f"{reason}: reloaded everything")
            log.info("%s: reloading everything", reason)
        if since is None or reason is not None:
            await load_lists(node, index, node_id, key, until, report)
        before = report.added + report.updated + report.removed
        await read_feed(node, index, node_id, report)
        totals = await list_totals(node, key)
        if index.counts() == {c: n for c, n in totals.items() if n}:
            return
        quiet = report.added + report.updated + report.removed == before
        forced = "the index disagreed with the node's list totals" if quiet else None
    raise SyncError("the node kept changing while it was read; run the sync again later")


class Pages:
    """The bound on one walk along `next` links: no page twice, none empty with a `next`,
    no more than `limit` pages."""

    def __init__(self, what: str, limit: int) -> None:
        self.what = what
        self.limit = limit
        self.seen: set[str] = set()

    def visit(self, url: str) -> None:
        if url in self.seen:
            raise SyncError(f"{url}: {self.what} links back to a page already read; the "
                            f"node's paging is broken")
        if len(self.seen) >= self.limit:
            raise SyncError(f"{url}: {self.what} goes on past {self.limit} pages; the node's "
                            f"paging is broken (or raise the limit, docs/hub-reference.md)")
        self.seen.add(url)

    @staticmethod
    def check(url: str, count: int, following: str | None) -> None:
        if following and not count:
            raise SyncError(f"{url}: an empty page that links to another; the node's paging "
                            f"is broken")


async def load_lists(node: Node, index: Index, node_id: str, key: KeyInfo, since: str,
                     report: SyncReport) -> None:
    """Every record of every list the key may read, swapped in at once."""
    with FullLoad(index, node_id, report, 0) as load:
        for collection in key.collections:
            url = node.url(f"/api/{collection}?limit={PAGE}")
            pages = Pages(f"the list of {collection}", node.limits.pages)
            while True:
                pages.visit(str(url))
                body = await node.get(url, cap=node.limits.json_bytes)
                assert body is not None
                page = parse_list_page(body, str(url), collection)
                if len(pages.seen) == 1:
                    load.expected += page.total
                    pages.limit = min(pages.limit, page.total // PAGE + 10)
                Pages.check(str(url), len(page.records), page.next)
                load.add(page.records, collection)
                if not page.next:
                    break
                url = node.resolve(page.next, str(url))
        load.finish({"since": since, "next": None})


async def read_feed(node: Node, index: Index, node_id: str, report: SyncReport) -> None:
    """The changes feed from the index's `since` (or its unfinished `next`), page by page,
    each page applied with the link to the following one."""
    resume = index.state("next")
    url = node.url(resume or f"/api/changes?since={index.state('since')}&limit={PAGE}")
    pages = Pages("the changes feed", node.limits.pages)
    while True:
        pages.visit(str(url))
        body = await node.get(url, cap=node.limits.json_bytes)
        assert body is not None
        page = parse_feed_page(body, str(url))
        Pages.check(str(url), len(page.items), page.next)
        following = node.resolve(page.next, str(url)) if page.next else None
        state: dict[str, str | None] = (
            {"next": node.relative(following)} if following is not None
            else {"next": None, "since": page.until})
        await apply_items(node, index, node_id, page.items, state, report, str(url))
        if following is None:
            return
        log.debug("changes feed: page %d applied", len(pages.seen))
        url = following


async def list_totals(node: Node, key: KeyInfo) -> dict[str, int]:
    totals = {}
    for collection in key.collections:
        url = node.url(f"/api/{collection}?limit=1")
        body = await node.get(url, cap=node.limits.json_bytes)
        assert body is not None
        totals[collection] = parse_list_page(body, str(url), collection).total
    return totals
