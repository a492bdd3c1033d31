"""A node's signing key, and the signatures that let anyone check what a node published.

Every node holds an Ed25519 key pair in `.fednode/signing_key.pem` (made by `fednode init` or
the first export, readable by its owner alone). The export signs the manifest with it; the
manifest publishes the public key (`node.public_key`) beside the node's id, and lists the
SHA-256 of every sync file a hub fetches (snapshot chunks, the public change list), so a
record can be checked back to the node that wrote it.

- A public key is written `ed25519:<the 32 bytes in base64url>`; its fingerprint, which
  operators compare and pin, `SHA256:<SHA-256 of those bytes in base64, unpadded>`, as SSH
  writes its own.
- The signed bytes are the manifest without its `signature` member, in the JSON
  Canonicalization Scheme (RFC 8785), so that any reader that parses the manifest can check
  it, whatever spaces or key order it was sent with.
- A key rotation is a statement (`node.key_rotations`) naming the node, the old key and the
  new one, signed by the old key: a hub that pinned the old key follows it to the new. The
  statements are kept in `key_rotations.json` beside the ledger, committed with it.

The signatures are the `cryptography` package's; nothing here is cryptography of its own."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import rfc8785
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from .errors import FednodeError

KEY_FILE = "signing_key.pem"  # in .fednode/
KEY_ENV = "FEDNODE_SIGNING_KEY"  # the key's PEM text, in place of the file (a CDN's build)
# Beside the ledger, committed with it: the rotation statements the manifest publishes (public
# statements, which a CDN's build needs as much as the key).
ROTATIONS_FILE = "key_rotations.json"
ALGORITHM = "Ed25519"
PREFIX = "ed25519:"
MAX_ROTATIONS = 64  # statements a manifest may carry; more are refused


class SignatureError(FednodeError):
    """A signature, key or statement that does not check; the message says which."""


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64url(text: str, what: str) -> bytes:
    if not isinstance(text, str) or len(text) > 200:
        raise SignatureError(f"{what}: expected base64url text")
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise SignatureError(f"{what}: not base64url") from None


@dataclass(frozen=True)
class PublicKey:
    """A node's public key."""

    raw: bytes

    @classmethod
    def parse(cls, text: object, what: str = "public_key") -> PublicKey:
        if not isinstance(text, str) or not text.startswith(PREFIX):
            raise SignatureError(f"{what}: expected {PREFIX}<32 bytes in base64url>")
        raw = _unb64url(text[len(PREFIX):], what)
        if len(raw) != 32:
            raise SignatureError(f"{what}: an Ed25519 key is 32 bytes, not {len(raw)}")
        return cls(raw)

    @property
    def text(self) -> str:
        return PREFIX + _b64url(self.raw)

    @property
    def fingerprint(self) -> str:
        digest = base64.b64encode(hashlib.sha256(self.raw).digest()).rstrip(b"=")
        return "SHA256:" + digest.decode("ascii")

    def verifies(self, signature: bytes, data: bytes) -> bool:
        try:
            Ed25519PublicKey.from_public_bytes(self.raw).verify(signature, data)
        except (InvalidSignature, ValueError):
            return False
        return True


