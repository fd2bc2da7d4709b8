"""Progress bars on stderr: shown for the long commands when stderr is a terminal, never with --json or when
stderr is not a terminal. The commands run as real processes with stderr on a pseudo-terminal."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from tests._shared import EXAMPLES, SAMPLES, copy_run
from tests.conftest import aefgate, cli_env

RUN = EXAMPLES / "aef-inspect" / "run"


def on_terminal(*args: str | Path) -> tuple[int, str, str]:
    """Run ``python -m aefgate ARGS`` with stderr on a pseudo-terminal: (exit code, stdout, what the terminal
    showed)."""
    main, secondary = pty.openpty()
    env = cli_env(AEFGATE_PROGRESS_DELAY="0", TERM="xterm-256color")
    p = subprocess.Popen([sys.executable, "-m", "aefgate", *map(str, args)], stdout=subprocess.PIPE,
                         stderr=secondary, stdin=subprocess.DEVNULL, env=env)
    os.close(secondary)
    shown = bytearray()
    while True:
        try:
            data = os.read(main, 65536)
        except OSError:  # the other end closed
            break
        if not data:
            break
        shown += data
    out, _ = p.communicate(timeout=120)
    os.close(main)
    return p.returncode, out.decode(), shown.decode("utf-8", "replace")


@pytest.mark.parametrize("cmd,label", [
    (["verify", RUN], "verify results.ndjson"),
    (["export", "aep", RUN, "{tmp}/events.jsonl"], "export results.ndjson"),
    (["export", "inspect", RUN, "{tmp}/log.json"], "export samples"),
    (["import", "inspect", SAMPLES / "inspect" / "basic.eval", "{tmp}/run", "--at", "2026-12-01T00:00:00Z"],
     "import samples"),
    (["convert", SAMPLES / "inspect" / "basic.json", "{tmp}/ce.jsonl", "--from", "inspect", "--to", "cloudevents"],
     "import samples"),
])
def test_a_bar_on_a_terminal_none_with_json(cmd, label, tmp_path: Path):
    args = [str(a).replace("{tmp}", str(tmp_path / "a")) for a in cmd]
    (tmp_path / "a").mkdir()
    rc, out, shown = on_terminal(*args)
    assert rc == 0, shown
    assert label in shown and "\x1b[" in shown  # drawn with terminal controls
    assert out == ""
    args = [str(a).replace("{tmp}", str(tmp_path / "b")) for a in cmd]
    (tmp_path / "b").mkdir()
    rc, out, shown = on_terminal(*args, "--json")
    assert rc == 0 and label not in shown and out.strip().startswith("{")


def test_seal_shows_its_verification_and_no_bar_off_a_terminal(tmp_path: Path):
    run = copy_run(RUN, tmp_path / "run")
    (run / "seal.json").unlink()
    rc, _out, shown = on_terminal("seal", run)
    assert rc == 0 and "verify results.ndjson" in shown and "5,236/5,236 bytes" in shown
    p = aefgate("verify", run)  # stderr a pipe: no bar
    assert p.returncode == 0 and "verify results.ndjson" not in p.stderr
