"""Typed models of every AEF 1.0 document (msgspec structs), following ``schemas/writer`` field by field.

They give typed access for code that builds or reads runs; they do **not** validate: patterns, bounds and the
rules across fields stay with the compiled JSON schemas (:func:`aefgate.formats.aef.schema.validator`) and the
run verifier. A model only refuses what its types cannot hold (a member it does not know, a wrong JSON type, an
enum value the writer schema does not list).

Conventions:

- Python attributes are snake_case; each is encoded under the schema's name (camelCase, ``N``, ``_type``,
  ``gen_ai.usage.input_tokens`` ...).
- A member the schema makes optional defaults to :data:`msgspec.UNSET`, so that encoding omits it; a member that
  may be ``null`` is typed ``... | None`` and encodes ``None`` as ``null`` (``parentResultId: null``). A required
  member has no default (every struct is keyword-only).
- JSON numbers are ``int | float`` so that an integer stays an integer when a document is read and written back.
- ``ext`` (and other open objects: ``run.config``, ``externalIds``) stay plain ``dict``.

:func:`to_dict` turns a model into JSON values (``msgspec.to_builtins``), :func:`from_dict` a dict into a model
(``msgspec.convert``; raises :class:`msgspec.ValidationError`).
"""

from __future__ import annotations

from typing import Any, Literal, Type, TypeVar, Union

import msgspec
from msgspec import UNSET, UnsetType, field

__all__ = [
    "UNSET",
    "UnsetType",
    "to_dict",
    "from_dict",
    "DOCUMENT_MODELS",
    # run.json
    "Run",
    "Producer",
    "Runtime",
    "Subject",
    "SubjectTelemetry",
    "Deployment",
    "Suite",
    "ExecutionPolicy",
    "Judge",
    "Calibration",
    "Otel",
    "CostPolicy",
    "Provenance",
    "Execution",
    "Imported",
    "Threshold",
    # results.ndjson
    "Result",
    "Trials",
    "Evaluator",
    "Score",
    "VerdictRule",
    "Annotator",
    "Panel",
    "Reasoning",
    "Interval",
    "Uncertainty",
    "Usage",
    "TraceLink",
    "Aggregation",
    "Unmeasured",
    "Component",
    "Attack",
    "TaxonomyId",
    # metrics.json
    "Metrics",
    "Metric",
    "Scale",
    # summary.json
    "Summary",
    "SummaryLane",
    "SummaryEntry",
    "SummaryAggregate",
    "Cost",
    # evidence.ndjson
    "Evidence",
    "EvidenceLink",
    # gates.ndjson
    "GateDecision",
    "GateRule",
    "GateInputs",
    "RunPointer",
    # seal.json
    "Seal",
    "SealSubject",
    "Digest",
    "SealPredicate",
    "PredicateProducer",
    "PredicateSubject",
    "PredicateDeployment",
    "PredicateSuite",
    "PredicateJudge",
    # overlays
    "OverlayEvent",
    "OverlayTarget",
    "TrustedIdentity",
    "OverlaySeal",
    "OverlaySealSubject",
    "OverlaySealPredicate",
    "PreviousSeal",
    # trust policy
    "TrustPolicy",
    "TrustKey",
]

Number = Union[int, float]
SchemaVersion = Literal["1.0"]
Ext = dict[str, Any]

State = Literal[
    "passed",
    "failed",
    "warn",
    "inconclusive",
    "scored",
    "not_measured",
    "not_applicable",
    "skipped",
    "error",
    "pending",
]
Severity = Literal["none", "low", "medium", "high", "critical"]
TrialAggregation = Literal["MajorityVote", "AllPass", "AnyPass", "Mean", "Median", "Max", "PassAtK", "AtLeast"]
UsageRole = Literal["agent", "judge", "attacker", "other"]


class _Model(
    msgspec.Struct,
    kw_only=True,
    omit_defaults=True,
    forbid_unknown_fields=True,
    rename="camel",
):
    """Base of every model: keyword-only, absent members omitted, unknown members refused, camelCase names."""


M = TypeVar("M", bound=msgspec.Struct)


def to_dict(model: msgspec.Struct) -> dict:
    """The model as JSON values (dicts, lists, str, int, float, bool, None); absent members omitted."""
    return msgspec.to_builtins(model)


def from_dict(cls: Type[M], d: Any) -> M:
    """``d`` (JSON values) as a ``cls`` model. Raises :class:`msgspec.ValidationError` when it does not fit."""
    return msgspec.convert(d, cls)


