"""What the ASSERT converter does not carry, as data: interop/assert.md, "What does not carry over" (each item, in the
page's words), then aefgate's own where the page's list is silent (docs/mappings/assert.md).

A round trip keeps what the page says it can: the conversations (checked case by case in the source cycle,
``samples:conversation.*``) and the case ids (the case map: ``results:caseId``, and a case's lines at the same
result ids when the run came from ASSERT); and, for a run imported from ASSERT with ``content_capture`` on, each
test-set row (the seed's title and system prompt) and each score row whole (``samples:test_case.*``,
``samples:verdict.*``: the kit carries them back). Everything else is declared here.
"""

from __future__ import annotations

from aefgate.converters.registry import Loss

__all__ = ["LOSSES_FROM_ASSERT", "LOSSES_TO_ASSERT"]

#: AEF -> ASSERT (the page's first list, then aefgate's)
LOSSES_TO_ASSERT: tuple[Loss, ...] = (
    Loss("Every verdict, score and state AEF holds: ASSERT judges again.",
         ("results:state", "results:scores", "results:scores[].*", "results:severity", "results:reason",
          "results:annotator.**", "results:reasoning.**", "results:verdictRule.**", "results:uncertainty.**",
          "results:attack", "results:evaluator.**", "file:metrics.json", "run.json:judges", "samples:verdict.**")),
    Loss("Typed absences, the result tree, the summary, gate decisions and checkpoints.",
         ("results:(line)", "results:path", "results:resultId", "results:parentResultId", "results:component.**",
          "results:aggregation.**", "results:trial", "results:trials.**", "results:order", "file:summary.json",
          "file:gates.ndjson", "file:checkpoints.ndjson")),
    Loss("The seal, overlays and signatures.", ("file:seal.json", "file:overlays", "file:attestation.dsse.json")),
    Loss("Retrieved context.", ("results:evidence", "file:evidence.ndjson", "file:blobs")),
    Loss("Any conversation the run did not capture.", ("results:(line)",)),
    Loss("A taxonomy, which AEF does not have and ASSERT requires."),
    # aefgate's own (docs/mappings/assert.md)
    Loss("The run header ASSERT records nowhere in a judge-only run: until ASSERT's judge runs there is no "
         "manifest.json, so the run comes back aborted, its times unknown (the import's time, never the files'); "
         "the producer's claims (imported) and the producer (the converter, RUN-15); the stimulus (external); the suite's version and "
         "digest (the digest of the test set written), its name (the kit's) and trials (one conversation per case); "
         "the subject but its ref and kind",
         ("run.json:status", "run.json:abortReason", "run.json:startedAt", "run.json:endedAt",
          "run.json:execution.stimulus", "run.json:suite.version", "run.json:suite.digest", "run.json:suite.frozen",
          "run.json:config.**", "run.json:provenance.**", "run.json:ext.**", "run.json:otel.**",
          "run.json:imported.**", "run.json:producer.**", "run.json:suite.ref", "run.json:suite.executionPolicy.**",
          "run.json:subject.version", "run.json:subject.environment", "run.json:subject.telemetry.**",
          "run.json:subject.externalIds.**"),
         source="aefgate"),
    Loss("Where the subject ran: a judge-only row names only a target, read back as the deployment's endpoint "
         "under the kit's suite name", ("run.json:deployment.**",), source="aefgate"),
    Loss("A line's usage, times, turns, trace link, lane and ext: an inference row has no place for them (a "
         "conversation that did not come from ASSERT is written as a prompt row)",
         ("results:usage", "results:usage(totals)", "results:usage[].costSource", "results:startedAt",
          "results:endedAt", "results:durationMs", "results:turns", "results:traceLink.**", "results:lane",
          "results:ext.**"), source="aefgate"),
    Loss("The run's OpenTelemetry files and its files under ext/: the judge-only run carries the taxonomy only",
         ("file:traces.otlp.jsonl", "file:logs.otlp.jsonl", "file:ext"), source="aefgate"),
)

#: ASSERT -> AEF (the page's second list)
LOSSES_FROM_ASSERT: tuple[Loss, ...] = (
    Loss("The confidence of each category's finding, outside the reasoning blob."),
    Loss("The stratification levels of each case."),
    Loss("The content of systematization.json, the taxonomy and the frozen configuration, which travel as files "
         "that nothing in AEF reads."),
    Loss("Run-level token usage."),
    Loss("A version for the suite or for ASSERT itself: neither is recorded, so the converter supplies both."),
)
