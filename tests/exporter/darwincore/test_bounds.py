"""What a checklist from someone else may make this machine do: a tar's headers are bounded
before they are read, and a folder of CSV files holds no links and is bounded as an archive
is (exporter/darwincore/unpack.py, source.py)."""

from __future__ import annotations

import io
import struct
import subprocess
import sys
import tarfile
import tempfile
import textwrap
import zlib
from pathlib import Path

import pytest
from builders import REPO, Node
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cli.main import main
from exporter.darwincore import source, unpack
from exporter.darwincore.source import read_checklist
from exporter.shared.errors import ContentError
from exporter.site.csv_lines import csv_lines

TAXON = b"taxonID,scientificName\nt1,Impatiens glandulifera Royle\n"
META = (b'<archive xmlns="http://rs.tdwg.org/dwc/text/"><core encoding="UTF-8" '
        b'fieldsTerminatedBy="," linesTerminatedBy="\\n" fieldsEnclosedBy="" '
        b'ignoreHeaderLines="1" rowType="http://rs.tdwg.org/dwc/terms/Taxon"><files>'
        b'<location>taxon.txt</location></files><id index="0"/>'
        b'<field index="0" term="http://rs.tdwg.org/dwc/terms/taxonID"/>'
        b'<field index="1" term="http://rs.tdwg.org/dwc/terms/scientificName"/></core>'
        b'</archive>')
_MIB = bytes(1 << 20)


def header(name: str, kind: bytes, size: int) -> bytes:
    """One tar header block: a member `name` of this type declaring `size` bytes."""
    info = tarfile.TarInfo(name)
    info.type, info.size = kind, size
    return info.tobuf(tarfile.GNU_FORMAT)


def member(name: str, data: bytes) -> bytes:
    """A file member: its header and its data, padded to whole blocks."""
    return header(name, tarfile.REGTYPE, len(data)) + data + bytes(-len(data) % 512)


def tgz(path: Path, parts: list[bytes | int]) -> Path:
    """A gzipped tar of these parts, each bytes or a count of zero bytes. A MiB of zeros is
    compressed once and its deflate blocks repeated (a full flush makes each copy stand
    alone), so that a header of hundreds of MiB takes no time to make."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    zeros = compressor.compress(_MIB) + compressor.flush(zlib.Z_FULL_FLUSH)
    crc = length = 0
    with open(path, "wb") as out:
        out.write(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff")  # gzip: deflate, no name
        for part in parts:
            if isinstance(part, int):
                whole, rest = divmod(part, len(_MIB))
                for _ in range(whole):
                    out.write(zeros)
                    crc = zlib.crc32(_MIB, crc)
                length += whole * len(_MIB)
                part = bytes(rest)
            out.write(compressor.compress(part) + compressor.flush(zlib.Z_FULL_FLUSH))
            crc = zlib.crc32(part, crc)
            length += len(part)
        out.write(compressor.flush() + struct.pack("<2L", crc, length & 0xFFFFFFFF))
    return path


def long_header(kind: bytes, size: int) -> list[bytes | int]:
    """A long-name (or long-link, or pax) header of `size` zero bytes, then a checklist."""
    name = "././@LongLink" if kind in (b"L", b"K") else "PaxHeaders/taxon.txt"
    return [header(name, kind, size), size + -size % 512, member("meta.xml", META),
            member("taxon.txt", TAXON), bytes(1024)]


# RLIMIT_AS set once fednode is loaded: what the import may take beyond it
LIMITED = textwrap.dedent("""
    import resource, sys
    sys.path.insert(0, {repo!r})
    from cli.main import main
    import exporter.darwincore.importer, exporter.darwincore.source
    with open("/proc/self/statm") as statm:
        now = int(statm.read().split()[0]) * resource.getpagesize()
    resource.setrlimit(resource.RLIMIT_AS, (now + {headroom}, resource.RLIM_INFINITY))
    main(["import", "dwc", {source!r}, "--project", {root!r}, "--dry-run"])
