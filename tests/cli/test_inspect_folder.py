"""``aefgate import inspect DIR OUT``: a folder of logs in one command (issue 26; docs/mappings/inspect.md, "Log
folders"), on logs the real Inspect CLI wrote (the session's corpus, tests/_inspect_corpus.py), an ``inspect
eval-set`` folder (its ``logs.json`` and ``eval-set.json``), logs of Inspect's own repository and files that are not
logs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from aefgate.converters.inspect.folder import STATE_FILE, run_folders
from aefgate.aef.verifier import verify_run
from tests._inspect_corpus import eval_set_dir
from tests.conftest import aefgate, one_json, shared_root

AT = "2030-01-01T00:00:00Z"
PEERS = shared_root() / "samples" / "inspect-peers"
# the logs written by the Inspect CLI that go into the folder (at the top, and one in a sub-folder), under new names
CORPUS = {"match_includes.eval": "match_includes.eval", "match_includes.json": "match_includes.json",
          "dict_scores.json": "scores/dict_scores.json", "limits.eval": "scores/limits.eval",
          "react_tool.json": "agent/react_tool.json", "pair_t02_s7.eval": "pair.eval"}
PEER_OK = "log__test_eval_log__log_formats.eval"
PEER_BAD = "log__test_eval_log__log_invalid.json"  # not JSON: refused IN-6 by the reader
NOT_A_LOG = {"schema_version": 1, "rows": [{"a": "ü"}]}  # JSON, and no Inspect log: refused IN-6 by the reader


@pytest.fixture(scope="module")
def logs_dir(inspect_cli_corpus: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("folder") / "logs"
    for name, rel in CORPUS.items():
        (d / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(inspect_cli_corpus[name], d / rel)
    shutil.copytree(eval_set_dir(inspect_cli_corpus), d / "eval-set")
    (d / "peers").mkdir()
    for name in (PEER_OK, PEER_BAD):
        shutil.copyfile(PEERS / name, d / "peers" / name)
    (d / "peers" / "table.json").write_text(json.dumps(NOT_A_LOG), encoding="utf-8")
    (d / "notes.txt").write_text("not a candidate: neither .eval nor .json\n")
    (d / ".hidden").mkdir()
    (d / ".hidden" / "x.json").write_text("{}")  # not looked into
    return d


def _eval_set_logs(d: Path) -> list[str]:
    return sorted(f"eval-set/{p.name}" for p in (d / "eval-set").glob("*.eval"))


def _expected(d: Path) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """The folder's logs: imported (log -> run folder), refused (log -> rule), skipped (log -> reason start)."""
    imported = {"match_includes.eval": "match_includes--eval", "match_includes.json": "match_includes--json",
                "scores/dict_scores.json": "scores/dict_scores", "scores/limits.eval": "scores/limits",
                "agent/react_tool.json": "agent/react_tool", "pair.eval": "pair",
                f"peers/{PEER_OK}": f"peers/{PEER_OK[:-5]}"}
    imported.update({log: log[:-5] for log in _eval_set_logs(d)})
    refused = {f"peers/{PEER_BAD}": "IN-6", "peers/table.json": "IN-6"}
    skipped = {"eval-set/logs.json": "not a log", "eval-set/eval-set.json": "not a log"}
    return imported, refused, skipped


def _import(d: Path, out: Path, *args: str):
    return aefgate("import", "inspect", d, out, "--at", AT, *args)


def _runs(out: Path) -> list[Path]:
    return sorted(p.parent for p in out.rglob("run.json"))


def _no_litter(out: Path) -> None:
    """Nothing half-written: every folder under OUT is a run, inside a run, or above one; no temporary sibling."""
    runs = _runs(out)
    for p in out.rglob("*"):
        assert ".tmp-" not in p.name, p
        if p.is_dir():
            assert any(p == r or r in p.parents or p in r.parents for r in runs), f"not a run: {p}"


