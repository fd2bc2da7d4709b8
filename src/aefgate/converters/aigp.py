"""AIGP grader types (RFC-032 §5: CODE, MODEL, HUMAN, COMPOSITE) for AEF annotators: the one place every converter
asks (docs/mappings/aigp.md).

- :func:`grader_of` (exporters): a result line's grader, ``{"type": ...}`` and, for a MODEL grader whose judge has no
  calibration in the run, ``"confidence": "UNCALIBRATED"`` (RFC-032 §5.2: "Uncalibrated MODEL graders MUST be
  marked"; [RUN-9]: a judge's ``calibration`` is in ``run.json`` ``judges[]``).
- :func:`annotator_kind` (importers): the AEF ``annotator.kind`` a source's own grader vocabulary names (AIGP types,
  OpenTelemetry's proposed ``gen_ai.evaluation.evaluator.type``).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

__all__ = [
    "KIND_TO_GRADER",
    "GRADER_TO_KIND",
    "OTEL_EVALUATOR_TYPES",
    "annotator_kind",
    "calibrated_models",
    "grader_of",
    "otel_attributes",
]

#: AEF annotator.kind -> AIGP grader type (OTHER has none: an unknown grader is never given a type)
KIND_TO_GRADER = {"CODE": "CODE", "LLM": "MODEL", "HUMAN": "HUMAN", "HYBRID": "COMPOSITE"}
#: AIGP grader type -> AEF annotator.kind
GRADER_TO_KIND = {v: k for k, v in KIND_TO_GRADER.items()}
#: OpenTelemetry's proposed gen_ai.evaluation.evaluator.type (semantic-conventions PR #359) -> annotator.kind
OTEL_EVALUATOR_TYPES = {"llm_judge": "LLM", "deterministic": "CODE", "human": "HUMAN"}
UNCALIBRATED = "UNCALIBRATED"


def calibrated_models(run: Mapping[str, Any]) -> frozenset[str]:
    """The models of the run's judges that carry a ``calibration`` ([RUN-9])."""
    return frozenset(j.get("model") for j in run.get("judges") or ()
                     if isinstance(j, Mapping) and j.get("calibration") and isinstance(j.get("model"), str))


def grader_of(line: Mapping[str, Any], calibrated: Iterable[str] = frozenset()) -> dict | None:
    """The AIGP grader of a result line: its annotator's kind mapped (``KIND_TO_GRADER``); a node with children
    (``aggregation``) and no annotator of its own is ``COMPOSITE`` (RFC-032 §5.4: it aggregates its children's
    graders, so a tree mixing kinds is COMPOSITE at its root); ``OTHER``, or a leaf with no annotator, has none.
    A MODEL grader is ``UNCALIBRATED`` unless its ``annotator.model`` is a calibrated judge of the run.

    It depends on ``annotator.kind``, ``annotator.model`` and whether the line has an ``aggregation``, nothing else:
    the AEP export caches it by those three (``aep.exporter._Export._grader``); change both together."""
    ann = line.get("annotator")
    kind = ann.get("kind") if isinstance(ann, Mapping) else None
    if kind is None:
        return {"type": "COMPOSITE"} if "aggregation" in line else None
    gtype = KIND_TO_GRADER.get(kind)
    if gtype is None:
        return None
    if gtype == "MODEL" and ann.get("model") not in frozenset(calibrated):
        return {"type": "MODEL", "confidence": UNCALIBRATED}
    return {"type": gtype}


def annotator_kind(value: Any) -> str | None:
    """The annotator.kind a source's grader label names: an AIGP type (``MODEL`` -> ``LLM``, ...) or an OpenTelemetry
    evaluator type (``llm_judge`` -> ``LLM``, ...); None for anything else."""
    if not isinstance(value, str):
        return None
    return GRADER_TO_KIND.get(value) or OTEL_EVALUATOR_TYPES.get(value)


def otel_attributes(grader: Mapping[str, Any] | None) -> list[dict]:
    """The grader as OTLP attributes (``aigp.grader.type``, ``aigp.grader.confidence``): OpenTelemetry has no
    attribute for a grader type yet (PR #359 proposes an evaluator type without COMPOSITE)."""
    if not grader:
        return []
    out = [{"key": "aigp.grader.type", "value": {"stringValue": grader["type"]}}]
    if grader.get("confidence"):
        out.append({"key": "aigp.grader.confidence", "value": {"stringValue": grader["confidence"]}})
    return out
