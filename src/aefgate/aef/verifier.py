"""The run verifier (spec 03 §3.9, spec 04 §4.1 and §4.5).

``verify_run(run_dir)`` reads a run folder once — every file is hashed while it is parsed — and reports:

- the seal problems of [SEAL-6] (when there is a ``seal.json``);
- the problems of §3.9: ``encoding``, ``limit``, ``schema``, ``path`` always, and the rules across files (the table
  from ``result-id`` down) only when no file or line has an ``encoding``, ``limit`` or ``schema`` problem;
- the outcome of §4.5: ``invalid`` (any problem but ``withheld``), ``unsealed`` (no ``seal.json``) or ``intact``;
  ``anchored`` when the caller gives trusted run hashes; the number of ``withheld`` blobs.

Problems are ``(path, code)`` pairs ordered as §3.9 says (:func:`problem_sort_key`): by the UTF-8 bytes of the path,
except that ``<file>:<line>`` paths of the run's NDJSON files order by line number; then by code.

Layering: this module reads a seal with ``seal.py`` (the manifest, ``seal.json`` read and checked) and the overlay
chain with ``overlays.py`` (under a trust policy: the blobs its authorized redactions withhold), layers below, and
checks signatures with ``signatures.py``; above it: the sealer (``sealer.seal_run`` seals only a run that verifies)
and ``decisions.decide``, which appends only to an intact run.

Memory: ``results.ndjson`` is streamed. What is kept per line is what the rules across files need (a 16-byte key of
its resultId, its case and path as indexes into interned tables, its trial, its parent's key, a few flags), in
compact arrays; summary entries keep O(1) state each (the median keeps its values).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import gc
import hashlib
import marshal
import multiprocessing
import os
import threading
from array import array
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from aefgate import progress
from aefgate.errors import Refusal
from aefgate.aef import jsonio, runfs, spill
from aefgate.aef.jsonio import JsonProblem
from aefgate.aef.overlays import authorized_redactions
from aefgate.aef.paths import path_bytes, path_problems
from aefgate.aef.problems import order_problems
from aefgate.aef.resultid import result_id
from aefgate.aef.resultline import reader_valid
from aefgate.aef.schema import validator
from aefgate.aef.seal import Manifest, read_seal_lean, seal_problems
from aefgate.aef.signatures import TrustPolicy, attestation_signed_by
from aefgate.aef.summary import LEFT_OUT, EntryAccumulator, _scaled, exactly_matches, measure, value_matches
from aefgate.aef.times import parse_time
from aefgate.aef.vocab import CONTENT_KINDS, SEC6_ATTRIBUTES

BLOCKING = frozenset({"encoding", "limit", "schema"})
CLOSED = ("completed", "aborted")
# timestamp fields per document ([ENC-8]: a pattern cannot refuse 2026-02-31)
_RUN_TIMES = ("startedAt", "endedAt")
_STATE_CODE = {
    s: i
    for i, s in enumerate(
        ["passed", "failed", "warn", "inconclusive", "scored", "not_measured", "not_applicable", "skipped", "error", "pending"]
    )
}
_PASSED = _STATE_CODE["passed"]
_F_AGG = 1
_F_ROLLUP = 2
_F_DUP = 4
_ROOT = -1
_UNKNOWN = -2
_F_READ = 8
# line_parent values besides a line number
_NONE = 0  # a root
_FORWARD = -1  # named before it was seen (resolved at the end)
_MISSING = -2  # no line of the run


@dataclass
class Verification:
    """What a run verifier reports (§4.5)."""

    outcome: str
    problems: list[tuple[str, str]]
    withheld: int = 0
    run_hash: str | None = None
    anchored: bool | None = None
    signed_by: list[str] | None = None
    sealed: bool = False
    manifest: Any = None  # the Manifest of the sealed files as read ([SEAL-3])

    def to_json(self) -> dict:
        out: dict[str, Any] = {"outcome": self.outcome, "problems": [list(p) for p in self.problems]}
        if self.withheld:
            out["withheld"] = self.withheld
        if self.signed_by is not None:
            out["signedBy"] = list(self.signed_by)
        if self.anchored is not None:
            out["anchored"] = self.anchored
        return out

    def describe(self) -> str:
        """The outcome in words a reader may show ([SIG-7], [OVL-10])."""
        if self.outcome != "intact":
            return self.outcome
        who = f"signed by {', '.join(self.signed_by)}" if self.signed_by else "unsigned"
        held = f", {self.withheld} withheld" if self.withheld else ""
        return f"intact{held} ({who})"


def _times_exist(doc: dict, fields: Iterable[str]) -> bool:
    for f in fields:
        v = doc.get(f)
        if v is not None:
            try:
                parse_time(v)
            except (ValueError, TypeError):
                return False
    return True


def _run_times_exist(run: dict) -> bool:
    if not _times_exist(run, _RUN_TIMES):
        return False
    for j in run.get("judges") or ():
        cal = j.get("calibration") if type(j) is dict else None
        if type(cal) is dict and not _times_exist(cal, ("measuredAt",)):
            return False
    return True


def _attr_keys(attrs: Any) -> Iterable[str]:
    if type(attrs) is list:
        for a in attrs:
            if type(a) is dict and type(a.get("key")) is str:
                yield a["key"]


class _RunVerifier:
    def __init__(
        self, root: Path, withheld_ok: frozenset[str] = frozenset(), written: runfs.Written | None = None,
        mapper: Any = None,
    ):
        self.root = root
        self.the_mapper = mapper  # the one pass's mapper (onepass.LineMapper), or None: only checking
        self.problems: set[tuple[str, str]] = set()
        self.cross: set[tuple[str, str]] = set()  # rules across files: reported only when nothing blocks
        self.blocking = False
        self.withheld_ok = withheld_ok
        # the run writer's own list of the files it created, with their digests (verify_run's written=): the folder
        # is only listed, and the files this verifier does not parse (blobs, ext/) are not read back; when the
        # folder holds anything else than the files written (or of other sizes), it is scanned and read as usual
        sc = written.scan(root) if written is not None else None
        self.written = written if sc is not None else None
        self.scan = sc if sc is not None else runfs.scan(root)
        # path -> (sha256 hex, size) of the files read: written into the packed table of the scan (blobs) or a
        # dict (the other files), runfs.Files
        self.digests = runfs.Digests(self.scan.files)
        self.db: spill.SpillDb | None = None  # the per-line state of a large results.ndjson, on disk

    def close(self) -> None:
        if self.db is not None:
            self.db.close()
            self.db = None
        ids = getattr(self, "evidence_ids", None)
        if ids is not None:
            ids.close()

    # -- helpers ---------------------------------------------------------------------------------------------
    def add(self, path: str, code: str) -> None:
        self.problems.add((path, code))
        if code in BLOCKING:
            self.blocking = True

    def x(self, path: str, code: str) -> None:
        self.cross.add((path, code))

    def read_bytes(self, name: str, limit: int) -> bytes | None:
        """Read and hash a whole JSON file; None (and a ``limit`` problem) beyond ``limit``."""
        size = self.scan.files[name]
        p = self.root / name
        if size > limit:
            self.digests[name] = (runfs.sha256_file(p), size)
            self.add(name, "limit")
            return None
        with open(p, "rb") as f:
            data = f.read()
        self.digests[name] = (hashlib.sha256(data).hexdigest(), len(data))
        return data

    def read_doc(self, name: str, schema: str, *, required: bool, times: tuple[str, ...] = ()) -> dict | None:
        if name not in self.scan.files:
            if required:
                self.add(name, "schema")
            return None
        data = self.read_bytes(name, jsonio.MAX_DOC)
        if data is None:
            return None
        try:
            doc = jsonio.loads(data)
        except JsonProblem as e:
            self.add(name, e.code)
            return None
        if validator(schema, "reader")(doc) is not None or not _times_exist(doc, times):
            self.add(name, "schema")
            return None
        return doc

    def lines(self, name: str):
        """Stream an NDJSON file of the run, hashing it; yields (lineno, raw or None). Framing problems are
        reported at the file and end the iteration."""
        p = self.root / name
        h = hashlib.sha256()
        size = self.scan.files[name]
        ok = True
        with open(p, "rb") as f:
            try:
                for lineno, raw in jsonio.iter_lines(f, on_bytes=h.update):
                    yield lineno, raw
            except JsonProblem as e:
                ok = False
                # finish hashing the file for the seal
                rest = f.read(1 << 20)
                while rest:
                    h.update(rest)
                    rest = f.read(1 << 20)
                self.framing_problem(name, e.code)
        self.digests[name] = (h.hexdigest(), size)
        if not ok:
            raise _FramingError(name)

    def framing_problem(self, name: str, code: str) -> None:
        """§3.9: a file whose framing breaks is reported once, at its path, and none of its lines is read: the
        problems already found on its lines are dropped."""
        prefix = name + ":"
        self.problems = {p for p in self.problems if not p[0].startswith(prefix)}
        self.cross = {p for p in self.cross if not p[0].startswith(prefix)}
        self.add(name, code)

    # -- the run ---------------------------------------------------------------------------------------------
    def verify(self) -> Verification:
        """Read and check every file of the run, then the rules across files and the seal: the verdict (§4.5)."""
        sc = self.scan
        if sc.too_many:
            return Verification("invalid", [(".", "limit")])
        for p in sc.special:
            self.add(p, "path")
        for p, code in path_problems(_path_rule_input(sc.files, sc.special)):
            self.add(p, code)
        full_run, run, summary = self._read_documents()
        self._read_side_files()
        self._prepare_summary(summary)
        self._begin_mapping(full_run, summary)
        if "results.ndjson" in sc.files:
            self._results()
        else:
            self.add("results.ndjson", "schema")
        self._hash_rest()

        if run is not None:
            self._run_rules(run)
        if summary is not None and run is not None:
            self._summary_rules(summary, run)
        if not self.blocking:
            self._results_end()
            for lineno, g in self.gates:
                self._gate_rule(lineno, g)
        return self._verdict(run)

    def _read_documents(self) -> tuple[dict | None, dict | None, dict | None]:
        """Read run.json, metrics.json and summary.json and keep what the lines are checked against: ``(run.json as
        read, run.json without its ext, summary.json)``, each None when it does not read."""
        run = self.read_doc("run.json", "run", required=True)
        if run is not None and not _run_times_exist(run):
            self.add("run.json", "schema")
            run = None
        full_run = run
        if run is not None and "ext" in run:  # no rule reads it past the schema (an import's dataset may be long)
            run = {k: v for k, v in run.items() if k != "ext"}
        metrics = self.read_doc("metrics.json", "metrics", required=True)
        closed = run is not None and run.get("status") in CLOSED
        summary = self.read_doc("summary.json", "summary", required=closed)
        self.run = run
        self.closed = closed
        self.capture_off = run is not None and run.get("contentCapture") == "off"
        self.metric_kinds: dict[str, str] = {}
        if metrics is not None:
            self._metrics(metrics)
        return full_run, run, summary

    def _read_side_files(self) -> None:
        """Read the files the result lines refer to: the OTLP traces and logs, evidence.ndjson, gates.ndjson."""
        sc = self.scan
        self.spans: set[tuple[str, str]] = set()
        self.trace_ids: set[str] = set()
        self.has_traces = "traces.otlp.jsonl" in sc.files
        if self.has_traces:
            self._otlp("traces.otlp.jsonl", spans=True)
        if "logs.otlp.jsonl" in sc.files:
            self._otlp("logs.otlp.jsonl", spans=False)

        # the evidence ids: the run writer's E-1, E-2... as bits, any other in a set, on disk beyond a bound
        self.evidence_ids = spill.StrSet(numbered=_NUMBERED, hot=spill.bound("AEFGATE_SPILL_IDS", _SPILL_IDS))
        if "evidence.ndjson" in sc.files:
            self._evidence()
        self.evidence_ids.freeze()  # the worker processes read it
        gates: list[tuple[int, dict]] = []
        if "gates.ndjson" in sc.files:
            gates = self._gates()
        self.gates = gates

    def _hash_rest(self) -> None:
        """Hash the files not read yet for the seal: the blobs, then ext/, unexpected files, blobs beyond the limit."""
        sc = self.scan
        # blobs: hashed after results.ndjson (the worker processes are forked without their digests)
        self._hash_blobs()
        # the rest of the files (ext/, unexpected ones, blobs beyond the limit): hashed for the seal
        for p, size in list(sc.files.other.items()):
            if p not in self.digests:
                self.digests[p] = (runfs.sha256_file(self.root / p), size)
        files = sc.files
        if self.written is None:  # (the writer's blobs all have their digests)
            for i, p in files.unhashed():  # blobs beyond the limit (a few at most)
                files.set_blob_digest(i, bytes.fromhex(runfs.sha256_file(self.root / p)))

    def _verdict(self, run: dict | None) -> Verification:
        """The seal's problems ([SEAL-6]), the run hash, and the outcome over every problem found (§4.5)."""
        sc = self.scan
        sealed = "seal.json" in sc.files
        withheld: list[str] = []
        run_hash: str | None = None
        # the files [RUN-2] does not list (outside ext/ and overlays/): never a packed blob (runfs.Files)
        unlisted = {p for p in sc.files.other if not runfs.is_listed(p)}
        listed: set[str] = set()
        if sealed:
            withheld, run_hash, listed = self._seal(run, unlisted)
        manifest = Manifest(sc.files)  # over the packed table: its entries are made when iterated
        if run_hash is None:
            run_hash = manifest.run_hash
        # unexpected-file: a file [RUN-2] does not list (outside ext/ and overlays/) that the seal lists
        for p in unlisted:
            if p in listed:
                self.x(p, "unexpected-file")

        if not self.blocking:
            self.problems |= self.cross
        problems = order_problems(self.problems)
        invalid = any(code != "withheld" for _, code in problems)
        outcome = "invalid" if invalid else ("intact" if sealed else "unsealed")
        return Verification(
            outcome, problems, withheld=len(withheld), run_hash=run_hash, sealed=sealed, manifest=manifest
        )

    def _seal(self, run: dict | None, unlisted: set[str]) -> tuple[list[str], str | None, set[str]]:
        """Check seal.json ([SEAL-6]): ``(the withheld blobs, the run hash it seals or None, the files of
        ``unlisted`` it lists)``; its problems are added."""
        reading = read_seal_lean(self.root)
        # [SEAL-6] compares the predicate with run.json (run-id, predicate, run-open), and no rule makes a
        # schema problem of run.json block it (§3.9's blocking covers its own table only; a seal's checks stop
        # only after seal-invalid): a run.json that is an I-JSON object within the limits but not valid against
        # its schema (a secret-bearing deployment.endpoint, [RUN-10]) is still compared as read. Not one that
        # did not read (encoding, limit, absent): there is nothing to compare. It is read again here only in
        # that case, and used only when its bytes are still the ones hashed for the seal.
        seal_run_doc = run
        hashed = self.digests.get("run.json")
        if run is None and ("run.json", "schema") in self.problems and hashed is not None:
            try:
                with open(self.root / "run.json", "rb") as f:
                    data = f.read(jsonio.MAX_DOC + 1)
                if hashlib.sha256(data).hexdigest() == hashed[0]:
                    seal_run_doc = jsonio.loads(data)  # an object, or JsonProblem
            except (OSError, JsonProblem):
                seal_run_doc = None
        sp, withheld = seal_problems(reading, self.scan.files, seal_run_doc, withheld_ok=self.withheld_ok)
        for p in sp:
            self.problems.add(p)
        run_hash: str | None = None
        listed: set[str] = set()
        if reading.doc is not None:
            run_hash = reading.doc["predicate"]["runHash"]
            if unlisted:
                listed = {name for name, _ in reading.subjects() if name in unlisted}
        return withheld, run_hash, listed

    def _begin_mapping(self, run: dict | None, summary: dict | None) -> None:
        """The one pass (:mod:`aefgate.aef.onepass`): hand the mapper the run.json and summary.json this
        verification read (the bytes it hashes), before the result lines. No mapping when run.json does not read
        (the run is invalid: nothing derived from it is ever released); a refusal of the mapper's is kept for
        after the verdict, which comes first."""
        m = self.the_mapper
        self.mapper = None
        if m is None or run is None:
            return
        try:
            m.begin(run, summary)
        except Refusal as e:
            m.failed(e)
            return
        self.mapper = m

    def _hash_blobs(self) -> None:
        """[EVD-3]: every blob's bytes hash to its name; the digests serve the seal too. The packed blobs
        (``runfs.Files``) in name order, their digests written into the table; a blob outside its folder first.
        A run writer's blobs (``written``) are not read back: their digests are the ones it computed of the bytes
        it wrote, each blob named by its own, and each must equal the blob's name (the same rule)."""
        files = self.scan.files
        root = self.root
        for p, size in list(files.other.items()):
            m = runfs.BLOB_PATH.match(p)
            if m is None:
                continue
            if size > jsonio.MAX_BLOB:
                self.add(p, "limit")
                continue
            d = self.digests.get(p)  # (a run writer's: the digest of the bytes it wrote)
            h = d[0] if d is not None else runfs.sha256_file(root / p, size_hint=size)
            self.digests[p] = (h, size)
            if h != m.group(2):
                self.x(p, "blob-digest")
        for i, p, size, h in files.blob_digests():
            if size > jsonio.MAX_BLOB:
                self.add(p, "limit")
                continue
            if h is None:  # (not a run writer's: read it)
                h = runfs.sha256_file(root / p, size_hint=size)
                files.set_blob_digest(i, bytes.fromhex(h))
            if h != p[-64:]:
                self.x(p, "blob-digest")

    # -- documents -------------------------------------------------------------------------------------------
    def _metrics(self, metrics: dict) -> None:
        seen: set[str] = set()
        for m in metrics.get("metrics", ()):
            mid = m["id"]
            if mid in seen:
                self.x("metrics.json", "metric")
            seen.add(mid)
            self.metric_kinds.setdefault(mid, m["kind"])
            sc = m.get("scale")
            if type(sc) is dict and sc["min"] > sc["max"]:
                self.x("metrics.json", "metric")

    def _run_rules(self, run: dict) -> None:
        try:
            start = parse_time(run["startedAt"])
            if "endedAt" in run and parse_time(run["endedAt"]) < start:
                self.x("run.json", "run-times")
        except (KeyError, ValueError):
            start = None
        for j in run.get("judges") or ():
            cal = j.get("calibration")
            if cal is None:
                continue
            if "dangerousErrors" in cal and cal["dangerousErrors"] > cal["n"]:
                self.x("run.json", "calibration")
            if start is not None and parse_time(cal["measuredAt"]) > start:
                self.x("run.json", "calibration")
        pol = (run.get("suite") or {}).get("executionPolicy")
        if pol and "requirePasses" in pol and pol["requirePasses"] > pol["trialsPerCase"]:
            self.x("run.json", "execution-policy")

    def _otlp(self, name: str, *, spans: bool) -> None:
        try:
            for lineno, raw in self.lines(name):
                where = f"{name}:{lineno}"
                if raw is None:
                    self.add(where, "limit")
                    continue
                try:
                    doc = jsonio.loads(raw)
                except JsonProblem as e:
                    self.add(where, e.code)
                    continue
                if spans:
                    self._trace_line(where, doc)
                else:
                    self._log_line(where, doc)
        except _FramingError:
            pass

    def _trace_line(self, where: str, doc: dict) -> None:
        content = False
        for rs in doc.get("resourceSpans") or ():
            if type(rs) is not dict:
                continue
            for ss in rs.get("scopeSpans") or ():
                if type(ss) is not dict:
                    continue
                for sp in ss.get("spans") or ():
                    if type(sp) is not dict:
                        continue
                    tid, sid = sp.get("traceId"), sp.get("spanId")
                    if type(tid) is str:
                        tid = tid.lower()
                        self.trace_ids.add(tid)
                        if type(sid) is str:
                            self.spans.add((tid, sid.lower()))
                    if self.capture_off:
                        if any(k in SEC6_ATTRIBUTES for k in _attr_keys(sp.get("attributes"))):
                            content = True
                        for ev in sp.get("events") or ():
                            if type(ev) is dict and any(k in SEC6_ATTRIBUTES for k in _attr_keys(ev.get("attributes"))):
                                content = True
        if content:
            self.x(where, "content-capture")

    def _log_line(self, where: str, doc: dict) -> None:
        if not self.capture_off:
            return
        for rl in doc.get("resourceLogs") or ():
            if type(rl) is not dict:
                continue
            for sl in rl.get("scopeLogs") or ():
                if type(sl) is not dict:
                    continue
                for rec in sl.get("logRecords") or ():
                    if type(rec) is not dict:
                        continue
                    if "body" in rec or any(k in SEC6_ATTRIBUTES for k in _attr_keys(rec.get("attributes"))):
                        self.x(where, "content-capture")
                        return

    def _blob_cited(self, where: str, digest_uri: str) -> int | None:
        """The size of the blob a line cites, or None (and a ``blob`` problem unless it is withheld)."""
        hexd = digest_uri[7:]
        path = runfs.blob_path(hexd)
        size = self.scan.files.get(path)
        if size is None and path not in self.withheld_ok:
            self.x(where, "blob")
        return size

    def _evidence(self) -> None:
        v = validator("evidence", "reader")
        seen = self.evidence_ids
        try:
            for lineno, raw in self.lines("evidence.ndjson"):
                where = f"evidence.ndjson:{lineno}"
                if raw is None:
                    self.add(where, "limit")
                    continue
                try:
                    e = jsonio.loads(raw)
                except JsonProblem as err:
                    self.add(where, err.code)
                    continue
                if v(e) is not None:
                    self.add(where, "schema")
                    continue
                if seen.add(e["evidenceId"]):
                    self.x(where, "evidence-id")
                link = e["link"]
                if "blob" in link:
                    if e.get("digest") != link["blob"]:
                        self.x(where, "evidence-digest")
                    self._blob_cited(where, link["blob"])
                elif "spanId" in link and self.has_traces:
                    if (link["traceId"].lower(), link["spanId"].lower()) not in self.spans:
                        self.x(where, "trace-link")
                if self.capture_off and e["kind"] in CONTENT_KINDS:
                    self.x(where, "content-capture")
        except _FramingError:
            pass

    def _gates(self) -> list[tuple[int, dict]]:
        v = validator("gate-decision", "reader")
        out = []
        try:
            for lineno, raw in self.lines("gates.ndjson"):
                where = f"gates.ndjson:{lineno}"
                if raw is None:
                    self.add(where, "limit")
                    continue
                try:
                    g = jsonio.loads(raw)
                except JsonProblem as err:
                    self.add(where, err.code)
                    continue
                if v(g) is not None or not _times_exist(g, ("decidedAt",)):
                    self.add(where, "schema")
                    continue
                out.append((lineno, g))
        except _FramingError:
            pass
        return out

    def _gate_rule(self, lineno: int, g: dict) -> None:
        where = f"gates.ndjson:{lineno}"
        named = list((g.get("inputs") or {}).get("results") or ()) + list(g.get("decisive") or ())
        for rid in named:
            if not self._known(_key(rid)):
                self.x(where, "gate")
                break
        if g.get("outcome") == "ship" and g.get("comparability") == "incomparable":
            self.x(where, "gate")

    def _known(self, key: bytes | None) -> bool:
        """Whether a line of results.ndjson has the resultId of ``key``."""
        if key is None:
            return False
        if self.db is not None:
            return self.db.one("SELECT 1 FROM firsts WHERE key = ?", (key,)) is not None
        return key in self.ids

    # -- summary ---------------------------------------------------------------------------------------------
    def _prepare_summary(self, summary: dict | None) -> None:
        self.acc_by: dict[tuple[str, str], list[tuple[dict, EntryAccumulator]]] = {}
        self.single_lane: str | None = None
        self.summary_entries: list[tuple[dict, EntryAccumulator | None]] = []
        if summary is None:
            return
        lanes = summary.get("lanes", ())
        names = {lane["lane"] for lane in lanes}
        if len(names) == 1:  # [SUM-3]: a summary with a single lane (named once or more)
            (self.single_lane,) = names
        for lane in lanes:
            for entry in lane.get("metrics", ()):
                kind = self.metric_kinds.get(entry["metric"])
                if kind is None:
                    self.summary_entries.append((entry, None))
                    continue
                method = (entry.get("aggregate") or {}).get("method")
                acc = EntryAccumulator(kind, method, entry["metric"])
                self.summary_entries.append((entry, acc))
                self.acc_by.setdefault((lane["lane"], entry["path"]), []).append((entry, acc))

    def _summary_rules(self, summary: dict, run: dict) -> None:
        if summary.get("runId") != run.get("runId"):
            self.x("summary.json", "summary-run-id")
        seen_lanes: set[str] = set()
        seen_entries: set[tuple[str, str, str]] = set()
        for lane in summary.get("lanes", ()):
            name = lane["lane"]
            if name in seen_lanes:
                self.x("summary.json", "summary-duplicate")
            seen_lanes.add(name)
            for e in lane.get("metrics", ()):
                k = (name, e["metric"], e["path"])
                if k in seen_entries:
                    self.x("summary.json", "summary-duplicate")
                seen_entries.add(k)
                ci = e.get("ci")
                if type(ci) is dict and ci["low"] > ci["high"]:
                    self.x("summary.json", "interval")
        seen_usage: set[tuple[Any, Any]] = set()
        for u in summary.get("usage") or ():
            k = (u.get("role"), u.get("model", _ABSENT))
            if k in seen_usage:
                self.x("summary.json", "summary-duplicate")
            seen_usage.add(k)
        for entry, acc in self.summary_entries:
            if acc is None:
                self.x("summary.json", "metric")
                continue
            got = acc.result()
            if got["N"] != entry["N"] or got["n"] != entry["n"] or got["notMeasured"] != entry["notMeasured"]:
                self.x("summary.json", "summary")
                continue
            # `sum` and the values AEF defines compare exactly (binary64), `sumSq` within §3.6's tolerance, as the
            # reference verifier does (R10-3, R11-2)
            if "sum" in entry and not exactly_matches(entry["sum"], got["sum"]):
                self.x("summary.json", "summary")
                continue
            if "sumSq" in entry and not value_matches(entry["sumSq"], got["sumSq"]):
                self.x("summary.json", "summary")
                continue
            if acc.computes_value:
                if not exactly_matches(entry["value"], got["value"]):
                    self.x("summary.json", "summary")
                elif (got["n"] and got["value"] is None and acc.aggregate_method is None
                      and entry.get("verdict") != "not_measured"):
                    self.x("summary.json", "summary")  # a sum beyond binary64: no value, not measured (R10-3)
            elif (entry["value"] is None) != (got["n"] == 0):
                # [SUM-8]: a producer's aggregate is null exactly when n is 0
                self.x("summary.json", "summary")

    # -- results ---------------------------------------------------------------------------------------------
    def _results(self) -> None:
        """Stream results.ndjson: each line is checked on its own by :func:`_check_line` (in worker processes for
        a large file), then its record is folded into the state the rules across lines need, in line order."""
        run = self.run
        routes: dict[tuple[str, str], list[tuple[int, str, str]]] = {}
        self.accs: list[EntryAccumulator] = []
        for (lane, path), entries in self.acc_by.items():
            for entry, acc in entries:
                routes.setdefault((lane, path), []).append((len(self.accs), entry["metric"], acc.kind))
                self.accs.append(acc)
        global _CTX
        _CTX = _LineCtx(
            run_id=run["runId"] if run is not None else None,
            closed=self.closed,
            capture_off=self.capture_off,
            metric_kinds=self.metric_kinds,
            has_traces=self.has_traces,
            spans=self.spans,
            trace_ids=self.trace_ids,
            evidence_ids=self.evidence_ids,
            files=self.scan.files,
            withheld_ok=self.withheld_ok,
            routes=routes,
            single_lane=self.single_lane,
            mapper=self.mapper,
        )
        size = self.scan.files.get("results.ndjson", 0)
        workers = _workers_for(size)
        fold = self._fold_spilled if size > spill.bound("AEFGATE_SPILL_RESULTS", _SPILL_RESULTS) else self._fold
        bar = progress.start("verify results.ndjson" if self.mapper is None else "export results.ndjson", size,
                             "bytes")
        try:
            if workers:
                fold(self._parallel_results(size, workers, bar))
            elif self.mapper is None:
                batches = _batches(self.lines("results.ndjson"))
                fold(self._taken((start, *_check_batch(_advanced(bar, lines)), None) for start, lines in batches))
            else:
                batches = _batches(self.lines("results.ndjson"))
                fold(self._taken(_check_mapped(start, _advanced(bar, lines), None) for start, lines in batches))
        except _FramingError:
            pass
        finally:
            bar.close()
            _CTX = None

    def _taken(self, checked):
        """``(start, records)`` of checked batches, each batch's summary figures added up and its mapped output
        handed to the mapper (in line order, in this process) before its records are folded."""
        mapper = self.mapper
        for start, records, sums, payload in checked:
            self._add_figures(sums)
            if mapper is not None:
                mapper.take(payload)
            yield start, records

    def _add_figures(self, sums: dict) -> None:
        """A batch's summary figures (:func:`_sum_measure`) added to the entries' accumulators, in batch order."""
        accs = self.accs
        for i, (big_n, n, exact, lo, hi, values) in sums.items():
            accs[i].add_figures(big_n, n, exact, lo, hi, values)

    def _parallel_results(self, size: int, workers: int, bar: progress.Task):
        """results.ndjson in ranges of whole lines, each split and checked by a worker process, folded in order;
        this process only hashes the file (in a thread: hashlib releases the GIL) and folds the records.

        With a mapper (the one pass), each worker also maps its range's lines and hands back the output, which is
        given to the mapper here in range order; a mapper that numbers its output across lines first has each
        range counted (``mapper.count``, in the workers) so a range knows where it starts. The thread then also
        hashes each range apart, and a range whose bytes the worker read differently (the file changed during the
        pass) is a framing problem of the file: the mapped output of bytes that were not the ones hashed is never
        released."""
        name = "results.ndjson"
        path = self.root / name
        h = hashlib.sha256()
        mapper = self.mapper
        ranges: list[tuple[int, int]] = []
        range_digests: list[bytes] = []
        cut = threading.Event()
        pool = multiprocessing.get_context("fork").Pool(workers)  # fork before any thread starts
        hasher = threading.Thread(target=_hash_results, args=(path, h, mapper is None, ranges, range_digests, cut),
                                  daemon=True)
        hasher.start()
        try:
            framing, cuts = _cut_results(path, size)
            ranges[:] = cuts
        finally:
            cut.set()
        try:
            if framing is None:
                items = ranges if mapper is None else _numbered_ranges(pool, path, ranges, mapper)
                framing = yield from self._checked_ranges(pool, items, workers, path, ranges, range_digests, hasher,
                                                          bar)
        finally:
            pool.terminate()
            pool.join()
            hasher.join()
            self.digests[name] = (h.hexdigest(), size)
        if framing is not None:
            self.framing_problem(name, framing)
            raise _FramingError(name)

    def _checked_ranges(self, pool, items: list, workers: int, path: Path, ranges: list, range_digests: list,
                        hasher: threading.Thread, bar: progress.Task):
        """The ranges of :meth:`_parallel_results` checked by the workers, as ``(first line, records)`` in order,
        each range's summary figures added and (the one pass) its mapped output handed on once its bytes are known
        to be the ones hashed. Returns the framing problem that ends it, or None."""
        mapper = self.mapper
        lineno = 0
        results = _parallel(pool, items, workers, _check_range, path)
        try:
            for i, ((start, end), res) in enumerate(zip(ranges, results)):
                count, records, problem = res[0], res[1], res[2]
                bar.advance(end - start)
                if problem is not None:
                    return problem
                if lineno + count > jsonio.MAX_LINES:
                    return "limit"
                self._add_figures(res[3])
                if mapper is not None:
                    while len(range_digests) <= i and hasher.is_alive():
                        hasher.join(0.01)
                    if len(range_digests) <= i or range_digests[i] != res[5]:
                        mapper.failed(Refusal(mapper.rule, "the run changed during the verification",
                                              f"results.ndjson:{lineno + 1}", exit_code=1))
                        return "encoding"  # the file changed during the pass (read twice, two texts)
                    for payload in res[4]:
                        mapper.take(payload)
                yield lineno + 1, records
                lineno += count
        finally:
            results.close()
        return None

    def _fold_state(self) -> None:
        """The state :meth:`_fold` fills and :meth:`_results_end` reads, empty (lines count from 1: entry 0 is
        unused)."""
        self.ids: dict[bytes, int] = {}
        self.forward: dict[int, bytes] = {}  # lineno -> key of a parent not seen yet
        self.line_case = array("l", [-1])
        self.line_path = array("l", [-1])
        self.line_trial = array("h", [-1])
        self.line_flags = bytearray(1)
        self.line_parent = array("l", [_NONE])
        self.aggs: list[tuple[int, int, Any]] = []  # (lineno, total, decisive keys)
        self.rollups: dict[tuple[int, int], tuple[int, tuple]] = {}
        self.trial_groups: dict[tuple[int, int], list] = {}  # -> [n, passed, first state, agree]

    def _fold(self, checked) -> None:
        """Fold the records of checked lines, in line order, into the state of the rules across lines.

        Per line this keeps its case and path (indexes into interned tables), trial, flags and its parent's line
        number (a parent named before it is found at once; one named later is kept by key and resolved at the
        end); per distinct resultId, a 16-byte key in ``ids``."""
        cases: dict[str, int] = {}
        paths: dict[str, int] = {}
        self._fold_state()
        ids, forward = self.ids, self.forward
        line_case, line_path, line_trial = self.line_case, self.line_path, self.line_trial
        line_flags, line_parent = self.line_flags, self.line_parent
        aggs, rollups, trial_groups = self.aggs, self.rollups, self.trial_groups
        accs = self.accs
        x = self.x
        for start, records in checked:
            for offset, rec in enumerate(records):
                lineno = start + offset
                line_case.append(-1)
                line_path.append(-1)
                line_trial.append(-1)
                line_flags.append(0)
                line_parent.append(_NONE)
                if type(rec) is str:
                    self.add(f"results.ndjson:{lineno}", rec)
                    continue
                if self.blocking or rec is None:
                    continue
                key, case, path, trial, sc, pkey, agg, trials, codes, measures = rec
                if codes:
                    where = f"results.ndjson:{lineno}"
                    for c in codes:
                        x(where, c)
                flags = _F_READ
                ci = cases.get(case)
                if ci is None:
                    ci = cases[case] = len(cases)
                pi = paths.get(path)
                if pi is None:
                    pi = paths[path] = len(paths)
                line_case[lineno] = ci
                line_path[lineno] = pi
                if key in ids:
                    x(f"results.ndjson:{lineno}", "result-id")
                    flags |= _F_DUP
                else:
                    ids[key] = lineno
                if pkey is not None:
                    pl = ids.get(pkey)
                    if pl is None:
                        forward[lineno] = pkey
                        line_parent[lineno] = _FORWARD
                    else:
                        line_parent[lineno] = pl
                if trial >= 0:
                    line_trial[lineno] = trial
                    g = trial_groups.get((ci, pi))
                    if g is None:
                        trial_groups[(ci, pi)] = [1, 1 if sc == _PASSED else 0, sc, True]
                    else:
                        g[0] += 1
                        if sc == _PASSED:
                            g[1] += 1
                        if sc != g[2]:
                            g[3] = False
                if trials is not None:
                    flags |= _F_ROLLUP
                    if (ci, pi) in rollups:
                        x(f"results.ndjson:{lineno}", "trials")
                    else:
                        rollups[(ci, pi)] = (lineno, trials)
                if agg is not None:
                    flags |= _F_AGG
                    aggs.append((lineno, agg[0], agg[1]))
                line_flags[lineno] = flags
                for i, m in measures:
                    accs[i].add_measure(m)

    def _fold_spilled(self, checked) -> None:
        """:meth:`_fold` with the state on disk (a :class:`spill.SpillDb`) and a bounded window in memory.

        Each read line is a row of ``lines``: its key, case, path, trial, state code and flags, the line of its
        parent when the parent is among the last ``window`` lines (else NULL, and its parent's key is a row of
        ``lp``: resolved at the end), its aggregation total; rollup figures are rows of ``roll``. A decisive key of
        an aggregation line is settled here when the line holding it comes within the window after it and neither
        line's resultId may repeat (a row of ``dec`` with ``st`` 2 when its parent is not the aggregation line,
        nothing when it is), else it is a row of ``dec`` with ``st`` 0, checked at the end.

        Within the window the rules of [RES-5]/[RES-6]/[RES-8] between a line and its parent are applied at once
        (parent of another case, trials, children counted until the parent leaves the window); their problems are
        ``self.provisional``: exact when resultIds are distinct and no child comes beyond the window of its parent,
        which :meth:`_results_end_spilled` checks (else it redoes those rules on disk). Keys that may repeat (their
        bucket of a fixed bitmap was set already) are kept in ``need`` to be looked up at the end. The problems of a
        line alone and the summary's measures are handled here, as in memory."""
        f = _SpillFold(self._spill_tables(), spill.bound("AEFGATE_SPILL_WINDOW", _WINDOW))
        self.provisional = f.prov
        for start, records in checked:
            f.next_batch(start, len(records))
            self._fold_spilled_batch(f, start, records)
            f.write(_PACK, 1024)
        f.finish()
        self.late, self.trial_lines = f.late, f.trial_lines

    def _spill_tables(self) -> spill.SpillDb:
        """The tables of :meth:`_fold_spilled`, created empty in a new :class:`spill.SpillDb` (``self.db``)."""
        db = self.db = spill.SpillDb()
        db.execute(
            "CREATE TABLE lines(ln INTEGER PRIMARY KEY, key BLOB NOT NULL, cs TEXT NOT NULL, pa TEXT NOT NULL,"
            " trial INT NOT NULL, sf INT NOT NULL, pl INT, total)"
        )  # sf: the state code times 32 plus the flags (_F_CHILD: the line names a parent)
        # the rows of `lines`, packed as they are folded (one row per flush: the keys, 16 bytes each, and the rows
        # marshalled): `lines` is filled from them only when the end needs every line (_materialize)
        db.execute("CREATE TABLE packed(start INTEGER PRIMARY KEY, keys BLOB NOT NULL, rows BLOB NOT NULL)")
        self.materialized = False
        db.execute("CREATE TABLE lp(ln INTEGER PRIMARY KEY, pkey BLOB NOT NULL)")  # parents not in the window
        db.execute("CREATE TABLE roll(ln INTEGER PRIMARY KEY, tn, tp, ta)")  # the trials figures of rollup lines
        db.execute("CREATE TABLE dec(ln INT NOT NULL, dkey BLOB, st INT NOT NULL)")
        db.execute("CREATE TABLE need(key BLOB PRIMARY KEY) WITHOUT ROWID")
        return db

    def _fold_spilled_batch(self, f: _SpillFold, start: int, records: list) -> None:
        """Fold one batch of :meth:`_fold_spilled` (line by line, in this one loop), its rows kept in ``f``."""
        win, pending, seen, mask, cands, keys, pend = f.win, f.pending, f.seen, f.mask, f.cands, f.keys, f.pend
        rows, rolls, decs, lps, prov, window = f.rows, f.rolls, f.decs, f.lps, f.prov, f.window
        late, trial_lines, accs, x = f.late, f.trial_lines, self.accs, self.x
        for offset, rec in enumerate(records):
            if type(rec) is str:
                self.add(f"results.ndjson:{start + offset}", rec)
                continue
            if self.blocking or rec is None:
                continue
            lineno = start + offset
            key, case, path, trial, sc, pkey, agg, trials, codes, measures = rec
            if codes:
                where = f"results.ndjson:{lineno}"
                for c in codes:
                    x(where, c)
            h = hash(key)
            b = h & mask
            b2 = (h >> 29) & mask
            bit = 1 << (b & 7)
            bit2 = 1 << (b2 & 7)
            b >>= 3
            b2 >>= 3
            cand = seen[b] & bit and seen[b2] & bit2
            if cand:
                cands.append((key,))
            else:
                seen[b] |= bit
                seen[b2] |= bit2
            if window:
                keys.append(key)
                if key not in win:  # a later line of the same resultId: a duplicate, redone on disk
                    win[key] = [lineno, case, trial, 0 if agg is None else agg[0], 0]
            pl = None
            flags = _F_READ
            if pkey is not None:
                flags = _F_READ | _F_CHILD
                p = win.get(pkey)
                if p is None:
                    late += 1
                    lps.append((lineno, pkey))
                else:
                    pl = p[0]
                    if p[1] != case:
                        prov.add((f"results.ndjson:{lineno}", "parent"))
                    else:
                        p[4] += 1
                        ptrial = p[2]
                        if (ptrial >= 0 and trial != ptrial) or (trial >= 0 and ptrial < 0):
                            prov.add((f"results.ndjson:{lineno}", "trials"))
            if pending:
                a = pending.pop(key, None)
                if a is not None:
                    if cand:  # maybe not the first line of this resultId: checked on disk
                        decs.append((a, key, 0))
                    elif pl != a:
                        decs.append((a, key, 2))
                        prov.add((f"results.ndjson:{a}", "aggregation"))
            total = None
            if trial >= 0:
                trial_lines += 1
            if trials is not None:
                flags |= _F_ROLLUP
                trial_lines += 1
                rolls.append((lineno, _sql_int(trials[0]), _sql_int(trials[1]), _sql_int(trials[2])))
            if agg is not None:
                flags |= _F_AGG
                total = _sql_int(agg[0])
                for dk in agg[1]:
                    if window and not cand and dk is not None and dk not in win and dk not in pending:
                        pending[dk] = lineno
                        pend.append((lineno, dk))
                    else:
                        decs.append((lineno, dk, 0))
            rows.append((lineno, key, case, path, trial, sc << 5 | flags, pl, total))
            for i, m in measures:
                accs[i].add_measure(m)
        f.late, f.trial_lines = late, trial_lines

    def _results_end_spilled(self) -> None:
        """:meth:`_results_end` over the state :meth:`_fold_spilled` put on disk: the same rules, as queries
        (the problems are a set, ordered at the end, so the order they are found in does not matter)."""
        db = self.db
        q = db.execute
        x = self.x
        alone = {p for p in self.cross if p[1] == "aggregation"}  # the lines' own counts ([RES-6]), not children
        # ``need``: the resultIds to look up on disk: those that may be duplicated (_fold_spilled's candidates),
        # parents not found in the window, decisive children not settled in it, the results gates name.
        # ``firsts``: for each of them, its first line and how many lines hold it ([RES-4]), in one pass over lines
        if self.late:
            q("INSERT OR IGNORE INTO need SELECT pkey FROM lp")
        q("INSERT OR IGNORE INTO need SELECT dkey FROM dec WHERE st = 0 AND dkey IS NOT NULL")
        gate_keys = []
        for _, g in getattr(self, "gates", ()):
            for rid in list((g.get("inputs") or {}).get("results") or ()) + list(g.get("decisive") or ()):
                k = _key(rid)
                if k is not None:
                    gate_keys.append((k,))
        db.executemany("INSERT OR IGNORE INTO need VALUES (?)", gate_keys)
        # (pl: the parent line of the first line, as folded)
        q("CREATE TABLE firsts(key BLOB PRIMARY KEY, ln INT NOT NULL, n INT NOT NULL, pl INT) WITHOUT ROWID")
        self._find_firsts()
        dups = db.one("SELECT 1 FROM firsts WHERE n > 1 LIMIT 1") is not None
        if dups or self.late:
            self._materialize()
        if dups:
            q("CREATE TABLE dups(ln INTEGER PRIMARY KEY)")
            q("INSERT INTO dups SELECT l.ln FROM lines l CROSS JOIN firsts f ON f.key = l.key"
              " WHERE f.n > 1 AND l.ln != f.ln")
            for (ln,) in q("SELECT ln FROM dups").fetchall():
                x(f"results.ndjson:{ln}", "result-id")
            q(f"UPDATE lines SET sf = sf | {_F_DUP} WHERE ln IN (SELECT ln FROM dups)")
            # a parent found in the window may be a later line of a duplicated resultId: its first line counts
            q("UPDATE lines SET pl = (SELECT f.ln FROM lines p JOIN firsts f ON f.key = p.key WHERE p.ln = lines.pl)"
              " WHERE pl IN (SELECT l.ln FROM lines l CROSS JOIN firsts f ON f.key = l.key WHERE f.n > 1)")
        # parents named beyond the window (before or after): NULL stays for a resultId no line has (_MISSING)
        far = False
        if self.late:
            far = db.one("SELECT 1 FROM lp JOIN firsts f ON f.key = lp.pkey LIMIT 1") is not None
            q("UPDATE lines SET pl = (SELECT f.ln FROM lp JOIN firsts f ON f.key = lp.pkey WHERE lp.ln = lines.ln)"
              " WHERE ln IN (SELECT ln FROM lp)")
            for (ln,) in q(f"SELECT ln FROM lines WHERE sf & {_F_CHILD} AND pl IS NULL"):
                x(f"results.ndjson:{ln}", "parent")
        if not dups and not far:
            # every parent was in the window of its children: the window's problems are the rules' problems
            # (no parent was named beyond the window, no resultId repeats: a first line's parent is as folded)
            self.cross |= self.provisional
            for (ln,) in q(
                "SELECT DISTINCT d.ln FROM dec d WHERE d.st = 0 AND (d.dkey IS NULL OR NOT EXISTS (SELECT 1"
                " FROM firsts f WHERE f.key = d.dkey AND f.pl IS d.ln))"
            ):
                x(f"results.ndjson:{ln}", "aggregation")
        else:
            self._parents_on_disk(dups)
        if any(c == "parent" for _, c in self.cross):
            # a line names a parent that is missing or of another case. The window and _parents_on_disk count
            # only children of their parent's case; [RES-6] counts every line naming it (as _results_end does):
            # the children's `aggregation` problems are counted again over those lines (a missing parent is
            # NULL: no line's child)
            self.cross = {p for p in self.cross if p[1] != "aggregation"} | alone
            self._materialize()
            q("CREATE TABLE kids(pl INTEGER PRIMARY KEY, n INT NOT NULL)")
            q(f"INSERT INTO kids SELECT pl, COUNT(*) FROM lines WHERE pl IS NOT NULL AND NOT sf & {_F_DUP} GROUP BY pl")
            # children without an aggregation; totals; decisive ids no child has (as _parents_on_disk)
            for (ln,) in q(
                f"SELECT l.ln FROM lines l LEFT JOIN kids c ON c.pl = l.ln WHERE (c.n AND NOT l.sf & {_F_AGG})"
                f" OR (l.sf & {_F_AGG} AND NOT l.sf & {_F_DUP} AND IFNULL(c.n, 0) IS NOT l.total)"
            ):
                x(f"results.ndjson:{ln}", "aggregation")
            for (ln,) in q(
                f"SELECT DISTINCT d.ln FROM dec d JOIN lines l ON l.ln = d.ln WHERE NOT l.sf & {_F_DUP} AND (d.st = 2"
                " OR d.dkey IS NULL OR NOT EXISTS (SELECT 1 FROM firsts f JOIN lines r ON r.ln = f.ln"
                " WHERE f.key = d.dkey AND r.pl IS d.ln))"
            ):
                x(f"results.ndjson:{ln}", "aggregation")
        if self.trial_lines:
            self._materialize()
            self._trials_on_disk()

    def _materialize(self) -> None:
        """Fill ``lines`` (once) from the rows :meth:`_fold_spilled` packed: for the rules that need every line."""
        if self.materialized:
            return
        self.materialized = True
        db = self.db
        insert = "INSERT INTO lines VALUES (?,?,?,?,?,?,?,?)"
        for (start,) in db.execute("SELECT start FROM packed ORDER BY start").fetchall():
            (blob,) = db.one("SELECT rows FROM packed WHERE start = ?", (start,))
            db.executemany(insert, marshal.loads(blob))

    def _find_firsts(self) -> None:
        """``firsts``: for each key of ``need``, its first line, how many lines hold it and the first line's parent
        line as folded. Up to ``_NEED_CHUNK`` keys at a time in a set, each looked for in the packed keys (no query
        per line); with more than ``_NEED_PASSES`` such sets, every line is put in ``lines`` and joined instead."""
        db = self.db
        (nneed,) = db.one("SELECT COUNT(*) FROM need")
        if not nneed:
            return
        chunk = _NEED_CHUNK
        if nneed > chunk * _NEED_PASSES:
            self._materialize()
            db.execute("INSERT INTO firsts SELECT l.key, MIN(l.ln), COUNT(*), l.pl FROM lines l"
                       " CROSS JOIN need n ON n.key = l.key GROUP BY l.key")  # (l.pl: of the MIN line's row)
            return
        after = b""
        while True:
            ks = [k for (k,) in db.execute("SELECT key FROM need WHERE key > ? ORDER BY key LIMIT ?", (after, chunk))]
            if not ks:
                return
            after = ks[-1]
            want = set(ks)
            del ks
            found: dict[bytes, list] = {}
            for (start,) in db.execute("SELECT start FROM packed ORDER BY start").fetchall():
                (kb,) = db.one("SELECT keys FROM packed WHERE start = ?", (start,))
                hits = [i for i in range(0, len(kb), 16) if kb[i:i + 16] in want]
                if not hits:
                    continue
                (blob,) = db.one("SELECT rows FROM packed WHERE start = ?", (start,))
                rows = marshal.loads(blob)
                for i in hits:
                    r = rows[i >> 4]
                    f = found.get(r[1])
                    if f is None:
                        found[r[1]] = [r[1], r[0], 1, r[6]]
                    else:
                        f[2] += 1
            db.executemany("INSERT INTO firsts VALUES (?,?,?,?)", list(found.values()))
            if len(want) < chunk:
                return

    def _parents_on_disk(self, dups: bool) -> None:
        """[RES-5], [RES-6] and the parent part of [RES-8] over every line on disk (duplicated resultIds, or
        parents beyond their children's window)."""
        q = self.db.execute
        x = self.x
        # a parent of another case ([RES-5]); trial consistency with the parent ([RES-8])
        cur = q(
            "SELECT c.ln, p.cs != c.cs FROM lines c JOIN lines p ON p.ln = c.pl"
            " WHERE p.cs != c.cs OR (p.trial >= 0 AND c.trial != p.trial) OR (c.trial >= 0 AND p.trial < 0)"
        )
        for ln, bad_parent in cur:
            x(f"results.ndjson:{ln}", "parent" if bad_parent else "trials")
        # children: distinct resultIds whose parent is valid
        q("CREATE TABLE cc(pl INTEGER PRIMARY KEY, n INT NOT NULL)")
        q(f"INSERT INTO cc SELECT c.pl, COUNT(*) FROM lines c JOIN lines p ON p.ln = c.pl"
          f" WHERE p.cs = c.cs AND NOT c.sf & {_F_DUP} GROUP BY c.pl")
        # children without an aggregation, aggregation totals and decisive children ([RES-5], [RES-6])
        for (ln,) in q(f"SELECT c.pl FROM cc c JOIN lines l ON l.ln = c.pl WHERE NOT l.sf & {_F_AGG}"):
            x(f"results.ndjson:{ln}", "aggregation")
        cur = q(
            f"SELECT l.ln FROM lines l LEFT JOIN cc c ON c.pl = l.ln WHERE l.sf & {_F_AGG}"
            f" AND NOT l.sf & {_F_DUP} AND IFNULL(c.n, 0) IS NOT l.total"
        )
        for (ln,) in cur:
            x(f"results.ndjson:{ln}", "aggregation")
        # decisive children: those settled in the window (st 2: not a child of the aggregation line) and the others
        cur = q(
            f"SELECT DISTINCT d.ln FROM dec d JOIN lines l ON l.ln = d.ln LEFT JOIN cc c ON c.pl = l.ln"
            f" WHERE NOT l.sf & {_F_DUP} AND IFNULL(c.n, 0) IS l.total AND (d.st = 2 OR d.dkey IS NULL"
            f" OR NOT EXISTS (SELECT 1 FROM firsts f JOIN lines r ON r.ln = f.ln WHERE f.key = d.dkey AND r.pl IS d.ln))"
        )
        for (ln,) in cur:
            x(f"results.ndjson:{ln}", "aggregation")

    def _trials_on_disk(self) -> None:
        """[RES-8] on disk: groups of trial lines by case and path, rollups (the first rollup line of a case and
        path; a second one is a problem) and the paths of the parents of each group's trial lines."""
        db = self.db
        q = db.execute
        x = self.x
        q("CREATE TABLE tg(cs TEXT, pa TEXT, n INT, passed INT, agree INT, PRIMARY KEY (cs, pa)) WITHOUT ROWID")
        q(f"INSERT INTO tg SELECT cs, pa, COUNT(*), SUM(sf >> 5 = {_PASSED}), MIN(sf >> 5) = MAX(sf >> 5) FROM lines"
          f" WHERE trial >= 0 GROUP BY cs, pa")
        q("CREATE TABLE ro(cs TEXT, pa TEXT, ln INT NOT NULL, PRIMARY KEY (cs, pa)) WITHOUT ROWID")
        q(f"INSERT INTO ro SELECT cs, pa, MIN(ln) FROM lines WHERE sf & {_F_ROLLUP} GROUP BY cs, pa")
        for (ln,) in q(f"SELECT l.ln FROM lines l JOIN ro ON ro.cs = l.cs AND ro.pa = l.pa"
                       f" WHERE l.sf & {_F_ROLLUP} AND l.ln != ro.ln"):
            x(f"results.ndjson:{ln}", "trials")
        if self.closed:
            (nro,) = db.one("SELECT COUNT(*) FROM ro")
            (ntg,) = db.one("SELECT COUNT(*) FROM tg")
            if nro < ntg:
                for (ln,) in q("SELECT l.ln FROM lines l WHERE l.trial >= 0 AND NOT EXISTS"
                               " (SELECT 1 FROM ro WHERE ro.cs = l.cs AND ro.pa = l.pa)"):
                    x(f"results.ndjson:{ln}", "trials")
        # kind: 0 a root, 1 unknown (the parent is missing or of another case), 2 the parent's path q
        q("CREATE TABLE tpp(cs TEXT, pa TEXT, kind INT, q TEXT)")
        q(f"INSERT INTO tpp SELECT DISTINCT c.cs, c.pa,"
          f" CASE WHEN NOT c.sf & {_F_CHILD} THEN 0 WHEN p.ln IS NULL OR p.cs != c.cs THEN 1 ELSE 2 END,"
          f" CASE WHEN NOT c.sf & {_F_CHILD} OR p.ln IS NULL OR p.cs != c.cs THEN NULL ELSE p.pa END"
          f" FROM lines c LEFT JOIN lines p ON p.ln = c.pl WHERE c.trial >= 0")
        q("CREATE INDEX tppk ON tpp(cs, pa)")
        cur = q(
            f"SELECT ro.ln, rl.tn, rl.tp, rl.ta, tg.n, tg.passed, tg.agree, NOT l.sf & {_F_CHILD}, l.pl,"
            " (SELECT COUNT(*) FROM tpp t WHERE t.cs = ro.cs AND t.pa = ro.pa),"
            " (SELECT COUNT(*) FROM tpp t WHERE t.cs = ro.cs AND t.pa = ro.pa AND t.kind = 1),"
            " (SELECT t.kind FROM tpp t WHERE t.cs = ro.cs AND t.pa = ro.pa),"
            " (SELECT o.ln FROM tpp t JOIN ro o ON o.cs = ro.cs AND o.pa = t.q"
            "  WHERE t.cs = ro.cs AND t.pa = ro.pa AND t.kind = 2)"
            " FROM ro JOIN lines l ON l.ln = ro.ln JOIN roll rl ON rl.ln = ro.ln"
            " LEFT JOIN tg ON tg.cs = ro.cs AND tg.pa = ro.pa"
        )
        for ln, tn, tp, ta, n, passed, agree, root, pl, k, unknown, kind, target in cur:
            if n is None or (tn, tp, ta) != (n, passed, agree):
                x(f"results.ndjson:{ln}", "trials")
                continue
            if unknown:
                continue
            if k != 1:
                x(f"results.ndjson:{ln}", "trials")
                continue
            if kind == 0:
                if not root:
                    x(f"results.ndjson:{ln}", "trials")
            elif target is not None and (root or pl != target):
                x(f"results.ndjson:{ln}", "trials")

    def _results_end(self) -> None:
        """The rules that need every line: parents, children, decisive ids, trials."""
        if self.db is not None:
            return self._results_end_spilled()
        if not hasattr(self, "ids"):
            return
        childcount, trial_parent_paths = self._parents_end()
        self._aggregations_end(childcount)
        self._trials_end(trial_parent_paths)

    def _parents_end(self) -> tuple[array, dict[tuple[int, int], set[int]]]:
        """Parents ([RES-5]) and their trials ([RES-8]), every line read: ``(each line's count of children, the
        paths of the parents of each trial group)`` (:data:`_ROOT`, :data:`_UNKNOWN` or a path index)."""
        x = self.x
        ids = self.ids
        line_case, line_path, line_trial = self.line_case, self.line_path, self.line_trial
        line_parent, line_flags = self.line_parent, self.line_flags
        n = len(line_parent)
        # parents named before their line was read
        for ln, pkey in self.forward.items():
            pl = ids.get(pkey)
            line_parent[ln] = _MISSING if pl is None else pl
        childcount = array("l", bytes(8 * n)) if n else array("l")
        # parents ([RES-5]) and trial consistency ([RES-8])
        trial_parent_paths: dict[tuple[int, int], set[int]] = {}
        for ln in range(1, n):
            flags = line_flags[ln]
            if not flags & _F_READ:
                continue
            pl = line_parent[ln]
            trial = line_trial[ln]
            if pl == _NONE:
                if trial >= 0:
                    trial_parent_paths.setdefault((line_case[ln], line_path[ln]), set()).add(_ROOT)
                continue
            # [RES-6] defines a node's children: "the distinct resultIds of the lines whose parentResultId is its
            # resultId". A line of another case naming it is one (its `parent` problem is its own, at its line), so
            # it counts for `aggregation` like any other: a composite whose caseId changed keeps its children
            if pl != _MISSING and not flags & _F_DUP:  # children are distinct resultIds
                childcount[pl] += 1
            if pl == _MISSING or line_case[pl] != line_case[ln]:
                x(f"results.ndjson:{ln}", "parent")
                if trial >= 0:  # unknown: the rollup's parent is not judged
                    trial_parent_paths.setdefault((line_case[ln], line_path[ln]), set()).add(_UNKNOWN)
                continue
            ptrial = line_trial[pl]
            if (ptrial >= 0 and trial != ptrial) or (trial >= 0 and ptrial < 0):
                x(f"results.ndjson:{ln}", "trials")
            if trial >= 0:
                trial_parent_paths.setdefault((line_case[ln], line_path[ln]), set()).add(line_path[pl])
        return childcount, trial_parent_paths

    def _aggregations_end(self, childcount: array) -> None:
        """Children and aggregations ([RES-5], [RES-6]): each line's count of children its total, its decisive
        ids children of its own."""
        x = self.x
        ids = self.ids
        line_parent, line_flags = self.line_parent, self.line_flags
        for ln in range(1, len(line_parent)):
            if childcount[ln] and not line_flags[ln] & _F_AGG:
                x(f"results.ndjson:{ln}", "aggregation")
        for ln, total, decisive in self.aggs:
            if line_flags[ln] & _F_DUP:
                # a duplicate id: its children are the first line's; the id problem is already reported
                continue
            if childcount[ln] != total:
                x(f"results.ndjson:{ln}", "aggregation")
                continue
            for dk in decisive:
                dl = ids.get(dk)
                if dl is None or line_parent[dl] != ln:
                    x(f"results.ndjson:{ln}", "aggregation")
                    break

    def _trials_end(self, trial_parent_paths: dict[tuple[int, int], set[int]]) -> None:
        """Trials ([RES-8]): each closed run's trial group has its rollup, whose figures are the group's and whose
        parent is the one the trials' parents roll up to."""
        x = self.x
        line_case, line_path, line_trial = self.line_case, self.line_path, self.line_trial
        line_parent, line_flags = self.line_parent, self.line_flags
        rollups = self.rollups
        if self.closed and len(rollups) < len(self.trial_groups):
            for ln in range(1, len(line_parent)):
                if line_flags[ln] & _F_READ and line_trial[ln] >= 0:
                    if (line_case[ln], line_path[ln]) not in rollups:
                        x(f"results.ndjson:{ln}", "trials")
        for (ci, pi), (ln, trials) in rollups.items():
            g = self.trial_groups.get((ci, pi))
            if g is None:
                x(f"results.ndjson:{ln}", "trials")
                continue
            if trials != (g[0], g[1], g[3]):
                x(f"results.ndjson:{ln}", "trials")
                continue
            pp = trial_parent_paths.get((ci, pi), set())
            if _UNKNOWN in pp:
                continue
            if len(pp) != 1:
                x(f"results.ndjson:{ln}", "trials")
                continue
            (q,) = pp
            mine = line_parent[ln]
            if q == _ROOT:
                if mine != _NONE:
                    x(f"results.ndjson:{ln}", "trials")
            else:
                target = rollups.get((ci, q))
                if target is not None and mine != target[0]:
                    x(f"results.ndjson:{ln}", "trials")


