"""What the AEF <-> AEP converter does not carry, as data: docs/mappings/aep.md, "What does not carry over" (each
bullet, backticks removed; a test compares them with the page), with the fields the round-trip harness checks each
against (:mod:`aefgate.converters.fidelity`)."""

from __future__ import annotations

from aefgate.converters.registry import Loss

__all__ = ["LOSSES_FROM_AEP", "LOSSES_TO_AEP"]

# below the full ceiling, or from a run that keeps no content (its free text is never exported, [SEC-6])
_NOT_FULL = ({"max_capture": ("none", "metadata", "redacted")}, {"run.contentCapture": ("off",)})

LOSSES_TO_AEP: tuple[Loss, ...] = (
    Loss('The run header (run.json) except the runId, the agent and the content-capture level: producer, '
         'subject and deployment details, suite and its digest, judges and their calibration (only its effect, '
         'UNCALIBRATED), execution, config and thresholds, cost policy, otel, imported, ext.',
         ("run.json:producer.**", "run.json:subject.**", "run.json:deployment.**", "run.json:suite.**",
          "run.json:judges", "run.json:execution.**", "run.json:config.**", "run.json:costPolicy.**",
          "run.json:otel.**", "run.json:imported.**", "run.json:ext.**", "run.json:provenance.**")),
    Loss('Metric declarations (metrics.json), the summary (summary.json) and gate decisions (gates.ndjson).',
         ("file:metrics.json", "file:summary.json", "file:gates.ndjson")),
    Loss("Evidence: evidence.ndjson, a line's evidence ids, blobs and their digests (the reasoning blob's "
         'digest and size; its text travels as the explanation, AEP-9); traces.otlp.jsonl, logs.otlp.jsonl, '
         'ext/ files.', ("file:evidence.ndjson", "results:evidence", "file:blobs", "results:reasoning.*",
                         "results:reason",
                         "file:traces.otlp.jsonl", "file:logs.otlp.jsonl", "file:ext")),
    Loss('A line\'s ext (except ext."aefgate.aep".guardrail) and annotator.promptHash.',
         ("results:ext.**", "results:annotator.promptHash")),
    Loss('Free text at a metadata ceiling: reason and the reasoning text (and at redacted, what the pipeline '
         'replaces).', ("results:reason",), when=_NOT_FULL),
    Loss('The seal, the attestation and every signature; overlay batches, their seals and signatures, the '
         "decisions' by (their at is the event's time), and the overlay kinds acknowledge, accept_baseline, "
         'redact.', ("file:seal.json", "file:attestation.dsse.json", "file:overlays")),
)
LOSSES_FROM_AEP: tuple[Loss, ...] = (
    Loss('Overlay decisions (aef.decision): not imported (AEP-15).', ("file:overlays",)),
    Loss('What the export did not carry (the list above): the imported run has a new header (producer aefgate, '
         'the asserted fields of AEP-14, imported), declares its metrics as score/none/unbounded, computes a '
         'new summary (lane main unless lines carry lane), and has no gates, evidence, blobs, traces or logs.',
         ("run.json:producer.**", "run.json:imported.**", "run.json:execution.**", "run.json:status",
          "run.json:abortReason", "run.json:startedAt", "run.json:endedAt", "run.json:contentCapture",
          "file:metrics.json",
          "file:summary.json", "file:gates.ndjson", "file:evidence.ndjson",
          "file:blobs", "file:traces.otlp.jsonl", "file:logs.otlp.jsonl")),
    Loss('reason when it did not come through: it becomes not exported (AEP capture <level>) on a line that '
         'needs one ([RES-2]) and is absent otherwise; an explanation taken from the reasoning blob comes back '
         'as reason (cut to 4096 characters).', ("results:reason",), when=_NOT_FULL),
    Loss("The envelope's id, seq, epoch, cause, severity, source and capture."),
    Loss("The order of the lines in results.ndjson (AEP-15: trees whole, rollups last) and a root's parentResultId: "
         "null (written absent: the same meaning).", ("results:order", "results:parentResultId"), lines="root"),
    Loss('At a none ceiling there is no data: every event comes back as a line of its case named evaluation '
         '(evaluation#2, ...; feedback, guardrail for the other types), not_measured, with reason the event '
         'carries no score.', ("results:**",), when={"max_capture": ("none",)}),
    Loss('A label over 64 characters and an explanation over 4096 characters (cut).',
         ("results:scores[].label",)),
    Loss('A feedback correction under a metadata capture.'),
    Loss('Guardrail categories without a score (kept only in ext).'),
    Loss('The cause-linked assessed event.'),
)
