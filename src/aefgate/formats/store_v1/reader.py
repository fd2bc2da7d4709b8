"""A strict reader of an AgentEval store v1 workspace (``.agenteval/``), as ``../shared/samples/store-v1/FORMAT.md``
describes every file. No AEF logic here: :mod:`aefgate.converters.store_v1` maps what this reads.

Strict: every file the migration needs is read whole and checked member by member; what cannot be placed is refused
with a rule of its own (``SV1-1`` .. ``SV1-9``, :data:`RULES`; the mapping page ``docs/mappings/store-v1.md`` lists
them) and the file at fault. Tolerant where AgentEval's own reader is (System.Text.Json with the store's options):
unknown members are kept (``extra``, for the run's ``ext``), a UTF-8 byte-order mark is skipped, a member given twice
keeps its last value, enum values are read without regard to case, an assertion without ``outcome`` takes it from
``passed``.

Safe: a symbolic link is followed only when it resolves inside the workspace (``SV1-2`` otherwise, as for a pipe or a
device: never opened); nothing is written. Large files are not loaded whole when they need not be: the agent trace
is parsed from a read-only memory map (its events are checked as JSON, never built as objects) and its bytes are
streamed into the run as they are; digests are computed in 1 MiB chunks.
"""

from __future__ import annotations

import codecs
import hashlib
import math
import mmap
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import msgspec

from aefgate.errors import Refusal
from aefgate.aef import jsonio
from aefgate.formats.store_v1.dotnet import timespan_ns, utc_time

__all__ = [
    "RULES",
    "Workspace",
    "RunRef",
    "StoreRun",
    "Scenario",
    "Assertion",
    "EvalTree",
    "Trace",
    "ComplianceDoc",
    "open_workspace",
    "locate_run_folder",
    "read_run",
    "read_compliance",
    "compliance_index",
    "native_links",
    "read_jsonl",
    "source_digest",
]

#: aefgate's rules for store v1 input (docs/mappings/store-v1.md)
RULES = {
    "SV1-1": "not a store v1 workspace or run folder where one is expected: no subjects/ folder, a run folder "
             "outside subjects/<agents|workflows>/<name>/runs/, a run id the workspace does not hold or holds twice, "
             "a manifest whose runId is not its folder's name",
    "SV1-2": "a symbolic link that leads out of the workspace, or an entry that is not a regular file or folder",
    "SV1-3": "a file that is not JSON as AgentEval writes it: not UTF-8, malformed or truncated, not an object at the "
             "top, over the size bound, nested deeper than 64 (the agent trace's events: deeper than the reader "
             "follows), a number beyond binary64 (1e400, 309 digits; the agent trace included)",
    "SV1-4": "a file the run needs is missing: manifest.json, or the subject's subject.json (AgentEval's reader finds "
             "no run of a subject without it)",
    "SV1-5": "a member the mapping needs is missing or of the wrong type, or an enum value AgentEval does not know",
    "SV1-6": "a value that cannot be placed: a time or duration not of its form, a negative duration or cost, a "
             "schemaVersion that is not 1.x, ids that disagree (summary, trace, subject kind and its folder)",
    "SV1-7": "scenarios: two scenario files with one id, or an id that cannot be a caseId (empty, a control "
             "character, over 256 characters)",
    "SV1-8": "an eval-result tree (an output that is a JSON object with metric and score) that is malformed",
    "SV1-9": "a value AEF cannot hold: a run id that is not an AEF id, a name over its length bound, more judges, "
             "scores or citations than a run or line may carry",
    "SV1-10": "the migrated run does not verify (exit 1)",
}

MIB = 1 << 20
#: a JSON file read whole (a manifest, a scenario file): anything larger is refused (SV1-3)
MAX_JSON = 64 * MIB
_CHUNK = MIB
_KIND_FOLDERS = {"agents": "agent", "workflows": "workflow"}
_TRACE = ("traces", "agent-trace.json")
_LABELS_SEVERITY = ("none", "low", "medium", "high", "critical")
_MEASUREMENT = {"measured": "measured", "notapplicable": "notApplicable", "notmeasured": "notMeasured"}
_OUTCOMES = ("passed", "failed", "inconclusive")
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def _refuse(rule: str, message: str, where: Path | str) -> Refusal:
    return Refusal(rule, message, str(where))


# -- the workspace and its runs -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunRef:
    """A run folder found in the workspace: ``subjects/<kind folder>/<subject folder>/runs/<run id>``."""

    run_id: str
    kind_folder: str  # agents | workflows
    subject_folder: str
    path: Path

    @property
    def subject_kind(self) -> str:
        return _KIND_FOLDERS[self.kind_folder]

    @property
    def subject_dir(self) -> Path:
        return self.path.parent.parent

    @property
    def rel(self) -> str:
        return f"subjects/{self.kind_folder}/{self.subject_folder}/runs/{self.run_id}"


