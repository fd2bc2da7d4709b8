"""Overlays: the chain of sealed batches, the effective view, and writing a decision (spec 04 §4.2, §4.3).

- :func:`verify_chain` checks ``overlays/`` ([OVL-4], [OVL-5]) and returns a :class:`ChainReport`: every problem as a
  ``(path, code)`` pair in §3.9 order, which batches verify, and where the verified part of the events file ends.
- :func:`compute_view` / :func:`effective_view` give the run as its verified overlays leave it ([OVL-6]..[OVL-10]):
  exactly the §9.2.1 effective-view object for :func:`effective_view`.
- :func:`authorized_redactions`: the blob paths authorized ``redact`` events withhold ([OVL-10]), which the run
  verifier takes as ``withheld_ok`` (``trust.verify_run`` computes them under a policy).
- :func:`decide` appends one event and seals its batch (``overlays/seal-<nnnn>.json``), signing it with a key when
  one is given (``seal-<nnnn>.dsse.json``). It takes an exclusive lock on the events file from reading the chain
  to writing the seal, so concurrent writers never interleave.

How the events file is read (see ``docs/design/decisions.md``, "Overlays"): line by line, each line judged on its
own wherever it is (inside the batches and after them): a line that is blank, holds a CR, is over 4 MiB, or is not
an I-JSON object valid against the reader ``overlay-event`` schema is ``event-invalid`` at its line and nothing
more. A last line without LF is still being written: it is no line (its bytes are ``uncovered`` until a batch
claims them). More than 1,000,000 lines is ``limit`` once at the file: lines beyond are not read, and the batches
within the lines read still stand. More than 19,999 files under ``overlays/`` is ``limit`` once at ``overlays``.

Layering: above the verifier (:func:`decide` appends only to a run that verifies intact) and ``seal.py`` (the run's
seal); below ``trust.py``, the verification under a trust policy, which reads the authorized redactions here.

Nothing here follows a symbolic link: a link (or any other non-regular file) under ``overlays/`` is
``unexpected-file``, even one named like the events file or a seal.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import secrets
import stat
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from aefgate.errors import EXIT_INPUT, EXIT_INTEGRITY, Refusal
from aefgate.formats.aef import jsonio, runfs
from aefgate.formats.aef.schema import validator
from aefgate.formats.aef.seal import STATEMENT_TYPE, build_manifest, read_seal
from aefgate.formats.aef.times import now, parse_time
from aefgate.formats.aef.verifier import order_problems, verify_run

__all__ = [
    "BATCH_PREDICATE",
    "ChainReport",
    "EVENTS",
    "KINDS",
    "PAYLOAD_TYPE",
    "View",
    "authorized_redactions",
    "compute_view",
    "decide",
    "effective_view",
    "load_policy",
    "verify_chain",
]

OVERLAYS = "overlays"
EVENTS = "overlays/events.ndjson"
BATCH_PREDICATE = "https://agenteval.dev/aef/1/overlay-batch"
PAYLOAD_TYPE = "application/vnd.in-toto+json"  # [SIG-1]: the payload type of a batch signature
MAX_BATCHES = 9999  # four digits ([OVL-4])
MAX_OVERLAY_FILES = 19_999  # 9,999 seals, 9,999 signatures and the events file
MAX_ENVELOPE = 56 * jsonio.MIB  # beyond: an envelope verifies for no one ([SIG-1])

# kinds a writer writes (the writer schema's enum), and what each does ([OVL-1])
KINDS = ("approve", "reject", "override", "adjudicate", "waive", "acknowledge", "accept_baseline", "annotate", "redact")
REVIEW_KINDS = frozenset({"approve", "reject"})
STATE_KINDS = frozenset({"override", "adjudicate"})
NOTE_KINDS = frozenset({"acknowledge", "accept_baseline", "annotate"})
STATES = ("passed", "failed", "warn", "inconclusive", "scored", "not_measured", "not_applicable", "skipped", "error")

_SEAL_NAME = re.compile(r"seal-([0-9]{4})\.json\Z")
_SIG_NAME = re.compile(r"seal-([0-9]{4})\.dsse\.json\Z")
_HEX64 = re.compile(r"[0-9a-f]{64}\Z")
_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}\Z")
_CHUNK = 1 << 20

# codes about single events: they never stop the verified batches (§4.3)
EVENT_CODES = frozenset({"event-invalid", "event-id", "target"})


def seal_name(n: int) -> str:
    return f"{OVERLAYS}/seal-{n:04d}.json"


def signature_name(n: int) -> str:
    return f"{OVERLAYS}/seal-{n:04d}.dsse.json"


def line_path(lineno: int) -> str:
    return f"{EVENTS}:{lineno}"


# -- reading the run ----------------------------------------------------------------------------------------------


class _Run:
    """What the chain needs from the run: its runId, its run hash ([SEAL-4]) and, when asked, its results."""

    def __init__(self, root: Path, run_hash: str | None = None):
        self.root = root
        self.run_id: str | None = None
        try:
            doc = jsonio.read_json(root / "run.json")
            if type(doc.get("runId")) is str:
                self.run_id = doc["runId"]
        except (jsonio.JsonProblem, OSError):
            pass
        self._run_hash = run_hash
        self._results: dict[str, str | None] | None = None
        self._sealed_blobs: set[str] | None = None

    @property
    def run_hash(self) -> str:
        """[SEAL-4]: ``seal.json``'s ``predicate.runHash`` when it is valid against the reader seal schema, else the
        run hash recomputed from the files."""
        if self._run_hash is None:
            reading = read_seal(self.root) if (self.root / "seal.json").is_file() else None
            if reading is not None and reading.doc is not None:
                self._run_hash = reading.doc["predicate"]["runHash"]
            else:
                self._run_hash = build_manifest(self.root).run_hash
        return self._run_hash

    @property
    def results(self) -> dict[str, str | None]:
        """``{resultId: sealed state}`` in ``results.ndjson`` order (the first line of an id). A line that reads as
        a JSON object with a string ``resultId`` counts, valid against its schema or not; a file whose framing
        breaks has no line read (§3.9)."""
        if self._results is None:
            out: dict[str, str | None] = {}
            p = self.root / "results.ndjson"
            try:
                if p.is_file() and not p.is_symlink():
                    with open(p, "rb") as f:
                        for _, raw in jsonio.iter_lines(f):
                            if raw is None:
                                continue
                            try:
                                line = jsonio.loads(raw)
                            except jsonio.JsonProblem:
                                continue
                            rid = line.get("resultId")
                            if type(rid) is str and rid not in out:
                                st = line.get("state")
                                out[rid] = st if type(st) is str else None
            except jsonio.JsonProblem:
                out = {}
            self._results = out
        return self._results


# -- listing overlays/ ----------------------------------------------------------------------------------------------


@dataclass
class _Listing:
    events: bool = False  # a regular events file
    seals: dict[int, str] = field(default_factory=dict)  # number -> path
    signatures: set[int] = field(default_factory=set)
    unexpected: list[str] = field(default_factory=list)
    count: int = 0


def _list_overlays(root: Path) -> _Listing:
    """The files under ``overlays/``, with lstat only (never following a link)."""
    out = _Listing()
    top = root / OVERLAYS
    try:
        st = os.lstat(top)
    except OSError:
        return out
    if not stat.S_ISDIR(st.st_mode):
        out.unexpected.append(OVERLAYS)  # a file, a link or a device where the folder should be
        out.count = 1
        return out
    for relpath, st in runfs.walk(top, OVERLAYS + "/"):  # an empty folder is ignored ([RUN-3]'s reading)
        out.count += 1
        name = relpath[len(OVERLAYS) + 1 :]
        if stat.S_ISREG(st.st_mode) and "/" not in name:
            if name == "events.ndjson":
                out.events = True
                continue
            m = _SEAL_NAME.match(name)
            if m:
                out.seals[int(m.group(1))] = relpath
                continue
            m = _SIG_NAME.match(name)
            if m:
                out.signatures.add(int(m.group(1)))
                continue
        out.unexpected.append(relpath)
    return out


# -- the chain ------------------------------------------------------------------------------------------------------


@dataclass
class Batch:
    """One batch seal as read: ``doc`` None when it is missing or not valid (``batch-invalid``, ``limit``)."""

    number: int
    path: str
    doc: dict | None = None
    seal_bytes: bytes | None = None
    codes: list[str] = field(default_factory=list)  # the problems about this batch

    @property
    def offset(self) -> int:
        return int(self.doc["predicate"]["offset"])  # an integral number: 2.0 is the integer 2 ([ENC-4])

    @property
    def end(self) -> int:
        p = self.doc["predicate"]
        return int(p["offset"]) + int(p["length"])


@dataclass
class EventLine:
    """A line of the events file: where it is, the event (None when ``event-invalid``) and whether it takes part in
    the view (a valid event with no ``target`` or later ``event-id`` problem)."""

    lineno: int
    start: int
    end: int
    event: dict | None
    ok: bool
    batch: int = 0  # the verified batch holding it (0: none)


@dataclass
class ChainReport:
    """What the overlay verifier reports ([OVL-5]), and what the effective view is computed from."""

    problems: list[tuple[str, str]]
    run_id: str | None = None
    run_hash: str | None = None
    batches: list[Batch] = field(default_factory=list)  # seal-0001 .. the highest present, in order
    verified: int = 0  # batches 1..verified have no problem about the batch itself
    verified_end: int = 0  # where the verified batches end in the events file
    covered_end: int = 0  # where the claims of the batches end (the furthest claimed byte)
    size: int = 0  # of the events file
    lines: list[EventLine] = field(default_factory=list)  # the lines of the verified batches
    unsealed: int = 0  # lines after the verified batches that a reader reads
    unfinished: int = 0  # bytes of a last line without LF
    over_limit: bool = False
    signatures: set[int] = field(default_factory=set)  # batch numbers with a signature file
    run: Any = field(default=None, repr=False)  # the run as read (its results, once read)

    def to_json(self) -> dict:
        """The §9.3 ``chain`` output."""
        return {"problems": [list(p) for p in self.problems]}

    @property
    def highest(self) -> int:
        return len(self.batches)

    def batch_problems(self) -> list[tuple[str, str]]:
        """The problems that are not about single events."""
        return [p for p in self.problems if p[1] not in EVENT_CODES]


class _EventsFile:
    """The events file, opened once: ranges hashed and bytes read by seeking, lines split as it is streamed."""

    def __init__(self, path: Path, present: bool):
        self.f = open(path, "rb") if present else None
        self.size = os.fstat(self.f.fileno()).st_size if self.f else 0

    def close(self) -> None:
        if self.f is not None:
            self.f.close()

    def byte_at(self, pos: int) -> bytes:
        if self.f is None or pos < 0 or pos >= self.size:
            return b""
        self.f.seek(pos)
        return self.f.read(1)

    def digest(self, offset: int, length: int) -> str:
        h = hashlib.sha256()
        self.f.seek(offset)
        left = length
        while left:
            chunk = self.f.read(min(_CHUNK, left))
            if not chunk:
                break
            h.update(chunk)
            left -= len(chunk)
        return h.hexdigest()

    def lines(self, max_line: int | None = None) -> Iterator[tuple[int, int, int, bytes | None]]:
        """``(lineno, start, end, raw)`` for each line ending in LF (``end`` is after the LF; ``raw`` None for a
        line over ``max_line`` bytes, 4 MiB by default, never held whole). An unfinished last line is not
        yielded."""
        if self.f is None:
            return
        if max_line is None:
            max_line = jsonio.MAX_DOC
        self.f.seek(0)
        lineno = 0
        start = 0
        pos = 0
        parts: list[bytes] = []
        held = 0
        skipping = False
        while True:
            chunk = self.f.read(_CHUNK)
            if not chunk:
                break
            i = 0
            while True:
                j = chunk.find(b"\n", i)
                if j < 0:
                    rest = chunk[i:]
                    if not skipping:
                        if held + len(rest) > max_line:
                            skipping, parts, held = True, [], 0
                        elif rest:
                            parts.append(rest)
                            held += len(rest)
                    break
                piece = chunk[i:j]
                lineno += 1
                end = pos + j + 1
                if skipping or held + len(piece) > max_line:
                    yield lineno, start, end, None
                else:
                    yield lineno, start, end, b"".join(parts) + piece if parts else piece
                skipping, parts, held = False, [], 0
                start = end
                i = j + 1
            pos += len(chunk)


def _valid_event(raw: bytes | None, check) -> dict | None:
    """The event on a line, or None when the line is ``event-invalid``: over the limit, blank, holding a CR, not an
    I-JSON object, not valid against the reader schema, or with a time that does not exist ([ENC-8])."""
    if raw is None or not raw or b"\r" in raw:
        return None
    try:
        ev = jsonio.loads(raw)
    except jsonio.JsonProblem:
        return None
    if check(ev) is not None:
        return None
    try:
        parse_time(ev["at"])
        if "expires" in ev:
            parse_time(ev["expires"])
    except ValueError:
        return None
    return ev


def verify_chain(run_dir: str | Path, *, run_hash: str | None = None) -> ChainReport:
    """Verify the overlay chain of a run ([OVL-4], [OVL-5]): every problem at its path, in §3.9 order, and the
    verified batches. ``run_hash``: the run's run hash when the caller already knows it ([SEAL-4])."""
    root = Path(run_dir)
    if root.is_symlink() or not root.is_dir():
        raise Refusal("RUN-1", "not a run folder (a run is a folder holding run.json)", str(run_dir))
    return _chain(root, _Run(root, run_hash))