class _SpillFold:
    """The state of :meth:`_RunVerifier._fold_spilled` between batches: the window of the last lines' keys, the
    decisive keys pending in it, the Bloom filter of the resultIds seen, and the rows not written yet."""

    def __init__(self, db: spill.SpillDb, window: int):
        self.db = db
        self.window = window
        # key -> [line, case, trial, aggregation total (0 without an aggregation), children] of the first line holding
        # it among the last `window` lines or more (whole batches leave the window). When a line leaves the window
        # its children are counted ([RES-5], [RES-6]): a problem when they are not its total (any child of a line
        # without an aggregation is one)
        self.win: dict[bytes, list] = {}
        self.pending: dict[bytes, int] = {}  # decisive key -> its aggregation line (within the window)
        self.gens: deque = deque()  # per batch in the window: (its last line, its keys, its (aggregation line, key))
        self.keys: list | None = None  # the current batch's keys and (aggregation line, key) pending, in the window
        self.pend: list | None = None
        # a Bloom filter of the resultIds seen (two bits each, from the key's hash: cached by the window's dict): a
        # key whose two bits are both set already may be a duplicate
        nbytes = 1 << max(0, spill.bound("AEFGATE_SPILL_SEEN", _SEEN_BYTES).bit_length() - 1)
        self.seen = bytearray(nbytes)
        self.mask = nbytes * 8 - 1
        self.cands: list = []
        self.prov: set = set()
        self.late = self.trial_lines = 0
        self.rows: list = []
        self.rolls: list = []
        self.decs: list = []
        self.lps: list = []

    def next_batch(self, start: int, n: int) -> None:
        """Before a batch of ``n`` lines from ``start``: the batches that leave the window, their lines' children
        counted and their pending decisive keys kept for the end; the batch's own lists of keys in the window."""
        window = self.window
        if not window:
            return
        win, pending, gens, prov, decs = self.win, self.pending, self.gens, self.prov, self.decs
        old = start - 1 - window
        while gens and gens[0][0] <= old:
            last, keys, pend = gens.popleft()
            for k in keys:
                p = win.get(k)
                if p is not None and p[0] <= last:
                    del win[k]
                    if p[4] != p[3]:
                        prov.add((f"results.ndjson:{p[0]}", "aggregation"))
            for a, dk in pend:
                if pending.get(dk) == a:
                    del pending[dk]
                    decs.append((a, dk, 0))
        self.keys, self.pend = [], []
        gens.append((start + n - 1, self.keys, self.pend))

    def write(self, pack_at: int, many_at: int) -> None:
        """Write the rows held: the lines' (packed), rollups' and late parents' once ``pack_at`` lines are held, the
        decisive keys and the keys to look up once ``many_at`` of each are."""
        db, rows, rolls, lps, decs, cands = self.db, self.rows, self.rolls, self.lps, self.decs, self.cands
        if len(rows) >= pack_at:
            db.execute("INSERT INTO packed VALUES (?,?,?)",
                       (rows[0][0], b"".join([r[1] for r in rows]), marshal.dumps(rows)))
            rows.clear()
            if rolls:
                db.executemany("INSERT INTO roll VALUES (?,?,?,?)", rolls)
                rolls.clear()
            if lps:
                db.executemany("INSERT INTO lp VALUES (?,?)", lps)
                lps.clear()
        if len(decs) >= many_at:
            db.executemany("INSERT INTO dec VALUES (?,?,?)", decs)
            decs.clear()
        if len(cands) >= many_at:
            db.executemany("INSERT OR IGNORE INTO need VALUES (?)", cands)
            cands.clear()

    def finish(self) -> None:
        """After the last batch: the children of the lines still in the window counted, the decisive keys still
        pending kept for the end, and every row written."""
        for p in self.win.values():
            if p[4] != p[3]:
                self.prov.add((f"results.ndjson:{p[0]}", "aggregation"))
        for dk, a in self.pending.items():
            self.decs.append((a, dk, 0))
        self.write(1, 1)


