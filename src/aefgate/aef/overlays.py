"""Overlays: the chain of sealed batches, the effective view, and writing a decision (spec 04 §4.2, §4.3).

- :func:`verify_chain` checks ``overlays/`` ([OVL-4], [OVL-5]) and returns a :class:`ChainReport`: every problem as a
  ``(path, code)`` pair in §3.9 order, which batches verify, and where the verified part of the events file ends.
- :func:`compute_view` / :func:`effective_view` give the run as its verified overlays leave it ([OVL-6]..[OVL-10]):
  exactly the §9.2.1 effective-view object for :func:`effective_view`.
- :func:`authorized_redactions`: the blob paths authorized ``redact`` events withhold ([OVL-10]), which the run
  verifier takes as ``withheld_ok`` (``verifier.verify_run`` computes them under a policy).
- writing a decision (``decisions.decide``) is a layer above, over the verifier.

How the events file is read (see ``docs/design/decisions.md``, "Overlays"): line by line, each line judged on its
own wherever it is (inside the batches and after them): a line that is blank, holds a CR, is over 4 MiB, or is not
an I-JSON object valid against the reader ``overlay-event`` schema is ``event-invalid`` at its line and nothing
more. A last line without LF is still being written: it is no line (its bytes are ``uncovered`` until a batch
claims them). More than 1,000,000 lines is ``limit`` once at the file: lines beyond are not read, and the batches
within the lines read still stand. More than 19,999 files under ``overlays/`` is ``limit`` once at ``overlays``.

Layering: above ``seal.py`` (the run's seal), below the verifier, which reads the authorized redactions here under a
trust policy, and below ``decisions.py`` (a decision is appended only to a run that verifies intact).

Nothing here follows a symbolic link: a link (or any other non-regular file) under ``overlays/`` is
``unexpected-file``, even one named like the events file or a seal.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from aefgate.errors import Refusal
from aefgate.aef import jsonio, runfs
from aefgate.aef.schema import validator
from aefgate.aef.seal import build_manifest, read_seal
from aefgate.aef.signatures import TrustPolicy, verify_envelope
from aefgate.aef.problems import order_problems
from aefgate.aef.times import now, parse_time

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
    problems = _listing_problems(listing)
    highest = max((n for n in listing.seals if n >= 1), default=0)
    ef = _EventsFile(root / EVENTS, listing.events)
    try:
        report = ChainReport([], run_id=run.run_id, size=ef.size, signatures=set(listing.signatures), run=run)
        batches = _read_batches(root, listing, highest)
        _check_batches(root, run, listing, ef, batches)
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

        _check_coverage(batches, ef, problems, report)
        kept, unsealed, last_end = _read_lines(ef, run, verified_end, problems, report)
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


def _listing_problems(listing: _Listing) -> set[tuple[str, str]]:
    """The problems of the overlays folder's listing: too many files, unexpected files, a batch numbered 0."""
    problems: set[tuple[str, str]] = set()
    if listing.count > MAX_OVERLAY_FILES:
        problems.add((OVERLAYS, "limit"))  # once; the chain is still checked from the files it names
    else:
        for p in listing.unexpected:
            problems.add((p, "unexpected-file"))
    if 0 in listing.seals:
        problems.add((listing.seals[0], "batch-number"))  # not checked further
    return problems


def _read_batches(root: Path, listing: _Listing, highest: int) -> list[Batch]:
    """Batches 1 to ``highest``: each seal read and checked against the reader schema (its doc set when valid),
    or its problem code noted."""
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
    return batches


def _check_batches(root: Path, run: _Run, listing: _Listing, ef: _EventsFile, batches: list[Batch]) -> None:
    """Note on each read batch its problem codes: number, run, offset, line boundaries and digest of its bytes in
    the events file, and its link to the previous seal."""
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


def _check_coverage(batches: list[Batch], ef: _EventsFile, problems: set, report: ChainReport) -> None:
    """[OVL-4]: every byte of the events file claimed by some batch that was read; sets ``report.covered_end``."""
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


def _read_lines(ef: _EventsFile, run: _Run, verified_end: int, problems: set,
                report: ChainReport) -> tuple[list[EventLine], int, int]:
    """The event lines, each judged on its own (problems noted): the lines of the verified batches (up to
    ``verified_end``), the count of lines after them, and the end of the last line read. Past
    ``jsonio.MAX_LINES`` lines, sets ``report.over_limit`` and stops."""
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
    return kept, unsealed, last_end


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


def _check_at(at: str, where: str = "option 'at'") -> str:
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
