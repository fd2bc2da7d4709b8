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


# -- operations (issue 28): a closed pipe, a folder that is not a run, IO-1 names the path ---------------------------


def _closed_pipes(args: list[str], which: str) -> tuple[int, bytes]:
    """Run the real console command with its stdout, stderr or both read by nobody (the reader closed at once, as
    ``| head -1`` does once it has its line); returns the exit code and what stderr held when it is still read."""
    import subprocess
    import sys

    from tests.conftest import cli_env

    p = subprocess.Popen([sys.executable, "-m", "aefgate", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL, env=cli_env())
    err = b""
    if which in ("stdout", "both"):
        p.stdout.close()
    if which in ("stderr", "both"):
        p.stderr.close()
    if which == "stdout":
        err = p.stderr.read()
        p.stderr.close()
    if which == "stderr":
        p.stdout.read()
        p.stdout.close()
    return p.wait(timeout=120), err


def test_a_closed_pipe_ends_quietly_with_the_commands_own_exit_code(sealed_run: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    import shutil

    shutil.copytree(sealed_run, broken)
    with open(broken / "results.ndjson", "ab") as f:  # one more line: the run no longer verifies (exit 1)
        f.write(b'{"x":1}\n')
    for which in ("stdout", "stderr", "both"):
        assert _closed_pipes(["verify", str(sealed_run)], which)[0] == 0, which
        assert _closed_pipes(["verify", str(sealed_run), "--json"], which)[0] == 0, which
        assert _closed_pipes(["verify", str(broken)], which)[0] == 1, which  # invalid stays 1, not "a pipe error"
        assert _closed_pipes(["verify", str(tmp_path / "absent")], which)[0] == 2, which
    code, err = _closed_pipes(["verify", str(sealed_run), "--json"], "stdout")
    assert code == 0 and b"Traceback" not in err and b"BrokenPipe" not in err and b"Exception ignored" not in err


def test_verify_head_one_through_a_shell(sealed_run: Path) -> None:
    """As the issue ran it: ``aefgate verify RUN 2>&1 | head -1``, the command's exit code read from the pipe."""
    import shlex
    import subprocess
    import sys

    from tests.conftest import cli_env

    cmd = f"{shlex.quote(sys.executable)} -m aefgate verify {shlex.quote(str(sealed_run))} 2>&1 | head -1; " \
          "exit ${PIPESTATUS[0]}"
    p = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, env=cli_env(), timeout=120)
    assert p.returncode == 0, p
    assert p.stdout.startswith("run ") and p.stdout.count("\n") == 1


def test_verify_of_a_folder_that_is_not_a_run_is_an_input_error(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("hello\n")
    for folder in (empty, other):
        p = aefgate("verify", folder)
        assert p.returncode == 2, p
        assert p.stderr.strip() == f"error [RUN-1] at {folder}: not a run folder: it holds no run.json"
        assert "run hash" not in p.stderr and "invalid" not in p.stderr
        p = aefgate("verify", folder, "--json")
        assert p.returncode == 2
        assert one_json(p.stdout) == {"error": {"rule": "RUN-1", "where": str(folder),
                                                "message": "not a run folder: it holds no run.json"}}


def test_a_run_json_that_does_not_read_is_still_invalid_not_refused(run_copy: Path) -> None:
    (run_copy / "run.json").write_bytes(b"{")
    p = aefgate("verify", run_copy)
    assert p.returncode == 1 and "invalid" in p.stderr


def _file_too_large(args: list) -> "subprocess.CompletedProcess":
    """The real command with a file-size limit of 4 KiB (SIGXFSZ ignored: a write past it fails with EFBIG, as a
    full disk fails with ENOSPC, on an open file: the error names no file)."""
    import resource
    import subprocess
    import sys

    from tests.conftest import cli_env

    def limit() -> None:
        import signal

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))

    return subprocess.run([sys.executable, "-m", "aefgate", *map(str, args)], capture_output=True, text=True,
                          env=cli_env(), stdin=subprocess.DEVNULL, timeout=300, preexec_fn=limit)


def test_io_errors_name_the_output_being_written(sealed_run: Path, tmp_path: Path) -> None:
    from tests._shared import SAMPLES

    cases = [
        (["export", "aep", sealed_run, tmp_path / "e.jsonl"], tmp_path / "e.jsonl"),
        (["export", "cloudevents", sealed_run, tmp_path / "c.jsonl"], tmp_path / "c.jsonl"),
        (["import", "evaluation-api", "--subject", "agent:x", SAMPLES / "evaluation-api" / "finished.json",
          tmp_path / "r1"], tmp_path / "r1"),
        (["import", "assert", SAMPLES / "assert" / "demo-suite" / "run-001", tmp_path / "r2", "--content-capture",
          "on"], tmp_path / "r2"),
    ]
    for args, out in cases:
        p = _file_too_large(args)
        assert p.returncode == 2, (args, p.stderr)
        assert "Traceback" not in p.stderr
        assert p.stderr.strip().endswith(f"error [IO-1] at {out}: File too large"), (args, p.stderr)
        assert not out.exists()
        assert not [x.name for x in tmp_path.iterdir() if x.name.startswith(".")], list(tmp_path.iterdir())
