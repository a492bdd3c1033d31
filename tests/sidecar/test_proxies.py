"""Anonymous requests through a proxy the operator trusts are counted by the client address
the proxy forwards (X-Forwarded-For), never by one a request chose; through any other peer,
by the peer. So the clients behind a proxy do not share the proxy's one bucket."""

from __future__ import annotations

import asyncio
import ipaddress
import re
import subprocess
from pathlib import Path

import aiohttp
import pytest
from builders import ServerThread, app_for
from hypothesis import given, settings
from hypothesis import strategies as st
from processes import ENV, FEDNODE, free_port, wait_for

from exporter.contract.addresses import networks
from sidecar.proxies import client_address

LOOPBACK = networks(["127.0.0.1"])
PROXY = "127.0.0.1"  # where the tests' requests come from, unless said otherwise


@pytest.fixture(scope="module")
def root(sample_root: Path) -> Path:
    return sample_root


async def _statuses(url: str, forwarded: list[str | None], *, source: str = PROXY
                    ) -> list[int]:
    """Each request's status, one after the other, from `source`, with each X-Forwarded-For
    (None: without one)."""
    connector = aiohttp.TCPConnector(local_addr=(source, 0), force_close=True)
    async with aiohttp.ClientSession(connector=connector) as session:
        out = []
        for value in forwarded:
            headers = {} if value is None else {"X-Forwarded-For": value}
            async with session.get(f"{url}/api/schema", headers=headers) as response:
                await response.read()
                out.append(response.status)
        return out


def test_clients_behind_a_trusted_proxy_each_have_their_own_rate(root: Path) -> None:
    app = app_for(root, anonymous_rate=2, trusted_proxies=("127.0.0.1",))
    with ServerThread(app) as server:
        one, two = "203.0.113.5", "203.0.113.6"
        assert asyncio.run(_statuses(server.url, [one, one, one])) == [200, 200, 429]
        # another client of the same proxy is not held back by the first
        assert asyncio.run(_statuses(server.url, [two])) == [200]
        # what the first client writes itself goes to the left of what the proxy appends:
        # it changes nothing
        assert asyncio.run(_statuses(server.url, [f"198.51.100.9, {one}",
                                                  f"{two}, {one}"])) == [429, 429]
        # a proxy in a chain of trusted ones: the client is the first address not trusted
        assert asyncio.run(_statuses(server.url, [f"{two}, 127.0.0.1"])) == [200]
        assert asyncio.run(_statuses(server.url, [f"{two}, 127.0.0.1"])) == [429]


def test_a_forwarded_address_is_ignored_unless_the_peer_is_trusted(root: Path) -> None:
    # Nothing trusted (the default): the header changes nothing.
    with ServerThread(app_for(root, anonymous_rate=2)) as server:
        assert asyncio.run(_statuses(server.url, ["203.0.113.5", "203.0.113.6",
                                                  "203.0.113.7"])) == [200, 200, 429]
    # 127.0.0.1 trusted, the request from 127.0.0.2: that address is the client.
    app = app_for(root, anonymous_rate=2, trusted_proxies=("127.0.0.1",))
    with ServerThread(app) as server:
        assert asyncio.run(_statuses(server.url, ["203.0.113.5", "203.0.113.6", None],
                                     source="127.0.0.2")) == [200, 200, 429]
        assert asyncio.run(_statuses(server.url, ["203.0.113.5"])) == [200]  # its own bucket


HOSTILE = ["", "unknown", "[::1", ":::::", "1.2.3.4:99999:1", "1.2.3.4, garbage",
           "1.2.3.4,", "\u00e9\u00e9", ", , ,", "203.0.113.5 203.0.113.6", "1" * 4000,
           ",".join(["203.0.113.5"] * 500) + ",x"]


def test_a_forwarded_header_that_cannot_be_read_counts_against_the_proxy(root: Path) -> None:
    """Whatever the header holds, the answer is the contract's (never a 500); where the
    address next to the proxy cannot be read, the request counts against the proxy itself,
    not against a bucket of the request's choosing."""
    app = app_for(root, anonymous_rate=len(HOSTILE), trusted_proxies=("127.0.0.1",))
    with ServerThread(app) as server:
        assert asyncio.run(_statuses(server.url, HOSTILE)) == [200] * len(HOSTILE)
        # The proxy's bucket is full now: one more without a readable address is refused,
        # while a client with one is not.
        assert asyncio.run(_statuses(server.url, ["nonsense", None])) == [429, 429]
        assert asyncio.run(_statuses(server.url, ["203.0.113.5"])) == [200]


