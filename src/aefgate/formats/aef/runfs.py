"""The files of a run folder ([RUN-1], [RUN-2], [RUN-3], [SEAL-1]).

:func:`scan` walks a run folder without following anything: every entry is examined with ``lstat``, so a symbolic
link, device, pipe or socket is reported (as a ``path`` problem, [RUN-3]) and never opened or followed. It returns
the regular files with their sizes, split into the run's own files and those under ``overlays/`` (which grow after
sealing and belong to the overlay chain, [OVL-5]).
"""

from __future__ import annotations

import hashlib
import heapq
import os
import re
import stat
from array import array
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


_BLOB_DIR = "blobs/sha256/"
_BLOB_LEN = len(_BLOB_DIR) + 3 + 64


def canonical_blob(path: str) -> bytes | None:
    """The 32 bytes of the digest a blob at its canonical path names (``blobs/sha256/xx/<hex>``, ``xx`` the first
    two digits of ``<hex>``, [EVD-3]), or None for any other path."""
    if len(path) != _BLOB_LEN or not path.startswith(_BLOB_DIR):
        return None
    m = BLOB_PATH.match(path)
    if m is None or not m.group(2).startswith(m.group(1)):
        return None
    return bytes.fromhex(m.group(2))


def _blob_name(raw: bytes) -> str:
    h = raw.hex()
    return f"{_BLOB_DIR}{h[:2]}/{h}"