# -- common ----------------------------------------------------------------------------------------------------------


class TrustedIdentity(_Model):
    identity: str
    assurance: Literal["self-attested", "signed", "authenticated"]


class RunPointer(_Model):
    run_id: str
    run_hash: str


# -- run.json ----------------------------------------------------------------------------------------------------------


class Runtime(_Model):
    name: str
    version: Union[str, UnsetType] = UNSET


class Producer(_Model):
    name: str
    version: str
    runtime: Union[Runtime, UnsetType] = UNSET


class SubjectTelemetry(_Model):
    agent_id: Union[str, UnsetType] = UNSET
    service_name: Union[str, UnsetType] = UNSET


class Subject(_Model):
    ref: str
    kind: Literal["agent", "workflow", "model", "endpoint", "mcp-server", "other"]
    version: Union[str, UnsetType] = UNSET
    environment: Union[str, UnsetType] = UNSET
    external_ids: Union[dict[str, Union[str, None]], UnsetType] = UNSET
    telemetry: Union[SubjectTelemetry, UnsetType] = UNSET


class Deployment(_Model):
    ref: str
    environment: Union[str, UnsetType] = UNSET
    endpoint: Union[str, UnsetType] = UNSET
    external_ids: Union[dict[str, Union[str, None]], UnsetType] = UNSET


class ExecutionPolicy(_Model):
    trials_per_case: int
    require_passes: Union[int, UnsetType] = UNSET
    aggregation: Union[TrialAggregation, UnsetType] = UNSET
    k: Union[int, UnsetType] = UNSET


class Suite(_Model):
    ref: str
    version: str
    digest: Union[str, UnsetType] = UNSET
    frozen: Union[bool, UnsetType] = UNSET
    execution_policy: Union[ExecutionPolicy, UnsetType] = UNSET


class Calibration(_Model):
    label_set: str
    n: int
    measured_at: str
    accuracy: Union[Number, UnsetType] = UNSET
    kappa: Union[Number, UnsetType] = UNSET
    dangerous_errors: Union[int, UnsetType] = UNSET


class Judge(_Model):
    model: str
    provider: Union[str, UnsetType] = UNSET
    mode: Union[Literal["single", "panel", "primary", "shadow", "other"], UnsetType] = UNSET
    panel_size: Union[int, UnsetType] = UNSET
    rubric_digest: Union[str, UnsetType] = UNSET
    calibration: Union[Calibration, UnsetType] = UNSET


class Threshold(_Model):
    """One entry of ``run.config.thresholds`` (``config`` itself is an open object, kept as a dict)."""

    op: Literal[">=", ">", "<=", "<", "=="]
    value: Number


class Otel(_Model):
    semconv_version: Union[str, UnsetType] = UNSET
    dialects: Union[list[str], UnsetType] = UNSET
    schema_urls: Union[list[str], UnsetType] = UNSET


class CostPolicy(_Model):
    max_usd: Union[Number, UnsetType] = UNSET
    price_table: Union[str, UnsetType] = UNSET


class Provenance(_Model):
    plan_id: str
    plan_digest: str
    job_id: str
    runner_id: str


class Execution(_Model):
    target_mode: Literal["live", "replayed", "scripted", "mocked"]
    stimulus: Union[Literal["suite", "generated", "external", "other"], UnsetType] = UNSET


class Imported(_Model):
    from_: str = field(name="from")
    asserted: list[str]


class Run(_Model):
    """``run.json`` (schema ``run``)."""

    schema_version: SchemaVersion
    run_id: str
    status: Literal["running", "completed", "aborted"]
    producer: Producer
    subject: Subject
    started_at: str
    execution: Execution
    abort_reason: Union[str, UnsetType] = UNSET
    deployment: Union[Deployment, UnsetType] = UNSET
    suite: Union[Suite, UnsetType] = UNSET
    judges: Union[list[Judge], UnsetType] = UNSET
    config: Union[dict[str, Any], UnsetType] = UNSET
    ended_at: Union[str, UnsetType] = UNSET
    otel: Union[Otel, UnsetType] = UNSET
    content_capture: Union[Literal["off", "on"], UnsetType] = UNSET
    cost_policy: Union[CostPolicy, UnsetType] = UNSET
    ext: Union[Ext, UnsetType] = UNSET
    provenance: Union[Provenance, UnsetType] = UNSET
    imported: Union[Imported, UnsetType] = UNSET


# -- results.ndjson ----------------------------------------------------------------------------------------------------


