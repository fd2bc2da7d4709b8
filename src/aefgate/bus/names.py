"""Names the bus services share: a session's (or an OTLP group's) run folder name, and NATS name tokens."""

from __future__ import annotations

import hashlib

__all__ = ["run_name"]

MAX_NAME = 200  # bytes of an encoded session name before it is shortened with a digest
_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


def run_name(session: str) -> str:
    """The folder name of a session's run: the session id percent-encoded as UTF-8, every byte outside
    ``[A-Za-z0-9_-]`` as ``%XX`` (so ``.`` too: ``.N`` suffixes of later generations, ``.jsonl`` and ``.keys``
    never collide with a name, and no name is hidden, ``.`` or ``..``). A name over 200 bytes keeps its first 160
    and ends in ``~`` and 32 hex digits of the SHA-256 of the session id."""
    name = "".join(chr(b) if chr(b) in _SAFE else f"%{b:02X}" for b in session.encode("utf-8"))
    if len(name) > MAX_NAME:
        cut = name[:160]
        if "%" in cut[-2:]:  # never split an escape
            cut = cut[: cut.rindex("%")]
        name = cut + "~" + hashlib.sha256(session.encode("utf-8")).hexdigest()[:32]
    return name


def _token(text: str, limit: int = 64) -> str:
    """``text`` as a NATS name and subject token (``[A-Za-z0-9_-]``): kept when it is one, else the allowed
    characters and 12 hex digits of its SHA-256 (so two different texts never give one token)."""
    if text and len(text) <= limit and set(text) <= _SAFE:
        return text
    kept = "".join(c if c in _SAFE else "-" for c in text)[: limit - 13]
    return f"{kept}-{hashlib.sha256(text.encode('utf-8')).hexdigest()[:12]}"