class Workspace:
    """A store v1 workspace: ``path`` as the caller named it (made absolute; messages show it), ``real`` its
    resolved form (every link must resolve inside it)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(os.path.abspath(path))
        self.real = Path(os.path.realpath(self.path))

    # -- safe access ---------------------------------------------------------------------------------------------

    def inside(self, p: Path) -> bool:
        real = os.path.realpath(p)
        return real == str(self.real) or real.startswith(str(self.real) + os.sep)

    def check(self, p: Path, *, folder: bool = False, missing_ok: bool = False) -> bool:
        """Whether ``p`` exists (False when absent and ``missing_ok``); refuses (SV1-2) a link that leads out of
        the workspace, or an entry that is not a regular file (a folder with ``folder``)."""
        try:
            st = os.lstat(p)
        except FileNotFoundError:
            if missing_ok:
                return False
            raise _refuse("SV1-4", "no such file", p) from None
        if stat.S_ISLNK(st.st_mode):
            if not self.inside(p):
                raise _refuse("SV1-2", "a symbolic link that leads out of the workspace: not followed", p)
            try:
                st = os.stat(p)
            except OSError:
                if missing_ok:
                    return False
                raise _refuse("SV1-2", "a symbolic link that leads nowhere", p) from None
        if folder:
            if not stat.S_ISDIR(st.st_mode):
                raise _refuse("SV1-2", "not a folder", p)
        elif not stat.S_ISREG(st.st_mode):
            raise _refuse("SV1-2", "not a regular file (a folder, a pipe, a device?)", p)
        return True

    def entries(self, folder: Path, problems: list[Refusal] | None = None) -> list[tuple[str, Path, bool]]:
        """``(name, path, is_folder)`` of a folder's entries, in ordinal name order. An entry that is a link out of
        the workspace, or neither a regular file nor a folder, is refused (SV1-2); with ``problems``, it is added
        there and left out instead."""
        out = []
        with os.scandir(folder) as it:
            for e in it:
                p = Path(folder) / e.name
                try:
                    if e.is_symlink():
                        if not self.inside(p):
                            raise _refuse("SV1-2", "a symbolic link that leads out of the workspace: not followed", p)
                        if not os.path.exists(p):
                            raise _refuse("SV1-2", "a symbolic link that leads nowhere", p)
                        is_dir = os.path.isdir(p)
                        if not is_dir and not os.path.isfile(p):
                            raise _refuse("SV1-2", "not a regular file (a pipe, a device?)", p)
                    else:
                        is_dir = e.is_dir(follow_symlinks=False)
                        if not is_dir and not e.is_file(follow_symlinks=False):
                            raise _refuse("SV1-2", "not a regular file (a pipe, a device?)", p)
                except Refusal as r:
                    if problems is None:
                        raise
                    problems.append(r)
                    continue
                out.append((e.name, p, is_dir))
        out.sort(key=lambda x: _ordinal(x[0]))
        return out

    def rel(self, p: Path) -> str:
        """``p`` relative to the workspace (POSIX separators)."""
        return Path(os.path.relpath(p, self.path)).as_posix()

    # -- runs -------------------------------------------------------------------------------------------------------

    def runs(self, problems: list[Refusal] | None = None) -> list[RunRef]:
        """Every run folder of every subject (agents, then workflows; subjects and runs in ordinal name order). A
        link out of the workspace on the way is refused (SV1-2), or, with ``problems``, added there and skipped."""
        out: list[RunRef] = []
        subjects = self.path / "subjects"
        if not self.check(subjects, folder=True, missing_ok=True):
            return out
        for kind_folder in ("agents", "workflows"):
            kdir = subjects / kind_folder
            if not self.check(kdir, folder=True, missing_ok=True):
                continue
            for name, sdir, is_dir in self.entries(kdir, problems):
                if not is_dir:
                    continue
                rdir = sdir / "runs"
                try:
                    if not self.check(rdir, folder=True, missing_ok=True):
                        continue
                except Refusal as r:
                    if problems is None:
                        raise
                    problems.append(r)
                    continue
                for rid, rpath, r_is_dir in self.entries(rdir, problems):
                    if r_is_dir:
                        out.append(RunRef(rid, kind_folder, name, rpath))
        return out

    def find_run(self, run_id: str) -> RunRef:
        problems: list[Refusal] = []
        found = [r for r in self.runs(problems) if r.run_id == run_id]
        for r in problems:  # a link out of the workspace where the run would be
            if Path(r.where).name == run_id or any(Path(r.where) in f.path.parents for f in found):
                raise r
        if not found and problems:  # the run may lie behind the entry that was refused
            raise problems[0]
        if not found:
            raise _refuse("SV1-1", f"the workspace holds no run {run_id!r} (subjects/*/*/runs/{run_id})", self.path)
        if len(found) > 1:
            raise _refuse("SV1-1", f"the run id {run_id!r} is in the workspace twice: "
                                   f"{', '.join(r.rel for r in found)}", found[1].path)
        return found[0]


def _ordinal(name: str) -> bytes:
    """.NET's ordinal order of strings: by UTF-16 code units."""
    return name.encode("utf-16-be", "surrogatepass")


def open_workspace(path: str | os.PathLike[str]) -> Workspace:
    """The workspace at ``path``: the ``.agenteval`` folder itself, or a folder holding one. SV1-1 when neither
    holds ``subjects/`` or ``solution.json``."""
    p = Path(path)
    if not p.exists():
        raise _refuse("SV1-1", "no such folder", p)
    if not p.is_dir():
        raise _refuse("SV1-1", "a workspace is a folder (.agenteval), and this is not one", p)

    def looks(q: Path) -> bool:
        return (q / "subjects").is_dir() or (q / "solution.json").is_file()

    if looks(p):
        ws = Workspace(p)
    elif (p / ".agenteval").is_dir() and looks(p / ".agenteval"):
        ws = Workspace(p / ".agenteval")
    else:
        raise _refuse("SV1-1", "not a store v1 workspace: neither it nor its .agenteval/ holds subjects/ or "
                               "solution.json", p)
    if (ws.path / "solution.json").exists():
        doc = _read_object(ws, ws.path / "solution.json")
        _opt(doc, "id", str, ws.path / "solution.json")
        _opt(doc, "name", str, ws.path / "solution.json")
    return ws


