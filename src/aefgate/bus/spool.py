"""The publish spool: the events a publish has not had acknowledged yet, on disk (docs/design/bus.md, "Spool").

A spool is a folder::

    spool.json          {"spool": "aefgate-publish", "version": 1, "generation": g, "state": "publishing"|"closed",
                         "pending": n, "destination": URL, "options": {...}, "run": PATH, ...}
    events-<g>.jsonl    AEP events, one per line (compact JSON), in publish order
    acked-<g>.log       the 0-based line numbers of events-<g>.jsonl that were acknowledged, one per line
    lock                held (flock) by the process using the spool

The pending events are the lines of ``events-<g>.jsonl`` whose number is not in ``acked-<g>.log``. An event is
written and fsynced to the events file *before* it is sent (write-ahead), so an event that reached the destination
without an acknowledgement is always in the spool; acknowledgements are appended and fsynced per chunk, so a crash
can only leave an acknowledged event marked pending (a harmless re-send: the ids are deterministic, AEP-4). When a
publish ends, the spool is compacted: the pending lines are copied to ``events-<g+1>.jsonl`` (fsynced),
``spool.json`` is rewritten atomically with generation ``g+1`` and ``state: closed``, then the old files go. A
crash at any point leaves one consistent generation.

Memory: the acknowledged set is a bitmap over line numbers (one bit per event), the events themselves are streamed.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import Any, Iterable, Iterator

from aefgate.errors import Refusal
from aefgate.aef import jsonio
from aefgate.fsutil import atomic_write, check_destination, fsync_dir, write_lines

SPOOL_KIND = "aefgate-publish"
SPOOL_VERSION = 1


class Bitmap:
    """A growable set of small non-negative integers (one bit each)."""

    __slots__ = ("_b",)

    def __init__(self) -> None:
        self._b = bytearray()

    def add(self, i: int) -> None:
        k = i >> 3
        if k >= len(self._b):
            self._b.extend(bytes(k + 1 - len(self._b) + 1024))
        self._b[k] |= 1 << (i & 7)

    def __contains__(self, i: int) -> bool:
        k = i >> 3
        return k < len(self._b) and bool(self._b[k] & (1 << (i & 7)))


class Spool:
    """An open spool (created by :meth:`create`, reopened by :meth:`open`). Not thread-safe: one asyncio loop."""

    def __init__(self, root: Path, meta: dict, lock_fd: int) -> None:
        self.root = root
        self.meta = meta
        self._lock_fd = lock_fd
        self.generation: int = meta["generation"]
        self._events = None  # the events file, open for appending (a new spool only)
        self._acked = open(self._acked_path(self.generation), "ab")
        self._acked_buf: list[bytes] = []
        self.acked = Bitmap()
        self.count = 0  # lines in the events file
        self.incomplete_tail = False
        self._closed = False

    # -- paths -----------------------------------------------------------------------------------------------------

    def _events_path(self, g: int) -> Path:
        return self.root / f"events-{g}.jsonl"

    def _acked_path(self, g: int) -> Path:
        return self.root / f"acked-{g}.log"

    # -- creation and reopening -------------------------------------------------------------------------------------

    @staticmethod
    def _lock(root: Path) -> int:
        fd = os.open(root / "lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise Refusal("PUB-3", "the spool is in use by another publish", str(root)) from None
        return fd

    @classmethod
    def check_new(cls, root: Path) -> None:
        """Refuse a spool folder that exists and is not empty (OUT-1), before anything is written."""
        check_destination(root)

    @classmethod
    def create(cls, root: Path, meta: dict) -> "Spool":
        cls.check_new(root)
        root.mkdir(parents=True, exist_ok=True)
        os.chmod(root, 0o700)  # the events are the run's evidence (the destination is kept without credentials)
        fd = cls._lock(root)
        meta = {"spool": SPOOL_KIND, "version": SPOOL_VERSION, "generation": 0, "state": "publishing",
                "pending": None, **meta}
        open(root / "events-0.jsonl", "xb").close()
        open(root / "acked-0.log", "xb").close()
        _write_meta(root, meta)
        sp = cls(root, meta, fd)
        sp._events = open(sp._events_path(0), "ab")
        return sp

    @classmethod
    def open(cls, root: Path) -> "Spool":
        if not root.is_dir():
            raise Refusal("PUB-3", "no such spool folder", str(root))
        path = root / "spool.json"
        if not path.is_file():
            raise Refusal("PUB-3", "not a publish spool: no spool.json", str(root))
        try:
            meta = jsonio.read_json(path)
        except Exception as e:  # a damaged spool: say which
            raise Refusal("PUB-3", f"spool.json does not read: {e}", str(path)) from None
        if meta.get("spool") != SPOOL_KIND or meta.get("version") != SPOOL_VERSION \
                or type(meta.get("generation")) is not int:
            raise Refusal("PUB-3", f"not a version {SPOOL_VERSION} publish spool", str(path))
        fd = cls._lock(root)
        sp = cls(root, meta, fd)
        try:
            sp._load()
        except BaseException:
            sp.close()
            raise
        return sp

    def _load(self) -> None:
        g = self.generation
        if not self._events_path(g).is_file():
            raise Refusal("PUB-3", f"the spool has no events-{g}.jsonl", str(self.root))
        n = 0
        with open(self._events_path(g), "rb") as f:
            for raw in f:
                if not raw.endswith(b"\n"):  # a line cut by a crash was never sent (write-ahead): dropped
                    self.incomplete_tail = True
                    break
                n += 1
        self.count = n
        with open(self._acked_path(g), "rb") as f:
            for raw in f:
                if raw.endswith(b"\n") and raw[:-1].isdigit():
                    self.acked.add(int(raw))

    # -- writing ---------------------------------------------------------------------------------------------------

    def append(self, lines: Iterable[bytes]) -> int:
        """Append encoded AEP event lines (each ending in ``\\n``) and fsync; returns the index of the first one."""
        first = self.count
        data = b"".join(lines)
        self._events.write(data)
        self._events.flush()
        os.fsync(self._events.fileno())
        self.count += data.count(b"\n")
        return first

    def append_items(self, items: list) -> None:
        """Append the spool lines of ``items`` (:class:`aefgate.bus.sinks.Item`: their ``line``, else their event
        written now), fsync, and set each item's ``index`` to its line. Runs in a worker thread while the event
        loop sends the chunk before (only one append at a time)."""
        first = self.append([it.line if it.line is not None else jsonio.dump_line(it.event) for it in items])
        for k, it in enumerate(items):
            it.index = first + k

    def take_acks(self) -> bytes:
        """The acknowledgements noted since the last take (for :meth:`write_acks` in a worker thread)."""
        data = b"".join(self._acked_buf)
        self._acked_buf.clear()
        return data

    def write_acks(self, data: bytes) -> None:
        """Append and fsync acknowledgements taken by :meth:`take_acks` (one writer at a time)."""
        if data:
            self._acked.write(data)
            self._acked.flush()
            os.fsync(self._acked.fileno())

    def mark_acked(self, index: int) -> None:
        self.acked.add(index)
        self._acked_buf.append(b"%d\n" % index)

    def sync_acks(self) -> None:
        if self._acked_buf:
            self._acked.write(b"".join(self._acked_buf))
            self._acked_buf.clear()
            self._acked.flush()
            os.fsync(self._acked.fileno())

    # -- reading ---------------------------------------------------------------------------------------------------

    def pending(self) -> Iterator[tuple[int, bytes]]:
        """``(index, line)`` of every event not acknowledged, in order."""
        with open(self._events_path(self.generation), "rb") as f:
            for i, raw in enumerate(f):
                if i >= self.count:
                    break
                if i not in self.acked:
                    yield i, raw

    def pending_count(self) -> int:
        return sum(1 for i in range(self.count) if i not in self.acked)

    # -- closing ---------------------------------------------------------------------------------------------------

    def close(self, *, compact: bool = False, updates: dict | None = None) -> int:
        """Sync the acknowledgements; with ``compact``, keep only the pending events (a new generation, state
        ``closed``). Returns the number of pending events. Releases the lock."""
        try:
            if self._events is not None:
                self._events.flush()
                os.fsync(self._events.fileno())
            self.sync_acks()
            if not compact:
                return self.pending_count()
            g = self.generation
            new = g + 1
            tmp = self._events_path(new)
            with open(tmp, "wb") as out:
                n = write_lines(out, (raw for _i, raw in self.pending()))
                os.fsync(out.fileno())
            with open(self._acked_path(new), "wb") as f:
                os.fsync(f.fileno())
            fsync_dir(self.root)
            self.meta.update(updates or {})
            self.meta.update({"generation": new, "state": "closed", "pending": n})
            _write_meta(self.root, self.meta)  # the switch to the new generation
            for p in (self._events_path(g), self._acked_path(g)):
                try:
                    p.unlink()
                except FileNotFoundError:
                    pass
            fsync_dir(self.root)
            self.generation = new
            return n
        finally:
            for f in (self._events, self._acked):
                if f is not None and not f.closed:
                    f.close()
            if self._lock_fd >= 0:
                os.close(self._lock_fd)
                self._lock_fd = -1


def _write_meta(root: Path, meta: dict[str, Any]) -> None:
    atomic_write(root / "spool.json", jsonio.dumps(meta) + b"\n")


def read_pending(root: str | os.PathLike[str]) -> list[dict]:
    """The AEP events a (closed) spool holds pending, decoded: for tests and tools. Reads the whole list."""
    sp = Spool.open(Path(root))
    try:
        return [jsonio.loads(raw) for _i, raw in sp.pending()]
    finally:
        sp.close()