class Trials(_Model):
    n: int
    passed: int
    aggregation: TrialAggregation
    agree: bool
    k: Union[int, UnsetType] = UNSET


class Evaluator(_Model):
    id: str
    version: Union[str, UnsetType] = UNSET


class Score(_Model):
    metric: str
    value: Number
    normalized: Union[Number, None, UnsetType] = UNSET
    label: Union[str, UnsetType] = UNSET


class VerdictRule(_Model):
    expr: str
    threshold: Union[Number, None, UnsetType] = UNSET
    source: Union[str, UnsetType] = UNSET


class Panel(_Model):
    agree: int
    of: int


class Annotator(_Model):
    kind: Literal["CODE", "LLM", "HUMAN", "HYBRID", "OTHER"]
    model: Union[str, UnsetType] = UNSET
    prompt_hash: Union[str, UnsetType] = UNSET
    rubric_digest: Union[str, UnsetType] = UNSET
    panel: Union[Panel, UnsetType] = UNSET


class Reasoning(_Model):
    blob: str
    bytes: int


class Interval(_Model):
    low: Number
    high: Number
    level: Number
    method: Union[str, UnsetType] = UNSET


class Uncertainty(_Model):
    stderr: Union[Number, UnsetType] = UNSET
    ci: Union[Interval, UnsetType] = UNSET


class Usage(_Model):
    """What one party consumed: on a result line (``usage[]``) and in the summary (``usage[]``)."""

    role: UsageRole
    model: Union[str, UnsetType] = UNSET
    input_tokens: Union[int, UnsetType] = field(default=UNSET, name="gen_ai.usage.input_tokens")
    output_tokens: Union[int, UnsetType] = field(default=UNSET, name="gen_ai.usage.output_tokens")
    cache_read_input_tokens: Union[int, UnsetType] = field(
        default=UNSET, name="gen_ai.usage.cache_read.input_tokens"
    )
    cache_write_input_tokens: Union[int, UnsetType] = field(
        default=UNSET, name="gen_ai.usage.cache_write.input_tokens"
    )
    reasoning_output_tokens: Union[int, UnsetType] = field(
        default=UNSET, name="gen_ai.usage.reasoning.output_tokens"
    )
    cost_usd: Union[Number, UnsetType] = UNSET
    cost_source: Union[str, UnsetType] = UNSET


class TraceLink(_Model):
    trace_id: str
    span_id: Union[str, UnsetType] = UNSET


class Unmeasured(_Model):
    """``aggregation.unmeasured``: children not measured, by state (snake_case names, as the states)."""

    not_measured: Union[int, UnsetType] = field(default=UNSET, name="not_measured")
    not_applicable: Union[int, UnsetType] = field(default=UNSET, name="not_applicable")
    skipped: Union[int, UnsetType] = UNSET
    error: Union[int, UnsetType] = UNSET
    pending: Union[int, UnsetType] = UNSET


class Aggregation(_Model):
    strategy: Literal["WeightedSum", "Min", "WeightedMedian", "CapByWorst", "MajorityVote", "Own"]
    rule_path: Literal[
        "required-error",
        "nothing-measured",
        "threshold",
        "severity",
        "under-covered",
        "required-not-measured",
        "failure-effect",
    ]
    measured: int
    total: int
    threshold: Union[Number, None, UnsetType] = UNSET
    score: Union[Number, None, UnsetType] = UNSET
    minimum_measured_share: Union[Number, UnsetType] = UNSET
    unmeasured: Union[Unmeasured, UnsetType] = UNSET
    decisive: Union[list[str], UnsetType] = UNSET


class Component(_Model):
    weight: Number
    required: bool


class TaxonomyId(_Model):
    scheme: Literal["owasp-llm", "owasp-agentic", "mitre-atlas", "nist-ai-rmf", "other"]
    id: str


class Attack(_Model):
    technique: str
    taxonomy: Union[list[TaxonomyId], UnsetType] = UNSET
    success: Union[bool, None, UnsetType] = UNSET


