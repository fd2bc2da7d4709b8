"""What ASSERT's rows mean, by assert-ai 0.3's own rules (read in its sources, ``assert_ai/core/judge.py`` and
``assert_ai/results.py``; restated here, not copied):

- a case is keyed by ``type`` and ``test_case_id`` together (:func:`case_key`);
- :func:`infer_judge_status`: what ASSERT counts as judged. ``scoring_skipped`` stays itself; a row is ``ok`` only
  when its ``judge_status`` is ``ok`` (or absent) and its verdict holds ``node_judgments`` (a list), ``dimensions``
  (an object) and, for every dimension in ``score_keys`` (default ``policy_violation`` and ``overrefusal``), a value
  of the right kind: a boolean, or for a dimension with an ordinal scale in ``dimension_scales`` one of its declared
  grades (an integer, or a string, as the scale's first grade is), or ``null`` when the dimension is in
  ``not_applicable_score_keys`` and ``dimension_applicability`` says it does not apply. Every other status
  (``judge_failed``, ``filter_skipped``, anything else) is ``judge_failed``;
- :meth:`Taxonomy.split`: the headline's split of a judged row (``compute_policy_violation_by_permissibility``): a
  category judgement counts when it is an object, is not marked ``relevant`` other than ``true``, has a boolean
  ``violated``, and names a category of the taxonomy by ``node_index`` (an integer, not a boolean), else by its
  stripped ``node_name``; the row is applicable to a kind (permissible or not) when one such category of that kind
  counts, and violated when one of them was violated: one vote per row;
- the lanes: a row is a scenario row when ``tester_model`` is set (not empty), else a prompt row; never pooled.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from aefgate.errors import Refusal

__all__ = [
    "BUILT_IN_DIMENSIONS",
    "CaseKey",
    "Taxonomy",
    "case_key",
    "case_id_problem",
    "dimension_scale_values",
    "infer_judge_status",
    "is_not_applicable",
    "lane_of",
]

#: ASSERT's two built-in judge dimensions (``BUILT_IN_DIMENSIONS``), the default ``score_keys``
BUILT_IN_DIMENSIONS = ("policy_violation", "overrefusal")
CASE_TYPES = ("prompt", "scenario")
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")

CaseKey = tuple[str, str]


def case_id_problem(case_id: str) -> str | None:
    """Why a string cannot be an AEF caseId ([RES-4]: 1-256 characters, no control character), or None."""
    if not case_id:
        return "an empty case id"
    if len(case_id) > 256:
        return f"{len(case_id)} characters: a caseId has at most 256"
    if _CONTROL.search(case_id):
        return "a control character: a caseId has none"
    return None


def case_key(row: Mapping[str, Any], where: str) -> CaseKey:
    """``(type, test_case_id)`` of a row; ASSERT-3 when either is missing or not what ASSERT writes, or when
    ``<type>:<test_case_id>`` cannot be an AEF caseId."""
    kind = row.get("type")
    tcid = row.get("test_case_id")
    if kind not in CASE_TYPES:
        raise Refusal("ASSERT-3", f"the row's type is {kind!r}: assert-ai writes prompt or scenario", where)
    if not isinstance(tcid, str) or not tcid:
        raise Refusal("ASSERT-3", f"the row's test_case_id is {tcid!r}, not a non-empty string", where)
    problem = case_id_problem(f"{kind}:{tcid}")
    if problem is not None:
        raise Refusal("ASSERT-3", f"the case {kind}:{tcid!r} cannot be a caseId: {problem}", where)
    return kind, tcid


def lane_of(row: Mapping[str, Any] | None, kind: str) -> str:
    """``scenario`` when the row names a tester model, ``prompt`` when it names none; a case without a row: its
    type."""
    if row is not None and "tester_model" in row:
        return "scenario" if row.get("tester_model") else "prompt"
    return kind


def _dimensions(verdict: Any) -> dict | None:
    if isinstance(verdict, dict) and isinstance(verdict.get("dimensions"), dict):
        return verdict["dimensions"]
    return None


def dimension_scale_values(scale: Any) -> list:
    """The declared grades of an ordinal scale (``{"type": "ordinal", "values": [{"value": ...}, ...]}``), in
    order: integers or strings (never booleans); empty for anything else."""
    if not isinstance(scale, dict) or scale.get("type") != "ordinal" or not isinstance(scale.get("values"), list):
        return []
    out = []
    for entry in scale["values"]:
        if isinstance(entry, dict):
            v = entry.get("value")
            if not isinstance(v, bool) and isinstance(v, (int, str)):
                out.append(v)
    return out


def _value_valid(value: Any, scale: Any) -> bool:
    grades = dimension_scale_values(scale)
    if grades:
        kind = str if isinstance(grades[0], str) else int
        return not isinstance(value, bool) and isinstance(value, kind) and value in grades
    return isinstance(value, bool)


def is_not_applicable(verdict: Any, key: str) -> bool:
    """The verdict marks ``key`` not applicable: its value is ``null`` and ``dimension_applicability`` says
    ``false``."""
    dims = _dimensions(verdict)
    if dims is None or key not in dims or dims[key] is not None:
        return False
    app = verdict.get("dimension_applicability")
    return isinstance(app, dict) and app.get(key) is False


def _str_list(value: Any) -> list[str] | None:
    if isinstance(value, list) and all(isinstance(x, str) for x in value):
        return list(value)
    return None


def has_successful_verdict(row: Mapping[str, Any]) -> bool:
    verdict = row.get("verdict")
    if not isinstance(verdict, dict) or not isinstance(verdict.get("node_judgments"), list):
        return False
    dims = _dimensions(verdict)
    if dims is None:
        return False
    keys = _str_list(row.get("score_keys"))
    if keys is None:
        keys = list(BUILT_IN_DIMENSIONS)
    na = set(_str_list(row.get("not_applicable_score_keys")) or ())
    scales = row.get("dimension_scales") if isinstance(row.get("dimension_scales"), dict) else {}
    for key in keys:
        if _value_valid(dims.get(key), scales.get(key)):
            continue
        if key in na and is_not_applicable(verdict, key):
            continue
        return False
    return True


def infer_judge_status(row: Mapping[str, Any]) -> str:
    """``ok``, ``judge_failed`` or ``scoring_skipped``: ASSERT's own reading of a score row (module docstring)."""
    status = row.get("judge_status")
    if status == "scoring_skipped":
        return "scoring_skipped"
    if status == "ok" or not (isinstance(status, str) and status):
        return "ok" if has_successful_verdict(row) else "judge_failed"
    return "judge_failed"


