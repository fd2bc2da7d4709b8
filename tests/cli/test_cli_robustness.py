"""Hostile input to the core commands, as a user runs them (found by a fuzzing review, 2026-12-02): a clear
refusal or an honest verdict, never an internal error, never a command that waits forever."""

from __future__ import annotations

import os
from pathlib import Path

from tests.conftest import aefgate, one_json


def _no_crash(p) -> None:
    assert "Traceback" not in p.stderr and '"internal"' not in p.stdout, p.stdout + p.stderr


def test_a_name_that_is_not_utf8_is_a_path_problem(run_copy: Path, tmp_path: Path) -> None:
    bad = os.fsdecode(b"\xff.json")
    (run_copy / bad).write_bytes(b"{}")
    (run_copy / "overlays").mkdir()
    (run_copy / "overlays" / os.fsdecode(b"\xfe")).write_bytes(b"")
    p = aefgate("verify", run_copy, "--json")
    _no_crash(p)
    assert p.returncode == 1
    assert one_json(p.stdout)["problems"] == [["\\xff.json", "path"]]
    p = aefgate("verify", run_copy)  # the text report prints it too
    _no_crash(p)
    assert p.returncode == 1 and "\\xff.json" in p.stderr  # rich on stderr
    p = aefgate("view", run_copy, "--json")
    _no_crash(p)
    assert ["overlays/\\xfe", "unexpected-file"] in one_json(p.stdout)["chain"]["problems"]
    for args in (["export", "inspect", run_copy, tmp_path / "o.eval"], ["export", "aep", run_copy, tmp_path / "o"],
                 ["publish", run_copy, "--to", f"file:{tmp_path / 'p.jsonl'}"]):
        p = aefgate(*args, "--json")
        _no_crash(p)
        assert p.returncode == 1
    (run_copy / "seal.json").unlink()
    p = aefgate("seal", run_copy, "--json")
    _no_crash(p)
    assert p.returncode == 2 and one_json(p.stdout)["error"]["where"] == "\\xff.json"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["run"]


def test_a_pipe_is_refused_not_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "log.json"
    os.mkfifo(fifo)
    for args in (["import", "inspect", fifo, tmp_path / "o"], ["convert", fifo, tmp_path / "o", "--from", "inspect",
                                                                "--to", "aef"],
                 ["import", "aep", fifo, tmp_path / "o"],
                 ["convert", fifo, tmp_path / "o.jsonl", "--from", "aep", "--to", "cloudevents"]):
        p = aefgate(*args, "--json")  # the conftest's timeout (300 s) would fail a command that waits
        _no_crash(p)
        assert p.returncode == 2 and one_json(p.stdout)["error"]["rule"] == "CLI-1"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["log.json"]


def test_keygen_names_the_option_at_fault(tmp_path: Path) -> None:
    p = aefgate("keygen", tmp_path / "k", "--identity", "git:a@example.com", "--may", "", "--json")
    assert p.returncode == 2 and one_json(p.stdout)["error"]["where"] == "--may"
    p = aefgate("keygen", tmp_path / "k", "--identity", "", "--json")
    assert p.returncode == 2 and one_json(p.stdout)["error"]["where"] == "--identity"
    assert not (tmp_path / "k").exists()