class Result(_Model):
    """One line of ``results.ndjson`` (schema ``result``)."""

    schema_version: SchemaVersion
    result_id: str
    case_id: str
    path: str
    evaluator: Evaluator
    state: State
    parent_result_id: Union[str, None, UnsetType] = UNSET
    trial: Union[int, UnsetType] = UNSET
    trials: Union[Trials, UnsetType] = UNSET
    reason: Union[str, UnsetType] = UNSET
    scores: Union[list[Score], UnsetType] = UNSET
    verdict_rule: Union[VerdictRule, UnsetType] = UNSET
    annotator: Union[Annotator, UnsetType] = UNSET
    reasoning: Union[Reasoning, UnsetType] = UNSET
    uncertainty: Union[Uncertainty, None, UnsetType] = UNSET
    usage: Union[list[Usage], UnsetType] = UNSET
    trace_link: Union[TraceLink, UnsetType] = UNSET
    aggregation: Union[Aggregation, UnsetType] = UNSET
    component: Union[Component, UnsetType] = UNSET
    evidence: Union[list[str], UnsetType] = UNSET
    ext: Union[Ext, UnsetType] = UNSET
    lane: Union[str, UnsetType] = UNSET
    severity: Union[Severity, UnsetType] = UNSET
    duration_ms: Union[Number, UnsetType] = UNSET
    turns: Union[int, UnsetType] = UNSET
    attack: Union[Attack, UnsetType] = UNSET
    started_at: Union[str, UnsetType] = UNSET
    ended_at: Union[str, UnsetType] = UNSET


# -- metrics.json ------------------------------------------------------------------------------------------------------


class Scale(_Model):
    min: Number
    max: Number


class Metric(_Model):
    id: str
    kind: Literal["score", "rate", "count", "duration", "cost", "verdict"]
    direction: Literal["higher_better", "lower_better", "none"]
    scale: Union[Literal["unbounded"], Scale]
    unit: Union[str, UnsetType] = UNSET
    description: Union[str, UnsetType] = UNSET


class Metrics(_Model):
    """``metrics.json`` (schema ``metrics``)."""

    schema_version: SchemaVersion
    metrics: list[Metric]
    ext: Union[Ext, UnsetType] = UNSET


# -- summary.json ------------------------------------------------------------------------------------------------------


class SummaryAggregate(_Model):
    method: str
    k: Union[int, UnsetType] = UNSET


class SummaryEntry(_Model):
    metric: str
    path: str
    n: int
    N: int = field(name="N")
    not_measured: int
    value: Union[Number, None]
    verdict: Literal["passed", "failed", "warn", "inconclusive", "not_measured", "scored"]
    stderr: Union[Number, None, UnsetType] = UNSET
    ci: Union[Interval, None, UnsetType] = UNSET
    rule: Union[str, UnsetType] = UNSET
    sum: Union[Number, UnsetType] = UNSET
    sum_sq: Union[Number, UnsetType] = UNSET
    aggregate: Union[SummaryAggregate, UnsetType] = UNSET


class SummaryLane(_Model):
    lane: str
    metrics: list[SummaryEntry]


class Cost(_Model):
    total_usd: Number
    source: Union[str, UnsetType] = UNSET


class Summary(_Model):
    """``summary.json`` (schema ``summary``)."""

    schema_version: SchemaVersion
    run_id: str
    lanes: list[SummaryLane]
    ext: Union[Ext, UnsetType] = UNSET
    cost: Union[Cost, UnsetType] = UNSET
    usage: Union[list[Usage], UnsetType] = UNSET


# -- evidence.ndjson ---------------------------------------------------------------------------------------------------


class EvidenceLink(_Model):
    """Exactly one of ``blob``, ``trace_id`` with ``span_id``, or ``uri`` (the schema checks it)."""

    blob: Union[str, UnsetType] = UNSET
    trace_id: Union[str, UnsetType] = UNSET
    span_id: Union[str, UnsetType] = UNSET
    uri: Union[str, UnsetType] = UNSET


class Evidence(_Model):
    """One line of ``evidence.ndjson`` (schema ``evidence``)."""

    schema_version: SchemaVersion
    evidence_id: str
    kind: Literal[
        "span",
        "tool_call",
        "judge_reasoning",
        "compliance_artifact",
        "document",
        "input",
        "expected",
        "output",
        "transcript",
        "other",
    ]
    link: EvidenceLink
    digest: Union[str, UnsetType] = UNSET
    description: Union[str, UnsetType] = UNSET
    ext: Union[Ext, UnsetType] = UNSET


# -- gates.ndjson ------------------------------------------------------------------------------------------------------


class GateRule(_Model):
    strategy: str
    inputs: Union[list[str], UnsetType] = UNSET


class GateInputs(_Model):
    results: Union[list[str], UnsetType] = UNSET
    requirements: Union[list[str], UnsetType] = UNSET
    baseline_run: Union[RunPointer, UnsetType] = UNSET