# -- checking one result line (pure: runs in worker processes for a large file) ------------------------------------


@dataclass
class _LineCtx:
    """What checking a result line on its own needs: read-only, inherited by forked workers."""

    run_id: str | None
    closed: bool
    capture_off: bool
    metric_kinds: dict
    has_traces: bool
    spans: set
    trace_ids: set
    evidence_ids: spill.StrSet
    files: runfs.Files  # read by a binary search when a line cites a blob (the pages shared with the parent)
    withheld_ok: frozenset
    routes: dict
    single_lane: str | None
    mapper: Any = None  # the one pass's mapper (onepass.LineMapper), or None: only checking


_CTX: _LineCtx | None = None
# evidence ids of this form (the run writer's) are one bit each; the others are kept in a set of up to
# AEFGATE_SPILL_IDS, then on disk (spill.StrSet)
_NUMBERED = "E-"
_SPILL_IDS = 4096
_BATCH = 512  # lines checked and folded at a time in this process (their text and records are in memory)
_PARALLEL_FROM = 16 * 1024 * 1024  # bytes of results.ndjson
# above this many bytes of results.ndjson (AEFGATE_SPILL_RESULTS), the state of the rules across lines is kept on
# disk (_fold_spilled); below, in memory: at most ~40,000 lines (a result line takes 100 bytes or more)
_SPILL_RESULTS = 4 * 1024 * 1024
# lines whose keys stay in memory on the spilled path: most parents and decisive children are found among them
_WINDOW = 4096
# the Bloom filter of resultIds seen (AEFGATE_SPILL_SEEN: bytes, two bits a key): a run of n lines of distinct
# resultIds looks ~4 * n**3 / (3 * (8 * this)**2) keys up at the end (about 5,000 at a million lines)
_SEEN_BYTES = 1 << 21
_PACK = 1024  # lines' rows packed together (a row of `packed`) on the spilled path, about
# the keys looked up at the end (need) are looked for in the packed keys this many at a time (a set in memory), in
# up to this many passes; beyond, every line is put in `lines` and joined on disk
_NEED_CHUNK = 1 << 15
_NEED_PASSES = 8
_F_CHILD = 16  # on the spilled path: the line names a parent