@dataclass(frozen=True)
class Category:
    index: int
    name: str
    permissible: bool


@dataclass
class Split:
    """A judged row's headline facts: for each kind (``True``: permissible, ``False``: not), whether a category of
    it counted (``applicable``) and whether one was violated; and the relevant categories counted."""

    applicable: dict[bool, bool] = field(default_factory=lambda: {True: False, False: False})
    violated: dict[bool, bool] = field(default_factory=lambda: {True: False, False: False})
    relevant: int = 0


class Taxonomy:
    """``taxonomy.json``: the behavior and its categories, each permissible or not (``permissible`` is ``true``:
    anything else is not permissible, as ASSERT reads it)."""

    def __init__(self, doc: Mapping[str, Any], where: str):
        cats = doc.get("behavior_categories")
        if cats is not None and not isinstance(cats, list):
            raise Refusal("ASSERT-5", "behavior_categories is a list of categories", where)
        self.by_index: dict[int, bool] = {}
        self.by_name: dict[str, bool] = {}
        self.categories: list[Category] = []
        for i, entry in enumerate(cats or []):
            if not isinstance(entry, dict):
                continue
            permissible = entry.get("permissible") is True
            self.by_index[i] = permissible
            name = str(entry.get("name") or "").strip()
            if name:
                self.by_name[name] = permissible
            self.categories.append(Category(i, name, permissible))
        behavior = doc.get("behavior")
        self.behavior_name = behavior.get("name") if isinstance(behavior, dict) and isinstance(
            behavior.get("name"), str) else None

    def __bool__(self) -> bool:
        return bool(self.categories)

    def permissible(self, node: Mapping[str, Any]) -> bool | None:
        idx = node.get("node_index")
        if isinstance(idx, int) and not isinstance(idx, bool) and idx in self.by_index:
            return self.by_index[idx]
        name = str(node.get("node_name") or "").strip()
        return self.by_name.get(name)

    def split(self, verdict: Any) -> Split:
        out = Split()
        nodes = verdict.get("node_judgments") if isinstance(verdict, dict) else None
        if not isinstance(nodes, list):
            return out
        for node in nodes:
            if not isinstance(node, dict):
                continue
            if "relevant" in node and node.get("relevant") is not True:
                continue
            violated = node.get("violated")
            if not isinstance(violated, bool):
                continue
            kind = self.permissible(node)
            if kind is None:
                continue
            out.relevant += 1
            out.applicable[kind] = True
            out.violated[kind] = out.violated[kind] or violated
        return out
