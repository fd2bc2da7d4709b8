"""The vendor Evaluation API's ``EvaluationStatusResponse`` (``GET /api/v2/evaluation/status``; the source document is
``../shared/seeds/004_...``): typed models (msgspec), a strict reader and a writer.

Strict about what the document states (rules ``EVAPI-n``, docs/mappings/evaluation-api.md):

- ``EVAPI-1`` the body is one JSON object (I-JSON, :mod:`aefgate.aef.jsonio`) of the documented shape: a
  ``status`` of the four, sections tagged by ``type`` (``FEATURED_INSIGHT``, ``STANDALONE_INSIGHT``, ``GROUP``)
  with their documented members and types, values tagged by ``type`` (``boolean``, ``number``, ``text``, ``list``)
  or ``null``; an integer ``number``; ``executionMode`` ``PER_TURN`` or ``ON_CONVERSATION_END``; ``created`` an
  RFC 3339 time.
- ``EVAPI-2`` ``results`` only where results exist: present for ``FINISHED``; absent or empty for ``NO_EVALS``
  and ``FAILED``.
- ``EVAPI-3`` order: no two sections (no two insights of a group) with one ``order``; a ``FEATURED_INSIGHT``'s
  ``order`` is the minimum 32-bit integer (it always sorts first). Sections listed out of order are read in
  ascending ``order`` (the document: "render them ascending by order").
- ``EVAPI-4`` the featured outcome twice and equal: at most one ``FEATURED_INSIGHT``; the top-level ``featured``
  present exactly when that section has a value, with the same ``evaluationDefinitionId``, ``value``, ``subtitle``
  and ``text``.
- ``EVAPI-5`` a number's range: ``minValue`` <= ``maxValue``, and the value within it (the engine clamps into it).
- ``EVAPI-6`` one session: every section and insight names the same ``sessionId``.

Tolerant of members it does not know: they are ignored by the models and kept, as written, by :func:`unknown`
(the importer carries them in the line's ``ext``).
"""

from __future__ import annotations

from typing import Any, Iterator, Literal, Optional, Union

import msgspec

from aefgate.errors import Refusal
from aefgate.aef import jsonio
from aefgate.aef.times import to_utc

