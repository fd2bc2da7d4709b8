"""AEF <-> AEP (the Agent Event Protocol's ``assessment.*`` events), as ``docs/mappings/aep.md`` defines it.

No specification maps AEF to AEP; the page is aefgate's mapping and its rules are ``AEP-1`` .. ``AEP-18``. Every
refusal names one of them (or the AEF / AEP rule it enforces) and the place: a run path, or ``file:line``.

- :func:`export_events` (AEP-1 .. AEP-12): a run that verifies ``intact`` -> AEP events, streamed over
  ``results.ndjson`` (memory does not grow with the run), in a deterministic order with deterministic ids.
  :func:`to_aep` writes them as JSONL, :func:`to_cloudevents` as structured CloudEvents (AEP-18).
- :func:`from_aep` / :func:`import_events` (AEP-13 .. AEP-17): AEP events (JSONL, or structured CloudEvents
  detected per line by ``specversion``) -> an imported AEF run written by RunBuilder and sealed ``ingest``.

The AEP file layer (schemas, capture classes, the AEP-0003 §9.4 redaction pipeline) is ``aefgate.formats.aep`` and
the CloudEvents bridge ``aefgate.formats.cloudevents``; both are imported when first needed.
"""

from __future__ import annotations

import datetime as _dt
import functools
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

import msgspec

from aefgate.errors import EXIT_INTEGRITY, Refusal
from aefgate.formats.aef import jsonio
from aefgate.formats.aef.times import parse_time
from aefgate.formats.aef.vocab import STATES, TYPED_ABSENCES
from aefgate.fsutil import atomic_lines, check_destination, check_file_destination, input_file_problem

__all__ = [
    "CAPTURE_LEVELS",
    "CONVERTERS",
    "LOSSES_FROM_AEP",
    "LOSSES_TO_AEP",
    "REDACTED_FIELDS",
    "export_events",
    "from_aep",
    "from_cloudevents",
    "import_events",
    "to_aep",
    "to_cloudevents",
]

AEP_VERSION = "0.1"
CAPTURE_LEVELS = ("none", "metadata", "redacted", "full")  # AEP-0001 §8.2, in order
_RANK = {lvl: i for i, lvl in enumerate(CAPTURE_LEVELS)}

T_EVAL = "assessment.evaluation.recorded"
T_FEEDBACK = "assessment.feedback.received"
T_GUARD = "assessment.guardrail.recorded"
ASSESSMENT_TYPES = (T_EVAL, T_FEEDBACK, T_GUARD)

#: AEP-0009 §5: the ``redacted``-class payload fields of the three types (dotted for nested members); every other
#: field aefgate writes is ``metadata`` (AEP-0002 §5.1 rule 4). Checked against the schemas' ``x-aep-capture``
#: annotations (``aefgate.formats.aep.capture_classes``) by the tests.
REDACTED_FIELDS = {
    T_EVAL: ("gen_ai.evaluation.explanation",),
    T_FEEDBACK: ("comment", "correction"),
    T_GUARD: ("guardrail.explanation",),
}

#: AEP-12: the overlay kinds that give a feedback event, and their envelope severity (AEP-5)
OVERLAY_SEVERITY = {"approve": "info", "reject": "warning", "override": "notice", "adjudicate": "notice",
                    "waive": "notice", "annotate": "info"}
#: AEP-5: a failure's AEF severity -> the envelope severity ([RES-9]: none given is critical)
_FAIL_SEVERITY = {"none": "notice", "low": "notice", "medium": "warning", "high": "error", "critical": "critical"}
_STATE_SEVERITY = {"passed": "info", "scored": "info", "not_applicable": "info", "skipped": "info", "pending": "info",
                   "inconclusive": "notice", "not_measured": "notice", "error": "warning"}
#: AEP-10: AEF annotator kinds -> AIGP grader types (RFC-032 §5)
_GRADER = {"CODE": "CODE", "LLM": "MODEL", "HUMAN": "HUMAN", "HYBRID": "COMPOSITE"}
#: AEP-16: guardrail verdict -> state
_VERDICT_STATE = {"allowed": "passed", "flagged": "warn", "blocked": "failed", "modified": "warn"}
#: AEP-10: line members copied into the ``aef`` object under the same name
_AEF_COPY = ("component", "aggregation", "severity", "verdictRule", "uncertainty", "lane", "durationMs", "turns",
             "usage", "startedAt", "endedAt")
_AEF_KEYS = frozenset(_AEF_COPY + ("trial", "trials", "parentResultId", "annotator", "traceLink"))
_COMPOSITE = {"type": "COMPOSITE"}  # AEP-10: a composite node without an annotator
EXT_KEY = "aefgate.aep"  # [ENC-19]: prefixed by the producer's name
_CORRECTIONS = "\x00corrections"  # a node member RunBuilder never sees (popped before the line is added)
_HOST = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?\Z")
_TRACEPARENT = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}\Z")
_HEX32 = re.compile(r"[0-9a-fA-F]{32}\Z")
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")  # C0, DEL and C1
_REF = re.compile(r"[a-z][a-z0-9-]{0,31}:[!-~]{1,256}\Z")  # AEF common.schema.json#/$defs/ref
_HEX16 = re.compile(r"[0-9a-fA-F]{16}\Z")
MAX_REASON = 4096  # result schema: reason
MAX_LABEL = 64  # result schema: scores[].label

#: docs/mappings/aep.md, "What does not carry over" (each bullet, backticks removed; a test compares them)
LOSSES_TO_AEP = (
    'The run header (run.json) except the runId, the agent and the content-capture level: producer, '
    'subject and deployment details, suite and its digest, judges and their calibration (only its effect, '
    'UNCALIBRATED), execution, config and thresholds, cost policy, otel, imported, ext.',
    'Metric declarations (metrics.json), the summary (summary.json) and gate decisions (gates.ndjson).',
    "Evidence: evidence.ndjson, a line's evidence ids, blobs and their digests (the reasoning blob's "
    'digest and size; its text travels as the explanation, AEP-9); traces.otlp.jsonl, logs.otlp.jsonl, '
    'ext/ files.',
    'A line\'s ext (except ext."aefgate.aep".guardrail) and annotator.promptHash.',
    'Free text at a metadata ceiling: reason and the reasoning text (and at redacted, what the pipeline '
    'replaces).',
    'The seal, the attestation and every signature; overlay batches, their seals and signatures, the '
    "decisions' by (their at is the event's time), and the overlay kinds acknowledge, accept_baseline, "
    'redact.',
)
LOSSES_FROM_AEP = (
    'Overlay decisions (aef.decision): not imported (AEP-15).',
    'What the export did not carry (the list above): the imported run has a new header (producer aefgate, '
    'the asserted fields of AEP-14, imported), declares its metrics as score/none/unbounded, computes a '
    'new summary (lane main unless lines carry lane), and has no gates, evidence, blobs, traces or logs.',
    'reason when it did not come through: it becomes not exported (AEP capture <level>) on a line that '
    'needs one ([RES-2]) and is absent otherwise; an explanation taken from the reasoning blob comes back '
    'as reason (cut to 4096 characters).',
    "The envelope's id, seq, epoch, cause, severity, source and capture.",
    "The order of the lines in results.ndjson (AEP-15: trees whole, rollups last) and a root's parentResultId: "
    "null (written absent: the same meaning).",
    'At a none ceiling there is no data: every event comes back as a line of its case named evaluation '
    '(evaluation#2, ...; feedback, guardrail for the other types), not_measured, with reason the event '
    'carries no score.',
    'A label over 64 characters and an explanation over 4096 characters (cut).',
    'A feedback correction under a metadata capture.',
    'Guardrail categories without a score (kept only in ext).',
    'The cause-linked assessed event.',
)


# ---------------------------------------------------------------------------------------------------------------
# shared helpers


def _aep_module():
    try:
        from aefgate.formats import aep  # noqa: PLC0415 - the collaborator's module, imported when needed
    except ImportError:
        return None
    return aep


@functools.lru_cache(maxsize=None)
def _ce_lines():
    """The CloudEvents bridge's ``(is_cloudevents_line, line_events)``, imported when first needed (AEP-13)."""
    from aefgate.formats.cloudevents import is_cloudevents_line, line_events

    return is_cloudevents_line, line_events


def _check_level(level: Any, where: str = "max_capture") -> str:
    if level not in _RANK:
        raise Refusal("AEP-8", f"{level!r} is not a capture level ({', '.join(CAPTURE_LEVELS)})", where)
    return level


def _check_host(host: Any) -> str:
    if not isinstance(host, str) or not _HOST.match(host):
        raise Refusal("AEP-3", f"{host!r} is not a host name (letters, digits, '.', '-')", "source_host")
    return host