_ONE_PROCESS = contextvars.ContextVar("aefgate_verify_one_process", default=False)


@contextlib.contextmanager
def in_one_process():
    """Verifications made within check every line in this process (no worker processes): an import's own
    verification before it seals (docs/design/bounded-memory.md: its peak memory then does not grow with the
    run, and converting, not checking, is what takes its time). ``AEFGATE_WORKERS`` still overrides."""
    token = _ONE_PROCESS.set(True)
    try:
        yield
    finally:
        _ONE_PROCESS.reset(token)


def _workers_for(size: int) -> int:
    """How many worker processes check result lines: none for a small file (a process costs more than it
    saves) or within :func:`in_one_process`, else one per core. ``AEFGATE_WORKERS`` overrides (0: in this
    process)."""
    env = os.environ.get("AEFGATE_WORKERS")
    if env is not None:
        return max(0, int(env))
    if _ONE_PROCESS.get():
        return 0
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if size < _PARALLEL_FROM or cpus < 2 or "fork" not in multiprocessing.get_all_start_methods():
        return 0
    return cpus


def _advanced(bar: progress.Task, lines: list) -> list:
    """``lines`` (a batch of raw lines), their bytes counted on ``bar``."""
    bar.advance(sum(len(line) + 1 if line is not None else 1 for line in lines))
    return lines


