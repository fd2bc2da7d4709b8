"""A typed fast path for the reader schema of one results.ndjson line (issue 20).

:func:`reader_valid` answers exactly ``validator("result", "reader")(doc) is None`` (see
:mod:`aefgate.aef.schema`) for every value :func:`aefgate.aef.jsonio.loads` returns, but decides
the common case in msgspec's C code: :func:`typed` converts the already decoded dict to the :class:`ResultLine`
Structs below (``msgspec.convert``, strict: no coercion), whose types and ``msgspec.Meta`` constraints mirror
``schemas/reader/result.schema.json`` and the ``$defs`` of ``common.schema.json`` it references, then checks in
Python what msgspec cannot say (the schema's ``allOf`` and ``uniqueItems``) and the string patterns of the fields
every line carries (see below). When the typed path accepts, the line is valid; when it does not (a
:class:`msgspec.ValidationError`, a rule it cannot prove), the generic compiled validator decides. So the typed path
only has to be *sound* (never accept what the schema refuses); it may be stricter, and is, in these places:

* JSON Schema's ``integer`` takes an integral float (``2.0``, [ENC-4]); msgspec's strict ``int`` refuses it;
* a ``number`` is ``int | float`` (so a bool never passes, and an int keeps its exact value for the bounds), but a
  float NaN fails msgspec's bounds where the generic validator lets it pass (jsonio never yields NaN anyway);
* a taxonomy whose items repeat a ``(scheme, id)`` pair is left to the generic validator, which compares the
  whole items (their unknown members too) as ``uniqueItems`` asks.

Patterns. msgspec applies a ``Meta(pattern=...)`` with ``re.search``, one call per string (with ``$`` written
``\\Z``, [ENC-15]); on a typical line those calls cost more than the rest of the conversion together. So the
strings most lines carry are typed ``str`` (with their lengths) and their patterns are checked here, in
:func:`typed`, as cheaply as is exact: ``schemaVersion`` is compared with ``"1.0"`` first; ``caseId`` and ``path``
(``text``: no C0, DEL or C1 control character) pass when ``str.isprintable()`` (every control character is
category Cc, which is not printable), else the pattern decides; an ``endedAt`` equal to its ``startedAt`` is not
matched twice; the others (``resultId``, ``parentResultId``, ``aggregation.decisive``, ``evidence``, ``lane``,
the times) take one compiled ``match`` each. (Joining them into one string for one regex call, or remembering the
ids a pattern accepted as the generic validator does, measured no faster: resultIds are unique, and the regex
engine's time per character, not the calls, dominates.) The rarer pattern-checked strings (``reasoning.blob``, the
annotator's hashes, the trace and span ids) keep their ``Meta`` pattern.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType, field

from aefgate.aef.schema import validator

__all__ = ["ResultLine", "reader_valid", "typed"]

MAX_SAFE = 9007199254740991  # the schema's maximum for counts: 2**53 - 1

# ---------------------------------------------------------------------------------------------
# Types. A number is int | float, each with its own bounds (an int is never rounded); an integer
# is a strict int; string lengths count code points (msgspec's, like len()).

Num = int | float
NonNeg = Annotated[int, Meta(ge=0)] | Annotated[float, Meta(ge=0)]
Unit = Annotated[int, Meta(ge=0, le=1)] | Annotated[float, Meta(ge=0, le=1)]
Level = Annotated[int, Meta(gt=0, lt=1)] | Annotated[float, Meta(gt=0, lt=1)]
Count = Annotated[int, Meta(ge=0, le=MAX_SAFE)]
Positive = Annotated[int, Meta(ge=1, le=MAX_SAFE)]
Trial = Annotated[int, Meta(ge=0, le=999)]
TrialsN = Annotated[int, Meta(ge=1, le=1000)]
TrialsPassed = Annotated[int, Meta(ge=0, le=1000)]

Str1_64 = Annotated[str, Meta(min_length=1, max_length=64)]
Str1_256 = Annotated[str, Meta(min_length=1, max_length=256)]
Str1_1024 = Annotated[str, Meta(min_length=1, max_length=1024)]
Str1_4096 = Annotated[str, Meta(min_length=1, max_length=4096)]
Str64 = Annotated[str, Meta(max_length=64)]
Str128 = Annotated[str, Meta(max_length=128)]
Str256 = Annotated[str, Meta(max_length=256)]
Str512 = Annotated[str, Meta(max_length=512)]

# common.schema.json#/$defs/sha256Uri, and traceLink's ids: checked by msgspec (rare members)
Sha256Uri = Annotated[str, Meta(pattern=r"^sha256:[0-9a-f]{64}\Z")]
TraceId = Annotated[str, Meta(pattern=r"^[0-9a-f]{32}\Z")]
SpanId = Annotated[str, Meta(pattern=r"^[0-9a-f]{16}\Z")]

State = Literal[
    "passed", "failed", "warn", "inconclusive", "scored",
    "not_measured", "not_applicable", "skipped", "error", "pending",
]
TYPED_ABSENCES = frozenset({"not_measured", "not_applicable", "skipped", "error", "pending"})

# The patterns checked in Python: the schema's (ECMA-262), which mean the same in Python (none uses \d, \w, \s
# or .), anchored by match and \Z (not $, [ENC-15]).
_SV = re.compile(r"1[.](?:0|[1-9][0-9]*)\Z").match  # schemaVersion
_RID = re.compile(r"r_[0-9a-f]{32}\Z").match  # resultId (its maxLength 34 follows)
_TEXT = re.compile(r"[^\x00-\x1f\x7f-\x9f]+\Z").match  # text (caseId, path; lengths: msgspec)
_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}\Z").match  # id (laneName)
_TS = re.compile(  # timestamp
    r"(?:[0-9]{3}[1-9]|[0-9]{2}[1-9][0-9]|[0-9][1-9][0-9]{2}|[1-9][0-9]{3})-(?:0[1-9]|1[0-2])"
    r"-(?:0[1-9]|[12][0-9]|3[01])T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]{1,9})?Z\Z"
).match
_EID = re.compile(r"E-[A-Za-z0-9._-]{1,64}\Z").match  # evidenceId

# ---------------------------------------------------------------------------------------------
# The Structs: result.schema.json, member by member. Unknown members are accepted (the reader schema
# is tolerant); an optional member is UNSET when absent, and None only where the schema allows null.
# gc=False: a Struct here holds only JSON values (never itself), so it cannot be part of a cycle.

_OPTS = {"kw_only": True, "gc": False}


class Trials(Struct, **_OPTS):
    n: TrialsN
    passed: TrialsPassed
    aggregation: str
    agree: bool
    k: Positive | UnsetType = UNSET


class Evaluator(Struct, **_OPTS):
    id: Str1_256
    version: Str64 | UnsetType = UNSET


class Score(Struct, **_OPTS):
    metric: Str1_256
    value: Num
    normalized: Unit | None | UnsetType = UNSET
    label: Str1_64 | UnsetType = UNSET


class VerdictRule(Struct, **_OPTS):
    expr: Str1_1024
    threshold: Num | None | UnsetType = UNSET
    source: Str512 | UnsetType = UNSET


class Panel(Struct, **_OPTS):
    agree: Count
    of: Positive


class Annotator(Struct, **_OPTS):
    kind: str
    model: Str256 | UnsetType = UNSET
    promptHash: Sha256Uri | UnsetType = UNSET
    rubricDigest: Sha256Uri | UnsetType = UNSET
    panel: Panel | UnsetType = UNSET


class Reasoning(Struct, **_OPTS):
    blob: Sha256Uri
    bytes: Count


class Interval(Struct, **_OPTS):
    low: Num
    high: Num
    level: Level
    method: Str64 | UnsetType = UNSET


class Uncertainty(Struct, **_OPTS):
    stderr: NonNeg | UnsetType = UNSET
    ci: Interval | UnsetType = UNSET


class Usage(Struct, **_OPTS):
    role: str
    model: Str1_256 | UnsetType = UNSET
    input_tokens: Count | UnsetType = field(default=UNSET, name="gen_ai.usage.input_tokens")
    output_tokens: Count | UnsetType = field(default=UNSET, name="gen_ai.usage.output_tokens")
    costUsd: NonNeg | UnsetType = UNSET
    costSource: Str128 | UnsetType = UNSET
    cache_read_input_tokens: Count | UnsetType = field(
        default=UNSET, name="gen_ai.usage.cache_read.input_tokens"
    )
    cache_write_input_tokens: Count | UnsetType = field(
        default=UNSET, name="gen_ai.usage.cache_write.input_tokens"
    )
    reasoning_output_tokens: Count | UnsetType = field(
        default=UNSET, name="gen_ai.usage.reasoning.output_tokens"
    )


class TraceLink(Struct, **_OPTS):
    traceId: TraceId
    spanId: SpanId | UnsetType = UNSET


class Unmeasured(Struct, **_OPTS):
    not_measured: Count | UnsetType = UNSET
    not_applicable: Count | UnsetType = UNSET
    skipped: Count | UnsetType = UNSET
    error: Count | UnsetType = UNSET
    pending: Count | UnsetType = UNSET


class Aggregation(Struct, **_OPTS):
    strategy: str
    rulePath: str
    measured: Count
    total: Count
    threshold: Num | None | UnsetType = UNSET
    score: Num | None | UnsetType = UNSET
    minimumMeasuredShare: Unit | UnsetType = UNSET
    unmeasured: Unmeasured | UnsetType = UNSET
    decisive: Annotated[list[str], Meta(max_length=1024)] | UnsetType = UNSET  # resultIds: Python


class Component(Struct, **_OPTS):
    weight: NonNeg
    required: bool


class Taxon(Struct, **_OPTS):
    scheme: str
    id: Str1_64


class Attack(Struct, **_OPTS):
    technique: Str1_256
    taxonomy: Annotated[list[Taxon], Meta(max_length=32)] | UnsetType = UNSET  # uniqueItems: Python
    success: bool | None | UnsetType = UNSET


class ResultLine(Struct, **_OPTS):
    """One line of results.ndjson, as the reader schema takes it (but for the rules :func:`typed` checks)."""

    schemaVersion: str  # pattern: Python
    resultId: str  # pattern: Python
    caseId: Str1_256  # text: Python
    path: Str1_1024  # text: Python
    evaluator: Evaluator
    state: State
    parentResultId: str | None | UnsetType = UNSET  # resultId: Python
    trial: Trial | UnsetType = UNSET
    trials: Trials | UnsetType = UNSET
    reason: Str1_4096 | UnsetType = UNSET
    scores: Annotated[list[Score], Meta(max_length=256)] | UnsetType = UNSET
    verdictRule: VerdictRule | UnsetType = UNSET
    annotator: Annotator | UnsetType = UNSET
    reasoning: Reasoning | UnsetType = UNSET
    uncertainty: Uncertainty | None | UnsetType = UNSET
    usage: Annotated[list[Usage], Meta(min_length=1, max_length=8)] | UnsetType = UNSET
    traceLink: TraceLink | UnsetType = UNSET
    aggregation: Aggregation | UnsetType = UNSET
    component: Component | UnsetType = UNSET
    evidence: Annotated[list[str], Meta(max_length=256)] | UnsetType = UNSET  # evidenceIds: Python
    ext: dict | UnsetType = UNSET
    lane: str | UnsetType = UNSET  # laneName: Python
    severity: str | UnsetType = UNSET
    durationMs: NonNeg | UnsetType = UNSET
    turns: Positive | UnsetType = UNSET
    attack: Attack | UnsetType = UNSET
    startedAt: str | UnsetType = UNSET  # timestamp: Python
    endedAt: str | UnsetType = UNSET  # timestamp: Python


# ---------------------------------------------------------------------------------------------

_convert = msgspec.convert
_ValidationError = msgspec.ValidationError
_generic = None


def typed(doc: Any) -> ResultLine | None:
    """``doc`` as a :class:`ResultLine` when the typed path proves it valid against the reader schema, else None
    (then it may still be valid: :func:`reader_valid` asks the generic validator)."""
    try:
        line = _convert(doc, ResultLine)
    except (_ValidationError, TypeError, ValueError, OverflowError, RecursionError):
        return None
    # the schema's allOf
    if line.state in TYPED_ABSENCES and (line.reason is UNSET or line.scores is not UNSET):
        return None  # RES-2: a typed absence says why, and carries no scores
    if line.trial is not UNSET and line.trials is not UNSET:
        return None  # not both trial and trials
    # the patterns msgspec was not asked to check (see the module docstring)
    v = line.schemaVersion
    if v != "1.0" and _SV(v) is None:
        return None
    if _RID(line.resultId) is None:
        return None
    v = line.caseId
    if not v.isprintable() and _TEXT(v) is None:
        return None
    v = line.path
    if not v.isprintable() and _TEXT(v) is None:
        return None
    v = line.parentResultId
    if v is not None and v is not UNSET and _RID(v) is None:
        return None
    agg = line.aggregation
    if agg is not UNSET and agg.decisive:
        for v in agg.decisive:
            if _RID(v) is None:
                return None
    if line.evidence:
        for v in line.evidence:
            if _EID(v) is None:
                return None
    v = line.lane
    if v is not UNSET and _ID(v) is None:
        return None
    v = line.startedAt
    if v is not UNSET and _TS(v) is None:
        return None
    w = line.endedAt
    if w is not UNSET and w != v and _TS(w) is None:
        return None
    # uniqueItems
    attack = line.attack
    if attack is not UNSET:
        tax = attack.taxonomy
        if tax is not UNSET and len(tax) > 1 and len({(t.scheme, t.id) for t in tax}) != len(tax):
            return None  # items may repeat: the generic validator compares them whole (unknown members too)
    return line


def reader_valid(doc: Any) -> bool:
    """Exactly ``validator("result", "reader")(doc) is None``: True when :func:`typed` accepts ``doc``, else the
    generic validator's answer."""
    if typed(doc) is not None:
        return True
    global _generic
    if _generic is None:
        _generic = validator("result", "reader")
    return _generic(doc) is None
