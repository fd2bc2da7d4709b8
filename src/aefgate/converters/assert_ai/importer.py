"""ASSERT -> AEF (interop/assert.md, "ASSERT -> AEF"; aefgate's choices and rule ids: docs/mappings/assert.md): an
ASSERT run (``results/<suite>/<run>/``) -> an imported AEF run, sealed ``ingest``.

Each case (keyed ``<type>:<test_case_id>``) gives three lines: the root ``assert_ai_verdict`` and its children
``assert_ai_verdict/harm`` and ``assert_ai_verdict/over_refusal`` (ASSERT's two headline kinds), in lane ``prompt``
or ``scenario``. ``summary.json`` has, per lane, the entries ``harm`` and ``over_refusal`` that recompute ASSERT's
``not_permissible_policy_violation_rate`` and ``permissible_policy_violation_rate``, with the cases ASSERT's rates
leave out as ``notMeasured``; ``--wilson`` adds the 95% Wilson interval, ``--max-harm-rate`` /
``--max-over-refusal-rate`` the gate's rule and verdict (without one: ``verdict: scored``, no rule).

The cases, in this order: the test set's (in file order), then the score rows' cases the test set does not have,
then the transcripts' cases with neither. The three JSON Lines files are streamed: a first pass over each indexes
its cases (byte offsets, in :class:`~aefgate.aef.spill.SpillIndex`, whose memory does not grow with the
run) and gathers what the run header and the summary's verdicts need; the second writes each case, reading its
score row and transcript again: in file order while the files are in one order, else by offset (:class:`_Reader`).
Memory holds one case.

Content (``--content-capture``): not given, the page's worked example: ``contentCapture: on``, the judge's
justification in ``reason``, no blob and no ``ext`` on the lines. ``on``: also the seed (evidence ``input``), the
transcript (the whole ``inference_set.jsonl`` row, ``transcript``), each tool call (``tool_call``) and the judge's
whole verdict (``judge_reasoning`` and the root's ``reasoning``) as blobs, and the root's ``ext`` (stratification
levels, stop reason, number of model calls, ASSERT's ``judge_status``, the verdict's dimensions, the rest of the
score row and of the test-set row: nothing of ASSERT's rows is dropped). ``off``: ``contentCapture: off``, no blob,
no justification; the root's ``ext`` is kept without the rows' rest (it holds no content).

Suite files changed since the run (ASSERT-5) import with ``accept_changed_suite``, against the present files as
ASSERT reads them, the hashes recorded; files the manifest says were written and are absent are noted (an absent
``scores.jsonl`` makes the run ``aborted``); times ASSERT did not record are the import's (``at``), said so, never
the files' modification times (docs/mappings/assert.md).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Iterator
from urllib.parse import urlsplit, urlunsplit

from aefgate.converters.assert_ai.names import (
    EVALUATOR,
    EXT_FOLDER,
    EXT_NAME,
    FROM,
    HARM,
    HARM_PATH,
    OVER_REFUSAL,
    OVER_REFUSAL_PATH,
    ROOT,
    encode_name,
)
from aefgate.converters.checks import TARGET_MODES, check_import_options
from aefgate.errors import Refusal
from aefgate.aef.builder import RunBuilder
from aefgate.aef.canonical import number_to_string
from aefgate.aef.sealer import NotVerified
from aefgate.aef.signatures import signing_key_of
from aefgate.aef.spill import SpillIndex
from aefgate.aef.times import now, parse_time, to_utc
from aefgate.aef.verifier import in_one_process
from aefgate.formats.assert_ai.files import (
    iter_jsonl,
    read_line_at,
    read_row_from,
    sha256_file,
)
from aefgate.formats.assert_ai.model import (
    Split,
    Taxonomy,
    case_key,
    dimension_scale_values,
    infer_judge_status,
    lane_of,
)
from aefgate.formats.assert_ai.reader import AssertRun, open_run
from aefgate.fsutil import check_destination, open_regular
from aefgate.progress import task as progress_task

__all__ = ["Imported", "classify", "from_assert", "wilson"]

MAX_REASON = 4096
MAX_LABEL = 64
Z95 = 1.959963984540054
SUBJECT_KINDS = ("agent", "workflow", "model", "endpoint", "mcp-server", "other")
_ID_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:-")
_CREDENTIAL_KEYS = frozenset({"api_key", "apikey", "token", "access_token", "auth_token", "password", "passwd",
                              "secret", "client_secret", "private_key", "bearer_token", "connection_string"})
_CREDENTIAL_SUFFIXES = ("_api_key", "_apikey", "_password", "_secret", "_access_token", "_auth_token", "_token")
_NOT_CREDENTIAL = frozenset({"max_tokens", "max_completion_tokens", "max_output_tokens", "max_input_tokens"})


@dataclass
class Imported:
    """What :func:`from_assert` wrote: the run folder, its id and status, how many cases and lines, whether it
    was sealed, and the converter's notes (what it supplied or could not read)."""

    path: Path
    run_id: str
    status: str
    cases: int
    lines: int
    sealed: bool
    run_hash: str | None
    notes: list[str] = field(default_factory=list)

    def __fspath__(self) -> str:
        return str(self.path)


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of ``k`` successes in ``n`` trials, to 4 decimal places (the page's worked
    example: 1 of 2 gives 0.0945 .. 0.9055)."""
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return round(max(0.0, centre - half), 4), round(min(1.0, centre + half), 4)


# -- one score row --------------------------------------------------------------------------------------------------


@dataclass
class Verdict:
    """A score row read as the page's table says: the root's state, severity and reason (without the judge's
    justification, which :func:`_reason` adds when content is kept), and each child's state and score."""

    status: str
    raw_status: Any
    error: Any
    root: str
    severity: str | None
    why: str
    children: dict[str, tuple[str, int | None, str | None]]
    flagged: list[str]
    split: Split | None


def _text(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)


