"""Inspect -> AEF -> Inspect gives the log back (issue 26): logs written by the real Inspect CLI
(``tests/_inspect_corpus.py``, fixture ``inspect_cli_corpus``) and the logs of Inspect's own repository
(``../shared/samples/inspect-peers/``), imported with ``lossless`` (docs/mappings/inspect.md, "Lossless round
trips"), exported, and read back with Inspect's own reader (``inspect_ai.log.read_eval_log``).

The comparison is of ``EvalLog.model_dump(mode="json")`` of the original and of the export, both read by Inspect: what
Inspect fills in itself when it reads a log (defaults, migrated members) is filled in the same way on both sides, so
it is compared too.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from aefgate.converters import fidelity as fidelity_mod
from aefgate.converters.inspect import records
from aefgate.converters.inspect.exporter import to_inspect
from aefgate.converters.inspect.importer import from_inspect
from aefgate.errors import Refusal
from aefgate.formats.aef import jsonio
from aefgate.formats.aef.verifier import verify_run
from tests.conftest import aefgate as run_cli

read_eval_log = pytest.importorskip("inspect_ai.log").read_eval_log

SAMPLES = Path(__file__).resolve().parents[3] / "shared" / "samples"
PEERS = SAMPLES / "inspect-peers"
# what the page refuses in the corpus: a reducer at_least_2 over 3 epochs has no AEF value (IN-8, R7I-14)
REFUSED = {"reduce_at_least_2": "IN-8"}
# members of an Inspect log that are content: not kept with contentCapture off (RUN-11)
SAMPLE_CONTENT = ("input", "choices", "target", "messages", "events", "attachments", "store", "transcript",
                  "message_pool", "files", "setup")


def dump(path: Path) -> dict[str, Any]:
    return read_eval_log(str(path)).model_dump(mode="json")


def same_log(log: Path, back: Path) -> list[str]:
    """The places where Inspect reads ``back`` otherwise than ``log``, but those where it reads ``log`` itself
    otherwise each time (what it makes up reading an older log: the uuid and working_start of events it migrates
    from a transcript)."""
    original = dump(log)
    unstable = {d.split(": ", 1)[0] for d in diffs(original, dump(log))}
    return [d for d in diffs(original, dump(back)) if d.split(": ", 1)[0] not in unstable]


def diffs(a: Any, b: Any, where: str = "") -> list[str]:
    """The places where two JSON values differ (NaN equal to NaN)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = [f"{where}/{k}: on one side only" for k in set(a) ^ set(b)]
        for k in a.keys() & b.keys():
            out += diffs(a[k], b[k], f"{where}/{k}")
        return out
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{where}: {len(a)} items != {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in diffs(x, y, f"{where}/{i}")]
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return []
    return [] if type(a) is type(b) and a == b else [f"{where}: {a!r} != {b!r}"]


def cycle(log: Path, tmp: Path, **opts: Any) -> tuple[Path, Path]:
    """Inspect -> AEF (lossless) -> Inspect, the export in the log's own format."""
    run = from_inspect(log, tmp / "run", lossless=True, **opts)
    out = to_inspect(run, tmp / f"back{log.suffix}")
    return run, out


def corpus_names() -> list[str]:
    from tests._inspect_corpus import FORMATS, PAIR, TASKS

    return [f"{t}.{fmt}" for t in (*TASKS, *PAIR) for fmt in FORMATS]


# -- the CLI corpus -------------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def corpus(inspect_cli_corpus: dict[str, Path]) -> dict[str, Path]:
    return inspect_cli_corpus


