"""What the Inspect converter does not carry, as data: the page's two lists of "What does not carry over"
(interop/inspect.md), each item with the fields the round-trip harness checks it against, and aefgate's own
additions where the page's list is silent (docs/mappings/inspect.md, "What does not carry over"). ``aefgate formats
inspect`` prints these lists; a test compares the page's items with the page.

Field names are the round-trip harness's (:mod:`aefgate.converters.fidelity`): ``run.json:<dotted path>``,
``file:<name>``, ``results:<member>`` (``results:<member>.<sub>`` for an object member) for the AEF cycle;
``header:`` (the log's results and stats included: ``header:results.scores``), ``reductions:`` and ``samples:`` with
a dotted path for the source cycle
(Inspect -> AEF -> Inspect, :func:`aefgate.converters.inspect.records`). A pattern covers exactly the field it
names; ``*`` is one path segment, a trailing ``.**`` the field and everything below it (:class:`~..registry.Loss`).

With ``lossless`` (aefgate's extension, docs/mappings/inspect.md) the source cycle loses only the content a run
with ``contentCapture: off`` does not keep; without it (the page's mapping, the default) the losses marked
``lossless: false`` hold too.
"""

from __future__ import annotations

from aefgate.converters.registry import GIVEN, Loss


class _CredentialName:
    """A member name that says it holds a credential: the builder's [RUN-10] list (api_key, password, token,
    secret, authorization, ...), loaded when a round trip first asks (so listing the formats stays fast)."""

    def __call__(self, name: str) -> bool:
        from aefgate.converters.inspect.conventions import is_credential_name  # lazy: listing formats loads these losses

        return is_credential_name(name)

    def __str__(self) -> str:
        return "a member named like a credential (a key, token or password: the RUN-10 names)"

    def __repr__(self) -> str:
        return "_CredentialName()"

__all__ = ["LOSSES_FROM_INSPECT", "LOSSES_TO_INSPECT"]

_OFF = {"content_capture": ("off",)}