def _chain(root: Path, run: _Run) -> ChainReport:
    listing = _list_overlays(root)
    problems: set[tuple[str, str]] = set()
    if listing.count > MAX_OVERLAY_FILES:
        problems.add((OVERLAYS, "limit"))  # once; the chain is still checked from the files it names
    else:
        for p in listing.unexpected:
            problems.add((p, "unexpected-file"))
    if 0 in listing.seals:
        problems.add((listing.seals[0], "batch-number"))  # not checked further
    highest = max((n for n in listing.seals if n >= 1), default=0)
    ef = _EventsFile(root / EVENTS, listing.events)
    try:
        report = ChainReport([], run_id=run.run_id, size=ef.size, signatures=set(listing.signatures), run=run)
        seal_check = validator("overlay-seal", "reader")
        batches: list[Batch] = []
        for n in range(1, highest + 1):
            b = Batch(n, seal_name(n))
            batches.append(b)
            if n not in listing.seals:
                b.codes.append("missing")
                continue
            try:
                data = _read_limited(root / b.path, jsonio.MAX_SEAL)
            except OSError:
                b.codes.append("batch-invalid")
                continue
            if data is None:
                b.codes.append("limit")
                continue
            b.seal_bytes = data
            try:
                doc = jsonio.loads(data)
            except jsonio.JsonProblem as e:
                b.codes.append("limit" if e.code == "limit" else "batch-invalid")
                continue
            if seal_check(doc) is not None:
                b.codes.append("batch-invalid")
                continue
            b.doc = doc
        for b in batches:
            if b.doc is None:
                continue
            pred = b.doc["predicate"]
            n = b.number
            if pred["batch"] != n:
                b.codes.append("batch-number")
            if pred["runId"] != run.run_id:
                b.codes.append("run-id")
            if pred["runHash"] != run.run_hash:
                b.codes.append("run-hash")
            offset, length = b.offset, int(pred["length"])
            if n == 1:
                if offset != 0:
                    b.codes.append("offset")
            else:
                prev = batches[n - 2]
                if prev.doc is not None and offset != prev.end:  # not checked after a missing (or unread) seal
                    b.codes.append("offset")
            end = offset + length
            if end > ef.size:  # runs past the end of the file
                b.codes += ["line-boundary", "batch-digest"]
            else:
                if (offset > 0 and ef.byte_at(offset - 1) != b"\n") or ef.byte_at(end - 1) != b"\n":
                    b.codes.append("line-boundary")
                if ef.digest(offset, length) != b.doc["subject"][0]["digest"]["sha256"]:
                    b.codes.append("batch-digest")
            prev_ref = pred["previous"]
            if n == 1:
                if prev_ref is not None:
                    b.codes.append("previous")
            else:
                want = seal_name(n - 1)
                prev_hash = _seal_hash(root, batches[n - 2], (n - 1) in listing.seals)
                if (
                    type(prev_ref) is not dict
                    or prev_ref.get("path") != want
                    or prev_hash is None
                    or prev_ref.get("sha256") != prev_hash
                ):
                    b.codes.append("previous")
        for b in batches:
            for code in b.codes:
                problems.add((b.path, code))
        report.batches = batches

        # the verified batches: up to the first with a problem about the batch itself (§4.3)
        verified = 0
        for b in batches:
            if b.codes:
                break
            verified += 1
        verified_end = batches[verified - 1].end if verified else 0

        # coverage: every byte claimed by some batch that was read ([OVL-4])
        claims = sorted((b.offset, min(b.end, ef.size)) for b in batches if b.doc is not None)
        covered = 0
        gap = False
        for lo, hi in claims:
            if lo > covered:
                gap = True
            covered = max(covered, hi)
        if ef.size > 0 and (gap or covered < ef.size):
            problems.add((EVENTS, "uncovered"))
        report.covered_end = max((b.end for b in batches if b.doc is not None), default=0)

        # the lines, each judged on its own; the events of the verified batches kept for the view
        event_check = validator("overlay-event", "reader")
        seen_ids: set[str] = set()
        kept: list[EventLine] = []
        unsealed = 0
        last_end = 0
        for lineno, start, end, raw in ef.lines():
            if lineno > jsonio.MAX_LINES:
                report.over_limit = True
                problems.add((EVENTS, "limit"))
                break
            last_end = end
            ev = _valid_event(raw, event_check)
            ok = ev is not None
            if not ok:
                problems.add((line_path(lineno), "event-invalid"))
            else:
                eid = ev["eventId"]
                if eid in seen_ids:
                    problems.add((line_path(lineno), "event-id"))
                    ok = False
                seen_ids.add(eid)
                if not _target_ok(ev["target"], run):
                    problems.add((line_path(lineno), "target"))
                    ok = False
            if end <= verified_end:
                kept.append(EventLine(lineno, start, end, ev, ok))
            else:
                unsealed += 1
        if report.over_limit:
            # lines beyond the limit are not read: a batch reaching into them does not verify, nothing after the
            # verified batches is read
            while verified and batches[verified - 1].end > last_end:
                verified -= 1
            verified_end = batches[verified - 1].end if verified else 0
            kept = [ln for ln in kept if ln.end <= verified_end]
            unsealed = 0
        else:
            report.unfinished = ef.size - last_end if ef.size > last_end else 0
        # which verified batch holds each kept line
        i = 0
        for ln in kept:
            while batches[i].end < ln.end:
                i += 1
            ln.batch = batches[i].number
        report.verified = verified
        report.verified_end = verified_end
        report.lines = kept
        report.unsealed = unsealed
        report.run_hash = run.run_hash
        report.problems = order_problems(problems)
        return report
    finally:
        ef.close()