def _load_cause_map(cause_map: Any) -> dict[str, str]:
    """AEP-7: a dict, a JSON object's text, or the path of a file holding one; values non-empty strings."""
    if cause_map is None or cause_map == "":
        return {}
    where = "cause_map"
    doc = cause_map
    if isinstance(cause_map, (str, os.PathLike)):
        text = str(cause_map)
        if isinstance(cause_map, str) and text.lstrip().startswith("{"):
            try:
                doc = jsonio.loads(text.encode("utf-8"))
            except jsonio.JsonProblem as e:
                raise Refusal("AEP-7", f"the cause map is not a JSON object: {e.reason}", where) from None
        else:
            p = Path(cause_map)
            where = str(p)
            if not p.is_file():
                raise Refusal("AEP-7", "the cause map file does not exist", where)
            try:
                doc = jsonio.read_json(p)
            except jsonio.JsonProblem as e:
                raise Refusal("AEP-7", f"the cause map is not a JSON object: {e.reason}", where) from None
    if not isinstance(doc, Mapping):
        raise Refusal("AEP-7", "the cause map is a JSON object of resultId or caseId -> event id", where)
    out: dict[str, str] = {}
    for k, v in doc.items():
        if not isinstance(k, str) or not isinstance(v, str) or not v:
            raise Refusal("AEP-7", f"the cause map's {k!r} is not a non-empty string", where)
        if _CONTROL.search(v):  # an event id is one line of text (the CloudEvents bridge refuses controls too)
            raise Refusal("AEP-7", f"the cause map's {k!r} holds a control character", where)
        out[k] = v
    return out


def _severity(state: str, severity: str | None) -> str:
    """AEP-5."""
    if state in ("failed", "warn"):
        return _FAIL_SEVERITY.get(severity or "critical", "critical")
    return _STATE_SEVERITY.get(state, "info")


def _grader(line: Mapping[str, Any], calibrated: frozenset[str]) -> dict | None:
    """AEP-10: the AIGP grader type, and UNCALIBRATED for a MODEL grader without a judge calibration in the run."""
    ann = line.get("annotator")
    kind = ann.get("kind") if isinstance(ann, dict) else None
    gtype = _GRADER.get(kind) if kind is not None else ("COMPOSITE" if "aggregation" in line else None)
    if gtype is None:
        return None
    if gtype == "MODEL" and (ann.get("model") not in calibrated):
        return {"type": "MODEL", "confidence": "UNCALIBRATED"}
    return {"type": gtype}


def _utc(text: str) -> str | None:
    """An RFC 3339 time as AEF writes times (UTC, ``Z``), or None when it is not one."""
    if not isinstance(text, str):
        return None
    try:
        parse_time(text)
        return text
    except (ValueError, TypeError):
        pass
    if len(text) < 20 or text[10] not in "Tt":  # RFC 3339's date-time (datetime would take a space, or no time)
        return None
    try:  # datetime keeps microseconds: further digits of an offset time are cut
        t = _dt.datetime.fromisoformat(re.sub(r"(\.[0-9]{6})[0-9]+", r"\1", text))
    except ValueError:
        return None
    if t.tzinfo is None:
        return None
    t = t.astimezone(_dt.timezone.utc)
    frac = f".{t.microsecond:06d}".rstrip("0").rstrip(".") if t.microsecond else ""
    out = t.strftime("%Y-%m-%dT%H:%M:%S") + frac + "Z"
    try:
        parse_time(out)
    except (ValueError, TypeError):
        return None
    return out


# ---------------------------------------------------------------------------------------------------------------
# AEF -> AEP


class _Export:
    """What one export needs per event, computed once (AEP-3 .. AEP-10)."""

    def __init__(self, root: Path, run: dict, run_hash: str, ceiling: str, agent: str, host: str,
                 cause_map: dict[str, str]):
        self.root = root
        self.run = run
        self.ceiling = ceiling
        self.text = _RANK[ceiling] >= _RANK["redacted"]  # AEP-8: redacted-class fields are built at all
        self.data = ceiling != "none"
        self.prefix = f"aef-{run_hash[:16]}-"
        self.run_id = run["runId"]
        self.agent = agent
        self.source = f"aep://{host}/agent/{quote(agent, safe='')}/session/{quote(self.run_id, safe='')}"
        self.cause_map = cause_map
        self.run_time = run.get("endedAt") or run.get("startedAt")
        self.content_on = run.get("contentCapture", "on") == "on"
        self.calibrated = frozenset(
            j.get("model") for j in run.get("judges") or () if isinstance(j, dict) and j.get("calibration")
        )
        self.seq = 0
        self.check_blobs = False  # a blob read must hash to its name (set by an export beside the verification)

    def envelope(self, eid: str, etype: str, time: str, run: str | None, cause: str | None,
                 traceparent: str | None, severity: str, data: dict) -> dict:
        ev: dict[str, Any] = {"aep": AEP_VERSION, "id": eid, "type": etype, "time": time, "source": self.source,
                              "agent": self.agent, "session": self.run_id}
        if run is not None:
            ev["run"] = run
        ev["seq"] = self.seq
        self.seq += 1
        ev["epoch"] = 0
        if cause is not None:
            ev["cause"] = cause
        if traceparent is not None:
            ev["traceparent"] = traceparent
        ev["severity"] = severity
        ev["capture"] = self.ceiling
        if self.data:
            ev["data"] = data
        return ev

    def explanation(self, line: Mapping[str, Any]) -> str | None:
        """AEP-9: the reason, else the reasoning blob's text (UTF-8, present)."""
        reason = line.get("reason")
        if isinstance(reason, str):
            return reason
        reasoning = line.get("reasoning")
        if not self.content_on or not isinstance(reasoning, dict):
            return None
        blob = reasoning.get("blob")
        if not isinstance(blob, str) or not blob.startswith("sha256:"):
            return None
        hexd = blob[7:]
        try:
            data = (self.root / "blobs" / "sha256" / hexd[:2] / hexd).read_bytes()
        except OSError:  # withheld ([OVL-10]): no explanation
            return None
        if self.check_blobs:  # read beside the verification (aefgate.bus.pipeline): the bytes are the blob's name
            import hashlib

            if hashlib.sha256(data).hexdigest() != hexd.lower():
                raise Refusal("AEP-1", "the run changed after it was verified", f"blobs/sha256/{hexd[:2]}/{hexd}",
                              exit_code=EXIT_INTEGRITY)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:  # not text: no explanation
            return None

    def aef_object(self, line: Mapping[str, Any]) -> dict:
        """AEP-10: the line's structure, identifiers and numbers only."""
        a: dict[str, Any] = {"path": line["path"]}
        present = _AEF_KEYS.intersection(line)  # most lines have few of the optional members
        if present:
            if "trial" in present:
                a["trial"] = line["trial"]
            if "trials" in present:
                a["trials"] = line["trials"]
            if "parentResultId" in present and line["parentResultId"]:
                a["parent"] = line["parentResultId"]  # an AEF result id (the parent assessment), not the target's
            for k in _AEF_COPY:
                if k in present:
                    a[k] = line[k]
        version = line["evaluator"].get("version")
        if version is not None:
            a["evaluatorVersion"] = version
        if "annotator" in present:
            ann = line["annotator"]
            a["annotator"] = {k: v for k, v in ann.items() if k != "promptHash"}  # AEP-9
            g = _grader(line, self.calibrated)
        else:
            g = _COMPOSITE if "aggregation" in present else None
        if g is not None:
            a["grader"] = g
        if "traceLink" in present:
            tl = line["traceLink"]
            if "spanId" not in tl and "traceId" in tl:
                a["traceId"] = tl["traceId"]
        return a


def _verified_lines(path: Path) -> Iterator[dict]:
    """The lines of a ``results.ndjson`` that verified a moment ago (AEP-1), decoded without the strict reader's
    checks (they passed): streamed, 1 MiB at a time. A line that no longer decodes means the file changed since."""
    import msgspec

    decode = msgspec.json.Decoder().decode
    with open(path, "rb") as f:
        carry = b""
        lineno = 0
        while True:
            chunk = f.read(1 << 20)
            if not chunk:
                break
            parts = (carry + chunk).split(b"\n") if carry else chunk.split(b"\n")
            carry = parts.pop()
            for raw in parts:
                lineno += 1
                try:
                    line = decode(raw)
                except (msgspec.DecodeError, RecursionError):
                    line = None
                if type(line) is not dict:
                    raise Refusal("AEP-1", "the run changed after it was verified", f"results.ndjson:{lineno}",
                                  exit_code=EXIT_INTEGRITY)
                yield line
        if carry:
            raise Refusal("AEP-1", "the run changed after it was verified", f"results.ndjson:{lineno + 1}",
                          exit_code=EXIT_INTEGRITY)