def locate_run_folder(path: str | os.PathLike[str]) -> tuple[Workspace, RunRef]:
    """A run folder given directly: it must lie at ``<workspace>/subjects/<agents|workflows>/<name>/runs/<id>``
    (the workspace is found from it). SV1-1 otherwise."""
    p = Path(os.path.abspath(path))
    if not p.exists():
        raise _refuse("SV1-1", "no such folder", p)
    if not p.is_dir():
        raise _refuse("SV1-1", "a store v1 run is a folder, and this is not one", p)
    if (p / "subjects").is_dir() or (p / ".agenteval").is_dir() or (p / "solution.json").is_file():
        raise _refuse("SV1-1", "this is a workspace, not a run folder: name the run with option 'run' (its run "
                               "id)", p)
    runs, sdir = p.parent, p.parent.parent
    kdir, subjects = sdir.parent, sdir.parent.parent
    if runs.name != "runs" or kdir.name not in _KIND_FOLDERS or subjects.name != "subjects":
        raise _refuse("SV1-1", "not a store v1 run folder: a run lies at <workspace>/subjects/<agents|workflows>/"
                               "<subject>/runs/<run id> (keep the workspace's structure when moving runs)", p)
    ws = Workspace(subjects.parent)
    ref = RunRef(p.name, kdir.name, sdir.name, p)
    if not ws.inside(p):  # pragma: no cover - the run folder is below the workspace by construction
        raise _refuse("SV1-2", "the run folder leads out of its workspace", p)
    return ws, ref


# -- JSON ---------------------------------------------------------------------------------------------------------


def _decode_error(e: Exception) -> str:
    if isinstance(e, jsonio.JsonProblem):
        if e.rule == "ENC-17":
            return f"{e.reason} ([ENC-17]; System.Text.Json's default MaxDepth is 64 too)"
        if e.rule == "ENC-3":
            return f"{e.reason}: AEF cannot hold it ([ENC-3])"
        text = e.reason
    else:
        text = str(e)
    if "truncated" in text:
        return "the JSON is truncated (the file ends inside a value)"
    return f"not JSON: {text}"


def _decode(data: bytes | memoryview, where: Path | str) -> Any:
    """One JSON text as AgentEval's System.Text.Json reads it (a byte-order mark skipped, a member twice keeps its
    last value), within its bounds: nesting at most 64 deep (System.Text.Json's default ``MaxDepth``, and AEF's
    [ENC-17]) and no number beyond binary64 (``1e400``, an integer of 309 digits: AEF cannot hold it, [ENC-3]);
    SV1-3 otherwise."""
    if bytes(data[:3]) == b"\xef\xbb\xbf":  # System.Text.Json skips a UTF-8 byte-order mark
        data = data[3:]
    try:
        return jsonio.loads_tolerant(data)
    except jsonio.JsonProblem as e:
        raise _refuse("SV1-3", _decode_error(e), where) from None


def _read_bytes(ws: Workspace, path: Path, limit: int = MAX_JSON) -> bytes:
    ws.check(path)
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size > limit:
            raise _refuse("SV1-3", f"over {limit // MIB} MiB: larger than any file AgentEval writes here", path)
        data = f.read()
    if len(data) > limit:
        raise _refuse("SV1-3", f"over {limit // MIB} MiB: larger than any file AgentEval writes here", path)
    return data


def _read_object(ws: Workspace, path: Path) -> dict[str, Any]:
    doc = _decode(_read_bytes(ws, path), path)
    if not isinstance(doc, dict):
        raise _refuse("SV1-3", "the top-level JSON value is an object", path)
    return doc


def read_jsonl(ws: Workspace, path: Path) -> list[dict[str, Any]]:
    """A JSONL file of the store (``history.jsonl``, ``runs-index/recent.jsonl``): one object per line; blank lines
    are skipped (SV1-3 for a line that is not an object)."""
    data = _read_bytes(ws, path)
    out = []
    for n, line in enumerate(data.split(b"\n"), 1):
        if not line.strip():
            continue
        doc = _decode(line, f"{path}:{n}")
        if not isinstance(doc, dict):
            raise _refuse("SV1-3", "a line is a JSON object", f"{path}:{n}")
        out.append(doc)
    return out


# -- members ------------------------------------------------------------------------------------------------------

_TYPE_NAMES = {str: "a string", bool: "true or false", dict: "an object", list: "an array", int: "an integer",
               float: "a number"}


def _is(value: Any, t: type) -> bool:
    if t is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if t is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, t)


def _opt(doc: dict, key: str, t: type, where: Path | str, *, label: str | None = None) -> Any:
    """``doc[key]`` when present (and not null: the store never writes null, a reader reads it as absent), checked
    against ``t`` (SV1-5)."""
    value = doc.get(key)
    if value is None:
        return None
    if not _is(value, t):
        raise _refuse("SV1-5", f"{label or key} is {_TYPE_NAMES[t]}, not {type(value).__name__}", where)
    return value


def _req(doc: dict, key: str, t: type, where: Path | str, *, label: str | None = None) -> Any:
    value = _opt(doc, key, t, where, label=label)
    if value is None:
        raise _refuse("SV1-5", f"{label or key} is missing", where)
    if t is str and not value:
        raise _refuse("SV1-5", f"{label or key} is empty", where)
    return value


