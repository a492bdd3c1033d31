"""`fednode import dwc`: a Darwin Core checklist into species records, one Markdown file a
taxon (content/species/<name>.md), front matter on Darwin Core terms.

A record's id is a UUID v5 of the dataset and the taxonID, so a newer version of the
checklist updates its records in place, adds new taxa and reports (or, asked to, deletes)
the taxa that left it. The importer owns the fields it writes (the terms of the checklist);
a publisher's own fields (body, tags, habitat, controlPriority...) survive a re-import. A
record whose fields would not change is not written: importing a source twice writes
nothing. Everything is read and checked before anything is written: a row with a problem
is left out (a taxon with its extension rows), and said, and the rest imported; `strict`
refuses the checklist instead. A synonym is kept as a name of its accepted taxon's record
(`synonyms`); an accepted taxon the checklist names only in its synonyms' acceptedNameUsage
is a record of that name, made of those synonym rows. A taxon's fields are made and
checked in `fields`; what an import would change is an `ImportPlan` (`plan`)."""

from __future__ import annotations

import os
import re
import unicodedata
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Any

from exporter.darwincore.checklist import Checklist, ChecklistRefused, LeftOut, Row, Taxon
from exporter.darwincore.eml import Provenance
from exporter.darwincore.fields import category_of, invalid, taxon_fields
from exporter.darwincore.names import SplitName, split_names
from exporter.darwincore.plan import ImportPlan, Planned
from exporter.darwincore.synonyms import AcceptedName, Synonymy, attach
from exporter.darwincore.terms import CORE_TERMS, EXTENSIONS, FLAGS
from exporter.darwincore.values import read_controlled, read_swapped
from exporter.project.config import Project
from exporter.project.content import SourceRecord, discover, read
from exporter.project.schemas import Collection, collections
from exporter.project.tomltext import toml_string
from exporter.shared.errors import ContentError, Problem

SPECIES = "species"
# The namespace of record ids made from (dataset, taxonID).
NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://fednode.org/dwc/taxon")
ACCESS = re.compile(collections()[SPECIES].schema["properties"]["access"]["pattern"])
# Fields the importer writes, and so replaces on a re-import.
OWNED = frozenset({*CORE_TERMS, "verbatimScientificName", "synonyms", *FLAGS,
                   *(e.field for e in EXTENSIONS.values() if e.field)})


def record_id(dataset: str, taxon_id: str) -> str:
    return str(uuid.uuid5(NAMESPACE, f"{dataset}\n{taxon_id}"))


def plan_import(project: Project, checklist: Checklist, *, dataset: str | None = None,
                access: str | None = None, strict: bool = False) -> ImportPlan:
    """What importing `checklist` would change. A row that is not valid (as a species
    record's term, or as a synonym that names an accepted taxon) is left out,
    with its problems (`ImportPlan.left_out`); with `strict`, it refuses the checklist
    instead. Raise `ChecklistRefused` (with the notes of what was read: its provenance,
    what it left out) for a problem of the checklist itself, such as no plants."""
    if access is not None and not access.strip():
        # `--access "$GROUP"` with GROUP unset would otherwise publish every taxon
        raise ContentError([Problem(checklist.source, 0, "access",
                                    "--access is empty: give the access group the records "
                                    "get (e.g. --access partners), or leave --access out "
                                    "for public records")])
    if access is not None and not ACCESS.fullmatch(access):
        raise ContentError([Problem(checklist.source, 0, "access",
                                    f"--access {access!r} is neither public nor a group name: "
                                    f"a group is lowercase letters, digits, - and _ (e.g. "
                                    f"partners)")])
    plan = ImportPlan("", left_out=list(checklist.left_out), rows=checklist.rows)
    if checklist.provenance is not None:
        plan.notes.append(f"{checklist.source}: {checklist.provenance.line()}")
    plan.notes += checklist.notes
    try:
        _plan(plan, project, checklist, dataset, access)
    except ContentError as error:
        raise ChecklistRefused(error.problems, plan.notes) from None
    if strict and plan.left_out:
        raise ChecklistRefused(plan.problems(strict=True), plan.notes)
    if not (plan.added or plan.updated or plan.unchanged or plan.overlaps):
        raise ChecklistRefused(plan.problems(strict=True), plan.notes)  # nothing to import
    return plan