def test_a_folder_imports_in_one_command_resumably(logs_dir: Path, tmp_path: Path) -> None:
    imported, refused, skipped = _expected(logs_dir)
    out = tmp_path / "out"
    p = _import(logs_dir, out, "--jobs", "2", "--json")
    assert p.returncode == 2, p.stderr  # two logs refused by an input rule
    report = one_json(p.stdout)
    rows = {r["log"]: r for r in report["logs"]}
    assert set(rows) == set(imported) | set(refused) | set(skipped)  # not notes.txt, not .hidden/, not .eval-set-id
    assert [r["log"] for r in report["logs"]] == sorted(rows)
    for log, folder in imported.items():
        r = rows[log]
        assert (r["status"], r["folder"], r["outcome"]) == ("imported", folder, "intact"), r
        assert Path(r["output"]) == out / folder and r["runHash"]
    for log, rule in refused.items():
        assert rows[log]["status"] == "refused" and rows[log]["error"]["rule"] == rule, rows[log]
        assert not (out / log.rsplit(".", 1)[0]).exists()
    for log, reason in skipped.items():
        assert rows[log]["status"] == "skipped" and rows[log]["reason"].startswith(reason), rows[log]
    assert report["counts"] == {"imported": len(imported), "re-imported": 0, "skipped": len(skipped),
                                "refused": len(refused)}
    assert report["jobs"] == 2 and 1 <= len(report["workers"]) <= 2
    assert sum(w["runs"] for w in report["workers"]) == len(imported) + len(refused)
    # every run written verifies intact, its hash the one reported; nothing else is in OUT
    assert _runs(out) == sorted(out / f for f in imported.values())
    for log, folder in imported.items():
        v = verify_run(out / folder)
        assert (v.outcome, v.problems, v.run_hash) == ("intact", [], rows[log]["runHash"]), log
    _no_litter(out)
    v = aefgate("verify", out / "pair", "--json")
    assert v.returncode == 0 and one_json(v.stdout)["outcome"] == "intact", v.stderr

    # again: every log unchanged is skipped, the refusals are listed again (each with its rule), people's summary
    before = {f: (out / f / "seal.json").read_bytes() for f in imported.values()}
    p = _import(logs_dir, out)
    assert p.returncode == 2 and p.stdout == ""
    lines = p.stderr.splitlines()
    for log in imported:
        assert f"  skipped     {log}: unchanged" in lines, p.stderr
    for log, rule in refused.items():
        assert any(x.startswith(f"  refused     {log}: error [{rule}] at ") for x in lines), p.stderr
    assert lines[-1].startswith(f"0 imported, 0 re-imported (changed), {len(imported) + len(skipped)} skipped "
                                f"({len(imported)} unchanged, {len(skipped)} not logs), {len(refused)} refused; ")
    assert {f: (out / f / "seal.json").read_bytes() for f in imported.values()} == before

    # a log that changed is imported again, into a new folder, the earlier run kept; the others skipped
    changed = logs_dir / "agent" / "react_tool.json"
    original = changed.read_bytes()
    try:
        changed.write_bytes(original + b"\n")
        p = _import(logs_dir, out, "--json")
    finally:
        changed.write_bytes(original)
    assert p.returncode == 2, p.stderr
    rows = {r["log"]: r for r in one_json(p.stdout)["logs"]}
    r = rows["agent/react_tool.json"]
    assert r["status"] == "re-imported" and r["folder"] == f"agent/react_tool--{r['key']}", r
    assert r["previous"] == [str(out / "agent/react_tool")]
    assert verify_run(out / r["folder"]).outcome == "intact" and verify_run(out / "agent/react_tool").outcome == \
        "intact"
    assert {x["status"] for log, x in rows.items() if log in imported and log != "agent/react_tool.json"} == \
        {"skipped"}
    state = [json.loads(x) for x in (out / STATE_FILE).read_text().splitlines()]
    assert [e["folder"] for e in state if e["input"] == "agent/react_tool.json"] == ["agent/react_tool", r["folder"]]
    # the log as it was: its first run again, skipped
    p = _import(logs_dir, out, "--json")
    assert {x["log"]: x for x in one_json(p.stdout)["logs"]}["agent/react_tool.json"]["status"] == "skipped"

    # one worker writes the same runs as two
    out1 = tmp_path / "out1"
    p = _import(logs_dir, out1, "--jobs", "1", "--json")
    assert p.returncode == 2, p.stderr
    one = {r["log"]: (r["status"], r.get("folder"), r.get("runHash"), (r.get("error") or {}).get("rule"))
           for r in one_json(p.stdout)["logs"]}
    assert one == {log: ("imported", f, verify_run(out / f).run_hash, None) for log, f in imported.items()} | \
        {log: ("refused", None, None, rule) for log, rule in refused.items()} | \
        {log: ("skipped", None, None, None) for log in skipped}


def test_a_folder_where_every_log_imports_exits_0(inspect_cli_corpus: dict[str, Path], tmp_path: Path) -> None:
    d = tmp_path / "eval-set"
    shutil.copytree(eval_set_dir(inspect_cli_corpus), d)  # as `inspect eval-set` left it
    p = _import(d, tmp_path / "out")
    assert p.returncode == 0, p.stderr
    assert "2 imported, 0 re-imported (changed), 2 skipped (0 unchanged, 2 not logs), 0 refused" in p.stderr
    assert len(_runs(tmp_path / "out")) == 2
    (tmp_path / "empty").mkdir()
    p = _import(tmp_path / "empty", tmp_path / "out2")
    assert p.returncode == 0 and "0 imported" in p.stderr, p.stderr


