"""Reading Inspect AI eval logs, ``.eval`` and ``.json``, one sample at a time.

:func:`open_log` tells the two formats apart by content (a ZIP local header, ``PK\\x03\\x04``, or a JSON object,
``{``), not by name, and gives an :class:`InspectLog`: its :attr:`~InspectLog.header` (the ``EvalLog`` without
``samples``), :attr:`~InspectLog.sample_count` and :meth:`~InspectLog.samples`, an iterator that reads one
sample at a time.

``.eval`` (a ZIP, see :mod:`.zipsafe` for what is refused): the header is ``header.json``; a log that did not
finish has no ``header.json``, and its header is then built as Inspect builds it, from ``_journal/start.json``
(``version``, ``eval``, ``plan``) with ``status: "started"`` and the journaled ``_journal/config_updates/<n>.json``
as ``config_updates`` (:attr:`~InspectLog.from_journal` is then True). Samples are the members
``samples/<id>_epoch_<n>.json``, a name written twice counting once (its last entry, as Inspect reads it), in
Inspect's order (by epoch, then by id, an integer id compared as 20 zero-filled digits), or with
``samples(order="case")`` by id, then epoch (each sample's epochs one after the other, so a reader of the samples
can be done with a sample when its id changes); a member is decompressed as a stream and parsed when it is
complete, and nothing else is held.

Reductions (``reductions.json`` in a ``.eval``, ``reductions`` in a ``.json``) are not in the header: they grow with
the samples. :meth:`~InspectLog.reductions` gives them whole (a list, or None when the log has none), and
:meth:`~InspectLog.reduction_events` one reduced score at a time, read as a stream from a ``.eval``.

``.json``: the file is read incrementally (:class:`.jsontext.JsonStream`): opening it reads it once, keeping the
members of the log but ``samples`` and counting (and checking) the samples; :meth:`~InspectLog.samples` reads it
again from where the ``samples`` array starts. Samples come in the file's order.

Both: ``events_data``, the pool of messages and calls in which Inspect stores the inputs of its model events
(``input_refs``, ``call.call_refs``), is resolved into the events as Inspect does when it reads a log, unless
``samples(resolve_events=False)``. The JSON is read by :mod:`.jsontext` (``NaN`` read, ``Infinity`` refused).
"""

from __future__ import annotations

import os
import re
import sqlite3
from array import array
from pathlib import Path
from typing import Any, BinaryIO, Iterator, Literal

from aefgate.errors import Refusal
from aefgate.formats.inspect import jsontext, rules
from aefgate.formats.inspect.zipsafe import Archive
from aefgate.fsutil import input_file_problem

HEADER_JSON = "header.json"
REDUCTIONS_JSON = "reductions.json"
SUMMARIES_JSON = "summaries.json"
START_JSON = "_journal/start.json"
SAMPLES_DIR = "samples/"
JOURNAL_SUMMARIES = "_journal/summaries/"
JOURNAL_CONFIG_UPDATES = "_journal/config_updates/"

_SAMPLE_NAME = re.compile(r"^samples/(?P<id>.+)_epoch_(?P<epoch>[0-9]+)\.json$", re.S)
_INT_ID = re.compile(r"^-?(?:0|[1-9][0-9]*)$")
_JOURNAL_ENTRY = re.compile(r"^(?P<n>[0-9]+)\.json$")

_SNIFF = 4096


def _sort_key(epoch: int, sample_id: str) -> tuple[int, str]:
    """Inspect's ``sort_samples`` key from a member name: ``(epoch, id)``, an integer id zero-filled to 20.

    The name holds ``str(id)``, so an integer id and a string of digits cannot be told apart: a name whose id is
    written as Python writes an integer is taken for one.
    """
    return epoch, sample_id.zfill(20) if _INT_ID.match(sample_id) else sample_id


class Sample(dict):
    """One sample as read from a log: the dict of its JSON, with ``facts``, the :class:`~.jsontext.TextFacts` of
    its text (measured before ``events_data`` was resolved, which nests pool entries at most 3 levels deeper)."""

    __slots__ = ("facts",)

    def __init__(self, value: dict, facts: jsontext.TextFacts):
        super().__init__(value)
        self.facts = facts


