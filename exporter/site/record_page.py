"""A public record's page, in parts: its heading, opening lines, facts, text, sections and
collapsed Data section, each HTML made here in one pass (every text escaped as the
templates' autoescape escapes it) and put into the collection's skeleton of record.html
(`pages.Site.skeleton`); its schema.org JSON-LD. A species' own parts are
`species_page`'s."""

from __future__ import annotations

import json
from collections.abc import Iterable
from functools import cache
from typing import TYPE_CHECKING, Any

from markupsafe import Markup

from exporter.contract.page_urls import record_href
from exporter.contract.scientific_names import name_html
from exporter.contract.wire import document_url
from exporter.project.content import SourceRecord
from exporter.project.labels import field_label, is_data
from exporter.project.schemas import Collection
from exporter.site import charts, network, species_page
from exporter.site.dates import date_text
from exporter.site.served import LIBRARY_PATH, Rendered
from exporter.site.values import escaped as _escaped
from exporter.site.values import is_shown, markdown_html, value_html

if TYPE_CHECKING:
    from exporter.site.pages import Site

# The fields that name species in other collections, and the section title they get on a
# species page.
NAMES_SPECIES = {"treatments": ("targetSpecies", "Treatments"),
                  "resources": ("relatedSpecies", "Resources"),
                  "germination": ("species", "Germination results")}


_HIDDEN = {"id", "access", "title", "tags", "body", "source_node"}  # (the node's id: its name
# is shown)
# The fields whose values are scientific names: a species' related records name it by them.
_NAME_FIELDS = frozenset(field for field, _ in NAMES_SPECIES.values())


@cache
def _labelled(collection: Collection) -> tuple[tuple[str, str, bool], ...]:
    """The fields a record page shows, in schema order, each with its label (escaped) and
    whether it goes in the Data section: the content's, then, on a hub, where the record
    comes from and its licence. A species' own fields (its names, status and nested
    records) are shown by `species_page` instead."""
    own = species_page.OWN_FIELDS if collection.name == "species" else frozenset()
    out = []
    for name in dict.fromkeys((*collection.content_fields, *collection.provenance_fields)):
        if name in _HIDDEN or name in own or name == collection.title_field:
            continue
        label = (collection.property(name) or {}).get("title") or field_label(name)
        out.append((name, _escaped(label[:1].upper() + label[1:]), is_data(name)))
    return tuple(out)


def record_page_html(site: Site, collection: Collection, r: Rendered, source: SourceRecord,
                     links: list[tuple[str, Rendered]]) -> bytes:
    fields = source.fields
    here = record_href(collection.name, r.id)
    json_path = _escaped(f"/api/{collection.name}/{r.id}")
    species = collection.name == "species"
    title = r.title or r.id
    return site.skeleton(collection).render({
        "title": _escaped(title),
        "heading": species_page.heading_html(fields, title) if species else _escaped(title),
        "lead": species_page.lead_html(fields) if species else "",
        "here": _escaped(here),
        "json_path": json_path,
        "json_ld": script_json(json_ld(site.node.base_url, collection.name, r, fields, links)),
        "facts": (facts_section if species else _dl)(
            (species_page.facts_html(fields) if species else "")
            + fields_html(collection, source)),
        "updated_at": _escaped(r.updated_at),
        "updated": _escaped(date_text(r.updated_at)),
        "body": (species_page.body_html(fields) if species
                 else markdown_html(str(fields.get("body") or ""))),
        "sections": ((species_page.sections_html(fields) if species else "")
                     + related_html(links, charts.species_charts(links))
                     + (network.taxon_section(fields.get("scientificName"))
                        if species and site.node.network is not None else "")),
        "data": data_html(collection, source),
    })


def _dl(rows: str) -> str:
    return f'<dl class="facts">\n{rows}</dl>\n' if rows else ""


def facts_section(rows: str) -> str:
    """A species' facts, after its text: a section of their own."""
    return f"<section>\n<h2>Facts</h2>\n{_dl(rows)}</section>\n" if rows else ""