def _target_ok(target: dict, run: _Run) -> bool:
    """[OVL-2]: ``target.run`` is the run's runId, ``target.runHash`` (when present) its run hash, and
    ``target.result`` (when present) a result of the run."""
    if target["run"] != run.run_id:
        return False
    if "runHash" in target and target["runHash"] != run.run_hash:
        return False
    if "result" in target and target["result"] not in run.results:
        return False
    return True


def _read_limited(path: Path, limit: int) -> bytes | None:
    """A regular file's bytes, never through a link; None when it holds more than ``limit`` bytes."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as f:
        data = f.read(limit + 1)
    return None if len(data) > limit else data


def _seal_hash(root: Path, b: Batch, present: bool) -> str | None:
    """The SHA-256 of a seal file's bytes (None when it is missing), read or not (a seal over its limit is still
    hashed, never parsed)."""
    if b.seal_bytes is not None:
        return hashlib.sha256(b.seal_bytes).hexdigest()
    if not present:
        return None
    try:
        return runfs.sha256_file(root / b.path)
    except OSError:
        return None


# -- trust ----------------------------------------------------------------------------------------------------------


def load_policy(policy: Any):
    """A trust policy from a path, or the policy itself (None stays None)."""
    if policy is None:
        return None
    if isinstance(policy, (str, Path)):
        from aefgate.formats.aef.signatures import TrustPolicy

        return TrustPolicy.load(policy)
    return policy


class _Signatures:
    """The identities each verified batch's signature verifies for, under a policy (computed once per batch)."""

    def __init__(self, root: Path, report: ChainReport, policy: Any):
        self.root = root
        self.report = report
        self.policy = policy
        self._cache: dict[int, frozenset[str]] = {}

    def verifies_for(self, n: int) -> frozenset[str]:
        if self.policy is None or n not in self.report.signatures:
            return frozenset()
        if n not in self._cache:
            from aefgate.formats.aef.signatures import verify_envelope

            ids: frozenset[str] = frozenset()
            b = self.report.batches[n - 1]
            try:
                envelope = _read_limited(self.root / signature_name(n), MAX_ENVELOPE)
            except OSError:
                envelope = None
            if envelope is not None and b.seal_bytes is not None:
                r = verify_envelope(envelope, b.seal_bytes, PAYLOAD_TYPE, self.policy)
                ids = frozenset(r.verifies_for)
            self._cache[n] = ids
        return self._cache[n]

    def signed(self, line: EventLine) -> bool:
        return line.event["by"]["identity"] in self.verifies_for(line.batch)