class SampleStream:
    """What :meth:`InspectLog.samples` returns: an iterator over the samples that also says where they come from
    (``log``), in which ``order`` (``"inspect"``: by epoch, then id; ``"case"``: by id, then epoch; ``"file"``: as
    a ``.json`` holds them) and whether one was taken yet (``started``)."""

    def __init__(self, log: InspectLog, order: str, resolve_events: bool, it: Iterator[Sample]):
        self.log = log
        self.order = order
        self.resolve_events = resolve_events
        self.started = False
        self._it = it

    def __iter__(self) -> SampleStream:
        return self

    def __next__(self) -> Sample:
        self.started = True
        return next(self._it)


RESOLVE_EXTRA_DEPTH = 3  # resolving events_data: a call pool entry goes from depth 4 to 7 (events/n/call/request/key/n)


class InspectLog:
    """An Inspect eval log opened for reading (see :func:`open_log`).

    - ``path``: the file; ``format``: ``"eval"`` or ``"json"``;
    - ``header``: the ``EvalLog`` as a dict, without ``samples``;
    - ``sample_count``: the number of samples (for ``.eval``, of distinct sample members; for ``.json``, of
      elements of ``samples``, counted when the file was opened);
    - ``from_journal``: True for a ``.eval`` without ``header.json`` (a log that did not finish), whose header is
      built from ``_journal/start.json``.
    """

    path: Path
    format: Literal["eval", "json"]
    header: dict
    sample_count: int | None
    from_journal: bool

    def __init__(self, path: Path, fmt: Literal["eval", "json"]):
        self.path = path
        self.format = fmt
        self.header = {}
        self.sample_count = None
        self.from_journal = False

    def samples(self, *, resolve_events: bool = True, order: str = "inspect") -> SampleStream:
        """The samples, one at a time: ``order="inspect"`` (a ``.eval``: Inspect's order, by epoch then id) or
        ``"case"`` (a ``.eval``: by id, then epoch); a ``.json`` gives them in its own order whatever ``order``
        says (the stream's ``order`` is then ``"file"``)."""
        if order not in ("inspect", "case"):
            raise ValueError(f"order is 'inspect' or 'case', not {order!r}")
        return self._samples(resolve_events, order)

    def _samples(self, resolve_events: bool, order: str) -> SampleStream:  # pragma: no cover - abstract
        raise NotImplementedError

    def reductions(self) -> list | Any:
        """The log's reductions as Inspect writes them (a list of ``{scorer, reducer, samples}``), whole; None when
        the log has none."""
        return None

    def reduction_events(self) -> Iterator[tuple]:
        """The reductions one reduced score at a time: ``("sample", i, j, value)`` for the ``j``-th element of the
        ``i``-th reduction's ``samples`` list, then ``("end", i, rest)`` with that reduction without its ``samples``
        list (or the element itself when it is not an object; ``samples`` kept when it is not a list). When the
        reductions are not a list: one ``("value", value)``. Nothing when the log has none."""
        value = self.reductions()
        if value is None:
            return
        if not isinstance(value, list):
            yield ("value", value)
            return
        for i, red in enumerate(value):
            if isinstance(red, dict) and isinstance(red.get("samples"), list):
                for j, rs in enumerate(red["samples"]):
                    yield ("sample", i, j, rs)
                red = {k: v for k, v in red.items() if k != "samples"}
            yield ("end", i, red)

    def summaries(self) -> list[dict] | None:
        """The sample summaries a ``.eval`` keeps (``summaries.json``, else the journal's, the last row for an
        ``(id, epoch)`` winning); None for ``.json``, which keeps none. Held whole in memory."""
        return None

    def __repr__(self) -> str:
        return f"InspectLog({str(self.path)!r}, format={self.format!r}, sample_count={self.sample_count})"


