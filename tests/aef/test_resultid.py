"""[RES-4] result ids, against the corpus vectors and every line of the example runs."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from aefgate.aef import jsonio
from aefgate.aef.resultid import result_id, trial_digits

SPEC = Path(os.environ.get("AEF_SPEC_DIR", Path(__file__).resolve().parents[2].parent / "shared" / "spec" / "aef"))

pytestmark = pytest.mark.skipif(not SPEC.is_dir(), reason=f"AEF spec not found at {SPEC}")


def _vectors() -> list[dict]:
    p = SPEC / "conformance" / "result-ids.json"
    if not p.is_file():
        return []
    return jsonio.read_json(p, top_object=False)


def _run_folders() -> list[Path]:
    """Every folder holding run.json under conformance/valid/ and interop/examples/, with a results.ndjson."""
    found = []
    for root in (SPEC / "conformance" / "valid", SPEC / "interop" / "examples"):
        if root.is_dir():
            found += [p.parent for p in root.rglob("run.json") if (p.parent / "results.ndjson").is_file()]
    return sorted(found)


VECTORS = _vectors()
RUNS = _run_folders()


def test_corpus_is_there():
    assert VECTORS, "conformance/result-ids.json holds no vector"
    assert RUNS, "no example run found"


@pytest.mark.parametrize("vec", VECTORS, ids=[f"{i}:{v['caseId']}:{v['trial']}" for i, v in enumerate(VECTORS)])
def test_vector(vec):
    assert result_id(vec["runId"], vec["caseId"], vec["path"], vec["trial"]) == vec["resultId"]


@pytest.mark.parametrize("run", RUNS, ids=[str(r.relative_to(SPEC)) for r in RUNS])
def test_every_line_of_example_runs(run: Path):
    run_id = jsonio.read_json(run / "run.json")["runId"]
    count = 0
    for lineno, line in jsonio.iter_ndjson(run / "results.ndjson"):
        got = result_id(run_id, line["caseId"], line["path"], line.get("trial"))
        assert got == line["resultId"], f"results.ndjson:{lineno}"
        count += 1


def test_shape():
    rid = result_id("run", "case", "path", None)
    assert re.fullmatch(r"r_[0-9a-f]{32}", rid)


def test_trial_none_is_not_trial_zero():
    assert result_id("run", "case", "p", None) != result_id("run", "case", "p", 0)


def test_integral_float_trial_is_the_integer():
    # [ENC-4]: 3.0 is the integer 3 (the corpus has this vector too)
    assert result_id("r", "c", "p", 3.0) == result_id("r", "c", "p", 3)
    assert trial_digits(3.0) == "3"
    assert trial_digits(12) == "12"
    assert trial_digits(None) == ""
    assert trial_digits(1e3) == "1000"  # plain digits, never an exponent


@pytest.mark.parametrize("bad", [-1, 1.5, float("nan"), float("inf"), -2.0])
def test_trial_that_is_no_plain_integer(bad):
    with pytest.raises(ValueError):
        trial_digits(bad)


@pytest.mark.parametrize("bad", [True, "3", [3]])
def test_trial_of_the_wrong_type(bad):
    with pytest.raises(TypeError):
        trial_digits(bad)


@pytest.mark.parametrize("args", [("r\x1f", "c", "p"), ("r", "c\x1f", "p"), ("r", "c", "p\x1fx")])
def test_separator_inside_a_part_is_refused(args):
    with pytest.raises(ValueError):
        result_id(*args, None)


def test_lone_surrogate_is_refused():
    with pytest.raises(ValueError):
        result_id("r", "c\ud800", "p", None)
