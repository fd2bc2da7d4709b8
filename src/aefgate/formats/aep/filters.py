"""The ``attr-match`` filter dialect (AEP-0003 §6): validation (fail closed) and matching.

A filter is a JSON object; every member is a predicate on one envelope attribute and all must match. Rules
(AEP-0003 §6.1, §6.2):

* keys: ``id type subject source agent session run step epoch cause severity capture`` and legal extension
  attribute names (``[a-z0-9]{1,20}``, not a core attribute, AEP-0001 §5.4); ``time``, ``seq``, ``aep``,
  ``traceparent``, ``data`` and any other key are refused (``invalid-filter``);
* predicates: a scalar (string, integer, boolean: equality without coercion) or a non-empty array of them
  (any-of); on ``type`` also ``prefix.*`` patterns (``*`` alone is not one); on ``severity`` also
  ``{"gte": L}``, ``{"lte": L}`` or both, by the AEP-0001 §8.1 order, inclusive;
* an absent attribute never matches, except ``severity``, ``capture`` and ``epoch``, whose defaults (``info``,
  ``metadata``, ``0``) apply first.

Choice (docs/design/aep-format.md): a string predicate ending in ``*`` on a key other than ``type`` is refused
as a glob where none is allowed (the conformance case "glob on non-type key"); a float is not a Scalar.
"""

from __future__ import annotations

import re
from typing import Any, Callable

from aefgate.errors import Refusal
from aefgate.formats.aep.event_schema import CORE_ATTRIBUTES

__all__ = ["SEVERITIES", "compile_filter", "filter_problem", "matches"]

SEVERITIES = ("debug", "info", "notice", "warning", "error", "critical")  # AEP-0001 §8.1
_SEV = {s: i for i, s in enumerate(SEVERITIES)}
_FILTERABLE = frozenset(["id", "type", "subject", "source", "agent", "session", "run", "step", "epoch", "cause",
                         "severity", "capture"])
_DEFAULTS = {"severity": "info", "capture": "metadata", "epoch": 0}
_EXT = re.compile(r"[a-z0-9]{1,20}\Z")
_MISSING = object()


def _scalar(v: Any) -> bool:
    return type(v) in (str, int, bool)


def _same(a: Any, b: Any) -> bool:
    """JSON equality without coercion (``1`` is not ``true``, ``1`` is not ``"1"``)."""
    return type(a) is type(b) and a == b


def filter_problem(flt: Any) -> str | None:
    """None when ``flt`` is a valid ``attr-match`` filter, else why it is refused (fail closed)."""
    if type(flt) is not dict:
        return "a filter is a JSON object"
    for key, pred in flt.items():
        if key not in _FILTERABLE:
            if key in CORE_ATTRIBUTES:
                return f"{key!r} is not filterable (AEP-0003 §6.2 rule 1)"
            if not _EXT.match(key):
                return f"{key!r} is neither a filterable attribute nor an extension attribute name"
        if key == "severity" and type(pred) is dict:
            if not pred or set(pred) - {"gte", "lte"}:
                return "a severity comparison has gte and/or lte only"
            if any(v not in _SEV for v in pred.values()):
                return "a severity bound is not a severity level"
            continue
        items = pred if type(pred) is list else [pred]
        if type(pred) is list and not pred:
            return f"{key}: an inclusion array is not empty"
        for v in items:
            if not _scalar(v):
                return f"{key}: a predicate is a string, an integer, a boolean or an array of them"
            if type(v) is str and "*" in v:
                if key != "type":
                    return f"{key}: a pattern is allowed on type only"
                if not (v.endswith(".*") and len(v) > 2 and "*" not in v[:-1]):
                    return f"type: {v!r} is not a type pattern (prefix.*)"
            if key == "severity" and v not in _SEV:
                return f"severity: {v!r} is not a severity level"
    return None


def _pred(key: str, pred: Any) -> Callable[[Any], bool]:
    if key == "severity" and type(pred) is dict:
        lo, hi = _SEV.get(pred.get("gte", "debug")), _SEV.get(pred.get("lte", "critical"))
        return lambda v: type(v) is str and v in _SEV and lo <= _SEV[v] <= hi  # type: ignore[operator]
    items = pred if type(pred) is list else [pred]
    tests: list[Callable[[Any], bool]] = []
    for p in items:
        if key == "type" and type(p) is str and p.endswith(".*"):
            prefix = p[:-1]  # "attention." : strictly more than the prefix
            tests.append(lambda v, pre=prefix: type(v) is str and v.startswith(pre) and len(v) > len(pre))
        else:
            tests.append(lambda v, p=p: _same(v, p))
    return lambda v: any(t(v) for t in tests)


def compile_filter(flt: Any) -> Callable[[dict], bool]:
    """A predicate on events for ``flt``; raises :class:`Refusal` (``AEP-0003§6.2``, invalid-filter) when the
    filter is not valid."""
    why = filter_problem(flt)
    if why is not None:
        raise Refusal("AEP-0003§6.2", f"invalid-filter: {why}")
    preds = [(k, _DEFAULTS.get(k, _MISSING), _pred(k, p)) for k, p in flt.items()]

    def match(event: dict) -> bool:
        for key, default, test in preds:
            v = event.get(key, default)
            if v is _MISSING or not test(v):
                return False
        return True

    return match


def matches(flt: Any, event: dict) -> bool:
    """Whether ``event`` matches the filter ``flt`` (refused, as :func:`compile_filter`, when invalid)."""
    return compile_filter(flt)(event)
