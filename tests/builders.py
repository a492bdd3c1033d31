"""Builders for small content folders, and a multiplier for large synthetic ones."""

from __future__ import annotations

import asyncio
import csv
import errno
import io
import json
import os
import shutil
import threading
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiohttp import web

from exporter.contract.signing import ROTATIONS_FILE, Identity, signed_manifest
from exporter.contract.wire import encode
from exporter.project.config import Project, load_node_config
from sidecar import keys as keyring
from sidecar.app import NodeRunner, SidecarConfig, create_app

REPO = Path(__file__).resolve().parent.parent

NODE_TOML = """\
[node]
id = "00000000-0000-4000-8000-000000000001"
name = "Test Node"
description = "A node made by the tests."
publisher = "Tests"
contact = "tests@example.org"
licence = "CC0-1.0"
base_url = "https://node.example.org"
key_request = "Ask the tests."
"""


def toml_value(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def record_text(fields: dict[str, Any], body: str = "") -> str:
    lines = ["+++", *(f"{key} = {toml_value(value)}" for key, value in fields.items()), "+++"]
    return "\n".join(lines) + "\n" + body + ("\n" if body else "")


def species(name: str, **extra: Any) -> dict[str, Any]:
    fields = {"id": str(uuid.uuid4()), "scientificName": name, "family": "Apiaceae",
              "category": "invasive", "establishmentMeans": "introduced"}
    fields.update(extra)
    return fields


def team(name: str, **extra: Any) -> dict[str, Any]:
    fields = {"id": str(uuid.uuid4()), "name": name, "role": "Field lead",
              "affiliation": "Test Node"}
    fields.update(extra)
    return fields


class Node:
    """A project folder in tmp_path, with helpers to add, edit and remove records."""

    def __init__(self, root: Path, node_toml: str = NODE_TOML) -> None:
        self.root = root
        (root / "content").mkdir(parents=True, exist_ok=True)
        (root / "content" / "node.toml").write_text(node_toml)

    def path(self, collection: str, slug: str) -> Path:
        return self.root / "content" / collection / f"{slug}.md"

    def write(self, collection: str, slug: str, fields: dict[str, Any], body: str = "") -> Path:
        path = self.path(collection, slug)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(record_text(fields, body), "utf-8")
        return path

    def remove(self, collection: str, slug: str) -> None:
        self.path(collection, slug).unlink()


def same_key(root: Path, other: Path) -> None:
    """The signing key of the node at `root` in `other` too: the same node elsewhere (its
    export signs the manifest as the node's does)."""
    (other / ".fednode").mkdir(parents=True, exist_ok=True)
    shutil.copy(root / ".fednode" / "signing_key.pem", other / ".fednode" / "signing_key.pem")


def copy_sample(destination: Path) -> Path:
    """The bundled sample node (content and ledger) copied into a fresh folder."""
    shutil.copytree(REPO / "content", destination / "content")
    ledger = REPO / "ledger.jsonl"
    if ledger.exists():
        shutil.copy(ledger, destination / "ledger.jsonl")
    return destination


# Where this test run keeps its one export of the sample (`exported_sample`): a folder every
# test process of the run shares (tests/conftest.py sets it), or, unset, one of this process.
SAMPLE_HOME: list[Path] = []


def exported_sample(destination: Path) -> Path:
    """The bundled sample as it is once exported (content, ledger, both builds, the cache
    and the links to them), copied into `destination`: its next export is the quick one
    after an unchanged export, not a first one, which reads every PDF and encodes the
    library's passages. For tests about anything but a node's very first export.

    The sample is exported once a test run, by whichever test process needs it first; the
    others wait for it. The builds' files are hard links to that export's (an export never
    writes into a file: it writes a new one and renames it), the rest is copied: tests
    edit content, the ledger and the cache in place."""
    master = _sample_export()
    shutil.copytree(master, destination, symlinks=True, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("builds"))
    for build in (master / ".fednode" / "builds").iterdir():
        target = destination / ".fednode" / "builds" / build.name
        shutil.copytree(build, target, symlinks=True, copy_function=_link_built)
    return destination


def _link_built(source: str, target: str) -> None:
    """A build's published files are linked (copied to another file system); its own
    records of the export are copied, and so is the bundle's meta.json: a sidecar tells
    builds apart by its version, change time included (`contract.builds.identity`), and
    each link made to a shared file changes that file's change time, so another test
    copying the sample would make every sidecar over it load its bundle again."""
    if ("/site/" in source or "/bundle/" in source) and os.path.basename(source) != "meta.json":
        try:
            os.link(source, target)
            return
        except OSError as exc:
            if exc.errno != errno.EXDEV:
                raise
    shutil.copy2(source, target)


def _sample_export() -> Path:
    if not SAMPLE_HOME:
        import atexit
        import tempfile

        home = Path(tempfile.mkdtemp(prefix="fednode-sample-"))
        atexit.register(shutil.rmtree, home, True)
        SAMPLE_HOME.append(home)
    import fcntl

    home = SAMPLE_HOME[0]
    node, done = home / "sample" / "node", home / "sample" / "exported"
    with open(home / "sample.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # (let go of when the file is closed)
        if not done.exists():
            from exporter.pipeline.build import build

            shutil.rmtree(node.parent, ignore_errors=True)
            copy_sample(node)
            build(Project(node), now=datetime(2026, 3, 1, tzinfo=UTC))
            build(Project(node), now=datetime(2026, 3, 1, tzinfo=UTC))  # both builds
            done.touch()
    return node


def checklist_core(folder: Path, header: list[str], rows: list[list[str]]) -> Path:
    """A Darwin Core checklist as a folder holding one core, `taxon.csv`, of these rows,
    made afresh (a hypothesis example writes it again)."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    (folder / "taxon.csv").write_text(out.getvalue(), "utf-8")
    return folder


def multiply(content: Path, count: int) -> int:
    """Add `count` synthetic records cloned from the sample's public Markdown records, each
    with a fresh id and a distinct title, spread over the collections like the sample."""
    templates = [p for p in sorted(content.glob("*/*.md"))
                 if "access =" not in p.read_text() and p.parent.name != "library"]
    written = 0
    for n in range(count):
        template = templates[n % len(templates)]
        text = template.read_text("utf-8")
        head, rest = text.split("\n", 1)
        lines = rest.split("\n")
        for i, line in enumerate(lines):
            if line.startswith("id = "):
                lines[i] = f'id = "{uuid.UUID(int=(n + 1) << 64 | 0x4000 << 48 | 1)}"'
            elif line.startswith(("title = ", "name = ", "scientificName = ")):
                key, value = line.split(" = ", 1)
                lines[i] = f"{key} = {value[:-1]} {n}\""
        target = template.parent / f"synthetic-{n:07d}.md"
        target.write_text(head + "\n" + "\n".join(lines), "utf-8")
        written += 1
    return written


NODE_ID = "00000000-0000-4000-8000-000000000001"  # the id in NODE_TOML

# The test profile: "default", or "thorough" (HYPOTHESIS_PROFILE=thorough ./scripts/test),
# which runs the costliest generated tests (an export or a server an example, a kill an
# export) at several times the examples of the default, which CI and the developer's loop
# run. Property tests that cost little run their full count in both.
THOROUGH = os.environ.get("HYPOTHESIS_PROFILE") == "thorough"


def examples(default: int, thorough: int) -> int:
    """How many examples (or generated cases) a costly test runs under the profile."""
    return thorough if THOROUGH else default


def issue_key(root: Path, name: str, **grants: Any) -> tuple[str, keyring.KeyRecord]:
    """Issue a key of the test node, as `fednode keys create` does: every scope, every
    collection, no groups and a generous rate unless `grants` says otherwise."""
    project = Project(root)
    secret, _ = keyring.load_secret(project.private, create=True)
    assert secret is not None
    registry = keyring.Registry.load(project.private / "keys.json")
    options: dict[str, Any] = {"scopes": list(keyring.SCOPES), "collections": [], "groups": [],
                               "rate": 100_000, "expires": None}
    options.update(grants)
    node_id = load_node_config(project).id
    return keyring.issue(registry, secret, node_id, name=name, now=datetime.now(UTC), **options)


def app_for(root: Path, **options: Any) -> web.Application:
    """The real sidecar app over a project's bundle and private folder."""
    project = Project(root)
    return create_app(SidecarConfig(bundle=project.bundle, private=project.private, **options))


class ServerThread:
    """The real sidecar on 127.0.0.1 (as `fednode serve` runs it), on its own event loop in a
    thread, for tests whose client code runs its own event loop or speaks raw HTTP. (Another
    application, with routes of its own, is served with `runner=web.AppRunner`.)"""

    def __init__(self, app: web.Application, port: int = 0,
                 runner: type[web.AppRunner] = NodeRunner) -> None:
        self.app = app
        self.port = port
        self.url = ""
        self._loop = asyncio.new_event_loop()
        self._runner = runner(app)
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def __enter__(self) -> ServerThread:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(30)
        return self

    async def _start(self) -> None:
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"

    def settle(self) -> None:
        """Wait until the sidecar answers from the bundle as it is now: an export that changed
        nothing public is loaded aside, not by the request that meets it (`Store.current`)."""
        from sidecar.state import RUNNING
        asyncio.run_coroutine_threadsafe(self.app[RUNNING].store.settled(),
                                         self._loop).result(60)

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(30)
        self._loop.close()


def http_get(url: str, headers: dict[str, str] | None = None
             ) -> tuple[int, dict[str, str], bytes]:
    """A plain blocking GET, for tests that compare whole answers."""
    import urllib.error
    import urllib.request

    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def http_post(url: str, data: bytes, headers: dict[str, str] | None = None
              ) -> tuple[int, dict[str, str], bytes]:
    """A plain blocking POST."""
    import urllib.error
    import urllib.request

    request = urllib.request.Request(url, data=data, method="POST", headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


class Records:
    """A node's records as a test edits them at random: each operation names a record by a
    number taken modulo how many there are, as hypothesis draws them."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self.held: dict[str, tuple[str, dict[str, Any]]] = {}  # slug -> (collection, fields)

    def write(self, slug: str) -> None:
        collection, fields = self.held[slug]
        self.node.write(collection, slug, fields, f"Notes on {slug}.")

    def create(self, slug: str, collection: str, access: str = "public") -> None:
        fields = (species if collection == "species" else team)(f"Record {slug}")
        if access != "public":
            fields["access"] = access
        self.held[slug] = (collection, fields)
        self.write(slug)

    def pick(self, number: int) -> str | None:
        slugs = sorted(self.held)
        return slugs[number % len(slugs)] if slugs else None

    def delete(self, number: int) -> None:
        slug = self.pick(number)
        if slug is not None:
            self.node.remove(self.held.pop(slug)[0], slug)

    def edit(self, number: int) -> None:
        """Add a tag: the content changes, the access does not."""
        slug = self.pick(number)
        if slug is not None:
            fields = self.held[slug][1]
            tags = fields.get("tags", [])
            fields["tags"] = [*tags, f"t{len(tags)}"]
            self.write(slug)

    def set_access(self, number: int, access: str | None) -> None:
        """Move a record into a group, or (None) make it public."""
        slug = self.pick(number)
        if slug is not None:
            fields = self.held[slug][1]
            if access is None:
                fields.pop("access", None)
            else:
                fields["access"] = access
            self.write(slug)


def engine_file(relative: str) -> bool:
    """A file tantivy wrote in the bundle's search index. Its names are random per build
    (segment ids), so two builds of equal content differ there: tests compare what such
    builds answer (`search_ids`) instead. `state.json` and `vectors.npy` are fednode's."""
    parts = relative.split("/")
    return parts[0] == "search" and len(parts) == 3 and \
        parts[2] not in ("state.json", "vectors.npy")


def search_ids(bundle: Path, text: str, groups: tuple[str, ...] = ("public",)) -> list[str]:
    """What a keyword search of `bundle` finds for a caller of `groups`, as sorted ids."""
    from exporter.contract.wire import COLLECTIONS
    from sidecar import search
    from sidecar.store import Snapshot
    found = search.run(Snapshot(bundle), list(groups), list(COLLECTIONS), text, "keyword", 50)
    return sorted(item["id"] for item in found["items"])


def make_pdf(path: Path, pages: list[str], labels: list[str] | None = None, *,
             width: int = 95) -> None:
    """A PDF with one page per text (reportlab, a Unicode TrueType font), its printed labels
    set as /PageLabels (pypdf) when given, e.g. ["i", "ii", "1", "2"]. Paragraphs (split at
    blank lines) are wrapped at `width` characters; one that starts with "# " is a heading,
    set larger (14 points against the body's 10)."""
    import io
    import textwrap as wrap

    import reportlab
    from pypdf import PdfReader, PdfWriter
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.ttfonts import TTFont
    from reportlab.pdfgen import canvas

    font = Path(reportlab.__file__).parent / "fonts" / "Vera.ttf"
    pdfmetrics.registerFont(TTFont("Vera", str(font)))
    sink = io.BytesIO()
    pdf = canvas.Canvas(sink, invariant=1)
    for text in pages:
        pdf.setFont("Vera", 10)
        y = 800
        for paragraph in text.split("\n\n"):
            heading = paragraph.startswith("# ")
            pdf.setFont("Vera", 14 if heading else 10)
            for line in wrap.wrap(paragraph.removeprefix("# "), width):
                pdf.drawString(50, y, line)
                y -= 18 if heading else 14
            y -= 8
        pdf.showPage()
    pdf.save()
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(sink.getvalue())))
    if labels:
        roman = sum(1 for label in labels if not label.isdigit())
        if roman:
            writer.set_page_label(0, roman - 1, style="/r")
        if roman < len(labels):
            writer.set_page_label(roman, len(labels) - 1, style="/D", start=1)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as handle:
        writer.write(handle)


def _missing(what: str) -> None:
    """A tool a test drives is not installed: skipped, saying why, or failed under CI, where
    `scripts/test-tools` was to install it (a suite that skips there proves less than it
    says)."""
    import pytest
    message = f"{what}; ./scripts/test-tools installs it (./scripts/test runs that first)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def npm_tool(package: str, version: str, binary: str) -> Path:
    """A command-line tool from the npm registry, as `scripts/test-tools` installs it into
    .cache/."""
    found = REPO / ".cache" / f"{package}-{version}" / "node_modules" / ".bin" / binary
    if not found.exists():
        _missing(f"{package}@{version} from npm is not in .cache/")
    return found


def debian_tool(package: str, binary: str) -> Path:
    """A program from Debian's packages, as `scripts/test-tools` installs it."""
    for folder in ("", "/usr/sbin/", "/usr/bin/"):
        found = shutil.which(folder + binary) if folder else shutil.which(binary)
        if found:
            return Path(found)
    _missing(f"{binary} is not installed (Debian's {package})")
    raise AssertionError  # (not reached)


def raw_pdf(path: Path, contents: list[bytes], *, labels: bytes = b"",
            to_unicode: bytes = b"") -> None:
    """A PDF written object by object, for what a drawing library will not make: one page a
    content stream (drawing Helvetica as /F1), a /PageLabels tree given whole (`labels`, the
    dictionary's bytes), and a ToUnicode map for the font (`to_unicode`, the CMap's bytes)."""
    import zlib

    def stream(data: bytes) -> bytes:
        packed = zlib.compress(data)
        return b"<< /Length %d /Filter /FlateDecode >>\nstream\n%b\nendstream" % (
            len(packed), packed)

    font = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica"
    objects = {1: b"<< /Type /Catalog /Pages 2 0 R%b >>" % (
                   b" /PageLabels " + labels if labels else b""),
               2: b"<< /Type /Pages /Kids [%b] /Count %d >>" % (
                   b" ".join(b"%d 0 R" % (10 + 2 * n) for n in range(len(contents))),
                   len(contents)),
               3: font + (b" /ToUnicode 4 0 R >>" if to_unicode else b" >>")}
    if to_unicode:
        objects[4] = stream(to_unicode)
    for n, content in enumerate(contents):
        objects[10 + 2 * n] = (b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
                               b"/Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>"
                               % (11 + 2 * n))
        objects[11 + 2 * n] = stream(content)
    out = bytearray(b"%PDF-1.7\n")
    offsets = {}
    for number in sorted(objects):
        offsets[number] = len(out)
        out += b"%d 0 obj\n%b\nendobj\n" % (number, objects[number])
    size = max(objects) + 1
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % size
    for number in range(1, size):
        out += (b"%010d 00000 n \n" % offsets[number]) if number in offsets \
            else b"0000000000 65535 f \n"
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (size, xref)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(bytes(out))


def resigned(manifest: dict[str, Any], root: Path) -> bytes:
    """A manifest a test edited (as a node whose content says so would publish it), signed
    again with the key of the node at `root`, as that node's export signs its own."""
    identity = Identity.load(Project(root).private, root / ROTATIONS_FILE)
    node = {name: value for name, value in manifest["node"].items()
            if name not in ("public_key", "key_fingerprint", "key_rotations")}
    unsigned = {**{name: value for name, value in manifest.items() if name != "signature"},
                "node": node}
    return encode(signed_manifest(unsigned, identity.key, identity.rotations))
