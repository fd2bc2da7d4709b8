"""The files of a run folder ([RUN-1], [RUN-2], [RUN-3], [SEAL-1]).

:func:`scan` walks a run folder without following anything: every entry is examined with ``lstat``, so a symbolic
link, device, pipe or socket is reported (as a ``path`` problem, [RUN-3]) and never opened or followed. It returns
the regular files with their sizes, split into the run's own files and those under ``overlays/`` (which grow after
sealing and belong to the overlay chain, [OVL-5]).
"""

from __future__ import annotations

import bisect
import hashlib
import heapq
import itertools
import os
import re
import stat
import tempfile
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from aefgate.aef import spill
from aefgate.aef.jsonio import MAX_FILES

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
_PREFIX = re.compile(r"[0-9a-f]{2}")


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


_REC = 73  # a packed blob: name (32 bytes), size (8, little-endian), digest as read (32), 1 when it holds one
_DIG = 40
_HAS = 72
_BLOCK = 64  # on disk: records per block of the sparse index (one read of 4.6 KiB per lookup)
_SPILL_FILES = 8192  # blobs packed in memory (~73 bytes each); beyond, the table is a temporary file


class Files:
    """The regular files of a run (outside ``overlays/``): ``path -> size``, and their digests once read.

    A mapping for the callers (``get``, ``in``, ``[]``, ``items``, ``len``, iteration), whose memory does not grow
    with the number of blobs: the files at a canonical blob path (``blobs/sha256/xx/<hex>``, all but a few of a
    large run's files) are packed in records sorted by digest (which is their paths' byte order): 32 bytes of
    name, 8 of size, 32 of digest and 1 flag each. Up to ``AEFGATE_SPILL_FILES`` blobs (8,192) the records are
    one bytearray (~73 bytes a blob); beyond, they are a temporary file (unlinked at once), read through a
    sparse index of every 64th name (a list: ~1 byte a blob) and one read of a 64-record block per lookup. Forked
    processes read the same file (``pread``). Every other path is in the dict :attr:`other`. Call :meth:`freeze`
    once every file is added (the scan does)."""

    __slots__ = ("other", "other_digests", "n", "_limit", "_mem", "_chunk", "_runs", "_scratch", "_file", "_fd",
                 "_index", "_frozen")

    def __init__(self) -> None:
        self.other: dict[str, int] = {}
        self.other_digests: dict[str, tuple[str, int]] = {}
        self.n = 0
        self._limit = spill.bound("AEFGATE_SPILL_FILES", _SPILL_FILES)
        # building: 40-byte records (name, size) in memory; frozen: the 73-byte records, or None when on disk
        self._mem: bytearray | None = bytearray()
        self._chunk: list[bytes] | None = None  # building on disk: the records not yet written as a sorted run
        self._runs: list[tuple[int, int]] = []  # building on disk: (offset, count) of the sorted runs in _scratch
        self._scratch = None
        self._file = None  # frozen on disk: the records, in order
        self._fd = -1
        self._index: list[bytes] = []  # frozen on disk: the name of every _BLOCK-th record (~1 byte a blob)
        self._frozen = False

    # -- building ----------------------------------------------------------------------------------------------
    def add(self, path: str, size: int) -> None:
        if self._frozen:
            raise RuntimeError("a frozen table of files takes no more files")
        raw = canonical_blob(path)
        if raw is None:
            self.other[path] = size
            return
        self._add_blob(raw, size)

    def add_blob(self, raw: bytes, size: int) -> None:
        """:meth:`add` of the blob at its canonical path named by the 32 bytes ``raw`` (its path is not parsed)."""
        if self._frozen:
            raise RuntimeError("a frozen table of files takes no more files")
        if len(raw) != 32:
            raise ValueError("a blob's name is 32 bytes")
        self._add_blob(raw, size)

    def _add_blob(self, raw: bytes, size: int) -> None:
        rec = raw + size.to_bytes(8, "little")
        self.n += 1
        mem = self._mem
        if mem is not None:
            mem += rec
            if self.n > self._limit:  # to disk: what was packed so far is the first run
                self._scratch = tempfile.TemporaryFile(prefix="aefgate-files-")
                self._chunk = [bytes(mem[i : i + 40]) for i in range(0, len(mem), 40)]
                self._mem = None
                self._flush_run()
            return
        chunk = self._chunk
        chunk.append(rec)
        if len(chunk) >= max(self._limit, 1):
            self._flush_run()

    def _flush_run(self) -> None:
        chunk = self._chunk
        if chunk:
            chunk.sort()
            f = self._scratch
            f.seek(0, os.SEEK_END)
            self._runs.append((f.tell(), len(chunk)))
            f.write(b"".join(chunk))
            chunk.clear()

    def freeze(self) -> None:
        """Sort the blobs by name, with room for their digests. In memory the sort goes by the first byte (256
        buckets of 4-byte indexes), then sorts each bucket's names: what it holds besides the records is one
        bucket's names. On disk, the sorted runs (a bounded number of records each) are merged into the file."""
        if self._frozen:
            return
        self._frozen = True
        if self._mem is None:
            return self._freeze_disk()
        n, mem = self.n, self._mem
        out = bytearray(_REC * n)
        buckets: list[array] = [array("I") for _ in range(256)]
        for i in range(n):
            buckets[mem[40 * i]].append(i)
        j = 0
        for bucket in buckets:
            for i in sorted(bucket, key=lambda i: mem[40 * i : 40 * i + 32]):
                out[_REC * j : _REC * j + 40] = mem[40 * i : 40 * i + 40]
                j += 1
        del buckets
        self._mem = out

    def _freeze_disk(self) -> None:
        self._flush_run()
        scratch = self._scratch
        fd = scratch.fileno()
        scratch.flush()

        def run(offset: int, count: int) -> Iterator[bytes]:
            step = 256
            for k in range(0, count, step):
                buf = os.pread(fd, 40 * min(step, count - k), offset + 40 * k)
                for i in range(0, len(buf), 40):
                    yield buf[i : i + 40]

        out = tempfile.TemporaryFile(prefix="aefgate-files-")
        index: list[bytes] = []
        pad = bytes(_REC - 40)
        buf: list[bytes] = []
        j = 0
        for rec in heapq.merge(*(run(o, c) for o, c in self._runs)):
            if j % _BLOCK == 0:
                index.append(rec[:32])
            buf.append(rec)
            buf.append(pad)
            j += 1
            if len(buf) >= 2048:
                out.write(b"".join(buf))
                buf.clear()
        out.write(b"".join(buf))
        out.flush()
        scratch.close()
        self._scratch = None
        self._runs = []
        self._chunk = None
        self._file, self._fd, self._index = out, out.fileno(), index

    def close(self) -> None:
        """Close the temporary file of a table on disk (it is unlinked already; it is closed anyway when the table
        is no longer referenced). The table is unusable afterwards."""
        for f in (self._scratch, self._file):
            if f is not None:
                f.close()
        self._scratch = self._file = None
        self._fd = -1

    def __del__(self) -> None:  # the temporary file goes with the table
        try:
            self.close()
        except Exception:
            pass

    @property
    def on_disk(self) -> bool:
        return self._mem is None

    # -- records -----------------------------------------------------------------------------------------------
    def _rec(self, i: int) -> bytes:
        mem = self._mem
        if mem is not None:
            return bytes(mem[_REC * i : _REC * i + _REC])
        return os.pread(self._fd, _REC, _REC * i)

    def _records(self) -> Iterator[tuple[int, bytes]]:
        """``(index, record)`` of every packed blob, in order, read a chunk at a time."""
        mem = self._mem
        n = self.n
        step = 1024
        for k in range(0, n, step):
            m = min(step, n - k)
            buf = bytes(mem[_REC * k : _REC * (k + m)]) if mem is not None else os.pread(self._fd, _REC * m, _REC * k)
            for i in range(m):
                yield k + i, buf[_REC * i : _REC * i + _REC]

    def _put(self, i: int, raw: bytes) -> None:
        """Write the digest of blob ``i``."""
        mem = self._mem
        if mem is not None:
            mem[_REC * i + _DIG : _REC * i + _REC] = raw + b"\x01"
        else:
            os.pwrite(self._fd, raw + b"\x01", _REC * i + _DIG)

    # -- lookups -----------------------------------------------------------------------------------------------
    def blob_index(self, path: str) -> int:
        """The index of the canonical blob at ``path``, or -1."""
        if not self.n:
            return -1
        raw = canonical_blob(path)
        return -1 if raw is None else self.find(raw)

    def find(self, raw: bytes) -> int:
        found = self._locate(raw)
        return -1 if found is None else found[0]

    def _locate(self, raw: bytes) -> tuple[int, bytes] | None:
        """``(index, record)`` of the packed blob named ``raw``, or None (on disk: one read)."""
        mem = self._mem
        if mem is not None:
            lo, hi = 0, self.n
            while lo < hi:
                mid = (lo + hi) >> 1
                k = mem[_REC * mid : _REC * mid + 32]
                if k < raw:
                    lo = mid + 1
                elif k > raw:
                    hi = mid
                else:
                    return mid, bytes(mem[_REC * mid : _REC * mid + _REC])
            return None
        # the last block whose first name is <= raw, then a binary search in that block
        j = bisect.bisect_right(self._index, raw)
        if j == 0:
            return None
        first = (j - 1) * _BLOCK
        m = min(_BLOCK, self.n - first)
        block = os.pread(self._fd, _REC * m, _REC * first)
        lo, hi = 0, m
        while lo < hi:
            mid = (lo + hi) >> 1
            k = block[_REC * mid : _REC * mid + 32]
            if k < raw:
                lo = mid + 1
            elif k > raw:
                hi = mid
            else:
                return first + mid, block[_REC * mid : _REC * mid + _REC]
        return None

    def _blob_record(self, path: str) -> bytes | None:
        """The record of the canonical blob at ``path``, or None."""
        if not self.n:
            return None
        raw = canonical_blob(path)
        if raw is None:
            return None
        found = self._locate(raw)
        return None if found is None else found[1]

    def blob_path(self, i: int) -> str:
        return _blob_name(self._rec(i)[:32])

    def blob_keys(self) -> Iterator[bytes]:
        """The 32 bytes each packed blob's name spells, in order."""
        for _, rec in self._records():
            yield rec[:32]

    def blob_paths(self) -> Iterator[str]:
        for _, rec in self._records():
            yield _blob_name(rec[:32])

    def blob_items(self) -> Iterator[tuple[int, str, int]]:
        """``(index, path, size)`` of every packed blob, in order."""
        for i, rec in self._records():
            yield i, _blob_name(rec[:32]), int.from_bytes(rec[32:40], "little")

    def get(self, path: str, default=None):
        v = self.other.get(path)
        if v is not None:
            return v
        rec = self._blob_record(path)
        return default if rec is None else int.from_bytes(rec[32:40], "little")

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
        for _, p, size in self.blob_items():
            yield p, size

    # -- digests -----------------------------------------------------------------------------------------------
    def set_digest(self, path: str, hexd: str, size: int) -> None:
        i = -1 if path in self.other else self.blob_index(path)
        if i < 0:
            self.other_digests[path] = (hexd, size)
        else:
            self._put(i, bytes.fromhex(hexd))

    def set_blob_digest(self, i: int, raw: bytes) -> None:
        self._put(i, raw)

    def digest(self, path: str) -> tuple[str, int] | None:
        """``(sha256 hex, size)`` of a file read, or None."""
        d = self.other_digests.get(path)
        if d is not None:
            return d
        rec = self._blob_record(path)
        if rec is None or not rec[_HAS]:
            return None
        return rec[_DIG:_HAS].hex(), int.from_bytes(rec[32:40], "little")

    def has_digest(self, path: str) -> bool:
        return self.digest(path) is not None

    def blob_digests(self) -> Iterator[tuple[int, str, int, str | None]]:
        """``(index, path, size, sha256 hex or None)`` of every packed blob, in order."""
        for i, rec in self._records():
            yield i, _blob_name(rec[:32]), int.from_bytes(rec[32:40], "little"), (
                rec[_DIG:_HAS].hex() if rec[_HAS] else None
            )

    def name_digests(self) -> None:
        """Set every packed blob's digest to its name: the blobs a writer created, each at the path its digest of
        the bytes it wrote names (:class:`Written`). Done a chunk of records at a time."""
        if not self._frozen:
            raise RuntimeError("freeze the table first")
        n = self.n
        step = 1024
        for k in range(0, n, step):
            m = min(step, n - k)
            mem = self._mem
            buf = mem if mem is not None else bytearray(os.pread(self._fd, _REC * m, _REC * k))
            base = _REC * k if mem is not None else 0
            for i in range(m):
                o = base + _REC * i
                buf[o + _DIG : o + _HAS] = buf[o : o + 32]
                buf[o + _HAS] = 1
            if mem is None:
                os.pwrite(self._fd, buf, _REC * k)

    def unhashed(self) -> Iterator[tuple[int, str]]:
        """``(index, path)`` of the packed blobs without a digest, in order."""
        for i, rec in self._records():
            if not rec[_HAS]:
                yield i, _blob_name(rec[:32])

    def sealed_entries(self) -> Iterator[tuple[str, str, int]]:
        """``(path, sha256 hex, size)`` of every file of [SEAL-1] read and hashed, in [SEAL-3] order (the UTF-8
        bytes of the paths), built one by one."""
        others = sorted(
            ((p, h, s) for p, (h, s) in self.other_digests.items() if is_sealed_path(p) and p in self.other),
            key=lambda e: e[0].encode("utf-8"),
        )
        return heapq.merge(others, self._blob_entries(), key=lambda e: e[0].encode("utf-8"))

    def _blob_entries(self) -> Iterator[tuple[str, str, int]]:
        for _, rec in self._records():
            if rec[_HAS]:
                yield _blob_name(rec[:32]), rec[_DIG:_HAS].hex(), int.from_bytes(rec[32:40], "little")


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


