"""Typed references' names as [ENC-13] encodes them (the ``ref`` pattern ``[!-~]``): one place for every converter
that builds or reads a ``kind:name`` reference from another tool's names."""

from __future__ import annotations

import re

__all__ = ["encode_name", "decode_name"]

def encode_name(name: str) -> str:
    """A ref's name as [ENC-13] encodes it (the inverse of :func:`decode_name`): each byte of its UTF-8 that is not
    printable ASCII, and ``%``, as ``%XX``; the empty name as ``-``, and the name ``-`` as ``%2D``."""
    if name == "":
        return "-"
    if name == "-":
        return "%2D"
    out = []
    for b in name.encode("utf-8", "surrogatepass"):
        if 0x21 <= b <= 0x7E and b != 0x25:
            out.append(chr(b))
        else:
            out.append(f"%{b:02X}")
    return "".join(out)


_PCT = re.compile(r"%([0-9A-Fa-f]{2})")


def decode_name(name: str) -> str:
    """A ref's name decoded as [ENC-13] encodes it (R7I-8): each ``%XX`` the byte XX, read as UTF-8; ``-`` the empty
    name; a name that does not decode (a stray ``%``, bytes that are not UTF-8) is kept as written."""
    if name == "-":
        return ""
    if "%" not in name:
        return name
    raw = bytearray()
    i = 0
    while i < len(name):
        ch = name[i]
        if ch == "%":
            m = _PCT.match(name, i)
            if m is None:
                return name
            raw.append(int(m.group(1), 16))
            i += 3
        else:
            raw.extend(ch.encode("utf-8"))
            i += 1
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return name
