"""[SUM-3]..[SUM-9] and §9.3 ``summarize``: the example summaries recomputed, and hand-written cases."""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import tracemalloc
from fractions import Fraction
from pathlib import Path

import pytest

from aefgate.errors import Refusal
from aefgate.aef import jsonio
from aefgate.aef.summary import (
    LEFT_OUT,
    EntryAccumulator,
    SummaryAccumulator,
    compute_summary,
    entry_key,
    is_trial_line,
    line_lane,
    measure,
    summarize,
    value_matches,
)

SPEC = Path(os.environ.get("AEF_SPEC_DIR", Path(__file__).resolve().parents[2].parent / "shared" / "spec" / "aef"))
HAVE_SPEC = SPEC.is_dir()
needs_spec = pytest.mark.skipif(not HAVE_SPEC, reason=f"AEF spec not found at {SPEC}")

FIGURES = ("N", "n", "notMeasured", "sum", "sumSq", "value")
DEFINED = {None, "median", "min", "max"}


# -- helpers ---------------------------------------------------------------------------------------------------------


def _summary_runs() -> list[Path]:
    """Every run folder with a summary.json under conformance/valid/ and interop/examples/."""
    found: list[Path] = []
    for root in (SPEC / "conformance" / "valid", SPEC / "interop" / "examples"):
        if root.is_dir():
            found += [p.parent for p in root.rglob("summary.json") if (p.parent / "run.json").is_file()]
    return sorted(found)


SUMMARY_RUNS = _summary_runs() if HAVE_SPEC else []


def _method(entry: dict) -> str | None:
    return (entry.get("aggregate") or {}).get("method")


def _request_from(written: dict) -> dict:
    """The summarize request that asks for exactly the entries of a written summary."""
    lanes = []
    for lane in written["lanes"]:
        entries = []
        for e in lane["metrics"]:
            r = {k: e[k] for k in ("metric", "path", "aggregate", "rule", "verdict") if k in e}
            if _method(e) not in DEFINED:
                r["value"] = e["value"]
            entries.append(r)
        lanes.append({"lane": lane["lane"], "metrics": entries})
    return {"lanes": lanes}


def _lines(run: Path):
    for _lineno, line in jsonio.iter_ndjson(run / "results.ndjson"):
        yield line


def _metrics_of(run: Path) -> dict:
    p = run / "metrics.json"
    # input-off of aef-inspect-edges has no metrics.json (and a summary with no lane): nothing to declare
    return jsonio.read_json(p) if p.is_file() else {"schemaVersion": "1.0", "metrics": []}


def _assert_entry_matches(written: dict, got: dict, where: str) -> None:
    keys = FIGURES if _method(written) in DEFINED else ("N", "n", "notMeasured", "sum")
    for k in keys:
        if k in written:
            assert value_matches(written[k], got.get(k)), (
                f"{where} {k}: written {written[k]!r}, recomputed {got.get(k)!r}"
            )


def _metrics(**kinds: str) -> dict:
    return {
        "schemaVersion": "1.0",
        "metrics": [{"id": k, "kind": v, "direction": "higher_better", "scale": "unbounded"} for k, v in kinds.items()],
    }


def _line(case: str, state: str, scores: dict | list | None = None, path: str = "p", **more) -> dict:
    d = {"schemaVersion": "1.0", "caseId": case, "path": path, "evaluator": {"id": "e"}, "state": state}
    if isinstance(scores, dict):
        scores = [{"metric": m, "value": v} for m, v in scores.items()]
    if scores is not None:
        d["scores"] = scores
    d.update(more)
    return d


def _one(kinds: dict, lines, entry: dict, lane: str = "main") -> dict:
    """compute_summary with a single entry; returns that entry of the output."""
    out = compute_summary("run-1", _metrics(**kinds), lines, {"lanes": [{"lane": lane, "metrics": [entry]}]})
    return out["lanes"][0]["metrics"][0]


def _correctly_rounded(r: float, exact: Fraction) -> bool:
    """Whether binary64 ``r`` is the nearest binary64 to ``exact`` (checked with exact rationals only)."""
    if not math.isfinite(r):
        return False
    lo = Fraction(math.nextafter(r, -math.inf))
    hi = Fraction(math.nextafter(r, math.inf))
    fr = Fraction(r)
    return (lo + fr) / 2 <= exact <= (fr + hi) / 2


