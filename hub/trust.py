"""Who a member is: the node that holds its signing key, never what its manifest says.

A hub checks every manifest a member sends before anything of it is used
(`hub.node.Node.trust`):

- it must be signed, by the key the manifest publishes (`signing.check_manifest`);
- that key must be the member's pinned key: `fingerprint` in hub.toml (`hub add` writes it),
  else the key its first successful sync found (trust on first use, as SSH does), kept in
  its status file. A key the pinned one rotated to, by a statement the pinned key signed
  (`node.key_rotations`), is followed and pinned in its place;
- its node id must be hub.toml's `node_id` for the member, when that is given;
- no other member, and not the hub itself, may hold its node id or key (`Claims`): the
  members served already, and those pinned in hub.toml, keep theirs; a member that fails
  later in its run gives up what it claimed. A private member (never served) holds no
  claim: a hub may follow a node openly and, with a key holding groups, privately.

A member that fails any check fails on its own line, saying what it claimed; its run writes
nothing, and what the hub served of it before stays as it was."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from exporter.contract.signing import NodeKey, follow

from .errors import SyncError, one_line
from .members import Hub, Member
from .messages import Manifest
from .status import Status

HUB = "the hub itself"  # the holder of the hub's own id and key


@dataclass
class Claims:
    """The node ids and keys that members (by name) and the hub hold, shared by the
    members' runs of one `hub sync`."""

    held: dict[str, str] = field(default_factory=dict)  # "id ..." / "key ..." -> holder
    lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def of(cls, hub: Hub, statuses: dict[str, Status], hub_id: str | None,
           hub_key: NodeKey | None) -> Claims:
        """What is held before any member runs: the hub's own id and key, each member's
        pins in hub.toml, then what each member's last successful sync pinned."""
        claims = cls()
        if hub_id is not None:
            claims.held[f"id {hub_id}"] = HUB
        if hub_key is not None:
            claims.held[f"key {hub_key.public.fingerprint}"] = HUB
        served = [member for member in hub.members if not member.private]
        for member in served:
            for claim in (member.node_id and f"id {member.node_id}",
                          member.fingerprint and f"key {member.fingerprint}"):
                if claim:
                    claims.held.setdefault(claim, member.name)
        for member in served:
            status = statuses.get(member.name)
            if status is None or status.last_success is None:
                continue
            for claim in (status.node_id and f"id {status.node_id}",
                          status.key_fingerprint and f"key {status.key_fingerprint}"):
                if claim:
                    claims.held.setdefault(claim, member.name)
        return claims

    def take(self, member: str, node_id: str, fingerprint: str) -> list[str]:
        """Hold the node id and key for `member`; SyncError if another holds either. The
        claims it did not hold before."""
        wanted = {"node id": f"id {node_id}", "key": f"key {fingerprint}"}
        with self.lock:
            for what, claim in wanted.items():
                holder = self.held.get(claim)
                if holder is not None and holder != member:
                    whose = HUB if holder == HUB else f"the member {holder}"
                    raise SyncError(
                        f"its manifest claims the {what} {one_line(claim.split(' ', 1)[1], 80)}"
                        f", which {whose} holds: a node is known by its key, and no member "
                        f"takes another's place; nothing it sent is served")
            new = [claim for claim in wanted.values() if claim not in self.held]
            for claim in new:
                self.held[claim] = member
            return new

    def release(self, member: str, claims: list[str]) -> None:
        """Give up claims `member` took in a run that then failed."""
        with self.lock:
            for claim in claims:
                if self.held.get(claim) == member:
                    del self.held[claim]


def pinned_key(member: Member, status: Status) -> str | None:
    """The fingerprint the member's manifests must be signed by (or lead to by rotation):
    hub.toml's, or the one it rotated to since it was written, or, where hub.toml names
    none, the one its first sync pinned."""
    if member.fingerprint is not None:
        if status.key_anchor == member.fingerprint and status.key_fingerprint:
            return status.key_fingerprint
        return member.fingerprint
    return status.key_fingerprint


class MemberTrust:
    """The check of one member's manifests during its run (`Node.trust`)."""

    def __init__(self, member: Member, status: Status, claims: Claims) -> None:
        self.member = member
        self.pinned = pinned_key(member, status)
        self.claims = claims
        self.key: str | None = None  # the key its manifests were found signed by
        self.node_id: str | None = None  # and the node id they claimed
        self.notes: list[str] = []
        self.taken: list[str] = []  # the claims this run took (`release`)

    def __call__(self, manifest: Manifest) -> None:
        signed = manifest.signed
        if signed is None:
            raise SyncError("its manifest is not signed; a hub serves nodes whose manifests "
                            "are signed with their key (fednode signs at every export): ask "
                            "its publisher to export with this fednode")
        if signed.node_id != manifest.node_id:
            raise SyncError("its manifest's signature names another node id")
        fingerprint = signed.key.fingerprint
        if self.member.node_id is not None and manifest.node_id != self.member.node_id:
            raise SyncError(
                f"its manifest claims the node id {one_line(manifest.node_id, 80)} (signed by "
                f"{fingerprint}), not {self.member.node_id}, the id hub.toml pins; nothing "
                f"it sent is served")
        if (self.key, self.node_id) == (fingerprint, manifest.node_id):
            return
        if self.node_id is not None and manifest.node_id != self.node_id:
            raise SyncError(f"its manifest's node id changed from {self.node_id} to "
                            f"{one_line(manifest.node_id, 80)} during the sync; nothing it "
                            f"sent is served")
        note = self._checked(manifest, fingerprint)
        if not self.member.private:  # (a private copy is never served: it holds no claim)
            self.taken += self.claims.take(self.member.name, manifest.node_id, fingerprint)
        self.key, self.node_id = fingerprint, manifest.node_id
        if note:
            self.notes.append(note)

    def release(self) -> None:
        """The run failed: what it claimed is free again for other members."""
        self.claims.release(self.member.name, self.taken)
        self.taken = []

    def _checked(self, manifest: Manifest, fingerprint: str) -> str | None:
        """What the operator should know of the key (None: the pinned one)."""
        assert manifest.signed is not None
        if self.pinned is None:
            return f"pinned its key {fingerprint} (first use)"
        if fingerprint == self.pinned:
            return None
        path = follow(manifest.node_id, self.pinned, manifest.signed.key,
                      manifest.signed.rotations)
        if path is None:
            raise SyncError(
                f"its manifest is signed by the key {fingerprint}, not its pinned key "
                f"{self.pinned}, and no rotation signed by it leads there; check the new key "
                f"with its publisher and set it as fingerprint in hub.toml")
        return f"followed its key's rotation from {self.pinned} to {fingerprint}"