# what walk() gives for an entry whose name is not UTF-8: neither a file nor a folder (reported, never opened)
_NOT_UTF8 = os.stat_result((0,) * 10)


def walk(top: str | Path, prefix: str = "") -> Iterator[tuple[str, os.stat_result]]:
    """Every entry below ``top`` that is not a folder, as ``(prefix + relative path, lstat result)``.

    Entries are examined with ``lstat`` only: a link is reported as the link, never followed or opened, and
    folders are descended into (an empty folder yields nothing). An entry whose name is not UTF-8 (a file or a
    folder) is given as one entry, its name's bytes beyond UTF-8 written ``\\xNN``, with a mode that is neither a
    file nor a folder: the caller reports it as it reports a link or a device, and never opens it."""
    stack = [(prefix, os.fspath(top))]
    while stack:
        rel, absdir = stack.pop()
        try:
            it = os.scandir(absdir)
        except OSError:
            continue
        with it:
            for entry in it:
                name = entry.name
                if not name.isascii():
                    try:
                        name.encode("utf-8")
                    except UnicodeEncodeError:  # not UTF-8 (os.scandir's surrogateescape form): [RUN-3] breaks it
                        yield rel + os.fsencode(name).decode("utf-8", "backslashreplace"), _NOT_UTF8
                        continue
                relpath = rel + name
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