def _random_values(rnd: random.Random, k: int) -> list[float]:
    vals = []
    for _ in range(k):
        mag = 10.0 ** rnd.randint(-30, 30)
        vals.append(rnd.choice((-1, 1)) * rnd.random() * mag)
    # add some cancellation
    vals += [-v for v in rnd.sample(vals, k // 3)]
    rnd.shuffle(vals)
    return vals


# -- the example runs ------------------------------------------------------------------------------------------------


@needs_spec
def test_example_runs_are_there():
    assert SUMMARY_RUNS
    assert any(lane["metrics"] for r in SUMMARY_RUNS for lane in jsonio.read_json(r / "summary.json")["lanes"])


@needs_spec
@pytest.mark.parametrize("run", SUMMARY_RUNS, ids=[str(r.relative_to(SPEC)) for r in SUMMARY_RUNS])
def test_example_summary_recomputes(run: Path):
    written = jsonio.read_json(run / "summary.json")
    run_id = jsonio.read_json(run / "run.json")["runId"]
    out = compute_summary(run_id, _metrics_of(run), _lines(run), _request_from(written))
    assert out["schemaVersion"] == "1.0"
    assert out["runId"] == written["runId"] == run_id  # [SUM-2]
    assert [lane["lane"] for lane in out["lanes"]] == [lane["lane"] for lane in written["lanes"]]
    for lw, lo in zip(written["lanes"], out["lanes"]):
        assert [(e["metric"], e["path"]) for e in lo["metrics"]] == [(e["metric"], e["path"]) for e in lw["metrics"]]
        for ew, eo in zip(lw["metrics"], lo["metrics"]):
            where = f"{lw['lane']}/{ew['metric']}@{ew['path']}"
            _assert_entry_matches(ew, eo, where)
            assert eo["verdict"] == ew["verdict"], where
            assert eo.get("rule") == ew.get("rule"), where
            assert eo.get("aggregate") == ew.get("aggregate"), where


@needs_spec
@pytest.mark.parametrize("run", SUMMARY_RUNS, ids=[str(r.relative_to(SPEC)) for r in SUMMARY_RUNS])
def test_example_summary_verifier_recipe(run: Path):
    """The way the module docstring tells a verifier to drive the accumulators, over the written summary."""
    written = jsonio.read_json(run / "summary.json")
    kinds = {m["id"]: m["kind"] for m in _metrics_of(run)["metrics"]}
    acc = SummaryAccumulator([lane["lane"] for lane in written["lanes"]])
    checks = []
    for lane in written["lanes"]:
        for e in lane["metrics"]:
            assert e["metric"] in kinds
            checks.append((e, acc.add_entry(lane["lane"], e["path"], e["metric"], kinds[e["metric"]], _method(e))))
    for line in _lines(run):
        acc.add(line)
    assert [ea for _, ea in checks] == acc.entries
    for e, ea in checks:
        _assert_entry_matches(e, ea.result(), f"{e['metric']}@{e['path']}")


@needs_spec
@pytest.mark.parametrize(
    "run",
    [r for r in SUMMARY_RUNS if (r / "metrics.json").is_file()],
    ids=[str(r.relative_to(SPEC)) for r in SUMMARY_RUNS if (r / "metrics.json").is_file()],
)
def test_summarize_reads_the_folder(run: Path, tmp_path: Path):
    written = jsonio.read_json(run / "summary.json")
    req = tmp_path / "request.json"
    req.write_bytes(jsonio.dumps(_request_from(written)))
    out = summarize(run, req)
    run_id = jsonio.read_json(run / "run.json")["runId"]
    assert out == compute_summary(run_id, _metrics_of(run), _lines(run), _request_from(written))
    assert summarize(run, _request_from(written)) == out  # a request given as a value
    _validate_summary(out)


# -- schema of the output --------------------------------------------------------------------------------------------


def _validate_summary(doc: dict) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    referencing = pytest.importorskip("referencing")
    schemas = SPEC / "schemas" / "writer"
    resources = []
    for p in schemas.glob("*.schema.json"):
        s = json.loads(p.read_text("utf-8"))
        resources.append((s["$id"], referencing.Resource.from_contents(s)))
    registry = referencing.Registry().with_resources(resources)
    schema = json.loads((schemas / "summary.schema.json").read_text("utf-8"))
    errors = sorted(jsonschema.Draft202012Validator(schema, registry=registry).iter_errors(doc), key=str)
    assert not errors, [f"{list(e.absolute_path)}: {e.message}" for e in errors]
    jsonio.loads(jsonio.dumps(doc))  # and it writes and reads back


@needs_spec
def test_output_is_valid_against_the_writer_schema():
    lines = [
        _line("a", "passed", {"q": 0.5, "c": 2}),
        _line("b", "failed", {"q": 1.0, "c": 3}),
        _line("c", "skipped", reason="x"),
        _line("d", "not_applicable", reason="x"),
    ]
    req = {
        "lanes": [
            {
                "lane": "quality",
                "metrics": [
                    {"metric": "q", "path": "p", "rule": "q >= 0.8", "verdict": "failed"},
                    {"metric": "q", "path": "p/x", "aggregate": {"method": "median"}},
                    {"metric": "r", "path": "p"},
                    {"metric": "c", "path": "p", "aggregate": {"method": "pass@k", "k": 2}, "value": 0.5},
                    {"metric": "q", "path": "nowhere", "rule": "x", "verdict": "passed"},
                ],
            },
            {"lane": "empty", "metrics": []},
        ]
    }
    out = compute_summary("run-1", _metrics(q="score", r="rate", c="count"), iter(lines), req)
    _validate_summary(out)


# -- SUM-4: what a line gives ----------------------------------------------------------------------------------------


def test_typed_absences():
    lines = [
        _line("a", "not_applicable", reason="x"),  # left out entirely
        _line("b", "not_measured", reason="x"),
        _line("c", "skipped", reason="x"),
        _line("d", "error", reason="x"),
        _line("e", "pending", reason="x"),
        _line("f", "passed", {"q": 0.5}),
    ]
    e = _one({"q": "score"}, iter(lines), {"metric": "q", "path": "p"})
    assert (e["N"], e["n"], e["notMeasured"]) == (5, 1, 4)
    assert e["sum"] == 0.5 and e["value"] == 0.5 and e["sumSq"] == 0.25


def test_measure_function():
    assert measure(_line("a", "not_applicable", reason="x"), "q", "score") is LEFT_OUT
    assert measure(_line("a", "error", reason="x"), "q", "rate") is None
    assert measure(_line("a", "warn", {"q": 3}), "q", "score") == 3.0
    assert measure(_line("a", "warn", {"q": 3}), "q", "rate") == 0.0
    assert measure(_line("a", "passed"), "q", "verdict") == 1.0
    assert measure(_line("a", "passed"), "q", "score") is None  # no score for it
    assert measure(_line("a", "passed", {"other": 1}), "q", "duration") is None
    with pytest.raises(ValueError):
        measure(_line("a", "sealed"), "q", "score")
    with pytest.raises(ValueError):
        measure(_line("a", "passed"), "q", "percent")
    with pytest.raises(ValueError):
        measure(_line("a", "passed", [{"metric": "q", "value": "1"}]), "q", "score")
    with pytest.raises(ValueError):
        measure(_line("a", "passed", [{"metric": "q", "value": True}]), "q", "score")


@pytest.mark.parametrize("kind", ["rate", "verdict"])
def test_rate_and_verdict_count_passes(kind):
    lines = [
        _line("a", "passed"),
        _line("b", "failed", {"r": 1.0}),  # the state decides, not a score
        _line("c", "warn"),
        _line("d", "inconclusive", reason="split"),
        _line("e", "scored", {"r": 1.0}),  # no verdict: not measured, even with a score
        _line("f", "error", reason="x"),
        _line("g", "not_applicable", reason="x"),
    ]
    e = _one({"r": kind}, iter(lines), {"metric": "r", "path": "p"})
    assert (e["N"], e["n"], e["notMeasured"]) == (6, 4, 2)
    assert e["sum"] == 1.0 and e["value"] == 0.25 and e["sumSq"] == 1.0


@pytest.mark.parametrize("kind", ["score", "duration", "cost"])
def test_other_kinds_use_the_score(kind):
    lines = [
        _line("a", "passed", {"m": 1.0}),
        _line("b", "failed", {"m": 0.0}),
        _line("c", "scored", {"m": 0.5}),
        _line("d", "warn", {"other": 0.5}),  # no score for m: not measured
        _line("e", "inconclusive"),
    ]
    e = _one({"m": kind, "other": "score"}, iter(lines), {"metric": "m", "path": "p"})
    assert (e["N"], e["n"], e["notMeasured"]) == (5, 3, 2)
    assert e["sum"] == 1.5 and e["value"] == 0.5 and e["sumSq"] == 1.25


def test_a_metric_scored_twice_is_not_measured():
    twice = [{"metric": "q", "value": 0.2}, {"metric": "q", "value": 0.4}]
    lines = [
        _line("a", "passed", twice),
        _line("b", "passed", {"q": 1.0}),
        _line("c", "passed", [{"metric": "q", "value": 0.5}, {"metric": "x", "value": 1}, {"metric": "x", "value": 2}]),
    ]
    e = _one({"q": "score", "x": "score"}, iter(lines), {"metric": "q", "path": "p"})
    assert (e["N"], e["n"], e["notMeasured"]) == (3, 2, 1)
    assert e["sum"] == 1.5 and e["value"] == 0.75
    # ... and for a metric scored twice, whatever its kind (spec 03 §3.9 `metric`)
    e = _one({"q": "rate"}, iter(lines[:2]), {"metric": "q", "path": "p"})
    assert (e["N"], e["n"], e["value"]) == (2, 1, 1.0)


def test_the_same_twice_rule_when_several_entries_share_a_path():
    twice = [{"metric": "q", "value": 0.2}, {"metric": "q", "value": 0.4}, {"metric": "s", "value": 3},
             {"metric": "t", "value": 0.1}, {"metric": "t", "value": 0.9}]
    lines = [_line("a", "passed", twice), _line("b", "failed", {"q": 1.0, "s": 1, "t": 0.5})]
    req = {"lanes": [{"lane": "main", "metrics": [
        {"metric": "q", "path": "p"},
        {"metric": "s", "path": "p"},
        {"metric": "r", "path": "p"},
        {"metric": "t", "path": "p", "aggregate": {"method": "max"}},
    ]}]}
    out = compute_summary("run-1", _metrics(q="score", s="count", r="rate", t="score"), iter(lines), req)
    q, s, r, qmax = out["lanes"][0]["metrics"]
    assert (q["N"], q["n"], q["value"]) == (2, 1, 1.0)
    assert (s["N"], s["n"], s["value"]) == (2, 2, 4.0)
    assert (r["N"], r["n"], r["value"]) == (2, 2, 0.5)
    assert (qmax["N"], qmax["n"], qmax["value"]) == (2, 1, 0.5)


def test_integer_scores_are_numbers():
    lines = [_line("a", "scored", {"q": 2}), _line("b", "scored", {"q": 2**60 + 1})]  # read as binary64 [ENC-4]
    e = _one({"q": "score"}, iter(lines), {"metric": "q", "path": "p"})
    assert e["sum"] == 2.0 + float(2**60)
    assert isinstance(e["sum"], float)


# -- SUM-5 and SUM-8: the figures ------------------------------------------------------------------------------------


def test_count_value_is_the_sum():
    lines = [_line(c, "scored", {"c": v}) for c, v in (("a", 2), ("b", 3), ("c", 5))]
    lines.append(_line("d", "error", reason="x"))
    e = _one({"c": "count"}, iter(lines), {"metric": "c", "path": "p"})
    assert (e["N"], e["n"], e["sum"], e["value"], e["sumSq"]) == (4, 3, 10.0, 10.0, 38.0)


def test_nothing_measured():
    lines = [_line("a", "error", reason="x"), _line("b", "passed", {"other": 1.0})]
    e = _one({"q": "score", "other": "score"}, iter(lines),
             {"metric": "q", "path": "p", "rule": "q >= 0.5", "verdict": "failed"})
    assert (e["N"], e["n"], e["notMeasured"]) == (2, 0, 2)
    assert e["value"] is None
    assert e["verdict"] == "not_measured"  # [SUM-6], whatever the request's verdict
    assert e["rule"] == "q >= 0.5"
    assert e["sum"] == 0 and e["sumSq"] == 0
    # and with no line at all
    e = _one({"q": "count"}, iter([]), {"metric": "q", "path": "p", "aggregate": {"method": "median"}})
    assert (e["N"], e["n"], e["value"], e["verdict"]) == (0, 0, None, "not_measured")


def test_verdict_defaults_to_scored():
    e = _one({"q": "score"}, iter([_line("a", "passed", {"q": 1})]), {"metric": "q", "path": "p"})
    assert e["verdict"] == "scored" and "rule" not in e and "aggregate" not in e
    e = _one({"q": "score"}, iter([_line("a", "passed", {"q": 1})]), {"metric": "q", "path": "p", "verdict": "passed"})
    assert e["verdict"] == "passed"


def test_median_min_max():
    vals = [4.0, 1.0, 3.0, 2.0]
    lines = [_line(str(i), "scored", {"q": v}) for i, v in enumerate(vals)] + [_line("x", "error", reason="x")]

    def run(method, ls):
        return _one({"q": "score"}, iter(ls), {"metric": "q", "path": "p", "aggregate": {"method": method}})

    assert run("median", lines)["value"] == 2.5  # even count: the mean of the two middle values
    assert run("median", lines[1:])["value"] == 2.0  # odd count: 1, 2, 3
    assert run("min", lines)["value"] == 1.0
    assert run("max", lines)["value"] == 4.0
    for method in ("median", "min", "max"):
        e = run(method, lines)
        assert (e["N"], e["n"], e["sum"]) == (5, 4, 10.0)
        assert e["aggregate"] == {"method": method}
    # the mean of the two middle values, without overflow
    big = [_line("a", "scored", {"q": 1.5 * 2.0**1023}), _line("b", "scored", {"q": 2.0**1023})]
    assert (1.5 * 2.0**1023 + 2.0**1023) == math.inf
    assert run("median", big)["value"] == 1.25 * 2.0**1023


def test_median_of_a_count_is_the_median():
    lines = [_line(str(i), "scored", {"c": v}) for i, v in enumerate([1, 2, 10])]
    e = _one({"c": "count"}, iter(lines), {"metric": "c", "path": "p", "aggregate": {"method": "median"}})
    assert e["value"] == 2.0 and e["sum"] == 13.0


def test_cancellation_is_exact():
    vals = [1e20, 1.0, -1e20]
    assert sum(vals) == 0.0  # in order, the 1 is lost
    lines = [_line(str(i), "scored", {"q": v}) for i, v in enumerate(vals)]
    e = _one({"q": "score"}, iter(lines), {"metric": "q", "path": "p"})
    assert e["sum"] == 1.0
    assert e["value"] == 1.0 / 3.0  # the exact mean, rounded once
    c = _one({"q": "count"}, iter(lines), {"metric": "q", "path": "p"})
    assert c["sum"] == c["value"] == 1.0


def test_fsum_is_correctly_rounded():
    """The claim the exact sum relies on, checked against exact rationals (and the accumulator with it)."""
    assert math.fsum([1e20, 1.0, -1e20]) == 1.0
    rnd = random.Random(20261008)
    for trial in range(300):
        vals = _random_values(rnd, rnd.randint(1, 40))
        exact = sum(map(Fraction, vals), Fraction(0))
        f = math.fsum(vals)
        assert _correctly_rounded(f, exact), (trial, vals)
        acc = EntryAccumulator("score", metric="q")
        for v in vals:
            acc.add_measure(v)
        got = acc.result()
        assert got["sum"] == f, (trial, vals)
        assert got["value"] == f / len(vals), (trial, vals)  # [SUM-5]: the binary64 sum / n, one division
        in_order = 0.0
        for v in vals:
            in_order += v * v
        assert got["sumSq"] == in_order  # binary64, in line order


@pytest.mark.parametrize("values, total, mean, exact_mean", [
    ((0.1, 0.1, 0.2, 0.7, 1.0), 2.1, 0.42000000000000004, 0.42),          # 2.1 / 5
    ((0.8, 0.8, 0.825), 2.425, 0.8083333333333332, 0.8083333333333333),   # 2.425 / 3
])
def test_mean_is_the_binary64_sum_divided_by_n(values, total, mean, exact_mean):
    """[SUM-5]: `value` is `sum` / `n` in one binary64 division, as the reference writer computes it and compares it
    (exactly); not the exact mean rounded once, which differs in the last place for these values."""
    assert float(sum(map(Fraction, values), Fraction(0)) / len(values)) == exact_mean != mean  # the values do differ
    lines = [_line(str(i), "scored", {"q": v}) for i, v in enumerate(values)]
    e = _one({"q": "score"}, iter(lines), {"metric": "q", "path": "p"})
    assert e["sum"] == total
    assert e["value"] == mean
    assert repr(e["value"]) == repr(mean)


def test_subnormals_and_extremes_sum_exactly():
    tiny = 5e-324
    vals = [tiny, 1.0, -1.0, tiny, 1e308, -1e308, tiny]
    acc = EntryAccumulator("count", metric="q")
    for v in vals:
        acc.add_measure(v)
    assert acc.result()["sum"] == 3 * tiny


def test_overflow():
    # the exact sum exceeds binary64: no sum (a producer cannot write it), so no value (sum / n) either, and the
    # entry is not measured (R10-3, as the reference verifier rules it), though each value is finite
    acc = EntryAccumulator("score", metric="q")
    for v in (1.7e308, 1.7e308):
        acc.add_measure(v)
    r = acc.result()
    assert r["sum"] is None and r["sumSq"] is None
    assert r["value"] is None and r["n"] == 2
    out = _one({"q": "score"}, iter([_line("a", "scored", {"q": 1.7e308})] * 2), {"metric": "q", "path": "p"})
    assert "sum" not in out and "sumSq" not in out and out["value"] is None and out["verdict"] == "not_measured"
    # an aggregate AEF defines does not need the sum: the median stands
    med = _one({"q": "score"}, iter([_line("a", "scored", {"q": 1.7e308})] * 2),
               {"metric": "q", "path": "p", "aggregate": {"method": "median"}})
    assert med["value"] == 1.7e308 and med["verdict"] == "scored"
    # squares overflow while the sum does not
    out = _one({"q": "score"}, iter([_line("a", "scored", {"q": 1e200})]), {"metric": "q", "path": "p"})
    assert out["sum"] == 1e200 and "sumSq" not in out


def test_accumulator_add_and_result_shape():
    acc = EntryAccumulator("rate", None, metric="r")
    for ln in (_line("a", "passed"), _line("b", "failed"), _line("c", "not_applicable", reason="x")):
        acc.add(ln)
    assert acc.result() == {"N": 2, "n": 2, "notMeasured": 0, "sum": 1.0, "sumSq": 1.0, "value": 0.5}
    assert acc.recomputes_value
    assert not EntryAccumulator("score", "pass@k", metric="q").recomputes_value
    with pytest.raises(ValueError):
        EntryAccumulator("percent", metric="q")
    with pytest.raises(TypeError):
        EntryAccumulator("score", None)  # the metric is needed to find its scores
    positional = EntryAccumulator("score", "median", "q")
    assert positional.metric == "q" and positional.computes_value and positional.recomputes_value


def test_producer_aggregate_value_is_not_recomputed():
    acc = EntryAccumulator("score", "f1", metric="q")
    acc.add(_line("a", "passed", {"q": 0.5}))
    r = acc.result()
    assert r["value"] is None and (r["N"], r["n"], r["sum"]) == (1, 1, 0.5)


def test_memory_is_constant_unless_median():
    assert EntryAccumulator("score", None, metric="q")._values is None
    assert EntryAccumulator("score", "max", metric="q")._values is None
    assert EntryAccumulator("score", "median", metric="q")._values.count == 0

    def lines(k):
        rnd = random.Random(1)
        for i in range(k):
            yield _line(str(i), "scored", {"q": rnd.random()})

    req = {"lanes": [{"lane": "main", "metrics": [{"metric": "q", "path": "p"},
                                                  {"metric": "r", "path": "p", "aggregate": {"method": "min"}}]}]}
    tracemalloc.start()
    try:
        out = compute_summary("run-1", _metrics(q="score", r="rate"), lines(100_000), req)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert out["lanes"][0]["metrics"][0]["N"] == 100_000
    assert peak < 1_000_000, peak  # 100,000 lines were never held


def test_a_million_lines_in_one_pass():
    consumed = 0

    def lines():
        nonlocal consumed
        line = _line("a", "passed", {"q": 0.5})
        for _ in range(1_000_000):
            consumed += 1
            yield line

    e = _one({"q": "rate"}, lines(), {"metric": "q", "path": "p"})
    assert consumed == 1_000_000
    assert (e["N"], e["n"], e["value"], e["sum"]) == (1_000_000, 1_000_000, 1.0, 1e6)


def test_lines_are_read_once():
    class Once:
        def __init__(self, items):
            self.items = items
            self.iterated = 0

        def __iter__(self):
            self.iterated += 1
            assert self.iterated == 1, "iterated twice"
            return iter(self.items)

    src = Once([_line("a", "passed", {"q": 1.0}), _line("b", "failed", {"q": 0.0})])
    req = {"lanes": [{"lane": "l1", "metrics": [{"metric": "q", "path": "p"}]},
                     {"lane": "l2", "metrics": [{"metric": "q", "path": "p"}]}]}
    compute_summary("run-1", _metrics(q="score"), src, req)
    assert src.iterated == 1


# -- SUM-3: lanes, paths, trials -------------------------------------------------------------------------------------


def test_trial_lines_are_skipped_rollups_counted():
    lines = [
        _line("c1", "failed", {"q": 0.0}, trial=0),
        _line("c1", "passed", {"q": 1.0}, trial=1),
        _line("c1", "passed", {"q": 0.9}, trials={"n": 2, "passed": 1, "aggregation": "MajorityVote", "agree": False}),
        _line("c2", "failed", {"q": 0.2}),
    ]
    e = _one({"q": "score"}, iter(lines), {"metric": "q", "path": "p"})
    assert (e["N"], e["n"]) == (2, 2)
    assert value_matches(e["value"], 0.55)
    assert is_trial_line(lines[0]) and is_trial_line(lines[1])
    assert not is_trial_line(lines[2]) and not is_trial_line(lines[3])
    assert not is_trial_line(_line("c", "passed", trial=None))  # a null member is none
    assert entry_key(lines[0], ["main"]) is None
    assert entry_key(lines[2], ["main"]) == ("main", "p")


def test_lane_membership():
    assert line_lane(_line("a", "passed"), ["main"]) == "main"
    assert line_lane(_line("a", "passed"), ["main", "main"]) == "main"  # a single lane *name*
    assert line_lane(_line("a", "passed"), ["a", "b"]) is None
    assert line_lane(_line("a", "passed"), []) is None
    assert line_lane(_line("a", "passed", lane="b"), ["a", "b"]) == "b"
    assert line_lane(_line("a", "passed", lane="other"), ["main"]) == "other"
    assert line_lane(_line("a", "passed", lane=None), ["main"]) == "main"
    assert entry_key(_line("a", "passed"), ["a", "b"]) is None
    assert entry_key(_line("a", "passed", path="x/y"), ["a"]) == ("a", "x/y")


def test_lines_go_to_their_lane_and_path():
    lines = [
        _line("a", "passed", {"q": 1.0}, lane="quality"),
        _line("b", "failed", {"q": 0.0}, lane="security"),
        _line("c", "passed", {"q": 0.5}),  # two lanes: a line without lane is in none
        _line("d", "passed", {"q": 0.25}, lane="quality", path="p/child"),
        _line("e", "passed", {"q": 0.75}, lane="quality", path="P"),  # paths compare as written
    ]
    req = {"lanes": [
        {"lane": "quality", "metrics": [{"metric": "q", "path": "p"}, {"metric": "q", "path": "p/child"}]},
        {"lane": "security", "metrics": [{"metric": "q", "path": "p"}]},
    ]}
    out = compute_summary("run-1", _metrics(q="score"), iter(lines), req)
    (qp, qc), (sp,) = (lane["metrics"] for lane in out["lanes"])
    assert (qp["N"], qp["value"]) == (1, 1.0)
    assert (qc["N"], qc["value"]) == (1, 0.25)
    assert (sp["N"], sp["value"]) == (1, 0.0)
    # with a single lane, the line without lane belongs to it
    single = compute_summary("run-1", _metrics(q="score"), iter(lines), {"lanes": [req["lanes"][0]]})
    assert single["lanes"][0]["metrics"][0]["N"] == 2


# -- value_matches ---------------------------------------------------------------------------------------------------


def test_value_matches():
    assert value_matches(0.665, 1.33 / 2)
    assert value_matches(1.0, 1.0 + 0.9e-9)
    assert not value_matches(1.0, 1.0 + 1.1e-9)
    assert value_matches(0.0, 5e-10)  # max(1, |r|): an absolute bound near 0
    assert not value_matches(0.0, 2e-9)
    assert value_matches(1e12 + 500, 1e12)  # a relative bound for large values
    assert not value_matches(1e12 + 5000, 1e12)
    assert value_matches(6, 6) and not value_matches(6, 7) and not value_matches(5, 6)
    assert value_matches(2.0, 2)
    assert value_matches(None, None)
    assert not value_matches(None, 0.0)
    assert not value_matches(0.0, None)  # a number never matches a recomputed null, or a non-finite figure
    assert not value_matches(1e308, math.inf)
    assert not value_matches(math.inf, math.inf)
    assert not value_matches(0.0, math.nan)
    assert not value_matches(True, 1)
    assert not value_matches("1", 1)


# -- §9.3 input errors -----------------------------------------------------------------------------------------------


def _refused(rule: str, req: dict, kinds: dict | None = None, lines=()) -> Refusal:
    with pytest.raises(Refusal) as ei:
        compute_summary("run-1", _metrics(**(kinds or {"q": "score"})), iter(lines), req)
    assert ei.value.rule == rule, ei.value
    assert ei.value.exit_code == 2
    return ei.value


def test_refuses_an_undeclared_metric():
    _refused("SUM-1", {"lanes": [{"lane": "main", "metrics": [{"metric": "nope", "path": "p"}]}]})


def test_refuses_a_lane_twice():
    _refused("SUM-9", {"lanes": [{"lane": "main", "metrics": []}, {"lane": "main", "metrics": []}]})


def test_refuses_an_entry_twice():
    e = {"metric": "q", "path": "p"}
    _refused("SUM-9", {"lanes": [{"lane": "main", "metrics": [e, dict(e, rule="other")]}]})
    # the same metric and path in two lanes is two entries
    compute_summary("run-1", _metrics(q="score"), iter([]),
                    {"lanes": [{"lane": "a", "metrics": [e]}, {"lane": "b", "metrics": [e]}]})


def test_refuses_a_producer_aggregate_without_value():
    _refused("SUM-8", {"lanes": [{"lane": "main", "metrics": [
        {"metric": "q", "path": "p", "aggregate": {"method": "pass@k", "k": 2}}]}]})


@pytest.mark.parametrize("agg", [None, {"method": "median"}, {"method": "min"}, {"method": "max"}])
def test_refuses_a_value_for_an_entry_aef_computes(agg):
    e = {"metric": "q", "path": "p", "value": 0.5}
    if agg:
        e["aggregate"] = agg
    _refused("SUM-8", {"lanes": [{"lane": "main", "metrics": [e]}]})


def test_producer_aggregate_keeps_its_value():
    lines = [_line("a", "passed", {"q": 1.0}), _line("b", "failed", {"q": 0.0}), _line("c", "error", reason="x")]
    e = _one({"q": "score"}, iter(lines),
             {"metric": "q", "path": "p", "aggregate": {"method": "pass@k", "k": 2}, "value": 0.8, "verdict": "passed"})
    assert (e["N"], e["n"], e["notMeasured"], e["sum"]) == (3, 2, 1, 1.0)
    assert e["value"] == 0.8 and e["aggregate"] == {"method": "pass@k", "k": 2} and e["verdict"] == "passed"
    # nothing measured: value null, whatever the producer said
    e = _one({"q": "score"}, iter(lines[2:]),
             {"metric": "q", "path": "p", "aggregate": {"method": "f1"}, "value": 0.8})
    assert e["value"] is None and e["verdict"] == "not_measured"
    # a null producer value is fine when nothing was measured, refused otherwise ([SUM-8]: a number then)
    e = _one({"q": "score"}, iter(lines[2:]),
             {"metric": "q", "path": "p", "aggregate": {"method": "f1"}, "value": None})
    assert e["value"] is None
    _refused("SUM-8", {"lanes": [{"lane": "main", "metrics": [
        {"metric": "q", "path": "p", "aggregate": {"method": "f1"}, "value": None}]}]}, lines=lines)
    _refused("SUM-8", {"lanes": [{"lane": "main", "metrics": [
        {"metric": "q", "path": "p", "aggregate": {"method": "f1"}, "value": "0.8"}]}]}, lines=lines)


def test_refuses_malformed_requests():
    _refused("CONF-3", {})
    _refused("CONF-3", {"lanes": [{"metrics": []}]})
    _refused("CONF-3", {"lanes": [{"lane": "main"}]})
    _refused("CONF-3", {"lanes": [{"lane": "main", "metrics": [{"metric": "q"}]}]})
    _refused("CONF-3", {"lanes": [{"lane": "main", "metrics": [{"metric": "q", "path": "p", "aggregate": "median"}]}]})
    _refused("SUM-6", {"lanes": [{"lane": "main", "metrics": [{"metric": "q", "path": "p", "verdict": "ok"}]}]})


def test_refuses_metrics_declared_twice_or_of_no_kind():
    bad = {"schemaVersion": "1.0", "metrics": [{"id": "q", "kind": "score"}, {"id": "q", "kind": "rate"}]}
    with pytest.raises(Refusal) as ei:
        compute_summary("run-1", bad, iter([]), {"lanes": []})
    assert ei.value.rule == "SUM-1"
    with pytest.raises(Refusal):
        compute_summary("run-1", {"metrics": [{"id": "q", "kind": "percent"}]}, iter([]), {"lanes": []})


def test_refuses_a_line_it_cannot_count():
    req = {"lanes": [{"lane": "main", "metrics": [{"metric": "q", "path": "p"}]}]}
    r = _refused("SUM-4", req, lines=[_line("a", "passed", {"q": 1.0}), _line("b", "sealed")])
    assert r.where == "results.ndjson:2"
    r = _refused("SUM-4", req, lines=[_line("a", "passed", [{"metric": "q", "value": None}])])
    assert r.where == "results.ndjson:1"
    # a line of another lane or path is not read for the entry
    compute_summary("run-1", _metrics(q="score"), iter([_line("b", "sealed", path="elsewhere")]), req)


def test_empty_request():
    out = compute_summary("run-9", _metrics(), iter([_line("a", "passed")]), {"lanes": []})
    assert out == {"schemaVersion": "1.0", "runId": "run-9", "lanes": []}


# -- summarize: reading the folder -----------------------------------------------------------------------------------


def _copy_run(tmp_path: Path) -> Path:
    src = SPEC / "conformance" / "valid" / "completed-eval" / "run"
    if not src.is_dir():
        pytest.skip("conformance/valid/completed-eval is not there")
    dst = tmp_path / "run"
    dst.mkdir()
    for name in ("run.json", "metrics.json", "results.ndjson"):
        shutil.copyfile(src / name, dst / name)
    return dst


REQ = {"lanes": [{"lane": "quality", "metrics": [{"metric": "triage", "path": "triage"}]}]}


@needs_spec
def test_summarize_refuses_what_does_not_read(tmp_path: Path):
    run = _copy_run(tmp_path)
    assert summarize(run, REQ)["lanes"][0]["metrics"][0]["N"] == 6

    data = (run / "results.ndjson").read_bytes()
    (run / "results.ndjson").write_bytes(data.replace(b"\n", b"\r\n", 1))
    with pytest.raises(Refusal) as ei:
        summarize(run, REQ)
    assert ei.value.rule.startswith("ENC-") and ei.value.where == "results.ndjson"

    lines = data.split(b"\n")
    lines[2] = lines[2][:-1] + b',"state":"passed"}'  # a member twice
    (run / "results.ndjson").write_bytes(b"\n".join(lines))
    with pytest.raises(Refusal) as ei:
        summarize(run, REQ)
    assert ei.value.rule == "ENC-2" and ei.value.where == "results.ndjson:3"

    (run / "results.ndjson").write_bytes(data[:-1])  # no final LF: incomplete
    with pytest.raises(Refusal) as ei:
        summarize(run, REQ)
    assert ei.value.rule.startswith("ENC-")

    (run / "results.ndjson").write_bytes(data)
    (run / "metrics.json").write_bytes(b'{"metrics": [1e400]}')
    with pytest.raises(Refusal) as ei:
        summarize(run, REQ)
    assert ei.value.rule.startswith("ENC-") and ei.value.where == "metrics.json"

    (run / "metrics.json").unlink()
    with pytest.raises(Refusal) as ei:
        summarize(run, REQ)
    assert ei.value.rule == "RUN-2" and ei.value.exit_code == 2


@needs_spec
def test_summarize_refuses_a_run_json_without_run_id(tmp_path: Path):
    run = _copy_run(tmp_path)
    doc = jsonio.read_json(run / "run.json")
    del doc["runId"]
    (run / "run.json").write_bytes(jsonio.dumps(doc))
    with pytest.raises(Refusal) as ei:
        summarize(run, REQ)
    assert ei.value.rule == "RUN-1"


@needs_spec
def test_summarize_refuses_a_request_that_does_not_read(tmp_path: Path):
    run = _copy_run(tmp_path)
    req = tmp_path / "request.json"
    req.write_bytes(b'{"lanes": [], "lanes": []}')
    with pytest.raises(Refusal) as ei:
        summarize(run, req)
    assert ei.value.rule == "ENC-2"
    with pytest.raises(Refusal) as ei:
        summarize(run, tmp_path / "absent.json")
    assert ei.value.exit_code == 2


@pytest.mark.parametrize("count", [1, 2, 7, 8, 1000, 1001])
def test_median_spilled_to_disk_is_the_same(monkeypatch, count):
    """Beyond AEFGATE_SPILL_VALUES values a median's values go to disk: the value is the same, duplicates,
    negative values and both parities included."""
    rnd = random.Random(count)
    vals = [rnd.choice([rnd.uniform(-5, 5), 0.5, -1.25, 3.0]) for _ in range(count)]
    got = {}
    for limit in ("1000000", "3", "0"):
        monkeypatch.setenv("AEFGATE_SPILL_VALUES", limit)
        acc = EntryAccumulator("score", "median", metric="q")
        for v in vals:
            acc.add_measure(v)
        got[limit] = acc.result()
        assert (acc._values.db is None) == (limit == "1000000" or count <= int(limit))
    s = sorted(vals)
    mid = count // 2
    want = s[mid] if count % 2 else (s[mid - 1] + s[mid]) / 2
    assert got["1000000"]["value"] == pytest.approx(want)
    assert got["3"] == got["0"] == got["1000000"]