def _schema_version(doc: dict, where: Path) -> None:
    v = _opt(doc, "schemaVersion", str, where)
    if v is not None and not re.fullmatch(r"1(\.[0-9]+)*", v):
        raise _refuse("SV1-6", f"schemaVersion {v!r}: store v1 files are 1.x", where)


def _enum(value: str, allowed: dict[str, str] | tuple[str, ...], what: str, where: Path | str) -> str:
    """An enum value read as System.Text.Json's enum converter reads it (any letter case)."""
    table = allowed if isinstance(allowed, dict) else {a.lower(): a for a in allowed}
    got = table.get(value.lower())
    if got is None:
        raise _refuse("SV1-5", f"{what} {value!r} is not one AgentEval writes ({', '.join(table.values())})", where)
    return got


def _time(value: str, what: str, where: Path | str) -> str:
    try:
        return utc_time(value)
    except ValueError as e:
        raise _refuse("SV1-6", f"{what}: {e}", where) from None


def _span(value: str, what: str, where: Path | str) -> int:
    try:
        ns = timespan_ns(value)
    except ValueError as e:
        raise _refuse("SV1-6", f"{what}: {e}", where) from None
    if ns < 0:
        raise _refuse("SV1-6", f"{what} {value!r} is negative", where)
    return ns


# -- the records ----------------------------------------------------------------------------------------------------


@dataclass
class EvalTree:
    """The root of an eval-result tree a scenario's output holds (FORMAT.md §3.6): what the mapping reads of it."""

    metric_key: str
    metric_version: str | None
    label: str
    severity: str | None
    value: float
    threshold: float | None
    passed: bool
    measurement: str  # measured | notApplicable | notMeasured
    summary: str | None
    first_recommendation: str | None
    provenance_type: str | None
    judge_model: str | None


@dataclass
class Assertion:
    name: str
    message: str | None
    passed: bool
    outcome: str  # passed | failed | inconclusive
    extra: dict[str, Any]


@dataclass
class Scenario:
    """One ``scenarios/<id>.json`` (a ``ScenarioResult``)."""

    file: Path
    id: str
    name: str | None
    input: str
    output: str
    passed: bool
    score: float | None
    metrics: dict[str, float]
    assertions: list[Assertion]
    duration_ns: int
    estimated_cost: float
    stimulus_hash: str | None
    comparability: dict[str, Any] | None
    tree: EvalTree | None
    extra: dict[str, Any]


@dataclass
class Trace:
    """``traces/agent-trace.json``: its run and scenario, and its size (its bytes are streamed from ``path``)."""

    path: Path
    run_id: str
    scenario_id: str
    size: int


@dataclass
class ComplianceDoc:
    """A compliance evidence document (``compliance/<regulation>/<subject>/<ts>/evidence.json``)."""

    path: Path
    rel: str
    regulation: str
    run_id: str
    manifest_hash: str | None
    scenario_refs: list[str]


@dataclass
class StoreRun:
    """One run as the store holds it. ``manifest`` and ``summary`` are the documents as read (for the run's and the
    summary's ``ext``); the fields below are what the mapping needs, checked."""

    ws: Workspace
    ref: RunRef
    manifest: dict[str, Any]
    summary: dict[str, Any] | None
    run_id: str
    subject_kind: str  # agent | workflow
    subject_name: str
    subject_version: str | None
    started_at: str  # [ENC-8]
    duration_ns: int
    verdict: str
    run_kind: str | None
    agenteval_version: str
    machine: str | None
    scenarios: list[Scenario]
    trace: Trace | None
    other_files: list[tuple[str, Path]]  # (path in the run folder, file): files the mapping does not read
    compliance: list[ComplianceDoc] = field(default_factory=list)

    @property
    def completed(self) -> bool:
        """[RUN-5] as §7.5 reads a store run: CompleteRunAsync finished it (a summary and a final verdict)."""
        return self.summary is not None and self.verdict.upper() != "PENDING"


def _manifest(ws: Workspace, ref: RunRef) -> tuple[dict, dict[str, Any]]:
    path = ref.path / "manifest.json"
    if not ws.check(path, missing_ok=True):
        raise _refuse("SV1-4", "the run has no manifest.json", path)
    doc = _read_object(ws, path)
    _schema_version(doc, path)
    subject = _req(doc, "subject", dict, path)
    run = _req(doc, "run", dict, path)
    agent_eval = _req(doc, "agentEval", dict, path)
    env = _opt(doc, "environment", dict, path)
    for key in ("solution", "git"):
        _opt(doc, key, dict, path)
    _opt(doc, "contentHash", str, path)
    facts: dict[str, Any] = {
        "subject_kind": _enum(_req(subject, "kind", str, path, label="subject.kind"), ("agent", "workflow"),
                              "subject.kind", path),
        "subject_name": _req(subject, "name", str, path, label="subject.name"),
        "subject_version": _opt(subject, "version", str, path, label="subject.version"),
        "run_id": _req(run, "runId", str, path, label="run.runId"),
        "started_at": _time(_req(run, "timestamp", str, path, label="run.timestamp"), "run.timestamp", path),
        "duration_ns": _span(_req(run, "duration", str, path, label="run.duration"), "run.duration", path),
        "verdict": _req(run, "verdict", str, path, label="run.verdict"),
        "run_kind": _opt(run, "kind", str, path, label="run.kind"),
        "agenteval_version": _req(agent_eval, "version", str, path, label="agentEval.version"),
        "machine": _opt(env, "machine", str, path, label="environment.machine") if env else None,
    }
    for key, t in (("scenarioCount", int), ("seed", int), ("harness", str), ("evalProject", str),
                   ("evalProjectPath", str), ("parentInvocationId", str)):
        _opt(run, key, t, path, label=f"run.{key}")
    if facts["run_id"] != ref.run_id:
        raise _refuse("SV1-1", f"the manifest's run.runId {facts['run_id']!r} is not its folder's name "
                               f"{ref.run_id!r}", path)
    if facts["subject_kind"] != ref.subject_kind:
        raise _refuse("SV1-6", f"subject.kind {facts['subject_kind']!r} in a run under subjects/{ref.kind_folder}/",
                      path)
    return doc, facts