#: "What does not carry over", AEF -> Inspect (the page's first list, then aefgate's additions)
LOSSES_TO_INSPECT: tuple[Loss, ...] = (
    Loss("The state: Inspect has no verdict, and one unscored value, NaN, for every typed absence",
         ("results:state",)),
    Loss("A typed absence's reason: it travels as the explanation and comes back as a reasoning blob (or not at all, "
         "with contentCapture off), with the state's name as reason", ("results:reason", "results:reasoning.**"),
         lines="typed_absence"),
    Loss("The result tree and its aggregation, severity, verdict rules, thresholds and uncertainty",
         ("results:parentResultId", "results:component.**", "results:aggregation.**", "results:severity",
          "results:verdictRule.**", "results:uncertainty.**")),
    Loss("Evaluator and annotator identity: an evaluator comes back as its scorer",
         ("results:evaluator.**", "results:annotator.**")),
    Loss("A score's metric and normalized value: a single score's metric comes back as its key, the path",
         ("results:scores[].metric", "results:scores[].normalized")),
    Loss("A line's turns, attack and lane", ("results:turns", "results:attack.**", "results:lane")),
    Loss("Which line of a case a usage entry was on, and its costSource",
         ("results:usage", "results:usage[].costSource")),
    # a case with several roots has one duration (R7I-5), which comes back on the sample's first line (IN-8)
    Loss("The times and duration of a line that is not the case's root",
         ("results:startedAt", "results:endedAt", "results:durationMs"), lines="not_case_root"),
    Loss("A rollup's n, passed and agree: they come back counted from the epochs' lines",
         ("results:trials.n", "results:trials.passed", "results:trials.agree")),
    Loss("Evidence links and digests, and the case content unless the run captured it; traces and trace links; gate "
         "decisions", ("results:evidence", "results:traceLink.**", "file:evidence.ndjson", "file:blobs",
                       "file:traces.otlp.jsonl", "file:logs.otlp.jsonl", "file:gates.ndjson")),
    Loss("The seal, signatures and the overlay chain: an Inspect log is mutable",
         ("file:seal.json", "file:attestation.dsse.json", "file:overlays")),
    Loss("The summary (its lanes, sum, sumSq, verdicts, rules and cost) and the metric declarations",
         ("file:summary.json", "file:metrics.json")),
    Loss("The rest of run.json: the subject but its ref (which comes back as model:<ref>), the producer, the "
         "deployment, execution, the judges but their models, imported, the suite's digest and frozen, "
         "requirePasses, config, otel, costPolicy, provenance, contentCapture and ext",
         ("run.json:subject.**", "run.json:producer.**", "run.json:deployment.**", "run.json:execution.**",
          "run.json:judges", "run.json:imported.**", "run.json:suite.digest", "run.json:suite.frozen",
          "run.json:suite.executionPolicy.requirePasses", "run.json:config.**", "run.json:otel.**",
          "run.json:costPolicy.**", "run.json:provenance.**", "run.json:contentCapture", "run.json:ext.**")),
    # aefgate's additions (docs/mappings/inspect.md): what the page's list does not name
    Loss("A result line's ext: the table does not carry it (Score.metadata carries the state, which comes back as "
         "ext, IN-7)", ("results:ext.**",), source="aefgate"),
    Loss("Files under ext/ of the run folder (a run imported with lossless keeps them: its export is the log they "
         "come from, whose import writes them again)", ("file:ext",), source="aefgate"),
    Loss("The reason and reasoning of a line that is not a typed absence: Score.explanation holds one text (the "
         "reason when the line has one, else the reasoning's text), which comes back as a reasoning blob (none with "
         "contentCapture off); the other text is lost", ("results:reason", "results:reasoning.**"),
         lines="not_typed_absence", source="aefgate"),
    Loss("A case's time that only some of its root lines carry: an Inspect sample has one time, which comes back on "
         "each of the sample's lines (its duration on the first, IN-8), so a root line without it gains it",
         ("results:startedAt", "results:endedAt", "results:durationMs"), lines="lacking", source="aefgate"),
    Loss("A run with trial lines and no execution policy: the log's eval.config.epochs says how many epochs its "
         "samples have, and comes back as the policy's trialsPerCase",
         ("run.json:suite.executionPolicy.trialsPerCase",), source="aefgate"),
    Loss("With the option task (a run without a suite:<task>): the run's suite (none, or a ref that is not "
         "suite:<task>) comes back as suite:<task> at the version the log gives (0 when the run has none)",
         ("run.json:suite.ref", "run.json:suite.version"), when={"task": (GIVEN,)}, source="aefgate"),
    Loss("With the option case_times=span: the times of a case's root lines that differ; the sample has their span "
         "(the earliest start, the latest end, the longest duration), which comes back on each of its lines (the "
         "duration on the first)", ("results:startedAt", "results:endedAt", "results:durationMs"),
         when={"case_times": ("span",)}, lines="root", source="aefgate"),
    Loss("With the option label_values (round trips): a score label other than Inspect's letters (C, I, P, N); the "
         "score is written as its value and the label comes back only as data in the line's ext "
         "(Score.metadata.aef.labels)", ("results:scores[].label",), when={"label_values": (True,)}, source="aefgate"),
    Loss("With the option omit_unscored: the summary entries whose metric no line at their path scores (a rate of "
         "the lines' states) are left out of results; the summary comes back computed from the lines",
         ("file:summary.json",), when={"omit_unscored": (True,)}, source="aefgate"),
    Loss("The order of the result lines: an import writes them in the order the log gives its samples, a case's "
         "rollups after its epochs when the log is a .eval (read case by case) and after all samples when it is a "
         ".json", ("results:order",), source="aefgate"),
)

_PAGE = {"lossless": (False, None)}  # the page's mapping (no lossless import)

#: Inspect members that hold what the model saw or said: with contentCapture off, not kept anywhere (RUN-11)
_CONTENT = ("samples:input", "samples:target", "samples:messages", "samples:output.choices",
            "samples:output.completion", "samples:choices",
            "samples:events", "samples:attachments.**", "samples:store.**", "samples:transcript.**",
            "samples:message_pool", "samples:files.**", "samples:setup")

