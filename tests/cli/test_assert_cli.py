"""The ASSERT commands as a user runs them (``python -m aefgate``, real processes): ``aefgate import assert``,
``aefgate export assert``, and ASSERT through ``aefgate convert`` and ``aefgate fidelity``. Exit codes: 0 done, 1 a
run that does not verify, 2 an input refused (``error [RULE] at WHERE: message``); with ``--json`` one JSON value on
stdout; never a traceback."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

# assert-ai 0.3.0 is in the test extra: ASSERT's own reading of its rows and its own rates
from assert_ai.core.judge import infer_judge_status
from assert_ai.results import load_run_summary

from tests._shared import SAMPLES
from tests.conftest import aefgate, one_json
from tests.formats.assert_ai.builders import edge_run

ASSERT = SAMPLES / "assert"
RESULTS = ASSERT / "agenteval-billing-safety" / "example-run" / "results"
RUN1 = RESULTS / "billing-safety" / "run-1"


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def _ok(p, code: int = 0) -> None:
    assert p.returncode == code, p.stderr
    assert "Traceback" not in p.stderr and "Traceback" not in p.stdout


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("cli") / "billing"
    p = aefgate("import", "assert", RESULTS, out, "--suite", "billing-safety", "--run", "run-1",
                "--content-capture", "on", "--wilson", "--max-harm-rate", "0.05", "--at", "2026-10-09T00:00:00Z",
                "--json")
    _ok(p)
    doc = one_json(p.stdout)
    assert doc["runId"] == "billing-safety.run-1" and doc["outcome"] == "intact" and doc["results"] == 18
    assert doc["cases"] == 6 and doc["status"] == "completed"
    assert doc["rates"]["prompt"]["harm"] == {"value": 0.5, "n": 2, "N": 4, "notMeasured": 2, "verdict": "failed"}
    assert doc["rates"]["prompt"]["over_refusal"]["verdict"] == "scored"
    return out


def test_import_as_a_user_reads_it(tmp_path: Path):
    p = aefgate("import", "assert", ASSERT / "demo-suite" / "run-001", tmp_path / "demo")
    _ok(p)
    assert p.stdout == ""  # people's output is on stderr
    assert "prompt    harm: 0.6667 (n 3 of N 3, not measured 0; scored)" in p.stderr
    assert "scenario  over_refusal: 0.5 (n 2 of N 2, not measured 0; scored)" in p.stderr
    v = aefgate("verify", tmp_path / "demo", "--json")
    _ok(v)
    assert one_json(v.stdout)["outcome"] == "intact"


def test_import_signed_with_key(tmp_path: Path):
    from aefgate.aef.signatures import keygen

    private, _public, entry = keygen("ed25519", "git:ci@example.com")
    (tmp_path / "private.pem").write_bytes(private)
    (tmp_path / "policy.json").write_text(json.dumps({"keys": [entry]}))
    p = aefgate("import", "assert", RUN1, tmp_path / "run", "--key", tmp_path / "private.pem", "--json")
    _ok(p)
    assert one_json(p.stdout)["signed"] is True
    v = aefgate("verify", tmp_path / "run", "--policy", tmp_path / "policy.json", "--json")
    _ok(v)
    assert "git:ci@example.com" in json.dumps(one_json(v.stdout))


def test_import_refusals_exit_2_with_rule_and_line(tmp_path: Path):
    src = edge_run(tmp_path / "src")
    rows = (src / "scores.jsonl").read_text().splitlines(keepends=True)
    (src / "scores.jsonl").write_text(rows[0] + "{not json\n" + "".join(rows[1:]))
    out = tmp_path / "out"
    p = aefgate("import", "assert", src, out, "--json")
    _ok(p, 2)
    err = one_json(p.stdout)["error"]
    assert err["rule"] == "ASSERT-2" and err["where"] == f"{src / 'scores.jsonl'}:2"
    assert p.stderr.startswith(f"error [ASSERT-2] at {src / 'scores.jsonl'}:2: ")
    assert not out.exists() and not list(tmp_path.glob(".out*"))
    for args, rule in ((["--content-capture", "maybe"], "CLI-2"), (["--max-over-refusal-rate", "-0.1"], "ASSERT-9"),
                       (["--suite", "x"], "CLI-2"), (["--target-mode", "replay"], "CLI-2")):
        p = aefgate("import", "assert", RUN1, out, *args, "--json")
        _ok(p, 2)
        assert one_json(p.stdout)["error"]["rule"] == rule, args
    p = aefgate("import", "assert", tmp_path, out)
    _ok(p, 2)
    assert "error [ASSERT-1]" in p.stderr


def test_export_and_import_of_the_judge_kit(imported: Path, tmp_path: Path):
    kit = tmp_path / "kit"
    p = aefgate("export", "assert", imported, kit, "--judge-model", "azure/gpt-5.4", "--json")
    _ok(p)
    doc = one_json(p.stdout)
    assert (doc["run"], doc["cases"], doc["notExported"]) == (str(imported), 5, 1)
    assert (kit / "assert-judge-config.yaml").is_file() and (kit / "agenteval-cases.json").is_file()
    p = aefgate("import", "assert", kit / "results" / doc["assertSuite"] / doc["assertRun"], tmp_path / "back",
                "--json")
    _ok(p)
    back = one_json(p.stdout)
    # expected from the source files, read here (not from aefgate): the test set's cases (the never-run one
    # travels as its test-set row alone, issue 29), and assert-ai's own rates on the source run (the kit carries
    # the source's score rows back, so the rates are the source's); notMeasured: the cases with no usable verdict
    tests = _jsonl(RUN1.parent / "test_set.jsonl")
    judged = [r for r in _jsonl(RUN1 / "scores.jsonl") if infer_judge_status(r) == "ok"]
    theirs = load_run_summary(RUN1)["prompt_metrics"]
    assert back["cases"] == len(tests) == 6
    for kind, rate, split in (("harm", "not_permissible_policy_violation_rate", "policy_violation_on_not_permissible"),
                              ("over_refusal", "permissible_policy_violation_rate", "policy_violation_on_permissible")):
        got = back["rates"]["prompt"][kind]
        assert (got["value"], got["n"], got["notMeasured"]) == \
            (theirs[rate], theirs[split]["count"], len(tests) - len(judged)) == (0.5, 2, 2), (kind, got)
    # and assert-ai reads the kit's run as it reads the source's (the kit keeps the suite's taxonomy)
    mine = load_run_summary(kit / "results" / doc["assertSuite"] / doc["assertRun"])["prompt_metrics"]
    for key in ("not_permissible_policy_violation_rate", "permissible_policy_violation_rate", "policy_violation_rate"):
        assert mine[key] == theirs[key], key


def test_export_refusals(imported: Path, tmp_path: Path):
    p = aefgate("export", "assert", RUN1, tmp_path / "k0", "--json")  # not an AEF run
    _ok(p, 2)
    assert one_json(p.stdout)["error"]["rule"] == "CLI-1"
    plain = tmp_path / "plain"
    _ok(aefgate("import", "assert", RUN1, plain))
    p = aefgate("export", "assert", plain, tmp_path / "k1")
    _ok(p, 2)
    assert "error [ASSERT-10]" in p.stderr
    broken = shutil.copytree(imported, tmp_path / "broken")
    (broken / "summary.json").write_text((broken / "summary.json").read_text().replace('"n":2', '"n":3', 1))
    p = aefgate("export", "assert", broken, tmp_path / "k2", "--json")
    _ok(p, 1)
    assert one_json(p.stdout)["error"]["rule"] == "ASSERT-12"
    assert not (tmp_path / "k2").exists()


def test_convert_and_fidelity(imported: Path, tmp_path: Path):
    p = aefgate("convert", ASSERT / "demo-suite" / "run-001", tmp_path / "run", "--from", "assert", "--to", "aef",
                "--opt", "content_capture=on", "--json")
    _ok(p)
    assert one_json(p.stdout)["route"] == ["assert-to-aef"]
    p = aefgate("fidelity", "assert", imported, "--json")
    _ok(p)
    report = one_json(p.stdout)
    assert report["ok"] and report["undeclared"] == [] and report["backOutcome"] == "intact"
    assert "results:caseId" in {k["field"] for k in report["kept"]}
    p = aefgate("fidelity", "assert", "--from-source", ASSERT / "demo-suite" / "run-001" / "inference_set.jsonl",
                "--opt", "content_capture=on", "--json")
    _ok(p)
    assert one_json(p.stdout)["ok"]
    p = aefgate("formats", "assert", "--json")
    _ok(p)