# -- the effective view ---------------------------------------------------------------------------------------------


@dataclass
class View:
    """The effective view (§4.3) and what it was computed from."""

    at: str
    chain: ChainReport
    results: list[dict] = field(default_factory=list)
    reviews: list[dict] = field(default_factory=list)
    waivers: list[dict] = field(default_factory=list)
    withheld: list[str] = field(default_factory=list)
    assurance: list[dict] = field(default_factory=list)
    events: dict[str, dict] = field(default_factory=dict)  # the events that take part, by id
    annotations: list[str] = field(default_factory=list)  # event ids of notes and unknown kinds, in file order
    redactions: list[dict] = field(default_factory=list)  # every verified redact: event, blob, authorized

    @property
    def unsealed_events(self) -> int:
        return self.chain.unsealed

    def withheld_paths(self) -> set[str]:
        return {runfs.blob_path(h) for h in self.withheld}

    def to_json(self) -> dict:
        """Exactly the §9.2.1 effective-view object."""
        return {
            "results": self.results,
            "reviews": self.reviews,
            "waivers": self.waivers,
            "withheld": self.withheld,
            "unsealedEvents": self.chain.unsealed,
            "assurance": self.assurance,
        }


def _check_at(at: str, where: str = "--at") -> str:
    try:
        parse_time(at)
    except (ValueError, TypeError):
        raise Refusal("ENC-8", f"not an RFC 3339 UTC time (…T…Z): {at!r}", where) from None
    return at


