"""The attr-match filter dialect against the conformance attr-match corpus."""

from __future__ import annotations

import pytest

from aefgate.errors import Refusal
from aefgate.formats.aep import compile_filter, filter_problem, matches

from ._aep import cases, golden, ids

DOC = cases("attr-match")
MATCH = DOC["match"]
INVALID = DOC["invalid"]


@pytest.mark.parametrize("case", MATCH, ids=ids(MATCH))
def test_match_cases(case):
    assert filter_problem(case["filter"]) is None
    assert matches(case["filter"], case["event"]) is case["match"]


@pytest.mark.parametrize("case", INVALID, ids=ids(INVALID))
def test_invalid_filters_fail_closed(case):
    assert filter_problem(case["filter"]) is not None
    with pytest.raises(Refusal) as info:
        compile_filter(case["filter"])
    assert info.value.rule == "AEP-0003§6.2" and "invalid-filter" in info.value.message


def test_no_coercion_and_defaults_on_golden():
    events = golden()
    assert sum(matches({"type": "attention.*"}, e) for e in events) == sum(
        e["type"].startswith("attention.") for e in events)
    assert not matches({"epoch": True}, {"type": "run.started"})  # 0 is not false
    assert not matches({"run": 1}, {"type": "run.started", "run": "1"})
    assert matches({"capture": "metadata"}, {"type": "run.started"})
    assert not matches({"type": "attention.*"}, {"type": "attention."})
    for bad in ({"type": ".*"}, {"type": "a*.*"}, {"severity": {}}, {"severity": "loud"}, {"run": 1.5},
                {"run": None}, {"run": [[1]]}, [], {"capture": {"gte": "info"}}):
        assert filter_problem(bad) is not None, bad