def _batches(lines, size: int | None = None):
    """``(first line number, [raw lines])`` batches of ``size`` (``_BATCH``) lines from ``(lineno, raw)`` pairs."""
    size = _BATCH if size is None else size
    start, batch = 1, []
    for lineno, raw in lines:
        if not batch:
            start = lineno
        batch.append(raw)
        if len(batch) >= size:
            yield start, batch
            batch = []
    if batch:
        yield start, batch


def _check_batch(batch: list) -> tuple[list, dict]:
    """``(records, summary figures)`` of a batch of raw lines (:func:`_check_line`)."""
    ctx = _CTX
    sums: dict = {}
    docs = _read_batch(batch)
    if docs is not None:
        return [_check_doc(ctx, line, None, 0, sums) for line in docs], sums
    return [_check_line(ctx, raw, None, 0, sums) if raw is not None else "limit" for raw in batch], sums


def _read_batch(batch: list, data: bytes | None = None) -> list | None:
    """The lines of a batch decoded at once (``jsonio.loads_lines``: the usual case), or None: then each line is
    read on its own (:func:`_check_line`). ``data``: the batch's bytes, each line ended by LF, when at hand."""
    if data is None:
        if None in batch:
            return None
        data = b"\n".join(batch) + b"\n"
    return jsonio.loads_lines(data, len(batch))


