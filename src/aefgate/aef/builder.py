"""RunBuilder: the one way aefgate writes an AEF run (spec 03).

Every importer (Inspect, OpenTelemetry, AEP, ...) and ``aefgate aef produce`` write runs through
:class:`RunBuilder`; nothing else writes a run folder. See the class docstring for the API.
"""

from __future__ import annotations

import functools
import hashlib
import math
import os
import re
import struct
import subprocess
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import urlsplit

import msgspec

from aefgate._version import PRODUCER_NAME, __version__
from aefgate.errors import Refusal
from aefgate.aef import jsonio, runfs, sealer
from aefgate.aef.paths import check_path, path_problems
from aefgate.aef.resultid import result_id
from aefgate.aef.schema import validator
from aefgate.aef.signatures import ATTESTATION, payload_type_for, sign
from aefgate.aef.spill import SpillIndex
from aefgate.aef.summary import compute_summary
from aefgate.aef.times import now, parse_time
from aefgate.aef.vocab import CONTENT_KINDS, MEASURED_STATES, SEC6_ATTRIBUTES, STATES, TYPED_ABSENCES
from aefgate.fsutil import atomic_dir

__all__ = ["RunBuilder", "BuiltRun", "CONTENT_KINDS", "MEASURED_STATES", "TYPED_ABSENCES"]

SCHEMA_VERSION = "1.0"

#: result members the builder derives; a node never carries them
DERIVED = ("schemaVersion", "resultId", "parentResultId", "trial", "trials")
#: aggregation members the builder derives from the children (given ones must agree)
_AGG_COUNTS = ("measured", "total", "unmeasured")
#: run.json members a RunBuilder sets itself (outside as-given mode)
_CLOSING = ("status", "endedAt", "abortReason")
# member names that hold a credential ([RUN-10]: nothing in config or ext is a key, token or password)
_SECRET_NAME = re.compile(
    r"(x[-_.]?)?api[-_.]?key|password|passwd|pwd|secret|client[-_.]?secret|secret[-_.]?key|private[-_.]?key"
    r"|(access|refresh|auth|bearer|id|session|security)?[-_.]?token|authorization|access[-_.]?key"
    r"|secret[-_.]?access[-_.]?key|credentials?|connection[-_.]?string",
    re.IGNORECASE,
)
_ASSERTED_SEGMENT = re.compile(r"([A-Za-z][A-Za-z0-9_-]*)((?:\[[0-9]+\])*)")
_INDEX = re.compile(r"\[([0-9]+)\]")
_BLOB_CHUNK = 1 << 20


@dataclass(frozen=True)
class BuiltRun:
    """What :meth:`RunBuilder.finish` returns: the run folder, its number of result lines, and its run hash when
    it was sealed (else None)."""

    path: Path
    results: int
    run_hash: str | None = None


@functools.lru_cache(maxsize=None)
def _validator(name: str):
    """The writer-side validator of a schema (None when valid, else the reason)."""
    return validator(name, "writer")


def _plain(value: Any) -> Any:
    """JSON values of ``value`` (a copy; msgspec structs become dicts), so no input is ever modified."""
    return msgspec.to_builtins(value)


def _depth_over(value: Any, limit: int) -> bool:
    stack = [(value, 1)]
    while stack:
        v, d = stack.pop()
        t = type(v)
        if t is dict:
            if d > limit:
                return True
            stack.extend((x, d + 1) for x in v.values())
        elif t is list:
            if d > limit:
                return True
            stack.extend((x, d + 1) for x in v)
    return False


def _encode(doc: Any, where: str, *, line: bool) -> bytes:
    """The bytes of one document or NDJSON line, within [ENC-17]'s size and depth limits."""
    data = jsonio.dump_line(doc) if line else jsonio.dumps(doc)
    if len(data) - (1 if line else 0) > jsonio.MAX_DOC:
        raise Refusal("ENC-17", f"{len(data)} bytes: over the limit of {jsonio.MAX_DOC} for one document", where)
    if data.count(b"{") + data.count(b"[") > jsonio.MAX_DEPTH and _depth_over(doc, jsonio.MAX_DEPTH):
        raise Refusal("ENC-17", f"JSON nesting deeper than {jsonio.MAX_DEPTH}", where)
    return data


#: parse_time for the times lines repeat (a case's lines share theirs): a few recent ones remembered
_parse_time = functools.lru_cache(maxsize=64)(parse_time)


def _check_time(value: Any, where: str) -> None:
    if isinstance(value, str):
        try:
            _parse_time(value)
        except ValueError:
            raise Refusal("ENC-8", f"{value!r} is not a time that exists", where) from None


def _later_or_equal(end: Any, start: Any) -> bool:
    try:
        return _parse_time(end) >= _parse_time(start)
    except (ValueError, TypeError):
        return True  # not a time: the schema refuses it


def _hashable(value: Any) -> Any:
    """A value as a set member: itself when hashable (strings, numbers, None), else its repr tagged apart, so an
    unchecked value of the wrong type (a list where a string belongs) is compared, not a ``TypeError``; the schema
    check refuses it by rule afterwards."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return ("\0unhashable", repr(value))


def _is_number(v: Any) -> bool:
    return not isinstance(v, bool) and isinstance(v, (int, float))


def _secret_members(value: Any, where: str) -> Iterable[str]:
    """The pointers of members whose name says they hold a credential and that hold a non-empty string."""
    stack = [(value, where)]
    while stack:
        v, w = stack.pop()
        if isinstance(v, dict):
            for k, x in v.items():
                kw = f"{w}/{k}"
                if isinstance(k, str) and _SECRET_NAME.fullmatch(k) and isinstance(x, str) and x:
                    yield kw
                stack.append((x, kw))
        elif isinstance(v, list):
            stack.extend((x, f"{w}/{i}") for i, x in enumerate(v))


def _endpoint_problem(endpoint: Any) -> str | None:
    """What in ``deployment.endpoint`` may hold a credential ([RUN-10]): user information, a query, a fragment."""
    if not isinstance(endpoint, str):
        return None
    if "#" in endpoint:
        return "a fragment"
    if "?" in endpoint:
        return "a query string"
    rest = endpoint.split("://", 1)[1] if "://" in endpoint else endpoint
    authority = rest.split("/", 1)[0]
    if "@" in authority:
        return "user information"
    try:
        parts = urlsplit(endpoint)
    except ValueError:
        return None
    if parts.username is not None or parts.password is not None:
        return "user information"
    return None


def _resolve(doc: Any, dotted: str) -> bool:
    """Whether the dotted path (``subject.ref``, ``judges[0].model``) names a member present in ``doc``."""
    cur = doc
    for seg in dotted.split("."):
        m = _ASSERTED_SEGMENT.fullmatch(seg)
        if m is None or not isinstance(cur, dict) or m.group(1) not in cur:
            return False
        cur = cur[m.group(1)]
        for idx in _INDEX.findall(m.group(2)):
            i = int(idx)
            if not isinstance(cur, list) or i >= len(cur):
                return False
            cur = cur[i]
    return True


def _where(case_id: str, path: Any, trial: int | None) -> str:
    w = f"case {case_id!r} at {path!r}"
    return w if trial is None else f"{w} (trial {trial})"


class _Node:
    """One node of a case's tree while a case is checked (before its line is written)."""

    __slots__ = ("src", "path", "trial", "parent", "children", "rid", "line")

    def __init__(self, src: Mapping[str, Any], path: str, trial: int | None, parent: _Node | None):
        self.src = src
        self.path = path
        self.trial = trial
        self.parent = parent
        self.children: list[_Node] = []
        self.rid = ""
        self.line: dict[str, Any] = {}


# The blob writer's child process: reads framed blobs from stdin (u32 path length, path, u64 data length, data) and
# creates each file exclusively; at the end of its input, exits 0. On an error it prints it and exits 1.
_WRITER_CHILD = r"""
import os, struct, sys
src = open(0, "rb", buffering=1 << 20, closefd=False)  # one read takes what the pipe holds
flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
def read(n):
    b = src.read(n)
    if len(b) != n:
        raise EOFError("the blob stream was cut")
    return b
try:
    while True:
        head = src.read(4)
        if not head:
            break
        if len(head) != 4:
            raise EOFError("the blob stream was cut")
        path = read(struct.unpack("<I", head)[0]).decode("utf-8", "surrogateescape")
        data = read(struct.unpack("<Q", read(8))[0])
        fd = os.open(path, flags, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
except BaseException as e:
    sys.stdout.write(f"{type(e).__name__}\t{getattr(e, 'errno', '') or ''}\t{e}")
    sys.stdout.flush()
    os._exit(1)
"""


class _BlobWriter:
    """Creates blob files in a child process, so the file system's cost of creating many small files (on ext4 in a
    VM, ~120-220 us of kernel time each) runs on another core beside the conversion, not after each blob.

    The child is a bare interpreter (``python -S -c``) reading framed blobs from a pipe: the pipe is the bound on
    what waits (a full pipe blocks :meth:`put`). Each blob goes into the pipe as it comes (no buffer in this
    process), and the pipe holds 1 MiB where the system allows it (Linux: ``F_SETPIPE_SZ``; else its default): so
    :meth:`put` waits only when the child is a whole pipe behind, never while it creates the files of a buffer
    just handed over (with a 1 MiB buffer in front of a 64 KiB pipe, each flush waited for the child to create
    nearly all of its files: measured on 30,000 blobs, 10.8 s against 7.6 s for the same work).
    :meth:`close` ends the stream and waits: every blob is on disk when it returns, or the child's error is raised
    as the OSError it was."""

    _PIPE = 1 << 20

    def __init__(self) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, "-S", "-c", _WRITER_CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0,
        )
        assert self._proc.stdin is not None
        self._fd = self._proc.stdin.fileno()
        try:
            import fcntl  # lazy: POSIX only (a system without it keeps its pipe size)

            fcntl.fcntl(self._fd, fcntl.F_SETPIPE_SZ, self._PIPE)
        except (ImportError, AttributeError, OSError):
            pass  # the system's pipe size (no fcntl, or beyond this user's pipe limit)

    def put(self, path: str, data: bytes) -> None:
        raw = path.encode("utf-8", "surrogateescape")
        head = struct.pack("<I", len(raw)) + raw + struct.pack("<Q", len(data))
        try:
            if len(data) < self._PIPE:
                self._write(head + data)
            else:  # (a large blob is not copied)
                self._write(head)
                self._write(data)
        except BrokenPipeError:
            self._fail()

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view):]

    def close(self, *, raise_error: bool = True) -> None:
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.close()
        except BrokenPipeError:
            pass
        code = self._proc.wait()
        if code != 0 and raise_error:
            self._fail()
        if self._proc.stdout is not None:
            self._proc.stdout.close()

    def _fail(self) -> None:
        self._proc.wait()
        assert self._proc.stdout is not None
        report = self._proc.stdout.read().decode("utf-8", "replace")
        kind, _, rest = report.partition("\t")
        errno_text, _, message = rest.partition("\t")
        exc = {"FileExistsError": FileExistsError, "FileNotFoundError": FileNotFoundError,
               "PermissionError": PermissionError}.get(kind, OSError)
        if errno_text.isdigit():
            raise exc(int(errno_text), f"writing a blob: {message}")
        raise exc(f"writing a blob: {report or 'the blob writer stopped with status ' + str(self._proc.returncode)}")


