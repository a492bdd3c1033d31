"""API keys: JWTs signed with the node's secret, and the registry of issued keys.

The registry (`.fednode/keys.json`) lists every key's id and grants and its revocation; it
holds no secret and the sidecar re-reads it whenever it changes, so a revocation takes
effect at once. The signing secret comes from the environment variable FEDNODE_SECRET or
the file `.fednode/secret`, never from the repository or `site_out/`."""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import jwt

from exporter.contract.errors import FednodeError
from exporter.contract.wire import COLLECTIONS, SCOPES, format_time, parse_time

ALGORITHM = "HS256"  # pinned: verification accepts nothing else

SECRET_ENV = "FEDNODE_SECRET"
REGISTRY_FORMAT = 1


class KeyError_(FednodeError):
    """A key management request that cannot be carried out; the message says why."""


@dataclass(frozen=True)
class KeyRecord:
    """One issued key, as the registry knows it. Never the token itself."""

    id: str
    name: str
    scopes: tuple[str, ...]
    collections: tuple[str, ...]  # empty: every collection
    groups: tuple[str, ...]  # access groups whose restricted records it may read
    rate: int  # requests per minute
    created_at: str
    expires_at: str | None = None
    revoked_at: str | None = None

    def describe(self) -> dict[str, Any]:
        data = asdict(self)
        data["collections"] = list(self.collections) or list(COLLECTIONS)
        data["scopes"], data["groups"] = list(self.scopes), list(self.groups)
        return data


@dataclass
class Registry:
    path: Path
    keys: dict[str, KeyRecord] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> Registry:
        """The registry at `path` (empty if there is none); a damaged one is an error that
        says so, never a registry with keys missing."""
        try:
            text = path.read_text("utf-8")
        except FileNotFoundError:
            return cls(path)
        except (OSError, UnicodeDecodeError) as exc:
            raise KeyError_(f"{path}: cannot be read ({exc}); restore it from a backup") from None
        try:
            data = json.loads(text)
            keys = {}
            for item in data["keys"]:
                for name in ("scopes", "collections", "groups"):
                    if not isinstance(item[name], list) or \
                            not all(isinstance(value, str) for value in item[name]):
                        raise TypeError(f"{name} is not a list of texts")
                    item[name] = tuple(item[name])
                record = KeyRecord(**item)
                # As `issue` makes them: a hand-edited rate of 0 would lift the limit, and
                # a key of the wrong form would fail every request it makes.
                if not isinstance(record.id, str) or not isinstance(record.name, str):
                    raise TypeError("id or name is not a text")
                if isinstance(record.rate, bool) or not isinstance(record.rate, int) or \
                        record.rate < 1:
                    raise TypeError(f"rate must be a whole number of requests a minute, at "
                                    f"least 1 (key {record.id!r})")
                for stamp in (record.created_at, record.expires_at, record.revoked_at):
                    if stamp is not None:
                        parse_time(stamp)  # ValueError (or TypeError) if it is not a time
                keys[record.id] = record
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise KeyError_(f"{path}: damaged ({type(exc).__name__}: {exc}); restore it from a "
                            f"backup, or move it away and issue the keys again") from None
        return cls(path, keys)

    def save(self) -> None:
        """Write the registry whole (mode 0600: it names who holds which grants)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_suffix(".tmp")
        body = {"format": REGISTRY_FORMAT,
                "keys": [asdict(key) for key in self.keys.values()]}
        temporary.unlink(missing_ok=True)
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(json.dumps(body, indent=2) + "\n")
        os.replace(temporary, self.path)

    def get(self, key_id: str) -> KeyRecord:
        try:
            return self.keys[key_id]
        except KeyError:
            raise KeyError_(f"no key with id {key_id!r}; `fednode keys list` shows them") from None

    def revoke(self, key_id: str, now: datetime) -> KeyRecord:
        key = self.get(key_id)
        if key.revoked_at is None:
            key = replace(key, revoked_at=format_time(now))
            self.keys[key_id] = key
            self.save()
        return key


def load_secret(private: Path, *, create: bool = False) -> tuple[bytes | None, str]:
    """The signing secret and where it came from. With `create`, make one in the private
    folder (mode 0600) when none is configured."""
    from_env = os.environ.get(SECRET_ENV)
    if from_env:
        if len(from_env) < 32:
            raise KeyError_(f"{SECRET_ENV} is too short: use at least 32 random characters")
        return from_env.encode(), f"environment variable {SECRET_ENV}"
    path = private / "secret"
    if path.exists():
        secret = path.read_text().strip()
        if len(secret) < 32:  # as for FEDNODE_SECRET: a short one can be guessed
            raise KeyError_(f"{path} is too short: use at least 32 random characters (delete "
                            f"it and issue the keys again, or restore it from a backup)")
        return secret.encode(), str(path)
    if not create:
        return None, str(path)
    private.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(secrets.token_hex(32) + "\n")
    return path.read_text().strip().encode(), f"{path} (created now)"


def parse_expiry(text: str) -> str:
    """`2027-06-30` means through that day (UTC); a full RFC 3339 time is taken as is."""
    try:
        if len(text) == 10:
            day = datetime.strptime(text, "%Y-%m-%d").replace(tzinfo=UTC)
            return format_time(day + timedelta(days=1))
        return format_time(parse_time(text))
    except (ValueError, OverflowError):
        raise KeyError_(f"--expires {text!r}: give a date like 2027-06-30 (9999-12-30 at the "
                        f"latest) or an RFC 3339 time") from None


def issue(registry: Registry, secret: bytes, node_id: str, *, name: str, scopes: list[str],
          collections: list[str], groups: list[str], rate: int, expires: str | None,
          now: datetime) -> tuple[str, KeyRecord]:
    """Make a key, record it, and return the token (shown once) with its record."""
    if not name.strip() or not name.isprintable():
        raise KeyError_("--name must say whose key it is, in printable text, e.g. --name "
                        "\"Scheldt hub\"")
    unknown = [s for s in scopes if s not in SCOPES]
    if unknown or not scopes:
        raise KeyError_(f"unknown scope {', '.join(unknown) or '(none given)'}; choose from "
                        f"{', '.join(SCOPES)}")
    wrong = [c for c in collections if c not in COLLECTIONS]
    if wrong:
        raise KeyError_(f"unknown collection {', '.join(wrong)}; choose from "
                        f"{', '.join(COLLECTIONS)}")
    if "public" in groups:
        raise KeyError_("'public' is not a group: every key reads public records")
    if rate < 1:
        raise KeyError_("--rate must be at least 1 request per minute")
    expires_at = parse_expiry(expires) if expires else None
    if expires_at and parse_time(expires_at) <= now:
        raise KeyError_(f"--expires {expires} is in the past")
    key_id = "k_" + secrets.token_hex(6)
    record = KeyRecord(id=key_id, name=name, scopes=tuple(dict.fromkeys(scopes)),
                       collections=tuple(dict.fromkeys(collections)),
                       groups=tuple(dict.fromkeys(groups)), rate=rate,
                       created_at=format_time(now), expires_at=expires_at)
    claims: dict[str, Any] = {"iss": node_id, "aud": node_id, "jti": key_id,
                              "iat": int(now.timestamp())}
    if expires_at:
        claims["exp"] = int(parse_time(expires_at).timestamp())
    token = jwt.encode(claims, secret, algorithm=ALGORITHM)
    registry.keys[key_id] = record
    registry.save()
    return token, record
