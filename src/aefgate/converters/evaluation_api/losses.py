"""What the Evaluation API converter does not carry, as data (docs/mappings/evaluation-api.md, "What does not carry
over"; aefgate's own page: no AEF interop page maps this API)."""

from __future__ import annotations

from aefgate.converters.registry import Loss

__all__ = ["LOSSES_FROM_EVALUATION_API", "LOSSES_TO_EVALUATION_API"]

_OFF = {"run.contentCapture": ("off",)}

#: AEF -> Evaluation API (a run aefgate did not import from the API; an imported one comes back whole)
LOSSES_TO_EVALUATION_API: tuple[Loss, ...] = (
    Loss("The run header beyond the session: producer, suite, judges, execution, provenance, config, times and "
         "imported, status and abortReason (a response is one session's insights)",
         ("run.json:producer.**", "run.json:suite.**", "run.json:judges", "run.json:execution.**",
          "run.json:provenance.**", "run.json:config.**", "run.json:startedAt", "run.json:endedAt",
          "run.json:status", "run.json:abortReason",
          "run.json:imported.**", "run.json:deployment.**", "run.json:costPolicy.**", "run.json:otel.**",
          "run.json:ext.**", "run.json:subject.version", "run.json:subject.environment",
          "run.json:subject.externalIds.**", "run.json:subject.telemetry.**"), source="aefgate"),
    Loss("Metric declarations other than the ranges of boolean and number insights, the summary, gate decisions",
         ("file:metrics.json", "file:summary.json", "file:gates.ndjson"), source="aefgate"),
    Loss("The result tree: parentResultId, component and aggregation (a deeper path is an insight of the group "
         "named by its first level)", ("results:parentResultId", "results:component.**", "results:aggregation.**"),
         source="aefgate"),
    Loss("Trial lines (their rollup is the case's result, [RES-8]) and the rollups' trials",
         ("results:trial", "results:trials.**"), source="aefgate"),
    Loss("The state beyond the value: passed and failed become a boolean, any other measured state a number or "
         "text, every typed absence null (not_measured on the way back), its reason the reasoning",
         ("results:state", "results:reason"), source="aefgate"),
    Loss("Scores after the first, score labels and normalized values; a score that is not an integer becomes text "
         "(no score on the way back)", ("results:scores", "results:scores[].metric", "results:scores[].value",
                                  "results:scores[].label", "results:scores[].normalized"), source="aefgate"),
    Loss("Evaluator version, annotator, severity, verdict rule, uncertainty, usage, duration, turns, attack, lane, "
         "trace link, start time, evidence and ext of a line",
         ("results:evaluator.version", "results:annotator.**", "results:severity", "results:verdictRule.**",
          "results:uncertainty.**", "results:usage", "results:usage(totals)", "results:usage[].costSource",
          "results:durationMs", "results:turns", "results:attack", "results:lane", "results:traceLink.**",
          "results:startedAt", "results:evidence", "results:ext.**", "results:endedAt", "results:reasoning.**",
          "results:resultId", "results:order"),
         source="aefgate"),
    Loss("Evidence records and blobs other than reasoning, logs and traces, ext files, the seal, overlays and "
         "signatures", ("file:evidence.ndjson", "file:blobs", "file:logs.otlp.jsonl", "file:traces.otlp.jsonl",
                        "file:ext",
                        "file:seal.json", "file:overlays", "file:attestation.dsse.json"), source="aefgate"),
)

#: Evaluation API -> AEF
LOSSES_FROM_EVALUATION_API: tuple[Loss, ...] = (
    Loss("The order sections (and a group's insights) were listed in, when it is not ascending by order: they are "
         "read, and written back, ascending (EVAPI-3)", (), source="aefgate"),
    Loss("Under option 'content_capture=off': the reasoning, the evidence quote, the featured text, and text and list "
         "values (a run that keeps no content keeps none of them; the export leaves such an insight out)",
         ("response:results*.reasoning", "response:results*.evidence", "response:results*.text",
          "response:results*.value", "response:results*", "response:featured.text", "response:(record)"),
         when={"content_capture": ("off",)}, source="aefgate"),
    Loss("The cross-session endpoints (GET /api/evaluation/insights, /api/evaluation/aggregations) are not read: "
         "a run holds sessions", (), source="aefgate"),
)
