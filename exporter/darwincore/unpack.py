"""A checklist's archive, unpacked and bounded: a checklist comes from a third party, and
what it may make this machine do is limited.

An archive is unpacked here, not by the reader (which follows any member's path and links),
into a folder the caller removes afterwards; a member that would land outside it (an
absolute path, `..`), a link or a device refuse the whole archive. What it unpacks to, and
what the tables meta.xml names hold, is limited (the Belgian checklist of 2,617 taxa is
5 MB), and every table meta.xml names is a file of the checklist's own folder, checked
byte for byte in the encoding it declares. A tar's headers are bounded before they are
read (`_BoundedInfo`): tarfile reads a long-name or pax header whole into memory, and a
.tgz of 600 kB holds one of 600 MiB."""

from __future__ import annotations

import tarfile
import zipfile
from pathlib import Path, PurePosixPath
from xml.etree import ElementTree

from exporter.darwincore.encoding import codec_for, strictly_decoded
from exporter.shared.errors import ContentError, Problem

UNPACKED_MAX = 512 * 1024 * 1024  # bytes an archive may unpack to, or its tables hold
MEMBERS_MAX = 10_000  # files in an archive
HEADER_MAX = 64 * 1024  # bytes of a tar member's long-name, long-link or pax header
_HEADERS = {tarfile.GNUTYPE_LONGNAME: "GNU long-name header",
            tarfile.GNUTYPE_LONGLINK: "GNU long-link header", tarfile.XHDTYPE: "pax header",
            tarfile.SOLARIS_XHDTYPE: "pax header", tarfile.XGLTYPE: "global pax header"}


def refused(shown: str, message: str) -> ContentError:
    """The whole checklist refused, in one problem."""
    return ContentError([Problem(shown, 0, "", message)])


def unpacked(source: Path, into: Path, shown: str) -> Path:
    """The archive's files, unpacked under `into`: refused whole if a member would land
    outside it (an absolute path, `..`), is anything but a file or a folder (a link, a
    device), or if there are more than MEMBERS_MAX of them or they would unpack to more
    than UNPACKED_MAX bytes (counted as they are written: a zip's sizes may lie). As the
    reader did: an archive holding one folder is that folder."""
    if zipfile.is_zipfile(source):
        with zipfile.ZipFile(source) as bundle:
            members = bundle.infolist()
            _countable(len(members), shown)
            written = 0
            for member in members:
                target = _placed(member.filename, into, shown)
                kind = (member.external_attr >> 16) & 0o170000
                if kind not in (0, 0o100000, 0o040000) and not member.is_dir():
                    raise _not_a_file(member.filename, shown)
                if member.is_dir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                with bundle.open(member) as packed, open(target, "wb") as out:
                    while chunk := packed.read(1 << 20):
                        written += len(chunk)
                        if written > UNPACKED_MAX:
                            raise _too_large(shown)
                        out.write(chunk)
    else:
        try:
            _untarred(source, into, shown)
        except _HeaderRefused as exc:
            raise refused(shown, str(exc)) from None
    content = list(into.iterdir())
    return content[0] if len(content) == 1 and content[0].is_dir() else into


def _untarred(source: Path, into: Path, shown: str) -> None:
    """`unpacked` for a tar file (compressed or not), its headers bounded as they are read."""
    try:
        tar = tarfile.open(source, "r:*", tarinfo=_BoundedInfo)
    except tarfile.TarError:  # (not tarfile.is_tarfile: it reads the first header unbounded)
        raise refused(shown, "not a readable Darwin Core Archive: neither a zip nor a tar "
                             "file, nor a folder") from None
    with tar:
        entries: list[tarfile.TarInfo] = []
        declared = 0
        for entry in tar:  # read as it goes: a count or a size over the limit stops it
            entries.append(entry)
            _countable(len(entries), shown)
            _placed(entry.name, into, shown)
            if not (entry.isfile() or entry.isdir()):
                raise _not_a_file(entry.name, shown)
            declared += entry.size
            if declared > UNPACKED_MAX:  # (before reading past it to the next header)
                raise _too_large(shown)
        tar.extractall(into, members=entries, filter="data")


class _HeaderRefused(Exception):
    """A tar header refused before it is read (not a tarfile error, which tarfile may take
    for the archive's end)."""