def _summary(ws: Workspace, ref: RunRef) -> dict[str, Any] | None:
    path = ref.path / "summary.json"
    if not ws.check(path, missing_ok=True):
        return None
    doc = _read_object(ws, path)
    _schema_version(doc, path)
    rid = _opt(doc, "runId", str, path)
    if rid is not None and rid != ref.run_id:
        raise _refuse("SV1-6", f"summary.json's runId {rid!r} is not the run's {ref.run_id!r}", path)
    _req(doc, "verdict", str, path)
    stats = _opt(doc, "stats", dict, path)
    for k, v in (stats or {}).items():
        if not _is(v, int) or v < 0:
            raise _refuse("SV1-5", f"stats.{k} is a count (an integer, 0 or more)", path)
    for k, v in (_opt(doc, "metrics", dict, path) or {}).items():
        if not _is(v, float):
            raise _refuse("SV1-5", f"metrics.{k} is a number", path)
    cost = _opt(doc, "cost", dict, path)
    if cost is not None:
        c = _opt(cost, "estimatedCost", float, path, label="cost.estimatedCost")
        if c is not None and c < 0:
            raise _refuse("SV1-6", "cost.estimatedCost is negative", path)
        for k in ("promptTokens", "completionTokens"):
            t = _opt(cost, k, int, path, label=f"cost.{k}")
            if t is not None and t < 0:
                raise _refuse("SV1-6", f"cost.{k} is negative", path)
    return doc


_SCENARIO_KEYS = ("id", "name", "input", "output", "passed", "score", "metrics", "assertions", "duration",
                  "estimatedCost", "stimulusHash", "comparability")
_ASSERTION_KEYS = ("assertion", "message", "passed", "outcome")


def _tree(output: str, path: Path) -> EvalTree | None:
    """The eval-result tree an output holds: an output that starts with ``{`` and reads as a JSON object with
    ``metric`` and ``score`` objects; anything else is an agent's plain output (None). A recognised tree that is
    malformed is refused (SV1-8)."""
    if not output.startswith("{"):
        return None
    try:
        doc = jsonio.loads_tolerant(output.encode("utf-8", "surrogatepass"))
    except jsonio.JsonProblem:  # not JSON (or beyond the bounds): an agent's plain output
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("metric"), dict) or not isinstance(doc.get("score"), dict):
        return None
    w = f"{path} (its output's eval-result tree)"

    def bad(message: str) -> Refusal:
        return _refuse("SV1-8", message, w)

    metric, score = doc["metric"], doc["score"]
    key = metric.get("key")
    if not isinstance(key, str) or not key:
        raise bad("metric.key is a non-empty string")
    version = metric.get("version")
    if version is not None and not isinstance(version, str):
        raise bad("metric.version is a string")
    label = score.get("label")
    if not isinstance(label, str):
        raise bad("score.label is a string")
    value = score.get("value")
    if not _is(value, float):
        raise bad("score.value is a number")
    passed = score.get("passed")
    if not isinstance(passed, bool):
        raise bad("score.passed is true or false")
    threshold = score.get("threshold")
    if threshold is not None and not _is(threshold, float):
        raise bad("score.threshold is a number")
    severity = score.get("severity")
    if severity is not None:
        if not isinstance(severity, str) or severity.lower() not in _LABELS_SEVERITY:
            raise bad(f"score.severity {severity!r} is not one of {', '.join(_LABELS_SEVERITY)}")
        severity = severity.lower()
    measurement = score.get("measurement")
    if measurement is None:
        measurement = "measured"
    elif not isinstance(measurement, str) or measurement.lower() not in _MEASUREMENT:
        raise bad(f"score.measurement {measurement!r} is not measured, notApplicable or notMeasured")
    else:
        measurement = _MEASUREMENT[measurement.lower()]
    details = doc.get("details")
    if details is not None and not isinstance(details, dict):
        raise bad("details is an object")
    details = details or {}
    summary = details.get("summary")
    if summary is not None and not isinstance(summary, str):
        raise bad("details.summary is a string")
    recs = details.get("recommendations")
    if recs is not None and (not isinstance(recs, list) or not all(isinstance(r, str) for r in recs)):
        raise bad("details.recommendations is an array of strings")
    subs = details.get("subResults")
    if subs is not None and (not isinstance(subs, list) or not all(isinstance(s, dict) for s in subs)):
        raise bad("details.subResults is an array of eval results")
    prov = doc.get("provenance")
    if prov is not None and not isinstance(prov, dict):
        raise bad("provenance is an object")
    prov = prov or {}
    ptype, judge = prov.get("type"), prov.get("judgeModel")
    if ptype is not None and not isinstance(ptype, str):
        raise bad("provenance.type is a string")
    if judge is not None and not isinstance(judge, str):
        raise bad("provenance.judgeModel is a string")
    return EvalTree(key, version, label, severity, value, threshold, passed, measurement, summary or None,
                    next((r for r in recs or () if r), None), ptype, judge or None)