class _EvalLog(InspectLog):
    def __init__(self, path: Path):
        super().__init__(path, "eval")
        # the members but samples by name (a name written twice: its last entry wins, as for Inspect's readers), and
        # the sample members' directory indexes in both orders, sorted on disk (SQLite), so that memory holds 4
        # bytes per sample member in each order, not its name
        self._members: dict[str, int] = {}
        db = sqlite3.connect("", isolation_level=None, check_same_thread=False)
        try:
            for pragma in ("journal_mode = OFF", "synchronous = OFF", "cache_size = -512", "temp_store = FILE"):
                db.execute(f"PRAGMA {pragma}")
            db.execute("CREATE TABLE s (name TEXT PRIMARY KEY, epoch TEXT, k TEXT, i INTEGER) WITHOUT ROWID")
            rows: list[tuple[str, str, str, int]] = []

            def on_member(i: int, name: str) -> None:  # the directory is read once, rows go to disk in batches
                row = self._sample_row(i, name)
                if row is not None:
                    rows.append(row)
                    if len(rows) >= 4096:
                        db.executemany("INSERT OR REPLACE INTO s VALUES (?, ?, ?, ?)", rows)
                        rows.clear()

            db.execute("BEGIN")
            self.archive = Archive(path, str(path), on_member=on_member)
            db.executemany("INSERT OR REPLACE INTO s VALUES (?, ?, ?, ?)", rows)
            db.execute("COMMIT")
            # directory indexes (below zipsafe.MAX_MEMBERS): 4 bytes each
            self._by_epoch = array("I", (i for (i,) in db.execute("SELECT i FROM s ORDER BY epoch, k, name")))
            self._by_case = array("I", (i for (i,) in db.execute("SELECT i FROM s ORDER BY k, epoch, name")))
        finally:
            db.close()
        self.sample_count = len(self._by_epoch)
        with self.archive.open() as f:
            self.header = self._read_header(f)

    def _sample_row(self, i: int, name: str) -> tuple[str, str, str, int] | None:
        """``(name, epoch key, id key, directory index)`` of a sample member; another goes to ``_members``."""
        if not name.startswith(SAMPLES_DIR) or not name.endswith(".json"):
            self._members[name] = i
            return None
        found = _SAMPLE_NAME.match(name)
        if found is None:
            raise Refusal(rules.LAYOUT, "a sample member not named samples/<id>_epoch_<n>.json", f"{self.path}!{name}")
        _, key = _sort_key(0, found.group("id"))
        digits = found.group("epoch").lstrip("0") or "0"
        return name, f"{len(digits):05d}{digits}", key, i  # the epoch's text sorts as its number

    def _json(self, f: BinaryIO, name: str) -> Any:
        member = self.archive.member(f, self._members[name])
        return jsontext.loads(self.archive.read(f, member), f"{self.path}!{name}")

    def _object(self, f: BinaryIO, name: str) -> dict:
        value = self._json(f, name)
        if not isinstance(value, dict):
            raise self.archive.refuse(rules.LAYOUT, "a member that is not a JSON object", name)
        return value

    def _journal_entries(self, prefix: str) -> list[str]:
        found = []
        for name in self._members:
            if name.startswith(prefix):
                m = _JOURNAL_ENTRY.match(name[len(prefix):])
                if m:
                    found.append((int(m.group("n")), name))
        return [name for _, name in sorted(found)]

    def _read_header(self, f: BinaryIO) -> dict:
        if HEADER_JSON in self._members:
            header = self._object(f, HEADER_JSON)
            header.pop("samples", None)
        elif START_JSON in self._members:
            start = self._object(f, START_JSON)
            self.from_journal = True
            header = {"version": start.get("version"), "status": "started"}
            for key in ("eval", "plan"):
                if key in start:
                    header[key] = start[key]
            updates = [self._json(f, name) for name in self._journal_entries(JOURNAL_CONFIG_UPDATES)]
            if updates:
                header["config_updates"] = updates
        else:
            raise self.archive.refuse(rules.LAYOUT, f"neither {HEADER_JSON} nor {START_JSON}: not an Inspect .eval "
                                                    "log")
        return header

    def reductions(self) -> Any:
        if REDUCTIONS_JSON not in self._members:
            return None
        with self.archive.open() as f:
            return self._json(f, REDUCTIONS_JSON)

    def reduction_events(self) -> Iterator[tuple]:
        """See :meth:`InspectLog.reduction_events`: ``reductions.json`` decompressed and parsed as a stream, one
        reduced score at a time (the whole member is never in memory)."""
        if REDUCTIONS_JSON not in self._members:
            return
        with self.archive.open() as f:
            src = _ChunkReader(self.archive.stream(f, self.archive.member(f, self._members[REDUCTIONS_JSON])))
            s = jsontext.JsonStream(src, f"{self.path}!{REDUCTIONS_JSON}")
            if s.peek() != "[":
                value = s.value()
                if not s.at_end():
                    raise s.refuse(rules.JSON, "not JSON: text after the value")
                yield ("value", value)
                return
            for i, _ in enumerate(s.elements()):
                if s.peek() != "{":
                    yield ("end", i, s.value())
                else:
                    yield from _reduction_events(s, i)
            if not s.at_end():
                raise s.refuse(rules.JSON, "not JSON: text after the value")

    def _samples(self, resolve_events: bool, order: str) -> SampleStream:
        indexes = self._by_epoch if order == "inspect" else self._by_case
        return SampleStream(self, order, resolve_events, self._iter_samples(resolve_events, indexes))

    def _iter_samples(self, resolve_events: bool, indexes: array) -> Iterator[Sample]:
        with self.archive.open() as f:
            for index in indexes:
                member = self.archive.member(f, index)
                name = member.name
                value, facts = jsontext.loads(self.archive.read(f, member), f"{self.path}!{name}", facts=True)
                if not isinstance(value, dict):
                    raise self.archive.refuse(rules.SAMPLES, "a sample that is not a JSON object", name)
                sample = Sample(value, facts)
                if resolve_events:
                    sample = resolve_events_data(sample, f"{self.path}!{name}")
                yield sample

    def summaries(self) -> list[dict]:
        with self.archive.open() as f:
            if SUMMARIES_JSON in self._members:
                rows = self._json(f, SUMMARIES_JSON)
                names = [SUMMARIES_JSON]
                batches = [rows]
            else:
                names = self._journal_entries(JOURNAL_SUMMARIES)
                batches = [self._json(f, name) for name in names]
        by_key: dict[tuple[str, Any], dict] = {}
        for name, batch in zip(names, batches):
            if not isinstance(batch, list) or not all(isinstance(r, dict) for r in batch):
                raise self.archive.refuse(rules.LAYOUT, "summaries that are not a list of objects", name)
            for row in batch:
                key = (str(row.get("id")), row.get("epoch"))
                by_key.pop(key, None)
                by_key[key] = row
        return list(by_key.values())