class Files:
    """The regular files of a run (outside ``overlays/``): ``path -> size``, and their digests once read.

    A mapping for the callers (``get``, ``in``, ``[]``, ``items``, ``len``, iteration), whose memory does not grow
    by Python objects per blob: the files at a canonical blob path (``blobs/sha256/xx/<hex>``, all but a few of a
    large run's files) are packed in arrays sorted by digest (which is their paths' byte order): 32 bytes of name,
    8 of size, 32 of digest and 1 flag each (~73 bytes a blob, against ~600 for dicts of strings and tuples). Every
    other path is in the dict :attr:`other`. Call :meth:`freeze` once every file is added (the scan does)."""

    __slots__ = ("other", "keys", "sizes", "n", "other_digests", "bdig", "bhas")

    def __init__(self) -> None:
        self.other: dict[str, int] = {}
        self.keys = bytearray()  # 32 bytes per blob, sorted by freeze()
        self.sizes = array("Q")
        self.n = 0
        self.other_digests: dict[str, tuple[str, int]] = {}
        self.bdig = bytearray()  # 32 bytes per blob: the digest of its bytes as read
        self.bhas = bytearray()  # 1 when bdig holds a digest

    # -- building ----------------------------------------------------------------------------------------------
    def add(self, path: str, size: int) -> None:
        raw = canonical_blob(path)
        if raw is None:
            self.other[path] = size
        else:
            self.keys += raw
            self.sizes.append(size)
            self.n += 1

    def freeze(self) -> None:
        """Sort the blobs by name and size the digest arrays. The sort goes by the first byte (256 buckets of
        4-byte indexes), then sorts each bucket's names: what it holds besides the arrays is one bucket's names."""
        n, keys, sizes = self.n, self.keys, self.sizes
        if n > 1:
            buckets: list[array] = [array("I") for _ in range(256)]
            for i in range(n):
                buckets[keys[32 * i]].append(i)
            nk = bytearray(32 * n)
            ns = array("Q", bytes(8 * n))
            j = 0
            for bucket in buckets:
                for i in sorted(bucket, key=lambda i: keys[32 * i : 32 * i + 32]):
                    nk[32 * j : 32 * j + 32] = keys[32 * i : 32 * i + 32]
                    ns[j] = sizes[i]
                    j += 1
            del buckets
            self.keys, self.sizes = nk, ns
        self.bdig = bytearray(32 * n)
        self.bhas = bytearray(n)

    # -- lookups -----------------------------------------------------------------------------------------------
    def blob_index(self, path: str) -> int:
        """The index of the canonical blob at ``path``, or -1."""
        if not self.n:
            return -1
        raw = canonical_blob(path)
        return -1 if raw is None else self.find(raw)

    def find(self, raw: bytes) -> int:
        keys = self.keys
        lo, hi = 0, self.n
        while lo < hi:
            mid = (lo + hi) >> 1
            k = keys[32 * mid : 32 * mid + 32]
            if k < raw:
                lo = mid + 1
            elif k > raw:
                hi = mid
            else:
                return mid
        return -1

    def blob_path(self, i: int) -> str:
        return _blob_name(bytes(self.keys[32 * i : 32 * i + 32]))

    def blob_paths(self) -> Iterator[str]:
        keys = self.keys
        for i in range(self.n):
            yield _blob_name(bytes(keys[32 * i : 32 * i + 32]))

    def get(self, path: str, default=None):
        v = self.other.get(path)
        if v is not None:
            return v
        i = self.blob_index(path)
        return default if i < 0 else self.sizes[i]

    def __contains__(self, path) -> bool:
        return path in self.other or (type(path) is str and self.blob_index(path) >= 0)

    def __getitem__(self, path: str) -> int:
        v = self.get(path)
        if v is None:
            raise KeyError(path)
        return v

    def __len__(self) -> int:
        return len(self.other) + self.n

    def __iter__(self) -> Iterator[str]:
        yield from list(self.other)
        yield from self.blob_paths()

    def items(self) -> Iterator[tuple[str, int]]:
        yield from list(self.other.items())
        sizes = self.sizes
        for i, p in enumerate(self.blob_paths()):
            yield p, sizes[i]

    # -- digests -----------------------------------------------------------------------------------------------
    def set_digest(self, path: str, hexd: str, size: int) -> None:
        i = -1 if path in self.other else self.blob_index(path)
        if i < 0:
            self.other_digests[path] = (hexd, size)
        else:
            self.bdig[32 * i : 32 * i + 32] = bytes.fromhex(hexd)
            self.bhas[i] = 1

    def set_blob_digest(self, i: int, raw: bytes) -> None:
        self.bdig[32 * i : 32 * i + 32] = raw
        self.bhas[i] = 1

    def digest(self, path: str) -> tuple[str, int] | None:
        """``(sha256 hex, size)`` of a file read, or None."""
        d = self.other_digests.get(path)
        if d is not None:
            return d
        i = self.blob_index(path)
        if i < 0 or not self.bhas[i]:
            return None
        return self.bdig[32 * i : 32 * i + 32].hex(), self.sizes[i]

    def has_digest(self, path: str) -> bool:
        return self.digest(path) is not None

    def sealed_entries(self) -> Iterator[tuple[str, str, int]]:
        """``(path, sha256 hex, size)`` of every file of [SEAL-1] read and hashed, in [SEAL-3] order (the UTF-8
        bytes of the paths), built one by one."""
        others = sorted(
            ((p, h, s) for p, (h, s) in self.other_digests.items() if is_sealed_path(p) and p in self.other),
            key=lambda e: e[0].encode("utf-8"),
        )
        return heapq.merge(others, self._blob_entries(), key=lambda e: e[0].encode("utf-8"))

    def _blob_entries(self) -> Iterator[tuple[str, str, int]]:
        keys, bdig, bhas, sizes = self.keys, self.bdig, self.bhas, self.sizes
        for i in range(self.n):
            if bhas[i]:
                yield _blob_name(bytes(keys[32 * i : 32 * i + 32])), bdig[32 * i : 32 * i + 32].hex(), sizes[i]


class Digests:
    """``path -> (sha256 hex, size)`` over a :class:`Files` (the verifier's ``digests``)."""

    __slots__ = ("files",)

    def __init__(self, files: Files):
        self.files = files

    def __setitem__(self, path: str, value: tuple[str, int]) -> None:
        self.files.set_digest(path, value[0], value[1])

    def get(self, path: str, default=None):
        d = self.files.digest(path)
        return default if d is None else d

    def __contains__(self, path: str) -> bool:
        return self.files.digest(path) is not None

    def __getitem__(self, path: str) -> tuple[str, int]:
        d = self.files.digest(path)
        if d is None:
            raise KeyError(path)
        return d


@dataclass
class Scan:
    files: Files = field(default_factory=Files)  # run files (outside overlays/): path -> size
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
                    out.files.freeze()
                    return out
                out.files.add(relpath, st.st_size)
        else:
            (out.overlay_special if in_overlays else out.special).append(relpath)
    out.files.freeze()
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