def _scenario(ws: Workspace, path: Path) -> Scenario:
    doc = _read_object(ws, path)
    sid = _req(doc, "id", str, path)
    if len(sid) > 256:
        raise _refuse("SV1-7", f"the scenario id is {len(sid)} characters: a caseId holds at most 256", path)
    if _CONTROL.search(sid):
        raise _refuse("SV1-7", "the scenario id holds a control character: a caseId cannot ([RES-4])", path)
    metrics = _opt(doc, "metrics", dict, path) or {}
    for k, v in metrics.items():
        if not _is(v, float):
            raise _refuse("SV1-5", f"metrics[{k!r}] is a number", path)
    assertions = []
    for i, a in enumerate(_opt(doc, "assertions", list, path) or [], 1):
        w = f"{path} (assertion {i})"
        if not isinstance(a, dict):
            raise _refuse("SV1-5", "an assertion is an object", w)
        name = _req(a, "assertion", str, w)
        message = _opt(a, "message", str, w)
        passed = _req(a, "passed", bool, w)
        outcome = _opt(a, "outcome", str, w)
        outcome = _enum(outcome, _OUTCOMES, "outcome", w) if outcome is not None else \
            ("passed" if passed else "failed")  # AssertionResult: derived from passed when absent on read
        if passed != (outcome == "passed"):
            raise _refuse("SV1-6", f"passed is {str(passed).lower()} and outcome {outcome!r}: AgentEval's "
                                   "invariant (passed exactly when the outcome is passed) does not hold", w)
        assertions.append(Assertion(name, message or None, passed, outcome,
                                    {k: v for k, v in a.items() if k not in _ASSERTION_KEYS}))
    duration = _opt(doc, "duration", str, path)
    cost = _opt(doc, "estimatedCost", float, path)
    if cost is not None and cost < 0:
        raise _refuse("SV1-6", "estimatedCost is negative", path)
    comp = _opt(doc, "comparability", dict, path)
    if comp is not None:
        _req(comp, "evalKey", str, path, label="comparability.evalKey")
        _req(comp, "evalVersion", str, path, label="comparability.evalVersion")
        _opt(comp, "effectiveBar", float, path, label="comparability.effectiveBar")
        judge = _opt(comp, "judge", dict, path, label="comparability.judge")
        if judge is not None:
            _req(judge, "modelId", str, path, label="comparability.judge.modelId")
            _opt(judge, "rubricDigest", str, path, label="comparability.judge.rubricDigest")
    output = _opt(doc, "output", str, path) or ""
    return Scenario(
        file=path, id=sid, name=_opt(doc, "name", str, path), input=_opt(doc, "input", str, path) or "",
        output=output, passed=_req(doc, "passed", bool, path), score=_opt(doc, "score", float, path),
        metrics=dict(metrics), assertions=assertions,
        duration_ns=_span(duration, "duration", path) if duration is not None else 0,
        estimated_cost=cost or 0.0, stimulus_hash=_opt(doc, "stimulusHash", str, path), comparability=comp,
        tree=_tree(output, path), extra={k: v for k, v in doc.items() if k not in _SCENARIO_KEYS},
    )


class _TraceHead(msgspec.Struct):
    """The members of an AgentTrace the mapping reads; ``events`` is checked as JSON, never built."""

    runId: Any = None
    scenarioId: Any = None
    events: msgspec.Raw = msgspec.Raw(b"")


def _trace_head(buf: Any) -> tuple[str | None, Any]:
    """``(problem, (runId, scenarioId, events is an array))`` of an AgentTrace's bytes (a memory map)."""
    try:
        if buf[:3] == b"\xef\xbb\xbf":
            head = msgspec.json.decode(memoryview(buf)[3:], type=_TraceHead)
        else:
            head = msgspec.json.decode(buf, type=_TraceHead)
    except msgspec.ValidationError as e:
        if "out of range" in str(e):
            return "a number overflows binary64: AEF cannot hold it ([ENC-3])", None
        return f"not an AgentTrace object: {e}", None
    except msgspec.DecodeError as e:
        return _decode_error(e), None
    except RecursionError:
        return "nesting too deep to read (System.Text.Json's default MaxDepth is 64)", None
    if _overflowing_number(buf):
        return "a number overflows binary64: AEF cannot hold it ([ENC-3]), no more than NaN", None
    return None, (head.runId, head.scenarioId, bytes(memoryview(head.events)[:1]) == b"[")


#: the bytes of a trace mapped to classes for a cheap search (C speed, no regular expression over the whole map):
#: a digit -> "0", e/E -> "e", "+" -> "+", a JSON delimiter after a number (, ] } white space) -> "d", any other
#: byte -> "x". A number literal with an exponent of three digits or more (1e400) then reads "0e000...d" or
#: "0e+000...d"; an integer of 309 digits "000..." (309). A hex id inside a string ("3e123ab") does not end in "d".
_CLASSES = bytes(48 if 48 <= i <= 57 else 101 if i in (69, 101) else 43 if i == 43 else
                 100 if i in (44, 93, 125, 32, 9, 10, 13) else 120 for i in range(256))
