"""Addresses and networks as the operator writes them for the proxies the sidecar trusts
(`fednode serve --trusted-proxy`, `[serve] trusted_proxies` in node.toml): checked by the
command line and by node.toml's reader, used by the sidecar (`sidecar.proxies`)."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def networks(values: Iterable[str]) -> tuple[Network, ...]:
    """Addresses and networks (`10.0.0.0/8`, `::1`) as networks; ValueError names the first
    that is neither."""
    out = []
    for value in values:
        try:
            out.append(ipaddress.ip_network(value.strip(), strict=False))
        except ValueError:
            raise ValueError(f"{value[:60]!r} is not an address or a network (write one "
                             f"such as 127.0.0.1, ::1 or 10.0.0.0/8)") from None
    return tuple(out)