def _plan(plan: ImportPlan, project: Project, checklist: Checklist, dataset: str | None,
          access: str | None) -> None:
    """Fill `plan` with what importing the checklist's plants would change, its notes and
    the rows it leaves out; raise ContentError for a problem of the checklist itself."""
    taxa, kingdom_note = plants(checklist)
    plan.notes += [kingdom_note] if kingdom_note else []
    plan.notes += read_swapped(taxa)
    plan.notes += read_controlled(taxa)
    provenance = checklist.provenance
    dataset = dataset or (provenance.doi if provenance else "") or None
    datasets = _datasets(checklist, taxa, dataset)
    plan.dataset = ", ".join(sorted(datasets))
    existing = _existing(project)
    context = _Context(project, collections()[SPECIES], {r.id: r for r in existing}, {},
                       {r.path for r in existing}, {}, access, dataset)
    for record in existing:
        context.by_name.setdefault(_name_key(record.fields.get("scientificName")),
                                   []).append(record)
    names = split_names([t.row.terms.get("scientificName", "") for t in taxa])
    synonymy = attach(taxa, names)
    plan.left_out += synonymy.left
    plan.synonyms = synonymy.attached
    if synonymy.attached:
        plan.notes.append(f"{checklist.source}: taxonomicStatus: {synonymy.attached} synonyms "
                          f"kept as names of their accepted taxa (their {synonymy.unkept} "
                          f"extension rows are not kept)")
    for index in synonymy.accepted:
        taxon = taxa[index]
        problems = _plan_taxon(plan, context, taxon, names[index], provenance,
                               synonymy.names.get(index, []))
        if problems:
            plan.left_out.append(_left_taxon(taxon, problems))
    named = sum(_plan_named(plan, context, taxa, accepted, provenance)
                for accepted in synonymy.named)
    plan.synonyms += named
    if named:
        plan.notes.append(f"{checklist.source}: acceptedNameUsage: {named} synonyms name "
                          f"{len(synonymy.named)} accepted taxa that have no row: each "
                          f"imported as a record of the accepted name, with its synonyms' "
                          f"names and extension rows")
    _twins(plan, context, taxa, synonymy, datasets)
    # A taxon left out for a problem is still in the checklist: never pruned for it.
    present = {taxa[i].taxon_id for i in synonymy.accepted}
    present |= {accepted.taxon_id for accepted in synonymy.named}
    present |= {left.taxon_id for left in plan.left_out if left.taxon_id}
    gone = [r for r in existing if r.fields.get("datasetID") in datasets
            and r.fields.get("taxonID") and r.fields["taxonID"] not in present
            and r.id == record_id(r.fields["datasetID"], r.fields["taxonID"])]
    # A record that is a row of a table is the publisher's to remove: deleting its file
    # would delete the table's other rows with it.
    plan.left = [r for r in gone if r.path.endswith(".md")]
    plan.notes += [f"{r.path}:{r.line}: the record of {r.fields['taxonID']} left the "
                   f"checklist but is a table row: remove the row by hand"
                   for r in gone if not r.path.endswith(".md")]


def _left_taxon(taxon: Taxon, problems: list[Problem]) -> LeftOut:
    """A taxon left out for the problems of its core row, with its extension rows."""
    following = sum(len(rows) for rows in taxon.extensions.values())
    return LeftOut(taxon.row, "taxon", problems, following, taxon.taxon_id)


def _plan_named(plan: ImportPlan, context: _Context, taxa: list[Taxon],
                accepted: AcceptedName, provenance: Provenance | None) -> int:
    """Add the record of an accepted taxon without a row, made of its synonym rows (the
    core terms of the first); a row whose core terms have a problem is left out, with its
    extension rows, and the record made of the rest. Return the synonym rows kept."""
    members = list(accepted.members)
    while members:
        dropped = {id(left.row) for left in plan.left_out}
        taxon = accepted.taxon(taxa, members, dropped)
        problems = _plan_taxon(plan, context, taxon, accepted.name, provenance,
                               accepted.synonyms(members), term="acceptedNameUsage")
        if not problems:
            return len(members)
        first = taxa[members.pop(0)]
        following = sum(1 for rows in first.extensions.values() for row in rows
                        if id(row) not in dropped)
        plan.left_out.append(LeftOut(first.row, "taxon", problems, following,
                                     first.taxon_id))
    return 0


def _twins(plan: ImportPlan, context: _Context, taxa: list[Taxon], synonymy: Synonymy,
           datasets: set[str]) -> None:
    """Report each record of the publisher's own whose name is a synonym of an imported
    taxon: the same plant under two names."""
    for accepted, row, written, name in synonymy.listed(taxa):
        for record in context.by_name.get(_name_key(name), []):
            if record.fields.get("datasetID") in datasets:
                continue  # a record of this checklist's: it left it, and is listed
            plan.twins.append(
                f"{record.path}:{record.line_of('scientificName')}: scientificName: "
                f"{record.fields.get('scientificName')!r} is a synonym of {accepted!r} "
                f"({row.file}:{row.line}, which lists {written!r}): the same plant as two "
                f"records; merge them by hand")


