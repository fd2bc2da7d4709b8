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
from aefgate.aef import jsonio
from aefgate.aef.verifier import verify_run
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
    """Without lossless (the page's mapping: ``lossless=False``, ``--no-lossless``) both cycles lose only what is
    declared: the source cycle, and the AEF cycle of the imported run (dict scores and error samples included)."""
    if name.split(".")[0] in REFUSED:
        return
    report = fidelity_mod.fidelity_from_source("inspect", corpus[name], options={"lossless": False})
    assert report.ok, report.summary()
    run = from_inspect(corpus[name], tmp_path / "run", lossless=False)
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
    run = from_inspect(log, tmp_path / "run", lossless=False)  # the page's run: its results are the summary's
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
    run, back = cycle(log, tmp_path)
    assert read_eval_log(str(back)).version == read_eval_log(str(log)).version == 3
    # as .json (what the AEF cycle writes): version 2, the highest Inspect's JSON reader reads; the cycle holds
    out = to_inspect(run, tmp_path / "back.json")
    assert jsonio.loads(out.read_bytes())["version"] == 2 and read_eval_log(str(out)).version == 2
    report = fidelity_mod.fidelity("inspect", run)
    assert report.ok, report.summary()


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
    """The demo has two summary entries at triage: its score triage, and pass, a rate of the lines' states no line
    scores. map_scorers writes the first as a map-valued scorer's; the second only with omit_unscored (left out: an
    EvalScore no sample score gives would not import back, IN-9). The demo mixes cases run once with a case run in
    trials: the cases run once say so in their Scores' metadata.aef (trial null), and come back without a trial."""
    p = run_cli("demo", "--out", tmp_path / "demo")
    assert p.returncode == 0, p.stderr
    with pytest.raises(Refusal) as e:
        to_inspect(tmp_path / "demo", tmp_path / "a.json", output_from_evidence=True)
    assert e.value.rule == "IN-3" and "map_scorers" in e.value.message
    with pytest.raises(Refusal) as e:
        to_inspect(tmp_path / "demo", tmp_path / "a.json", output_from_evidence=True, map_scorers=True)
    assert e.value.rule == "IN-3" and "'pass'" in e.value.message and "option 'omit_unscored'" in e.value.message
    assert not (tmp_path / "a.json").exists()
    out = to_inspect(tmp_path / "demo", tmp_path / "b.json", output_from_evidence=True, map_scorers=True,
                     omit_unscored=True)
    log = read_eval_log(str(out))
    assert {s.name for s in log.results.scores} >= {"triage"} and "pass" not in {s.name for s in log.results.scores}
    assert log.eval.config.epochs == 3
    once = {str(s.id) for s in log.samples if all(sc.metadata["aef"].get("trial", 0) is None
                                                  for sc in s.scores.values())}
    assert once == {"case-17", "case-18", "case-19"}
    back = from_inspect(out, tmp_path / "back", lossless=False)
    trials = {x["caseId"]: x.get("trial") for _, x in jsonio.iter_ndjson(back / "results.ndjson") if "trials" not in x}
    assert {c: t for c, t in trials.items() if c != "case-20"} == {"case-17": None, "case-18": None, "case-19": None}
    report = fidelity_mod.fidelity("inspect", tmp_path / "demo", options={"omit_unscored": True})
    assert report.ok, report.summary()
    p = run_cli("export", "inspect", tmp_path / "demo", tmp_path / "c.json", "--map-scorers", "--output-from-evidence")
    assert p.returncode == 2 and "--omit-unscored" in p.stderr, p.stderr
    p = run_cli("export", "inspect", tmp_path / "demo", tmp_path / "c.json", "--map-scorers", "--output-from-evidence",
                "--omit-unscored")
    assert p.returncode == 0, p.stderr