class _JsonLog(InspectLog):
    def __init__(self, path: Path):
        super().__init__(path, "json")
        self._samples_at: tuple[int, int, int] | None = None  # (byte offset of '[', line, column)
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            self._identity = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
            self._scan(f)

    def _scan(self, f: BinaryIO) -> None:
        s = jsontext.JsonStream(f, str(self.path), track_bytes=True)
        header: dict = {}
        count = 0
        for key in s.members("the log's object"):
            if key == "samples":
                if s.peek() == "[":
                    self._samples_at = (s.byte_offset(s.pos), *s.location(s.pos))
                    s.stop_tracking_bytes()
                    for _ in _elements(s):
                        count += 1
                else:
                    at = s.pos
                    if s.value() is not None:
                        raise s.refuse(rules.SAMPLES, "samples is not a list", at)
            else:
                header[key] = s.value()
        if not s.at_end():
            raise s.refuse(rules.JSON, "not JSON: text after the log's object")
        self._reductions = header.pop("reductions", None)
        self.header = header
        self.sample_count = count

    def reductions(self) -> Any:
        return self._reductions

    def _samples(self, resolve_events: bool, order: str) -> SampleStream:
        return SampleStream(self, "file", resolve_events, self._iter_samples(resolve_events))

    def _iter_samples(self, resolve_events: bool) -> Iterator[Sample]:
        if self._samples_at is None:
            return
        offset, line, column = self._samples_at
        with open(self.path, "rb") as f:
            st = os.fstat(f.fileno())
            if (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns) != self._identity:
                raise Refusal(rules.DAMAGED, "the file changed since it was opened", str(self.path))
            f.seek(offset)
            s = jsontext.JsonStream(f, str(self.path), line=line, column=column, byte_offset=offset)
            for sample in _elements(s):
                if resolve_events:
                    sample = resolve_events_data(sample, str(self.path))
                yield sample


class _ChunkReader:
    """A binary file-like ``read(n)`` over an iterator of byte chunks (a member decompressed as a stream)."""

    def __init__(self, chunks: Iterator[bytes]):
        self._chunks = chunks
        self._buf = b""

    def read(self, n: int = -1) -> bytes:
        while n < 0 or len(self._buf) < n:
            chunk = next(self._chunks, None)
            if chunk is None:
                break
            self._buf += chunk
        if n < 0:
            out, self._buf = self._buf, b""
        else:
            out, self._buf = self._buf[:n], self._buf[n:]
        return out


def _reduction_events(s: jsontext.JsonStream, i: int) -> Iterator[tuple]:
    """The events of the reduction object at the current position of ``s`` (see :meth:`InspectLog.reduction_events`):
    its ``samples`` list read one element at a time, its other members kept."""
    rest: dict = {}
    for key in s.members():
        if key == "samples" and s.peek() == "[":
            for j, _ in enumerate(s.elements()):
                yield ("sample", i, j, s.value())
        else:
            rest[key] = s.value()
    yield ("end", i, rest)