@pytest.mark.parametrize("name", corpus_names())
def test_a_log_comes_back_equal(corpus: dict[str, Path], tmp_path: Path, name: str) -> None:
    log = corpus[name]
    if name.split(".")[0] in REFUSED:
        with pytest.raises(Refusal) as e:
            from_inspect(log, tmp_path / "run", lossless=True)
        assert e.value.rule == REFUSED[name.split(".")[0]]
        assert not (tmp_path / "run").exists()
        return
    run, back = cycle(log, tmp_path)
    assert verify_run(run).outcome == "intact"
    original, exported = dump(log), dump(back)
    assert diffs(original, exported) == []
    # every member, ids of their JSON type included (an int id stays an int)
    assert [type(s["id"]) for s in original["samples"]] == [type(s["id"]) for s in exported["samples"]]
    assert exported["reductions"] == original["reductions"] and original["reductions"]
    # the source cycle (every member compared) and the AEF cycle of the imported run: nothing lost
    report = fidelity_mod.fidelity_from_source("inspect", log, options={"lossless": True})
    assert report.ok and report.lost == [], report.summary()
    assert {f.split(":")[0] for f in report.fields} >= {"header", "reductions", "samples"}
    assert {f.split(".")[0] for f in report.fields} >= {"header:results", "header:stats", "header:eval", "header:plan",
                                                         "header:version", "header:status"}
    report = fidelity_mod.fidelity("inspect", run)
    assert report.ok, report.summary()
    # a second cycle is a fixed point: the export imports to the same lines and exports to the same log
    run2, back2 = cycle(back, tmp_path / "again")
    assert diffs(exported, dump(back2)) == []
    lines = lambda r: [x for _, x in jsonio.iter_ndjson(r / "results.ndjson")]  # noqa: E731
    assert lines(run2) == lines(run)


@pytest.mark.parametrize("name", corpus_names())
def test_the_pages_mapping_declares_what_it_loses(corpus: dict[str, Path], tmp_path: Path, name: str) -> None:
    """Without lossless (the page's mapping, the default) both cycles lose only what is declared: the source
    cycle, and the AEF cycle of the imported run (dict scores and error samples included)."""
    if name.split(".")[0] in REFUSED:
        return
    report = fidelity_mod.fidelity_from_source("inspect", corpus[name])
    assert report.ok, report.summary()
    run = from_inspect(corpus[name], tmp_path / "run")
    assert not (run / "ext").exists()
    report = fidelity_mod.fidelity("inspect", run)
    assert report.ok, report.summary()


@pytest.mark.parametrize("name", ["match_includes.json", "limits.eval", "react_tool.json", "reduce_mode.eval"])
def test_capture_off_loses_exactly_the_content(corpus: dict[str, Path], tmp_path: Path,
                                               name: str) -> None:
    log = corpus[name]
    run, back = cycle(log, tmp_path, content_capture="off")
    original, exported = dump(log), dump(back)
    # RUN-11: no content and no digest of it anywhere in the run, ext/ files included (the questions and answers
    # of the task files; Score.metadata is kept with off, R7I-13, and model-graded scorers put the prompt there)
    text = b"".join(p.read_bytes() for p in run.rglob("*") if p.is_file())
    for sample in original["samples"]:
        for member in ("input", "target"):
            value = sample[member]
            if isinstance(value, str) and len(value) > 3:
                assert value.encode("utf-8") not in text, (member, value)
    assert not list(run.rglob("blobs/*"))

    def strip(d: dict[str, Any]) -> dict[str, Any]:
        d = json.loads(json.dumps(d))
        for s in d["samples"]:
            for m in SAMPLE_CONTENT:
                s.pop(m, None)
            for m in ("choices", "completion"):
                (s.get("output") or {}).pop(m, None)
            for score in (s.get("scores") or {}).values():
                score.pop("explanation", None)
                score.pop("answer", None)
        for red in d.get("reductions") or ():
            for rs in red["samples"]:
                rs.pop("explanation", None)
                rs.pop("answer", None)
        for step in d["plan"]["steps"]:
            step.pop("params", None)
        return d

    assert diffs(strip(original), strip(exported)) == []
    assert diffs(original, exported) != []  # (the content did go)
    report = fidelity_mod.fidelity_from_source("inspect", log, options={"lossless": True, "content_capture": "off"})
    assert report.ok, report.summary()
    content = ("samples:input", "samples:target", "samples:messages", "samples:output.choices",
               "samples:output.completion", "samples:events", "samples:attachments", "samples:store",
               "samples:scores.", "reductions:samples", "header:plan.steps")
    lost = [f for f, _ in report.lost]
    assert lost and all(f.startswith(content) for f in lost), lost
    assert all(f.endswith((".explanation", ".answer")) for f in lost if f.startswith("samples:scores."))