class GateDecision(_Model):
    """One line of ``gates.ndjson`` (schema ``gate-decision``)."""

    schema_version: SchemaVersion
    gate_id: str
    decision_id: str
    rule: GateRule
    inputs: GateInputs
    comparability: Literal["comparable", "incomparable", "not_applicable"]
    outcome: Literal["ship", "no_ship", "inconclusive"]
    decided_at: str
    exit_code: Union[int, UnsetType] = UNSET
    decisive: Union[list[str], UnsetType] = UNSET
    ext: Union[Ext, UnsetType] = UNSET


# -- seal.json ---------------------------------------------------------------------------------------------------------


class Digest(_Model):
    sha256: str


class SealSubject(_Model):
    name: str
    digest: Digest


class PredicateProducer(_Model):
    name: str
    version: str


class PredicateSubject(_Model):
    ref: str
    version: Union[str, UnsetType] = UNSET


class PredicateDeployment(_Model):
    ref: str


class PredicateSuite(_Model):
    ref: str
    version: str
    digest: Union[str, UnsetType] = UNSET


class PredicateJudge(_Model):
    model: str
    rubric_digest: Union[str, UnsetType] = UNSET


class SealPredicate(_Model):
    schema_version: SchemaVersion
    run_id: str
    run_hash: str
    producer: PredicateProducer
    subject: PredicateSubject
    closed_at: str
    sealed_by: Literal["producer", "ingest"]
    sealed_at: str
    deployment: Union[PredicateDeployment, None]
    suite: Union[PredicateSuite, None]
    judges: list[PredicateJudge]


class Seal(_Model):
    """``seal.json``: an in-toto Statement v1 with the AEF evidence predicate (schema ``seal``)."""

    type_: Literal["https://in-toto.io/Statement/v1"] = field(name="_type")
    subject: list[SealSubject]
    predicate_type: Literal["https://agenteval.dev/aef/1/evidence"]
    predicate: SealPredicate


# -- overlays ----------------------------------------------------------------------------------------------------------


class OverlayTarget(_Model):
    run: str
    run_hash: Union[str, UnsetType] = UNSET
    result: Union[str, UnsetType] = UNSET
    requirement: Union[str, UnsetType] = UNSET
    blob: Union[str, UnsetType] = UNSET


class OverlayEvent(_Model):
    """One line of ``overlays/events.ndjson`` (schema ``overlay-event``)."""

    schema_version: SchemaVersion
    event_id: str
    kind: Literal[
        "approve",
        "reject",
        "override",
        "adjudicate",
        "acknowledge",
        "accept_baseline",
        "waive",
        "annotate",
        "redact",
    ]
    target: OverlayTarget
    by: TrustedIdentity
    at: str
    state: Union[State, UnsetType] = UNSET
    reason: Union[str, UnsetType] = UNSET
    expires: Union[str, UnsetType] = UNSET
    ext: Union[Ext, UnsetType] = UNSET


class OverlaySealSubject(_Model):
    name: Literal["overlays/events.ndjson"]
    digest: Digest


class PreviousSeal(_Model):
    path: str
    sha256: str


class OverlaySealPredicate(_Model):
    schema_version: SchemaVersion
    run_id: str
    batch: int
    offset: int
    length: int
    previous: Union[PreviousSeal, None]
    run_hash: str


class OverlaySeal(_Model):
    """``overlays/seal-<nnnn>.json``: an in-toto Statement v1 over one batch (schema ``overlay-seal``)."""

    type_: Literal["https://in-toto.io/Statement/v1"] = field(name="_type")
    subject: list[OverlaySealSubject]
    predicate_type: Literal["https://agenteval.dev/aef/1/overlay-batch"]
    predicate: OverlaySealPredicate


# -- trust policy ------------------------------------------------------------------------------------------------------


class TrustKey(_Model):
    identity: str
    public_key: str
    may: Union[list[str], UnsetType] = UNSET


class TrustPolicy(_Model):
    """A trust policy (schema ``trust-policy``): the keys a verifier trusts ([SIG-4])."""

    keys: list[TrustKey]
    schema_version: Union[SchemaVersion, UnsetType] = UNSET


#: schema name -> the model of one document (or one NDJSON line) of that schema
DOCUMENT_MODELS: dict[str, type[msgspec.Struct]] = {
    "run": Run,
    "result": Result,
    "metrics": Metrics,
    "summary": Summary,
    "evidence": Evidence,
    "gate-decision": GateDecision,
    "seal": Seal,
    "overlay-event": OverlayEvent,
    "overlay-seal": OverlaySeal,
    "trust-policy": TrustPolicy,
}
