"""The files of a run folder ([RUN-1], [RUN-2], [RUN-3], [SEAL-1]).

:func:`scan` walks a run folder without following anything: every entry is examined with ``lstat``, so a symbolic
link, device, pipe or socket is reported (as a ``path`` problem, [RUN-3]) and never opened or followed. It returns
the regular files with their sizes, split into the run's own files and those under ``overlays/`` (which grow after
sealing and belong to the overlay chain, [OVL-5]).
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from aefgate.formats.aef.jsonio import MAX_FILES

UNSEALED_NAMES = ("seal.json", "attestation.dsse.json")  # [SEAL-1]
OVERLAYS = "overlays"

# [RUN-2]: the files a run folder holds
RUN_FILES = frozenset(
    {
        "run.json",
        "results.ndjson",
        "metrics.json",
        "summary.json",
        "evidence.ndjson",
        "gates.ndjson",
        "traces.otlp.jsonl",
        "logs.otlp.jsonl",
        "seal.json",
        "attestation.dsse.json",
    }
)
BLOB_PATH = re.compile(r"blobs/sha256/([0-9a-f]{2})/([0-9a-f]{64})\Z")
_HASH_CHUNK = 1 << 20


def is_listed(path: str) -> bool:
    """Whether [RUN-2] lists ``path`` (``ext/`` and ``overlays/`` included)."""
    if path in RUN_FILES or path.startswith("ext/") or path.startswith("overlays/"):
        return True
    m = BLOB_PATH.match(path)
    return bool(m) and m.group(2).startswith(m.group(1))


def blob_path(digest_hex: str) -> str:
    """The path of a blob ([EVD-3])."""
    return f"blobs/sha256/{digest_hex[:2]}/{digest_hex}"


def is_sealed_path(path: str) -> bool:
    """[SEAL-1]: every file except seal.json, attestation.dsse.json and everything under overlays/."""
    return path not in UNSEALED_NAMES and not path.startswith("overlays/")


@dataclass
class Scan:
    files: dict[str, int] = field(default_factory=dict)  # run files (outside overlays/): path -> size
    overlay_files: dict[str, int] = field(default_factory=dict)
    special: list[str] = field(default_factory=list)  # links, devices, pipes, sockets (outside overlays/)
    overlay_special: list[str] = field(default_factory=list)
    too_many: bool = False


def walk(top: str | Path, prefix: str = "") -> Iterator[tuple[str, os.stat_result]]:
    """Every entry below ``top`` that is not a folder, as ``(prefix + relative path, lstat result)``.

    Entries are examined with ``lstat`` only: a link is reported as the link, never followed or opened, and
    folders are descended into (an empty folder yields nothing)."""
    stack = [(prefix, os.fspath(top))]
    while stack:
        rel, absdir = stack.pop()
        try:
            it = os.scandir(absdir)
        except OSError:
            continue
        with it:
            for entry in it:
                relpath = rel + entry.name
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISDIR(st.st_mode):
                    stack.append((relpath + "/", entry.path))
                else:
                    yield relpath, st


def scan(run_dir: str | Path, *, max_files: int = MAX_FILES) -> Scan:
    """Walk ``run_dir`` with lstat only; never follow a link. Paths use ``/``."""
    out = Scan()
    count = 0
    for relpath, st in walk(run_dir):
        in_overlays = relpath == OVERLAYS or relpath.startswith("overlays/")
        if stat.S_ISREG(st.st_mode):
            if in_overlays:
                out.overlay_files[relpath] = st.st_size
            else:
                count += 1
                if count > max_files:
                    out.too_many = True
                    return out
                out.files[relpath] = st.st_size
        else:
            (out.overlay_special if in_overlays else out.special).append(relpath)
    return out


def sha256_file(path: str | Path, *, on_chunk=None, size_hint: int | None = None) -> str:
    """The SHA-256 of a file's bytes, read in 1 MiB chunks ([SEAL-2]). With ``size_hint`` (the size a scan saw)
    below a chunk, the file is read in one call, without the chunk buffer (a run holds blobs by the ten thousand,
    most of them small); bytes beyond the hint are still read and hashed."""
    if size_hint is not None and size_hint < _HASH_CHUNK and on_chunk is None:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
        try:
            h = hashlib.sha256(os.read(fd, size_hint + 1))
            while chunk := os.read(fd, _HASH_CHUNK):
                h.update(chunk)
        finally:
            os.close(fd)
        return h.hexdigest()
    h = hashlib.sha256()
    with open(path, "rb", buffering=0) as f:
        buf = bytearray(_HASH_CHUNK)
        view = memoryview(buf)
        while True:
            n = f.readinto(buf)
            if not n:
                break
            h.update(view[:n])
            if on_chunk is not None:
                on_chunk(view[:n])
    return h.hexdigest()
