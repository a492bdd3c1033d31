"""Who is asking, and may they: key verification and endpoint policy (per-minute limits are
`limits`).

A token check has three outcomes (datasette's and starlette's pattern): not a key of this
node, a valid key, or a key we know but reject (revoked, expired). Each maps to the seed's
error codes here and nowhere else."""

from __future__ import annotations

import asyncio
import base64
import functools
import logging
import math
import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jwt
from aiohttp import web

from exporter.contract.endpoints import Endpoint
from exporter.contract.wire import parse_time

from .errors import ApiKeyRequired, InsufficientScope, InvalidApiKey, Unavailable
from .keys import ALGORITHM, KeyError_, KeyRecord, Registry, load_secret
from .watch import FolderWatch

log = logging.getLogger("fednode.sidecar")
TOKEN_MAX = 8000  # characters of a key, at most


def _file_identity(path: str) -> tuple[int, int, int] | None:
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_mtime_ns, found.st_ino, found.st_size



def _one(request: web.Request, name: str) -> str | None:
    values = request.headers.getall(name, ())
    if len(values) > 1 and len(set(values)) > 1:
        raise InvalidApiKey(f"{len(set(values))} different {name} headers were sent; send one "
                            f"key in one header")
    return values[0] if values else None


def extract_token(request: web.Request) -> str | None:
    """The key from `Authorization: Bearer …` or `X-API-Key`; 401 if it is sent wrongly."""
    header = _one(request, "Authorization")
    api_key = _one(request, "X-API-Key")
    bearer = None
    if header is not None:
        scheme, _, value = header.partition(" ")
        if scheme.lower() != "bearer" or not value.strip():
            raise InvalidApiKey("send the key as 'Authorization: Bearer <key>' or "
                                "'X-API-Key: <key>'")
        bearer = value.strip()
    if bearer is not None and api_key is not None and bearer != api_key.strip():
        raise InvalidApiKey("two different keys were sent; send one key in one header")
    token = bearer if bearer is not None else api_key
    if token is None:
        return None
    token = token.strip()
    if not token:
        raise InvalidApiKey("the X-API-Key header is empty; put the key in it")
    # printable ASCII without spaces, as JWTs are (str's own tests: faster than a pattern)
    if len(token) > TOKEN_MAX or not (token.isascii() and token.isprintable()) or " " in token:
        raise InvalidApiKey("not a key of this node: a key is printable ASCII (three base64url "
                            "parts separated by dots); check what you sent")
    return token



CLOCK_LEEWAY = 60  # seconds a key's issue time may be ahead of this node's clock


