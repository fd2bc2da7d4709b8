"""What the Inspect converter does not carry, as data: the page's two lists of "What does not carry over"
(interop/inspect.md), each item with the fields the round-trip harness checks it against, and aefgate's own
additions where the page's list is silent (docs/mappings/inspect.md, "What does not carry over"). ``aefgate formats
inspect`` prints these lists; a test compares the page's items with the page.

Field names are the round-trip harness's (:mod:`aefgate.converters.fidelity`): ``run.json:<dotted path>``,
``file:<name>``, ``results:<member>`` for the AEF cycle; ``header:<dotted path>`` and ``samples:<dotted path>`` for
the source cycle (Inspect -> AEF -> Inspect), over the log's header and its samples matched by id and epoch.
"""

from __future__ import annotations

from aefgate.converters.registry import Loss

__all__ = ["LOSSES_FROM_INSPECT", "LOSSES_TO_INSPECT"]

_OFF = {"content_capture": ("off",)}

#: "What does not carry over", AEF -> Inspect (the page's first list, then aefgate's additions)
LOSSES_TO_INSPECT: tuple[Loss, ...] = (
    Loss("The state: Inspect has no verdict, and one unscored value, NaN, for every typed absence",
         ("results:state",)),
    Loss("A typed absence's reason: it travels as the explanation and comes back as a reasoning blob (or not at all, "
         "with contentCapture off), with the state's name as reason", ("results:reason", "results:reasoning"),
         lines="typed_absence"),
    Loss("The result tree and its aggregation, severity, verdict rules, thresholds and uncertainty",
         ("results:parentResultId", "results:component", "results:aggregation", "results:severity",
          "results:verdictRule", "results:uncertainty")),
    Loss("Evaluator and annotator identity: an evaluator comes back as its scorer",
         ("results:evaluator", "results:annotator")),
    Loss("A score's metric and normalized value: a single score's metric comes back as its key, the path",
         ("results:scores[].metric", "results:scores[].normalized")),
    Loss("A line's turns, attack and lane", ("results:turns", "results:attack", "results:lane")),
    Loss("Which line of a case a usage entry was on, and its costSource",
         ("results:usage", "results:usage[].costSource")),
    # a case with several roots has one duration (R7I-5), which comes back on the sample's first line (IN-8)
    Loss("The times and duration of a line that is not the case's root",
         ("results:startedAt", "results:endedAt", "results:durationMs"), lines="not_case_root"),
    Loss("A rollup's n, passed and agree: they come back counted from the epochs' lines",
         ("results:trials.n", "results:trials.passed", "results:trials.agree")),
    Loss("Evidence links and digests, and the case content unless the run captured it; traces and trace links; gate "
         "decisions", ("results:evidence", "results:traceLink", "file:evidence.ndjson", "file:blobs",
                       "file:traces.otlp.jsonl", "file:logs.otlp.jsonl", "file:gates.ndjson")),
    Loss("The seal, signatures and the overlay chain: an Inspect log is mutable",
         ("file:seal.json", "file:attestation.dsse.json", "file:overlays")),
    Loss("The summary (its lanes, sum, sumSq, verdicts, rules and cost) and the metric declarations",
         ("file:summary.json", "file:metrics.json")),
    Loss("The rest of run.json: the subject but its ref (which comes back as model:<ref>), the producer, the "
         "deployment, execution, the judges but their models, imported, the suite's digest and frozen, "
         "requirePasses, config, otel, costPolicy, provenance, contentCapture and ext",
         ("run.json:subject", "run.json:producer", "run.json:deployment", "run.json:execution", "run.json:judges",
          "run.json:imported", "run.json:suite.digest", "run.json:suite.frozen",
          "run.json:suite.executionPolicy.requirePasses", "run.json:config", "run.json:otel", "run.json:costPolicy",
          "run.json:provenance", "run.json:contentCapture", "run.json:ext")),
    # aefgate's additions (docs/mappings/inspect.md): what the page's list does not name
    Loss("A result line's ext: the table does not carry it (Score.metadata carries the state, which comes back as "
         "ext, IN-7)", ("results:ext",), source="aefgate"),
    Loss("Files under ext/ of the run folder", ("file:ext",), source="aefgate"),
    Loss("The reason and reasoning of a line that is not a typed absence: Score.explanation holds one text (the "
         "reason when the line has one, else the reasoning's text), which comes back as a reasoning blob (none with "
         "contentCapture off); the other text is lost", ("results:reason", "results:reasoning"),
         lines="not_typed_absence", source="aefgate"),
    Loss("The order of the result lines: an import writes them in the order the log gives its samples, a case's "
         "rollups after its epochs when the log is a .eval (read case by case) and after all samples when it is a "
         ".json", ("results:order",), source="aefgate"),
)

