"""OpenTelemetry -> AEF (interop/opentelemetry.md, "OpenTelemetry -> AEF"; rules OT-4, OT-5, OT-6, OT-8): OTLP logs
(and the traces they belong to) -> an imported AEF run, sealed ``ingest``.

Every log record is kept as it was (``logs.otlp.jsonl``, one ``LogsData`` per input line or request); every
``gen_ai.evaluation.result`` event becomes a result line, in input order:

- an evaluation event: ``eventName`` ``gen_ai.evaluation.result``, else the legacy ``event.name`` attribute;
- ``caseId``: ``test.case.name``, else ``gen_ai.response.id``, else (aefgate's extension) the parent span's
  ``gen_ai.response.id`` from the traces, else the parent span's id; ``path`` and ``evaluator.id``: the metric name
  (``gen_ai.evaluation.name``); ``endedAt``: ``timeUnixNano``, else ``observedTimeUnixNano`` (the log data model);
  ``traceLink``: the record's ``traceId``/``spanId`` (all zeros: no parent, no link).
- the state (OT-5, OT-6): ``error.type`` -> ``error`` (the explanation, else the type, as ``reason``; the label
  ``error`` beside it is fine); a label that is a state name -> that state (a typed absence needs an explanation and
  no value; ``pending`` is refused); another label -> ``scored`` with the label kept (it needs a value); a value
  alone -> ``scored``. The explanation is the ``reason`` (cut to 4096 characters).
- unplaceable (OT-6, :class:`Unplaceable`, naming the case and the evaluation): no metric name, no case, the same
  metric twice for one case (and trial: the later event), a non-finite value ([ENC-3]), nothing measured, and the
  other combinations above; refused, or with ``skip_unplaceable`` left out, listed and counted in ``run.json``
  ``ext."aefgate.otel"``. Records that are not evaluation events are kept in ``logs.otlp.jsonl`` only.
- one run is one group of records as the receivers group them (``test.suite.run.id``, else the service:
  :func:`aefgate.converters.otel.conventions.group_key`); ``suite_run`` picks one of several.

The run header (OT-4): the run id, source, subject and target mode the caller gives (or their defaults), status
``completed``, ``startedAt``/``endedAt`` the earliest and latest event time (the conversion time when no event has
one), ``contentCapture`` ``on`` unless asked, all listed in ``imported.asserted``; ``subject.telemetry`` from the
resource's ``service.name`` (one service per run: two are refused) and the parent span's ``gen_ai.agent.id``;
``otel.schemaUrls`` from the schema URLs met. Each metric with a value is declared ``score``/``none``/``unbounded``.
Traces (``--traces``) are kept in ``traces.otlp.jsonl``. The run is verified before it is sealed (OT-8).
"""

from __future__ import annotations

import hashlib
import math
import os
import pickle
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from aefgate.aef import jsonio
from aefgate.aef.builder import RunBuilder
from aefgate.aef.sealer import NotVerified
from aefgate.aef.signatures import signing_key_of
from aefgate.aef.times import now, parse_time
from aefgate.aef.verifier import in_one_process
from aefgate.aef.vocab import STATES, TRIAL_AGGREGATIONS, TYPED_ABSENCES
from aefgate.converters.aigp import annotator_kind
from aefgate.converters.checks import check_import_options
from aefgate.converters.otel.conventions import (
    AGENT_ID,
    CASE_NAME,
    ERROR_TYPE,
    EVALUATION_NAME,
    EVALUATOR_TYPE,
    EXPLANATION,
    RESPONSE_ID,
    RUN_ID_KEY,
    SCORE_LABEL,
    SCORE_VALUE,
    SERVICE_NAME,
    TRIAL,
    TRIALS_AGGREGATION,
    TRIALS_K,
    group_key,
    is_evaluation,
    result_mark,
    run_id_part,
)
from aefgate.errors import Refusal
from aefgate.formats.otlp import (
    attributes,
    is_null_id,
    iter_file,
    nanos_to_time,
    value_of,
)
from aefgate.fsutil import check_destination, input_file_problem
from aefgate.progress import task as progress_task

__all__ = ["EventCheck", "Unplaceable", "from_otel", "input_files"]

MAX_REASON = 4096
MAX_LABEL = 64