""")


@pytest.mark.slow
def test_a_tiny_tgz_declaring_a_huge_long_name_is_refused_in_little_memory(
        node: Node, tmp_path: Path) -> None:
    """A GNU long name of 600 MiB compresses to a few hundred kB: tarfile read it whole into
    memory before any member was counted (a .tgz of 102 kB took 853 MB). It is refused
    before it is read, naming the archive and the header, by a process that may take no
    more than 256 MiB beyond what fednode takes loaded."""
    checklist = tgz(tmp_path / "checklist.tgz", long_header(b"L", 600 << 20))
    assert checklist.stat().st_size < 1 << 20
    script = LIMITED.format(repo=str(REPO), headroom=256 << 20, source=str(checklist),
                            root=str(node.root))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 1, done.stderr
    assert done.stderr.splitlines()[0] == (
        f"{checklist}: '././@LongLink' at byte 0 is a GNU long-name header of 629,145,600 "
        f"bytes: a tar header holds at most 64 KiB; a checklist's archive needs no more")
    assert "Traceback" not in done.stderr and "MemoryError" not in done.stderr


KINDS = {b"L": "GNU long-name header", b"K": "GNU long-link header", b"x": "pax header",
         b"X": "pax header", b"g": "global pax header"}


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(sorted(KINDS)),
       size=st.integers(unpack.HEADER_MAX + 1, 4 * unpack.HEADER_MAX) | st.sampled_from(
           [8 << 30, 8 ** 11 - 1, 1 << 40]),  # (past 8 GiB, GNU writes sizes in base 256)
       after=st.booleans())
def test_any_header_past_the_bound_is_refused_before_it_is_read(
        tmp_path: Path, kind: bytes, size: int, after: bool) -> None:
    """Long-name, long-link and pax headers of any size past HEADER_MAX, first or after a
    member, are refused, naming the archive, the header and its place. (A header declaring
    more than the archive holds is refused too: it was read as far as the archive went.)"""
    parts = long_header(kind, size) if size < 1 << 20 else [
        header("././@LongLink" if kind in (b"L", b"K") else "PaxHeaders/x", kind, size),
        bytes(4096)]
    first = member("meta.xml", META) if after else b""
    checklist = tgz(tmp_path / f"{kind.decode()}-{size}.tgz", [first, *parts])
    with pytest.raises(ContentError) as caught:
        read_checklist(checklist)
    [problem] = caught.value.problems
    assert problem.path == str(checklist) and problem.line == 0
    assert f" at byte {len(first):,} is a {KINDS[kind]} of {size:,} bytes: a tar header " \
           f"holds at most 64 KiB" in problem.message, problem.message


@pytest.mark.parametrize("kind", [b"L", b"x", b"g"])
def test_headers_within_the_bound_are_read_as_tar_reads_them(tmp_path: Path,
                                                             kind: bytes) -> None:
    """A long name or pax header of a real size (a path of 210 characters, a global pax
    record) is read as tarfile reads it: the checklist imports."""
    folder = "checklist-" + "x" * 200  # past the 100 characters a header holds
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT if kind == b"L"
                      else tarfile.PAX_FORMAT,
                      pax_headers={"comment": "a global header"} if kind == b"g" else None
                      ) as tar:
        for name, data in (("meta.xml", META), ("taxon.txt", TAXON)):
            info = tarfile.TarInfo(f"{folder}/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    assert buffer.getvalue()[156:157] == kind
    [taxon] = read_checklist(tgz(tmp_path / "checklist.tgz", [buffer.getvalue()])).taxa
    assert taxon.taxon_id == "t1"


@pytest.mark.parametrize("sparse", ["GNU", "pax 1.0"])
def test_a_sparse_member_is_refused_before_its_map_is_read(tmp_path: Path,
                                                           sparse: str) -> None:
    """A sparse file's map is read whole, a block at a time, as far as it says it goes (a
    stream of them took gigabytes): an archive holds files and folders only."""
    if sparse == "GNU":
        block = bytearray(header("taxon.txt", tarfile.GNUTYPE_SPARSE, 512))
        block[482] = 1  # extended: a block of the map follows, and another...
        block[148:156] = b" " * 8
        block[148:156] = b"%06o\0 " % sum(block)  # its checksum again
        parts: list[bytes | int] = [bytes(block), b"\x01" * 512 * 64]
    else:
        pax = b"22 GNU.sparse.major=1\n22 GNU.sparse.minor=0\n"
        parts = [header("PaxHeaders/taxon.txt", tarfile.XHDTYPE, len(pax)),
                 pax + bytes(-len(pax) % 512), header("taxon.txt", tarfile.REGTYPE, 1 << 20),
                 b"999999999\n" + b"1\n" * 4000]
    with pytest.raises(ContentError) as caught:
        read_checklist(tgz(tmp_path / "sparse.tgz", [*parts, bytes(1024)]))
    [problem] = caught.value.problems
    assert problem.message == "'taxon.txt' is a sparse file: an archive holds files and " \
                              "folders only", problem.message


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


# ---- a folder of CSV files -----------------------------------------------------------------

SECRET = "secret-column,hunter2\nroot,x:0:0:root:/root:/bin/bash\n"
VERNACULAR = "taxonID,vernacularName\nt1,Himalayan balsam\n"


def csv_folder(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "taxon.csv").write_bytes(TAXON)
    (folder / "vernacularname.csv").write_text(VERNACULAR)
    return folder


def test_a_link_out_of_a_csv_folder_is_refused_and_never_read(node: Node,
                                                              tmp_path: Path) -> None:
    """`/etc/passwd` linked as vernacularname.csv had its lines imported, and shown in the
    import's notes (its first line, as columns left out): a link refuses the folder, and
    nothing of the file it links to is shown."""
    outside = tmp_path / "passwd"
    outside.write_text(SECRET)
    folder = csv_folder(tmp_path / "checklist")
    (folder / "vernacularname.csv").unlink()
    (folder / "vernacularname.csv").symlink_to(outside)
    code, output = run("import", "dwc", str(folder), "--project", str(node.root))
    assert code == 1, output
    assert output.splitlines()[0] == (
        f"{folder}/vernacularname.csv: a link, not a file: a checklist folder holds its own "
        f"files and folders only, as an archive does; copy the file into the folder")
    assert "secret-column" not in output and "hunter2" not in output and "bash" not in output
    assert not list((node.root / "content").rglob("*.md"))


PLACES = ["taxon.csv", "vernacularname.csv", "distribution.tsv", "references.csv",
          "notes.txt", "README.md", "data"]  # read, left out, unknown, never read, a folder
TARGETS = ["a file outside", "a folder outside", "a file inside", "nothing", "the folder"]


@settings(max_examples=40, deadline=None)
@given(links=st.dictionaries(st.sampled_from(PLACES), st.sampled_from(TARGETS), min_size=1,
                             max_size=3))
def test_any_link_in_a_csv_folder_refuses_it(links: dict[str, str]) -> None:
    """A link anywhere in the folder, whatever it names and whatever it links to (outside,
    inside, nothing, the folder itself), refuses the folder, naming the first link; nothing
    of a file it links to is read."""
    with tempfile.TemporaryDirectory() as scratch:
        outside = Path(scratch) / "outside"
        outside.mkdir()
        (outside / "passwd").write_text(SECRET)
        folder = csv_folder(Path(scratch) / "checklist")
        for place, target in links.items():
            path = folder / place
            if path.exists():
                path.unlink()
            path.symlink_to({"a file outside": outside / "passwd", "a folder outside": outside,
                             "a file inside": folder / "taxon.csv",
                             "nothing": outside / "gone.csv", "the folder": folder}[target])
        with pytest.raises(ContentError) as caught:
            read_checklist(folder)
    [problem] = caught.value.problems
    assert problem.path == str(folder / min(links)), problem
    assert problem.message.startswith("a link, not a file: ")
    assert not getattr(caught.value, "notes", [])
    assert "secret-column" not in str(problem) and "hunter2" not in str(problem)


def test_a_csv_folder_is_bounded_as_an_archive_is(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Its tables hold at most UNPACKED_MAX bytes in all, counted before any is read (one
    checklist of 200 MB took 2 GB); files it does not read are not counted."""
    folder = csv_folder(tmp_path / "checklist")
    size = sum(path.stat().st_size for path in folder.iterdir())
    (folder / "references.csv").write_text("x" * 10_000)  # left out: never read
    (folder / "README.md").write_text("x" * 10_000)
    monkeypatch.setattr(unpack, "UNPACKED_MAX", size)
    assert [taxon.taxon_id for taxon in read_checklist(folder).taxa] == ["t1"]
    monkeypatch.setattr(unpack, "UNPACKED_MAX", size - 1)
    with pytest.raises(ContentError) as caught:
        read_checklist(folder)
    assert [str(problem) for problem in caught.value.problems] == [
        f"{folder}: its tables hold more than 0 MiB: too large for a checklist"]