def compute_view(run_dir: str | Path, at: str | None = None, policy: Any = None, *,
                 report: ChainReport | None = None) -> View:
    """The effective view of a run at time ``at`` (default: now) under a trust policy (a path or a ``TrustPolicy``;
    None: no batch signature is verified, so every event is self-attested and no redaction is authorized)."""
    root = Path(run_dir)
    at = _check_at(at if at is not None else now())
    policy = load_policy(policy)
    if report is None:
        report = verify_chain(root)
    t = parse_time(at)
    sigs = _Signatures(root, report, policy)
    view = View(at, report)
    state_by: dict[str, dict] = {}  # resultId -> the last override/adjudicate
    review_by: dict[str, dict] = {}  # "run" or resultId -> the last approve/reject
    withheld: dict[str, None] = {}
    for ln in report.lines:  # [OVL-6]: file order
        if not ln.ok:
            continue
        ev = ln.event
        kind = ev["kind"]
        target = ev["target"]
        eid = ev["eventId"]
        view.events[eid] = ev
        signed = sigs.signed(ln)
        view.assurance.append({"event": eid, "shown": "signed" if signed else "self-attested"})
        if kind in STATE_KINDS:
            state_by[target["result"]] = ev
        elif kind in REVIEW_KINDS:
            review_by[target.get("result", "run")] = ev
        elif kind == "waive":
            active = parse_time(ev["at"]) <= t < parse_time(ev["expires"])
            view.waivers.append({
                "target": {k: v for k, v in target.items() if k not in ("run", "runHash")},
                "expires": ev["expires"],
                "active": active,
                "event": eid,
            })
        elif kind == "redact":
            blob = target["blob"]
            authorized = signed and policy is not None and policy.allows(ev["by"]["identity"], "redact")
            view.redactions.append({"event": eid, "blob": blob, "authorized": authorized})
            if authorized:
                withheld.setdefault(blob, None)
        else:  # acknowledge, accept_baseline, annotate, and any kind this version does not know ([VER-8])
            view.annotations.append(eid)
    results: dict[str, str | None] = {}
    if state_by or review_by:
        run = report.run if report.run is not None else _Run(root, report.run_hash)
        results = run.results
    for rid, sealed in results.items():
        ev = state_by.get(rid)
        if ev is not None:
            view.results.append(
                {"resultId": rid, "sealedState": sealed, "effectiveState": ev["state"], "event": ev["eventId"]}
            )
    if "run" in review_by:
        ev = review_by["run"]
        view.reviews.append({"target": "run", "status": ev["kind"], "event": ev["eventId"]})
    for rid in results:
        ev = review_by.get(rid)
        if ev is not None:
            view.reviews.append({"target": rid, "status": ev["kind"], "event": ev["eventId"]})
    view.withheld = list(withheld)
    return view


def effective_view(run_dir: str | Path, at: str, policy: Any = None) -> dict:
    """The §9.2.1 effective view of a run at ``at``: ``results``, ``reviews``, ``waivers``, ``withheld``,
    ``unsealedEvents``, ``assurance``."""
    return compute_view(run_dir, at, policy).to_json()


