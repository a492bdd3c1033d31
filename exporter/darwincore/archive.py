"""The Darwin Core Archive of a node's public species: meta.xml, eml.xml and one CSV file a
row type (the Taxon core; Distribution, Description, VernacularName and SpeciesProfile
extensions), zipped with fixed timestamps so that unchanged content gives the same bytes.

The core id is the record's UUID; `taxonID` is the source's taxonID when the record was
imported (else the record's URL), and `scientificName` the verbatim name (the name and its
authorship when the record has no verbatim name), as Darwin Core recommends.

Each file's rows are compressed a part at a time (`rows`: a part of the download, some 64
records, kept in the export cache with its text): a part's deflate stream is flushed to a
byte boundary and not closed, so the parts' streams, one after the other and closed by an
empty last block, are the file's. An edit compresses its record's part again, not the
archive's 30 MB (at 100,000 records). The zip is written here (`_zip`): the `zipfile`
module compresses whatever it is given."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from exporter.contract.bundle import DOWNLOADS, DWCA_FILE
from exporter.darwincore.terms import CORE_TERMS, DC, EXTENSIONS, FLAGS, TAXON_ROW, Extension
from exporter.project.config import NodeConfig
from exporter.shared.errors import ExportError
from exporter.site.csv_lines import csv_lines

ARCHIVE_PATH = f"{DOWNLOADS}/{DWCA_FILE}"
# The archive's form, in its fingerprint: 2 since its files are compressed by parts.
ARCHIVE_FORM = "2"
CORE_FILE = "taxon.csv"
CORE_COLUMNS: dict[str, str] = {**CORE_TERMS, "modified": DC}


def rows(node: NodeConfig, records: Iterable[dict[str, Any]]) -> tuple[bytes, ...]:
    """The archive's rows of these (public, served) species records: the latest
    `updated_at` among them, then for the core and each extension (in `EXTENSIONS` order)
    its rows, UTF-8 encoded, then each of these compressed (`_deflated`). `archive` puts the
    rows of many such parts together."""
    core: list[list[str]] = []
    extension_rows: dict[str, list[list[str]]] = {kind: [] for kind in EXTENSIONS}
    newest = ""
    for record in records:
        newest = max(newest, str(record.get("updated_at", "")))
        core.append([record["id"], *(_core_value(record, node, term)
                                     for term in CORE_COLUMNS)])
        for kind, extension in EXTENSIONS.items():
            for entry in _entries(record, extension, node):
                extension_rows[kind].append([record["id"], *(entry.get(term, "")
                                                             for term in extension.terms)])
    texts = (_lines(core).encode(), *(_lines(extension_rows[kind]).encode()
                                      for kind in EXTENSIONS))
    return (newest.encode(), *texts, *map(_deflated, texts))


def archive(node: NodeConfig, parts: list[tuple[bytes, ...]]) -> bytes:
    """The archive of the species whose rows `parts` hold (each made by `rows`), in the
    order given."""
    newest = max((part[0] for part in parts), default=b"").decode()
    files = 1 + len(EXTENSIONS)  # a part: newest, each file's text, each file compressed
    members: list[tuple[str, list[bytes], list[bytes]]] = [
        ("meta.xml", [], []), ("eml.xml", [], [])]
    used = []
    for index, (name, terms) in enumerate(
            [(CORE_FILE, ["id", *CORE_COLUMNS]),
             *((f"{e.kind}.csv", ["coreid", *e.terms]) for e in EXTENSIONS.values())],
            start=1):
        texts = [part[index] for part in parts if part[index]]
        if index > 1 and not texts:
            continue  # an extension no species has rows of: left out
        if index > 1:
            used.append(list(EXTENSIONS.values())[index - 2])
        header = _lines([terms]).encode()
        members.append((name, [header, *texts], [
            _deflated(header), *(part[index + files] for part in parts if part[index])]))
    members[0] = ("meta.xml", [meta := _meta(used).encode()], [_deflated(meta)])
    members[1] = ("eml.xml", [eml := _eml(node, newest[:10]).encode()], [_deflated(eml)])
    return _zip(members)


def _deflated(text: bytes) -> bytes:
    """Raw deflate of `text`, flushed to a byte boundary and left open: followed by
    others and `_LAST_BLOCK`, it is a part of one stream."""
    compressor = zlib.compressobj(6, zlib.DEFLATED, -15)
    return compressor.compress(text) + compressor.flush(zlib.Z_SYNC_FLUSH)


_LAST_BLOCK = b"\x03\x00"  # an empty block of fixed codes, marked last: ends a stream
_ZIP_LIMIT = 0xFFFFFFFF  # sizes and offsets from here on need ZIP64 extensions: refused
_DOS_DATE = (1 << 5) | 1  # 1980-01-01, the zip format's first day, at 00:00: fixed, so that
# unchanged content gives the same bytes
_VERSION = 20  # the zip version deflate needs
_UNIX = 3  # made on: unix, whatever the machine (so that the mode below is read)
_MODE = 0o644 << 16


def _zip(members: list[tuple[str, list[bytes], list[bytes]]]) -> bytes:
    """A zip of deflated files, each given as its texts and their `_deflated` pieces."""
    out: list[bytes] = []
    central: list[bytes] = []
    offset = 0
    for name, texts, pieces in members:
        crc = 0
        for text in texts:
            crc = zlib.crc32(text, crc)
        size = sum(map(len, texts))
        packed = sum(map(len, pieces)) + len(_LAST_BLOCK)
        encoded = name.encode("ascii")
        if max(size, offset + packed) >= _ZIP_LIMIT:
            raise ExportError(f"the Darwin Core Archive's {name} would hold {size:,} bytes, "
                              f"more than a zip without ZIP64 extensions can")
        local = struct.pack("<4s5H3L2H", b"PK\x03\x04", _VERSION, 0, zlib.DEFLATED, 0,
                            _DOS_DATE, crc, packed, size, len(encoded), 0) + encoded
        central.append(struct.pack("<4s2B5H3L5H2L", b"PK\x01\x02", _VERSION, _UNIX,
                                   _VERSION, 0, zlib.DEFLATED, 0, _DOS_DATE, crc, packed,
                                   size, len(encoded), 0, 0, 0, 0, _MODE, offset) + encoded)
        out += [local, *pieces, _LAST_BLOCK]
        offset += len(local) + packed
    directory = b"".join(central)
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, len(members), len(members),
                      len(directory), offset, 0)
    return b"".join([*out, directory, end])


def _core_value(record: dict[str, Any], node: NodeConfig, term: str) -> str:
    if term == "taxonID":
        return str(record.get("taxonID") or record.get("url", ""))
    if term == "scientificName":
        verbatim = record.get("verbatimScientificName")
        if verbatim:
            return str(verbatim)
        author = record.get("scientificNameAuthorship")
        return f"{record['scientificName']} {author}" if author else str(record["scientificName"])
    if term == "modified":
        return str(record.get("updated_at", ""))
    return _text(record.get(term, ""))


def _entries(record: dict[str, Any], extension: Extension,
             node: NodeConfig) -> list[dict[str, str]]:
    """The extension rows of one record, each term's text: one row a list entry (a row a
    pathway), or the record's own fields where it has no list (a hand-written record)."""
    if extension.field is None:
        flags = {flag: _text(record[flag]) for flag in FLAGS if flag in record}
        return [flags] if flags else []
    rows: list[dict[str, str]] = []
    for entry in record.get(extension.field, []):
        plain = {term: _text(value) for term, value in entry.items()
                 if term not in extension.lists}
        lists = [term for term in extension.lists if entry.get(term)]
        if not lists:
            rows.append(plain)
        for term in lists:
            rows.extend({**plain, term: value} for value in entry[term])
    if extension.kind == "distribution" and not rows:
        own: dict[str, str] = {term: _text(record[term]) for term in (
            "establishmentMeans", "degreeOfEstablishment", "pathway") if term in record}
        if own:
            rows.append(own)
    if extension.kind == "description":
        if record.get("nativeRange"):
            rows.append({"description": record["nativeRange"], "type": "native range",
                         "language": node.language})
        if record.get("habitat"):
            rows.append({"description": record["habitat"], "type": "habitat",
                         "language": node.language})
    if extension.kind == "vernacularname" and record.get("vernacularName"):
        names = {row.get("vernacularName") for row in rows}
        if record["vernacularName"] not in names:
            rows.append({"vernacularName": record["vernacularName"],
                         "language": node.language})
    return rows


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return " | ".join(str(item) for item in value)
    return str(value)