@pytest.mark.parametrize("lines", [1, 2_000])
def test_a_row_longer_than_the_bound_is_an_error_of_its_line(tmp_path: Path,
                                                             lines: int) -> None:
    """A cell is read whole into memory (a cell of 200 MB took 2 GB): a row of more than
    ROW_MAX characters, on one line or many (a quote left open), is an error of the line it
    starts on, and ends its table."""
    folder = csv_folder(tmp_path / "checklist")
    cell = "\n".join(["a" * (source.ROW_MAX // lines)] * lines)
    with open(folder / "vernacularname.csv", "a") as table:
        table.write(f't1,"{cell}"\nt1,after it\n')
    with pytest.raises(ContentError) as caught:
        read_checklist(folder)
    assert [str(problem) for problem in caught.value.problems] == [
        f"{folder}/vernacularname.csv:3: a row of more than {source.ROW_MAX:,} characters "
        f"starts here (a quote left open?): a checklist's row holds at most 1 MiB"]


def _read_bounded(texts: list[str], bound: int) -> tuple[list[object], list[object]]:
    """The vernacular names read from a folder of these rows, and the problems found (those
    that refuse the checklist, or leave a row out), with rows of at most `bound`
    characters."""
    with tempfile.TemporaryDirectory() as scratch, pytest.MonkeyPatch.context() as patch:
        patch.setattr(source, "ROW_MAX", bound)
        folder = Path(scratch)
        (folder / "taxon.csv").write_bytes(TAXON)
        (folder / "vernacularname.csv").write_text(
            "taxonID,vernacularName\n" + "".join(texts), newline="")
        try:
            checklist = read_checklist(folder)
        except ContentError as refused:
            return [], [(Path(p.path).name, p.line, p.message) for p in refused.problems]
        [taxon] = checklist.taxa
        return ([(row.line, row.terms) for row in taxon.extensions.get("vernacularname", [])],
                [(Path(p.path).name, p.line, p.message)
                 for left in checklist.left_out for p in left.problems])


@settings(max_examples=100, deadline=None)
@given(cells=st.lists(st.text(st.sampled_from('ab ",\n\r'), max_size=40), min_size=1,
                      max_size=8),
       bound=st.integers(40, 90))
def test_each_row_is_bounded_alone(cells: list[str], bound: int) -> None:
    """The bound is a row's: a table whose every row (its text, line ends and quotes
    included) is within it reads as it would with no bound, however long the table; a row
    past it is refused at the line it starts on."""
    texts = [csv_lines([["t1", cell]], "\n") for cell in cells]
    bounded = _read_bounded(texts, bound)
    over = [n for n, text in enumerate(texts) if len(text) > bound]
    if not over:
        assert bounded == _read_bounded(texts, 1 << 40)
        return
    start = 2 + sum(len(io.StringIO(text, newline="").readlines()) for text in texts[:over[0]])
    assert ("vernacularname.csv", start, f"a row of more than {bound:,} characters starts "
            f"here (a quote left open?): a checklist's row holds at most 0 MiB") in bounded[1]