#: "What does not carry over", Inspect -> AEF (the page's second list, then aefgate's additions)
LOSSES_FROM_INSPECT: tuple[Loss, ...] = (
    Loss("List-valued scores, kept in ext (IN-7)"),
    Loss("Reducers without an AEF value (at_least for a k other than 1 or all, pass_k, collect): kept in ext with "
         "one epoch, refused with more (IN-8, R7I-14)"),
    Loss("working_time", ("samples:working_time",)),
    Loss("Inspect's event transcript as structured events", ("samples:events",)),
    Loss("Groups of runs (eval_set_id, kept in ext)", ("header:eval.eval_set_id",)),
    Loss("Inspect's role names beyond the four AEF roles", ("header:eval.model_roles",)),
    Loss("The case content, when the converter writes contentCapture: off",
         ("samples:input", "samples:target", "samples:output", "samples:messages"), when=_OFF),
    Loss("A sample's metadata, eval.metadata, the plan and the solver",
         ("samples:metadata", "header:eval.metadata", "header:plan", "header:eval.solver",
          "header:eval.solver_args")),
    Loss("Score.explanation and Score.answer, when the converter writes contentCapture: off (IN-7)",
         ("samples:scores.*.explanation", "samples:scores.*.answer"), when=_OFF),
    # aefgate's additions (docs/mappings/inspect.md, "The source cycle"): what Inspect -> AEF -> Inspect does not
    # bring back, found by `aefgate fidelity inspect --from-source` on the real inspect-ai logs
    Loss("The eval's set-up beyond its task, model, judge, epochs and reducer: eval.run_id (the AEF runId comes "
         "back as both eval_id and run_id), task_id, task_version, task_display_name, task_attribs, task_args, "
         "solver_args, scorers, model_args, model_generate_config, the dataset's name and flags, eval.config but "
         "epochs and epochs_reducer, eval.packages (they come back naming the run's producer), tags, metadata and "
         "invalidated, and the revision of the code that ran it (eval.revision)",
         ("header:eval.run_id", "header:eval.task_id", "header:eval.task_version", "header:eval.task_display_name",
          "header:eval.task_attribs", "header:eval.task_args", "header:eval.task_args_passed",
          "header:eval.solver_args_passed", "header:eval.scorers", "header:eval.model_args",
          "header:eval.model_generate_config", "header:eval.dataset", "header:eval.config", "header:eval.packages",
          "header:eval.created", "header:eval.revision", "header:tags", "header:metadata", "header:invalidated"),
         source="aefgate"),
    Loss("A sample id that is a number comes back as its string (an AEF caseId is a string), and a log's status "
         "cancelled as error (AEF has one status for a run that stopped, aborted)",
         ("samples:id", "header:status"), source="aefgate"),
    Loss("The results block as Inspect wrote it: its EvalScores come back recomputed from the lines (IN-3, IN-9), "
         "with the export's names, metrics and params, and no headline",
         ("header:results",), source="aefgate"),
    Loss("The stats but the run's times: usage per role and per model come back from the summary's usage, "
         "connection_limit_history is not kept", ("header:stats",), source="aefgate"),
    Loss("A sample's uuid, store, attachments, turn_count, error_retries, its limit settings and usage "
         "(message_limit, token_limit, token_limit_type, token_limit_usage), and its usage per model and per role "
         "(it comes back summed per role)",
         ("samples:uuid", "samples:store", "samples:attachments", "samples:turn_count", "samples:error_retries",
          "samples:message_limit", "samples:token_limit", "samples:token_limit_type", "samples:token_limit_usage",
          "samples:model_usage", "samples:role_usage"),
         source="aefgate"),
    Loss("A sample's error and limit: they come back as the lines' states and reasons and in ext, not as Inspect's "
         "error and limit objects", ("samples:error", "samples:limit"), source="aefgate"),
    Loss("Score.answer, Score.history and a score's reason: AEF keeps the answer as evidence and the reason in ext, "
         "and the AEF -> Inspect table writes neither back", ("samples:scores.*.answer", "samples:scores.*.history",
                                                               "samples:scores.*.reason"), source="aefgate"),
    Loss("Empty content: an output without choices and an empty explanation give no evidence (IN-8), so they come "
         "back absent", ("samples:output", "samples:scores.*.explanation"), source="aefgate"),
    Loss("A sample stopped before it was scored (empty scores) comes back with one unscored Score (NaN) per scorer, "
         "its error as the explanation: the import writes one error line per scorer for it (IN-8)",
         ("samples:scores",), source="aefgate"),
)