def _check_mapped(start: int, batch: list, base: int | None) -> tuple[int, list, Any]:
    """``(start, records, mapped output)`` of a batch of raw lines numbered from ``start``: each line checked
    (:func:`_check_line`), and the lines that read (decoded, valid against the reader schema) handed to the
    mapper in order, numbered from ``base`` (None: where its last batch ended). A mapper's refusal is kept as the
    output (:meth:`LineMapper.map_lines` turns it into one)."""
    ctx = _CTX
    keep: list = []
    sums: dict = {}
    docs = _read_batch(batch)
    if docs is not None:
        records = [_check_doc(ctx, line, keep, n, sums) for n, line in enumerate(docs, start)]
    else:
        records = [_check_line(ctx, raw, keep, n, sums) if raw is not None else "limit"
                   for n, raw in enumerate(batch, start)]
    return start, records, sums, ctx.mapper.map_lines(keep, base)


_RANGE = 2 * 1024 * 1024  # a worker holds one range, its lines and their records: 2 MiB keeps that small (8 MiB: +85 MB PSS at 1M lines, no faster)


def _ranges(f, size: int, target: int | None = None) -> list[tuple[int, int]]:
    """Cut a file into ranges of whole lines (each starts after an LF) of about ``target`` bytes (``_RANGE``)."""
    target = _RANGE if target is None else target
    out = []
    start = 0
    while start < size:
        pos = start + target
        if pos >= size:
            out.append((start, size - start))
            break
        f.seek(pos)
        while True:
            chunk = f.read(1 << 16)
            if not chunk:
                end = size
                break
            i = chunk.find(b"\n")
            if i >= 0:
                end = pos + i + 1
                break
            pos += len(chunk)
        out.append((start, end - start))
        start = end
    return out