def _lines(rows: list[list[str]]) -> str:
    return csv_lines(rows, "\n")


def _fields(terms: dict[str, str]) -> str:
    return "\n".join(f'    <field index="{index}" term="{namespace}{term}"/>'
                     for index, (term, namespace) in enumerate(terms.items(), start=1))


def _meta(extensions: list[Extension]) -> str:
    common = ('encoding="UTF-8" fieldsTerminatedBy="," linesTerminatedBy="\\n" '
              'fieldsEnclosedBy="&quot;" ignoreHeaderLines="1"')
    parts = ['<?xml version="1.0" encoding="UTF-8"?>',
             '<archive xmlns="http://rs.tdwg.org/dwc/text/" metadata="eml.xml">',
             f'  <core rowType="{TAXON_ROW}" {common}>',
             f"    <files><location>{CORE_FILE}</location></files>",
             '    <id index="0"/>', _fields(CORE_COLUMNS), "  </core>"]
    for extension in extensions:
        parts += [f'  <extension rowType="{extension.row_type}" {common}>',
                  f"    <files><location>{extension.kind}.csv</location></files>",
                  '    <coreid index="0"/>', _fields(extension.terms), "  </extension>"]
    parts.append("</archive>")
    return "\n".join(parts) + "\n"


_LICENCES = {
    "CC0-1.0": "http://creativecommons.org/publicdomain/zero/1.0/legalcode",
    "CC-BY-4.0": "http://creativecommons.org/licenses/by/4.0/legalcode",
    "CC-BY-NC-4.0": "http://creativecommons.org/licenses/by-nc/4.0/legalcode",
}