def input_files(path: str | os.PathLike[str]) -> list[Path]:
    """A file, or the ``.jsonl``/``.json``/``.pb`` files of a folder in name order."""
    p = Path(path)
    if p.is_dir():
        files = sorted(q for q in p.iterdir() if q.is_file() and q.suffix.lower() in (".jsonl", ".json", ".pb"))
        if not files:
            raise Refusal("CLI-1", "the folder holds no .jsonl, .json or .pb file", str(p))
        return files
    if not p.exists():
        raise Refusal("CLI-1", "no such file", str(p))
    problem = input_file_problem(p)
    if problem:
        raise Refusal("CLI-1", problem, str(p))
    return [p]


#: a typed absence's reason when the run keeps no content and the event has no explanation (docs/mappings/otel.md)
NO_CONTENT_REASON = "{state}: the event carries no explanation (the run keeps no content, OT-3)"


#: why an event cannot be placed, as a short name (the receiver's counts per reason): a part of the message -> name
_KINDS = (("without gen_ai.evaluation.name", "no-name"), ("names no case", "no-case"),
          ("twice for the case", "duplicate"), ("a finite number", "non-finite"), ("is a number, not", "bad-value"),
          ("label pending", "pending"), ("beside error.type", "label-beside-error"),
          ("error.type beside a value", "error-with-value"), ("typed absence", "typed-absence"),
          ("is not a state name", "label-without-value"), ("nothing measured", "nothing-measured"),
          ("aefgate.trial", "trial"), ("a trials aggregation", "trial"), ("is a string", "not-a-string"))


class Unplaceable(Refusal):
    """An evaluation event the page cannot place (OT-6, or a value AEF cannot hold): the refusal names the event's
    case and evaluation (when it has them) beside its place, so a user finds it; ``import otel
    --skip-unplaceable`` and the receivers leave such an event out and list or count it."""

    def __init__(self, rule: str, message: str, where: str, *, case: str | None, evaluation: str | None) -> None:
        self.case, self.evaluation, self.reason = case, evaluation, message
        self.kind = next((k for part, k in _KINDS if part in message), "other")
        named = ", ".join(x for x in (f"case {case!r}" if case else "", f"evaluation {evaluation!r}" if evaluation
                                      else "") if x)
        super().__init__(rule, f"{message} ({named})" if named else message, where)

    def entry(self) -> dict[str, Any]:
        """The event as a list of left-out events shows it (``--json``, the sealed run's count)."""
        return {"rule": self.rule, "case": self.case, "evaluation": self.evaluation, "where": self.where,
                "message": self.reason}


def _nonempty(x: Any) -> str | None:
    return x if isinstance(x, str) and x else None