class Verifier:
    """Checks tokens against the node's secret and the key registry (re-read on change)."""

    def __init__(self, private: Path, clock: Callable[[], float] = time.time) -> None:
        self.private = private
        self._clock = clock
        self._registry_path = private / "keys.json"
        self._registry = Registry(self._registry_path)
        # Looked at when the folder may have changed: as strings, ready for os.stat
        self._watched = (str(self._registry_path), str(private / "secret"))
        self._folder = FolderWatch(private)
        self._stamp: tuple[object, ...] | None = None
        self._linked = False  # keys.json or secret is a link (`_refresh`)
        self._secret: bytes | None = None
        self._expiries: dict[str, float] = {}

    def _refresh(self) -> Registry:
        """Re-read the registry and the secret when either file changed: a revocation or a
        new secret takes effect at the next request. The files are looked at only when
        their folder may have changed since the last request (`FolderWatch`: one poll, where
        two stats of the files were a twentieth of a keyed read's time). (FEDNODE_SECRET is read
        with the file; a process's environment changes only at a restart.)"""
        if self._stamp is not None and not self._linked and not self._folder.changed():
            return self._registry
        registry_file, secret_file = self._watched
        # A file that is a link changes where it points, not in this folder: the folder's
        # watch misses it, so the files are then looked at on every request.
        self._linked = os.path.islink(registry_file) or os.path.islink(secret_file)
        stamp = (_file_identity(registry_file), _file_identity(secret_file))
        if stamp != self._stamp:
            try:
                registry = Registry.load(self._registry_path)
                secret, _ = load_secret(self.private)
                expiries = {key.id: parse_time(key.expires_at).timestamp()
                            if key.expires_at else math.inf for key in registry.keys.values()}
            except (KeyError_, ValueError, TypeError, OSError) as exc:
                self._stamp = None  # look again at the next request, changed or not
                log.error("refusing every key until this is fixed: %s", exc)
                raise Unavailable("the node cannot read its key registry; the operator has "
                                  "been told in the log, try again later") from None
            self._registry, self._secret, self._expiries = registry, secret, expiries
            self._stamp = stamp
        return self._registry

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        """Let `loop` watch the key files (`FolderWatch.attach`): a server calls this."""
        self._folder.attach(loop)

    def close(self) -> None:
        self._folder.close()

    def verify(self, token: str, node_id: str) -> KeyRecord:
        registry = self._refresh()
        if self._secret is None:
            raise InvalidApiKey("this node has issued no keys; ask the node for one")
        claims = self._decode(token, self._secret, node_id)
        key = registry.keys.get(str(claims["jti"]))
        if key is None:
            raise InvalidApiKey("unknown key; it may have been removed, ask the node for one")
        if key.revoked_at is not None:
            raise InvalidApiKey(f"the key was revoked on {key.revoked_at}; ask the node for "
                                f"a new one")
        moment = self._clock()
        if self._expiries[key.id] <= moment or claims.get("exp", math.inf) <= moment:
            raise InvalidApiKey("the key has expired; ask the node for a new one")
        return key

    @staticmethod
    @functools.lru_cache(maxsize=4096)
    def _decode(token: str, secret: bytes, node_id: str) -> dict[str, Any]:
        """The claims of a well-signed token of this node. Remembered per token (failures are
        not), so a busy key costs one signature check; expiry, revocation and the registry
        are checked by the caller on every request."""
        if not _issued_form(token):
            raise InvalidApiKey("not a key of this node (malformed, forged, or issued by "
                                "another node); check the key you sent")
        try:
            claims: dict[str, Any] = jwt.decode(
                token, secret, algorithms=[ALGORITHM], audience=node_id, issuer=node_id,
                options={"require": ["jti", "iat", "iss", "aud"], "verify_exp": False},
                leeway=CLOCK_LEEWAY)
        except jwt.ImmatureSignatureError:  # checked only once the signature is good
            raise InvalidApiKey("the key is dated after this node's clock (issued on a "
                                "machine whose clock runs ahead?); set the clocks right, or "
                                "wait until then") from None
        except jwt.PyJWTError:
            raise InvalidApiKey("not a key of this node (malformed, forged, or issued by "
                                "another node); check the key you sent") from None
        return claims


_SEGMENT = re.compile(r"[A-Za-z0-9_-]+")


def _issued_form(token: str) -> bool:
    """Whether the token is written as keys are issued: three base64url parts without
    padding, each the one spelling of its bytes. A decoder also takes padding, and letters
    whose unused low bits differ: the same key written another way, which is not the key
    that was issued."""
    parts = token.split(".")
    if len(parts) != 3:
        return False
    for part in parts:
        if not _SEGMENT.fullmatch(part) or len(part) % 4 == 1:
            return False
        raw = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
        if base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii") != part:
            return False
    return True


def check_policy(endpoint: Endpoint, key: KeyRecord | None) -> None:
    """What the endpoint table asks of the caller: a key where it is keyed, and the scope
    it names whenever a key is used."""
    if key is None:
        if endpoint.access == "keyed":
            raise ApiKeyRequired("this endpoint needs a key: send 'Authorization: Bearer "
                                 "<key>' or 'X-API-Key: <key>'; see authentication in "
                                 "/api/manifest for how to request one")
        return
    if endpoint.scope is not None and endpoint.scope not in key.scopes:
        raise InsufficientScope(f"this key lacks the {endpoint.scope!r} scope; it has "
                                f"{', '.join(key.scopes)}")