def test_what_made_the_run_counts_in_its_hash(corpus: dict[str, Path], tmp_path: Path) -> None:
    """The pair differing only in temperature (and only in seed) import to different runs, by default, and the
    generate config comes back on export."""
    for fmt in ("eval", "json"):
        runs = {}
        for name in ("pair_t02_s7", "pair_t09_s7", "pair_t02_s8"):
            run = from_inspect(corpus[f"{name}.{fmt}"], tmp_path / f"{name}-{fmt}")
            runs[name] = run
            cfg = jsonio.read_json(run / "run.json")["ext"]["inspect_ai"]["generate_config"]
            assert (cfg["temperature"], cfg["seed"]) == {"pair_t02_s7": (0.2, 7), "pair_t09_s7": (0.9, 7),
                                                         "pair_t02_s8": (0.2, 8)}[name]
            out = to_inspect(run, tmp_path / f"{name}.{fmt}", output_from_evidence=True)
            back = read_eval_log(str(out)).eval.model_generate_config
            assert (back.temperature, back.seed) == (cfg["temperature"], cfg["seed"])
        hashes = {verify_run(r).run_hash for r in runs.values()}
        assert len(hashes) == 3


def test_the_judge_model_goes_into_the_annotator(corpus: dict[str, Path], tmp_path: Path) -> None:
    for name, scorer in (("graded_qa.eval", "model_graded_qa"), ("graded_fact.json", "model_graded_fact")):
        log = read_eval_log(str(corpus[name]))
        given = next(s.options["model"] for s in log.eval.scorers if s.name == scorer)
        judge = given["model"] if isinstance(given, dict) else given
        run = from_inspect(corpus[name], tmp_path / name, grader_types=True)
        assert jsonio.read_json(run / "run.json")["ext"]["inspect_ai"]["scorer_models"] == {scorer: judge}
        lines = [x for _, x in jsonio.iter_ndjson(run / "results.ndjson")]
        assert lines and all(x["annotator"] == {"kind": "LLM", "model": judge} for x in lines)


def test_a_dict_scorer_without_metrics_is_summarized_from_its_lines(corpus: dict[str, Path],
                                                                   tmp_path: Path) -> None:
    """A map-valued scorer whose members Inspect gave no metric (one EvalScore named for the scorer, no metrics):
    one summary entry per member, from the lines; export --map-scorers then writes it (no IN-3)."""
    doc = json.loads(corpus["dict_scores.json"].read_text(encoding="utf-8"))
    members = [e for e in doc["results"]["scores"] if e["scorer"] == "shape"]
    assert [e["name"] for e in members] == ["exact", "length"]
    doc["results"]["scores"] = [{"name": "shape", "scorer": "shape", "scored_samples": 5, "unscored_samples": 0,
                                 "params": {}, "metrics": {}}] + [e for e in doc["results"]["scores"]
                                                                  if e["scorer"] != "shape"]
    log = tmp_path / "dict_no_metrics.json"
    log.write_text(json.dumps(doc), encoding="utf-8")
    run = from_inspect(log, tmp_path / "run")
    entries = {(e["metric"], e["path"]): e for e in jsonio.read_json(run / "summary.json")["lanes"][0]["metrics"]}
    values = {k: [s["scores"]["shape"]["value"][k] for s in doc["samples"]] for k in ("exact", "length")}
    for metric in ("exact", "length"):
        e = entries[(metric, "shape")]
        assert (e["N"], e["n"], e["notMeasured"]) == (5, 5, 0)
        assert e["value"] == pytest.approx(sum(values[metric]) / 5)
    assert ("shape", "shape") not in entries
    out = to_inspect(run, tmp_path / "back.json", map_scorers=True, output_from_evidence=True)
    scores = {s.name: s for s in read_eval_log(str(out)).results.scores}
    assert scores["exact"].scorer == "shape" and scores["exact"].metrics["mean"].value == entries[("exact", "shape")][
        "value"]