def _traceparent(line: Mapping[str, Any]) -> str | None:
    """AEP-6."""
    tl = line.get("traceLink")
    if isinstance(tl, dict) and "spanId" in tl and "traceId" in tl:
        return f"00-{tl['traceId'].lower()}-{tl['spanId'].lower()}-01"
    return None


def _prepare(
    run_dir: str | os.PathLike[str],
    *,
    max_capture: str = "metadata",
    agent: str | None = None,
    source_host: str | None = None,
    cause_map: Any = None,
    policy: Any = None,
) -> tuple[_Export, list[dict], set[str], Any]:
    """AEP-1, AEP-3, AEP-7, AEP-8: verify the run and check the options; what the stream of events needs.

    Three steps, which ``aefgate.bus.pipeline`` also runs apart (the verification beside the export):
    :func:`_check_options`, :func:`_verify_intact`, :func:`_context`."""
    opts = _check_options(run_dir, max_capture=max_capture, agent=agent, source_host=source_host,
                          cause_map=cause_map)
    v = _verify_intact(opts.root, policy)
    return _context(opts, v.run_hash)


class _Options:
    """The export's options, checked (:func:`_check_options`)."""

    __slots__ = ("root", "level", "host", "cmap", "agent")

    def __init__(self, root: Path, level: str, host: str, cmap: dict[str, str], agent: str | None):
        self.root, self.level, self.host, self.cmap, self.agent = root, level, host, cmap, agent


def _check_options(run_dir: str | os.PathLike[str], *, max_capture: str = "metadata", agent: str | None = None,
                   source_host: str | None = None, cause_map: Any = None) -> _Options:
    """AEP-8, AEP-3, AEP-7 and RUN-1, in this order: what is checked before the verification."""
    root = Path(run_dir)
    level = _check_level(max_capture)
    host = _check_host(source_host if source_host not in (None, "") else "aefgate")
    cmap = _load_cause_map(cause_map)
    if agent is not None and (not isinstance(agent, str) or not agent or _CONTROL.search(agent)):
        raise Refusal("AEP-3", "the agent is a non-empty string without control characters", "agent")
    if root.is_symlink():
        raise Refusal("RUN-1", "a symbolic link: give the run folder itself", str(root))
    if not (root / "run.json").is_file():
        raise Refusal("RUN-1", "not a run folder (a run is a folder holding run.json)", str(root))
    return _Options(root, level, host, cmap, agent)


def _verify_intact(root: Path, policy: Any = None):
    """AEP-1: the run's :class:`Verification`, when it is ``intact``; refused otherwise (exit 1)."""
    from aefgate.formats.aef.trust import verify_run

    v = verify_run(root, policy=policy)
    if v.outcome != "intact":
        detail = f": {v.problems[0][1]} at {v.problems[0][0]}" if v.problems else ""
        raise Refusal("AEP-1", f"only a run that verifies intact is exported; this one is {v.outcome}{detail}",
                      str(root), exit_code=EXIT_INTEGRITY)
    return v


def _context(opts: _Options, run_hash: str, run: dict | None = None) -> tuple[_Export, list[dict], set[str], Any]:
    """What follows the verification: the run header (``run``, when the caller read run.json itself), the
    ceiling (AEP-8), the agent (AEP-3), the overlay decisions (AEP-12); ``run_hash`` names the events (AEP-4)."""
    from aefgate.formats.aef.overlays import verify_chain

    root, level, agent = opts.root, opts.level, opts.agent
    if run is None:
        run = jsonio.read_json(root / "run.json")
    run_level = "full" if run.get("contentCapture", "on") == "on" else "metadata"  # AEP-8, [SEC-6]
    ceiling = min(level, run_level, key=_RANK.__getitem__)
    redact: Any = None
    if ceiling == "redacted":
        # AEP-0001 §8.2(e): built at full, then through the §9.4 pipeline by a redacting hop; never minted
        mod = _aep_module()
        if mod is None or not hasattr(mod, "apply_ceiling") or not hasattr(mod, "Redactor"):
            raise Refusal("AEP-8", "the AEP-0003 §9.4 redaction pipeline (aefgate.formats.aep) is not available: "
                          "a redacted ceiling cannot be honored", "max_capture")
        apply_ceiling, redactor = mod.apply_ceiling, mod.Redactor()

        def _redacting(ev: dict, _level: str) -> dict:
            return apply_ceiling(ev, "redacted", redactor=redactor)

        redact = _redacting
    if agent is None:
        subject = run.get("subject") or {}
        agent = (subject.get("telemetry") or {}).get("agentId") or subject.get("ref") or run["runId"]
    ctx = _Export(root, run, run_hash, "full" if redact is not None else ceiling, agent, opts.host, opts.cmap)

    chain = verify_chain(root)
    decisions = [ln.event for ln in chain.lines if ln.ok and ln.event.get("kind") in OVERLAY_SEVERITY]
    targets = {ev["target"]["result"] for ev in decisions if "result" in ev["target"]}
    return ctx, decisions, targets, redact


def export_events(
    run_dir: str | os.PathLike[str],
    *,
    max_capture: str = "metadata",
    agent: str | None = None,
    source_host: str | None = None,
    cause_map: Any = None,
    policy: Any = None,
) -> Iterator[dict]:
    """The AEP events of a run that verifies ``intact`` (AEP-1), in the order of AEP-2.

    The run is verified and every option checked before the iterator is returned, so a refusal comes from this
    call, not from the first ``next()``. ``max_capture`` is the capture ceiling (AEP-8), ``agent`` overrides the
    envelope's ``agent``, ``source_host`` the host of ``source`` (AEP-3), ``cause_map`` maps resultIds or caseIds to
    assessed event ids (AEP-7), ``policy`` is the trust policy the verification uses for withheld blobs.
    """
    return _stream(*_prepare(run_dir, max_capture=max_capture, agent=agent, source_host=source_host,
                             cause_map=cause_map, policy=policy))


def _stream(ctx: _Export, decisions: list[dict], targets: set[str], redact) -> Iterator[dict]:
    seen_targets: dict[str, tuple[str, str, Any, str]] = {}
    yield from _result_events(ctx, _verified_lines(ctx.root / "results.ndjson"), targets, seen_targets, redact)
    yield from _decision_events(ctx, decisions, seen_targets, redact)


def _result_events(ctx: _Export, lines: Iterable[dict], targets: set[str],
                   seen_targets: dict[str, tuple[str, str, Any, str]], redact) -> Iterator[dict]:
    """AEP-2 .. AEP-11: the events of result lines, in order; numbered from ``ctx.seq``. Notes in ``seen_targets``
    the lines that overlay decisions target (AEP-12)."""
    text = ctx.text
    prefix = ctx.prefix
    cmap = ctx.cause_map
    source, agent, session, capture, plain = ctx.source, ctx.agent, ctx.run_id, ctx.ceiling, ctx.data
    run_time = ctx.run_time
    fail_sev, state_sev = _FAIL_SEVERITY, _STATE_SEVERITY
    for line in lines:
        rid = line["resultId"]
        case = line["caseId"]
        state = line["state"]
        aef = ctx.aef_object(line)
        time = line.get("endedAt") or line.get("startedAt") or run_time
        cause = (cmap.get(rid) or cmap.get(case)) if cmap else None
        tp = _traceparent(line) if "traceLink" in line else None
        if state == "failed" or state == "warn":  # AEP-5, as _severity
            sev = fail_sev.get(line.get("severity") or "critical", "critical")
        else:
            sev = state_sev.get(state, "info")
        expl = ctx.explanation(line) if text else None
        evaluator = line["evaluator"]["id"]
        scores = line.get("scores") or ()
        ann = line.get("annotator")
        human = isinstance(ann, dict) and ann.get("kind") == "HUMAN"
        first_id = None
        last = len(scores) - 1  # -1: no scores, one event
        for k, score in enumerate(scores or (None,)):
            a = aef
            if human or (score is not None and ("normalized" in score or "label" in score)):
                if last > 0:  # one score (or none): its event may take the line's aef object itself
                    a = dict(aef)
                if score is not None and "normalized" in score:
                    a["normalized"] = score["normalized"]
                if score is not None and "label" in score:
                    a["scoreLabel"] = score["label"]
            if human:  # AEP-2: a person's judgment is feedback (AEP-0009 §4)
                data: dict[str, Any] = {}
                if score is not None:
                    data["rating"] = score["value"]
                    a["metric"] = score["metric"]
                data["label"] = state
                if expl is not None:
                    data["comment"] = expl
                data["source"] = "human"
                a["evaluator"] = evaluator  # the feedback type has no evaluator field (AEP-10)
                data["aef"] = a
                eid, etype = f"{prefix}{rid}-f{k}", T_FEEDBACK
            else:
                data = {"gen_ai.evaluation.name": score["metric"] if score is not None else line["path"]}
                if score is not None:
                    data["gen_ai.evaluation.score.value"] = score["value"]
                data["gen_ai.evaluation.score.label"] = state
                if expl is not None:
                    data["gen_ai.evaluation.explanation"] = expl
                data["evaluator"] = evaluator
                data["aef"] = a
                eid, etype = f"{prefix}{rid}-e{k}", T_EVAL
            if first_id is None:
                first_id = eid
            if plain and cause is None and tp is None:  # the common envelope, as one literal (AEP-3)
                ev = {"aep": AEP_VERSION, "id": eid, "type": etype, "time": time, "source": source, "agent": agent,
                      "session": session, "run": case, "seq": ctx.seq, "epoch": 0, "severity": sev,
                      "capture": capture, "data": data}
                ctx.seq += 1
            else:
                ev = ctx.envelope(eid, etype, time, case, cause, tp, sev, data)
            yield redact(ev, "redacted") if redact is not None else ev
        guard = _guardrail(line, aef, expl) if ("attack" in line or "ext" in line) else None
        if guard is not None:
            ev = ctx.envelope(f"{prefix}{rid}-g", T_GUARD, time, case, cause, tp, sev, guard)
            yield redact(ev, "redacted") if redact is not None else ev
        if rid in targets:
            seen_targets[rid] = (case, line["path"], line.get("trial"), first_id)


