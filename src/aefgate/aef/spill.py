"""Bounded memory for the run writer, the verifier and the sealer: state that grows with a run goes to a temporary SQLite file
once it passes a fixed bound (docs/design/bounded-memory.md).

- :class:`SpillDb`: a private SQLite database in a temporary folder (no journal, no fsync, a small page cache):
  what the rules across lines and files need, kept on disk; removed on :meth:`SpillDb.close`.
- :class:`Floats`: a list of floats kept in an ``array('d')`` up to a bound, then on disk; :meth:`Floats.at` reads
  the k-th smallest (a summary's median).
- :class:`SpillIndex`: a set or map of digest keys, the latest few thousand in a dict, the rest in a temporary
  SQLite file behind a Bloom filter (the run writer's resultIds, blobs and evidence ids; an importer's dedupe).
- :class:`StrSet`: a set of strings, the run writer's numbered ids as bits, the others as :class:`SpillIndex`
  keeps its keys (the verifier's evidence ids).
- :func:`bound`: a bound, overridable by an environment variable (the tests set them to a few lines or files to
  take the spilled paths on small runs).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import tempfile
from array import array
from typing import Any

CACHE_KIB = 1024  # each SpillDb's page cache (the lines are appended; the end reads them in order)


def bound(env: str, default: int) -> int:
    """``default``, or the integer in the environment variable ``env`` (0: always spill)."""
    v = os.environ.get(env)
    if v is None or v == "":
        return default
    return max(0, int(v))


class SpillDb:
    """A throw-away SQLite database in its own temporary folder, in autocommit-free bulk mode."""

    def __init__(self, cache_kib: int = CACHE_KIB):
        self.dir = tempfile.mkdtemp(prefix="aefgate-spill-")
        self.path = os.path.join(self.dir, "spill.db")
        try:
            self.conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            c = self.conn
            c.execute("PRAGMA journal_mode=OFF")
            c.execute("PRAGMA synchronous=OFF")
            c.execute("PRAGMA temp_store=FILE")
            c.execute(f"PRAGMA cache_size=-{int(cache_kib)}")
            c.execute("PRAGMA mmap_size=0")  # mapped pages would count in the resident set
            c.execute("BEGIN")
        except BaseException:
            shutil.rmtree(self.dir, ignore_errors=True)
            raise
        self.execute = self.conn.execute
        self.executemany = self.conn.executemany

    def one(self, sql: str, args=()):
        """The first row of a query, or None."""
        return self.conn.execute(sql, args).fetchone()

    def close(self) -> None:
        conn, self.conn = getattr(self, "conn", None), None
        try:
            if conn is not None:
                conn.close()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


class Floats:
    """Floats appended one by one: in memory (8 bytes each) up to ``limit`` of them, then in a :class:`SpillDb`."""

    __slots__ = ("limit", "mem", "db", "count", "_buf")

    def __init__(self, limit: int):
        self.limit = limit
        self.mem: array | None = array("d")
        self.db: SpillDb | None = None
        self.count = 0
        self._buf: list = []

    def append(self, v: float) -> None:
        self.count += 1
        mem = self.mem
        if mem is not None:
            mem.append(v)
            if len(mem) > self.limit:
                self.db = SpillDb(cache_kib=1024)
                self.db.execute("CREATE TABLE v(x REAL NOT NULL)")
                self._buf = [(x,) for x in mem]
                self.mem = None
                self._flush()
            return
        buf = self._buf
        buf.append((v,))
        if len(buf) >= 4096:
            self._flush()

    def _flush(self) -> None:
        if self._buf:
            self.db.executemany("INSERT INTO v VALUES (?)", self._buf)
            self._buf = []

    def at(self, ks: list[int]) -> list[float]:
        """The values of ranks ``ks`` (0-based) in ascending order (as ``sorted`` would put them)."""
        if self.mem is not None:
            vals = sorted(self.mem)
            return [vals[k] for k in ks]
        self._flush()
        lo, hi = min(ks), max(ks)
        rows = [r[0] for r in self.db.execute("SELECT x FROM v ORDER BY x LIMIT ? OFFSET ?", (hi - lo + 1, lo))]
        return [rows[k - lo] for k in ks]

    def close(self) -> None:
        if self.db is not None:
            self.db.close()
            self.db = None

    def __del__(self):  # an accumulator dropped without close(): remove its file
        try:
            self.close()
        except Exception:
            pass


class SpillIndex:
    """A set of keys (or a map of keys to values) whose memory does not grow with the number of keys: the latest
    ``hot`` keys in a dict, the others in a private temporary SQLite database on disk (created at the first spill,
    deleted when closed), and a Bloom filter of fixed size (``bloom_bytes``) in front of it, so a key that was never
    added is answered without a query (nearly always: its false positives cost one query, never a wrong answer).

    Keys are ``bytes`` taken as uniformly random (a SHA-256 or BLAKE2 digest of at least 12 bytes, as the Bloom
    filter takes its positions from the key's bytes); :meth:`key` makes one of anything else. Values are what
    SQLite stores (int, str, bytes; not None). A key is added once (:meth:`add` of a key already there replaces its
    value but counts it again): callers look it up first, as they must to refuse a duplicate anyway.

    Used by :class:`RunBuilder` (resultIds, blobs, evidence ids given by the caller) and by importers (content seen,
    samples seen): with a few thousand keys it never touches the disk.
    """

    __slots__ = ("_hot", "_limit", "_bloom", "_mask", "_db", "_n")

    def __init__(self, *, hot: int = 4096, bloom_bytes: int = 1 << 19):
        self._hot: dict[bytes, Any] = {}
        self._limit = hot
        self._bloom: bytearray | None = None  # made at the first spill
        self._mask = bloom_bytes * 8 - 1
        self._db: Any = None
        self._n = 0

    @staticmethod
    def key(*parts: str | int | None) -> bytes:
        """A 16-byte key for a tuple of strings, integers and None (BLAKE2b of an unambiguous encoding)."""
        h = hashlib.blake2b(digest_size=16)
        for p in parts:
            if p is None:
                h.update(b"n")
            elif isinstance(p, int):
                h.update(b"i%d;" % p)
            else:
                raw = p.encode("utf-8", "surrogatepass")
                h.update(b"s%d:" % len(raw))
                h.update(raw)
        return h.digest()

    def __len__(self) -> int:
        return self._n

    def _bits(self, k: bytes) -> tuple[int, int, int]:
        x = int.from_bytes(k[:12], "little")
        m = self._mask
        return x & m, (x >> 32) & m, (x >> 64) & m

    def get(self, k: bytes) -> Any:
        """The value of ``k``, or None when it was never added."""
        v = self._hot.get(k)
        if v is not None or self._db is None:
            return v
        bloom = self._bloom
        for b in self._bits(k):
            if not bloom[b >> 3] & (1 << (b & 7)):
                return None
        row = self._db.execute("SELECT v FROM t WHERE k = ?", (k,)).fetchone()
        if row is None:
            return None
        self._hot[k] = row[0]  # found on disk: kept at hand, since a key asked for once is often asked for again
        if len(self._hot) >= self._limit:
            self._spill()
        return row[0]

    def __contains__(self, k: bytes) -> bool:
        return self.get(k) is not None

    def add(self, k: bytes, value: Any = 1) -> None:
        self._hot[k] = value
        self._n += 1
        if len(self._hot) >= self._limit:
            self._spill()

    def _spill(self) -> None:
        if self._db is None:
            db = SpillDb(cache_kib=512)
            db.execute("CREATE TABLE t (k BLOB PRIMARY KEY, v) WITHOUT ROWID")
            self._db = db
            self._bloom = bytearray((self._mask + 1) // 8)
        bloom = self._bloom
        assert bloom is not None
        for k in self._hot:
            for b in self._bits(k):
                bloom[b >> 3] |= 1 << (b & 7)
        # in key order: each page of the table's B-tree is visited once per spill, not once per key
        self._db.executemany("INSERT OR REPLACE INTO t VALUES (?, ?)", sorted(self._hot.items()))
        self._hot = {}

    def close(self) -> None:
        """Delete the database on disk (the index is empty afterwards)."""
        db, self._db = self._db, None
        if db is not None:
            db.close()
        self._hot = {}
        self._bloom = None
        self._n = 0


class StrSet:
    """A set of strings whose memory does not grow with their number (the verifier's evidence ids).

    - Strings of the form ``numbered`` + a number (ASCII digits, no leading zero, below ``max_number``: what the
      run writer makes, ``E-1``, ``E-2``...) are one bit each in a bitmap as long as the largest number.
    - Others: the latest ``hot`` in a set; beyond, in a private temporary SQLite database (the UTF-8 bytes of
      each string, exact) behind a Bloom filter of fixed size, as :class:`SpillIndex`.

    :meth:`add` tells whether the string was there already (one lookup for a duplicate check). Before forking
    processes that read it, call :meth:`freeze` (commits the database); a forked process opens its own
    read-only connection at its first lookup on disk. It answers exactly as a ``set`` would."""

    __slots__ = ("_prefix", "_max", "_bits", "_hot", "_limit", "_bloom", "_mask", "_db", "_pid", "_child")

    def __init__(self, *, numbered: str | None = None, hot: int = 4096, bloom_bytes: int = 1 << 19,
                 max_number: int = 1 << 24):
        self._prefix = numbered
        self._max = max_number
        self._bits = bytearray()
        self._hot: set[str] = set()
        self._limit = hot
        self._bloom: bytearray | None = None
        self._mask = bloom_bytes * 8 - 1
        self._db: SpillDb | None = None
        self._pid = os.getpid()
        self._child: Any = None  # (pid, connection) in a forked process

    def _number(self, s: str) -> int:
        p = self._prefix
        if p is None or not s.startswith(p):
            return -1
        d = s[len(p) :]
        if not d or len(d) > 12 or not d.isascii() or not d.isdigit() or d[0] == "0":
            return -1
        n = int(d)
        return n if n < self._max else -1

    def _bits_of(self, raw: bytes) -> tuple[int, int, int]:
        x = int.from_bytes(hashlib.blake2b(raw, digest_size=12).digest(), "little")
        m = self._mask
        return x & m, (x >> 32) & m, (x >> 64) & m

    def __contains__(self, s: str) -> bool:
        n = self._number(s)
        if n >= 0:
            bits = self._bits
            return (n >> 3) < len(bits) and bool(bits[n >> 3] & (1 << (n & 7)))
        if s in self._hot:
            return True
        if self._db is None:
            return False
        raw = s.encode("utf-8", "surrogatepass")
        bloom = self._bloom
        for b in self._bits_of(raw):
            if not bloom[b >> 3] & (1 << (b & 7)):
                return False
        return self._query(raw)

    def _query(self, raw: bytes) -> bool:
        pid = os.getpid()
        if pid == self._pid:
            conn = self._db.conn
        else:  # a forked process: its own connection (the parent's is not to be used across a fork)
            if self._child is None or self._child[0] != pid:
                conn = sqlite3.connect(f"file:{self._db.path}?mode=ro", uri=True, isolation_level=None)
                conn.execute("PRAGMA cache_size=-256")
                conn.execute("PRAGMA mmap_size=0")
                self._child = (pid, conn)
            conn = self._child[1]
        return conn.execute("SELECT 1 FROM t WHERE k = ?", (raw,)).fetchone() is not None

    def add(self, s: str) -> bool:
        """Add ``s``; True when it was there already."""
        n = self._number(s)
        if n >= 0:
            bits = self._bits
            i = n >> 3
            if i >= len(bits):
                bits.extend(bytes(max(i + 1 - len(bits), len(bits))))  # doubling, up to max_number bits
            had = bool(bits[i] & (1 << (n & 7)))
            bits[i] |= 1 << (n & 7)
            return had
        if s in self:
            return True
        self._hot.add(s)
        if len(self._hot) >= self._limit:
            self._spill()
        return False

    def _spill(self) -> None:
        if self._db is None:
            db = SpillDb(cache_kib=512)
            db.execute("CREATE TABLE t (k BLOB PRIMARY KEY) WITHOUT ROWID")
            self._db = db
            self._bloom = bytearray((self._mask + 1) // 8)
        bloom = self._bloom
        raws = sorted(s.encode("utf-8", "surrogatepass") for s in self._hot)
        for raw in raws:
            for b in self._bits_of(raw):
                bloom[b >> 3] |= 1 << (b & 7)
        self._db.executemany("INSERT INTO t VALUES (?)", [(r,) for r in raws])
        self._hot = set()

    def freeze(self) -> None:
        """Make what is on disk readable by other connections (forked processes)."""
        db = self._db
        if db is not None and db.conn.in_transaction:
            db.execute("COMMIT")

    def close(self) -> None:
        db, self._db = self._db, None
        if db is not None:
            db.close()
        self._hot = set()
        self._bits = bytearray()
        self._bloom = None