class _BoundedInfo(tarfile.TarInfo):
    """A tar member as tarfile reads it, but refused before tarfile reads a long-name,
    long-link or pax header of more than HEADER_MAX bytes, or a sparse file's map (which
    tarfile reads whole, a block at a time, wherever it ends): each is held in memory
    whole, and a few hundred kilobytes of gzip hold gigabytes of one."""

    def _proc_member(self, tar: tarfile.TarFile) -> tarfile.TarInfo:
        kind = _HEADERS.get(self.type)
        if kind is not None and self.size > HEADER_MAX:
            raise _HeaderRefused(f"{self.name[:80]!r} at byte {self.offset:,} is a {kind} of "
                                 f"{self.size:,} bytes: a tar header holds at most "
                                 f"{HEADER_MAX >> 10} KiB; a checklist's archive needs no "
                                 f"more")
        if self.type == tarfile.GNUTYPE_SPARSE:
            raise _sparse(self.name)
        return super()._proc_member(tar)  # type: ignore[misc]  # (not in typeshed)

    def _proc_gnusparse_10(self, following: tarfile.TarInfo, pax_headers: dict[str, str],
                           tar: tarfile.TarFile) -> None:
        raise _sparse(following.name)


def _sparse(name: str) -> _HeaderRefused:
    return _HeaderRefused(f"{name[:80]!r} is a sparse file: an archive holds files and "
                          f"folders only")


def _not_a_file(name: str, shown: str) -> ContentError:
    return refused(shown, f"{name[:80]!r} is a link or a device, not a file: an archive "
                          f"holds files and folders only")


def _too_large(shown: str) -> ContentError:
    return refused(shown, f"unpacks to more than {UNPACKED_MAX >> 20} MiB: too large for a "
                          f"checklist")


def _countable(count: int, shown: str) -> None:
    if count > MEMBERS_MAX:
        raise refused(shown, f"holds more than {MEMBERS_MAX:,} files: too many for a "
                             f"checklist")


def _placed(name: str, into: Path, shown: str) -> Path:
    parts = PurePosixPath(name.replace("\\", "/")).parts
    if not parts or name.startswith(("/", "\\")) or ".." in parts or ":" in parts[0]:
        raise refused(shown, f"{name[:80]!r} would land outside the archive's folder: an "
                             f"archive's members are relative paths")
    return into.joinpath(*parts)


def folder_bounded(folder: Path, tables: list[Path]) -> None:
    """A folder of CSV files, bounded as an archive is: it holds no link (a table linked
    from elsewhere, `/etc/passwd` as vernacularname.csv, would put that file's lines into
    records, problems and notes), and the `tables` it holds have at most UNPACKED_MAX bytes
    in all, counted before any is read."""
    for path in sorted(folder.iterdir()):
        if path.is_symlink():
            raise refused(str(path), "a link, not a file: a checklist folder holds its own "
                                     "files and folders only, as an archive does; copy the "
                                     "file into the folder")
    if sum(path.stat().st_size for path in tables) > UNPACKED_MAX:
        raise refused(str(folder), f"its tables hold more than {UNPACKED_MAX >> 20} MiB: too "
                                   f"large for a checklist")


def table_name(source: Path, location: str) -> str:
    """How problems name a table of an archive: `folder/taxon.txt`, `archive.zip!taxon.txt`."""
    return f"{source}/{location}" if source.is_dir() else f"{source}!{location}"


def contained(folder: Path, source: Path) -> None:
    """Every table meta.xml names is a file of the checklist's folder (not a path outside
    it, nor a link out of it, nor a device), and all of them hold at most UNPACKED_MAX
    bytes: meta.xml is the checklist's, not the machine's, and must not make the import
    read anything else."""
    shown = str(source)
    try:
        tree = ElementTree.parse(folder / "meta.xml")
    except (ElementTree.ParseError, OSError) as exc:
        raise refused(shown, f"meta.xml cannot be read: {exc}") from None
    root = folder.resolve()
    total = 0
    for table in tree.iter():
        if table.tag.rpartition("}")[2] not in ("core", "extension"):
            continue
        codec = codec_for(table.get("encoding"))
        if codec is None:
            raise refused(shown, f"meta.xml declares the encoding "
                                 f"{table.get('encoding', '')[:40]!r}: fednode reads tables in "
                                 f"a character set such as UTF-8, ISO-8859-1 or "
                                 f"Windows-1252; save them as UTF-8")
        for element in table.iter():
            if element.tag.rpartition("}")[2] != "location" or element.text is None:
                continue
            location = element.text.strip()
            path = (folder / location).resolve()
            if not path.is_relative_to(root) or not path.is_file():
                raise refused(shown, f"meta.xml names {location[:80]!r}, which is not a file "
                                     f"of the checklist: a table is a file beside meta.xml")
            total += path.stat().st_size
            if total > UNPACKED_MAX:
                raise refused(shown, f"its tables hold more than {UNPACKED_MAX >> 20} MiB: "
                                     f"too large for a checklist")
            strictly_decoded(path, codec, table_name(source, location))