def _decision_events(ctx: _Export, decisions: list[dict], seen_targets: dict[str, tuple[str, str, Any, str]],
                     redact) -> Iterator[dict]:
    """AEP-12: the feedback events of the overlay decisions, after every result line's."""
    text = ctx.text
    prefix = ctx.prefix
    for ov in decisions:  # AEP-12, file order ([OVL-6])
        kind = ov["kind"]
        target = ov["target"]
        a = {"decision": kind, "overlayEvent": ov["eventId"]}
        run = cause = None
        if "result" in target:
            case, path, trial, first_id = seen_targets.get(target["result"], (None, None, None, None))
            run, cause = case, first_id
            if path is not None:
                a["path"] = path
            if trial is not None:
                a["trial"] = trial
        if "requirement" in target:
            a["requirement"] = target["requirement"]
        if "expires" in ov:
            a["expires"] = ov["expires"]
        data = {}
        if kind in ("approve", "reject"):
            data["rating"] = 1 if kind == "approve" else -1
        data["label"] = ov["state"] if kind in ("override", "adjudicate") else kind
        if text and isinstance(ov.get("reason"), str):
            data["comment"] = ov["reason"]
        data["source"] = "human"
        data["aef"] = a
        ev = ctx.envelope(f"{prefix}{ov['eventId']}", T_FEEDBACK, ov["at"], run, cause, None,
                          OVERLAY_SEVERITY[kind], data)
        yield redact(ev, "redacted") if redact is not None else ev


def _guardrail(line: Mapping[str, Any], aef: Mapping[str, Any], expl: str | None) -> dict | None:
    """AEP-11: the guardrail payload of a line with ``attack`` or imported from a guardrail event, else None."""
    attack = line.get("attack")
    ext = line.get("ext")
    imported = ext.get(EXT_KEY, {}).get("guardrail") if isinstance(ext, dict) and isinstance(
        ext.get(EXT_KEY), dict) else None
    if not isinstance(attack, dict) and not isinstance(imported, dict):
        return None
    a: dict[str, Any] = {"path": aef["path"]}
    for k in ("trial", "trials"):
        if k in aef:
            a[k] = aef[k]
    if isinstance(attack, dict):
        g: dict[str, Any] = {"stage": "input"}
        success = attack.get("success")
        if success is True:
            g["verdict"] = "allowed"
        elif success is False:
            g["verdict"] = "blocked"
        cats = [{"name": attack["technique"]}]
        cats += [{"name": f"{t['scheme']}:{t['id']}"} for t in attack.get("taxonomy") or ()]
        g["categories"] = cats
        det = {"name": line["evaluator"]["id"]}
        if "version" in line["evaluator"]:
            det["version"] = line["evaluator"]["version"]
        g["detector"] = det
        a["attack"] = attack
    else:
        g = {k: v for k, v in imported.items() if k != "explanation"}
        a["guardrail"] = True
    if expl is not None:
        g["explanation"] = expl
    return {"guardrail": g, "aef": a}


def to_aep(run_dir: str | os.PathLike[str], out_path: str | os.PathLike[str], **options: Any) -> Path:
    """AEP-18: the run's events as JSONL at ``out_path``, written atomically (nothing on a refusal)."""
    out = Path(out_path)
    check_file_destination(out, (run_dir,))
    return _write_jsonl(run_dir, out, options, _encode)


def _write_jsonl(run_dir: str | os.PathLike[str], out: Path, options: Mapping[str, Any], encode) -> Path:
    """The export's lines (``encode`` of each batch of events) written atomically at ``out``, the workers' ranges
    in part files beside it."""
    import secrets

    parts = out.parent / f".{out.name}.part-{secrets.token_hex(4)}"
    atomic_lines(out, _aep_bytes(*_prepare(run_dir, **_export_options(options)), parts=parts, encode=encode))
    return out


# -- the JSONL bytes of an export: in this process, or in worker processes over ranges of results.ndjson ----------

_PARALLEL_FROM = 16 * 1024 * 1024  # bytes of results.ndjson from which worker processes build the events
_RANGE = 4 * 1024 * 1024  # bytes of whole lines a worker takes at a time
_BATCH = 1024  # events encoded at a time


def _encode(batch: list[dict]) -> bytes:
    """``jsonio.dump_line`` of each event, joined (one encoder call per batch; the same bytes)."""
    blob = _LINES_ENCODER.encode_lines(batch)
    if b"null" in blob:  # a null or a non-finite number (ENC-3): event by event, as dump_line does it
        return b"".join([jsonio.dump_line(ev) for ev in batch])
    return blob


def _line_encoder():
    return msgspec.json.Encoder(enc_hook=jsonio._enc_hook)


_LINES_ENCODER = _line_encoder()


def _aep_bytes(ctx: _Export, decisions: list[dict], targets: set[str], redact,
               parts: Path | None = None, encode=_encode) -> Iterator[bytes | Path]:
    """The export as JSONL, in pieces of many lines: :func:`_stream` encoded, the same bytes either way. With
    ``parts`` (a path prefix beside the destination), worker processes write their ranges to part files
    ``<parts>-N`` and those are yielded (the caller appends and removes them) instead of the bytes. ``encode``
    turns a batch of events into their lines (default :func:`_encode`: the AEP events themselves; the CloudEvents
    export gives its own, AEP-18)."""
    path = ctx.root / "results.ndjson"
    size = path.stat().st_size
    workers = _workers_for(size)
    seen_targets: dict[str, tuple[str, str, Any, str]] = {}
    if workers:
        yield from _parallel_bytes(ctx, path, size, workers, targets, seen_targets, redact, parts, encode)
    else:
        batch: list[dict] = []
        for ev in _result_events(ctx, _verified_lines(path), targets, seen_targets, redact):
            batch.append(ev)
            if len(batch) >= _BATCH:
                yield encode(batch)
                batch = []
        if batch:
            yield encode(batch)
    tail = list(_decision_events(ctx, decisions, seen_targets, redact))
    if tail:
        yield encode(tail)


def _workers_for(size: int) -> int:
    """How many worker processes build the events: none for a small results.ndjson, else one per core;
    ``AEFGATE_WORKERS`` overrides (0: in this process), as for the verification."""
    import multiprocessing

    env = os.environ.get("AEFGATE_WORKERS")
    if env is not None:
        return max(0, int(env))
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if size < _PARALLEL_FROM or cpus < 2 or "fork" not in multiprocessing.get_all_start_methods():
        return 0
    return cpus


def _ranges(path: Path, size: int) -> list[tuple[int, int]]:
    """results.ndjson cut into ranges of whole lines of about ``_RANGE`` bytes (the verifier's cut)."""
    from aefgate.formats.aef.verifier import _ranges as cut

    with open(path, "rb") as f:
        return cut(f, size, _RANGE)


class _Changed(Exception):
    """A line of a range no longer decodes (its line number in the range)."""


_WORK: tuple | None = None  # (ctx, targets, redact, encode) for the forked workers


