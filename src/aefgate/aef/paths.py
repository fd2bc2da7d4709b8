"""Paths in a run folder ([RUN-3]).

Every path of a file in a run folder (relative to the folder, ``/`` between segments):

- is made of segments of ASCII letters, digits, ``.``, ``_`` and ``-``, separated by ``/``, with no empty segment
  (so no leading, trailing or doubled ``/``);
- is at most 255 bytes long (a longer path is a ``path`` problem, not a ``limit``);
- has no segment that starts or ends with ``.`` (``.``, ``..``, ``.DS_Store``, ``x.``);
- has no segment that is, ignoring letter case and everything from its first ``.``, a name Windows reserves
  (``CON``, ``PRN``, ``AUX``, ``NUL``, ``COM1``-``COM9``, ``LPT1``-``LPT9``): ``con.txt`` and ``COM1.x`` break it,
  ``COM10`` and ``CONSOLE`` do not;
- does not differ only in letter case from another path, and none of its folders differs only in letter case from
  another folder: for a clash the *later* of the two in byte order is reported, and for a folder clash every file
  under the later folder (``ext/Data/x`` and ``ext/data/y``: ``ext/data`` is later, so ``ext/data/y`` is reported).
  A file and a folder whose names differ only in case clash too (a case-insensitive file system cannot hold both).

The rules are on the paths of files: a folder breaks them only through its files, and an empty folder is ignored,
so the caller passes file paths only. The caller also leaves out everything under ``overlays/`` (the overlay chain
reports it, [OVL-5]), and reports entries that are not regular files (links, devices, pipes, sockets) itself.

Paths are compared and measured by their UTF-8 bytes. A ``str`` from ``os.listdir`` that holds the
``surrogateescape`` form of a file name that is not UTF-8 is measured and ordered by its original bytes (it breaks
the rules anyway: it is not ASCII).
"""

from __future__ import annotations

import re
from typing import Iterable

__all__ = ["MAX_PATH_BYTES", "RESERVED_NAMES", "segment_ok", "check_path", "path_problems", "path_bytes"]

MAX_PATH_BYTES = 255

RESERVED_NAMES = frozenset(
    ["CON", "PRN", "AUX", "NUL"] + [f"COM{i}" for i in range(1, 10)] + [f"LPT{i}" for i in range(1, 10)]
)

_SEGMENT = re.compile(r"[A-Za-z0-9._-]+")


def path_bytes(path: str) -> bytes:
    """The bytes of ``path`` in UTF-8 (the original bytes for a ``surrogateescape`` file name)."""
    try:
        return path.encode("utf-8")
    except UnicodeEncodeError:
        try:
            return path.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:
            return path.encode("utf-8", "surrogatepass")


def segment_ok(seg: str) -> bool:
    """Whether one segment of a path keeps [RUN-3] (its characters, dots and reserved names)."""
    if _SEGMENT.fullmatch(seg) is None:  # also refuses the empty segment
        return False
    if seg[0] == "." or seg[-1] == ".":
        return False
    return seg.split(".", 1)[0].upper() not in RESERVED_NAMES


def check_path(path: str) -> bool:
    """Whether one path keeps the rules of [RUN-3] that concern it alone (all but the case clash)."""
    if len(path_bytes(path)) > MAX_PATH_BYTES:
        return False
    return all(segment_ok(seg) for seg in path.split("/"))


def path_problems(paths: Iterable[str]) -> list[tuple[str, str]]:
    """The [RUN-3] problems of the file paths ``paths``: ``(path, "path")`` each, ordered by the paths' bytes.

    A path is reported once, whatever rules it breaks. A path given twice is one path.
    """
    files: dict[bytes, str] = {}
    for p in paths:
        files.setdefault(path_bytes(p), p)

    bad: set[bytes] = {b for b, p in files.items() if not check_path(p)}

    # Case clashes: every file path and every folder above it is a name; two names that are equal once ASCII
    # letters are folded clash, and all but the first of them in byte order are "later".
    groups: dict[bytes, set[bytes]] = {}
    for b in files:
        start = 0
        while True:
            cut = b.find(b"/", start)
            name = b if cut < 0 else b[:cut]
            groups.setdefault(name.lower(), set()).add(name)  # bytes.lower folds ASCII letters only
            if cut < 0:
                break
            start = cut + 1
    later_folders: set[bytes] = set()
    for names in groups.values():
        if len(names) < 2:
            continue
        for name in sorted(names)[1:]:
            if name in files:
                bad.add(name)
            # a name that is a proper prefix of some file path is a folder; its files are checked below
            later_folders.add(name)
    if later_folders:
        for b in files:
            start = 0
            while True:
                cut = b.find(b"/", start)
                if cut < 0:
                    break
                if b[:cut] in later_folders:
                    bad.add(b)
                    break
                start = cut + 1

    return [(files[b], "path") for b in sorted(bad)]