#: "What does not carry over", Inspect -> AEF (the page's second list, then aefgate's additions)
LOSSES_FROM_INSPECT: tuple[Loss, ...] = (
    Loss("List-valued scores, kept in ext (IN-7)"),
    Loss("Reducers without an AEF value (at_least for a k other than 1 or all, pass_k, collect): kept in ext with "
         "one epoch, refused with more (IN-8, R7I-14)"),
    Loss("working_time", ("samples:working_time",)),
    Loss("Inspect's event transcript as structured events", ("samples:events",)),
    Loss("Groups of runs (eval_set_id, kept in ext)", ("header:eval.eval_set_id",)),
    Loss("Inspect's role names beyond the four AEF roles", ("header:eval.model_roles.**",)),
    Loss("The case content, when the converter writes contentCapture: off", _CONTENT, when=_OFF),
    Loss("A sample's metadata, eval.metadata, the plan and the solver",
         ("samples:metadata.**", "header:eval.metadata.**", "header:plan.**", "header:eval.solver.**",
          "header:eval.solver_args.**")),
    Loss("Score.explanation and Score.answer, when the converter writes contentCapture: off (IN-7)",
         ("samples:scores.*.explanation", "samples:scores.*.answer", "reductions:samples"), when=_OFF),
    # aefgate's additions (docs/mappings/inspect.md, "The source cycle"). The page's items above hold for its
    # mapping; with lossless, what they name comes back (the harness lists them as declared but kept).
    Loss("Members named like a credential (api_key, password, token, secret, authorization, ...: the names RUN-10 "
         "gives) that hold a value, in the log's header (eval.model_args, task_args, ...), samples or reductions: "
         "dropped, never kept in the run ([RUN-10]: nothing in ext is a key, token or password)",
         ("header:**", "samples:**", "reductions:**"), segment=_CredentialName(), source="aefgate"),
    Loss("With lossless and contentCapture off: the plan's step parameters (they may hold prompts, RUN-11)",
         ("header:plan.steps",), when={"content_capture": ("off",), "lossless": (True,)}, source="aefgate"),
    # without lossless (the page's mapping): what Inspect -> AEF -> Inspect does not bring back
    Loss("Without lossless: the eval's set-up beyond its task, model, judge, epochs and reducer (run_id, task_id, "
         "task_file, task_registry_name, task_display_name, task_attribs, task_args, solver_args, scorers, "
         "model_args, model_generate_config, model_base_url, dataset, config but epochs and reducer, sandbox, "
         "packages, revision, tags, metadata; eval_id when the log has none), the log's version, tags, metadata, "
         "invalidated and error traceback, and the status cancelled (AEF's aborted comes back as error)",
         ("header:eval.run_id", "header:eval.eval_id", "header:eval.task_id", "header:eval.task_file",
          "header:eval.task_registry_name", "header:eval.task_display_name", "header:eval.task_version",
          "header:eval.task_attribs.**", "header:eval.task_args.**", "header:eval.task_args_passed.**",
          "header:eval.solver_args_passed.**", "header:eval.scorers", "header:eval.model_args.**",
          "header:eval.model_generate_config.**", "header:eval.model_base_url", "header:eval.dataset.**",
          "header:eval.config", "header:eval.config.*", "header:eval.sandbox.**", "header:eval.packages.**",
          "header:eval.revision.**",
          "header:eval.tags", "header:eval.created", "header:version", "header:tags", "header:metadata.**",
          "header:invalidated", "header:error.**", "header:status", "header:log_updates"),
         when=_PAGE, source="aefgate"),
    Loss("Without lossless: the results block as Inspect wrote it (its EvalScores come back recomputed from the "
         "lines, IN-3 and IN-9, with the export's names, metrics and params, no headline), the stats' usage (it "
         "comes back from the summary's usage, per AEF role) and connection history, a running log's empty "
         "completed_at, and the reductions of a single-epoch log (no rollup lines) or their scores' explanations, "
         "answers and metadata",
         ("header:results.**", "header:stats.model_usage.**", "header:stats.role_usage.**",
          "header:stats.connection_limit_history", "header:stats.completed_at", "reductions:(record)",
          "reductions:samples"), when=_PAGE, source="aefgate"),
    Loss("Without lossless: a sample id that is a number comes back as its string (a caseId is a string); a "
         "sample's uuid, store, attachments, choices, turn_count, error_retries, limit settings, usage per model "
         "and role (summed per AEF role), sandbox, files, setup, message_pool and older transcript; its error and "
         "limit objects (they come back as the lines' states and reasons); empty content (an output without "
         "choices) and a sample stopped before it was scored (one unscored Score per scorer)",
         ("samples:id", "samples:uuid", "samples:store.**", "samples:attachments.**", "samples:choices",
          "samples:turn_count", "samples:error_retries", "samples:message_limit", "samples:token_limit",
          "samples:token_limit_type", "samples:token_limit_usage", "samples:model_usage.**",
          "samples:role_usage.**", "samples:sandbox.**", "samples:files.**", "samples:setup",
          "samples:message_pool", "samples:transcript.**", "samples:error.**", "samples:limit.**",
          "samples:output.**", "samples:scores", "samples:model_fallbacks", "samples:timelines"),
         when=_PAGE, source="aefgate"),
    Loss("Without lossless: Score.answer, history, reason and metadata (the export writes the page's metadata.aef "
         "in its place), empty explanations, and the value of a score of a sample stopped by an error",
         ("samples:scores.*.answer", "samples:scores.*.history", "samples:scores.*.reason",
          "samples:scores.*.metadata.**", "samples:scores.*.explanation", "samples:scores.*.value"),
         when=_PAGE, source="aefgate"),
)