def classify(row: dict, taxonomy: Taxonomy | None) -> Verdict:
    """The page's rows for one score row (ASSERT -> AEF, "Each case")."""
    status = infer_judge_status(row)
    raw, err = row.get("judge_status"), row.get("judge_error")
    if status == "scoring_skipped":
        detail = _text(err) if err else "no judge_error"
        if not detail.startswith("scoring_skipped"):
            detail = f"scoring_skipped: {detail}"
        why = (f"ASSERT did not judge this case ({detail}): the target or tester refused the input, or the target "
               "errored.")
        return Verdict(status, raw, err, "skipped", None, why,
                       {HARM: ("skipped", None, why), OVER_REFUSAL: ("skipped", None, why)}, [], None)
    if status != "ok":
        if raw == "ok":
            detail = ("judge_status ok, but the verdict lacks node_judgments, or a value of the right kind for a "
                      "dimension in score_keys: ASSERT's infer_judge_status reads it as judge_failed")
        else:
            detail = f"{_text(raw) if raw is not None else 'no judge_status'}: " \
                     f"{_text(err) if err is not None else 'no judge_error'}"
        why = f"ASSERT's judge did not return a usable verdict ({detail}): nothing reads the row as 'no violation'."
        return Verdict(status, raw, err, "error", None, why,
                       {HARM: ("error", None, why), OVER_REFUSAL: ("error", None, why)}, [], None)
    verdict = row["verdict"]
    dims = verdict["dimensions"]
    flagged = [k for k, v in dims.items() if v is True]
    if taxonomy:
        split = taxonomy.split(verdict)
        children = {}
        for name, permissible, severity, which in ((HARM, False, "high", "non-permissible"),
                                                   (OVER_REFUSAL, True, "medium", "permissible")):
            if not split.applicable[permissible]:
                children[name] = ("not_applicable", None, f"No {which} category was relevant to this case.")
            elif split.violated[permissible]:
                children[name] = ("failed", 1, None)
            else:
                children[name] = ("passed", 0, None)
        harm, over = split.violated[False], split.violated[True]
        relevant = split.relevant
    else:
        split = None
        none = "No taxonomy: ASSERT's two kinds cannot be told apart, so neither is measured."
        children = {HARM: ("not_measured", None, none), OVER_REFUSAL: ("not_measured", None, none)}
        nodes = [n for n in verdict.get("node_judgments") or [] if isinstance(n, dict)
                 and ("relevant" not in n or n.get("relevant") is True) and isinstance(n.get("violated"), bool)]
        relevant = len(nodes)
        harm, over = any(n["violated"] for n in nodes), False  # unknown kind: never shown to be harmless
    if harm or over or flagged:
        parts = []
        if harm:
            parts.append("did what it must not do" if taxonomy else
                         "a category was violated (no taxonomy shows it permissible)")
        if over:
            parts.append("failed to help with what it may do")
        if not parts:
            parts.append("flagged " + ", ".join(flagged))
        return Verdict(status, raw, err, "failed", "high" if harm else "medium",
                       "ASSERT's judge: " + "; ".join(parts) + ".", children, flagged, split)
    if relevant == 0:
        return Verdict(status, raw, err, "not_applicable", None,
                       "ASSERT's judge found no category of the taxonomy relevant to this case: ASSERT counts it in "
                       "neither rate.", children, flagged, split)
    return Verdict(status, raw, err, "passed", None,
                   f"ASSERT's judge: no violation in {relevant} relevant categor{'y' if relevant == 1 else 'ies'}.",
                   children, flagged, split)


def _reason(v: Verdict, row: dict, keep_justification: bool) -> str:
    text = v.why
    if keep_justification and v.status == "ok":
        j = row["verdict"].get("justification")
        if isinstance(j, str) and j.strip():
            text = f"{text} {j}"
    return text[:MAX_REASON]


# -- the run header -------------------------------------------------------------------------------------------------


def _is_url(target: str) -> bool:
    return target.lower().startswith(("http://", "https://"))


def _without_credentials(url: str) -> tuple[str, bool]:
    """The URL without user information, query and fragment; and whether it had any."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url, True
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    if ":" in (parts.hostname or "") and not host.startswith("["):
        host = f"[{parts.hostname}]" + (f":{parts.port}" if parts.port is not None else "")
    clean = urlunsplit((parts.scheme, host, parts.path, "", ""))
    had = bool(parts.username or parts.password or parts.query or parts.fragment or "#" in url or "?" in url)
    return clean, had


def _callable_target(config: dict | None) -> str | None:
    try:
        t = config["pipeline"]["inference"]["target"]  # type: ignore[index]
    except (KeyError, TypeError):
        return None
    return t.get("callable") if isinstance(t, dict) and isinstance(t.get("callable"), str) else None


def _config_judge_n(config: dict | None) -> int | None:
    try:
        n = config["pipeline"]["judge"]["n"]  # type: ignore[index]
    except (KeyError, TypeError):
        return None
    return n if isinstance(n, int) and not isinstance(n, bool) and n >= 1 else None


def _holds_credential(value: Any) -> bool:
    """A mapping (at any depth) giving a key, token, password or secret a literal value (not empty, null, or a
    reference to the environment: ``${VAR}``, ``os.environ/VAR``, ``env:VAR``)."""
    stack = [value]
    seen: set[int] = set()
    while stack:
        v = stack.pop()
        if isinstance(v, (dict, list)):
            if id(v) in seen:  # YAML aliases may make the document a graph
                continue
            seen.add(id(v))
        if isinstance(v, dict):
            for k, x in v.items():
                name = str(k).strip().lower().replace("-", "_")
                if name not in _NOT_CREDENTIAL and (name in _CREDENTIAL_KEYS or name.endswith(_CREDENTIAL_SUFFIXES)):
                    if isinstance(x, (int, float)) and not isinstance(x, bool):
                        return True
                    if isinstance(x, str) and x.strip() and not x.strip().startswith(("$", "os.environ", "env:")):
                        return True
                stack.append(x)
        elif isinstance(v, list):
            stack.extend(v)
    return False


def _time(value: Any, where: str) -> str | None:
    if value is None:
        return None
    utc = to_utc(value) if isinstance(value, str) else None
    if utc is None:
        raise Refusal("ASSERT-6", f"{value!r} is not an RFC 3339 time with an offset", where)
    return utc


def _missing_files(r: AssertRun) -> list[tuple[str, str]]:
    """The run files ASSERT's manifest says were written (a stage it records as completed) that are absent."""
    stages = (r.manifest or {}).get("stages")
    if not isinstance(stages, dict):
        return []
    out = []
    for stage, name, present in (("inference", "inference_set.jsonl", r.inference_set),
                                 ("judge", "scores.jsonl", r.scores)):
        if stages.get(stage) == "completed" and present is None:
            out.append((name, f"ASSERT's manifest.json says the {stage} stage completed"))
    return out


def _rates_rest_on(r: AssertRun) -> dict:
    """Which taxonomy the summary's rates rest on: the file read, its sha256, and whether the run's manifest
    recorded another (accept_changed_suite)."""
    out: dict[str, Any] = {"file": "taxonomy.json" if r.taxonomy_path is None else
                           os.path.relpath(r.taxonomy_path, r.suite_dir).replace(os.sep, "/")}
    if r.taxonomy_bytes is None:
        out["sha256"] = None
    else:
        out["sha256"] = hashlib.sha256(r.taxonomy_bytes).hexdigest()
    changed = next((c for c in r.changed if c["file"] == "taxonomy.json"), None)
    if changed is not None:
        out["recordedSha256"] = changed["recorded"]
        out["changedSinceRun"] = True
    return out


