"""What both directions of the ASSERT converter share: the names the page fixes, and small helpers."""

from __future__ import annotations

import re

__all__ = [
    "EVALUATOR",
    "EXT_FOLDER",
    "EXT_NAME",
    "FROM",
    "HARM",
    "HARM_PATH",
    "OVER_REFUSAL",
    "OVER_REFUSAL_PATH",
    "ROOT",
    "encode_name",
    "decode_name",
]

#: imported.from: ASSERT writes no version into its files, so every run is read as 0.3 (the page)
FROM = "assert-ai 0.3"
#: a case's root line, and its two children: ASSERT's two headline kinds (the page)
ROOT = "assert_ai_verdict"
HARM_PATH = ROOT + "/harm"
OVER_REFUSAL_PATH = ROOT + "/over_refusal"
HARM = "harm"
OVER_REFUSAL = "over_refusal"
#: every line's evaluator (the page's worked example)
EVALUATOR = {"id": ROOT, "version": "assert-ai-0.3"}
#: the ext member of a line ([ENC-19]: prefixed by the producer's name) and the folder of ASSERT's files under ext/
EXT_NAME = "aefgate.assert-ai"
EXT_FOLDER = "assert-ai"
_PCT = re.compile(r"%([0-9A-Fa-f]{2})")


def encode_name(name: str) -> str:
    """A typed reference's name ([ENC-13], the ``ref`` pattern ``[!-~]``): each byte of its UTF-8 that is not
    printable ASCII, and ``%``, as ``%XX``; the empty name as ``-``, and the name ``-`` as ``%2D``."""
    if name == "":
        return "-"
    if name == "-":
        return "%2D"
    out = []
    for b in name.encode("utf-8", "surrogatepass"):
        out.append(chr(b) if 0x21 <= b <= 0x7E and b != 0x25 else f"%{b:02X}")
    return "".join(out)


def decode_name(name: str) -> str:
    """The inverse of :func:`encode_name` (a name that does not decode is kept as written)."""
    if name == "-":
        return ""
    if "%" not in name:
        return name
    raw = bytearray()
    i = 0
    while i < len(name):
        m = _PCT.match(name, i) if name[i] == "%" else None
        if m is not None:
            raw.append(int(m.group(1), 16))
            i += 3
        else:
            raw.extend(name[i].encode("utf-8", "surrogatepass"))
            i += 1
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return name