class _Events:
    """What the logs give, read one request at a time: each event's line (:meth:`read` yields them), and what the
    run's header needs (the earliest and latest time, the services, the schema URLs, the parent spans). Memory
    holds no line: a first pass checks every event and gathers the header's facts, a second writes the lines.

    ``span_cases`` maps a parent span ``(traceId, spanId)`` to its ``gen_ai.response.id`` (from the traces): an
    event that names no case takes its parent span's response id, else the span's id (aefgate's extension). With
    ``skip``, an unplaceable event is left out and listed in ``skipped``; ``group`` keeps only the records of one
    run (:func:`group_key`); ``groups`` notes every group that holds an evaluation event."""

    def __init__(self, content_on: bool, *, skip: bool = False, group: tuple[str, str] | None = None,
                 span_cases: dict[tuple[str, str], str] | None = None) -> None:
        self.content_on = content_on
        self.skip = skip
        self.group = group
        self.span_cases = span_cases or {}
        self.skipped: list[Unplaceable] = []
        self.groups: dict[tuple[str, str], str] = {}
        self.events = 0
        self.seen: set[bytes] = set()  # result_mark of each event placed: OT-6's "the same metric twice"
        self.first_time: tuple[int, str] | None = None
        self.last_time: tuple[int, str] | None = None
        self.observed = 0  # lines whose time came from observedTimeUnixNano
        self.services: dict[str, str] = {}
        self.schema_urls: dict[str, None] = {}
        self.spans: set[tuple[str, str]] = set()  # the events' parent spans, when traces are given
        self.collect_spans = False

    def read(self, where: str, doc: dict) -> Iterator[dict[str, Any]]:
        for i, rl in enumerate(doc.get("resourceLogs") or ()):
            if not isinstance(rl, dict):
                raise Refusal("OTLP-1", "a resourceLogs entry is an object", where)
            res = attributes((rl.get("resource") or {}).get("attributes"))
            service = value_of(res.get(SERVICE_NAME))
            res_run = value_of(res.get(RUN_ID_KEY))
            if isinstance(rl.get("schemaUrl"), str) and rl["schemaUrl"]:
                self.schema_urls.setdefault(rl["schemaUrl"], None)
            for sl in rl.get("scopeLogs") or ():
                if not isinstance(sl, dict):
                    raise Refusal("OTLP-1", "a scopeLogs entry is an object", where)
                if isinstance(sl.get("schemaUrl"), str) and sl["schemaUrl"]:
                    self.schema_urls.setdefault(sl["schemaUrl"], None)
                for rec in sl.get("logRecords") or ():
                    if not isinstance(rec, dict):
                        raise Refusal("OTLP-1", "a logRecord is an object", where)
                    evaluation = is_evaluation(rec)
                    a = attributes(rec.get("attributes")) if evaluation or self.group is not None or \
                        not self.content_on else None
                    gk = group_key(rec, res_run, service, a) if a is not None else None
                    if self.group is not None and gk != self.group:
                        continue
                    if not self.content_on and (value_of(rec.get("body")) not in (None, "") or
                                                EXPLANATION in a):
                        raise Refusal("content-capture", "contentCapture is off, and the record carries content (an "
                                      "explanation or a body): a run that keeps no content cannot hold it in "
                                      "logs.otlp.jsonl ([SEC-6])", where)
                    if not evaluation:
                        continue
                    # events without a suite run id: one service's (OT-4)
                    self.groups.setdefault(gk if gk[0] == "run" else ("svc", ""), where)
                    if isinstance(service, str) and service:
                        self.services.setdefault(service, where)
                        if len(self.services) > 1 and self.group is None:
                            raise Refusal("OT-4", f"events of two services ({', '.join(self.services)}): one run "
                                                  "holds one service's events", where)
                    try:
                        line = self._event(rec, where, a)
                    except Unplaceable as e:
                        if not self.skip:
                            raise
                        self.skipped.append(e)
                        continue
                    yield line

    def _event(self, rec: dict, where: str, a: dict | None = None) -> dict[str, Any]:
        """The event's line; :class:`Unplaceable` (naming the case and the evaluation) when the page cannot place
        it, the same metric twice for one case (and trial) included. ``a``: its attributes, when the caller has
        them."""
        if a is None:
            a = attributes(rec.get("attributes"))
        try:
            line = self._line(rec, a, where)
            mark = result_mark(line)
            if mark in self.seen:
                trial, rollup = line.get("_trial"), line.get("_rollup")
                which = f" in its trial {trial}" if trial is not None else " (its rollup)" if rollup is not None \
                    else ""
                raise Refusal("OT-6", f"the metric {line['path']!r} twice for the case {line['caseId']!r}{which}: "
                                      "the later event is not placed", where)
        except Unplaceable:
            raise
        except Refusal as e:
            if e.rule == "OTLP-1":
                raise
            raise Unplaceable(e.rule, e.message, where, case=self._case(rec, a, where),
                              evaluation=_nonempty(value_of(a.get(EVALUATION_NAME), where))) from None
        self.seen.add(mark)
        self._note(line, rec)
        self.events += 1
        return line

    def _case(self, rec: dict, a: dict, where: str = "") -> str | None:
        """The event's case: ``test.case.name``, else ``gen_ai.response.id``, else its parent span's response id
        (from the traces), else the parent span's id (aefgate's extension); None for an event without a parent."""
        case = (_nonempty(value_of(a.get(CASE_NAME), where))
                or _nonempty(value_of(a.get(RESPONSE_ID), where)))
        if case is None and not is_null_id(rec.get("spanId")) and not is_null_id(rec.get("traceId")):
            tid, sid = str(rec["traceId"]).lower(), str(rec["spanId"]).lower()
            case = self.span_cases.get((tid, sid)) or sid
        return case

    def _note(self, line: dict, rec: dict) -> None:
        """The header's facts of a placed event: its time, its parent span."""
        if "_nanos" in line:
            n = line.pop("_nanos")
            t = line["endedAt"]
            if self.first_time is None or n < self.first_time[0]:
                self.first_time = (n, t)
            if self.last_time is None or n > self.last_time[0]:
                self.last_time = (n, t)
        if line.pop("_observed", False):
            self.observed += 1
        tl = line.get("traceLink")
        if tl and "spanId" in tl and self.collect_spans:
            self.spans.add((tl["traceId"], tl["spanId"]))

    def _line(self, rec: dict, a: dict, where: str) -> dict[str, Any]:
        """The event's line, with the importer's notes (``_nanos``, ``_observed``, ``_where``, ``_trial``,
        ``_rollup``): its case and metric, its state and score (OT-5, OT-6), its time and its trace link."""
        name = value_of(a.get(EVALUATION_NAME), where)
        if not isinstance(name, str) or not name:
            raise Refusal("OT-6", "an evaluation event without gen_ai.evaluation.name", where)
        case = self._case(rec, a, where)
        if case is None:
            raise Refusal("OT-6", f"the event {name!r} names no case (neither test.case.name nor "
                                  "gen_ai.response.id, and no parent span)", where)
        trial, rollup = _trial_of(a, where)
        value, label, expl, etype = _measured(a, where)
        line: dict[str, Any] = {"caseId": case, "path": name, "evaluator": {"id": name}}
        kind = _annotator_kind(a, where)
        if kind is not None:
            line["annotator"] = {"kind": kind}
        score = _state(line, name, value, label, expl, etype, self.content_on, where)
        if expl and "reason" not in line:
            line["reason"] = expl[:MAX_REASON]
        elif "reason" in line:
            line["reason"] = line["reason"][:MAX_REASON]
        if score is not None:
            line["scores"] = [score]
        _time_and_link(line, rec, where)
        line["_where"] = where
        if trial is not None:
            line["_trial"] = trial
        if rollup is not None:
            line["_rollup"] = rollup
        return line