def _elements(s: jsontext.JsonStream) -> Iterator[dict]:
    """The samples of the array at the current position of ``s``, each checked to be an object."""
    for at in s.elements():
        value, facts = s.value(facts=True)
        if not isinstance(value, dict):
            raise s.refuse(rules.SAMPLES, "a sample that is not a JSON object", at)
        yield Sample(value, facts)


def _expand(refs: Any, pool: list, where: str) -> list:
    """Inspect's ``_expand_refs``: each ``[start, end)`` pair gives ``pool[start:end]``."""
    if not isinstance(refs, list):
        raise Refusal(rules.LAYOUT, "events_data references that are not a list of [start, end] pairs", where)
    out: list = []
    for ref in refs:
        if (not isinstance(ref, list) or len(ref) != 2
                or not all(isinstance(x, int) and not isinstance(x, bool) for x in ref)):
            raise Refusal(rules.LAYOUT, "events_data references that are not a list of [start, end] pairs", where)
        out.extend(pool[ref[0]:ref[1]])
    return out


def resolve_events_data(sample: dict, where: str = "") -> dict:
    """Resolve ``events_data`` into the sample's model events, as Inspect does when it reads a log.

    A model event's ``input_refs`` become its ``input`` (from the message pool), and its ``call.call_refs`` the
    ``call.request`` member named by ``call.call_key`` (``messages`` by default, from the call pool);
    ``events_data`` is removed. As in Inspect, an empty pool resolves nothing. Pool entries are shared, not
    copied, between the events that cite them. Returns ``sample`` (changed in place).
    """
    data = sample.get("events_data")
    if data is None:
        return sample
    if not isinstance(data, dict):
        raise Refusal(rules.LAYOUT, "events_data is not an object", where)
    messages = data.get("messages") or []
    calls = data.get("calls") or []
    if not isinstance(messages, list) or not isinstance(calls, list):
        raise Refusal(rules.LAYOUT, "events_data pools that are not lists", where)
    events = sample.get("events")
    if isinstance(events, list):
        for event in events:
            if not isinstance(event, dict) or event.get("event") != "model":
                continue
            if messages and event.get("input_refs") is not None:
                event["input"] = _expand(event["input_refs"], messages, where)
                del event["input_refs"]
            call = event.get("call")
            if calls and isinstance(call, dict) and call.get("call_refs"):
                request = call.get("request") or {}
                if not isinstance(request, dict):  # Inspect's ModelCall.request is an object
                    raise Refusal(rules.LAYOUT, "a model event's call.request that is not an object, with call_refs",
                                  where)
                request = dict(request)
                request[call.get("call_key") or "messages"] = _expand(call["call_refs"], calls, where)
                call["request"] = request
                call.pop("call_refs", None)
                call.pop("call_key", None)
    del sample["events_data"]
    return sample


def open_log(path: str | os.PathLike) -> InspectLog:
    """Open an Inspect eval log, ``.eval`` or ``.json``, told apart by content.

    Refuses (exit 2): a file that is neither a ZIP archive nor a JSON object (``IN-FMT-1``), and whatever
    :mod:`.zipsafe` and :mod:`.jsontext` refuse; a missing file is ``CLI-1``.
    """
    p = Path(path)
    problem = input_file_problem(p)  # a pipe or a device would block the read
    if problem is not None:
        raise Refusal("CLI-1", problem, str(p))
    try:
        with open(p, "rb") as f:
            head = f.read(_SNIFF)
    except FileNotFoundError:  # removed in between
        raise Refusal("CLI-1", "no such file", str(p)) from None
    if head[:4] == b"PK\x03\x04":
        return _EvalLog(p)
    if head.startswith(b"\xef\xbb\xbf"):
        raise Refusal(rules.JSON, "the log begins with a byte order mark (U+FEFF), which JSON text does not",
                      f"{p}:1:1")
    stripped = head.lstrip(b" \t\r\n")
    if stripped[:1] == b"{" or (not stripped and len(head) == _SNIFF):
        return _JsonLog(p)
    if not head:
        raise Refusal(rules.NOT_A_LOG, "an empty file is not an Inspect log", str(p))
    raise Refusal(rules.NOT_A_LOG, "neither an Inspect .eval log (a ZIP archive) nor a .json log (a JSON object)",
                  str(p))