def _range_lines(data: bytes) -> Iterator[dict]:
    """The lines of a range, as :func:`_verified_lines` reads them; :class:`_Changed` for one that does not."""
    decode = msgspec.json.Decoder().decode
    parts = data.split(b"\n")
    carry = parts.pop()
    lineno = 0
    for raw in parts:
        lineno += 1
        try:
            line = decode(raw)
        except (msgspec.DecodeError, RecursionError):
            line = None
        if type(line) is not dict:
            raise _Changed(lineno)
        yield line
    if carry:
        raise _Changed(lineno + 1)


def _guard_count(line: Mapping[str, Any]) -> int:
    """1 when :func:`_guardrail` gives the line a guardrail event, else 0."""
    if isinstance(line.get("attack"), dict):
        return 1
    ext = line.get("ext")
    ours = ext.get(EXT_KEY) if isinstance(ext, dict) else None
    return 1 if isinstance(ours, dict) and isinstance(ours.get("guardrail"), dict) else 0


def _count_range(path: Path, item: tuple[int, int]) -> tuple[int, int]:
    """A worker: ``(lines, events)`` of one range, as :func:`_result_events` gives them (a score each, or one for a
    line without scores; one more for a guardrail), read with a decoder that skips every other member. A line that
    no longer decodes counts nothing here: the range's export refuses it."""
    offset, length = item
    with open(path, "rb") as f:
        f.seek(offset)
        data = f.read(length)
    lines = data.count(b"\n")
    try:  # the usual range: one decoder call, every line plain
        counted = _count_decoder().decode_lines(data)
    except (msgspec.DecodeError, RecursionError):
        counted = None
    if counted is not None and len(counted) == lines and not any(c.attack or c.ext for c in counted):
        return lines, sum([len(c.scores) if c.scores else 1 for c in counted])
    decode = _count_decoder().decode
    full = msgspec.json.Decoder().decode
    parts = data.split(b"\n")
    parts.pop()
    events = 0
    for raw in parts:
        try:
            c = decode(raw)
        except (msgspec.DecodeError, RecursionError):
            c = None
        if c is not None and not c.attack and not c.ext:
            events += len(c.scores) if c.scores else 1
            continue
        try:  # an unusual line: read in full, counted as the stream counts it
            line = full(raw)
        except (msgspec.DecodeError, RecursionError):
            continue
        if type(line) is dict:
            events += (len(line.get("scores") or ()) or 1) + _guard_count(line)
    return len(parts), events


class _CountItem(msgspec.Struct):
    pass


class _Counted(msgspec.Struct, gc=False):
    """The members of a result line that say how many events it gives."""

    scores: list[_CountItem] | None = None
    attack: msgspec.Raw = msgspec.Raw(b"")  # empty: absent
    ext: msgspec.Raw = msgspec.Raw(b"")


_COUNT_DECODER = None


def _count_decoder():
    global _COUNT_DECODER
    if _COUNT_DECODER is None:
        _COUNT_DECODER = msgspec.json.Decoder(_Counted)
    return _COUNT_DECODER


def _export_range(path: Path, item: tuple[tuple[int, int], int, int, int, Path | None]) -> tuple:
    """A worker: the events of one range of whole lines (``(offset, length)``, the number of the line before it,
    its first seq, its event count, its part file or None), numbered and encoded: ``("ok", bytes or the part file
    holding them, seen targets)``, ``("changed", file line)`` or ``("refusal", rule, message, where, exit code)``.
    """
    ctx, targets, redact, encode = _WORK
    (offset, length), lineno, seq, events, part = item
    with open(path, "rb") as f:
        f.seek(offset)
        data = f.read(length)
    ctx.seq = seq
    seen: dict[str, tuple[str, str, Any, str]] = {}
    batch: list[dict] = []
    blobs: list[bytes] = []
    changed = None
    try:
        try:
            for ev in _result_events(ctx, _range_lines(data), targets, seen, redact):
                batch.append(ev)
                if len(batch) >= _BATCH:
                    blobs.append(encode(batch))
                    batch = []
        except _Changed as e:
            changed = e.args[0]
        if batch:
            blobs.append(encode(batch))  # the events before a changed line come first, as in one process
    except Refusal as e:
        return "refusal", e.rule, e.message, e.where, e.exit_code
    if changed is not None:
        return "changed", lineno + changed
    if ctx.seq - seq != events:  # pragma: no cover - _count_range and _result_events disagree
        raise RuntimeError(f"range at {offset}: {ctx.seq - seq} events, counted {events}")
    if part is None:
        return "ok", b"".join(blobs), seen
    with open(part, "xb", buffering=0) as f:
        for blob in blobs:
            f.write(blob)
    return "ok", part, seen


def _parallel_bytes(ctx: _Export, path: Path, size: int, workers: int, targets: set[str],
                    seen_targets: dict, redact, parts: Path | None, encode) -> Iterator[bytes | Path]:
    """The result events in worker processes (forked before any thread starts): a first pass counts each range's
    lines and events (so each range knows its first line number and seq), the second builds and encodes the
    ranges, a bounded number in flight (each in a part file when ``parts`` is given: this process then only copies
    files, in the kernel); their bytes come in file order."""
    import functools
    import multiprocessing

    from aefgate.formats.aef.verifier import _parallel

    global _WORK
    ranges = _ranges(path, size)
    _WORK = (ctx, targets, redact, encode)
    try:
        pool = multiprocessing.get_context("fork").Pool(workers)
    finally:
        _WORK = None
    try:
        counts = pool.map(functools.partial(_count_range, path), ranges, chunksize=1)
        items = []
        lineno, seq = 0, ctx.seq
        for r, (lines, events) in zip(ranges, counts):
            part = None if parts is None else parts.with_name(f"{parts.name}-{len(items):06d}")
            items.append((r, lineno, seq, events, part))
            lineno += lines
            seq += events
        results = _parallel(pool, items, workers, _export_range, path)
        try:
            for res in results:
                if res[0] == "changed":
                    raise Refusal("AEP-1", "the run changed after it was verified", f"results.ndjson:{res[1]}",
                                  exit_code=EXIT_INTEGRITY)
                if res[0] == "refusal":
                    raise Refusal(res[1], res[2], res[3], exit_code=res[4])
                yield res[1]
                seen_targets.update(res[2])
        finally:
            results.close()
    finally:
        pool.terminate()
        pool.join()
        if parts is not None:  # the part files of ranges never handed on (a refusal, an error)
            prefix = f"{parts.name}-"
            for name in os.listdir(parts.parent):
                if name.startswith(prefix):
                    (parts.parent / name).unlink(missing_ok=True)
    ctx.seq = seq


def to_cloudevents(run_dir: str | os.PathLike[str], out_path: str | os.PathLike[str], mode: str = "structured",
                   **options: Any) -> Path:
    """AEP-18: the run's events as CloudEvents (AEP-0005), one per line, written atomically: ``structured`` (the
    JSON event format) or ``binary`` (the HTTP binary-mode message, ``{"headers", "body"}``, as the bridge's
    event-file converter writes it: docs/design/cloudevents-bridge.md)."""
    from aefgate.converters.aep_cloudevents import _check_mode, _export_value

    if mode is None:
        mode = "structured"
    _check_mode(mode)
    out = Path(out_path)
    check_file_destination(out, (run_dir,))
    where = f"{run_dir}"

    def encode(batch: list[dict]) -> bytes:  # the CloudEvents lines of a batch (in the export's workers too)
        return _encode([_export_value(ev, where, mode) for ev in batch])

    return _write_jsonl(run_dir, out, options, encode)


def _export_options(options: Mapping[str, Any]) -> dict:
    allowed = ("max_capture", "agent", "source_host", "cause_map", "policy")
    unknown = sorted(k for k in options if k not in allowed)
    if unknown:
        raise Refusal("CONV-3", f"the AEP export takes no option {', '.join(unknown)}", "--opt")
    out = {k: v for k, v in options.items() if v is not None}
    return out


# ---------------------------------------------------------------------------------------------------------------
# AEP -> AEF


class _Line:
    """One result line being rebuilt from its events (AEP-15, AEP-16)."""

    __slots__ = ("case", "path", "marker", "aef", "state", "evaluator", "version", "scores", "reason", "human",
                 "attack", "guardrail", "time", "traceparent", "corrections", "where", "foreign", "session")

    def __init__(self, case: str, path: str, marker: tuple, where: str, session: str = ""):
        self.session = session
        self.case = case
        self.path = path
        self.marker = marker  # ("p",) plain, ("t", n) a trial line, ("r",) a rollup
        self.aef: dict | None = None
        self.state: str | None = None
        self.evaluator: str | None = None
        self.version: str | None = None
        self.scores: list[dict] = []
        self.reason: str | None = None
        self.human = False
        self.attack: dict | None = None
        self.guardrail: dict | None = None
        self.time: str | None = None
        self.traceparent: str | None = None
        self.corrections: list[str] = []
        self.where = where
        self.foreign = False