def _measured(a: dict[str, Any], where: str) -> tuple[Any, str | None, str | None, Any]:
    """The event's value, label, explanation and ``error.type``, each of its type (OT-6, [ENC-3])."""
    value = value_of(a.get(SCORE_VALUE), where)
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise Refusal("OT-6", f"gen_ai.evaluation.score.value is a number, not {value!r}", where)
    if isinstance(value, float) and not math.isfinite(value):
        raise Refusal("OT-6", f"gen_ai.evaluation.score.value is {value!r}: a score is a finite number ([ENC-3])",
                      where)
    label = value_of(a.get(SCORE_LABEL), where)
    if label is not None and not isinstance(label, str):
        raise Refusal("OT-6", "gen_ai.evaluation.score.label is a string", where)
    expl = value_of(a.get(EXPLANATION), where)
    if expl is not None and not isinstance(expl, str):
        raise Refusal("OT-6", "gen_ai.evaluation.explanation is a string", where)
    return value, label, expl, value_of(a.get(ERROR_TYPE), where)


def _annotator_kind(a: dict[str, Any], where: str) -> str | None:
    """Who graded, when the event says (docs/mappings/aigp.md): OpenTelemetry's proposed evaluator type (PR #359:
    llm_judge, deterministic, human), else aefgate's aigp.grader.type (export otel --aigp); COMPOSITE is a result
    tree's, not an annotator's, and is not read back."""
    kind = annotator_kind(value_of(a.get(EVALUATOR_TYPE), where))
    if kind is None and value_of(a.get("aigp.grader.type"), where) != "COMPOSITE":
        kind = annotator_kind(value_of(a.get("aigp.grader.type"), where))
    return kind


def _state(line: dict[str, Any], name: str, value: Any, label: str | None, expl: str | None, etype: Any,
           content_on: bool, where: str) -> dict[str, Any] | None:
    """OT-5, OT-6: the line's ``state`` (and a ``reason`` it takes from ``error.type`` or the run's missing
    content) set on ``line``; the score, when the event has one."""
    if etype is not None:  # OT-5
        if value is not None:
            raise Refusal("OT-6", "error.type beside a value: an evaluation that ended in an error has no score",
                          where)
        if label not in (None, "error"):
            raise Refusal("OT-6", f"the label {label!r} beside error.type: only error can stand there", where)
        line["state"] = "error"
        line["reason"] = expl if expl else str(etype)
        return None
    if label in STATES:
        if label == "pending":
            raise Refusal("OT-6", "the label pending: an imported run is closed, nothing in it is pending", where)
        if label in TYPED_ABSENCES:
            if value is not None:
                raise Refusal("OT-6", f"the typed absence {label} with a value", where)
            if not expl and content_on:
                raise Refusal("OT-6", f"the typed absence {label} without an explanation (its reason, RES-2)",
                              where)
            if not expl:  # aefgate's extension: under contentCapture off the export writes none (OT-3)
                line["reason"] = NO_CONTENT_REASON.format(state=label)
        line["state"] = label
        return {"metric": name, "value": value} if value is not None else None
    if label is not None:
        if value is None:
            raise Refusal("OT-6", f"the label {label!r} is not a state name, and the event has no value", where)
        line["state"] = "scored"
        return {"metric": name, "value": value, "label": label[:MAX_LABEL]}
    if value is not None:
        line["state"] = "scored"
        return {"metric": name, "value": value}
    raise Refusal("OT-6", "nothing measured: no label, no value and no error.type", where)