class NodeKey:
    """A node's private signing key."""

    def __init__(self, key: Ed25519PrivateKey) -> None:
        self._key = key
        self.public = PublicKey(key.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw))

    @classmethod
    def generate(cls) -> NodeKey:
        return cls(Ed25519PrivateKey.generate())

    @classmethod
    def load(cls, private: Path, *, create: bool = False) -> NodeKey | None:
        """The node's key: the environment variable FEDNODE_SIGNING_KEY, else the file in
        `private` (.fednode/); with `create`, one is made there if there is neither."""
        from_env = os.environ.get(KEY_ENV, "").strip()
        if from_env:
            return cls._parsed(from_env.encode("utf-8"), f"the environment variable {KEY_ENV}")
        path = private / KEY_FILE
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            if not create:
                return None
            key = cls.generate()
            try:
                key.save(path, replace=False)
            except FileExistsError:  # made meanwhile by another process: that one it is
                return cls.load(private)
            return key
        return cls._parsed(data, str(path))

    @classmethod
    def _parsed(cls, data: bytes, where: str) -> NodeKey:
        try:
            loaded = serialization.load_pem_private_key(data, password=None)
        except (ValueError, TypeError) as exc:
            raise SignatureError(f"{where}: not a PEM private key ({exc}); restore it from a "
                                 f"backup (docs/hub.md, Trust: a lost key)") from None
        if not isinstance(loaded, Ed25519PrivateKey):
            raise SignatureError(f"{where}: not an Ed25519 key; restore it from a backup")
        return cls(loaded)

    def save(self, path: Path, *, replace: bool = True) -> None:
        """Write the key to `path`, its owner's alone (0600): replacing any file there at
        once, or (`replace` False) only where there is none (FileExistsError)."""
        data = self._key.private_bytes(serialization.Encoding.PEM,
                                       serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption())
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        temporary.unlink(missing_ok=True)
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if replace:
            os.replace(temporary, path)
            return
        try:
            os.link(temporary, path)  # fails where a key is: never one overwritten
        finally:
            temporary.unlink()

    def sign(self, data: bytes) -> str:
        return _b64url(self._key.sign(data))


def canonical(value: Any) -> bytes:
    """`value` in the JSON Canonicalization Scheme (RFC 8785): the bytes a signature covers."""
    try:
        return rfc8785.dumps(value)
    except (rfc8785.CanonicalizationError, ValueError, TypeError) as exc:
        raise SignatureError(f"cannot be put in canonical form: {exc}") from None


def signed_manifest(manifest: dict[str, Any], key: NodeKey,
                    rotations: list[dict[str, Any]]) -> dict[str, Any]:
    """The manifest with the node's public key (and its rotation statements) in `node`, and
    its `signature` last."""
    node = dict(manifest["node"])
    node["public_key"] = key.public.text
    node["key_fingerprint"] = key.public.fingerprint
    if rotations:
        node["key_rotations"] = rotations
    out = {**manifest, "node": node}
    out["signature"] = {"algorithm": ALGORITHM, "key_fingerprint": key.public.fingerprint,
                        "value": key.sign(canonical(out))}
    return out


@dataclass(frozen=True)
class Signed:
    """What a checked manifest says of who signed it."""

    node_id: str
    key: PublicKey
    rotations: tuple[dict[str, Any], ...]


def check_manifest(data: object) -> Signed | None:
    """Check a parsed manifest's signature against the key it publishes: who signed it, or
    None for a manifest with no signature. SignatureError for one that does not check."""
    if not isinstance(data, dict) or "signature" not in data:
        return None
    signature, node = data["signature"], data.get("node")
    if not isinstance(signature, dict) or not isinstance(node, dict):
        raise SignatureError("signature: expected an object, beside a node object")
    if signature.get("algorithm") != ALGORITHM:
        raise SignatureError(f"signature: algorithm {str(signature.get('algorithm'))[:40]!r} "
                             f"is not {ALGORITHM}")
    key = PublicKey.parse(node.get("public_key"), "node.public_key")
    if signature.get("key_fingerprint") != key.fingerprint or \
            node.get("key_fingerprint") != key.fingerprint:
        raise SignatureError("node.key_fingerprint: not the fingerprint of node.public_key")
    value = _unb64url(signature.get("value"), "signature.value")  # type: ignore[arg-type]
    unsigned = {name: item for name, item in data.items() if name != "signature"}
    if not key.verifies(value, canonical(unsigned)):
        raise SignatureError(f"the manifest's signature does not verify with its key "
                             f"{key.fingerprint}: it was changed after it was signed")
    rotations = node.get("key_rotations", [])
    if not isinstance(rotations, list) or len(rotations) > MAX_ROTATIONS:
        raise SignatureError(f"node.key_rotations: expected a list of at most "
                             f"{MAX_ROTATIONS} statements")
    node_id = node.get("id")
    if not isinstance(node_id, str):
        raise SignatureError("node.id: expected text")
    return Signed(node_id, key, tuple(r for r in rotations if isinstance(r, dict)))