def authorized_redactions(run_dir: str | Path, policy: Any) -> set[str]:
    """The blob paths (``blobs/sha256/<ab>/<hex>``) authorized redactions withhold ([OVL-10]): a ``redact`` in a
    verified batch whose signature verifies, under ``policy``, for the event's ``by.identity``, an identity the
    policy lets redact. No policy: none."""
    policy = load_policy(policy)
    if policy is None:
        return set()
    root = Path(run_dir)
    if not (root / OVERLAYS).is_dir() or (root / OVERLAYS).is_symlink():
        return set()
    return compute_view(root, now(), policy).withheld_paths()


# -- deciding -------------------------------------------------------------------------------------------------------


def _refuse(rule: str, message: str, where: str = "", *, integrity: bool = False) -> Refusal:
    return Refusal(rule, message, where, exit_code=EXIT_INTEGRITY if integrity else EXIT_INPUT)


def _blank(text: Any) -> bool:
    return not isinstance(text, str) or not text.strip()


def _normalize_blob(blob: str) -> str:
    b = blob.strip()
    if b.startswith("sha256:"):
        b = b[len("sha256:"):]
    m = runfs.BLOB_PATH.match(b)
    if m:
        b = m.group(2)
    if not _HEX64.match(b):
        raise _refuse("OVL-1", f"--blob is a blob's SHA-256 (64 lower-case hex characters, optionally after "
                               f"'sha256:'), not {blob!r}", "--blob")
    return b


def _check_request(kind, by, reason, result, requirement, state, expires, blob, at) -> None:
    """Everything about the decision itself that ``agenteval decide`` refuses (exit 2)."""
    if kind not in KINDS:
        raise _refuse("OVL-1", f"--kind is one of {', '.join(KINDS)}, not {kind!r}", "--kind")
    if _blank(by):
        raise _refuse("OVL-1", "--by names who decides: a non-blank opaque identity", "--by")
    if len(by) > 256:
        raise _refuse("OVL-1", "--by is at most 256 characters", "--by")
    if _blank(reason):
        raise _refuse("OVL-1", "--reason must say why: a non-blank text", "--reason")
    if len(reason) > 4096:
        raise _refuse("OVL-1", "--reason is at most 4096 characters", "--reason")
    if result is not None and requirement is not None:
        raise _refuse("OVL-1", "give --result or --requirement, not both: an event has one target", "--requirement")
    if state is not None and kind not in STATE_KINDS:
        raise _refuse("OVL-1", f"--state is for override and adjudicate, not {kind}", "--state")
    if expires is not None and kind != "waive":
        raise _refuse("OVL-9", f"--expires is for waive, not {kind}", "--expires")
    if blob is not None and kind != "redact":
        raise _refuse("OVL-1", f"--blob is for redact, not {kind}", "--blob")
    if kind in REVIEW_KINDS and requirement is not None:
        raise _refuse("OVL-1", f"{kind} is about the run or one result (--result), not a requirement",
                      "--requirement")
    if kind in STATE_KINDS:
        if result is None:
            raise _refuse("OVL-1", f"{kind} names the result whose state it sets: --result ID", "--result")
        if requirement is not None:
            raise _refuse("OVL-1", f"{kind} targets a result, not a requirement", "--requirement")
        if state is None:
            raise _refuse("OVL-1", f"{kind} needs --state: one of {', '.join(STATES)}", "--state")
        if state == "pending":
            raise _refuse("RES-3", "--state pending is refused: a closed run has no pending result", "--state")
        if state not in STATES:
            raise _refuse("OVL-1", f"--state is one of {', '.join(STATES)}, not {state!r}", "--state")
    if kind == "waive":
        if result is None and requirement is None:
            raise _refuse("OVL-1", "waive needs exactly one of --result ID or --requirement ID", "--result")
        if expires is None:
            raise _refuse("OVL-9", "waive needs --expires: the UTC time (RFC 3339, ending in Z) the waiver ends",
                          "--expires")
        _check_at(expires, "--expires")
        if parse_time(expires) <= parse_time(at):
            raise _refuse("OVL-9", f"--expires {expires} is not after the decision time {at}: a waiver holds from "
                                   "its decision up to, not including, its expiry", "--expires")
    if kind == "redact":
        if result is not None or requirement is not None:
            raise _refuse("OVL-1", "redact targets a blob (--blob SHA256), not a result or a requirement",
                          "--result" if result is not None else "--requirement")
        if blob is None:
            raise _refuse("OVL-1", "redact needs --blob: the SHA-256 of the blob of the run to withhold", "--blob")
    if requirement is not None and not _ID.match(requirement):
        raise _refuse("OVL-1", "--requirement is an external id: 1-128 letters, digits and . _ : -",
                      "--requirement")