class _Hashed:
    """A file the builder streams into (results.ndjson, evidence.ndjson, the OTLP files), hashing the bytes as it
    writes them: their digest and size go to the builder's list of the files it wrote (runfs.Written)."""

    __slots__ = ("f", "rel", "h", "size")

    def __init__(self, f: BinaryIO, rel: str):
        self.f = f
        self.rel = rel
        self.h = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> None:
        self.f.write(data)
        self.h.update(data)
        self.size += len(data)

    def flush(self) -> None:
        self.f.flush()

    def close(self) -> None:
        self.f.close()

    @property
    def closed(self) -> bool:
        return self.f.closed


_plain_decoder = msgspec.json.Decoder()  # lines the builder wrote itself, read back for the summary


def _read_own_lines(results_path: Path) -> Iterator[tuple[int, Any]]:
    """The builder's own result lines, read back with their line numbers.

    Each was encoded from a dict, within [ENC-17]'s depth: decoded as it is, without jsonio.loads' certificates for
    bytes from elsewhere (a member twice cannot be there), unless the line has digits enough for a number beyond
    binary64 or does not decode: then read strictly."""
    decode = _plain_decoder.decode
    with open(results_path, "rb") as f:
        for lineno, raw in jsonio.iter_lines(f):
            if raw is not None and len(raw) - len(raw.translate(None, b"0123456789")) < 309:
                try:
                    line = decode(raw)
                except msgspec.DecodeError:
                    pass
                else:
                    if type(line) is dict:
                        yield lineno, line
                        continue
            if raw is None:
                raise Refusal("ENC-17", f"line {lineno} is over {jsonio.MAX_DOC} bytes", f"results.ndjson:{lineno}")
            try:
                line = jsonio.loads(raw)
            except jsonio.JsonProblem as e:  # a value the line held that I-JSON cannot carry (10**400: ENC-3)
                raise e.refusal(f"results.ndjson:{lineno}") from None
            yield lineno, line


def _write_new(path: str, data: bytes) -> None:
    """Create ``path`` (it must not exist) holding ``data``: os.open/os.write, cheaper than a buffered file object
    for a file written once, whole."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


_WRITER_FROM = 512  # blobs written in this process before a writer process is started for the rest
_MADE_EVIDENCE_ID = re.compile(r"E-([1-9][0-9]{0,17})")


def _blob_key(digest: str) -> bytes:
    """The key of a blob in the builder's index: the 32 bytes of ``sha256:<hex>`` (a valid digest: the schema checked
    it), or the text's own bytes when it is not one (then found in no index of digests)."""
    try:
        return bytes.fromhex(digest[7:])
    except ValueError:
        return digest.encode("utf-8", "surrogatepass")