_MAYBE_BIG = re.compile(rb"0e\+?000+d")  # (leading zeros of an exponent count: a candidate, checked exactly)
_DIGITS_309 = b"0" * 309
_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|-?[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?')
_SCAN = 2 << 20  # the search reads the map in slices of 2 MiB (memory stays flat), overlapping by a number's length


def _maybe_big(buf: Any) -> bool:
    n = len(buf)
    for start in range(0, max(n, 1), _SCAN):
        part = bytes(buf[max(0, start - 512):start + _SCAN]).translate(_CLASSES)
        if part.find(_DIGITS_309) >= 0 or _MAYBE_BIG.search(part) is not None:
            return True
    return False


def _overflowing_number(buf: Any) -> bool:
    """Whether the JSON text ``buf`` (a memory map; already known to be well formed) holds a number literal beyond
    binary64 (``1e400``, an integer of 309 digits): the events of a trace are checked as JSON without being built,
    and that check does not read numbers. Strings are skipped, so text that looks like a number is not one."""
    if not _maybe_big(buf):
        return False
    for m in _TOKEN.finditer(buf):
        if buf[m.start()] == 0x22:  # a string (never copied: it may be the trace's 100 MB)
            continue
        tok = m.group()
        if b"e" in tok or b"E" in tok or b"." in tok:
            if math.isinf(float(tok)):
                return True
        elif len(tok) >= 309:
            if len(tok) > 4000 or abs(int(tok)) >= 2**1024 - 2**970:
                return True
    return False


def _check_utf8(path: Path) -> None:
    """Refuse (SV1-3) a file that is not UTF-8, read in 1 MiB chunks."""
    dec = codecs.getincrementaldecoder("utf-8")()
    with open(path, "rb") as f:
        try:
            while chunk := f.read(_CHUNK):
                dec.decode(chunk)
            dec.decode(b"", final=True)
        except UnicodeDecodeError as e:
            raise _refuse("SV1-3", f"not UTF-8 ({e.reason})", path) from None


def _trace(ws: Workspace, ref: RunRef) -> Trace | None:
    path = ref.path.joinpath(*_TRACE)
    if not ws.check(path, missing_ok=True):
        return None
    size = os.path.getsize(path)
    if size == 0:
        raise _refuse("SV1-3", "an empty file is not JSON", path)
    _check_utf8(path)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        problem, head = _trace_head(m)  # nothing of the map outlives this call: the map closes cleanly
    if problem is not None:
        raise _refuse("SV1-3", problem, path)
    run_id, scenario_id, events_is_array = head
    if not isinstance(run_id, str) or not run_id:
        raise _refuse("SV1-5", "runId is missing or not a string", path)
    if not isinstance(scenario_id, str) or not scenario_id:
        raise _refuse("SV1-5", "scenarioId is missing or not a string", path)
    if not events_is_array:
        raise _refuse("SV1-5", "events is an array", path)
    if run_id != ref.run_id:
        raise _refuse("SV1-6", f"the trace's runId {run_id!r} is not the run's {ref.run_id!r}", path)
    return Trace(path, run_id, scenario_id, size)


def _subject(ws: Workspace, ref: RunRef) -> None:
    """subject.json: required (AgentEval's reader finds no run of a subject without it), an object of its kind."""
    path = ref.subject_dir / "subject.json"
    if not ws.check(path, missing_ok=True):
        raise _refuse("SV1-4", "the subject has no subject.json: AgentEval's reader finds none of its runs", path)
    doc = _read_object(ws, path)
    _schema_version(doc, path)
    kind = _enum(_req(doc, "kind", str, path), ("agent", "workflow"), "kind", path)
    if kind != ref.subject_kind:
        raise _refuse("SV1-6", f"kind {kind!r} in subjects/{ref.kind_folder}/", path)
    _req(doc, "name", str, path)


def _walk_files(ws: Workspace, top: Path, prefix: str = "") -> Iterator[tuple[str, Path]]:
    for name, p, is_dir in ws.entries(top):
        rel = f"{prefix}{name}"
        if is_dir:
            yield from _walk_files(ws, p, rel + "/")
        else:
            yield rel, p


def run_files(ws: Workspace, ref: RunRef) -> list[tuple[str, Path]]:
    """Every file of a run folder, ``(path in the run folder, file)``, in ordinal path order (links checked)."""
    return list(_walk_files(ws, ref.path))


def read_run(ws: Workspace, ref: RunRef, *, compliance: list[ComplianceDoc] | None = None) -> StoreRun:
    """Read one run strictly (see the module docstring); ``compliance``: the documents whose ``sourceRun`` is this
    run (:func:`compliance_index`), read afresh from the workspace when None."""
    _subject(ws, ref)
    manifest, facts = _manifest(ws, ref)
    summary = _summary(ws, ref)
    scenarios: list[Scenario] = []
    seen: dict[str, Path] = {}
    sdir = ref.path / "scenarios"
    if ws.check(sdir, folder=True, missing_ok=True):
        for name, p, is_dir in ws.entries(sdir):
            if is_dir or not name.endswith(".json"):
                continue  # AgentEval reads scenarios/*.json; its own temporary files (*.tmp) are not scenarios
            sc = _scenario(ws, p)
            if sc.id in seen:
                raise _refuse("SV1-7", f"scenario id {sc.id!r} is also {seen[sc.id].name}'s: one case, two files", p)
            seen[sc.id] = p
            scenarios.append(sc)
    trace = _trace(ws, ref)
    read = {"manifest.json", "summary.json", "/".join(_TRACE)}
    other = [(rel, p) for rel, p in run_files(ws, ref)
             if rel not in read and not rel.startswith("scenarios/") and not rel.rsplit("/", 1)[-1].startswith(".")
             and not rel.endswith(".tmp")]
    if compliance is None:
        index, bad = compliance_index(ws)
        if bad:
            raise bad[0]
        compliance = index.get(ref.run_id, [])
    return StoreRun(ws=ws, ref=ref, manifest=manifest, summary=summary, scenarios=scenarios, trace=trace,
                    other_files=other, compliance=list(compliance), **facts)


# -- compliance evidence ------------------------------------------------------------------------------------------


def read_compliance(ws: Workspace, path: Path) -> ComplianceDoc:
    """One compliance evidence document, checked (SV1-3, SV1-5)."""
    doc = _read_object(ws, path)
    _schema_version(doc, path)
    regulation = _req(doc, "regulation", str, path)
    src = _req(doc, "sourceRun", dict, path)
    run_id = _req(src, "runId", str, path, label="sourceRun.runId")
    refs: list[str] = []
    for i, c in enumerate(_req(doc, "controls", list, path)):
        if not isinstance(c, dict):
            raise _refuse("SV1-5", f"controls[{i}] is an object", path)
        for r in _opt(c, "scenarioRefs", list, path, label=f"controls[{i}].scenarioRefs") or []:
            if not isinstance(r, str):
                raise _refuse("SV1-5", f"controls[{i}].scenarioRefs holds strings", path)
            if r not in refs:
                refs.append(r)
    return ComplianceDoc(path, ws.rel(path), regulation, run_id,
                         _opt(src, "manifestHash", str, path, label="sourceRun.manifestHash"), refs)


def compliance_index(ws: Workspace) -> tuple[dict[str, list[ComplianceDoc]], list[Refusal]]:
    """Every ``compliance/<regulation>/<subject>/<ts>/evidence.json``, by the run its ``sourceRun`` names (in path
    order), and the refusals of those that cannot be read (a document that cannot be read may belong to any run)."""
    index: dict[str, list[ComplianceDoc]] = {}
    bad: list[Refusal] = []
    top = ws.path / "compliance"
    if not ws.check(top, folder=True, missing_ok=True):
        return index, bad
    for _reg, rdir, r_is_dir in ws.entries(top):
        if not r_is_dir:
            continue
        for _subj, sdir, s_is_dir in ws.entries(rdir):
            if not s_is_dir:
                continue
            for _ts, tdir, t_is_dir in ws.entries(sdir):
                if not t_is_dir:
                    continue
                path = tdir / "evidence.json"
                try:
                    if not ws.check(path, missing_ok=True):
                        continue
                    doc = read_compliance(ws, path)
                except Refusal as e:
                    bad.append(e)
                    continue
                index.setdefault(doc.run_id, []).append(doc)
    return index, bad


# -- native AEF runs in the workspace -------------------------------------------------------------------------------


def _linked_ids(ext: Any) -> list[str]:
    out: list[str] = []
    if not isinstance(ext, dict):
        return out
    for link in (ext.get("agenteval.store-v1"), (ext.get("agenteval") or {}).get("store-v1")
                 if isinstance(ext.get("agenteval"), dict) else None):
        if not isinstance(link, dict):
            continue
        if isinstance(link.get("runId"), str):
            out.append(link["runId"])
        for t in link.get("trialRunIds") or () if isinstance(link.get("trialRunIds"), list) else ():
            if isinstance(t, str):
                out.append(t)
    return out


def native_links(ws: Workspace) -> dict[str, list[Path]]:
    """The native AEF runs under ``<workspace>/aef/runs/`` (where AgentEval writes them) that link a store run
    (``ext."agenteval.store-v1".runId`` or its ``trialRunIds``), by store run id. Imported runs and files that do
    not read are ignored; nothing outside the workspace is searched, no link out of it followed."""
    out: dict[str, list[Path]] = {}
    top = ws.path / "aef" / "runs"
    if not top.is_dir() or not ws.inside(top):
        return out
    for dirpath, dirs, files in os.walk(top):
        dirs[:] = sorted(d for d in dirs if not os.path.islink(os.path.join(dirpath, d)))
        if "run.json" not in files:
            continue
        p = Path(dirpath) / "run.json"
        try:
            if os.path.islink(p) or os.path.getsize(p) > 4 * MIB:
                continue
            doc = jsonio.loads_tolerant(p.read_bytes())
        except (OSError, jsonio.JsonProblem):
            continue
        if not isinstance(doc, dict) or "imported" in doc:
            continue
        for rid in _linked_ids(doc.get("ext")):
            out.setdefault(rid, []).append(Path(dirpath))
    return out


# -- the digest of a run's source files ---------------------------------------------------------------------------


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def source_digest(ws: Workspace, ref: RunRef, compliance: list[ComplianceDoc]) -> tuple[str, int]:
    """``("sha256:<hex>", files)``: the SHA-256 over, for every file of the run folder and every compliance
    document of the run, in ordinal order of their workspace-relative paths, ``<path>\\n<sha256 hex of its
    bytes>\\n``. Two migrations of the same bytes give the same digest; any change to a file the migration reads
    (or to the set of files) changes it."""
    items = [(f"{ref.rel}/{rel}", p) for rel, p in run_files(ws, ref)]
    items += [(d.rel, d.path) for d in compliance]
    items.sort(key=lambda x: _ordinal(x[0]))
    h = hashlib.sha256()
    for rel, p in items:
        ws.check(p)
        h.update(rel.encode("utf-8", "surrogatepass") + b"\n" + _file_sha256(p).encode("ascii") + b"\n")
    return "sha256:" + h.hexdigest(), len(items)