def _time_and_link(line: dict[str, Any], rec: dict, where: str) -> None:
    """The event's time (``endedAt``, and the notes ``_nanos``/``_observed``; OpenTelemetry's log data model: the
    observed time when the event's is missing or 0) and its ``traceLink`` (all-zero ids: OTLP's "no parent")."""
    stamp = rec.get("timeUnixNano")
    observed = False
    if stamp in (None, "", 0, "0"):
        stamp = rec.get("observedTimeUnixNano")
        observed = stamp not in (None, "", 0, "0")
    try:
        t = nanos_to_time(stamp)
    except (TypeError, ValueError, OverflowError):
        raise Refusal("OTLP-1", f"{'observedTimeUnixNano' if observed else 'timeUnixNano'} {stamp!r} is not a "
                                "time in nanoseconds since 1970 (OTLP: a fixed64)", where) from None
    if t is not None:
        line["endedAt"] = t
        line["_nanos"] = int(stamp)
        line["_observed"] = observed
    tid, sid = rec.get("traceId"), rec.get("spanId")
    if not is_null_id(tid):
        line["traceLink"] = {"traceId": tid.lower(), **({"spanId": sid.lower()} if not is_null_id(sid) else {})}


_AGGREGATIONS = TRIAL_AGGREGATIONS


class EventCheck:
    """The importer's mapping of one evaluation event at a time, for the bus (``serve otlp``'s intake and replay,
    ``serve ingest``'s journal and build): one log record -> its line, with the checks :func:`from_otel` applies
    to it (:class:`Unplaceable` for an event the page cannot place, OT-6 and [ENC-3]; OTLP-1 as a
    :class:`~aefgate.errors.Refusal`). "The same metric twice" is decided here, on the marks
    (:func:`~aefgate.converters.otel.conventions.result_mark`) of the results the caller already holds."""

    def __init__(self) -> None:
        self._events = _Events(True)

    def line(self, rec: dict, where: str, attrs: dict | None = None, *, seen: set[bytes] | None = None) -> dict:
        """The record's line (``attrs``: its attributes, when the caller has them). With ``seen``, the marks of the
        results placed before it: a record whose mark is among them is :class:`Unplaceable` (OT-6, "the same
        metric twice"), else its mark is added to ``seen``."""
        self._events.seen = seen if seen is not None else set()
        return self._events._event(rec, where, attrs)

    def mark(self, rec: dict, where: str = "") -> bytes | None:
        """The record's result mark, or None when it is not placeable."""
        try:
            return result_mark(self.line(rec, where))
        except Refusal:
            return None


def _trial_of(a: dict[str, Any], where: str) -> tuple[int | None, dict[str, Any] | None]:
    """The event's trial (``aefgate.trial``) or rollup (``aefgate.trials.aggregation``, ``aefgate.trials.k``)."""
    trial = value_of(a.get(TRIAL), where)
    agg = value_of(a.get(TRIALS_AGGREGATION), where)
    k = value_of(a.get(TRIALS_K), where)
    if trial is not None and (isinstance(trial, bool) or not isinstance(trial, int) or trial < 0):
        raise Refusal("OT-6", f"{TRIAL} is a trial number (an integer, 0 or more), not {trial!r}", where)
    if agg is not None and agg not in _AGGREGATIONS:
        raise Refusal("OT-6", f"{TRIALS_AGGREGATION} is a trials aggregation ({', '.join(_AGGREGATIONS)}), not "
                              f"{agg!r}", where)
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
        raise Refusal("OT-6", f"{TRIALS_K} is an integer, 1 or more, not {k!r}", where)
    if trial is not None and agg is not None:
        raise Refusal("OT-6", f"{TRIAL} beside {TRIALS_AGGREGATION}: an event is a trial or a rollup", where)
    if agg is None:
        if k is not None:
            raise Refusal("OT-6", f"{TRIALS_K} without {TRIALS_AGGREGATION}", where)
        return trial, None
    return None, {"aggregation": agg, **({"k": k} if k is not None else {})}


