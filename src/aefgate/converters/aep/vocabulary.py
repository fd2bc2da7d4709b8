"""What both directions of the AEF <-> AEP converter share: the event types, the capture levels, the severity and
grader tables, and small helpers (docs/mappings/aep.md)."""

from __future__ import annotations

import datetime as _dt
import functools
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any


from aefgate.errors import Refusal
from aefgate.aef import jsonio
from aefgate.aef.times import parse_time


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
#: AEP-16: guardrail verdict -> state
_VERDICT_STATE = {"allowed": "passed", "flagged": "warn", "blocked": "failed", "modified": "warn"}
#: AEP-10: line members copied into the ``aef`` object under the same name
_AEF_COPY = ("component", "aggregation", "severity", "verdictRule", "uncertainty", "lane", "durationMs", "turns",
             "usage", "startedAt", "endedAt")
_AEF_KEYS = frozenset(_AEF_COPY + ("trial", "trials", "parentResultId", "annotator", "traceLink"))
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



# ---------------------------------------------------------------------------------------------------------------
# shared helpers


def _aep_module():
    try:
        from aefgate.formats import aep  # noqa: PLC0415 - lazy: the collaborator's module, optional (None without it)
    except ImportError:
        return None
    return aep


@functools.lru_cache(maxsize=None)
def _ce_lines():
    """The CloudEvents bridge's ``(is_cloudevents_line, line_events)``, imported when first needed (AEP-13)."""
    # lazy: the CloudEvents SDK (about 25 ms to import) only for an input that is CloudEvents
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