TRUSTED = networks(["127.0.0.0/8", "::1"])
CLIENTS = st.ip_addresses().filter(
    lambda a: not any(a in n for n in TRUSTED)
    and not (a.version == 6 and a.ipv4_mapped is not None)).map(str)
# what a client may write into the header itself: anything a header line can hold
WRITTEN = st.lists(st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7e), max_size=16)
                   | CLIENTS, max_size=6)


@settings(max_examples=300, deadline=None)
@given(written=WRITTEN, client=CLIENTS,
       proxies=st.lists(st.sampled_from(["127.0.0.1", "127.9.9.9", "::1", "[::1]:8080",
                                         "127.0.0.2:443", "::ffff:127.0.0.3"]), max_size=3))
def test_the_client_is_the_address_the_trusted_proxies_forwarded(
        written: list[str], client: str, proxies: list[str]) -> None:
    """Whatever a client writes into X-Forwarded-For itself, the address is the one the
    first trusted proxy appended (the client's), read past the trusted proxies after it;
    from a peer that is not trusted, the peer."""
    header = [", ".join([*written, client, *proxies])]
    assert client_address("127.0.0.1", header, TRUSTED) == client
    assert client_address("::ffff:127.0.0.1", header, TRUSTED) == client
    assert client_address("192.0.2.1", header, TRUSTED) == "192.0.2.1"
    assert client_address("127.0.0.1", header, ()) == "127.0.0.1"  # nothing trusted


@settings(max_examples=300, deadline=None)
@given(written=WRITTEN)
def test_whatever_is_forwarded_the_client_is_an_address(written: list[str]) -> None:
    """Never a text of the request's choosing: an address (in its one spelling), the
    proxy's own where the header cannot be read."""
    found = client_address("127.0.0.1", [", ".join(written)], TRUSTED)
    assert str(ipaddress.ip_address(found)) == found
    if all(_unreadable(hop) for hop in ", ".join(written).split(",")[-1:]):
        assert found == "127.0.0.1"


def _unreadable(hop: str) -> bool:
    try:
        ipaddress.ip_address(hop.strip())
    except ValueError:
        return not re.fullmatch(r"\s*(\[.*|[^:]*:[^:]*)", hop)  # nor with a port
    return False


@pytest.mark.slow
def test_fednode_serve_takes_trusted_proxies(sample_root: Path, tmp_path: Path) -> None:
    port = free_port()
    process = subprocess.Popen([*FEDNODE, "serve", "--project", str(sample_root), "--port",
                                str(port), "--anonymous-rate", "1", "--trusted-proxy",
                                "127.0.0.0/8"], env=ENV, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(f"{base}/api/manifest", process, 90)  # (its one request: no forwarded header)
        assert asyncio.run(_statuses(base, ["203.0.113.5", "203.0.113.5", "203.0.113.6"])) \
            == [200, 429, 200]
    finally:
        process.terminate()
        said = process.communicate(timeout=30)[1]
    # it says so at start, for the operator to check
    assert ("anonymous requests from 127.0.0.0/8 are counted by the client address they "
            "forward (X-Forwarded-For)") in said
    done = subprocess.run([*FEDNODE, "serve", "--project", str(sample_root), "--port",
                           str(free_port()), "--trusted-proxy", "10.0.0.0/33"], env=ENV,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "'10.0.0.0/33' is not an address or a network" in done.stderr


def test_trusted_proxies_in_node_toml_are_checked(sample_root: Path, tmp_path: Path) -> None:
    from builders import copy_sample

    from exporter.project.config import Project, load_serve_config
    from exporter.shared.errors import ContentError

    root = copy_sample(tmp_path)
    toml = root / "content" / "node.toml"
    toml.write_text(toml.read_text() + '\n[serve]\ntrusted_proxies = ["10.0.0.0/8", "::1"]\n')
    assert load_serve_config(Project(root)).trusted_proxies == ("10.0.0.0/8", "::1")
    toml.write_text(toml.read_text().replace('"::1"', '"proxy.local"'))
    with pytest.raises(ContentError) as caught:
        load_serve_config(Project(root))
    line = toml.read_text().split("\n").index(
        'trusted_proxies = ["10.0.0.0/8", "proxy.local"]') + 1
    assert [str(p) for p in caught.value.problems] == [
        f"content/node.toml:{line}: serve.trusted_proxies: 'proxy.local' is not an address or "
        f"a network (write one such as 127.0.0.1, ::1 or 10.0.0.0/8)"]
    toml.write_text(toml.read_text().replace('["10.0.0.0/8", "proxy.local"]', '"10.0.0.0/8"'))
    with pytest.raises(ContentError) as caught:
        load_serve_config(Project(root))
    assert "must be a list of addresses or networks in quotes" in str(caught.value.problems[0])
