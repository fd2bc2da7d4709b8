"""Issue 29 (ASSERT): the real ASSERT runs of ``../shared/samples/peers-legacy/`` (copied byte for byte from
ASSERT's repository history; its README.md says what each is) import, verify, and give ASSERT's own rates.

Expected rates are assert-ai 0.3.0's own (``assert_ai.results.load_run_summary`` on the same folder; assert-ai is
in the test extra); expected members are read from the source files here, never from aefgate's output.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from assert_ai.results import load_run_summary  # assert-ai 0.3.0, in the test extra: its own rates

from aefgate.converters.assert_ai.names import EXT_NAME, ROOT
from aefgate.converters.assert_ai.exporter import to_assert
from aefgate.converters.assert_ai.importer import from_assert
from aefgate.errors import Refusal
from aefgate.aef import jsonio
from aefgate.aef.verifier import verify_run
from aefgate.formats.assert_ai.reader import open_run
from tests._shared import SAMPLES, copy_run

LEGACY = SAMPLES / "peers-legacy"
AT = "2026-12-07T00:00:00Z"
SHIELD = LEGACY / "assert-8a7dce1c" / "results" / "bank-manager-agent-shield" / "variant-a-unguarded"
DEMO = LEGACY / "assert-8a7dce1c" / "results" / "bank-manager-demo" / "variant-a-unguarded-v2b"
CONTROL = LEGACY / "assert-ecd99851" / "results" / "bank-manager-agent-control" / "variant-c-unguarded-prompted-n100"
CUSTOM = LEGACY / "assert-ffd6e059" / "results" / "bank-manager" / "variant-a-unguarded"
TRIAGE = LEGACY / "assert-13a161e8" / "results" / "incident-triage-agent-v1" / "naive-prompt"
BRIDGE = LEGACY / "assert-langfuse-bridge" / "results" / "langfuse-bridge" / "sample_run"
#: every ASSERT run of the folder, and whether its suite files changed (or went missing) since it ran
RUNS = {"shield": (SHIELD, True), "demo": (DEMO, True), "control": (CONTROL, False), "custom": (CUSTOM, True),
        "triage": (TRIAGE, True), "bridge": (BRIDGE, False)}


def test_every_assert_run_of_the_folder_is_listed():
    found = sorted(p.parent for p in LEGACY.glob("assert-*/results/**/*")
                   if p.name in ("manifest.json", "scores.jsonl"))
    assert sorted(set(found)) == sorted(p for p, _ in RUNS.values())


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def _rows(path: Path) -> list[dict]:
    return _lines(path) if path.is_file() else []


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("legacy")
    out = {}
    for name, (src, changed) in RUNS.items():
        done = from_assert(src, base / name, at=AT, content_capture="on", accept_changed_suite=changed)
        out[name] = done.path
    return out


@pytest.mark.parametrize("name", [n for n, (_s, changed) in RUNS.items() if changed])
def test_a_changed_suite_is_refused_without_the_option_naming_it(name, tmp_path: Path):
    src, _ = RUNS[name]
    with pytest.raises(Refusal) as e:
        from_assert(src, tmp_path / "out", at=AT)
    assert e.value.rule == "ASSERT-5" and "option 'accept_changed_suite'" in e.value.message
    assert not (tmp_path / "out").exists()


def test_the_cli_names_the_flag_and_imports_with_it(tmp_path: Path):
    cmd = [sys.executable, "-m", "aefgate", "import", "assert", str(DEMO), str(tmp_path / "a"), "--at", AT]
    p = subprocess.run(cmd, capture_output=True, text=True)
    assert p.returncode == 2 and "[ASSERT-5]" in p.stderr and "--accept-changed-suite" in p.stderr, p.stderr
    p = subprocess.run(cmd + ["--accept-changed-suite"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    v = subprocess.run([sys.executable, "-m", "aefgate", "verify", str(tmp_path / "a")], capture_output=True,
                       text=True)
    assert v.returncode == 0, v.stdout + v.stderr


@pytest.mark.parametrize("name", list(RUNS))
def test_every_run_imports_and_verifies(imported, name):
    v = verify_run(imported[name])
    assert v.problems == [] and v.outcome == "intact", v.problems


def test_the_recorded_and_present_hashes_are_in_the_run(imported):
    import hashlib

    for name in ("shield", "demo"):
        src, _ = RUNS[name]
        manifest = json.loads((src / "manifest.json").read_text())
        run = jsonio.read_json(imported[name] / "run.json")
        changed = {c["file"]: c for c in run["ext"][EXT_NAME]["changedSuite"]}
        for file, stage, key in (("taxonomy.json", "systematize", "taxonomy"), ("test_set.jsonl", "test_set",
                                                                                 "test_set")):
            assert changed[file]["recorded"] == manifest["artifact_versions"][stage]["file_hashes"][key]
            assert changed[file]["present"] == hashlib.sha256((src.parent / file).read_bytes()).hexdigest()
        assert {"suite.digest", "judges[0].rubricDigest"} <= set(run["imported"]["asserted"])
        rest = jsonio.read_json(imported[name] / "summary.json")["ext"][EXT_NAME]["ratesRestOn"]
        assert rest["sha256"] == changed["taxonomy.json"]["present"] and rest["changedSinceRun"] is True
        assert rest["recordedSha256"] == changed["taxonomy.json"]["recorded"]


def _roots(run: Path) -> list[dict]:
    return [x for x in _lines(run / "results.ndjson") if x["path"] == ROOT]


@pytest.mark.parametrize("name", ["shield", "demo", "control", "custom", "bridge"])
def test_rates_equal_assert_ais_own(imported, name):
    src, _ = RUNS[name]
    theirs = load_run_summary(src)
    summary = {(lane["lane"], e["metric"]): e for lane in jsonio.read_json(imported[name] / "summary.json")["lanes"]
               for e in lane["metrics"]}
    roots = _roots(imported[name])
    checked = 0
    for lane, key in (("prompt", "prompt_metrics"), ("scenario", "scenario_metrics")):
        m = theirs[key]
        if m is None:
            assert (lane, "harm") not in summary or summary[(lane, "harm")]["n"] == 0
            continue
        for metric, rate in (("harm", "not_permissible_policy_violation_rate"),
                             ("over_refusal", "permissible_policy_violation_rate")):
            assert summary[(lane, metric)]["value"] == m.get(rate), (lane, metric)
            split = m.get("policy_violation_on_not_permissible" if metric == "harm" else
                          "policy_violation_on_permissible")
            assert summary[(lane, metric)]["n"] == (split["count"] if split else 0), (lane, metric)
        # each dimension: from the roots' scores, and for a root with no score allowed (not_applicable, RES-2)
        # from the verdict's dimensions the root keeps in ext
        for dim, d in m["dimensions"].items():
            if d.get("kind") == "ordinal":
                continue
            values = []
            for root in roots:
                if root["lane"] != lane:
                    continue
                if root["state"] in ("passed", "failed"):
                    values += [s["value"] for s in root.get("scores", ()) if s["metric"] == dim]
                elif root["state"] == "not_applicable":
                    v = root["ext"][EXT_NAME]["verdictDimensions"].get(dim)
                    if isinstance(v, bool):
                        values.append(int(v))
            assert len(values) == d["count"], (lane, dim)
            assert (sum(values) / len(values) if values else None) == d["rate"], (lane, dim)
            checked += 1
    assert checked


def test_the_policy_violation_case_of_the_issue(imported):
    """bank-manager-demo: ASSERT's policy_violation_rate is 18/30; test_case_000028 has no relevant category."""
    theirs = load_run_summary(DEMO)["prompt_metrics"]["dimensions"]["policy_violation"]
    assert (theirs["counts"][1], theirs["count"]) == (18, 30)
    root = next(r for r in _roots(imported["demo"]) if r["caseId"] == "prompt:test_case_000028")
    source = next(r for r in _rows(DEMO / "scores.jsonl") if r["test_case_id"] == "test_case_000028")
    assert root["state"] == "not_applicable" and "scores" not in root
    assert root["ext"][EXT_NAME]["verdictDimensions"] == source["verdict"]["dimensions"]