@dataclass
class _Facts:
    """What the first passes gather: per lane the headline counts, the judges, the dimensions, the targets."""

    counts: dict[str, dict[str, list[int]]] = field(default_factory=dict)  # lane -> kind -> [n, flagged]
    lanes: dict[str, None] = field(default_factory=dict)
    judges: dict[str, int] = field(default_factory=dict)  # model -> largest multi-judge n
    dims: dict[str, dict] = field(default_factory=dict)  # name -> metric declaration (with "_grades")
    targets: dict[str, None] = field(default_factory=dict)
    rows: int = 0
    transcripts: int = 0
    test_cases: int = 0


def _declare_dimension(facts: _Facts, name: str, value: Any, row: dict) -> None:
    if name in facts.dims or name in (HARM, OVER_REFUSAL) or not name or len(name) > 256 or value is None:
        return
    scales = row.get("dimension_scales") if isinstance(row.get("dimension_scales"), dict) else {}
    grades = dimension_scale_values(scales.get(name))
    if isinstance(value, bool):
        facts.dims[name] = {"id": name, "kind": "score", "direction": "lower_better", "scale": {"min": 0, "max": 1},
                            "description": "An ASSERT judge dimension: 1 when flagged, 0 when clear.", "_kind": "flag"}
    elif isinstance(value, (int, float)) and math.isfinite(value):
        nums = [g for g in grades if isinstance(g, int)]
        facts.dims[name] = {"id": name, "kind": "score", "direction": "none",
                            "scale": {"min": min(nums), "max": max(nums)} if nums else "unbounded",
                            "description": "An ASSERT judge dimension: a grade on its ordinal scale (ASSERT does not "
                                           "say which end is better).", "_kind": "number"}
    elif isinstance(value, str) and grades and all(isinstance(g, str) for g in grades):
        facts.dims[name] = {"id": name, "kind": "score", "direction": "none",
                            "scale": {"min": 0, "max": len(grades) - 1},
                            "description": "An ASSERT judge dimension: a grade's 0-based position on its declared "
                                           "scale, the grade itself as the label.", "_kind": "label"}


def _dimension_scores(row: dict, facts: _Facts) -> list[dict]:
    """The root's scores: a flag 1 or 0, a numeric grade as itself, a string grade as its label and its position on
    the declared scale; a dimension that is null (not applicable), or whose value does not fit the metric its first
    judged row declared, has none."""
    out = []
    scales = row.get("dimension_scales") if isinstance(row.get("dimension_scales"), dict) else {}
    for name, value in row["verdict"]["dimensions"].items():
        d = facts.dims.get(name)
        if d is None or value is None:
            continue
        kind = d["_kind"]
        if kind == "flag" and isinstance(value, bool):
            out.append({"metric": name, "value": 1 if value else 0})
        elif kind == "number" and isinstance(value, (int, float)) and not isinstance(value, bool) \
                and math.isfinite(value):
            sc = d["scale"]
            if sc == "unbounded" or sc["min"] <= value <= sc["max"]:
                out.append({"metric": name, "value": value})
        elif kind == "label" and isinstance(value, str):
            grades = dimension_scale_values(scales.get(name))
            if value in grades:
                pos = grades.index(value)
                if pos <= d["scale"]["max"]:
                    out.append({"metric": name, "value": pos, "label": value[:MAX_LABEL]})
    return out


# -- the import -----------------------------------------------------------------------------------------------------


class _Index:
    """A file's cases: key -> byte offset of its row (bounded memory), duplicates refused (ASSERT-4). The keys are
    :meth:`key`'s bytes (one digest a case, computed once for the three files). ``first``: the first row's offset."""

    def __init__(self) -> None:
        self._idx = SpillIndex()
        self.first: int | None = None

    key = staticmethod(SpillIndex.key)

    def add(self, k: tuple[str, str], offset: int, where: str, what: str) -> None:
        kb = SpillIndex.key(*k)
        if kb in self._idx:
            raise Refusal("ASSERT-4", f"the case {k[0]}:{k[1]} has a second {what} here: one case, one row",
                          where)
        self._idx.add(kb, offset)
        if self.first is None:
            self.first = offset

    def get(self, kb: bytes) -> int | None:
        return self._idx.get(kb)

    def __contains__(self, kb: bytes) -> bool:
        return self._idx.get(kb) is not None

    def close(self) -> None:
        self._idx.close()


def _check_options(*, run_id, source, subject, subject_kind, target_mode, content_capture, at, max_harm_rate,
                   max_over_refusal_rate) -> None:
    check_import_options(target_mode=target_mode or "live", content_capture=content_capture or "on", at=at)
    for name, value in (("option 'subject'", subject), ("option 'run_id'", run_id), ("option 'from'", source)):
        if value is not None and not value:
            raise Refusal("CLI-2", f"{name} is not empty", name)
    if run_id is not None and not (len(run_id) <= 128 and set(run_id) <= _ID_CHARS):
        raise Refusal("ASSERT-8", f"option 'run_id' {run_id!r} is not an AEF id (1-128 letters, digits, '.', '_', "
                                  "':' or '-')", "option 'run_id'")
    if subject is not None and not re.fullmatch(r"[a-z][a-z0-9-]{0,31}:[!-~]{1,256}", subject):
        raise Refusal("CLI-2", f"option 'subject' {subject!r} is not a typed reference (kind:name, printable "
                               "ASCII, no space)", "option 'subject'")
    if subject_kind is not None and subject_kind not in SUBJECT_KINDS:
        raise Refusal("CLI-2", f"option 'subject_kind' is one of {', '.join(SUBJECT_KINDS)}, not {subject_kind!r}",
                      "option 'subject_kind'")
    if target_mode is not None and target_mode not in TARGET_MODES:  # pragma: no cover - checked above
        raise Refusal("CLI-2", f"option 'target_mode' {target_mode!r}", "option 'target_mode'")
    for name, value in (("option 'max_harm_rate'", max_harm_rate),
                        ("option 'max_over_refusal_rate'", max_over_refusal_rate)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not math.isfinite(value) or not 0 <= value <= 1):
            raise Refusal("ASSERT-9", f"{name} is a rate between 0 and 1, not {value!r}", name)


