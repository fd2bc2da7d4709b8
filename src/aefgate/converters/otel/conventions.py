"""What both directions of the OpenTelemetry converter share, and what the receivers (``serve otlp``, the ``serve
ingest`` fleet) apply by the same rule as ``import otel`` (docs/mappings/otel.md):

- aefgate's attributes for trials (the GenAI conventions have none; "Trials"): a trial line's event carries its
  0-based trial, a rollup's event the rollup's aggregation (and its k), so the import places them back as trial
  lines and their rollup ([RES-8]);
- which record is an evaluation event (:func:`is_evaluation`: ``eventName``, else the ``event.name`` attribute);
- which run a record belongs to (:func:`group_key`: ``test.suite.run.id`` on the resource, else on the record, else
  ``service.name``): one rule for the import and the receivers;
- when two events are the same result (:func:`result_mark`: the case, the metric, the trial or rollup): the later one
  is unplaceable (OT-6), in the import and in the receivers alike.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from aefgate.formats.otlp import attributes, value_of

__all__ = ["AGENT_ID", "CASE_NAME", "ERROR_TYPE", "EVALUATION_NAME", "EVALUATOR_TYPE", "EVENT", "EXPLANATION",
           "RESPONSE_ID", "RUN_ID_KEY", "SCORE_LABEL", "SCORE_VALUE", "SERVICE_NAME", "TRIAL", "TRIALS_AGGREGATION",
           "TRIALS_K", "event_name", "group_key", "is_evaluation", "result_mark", "run_id_part"]

EVENT = "gen_ai.evaluation.result"
RUN_ID_KEY = "test.suite.run.id"
#: the attribute keys of an evaluation event and of its resource and parent span, as the semantic conventions name
#: them (interop/opentelemetry.md): one definition, for the importer and the exporter
EVALUATION_NAME = "gen_ai.evaluation.name"
SCORE_VALUE = "gen_ai.evaluation.score.value"
SCORE_LABEL = "gen_ai.evaluation.score.label"
EXPLANATION = "gen_ai.evaluation.explanation"
EVALUATOR_TYPE = "gen_ai.evaluation.evaluator.type"
ERROR_TYPE = "error.type"
CASE_NAME = "test.case.name"
RESPONSE_ID = "gen_ai.response.id"
AGENT_ID = "gen_ai.agent.id"
SERVICE_NAME = "service.name"
TRIAL = "aefgate.trial"
TRIALS_AGGREGATION = "aefgate.trials.aggregation"
TRIALS_K = "aefgate.trials.k"


def event_name(rec: dict) -> Any:
    """A log record's event name: ``eventName`` (OTLP 1.5), else the legacy ``event.name`` attribute."""
    name = rec.get("eventName")
    if name:
        return name
    for a in rec.get("attributes") or ():
        if isinstance(a, dict) and a.get("key") == "event.name":
            return value_of(a.get("value"))
    return None


def is_evaluation(rec: dict) -> bool:
    """Whether a log record is a ``gen_ai.evaluation.result`` event."""
    return rec.get("eventName") == EVENT or (not rec.get("eventName") and event_name(rec) == EVENT)


def group_key(record: dict, resource_run: Any, service: Any, attrs: dict | None = None) -> tuple[str, str]:
    """A log record's run: ``("run", test.suite.run.id)`` from the resource, else from the record (``attrs``: its
    attributes, when the caller has them), else ``("svc", service.name)`` (``unknown`` when it names none)."""
    if resource_run is not None:
        run = resource_run
    else:
        run = value_of((attrs if attrs is not None else attributes(record.get("attributes"))).get(RUN_ID_KEY))
    if run:
        return ("run", str(run))
    return ("svc", service if isinstance(service, str) and service else "unknown")


def result_mark(line: dict) -> bytes:
    """What makes an event's line one result of its run: its case, its metric (the event's name), and its trial or
    whether it is a rollup (aefgate's trial attributes). Two events with one mark: the later is unplaceable (OT-6)."""
    case, path, trial = line["caseId"], line["path"], line.get("_trial")
    which = "r" if line.get("_rollup") is not None else "-" if trial is None else str(trial)
    # length-prefixed, so no two (case, metric) pairs give one text
    return hashlib.blake2b(f"{len(case)}:{case}{len(path)}:{path}{which}".encode("utf-8", "surrogatepass"),
                           digest_size=8).digest()


_ID_BAD = re.compile(r"[^A-Za-z0-9._:-]")


def run_id_part(text: str) -> str:
    """A run id made of a suite run id or a service name: ``[A-Za-z0-9._:-]``, other characters as ``_``."""
    return _ID_BAD.sub("_", text)[:100] or "run"