class _Importer:
    def __init__(self, run_id: str | None):
        self.run_id = run_id
        self.lines: dict[tuple, _Line] = {}
        self.seen: set[tuple[str, str]] = set()
        self.sessions: dict[tuple[str, str], str] = {}
        self.agent: str | None = None
        self.times: list[tuple[tuple[int, int], str]] = []
        self.content = False
        self.cloudevents = False
        self.skipped_major = 0
        self.levels: set[str] = set()
        self.foreign_paths: dict[tuple[str, str], int] = {}
        self._session = ""

    # -- reading -------------------------------------------------------------------------------------------------

    def take(self, ev: Any, where: str) -> None:
        if not isinstance(ev, dict):
            raise Refusal("AEP-13", "an event is a JSON object", where)
        is_ce, line_events = _ce_lines()
        if is_ce(ev):  # AEP-13: a CloudEvent, JSON format or an HTTP message line (export --mode binary)
            self.cloudevents = True
            for one in line_events(ev, where):
                if not isinstance(one, dict):
                    raise Refusal("AEP-13", "the CloudEvent does not give an AEP event", where)
                self._take(one, where)
            return
        self._take(ev, where)

    def _take(self, ev: dict, where: str) -> None:
        version = ev.get("aep")
        if not isinstance(version, str) or not version:
            raise Refusal("AEP-13", "an AEP event has a string aep (AEP-0001 §5.1)", where)
        if version.split(".", 1)[0] != "0":  # AEP-0003 §3.1: skipped, reported once
            self.skipped_major += 1
            return
        mod = _aep_module()
        if mod is not None and hasattr(mod, "check_event"):
            mod.check_event(ev, where)
        for k in ("id", "type", "time", "source", "agent"):
            if not isinstance(ev.get(k), str) or not ev.get(k):
                raise Refusal("AEP-13", f"the event has no string {k} (AEP-0001 §5.1)", where)
        etype = ev["type"]
        if etype not in ASSESSMENT_TYPES:  # AEP-13: other types are read, not imported
            return
        key = (ev["source"], ev["id"])
        if key in self.seen:  # AEP-0001 §7: a redelivery
            return
        self.seen.add(key)
        session = ev.get("session")
        if not isinstance(session, str) or not session:
            raise Refusal("AEP-13", "an assessment event has a session (AEP-0009 §1)", where)
        run = ev.get("run", session)
        if not isinstance(run, str) or not run:
            raise Refusal("AEP-13", "run is a non-empty string", where)
        data = ev.get("data", {})
        if not isinstance(data, dict):
            raise Refusal("AEP-13", "data is a JSON object", where)
        time = _utc(ev["time"])
        if time is None:
            raise Refusal("AEP-13", f"time {ev['time']!r} is not an RFC 3339 time with an offset", where)
        capture = ev.get("capture", "metadata")
        if capture not in _RANK:
            raise Refusal("AEP-13", f"capture {capture!r} is not a capture level", where)
        tp = ev.get("traceparent")
        if tp is not None and (not isinstance(tp, str) or not _TRACEPARENT.match(tp)):
            raise Refusal("AEP-13", "traceparent is not a W3C traceparent (version 00)", where)
        self.sessions.setdefault((ev["source"], session), where)
        self._session = session
        if self.agent is None:
            self.agent = ev["agent"]
        self.levels.add(capture)
        self.times.append((parse_time(time), time))
        aef = data.get("aef")
        if aef is not None and not isinstance(aef, dict):
            raise Refusal("AEP-13", "data.aef is a JSON object (AEP-10)", where)
        if aef is not None and "decision" in aef:  # AEP-15: an overlay decision is not imported
            return
        if aef is not None:
            for k, typ in (("parent", str), ("lane", str), ("metric", str), ("evaluator", str),
                           ("traceId", str), ("attack", dict), ("annotator", dict)):
                if k in aef and not isinstance(aef[k], typ):
                    raise Refusal("AEP-13", f"aef.{k} is a {'string' if typ is str else 'JSON object'}", where)
            if "traceId" in aef and not _HEX32.match(aef["traceId"]):
                raise Refusal("AEP-13", "aef.traceId is a 32-digit hex trace id", where)
        if etype == T_GUARD:
            self._guardrail(run, data, aef, time, tp, capture, where)
        elif etype == T_FEEDBACK:
            self._scored(run, data, aef, time, tp, capture, where, human=True)
        else:
            self._scored(run, data, aef, time, tp, capture, where, human=False)

    def _line(self, run: str, aef: dict | None, path_hint: str, where: str) -> _Line:
        if aef is not None and "path" in aef:
            path = aef["path"]
            if not isinstance(path, str) or not path:
                raise Refusal("AEP-13", "aef.path is a non-empty string", where)
            if "trial" in aef:
                if not isinstance(aef["trial"], int) or isinstance(aef["trial"], bool):
                    raise Refusal("AEP-13", "aef.trial is an integer", where)
                marker: tuple = ("t", aef["trial"])
            elif "trials" in aef:
                if not isinstance(aef["trials"], dict):
                    raise Refusal("AEP-13", "aef.trials is a JSON object", where)
                marker = ("r",)
            else:
                marker = ("p",)
            key = (run, path, marker)
            ln = self.lines.get(key)
            if ln is None:
                ln = self.lines[key] = _Line(run, path, marker, where, self._session)
                ln.aef = aef
            return ln
        # AEP-16: a foreign event is a line of its own; a second one at the same case and path is renamed
        n = self.foreign_paths.get((run, path_hint), 0) + 1
        self.foreign_paths[(run, path_hint)] = n
        path = path_hint if n == 1 else f"{path_hint}#{n}"
        while (run, path, ("p",)) in self.lines:
            n += 1
            self.foreign_paths[(run, path_hint)] = n
            path = f"{path_hint}#{n}"
        ln = self.lines[(run, path, ("p",))] = _Line(run, path, ("p",), where, self._session)
        ln.foreign = True
        return ln

    def _set_state(self, ln: _Line, state: str, where: str) -> None:
        if ln.state is not None and ln.state != state:
            raise Refusal("AEP-15", f"two states for one line ({ln.state}, {state}) at case {ln.case!r}, path "
                          f"{ln.path!r}", where)
        ln.state = state

    def _scored(self, run: str, data: dict, aef: dict | None, time: str, tp: str | None, capture: str,
                where: str, *, human: bool) -> None:
        if human:
            value, label, text = data.get("rating"), data.get("label"), data.get("comment")
            name = aef.get("metric") if aef is not None else "rating"
            who = aef.get("evaluator") if aef is not None else data.get("source")
        else:
            value = data.get("gen_ai.evaluation.score.value")
            label = data.get("gen_ai.evaluation.score.label")
            text = data.get("gen_ai.evaluation.explanation")
            name = data.get("gen_ai.evaluation.name")
            who = data.get("evaluator")
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise Refusal("AEP-13", "a score value or rating is a number", where)
        for what, v in (("label", label), ("explanation or comment", text), ("name", name), ("evaluator", who)):
            if v is not None and (not isinstance(v, str) or not v):
                raise Refusal("AEP-13", f"the {what} is a non-empty string", where)
        hint = ("feedback" if human else (name or "evaluation"))
        ln = self._line(run, aef, hint, where)
        ln.human = ln.human or human
        ln.time = ln.time or time
        ln.traceparent = ln.traceparent or tp
        if ln.foreign:
            ln.evaluator = who or (name if not human else "feedback")
        elif ln.evaluator is None:
            ln.evaluator = who or ln.path
        if text is not None and ln.reason is None:
            ln.reason = text
        if human and isinstance(data.get("correction"), str) and data["correction"]:
            ln.corrections.append(data["correction"])
        state_label = label in STATES and label != "pending"
        if ln.foreign:
            state = label if state_label else ("scored" if value is not None else "not_measured")
            self._set_state(ln, state, where)
            if value is not None:
                score: dict[str, Any] = {"metric": name if not human else "rating", "value": value}
                if label is not None and not state_label:
                    score["label"] = label[:MAX_LABEL]
                ln.scores.append(score)
            elif not state_label and ln.reason is None:
                ln.reason = "the event carries no score" + (f" (label {label[:256]})" if label else "")
            return
        if not state_label:
            raise Refusal("AEP-15", f"an event with data.aef has a state name as its label, not {label!r}", where)
        self._set_state(ln, label, where)
        if value is not None:
            metric = name if not human else aef.get("metric")
            if not isinstance(metric, str) or not metric:
                raise Refusal("AEP-13", "a scored event names its metric", where)
            score = {"metric": metric, "value": value}
            if "normalized" in aef:
                score["normalized"] = aef["normalized"]
            if "scoreLabel" in aef:
                score["label"] = aef["scoreLabel"]
            ln.scores.append(score)

    def _guardrail(self, run: str, data: dict, aef: dict | None, time: str, tp: str | None, capture: str,
                   where: str) -> None:
        g = data.get("guardrail", {})
        if not isinstance(g, dict):
            raise Refusal("AEP-13", "data.guardrail is a JSON object", where)
        text = g.get("explanation")
        if text is not None and (not isinstance(text, str) or not text):
            raise Refusal("AEP-13", "guardrail.explanation is a non-empty string", where)
        kept = {k: v for k, v in g.items() if k != "explanation"}
        if aef is not None and "path" in aef:
            ln = self._line(run, aef, "", where)
            if isinstance(aef.get("attack"), dict):
                ln.attack = aef["attack"]
            else:
                ln.guardrail = kept
            if text is not None and ln.reason is None:
                ln.reason = text
            return
        stage = g.get("stage")
        hint = f"guardrail/{stage}" if isinstance(stage, str) and stage else "guardrail"
        ln = self._line(run, None, hint, where)
        det = g.get("detector") if isinstance(g.get("detector"), dict) else {}
        ln.evaluator = det.get("name") if isinstance(det.get("name"), str) and det.get("name") else "guardrail"
        if isinstance(det.get("version"), str):
            ln.version = det["version"][:64]
        ln.time, ln.traceparent, ln.guardrail = time, tp, kept
        verdict = g.get("verdict") if isinstance(g.get("verdict"), str) else None
        self._set_state(ln, _VERDICT_STATE.get(verdict, "inconclusive"), where)
        if verdict not in _VERDICT_STATE and text is None:
            ln.reason = "the guardrail event gives no verdict"
        seen: set[str] = set()
        cats = g.get("categories")
        for c in cats if isinstance(cats, list) else ():
            if isinstance(c, dict) and isinstance(c.get("name"), str) and c["name"] and c["name"] not in seen \
                    and isinstance(c.get("score"), (int, float)) and not isinstance(c.get("score"), bool):
                seen.add(c["name"])
                ln.scores.append({"metric": c["name"][:256], "value": c["score"]})
        if text is not None:
            ln.reason = text

    # -- writing -------------------------------------------------------------------------------------------------

    def node(self, ln: _Line, level: str) -> dict:
        a = ln.aef or {}
        node: dict[str, Any] = {"path": ln.path, "evaluator": {"id": (ln.evaluator or ln.path)[:256]},
                                "state": ln.state or "not_measured"}
        version = a.get("evaluatorVersion", ln.version)
        if version is not None:
            node["evaluator"]["version"] = version
        if ln.reason is not None:
            node["reason"] = ln.reason[:MAX_REASON]
        elif node["state"] in TYPED_ABSENCES:  # AEP-15, [RES-2]
            node["reason"] = f"not exported (AEP capture {level})"
        if ln.scores and node["state"] not in TYPED_ABSENCES:
            node["scores"] = ln.scores
        for k in _AEF_COPY:
            if k in a:
                node[k] = a[k]
        if "annotator" in a:
            node["annotator"] = a["annotator"]
        elif ln.human:
            node["annotator"] = {"kind": "HUMAN"}
        if ln.foreign and ln.time is not None:
            node["endedAt"] = ln.time
        if ln.traceparent is not None:
            m = _TRACEPARENT.match(ln.traceparent)
            node["traceLink"] = {"traceId": m.group(1), "spanId": m.group(2)}
        elif isinstance(a.get("traceId"), str):
            node["traceLink"] = {"traceId": a["traceId"]}
        if ln.attack is not None:
            node["attack"] = ln.attack
        if ln.guardrail is not None:
            node["ext"] = {EXT_KEY: {"guardrail": ln.guardrail}}
        if ln.corrections:
            node[_CORRECTIONS] = list(ln.corrections)
        return node