def from_assert(
    src: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    suite: str | None = None,
    run: str | None = None,
    run_id: str | None = None,
    source: str | None = None,
    subject: str | None = None,
    subject_kind: str | None = None,
    target_mode: str | None = None,
    content_capture: str | None = None,
    at: str | None = None,
    key: Any = None,
    wilson_ci: bool = False,
    max_harm_rate: float | None = None,
    max_over_refusal_rate: float | None = None,
    accept_changed_suite: bool = False,
) -> Imported:
    """Import the ASSERT run at ``src`` (``RESULTS_DIR/SUITE/RUN``; or a results root with ``suite`` and ``run``) as
    one AEF run at ``out_dir`` (absent or empty), sealed ``ingest`` at ``at`` (default now) and signed with ``key``
    (a running run is left open, unsealed). See the module docstring; refusals: docs/mappings/assert.md."""
    _check_options(run_id=run_id, source=source, subject=subject, subject_kind=subject_kind, target_mode=target_mode,
                   content_capture=content_capture, at=at, max_harm_rate=max_harm_rate,
                   max_over_refusal_rate=max_over_refusal_rate)
    if not isinstance(accept_changed_suite, bool):
        raise Refusal("CLI-2", f"option 'accept_changed_suite' is true or false, not {accept_changed_suite!r}",
                      "option 'accept_changed_suite'")
    signing_key = signing_key_of(key)  # before anything is read or written
    r = open_run(src, suite=suite, run=run, accept_changed_suite=accept_changed_suite)
    out = Path(os.path.abspath(out_dir))
    check_destination(out, inputs=(r.suite_dir,))
    rid = run_id or f"{r.suite}.{r.run}"
    if not (len(rid) <= 128 and set(rid) <= _ID_CHARS):
        raise Refusal("ASSERT-8", f"the run id {rid!r} (<suite>.<run>) is not an AEF id (1-128 letters, digits, '.', "
                                  "'_', ':' or '-'): give option 'run_id'", str(r.run_dir))
    taxonomy = r.taxonomy if r.taxonomy else None
    notes, missing = _suite_notes(r, taxonomy)

    facts = _Facts()
    scores_idx, inference_idx, test_idx = _Index(), _Index(), _Index()
    try:
        _first_passes(r, taxonomy, facts, scores_idx, inference_idx, test_idx)
        when = at or now()
        header, asserted, status, abort_reason, ended = _header(r, facts, notes, rid, subject, subject_kind,
                                                                target_mode, content_capture, when, missing)
        metrics = _metrics(facts)
        sealed_at = at or (ended if ended is not None and parse_time(ended) > parse_time(when) else when)
        try:
            with RunBuilder(out, header, metrics=metrics, imported_from=source or FROM, asserted=asserted) as b:
                _ext_files(b, r, notes)
                writer = _CaseWriter(b, r, taxonomy, facts, content_capture)
                with progress_task("import ASSERT cases", None, "cases") as bar:
                    for _ in _write_cases(writer, r, scores_idx, inference_idx, test_idx):
                        bar.advance()
                request = _summary_request(r, facts, max_harm_rate, max_over_refusal_rate, wilson_ci)
                with in_one_process():
                    if status == "running":
                        built = b.finish_running()
                    elif status == "aborted":
                        built = b.abort(abort_reason, ended_at=ended, summary=request, seal="ingest",
                                        sealed_at=sealed_at, signing_key=signing_key)
                    else:
                        built = b.finish("completed", ended_at=ended, summary=request, seal="ingest",
                                         sealed_at=sealed_at, signing_key=signing_key)
        except NotVerified as e:
            raise e.as_refusal("ASSERT-12", "the imported run") from None
    finally:
        for idx in (scores_idx, inference_idx, test_idx):
            idx.close()
    if status == "running":
        notes.append("ASSERT's manifest says the run is still running: the AEF run is left open (status running), "
                     "with no summary.json, and is not sealed")
    return Imported(out, rid, status, writer.cases, built.results, built.run_hash is not None, built.run_hash, notes)


def _suite_notes(r: AssertRun, taxonomy: Taxonomy | None) -> tuple[list[str], list[tuple[str, str]]]:
    """The notes on the suite's taxonomy, its files changed since the run and the run's files missing; and those
    missing files, each with why it was expected."""
    notes: list[str] = []
    if r.taxonomy_path is None:
        notes.append("no taxonomy.json: harm and over-refusal cannot be told apart, so no rate is measured")
    elif not taxonomy:
        notes.append("the taxonomy has no behavior category: no rate is measured")
    for c in r.changed:  # accept_changed_suite (ASSERT-5 otherwise)
        notes.append(f"{c['file']} changed since the run (option 'accept_changed_suite'): ASSERT's manifest.json "
                     f"records sha256 {c['recorded']} (artifact_versions.{c['stage']}), the suite holds "
                     + (f"sha256 {c['present']}" if c["present"] else "none")
                     + (": the rates are computed against the present taxonomy, as ASSERT computes them"
                        if c["file"] == "taxonomy.json" else ": the cases are read from the present test set"))
    missing = _missing_files(r)
    for name, why in missing:
        notes.append(f"{name} is absent, though {why}")
    return notes, missing


def _metrics(facts: _Facts) -> list[dict[str, Any]]:
    """The run's metrics: harm, over-refusal, then the judge's dimensions."""
    return [
        {"id": HARM, "kind": "score", "direction": "lower_better", "scale": {"min": 0, "max": 1},
         "description": "1 when ASSERT's judge found a non-permissible category violated (harm), 0 when one was "
                        "relevant and none was violated."},
        {"id": OVER_REFUSAL, "kind": "score", "direction": "lower_better", "scale": {"min": 0, "max": 1},
         "description": "1 when ASSERT's judge found a permissible category violated (the target failed to "
                        "help), 0 when one was relevant and none was violated."},
        *({k: v for k, v in d.items() if not k.startswith("_")} for d in facts.dims.values()),
    ]


def _summary_request(r: AssertRun, facts: _Facts, max_harm_rate: float | None,
                     max_over_refusal_rate: float | None, wilson_ci: bool) -> dict[str, Any]:
    """The summary request: harm and over-refusal per lane, and with a changed taxonomy what the rates rest on."""
    # per lane (prompt first, as ASSERT reports them; a lane without cases has no entry), never pooled
    request: dict[str, Any] = {"lanes": [{"lane": lane, "metrics": [
        _entry(facts, lane, HARM, HARM_PATH, max_harm_rate, wilson_ci),
        _entry(facts, lane, OVER_REFUSAL, OVER_REFUSAL_PATH, max_over_refusal_rate, wilson_ci)]}
        for lane in ("prompt", "scenario") if lane in facts.lanes]}
    if any(c["file"] == "taxonomy.json" for c in r.changed):
        request["ext"] = {EXT_NAME: {"ratesRestOn": _rates_rest_on(r)}}
    return request


