"""``aefgate import store-v1`` through the real command line (a subprocess): the sample workspace with ``--all``,
the one-run forms, resuming (a second ``--all`` skips, a changed scenario migrates its run again), refused runs
beside good ones (exit 1), input errors (exit 2, one JSON value, never a traceback), the native-run warning, and
``aefgate formats`` saying why there is no export."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from aefgate.aef.verifier import verify_run
from tests.conftest import aefgate, one_json
from tests.converters.test_store_v1 import AT, EXPECTED_RUN1, _with_ids, lines, rid
from tests.formats.store_v1.workspace import RUN1, RUN2, SAMPLE, SUBJECT_DIR, Store, copy_sample, scenario


def assert_no_traceback(p) -> None:
    assert "Traceback" not in p.stderr and "Traceback" not in p.stdout, p.stderr


@pytest.fixture(scope="session")
def migrated_sample(tmp_path_factory) -> tuple[dict, Path]:
    """``aefgate import store-v1 --all`` over the shared sample (read only), once: its report and OUT_DIR."""
    out = tmp_path_factory.mktemp("all") / "runs"
    p = aefgate("import", "store-v1", "--all", SAMPLE, out, "--at", AT, "--json")
    assert p.returncode == 0, p.stderr
    assert_no_traceback(p)
    return one_json(p.stdout), out


def test_all_migrates_the_sample(migrated_sample):
    report, out = migrated_sample
    assert report["counts"] == {"migrated": 2, "re-migrated": 0, "skipped": 0, "refused": 0}
    rows = {r["runId"]: r for r in report["runs"]}
    assert list(rows) == [RUN1, RUN2]
    assert (rows[RUN1]["runStatus"], rows[RUN1]["results"]) == ("completed", 8)
    assert (rows[RUN2]["runStatus"], rows[RUN2]["results"]) == ("aborted", 4)
    assert sorted(p.name for p in out.iterdir()) == [RUN1, RUN2]
    for run_id in (RUN1, RUN2):
        v = verify_run(out / run_id)
        assert v.outcome == "intact" and v.run_hash == rows[run_id]["runHash"], v.problems
    assert lines(out / RUN1) == _with_ids(RUN1, EXPECTED_RUN1)
    assert [x["resultId"] for x in lines(out / RUN2)] == [
        rid(RUN2, "refund-order", p) for p in ("scenario", "scenario/assertions/1", "scenario/assertions/2",
                                               "scenario/assertions/3")]
    assert json.loads((out / RUN2 / "run.json").read_text())["status"] == "aborted"
    assert report["workers"] and all(w["peakRssKiB"] > 0 for w in report["workers"])


def test_one_run_forms_give_the_same_run(migrated_sample, tmp_path: Path):
    report, _ = migrated_sample
    hashes = {r["runId"]: r["runHash"] for r in report["runs"]}
    p = aefgate("import", "store-v1", SAMPLE, tmp_path / "a", "--run", RUN1, "--at", AT, "--json")
    assert p.returncode == 0, p.stderr
    a = one_json(p.stdout)
    assert (a["runId"], a["status"], a["outcome"], a["runHash"]) == (RUN1, "completed", "intact", hashes[RUN1])
    p = aefgate("import", "store-v1", SUBJECT_DIR / "runs" / RUN2, tmp_path / "b", "--at", AT)
    assert p.returncode == 0 and p.stdout == "", p.stderr
    assert "aborted" in p.stderr and hashes[RUN2] in p.stderr


def test_second_all_skips_every_run(migrated_sample):
    report, out = migrated_sample
    before = sorted(p.name for p in out.iterdir())
    p = aefgate("import", "store-v1", "--all", SAMPLE, out, "--json", "--jobs", "1")
    assert p.returncode == 0, p.stderr
    again = one_json(p.stdout)
    assert again["counts"] == {"migrated": 0, "re-migrated": 0, "skipped": 2, "refused": 0}
    assert {r["output"] for r in again["runs"]} == {str(out / RUN1), str(out / RUN2)}
    assert sorted(p.name for p in out.iterdir()) == before


def test_a_changed_scenario_migrates_only_its_run_again(tmp_path: Path):
    ws = copy_sample(tmp_path)
    out = tmp_path / "out"
    p = aefgate("import", "store-v1", "--all", ws, out, "--at", AT, "--json")
    assert p.returncode == 0 and one_json(p.stdout)["counts"]["migrated"] == 2, p.stderr
    f = ws / "subjects" / "agents" / "Support Agent" / "runs" / RUN1 / "scenarios" / "refund-order.json"
    f.write_text(f.read_text().replace('"score": 0.92', '"score": 0.93'))
    p = aefgate("import", "store-v1", "--all", ws, out, "--at", AT)  # people's output this time
    assert p.returncode == 0 and p.stdout == "", p.stderr
    assert "re-migrated" in p.stderr and "1 skipped" in p.stderr
    p = aefgate("import", "store-v1", "--all", ws, out, "--at", AT, "--json")
    report = one_json(p.stdout)
    assert report["counts"] == {"migrated": 0, "re-migrated": 0, "skipped": 2, "refused": 0}
    (new,) = [d for d in out.iterdir() if d.name.startswith(RUN1 + "--")]
    assert re.fullmatch(re.escape(RUN1) + r"--[0-9a-f]{12}", new.name)
    assert verify_run(new).outcome == "intact" and verify_run(out / RUN1).outcome == "intact"  # the earlier kept
    root = [x for x in lines(new) if x["caseId"] == "refund-order" and x["path"] == "scenario"][0]
    assert root["scores"][0] == {"metric": "score", "value": 0.93}
    assert root["resultId"] == rid(RUN1, "refund-order", "scenario")  # same ids: the source changed, not the case
    assert sorted(d.name for d in out.iterdir()) == sorted([RUN1, RUN2, new.name])


def test_refused_runs_do_not_stop_the_others(tmp_path: Path):
    store = Store(tmp_path / "ws" / ".agenteval")
    good = store.subject("Good Bot")
    store.run(good, "2026-06-01_10-00-00_00000001", [scenario("s1")])
    bad = store.run(good, "2026-06-01_10-00-00_00000002", [scenario("s1")])
    (bad / "scenarios" / "s1.json").write_bytes((bad / "scenarios" / "s1.json").read_bytes()[:30])
    linked = store.run(good, "2026-06-01_10-00-00_00000003", [scenario("s1")])
    (tmp_path / "secret.json").write_text("{}")
    (linked / "summary.json").unlink()
    (linked / "summary.json").symlink_to(tmp_path / "secret.json")
    orphan = store.subject("Orphan", subject_json=False)
    store.run(orphan, "2026-06-01_10-00-00_00000004", [scenario("s1")], name="Orphan")
    flow = store.subject("Flow", kind="workflow")
    store.run(flow, "2026-06-01_10-00-00_00000005", [scenario("s1")], kind="workflow", completed=False)
    for name in ("Twin A", "Twin B"):  # one run id under two subjects: neither can be named by it
        store.run(store.subject(name), "2026-06-01_10-00-00_00000006", [scenario("s1")])
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (store.root / "subjects" / "agents" / "Linked").symlink_to(outside)  # a subject folder leading out
    out = tmp_path / "out"
    p = aefgate("import", "store-v1", "--all", store.root, out, "--at", AT, "--json", "--jobs", "2")
    assert p.returncode == 1, p.stderr
    assert_no_traceback(p)
    report = one_json(p.stdout)
    rows = {r["runId"]: r for r in report["runs"]}
    assert rows["2026-06-01_10-00-00_00000001"]["status"] == "migrated"
    assert (rows["2026-06-01_10-00-00_00000005"]["status"], rows["2026-06-01_10-00-00_00000005"]["runStatus"],
            rows["2026-06-01_10-00-00_00000005"]["subject"]) == ("migrated", "aborted", "workflow:Flow")
    for run_id, rule, where in (("2026-06-01_10-00-00_00000002", "SV1-3", "scenarios/s1.json"),
                                ("2026-06-01_10-00-00_00000003", "SV1-2", "00000003/summary.json"),
                                ("2026-06-01_10-00-00_00000004", "SV1-4", "Orphan/subject.json")):
        r = rows[run_id]
        assert r["status"] == "refused" and r["error"]["rule"] == rule and r["error"]["where"].endswith(where), r
    twins = [r for r in report["runs"] if r["runId"] == "2026-06-01_10-00-00_00000006"]
    assert [(r["status"], r["error"]["rule"]) for r in twins] == [("refused", "SV1-1")] * 2
    (linked,) = [r for r in report["runs"] if r["runId"] is None]
    assert (linked["error"]["rule"], linked["error"]["where"]) == ("SV1-2", str(store.root / "subjects" / "agents"
                                                                                / "Linked"))
    assert report["counts"] == {"migrated": 2, "re-migrated": 0, "skipped": 0, "refused": 6}
    # nothing half-written: the two runs, no temporary folder
    assert sorted(d.name for d in out.iterdir()) == ["2026-06-01_10-00-00_00000001", "2026-06-01_10-00-00_00000005"]
    for d in out.iterdir():
        assert verify_run(d).outcome == "intact"


def test_a_native_run_in_the_workspace_is_warned_about(tmp_path: Path):
    ws = copy_sample(tmp_path)
    native = ws / "aef" / "runs" / "2026" / "05" / "0192-native"
    native.mkdir(parents=True)
    (native / "run.json").write_text(json.dumps({"runId": "0192-native", "status": "completed",
                                                 "ext": {"agenteval.store-v1": {"runId": RUN1}}}))
    p = aefgate("import", "store-v1", ws, tmp_path / "one", "--run", RUN1, "--json")
    assert p.returncode == 0, p.stderr
    (w,) = one_json(p.stdout)["warnings"]
    assert "aef/runs/2026/05/0192-native" in w and RUN1 in w and "warning" in p.stderr
    p = aefgate("import", "store-v1", "--all", ws, tmp_path / "all", "--json")
    assert p.returncode == 0 and len(one_json(p.stdout)["warnings"]) == 1


@pytest.mark.parametrize("args, rule", [
    (["--all", "{ws}", "{out}", "--run", RUN1], "CLI-2"),
    (["--all", "{ws}", "{out}", "--jobs", "0"], "CLI-2"),
    (["--all", "{ws}", "{ws}/inside"], "OUT-2"),
    (["{ws}", "{out}"], "SV1-1"),  # a workspace without --run or --all
    (["{ws}", "{out}", "--run", "2026-01-01_00-00-00_ffffffff"], "SV1-1"),
    (["{nowhere}", "{out}", "--run", RUN1], "SV1-1"),
    (["{ws}", "{out}", "--run", RUN1, "--target-mode", "real"], "CLI-2"),
    (["{ws}", "{out}", "--run", RUN1, "--at", "yesterday"], "CLI-2"),
    (["{ws}", "{out}", "--run", RUN1, "--key", "{nowhere}"], None),
])
def test_input_errors_exit_2(tmp_path: Path, args, rule):
    ws = SAMPLE
    subst = {"{ws}": str(ws), "{out}": str(tmp_path / "out"), "{nowhere}": str(tmp_path / "nowhere")}
    argv = [subst.get(a, a.replace("{ws}", str(ws))) for a in args]
    p = aefgate("import", "store-v1", *argv, "--json")
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert_no_traceback(p)
    err = one_json(p.stdout)["error"]
    if rule is not None:
        assert err["rule"] == rule, err
    assert re.match(r"error \[[A-Z0-9-]+\]( at .+)?: .+", p.stderr.strip().splitlines()[-1])
    assert not (tmp_path / "out").exists() and not (SAMPLE / "inside").exists()


def test_formats_says_why_there_is_no_export():
    p = aefgate("formats", "store-v1", "--json")
    assert p.returncode == 0, p.stderr
    (f,) = one_json(p.stdout)["formats"]
    assert f["export"] is None and "closed legacy" in f["noExport"]
    assert f["import"]["converter"] == "store-v1-to-aef" and len(f["import"]["losses"]) >= 10
    human = aefgate("formats", "store-v1")
    assert "Import only" in human.stderr and human.stdout == ""


def test_convert_route(tmp_path: Path, migrated_sample):
    report, _ = migrated_sample
    p = aefgate("convert", SAMPLE, tmp_path / "c", "--from", "store-v1", "--to", "aef", "--opt", f"run={RUN2}",
                "--at", AT, "--json")
    assert p.returncode == 0, p.stderr
    assert verify_run(tmp_path / "c").run_hash == {r["runId"]: r["runHash"] for r in report["runs"]}[RUN2]
    shutil.rmtree(tmp_path / "c")


def test_a_compliance_document_that_does_not_read_refuses_every_run(tmp_path: Path):
    # it names its run inside: unread, it may belong to any run (and the refusal crosses to the worker processes)
    ws = copy_sample(tmp_path)
    doc = ws / "compliance" / "gdpr" / "Support Agent" / "2026-05-20_09-15-31" / "evidence.json"
    doc.write_bytes(doc.read_bytes()[:50])
    p = aefgate("import", "store-v1", "--all", ws, tmp_path / "out", "--json", "--jobs", "2")
    assert p.returncode == 1, p.stderr
    assert_no_traceback(p)
    report = one_json(p.stdout)
    assert [(r["status"], r["error"]["rule"], r["error"]["where"]) for r in report["runs"]] == \
        [("refused", "SV1-3", str(doc))] * 2
    assert list((tmp_path / "out").iterdir()) == []


def test_an_interrupted_all_leaves_whole_runs_and_resumes(tmp_path: Path):
    import os
    import signal
    import subprocess
    import sys
    import time

    from tests.conftest import cli_env

    store = Store(tmp_path / "ws" / ".agenteval")
    subj = store.subject("Bot")
    ids = [f"2026-06-01_10-00-{i:02d}_{i:08x}" for i in range(60)]
    for run_id in ids:
        store.run(subj, run_id, [scenario(f"s{k}") for k in range(15)])
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "aefgate", "import", "store-v1", "--all", str(store.root), str(out), "--json",
           "--at", AT]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli_env(), start_new_session=True)
    # Ctrl-C once the migration is under way (its output folder made), not at a fixed time: on a loaded machine a
    # fixed 0.8 s can fall in the interpreter's start, before the command runs (Python's own exit by SIGINT, -2)
    deadline = time.monotonic() + 60
    while not (out.is_dir() and any(out.iterdir())) and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    os.killpg(p.pid, signal.SIGINT)  # Ctrl-C: the whole process group
    _, err = p.communicate(timeout=60)
    # 130, or ended by the SIGINT itself (-2: how a process reports Ctrl-C when the signal lands in the
    # interpreter's own shutdown, after the command's handler), or 0 (done before the signal); never a traceback
    assert p.returncode in (130, 0, -signal.SIGINT) and b"Traceback" not in err, err
    done = sorted(d.name for d in out.iterdir())
    assert not [n for n in done if n.startswith(".")]  # no temporary folder: every run there is whole
    for name in done:
        assert verify_run(out / name).outcome == "intact"
    p = aefgate("import", "store-v1", "--all", store.root, out, "--json", "--at", AT)
    assert p.returncode == 0, p.stderr
    counts = one_json(p.stdout)["counts"]
    assert counts == {"migrated": 60 - len(done), "re-migrated": 0, "skipped": len(done), "refused": 0}
    assert sorted(d.name for d in out.iterdir()) == ids