class RunBuilder:
    """Write one AEF run folder, streaming, atomically, valid against the writer schemas.

    Usage (an importer)::

        with RunBuilder(out_dir, run_header, metrics=metrics_doc,
                        imported_from="inspect_ai 0.3.277", asserted=["subject.ref", "execution.targetMode"]) as b:
            digest = b.add_blob(explanation_bytes, kind="judge_reasoning")      # -> "sha256:<hex>"
            eid = b.add_evidence("input", content=prompt_text, description="the case's input")
            b.add_case("case-1", {"path": "triage", "evaluator": {"id": "composite:triage"}, "state": "failed",
                                  "scores": [{"metric": "triage", "value": 0.55}], "evidence": [eid],
                                  "aggregation": {"strategy": "WeightedSum", "rulePath": "threshold",
                                                  "decisive": ["triage/helpfulness"]},
                                  "children": [{"path": "triage/helpfulness", "evaluator": {"id": "llm:help"},
                                                "state": "failed", "component": {"weight": 1, "required": True},
                                                "reasoning": {"blob": digest, "bytes": len(explanation_bytes)}}]})
            b.add_case("case-2", rollup_node, trials=[trial0_tree, trial1_tree])   # a case run in trials
            built = b.finish(status="completed", ended_at="2026-10-02T14:06:23Z",
                             summary={"lanes": [{"lane": "quality", "metrics": [{"metric": "triage",
                                                                                 "path": "triage"}]}]},
                             seal="ingest")
        built.path, built.results, built.run_hash

    Constructor: ``RunBuilder(out_dir, run, *, metrics=None, imported_from=None, asserted=(), as_given=False,
    strict_paths=None, durable=False)``

    - ``out_dir``: the run folder to create; it must be absent or an empty folder (``OUT-1``). Everything is
      written into a temporary sibling folder, renamed into place by :meth:`finish`; a refusal, an exception
      inside the ``with`` block, or leaving it without :meth:`finish` removes the temporary folder: nothing is
      left behind. An input (dict, file) is never modified.
    - ``run``: the ``run.json`` header (a dict or a :class:`~aefgate.aef.models.Run`): ``runId``,
      ``subject``, ``startedAt``, ``execution``, and any other run.json member. ``status``, ``endedAt`` and
      ``abortReason`` are optional here (defaults for :meth:`finish`). ``producer`` is always written as
      ``{"name": "aefgate", "version": aefgate.__version__}`` ([RUN-15]: the producer of a converted run is the
      converter); a ``producer`` in the header is replaced.
    - ``metrics``: the ``metrics.json`` document, or a list of metric declarations; more can be declared with
      :meth:`declare_metric` until :meth:`finish`. Every metric a line or the summary names must be declared
      ([SUM-1]).
    - ``imported_from`` / ``asserted``: for a run converted from another tool ([RUN-15]): ``imported`` is written
      as ``{"from": imported_from, "asserted": [...]}``; every asserted dotted path (``subject.ref``,
      ``judges[0].model``) must name a member of the final run.json, else ``RUN-15``.
    - ``as_given``: write ``run`` exactly as given (no ``producer``/``imported`` rewriting; it must then be
      closed already, and :meth:`finish` takes no ``status``/``ended_at``/``abort_reason``): the §9.3 ``produce``
      operation.
    - ``strict_paths``: also require every child's ``path`` to be its parent's plus ``/`` and one segment, and
      ``component`` on children only (the shape §9.2.1 scenarios follow). Default: on in ``as_given`` mode, off
      otherwise (AEF itself lets a path's spelling decide nothing).
    - ``durable``: fsync every file before the rename.

    Methods (all refuse with :class:`~aefgate.errors.Refusal`; a refused call changes nothing, so a caller may
    catch the refusal and go on):

    - ``add_case(case_id, node, trials=None, *, aggregation=None, k=None) -> dict[(path, trial), resultId]``:
      writes one result tree of a case (a case with several root paths is added once per root). ``node`` is the
      §9.2.1 node: ``path``, ``evaluator``, ``state``; optionally ``scores``, ``severity``, ``reason``, ``lane``;
      ``component`` on every child; ``aggregation`` facts on a node with children (``strategy``, ``rulePath``, and
      optionally ``threshold``, ``score``, ``minimumMeasuredShare`` and ``decisive``: paths, or resultIds, of
      children); ``children``; and any other result member, passed through as given (``usage``, ``traceLink``,
      ``evidence``, ``reasoning``, ``annotator``, ``attack``, ``startedAt``, ``endedAt``, ``durationMs``, ``turns``,
      ``verdictRule``, ``uncertainty``, ``ext``). ``reasoning`` may also be raw ``bytes``/``str``: the builder
      stores the blob and writes ``{"blob", "bytes"}``. The builder derives ``schemaVersion``, ``caseId``,
      ``resultId`` ([RES-4]), ``parentResultId``, and the ``aggregation`` counts ``total``, ``measured``,
      ``unmeasured`` (by state) and ``decisive`` ids ([RES-5], [RES-6]; counts given in the node must agree).
      With ``trials`` (one tree per trial, in trial order, each rooted at ``node``'s path), ``node`` and its
      children are the case's rollups: every trial line gets ``trial`` (0-based), every rollup ``trials``:
      ``n``, ``passed``, ``agree`` over the trial lines at its path and the case's ``aggregation`` (default: the
      run's ``suite.executionPolicy.aggregation``) and ``k`` ([RES-8]). Refused: a ``pending`` node ([RES-3]); a
      typed absence without ``reason`` or with ``scores`` ([RES-2]); a child without ``component``, a node with
      children and no ``aggregation`` ([RES-5]); a ``decisive`` entry that is no child, counts that disagree
      ([RES-6]); trial trees rooted elsewhere, or whose paths or parents are not the rollups' ([RES-8]); two lines
      at one case, path and trial, in this call or an earlier one ([RES-4]); ``reasoning`` or
      ``annotator.promptHash`` under ``contentCapture: off`` ([RUN-11]); a line scoring a metric twice
      ([SUM-1]); a panel whose ``agree`` exceeds ``of``, ``endedAt`` before ``startedAt``, a role and model twice in
      ``usage``, a succeeded ``attack`` on a ``passed`` line, an interval whose ``low`` exceeds ``high``
      ([RES-10]); a time that does not exist ([ENC-8]); a line not valid against the writer ``result`` schema
      (``VER-2``); a line over 4 MiB or 64 levels deep, more than 1,000,000 lines ([ENC-17]). Lines go to disk as
      the case is added: memory holds one case's tree; what the builder must remember of every line, blob and
      evidence record to refuse a duplicate (resultIds, blob digests and sizes, evidence ids given) is in
      :class:`SpillIndex` indexes, whose memory is bounded (past 4,096 keys each goes to a temporary SQLite
      file), and the trial bookkeeping of :meth:`add_trial` is dropped when the rollup is written: with cases
      written one after the other (each case's trials, then its rollups), the memory does not grow with the run.
    - ``add_trial(case_id, node, trial)`` and ``add_rollup(case_id, node, *, aggregation=None, k=None)``: a case
      run in trials written as it streams in: each trial's tree when it comes (its lines carry ``trial``), the
      rollup trees later (each rollup gets ``trials`` counted from the trial lines written at its path), so trial
      lines and rollups are written in the order the caller reads them. [RES-8] is checked as for ``add_case``:
      a rollup at a path without trial lines, a rollup tree that is not the trials' tree, a second rollup, a trial
      after its rollup; :meth:`finish` refuses a closed run in which a case's path with trial lines has no rollup.
    - ``add_blob(data, *, kind=None) -> "sha256:<hex>"`` and ``add_blob_file(path, *, kind=None)``: store a blob
      content-addressed at ``blobs/sha256/<ab>/<hex>`` ([EVD-3]); an identical blob is stored once. ``kind`` is
      what the blob holds (an evidence kind, or ``"reasoning"``): a content kind is refused under
      ``contentCapture: off`` ([RUN-11]).
    - ``add_evidence(kind, *, content=None, blob=None, span=None, uri=None, digest=None, description=None,
      evidence_id=None, ext=None) -> evidenceId``: one record of ``evidence.ndjson`` ([EVD-1], [EVD-2]) linking
      exactly one of: ``content`` (bytes/str, stored as a blob), ``blob`` (a digest of a blob of the run),
      ``span`` (``(traceId, spanId)`` or a dict), ``uri`` (with an optional ``digest``). Ids default to ``E-1``,
      ``E-2``, ...; an id used twice is refused. ``add_evidence_record(record)`` writes a whole record as given.
    - ``add_gate(decision)``: a line of ``gates.ndjson`` ([GATE-1]); the results it names must be lines of the run.
    - ``add_otlp(signal, data)``: one OTLP/JSON ``TracesData`` (``signal="traces"``) or ``LogsData``
      (``"logs"``) line ([RUN-14]); under ``contentCapture: off`` content attributes are refused ([SEC-6]).
    - ``add_ext_file(relpath, data)``: a producer file under ``ext/`` ([RUN-2], [RUN-3]).
    - ``declare_metric(id, kind, direction, scale, *, unit=None, description=None)`` or ``declare_metric(dict)``.
    - ``finish(status=None, *, ended_at=None, abort_reason=None, summary=None, seal=False, sealed_by=None,
      sealed_at=None, signing_key=None) -> BuiltRun``: closes the run (``completed``, or ``aborted`` with
      ``abort_reason``; default ``status`` is the header's, else ``completed``; ``ended_at`` the header's, else
      now), checks the rules across
      files (every cited evidence id and blob present, ``reasoning.bytes`` its blob's size, trace links resolved when
      traces were written, every metric declared, [RUN-5] times), computes ``summary.json`` from the written lines
      exactly as ``summarize`` does for ``summary`` (a §9.2.1 request ``{"lanes": [{"lane", "metrics": [{"metric",
      "path", "aggregate"?, "rule"?, "verdict"?, "value"?}]}]}``; producer aggregates shown as written; an entry
      may also carry the producer's ``stderr`` and ``ci``, and the request ``cost``, ``usage`` and ``ext``, copied
      as given; no request writes a summary with no lanes), writes ``run.json``, ``metrics.json``, ``summary.json``,
      validates each against the writer schemas, and renames the folder into place. With ``seal`` (``True`` or
      ``"producer"``/``"ingest"``, or ``sealed_by=``) the run is sealed ([SEAL-5]) before the rename, so a seal
      that is refused leaves nothing behind either. The seal's verification runs every check of §3.9 on what was
      written, but takes the builder's list of the files it wrote and the SHA-256 it computed of each as it wrote
      it (a blob is hashed once, when added): the folder is only listed (names, types, sizes), and no blob or
      ``ext/`` file is read back (``runfs.Written``, ``seal_run(written=)``). With ``signing_key`` (a
      :class:`~aefgate.aef.signatures.SigningKey`) the seal is also signed: ``attestation.dsse.json``
      ([SIG-1]). ``abort(reason, **kw)`` is ``finish(status="aborted", ...)``. ``finish_running()`` writes the run
      as still ``running`` instead (no ``endedAt``, no ``summary.json``, never sealed; trial lines may lack their
      rollup): an import of a log that was still being written.
      A refusal inside :meth:`finish` removes everything.
    """

    def __init__(
        self,
        out_dir: str | os.PathLike[str],
        run: Mapping[str, Any] | msgspec.Struct,
        *,
        metrics: Mapping[str, Any] | Iterable[Mapping[str, Any]] | msgspec.Struct | None = None,
        imported_from: str | None = None,
        asserted: Iterable[str] = (),
        as_given: bool = False,
        strict_paths: bool | None = None,
        durable: bool = False,
    ):
        self.out_dir = Path(out_dir)
        self.as_given = bool(as_given)
        self.strict_paths = self.as_given if strict_paths is None else bool(strict_paths)
        self._durable = durable
        self._take_header(run, imported_from, asserted, as_given)

        self._metrics: dict[str, dict[str, Any]] = {}
        self._metrics_doc_given: dict[str, Any] | None = None
        if metrics is not None:
            self._take_metrics(metrics)
        if as_given and self._metrics_doc_given is None:
            raise Refusal("VER-2", "a run written as given has its metrics.json document given", "metrics.json")
        self._init_state()

    def _take_header(self, run: Mapping[str, Any] | msgspec.Struct, imported_from: str | None,
                     asserted: Iterable[str], as_given: bool) -> None:
        """Check the run header (``run.json`` as given, or as it would be written while running) and keep it, with
        its runId, imported and asserted fields, content capture and trial aggregation."""
        header = _plain(run)
        if not isinstance(header, dict):
            raise Refusal("VER-2", "run.json is a JSON object", "run.json")
        self._header: dict[str, Any] = header
        run_id = header.get("runId")
        if not isinstance(run_id, str) or not run_id:
            raise Refusal("RUN-1", "run.json has no string runId", "run.json")
        self.run_id = run_id
        asserted = list(dict.fromkeys(asserted))
        if asserted and imported_from is None and "imported" not in header:
            raise Refusal("RUN-15", "asserted fields are listed only for an imported run (imported_from)", "run.json")
        if as_given and (imported_from is not None or asserted):
            raise Refusal("RUN-15", "a run written as given carries its own imported member", "run.json")
        self._imported_from = imported_from
        self._asserted = asserted
        self._check_header_rules(header)
        if as_given:
            if header.get("status") not in ("completed", "aborted"):
                raise Refusal("RUN-5", f"the run is not closed (status {header.get('status')!r})", "run.json/status")
            self._check_run_doc(header)
        else:
            provisional = self._run_doc("running", None, None)
            reason = _validator("run")(provisional)
            if reason is not None:
                raise Refusal("VER-2", f"run.json would not be valid: {reason}", "run.json")
            for p in self._asserted_paths(header):
                head = p.split(".", 1)[0].split("[", 1)[0]
                if head not in _CLOSING and not _resolve(provisional, p):
                    raise Refusal("RUN-15", f"asserted field {p!r} is not in run.json", "run.json/imported/asserted")
        self.content_off = header.get("contentCapture") == "off"
        suite = header.get("suite") if isinstance(header.get("suite"), dict) else {}
        policy = suite.get("executionPolicy") if isinstance(suite.get("executionPolicy"), dict) else {}
        self._trial_aggregation = policy.get("aggregation")
        self._trial_k = policy.get("k")

    def _init_state(self) -> None:
        """The state of a new builder: nothing written yet."""
        self._tmp: Path | None = None
        self._cm: Any = None
        self._state = "new"  # new -> open -> finished | discarded
        self._results: _Hashed | None = None
        self._evidence: _Hashed | None = None
        self._otlp: dict[str, _Hashed] = {}
        # every file written, with the SHA-256 and size of the bytes written (blobs: their digest, which names them):
        # the seal's verification takes this list instead of walking the folder and reading the blobs back
        self._written = runfs.Written()
        # the builder's memory does not grow with the run: what it must remember of every line, blob and evidence
        # record to refuse a duplicate is in SpillIndexes (on disk past a few thousand keys)
        self._ids = SpillIndex()  # 16-byte digests of the resultIds written
        self._lines = 0
        self._files = 0
        self._used_metrics: dict[str, str] = {}  # metric -> where first used
        self._blobs = SpillIndex()  # blob digest (32 bytes) -> size
        self._blob_dirs: set[str] = set()  # the blobs/sha256/<xx>/ folders made
        self._writer: _BlobWriter | None = None  # the blob writer process, started at the _WRITER_FROM-th blob
        # evidence ids used: E-1 .. E-(_next_evidence - 1) all are (made, or skipped because they were given), and
        # the ids given by the caller are in _evidence_given
        self._evidence_lines = 0
        self._evidence_blobs: list[tuple[str, str]] = []  # (blob hex, where) of evidence blob links
        self._evidence_spans: list[tuple[str, str, str]] = []  # (traceId, spanId, where)
        self._next_evidence = 1
        self._evidence_given: SpillIndex | None = None
        self._gates: list[dict[str, Any]] = []
        self._spans: set[tuple[str, str]] = set()
        self._trace_ids: set[str] = set()
        self._ext_files: list[str] = []
        self._ext_streams: list[_Hashed] = []  # ext/ files written as a stream (ext_stream)
        self._incoming = 0
        # trials written with add_trial and not rolled up yet: (caseId, path) -> [n, passed, first state, parent path,
        # rolled up, agree]; an entry leaves when its rollup is written (the rollup's resultId then says it was)
        self._trial_paths: dict[tuple[str, str], list[Any]] = {}

    # -- header and metrics -----------------------------------------------------------------------------------------

    def _asserted_paths(self, header: Mapping[str, Any]) -> list[str]:
        if self._imported_from is not None:
            return self._asserted
        imp = header.get("imported")
        if isinstance(imp, dict) and isinstance(imp.get("asserted"), list):
            return [p for p in imp["asserted"] if isinstance(p, str)]
        return []

    def _check_header_rules(self, header: Mapping[str, Any]) -> None:
        dep = header.get("deployment")
        if isinstance(dep, dict):
            problem = _endpoint_problem(dep.get("endpoint"))
            if problem is not None:
                raise Refusal(
                    "RUN-10",
                    f"deployment.endpoint holds {problem}, where credentials hide: write scheme, host and path only",
                    "run.json/deployment/endpoint",
                )
        for member in ("config", "ext"):
            for ptr in _secret_members(header.get(member), f"run.json/{member}"):
                raise Refusal("RUN-10", "run.json holds what looks like a credential (a key, token or password)", ptr)

    def _run_doc(self, status: str, ended_at: str | None, abort_reason: str | None) -> dict[str, Any]:
        """The run.json a builder writes (not in as-given mode)."""
        h = self._header
        doc: dict[str, Any] = {"schemaVersion": h.get("schemaVersion", SCHEMA_VERSION), "runId": self.run_id}
        doc["status"] = status
        if abort_reason is not None:
            doc["abortReason"] = abort_reason
        doc["producer"] = {"name": PRODUCER_NAME, "version": __version__}
        skip = {"schemaVersion", "runId", "producer", "imported", *_CLOSING}
        for key, value in h.items():
            if key in skip:
                continue
            doc[key] = value
            if key == "startedAt" and ended_at is not None:
                doc["endedAt"] = ended_at
        if ended_at is not None and "endedAt" not in doc:
            doc["endedAt"] = ended_at
        if self._imported_from is not None:
            doc["imported"] = {"from": self._imported_from, "asserted": list(self._asserted)}
        elif "imported" in h:
            doc["imported"] = h["imported"]
        return doc

    def _check_run_doc(self, doc: dict[str, Any]) -> None:
        """A final run.json: writer-valid, and the rules across its members ([RUN-5], [RUN-8], [RUN-9], [RUN-15])."""
        for key in ("startedAt", "endedAt"):
            _check_time(doc.get(key), f"run.json/{key}")
        judges = doc.get("judges")
        if isinstance(judges, list):
            for i, j in enumerate(judges):
                cal = j.get("calibration") if isinstance(j, dict) else None
                if isinstance(cal, dict):
                    where = f"run.json/judges/{i}/calibration"
                    _check_time(cal.get("measuredAt"), where + "/measuredAt")
                    de, n = cal.get("dangerousErrors"), cal.get("n")
                    if _is_number(de) and _is_number(n) and de > n:
                        raise Refusal("RUN-9", "dangerousErrors exceeds n", where)
                    if isinstance(cal.get("measuredAt"), str) and isinstance(doc.get("startedAt"), str):
                        if not _later_or_equal(doc["startedAt"], cal["measuredAt"]):
                            raise Refusal("RUN-9", "the calibration was measured after the run started", where)
        reason = _validator("run")(doc)
        if reason is not None:
            raise Refusal("VER-2", f"run.json would not be valid: {reason}", "run.json")
        if not _later_or_equal(doc.get("endedAt"), doc.get("startedAt")):
            raise Refusal("RUN-5", "endedAt is earlier than startedAt", "run.json/endedAt")
        policy = (doc.get("suite") or {}).get("executionPolicy") or {}
        rp, tpc = policy.get("requirePasses"), policy.get("trialsPerCase")
        if _is_number(rp) and _is_number(tpc) and rp > tpc:
            raise Refusal("RUN-8", "requirePasses exceeds trialsPerCase", "run.json/suite/executionPolicy")
        imp = doc.get("imported")
        if isinstance(imp, dict):
            for p in imp.get("asserted") or []:
                if not _resolve(doc, p):
                    raise Refusal("RUN-15", f"asserted field {p!r} is not in run.json", "run.json/imported/asserted")

    def _take_metrics(self, metrics: Any) -> None:
        m = _plain(metrics)
        if isinstance(m, dict):
            reason = _validator("metrics")(m)
            if reason is not None:
                raise Refusal("VER-2", f"metrics.json would not be valid: {reason}", "metrics.json")
            self._metrics_doc_given = m
            decls = m["metrics"]
        elif isinstance(m, list):
            decls = m
        else:
            raise Refusal("VER-2", "metrics is a metrics.json document or a list of metrics", "metrics.json")
        for d in decls:
            self._declare(d)

    def _declare(self, decl: Any) -> None:
        if not isinstance(decl, dict):
            raise Refusal("VER-2", "a metric declaration is an object", "metrics.json")
        mid = decl.get("id")
        where = f"metrics.json: metric {mid!r}"
        if mid in self._metrics:
            raise Refusal("SUM-1", "the metric is declared twice", where)
        reason = _validator("metrics")({"schemaVersion": SCHEMA_VERSION, "metrics": [decl]})
        if reason is not None:
            raise Refusal("VER-2", f"the metric would not be valid: {reason}", where)
        scale = decl.get("scale")
        if isinstance(scale, dict) and scale["min"] > scale["max"]:
            raise Refusal("SUM-1", "the scale's min exceeds its max", where)
        self._metrics[mid] = decl

    def declare_metric(
        self,
        metric: str | Mapping[str, Any],
        kind: str | None = None,
        direction: str | None = None,
        scale: Any = None,
        *,
        unit: str | None = None,
        description: str | None = None,
    ) -> None:
        """Declare a metric ([SUM-1]): a declaration dict, or its members."""
        self._check_not_finished()
        if self.as_given:
            raise Refusal("SUM-1", "metrics.json is written as given", "metrics.json")
        if isinstance(metric, Mapping) or isinstance(metric, msgspec.Struct):
            decl = _plain(metric)
        else:
            decl = {"id": metric, "kind": kind, "direction": direction, "scale": _plain(scale)}
            if unit is not None:
                decl["unit"] = unit
            if description is not None:
                decl["description"] = description
        self._declare(decl)

    def _metrics_doc(self) -> dict[str, Any]:
        if self._metrics_doc_given is not None:
            given = self._metrics_doc_given
            if len(given["metrics"]) == len(self._metrics):
                return given
            doc = dict(given)
            doc["metrics"] = list(self._metrics.values())
            return doc
        return {"schemaVersion": SCHEMA_VERSION, "metrics": list(self._metrics.values())}

    # -- life cycle ----------------------------------------------------------------------------------------------

    def __enter__(self) -> RunBuilder:
        self.open()
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if self._state == "open":
            self._teardown(exc_type, exc, tb)
            if exc_type is None:
                raise RuntimeError("RunBuilder: the with block ended without finish(); nothing was written")
        return False

    def open(self) -> RunBuilder:
        """Create the temporary folder (done by ``with``). Refused (``OUT-1``) when ``out_dir`` is not empty."""
        if self._state != "new":
            raise RuntimeError(f"RunBuilder is {self._state}")

        cm = atomic_dir(self.out_dir, durable=self._durable)
        self._tmp = cm.__enter__()
        self._cm = cm
        self._state = "open"
        try:
            self._results = _Hashed(open(self._tmp / "results.ndjson", "xb"), "results.ndjson")
            self._files += 1
        except BaseException as e:
            self._teardown(type(e), e, e.__traceback__)
            raise
        return self

    def discard(self) -> None:
        """Remove everything written so far (an open builder); nothing is left behind."""
        if self._state == "open":
            self._teardown(None, None, None, discard=True)

    def _close_files(self) -> None:
        """Close the files being written, and wait for the blob writer: every blob is on disk (or its error
        raised) when this returns."""
        for f in [self._results, self._evidence, *self._otlp.values(), *self._ext_streams]:
            if f is not None and not f.closed:
                f.close()
                self._written.add(f.rel, f.h.hexdigest(), f.size)
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()

    def _close_indexes(self) -> None:
        """Delete the indexes' files on disk (the builder is finished or discarded)."""
        for idx in (self._ids, self._blobs, self._evidence_given):
            if idx is not None:
                idx.close()
        self._written.files.close()  # the list of blobs written (a temporary file past a few thousand)

    def _teardown(self, exc_type, exc, tb, *, discard: bool = False) -> None:
        """Close the files and remove the temporary folder (the run is not written)."""
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close(raise_error=False)
        self._close_files()
        self._close_indexes()
        self._state = "discarded"
        cm, self._cm = self._cm, None
        if cm is None:
            return
        err = exc if exc is not None else RuntimeError("discarded")
        try:
            cm.__exit__(type(err), err, err.__traceback__ if exc is not None else None)
        except BaseException as e:  # the context manager re-raises what it was given
            if e is not err:
                raise

    def _check_open(self) -> Path:
        if self._state != "open" or self._tmp is None:
            raise RuntimeError(f"RunBuilder is not open ({self._state}): use it in a with block, or call open()")
        return self._tmp

    def _check_not_finished(self) -> None:
        if self._state in ("finished", "discarded"):
            raise RuntimeError(f"RunBuilder is {self._state}")

    def _count_file(self, where: str) -> None:
        # the files finish() writes (run.json, metrics.json, summary.json, seal.json) are reserved
        if self._files + 4 >= jsonio.MAX_FILES:
            raise Refusal("ENC-17", f"a run folder holds at most {jsonio.MAX_FILES} files", where)
        self._files += 1

    # -- blobs ---------------------------------------------------------------------------------------------------------

    def _check_content_kind(self, kind: str | None, where: str) -> None:
        if self.content_off and kind is not None and (kind in CONTENT_KINDS or kind == "reasoning"):
            raise Refusal(
                "RUN-11", f"contentCapture is off: no content of kind {kind!r} is kept, not even as a blob", where
            )

    def add_blob(self, data: bytes | str, *, kind: str | None = None) -> str:
        """Store a blob ([EVD-3]) and return its digest ``sha256:<hex>``; identical bytes are stored once."""
        return self._add_blob(data, kind, None)

    def _add_blob(self, data: bytes | str, kind: str | None, digest: bytes | None) -> str:
        """:meth:`add_blob`; ``digest``: the SHA-256 of ``data`` the builder itself just computed (never a
        caller's), so the bytes are hashed once."""
        tmp = self._check_open()
        self._check_content_kind(kind, "blobs")
        if isinstance(data, str):
            data = data.encode("utf-8")
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError("a blob is bytes (or str, stored as UTF-8)")
        data = bytes(data)
        if len(data) > jsonio.MAX_BLOB:
            raise Refusal("ENC-17", f"a blob is at most {jsonio.MAX_BLOB} bytes", "blobs")
        if digest is None:
            digest = hashlib.sha256(data).digest()
        hexd = digest.hex()
        if digest not in self._blobs:
            rel = f"blobs/sha256/{hexd[:2]}/{hexd}"
            self._count_file(rel)
            self._blob_dir(tmp, hexd[:2])
            if self._writer is None and len(self._blobs) >= _WRITER_FROM:
                self._writer = _BlobWriter()
            if self._writer is not None:
                self._writer.put(os.path.join(tmp, rel), data)
            else:
                _write_new(os.path.join(tmp, rel), data)
            self._blobs.add(digest, len(data))
            self._written.add_blob(digest, len(data))
        return "sha256:" + hexd

    def _blob_dir(self, tmp: Path, prefix: str) -> None:
        """``blobs/sha256/<prefix>/``, made once."""
        if prefix not in self._blob_dirs:
            (tmp / "blobs" / "sha256" / prefix).mkdir(parents=True, exist_ok=True)
            self._blob_dirs.add(prefix)

    def add_blob_file(self, path: str | os.PathLike[str], *, kind: str | None = None) -> str:
        """Store the bytes of a file as a blob (read in chunks, never whole) and return its digest."""
        tmp = self._check_open()
        self._check_content_kind(kind, "blobs")
        self._incoming += 1
        incoming = tmp / f"incoming-{self._incoming}"
        h = hashlib.sha256()
        size = 0
        try:
            with open(path, "rb") as src, open(incoming, "xb") as dst:
                while True:
                    chunk = src.read(_BLOB_CHUNK)
                    if not chunk:
                        break
                    size += len(chunk)
                    if size > jsonio.MAX_BLOB:
                        raise Refusal("ENC-17", f"a blob is at most {jsonio.MAX_BLOB} bytes", os.fspath(path))
                    h.update(chunk)
                    dst.write(chunk)
            hexd = h.hexdigest()
            if h.digest() not in self._blobs:
                rel = f"blobs/sha256/{hexd[:2]}/{hexd}"
                self._count_file(rel)
                target = tmp / rel
                self._blob_dir(tmp, hexd[:2])
                os.rename(incoming, target)
                self._blobs.add(h.digest(), size)
                self._written.add_blob(h.digest(), size)
        finally:
            if incoming.exists():
                incoming.unlink()
        return "sha256:" + hexd

    # -- evidence ------------------------------------------------------------------------------------------------------

    def add_evidence(
        self,
        kind: str,
        *,
        content: bytes | str | None = None,
        blob: str | None = None,
        span: Any = None,
        uri: str | None = None,
        digest: str | None = None,
        description: str | None = None,
        evidence_id: str | None = None,
        ext: Mapping[str, Any] | None = None,
    ) -> str:
        """Write an evidence record ([EVD-1], [EVD-2]) linking exactly one of ``content`` (stored as a blob),
        ``blob``, ``span`` or ``uri``; return its id."""
        self._check_open()
        links = [x is not None for x in (content, blob, span, uri)]
        if sum(links) != 1:
            raise Refusal("EVD-1", "an evidence record links exactly one of a blob, a span or a URI", "evidence.ndjson")
        self._check_content_kind(kind, "evidence.ndjson")
        eid = evidence_id if evidence_id is not None else self._fresh_evidence_id()
        record: dict[str, Any] = {"schemaVersion": SCHEMA_VERSION, "evidenceId": eid, "kind": kind}
        data: bytes | None = None
        raw: bytes | None = None
        if content is not None:
            data = content.encode("utf-8") if isinstance(content, str) else bytes(content)
            raw = hashlib.sha256(data).digest()
            blob = "sha256:" + raw.hex()
        if blob is not None:
            if digest is not None and digest != blob:
                raise Refusal("EVD-2", "a blob link's digest is the blob's SHA-256", "evidence.ndjson")
            record["digest"] = blob
            record["link"] = {"blob": blob}
        elif span is not None:
            if digest is not None:
                raise Refusal("EVD-2", "a span link has no digest", "evidence.ndjson")
            if isinstance(span, Mapping):
                trace_id, span_id = span.get("traceId"), span.get("spanId")
            else:
                trace_id, span_id = span
            record["link"] = {"traceId": trace_id, "spanId": span_id}
        else:
            if digest is not None:
                record["digest"] = digest
            record["link"] = {"uri": uri}
        if description is not None:
            record["description"] = description
        if ext is not None:
            record["ext"] = _plain(ext)
        return self._write_evidence(record, data, raw)

    def _fresh_evidence_id(self) -> str:
        k = self._next_evidence
        while True:
            eid = f"E-{k}"
            if self._evidence_given is None or SpillIndex.key(eid) not in self._evidence_given:
                return eid
            k += 1

    def _evidence_used(self, eid: Any) -> bool:
        """Whether an evidence record of the run has the id ``eid`` (made by the builder or given)."""
        if not isinstance(eid, str):
            return False
        if eid[:2] == "E-":
            k = eid[2:]
            if 0 < len(k) <= 18 and k.isascii() and k.isdigit() and k[0] != "0" and int(k) < self._next_evidence:
                return True  # made, or skipped because it was given
        return self._evidence_given is not None and SpillIndex.key(eid) in self._evidence_given

    def add_evidence_record(self, record: Mapping[str, Any] | msgspec.Struct) -> str:
        """Write one evidence record as given (``schemaVersion`` added when absent); return its id."""
        self._check_open()
        return self._write_evidence(_plain(record), None)

    def _write_evidence(self, rec: Any, content: bytes | None, digest: bytes | None = None) -> str:
        if not isinstance(rec, dict):
            raise Refusal("VER-2", "an evidence record is an object", "evidence.ndjson")
        if "schemaVersion" not in rec:
            rec = {"schemaVersion": SCHEMA_VERSION, **rec}
        where = f"evidence.ndjson:{self._evidence_lines + 1}"
        eid = rec.get("evidenceId")
        if self._evidence_used(eid):
            raise Refusal("EVD-1", f"evidence id {eid!r} is used twice", where)
        self._check_content_kind(rec.get("kind"), where)
        reason = _validator("evidence")(rec)
        if reason is not None:
            raise Refusal("VER-2", f"the evidence record would not be valid: {reason}", where)
        link = rec["link"]
        if "blob" in link:
            if rec.get("digest") != link["blob"]:
                raise Refusal("EVD-2", "a blob link's digest is the blob's SHA-256", where)
        data = _encode(rec, where, line=True)
        if self._evidence_lines >= jsonio.MAX_LINES:
            raise Refusal("ENC-17", f"more than {jsonio.MAX_LINES} lines", "evidence.ndjson")
        if content is not None:
            self._add_blob(content, rec.get("kind"), digest)
        if self._evidence is None:
            self._count_file("evidence.ndjson")
            self._evidence = _Hashed(open(self._check_open() / "evidence.ndjson", "xb"), "evidence.ndjson")
        self._evidence.write(data)
        self._evidence_lines += 1
        m = _MADE_EVIDENCE_ID.fullmatch(eid)
        if m is not None and int(m.group(1)) == self._next_evidence:
            self._next_evidence += 1  # E-1 .. E-(_next_evidence - 1) are used
        else:
            if self._evidence_given is None:
                self._evidence_given = SpillIndex()
            self._evidence_given.add(SpillIndex.key(eid))
        if "blob" in link and content is None:  # (content was just stored as that blob)
            if _blob_key(link["blob"]) not in self._blobs:  # checked again at finish: the blob may come later
                self._evidence_blobs.append((link["blob"][7:], where))
        elif "traceId" in link:
            self._evidence_spans.append((link["traceId"].lower(), link["spanId"].lower(), where))
        return eid

    # -- gates, traces, ext files --------------------------------------------------------------------------------------

    def add_gate(self, decision: Mapping[str, Any] | msgspec.Struct) -> None:
        """A gate decision ([GATE-1]); written to ``gates.ndjson`` by :meth:`finish`, which checks that every result
        it names is a line of the run."""
        self._check_open()
        rec = _plain(decision)
        if not isinstance(rec, dict):
            raise Refusal("VER-2", "a gate decision is an object", "gates.ndjson")
        if "schemaVersion" not in rec:
            rec = {"schemaVersion": SCHEMA_VERSION, **rec}
        where = f"gates.ndjson:{len(self._gates) + 1}"
        reason = _validator("gate-decision")(rec)
        if reason is not None:
            raise Refusal("VER-2", f"the gate decision would not be valid: {reason}", where)
        _check_time(rec.get("decidedAt"), where + "/decidedAt")
        _encode(rec, where, line=True)
        if not self._gates:
            self._count_file("gates.ndjson")
        self._gates.append(rec)

    def add_otlp(self, signal: str, data: Mapping[str, Any]) -> None:
        """One line of ``traces.otlp.jsonl`` (``signal="traces"``, a ``TracesData``) or ``logs.otlp.jsonl``
        (``"logs"``, a ``LogsData``) ([RUN-14]); content attributes are refused under contentCapture off ([SEC-6])."""
        tmp = self._check_open()
        if signal not in ("traces", "logs"):
            raise ValueError("signal is 'traces' or 'logs'")
        name = f"{signal}.otlp.jsonl"
        obj = _plain(data)
        if not isinstance(obj, dict):
            raise Refusal("RUN-14", "an OTLP/JSON line is an object", name)
        spans: list[tuple[str, str]] = []
        for item, attrs, is_log in self._otlp_items(obj, signal):
            if self.content_off:
                for a in attrs:
                    if isinstance(a, dict) and a.get("key") in SEC6_ATTRIBUTES:
                        raise Refusal("SEC-6", f"contentCapture is off: no {a['key']} is written", name)
                if is_log and "body" in item:
                    raise Refusal("SEC-6", "contentCapture is off: no log record has a body", name)
            if signal == "traces" and not is_log and item is not None:
                t, s = item.get("traceId"), item.get("spanId")
                if isinstance(t, str) and isinstance(s, str):
                    spans.append((t.lower(), s.lower()))
        data_bytes = _encode(obj, name, line=True)
        f = self._otlp.get(signal)
        if f is None:
            self._count_file(name)
            f = self._otlp[signal] = _Hashed(open(tmp / name, "xb"), name)
        f.write(data_bytes)
        for t, s in spans:
            self._spans.add((t, s))
            self._trace_ids.add(t)

    @staticmethod
    def _otlp_items(obj: dict, signal: str):
        """(item, attributes, is_log_record) for every span, span event and log record of an OTLP/JSON object."""

        def lst(x: Any, key: str) -> list:
            v = x.get(key) if isinstance(x, dict) else None
            return v if isinstance(v, list) else []

        if signal == "traces":
            for rs in lst(obj, "resourceSpans"):
                for ss in lst(rs, "scopeSpans"):
                    for sp in lst(ss, "spans"):
                        if not isinstance(sp, dict):
                            continue
                        yield sp, lst(sp, "attributes"), False
                        for ev in lst(sp, "events"):
                            yield None, lst(ev, "attributes"), False
        else:
            for rl in lst(obj, "resourceLogs"):
                for sl in lst(rl, "scopeLogs"):
                    for rec in lst(sl, "logRecords"):
                        if isinstance(rec, dict):
                            yield rec, lst(rec, "attributes"), True

    def add_ext_file(self, relpath: str, data: bytes | str) -> None:
        """A producer file at ``ext/<relpath>`` ([RUN-2]); its path must keep [RUN-3]."""
        tmp = self._check_open()
        rel = f"ext/{relpath}"
        if not check_path(rel) or path_problems([*self._ext_files, rel]):
            raise Refusal("RUN-3", "not a path a run folder may hold (or a case clash)", rel)
        if rel in self._ext_files:
            raise Refusal("RUN-3", "the file is written twice", rel)
        if isinstance(data, str):
            data = data.encode("utf-8")
        self._count_file(rel)
        p = tmp / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        with open(p, "xb") as f:
            f.write(data)
        self._written.add(rel, hashlib.sha256(data).hexdigest(), len(data))
        self._ext_files.append(rel)

    def ext_stream(self, relpath: str) -> Any:
        """A producer file at ``ext/<relpath>`` ([RUN-2], [RUN-3]) written as a stream: the returned object's
        ``write(bytes)`` appends to it; it is closed (and hashed for the seal) by :meth:`finish`."""
        tmp = self._check_open()
        rel = f"ext/{relpath}"
        if not check_path(rel) or path_problems([*self._ext_files, rel]):
            raise Refusal("RUN-3", "not a path a run folder may hold (or a case clash)", rel)
        if rel in self._ext_files:
            raise Refusal("RUN-3", "the file is written twice", rel)
        self._count_file(rel)
        p = tmp / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        f = _Hashed(open(p, "xb"), rel)
        self._ext_streams.append(f)
        self._ext_files.append(rel)
        return f

    # -- cases ---------------------------------------------------------------------------------------------------------

    def add_case(
        self,
        case_id: str,
        node: Mapping[str, Any],
        trials: Iterable[Mapping[str, Any]] | None = None,
        *,
        aggregation: str | None = None,
        k: int | None = None,
    ) -> dict[tuple[str, int | None], str]:
        """Write one result tree of a case (see the class docstring); return ``{(path, trial): resultId}``."""
        self._check_open()
        if not isinstance(case_id, str) or not case_id:
            raise Refusal("VER-2", "a caseId is a non-empty string", "results.ndjson")
        seen: set[tuple[str, int | None]] = set()
        blobs: list[tuple[bytes, str, bytes]] = []  # reasoning given as bytes: stored once the case is accepted
        roots = self._tree(case_id, node, None, seen, blobs)
        lines: list[_Node] = []
        if trials is None:
            if aggregation is not None or k is not None:
                raise Refusal(
                    "RES-8", "aggregation and k are for a case run in trials", _where(case_id, roots.path, None)
                )
            lines = list(self._walk(roots))
        else:
            trial_trees = list(trials)
            lines = self._trials(case_id, roots, trial_trees, aggregation, k, seen, blobs)
        return self._commit(case_id, lines, blobs)

    def add_trial(self, case_id: str, node: Mapping[str, Any], trial: int) -> dict[tuple[str, int | None], str]:
        """Write one trial's tree of a case now (every line carries ``trial``); its rollups come later, with
        :meth:`add_rollup`. So a converter streams trials as they come (and writes rollups after every trial line,
        in the order it reads them). A closed run needs a rollup at every case and path with trial lines ([RES-8],
        checked by :meth:`finish`); a trial added after its rollup, or whose lines' parents are not at the paths
        of the case's earlier trials, is refused ([RES-8]). Returns ``{(path, trial): resultId}``."""
        self._check_open()
        if not isinstance(case_id, str) or not case_id:
            raise Refusal("VER-2", "a caseId is a non-empty string", "results.ndjson")
        if isinstance(trial, bool) or not isinstance(trial, int) or trial < 0:
            raise Refusal("RES-8", f"a trial is a 0-based integer, not {trial!r}", _where(case_id, None, None))
        seen: set[tuple[str, int | None]] = set()
        blobs: list[tuple[bytes, str, bytes]] = []
        top = self._tree(case_id, node, trial, seen, blobs)
        lines = list(self._walk(top))
        updates: dict[tuple[str, str], list[Any]] = {}
        for n in lines:
            key = (case_id, n.path)
            rec = self._trial_paths.get(key)
            parent = n.parent.path if n.parent is not None else None
            where = _where(case_id, n.path, trial)
            if rec is None and key not in updates and self._rolled_up(case_id, n.path):
                raise Refusal("RES-8", "a trial line after its rollup was written", where)
            if rec is not None:
                if rec[3] != parent:
                    raise Refusal(
                        "RES-8", f"the trial line's parent is at {parent!r}, earlier trials' at {rec[3]!r}", where
                    )
            state = n.src.get("state")
            old = updates.get(key) or (list(rec) if rec is not None else [0, 0, state, parent, False, True])
            old[0] += 1
            old[1] += 1 if state == "passed" else 0
            old[5] = old[5] and state == old[2]
            updates[key] = old
        ids = self._commit(case_id, lines, blobs)
        self._trial_paths.update(updates)
        return ids

    def add_rollup(
        self, case_id: str, node: Mapping[str, Any], *, aggregation: str | None = None, k: int | None = None
    ) -> dict[tuple[str, int | None], str]:
        """Write the rollup tree of a case whose trials were written with :meth:`add_trial` ([RES-8]): ``node`` and
        its children are the rollups, one per path the trials have, each getting ``trials`` (``n``, ``passed``,
        ``agree`` over the trial lines at its path, ``aggregation`` (default: the run's
        ``suite.executionPolicy.aggregation``) and ``k``). Refused ([RES-8]): a rollup at a path with no trial
        line, a rollup tree that is not the trials' tree, a second rollup at one case and path. A case's rollup trees
        may come in several calls (one per root path); :meth:`finish` refuses a closed run in which a case's path with
        trial lines has none."""
        self._check_open()
        if not isinstance(case_id, str) or not case_id:
            raise Refusal("VER-2", "a caseId is a non-empty string", "results.ndjson")
        seen: set[tuple[str, int | None]] = set()
        blobs: list[tuple[bytes, str, bytes]] = []
        top = self._tree(case_id, node, None, seen, blobs)
        agg = aggregation if aggregation is not None else self._trial_aggregation
        if agg is None:
            raise Refusal(
                "RES-8", "the trials' aggregation is given (or the run's suite.executionPolicy.aggregation)",
                _where(case_id, top.path, None),
            )
        if k is None and agg == "PassAtK":
            k = self._trial_k
        lines = list(self._walk(top))
        for n in lines:
            where = _where(case_id, n.path, None)
            rec = self._trial_paths.get((case_id, n.path))
            if rec is None:
                if self._rolled_up(case_id, n.path):
                    raise Refusal("RES-8", "a second rollup for one case and path", where)
                raise Refusal("RES-8", "a rollup at a path where the case has no trial line", where)
            parent = n.parent.path if n.parent is not None else None
            if rec[3] != parent:
                raise Refusal(
                    "RES-8", f"the rollup's parent is at {parent!r}, its trial lines' parents at {rec[3]!r}", where
                )
            self._set_trials(n, rec[0], rec[1], agg, rec[5], k)
        ids = self._commit(case_id, lines, blobs)
        for n in lines:  # rolled up: the rollup's resultId, among the run's, says so from now on
            del self._trial_paths[(case_id, n.path)]
        return ids

    def _rolled_up(self, case_id: str, path: str) -> bool:
        """Whether the rollup of a case's trial lines at ``path`` was written (a line at the case, path and no
        trial, after trial lines: add_rollup's, since add_trial refuses a trial after it)."""
        try:
            rid = result_id(self.run_id, case_id, path, None)
        except ValueError:
            return False
        return bytes.fromhex(rid[2:]) in self._ids

    @staticmethod
    def _set_trials(r: _Node, n: int, passed: int, aggregation: str, agree: bool, k: int | None) -> None:
        """Put a rollup's ``trials`` right after its ``path`` (the usual member order)."""
        info: dict[str, Any] = {"n": n, "passed": passed, "aggregation": aggregation, "agree": agree}
        if k is not None:
            info["k"] = k
        items = list(r.line.items())
        idx = next(i for i, (key, _) in enumerate(items) if key == "path") + 1
        items.insert(idx, ("trials", info))
        r.line = dict(items)

    def _commit(
        self, case_id: str, lines: list[_Node], blobs: list[tuple[bytes, str, bytes]]
    ) -> dict[tuple[str, int | None], str]:
        """Check the ids and the lines of a case's tree(s) and write them (nothing is written when one is refused)."""
        # ids: unique within the case (seen) and across the run (16-byte digests)
        new_ids: list[bytes] = []
        for n in lines:
            d = bytes.fromhex(n.rid[2:])
            if d in self._ids:
                raise Refusal(
                    "RES-4",
                    "a line at this case, path and trial was already written (they would share one resultId)",
                    _where(case_id, n.path, n.trial),
                )
            new_ids.append(d)
        if self._lines + len(lines) > jsonio.MAX_LINES:
            raise Refusal("ENC-17", f"results.ndjson holds at most {jsonio.MAX_LINES} lines", "results.ndjson")

        # reasoning given as bytes: digests are known before the blobs are stored
        for data, blob_where, _ in blobs:
            self._check_content_kind("reasoning", blob_where)
            if len(data) > jsonio.MAX_BLOB:
                raise Refusal("ENC-17", f"a blob is at most {jsonio.MAX_BLOB} bytes", blob_where)

        encoded: list[bytes] = []
        validate = _validator("result")
        for i, n in enumerate(lines):
            where = f"results.ndjson:{self._lines + i + 1} ({_where(case_id, n.path, n.trial)})"
            reason = validate(n.line)
            if reason is not None:
                raise Refusal("VER-2", f"the line would not be valid: {reason}", where)
            encoded.append(_encode(n.line, where, line=True))

        # accepted: write
        for data, _, raw in blobs:
            self._add_blob(data, "reasoning", raw)
        assert self._results is not None
        for data in encoded:
            self._results.write(data)
        self._results.flush()  # the case is on disk: memory does not grow with the lines written
        self._lines += len(lines)
        for d in new_ids:
            self._ids.add(d)
        for n in lines:
            for s in n.line.get("scores") or ():
                self._used_metrics.setdefault(s["metric"], _where(case_id, n.path, n.trial))
        return {(n.path, n.trial): n.rid for n in lines}

    def _tree(
        self,
        case_id: str,
        root: Mapping[str, Any],
        trial: int | None,
        seen: set[tuple[str, int | None]],
        blobs: list[tuple[bytes, str, bytes]],
    ) -> _Node:
        """Check one tree and build its lines (ids, parents, aggregation counts); nothing is written."""
        top = self._node(case_id, root, trial, None, seen)
        stack = [top]
        order: list[_Node] = []
        while stack:
            n = stack.pop()
            order.append(n)
            kids = n.src.get("children")
            if kids is None:
                continue
            if not isinstance(kids, list):
                raise Refusal("VER-2", "children is a list of nodes", _where(case_id, n.path, trial))
            for c in kids:
                child = self._node(case_id, c, trial, n, seen)
                n.children.append(child)
            stack.extend(reversed(n.children))
        for n in order:
            self._line(case_id, n, blobs)
        return top

    def _node(
        self,
        case_id: str,
        src: Any,
        trial: int | None,
        parent: _Node | None,
        seen: set[tuple[str, int | None]],
    ) -> _Node:
        if isinstance(src, msgspec.Struct):
            src = _plain(src)
        if not isinstance(src, Mapping):
            raise Refusal("VER-2", "a node is an object", _where(case_id, None, trial))
        path = src.get("path")
        where = _where(case_id, path, trial)
        if not isinstance(path, str) or not path:
            raise Refusal("VER-2", "a node has a non-empty string path", where)
        for key in DERIVED:
            if key in src:
                raise Refusal("VER-2", f"{key} is derived by the builder: a node does not carry it", where)
        if "caseId" in src and src["caseId"] != case_id:
            raise Refusal("VER-2", f"the node's caseId is not {case_id!r}", where)
        if "trees" in src:
            raise Refusal("RES-8", "trial trees are given to add_case(trials=...), not inside a node", where)
        state = src.get("state")
        if state not in STATES:
            raise Refusal("VER-2", f"unknown state {state!r}", where)
        if state == "pending":
            raise Refusal("RES-3", "a closed run has no pending line: write skipped or error, with a reason", where)
        if state in TYPED_ABSENCES:
            if not src.get("reason"):
                raise Refusal("RES-2", f"a line in state {state} says why (reason)", where)
            if "scores" in src:
                raise Refusal("RES-2", f"a line in state {state} carries no scores", where)
        if parent is not None:
            if "component" not in src:
                raise Refusal("RES-5", "a child carries component (weight, required)", where)
            if self.strict_paths:
                prefix = parent.path + "/"
                name = path[len(prefix):] if path.startswith(prefix) else ""
                if not name or "/" in name:
                    raise Refusal(
                        "RES-5", f"a child's path is its parent's ({parent.path!r}) and one more level", where
                    )
        elif self.strict_paths and "component" in src:
            raise Refusal("RES-5", "component is on children only", where)
        key = (path, trial)
        if key in seen:
            raise Refusal("RES-4", "two lines of one case at one path and trial (they would share one resultId)", where)
        seen.add(key)
        n = _Node(src, path, trial, parent)
        try:
            n.rid = result_id(self.run_id, case_id, path, trial)
        except ValueError as e:
            raise Refusal("RES-4", f"no resultId: {e}", where) from None
        return n

    def _line(self, case_id: str, n: _Node, blobs: list[tuple[bytes, str, bytes]]) -> None:
        src = n.src
        where = _where(case_id, n.path, n.trial)
        line: dict[str, Any] = {"schemaVersion": SCHEMA_VERSION, "resultId": n.rid}
        if n.parent is not None:
            line["parentResultId"] = n.parent.rid
        line["caseId"] = case_id
        line["path"] = n.path
        if n.trial is not None:
            line["trial"] = n.trial
        for key, value in src.items():
            if key in ("children", "caseId", "path", "aggregation"):
                continue
            if key == "reasoning" and isinstance(value, (bytes, bytearray, str)):
                data = value.encode("utf-8") if isinstance(value, str) else bytes(value)
                raw = hashlib.sha256(data).digest()
                blobs.append((data, where, raw))
                line["reasoning"] = {"blob": "sha256:" + raw.hex(), "bytes": len(data)}
                continue
            line[key] = _plain(value)
        if n.children or "aggregation" in src:
            line["aggregation"] = self._aggregation(case_id, n)
        self._line_rules(line, where)
        n.line = line

    def _aggregation(self, case_id: str, n: _Node) -> dict[str, Any]:
        where = _where(case_id, n.path, n.trial)
        facts = n.src.get("aggregation")
        if facts is None:
            raise Refusal("RES-5", "a node with children carries aggregation (strategy, rulePath)", where)
        facts = _plain(facts)
        if not isinstance(facts, dict):
            raise Refusal("VER-2", "aggregation is an object", where)
        total = len(n.children)
        measured = sum(1 for c in n.children if c.src.get("state") in MEASURED_STATES)
        counts = {s: 0 for s in TYPED_ABSENCES if s != "pending"}
        for c in n.children:
            s = c.src.get("state")
            if s not in MEASURED_STATES:
                counts[s] = counts.get(s, 0) + 1
        agg: dict[str, Any] = {}
        for key, value in facts.items():
            if key in _AGG_COUNTS or key == "decisive":
                continue
            agg[key] = value
        agg["measured"] = measured
        agg["total"] = total
        agg["unmeasured"] = counts
        # counts given by the caller must be the ones the children give ([RES-6])
        if "total" in facts and facts["total"] != total:
            raise Refusal("RES-6", f"aggregation.total is {facts['total']!r}, but the node has {total} children", where)
        if "measured" in facts and facts["measured"] != measured:
            raise Refusal(
                "RES-6", f"aggregation.measured is {facts['measured']!r}, but {measured} children are measured", where
            )
        if isinstance(facts.get("unmeasured"), dict):
            for s, c in facts["unmeasured"].items():
                if c != counts.get(s, 0):
                    raise Refusal(
                        "RES-6", f"aggregation.unmeasured.{s} is {c!r}, the children give {counts.get(s, 0)}", where
                    )
        if "decisive" in facts:
            dec = facts["decisive"]
            if not isinstance(dec, list):
                raise Refusal("VER-2", "aggregation.decisive is a list of child paths", where)
            by_path = {c.path: c.rid for c in n.children}
            by_id = set(by_path.values())
            ids = []
            for d in dec:
                if not isinstance(d, str):
                    raise Refusal("VER-2", f"aggregation.decisive holds child paths or ids (strings), not {d!r:.40}",
                                  where)
                if d in by_path:
                    ids.append(by_path[d])
                elif d in by_id:
                    ids.append(d)
                else:
                    raise Refusal("RES-6", f"decisive {d!r} is not a child of this node", where)
            agg["decisive"] = ids
        return agg

    def _line_rules(self, line: dict[str, Any], where: str) -> None:
        """The rules of §3.9 that one line decides alone."""
        if self.content_off:
            if "reasoning" in line:
                raise Refusal("RUN-11", "contentCapture is off: no judge reasoning is kept", where)
            ann = line.get("annotator")
            if isinstance(ann, dict) and "promptHash" in ann:
                raise Refusal("RUN-11", "contentCapture is off: no digest of a prompt (annotator.promptHash)", where)
        for key in ("startedAt", "endedAt"):
            _check_time(line.get(key), f"{where} {key}")
        if "startedAt" in line and "endedAt" in line and not _later_or_equal(line["endedAt"], line["startedAt"]):
            raise Refusal("RES-10", "endedAt is before startedAt", where)
        scores = line.get("scores")
        if isinstance(scores, list):
            metrics = [_hashable(s.get("metric")) for s in scores if isinstance(s, dict)]
            if len(set(metrics)) != len(metrics):
                raise Refusal("SUM-1", "the line scores one metric twice", where)
        ann = line.get("annotator")
        if isinstance(ann, dict) and isinstance(ann.get("panel"), dict):
            p = ann["panel"]
            if _is_number(p.get("agree")) and _is_number(p.get("of")) and p["agree"] > p["of"]:
                raise Refusal("RES-10", "the panel's agree exceeds of", where)
        usage = line.get("usage")
        if isinstance(usage, list):
            keys = [(_hashable(u.get("role")), _hashable(u.get("model", None)), "model" in u)
                    for u in usage if isinstance(u, dict)]
            if len(set(keys)) != len(keys):
                raise Refusal("RES-10", "usage names one role and model twice", where)
        att = line.get("attack")
        if isinstance(att, dict) and att.get("success") is True and line.get("state") == "passed":
            raise Refusal("RES-10", "an attack that succeeded is not a pass for the subject", where)
        unc = line.get("uncertainty")
        if isinstance(unc, dict) and isinstance(unc.get("ci"), dict):
            ci = unc["ci"]
            if _is_number(ci.get("low")) and _is_number(ci.get("high")) and ci["low"] > ci["high"]:
                raise Refusal("RES-10", "the interval's low exceeds its high", where)

    @staticmethod
    def _walk(root: _Node) -> Iterable[_Node]:
        stack = [root]
        while stack:
            n = stack.pop()
            yield n
            stack.extend(reversed(n.children))

    def _trials(
        self,
        case_id: str,
        rollup: _Node,
        trees: list[Any],
        aggregation: str | None,
        k: int | None,
        seen: set[tuple[str, int | None]],
        blobs: list[tuple[bytes, str, bytes]],
    ) -> list[_Node]:
        """A case run in trials ([RES-8]): the rollup tree, and one tree per trial at the same paths."""
        where = _where(case_id, rollup.path, None)
        if not trees:
            raise Refusal("RES-8", "a case run in trials has at least one trial tree", where)
        agg = aggregation if aggregation is not None else self._trial_aggregation
        if agg is None:
            raise Refusal(
                "RES-8", "the trials' aggregation is given (or the run's suite.executionPolicy.aggregation)", where
            )
        if k is None and agg == "PassAtK":
            k = self._trial_k
        rollups = {n.path: n for n in self._walk(rollup)}
        per_path: dict[str, list[str]] = {p: [] for p in rollups}
        trial_nodes: list[_Node] = []
        for t, tree in enumerate(trees):
            if isinstance(tree, Mapping) and tree.get("path") != rollup.path:
                raise Refusal(
                    "RES-8",
                    f"trial {t}'s tree is rooted at {tree.get('path')!r}, not at its case's path {rollup.path!r}",
                    _where(case_id, tree.get("path"), t),
                )
            top = self._tree(case_id, tree, t, seen, blobs)
            for n in self._walk(top):
                tw = _where(case_id, n.path, t)
                r = rollups.get(n.path)
                if r is None:
                    raise Refusal("RES-8", "a trial line at a path where the case has no rollup", tw)
                rp = r.parent.path if r.parent is not None else None
                tp = n.parent.path if n.parent is not None else None
                if rp != tp:
                    raise Refusal(
                        "RES-8",
                        f"the trial line's parent is at {tp!r}, the rollup's at {rp!r}: the trees differ",
                        tw,
                    )
                per_path[n.path].append(n.src.get("state"))
                trial_nodes.append(n)
        for path, states in per_path.items():
            if not states:
                raise Refusal(
                    "RES-8", "a rollup at a path none of the case's trial trees has", _where(case_id, path, None)
                )
        for path, r in rollups.items():
            states = per_path[path]
            self._set_trials(r, len(states), sum(1 for s in states if s == "passed"), agg, len(set(states)) == 1, k)
        return [*self._walk(rollup), *trial_nodes]

    # -- closing -------------------------------------------------------------------------------------------------------

    def abort(self, reason: str, **kwargs: Any) -> BuiltRun:
        """``finish(status="aborted", abort_reason=reason, ...)``."""
        return self.finish("aborted", abort_reason=reason, **kwargs)

    def finish(
        self,
        status: str | None = None,
        *,
        ended_at: str | None = None,
        abort_reason: str | None = None,
        summary: Mapping[str, Any] | None = None,
        seal: bool | str = False,
        sealed_by: str | None = None,
        sealed_at: str | None = None,
        signing_key: Any = None,
    ) -> BuiltRun:
        """Close, check, summarise, (seal,) and rename the run into place. See the class docstring."""
        self._check_open()
        try:
            return self._finish(status, ended_at, abort_reason, summary, seal, sealed_by, sealed_at, signing_key)
        except BaseException as e:
            if self._state == "open":
                self._teardown(type(e), e, e.__traceback__)
            raise

    def finish_running(self) -> BuiltRun:
        """Write the run as still ``running`` (an import of a log that was still being written, [RUN-5]): no
        ``endedAt``, no ``summary.json`` (a closed run's, [RUN-2]), never sealed ([SEAL-1]); a case's trial lines
        may still lack their rollup ([RES-8]). Every other check of :meth:`finish` applies, and the folder is
        renamed into place the same way."""
        self._check_open()
        try:
            if self.as_given:
                raise Refusal("RUN-5", "a run written as given is closed as given", "run.json")
            return self._finish("running", None, None, None, False, None, None, None, running=True)
        except BaseException as e:
            if self._state == "open":
                self._teardown(type(e), e, e.__traceback__)
            raise

    def _finish(
        self, status, ended_at, abort_reason, summary, seal, sealed_by, sealed_at, signing_key, *, running=False
    ) -> BuiltRun:
        tmp = self._check_open()
        run_doc = self._closing_run_doc(status, ended_at, abort_reason, running)
        metrics_doc = self._closing_metrics_doc()

        # files streamed so far
        self._close_files()
        self._check_links_write_gates(tmp)

        # results: the rules across files, and the summary, in one pass over the written lines
        request = _plain(summary) if summary is not None else {"lanes": []}
        if not isinstance(request, dict):
            raise Refusal("CONF-3", "the summary request is {\"lanes\": [...]}", "summary")
        summary_doc = self._summary(run_doc["runId"], metrics_doc, request, tmp / "results.ndjson")
        if not running:
            # [RES-8]: in a closed run, every case and path with trial lines (add_trial) has its rollup
            for case_id, path in self._trial_paths:
                raise Refusal("RES-8", "trial lines without a rollup in a closed run", _where(case_id, path, None))

        self._write_doc(tmp, "metrics.json", _encode(metrics_doc, "metrics.json", line=False))
        if not running:
            self._write_doc(tmp, "summary.json", _encode(summary_doc, "summary.json", line=False))
        self._write_doc(tmp, "run.json", _encode(run_doc, "run.json", line=False))

        run_hash = None
        if seal or sealed_by is not None or signing_key is not None:
            by = sealed_by if sealed_by is not None else (seal if isinstance(seal, str) else "producer")
            # the verification before the seal takes the builder's list of the files it wrote and their digests:
            # the folder is only listed, the blobs are not read again; it still reads and checks every file it parses
            run_hash = sealer.seal_run(tmp, sealed_by=by, sealed_at=sealed_at, written=self._written)
            if signing_key is not None:
                # [SIG-1]: attestation.dsse.json, a DSSE envelope over the bytes of seal.json
                envelope = sign((tmp / "seal.json").read_bytes(), payload_type_for("seal.json"), signing_key)
                with open(tmp / ATTESTATION, "xb") as f:
                    f.write(jsonio.dumps(envelope))
        cm, self._cm = self._cm, None
        cm.__exit__(None, None, None)  # rename into place
        self._state = "finished"
        self._close_indexes()
        return BuiltRun(self.out_dir, self._lines, run_hash)

    def _closing_run_doc(self, status, ended_at, abort_reason, running: bool) -> dict[str, Any]:
        """The ``run.json`` document to write (as given, running, or closed with its status, end and abort
        reason), checked."""
        if self.as_given:
            if status is not None or ended_at is not None or abort_reason is not None:
                raise Refusal("RUN-5", "a run written as given is closed as given", "run.json")
            run_doc = self._header
        elif running:
            run_doc = self._run_doc("running", None, None)
        else:
            h = self._header
            if status is None:
                status = h.get("status") if h.get("status") in ("completed", "aborted") else "completed"
            if status not in ("completed", "aborted"):
                raise Refusal("RUN-5", f"a run closes completed or aborted, not {status!r}", "run.json/status")
            if status == "aborted":
                abort_reason = abort_reason if abort_reason is not None else h.get("abortReason")
                if not abort_reason:
                    raise Refusal("RUN-5", "an aborted run says why (abort_reason)", "run.json/abortReason")
            elif abort_reason is not None:
                raise Refusal("RUN-5", "only an aborted run has an abortReason", "run.json/abortReason")
            ended_at = ended_at if ended_at is not None else h.get("endedAt") or now()
            run_doc = self._run_doc(status, ended_at, abort_reason if status == "aborted" else None)
        self._check_run_doc(run_doc)
        return run_doc

    def _closing_metrics_doc(self) -> dict[str, Any]:
        """The ``metrics.json`` document to write, refused when a line uses a metric it does not declare or it
        would not be valid."""
        undeclared = [m for m in self._used_metrics if m not in self._metrics]
        if undeclared:
            m = undeclared[0]
            raise Refusal("SUM-1", f"metric {m!r} is not declared in metrics.json", self._used_metrics[m])
        metrics_doc = self._metrics_doc()
        reason = _validator("metrics")(metrics_doc)
        if reason is not None:
            raise Refusal("VER-2", f"metrics.json would not be valid: {reason}", "metrics.json")
        return metrics_doc

    def _check_links_write_gates(self, tmp: Path) -> None:
        """Refuse evidence that links a blob or span the run does not have; write ``gates.ndjson``, refusing a
        decision that names a result line the run does not have."""
        for hexd, where in self._evidence_blobs:
            if _blob_key("sha256:" + hexd) not in self._blobs:
                raise Refusal("EVD-1", f"the evidence links blob sha256:{hexd}, which is not in the run", where)
        if "traces" in self._otlp:
            for t, s, where in self._evidence_spans:
                if (t, s) not in self._spans:
                    raise Refusal("RUN-14", "the evidence links a span traces.otlp.jsonl does not have", where)
        if self._gates:
            with open(tmp / "gates.ndjson", "xb") as raw_gates:
                f = _Hashed(raw_gates, "gates.ndjson")
                for i, g in enumerate(self._gates, 1):
                    named = list((g.get("inputs") or {}).get("results") or []) + list(g.get("decisive") or [])
                    for rid in named:
                        if bytes.fromhex(rid[2:]) not in self._ids:
                            raise Refusal("GATE-1", f"the decision names {rid}, which is no line of the run",
                                          f"gates.ndjson:{i}")
                    f.write(_encode(g, f"gates.ndjson:{i}", line=True))
            self._written.add(f.rel, f.h.hexdigest(), f.size)

    def _write_doc(self, tmp: Path, name: str, data: bytes) -> None:
        """Create ``name`` holding ``data``, and list it with its digest (runfs.Written)."""
        with open(tmp / name, "xb") as f:
            f.write(data)
        self._written.add(name, hashlib.sha256(data).hexdigest(), len(data))

    def _summary(self, run_id: str, metrics_doc: dict, request: dict, results_path: Path) -> dict[str, Any]:
        doc = compute_summary(run_id, metrics_doc, self._checked_lines(_read_own_lines(results_path)), request)
        # the producer's own figures, copied as given: per entry stderr and ci, and cost, usage and ext
        for lane_out, lane_in in zip(doc["lanes"], request.get("lanes") or []):
            for entry_out, entry_in in zip(lane_out["metrics"], lane_in.get("metrics") or []):
                for key in ("stderr", "ci"):
                    if key in entry_in:
                        entry_out[key] = entry_in[key]
        for key in ("cost", "usage", "ext"):
            if key in request:
                doc[key] = request[key]
        reason = _validator("summary")(doc)
        if reason is not None:
            raise Refusal("VER-2", f"summary.json would not be valid: {reason}", "summary.json")
        usage = doc.get("usage")
        if isinstance(usage, list):
            keys = [(u.get("role"), u.get("model"), "model" in u) for u in usage]
            if len(set(keys)) != len(keys):
                raise Refusal("SUM-9", "the summary's usage names one role and model twice", "summary.json")
        for lane in doc["lanes"]:
            for e in lane["metrics"]:
                ci = e.get("ci")
                if isinstance(ci, dict) and ci["low"] > ci["high"]:
                    raise Refusal("SUM-5", "an interval whose low exceeds its high", "summary.json")
                if "sum" in e and not math.isfinite(e["sum"]):
                    raise Refusal("SUM-5", "the sum is not finite", "summary.json")
        return doc

    def _checked_lines(self, read: Iterator[tuple[int, dict]]) -> Iterator[dict]:
        """The result lines of ``read``, each refused when it cites evidence no record has, a reasoning blob the
        run does not have (or of another size), or a span ``traces.otlp.jsonl`` does not have ([RUN-14])."""
        traces = "traces" in self._otlp
        blobs = self._blobs
        made = self._next_evidence  # E-1 .. E-(made - 1) are evidence ids of the run
        for lineno, line in read:
            where = f"results.ndjson:{lineno}"
            for eid in line.get("evidence") or ():
                if type(eid) is str and eid[:2] == "E-" and eid[2:].isdigit() and len(eid) < 21 and \
                        eid[2:3] != "0" and eid[2:].isascii() and int(eid[2:]) < made:
                    continue  # one the builder made (the usual case, checked without a call)
                if not self._evidence_used(eid):
                    raise Refusal("EVD-1", f"the line cites evidence {eid!r}, which no record has", where)
            rs = line.get("reasoning")
            if rs is not None:
                size = blobs.get(_blob_key(rs["blob"]))
                if size is None:
                    raise Refusal("EVD-3", f"the reasoning blob {rs['blob']} is not in the run", where)
                if size != rs["bytes"]:
                    raise Refusal("EVD-3", f"reasoning.bytes is {rs['bytes']}, the blob has {size}", where)
            tl = line.get("traceLink")
            if traces and tl is not None:
                t, s = tl["traceId"].lower(), tl.get("spanId")
                ok = (t, s.lower()) in self._spans if s is not None else t in self._trace_ids
                if not ok:
                    raise Refusal("RUN-14", "the traceLink names no span of traces.otlp.jsonl", where)
            yield line