def _add(b: Any, line: dict, at_event: str, trial: int | None, rollup: dict | None = None) -> None:
    """Write one event's line: a trial line, a rollup ([RES-8]) or a case's line; a refusal names the event."""
    try:
        if trial is not None:
            b.add_trial(line["caseId"], line, trial)
        elif rollup is not None:
            b.add_rollup(line["caseId"], line, **rollup)
        else:
            b.add_case(line["caseId"], line)
    except Refusal as e:
        raise Refusal(e.rule, f"{e.message} (the imported line: {e.where})", at_event, exit_code=e.exit_code) from None


def _span_facts(trace_files: list[Path], need_cases: bool) -> dict[tuple[str, str], tuple[str | None, str | None]]:
    """Each span's ``gen_ai.response.id`` and ``gen_ai.agent.id`` (the spans that carry either), by
    ``(traceId, spanId)``: a case for an event that names none, and the run's agent id."""
    out: dict[tuple[str, str], tuple[str | None, str | None]] = {}
    for f in trace_files:
        for w, doc in iter_file(f, "traces"):
            for rs in doc.get("resourceSpans") or ():
                for ss in (rs or {}).get("scopeSpans") or ():
                    for sp in (ss or {}).get("spans") or ():
                        a = attributes(sp.get("attributes"))
                        resp = _nonempty(value_of(a.get(RESPONSE_ID), w)) if need_cases else None
                        agent = _nonempty(value_of(a.get(AGENT_ID), w))
                        if resp or agent:
                            key = (str(sp.get("traceId", "")).lower(), str(sp.get("spanId", "")).lower())
                            out.setdefault(key, (resp, agent))
    return out


def _group_option(value: str | None) -> tuple[str, str] | None:
    if value is None:
        return None
    if not value:
        raise Refusal("CLI-2", "option 'suite_run' is not empty", "option 'suite_run'")
    return ("run", value)


def from_otel(
    logs: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    out_dir: str | os.PathLike[str],
    *,
    traces: Iterable[str | os.PathLike[str]] = (),
    run_id: str | None = None,
    source: str | None = None,
    subject: str | None = None,
    subject_kind: str = "agent",
    target_mode: str = "live",
    content_capture: str = "on",
    at: str | None = None,
    key: Any = None,
    skip_unplaceable: bool = False,
    suite_run: str | None = None,
    skipped: list[dict[str, Any]] | None = None,
    rejected_before: int = 0,
) -> Path:
    """Import OTLP logs (``.jsonl`` OTLP/JSON files, ``.pb`` request bodies, or folders of them) and, with
    ``traces``, their traces, as one AEF run at ``out_dir`` (absent or empty), sealed ``ingest`` at ``at`` (default
    now), signed with ``key``. See the module docstring for the mapping and its refusals.

    The run is one group of records as the receivers group them (:func:`~aefgate.converters.otel.conventions.group_key`:
    ``test.suite.run.id``, else ``service.name``): events of several groups are refused (OT-4) unless
    ``suite_run`` names the one to import. An event the page cannot place is refused (:class:`Unplaceable`, naming
    its case and evaluation) unless ``skip_unplaceable``: then it is left out, appended to ``skipped`` (a list the
    caller gives; each ``{"rule", "case", "evaluation", "where", "message"}``), and the run's ``ext`` counts it
    (``aefgate.otel.unplaceable``), beside ``rejected_before`` (events of the group a receiver rejected at intake,
    ``aefgate.otel.rejectedAtIntake``)."""
    check_import_options(target_mode=target_mode, content_capture=content_capture, at=at)
    for name, value in (("option 'subject'", subject), ("option 'run_id'", run_id), ("option 'from'", source)):
        if value is not None and not value:
            raise Refusal("CLI-2", f"{name} is not empty", name)
    group = _group_option(suite_run)
    signing_key = signing_key_of(key)  # before anything is written
    log_files = [f for p in ([logs] if isinstance(logs, (str, os.PathLike)) else logs) for f in input_files(p)]
    trace_files = [f for p in traces for f in input_files(p)]
    out = Path(os.path.abspath(out_dir))
    check_destination(out, inputs=tuple(log_files) + tuple(trace_files))
    facts = _span_facts(trace_files, True) if trace_files else {}
    ev = _Events(content_capture == "on", skip=bool(skip_unplaceable), group=group,
                 span_cases={k: v[0] for k, v in facts.items() if v[0]})
    ev.collect_spans = bool(trace_files)
    with tempfile.TemporaryFile(prefix="aefgate-otel-") as spool:
        digest = _check_pass(ev, log_files, spool)
        ev.seen = set()  # the marks are done with: pass 2 takes the spooled lines
        _check_groups(ev, group, log_files)
        if skipped is not None:
            skipped.extend(e.entry() for e in ev.skipped)
        when = at or now()
        header = _header(ev, group=group, facts=facts, trace_files=trace_files, digest=digest, run_id=run_id,
                         subject=subject, subject_kind=subject_kind, target_mode=target_mode,
                         content_capture=content_capture, when=when, rejected_before=rejected_before)
        try:
            with RunBuilder(out, header, metrics=[], imported_from=source or "OpenTelemetry OTLP",
                            asserted=list(_ASSERTED)) as b, \
                    progress_task("import OTLP events", ev.events, "events") as bar:
                _write_pass(b, bar, log_files, trace_files, spool, group=group, content_on=content_capture == "on")
                with in_one_process():  # the verification before the seal, in this process: flat memory
                    ended = ev.last_time[1] if ev.last_time else when
                    # no --at: sealed now, or at the run's end when the events' clock runs ahead of this one
                    sealed = at or (ended if parse_time(ended) > parse_time(when) else when)
                    b.finish("completed", ended_at=ended, summary={"lanes": []}, seal="ingest", sealed_at=sealed,
                             signing_key=signing_key)
        except NotVerified as e:
            raise e.as_refusal("OT-8", "the imported run") from None
    return out


