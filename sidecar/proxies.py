"""Who an anonymous request comes from, for its per-minute rate: the address that connected
(the TCP peer), or, where that is a proxy the operator trusts (`fednode serve
--trusted-proxy`, `[serve] trusted_proxies`), the address the proxy says it took the request
from.

A proxy appends the address it was connected from to `X-Forwarded-For`; anything to the left
of that came with the request, and anyone can write it. So the header is read from the
right, past every trusted proxy, and the first address that is not one is the client, as
nginx's `real_ip_recursive` and Werkzeug's `ProxyFix` do. A peer that is not trusted is the
client whatever the request says. Where the header cannot be read at that point (missing,
not an address), the request is counted against the peer: every client of that proxy then
shares one bucket, the stricter reading, never a bucket the request chose."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

from exporter.contract.addresses import Network

Address = ipaddress.IPv4Address | ipaddress.IPv6Address

FORWARDED_FOR = "X-Forwarded-For"


def client_address(peer: str | None, forwarded: Sequence[str],
                   trusted: tuple[Network, ...]) -> str:
    """The client's address: `peer`, or, where `peer` is trusted, the address nearest the
    right of `forwarded` (the X-Forwarded-For headers, in order) that is not trusted; the
    leftmost where all are. `peer` itself where what is forwarded cannot be read."""
    if peer is None:
        return "unknown"
    if not trusted:
        return peer
    connected = _address(peer)
    if connected is None or not _within(connected, trusted):
        return peer
    hops = [hop for value in forwarded for hop in value.split(",")]
    found = None
    for hop in reversed(hops):
        found = _address(hop)
        if found is None:  # written by a trusted proxy, or past one: not an address
            return peer
        if not _within(found, trusted):
            return str(found)
    return str(found) if found is not None else peer


def _within(address: Address, trusted: tuple[Network, ...]) -> bool:
    return any(address in network for network in trusted)


def _address(text: str) -> Address | None:
    """An address as a proxy writes one: bare, `[v6]`, or with a port (`1.2.3.4:80`,
    `[v6]:80`); an IPv4 address mapped into IPv6 (`::ffff:1.2.3.4`) as the IPv4 one."""
    text = text.strip()
    if text.startswith("["):
        text = text[1:text.find("]")] if "]" in text else ""
    elif text.count(":") == 1:
        text = text.partition(":")[0]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address