def test_runs_from_other_formats_go_to_inspect_and_back(tmp_path: Path) -> None:
    """aefgate's export options where the page refuses (docs/mappings/inspect.md): case_times=span (a case whose
    root lines carry different times), label_values (a label Inspect's import cannot read), the task for a run
    without a suite, and several transcripts a sample's lines cite (their messages in turn)."""
    ex = SAMPLES.parent / "spec" / "aef" / "interop" / "examples"
    run = ex / "otel-aef" / "run"
    lines = [x for _, x in jsonio.iter_ndjson(run / "results.ndjson")]
    case31 = [x for x in lines if x["caseId"] == "case-31"]
    with pytest.raises(Refusal) as e:
        to_inspect(run, tmp_path / "a.json", task="t")
    assert e.value.rule == "IN-5" and "option 'case_times=span'" in e.value.message
    out = to_inspect(run, tmp_path / "b.json", task="t", case_times="span")
    sample = next(s for s in read_eval_log(str(out)).samples if s.id == "case-31")
    ends = sorted(x["endedAt"] for x in case31)
    assert sample.completed_at.replace("+00:00", "Z").startswith(ends[-1].rstrip("Z")), (sample.completed_at, ends)
    with pytest.raises(Refusal) as e:
        to_inspect(run, tmp_path / "c.json", task="t", case_times="earliest")
    assert e.value.rule == "CONV-3"
    # a label Inspect reads only as C, I, P, N: the page writes the label, label_values the value
    relevance = next(x for x in lines if x["path"] == "Relevance")["scores"][0]
    assert relevance["label"] not in ("C", "I", "P", "N")
    for label_values, value in ((False, relevance["label"]), (True, relevance["value"])):
        out = to_inspect(run, tmp_path / f"l{label_values}.json", task="t", case_times="span",
                         label_values=label_values)
        score = next(s for s in read_eval_log(str(out)).samples if s.scores and "Relevance" in s.scores)
        score = score.scores["Relevance"]
        assert score.value == value
        assert ("labels" in score.metadata["aef"]) is label_values
    report = fidelity_mod.fidelity("inspect", run, options={"task": "t", "case_times": "span"})
    assert report.ok, report.summary()
    assert report.fields["results:scores[].label"].declared == 1
    # given the task, the suite the run did not have comes back as declared (a loss limited to the option given)
    report = fidelity_mod.fidelity("inspect", ex / "aef-otel-aef" / "run", options={"task": "t"})
    assert report.ok, report.summary()
    assert {"run.json:suite.ref", "run.json:suite.version"} <= {f for f, _ in report.lost}
    with pytest.raises(Refusal):  # (without it: IN-1)
        fidelity_mod.fidelity("inspect", ex / "aef-otel-aef" / "run")
    # an Evaluation API session: one transcript per insight, a sample's messages are each in turn
    from aefgate.converters.registry import find_route, run_route

    api = run_route(find_route("evaluation-api", "aef"), SAMPLES / "evaluation-api" / "finished.json",
                    tmp_path / "api", {"subject": "agent:acme-support", "at": "2026-12-01T00:00:00Z"})
    with pytest.raises(Refusal) as e:
        to_inspect(api, tmp_path / "api.json", task="t")
    assert e.value.rule == "IN-5" and "option 'output_from_evidence'" in e.value.message
    texts = {}
    evidence = {r["evidenceId"]: r for _, r in jsonio.iter_ndjson(api / "evidence.ndjson")}
    for x in jsonio.iter_ndjson(api / "results.ndjson"):
        for eid in x[1].get("evidence") or ():
            if evidence[eid]["kind"] == "transcript":
                h = evidence[eid]["link"]["blob"].split(":")[1]
                texts.setdefault((api / "blobs" / "sha256" / h[:2] / h).read_text(encoding="utf-8"), None)
    assert len(texts) == 2
    out = to_inspect(api, tmp_path / "api.json", task="t", output_from_evidence=True, label_values=True)
    (sample,) = read_eval_log(str(out)).samples
    assert [m.text for m in sample.messages] == list(texts)
    report = fidelity_mod.fidelity("inspect", api, options={"task": "t"})
    assert report.ok, report.summary()


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


# -- lossless by default (issue 26: the checks import with default options) -----------------------------------------


def test_lossless_is_the_default_and_no_lossless_gives_the_pages_run(corpus: dict[str, Path], tmp_path: Path) -> None:
    from aefgate.converters.registry import registry

    log = corpus["match_includes.json"]
    assert registry().between("inspect", "aef").option("lossless").default is True
    run = from_inspect(log, tmp_path / "lib")  # the library
    assert (run / "ext" / "inspect_ai" / "header.json").is_file()
    assert diffs(dump(log), dump(to_inspect(run, tmp_path / "lib.json"))) == []
    page = from_inspect(log, tmp_path / "page", lossless=False)
    assert not (page / "ext").exists()
    # the page's run is the lossless run without its ext/ files: the same lines, summary and run.json
    for name in ("results.ndjson", "summary.json", "run.json", "metrics.json"):
        assert (page / name).read_bytes() == (run / name).read_bytes(), name
    # the command line: import inspect (a log, a folder), convert, fidelity --from-source
    p = run_cli("import", "inspect", log, tmp_path / "cli")
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "cli" / "ext" / "inspect_ai" / "samples.ndjson").is_file()
    p = run_cli("import", "inspect", log, tmp_path / "cli-page", "--no-lossless")
    assert p.returncode == 0, p.stderr
    assert not (tmp_path / "cli-page" / "ext").exists()
    p = run_cli("convert", log, tmp_path / "conv", "--from", "inspect", "--to", "aef")
    assert p.returncode == 0 and (tmp_path / "conv" / "ext" / "inspect_ai" / "header.json").is_file(), p.stderr
    p = run_cli("fidelity", "inspect", "--from-source", log, "--json")
    assert p.returncode == 0 and json.loads(p.stdout)["lost"] == [], p.stdout[-2000:]
    folder = tmp_path / "logs"
    folder.mkdir()
    shutil.copy(log, folder / "a.json")
    for flag, kept in ((), True), (("--no-lossless",), False):
        out = tmp_path / f"runs{len(flag)}"
        p = run_cli("import", "inspect", folder, out, *flag, "--jobs", "1")
        assert p.returncode == 0, p.stderr
        assert (out / "a" / "ext" / "inspect_ai" / "header.json").is_file() is kept


