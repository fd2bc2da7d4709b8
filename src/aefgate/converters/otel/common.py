"""What both directions of the OpenTelemetry converter share: aefgate's attributes for trials (the GenAI conventions
have none; docs/mappings/otel.md, "Trials"). A trial line's event carries its 0-based trial, a rollup's event the
rollup's aggregation (and its k), so the import places them back as trial lines and their rollup ([RES-8])."""

from __future__ import annotations

__all__ = ["TRIAL", "TRIALS_AGGREGATION", "TRIALS_K"]

TRIAL = "aefgate.trial"
TRIALS_AGGREGATION = "aefgate.trials.aggregation"
TRIALS_K = "aefgate.trials.k"
