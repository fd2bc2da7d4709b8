"""The Inspect AI <-> AEF converter against ``interop/inspect.md`` and its five checked examples.

Every step and refusal of the examples' ``expected.json`` is driven from the JSON (here through the library; the
same list runs through the command line in ``tests/cli/test_inspect_cli.py``). Expected outputs are the example
files, compared as JSON values (NaN equal to NaN; blobs byte for byte); nothing here is computed by the converter
under test. Incomplete example folders are completed as ``../shared/spec/README.md`` says (see :func:`prepare`).
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import aefgate
from aefgate.aef import canonical
from aefgate.converters import fidelity as fidelity_mod
from aefgate.converters.inspect import conventions as inspect_common
from aefgate.converters.inspect import exporter as inspect_exporter
from aefgate.converters.inspect import importer as inspect_importer
from aefgate.converters.inspect import losses as inspect_losses
from aefgate.errors import Refusal
from aefgate.aef import jsonio
from aefgate.aef.resultid import result_id
from aefgate.aef.verifier import verify_run
from aefgate.formats.inspect import jsontext, open_log, write_log
from tests._shared import EXAMPLES, SAMPLES, copy_run

INSPECT_EXAMPLES = ("inspect-aef", "inspect-aef-edges", "aef-inspect", "aef-inspect-edges", "aef-inspect-trials")
OURS = ("from-inspect", "to-inspect")
# steps of these examples that another converter's (OpenTelemetry's) page owns
NOT_OURS = {("aef-inspect-trials", "to-otel")}
AT = "2026-10-09T00:00:00Z"


# -- the examples' expected.json, read generically ---------------------------------------------------------------


def expected(example: str) -> dict:
    return json.loads((EXAMPLES / example / "expected.json").read_text())


def parse_args(args: list[str]) -> tuple[str, list[str], dict[str, Any]]:
    """``from-inspect LOG {out} --target-mode M ...`` -> (op, positional arguments, options by keyword)."""
    op, rest = args[0], args[1:]
    pos: list[str] = []
    opts: dict[str, Any] = {}
    i = 0
    while i < len(rest):
        a = rest[i]
        if a.startswith("--"):
            name = a[2:].replace("-", "_")
            if name == "ignore_overlays":
                opts[name] = True
                i += 1
            else:
                opts[name] = rest[i + 1]
                i += 2
        else:
            pos.append(a)
            i += 1
    return op, pos, opts


def all_steps() -> list[tuple[str, int, dict]]:
    out = []
    for ex in INSPECT_EXAMPLES:
        for i, step in enumerate(expected(ex)["steps"]):
            out.append((ex, i, step))
    return out


def all_refusals() -> list[tuple[str, int, dict]]:
    out = []
    for ex in INSPECT_EXAMPLES:
        for i, ref in enumerate(expected(ex).get("refusals", [])):
            if (ex, ref["args"][0]) in NOT_OURS:
                continue
            out.append((ex, i, ref))
    return out


STEPS = all_steps()
REFUSALS = all_refusals()


def step_id(item: tuple[str, int, dict]) -> str:
    ex, i, entry = item
    return f"{ex}:{i}:{entry['args'][0]}:{entry['args'][1]}"


def test_every_example_entry_is_driven():
    """Nothing of the five examples is left out silently: each step and refusal is driven, except the to-otel
    refusal of aef-inspect-trials (OT-1, the OpenTelemetry converter's)."""
    n_steps = sum(len(expected(ex)["steps"]) for ex in INSPECT_EXAMPLES)
    n_refusals = sum(len(expected(ex).get("refusals", [])) for ex in INSPECT_EXAMPLES)
    assert len(STEPS) == n_steps == 8
    assert len(REFUSALS) == n_refusals - 1 == 37
    assert all(entry["args"][0] in OURS for _, _, entry in STEPS + REFUSALS)


# -- completing the incomplete example folders (../shared/spec/README.md) ------------------------------------------

TRIALS_RUN_ID = "01928f40-1111-7111-8111-111111111111"


def trials_input(dst: Path) -> Path:
    """``aef-inspect-trials/input``: the corpus run ``running-trials`` is not in shared/; this is the run its
    description and ``inspect.json`` give (a running run, three trials per case by MajorityVote, a pending line,
    a rollup; no scores, no summary), written line by line with the ids [RES-4] gives."""
    dst.mkdir(parents=True)
    run = {"schemaVersion": "1.0", "runId": TRIALS_RUN_ID, "status": "running",
           "producer": {"name": "agenteval-py", "version": "0.1.0a1"},
           "subject": {"ref": "workflow:travel/trip-planner", "kind": "workflow"},
           "execution": {"targetMode": "live", "stimulus": "generated"},
           "suite": {"ref": "suite:travel/bookings", "version": "1",
                     "executionPolicy": {"trialsPerCase": 3, "aggregation": "MajorityVote"}},
           "startedAt": "2026-10-04T10:00:00Z"}
    ev = {"id": "code:booking-made"}

    def line(case: str, trial: int | None, **kw: Any) -> dict:
        d = {"schemaVersion": "1.0", "resultId": result_id(TRIALS_RUN_ID, case, "booking", trial), "caseId": case,
             "path": "booking"}
        if trial is not None:
            d["trial"] = trial
        return {**d, **kw}

    lines = [line("case-3", t, evaluator=ev, state=s) for t, s in enumerate(["passed", "failed", "passed"])]
    lines.append(line("case-4", 0, evaluator=ev, state="pending", reason="Still running."))
    lines.append(line("case-3", None, trials={"n": 3, "passed": 2, "aggregation": "MajorityVote", "agree": False},
                      evaluator=ev, state="passed"))
    (dst / "run.json").write_bytes(jsonio.dumps(run))
    (dst / "metrics.json").write_bytes(jsonio.dumps({"schemaVersion": "1.0", "metrics": []}))
    (dst / "results.ndjson").write_bytes(b"".join(jsonio.dump_line(x) for x in lines))
    return dst


def metrics_from_lines(d: Path) -> None:
    used: list[str] = []
    for _, line in jsonio.iter_ndjson(d / "results.ndjson"):
        for s in line.get("scores", ()):
            if s["metric"] not in used:
                used.append(s["metric"])
    decls = [{"id": m, "kind": "score", "direction": "none", "scale": "unbounded"} for m in used]
    (d / "metrics.json").write_bytes(jsonio.dumps({"schemaVersion": "1.0", "metrics": decls}))


def complete(d: Path, *, own_metrics: bool) -> Path:
    """A closed run gets the empty summary its expected ``inspect.json`` shows (``results.scores: []``); a running
    run has none ([RUN-2]); an absent metrics.json (or one that is not the lines') declares what the lines score."""
    run = jsonio.read_json(d / "run.json")
    if run["status"] == "running":
        (d / "summary.json").unlink(missing_ok=True)
    elif not (d / "summary.json").exists():
        (d / "summary.json").write_bytes(jsonio.dumps({"schemaVersion": "1.0", "runId": run["runId"], "lanes": []}))
    if not own_metrics:
        metrics_from_lines(d)
    return d


def add_overlays(run: Path) -> None:
    """The corpus run completed-eval has overlays (aef-inspect/input is that run without them, README): one
    sealed annotate event, as the overlay writer appends it."""
    try:
        from aefgate.aef.decisions import decide
    except ImportError:  # pragma: no cover - the overlay writer ships with aefgate
        (run / "overlays").mkdir()
        event = {"schemaVersion": "1.0", "eventId": "ev-1", "kind": "annotate",
                 "target": {"run": jsonio.read_json(run / "run.json")["runId"]},
                 "by": {"identity": "reviewer@example.com"}, "at": "2026-10-03T00:00:00Z", "reason": "checked"}
        (run / "overlays" / "events.ndjson").write_bytes(jsonio.dump_line(event))
        return
    decide(run, kind="annotate", by="reviewer@example.com", reason="Triage reviewed.", at="2026-10-03T00:00:00Z")


def prepare(example: str, rel: str, tmp: Path) -> Path:
    """The input an entry names, ready to use: a log file as it is; a run folder copied and completed."""
    src = EXAMPLES / example / rel
    if src.is_file():
        return src
    dst = tmp / "inputs" / rel.replace("/", "__")
    if example == "aef-inspect-trials" and rel == "input":
        return trials_input(dst)
    if rel.startswith("refusals/"):
        # only the files that differ from the example's input: the input, then those files over it
        copy_run(EXAMPLES / example / "input", dst)
        for p in sorted(src.rglob("*")):
            if p.is_file():
                q = dst / p.relative_to(src)
                q.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(p, q)
        return complete(dst, own_metrics=(src / "metrics.json").exists())
    copy_run(src, dst)
    complete(dst, own_metrics=(src / "metrics.json").exists())
    if example == "aef-inspect" and rel == "input":
        add_overlays(dst)
    return dst


@pytest.mark.parametrize("example, rel", [(ex, name) for ex in INSPECT_EXAMPLES for name in
                                          expected(ex).get("runs", {})])
def test_prepared_inputs_verify_as_the_examples_say(tmp_path: Path, example: str, rel: str) -> None:
    outcome = expected(example)["runs"][rel]
    src = EXAMPLES / example / rel
    d = prepare(example, rel, tmp_path) if (src.exists() and not (src / "seal.json").exists()) or not src.exists() \
        else src
    v = verify_run(d)
    assert (v.outcome, v.problems) == (outcome, [])


# -- comparing outputs as JSON values --------------------------------------------------------------------------


def same_json(a: Any, b: Any, where: str = "") -> list[str]:
    """The places where two JSON values differ (numbers by value, NaN equal to NaN)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return [] if a is b else [where]
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return [] if a == b or (a != a and b != b) else [f"{where}: {a!r} != {b!r}"]
    if isinstance(a, dict) and isinstance(b, dict):
        out = [f"{where}/{k}: only on one side" for k in set(a) ^ set(b)]
        for k in set(a) & set(b):
            out += same_json(a[k], b[k], f"{where}/{k}")
        return out
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{where}: {len(a)} items != {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in same_json(x, y, f"{where}/{i}")]
    return [] if a == b else [f"{where}: {a!r} != {b!r}"]


def read_inspect(p: Path) -> Any:
    return jsontext.loads(p.read_bytes(), str(p))


def assert_same_log(mine: Path, ref: Path) -> None:
    diffs = same_json(read_inspect(mine), read_inspect(ref))
    assert diffs == [], diffs[:10]


PRODUCER = {"name": aefgate.PRODUCER_NAME, "version": aefgate.__version__}


def assert_same_run(mine: Path, ref: Path) -> None:
    """Every file of the expected run, as JSON values, blobs byte for byte. What cannot be equal by design: the
    producer ([RUN-15]: the converter is aefgate, the reference's is aef_interop.py), so the seal's digests of the
    JSON files and its run hash (over bytes aefgate writes its own way; checked instead by verifying the run), and
    ``sumSq``, binary64 within §3.6's tolerance ([SUM-5], CHANGELOG)."""
    files_mine = sorted(str(p.relative_to(mine)) for p in mine.rglob("*") if p.is_file())
    files_ref = sorted(str(p.relative_to(ref)) for p in ref.rglob("*") if p.is_file())
    assert files_mine == files_ref
    for rel in files_ref:
        a, b = mine / rel, ref / rel
        if rel.startswith("blobs/"):
            assert a.read_bytes() == b.read_bytes(), rel
            continue
        if rel.endswith((".ndjson", ".jsonl")):
            va = [x for _, x in jsonio.iter_ndjson(a)]
            vb = [json.loads(x) for x in b.read_text(encoding="utf-8").split("\n") if x]
        else:
            va, vb = jsonio.read_json(a, max_size=jsonio.MAX_SEAL), json.loads(b.read_text())
        if rel == "run.json":
            assert va["producer"] == PRODUCER
            vb = {**vb, "producer": PRODUCER}
        if rel == "summary.json":
            for la, lb in zip(va["lanes"], vb["lanes"]):
                for ea, eb in zip(la["metrics"], lb["metrics"]):
                    if "sumSq" in ea and "sumSq" in eb:
                        assert abs(ea["sumSq"] - eb["sumSq"]) <= 1e-9 * max(1.0, abs(eb["sumSq"]))
                        eb["sumSq"] = ea["sumSq"]
        if rel == "seal.json":
            v = verify_run(mine)
            assert va["predicate"]["runHash"] == v.run_hash
            assert va["predicate"]["producer"] == PRODUCER
            for sa, sb in zip(va["subject"], vb["subject"]):
                assert sa["name"] == sb["name"]
                if sa["name"].startswith("blobs/"):
                    assert sa["digest"] == sb["digest"]
                else:
                    assert sa["digest"]["sha256"] == hashlib.sha256((mine / sa["name"]).read_bytes()).hexdigest()
            va = {**va, "subject": [s["name"] for s in va["subject"]],
                  "predicate": {**va["predicate"], "runHash": None, "producer": None}}
            vb = {**vb, "subject": [s["name"] for s in vb["subject"]],
                  "predicate": {**vb["predicate"], "runHash": None, "producer": None}}
        diffs = same_json(va, vb, rel)
        assert diffs == [], diffs[:10]


# -- running an entry through the library ------------------------------------------------------------------------


def run_entry(example: str, entry: dict, tmp: Path) -> Path:
    """Run one step or refusal with the library; returns the output path."""
    op, pos, opts = parse_args(entry["args"])
    src = prepare(example, pos[0], tmp)
    out_dir = tmp / "out"
    out_dir.mkdir(exist_ok=True)
    if op == "from-inspect":
        out = out_dir / "run"
        # the page's exact run: lossless (aefgate's extension, on by default) off, in addition to the example's options
        inspect_importer.from_inspect(src, out, target_mode=opts.get("target_mode", "live"),
                                      content_capture=opts.get("content_capture", "on"), at=opts.get("at"),
                                      lossless=False)
    else:
        out = out_dir / "inspect.json"
        inspect_exporter.to_inspect(src, out, ignore_overlays=opts.get("ignore_overlays", False))
    return out


@pytest.mark.parametrize("item", STEPS, ids=step_id)
def test_step(tmp_path: Path, item: tuple[str, int, dict]) -> None:
    example, _, step = item
    out = run_entry(example, step, tmp_path)
    ref = EXAMPLES / example / step["expected"]
    if ref.is_dir():
        assert_same_run(out, ref)
        v = verify_run(out)
        assert (v.outcome, v.problems) == (expected(example)["runs"][step["expected"]], [])
    else:
        assert_same_log(out, ref)


@pytest.mark.parametrize("item", REFUSALS, ids=step_id)
def test_refusal(tmp_path: Path, item: tuple[str, int, dict]) -> None:
    example, _, ref = item
    with pytest.raises(Refusal) as e:
        run_entry(example, ref, tmp_path)
    assert e.value.rule == ref["says"], e.value
    assert e.value.exit_code == 2
    assert list((tmp_path / "out").iterdir()) == []  # nothing written, no temporary folder left


def test_a_run_that_does_not_verify_is_refused_in11(tmp_path: Path) -> None:
    """aef-otel-aef's refusals/result-id-mismatch (completed from aef-inspect/input, as the README says): the export
    refuses it (IN-11), as a run that does not verify: exit 1."""
    src = EXAMPLES / "aef-otel-aef" / "refusals" / "result-id-mismatch"
    d = copy_run(EXAMPLES / "aef-inspect" / "input", tmp_path / "run")
    for p in src.rglob("*"):
        if p.is_file():
            shutil.copyfile(p, d / p.relative_to(src))
    with pytest.raises(Refusal) as e:
        inspect_exporter.to_inspect(d, tmp_path / "out.json", ignore_overlays=True)
    assert (e.value.rule, e.value.exit_code) == ("IN-11", 1)
    assert not (tmp_path / "out.json").exists()


def test_an_import_whose_run_does_not_verify_is_refused_in11(tmp_path: Path) -> None:
    """IN-11 on the way in: a blob damaged on disk while the import runs (after it was written, before the seal)
    is found by the verification that precedes the seal: exit 1, nothing at the destination, no temporary left."""
    log = open_log(SAMPLES / "inspect" / "basic.eval")
    out = tmp_path / "out"

    def damage(done: int, total: int | None) -> None:
        if done == 1:
            blob = next(p for p in tmp_path.rglob("blobs/sha256/*/*") if p.is_file())
            blob.write_bytes(blob.read_bytes() + b"!")

    with pytest.raises(Refusal) as e:
        inspect_importer.import_log(log.header, log.samples(), out, target_mode="scripted", progress=damage)
    assert (e.value.rule, e.value.exit_code) == ("IN-11", 1), e.value
    assert "blobs/sha256/" in e.value.where
    assert list(tmp_path.iterdir()) == []


def test_the_import_verifies_in_one_process(tmp_path: Path, monkeypatch) -> None:
    """The verification before the seal checks every line in the importing process (docs/design/bounded-memory.md:
    its memory does not grow with the run), where `aefgate verify` of the same run would use worker processes."""
    from aefgate.aef import verifier

    monkeypatch.delenv("AEFGATE_WORKERS", raising=False)
    monkeypatch.setattr(verifier, "_PARALLEL_FROM", 0)  # any results.ndjson would be checked in workers
    monkeypatch.setattr(verifier.os, "sched_getaffinity", lambda _: {0, 1}, raising=False)
    pools = []
    real = verifier.multiprocessing.get_context
    monkeypatch.setattr(verifier.multiprocessing, "get_context", lambda *a: (pools.append(a), real(*a))[1])
    log = open_log(SAMPLES / "inspect" / "basic.eval")
    out = inspect_importer.import_log(log.header, log.samples(), tmp_path / "run", target_mode="scripted")
    assert pools == []
    assert verify_run(out).outcome == "intact" and pools  # while a verification outside the import forks
    with verifier.in_one_process():
        assert verifier._workers_for(1 << 30) == 0
        monkeypatch.setenv("AEFGATE_WORKERS", "2")
        assert verifier._workers_for(1 << 30) == 2  # the environment still decides


def test_overlays_ignored_give_the_same_log(tmp_path: Path) -> None:
    """IN-4: with --ignore-overlays the sealed lines are converted, exactly as the run without overlays."""
    with_overlays = prepare("aef-inspect", "input", tmp_path)
    assert (with_overlays / "overlays" / "events.ndjson").stat().st_size > 0
    inspect_exporter.to_inspect(with_overlays, tmp_path / "a.json", ignore_overlays=True)
    inspect_exporter.to_inspect(EXAMPLES / "aef-inspect" / "input", tmp_path / "b.json")
    assert_same_log(tmp_path / "a.json", tmp_path / "b.json")
    assert_same_log(tmp_path / "a.json", EXAMPLES / "aef-inspect" / "inspect.json")


def test_worked_example_blocks(tmp_path: Path) -> None:
    """The page's worked example: the sample of case-17 and the groundedness score shown apart."""
    header, samples = inspect_exporter.export_run(EXAMPLES / "aef-inspect" / "input")
    s = samples[0]
    assert s["id"] == "case-17" and s["epoch"] == 1 and s["total_time"] == 4.21
    g = s["scores"]["triage/groundedness"]
    assert math.isnan(g["value"]) and g["reason"] == "not_applicable"
    assert s["role_usage"]["judge"]["total_tokens"] == 2235
    assert s["model_usage"] == {"gpt-5.1": {"input_tokens": 1747, "output_tokens": 488, "total_tokens": 2235,
                                            "reasoning_tokens": 301, "total_cost": 0.012}}


def test_aef_inspect_trials_round_trip_lines(tmp_path: Path) -> None:
    """The trials example's run/ (an import of its inspect.json; its metrics.json is missing from shared/): the
    import of inspect.json writes the same lines, a running run, unsealed."""
    out = tmp_path / "run"
    inspect_importer.from_inspect(EXAMPLES / "aef-inspect-trials" / "inspect.json", out, target_mode="live", at=AT)
    mine = [x for _, x in jsonio.iter_ndjson(out / "results.ndjson")]
    ref = [json.loads(x) for x in (EXAMPLES / "aef-inspect-trials" / "run" / "results.ndjson").read_text().splitlines()]
    assert same_json(mine, ref) == []
    assert (out / "blobs").exists() and not (out / "seal.json").exists() and not (out / "summary.json").exists()
    run = jsonio.read_json(out / "run.json")
    refrun = json.loads((EXAMPLES / "aef-inspect-trials" / "run" / "run.json").read_text())
    assert same_json({**run, "producer": None}, {**refrun, "producer": None}) == []
    v = verify_run(out)
    assert (v.outcome, v.problems) == ("unsealed", [])


# -- the rules in isolation -------------------------------------------------------------------------------------


@pytest.mark.parametrize("value, text", [
    (1000, "1000"), (1000.0, "1000"), (1e16, "10000000000000000"), (1e21, "1e+21"), (1e-7, "1e-7"),
    (1e-6, "0.000001"), (2.5, "2.5"), (0.1, "0.1"), (-0.0, "0"), (123456789012345680000.0, "123456789012345680000"),
    (1.5e300, "1.5e+300"), (-2.5e-8, "-2.5e-8"), (5e-324, "5e-324"), (0.000123, "0.000123"), (100.0, "100"),
])
def test_number_to_string_as_ecmascript(value: float, text: str) -> None:
    assert canonical.number_to_string(value) == text


def test_jcs_rfc8785() -> None:
    # RFC 8785 §3.2.3's sorting example, by UTF-16 code units (not code points)
    doc = {"\u20ac": "Euro Sign", "\r": "Carriage Return", "\ufb33": "Hebrew Letter Dalet With Dagesh",
           "1": "One", "\U0001f600": "Emoji: Grinning Face", "\u0080": "Control", "\u00f6": "Latin Small Letter O "
           "With Diaeresis"}
    keys = [k for k in json.loads(canonical.jcs(doc).decode("utf-8"))]
    assert keys == ["\r", "1", "\u0080", "\u00f6", "\u20ac", "\U0001f600", "\ufb33"]
    assert canonical.jcs({"b": [1.0, 2.50, "x\n\u001f\"\\/é"], "a": None}) == \
        '{"a":null,"b":[1,2.5,"x\\n\\u001f\\"\\\\/é"]}'.encode("utf-8")
    for bad in (math.nan, math.inf, "\udc00", {"\ud800": 1}):
        with pytest.raises(ValueError):
            canonical.jcs([bad])


_json_leaf = (st.none() | st.booleans() | st.integers(min_value=-(2**60), max_value=2**60)
              | st.floats(allow_nan=False, allow_infinity=False) | st.text())
_json_values = st.recursive(_json_leaf, lambda inner: st.lists(inner, max_size=4)
                            | st.dictionaries(st.text(max_size=6), inner, max_size=4), max_leaves=20)


@settings(max_examples=400, deadline=None)
@given(st.lists(_json_values, max_size=4) | st.dictionaries(st.text(max_size=6), _json_values, max_size=4))
def test_jcs_fast_path_is_the_exact_writer(value: Any) -> None:
    """msgspec's fast path gives byte for byte what the value-by-value JCS writer gives (text of any code points,
    integers either side of 2^53, floats), or leaves the value to it."""
    try:
        exact = canonical._jcs_exact(value)
    except ValueError:
        with pytest.raises(ValueError):
            canonical.jcs(value)
        return
    assert canonical.jcs(value) == exact


def test_jcs_fast_path_leaves_what_is_not_json_to_the_exact_writer() -> None:
    for value in ([b"x"], [{1, 2}], {"a": (1, 2)}, [2**53 + 1], [-(2**53) - 1], [2**53], [10**20 + 0.5],
                  {"\ue000": 1, "\U0001f600": 2}, [1.0], [1e16], [1e-7], [-0.0], [0.00018391300000075717],
                  ["12345678901234567"], [math.nan], [math.inf]):
        try:
            exact = canonical._jcs_exact(value)
        except ValueError:
            with pytest.raises(ValueError):
                canonical.jcs(value)
            continue
        assert canonical.jcs(value) == exact


@pytest.mark.parametrize("name, encoded", [
    ("acme/gpt x", "acme/gpt%20x"), ("", "-"), ("-", "%2D"), ("a%b", "a%25b"), ("é", "%C3%A9"),
    ("workflow:travel/trip-planner", "workflow:travel/trip-planner"),
])
def test_ref_names_encode_and_decode(name: str, encoded: str) -> None:
    assert inspect_common.encode_name(name) == encoded
    assert inspect_common.decode_name(encoded) == name


def test_a_name_that_does_not_decode_is_kept() -> None:
    assert inspect_common.decode_name("a%zz") == "a%zz"
    assert inspect_common.decode_name("%FF") == "%FF"  # not UTF-8


def _log(**changes: Any) -> tuple[dict, list[dict]]:
    """The inspect-aef-edges log as (header, samples), with changes applied to the header."""
    log = jsontext.loads((EXAMPLES / "inspect-aef-edges" / "log.json").read_bytes(), "log")
    samples = log.pop("samples")
    log.update(changes)
    return log, samples


def test_limit_and_error_reasons_r8_4(tmp_path: Path) -> None:
    header, samples = _log()
    inspect_importer.import_log(header, samples, tmp_path / "run", at=AT)
    reasons = {(x["caseId"], x["path"]): x.get("reason") for _, x in jsonio.iter_ndjson(tmp_path / "run" /
                                                                                          "results.ndjson")}
    assert reasons[("d", "q")] == "token limit 1000"
    assert reasons[("e", "q")] == "token limit 10000000000000000"
    assert reasons[("f", "q")] == "message limit 1e+21"
    assert reasons[("g", "q")] == reasons[("k", "m")] == "Inspect recorded an error without a message"
    assert len(reasons[("c", "q")]) == 4096


def test_a_scored_sample_stopped_by_a_limit_keeps_its_scores(tmp_path: Path) -> None:
    """Inspect scores a sample that hit a limit, and its metrics count it: the scores stand (IN-9 could not hold
    otherwise), the limit is kept beside them (docs/mappings/inspect.md)."""
    inspect_importer.from_inspect(SAMPLES / "inspect" / "errors_limits.json", tmp_path / "run")
    lines = {(x["caseId"], x["path"]): x for _, x in jsonio.iter_ndjson(tmp_path / "run" / "results.ndjson")}
    chatty = lines[("chatty", "match")]
    assert chatty["state"] == "failed" and chatty["scores"][0]["label"] == "I"
    assert chatty["ext"]["inspect_ai"]["limit"] == "message limit 6"
    assert lines[("boom", "match")]["state"] == "error" and "scores" not in lines[("boom", "match")]


def test_import_refuses_bad_options(tmp_path: Path) -> None:
    log = EXAMPLES / "inspect-aef" / "log.json"
    for kw, rule in (({"target_mode": "real"}, "CLI-2"), ({"content_capture": "maybe"}, "CLI-2"),
                     ({"at": "yesterday"}, "CLI-2")):
        with pytest.raises(Refusal) as e:
            inspect_importer.from_inspect(log, tmp_path / "run", **kw)
        assert e.value.rule == rule
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    with pytest.raises(Refusal) as e:
        inspect_importer.from_inspect(log, tmp_path / "full")
    assert e.value.rule == "OUT-1"


def test_import_signs_the_seal_with_a_key(tmp_path: Path) -> None:
    from aefgate.aef.signatures import TrustPolicy, attestation_signed_by, keygen

    private, _, entry = keygen("ed25519", "ingest@example.com")
    key = tmp_path / "key.pem"
    key.write_bytes(private)
    out = tmp_path / "run"
    inspect_importer.from_inspect(EXAMPLES / "inspect-aef" / "log.json", out, at=AT, key=key)
    policy_file = tmp_path / "trust.json"
    policy_file.write_bytes(jsonio.dumps({"keys": [entry]}))
    assert attestation_signed_by(out, TrustPolicy.load(policy_file)) == ["ingest@example.com"]
    assert verify_run(out).outcome == "intact"
    # a key that does not load is refused before anything is written
    bad = tmp_path / "bad.pem"
    bad.write_text("not a key")
    with pytest.raises(Refusal) as e:
        inspect_importer.from_inspect(EXAMPLES / "inspect-aef" / "log.json", tmp_path / "run2", at=AT, key=bad)
    assert e.value.rule == "SIG-2" and not (tmp_path / "run2").exists()


def test_export_refuses_a_second_judge_and_a_count_entry(tmp_path: Path) -> None:
    d = prepare("aef-inspect-edges", "input", tmp_path)
    run = jsonio.read_json(d / "run.json")
    (d / "run.json").write_bytes(jsonio.dumps({**run, "judges": [{"model": "a"}, {"model": "b"}]}))
    with pytest.raises(Refusal) as e:
        inspect_exporter.to_inspect(d, tmp_path / "x.json")
    assert e.value.rule == "IN-1"
    (d / "run.json").write_bytes(jsonio.dumps({k: v for k, v in run.items() if k != "suite"}))
    with pytest.raises(Refusal) as e:
        inspect_exporter.to_inspect(d, tmp_path / "x.json")
    assert e.value.rule == "IN-1"
    (d / "run.json").write_bytes(jsonio.dumps(run))
    metrics = jsonio.read_json(d / "metrics.json")
    metrics["metrics"][0]["kind"] = "count"
    (d / "metrics.json").write_bytes(jsonio.dumps(metrics))
    (d / "summary.json").write_bytes(jsonio.dumps({"schemaVersion": "1.0", "runId": run["runId"], "lanes": [
        {"lane": "main", "metrics": [{"metric": "correct", "path": "letter", "N": 1, "n": 1, "notMeasured": 0,
                                      "value": 1, "verdict": "scored", "sum": 1, "sumSq": 1}]}]}))
    assert verify_run(d).problems == []
    with pytest.raises(Refusal) as e:
        inspect_exporter.to_inspect(d, tmp_path / "x.json")
    assert e.value.rule == "IN-3"


def test_builder_streams_trials_and_rollups(tmp_path: Path) -> None:
    """RunBuilder.add_trial / add_rollup (added for this converter): lines in the order given, RES-8 checked."""
    from aefgate.aef.builder import RunBuilder

    header = {"runId": "r-1", "subject": {"ref": "model:m", "kind": "model"}, "startedAt": "2026-10-01T10:00:00Z",
              "execution": {"targetMode": "live"},
              "suite": {"ref": "suite:s", "version": "1", "executionPolicy": {"trialsPerCase": 2,
                                                                             "aggregation": "AnyPass"}}}
    node = {"path": "p", "evaluator": {"id": "e"}, "state": "passed"}
    with RunBuilder(tmp_path / "run", header) as b:
        b.add_trial("c", node, 0)
        b.add_trial("c", {**node, "state": "failed"}, 1)
        with pytest.raises(Refusal) as e:
            b.add_rollup("c", {**node, "path": "q"})
        assert e.value.rule == "RES-8"
        b.add_rollup("c", node)
        with pytest.raises(Refusal) as e:
            b.add_trial("c", node, 2)
        assert e.value.rule == "RES-8"
        b.finish(ended_at="2026-10-01T10:01:00Z", seal="producer")
    lines = [x for _, x in jsonio.iter_ndjson(tmp_path / "run" / "results.ndjson")]
    assert [x.get("trial") for x in lines] == [0, 1, None]
    assert lines[2]["trials"] == {"n": 2, "passed": 1, "aggregation": "AnyPass", "agree": False}
    assert verify_run(tmp_path / "run").outcome == "intact"
    with pytest.raises(Refusal) as e:
        with RunBuilder(tmp_path / "run2", header) as b:
            b.add_trial("c", node, 0)
            b.finish(ended_at="2026-10-01T10:01:00Z")
    assert e.value.rule == "RES-8" and not (tmp_path / "run2").exists()
    with RunBuilder(tmp_path / "run3", header) as b:  # a running run may lack its rollups
        b.add_trial("c", node, 0)
        b.finish_running()
    assert jsonio.read_json(tmp_path / "run3" / "run.json")["status"] == "running"
    assert verify_run(tmp_path / "run3").outcome == "unsealed"


# -- the shared samples (real inspect-ai 0.3.285 logs) ----------------------------------------------------------

SAMPLE_LOGS = sorted(p for p in (SAMPLES / "inspect").iterdir() if p.suffix in (".eval", ".json"))


def test_there_are_sample_logs() -> None:
    assert len(SAMPLE_LOGS) >= 5


@pytest.mark.parametrize("log", SAMPLE_LOGS, ids=lambda p: p.name)
@pytest.mark.parametrize("capture", ["on", "off"])
def test_every_sample_log_imports_and_verifies_intact(tmp_path: Path, log: Path, capture: str) -> None:
    out = inspect_importer.from_inspect(log, tmp_path / "run", target_mode="live", content_capture=capture)
    v = verify_run(out)
    assert (v.outcome, v.problems) == ("intact", [])
    header = open_log(log).header
    run = jsonio.read_json(out / "run.json")
    assert run["runId"] == header["eval"]["eval_id"]
    assert run["imported"]["from"] == f"inspect_ai {header['eval']['packages']['inspect_ai']}"
    if capture == "off":
        assert not (out / "blobs").exists() and not (out / "evidence.ndjson").exists()


def expected_value(line: dict) -> Any:
    scores = line.get("scores") or []
    if len(scores) == 1:
        return scores[0].get("label", scores[0]["value"])
    if scores:
        return {s["metric"]: s.get("label", s["value"]) for s in scores}
    return math.nan


def assert_log_has_the_run(log_path: Path, run: Path) -> None:
    """Read with inspect_ai itself: the samples, ids, epochs and scores the run had."""
    from inspect_ai.log import read_eval_log

    log = read_eval_log(str(log_path))
    lines = [x for _, x in jsonio.iter_ndjson(run / "results.ndjson") if "trials" not in x]
    keys = list(dict.fromkeys((x["caseId"], x.get("trial", 0) + 1) for x in lines))
    assert len(log.samples) == len(keys)
    got = {(str(s.id), s.epoch): s for s in log.samples}
    assert set(got) == set(keys)
    for x in lines:
        score = got[(x["caseId"], x.get("trial", 0) + 1)].scores[x["path"]]
        assert same_json(score.value, expected_value(x)) == [], (x["caseId"], x["path"])
    rollups = [x for _, x in jsonio.iter_ndjson(run / "results.ndjson") if "trials" in x]
    if log.status == "started" and log_path.suffix == ".eval":
        return  # inspect_ai reads a running .eval from its journal, without reductions.json
    red = {(str(s.sample_id), r.scorer): s.value for r in (log.reductions or []) for s in r.samples}
    assert len(red) == len(rollups)
    for x in rollups:
        assert same_json(red[(x["caseId"], x["path"])], expected_value(x)) == []


@pytest.mark.parametrize("log", SAMPLE_LOGS, ids=lambda p: p.name)
def test_exported_logs_load_with_inspect_ai(tmp_path: Path, log: Path) -> None:
    # the page's export (a lossless run gives back its log, single-epoch reductions included: test_inspect_lossless)
    run = inspect_importer.from_inspect(log, tmp_path / "run", content_capture="off", lossless=False)
    for suffix in (".eval", ".json"):
        out = inspect_exporter.to_inspect(run, tmp_path / f"out{suffix}")
        assert_log_has_the_run(out, run)


@pytest.mark.parametrize("rel", ["aef-inspect/input", "aef-inspect-edges/input", "aef-inspect-edges/input-off",
                                 "aef-inspect-trials/input"])
def test_exported_example_runs_load_with_inspect_ai(tmp_path: Path, rel: str) -> None:
    example, name = rel.split("/")
    run = prepare(example, name, tmp_path)
    for suffix in (".eval", ".json"):
        out = inspect_exporter.to_inspect(run, tmp_path / f"out{suffix}", ignore_overlays=True)
        assert_log_has_the_run(out, run)
    # the two forms hold the same values (a running .eval keeps its header in the journal: samples compared there)
    a, b = read_inspect_any(tmp_path / "out.json"), read_inspect_any(tmp_path / "out.eval")
    assert same_json(a["samples"], b["samples"]) == []
    if a["status"] != "started":
        assert same_json(a, b) == []


def read_inspect_any(p: Path) -> dict:
    """A log's header and samples (in (epoch, id) order: a .eval keeps its samples in that order)."""
    log = open_log(p)
    samples = sorted(log.samples(), key=lambda s: (s["epoch"], str(s["id"])))
    return {**log.header, "samples": samples}


# -- fidelity: AEF -> Inspect -> AEF, against "What does not carry over" ----------------------------------------

FIDELITY_RUNS = ["aef-inspect/input", "aef-inspect-edges/input", "aef-inspect-edges/input-off",
                 "aef-inspect-trials/input"]


@pytest.mark.parametrize("rel", FIDELITY_RUNS)
def test_fidelity_of_the_example_runs_reports_only_listed_losses(tmp_path: Path, rel: str) -> None:
    example, name = rel.split("/")
    run = prepare(example, name, tmp_path)
    report = fidelity_mod.fidelity("inspect", run, options={"ignore_overlays": True})
    assert report.refusal is None
    assert report.unlisted == []
    assert report.ok
    kept = set(report.kept)
    assert {"results:caseId", "results:path", "run.json:runId", "run.json:suite.ref"} <= kept
    lost = dict(report.lost)
    if rel == "aef-inspect/input":
        assert {"results:parentResultId", "results:state", "file:seal.json", "file:overlays"} <= set(lost)
        # (lines the way back gives a score or a reasoning the original line had not are differences of the field)
        assert report.fields["results:scores[].value"].kept > 0 and report.fields["results:reasoning.blob"].kept > 0


def test_fidelity_declares_a_loss_the_page_does_not_list(tmp_path: Path) -> None:
    """aef-inspect/run (the round trip's own output) has lines with ext, which the table does not carry and the
    page's list does not name: aefgate declares it as its own addition (docs/mappings/inspect.md)."""
    report = fidelity_mod.fidelity("inspect", EXAMPLES / "aef-inspect" / "run")
    assert report.ok, report.summary()
    ext = [(f, item) for f, item in report.lost if f.startswith("results:ext")]
    assert ext and all(item.startswith("A result line's ext") for _, item in ext)
    (loss,) = [x for x in report.losses if x.text.startswith("A result line's ext")]
    assert loss.source == "aefgate"


def test_fidelity_reports_an_export_that_does_not_import_back(tmp_path: Path) -> None:
    """A label other than C, I, P, N is exported as that string (the page's export), which the import refuses
    (IN-7); round trips take the export's label_values (aefgate's extension): the score's value, the label a declared
    loss."""
    d = prepare("aef-inspect-edges", "input", tmp_path)
    lines = (d / "results.ndjson").read_text().replace('"label":"C"}],"startedAt":"2026-10-08T09:01:00Z"',
                                                       '"label":"yes"}],"startedAt":"2026-10-08T09:01:00Z"')
    (d / "results.ndjson").write_text(lines)
    assert verify_run(d).problems == []
    report = fidelity_mod.fidelity("inspect", d, options={"label_values": False})
    assert report.refusal is not None and report.refusal.rule == "IN-7"
    assert not report.ok
    report = fidelity_mod.fidelity("inspect", d)
    assert report.ok, report.summary()
    assert report.fields["results:scores[].label"].declared == 1


# -- logs generated with inspect-ai in shapes the shared samples do not have ------------------------------------

GENERATOR = r'''
import sys
from pathlib import Path
from inspect_ai import Task, eval as ieval, Epochs
from inspect_ai.dataset import Sample
from inspect_ai.log import read_eval_log, write_eval_log
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import Score, includes, match, mean, model_graded_qa, scorer
from inspect_ai.solver import generate, solver

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)

def mock(texts, name="mockllm/model"):
    outs = []
    for i in range(60):  # outputs carry usage: no tokenizer download (no network)
        t = texts[i % len(texts)]
        o = ModelOutput.from_content(model=name, content=t)
        o.usage = ModelUsage(input_tokens=3, output_tokens=len(t.split()), total_tokens=3 + len(t.split()))
        outs.append(o)
    return get_model(name, custom_outputs=outs)

@scorer(metrics={"a": [mean()], "b": [mean()]})
def dict_scorer():
    async def score(state, target):
        return Score(value={"a": 1.0, "b": "C"}, explanation="dict \u2713 \u2014 \u00abok\u00bb")
    return score

@solver
def boom():
    async def solve(state, generate):
        if str(state.sample_id).startswith("bad"):
            raise RuntimeError("deliberate failure \u2717")
        return await generate(state)
    return solve

def ds():
    return [Sample(id="\u00fc1", input="Wie hei\u00dft die Hauptstadt Frankreichs? \U0001f1eb\U0001f1f7", target="Paris"),
            Sample(id=2, input="2+2?", target="4"), Sample(id="\u03c33", input="\u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac;", target="\u03bd\u03b1\u03b9")]

answers = ["Paris", "4", "\u03bd\u03b1\u03b9", "Lyon", "5"]
tasks = {
    "judge": Task(name="judge", dataset=ds(), solver=[generate()],
                  scorer=model_graded_qa(model=mock(["GRADE: C", "GRADE: I", "GRADE: P"], "mockllm/grader"))),
    "at_least_2": Task(name="at_least_2", dataset=ds(), solver=[generate()], scorer=match(), epochs=Epochs(2, "at_least_2")),
    "pass_at_2": Task(name="pass_at_2", dataset=ds(), solver=[generate()], scorer=match(), epochs=Epochs(2, "pass_at_2")),
    "median": Task(name="median", dataset=ds(), solver=[generate()], scorer=match(), epochs=Epochs(3, "median")),
    "mode": Task(name="mode", dataset=ds(), solver=[generate()], scorer=includes(), epochs=Epochs(3, "mode")),
    "at_least_1": Task(name="at_least_1", dataset=ds(), solver=[generate()], scorer=match(), epochs=Epochs(2, "at_least_1")),
    "two_reducers": Task(name="two_reducers", dataset=ds(), solver=[generate()], scorer=match(), epochs=Epochs(2, ["mean", "max"])),
    "pass_at_1_one_epoch": Task(name="pass_at_1_one_epoch", dataset=ds(), solver=[generate()], scorer=match(), epochs=Epochs(1, "pass_at_1")),
    "errors": Task(name="errors", dataset=ds() + [Sample(id="bad1", input="x", target="y")], solver=[boom()],
                   scorer=[match(), dict_scorer()]),
    "dict": Task(name="dict", dataset=ds(), solver=[generate()], scorer=[dict_scorer(), match()]),
}
for name, t in tasks.items():
    logs = ieval(t, model=mock(answers), log_dir=str(out / "raw"), display="none", fail_on_error=False,
                 log_format="eval")
    full = read_eval_log(logs[0].location)
    write_eval_log(full, str(out / f"{name}.eval"))
    if name in ("judge", "errors"):
        write_eval_log(full, str(out / f"{name}.json"))
cancelled = read_eval_log(str(out / "dict.eval"))
cancelled.status = "cancelled"
write_eval_log(cancelled, str(out / "cancelled.json"))
started = read_eval_log(str(out / "dict.eval"))
started.status = "started"
started.stats.completed_at = ""
started.results = None
write_eval_log(started, str(out / "started.eval"))
'''

# what each generated log must give: the import (a run that verifies: its outcome; or a refusal: its rule), then
# the export of that run (content off) back to Inspect ("log", or a refusal's rule). A map-valued scorer's results
# are one EvalScore per member: they come in as entries at the scorer's path, which the export refuses (IN-3).
GENERATED = {
    "judge.eval": ("intact", "log"), "judge.json": ("intact", "log"), "at_least_2.eval": ("intact", "log"),
    "pass_at_2.eval": ("intact", "log"), "median.eval": ("intact", "log"), "mode.eval": ("intact", "log"),
    "at_least_1.eval": ("intact", "log"), "two_reducers.eval": ("IN-8", None),
    "pass_at_1_one_epoch.eval": ("intact", "log"), "errors.eval": ("intact", "IN-3"),
    "errors.json": ("intact", "IN-3"), "dict.eval": ("intact", "IN-3"), "cancelled.json": ("intact", "IN-3"),
    "started.eval": ("unsealed", "log"),
}


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import subprocess
    import sys

    out = tmp_path_factory.mktemp("inspect-logs")
    p = subprocess.run([sys.executable, "-c", GENERATOR, str(out)], capture_output=True, text=True, timeout=600,
                       env={**__import__("os").environ, "INSPECT_DISPLAY": "none", "NO_COLOR": "1"})
    assert p.returncode == 0, p.stderr[-3000:]
    return out


@pytest.mark.parametrize("name", sorted(GENERATED))
def test_generated_logs_import_without_a_traceback(generated: Path, tmp_path: Path, name: str) -> None:
    want, back = GENERATED[name]
    for capture in ("on", "off"):
        out = tmp_path / f"run-{capture}"
        try:
            inspect_importer.from_inspect(generated / name, out, content_capture=capture, lossless=False)  # the page's
        except Refusal as e:
            assert e.rule == want, e
            assert not out.exists()
            continue
        v = verify_run(out)
        assert (v.outcome, v.problems) == (want, [])
        if capture == "on":  # both round trips, with only declared losses (model-graded, dict scores, errors, ids)
            report = fidelity_mod.fidelity("inspect", out)
            assert report.ok, report.summary()
            report = fidelity_mod.fidelity_from_source("inspect", generated / name, options={"lossless": False})
            assert report.ok, report.summary()
            # lossless, the default (docs/mappings/inspect.md): nothing lost, a started, cancelled or error log included
            report = fidelity_mod.fidelity_from_source("inspect", generated / name)
            assert report.ok and report.lost == [], report.summary()
        if capture == "off":
            try:
                exported = inspect_exporter.to_inspect(out, tmp_path / f"{name}.back.eval")
            except Refusal as e:
                assert e.rule == back, e
                continue
            assert back == "log"
            assert_log_has_the_run(exported, out)


def test_generated_shapes_map_as_the_page_says(generated: Path, tmp_path: Path) -> None:
    # a model-graded judge: the grader's letters, explanations as reasoning blobs
    run = inspect_importer.from_inspect(generated / "judge.eval", tmp_path / "judge")
    lines = [x for _, x in jsonio.iter_ndjson(run / "results.ndjson")]
    assert {x["state"] for x in lines} <= {"passed", "failed", "warn", "error"}
    for x in lines:  # the grader's letter, or NaN with grader_failed (the mock grader's P is not a grade it reads)
        assert x["scores"][0]["label"] in "CIPN" if "scores" in x else x["reason"] == "grader_failed"
        assert "reasoning" in x
    # reducers: at_least_2 with 2 epochs is AllPass, pass_at_2 is PassAtK with k
    for name, agg, k in (("at_least_2", "AllPass", None), ("pass_at_2", "PassAtK", 2), ("median", "Median", None),
                         ("mode", "MajorityVote", None), ("at_least_1", "AnyPass", None)):
        r = inspect_importer.from_inspect(generated / f"{name}.eval", tmp_path / name, content_capture="off")
        roll = [x for _, x in jsonio.iter_ndjson(r / "results.ndjson") if "trials" in x]
        assert roll and all(x["trials"]["aggregation"] == agg and x["trials"].get("k") == k for x in roll)
    # one epoch and a reducer AEF has no value for: kept in ext
    r = inspect_importer.from_inspect(generated / "pass_at_1_one_epoch.eval", tmp_path / "one", content_capture="off")
    assert jsonio.read_json(r / "run.json")["suite"]["executionPolicy"] == {"trialsPerCase": 1, "aggregation":
                                                                           "PassAtK", "k": 1}
    # a map-valued scorer: one score per member, the entries named for members summarized at the scorer's path
    r = inspect_importer.from_inspect(generated / "dict.eval", tmp_path / "dict", content_capture="off")
    summary = jsonio.read_json(r / "summary.json")
    assert [(e["metric"], e["path"]) for e in summary["lanes"][0]["metrics"]] == [
        ("a", "dict_scorer"), ("b", "dict_scorer"), ("match", "match")]
    # errors: the failed sample's lines are error, one per scorer, with the message
    r = inspect_importer.from_inspect(generated / "errors.eval", tmp_path / "errors", content_capture="off")
    bad = [x for _, x in jsonio.iter_ndjson(r / "results.ndjson") if x["caseId"] == "bad1"]
    assert [x["state"] for x in bad] == ["error", "error"] and "deliberate failure" in bad[0]["reason"]
    # cancelled: aborted with the reason "cancelled"
    r = inspect_importer.from_inspect(generated / "cancelled.json", tmp_path / "cancelled", content_capture="off")
    assert jsonio.read_json(r / "run.json")["abortReason"] == "cancelled"
    # unicode ids and content survive, byte for byte in the blobs
    r = inspect_importer.from_inspect(generated / "dict.eval", tmp_path / "uni")
    assert "\u00fc1" in {x["caseId"] for _, x in jsonio.iter_ndjson(r / "results.ndjson")}
    blobs = {p.read_bytes() for p in (r / "blobs").rglob("*") if p.is_file()}
    assert "Wie hei\u00dft die Hauptstadt Frankreichs? \U0001f1eb\U0001f1f7".encode("utf-8") in blobs


# -- the registry -------------------------------------------------------------------------------------------------


def test_registered_both_ways_with_the_pages_losses() -> None:
    from aefgate.converters.registry import registry

    reg = registry()
    imp, exp = reg.between("inspect", "aef"), reg.between("aef", "inspect")
    assert imp is not None and exp is not None
    assert imp.losses == inspect_losses.LOSSES_FROM_INSPECT
    assert exp.losses == inspect_losses.LOSSES_TO_INSPECT
    assert {o.name for o in imp.options} == {"target_mode", "content_capture", "at", "key", "grader_types",
                                             "lossless"}
    assert {o.name for o in exp.options} == {"ignore_overlays", "output_from_evidence", "map_scorers", "grader_types",
                                             "task", "model", "case_times", "omit_unscored", "label_values"}


def test_convert_through_the_registry(tmp_path: Path) -> None:
    from aefgate.converters.registry import find_route, run_route

    run_route(find_route("inspect", "aef"), EXAMPLES / "inspect-aef" / "log.json", tmp_path / "run",
              {"target_mode": "live", "at": AT, "lossless": "false"})  # the page's run: lossless off
    assert_same_run(tmp_path / "run", EXAMPLES / "inspect-aef" / "run")
    run_route(find_route("aef", "inspect"), prepare("aef-inspect", "input", tmp_path), tmp_path / "log.json",
              {"ignore_overlays": "true"})
    assert_same_log(tmp_path / "log.json", EXAMPLES / "aef-inspect" / "inspect.json")


def test_write_log_round_trip_keeps_nan(tmp_path: Path) -> None:
    header, samples = inspect_exporter.export_run(EXAMPLES / "aef-inspect" / "input")
    write_log(tmp_path / "x.json", header, samples, fmt="json")
    assert b"NaN" in (tmp_path / "x.json").read_bytes()


# -- the event transcript: checked from the text the reader measured, or walked ----------------------------------


def _log_file_with_events(tmp_path: Path, events_json: str) -> Path:
    """inspect-aef-edges' log.json with ``"events": <events_json>`` added to its first sample, as text."""
    text = (EXAMPLES / "inspect-aef-edges" / "log.json").read_text("utf-8")
    at = text.index("{", text.index('"samples": ['))
    p = tmp_path / "log.json"
    p.write_text(text[:at + 1] + f'"events": {events_json}, ' + text[at + 1:], "utf-8")
    return p


def _nested(levels: int) -> str:
    return "[" * levels + "]" * levels


@pytest.mark.parametrize("events, rule", [
    ('[{"event": "info", "data": "\\ud800"}]', "IN-6"),  # an unpaired surrogate, escaped
    ('[{"event": "info", "data": {"\\udc00": 1}}]', "IN-6"),  # ... in a member name
    ('[{"event": "info", "data": ' + "9" * 400 + "}]", "IN-6"),  # beyond binary64
    ('[{"event": "info", "data": ' + _nested(60) + "}]", "IN-6"),  # events (4)/0 (5)/data (6..65)
    ('[{"event": "info", "data": "\\ud83d\\ude00 ' + "1" * 400 + '"}]', None),  # a pair, digits in a string
    ('[{"event": "info", "data": ' + _nested(59) + "}]", None),  # depth 64: the deepest allowed
    ('[{"event": "info", "data": ' + _nested(30) + "}]", None),  # cleared by the facts
    ('[{"event": "score", "score": {"value": NaN}}]', None),  # Inspect's unscored value
])
def test_events_are_checked_through_the_reader(tmp_path: Path, events: str, rule: str | None) -> None:
    """The transcript is not carried, but a log whose events AEF could not hold is refused (IN-6), whether the
    reader's text facts clear it or the walk has to look: the same answers both ways."""
    p = _log_file_with_events(tmp_path, events)
    first = next(open_log(p).samples())
    assert first.facts is not None and first["events"]
    cleared = "\\u" not in events and "9" * 309 not in events and "1" * 309 not in events and events.count("[") < 40
    assert inspect_importer._events_plain(first) == cleared
    header, samples = _log()
    plain = [dict(s) for s in open_log(p).samples()]  # no facts: walked
    for source, out in ((lambda: open_log(p).samples(), "a"), (lambda: iter(plain), "b")):
        log = open_log(p)
        if rule is None:
            inspect_importer.import_log(log.header, source(), tmp_path / out, at=AT)
            assert verify_run(tmp_path / out).outcome == "intact"
        else:
            with pytest.raises(Refusal) as e:
                inspect_importer.import_log(log.header, source(), tmp_path / out, at=AT)
            assert e.value.rule == rule and e.value.where.startswith("/samples/0/events"), e.value
            assert not (tmp_path / out).exists()


_facts_leaf = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) \
    | st.text(alphabet=st.characters(blacklist_categories=()), max_size=5) \
    | st.text(alphabet='[]{}"\\\nu0d8', max_size=8)  # brackets, quotes and escapes inside strings
_facts_keys = st.text(max_size=3) | st.text(alphabet='[]{}"\\', max_size=4)
_facts_values = st.recursive(_facts_leaf, lambda inner: st.lists(inner, max_size=3)
                             | st.dictionaries(_facts_keys, inner, max_size=3), max_leaves=25)


def _depth(v: Any) -> int:
    if isinstance(v, dict):
        return 1 + max((_depth(x) for x in v.values()), default=0)
    if isinstance(v, list):
        return 1 + max((_depth(x) for x in v), default=0)
    return 0


def _has_surrogate(v: Any) -> bool:
    if isinstance(v, str):
        return any("\ud800" <= c <= "\udfff" for c in v)
    if isinstance(v, dict):
        return any(_has_surrogate(k) or _has_surrogate(x) for k, x in v.items())
    if isinstance(v, list):
        return any(_has_surrogate(x) for x in v)
    return False


@settings(max_examples=600, deadline=None)
@given(_facts_values, st.booleans())
def test_text_facts_agree_with_a_walk(value: Any, ascii_only: bool) -> None:
    """depth is the value's nesting, brackets inside strings ignored; an unpaired surrogate is always seen."""
    text = json.dumps(value, ensure_ascii=ascii_only)
    if not ascii_only and _has_surrogate(value):
        return  # not UTF-8 text: the reader refuses it before any facts
    facts = jsontext.text_facts(text)
    assert facts.depth == _depth(value)
    assert jsontext.text_facts(text.encode("utf-8", "surrogatepass")).depth == facts.depth
    if _has_surrogate(value):
        assert facts.surrogate_escapes
    if not ascii_only and not _has_surrogate(value) and "\\u" not in text:
        assert not facts.surrogate_escapes


# -- a .eval imported by case (memory flat in the number of samples, docs/mappings/inspect-format.md) ---------------

EPOCHS_EVAL = SAMPLES / "inspect" / "epochs_mean.eval"
LATER = "2027-01-01T00:00:00Z"  # a seal time after the sample logs end


def _lines_by_content(run: Path) -> dict[tuple, dict]:
    """The run's lines by (caseId, path, trial), evidence ids replaced by what they cite (kind, digest): two imports
    that number their evidence in another order compare equal."""
    ev = {x["evidenceId"]: (x["kind"], x["digest"]) for _, x in jsonio.iter_ndjson(run / "evidence.ndjson")}
    out = {}
    for _, x in jsonio.iter_ndjson(run / "results.ndjson"):
        x = {**x, "evidence": sorted(ev[e] for e in x.get("evidence", []))}
        out[(x["caseId"], x["path"], x.get("trial"))] = x
    return out


def test_a_eval_is_imported_case_by_case_with_the_same_lines(tmp_path: Path) -> None:
    """The .eval is read by id, then epoch: each case's trial lines, then its rollups, case after case. The lines
    are the ones the import in Inspect's order gives (samples, then every rollup), evidence for evidence."""
    by_case = inspect_importer.from_inspect(EPOCHS_EVAL, tmp_path / "by-case", at=LATER)
    log = open_log(EPOCHS_EVAL)
    header = {**log.header, "reductions": log.reductions()}
    in_order = inspect_importer.import_log(header, list(log.samples()), tmp_path / "in-order", at=LATER)  # a list: any order
    lines = [x for _, x in jsonio.iter_ndjson(by_case / "results.ndjson")]
    cases = [x["caseId"] for x in lines]
    assert cases == sorted(cases) and len(set(cases)) == 4  # e1's lines, then e2's, ...
    for case in set(cases):
        mine = [(x.get("trial"), "trials" in x) for x in lines if x["caseId"] == case]
        assert mine == [(0, False)] * 2 + [(1, False)] * 2 + [(2, False)] * 2 + [(None, True)] * 2
    other = [x["caseId"] for _, x in jsonio.iter_ndjson(in_order / "results.ndjson")]
    assert other != cases  # Inspect's order: by epoch, the rollups at the end
    assert _lines_by_content(by_case) == _lines_by_content(in_order)
    for name in ("summary.json", "metrics.json"):
        assert jsonio.read_json(by_case / name) == jsonio.read_json(in_order / name)
    assert {p.name for p in (by_case / "blobs").rglob("*")} == {p.name for p in (in_order / "blobs").rglob("*")}
    assert verify_run(by_case).outcome == "intact"


def _eval_members(path: Path) -> list[tuple[str, bytes]]:
    from aefgate.formats.inspect import zipsafe

    archive = zipsafe.Archive(path)
    with archive.open() as f:
        return [(m.name, archive.read(f, m)) for m in archive.members]


def _rewritten(tmp: Path, name: str, change) -> Path:
    """epochs_mean.eval rewritten (DEFLATE, by the standard library) with ``change(members)`` applied to its list of
    (name, bytes)."""
    import zipfile

    members = change(_eval_members(EPOCHS_EVAL))
    out = tmp / name
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for n, data in members:
            z.writestr(n, data)
    return out


def _with_reductions(change):
    def apply(members):
        out = []
        for n, data in members:
            if n == "reductions.json":
                red = json.loads(data)
                change(red)
                data = json.dumps(red).encode()
            out.append((n, data))
        return out
    return apply


def _refused(log: Path, tmp: Path) -> Refusal:
    with pytest.raises(Refusal) as e:
        inspect_importer.from_inspect(log, tmp / "out", at=LATER)
    assert not (tmp / "out").exists() and not [p for p in tmp.iterdir() if p.name.startswith(".out")]
    return e.value


def test_a_eval_by_case_refuses_what_the_import_refuses(tmp_path: Path) -> None:
    # the rewritten log itself imports
    same = _rewritten(tmp_path, "same.eval", lambda m: m)
    assert verify_run(inspect_importer.from_inspect(same, tmp_path / "ok", at=LATER)).outcome == "intact"
    # a reduced score for a case without samples: found once every case is done
    log = _rewritten(tmp_path, "extra.eval", _with_reductions(
        lambda red: red[1]["samples"].append({**red[1]["samples"][0], "sample_id": "zz"})))
    e = _refused(log, tmp_path)
    assert (e.rule, e.where) == ("IN-8", "/reductions/1/samples/4") and "'zz'" in e.message
    # a case without its reduction at a path (RES-8), and two reductions of one case and path
    e = _refused(_rewritten(tmp_path, "missing.eval", _with_reductions(lambda red: red[0]["samples"].pop(2))),
                 tmp_path)
    assert (e.rule, e.where) == ("IN-8", "/reductions") and "'e3'" in e.message and "'match'" in e.message
    e = _refused(_rewritten(tmp_path, "twice.eval", _with_reductions(
        lambda red: red[0]["samples"].append(red[0]["samples"][1]))), tmp_path)
    assert (e.rule, e.where) == ("IN-8", "/reductions/0/samples/4") and "two reductions of case 'e2'" in e.message
    # a reduction that is not an object: refused as the reductions are read, before any sample
    e = _refused(_rewritten(tmp_path, "bad.eval", _with_reductions(lambda red: red.append(7))), tmp_path)
    assert (e.rule, e.where) == ("IN-8", "/reductions/2")

    # a member whose sample is not the one its name says: a second sample of a case at an epoch, and a case whose
    # samples are not together
    def rename(to_id: str, to_epoch: int, drop: str = ""):
        def apply(members):
            out = []
            for n, data in members:
                if n == drop:
                    continue
                if n == "samples/e4_epoch_2.json":
                    s = json.loads(data)
                    s["id"], s["epoch"] = to_id, to_epoch
                    data = json.dumps(s).encode()
                out.append((n, data))
            return out
        return apply

    e = _refused(_rewritten(tmp_path, "dup.eval", rename("e1", 1)), tmp_path)
    assert e.rule == "IN-8" and "two samples of case 'e1' at epoch 1" in e.message
    e = _refused(_rewritten(tmp_path, "apart.eval", rename("e2", 3, drop="samples/e2_epoch_3.json")), tmp_path)
    assert e.rule == "IN-8" and "not together" in e.message
    e = _refused(_rewritten(tmp_path, "dup-here.eval", rename("e4", 1)), tmp_path)
    assert e.rule == "IN-8" and "two samples of case 'e4' at epoch 1" in e.message


def test_samples_given_as_a_list_keep_their_order(tmp_path: Path) -> None:
    """import_log over any iterable (not a stream from open_log) reads the samples in the order given."""
    log = open_log(EPOCHS_EVAL)
    samples = list(log.samples(order="case"))
    header = {**log.header, "reductions": log.reductions()}
    run = inspect_importer.import_log(header, iter(samples), tmp_path / "run", at=LATER)
    lines = [x for _, x in jsonio.iter_ndjson(run / "results.ndjson")]
    assert [x.get("trial") for x in lines[:6]] == [0, 0, 1, 1, 2, 2]
    assert all("trials" in x for x in lines[-8:])  # the rollups at the end: the order was not known
