"""The Agent Event Protocol (AEP 0.1) format layer: events, validation against the AEP schemas, capture
ceilings (down-leveling) and the AEP-0003 §9.4 redaction pipeline.

Specification: ``../shared/spec/aep/spec/`` (AEP-0001 envelope, AEP-0002 types and capture gating, AEP-0003
§9 capture levels and redaction, AEP-0009 assessment). Design and choices: ``docs/design/aep-format.md``.

* :func:`validate_event` / :func:`check_event`: the envelope schema and the type's payload schema;
* :func:`capture_classes`, :func:`apply_ceiling`, :func:`capture_problem`, :func:`gate_form_values`: capture;
* :func:`redact`, :func:`redact_value`, :class:`Redactor`: the §9.4 pipeline;
* :func:`stream_problems`, :class:`StreamChecker`: the cross-event rules of a stream;
* :func:`compile_filter`, :func:`matches`, :func:`filter_problem`: the ``attr-match`` filter dialect;
* :func:`read_events`, :func:`write_events`: AEP JSONL files.
"""

from aefgate.formats.aep.capture import (
    CAPTURE_LEVELS,
    ENVELOPE_CAPTURE_LEVELS,
    STARRED,
    apply_ceiling,
    capture_classes,
    capture_problem,
    gate_form_values,
)
from aefgate.formats.aep.filters import compile_filter, filter_problem, matches
from aefgate.formats.aep.io import read_events, write_events
from aefgate.formats.aep.models import Event
from aefgate.formats.aep.redact import PII, SECRET, Redactor, redact, redact_value
from aefgate.formats.aep.stream import StreamChecker, stream_problems
from aefgate.formats.aep.event_schema import (
    CORE_ATTRIBUTES,
    check_event,
    payload_schema,
    registered_types,
    rule_for,
    validate_event,
)

__all__ = [
    "CAPTURE_LEVELS",
    "CORE_ATTRIBUTES",
    "ENVELOPE_CAPTURE_LEVELS",
    "PII",
    "SECRET",
    "STARRED",
    "Event",
    "Redactor",
    "StreamChecker",
    "apply_ceiling",
    "capture_classes",
    "capture_problem",
    "check_event",
    "compile_filter",
    "filter_problem",
    "gate_form_values",
    "matches",
    "payload_schema",
    "read_events",
    "redact",
    "redact_value",
    "registered_types",
    "rule_for",
    "stream_problems",
    "validate_event",
    "write_events",
]
