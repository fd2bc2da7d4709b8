"""What the OpenTelemetry converter does not carry, as data: interop/opentelemetry.md, "What does not carry over"
(each item; the fields are those the page's checked examples name for it, `aef-otel-aef/expected.json`)."""

from __future__ import annotations

from aefgate.converters.registry import Loss

__all__ = ["LOSSES_FROM_OTEL", "LOSSES_TO_OTEL"]

#: AEF -> OpenTelemetry (the page's first list)
LOSSES_TO_OTEL: tuple[Loss, ...] = (
    Loss("The run id and the result path.", ("run.json:runId", "results:path", "results:resultId")),
    Loss("The result tree (parentResultId, component, aggregation).",
         ("results:parentResultId", "results:component.**", "results:aggregation.**")),
    Loss("A score's own label, because the event's label holds the state.",
         ("results:scores[].label", "results:scores[].normalized")),
    Loss("Trials and their rollups.", ("results:trial", "results:trials.**")),
    Loss("Thresholds, verdict rules and uncertainty.",
         ("run.json:config.thresholds.**", "results:verdictRule.**", "results:uncertainty.**")),
    Loss("Evaluator and annotator identity, until PR #359 lands.", ("results:evaluator.**", "results:annotator.**")),
    Loss("Metric declarations, the summary and gate decisions.",
         ("file:metrics.json", "file:summary.json", "file:gates.ndjson")),
    Loss("The run header: producer, suite and its digest, judges and their calibration, execution.targetMode.",
         ("run.json:producer.**", "run.json:suite.**", "run.json:judges", "run.json:execution.**")),
    Loss("Evidence digests, the seal, overlays and signatures.",
         ("file:evidence.ndjson", "file:blobs", "results:evidence", "file:seal.json", "file:overlays",
          "file:attestation.dsse.json")),
    # what the page's table says is lost, beyond its list (aef-otel-aef/expected.json names these too)
    Loss("Several scores of one line as one result: each score is its own event, and comes back as its own line",
         ("results:scores", "results:scores[].metric"), source="aefgate"),
    Loss("severity, durationMs, turns, attack and lane (the table: none)",
         ("results:severity", "results:durationMs", "results:turns", "results:attack", "results:lane"),
         source="aefgate"),
    Loss("The reasoning blob: its text travels as the explanation (the table: lossy), and comes back as reason",
         ("results:reasoning.**", "results:reason"), source="aefgate"),
    Loss("A line's start time, when it also has an end time (timeUnixNano holds one time)",
         ("results:startedAt",), source="aefgate"),
    Loss("The traces and the usage on their spans: the export writes the evaluation events only",
         ("file:traces.otlp.jsonl", "results:usage", "results:usage(totals)", "results:usage[].costSource"),
         source="aefgate"),
    Loss("The logs the run already holds (logs.otlp.jsonl) and files under ext/: the export writes one event per "
         "result line", ("file:logs.otlp.jsonl", "file:ext"), source="aefgate"),
    Loss("A line's ext", ("results:ext.**",), source="aefgate"),
    Loss("The rest of the run header the page's list does not name: the deployment, the config but its thresholds, "
         "the cost policy, the otel block, the subject's version, environment, external ids and telemetry agent id, "
         "imported and ext, and how the run ended (status, abortReason: the import writes a completed run); the "
         "events carry the subject's service name only, as resource service.name",
         ("run.json:deployment.**", "run.json:config.**", "run.json:costPolicy.**", "run.json:otel.**",
          "run.json:subject.version", "run.json:subject.environment", "run.json:subject.externalIds.**",
          "run.json:subject.telemetry.agentId", "run.json:imported.**", "run.json:ext.**", "run.json:status",
          "run.json:abortReason"), source="aefgate"),
    Loss("A reason, on a run that keeps no content (OT-3: no explanation is written; a typed absence comes back "
         "with a reason saying so)", ("results:reason",), when={"run.contentCapture": ("off",)}, source="aefgate"),
)

#: OpenTelemetry -> AEF (the page's second list)
LOSSES_FROM_OTEL: tuple[Loss, ...] = (
    Loss("The run and the result path: the event has no attribute for either, so an importer builds runId and path "
         "itself, and the result id differs from the original's.",
         ("run.json:runId", "results:path", "results:resultId")),
    Loss("The metric's kind, direction and range.", ("file:metrics.json",)),
    Loss("The evaluated operation's start time, when only the event's time is known.", ("results:startedAt",)),
    Loss("The order of the lines where a rollup came before its trials: the import writes a case's rollups after "
         "every trial line (RES-8), last", ("results:order",), source="aefgate"),
    Loss("The run's own start and end: the import takes them from its events' times (the first and the last)",
         ("run.json:startedAt", "run.json:endedAt"), source="aefgate"),
)