def _blob(run: Path, eid: str) -> bytes:
    rec = next(e for e in _lines(run / "evidence.ndjson") if e["evidenceId"] == eid)
    hexd = rec["link"]["blob"].split(":")[1]
    return (run / "blobs" / "sha256" / hexd[:2] / hexd).read_bytes()


def _case_ext_and_verdict(run: Path) -> dict[str, tuple[dict, dict | None]]:
    out = {}
    for root in _roots(run):
        judge = next((e for e in root.get("evidence", ()) if e.endswith("-judge")), None)
        out[root["caseId"]] = (root["ext"][EXT_NAME], json.loads(_blob(run, judge)) if judge else None)
    return out


@pytest.mark.parametrize("name", ["shield", "demo", "control", "custom", "bridge"])
def test_every_member_of_a_score_row_is_in_the_run(imported, name):
    src, _ = RUNS[name]
    kept = _case_ext_and_verdict(imported[name])
    rows = _rows(src / "scores.jsonl")
    assert rows
    for row in rows:
        ext, verdict = kept[f"{row['type']}:{row['test_case_id']}"]
        assert verdict == row["verdict"]  # warnings, a failed judge's error, every member
        assert ext["scoreRow"] == {k: v for k, v in row.items() if k not in ("type", "test_case_id", "verdict")}
    if name == "control":  # the judge_failed rows' verdict.error
        assert sum("error" in kept[f"{r['type']}:{r['test_case_id']}"][1] for r in rows) == 4
    if name == "bridge":
        assert all(kept[f"{r['type']}:{r['test_case_id']}"][0]["scoreRow"]["inference_row_sha256"]
                   == r["inference_row_sha256"] for r in rows)