def _check_range(path, item) -> tuple:
    """Split and check one range of whole lines: ``(lines, records, framing problem or None, summary figures)``;
    with a mapper
    (``item`` is then ``((offset, length), base)``), also the mapped output of its lines (numbered in the range:
    the parent knows where it starts), one per batch of ``_BATCH`` lines, and the SHA-256 of the bytes read."""
    if _CTX.mapper is None:
        offset, length = item
        base = None
    else:
        (offset, length), base = item
    with open(path, "rb") as f:
        f.seek(offset)
        data = f.read(length)
    if b"\r" in data:
        return 0, [], "encoding"
    parts = data.split(b"\n")
    parts.pop()  # the range ends in LF
    ctx = _CTX
    if b"\n\n" in data or data[:1] == b"\n":
        return 0, [], "encoding"  # a blank line
    mapper = ctx.mapper
    first = 1
    if mapper is not None:
        first, base = base
    big = any(len(raw) > jsonio.MAX_DOC for raw in parts)
    sums: dict = {}
    out: list = []
    payloads: list = []
    # _BATCH lines at a time: each batch's values are checked (and mapped) while still in the CPU's caches
    for i in range(0, len(parts), _BATCH):
        chunk = parts[i:i + _BATCH]
        keep: list | None = [] if mapper is not None else None
        docs = None if big else _read_batch(chunk)
        if docs is not None:
            out.extend([_check_doc(ctx, line, keep, n, sums) for n, line in enumerate(docs, first + i)])
        else:
            out.extend(["limit" if len(raw) > jsonio.MAX_DOC else _check_line(ctx, raw, keep, n, sums)
                        for n, raw in enumerate(chunk, first + i)])
        if mapper is not None:
            payloads.append(mapper.map_lines(keep, base if i == 0 else None))
    if mapper is None:
        return len(parts), out, None, sums
    return len(parts), out, None, sums, payloads, hashlib.sha256(data).digest()


def _hash_results(path: Path, h, whole: bool, ranges: list, range_digests: list, cut: threading.Event) -> None:
    """The hashing thread of :meth:`_RunVerifier._parallel_results`: the file into ``h``; unless ``whole``, once the
    ``ranges`` are cut (``cut``), each range's SHA-256 too (appended to ``range_digests`` in order)."""
    with open(path, "rb", buffering=0) as f:
        if whole:
            while chunk := f.read(1 << 22):
                h.update(chunk)
            return
        cut.wait()
        for _, length in ranges:
            rh = hashlib.sha256()
            left = length
            while left > 0:
                chunk = f.read(min(left, 1 << 22))
                if not chunk:
                    break
                left -= len(chunk)
                h.update(chunk)
                rh.update(chunk)
            range_digests.append(rh.digest())
        while chunk := f.read(1 << 22):
            h.update(chunk)


def _cut_results(path: Path, size: int) -> tuple[str | None, list[tuple[int, int]]]:
    """``(framing problem or None, ranges of whole lines)`` of results.ndjson: a BOM or a last line without its LF
    is an ``encoding`` problem of the file (:func:`_ranges`)."""
    with open(path, "rb") as f:
        head = f.read(3)
        f.seek(max(0, size - 1))
        last = f.read(1)
        ranges = _ranges(f, size)
    framing = None
    if head == jsonio.BOM:
        framing = "encoding"
    elif size and last != b"\n":
        framing = "encoding"
    return framing, ranges


def _numbered_ranges(pool, path: Path, ranges: list, mapper: Any) -> list:
    """The one pass's work items: ``((offset, length), (first line number, where the mapper's numbering starts))``
    of each range, from the ranges counted by the workers (:func:`_count_range`)."""
    counts = pool.map(functools.partial(_count_range, path), ranges, chunksize=1)
    first, base = 1, mapper.first_count()
    items = []
    for r, (nlines, n) in zip(ranges, counts):
        items.append((r, (first, base)))
        first += nlines
        base += n
    return items


def _parallel(pool, items, workers: int, fn, *args):
    """``fn(*args, item)`` for each item on ``pool``, results in order, with a bounded number in flight.
    Closing the generator stops the feeding (so the pool can be terminated without waiting for it)."""
    sem = threading.BoundedSemaphore(2 * workers + 2)
    stop = threading.Event()

    def feed():
        for it in items:
            while not sem.acquire(timeout=0.05):
                if stop.is_set():
                    return
            if stop.is_set():
                return
            yield it

    try:
        for res in pool.imap(functools.partial(fn, *args), feed()):
            sem.release()
            yield res
    finally:
        stop.set()


def _time_exists(t: str) -> bool:
    """[ENC-8] for a string the schema's pattern already accepted: only days 29..31 can fail to exist."""
    if t[8:10] < "29":
        return True
    try:
        parse_time(t)
    except ValueError:
        return False
    return True


def _earlier(a: str, b: str) -> bool:
    """Whether time ``a`` is strictly before time ``b`` (both valid [ENC-8] strings), at full precision."""
    if a[:19] != b[:19]:  # YYYY-MM-DDTHH:MM:SS is fixed-width: its text order is its time order
        return a[:19] < b[:19]
    return a[20:-1].ljust(9, "0") < b[20:-1].ljust(9, "0")  # the fraction digits, at full precision


def _count_range(path, item) -> tuple[int, int]:
    """A worker, before the one pass's checking: ``(lines, the mapper's count)`` of one range of whole lines (the
    count is 0 for a mapper that does not number its output across lines)."""
    offset, length = item
    with open(path, "rb") as f:
        f.seek(offset)
        data = f.read(length)
    m = _CTX.mapper
    return data.count(b"\n"), (m.count(data) if m.counts else 0)