@contextlib.contextmanager
def _locked_events(root: Path) -> Iterator[int]:
    """The events file opened for appending (created when absent), under an exclusive lock held until the block
    ends: two writers never interleave, and each reads the chain as the other left it."""
    import fcntl

    ov = root / OVERLAYS
    if not ov.exists():
        with contextlib.suppress(FileExistsError):
            ov.mkdir()
    fd = os.open(root / EVENTS, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield fd
    finally:
        os.close(fd)  # releases the lock


def _shared_chain(root: Path, run: "_Run") -> "ChainReport":
    """The chain, read while no writer holds the events file's exclusive lock."""
    import fcntl

    try:
        fd = os.open(root / EVENTS, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:  # absent (no decision yet), or not a file: the chain reports it
        return _chain(root, run)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        return _chain(root, run)
    finally:
        os.close(fd)  # releases the lock


def _create_new(path: Path, data: bytes) -> None:
    """Write a new file in full, then put it in place under its name only if nothing has that name yet (a hard
    link, which is atomic and never replaces a file); an existing file is a Refusal (exit 1)."""
    tmp = path.parent / f".{path.name}.tmp-{secrets.token_hex(4)}"
    try:
        with open(tmp, "xb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            raise _refuse("OVL-4", "another writer created this file meanwhile: nothing of this decision was "
                                   "sealed", path.name, integrity=True) from None
        except OSError:  # a file system without hard links: exclusive creation instead
            with open(path, "xb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()
    from aefgate.fsutil import fsync_dir

    fsync_dir(path.parent)


def _chain_refusal(report: ChainReport) -> Refusal | None:
    """Why a decision cannot be appended to this chain, or None. A chain with a problem about a batch or a file is
    an integrity failure (exit 1); bytes after the last sealed batch (an interrupted write, another writer's
    unsealed events, an unfinished line) are refused as a preflight error (exit 2), never adopted."""
    blocking = [p for p in report.batch_problems() if p[1] != "uncovered"]
    if blocking:
        path, code = blocking[0]
        more = f" (and {len(blocking) - 1} more)" if len(blocking) > 1 else ""
        return _refuse("OVL-5", f"the overlay chain does not verify: {code} at {path}{more}; a new batch would "
                                f"have no effect. `aefgate aef chain RUN` lists the problems; nothing was written",
                       path, integrity=True)
    if report.size > report.verified_end:
        extra = report.size - report.verified_end
        what = []
        if report.unsealed:
            what.append(f"{report.unsealed} unsealed event line{'s' if report.unsealed != 1 else ''}")
        if report.unfinished:
            what.append(f"an unfinished last line ({report.unfinished} bytes without LF)")
        desc = " and ".join(what) or f"{extra} bytes"
        return _refuse(
            "OVL-4",
            f"{EVENTS} holds {desc} after the last sealed batch (byte {report.verified_end} on): an interrupted "
            f"decide, or another writer's work, which a decision never adopts. Inspect and verify the journal "
            f"(`aefgate view RUN`) before retrying; if those bytes are to be dropped, truncate the file to "
            f"{report.verified_end} bytes. Nothing was written",
            EVENTS,
        )
    n = report.highest + 1
    if n > MAX_BATCHES:
        return _refuse("OVL-4", f"the chain already holds {MAX_BATCHES} batches, the most four digits allow",
                       OVERLAYS, integrity=True)
    if n in report.signatures:
        return _refuse("OVL-4", f"{signature_name(n)} exists without its batch seal (an interrupted signed decide?):"
                                f" remove it before deciding again; nothing was written", signature_name(n),
                       integrity=True)
    return None


def decide(
    run_dir: str | Path,
    *,
    kind: str,
    by: str,
    reason: str,
    result: str | None = None,
    requirement: str | None = None,
    state: str | None = None,
    expires: str | None = None,
    key_path: str | Path | None = None,
    at: str | None = None,
    blob: str | None = None,
    policy: Any = None,
) -> dict:
    """Append one event to ``overlays/events.ndjson`` and seal its batch (``overlays/seal-<nnnn>.json``, [OVL-4]);
    with ``key_path``, also sign the batch (``seal-<nnnn>.dsse.json``, [SIG-1]).

    Refused with nothing written (:class:`Refusal`): exit 2 for the decision's inputs (a blank ``by`` or
    ``reason``; a result that is not the run's; ``state`` pending, missing on override/adjudicate, given on another
    kind; ``requirement`` or ``expires`` on approve/reject; a waiver without exactly one target or with an ``expires``
    not strictly after ``at``; a redaction without a sealed blob of the run; a key that is missing, malformed,
    encrypted or of an unsupported algorithm, loaded before anything is written) and for bytes after the last
    sealed batch; exit 1 for a run that is not sealed and intact, and a chain that does not verify. A failure after
    writing started is exit 1. ``policy`` (a trust policy) lets a run whose blobs authorized redactions withhold
    count as intact. Returns what was written.
    """
    root = Path(run_dir)
    if root.is_symlink() or not root.is_dir() or not (root / "run.json").is_file():
        raise Refusal("RUN-1", "not a run folder (a run is a folder holding run.json)", str(run_dir))
    at = _check_at(at if at is not None else now(), "--at")
    if blob is not None:
        blob = _normalize_blob(blob)
    _check_request(kind, by, reason, result, requirement, state, expires, blob, at)

    key = None
    if key_path is not None:  # loaded before anything is written: a bad key causes no mutation
        from aefgate.formats.aef.signatures import load_private_key

        key = load_private_key(key_path)
    policy = load_policy(policy)

    # the run: sealed and intact (blobs withheld by authorized redactions allowed)
    if not (root / "seal.json").is_file():
        raise _refuse("OVL-4", "the run is not sealed: decisions are appended only to a sealed, intact run "
                               "(`aefgate seal RUN` first)", "seal.json", integrity=True)
    withheld_ok = authorized_redactions(root, policy) if policy is not None else set()
    v = verify_run(root, withheld_ok=withheld_ok)
    if v.outcome != "intact":
        path, code = next((p for p in v.problems if p[1] != "withheld"), ("", "?"))
        raise _refuse("SEAL-6", f"the run is {v.outcome} ({code} at {path}): decisions are appended only to an "
                                f"intact run; `aefgate verify RUN` lists the problems", path or str(run_dir),
                      integrity=True)
    run = _Run(root, v.run_hash)
    if result is not None and result not in run.results:
        raise _refuse("OVL-2", f"{result!r} is no result of this run", "--result")
    if blob is not None:
        reading = read_seal(root)
        sealed = {s["name"] for s in reading.doc["subject"]} if reading.doc is not None else set()
        if runfs.blob_path(blob) not in sealed:
            raise _refuse("OVL-1", f"no blob {blob} is sealed in this run", "--blob")

    # preflight (nothing written): refuse a chain that cannot take a batch; read under a shared lock, so another
    # writer's batch is seen whole or not at all (its line is never taken for an interrupted write)
    refusal = _chain_refusal(_shared_chain(root, run))
    if refusal is not None:
        raise refusal

    target: dict[str, Any] = {"run": run.run_id, "runHash": run.run_hash}
    if result is not None:
        target["result"] = result
    if requirement is not None:
        target["requirement"] = requirement
    if blob is not None:
        target["blob"] = blob
    event: dict[str, Any] = {
        "schemaVersion": "1.0",
        "eventId": "ov_" + uuid.uuid4().hex,
        "kind": kind,
        "target": target,
    }
    if state is not None:
        event["state"] = state
    event["reason"] = reason
    if expires is not None:
        event["expires"] = expires
    event["by"] = {"identity": by, "assurance": "signed" if key is not None else "self-attested"}
    event["at"] = at
    why = validator("overlay-event", "writer")(event)
    if why is not None:
        raise _refuse("OVL-1", f"the event would not be valid: {why}")
    line = jsonio.dump_line(event)

    with _locked_events(root) as fd:
        report = _chain(root, run)  # the chain as the previous holder of the lock left it
        refusal = _chain_refusal(report)
        if refusal is not None:
            raise refusal
        n = report.highest + 1
        offset = report.verified_end
        previous = None
        if n > 1:
            prev = report.batches[n - 2]
            previous = {"path": prev.path, "sha256": hashlib.sha256(prev.seal_bytes).hexdigest()}
        statement = {
            "_type": STATEMENT_TYPE,
            "subject": [{"name": EVENTS, "digest": {"sha256": hashlib.sha256(line).hexdigest()}}],
            "predicateType": BATCH_PREDICATE,
            "predicate": {
                "schemaVersion": "1.0",
                "runId": run.run_id,
                "runHash": run.run_hash,
                "batch": n,
                "offset": offset,
                "length": len(line),
                "previous": previous,
            },
        }
        why = validator("overlay-seal", "writer")(statement)
        if why is not None:
            raise _refuse("OVL-4", f"the batch seal would not be valid: {why}", seal_name(n))
        seal_bytes = jsonio.dumps(statement)
        envelope_bytes = None
        if key is not None:
            from aefgate.formats.aef.signatures import sign

            try:
                envelope_bytes = jsonio.dumps(sign(seal_bytes, PAYLOAD_TYPE, key))
            except Refusal:
                raise
            except Exception as e:  # signing failed before anything was written
                raise _refuse("SIG-2", f"signing the batch failed: {type(e).__name__}; nothing was written",
                              str(key_path)) from None

        # writing starts: from here a failure is exit 1
        if os.fstat(fd).st_size != offset:
            raise _refuse("OVL-4", f"{EVENTS} changed while it was locked (a writer that does not lock): nothing "
                                   f"was written", EVENTS, integrity=True)
        written_sig = False
        try:
            _write_all(fd, line)
            os.fsync(fd)
            if envelope_bytes is not None:  # the signature first: the seal is the commit point
                _create_new(root / signature_name(n), envelope_bytes)
                written_sig = True
            _create_new(root / seal_name(n), seal_bytes)
        except BaseException as e:
            _roll_back(root, fd, n, offset, len(line), written_sig)
            if isinstance(e, Refusal):
                raise
            if isinstance(e, OSError):
                raise _refuse("OVL-4", f"writing the decision failed ({e.strerror or e}); the event line was "
                                       "removed again if nothing followed it", EVENTS, integrity=True) from None
            raise
    return {
        "run": str(run_dir),
        "runId": run.run_id,
        "runHash": run.run_hash,
        "eventId": event["eventId"],
        "event": event,
        "batch": n,
        "seal": seal_name(n),
        "signature": signature_name(n) if envelope_bytes is not None else None,
        "keyid": key.keyid if key is not None else None,
        "offset": offset,
        "length": len(line),
        "identityVerified": False,
    }


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        k = os.write(fd, view)
        view = view[k:]


def _roll_back(root: Path, fd: int, n: int, offset: int, length: int, written_sig: bool) -> None:
    """After a failure before the seal was in place: remove this decision's own unsealed line (only when nothing
    was appended after it) and its signature, so the chain is as it was. Best effort. (Once :func:`_create_new` has
    put the seal in place nothing raises, so a failure here always means this decision's seal is not there.)"""
    with contextlib.suppress(OSError):
        size = os.fstat(fd).st_size
        if offset < size <= offset + length:
            os.ftruncate(fd, offset)
            os.fsync(fd)
    if written_sig:
        with contextlib.suppress(OSError):
            (root / signature_name(n)).unlink()
