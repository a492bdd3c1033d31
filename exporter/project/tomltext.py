"""Writing TOML values by hand: a string in TOML's own escapes (never JSON's)."""

from __future__ import annotations

_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f",
            "\r": "\\r"}


def toml_string(text: str) -> str:
    """`text` as a TOML basic string. Every Unicode scalar value is written as itself
    (emoji and other characters beyond the BMP included, which JSON would escape as
    surrogate pairs that TOML refuses); control characters become `\\uXXXX`. A lone
    surrogate is not text and raises ValueError."""
    out = []
    for char in text:
        code = ord(char)
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\u{code:04x}")
        elif 0xD800 <= code <= 0xDFFF:
            raise ValueError(f"not text: a lone surrogate U+{code:04X}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'