def _subject_ref(agent: str) -> str:
    """AEP-14: ``subject.ref`` of the envelope's ``agent``: the agent itself when it is a typed reference already
    (``<scheme>:<printable ASCII>``, the AEF pattern), else ``agent:`` and the agent with every character outside
    printable ASCII (a space, a non-ASCII letter, a control) and ``%`` percent-encoded (UTF-8, RFC 3986), cut at
    256 characters (never inside an escape)."""
    if _REF.match(agent):
        return agent
    enc = quote(agent, safe="".join(chr(c) for c in range(0x21, 0x7F) if chr(c) != "%"))
    if len(enc) > 256:
        enc = enc[:256]
        cut = enc.rfind("%", len(enc) - 2)
        if cut >= 0:
            enc = enc[:cut]
    return f"agent:{enc}"


def _trees(imp: _Importer, level: str) -> list[tuple[str, tuple, dict]]:
    """AEP-15: the roots (case, marker, node tree) in the order their lines first came; rollups last."""
    from aefgate.formats.aef.resultid import result_id

    nodes: dict[tuple, dict] = {}
    by_rid: dict[str, tuple] = {}  # the result ids the exporting run gave (RES-4 over the session's runId)
    for key, ln in imp.lines.items():
        nodes[key] = imp.node(ln, level)
        trial = ln.marker[1] if ln.marker[0] == "t" else None
        by_rid[result_id(ln.session, ln.case, ln.path, trial)] = key
    roots: list[tuple] = []
    for key, ln in imp.lines.items():
        node = nodes[key]
        agg = node.get("aggregation")
        if isinstance(agg, dict) and isinstance(agg.get("decisive"), list):  # ids -> the children's paths
            agg = node["aggregation"] = dict(agg)
            agg["decisive"] = [by_rid[d][1] if d in by_rid else d for d in agg["decisive"]]
        parent = (ln.aef or {}).get("parent")
        if parent:
            pkey = by_rid.get(parent) if isinstance(parent, str) else None
            if pkey is None or pkey[0] != ln.case or pkey[2][0] != ln.marker[0] or (
                    ln.marker[0] == "t" and pkey[2] != ln.marker):
                raise Refusal("AEP-15", f"the parent {parent!r} of case {ln.case!r}, path {ln.path!r} is no line "
                              "of the same case and trial among the events", ln.where)
            nodes[pkey].setdefault("children", []).append(node)
        else:
            roots.append(key)
    plain = [k for k in roots if k[2][0] != "r"]
    rollups = [k for k in roots if k[2][0] == "r"]
    return [(k[0], k[2], nodes[k]) for k in plain + rollups]


def import_events(
    events: Iterable[Any],
    out_dir: str | os.PathLike[str],
    *,
    at: str | None = None,
    key: Any = None,
    run_id: str | None = None,
    target_mode: str | None = None,
    name: str = "<events>",
) -> Path:
    """AEP events (dicts, or ``(where, event)`` pairs) -> an imported AEF run at ``out_dir``, sealed ``ingest``
    (AEP-13 .. AEP-17). Nothing is written on a refusal."""
    out = Path(out_dir)
    check_destination(out)
    if at is not None:  # refused before any event is read (the seal would refuse it at the end)
        try:
            parse_time(at)
        except (ValueError, TypeError):
            raise Refusal("ENC-8", f"sealedAt is not an RFC 3339 UTC time: {at!r}", "at") from None
    imp = _Importer(run_id)
    for i, item in enumerate(events, 1):
        if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str):
            where, ev = item
        else:
            where, ev = f"{name}:{i}", item
        imp.take(ev, where)
    if imp.skipped_major:  # AEP-0003 §3.1: skipped, reported once
        import warnings

        warnings.warn(f"{name}: {imp.skipped_major} event(s) of an unsupported AEP major version were skipped",
                      stacklevel=2)
    return _write(imp, out, at=at, key=key, run_id=run_id, target_mode=target_mode or "live", name=name)


