"""The closed vocabularies the rules compute with, defined once (spec 03, spec 08)."""

from __future__ import annotations

#: [RES-1]: measured states (only ``passed`` is a pass) and typed absences (never a pass, never a fail)
MEASURED_STATES = frozenset({"passed", "failed", "warn", "inconclusive", "scored"})
TYPED_ABSENCES = ("not_measured", "not_applicable", "skipped", "error", "pending")
STATES = MEASURED_STATES | frozenset(TYPED_ABSENCES)
#: [RUN-11]: evidence kinds that are content: none is written under contentCapture off
CONTENT_KINDS = frozenset({"judge_reasoning", "tool_call", "document", "input", "expected", "output", "transcript"})
#: [SEC-6]: OpenTelemetry attributes that carry content, refused in the traces and logs of a run with
#: contentCapture off (and no log record there has a ``body``)
SEC6_ATTRIBUTES = frozenset(
    {
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.system_instructions",
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
        "gen_ai.evaluation.explanation",
        "gen_ai.prompt",
        "gen_ai.completion",
    }
)
#: [RES-8]: how a case run in trials rolls its trials up
TRIAL_AGGREGATIONS = ("MajorityVote", "AllPass", "AnyPass", "Mean", "Median", "Max", "PassAtK", "AtLeast")
