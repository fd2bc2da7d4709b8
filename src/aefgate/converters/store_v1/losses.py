"""What the store v1 migration does not carry into AEF, as data (``docs/mappings/store-v1.md``, "What does not carry
over": each item there is one entry here, in order). ``source="page"`` marks what spec 07 §7.5 itself says is left
out; ``"aefgate"`` aefgate's own choices where §7.5 is informative or silent.

The migration is one way (store v1 is a closed legacy format: nothing writes it any more), so no round trip checks
these against fields: they are stated, and name no field of a run."""

from __future__ import annotations

from aefgate.converters.registry import Loss

__all__ = ["LOSSES_FROM_STORE_V1", "WHY_NO_EXPORT"]

#: why there is no AEF -> store v1 converter (``aefgate formats`` shows it)
WHY_NO_EXPORT = ("store v1 is AgentEval's closed legacy output store: AgentEval itself no longer writes it (its "
                 "runs are AEF since 1.0), so nothing would read a run written back into it; the migration is one "
                 "way (spec 07 §7.5)")

#: store v1 -> AEF (docs/mappings/store-v1.md, "What does not carry over")
LOSSES_FROM_STORE_V1: tuple[Loss, ...] = (
    Loss("The machine name (environment.machine, and any other manifest value equal to it): never copied, it "
         "identifies a person's computer."),
    Loss("A suite, a deployment and the provider: store v1 records none, so run.json has no suite and no "
         "deployment, and execution.targetMode and contentCapture are the migration's claims (imported.asserted)."),
    Loss("The store's hash chain (the manifest's contentHash, a compliance document's manifestHash) is not an AEF "
         "seal: both are kept as values in ext; the ingest seal covers the run from its migration on."),
    Loss("The eval-result tree below its root (subResults, dimensions, evidence items, recommendations, provenance) "
         "gives no result lines: §7.5 maps a scenario's root and its assertions. With contentCapture on the whole "
         "tree is kept as it was, as the scenario's E-s<n>-eval evidence; with off it is not kept.",
         source="aefgate"),
    Loss("With contentCapture off: inputs, outputs, the eval-result tree's JSON, the agent trace, the run folder's "
         "other files, the stimulus hash and the judges' summaries (a typed absence then gets a generated reason).",
         source="aefgate"),
    Loss("A subject version that is not an exact version ([ENC-10]): no subject.version (the value stays in ext), "
         "so the run serves no checkpoint lane.", source="page"),
    Loss("A judge's rubric digest that is not a SHA-256 (AtomicLlmEval's 16-hex prompt hash): no "
         "judges[].rubricDigest and no annotator.rubricDigest (the value stays in the scenario's comparability "
         "facts, in ext).", source="aefgate"),
    Loss("A scenario's zero estimatedCost and zero duration (AgentEval's defaults when nothing was recorded): no "
         "usage and no durationMs on the root.", source="aefgate"),
    Loss("The token counts of the eval-result tree's provenance (tokensUsed, input and output together, of an "
         "unnamed party): no usage entry; they stay in the tree's evidence with contentCapture on.",
         source="aefgate"),
    Loss("A reason over 4,096 characters (a judge's summary, an assertion's message) is cut to AEF's bound.",
         source="aefgate"),
    Loss("The agent trace as OpenTelemetry spans: it is kept as its original bytes (transcript evidence), not "
         "converted into traces.otlp.jsonl.", source="aefgate"),
    Loss("Workspace files that belong to no run (solution.json, subject.json, history.jsonl, baselines, the runs "
         "index, config, red-team campaigns, benchmarks, projects, the portal): not migrated; the history and the "
         "index repeat what the runs hold.", source="aefgate"),
    Loss("In a run folder, files under scenarios/ that are not scenario files (*.json), hidden files and AgentEval's "
         "temporary *.tmp files: not kept (the other files are kept as document evidence with contentCapture on).",
         source="aefgate"),
)