def rotation(node_id: str, old: NodeKey, new: PublicKey, at: str) -> dict[str, Any]:
    """A statement, signed by the `old` key, that the node `node_id` signs with `new` from
    `at` on."""
    statement: dict[str, Any] = {"node_id": node_id, "old_key": old.public.text,
                                 "new_key": new.text, "at": at}
    statement["signature"] = old.sign(canonical(statement))
    return statement


def follow(node_id: str, start: str, target: PublicKey,
           statements: Iterable[dict[str, Any]]) -> list[str] | None:
    """The fingerprints from the key `start` (a fingerprint) to `target`, each step a
    rotation statement of `node_id` signed by the key it leaves; None if none leads there."""
    by_old: dict[str, list[PublicKey]] = {}
    for statement in statements:
        try:
            old = PublicKey.parse(statement.get("old_key"), "old_key")
            new = PublicKey.parse(statement.get("new_key"), "new_key")
            value = _unb64url(statement.get("signature"), "signature")  # type: ignore[arg-type]
            signed = canonical({k: v for k, v in statement.items() if k != "signature"})
        except SignatureError:
            continue
        if statement.get("node_id") == node_id and old.verifies(value, signed):
            by_old.setdefault(old.fingerprint, []).append(new)
    came_from: dict[str, str] = {start: start}
    reached = [start]
    for current in reached:  # (breadth first: each key once, so a cycle ends the walk)
        for new in by_old.get(current, []):
            if new.fingerprint not in came_from:
                came_from[new.fingerprint] = current
                reached.append(new.fingerprint)
    if target.fingerprint not in came_from:
        return None
    path = [target.fingerprint]
    while path[-1] != start:
        path.append(came_from[path[-1]])
    return path[::-1]


@dataclass(frozen=True)
class Identity:
    """What an export signs with: the node's key and the rotation statements it publishes."""

    key: NodeKey
    rotations: list[dict[str, Any]]

    @classmethod
    def load(cls, private: Path, rotations: Path, *, frozen: bool = False) -> Identity:
        """The node's key, from `private` (made now if it has none, unless `frozen`: a build
        from committed files never makes one), and its statements, from `rotations`."""
        key = NodeKey.load(private, create=not frozen)
        if key is None:
            raise SignatureError(
                f"{private / KEY_FILE}: no signing key, and a --frozen export never makes one "
                f"(hubs know the node by it): set {KEY_ENV} to the text of the node's "
                f"signing_key.pem, or copy that file here")
        return cls(key, read_rotations(rotations))


def read_rotations(path: Path) -> list[dict[str, Any]]:
    """The rotation statements in `path` (none where there is no file)."""
    try:
        data = json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        return []
    except (ValueError, UnicodeDecodeError) as exc:
        raise SignatureError(f"{path}: not JSON ({exc}); restore it from a backup") from None
    if not isinstance(data, list) or not all(isinstance(item, dict) for item in data):
        raise SignatureError(f"{path}: expected a list of rotation statements")
    return data[-MAX_ROTATIONS:]


def rotate(private: Path, rotations: Path, node_id: str, at: str
           ) -> tuple[PublicKey, PublicKey]:
    """Replace the node's key in `private` with a new one, and add to `rotations` a
    statement, signed by the old key, that names the new one. The old key is kept beside it
    (`signing_key.<fingerprint digits>.retired.pem`). Returns the old and new public keys."""
    if os.environ.get(KEY_ENV, "").strip():
        raise SignatureError(f"{KEY_ENV} is set: the key is the environment's, not "
                             f"{private / KEY_FILE}; rotate where the key file is kept, "
                             f"without {KEY_ENV}, then set it to the new key's text")
    old = NodeKey.load(private)
    if old is None:
        raise SignatureError(f"{private / KEY_FILE}: no key to rotate; the first export "
                             f"makes one")
    new = NodeKey.generate()
    statements = [*read_rotations(rotations), rotation(node_id, old, new.public, at)]
    retired = private / f"signing_key.{old.public.fingerprint[7:19].replace('/', '_')}" \
                        f".retired.pem"
    old.save(retired)
    temporary = rotations.with_name(f".{rotations.name}.tmp")
    temporary.write_text(json.dumps(statements, indent=1) + "\n", "utf-8")
    os.replace(temporary, rotations)
    new.save(private / KEY_FILE)
    return old.public, new.public
