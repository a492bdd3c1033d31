"""The text encodings an archive's tables may declare in meta.xml, and a strict check that
a table is what it declares.

Any character set Python knows is read (UTF-8, Latin-1, Windows-1252, ISO-8859-15,
MacRoman...), when it writes the characters that frame a table (line feed, comma, tab,
quote) as their ASCII bytes: the archive reader finds rows and cells by those bytes, so
UTF-16 or UTF-32 tables would be cut in the wrong places. Codecs that are not character
sets (`raw_unicode_escape`, `rot13`, `base64`...) are refused: they can make halves of
surrogate pairs, which no export can write."""

from __future__ import annotations

import codecs
import re
from pathlib import Path

from exporter.shared.errors import ContentError, Problem

_FRAMING = "\n\r\t,;|\"' "
_NOT_CHARSETS = {"raw-unicode-escape", "unicode-escape", "undefined", "idna", "punycode",
                 "utf-7", "mbcs", "oem"}
_SURROGATE = re.compile("[\ud800-\udfff]")


def codec_for(declared: str | None) -> str | None:
    """Python's name for the encoding meta.xml declares (UTF-8 when it declares none), or
    None when it is not a character set fednode reads."""
    name = (declared or "UTF-8").strip()
    try:
        info = codecs.lookup(name)
    except LookupError:
        return None
    if not getattr(info, "_is_text_encoding", True) or info.name in _NOT_CHARSETS:
        return None
    try:
        if _FRAMING.encode(info.name) != _FRAMING.encode("ascii"):
            return None
    except (UnicodeError, LookupError):
        return None
    return info.name


def strictly_decoded(path: Path, codec: str, shown: str) -> None:
    """A table must be text of its declared encoding throughout: the reader would put
    U+FFFD where a byte is wrong, and import the name mangled."""
    decoder = codecs.getincrementaldecoder(codec)()
    line, chunk = 1, b""
    try:
        with open(path, "rb") as handle:
            while chunk := handle.read(1 << 20):
                text = decoder.decode(chunk)
                if _SURROGATE.search(text):
                    raise ContentError([Problem(shown, line, "", "holds half of a surrogate "
                                                                 "pair; save the table as "
                                                                 "UTF-8")])
                line += chunk.count(b"\n")
            decoder.decode(b"", final=True)  # (chunk is b"": no line more)
    except UnicodeDecodeError as exc:
        line += chunk[:exc.start].count(b"\n")
        shown_codec = codec.upper() if codec.startswith("utf") else codec
        raise ContentError([Problem(shown, line, "", f"not {shown_codec} ({exc.reason}) as "
                                                     f"meta.xml declares; save the table as "
                                                     f"UTF-8, or declare its encoding")]
                           ) from None