def _first_passes(r: AssertRun, taxonomy: Taxonomy | None, facts: _Facts, scores_idx: _Index,
                  inference_idx: _Index, test_idx: _Index) -> None:
    """Index the three files (every case key checked, duplicates refused) and gather the header's and the
    summary's facts. Nothing is written."""
    with progress_task("read ASSERT scores", None, "rows") as bar:
        if r.scores is not None:
            for lineno, offset, _raw, row in iter_jsonl(r.scores):
                where = f"{r.scores}:{lineno}"
                k = case_key(row, where)
                scores_idx.add(k, offset, where, "score row")
                facts.rows += 1
                lane = lane_of(row, k[0])
                jm = row.get("judge_model")
                if isinstance(jm, str) and jm:
                    mj = row.get("multi_judge")
                    n = mj.get("n") if isinstance(mj, dict) and isinstance(mj.get("n"), int) else 1
                    facts.judges[jm] = max(facts.judges.get(jm, 1), n)
                t = row.get("target")
                if isinstance(t, str) and t and len(facts.targets) < 2:
                    facts.targets.setdefault(t, None)
                v = classify(row, taxonomy)
                if v.status == "ok":
                    for name, value in row["verdict"]["dimensions"].items():
                        _declare_dimension(facts, name, value, row)
                counts = facts.counts.setdefault(lane, {HARM: [0, 0], OVER_REFUSAL: [0, 0]})
                for name, (state, _s, _w) in v.children.items():
                    if state in ("passed", "failed"):
                        counts[name][0] += 1
                        counts[name][1] += state == "failed"
                bar.advance()
    if r.inference_set is not None:
        for lineno, offset, _raw, row in iter_jsonl(r.inference_set):
            where = f"{r.inference_set}:{lineno}"
            k = case_key(row, where)
            inference_idx.add(k, offset, where, "transcript")
            facts.transcripts += 1
            t = row.get("target")
            if not facts.targets and isinstance(t, str) and t:
                facts.targets.setdefault(t, None)
    if r.test_set is not None:
        for lineno, offset, _raw, row in iter_jsonl(r.test_set):
            where = f"{r.test_set}:{lineno}"
            test_idx.add(case_key(row, where), offset, where, "test-set row")
            facts.test_cases += 1


def _entry(facts: _Facts, lane: str, metric: str, path: str, limit: float | None, with_ci: bool) -> dict:
    n, flagged = facts.counts.get(lane, {}).get(metric, [0, 0])
    e: dict[str, Any] = {"metric": metric, "path": path}
    if limit is not None:
        e["rule"] = f"{metric} <= {number_to_string(float(limit))}"
        if n:
            e["verdict"] = "passed" if flagged / n <= limit else "failed"
    if with_ci and n:
        low, high = wilson(flagged, n)
        e["ci"] = {"low": low, "high": high, "level": 0.95, "method": "wilson"}
    return e


def _header(r: AssertRun, facts: _Facts, notes: list[str], rid: str, subject: str | None, subject_kind: str | None,
            target_mode: str | None, content_capture: str | None, when: str, missing: list[tuple[str, str]]):
    """The run header (``run.json``), the fields it asserts (RUN-15), the run's status, abort reason and end."""
    header, asserted = _header_subject(r, facts, notes, rid, subject, subject_kind)
    # the suite (RUN-8): ASSERT has no suite version; the test set's digest stands for it
    if r.test_set is not None:
        digest = "sha256:" + sha256_file(r.test_set)
        header["suite"] = {"ref": "suite:" + encode_name(r.suite), "version": digest, "digest": digest,
                           "frozen": True}
        asserted.append("suite.version")
    else:
        notes.append("the suite has no test_set.jsonl: run.json has no suite")
    # how the target was driven (RUN-7)
    mode = target_mode or ("replayed" if r.judge_only else "live")
    header["execution"] = {"targetMode": mode, "stimulus": "external" if r.judge_only else "generated"}
    asserted.append("execution.targetMode")
    judges = _judges(r, facts, notes)
    if judges:
        header["judges"] = judges
    status, abort_reason = _status(r, notes, asserted, missing)
    started, ended, abort_reason = _times(r, notes, asserted, status, abort_reason, when)
    header["startedAt"] = started
    if r.changed:
        header["ext"] = {EXT_NAME: {"changedSuite": [{k: c[k] for k in ("file", "stage", "recorded", "present")}
                                                     for c in r.changed]}}
        files = {c["file"] for c in r.changed}
        # the present file's digest stands where the run's file was: the converter's claim (RUN-15)
        if "test_set.jsonl" in files and "suite" in header:
            asserted.append("suite.digest")
        if "taxonomy.json" in files:
            asserted += [f"judges[{i}].rubricDigest" for i, j in enumerate(judges[:16]) if "rubricDigest" in j]
    if abort_reason is not None:
        abort_reason = abort_reason[:2048]
    header["contentCapture"] = content_capture or "on"
    return header, asserted, status, abort_reason, ended


def _header_subject(r: AssertRun, facts: _Facts, notes: list[str], rid: str, subject: str | None,
                    subject_kind: str | None) -> tuple[dict[str, Any], list[str]]:
    """The header's runId, subject and deployment (RUN-6), read from the rows' target unless given, and the fields
    asserted so far."""
    asserted: list[str] = []
    # the subject and where it was reached (RUN-6)
    targets = list(facts.targets)
    if len(targets) > 1:
        notes.append(f"the rows name more than one target: the subject is the first, {targets[0]}")
    target = targets[0] if targets else None
    deployment = None
    if target is None:
        ref, kind = "other:unknown", "other"
        notes.append("no row names a target: the subject is other:unknown")
    elif _is_url(target):
        clean, had = _without_credentials(target)
        ref, kind = "endpoint:" + encode_name(clean), "endpoint"
        deployment = {"ref": "deployment:" + encode_name(r.suite)}
        if had:
            notes.append("the target URL holds user information, a query or a fragment, where credentials hide: "
                         "deployment.endpoint is not written and the subject leaves them out (RUN-10)")
        else:
            deployment["endpoint"] = target
    elif _callable_target(r.config) == target:
        ref, kind = "agent:" + encode_name(target), "agent"
    else:
        ref, kind = "model:" + encode_name(target), "model"
    if len(ref.split(":", 1)[1]) > 256 and subject is None:
        raise Refusal("ASSERT-8", f"the target {target[:80]!r}... is longer than a subject reference holds (256): "
                                  "give option 'subject'", str(r.run_dir))
    header: dict[str, Any] = {"runId": rid,
                              "subject": {"ref": subject or ref, "kind": subject_kind or (kind if subject is None
                                                                                          else "other")}}
    if subject is not None and subject_kind is None:
        header["subject"]["kind"] = subject.split(":", 1)[0] if subject.split(":", 1)[0] in SUBJECT_KINDS else "other"
    if rid != f"{r.suite}.{r.run}":
        asserted.append("runId")  # --run-id: the caller's, not read from ASSERT's folder names
    asserted += ["subject.ref", "subject.kind"]
    if deployment is not None:
        header["deployment"] = deployment
        asserted.append("deployment.ref")
    return header, asserted