def related_html(links: list[tuple[str, Rendered]], drawn: dict[str, str] | None = None
                 ) -> str:
    """A section for each kind of related record, each record a link (a species by its
    name in italics); a chart of them (`drawn`, by section: `charts.species_charts`) opens
    its section, before the links."""
    sections: dict[str, list[str]] = {}
    for section, other in links:
        title = (name_html(other.title) if other.collection == "species" and other.title
                 else _escaped(other.title or other.id))
        sections.setdefault(section, []).append(
            f'<li><a href="{_escaped(record_href(other.collection, other.id))}">{title}</a></li>')
    drawn = drawn or {}
    return "".join(f"<section>\n<h2>{_escaped(title)}</h2>\n{drawn.get(title, '')}"
                   f"<ul>{''.join(items)}</ul>\n</section>\n" for title, items in sections.items())


def _value(name: str, value: Any) -> str:
    if name in _NAME_FIELDS:
        names = [value] if isinstance(value, str) else [v for v in value if isinstance(v, str)]
        return ", ".join(name_html(n) for n in names if n)
    return value_html(value, name)


def fields_html(collection: Collection, source: SourceRecord, data: bool = False) -> str:
    """The rows of a record page's facts (or, with `data`, of its Data section): a library
    document's PDF first, then each field with a value, by its label (controlled values by
    theirs, dates in words, scientific names in italics, nested records as tables, booleans
    as yes/no, URLs as links), then tags."""
    fields = source.fields
    rows = []
    if source.path.startswith(LIBRARY_PATH) and not data:  # only public records have a page
        pdf = _escaped(document_url("", source.id))
        rows.append(f'<dt>Document</dt><dd><a href="{pdf}" type="application/pdf">'
                    "Read the document (PDF)</a></dd>\n")
    for name, label, technical in _labelled(collection):
        value = fields.get(name)
        if technical == data and is_shown(value):
            rows.append(f"<dt>{label}</dt><dd>{_value(name, value)}</dd>\n")
    if fields.get("tags") and not data:
        rows.append(f"<dt>Tags</dt><dd>{value_html(fields['tags'])}</dd>\n")
    return "".join(rows)


def data_html(collection: Collection, source: SourceRecord) -> str:
    """The collapsed Data section: the record's identifiers and technical terms."""
    rows = fields_html(collection, source, data=True)
    if not rows:
        return ""
    return (f'<details class="data">\n<summary>Data</summary>\n<dl>\n{rows}</dl>\n'
            "</details>\n")


def json_ld(base_url: str, collection: str, r: Rendered, fields: dict[str, Any],
            links: Iterable[tuple[str, Rendered]]) -> dict[str, Any]:
    """schema.org: Taxon for a species, Dataset or CreativeWork for a resource, HowTo for a
    treatment, Dataset for a germination result, Person for a team member."""
    url = base_url + record_href(collection, r.id)
    data: dict[str, Any] = {"@context": "https://schema.org", "@id": url, "url": url,
                            "identifier": r.id, "name": r.title, "dateModified": r.updated_at,
                            "sameAs": f"{base_url}/api/{collection}/{r.id}"}
    taxa = [{"@type": "Taxon", "name": other.title,
             "url": base_url + record_href("species", other.id)}
            for section, other in links if section == "Species"]
    if collection == "species":
        data.update({"@type": "Taxon", "taxonRank": fields.get("taxonRank") or "species"})
        if fields.get("vernacularName"):
            data["alternateName"] = fields["vernacularName"]
        data["subjectOf"] = [{"@type": _type(other.collection, None), "name": other.title,
                              "url": base_url + record_href(other.collection, other.id)}
                             for _, other in links]
    elif collection == "team":
        data.update({"@type": "Person", "jobTitle": fields.get("role")})
    else:
        data["@type"] = _type(collection, fields.get("kind"))
        if fields.get("summary"):
            data["description"] = fields["summary"]
        if taxa:
            data["about"] = taxa
    return {key: value for key, value in data.items() if value not in (None, [], "")}


def _type(collection: str, kind: object) -> str:
    if collection == "treatments":
        return "HowTo"
    if collection == "germination" or kind == "dataset":
        return "Dataset"
    return "CreativeWork"


def script_json(data: dict[str, Any]) -> Markup:
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    # Inside <script>, "</" and "<!--" must not appear: escape every "<" as JSON allows.
    return Markup(text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))