# -- the logs of Inspect's repository -------------------------------------------------------------------------------

PEER_LOGS = sorted(p.name for p in PEERS.iterdir() if p.suffix in (".json", ".eval"))


def inspect_reads(path: Path) -> bool:
    try:
        read_eval_log(str(path))
    except Exception:  # noqa: BLE001 - whatever Inspect refuses a log with
        return False
    return True


@pytest.mark.parametrize("name", PEER_LOGS)
def test_every_peer_log_comes_back_or_is_refused_by_a_rule(tmp_path: Path, name: str) -> None:
    log = PEERS / name
    try:
        run, back = cycle(log, tmp_path)
    except Refusal as e:  # a rule, never a traceback, and nothing written
        assert e.rule.startswith("IN-"), e
        assert not (tmp_path / "run").exists()
        return
    assert inspect_reads(log)
    assert same_log(log, back) == []
    assert dump(back)["reductions"] == dump(log)["reductions"]
    report = fidelity_mod.fidelity_from_source("inspect", log, options={"lossless": True})
    assert report.ok and report.lost == [], report.summary()
    report = fidelity_mod.fidelity_from_source("inspect", log)  # the page's mapping: only declared losses
    assert report.ok, report.summary()


def test_versions_inspect_does_not_read_are_refused(tmp_path: Path) -> None:
    v99 = PEERS / "derived" / "log_formats_v99.json"
    assert not inspect_reads(v99)
    with pytest.raises(Refusal) as e:
        from_inspect(v99, tmp_path / "run")
    assert e.value.rule == "IN-6" and "99" in e.value.message and e.value.where == "/version"
    for version in (4, 0, 3, "x"):
        doc = json.loads((PEERS / "log__test_eval_log__log_formats.json").read_text(encoding="utf-8"))
        doc["version"] = version
        p = tmp_path / f"v{version}.json"
        p.write_text(json.dumps(doc), encoding="utf-8")
        assert not inspect_reads(p) or version == 0  # (Inspect reads a version 0 .json, not one aefgate imports)
        with pytest.raises(Refusal) as e:
            from_inspect(p, tmp_path / f"run-{version}")
        assert e.value.rule == "IN-6" and repr(version) in e.value.message


def test_a_version_3_eval_comes_back_as_version_3(tmp_path: Path) -> None:
    log = PEERS / "log__test_eval_log__log_message_deduplication.eval"
    _, back = cycle(log, tmp_path)
    assert read_eval_log(str(back)).version == read_eval_log(str(log)).version == 3


def test_a_version_1_log_has_its_metric_read(tmp_path: Path) -> None:
    """Version 1's results (one scorer and its metrics) are read as Inspect reads them: the derived v1 log's
    accuracy 0.5 reaches IN-9, which refuses it as it refuses the same v2 log (no sample gives that mean)."""
    log = PEERS / "derived" / "log_with_nan_v1_offsets.json"
    assert read_eval_log(str(log)).results.scores[0].metrics["accuracy"].value == 0.5
    with pytest.raises(Refusal) as e:
        from_inspect(log, tmp_path / "run")
    assert e.value.rule == "IN-9" and "0.5" in e.value.message and "model_graded_fact" in e.value.message
    # the same log with a sample scored 0.5: imported, its metric the summary's
    doc = json.loads(log.read_text(encoding="utf-8"))
    doc["eval"]["eval_id"] = "v1-log"
    doc["samples"] = [{"id": 1, "epoch": 1, "input": "q", "target": "a",
                       "scores": {"model_graded_fact": {"value": 0.5}}}]
    p = tmp_path / "v1.json"
    p.write_text(json.dumps(doc), encoding="utf-8")
    run = from_inspect(p, tmp_path / "run1", lossless=True)
    (entry,) = jsonio.read_json(run / "summary.json")["lanes"][0]["metrics"]
    assert (entry["metric"], entry["value"]) == ("model_graded_fact", 0.5)
    back = to_inspect(run, tmp_path / "back.json")
    assert jsonio.loads(back.read_bytes())["version"] == 1