def test_a_folder_whose_logs_are_all_refused_leaves_no_folder(tmp_path: Path) -> None:
    d = tmp_path / "logs" / "deep" / "er"
    d.mkdir(parents=True)
    shutil.copyfile(PEERS / PEER_BAD, d / PEER_BAD)
    p = _import(tmp_path / "logs", tmp_path / "out", "--json")
    assert p.returncode == 2
    (row,) = one_json(p.stdout)["logs"]
    assert (row["log"], row["status"], row["error"]["rule"]) == (f"deep/er/{PEER_BAD}", "refused", "IN-6")
    # no run, no empty deep/er: only the journal, whose line for the log names a folder that does not exist
    assert sorted(x.name for x in (tmp_path / "out").iterdir()) == [STATE_FILE]


def test_an_interrupted_folder_import_leaves_whole_runs_and_resumes(inspect_cli_corpus: dict[str, Path],
                                                                     tmp_path: Path) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    from tests.conftest import cli_env

    d = tmp_path / "logs"
    d.mkdir()
    names = [f"run-{i:02d}" for i in range(48)]
    for name in names:
        shutil.copyfile(inspect_cli_corpus["limits.json"], d / f"{name}.json")
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "aefgate", "import", "inspect", str(d), str(out), "--json", "--at", AT, "--jobs", "2"]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli_env(), start_new_session=True)
    deadline = time.monotonic() + 60
    while not (out / STATE_FILE).exists() and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)  # until the first import starts (the command is past its start-up)
    time.sleep(0.6)  # about half of the logs imported, on the 2-core machine
    os.killpg(p.pid, signal.SIGINT)  # Ctrl-C: the whole process group
    _, err = p.communicate(timeout=60)
    # 130, or ended by the SIGINT itself (-2: how a process reports Ctrl-C when the signal lands in the
    # interpreter's own shutdown, after the command's handler), or 0 (done before the signal); never a traceback
    assert p.returncode in (130, 0, -signal.SIGINT) and b"Traceback" not in err, err
    done = sorted(x.name for x in out.iterdir() if x.name != STATE_FILE) if out.exists() else []
    assert not [n for n in done if n.startswith(".")]  # no temporary folder: every run there is whole
    for name in done:
        assert verify_run(out / name).outcome == "intact"
    # the rest, and only the rest: a run a worker finished as it was stopped is known (the journal's line came first)
    p = _import(d, out, "--json")
    assert p.returncode == 0, p.stderr
    assert one_json(p.stdout)["counts"] == {"imported": len(names) - len(done), "re-imported": 0,
                                            "skipped": len(done), "refused": 0}
    assert sorted(x.name for x in out.iterdir() if x.name != STATE_FILE) == names


@pytest.mark.parametrize("case, rule, where", [
    ("jobs-0", "CLI-2", "--jobs"), ("jobs-file", "CLI-2", "--jobs"), ("out-inside", "OUT-2", "inside"),
    ("bad-state", "OUT-1", STATE_FILE)])
def test_a_folder_import_refused_as_a_whole(tmp_path: Path, case: str, rule: str, where: str) -> None:
    d = tmp_path / "logs"
    d.mkdir()
    shutil.copyfile(PEERS / PEER_OK, d / PEER_OK)
    out = tmp_path / "out"
    args: list = [d, out, "--jobs", "0"]
    if case == "jobs-file":
        args = [d / PEER_OK, out, "--jobs", "2"]
    elif case == "out-inside":
        args = [d, d / "runs"]
    elif case == "bad-state":
        out.mkdir()
        (out / STATE_FILE).write_text('{"format": "inspect", "input": "x.eval", "folder": "x", "key": "k"}\n'
                                      '{"format": "inspect", "inpu\n'  # cut short by a crash: ignored
                                      '{"format": "inspect", "input": "y.eval", "folder": "../y", "key": "k"}\n')
        args = [d, out]
    p = aefgate("import", "inspect", *args)
    assert p.returncode == 2 and f"error [{rule}]" in p.stderr and where in p.stderr, p.stderr
    assert "Traceback" not in p.stderr
    if case != "bad-state":
        assert not out.exists() and not (d / "runs").exists()
    else:
        assert sorted(x.name for x in out.iterdir()) == [STATE_FILE]


def test_run_folders() -> None:
    logs = ["a.eval", "a/b.eval", "b.eval", "b.json", "c--json.json", "c.json", "c.eval", "d/e.json"]
    assert run_folders(sorted(logs)) == {
        "a.eval": "a--eval", "a/b.eval": "a/b", "b.eval": "b--eval", "b.json": "b--json",
        "c--json.json": "c--json", "c.eval": "c--eval", "c.json": "c--json--2", "d/e.json": "d/e"}