#: the header members the converter asserts (OT-4: ``imported.asserted``)
_ASSERTED = ("runId", "status", "subject.ref", "subject.kind", "execution.targetMode", "startedAt", "endedAt",
             "contentCapture")


def _requests(log_files: list[Path]) -> Iterator[tuple[str, dict]]:
    """The log requests of the files, in order, with their place."""
    for f in log_files:
        yield from iter_file(f, "logs")


def _check_pass(ev: _Events, log_files: list[Path], spool: Any) -> Any:
    """Pass 1: every event mapped and checked (every refusal before anything is written), the header's facts
    gathered in ``ev``; each request's lines spooled (one pickle a request, in order) for :func:`_write_pass`, so no
    event is mapped twice and memory holds one request's lines. The digest of the records as values (the JSON and
    protobuf forms of a request give one run id)."""
    digest = hashlib.sha256()
    with progress_task("check OTLP logs", len(log_files), "files") as bar:
        current = None
        for where, doc in _requests(log_files):
            pickle.dump(list(ev.read(where, doc)), spool, pickle.HIGHEST_PROTOCOL)
            digest.update(jsonio.dump_line(doc))
            file = where.rsplit(":", 1)[0]
            if file != current:
                current = file
                bar.advance()
    return digest


def _check_groups(ev: _Events, group: tuple[str, str] | None, log_files: list[Path]) -> None:
    """OT-4 and OT-6 after pass 1: one run's events (else ``suite_run``), at least one event placed."""
    if group is None and len(ev.groups) > 1:
        names = ", ".join(f"{k[1]!r}" if k[0] == "run" else f"without {RUN_ID_KEY}" for k in ev.groups)
        raise Refusal("OT-4", f"events of {len(ev.groups)} runs ({names}): a run is one {RUN_ID_KEY} (else one "
                              "service), as the receiver groups them; give option 'suite_run' to import one",
                      "option 'suite_run'")
    if group is not None and not ev.groups:
        raise Refusal("OT-4", f"no evaluation event of {RUN_ID_KEY} {group[1]!r}", "option 'suite_run'")
    if not ev.events:
        if ev.skipped:
            raise Refusal("OT-6", f"no evaluation event can be placed ({len(ev.skipped)} left out; the first: "
                                  f"{ev.skipped[0].message})", ev.skipped[0].where)
        raise Refusal("OT-6", "no gen_ai.evaluation.result event to import", str(log_files[0]))


