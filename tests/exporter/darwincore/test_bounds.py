"""What a checklist from someone else may make this machine do: a tar's headers are bounded
before they are read (exporter/darwincore/unpack.py)."""

from __future__ import annotations

import io
import struct
import subprocess
import sys
import tarfile
import textwrap
import zlib
from pathlib import Path

import pytest
from builders import REPO, Node
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from exporter.darwincore import unpack
from exporter.darwincore.source import read_checklist
from exporter.shared.errors import ContentError

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