def _eml(node: NodeConfig, published: str) -> str:
    """EML 2.1.1 as GBIF's IPT writes it, from content/node.toml."""
    url = f"{node.base_url}/{ARCHIVE_PATH}"
    licence = _LICENCES.get(node.licence)
    rights = (f'<para>This work is licensed under <ulink url={quoteattr(licence)}>'
              f"<citetitle>{escape(node.licence)}</citetitle></ulink>.</para>" if licence
              else f"<para>{escape(node.licence)}</para>")
    party = (f"<organizationName>{escape(node.publisher)}</organizationName>"
             f"<electronicMailAddress>{escape(node.contact)}</electronicMailAddress>")
    return "\n".join([
        '<?xml version="1.0" encoding="UTF-8"?>',
        '<eml:eml xmlns:eml="eml://ecoinformatics.org/eml-2.1.1" '
        'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
        'xsi:schemaLocation="eml://ecoinformatics.org/eml-2.1.1 '
        'http://rs.gbif.org/schema/eml-gbif-profile/1.1/eml.xsd" '
        f'packageId={quoteattr(node.id)} system="fednode" scope="system" '
        f'xml:lang={quoteattr(node.language)}>',
        "<dataset>",
        f"  <alternateIdentifier>{escape(url)}</alternateIdentifier>",
        f"  <title xml:lang={quoteattr(node.language)}>{escape(node.name)}</title>",
        f"  <creator>{party}</creator>",
        f"  <metadataProvider>{party}</metadataProvider>",
        *([f"  <pubDate>{escape(published)}</pubDate>"] if published else []),
        f"  <language>{escape(node.language)}</language>",
        f"  <abstract><para>{escape(node.description)}</para></abstract>",
        f"  <intellectualRights>{rights}</intellectualRights>",
        f"  <distribution scope=\"document\"><online><url function=\"information\">"
        f"{escape(node.base_url)}/</url></online></distribution>",
        f"  <contact>{party}</contact>",
        f"  <publisher><organizationName>{escape(node.publisher)}</organizationName>"
        f"</publisher>",
        "</dataset>",
        "<additionalMetadata><metadata><gbif>"
        # an empty dateStamp is not a date: with no species, none is said
        f"{f'<dateStamp>{escape(published)}</dateStamp>' if published else ''}"
        f"<hierarchyLevel>dataset</hierarchyLevel>"
        "</gbif></metadata></additionalMetadata>",
        "</eml:eml>",
    ]) + "\n"