def _header(ev: _Events, *, group: tuple[str, str] | None, facts: dict, trace_files: list[Path], digest: Any,
            run_id: str | None, subject: str | None, subject_kind: str, target_mode: str, content_capture: str,
            when: str, rejected_before: int) -> dict[str, Any]:
    """OT-4: the run header from the caller's options and pass 1's facts."""
    service = next(iter(ev.services), None)
    agent = next((facts[s][1] for s in _ordered_spans(trace_files, ev.spans) if facts.get(s, (None, None))[1]),
                 None) if trace_files else None
    the_group = group or next(iter(ev.groups))
    rid = run_id or (run_id_part(the_group[1]) if the_group[0] == "run" else f"otel-{digest.hexdigest()[:16]}")
    ref = subject or (f"agent:{service}" if service else None)
    if ref is None:
        raise Refusal("OT-4", "no subject: the events name no service (resource service.name); give option 'subject'",
                      "option 'subject'")
    header: dict[str, Any] = {
        "runId": rid,
        "subject": {"ref": ref, "kind": subject_kind or "agent"},
        "execution": {"targetMode": target_mode},
        "startedAt": ev.first_time[1] if ev.first_time else when,
        "contentCapture": content_capture,
    }
    telemetry = {k: v for k, v in (("agentId", agent), ("serviceName", service)) if v}
    if telemetry:
        header["subject"]["telemetry"] = telemetry
    if ev.schema_urls:
        header["otel"] = {"schemaUrls": list(ev.schema_urls)}
    # nothing left out in silence: the sealed run says how many events of its group it lacks; and how many of its
    # lines' times are the events' observed times (the converter's reading; the run's times, from them, are in
    # imported.asserted)
    noted = {k: v for k, v in (("unplaceable", len(ev.skipped)), ("rejectedAtIntake", rejected_before),
                               ("observedTimes", ev.observed)) if v}
    if noted:
        header["ext"] = {EXT: noted}
    return header


def _write_pass(b: Any, bar: Any, log_files: list[Path], trace_files: list[Path], spool: Any, *,
                group: tuple[str, str] | None, content_on: bool) -> None:
    """Pass 2: the traces, then each log request (of the group) and its lines from pass 1's spool, written one
    request at a time; the metrics declared as met; the rollups last (a run may list a rollup before its trials)."""
    declared: set[str] = set()
    rollups: list[tuple[str, dict, dict]] = []
    spool.seek(0)
    for f in trace_files:
        for _w, doc in iter_file(f, "traces"):
            b.add_otlp("traces", doc)
    for _where, doc in _requests(log_files):
        kept = doc if group is None else _of_group(doc, group)
        b.add_otlp("logs", kept if content_on else _without_empty_bodies(kept))
        for line in pickle.load(spool):
            for s in line.get("scores", ()):
                if s["metric"] not in declared:
                    declared.add(s["metric"])
                    b.declare_metric(s["metric"], "score", "none", "unbounded")
            at_event = line.pop("_where")
            trial, rollup = line.pop("_trial", None), line.pop("_rollup", None)
            if rollup is not None:  # written once every trial is in
                rollups.append((at_event, line, rollup))
                continue
            _add(b, line, at_event, trial)
            bar.advance()
    for at_event, line, rollup in rollups:
        _add(b, line, at_event, None, rollup)
        bar.advance()


#: the run.json ext member where an import counts the events of its group it left out (docs/mappings/otel.md)
EXT = "aefgate.otel"


def _ordered_spans(trace_files: list[Path], spans: set[tuple[str, str]]) -> Iterator[tuple[str, str]]:
    """The events' parent spans in the traces' order (the first with an agent id gives the run's)."""
    for f in trace_files:
        for w, doc in iter_file(f, "traces"):
            for rs in doc.get("resourceSpans") or ():
                for ss in (rs or {}).get("scopeSpans") or ():
                    for sp in (ss or {}).get("spans") or ():
                        key = (str(sp.get("traceId", "")).lower(), str(sp.get("spanId", "")).lower())
                        if key in spans:
                            yield key


def _without_empty_bodies(doc: dict) -> dict:
    """The request with each record's empty ``body`` left out (the SDK writes ``{}``, an AnyValue holding nothing:
    the same as no body), as a run that keeps no content holds its records ([SEC-6]: no record has a body)."""
    for rl in doc.get("resourceLogs") or ():
        for sl in rl.get("scopeLogs") or ():
            sl["logRecords"] = [{k: v for k, v in r.items() if k != "body"} if "body" in r else r
                                for r in sl.get("logRecords") or ()]
    return doc


def _of_group(doc: dict, group: tuple[str, str]) -> dict:
    """The records of ``doc`` in ``group``, as a request (resources and scopes kept)."""
    out = []
    for rl in doc.get("resourceLogs") or ():
        res = attributes((rl.get("resource") or {}).get("attributes"))
        service, res_run = value_of(res.get(SERVICE_NAME)), value_of(res.get(RUN_ID_KEY))
        scopes = []
        for sl in rl.get("scopeLogs") or ():
            recs = [r for r in sl.get("logRecords") or () if group_key(r, res_run, service) == group]
            if recs:
                scopes.append({**sl, "logRecords": recs})
        if scopes:
            out.append({**rl, "scopeLogs": scopes})
    return {"resourceLogs": out}