__all__ = ["session_of", "iter_insights", 
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

STATUSES = ("NOT_READY", "FINISHED", "NO_EVALS", "FAILED")
TERMINAL = frozenset({"FINISHED", "NO_EVALS", "FAILED"})
FEATURED_ORDER = -2147483648
MODES = ("PER_TURN", "ON_CONVERSATION_END")


class _Base(msgspec.Struct, forbid_unknown_fields=False, omit_defaults=True, rename=None):
    pass


class BooleanValue(_Base, tag="boolean", tag_field="type"):
    value: bool
    trueText: Optional[str] = None
    falseText: Optional[str] = None


class NumberValue(_Base, tag="number", tag_field="type"):
    value: int
    minValue: Optional[int] = None
    maxValue: Optional[int] = None


class TextValue(_Base, tag="text", tag_field="type"):
    value: str


class ListValue(_Base, tag="list", tag_field="type"):
    value: list[str]


Value = Union[BooleanValue, NumberValue, TextValue, ListValue]


class Insight(_Base):
    id: str
    evaluationInsightDefinitionId: str
    sessionId: str
    ref: str
    name: str
    value: Optional[Value]
    executionMode: Literal["PER_TURN", "ON_CONVERSATION_END"]
    created: str
    description: Optional[str] = None
    reasoning: Optional[str] = None
    evidence: Optional[str] = None
    order: Optional[int] = None


class FeaturedSection(_Base, tag="FEATURED_INSIGHT", tag_field="type"):
    order: int
    evaluationDefinitionId: str
    sessionId: str
    value: Optional[Value]
    created: str
    subtitle: Optional[str] = None
    text: Optional[str] = None


class StandaloneSection(Insight, tag="STANDALONE_INSIGHT", tag_field="type"):
    pass


class GroupSection(_Base, tag="GROUP", tag_field="type"):
    order: int
    id: str
    sessionId: str
    name: str
    created: str
    insights: list[Insight]
    description: Optional[str] = None


Section = Union[FeaturedSection, StandaloneSection, GroupSection]


class Featured(_Base):
    evaluationDefinitionId: str
    value: Value
    subtitle: Optional[str] = None
    text: Optional[str] = None


class StatusResponse(_Base):
    status: Literal["NOT_READY", "FINISHED", "NO_EVALS", "FAILED"]
    results: Optional[list[Section]] = None
    featured: Optional[Featured] = None


_decoder = msgspec.json.Decoder(StatusResponse)


def _where_of(message: str) -> str:
    # msgspec names the place as "... - at `$.results[0].value`"
    if "at `$" in message:
        return message.rsplit("at `$", 1)[1].rstrip("`")
    return ""


def parse(data: bytes, where: str) -> tuple[StatusResponse, dict]:
    """The response and its JSON value (for :func:`unknown`), or ``Refusal`` (``EVAPI-n``) at ``where`` and the
    member's JSON path."""
    try:
        raw = jsonio.loads(data)
    except jsonio.JsonProblem as e:
        raise Refusal("EVAPI-1", f"not an I-JSON object: {e.reason}", where) from None
    try:
        resp = msgspec.convert(raw, StatusResponse, strict=True)
    except msgspec.ValidationError as e:
        text = str(e)
        at = _where_of(text)
        raise Refusal("EVAPI-1", f"not an EvaluationStatusResponse: {text.split(' - at ')[0]}",
                      f"{where}#{at}" if at else where) from None
    sections = resp.results or []
    if resp.status == "FINISHED" and resp.results is None:
        raise Refusal("EVAPI-2", "a FINISHED response has results", f"{where}#.results")
    if resp.status in ("NO_EVALS", "FAILED") and sections:
        raise Refusal("EVAPI-2", f"a {resp.status} response has no results", f"{where}#.results")
    orders: dict[int, int] = {}
    featured_sections = []
    sessions: set[str] = set()
    for i, s in enumerate(sections):
        at = f"{where}#.results[{i}]"
        if s.order is None:  # a STANDALONE_INSIGHT reads as an Insight, whose order is optional inside a group only
            raise Refusal("EVAPI-1", "a section has an order (an integer): sections are read ascending by order",
                          f"{at}.order")
        if s.order in orders:
            raise Refusal("EVAPI-3", f"two sections with order {s.order} (results[{orders[s.order]}] and "
                                     f"results[{i}]): their order is undefined", f"{at}.order")
        orders[s.order] = i
        sessions.add(s.sessionId)
        if isinstance(s, FeaturedSection):
            featured_sections.append(s)
            if s.order != FEATURED_ORDER:
                raise Refusal("EVAPI-3", f"a FEATURED_INSIGHT's order is {FEATURED_ORDER}, not {s.order}",
                              f"{at}.order")
        insights = [(s, at)] if isinstance(s, StandaloneSection) else []
        if isinstance(s, GroupSection):
            inner: dict[int, int] = {}
            for j, ins in enumerate(s.insights):
                iat = f"{at}.insights[{j}]"
                if ins.order is None:
                    raise Refusal("EVAPI-1", "an insight of a group has its own order", f"{iat}.order")
                if ins.order in inner:
                    raise Refusal("EVAPI-3", f"two insights of the group with order {ins.order}", f"{iat}.order")
                inner[ins.order] = j
                insights.append((ins, iat))
        for ins, iat in insights:
            sessions.add(ins.sessionId)
            _check_value(ins.value, f"{iat}.value")
            if to_utc(ins.created) is None:
                raise Refusal("EVAPI-1", f"created {ins.created!r} is not an RFC 3339 time", f"{iat}.created")
        if isinstance(s, FeaturedSection):
            _check_value(s.value, f"{at}.value")
        if to_utc(s.created) is None:
            raise Refusal("EVAPI-1", f"created {s.created!r} is not an RFC 3339 time", f"{at}.created")
    if len(featured_sections) > 1:
        raise Refusal("EVAPI-4", "more than one FEATURED_INSIGHT section", f"{where}#.results")
    fs = featured_sections[0] if featured_sections else None
    decided = fs is not None and fs.value is not None
    if resp.featured is not None and not decided:
        raise Refusal("EVAPI-4", "a top-level featured without a decided FEATURED_INSIGHT section (the featured "
                                 "outcome appears twice, in results and in featured)", f"{where}#.featured")
    if decided and resp.featured is None:
        raise Refusal("EVAPI-4", "the FEATURED_INSIGHT section is decided but the top-level featured is absent",
                      f"{where}#.featured")
    if decided:
        assert fs is not None and resp.featured is not None
        mine = (fs.evaluationDefinitionId, msgspec.to_builtins(fs.value), fs.subtitle, fs.text)
        top = (resp.featured.evaluationDefinitionId, msgspec.to_builtins(resp.featured.value), resp.featured.subtitle,
               resp.featured.text)
        if mine != top:
            raise Refusal("EVAPI-4", "the top-level featured differs from the FEATURED_INSIGHT section (the same "
                                     "outcome, twice)", f"{where}#.featured")
    if len(sessions) > 1:
        raise Refusal("EVAPI-6", f"sections of several sessions ({', '.join(sorted(sessions))}): a response is one "
                                 "session's", f"{where}#.results")
    return resp, raw


def _check_value(v: Any, at: str) -> None:
    if isinstance(v, NumberValue):
        lo, hi = v.minValue, v.maxValue
        if lo is not None and hi is not None and lo > hi:
            raise Refusal("EVAPI-5", f"minValue {lo} above maxValue {hi}", at)
        if (lo is not None and v.value < lo) or (hi is not None and v.value > hi):
            raise Refusal("EVAPI-5", f"the value {v.value} is outside its range [{lo}, {hi}] (the engine clamps "
                                     "into it)", at)


def session_of(resp: StatusResponse) -> str | None:
    for s in resp.results or ():
        return s.sessionId
    return None


def sections_in_order(resp: StatusResponse) -> list[Section]:
    """The sections ascending by ``order`` (a stable sort: EVAPI-3 leaves no tie)."""
    return sorted(resp.results or (), key=lambda s: s.order)


def unknown(raw: Any, model: type) -> dict:
    """The members of the JSON object ``raw`` that ``model`` does not define (kept as written)."""
    if not isinstance(raw, dict):
        return {}
    known = set(model.__struct_fields__) | {"type"}
    return {k: v for k, v in raw.items() if k not in known}


def dumps(resp: StatusResponse | dict) -> bytes:
    """A response as JSON (2-space indentation, as the document shows it), ending in a newline."""
    value = msgspec.to_builtins(resp) if isinstance(resp, msgspec.Struct) else resp
    return msgspec.json.format(msgspec.json.encode(value), indent=2) + b"\n"


def iter_insights(resp: StatusResponse) -> Iterator[tuple[Any, GroupSection | None]]:
    """Every insight-bearing item in reading order: sections ascending, a group's insights ascending, each with its
    group (or None)."""
    for s in sections_in_order(resp):
        if isinstance(s, GroupSection):
            for ins in sorted(s.insights, key=lambda x: x.order if x.order is not None else 0):
                yield ins, s
        else:
            yield s, None