def test_the_source_cycle_compares_every_member() -> None:
    log = SAMPLES / "inspect" / "epochs_mean.eval"
    kinds: dict[str, list[str]] = {}
    for kind, key, _ in records(log):
        kinds.setdefault(kind, []).append(key)
    assert set(kinds) == {"header", "reductions", "samples"}
    assert kinds["reductions"] == ["match mean", "answer_length mean"]
    header = next(v for k, _, v in records(log) if k == "header")
    assert {"version", "status", "eval", "plan", "results", "stats"} <= set(header)


# -- runs that did not come from Inspect ----------------------------------------------------------------------------


def test_a_run_without_a_suite_takes_the_task_option(tmp_path: Path) -> None:
    run = SAMPLES.parent / "spec" / "aef" / "interop" / "examples" / "aef-inspect" / "input"
    d = tmp_path / "nosuite"
    shutil.copytree(run, d)
    doc = jsonio.read_json(d / "run.json")
    del doc["suite"]
    (d / "run.json").write_bytes(jsonio.dumps(doc))
    (d / "seal.json").unlink(missing_ok=True)  # (an unsealed run verifies: a changed sealed one would not)
    from tests.converters.test_inspect_aef import complete

    complete(d, own_metrics=(d / "metrics.json").exists())
    with pytest.raises(Refusal) as e:
        to_inspect(d, tmp_path / "a.json")
    assert e.value.rule == "IN-1" and "the option 'task'" in e.value.message
    out = to_inspect(d, tmp_path / "b.json", task="triage")
    log = read_eval_log(str(out))
    assert log.eval.task == "triage" and log.eval.model == "agent:support/support-triage"
    out = to_inspect(d, tmp_path / "c.json", task="triage", model="openai/gpt-x")
    assert read_eval_log(str(out)).eval.model == "openai/gpt-x"
    p = run_cli("export", "inspect", d, tmp_path / "d.json")
    assert p.returncode == 2 and "IN-1" in p.stderr and "--task" in p.stderr
    p = run_cli("export", "inspect", d, tmp_path / "e.json", "--task", "triage", "--model", "openai/gpt-x")
    assert p.returncode == 0, p.stderr
    p = run_cli("convert", d, tmp_path / "f.json", "--from", "aef", "--to", "inspect", "--opt", "task=triage")
    assert p.returncode == 0, p.stderr


def test_the_demo_run_goes_to_inspect(tmp_path: Path) -> None:
    p = run_cli("demo", "--out", tmp_path / "demo")
    assert p.returncode == 0, p.stderr
    with pytest.raises(Refusal) as e:
        to_inspect(tmp_path / "demo", tmp_path / "a.json", output_from_evidence=True)
    assert e.value.rule == "IN-3" and "map_scorers" in e.value.message
    out = to_inspect(tmp_path / "demo", tmp_path / "b.json", output_from_evidence=True, map_scorers=True)
    log = read_eval_log(str(out))
    assert {s.name for s in log.results.scores} >= {"triage", "pass"}
    assert {s.scorer for s in log.results.scores if s.name in ("triage", "pass")} == {"triage"}


def test_lossless_from_the_command_line(corpus: dict[str, Path], tmp_path: Path) -> None:
    log = corpus["limits.json"]
    p = run_cli("fidelity", "inspect", "--from-source", log, "--opt", "lossless=true", "--json")
    assert p.returncode == 0, p.stderr
    report = json.loads(p.stdout)
    assert report["ok"] and report["lost"] == []
    p = run_cli("convert", log, tmp_path / "run", "--from", "inspect", "--to", "aef", "--opt", "lossless=true")
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "run" / "ext" / "inspect_ai" / "header.json").is_file()
    p = run_cli("export", "inspect", tmp_path / "run", tmp_path / "back.json")
    assert p.returncode == 0, p.stderr
    assert diffs(dump(log), dump(tmp_path / "back.json")) == []