class Written:
    """The files a run writer created in its own private folder, each with the SHA-256 and size of the bytes it
    wrote: the :class:`~aefgate.aef.builder.RunBuilder`'s list, which a verification before sealing takes
    (``verify_run(..., written=)``, ``seal_run(..., written=)``) instead of reading back the files it does not
    parse (the blobs, above all): the folder is only listed, to find that it holds exactly the files written, each
    of the size written (else it is scanned and read as usual). The verification still reads and checks every file
    it parses (run.json, metrics.json, summary.json and every NDJSON file, hashed as read).

    A blob is added by its digest (:meth:`add_blob`): the writer names each blob by the digest it computed of the
    bytes it wrote, so its path is ``blobs/sha256/<ab>/<hex>`` of that digest and its digest is its name. Blobs are
    kept in a :class:`Files` table (memory bounded as a scan's: on disk past ``AEFGATE_SPILL_FILES``); the other
    files (a few) in a dict. Used once: :meth:`scan` freezes the table."""

    __slots__ = ("files", "digests")

    def __init__(self) -> None:
        self.files = Files()
        self.digests: dict[str, tuple[str, int]] = {}  # path -> (sha256 hex, size) of the files other than blobs

    def add(self, path: str, hexd: str, size: int) -> None:
        """A file the writer created (not a blob), with the SHA-256 (hex) and size of the bytes it wrote."""
        self.digests[path] = (hexd, size)

    def add_blob(self, raw: bytes, size: int) -> None:
        """A blob the writer created at its canonical path, named by ``raw``, the 32-byte SHA-256 of its bytes."""
        self.files.add_blob(raw, size)

    def __len__(self) -> int:
        return len(self.digests) + self.files.n

    def scan(self, run_dir: str | Path, *, max_files: int = MAX_FILES) -> Scan | None:
        """The :class:`Scan` of ``run_dir`` as written, every file's digest set (a blob's: its name). The folder is
        listed (names, entry types and sizes; no file is read): None when it holds anything else than the files
        written (a file more or less, one whose size changed, a link, a folder where a file was, a name that is not
        UTF-8): then it is to be scanned and read as usual, and its problems found as they are in any folder."""
        files = self.files
        if len(self) > max_files:
            return None
        for p, (_, size) in self.digests.items():
            if p == OVERLAYS or p.startswith("overlays/"):
                return None  # (a run writer writes no overlay)
            files.add(p, size)
        files.freeze()
        if not self._listed(os.fspath(run_dir)):
            return None
        files.name_digests()
        for p, (hexd, size) in self.digests.items():
            files.set_digest(p, hexd, size)
        return Scan(files=files)

    def _listed(self, root: str) -> bool:
        """Whether the regular files below ``root`` are exactly the files written, each of the size written: the
        packed blobs compared a ``blobs/sha256/<xx>/`` folder at a time with the table (both in name order), the
        other files one by one."""
        files = self.files
        others = dict(files.other)
        prefixes: list[str] = []
        stack = [("", root)]
        while stack:
            rel, absdir = stack.pop()
            try:
                it = os.scandir(absdir)
            except OSError:
                return False
            with it:
                for entry in it:
                    name = entry.name
                    if not name.isascii():
                        try:
                            name.encode("utf-8")
                        except UnicodeEncodeError:
                            return False
                    relpath = rel + name
                    if entry.is_dir(follow_symlinks=False):
                        if rel == _BLOB_DIR and _PREFIX.fullmatch(name):
                            prefixes.append(name)
                        else:
                            stack.append((relpath + "/", entry.path))
                    elif not entry.is_file(follow_symlinks=False) or relpath not in others:
                        return False
                    elif others.pop(relpath) != entry.stat(follow_symlinks=False).st_size:
                        return False
        if others:
            return False
        # the blobs: a blobs/sha256/<xx>/ folder at a time against the table's names with that prefix (in order)
        prefixes.sort()
        base = os.path.join(root, "blobs", "sha256")
        k = 0
        for prefix, group in itertools.groupby(files.blob_items(), key=lambda e: e[1][13:15]):
            if k >= len(prefixes) or prefixes[k] != prefix:
                return False
            k += 1
            listed = _regular_files(os.path.join(base, prefix))
            if listed is None or listed != [(p[16:], size) for _, p, size in group]:
                return False
        return k == len(prefixes)


def _regular_files(folder: str) -> list[tuple[str, int]] | None:
    """``(name, size)`` of the entries of ``folder`` in name order, or None when one is not a regular file with an
    ASCII name (or the folder cannot be listed)."""
    try:
        with os.scandir(folder) as it:
            out = []
            for entry in it:
                if not entry.name.isascii() or not entry.is_file(follow_symlinks=False):
                    return None
                out.append((entry.name, entry.stat(follow_symlinks=False).st_size))
    except OSError:
        return None
    out.sort()
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