def _write(imp: _Importer, out: Path, *, at: str | None, key: Any, run_id: str | None, target_mode: str,
           name: str) -> Path:
    from aefgate.formats.aef.builder import RunBuilder
    from aefgate.formats.aef.sealer import NotVerified

    if not imp.lines:
        raise Refusal("AEP-14", "no assessment event to import", name)
    if len(imp.sessions) > 1 and run_id is None:
        (_src, _ses), where = list(imp.sessions.items())[1]
        raise Refusal("AEP-14", "the events come from several sessions (source, session); import one session per "
                      "run, or give run_id", where)
    if run_id is not None and (not isinstance(run_id, str) or not run_id):
        raise Refusal("AEP-14", "run_id is a non-empty string", "run_id")
    (_src, session), _w = next(iter(imp.sessions.items()))
    rid = run_id or session
    if target_mode not in ("live", "replayed", "scripted", "mocked"):
        raise Refusal("RUN-7", f"{target_mode!r} is not a target mode", "target_mode")
    times = sorted(imp.times)
    started, ended = times[0][1], times[-1][1]
    level = max(imp.levels, key=_RANK.__getitem__)
    content = "on" if _RANK[level] >= _RANK["redacted"] else "off"
    agent = imp.agent or rid
    header = {
        "runId": rid,
        "subject": {"ref": _subject_ref(agent), "kind": "agent"},
        "execution": {"targetMode": target_mode},
        "startedAt": started,
        "contentCapture": content,
    }
    asserted = ["status", "subject.ref", "subject.kind", "execution.targetMode", "startedAt", "endedAt",
                "contentCapture"]
    if run_id is not None:
        asserted.insert(0, "runId")
    signing_key = None
    if key is not None:
        from aefgate.formats.aef.signatures import load_private_key

        signing_key = load_private_key(key) if isinstance(key, (str, os.PathLike)) else key
    trees = _trees(imp, level)
    # the summary request: one lane per lane met ("main" without one), one entry per scored metric and path
    lanes: dict[str, dict[tuple[str, str], None]] = {}
    metrics: dict[str, None] = {}
    for ln in imp.lines.values():
        for s in ln.scores:
            metrics.setdefault(s["metric"], None)
        if ln.marker[0] == "t" or not ln.scores or (ln.state in TYPED_ABSENCES):
            continue
        lane = (ln.aef or {}).get("lane") or "main"  # a string: AEP-13 checked it
        for s in ln.scores:
            lanes.setdefault(lane, {}).setdefault((s["metric"], ln.path), None)
    request = {"lanes": [{"lane": lane, "metrics": [{"metric": m, "path": p} for m, p in entries]}
                         for lane, entries in lanes.items()] or [{"lane": "main", "metrics": []}]}
    source = f"aep {AEP_VERSION}" + (" (cloudevents)" if imp.cloudevents else "")
    try:
        with RunBuilder(out, header, metrics=[], imported_from=source, asserted=asserted) as b:
            for m in metrics:
                b.declare_metric(m, "score", "none", "unbounded")
            for case, marker, node in trees:
                _add_corrections(b, node, content == "on")
                try:
                    if marker[0] == "t":
                        b.add_trial(case, node, marker[1])
                    elif marker[0] == "r":
                        trials = (imp.lines[(case, node["path"], marker)].aef or {}).get("trials") or {}
                        b.add_rollup(case, node, aggregation=trials.get("aggregation"), k=trials.get("k"))
                    else:
                        b.add_case(case, node)
                except Refusal as e:
                    raise _at_event(e, imp, case, marker, node) from None
            b.finish("completed", ended_at=ended, summary=request, seal="ingest", sealed_at=at,
                     signing_key=signing_key)
    except NotVerified as e:
        where, code = e.problems[0] if getattr(e, "problems", None) else ("", "invalid")
        raise Refusal("AEP-17", f"the imported run does not verify: {code} at {where}", where,
                      exit_code=EXIT_INTEGRITY) from None
    return out


def _at_event(e: Refusal, imp: _Importer, case: str, marker: tuple, node: dict) -> Refusal:
    """A refusal of RunBuilder for a line made from events (a member of ``aef`` of the wrong shape, say): the same
    rule and message, placed at the event that gave the line (``file:line``), the line's own place in the message.
    The line is found by the place the builder gives it (``builder._where``) in the tree being added."""
    from aefgate.formats.aef.builder import _where

    where = e.where or ""
    stack = [node]
    while stack:
        n = stack.pop()
        path = n.get("path")
        if isinstance(path, str) and _where(case, path, None) in where:
            ln = imp.lines.get((case, path, marker))
            if ln is None:
                ln = next((v for k, v in imp.lines.items() if k[0] == case and k[1] == path), None)
            if ln is not None:
                return Refusal(e.rule, f"{e.message} (the imported line: {where})", ln.where, exit_code=e.exit_code)
        stack.extend(n.get("children", ()))
    return e


def _add_corrections(b: Any, node: dict, content_on: bool) -> None:
    """A feedback ``correction`` as an ``expected`` evidence record of its line (only with contentCapture on,
    [RUN-11]); walks the tree."""
    stack = [node]
    while stack:
        n = stack.pop()
        texts = n.pop(_CORRECTIONS, None)
        if texts and content_on:
            ids = n.setdefault("evidence", [])
            for text in texts:
                ids.append(b.add_evidence("expected", content=text, description="a correction from AEP feedback"))
        stack.extend(n.get("children", ()))


def _read_lines(path: Path) -> Iterator[tuple[str, Any]]:
    """AEP-13: each line of a JSONL file, strictly (I-JSON), as ``(file:line, value)``."""
    name = str(path)
    try:
        f = open(path, "rb")
    except OSError as e:
        raise Refusal("AEP-13", f"cannot read the events: {e.strerror}", name) from None
    with f:
        lineno = 0
        try:
            for lineno, raw in jsonio.iter_lines(f, max_lines=1 << 62):
                where = f"{name}:{lineno}"
                if raw is None:
                    raise Refusal("AEP-13", f"a line over {jsonio.MAX_DOC} bytes", where)
                try:
                    yield where, jsonio.loads(raw)
                except jsonio.JsonProblem as e:
                    raise Refusal("AEP-13", f"not an I-JSON object: {e.reason}", where) from None
        except jsonio.JsonProblem as e:
            raise Refusal("AEP-13", f"not JSONL (AEP-0003 §3.1): {e.reason}",
                          f"{name}:{lineno + 1}" if lineno else name) from None


def from_aep(
    events_path: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    at: str | None = None,
    key: Any = None,
    run_id: str | None = None,
    target_mode: str | None = None,
) -> Path:
    """AEP-13 .. AEP-17: a JSONL file of AEP events (or structured CloudEvents) -> an imported run at ``out_dir``."""
    path = Path(events_path)
    problem = input_file_problem(path)
    if problem is not None:
        raise Refusal("CONV-5", f"the events file: {problem}", str(path))
    return import_events(_read_lines(path), out_dir, at=at, key=key, run_id=run_id, target_mode=target_mode,
                         name=str(path))


def from_cloudevents(events_path: str | os.PathLike[str], out_dir: str | os.PathLike[str], **options: Any) -> Path:
    """A JSONL file of structured CloudEvents -> an imported run (AEP-13: each line is detected by ``specversion``)."""
    return from_aep(events_path, out_dir, **options)


# ---------------------------------------------------------------------------------------------------------------
# the registry


def _converters() -> list:
    from aefgate.converters.registry import Converter, Option

    export_opts = (
        Option("max_capture", "the capture ceiling: none, metadata, redacted or full (AEP-8)", str, "metadata"),
        Option("agent", "the envelope's agent (default: subject.telemetry.agentId, else subject.ref; AEP-3)", str),
        Option("source_host", "the host of the envelope's source URI (default aefgate; AEP-3)", str),
        Option("cause_map", "a JSON file (or object) mapping resultIds or caseIds to assessed event ids (AEP-7)",
               str),
    )
    import_opts = (
        Option("at", "sealedAt of the imported run (default: now)", str),
        Option("run_id", "the runId to write (default: the events' session; AEP-14)", str),
        Option("target_mode", "execution.targetMode: live, replayed, scripted or mocked (AEP-14)", str, "live"),
    )
    return [
        Converter("aef-to-aep", "aef", "aep", to_aep, export_opts, LOSSES_TO_AEP,
                  "an intact AEF run as AEP assessment events (JSONL), docs/mappings/aep.md"),
        Converter("aep-to-aef", "aep", "aef", from_aep, import_opts, LOSSES_FROM_AEP,
                  "AEP assessment events (JSONL or CloudEvents) as an imported AEF run, sealed ingest"),
        Converter("aef-to-cloudevents", "aef", "cloudevents", to_cloudevents,
                  export_opts + (Option("mode", "CloudEvents mode: structured (one JSON-format event per line) or "
                                            "binary (one HTTP binary-mode {headers, body} per line; AEP-18)", str,
                                            "structured"),),
                  LOSSES_TO_AEP, "an intact AEF run as AEP assessment events in structured CloudEvents (AEP-0005)"),
        Converter("cloudevents-to-aef", "cloudevents", "aef", from_cloudevents, import_opts, LOSSES_FROM_AEP,
                  "structured CloudEvents of AEP assessment events as an imported AEF run, sealed ingest"),
    ]


CONVERTERS = _converters()