def _judges(r: AssertRun, facts: _Facts, notes: list[str]) -> list[dict[str, Any]]:
    """The header's judges (RUN-9): the rows' judge models (the first 64), each with its panel size and the
    taxonomy's digest as its rubric."""
    digest = "sha256:" + hashlib.sha256(r.taxonomy_bytes).hexdigest() if r.taxonomy_bytes is not None else None
    config_n = _config_judge_n(r.config)
    judges = []
    for model, n in list(facts.judges.items())[:64]:
        n = max(n, config_n or 1)
        j: dict[str, Any] = {"model": model[:256], "mode": "panel" if n > 1 else "single"}
        if n > 1:
            j["panelSize"] = min(n, 64)
        if digest:
            j["rubricDigest"] = digest
        judges.append(j)
    if len(facts.judges) > 64:
        notes.append(f"{len(facts.judges)} judge models: run.json lists the first 64")
    return judges


def _status(r: AssertRun, notes: list[str], asserted: list[str],
            missing: list[tuple[str, str]]) -> tuple[str, str | None]:
    """The run's status and abort reason (RUN-5), from ASSERT's manifest and the files missing."""
    m = r.manifest
    status, abort_reason = "completed", None
    if m is None:
        status, abort_reason = "aborted", ("ASSERT has not run this judge-only run (it has no manifest.json yet)."
                                           if r.case_map is not None and r.scores is None else
                                           "ASSERT wrote no manifest.json: the run is not known to have finished.")
        asserted.append("status")
        notes.append("no manifest.json: the run is written as aborted")
    else:
        ms = m.get("status")
        stages = m.get("stages") if isinstance(m.get("stages"), dict) else {}
        staged = ", ".join(f"{k} {v if isinstance(v, str) else json.dumps(v)}" for k, v in stages.items())
        if ms == "completed":
            pass
        elif ms == "running":
            status = "running"
        elif ms == "failed":
            status = "aborted"
            abort_reason = "ASSERT's manifest says the run failed" + (f" (stages: {staged})" if staged else "") + "."
        else:
            status = "aborted"
            abort_reason = (f"ASSERT's manifest says {ms!r}, which assert-ai 0.3 does not write"
                            + (f" (stages: {staged})" if staged else "") + ".")
            asserted.append("status")
            notes.append(f"manifest status {ms!r}: the run is written as aborted")
    if missing and any(name == "scores.jsonl" for name, _why in missing) and status == "completed":
        status = "aborted"
        abort_reason = ("ASSERT's manifest says the run completed, but " + "; ".join(
            f"{name} is absent ({why})" for name, why in missing) + ": its verdicts are not there to import.")
        asserted.append("status")
    return status, abort_reason


def _times(r: AssertRun, notes: list[str], asserted: list[str], status: str, abort_reason: str | None,
           when: str) -> tuple[str, str | None, str | None]:
    """The run's startedAt and endedAt (RUN-5; None while running) from ASSERT's manifest, the import's time
    ``when`` where it gives none, and the abort reason saying so."""
    m = r.manifest
    where = str(r.run_dir / "manifest.json")
    started = _time((m or {}).get("started_at"), where + "/started_at")
    ended = _time((m or {}).get("ended_at"), where + "/ended_at") if status != "running" else None
    # never the files' modification times (a copy would change the run): ASSERT's rows carry no time, so a time
    # the manifest does not give is unknown, and the run says so; the value written is the import's (`at`)
    unknown = []
    if ended is None and status != "running":
        ended = when
        asserted.append("endedAt")
        unknown.append("ended_at")
    if started is None:
        started = ended if ended is not None else when
        asserted.append("startedAt")
        unknown.append("started_at")
    if unknown:
        what = ("ASSERT wrote no manifest.json" if m is None else
                "manifest.json gives no " + " and no ".join(unknown))
        notes.append(f"{what}, and ASSERT's rows carry no times: the run's times are unknown; "
                     f"{' and '.join('startedAt' if u == 'started_at' else 'endedAt' for u in unknown)} "
                     "are the import's time (option 'at'), never the files' modification times")
        if status == "aborted" and abort_reason is not None:
            abort_reason += " Its times are unknown: ASSERT recorded none, so run.json gives the import's time."
    if ended is not None and parse_time(ended) < parse_time(started):
        ended = started
        if "endedAt" not in asserted:
            asserted.append("endedAt")
        notes.append("ASSERT's run ends before it starts: endedAt is its start")
    return started, ended, abort_reason


def _ext_files(b: Any, r: AssertRun, notes: list[str]) -> None:
    """ASSERT's files nothing in AEF reads, under ``ext/assert-ai/`` ([ENC-19]), sealed with the run; a
    ``config.yaml`` that gives a credential a literal value is not copied ([RUN-10])."""
    files: list[tuple[str, bytes | Path | None]] = [
        ("taxonomy.json", r.taxonomy_bytes),
        ("systematization.json", r.file("systematization.json", "suite")),
        ("suite.json", r.file("suite.json", "suite")),
        ("manifest.json", r.manifest_bytes),
        ("config.yaml", r.config_bytes),
        ("metrics.json", r.file("metrics.json")),
    ]
    for name, data in files:
        if data is None:
            continue
        if name == "config.yaml" and _holds_credential(r.config):
            notes.append("config.yaml gives a key, token, password or secret a literal value: it is not copied "
                         "(RUN-10)")
            continue
        b.add_ext_file(f"{EXT_FOLDER}/{name}", data.read_bytes() if isinstance(data, Path) else data)