def _log_with_credentials(corpus: dict[str, Path], tmp: Path) -> tuple[Path, list[str]]:
    """A real CLI log whose model_args, task_args, generate config and a sample's metadata hold credentials."""
    secrets = ["sk-live-0123456789abcdef", "hunter2-password", "tok-abcdef-123456", "Bearer xyz-987"]
    doc = json.loads(corpus["match_includes.json"].read_text(encoding="utf-8"))
    doc["eval"]["model_args"] = {"api_key": secrets[0], "base_url": "http://127.0.0.1:1/v1", "timeout": 30}
    doc["eval"]["task_args"] = {**(doc["eval"].get("task_args") or {}), "db": {"password": secrets[1], "port": 5432}}
    doc["eval"]["model_generate_config"] = {**(doc["eval"].get("model_generate_config") or {}),
                                            "extra_headers": {"Authorization": secrets[3]}}
    doc["samples"][0]["metadata"] = {**(doc["samples"][0].get("metadata") or {}), "access_token": secrets[2]}
    p = tmp / "with-credentials.json"
    p.write_text(json.dumps(doc), encoding="utf-8")
    return p, secrets


def test_no_credential_lands_in_the_run(corpus: dict[str, Path], tmp_path: Path) -> None:
    """[RUN-10]: nothing in ext is a key, token or password. The kept header holds eval.model_args whole, and
    run.json's ext the task args and generate config: a member named like a credential is dropped (a declared
    loss naming the field), the rest kept."""
    log, secrets = _log_with_credentials(corpus, tmp_path)
    for lossless in (True, False):
        run = from_inspect(log, tmp_path / f"run-{lossless}", lossless=lossless)
        assert verify_run(run).outcome == "intact"
        text = b"".join(p.read_bytes() for p in run.rglob("*") if p.is_file())
        for s in secrets:
            assert s.encode() not in text, (lossless, s)
    run = tmp_path / "run-True"
    header = json.loads((run / "ext" / "inspect_ai" / "header.json").read_text(encoding="utf-8"))
    assert header["eval"]["model_args"] == {"base_url": "http://127.0.0.1:1/v1", "timeout": 30}
    made = jsonio.read_json(run / "run.json")["ext"]["inspect_ai"]
    assert made["task_args"]["db"] == {"port": 5432}
    assert "extra_headers" not in made["generate_config"]  # (it held a credential only: it goes with it)
    # the export gives back the log but the credentials; the source cycle declares exactly them
    original, exported = dump(log), dump(to_inspect(run, tmp_path / "back.json"))
    assert sorted(d.split(":")[0] for d in diffs(original, exported)) == [
        "/eval/model_args/api_key", "/eval/model_generate_config/extra_headers",
        "/eval/task_args/db/password", "/samples/0/metadata/access_token"]
    report = fidelity_mod.fidelity_from_source("inspect", log)
    assert report.ok, report.summary()
    lost = {f for f, _ in report.lost}
    assert lost == {"header:eval.model_args.api_key", "header:eval.task_args.db.password",
                    "header:eval.model_generate_config.extra_headers.Authorization",
                    "samples:metadata.access_token"}, lost
    from aefgate.converters.inspect.losses import LOSSES_FROM_INSPECT

    (cred,) = [x for x in LOSSES_FROM_INSPECT if x.segment is not None]
    assert all(cred.covers(f) for f in lost)
    assert report.fields["header:eval.model_args.api_key"].losses == {cred.text}
    # a declared credential loss does not hide a changed member beside it
    assert cred.covers("header:eval.model_args.api_key") and cred.covers("samples:metadata.db.password")
    assert cred.covers("header:eval.task_args.credentials.user")  # (below a credential: dropped with it)
    assert not cred.covers("header:eval.model_args.base_url") and not cred.covers("samples:token_limit")
    assert not cred.covers("samples:output.usage.input_tokens")


def test_the_quick_credential_search_misses_no_credential_name() -> None:
    """The cheap pre-search (the names' last words) before the credential-name regex lets no name the builder's
    [RUN-10] list matches through: any such name, as a JSON member name, is found (so the walk that drops it runs)."""
    import json as _json

    from hypothesis import given, settings
    from hypothesis import strategies as st

    from aefgate.converters.inspect.conventions import _SECRET_NAME, _maybe_credential_key

    @settings(max_examples=300, deadline=None)
    @given(st.from_regex(_SECRET_NAME, fullmatch=True).filter(lambda s: s.isascii() and '"' not in s and "\\" not in s),
           st.sampled_from(["", " ", "\t", "\n "]))
    def found(name: str, blank: str) -> None:
        text = ('{"a": 1, ' + _json.dumps(name) + blank + ': "x"}').encode()
        assert _maybe_credential_key(text), name

    found()