# What the species collection holds: plants. Its `family` takes botanical family names
# (-aceae and the eight conserved ones), its categories and growth forms are a plant's.
PLANT_KINGDOMS = frozenset({"plantae", "plants", "plant", "viridiplantae"})


def plants(checklist: Checklist) -> tuple[list[Taxon], str]:
    """The taxa of `checklist` the species collection can hold (kingdom Plantae, or no
    kingdom given), and one line naming what was left out, by kingdom ("" when nothing
    was). A checklist with taxa and no plant among them is refused in one problem."""
    kept: list[Taxon] = []
    others: Counter[str] = Counter()
    for taxon in checklist.taxa:
        kingdom = " ".join(taxon.row.terms.get("kingdom", "").split())
        if not kingdom or kingdom.casefold() in PLANT_KINGDOMS:
            kept.append(taxon)
        else:
            others[kingdom] += 1
    if not others:
        return kept, ""
    counts = ", ".join(f"{count} {kingdom}" for kingdom, count in others.most_common())
    if not kept:
        raise ContentError([Problem(checklist.source, 0, "kingdom",
                                    f"no plants: the checklist's {counts} taxa are not "
                                    f"Plantae, and this node's species collection holds "
                                    f"plants only; nothing was imported")])
    return kept, (f"{checklist.source}: kingdom: left out {counts} taxa: this node's species "
                  f"are plants")


def _datasets(checklist: Checklist, taxa: list[Taxon], dataset: str | None) -> set[str]:
    datasets = {t.row.terms.get("datasetID") or dataset or "" for t in taxa}
    if "" in datasets:
        first = next(t.row for t in taxa if not t.row.terms.get("datasetID"))
        raise ContentError([Problem(first.file, first.line, "datasetID",
                                    "missing: give the checklist a datasetID column or "
                                    "pass --dataset (a DOI or URL naming it)")])
    for name in sorted(d for d in datasets if not d.isprintable()):
        raise ContentError([Problem(checklist.source, 0, "datasetID",
                                    f"{name[:60]!r} holds a control character: a dataset is "
                                    f"named by a DOI or URL")])
    return datasets


@dataclass
class _Context:
    project: Project
    species: Collection
    by_id: dict[str, SourceRecord]
    by_name: dict[str, list[SourceRecord]]
    taken: set[str]
    seen_names: dict[str, str]
    access: str | None
    dataset: str | None


def _plan_taxon(plan: ImportPlan, context: _Context, taxon: Taxon, split: SplitName,
                provenance: Provenance | None, synonyms: list[str], *,
                term: str = "scientificName") -> list[Problem]:
    """Add one taxon to the plan: as an added, updated or unchanged record, or as an
    overlap with a record of the same name (named by its row's `term`); return the
    problems of its core row instead (the caller leaves it out)."""
    set_dataset = taxon.row.terms.get("datasetID") or context.dataset or ""
    ident = record_id(set_dataset, taxon.taxon_id)
    fields = _checked_fields(plan, context, taxon, split, provenance, synonyms, ident)
    if isinstance(fields, list):
        return fields
    where = f"{taxon.row.file}:{taxon.row.line}: {term}:"
    if split.note:
        plan.notes.append(f"{where} {split.verbatim!r}: {split.note}")
    key = _name_key(fields["scientificName"])
    if key in context.seen_names:
        plan.notes.append(f"{where} {fields['scientificName']!r} also names "
                          f"{context.seen_names[key]}; both imported (`fednode check` warns)")
    context.seen_names.setdefault(key, taxon.taxon_id)
    old = context.by_id.get(ident)
    if old is None:
        clash = [r for r in context.by_name.get(key, []) if r.id != ident]
        if clash:
            plan.overlaps.append(f"{where} {fields['scientificName']!r} is already "
                                 f"{clash[0].path}: not imported (merge by hand, or remove "
                                 f"that record and import again)")
            return []
        fields = {"id": ident, **({"access": context.access} if context.access else {}),
                  **fields}
        category = category_of(fields)
        if category:
            fields["category"] = category
        path = _free_path(context.project, fields["scientificName"], ident, context.taken)
        context.taken.add(path)
        plan.added.append(Planned(taxon.taxon_id, ident, context.project.root / path, fields,
                                  ""))
        return []
    kept = {k: v for k, v in old.fields.items() if k not in OWNED and k != "body"}
    if context.access:
        kept["access"] = context.access
    fields = {**kept, **fields}
    if not old.path.endswith(".md"):
        plan.notes.append(f"{old.path}:{old.line}: the record of {taxon.taxon_id} is a table "
                          f"row: not updated")
        plan.unchanged += 1
    elif fields == {k: v for k, v in old.fields.items() if k != "body"}:
        plan.unchanged += 1
    else:
        plan.updated.append(Planned(taxon.taxon_id, ident, context.project.root / old.path,
                                    fields, str(old.fields.get("body", ""))))
    return []