def _sum_measure(sums: dict, i: int, m: float | None) -> None:
    """Add one measure of summary entry ``i`` to a batch's figures ``sums[i]``: ``[N, n, exact sum (times
    2**1074), min, max, the values in line order]`` (:meth:`EntryAccumulator.add_figures` adds them up in the
    parent process, in batch order: the same figures as measure by measure)."""
    f = sums.get(i)
    if f is None:
        f = sums[i] = [0, 0, 0, None, None, []]
    f[0] += 1
    if m is None:
        return
    f[1] += 1
    f[2] += _scaled(m)
    if f[3] is None or m < f[3]:
        f[3] = m
    if f[4] is None or m > f[4]:
        f[4] = m
    f[5].append(m)


def _check_line(ctx: _LineCtx, raw: bytes, keep: list | None = None, lineno: int = 0, sums: dict | None = None):
    """Check one result line on its own. Returns a §3.9 code (``encoding``, ``limit``, ``schema``) when the line
    does not read, None when nothing more can be checked (no run id), else the line's record:
    ``(key, caseId, path, trial or -1, state code, parent key, aggregation (total, decisive keys) or None,
    trials (n, passed, agree) or None, codes of the problems found on the line alone, summary measures)``."""
    try:
        line = jsonio.loads(raw)
    except JsonProblem as e:
        return e.code
    return _check_doc(ctx, line, keep, lineno, sums)


def _check_doc(ctx: _LineCtx, line: dict, keep: list | None = None, lineno: int = 0, sums: dict | None = None):
    """:func:`_check_line` of a line already read (``jsonio.loads``). With ``sums``, the line's summary measures
    are added to the batch's figures there (:func:`_sum_measure`) instead of being returned in its record."""
    if not reader_valid(line):  # the typed msgspec path, the compiled reader schema where it cannot decide
        return "schema"
    started = line.get("startedAt")
    ended = line.get("endedAt")
    if (started is not None and not _time_exists(started)) or (ended is not None and not _time_exists(ended)):
        return "schema"
    if keep is not None:
        keep.append((lineno, line))
    run_id = ctx.run_id
    if run_id is None:
        return None
    codes = []
    rid = line["resultId"]
    case = line["caseId"]
    path = line["path"]
    trial = line.get("trial")
    state = line["state"]
    if result_id(run_id, case, path, trial) != rid:
        codes.append("result-id")
    parent = line.get("parentResultId")
    pkey = None
    if parent:
        pkey = bytes.fromhex(parent[2:])
        if "component" not in line:
            codes.append("component")
    trials = line.get("trials")
    tr = None
    if trials is not None:
        tr = (trials["n"], trials["passed"], trials["agree"])
        if tr[1] > tr[0]:
            codes.append("trials")
    agg = line.get("aggregation")
    ag = None
    if agg is not None:
        total, measured = agg["total"], agg["measured"]
        unm = agg.get("unmeasured")
        if measured > total or (sum(unm.values()) if unm else 0) != total - measured:
            codes.append("aggregation")
        ag = (total, tuple(_key(d) for d in agg.get("decisive") or ()))
    if state == "pending" and ctx.closed:
        codes.append("pending")
    ann = line.get("annotator")
    if ann is not None:
        panel = ann.get("panel")
        if panel is not None and panel["agree"] > panel["of"]:
            codes.append("annotator")
        if ctx.capture_off and "promptHash" in ann:
            codes.append("content-capture")
    ev = line.get("evidence")
    if ev:
        ids = ctx.evidence_ids
        for eid in ev:
            if eid not in ids:
                codes.append("evidence")
                break
    reasoning = line.get("reasoning")
    if reasoning is not None:
        if ctx.capture_off:
            codes.append("content-capture")
        bpath = runfs.blob_path(reasoning["blob"][7:])
        size = ctx.files.get(bpath)
        if size is None:
            if bpath not in ctx.withheld_ok:
                codes.append("blob")
        elif size != reasoning["bytes"]:
            codes.append("reasoning-size")
    scores = line.get("scores")
    if scores:
        kinds = ctx.metric_kinds
        if len(scores) == 1:
            if scores[0]["metric"] not in kinds:
                codes.append("metric")
        else:
            seen = set()
            for sc in scores:
                m = sc["metric"]
                if m not in kinds or m in seen:
                    codes.append("metric")
                    break
                seen.add(m)
    tl = line.get("traceLink")
    if tl is not None and ctx.has_traces:
        sid = tl.get("spanId")
        tid = tl["traceId"].lower()
        if ((tid, sid.lower()) not in ctx.spans) if sid is not None else (tid not in ctx.trace_ids):
            codes.append("trace-link")
    att = line.get("attack")
    if att is not None and att.get("success") is True and state == "passed":
        codes.append("attack")
    unc = line.get("uncertainty")
    if unc:
        uci = unc.get("ci")
        if uci is not None and uci["low"] > uci["high"]:
            codes.append("interval")
    result_times = started is not None and ended is not None and _earlier(ended, started)
    usage = line.get("usage")
    if usage is not None and len(usage) > 1:
        if len({(u.get("role"), u.get("model", _ABSENT)) for u in usage}) != len(usage):
            result_times = True
    if result_times:
        codes.append("result-times")
    measures = ()
    if trial is None and ctx.routes:
        lane = line.get("lane")
        if lane is None:
            lane = ctx.single_lane
        route = ctx.routes.get((lane, path))
        if route:
            # a line left out ([SUM-4]: not_applicable) counts nowhere, so it is not sent at all
            if sums is None:
                measures = tuple(
                    (i, m) for i, metric, kind in route if (m := measure(line, metric, kind)) is not LEFT_OUT
                )
            else:
                for i, metric, kind in route:
                    m = measure(line, metric, kind)
                    if m is not LEFT_OUT:
                        _sum_measure(sums, i, m)
    return (
        bytes.fromhex(rid[2:]),
        case,
        path,
        -1 if trial is None else trial,
        _STATE_CODE[state],
        pkey,
        ag,
        tr,
        codes,
        measures,
    )


class _FramingError(Exception):
    pass


_ABSENT = object()


_BLOB_NAMES = (b"blobs", b"blobs/sha256")


def _path_rule_input(files: runfs.Files, special: list[str]) -> list[str]:
    """The paths [RUN-3] must see (``paths.path_problems``) for the same problems as over every path.

    A blob at its canonical path (packed in ``files``) keeps every rule on its own (lowercase hex segments, 80
    bytes), and two of them differ in more than letter case: it can break [RUN-3] only by clashing, through one of
    its names (``blobs``, ``blobs/sha256``, ``blobs/sha256/xx``, itself), with a name of a path outside the packed
    blobs. So: the other paths, the special entries, and only the blobs one of whose names another name equals
    once ASCII letters are folded but not before (blob names are lowercase: the other name has a capital)."""
    out = list(files.other) + list(special)
    if not files.n:
        return out
    every = False
    firsts: set[int] = set()  # blob folders blobs/sha256/xx clashed with (their first byte)
    whole: set[int] = set()  # blobs clashed with themselves
    for p in out:
        b = path_bytes(p)
        low = b.lower()
        if low == b or not low.startswith(b"blobs"):
            continue
        start = 0
        while True:
            cut = b.find(b"/", start)
            name = b if cut < 0 else b[:cut]
            lname = name.lower()
            if lname != name:
                if lname in _BLOB_NAMES:
                    every = True
                    break
                if len(lname) == 15 and lname.startswith(b"blobs/sha256/"):
                    xx = lname[13:15]
                    if all(c in b"0123456789abcdef" for c in xx):
                        firsts.add(int(xx, 16))
                elif len(lname) > 15:
                    i = files.blob_index(lname.decode("utf-8", "replace"))
                    if i >= 0:
                        whole.add(i)
            if cut < 0:
                break
            start = cut + 1
        if every:
            break
    if every:
        out.extend(files.blob_paths())
        return out
    if firsts or whole:
        for i, key in enumerate(files.blob_keys()):
            if key[0] in firsts or i in whole:
                out.append(runfs.blob_path(key.hex()))
    return out


def _sql_int(v: Any) -> Any:
    """A figure of a line as SQLite keeps it: an integer beyond 64 bits as its text (it then equals no count,
    as in memory)."""
    if type(v) is int and not -(1 << 63) <= v < (1 << 63):
        return str(v)
    return v


def _key(rid: str) -> bytes | None:
    try:
        return bytes.fromhex(rid[2:])
    except (ValueError, TypeError):
        return None


def verify_run(
    run_dir: str | Path,
    *,
    policy: Any = None,
    anchors: Iterable[str] | None = None,
    mapper: Any = None,
    withheld_ok: Iterable[str] = (),
    written: runfs.Written | None = None,
) -> Verification:
    """Verify a run folder (§3.9, §4.1, §4.5): aefgate's one verification, every caller's.

    ``policy``: a trust policy ([SIG-4]; a ``signatures.TrustPolicy`` or the path of one): blobs withheld by the
    redactions it authorizes ([OVL-10], read from the overlay chain) are ``withheld``, not ``missing``, and
    ``signed_by`` lists the identities ``attestation.dsse.json`` verifies for, for an intact run ([SIG-7]; None
    without a policy: not checked). ``anchors``: trusted run hashes (hex): sets ``anchored``. ``withheld_ok``: blob
    paths withheld by authorized redactions, when the caller computed them already.

    ``mapper``: the one pass (:mod:`aefgate.aef.onepass`): a ``LineMapper`` an exporter supplies, handed the
    run header and every line as this verification checks it; the caller releases the mapper's output only for a
    verdict it accepts and when ``mapper.failure`` is None (``converters.verified.verified``).

    ``written``: only for the writer of ``run_dir`` (the RunBuilder, sealing its own private temporary folder): the
    files it created with the digests of the bytes it wrote (:class:`runfs.Written`, used once). Then the folder is
    only listed (it must hold exactly the files written, each of the size written, else it is scanned and read as
    usual), and the files this verification does not parse (blobs, ``ext/``) are not read back: their digests are
    the writer's, and a blob's must equal its name ([EVD-3]). Every file it parses is still read, hashed as read and
    checked: every problem of §3.9 is found as without ``written``, except a change to the bytes of a blob or
    ``ext/`` file that keeps its size, made behind the writer's back after it wrote them."""
    root = Path(run_dir)
    if root.is_symlink() or not root.is_dir():
        raise Refusal("RUN-1", "not a run folder (a run is a folder holding run.json)", str(run_dir))
    withheld = set(withheld_ok)
    if policy is not None:
        if not isinstance(policy, TrustPolicy):
            policy = TrustPolicy.load(policy)
        withheld |= authorized_redactions(root, policy)
    enabled = gc.isenabled()
    gc.disable()  # no cycles are made; the collector would only rescan the bookkeeping (about 20 % of the time)
    try:
        rv = _RunVerifier(root, frozenset(withheld), written, mapper)
        try:
            v = rv.verify()
        finally:
            rv.close()
    finally:
        if enabled:
            gc.enable()
    if anchors is not None:
        hashes = set(anchors)
        v.anchored = v.outcome == "intact" and v.run_hash in hashes
    if policy is not None:
        v.signed_by = attestation_signed_by(root, policy) if v.outcome == "intact" else []
    return v