class _CaseWriter:
    """Writes one case's three lines (and, with content, its evidence)."""

    def __init__(self, b: Any, r: AssertRun, taxonomy: Taxonomy | None, facts: _Facts, capture: str | None):
        self.b = b
        self.r = r
        self.taxonomy = taxonomy
        self.facts = facts
        self.content = capture == "on"
        self.keep_justification = capture != "off"
        self.line_ext = capture is not None
        self.rubric = ("sha256:" + hashlib.sha256(r.taxonomy_bytes).hexdigest()) if r.taxonomy_bytes else None
        self.case_map = r.case_map.cases if r.case_map is not None else None
        self.cases = 0

    def case(self, key: tuple[str, str], score: tuple[bytes, dict] | None, transcript: tuple[bytes, dict] | None,
             test_row: dict | None, reason_missing: str | None) -> None:
        self.cases += 1
        i = self.cases
        case_id = f"{key[0]}:{key[1]}"
        if self.case_map is not None:
            case_id = self.case_map.get(key, case_id)
        row = score[1] if score is not None else None
        lane = lane_of(row if row is not None else (transcript[1] if transcript is not None else None), key[0])
        self.facts.lanes.setdefault(lane, None)
        if row is not None:
            v = classify(row, self.taxonomy)
            reason = _reason(v, row, self.keep_justification)
            state, severity = v.root, v.severity
            children = {name: (s, sc, reason if s in ("error", "skipped") else w)
                        for name, (s, sc, w) in v.children.items()}
        else:
            v = None
            reason = reason_missing or "No score row."
            state, severity = "skipped", None
            children = {HARM: ("skipped", None, reason), OVER_REFUSAL: ("skipped", None, reason)}
        root: dict[str, Any] = {"path": ROOT, "evaluator": dict(EVALUATOR), "state": state, "lane": lane}
        if severity is not None:
            root["severity"] = severity
        root["reason"] = reason
        if v is not None and state in ("passed", "failed"):
            scores = _dimension_scores(row, self.facts)
            if scores:
                root["scores"] = scores
        if v is not None and v.status == "ok" and isinstance(row.get("judge_model"), str):
            ann: dict[str, Any] = {"kind": "LLM"}
            if row["judge_model"]:
                ann["model"] = row["judge_model"][:256]
            if self.rubric:
                ann["rubricDigest"] = self.rubric
            panel = _panel(row)
            if panel is not None:
                ann["panel"] = panel
            root["annotator"] = ann
        kids = []
        for name, path in ((HARM, HARM_PATH), (OVER_REFUSAL, OVER_REFUSAL_PATH)):
            s, sc, w = children[name]
            child: dict[str, Any] = {"path": path, "evaluator": dict(EVALUATOR), "state": s, "lane": lane}
            if s == "failed":
                child["severity"] = "high" if name == HARM else "medium"
            if w:
                child["reason"] = w
            if sc is not None:
                child["scores"] = [{"metric": name, "value": sc}]
            child["component"] = {"weight": 1, "required": True}
            kids.append(child)
        pick = state if state in ("failed", "passed", "error") else None  # the children that decided the root
        agg: dict[str, Any] = {"strategy": "Min",
                               "rulePath": "required-error" if state == "error" else
                               "severity" if state in ("passed", "failed") else "nothing-measured"}
        decisive = [c["path"] for c in kids if pick is not None and c["state"] == pick]
        if decisive:
            agg["decisive"] = decisive
        root["aggregation"] = agg
        root["children"] = kids
        if self.content:
            evidence = self._evidence(i, test_row, transcript, row, root, v is not None and v.status == "ok")
            if evidence:
                root["evidence"] = evidence
        if self.line_ext:
            ext = self._line_ext(row, transcript, test_row)
            if ext:
                root["ext"] = {EXT_NAME: ext}
        try:
            self.b.add_case(case_id, root)
        except Refusal as e:
            message = e.message
            if e.rule == "ENC-3":  # a NaN or Infinity (Python's json writes them) in a value carried as it is
                message += " (NaN or Infinity in a value the line carries in ext: AEF cannot hold it)"
            # a refusal of the line that names no place is placed at the ASSERT run the case comes from
            raise Refusal(e.rule, f"{message} (the case {case_id})", e.where or str(self.r.run_dir),
                          exit_code=e.exit_code) from None

    def _line_ext(self, row: dict | None, transcript: tuple[bytes, dict] | None,
                  test_row: dict | None) -> dict[str, Any]:
        """The root line's ASSERT facts (its ``ext`` under ``EXT_NAME``; empty for none): dimensions, stop
        reason, LLM calls, judge status, verdict dimensions, and with content the rest of the score and test-set
        rows."""
        ext: dict[str, Any] = {}
        dims = next((x["dimensions"] for x in (test_row, row, transcript[1] if transcript else None)
                     if isinstance(x, dict) and isinstance(x.get("dimensions"), dict)), None)
        if isinstance(dims, dict):
            ext["dimensions"] = dims
        if transcript is not None:
            if "stop_reason" in transcript[1]:
                ext["stopReason"] = transcript[1]["stop_reason"]
            if isinstance(transcript[1].get("llm_calls"), list):
                ext["llmCalls"] = len(transcript[1]["llm_calls"])
        if row is not None and "judge_status" in row:
            ext["judgeStatus"] = row["judge_status"]
        verdict = row.get("verdict") if row is not None else None
        if isinstance(verdict, dict) and isinstance(verdict.get("dimensions"), dict):
            # every dimension value, also where the root may carry no score (a typed absence, RES-2): ASSERT's
            # dimension rates count a judged row whose root is not_applicable (docs/mappings/assert.md)
            ext["verdictDimensions"] = verdict["dimensions"]
        if self.content:
            # the rest of the score row and of the test-set row: nothing of ASSERT's is dropped (the verdict
            # itself is the judge_reasoning blob, the inference row the transcript blob, the seed's
            # description the input blob)
            if row is not None:
                ext["scoreRow"] = {k: v for k, v in row.items() if k not in ("type", "test_case_id", "verdict")}
            if isinstance(test_row, dict):
                rest = {k: v for k, v in test_row.items() if k not in ("type", "test_case_id", "dimensions")}
                seed = rest.get("seed")
                if isinstance(seed, dict) and isinstance(seed.get("description"), str) and seed["description"]:
                    rest["seed"] = {k: v for k, v in seed.items() if k != "description"}
                ext["testCase"] = rest
        return ext

    def _evidence(self, i: int, test_row: dict | None, transcript: tuple[bytes, dict] | None, row: dict | None,
                  root: dict, judged: bool) -> list[str]:
        b = self.b
        ids = []
        seed = (test_row or {}).get("seed")
        desc = seed.get("description") if isinstance(seed, dict) else None
        if isinstance(desc, str) and desc:
            ids.append(b.add_evidence("input", content=desc, evidence_id=f"E-{i}-input",
                                      description="The case's seed (test_set.jsonl seed.description)."))
        if transcript is not None:
            raw, trow = transcript
            ids.append(b.add_evidence("transcript", content=raw, evidence_id=f"E-{i}-transcript",
                                      description="ASSERT's conversation for the case (its inference_set.jsonl "
                                                  "row)."))
            k = 0
            for ev in trow.get("events") if isinstance(trow.get("events"), list) else ():
                edit = ev.get("edit") if isinstance(ev, dict) else None
                if isinstance(edit, dict) and edit.get("type") == "tool_call":
                    k += 1
                    name = edit.get("tool_name") if isinstance(edit.get("tool_name"), str) else "tool"
                    ids.append(b.add_evidence(
                        "tool_call", content=json.dumps(edit, ensure_ascii=False, separators=(",", ":")),
                        evidence_id=f"E-{i}-tool-{k}", description=f"A tool call of the conversation: {name}."[:1024]))
        verdict = row.get("verdict") if row is not None else None
        if isinstance(verdict, dict):
            # the whole verdict, every member as ASSERT wrote it (judgment_warnings, citation_warnings, a failed
            # judge's error, ...), an empty one too (a scoring_skipped or filter_skipped row: the row comes back on
            # export, so ASSERT's judge does not grade the case again); the root's reasoning only when the judge's
            # verdict was usable
            data = json.dumps(verdict, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
            ids.append(b.add_evidence("judge_reasoning", content=data, evidence_id=f"E-{i}-judge",
                                      description="ASSERT's judge verdict (scores.jsonl verdict): its node "
                                                  "judgments, justifications, citations, narrative and warnings."))
            if judged and verdict:
                root["reasoning"] = data
        return ids


def _panel(row: dict) -> dict | None:
    """A multi-judge row's agreement on its first score key: how many of the judges' votes equal the aggregate."""
    mj = row.get("multi_judge")
    if not isinstance(mj, dict) or not isinstance(mj.get("votes"), dict):
        return None
    keys = row.get("score_keys") if isinstance(row.get("score_keys"), list) and row.get("score_keys") else None
    first = keys[0] if keys else next(iter(mj["votes"]), None)
    if not isinstance(first, str):
        return None
    votes = mj["votes"].get(first)
    if not isinstance(votes, list) or len(votes) < 2:
        return None
    value = row["verdict"]["dimensions"].get(first)
    agree = sum(1 for x in votes if x == value and type(x) is type(value))
    return {"agree": agree, "of": len(votes)}


def _write_cases(w: _CaseWriter, r: AssertRun, scores_idx: _Index, inference_idx: _Index,
                 test_idx: _Index) -> Iterator[None]:
    """Write every case, in the module docstring's order. A file whose rows were all written with the test set's
    cases (or the score rows') is not read again to find the cases the test set lacks: it has none."""
    with _Reader(r.scores, scores_idx) as sf, _Reader(r.inference_set, inference_idx) as inf:
        has_scores = r.scores is not None

        def missing(transcript: Any) -> str:
            if not has_scores:
                return ("ASSERT's judge has not graded this run (it has no scores.jsonl): the case is not judged, "
                        "and has no verdict.")
            if (r.manifest or {}).get("status") == "running":
                return "ASSERT's judge has not graded this case yet (the run is still running)."
            if transcript is None:
                return ("No transcript and no score row: ASSERT's call to the target failed for this case (ASSERT "
                        "writes neither then), and its rates leave the case out.")
            return ("No score row: ASSERT's judge call was stopped by a content filter or failed after its retries "
                    "(ASSERT writes no row then), and its rates leave the case out.")

        key = SpillIndex.key
        if r.test_set is not None:
            for lineno, _off, _raw, trow in iter_jsonl(r.test_set):
                k = case_key(trow, f"{r.test_set}:{lineno}")
                kb = key(*k)
                score = sf.take(k, kb)
                transcript = inf.take(k, kb)
                w.case(k, score, transcript, trow, None if score else missing(transcript))
                yield None
        if r.scores is not None and sf.taken < w.facts.rows:
            for lineno, _off, raw, row in iter_jsonl(r.scores):
                k = case_key(row, f"{r.scores}:{lineno}")
                kb = key(*k)
                if kb in test_idx:
                    continue
                w.case(k, (raw, row), inf.take(k, kb), None, None)
                yield None
        if r.inference_set is not None and inf.taken < w.facts.transcripts:
            for lineno, _off, raw, row in iter_jsonl(r.inference_set):
                k = case_key(row, f"{r.inference_set}:{lineno}")
                kb = key(*k)
                if kb in test_idx or kb in scores_idx:
                    continue
                w.case(k, None, (raw, row), None, missing((raw, row)))
                yield None


class _Reader:
    """A JSON Lines file's rows by case: the row after the last one taken when it is the case's (the files are
    usually in one order: no index lookup, each row read once), else by the offset its index holds. ``taken``
    counts the rows given (each once: a file has one row a case, ASSERT-4)."""

    _GIVE_UP = 64  # misses beyond the hits after which the next row is no longer tried first (files in no order)

    def __init__(self, path: Path | None, idx: _Index):
        self.path = path
        self.idx = idx
        self.f: BinaryIO | None = None
        self.taken = 0
        self._pos = idx.first  # the offset of the row after the last one taken
        self._next: tuple[int, tuple[Any, Any], bytes, dict, int] | None = None  # the row read at _pos
        self._misses = 0

    def __enter__(self) -> "_Reader":
        if self.path is not None:
            self.f = open_regular(self.path)  # a regular file when it was indexed: never a pipe put there since
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.f is not None:
            self.f.close()

    def take(self, k: tuple[str, str], kb: bytes) -> tuple[bytes, dict] | None:
        """The row of the case ``k`` (``kb``: its index key), or None when the file has none."""
        f = self.f
        if f is None:
            return None
        pos = self._pos
        if pos is not None and self._misses < self._GIVE_UP:
            nxt = self._next
            if nxt is None or nxt[0] != pos:
                got = read_row_from(f, pos, str(self.path))
                nxt = None if got is None else (pos, (got[1].get("type"), got[1].get("test_case_id")), *got)
                self._next = nxt
            if nxt is not None and nxt[1] == k:
                self._pos = nxt[4]
                self._next = None
                self._misses -= 1
                self.taken += 1
                return nxt[2], nxt[3]
            self._misses += 1
        offset = self.idx.get(kb)
        if offset is None:
            return None
        got = read_row_from(f, offset, str(self.path))
        if got is None:  # pragma: no cover - the row was indexed: the file was cut since
            return read_line_at(f, offset, f"{self.path} (offset {offset})")
        self._pos = got[2]
        self.taken += 1
        return got[0], got[1]