def _checked_fields(plan: ImportPlan, context: _Context, taxon: Taxon, split: SplitName,
                    provenance: Provenance | None, synonyms: list[str], ident: str
                    ) -> dict[str, Any] | list[Problem]:
    """The imported fields of one taxon, valid as a species record's: an extension row
    with a problem is left out (and the fields made again without it); the problems of the
    core row instead, where it has any (the taxon is left out)."""
    while True:
        fields, origins = taxon_fields(taxon, split.name, split.authorship, split.verbatim)
        if synonyms:
            fields["synonyms"] = synonyms
        fields.setdefault("datasetID", taxon.row.terms.get("datasetID") or context.dataset
                          or "")  # the record says where it came from
        if provenance is not None:  # and under what terms (the EML's, where the core says none)
            for name, value in (("datasetName", provenance.title),
                                ("license", provenance.licence),
                                ("bibliographicCitation", provenance.citation)):
                if value and name not in fields:
                    fields[name] = value[:1000]
        found: dict[int, tuple[Row, list[Problem]]] = {}
        for row, problem in invalid(context.species, {"id": ident, **fields}, taxon, origins):
            found.setdefault(id(row), (row, []))[1].append(problem)
        if not found:
            return fields
        if id(taxon.row) in found:
            return found[id(taxon.row)][1]
        for kind, rows in taxon.extensions.items():
            for row in [r for r in rows if id(r) in found]:
                plan.left_out.append(LeftOut(row, kind, found[id(row)][1]))
            taxon.extensions[kind] = [r for r in rows if id(r) not in found]


def apply_import(project: Project, plan: ImportPlan, *, prune: bool = False) -> None:
    """Write the plan's added and updated records (each file replaced whole, never half
    written); with `prune`, delete the records of taxa that left the checklist."""
    for planned in [*plan.added, *plan.updated]:
        planned.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = planned.path.with_name(f".{planned.path.name}.tmp")
        temporary.write_text(record_text(planned.fields, planned.body), "utf-8")
        os.replace(temporary, planned.path)
    if prune:
        for record in plan.left:
            (project.root / record.path).unlink(missing_ok=True)



def _existing(project: Project) -> list[SourceRecord]:
    """Every species record that can be read (valid or not)."""
    known = collections()
    files, _ = discover(project.content, known)
    records: list[SourceRecord] = []
    for source in files:
        if source.collection == SPECIES:
            records.extend(read(source, known[SPECIES])[0])
    return records


def _name_key(name: Any) -> str:
    return " ".join(str(name or "").split()).casefold()


def slug(name: str) -> str:
    text = unicodedata.normalize("NFKD", name.replace("×", "x"))
    text = text.encode("ascii", "ignore").decode().lower()
    return re.sub(r"[^a-z0-9]+", "-", text).strip("-")[:80] or "taxon"


def _free_path(project: Project, name: str, ident: str, taken: set[str]) -> str:
    base = f"content/{SPECIES}/{slug(name)}"
    for candidate in (f"{base}.md", f"{base}-{ident[:8]}.md"):
        if candidate not in taken and not (project.root / candidate).exists():
            return candidate
    return f"{base}-{ident}.md"


# ---- the record file ----------------------------------------------------------------------

def record_text(fields: dict[str, Any], body: str = "") -> str:
    """A record file: scalar fields, then each list of tables, in the schema's order; the
    body below the front matter."""
    order = list(collections()[SPECIES].schema["properties"])
    rank = {name: index for index, name in enumerate(order)}
    names = sorted(fields, key=lambda n: (rank.get(n, len(rank)), n))
    tables = [n for n in names if _is_tables(fields[n])]
    lines = ["+++"]
    lines += [f"{name} = {_value(fields[name])}" for name in names
              if name not in tables and name != "body"]
    for name in tables:
        for entry in fields[name]:
            lines += ["", f"[[{name}]]"]
            lines += [f"{key} = {_value(value)}" for key, value in entry.items()]
    lines.append("+++")
    text = "\n".join(lines) + "\n"
    return text + body.rstrip() + "\n" if body.strip() else text


def _is_tables(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_value(item) for item in value) + "]"
    return toml_string(str(value))