def test_no_file_is_missing_in_silence(imported):
    run = jsonio.read_json(imported["triage"] / "run.json")
    assert run["status"] == "aborted" and "scores.jsonl is absent" in run["abortReason"]
    assert "inference_set.jsonl is absent" in run["abortReason"]
    theirs = load_run_summary(TRIAGE)  # ASSERT has no rate for it either (the peers' README says None: it is not)
    assert theirs["prompt_metrics"] is None and theirs["scenario_metrics"] is None
    assert _roots(imported["triage"]) == []  # the source holds no case to import
    control = jsonio.read_json(imported["control"] / "run.json")
    assert control["status"] == "completed"  # its verdicts are there; the missing transcripts are noted
    done = from_assert(CONTROL, imported["control"].parent / "control-again", at=AT)
    assert any(n.startswith("inference_set.jsonl is absent") for n in done.notes)


def test_times_never_come_from_file_dates(tmp_path: Path):
    a = copy_run(BRIDGE.parent, tmp_path / "a" / "langfuse-bridge") / "sample_run"
    b = copy_run(BRIDGE.parent, tmp_path / "b" / "langfuse-bridge") / "sample_run"
    for p in b.iterdir():
        os.utime(p, (4_000_000_000, 4_000_000_000))  # a copy made in 2096
    one = from_assert(a, tmp_path / "one", at=AT)
    two = from_assert(b, tmp_path / "two", at=AT)
    assert one.run_hash == two.run_hash and one.run_hash is not None
    run = jsonio.read_json(one.path / "run.json")
    assert (run["startedAt"], run["endedAt"]) == (AT, AT) and run["status"] == "aborted"
    assert "times are unknown" in run["abortReason"]
    assert {"startedAt", "endedAt"} <= set(run["imported"]["asserted"])


@pytest.mark.parametrize("name", ["shield", "demo", "bridge"])
def test_export_gives_the_rows_back_whole(imported, name, tmp_path: Path):
    src, _ = RUNS[name]
    kit = tmp_path / "kit"
    p = subprocess.run([sys.executable, "-m", "aefgate", "export", "assert", str(imported[name]), str(kit)],
                       capture_output=True, text=True)
    if name == "bridge":  # no taxonomy anywhere: ASSERT's judge needs one (ASSERT-11); give the demo suite's
        assert p.returncode == 2 and "ASSERT-11" in p.stderr
        to_assert(imported[name], kit, taxonomy=DEMO.parent / "taxonomy.json")
    else:
        assert p.returncode == 0, p.stderr
    r = open_run(next((kit / "results").iterdir()) / "judge-1")
    names = r.case_map.cases
    source_scores = {f"{x['type']}:{x['test_case_id']}": x for x in _rows(src / "scores.jsonl")}
    source_tests = {f"{x['type']}:{x['test_case_id']}": x for x in _rows(src.parent / "test_set.jsonl")}
    back = 0
    for row in _rows(r.scores):
        case = names[(row["type"], row["test_case_id"])]
        assert {k: v for k, v in row.items() if k != "test_case_id"} == \
            {k: v for k, v in source_scores[case].items() if k != "test_case_id"}
        back += 1
    exported = len(_rows(r.inference_set))
    assert back == exported == len([c for c in source_scores if c in set(names.values())])
    for row in _rows(r.test_set):
        case = names[(row["type"], row["test_case_id"])]
        if case in source_tests:
            orig = source_tests[case]
            assert row["seed"] == orig["seed"]  # title, description, system_prompt
            assert {k: v for k, v in row.items() if k != "test_case_id"} == \
                {k: v for k, v in orig.items() if k != "test_case_id"}
    # assert-ai reads the kit and gives the same rates as on the source folder (the suite's own taxonomy)
    if name != "bridge":
        shutil.copyfile(src.parent / "taxonomy.json", r.suite_dir / "taxonomy.json")
        mine, theirs = load_run_summary(r.run_dir), load_run_summary(src)
        for key in ("prompt_metrics", "scenario_metrics"):
            for rate in ("policy_violation_rate", "not_permissible_policy_violation_rate",
                         "permissible_policy_violation_rate"):
                assert (mine[key] or {}).get(rate) == (theirs[key] or {}).get(rate), (key, rate)


@pytest.mark.parametrize("name", ["shield", "demo"])
def test_source_round_trip_loses_nothing(name):
    """ASSERT -> AEF -> ASSERT, record by record (each case's test-set row, inference row and score row). (The
    bridge sample has no test set: the kit writes one ASSERT needs, which the source does not have to compare.)"""
    from aefgate.converters.fidelity import fidelity_from_source

    src, changed = RUNS[name]
    report = fidelity_from_source("assert", src / "inference_set.jsonl",
                                  options={"content_capture": "on", "accept_changed_suite": changed})
    assert report.ok and report.lost == [], report.summary()
    assert {"samples:verdict.verdict.judgment_warnings", "samples:verdict.verdict.citation_warnings",
            "samples:test_case.seed.title", "samples:test_case.seed.system_prompt"} <= set(report.kept)
