"""The Evaluation API's EvaluationStatusResponse: typed models, a strict reader and a writer
(the package's face: :mod:`.status` holds them)."""

from aefgate.formats.evaluation_api.status import (
    session_of,
    iter_insights,
    STATUSES,
    TERMINAL,
    BooleanValue,
    NumberValue,
    TextValue,
    ListValue,
    Insight,
    FeaturedSection,
    StandaloneSection,
    GroupSection,
    Featured,
    StatusResponse,
    parse,
    dumps,
    unknown,
)

__all__ = [
    "session_of",
    "iter_insights",
    "STATUSES",
    "TERMINAL",
    "BooleanValue",
    "NumberValue",
    "TextValue",
    "ListValue",
    "Insight",
    "FeaturedSection",
    "StandaloneSection",
    "GroupSection",
    "Featured",
    "StatusResponse",
    "parse",
    "dumps",
    "unknown",
]
