"""Benchmark the Inspect import against Inspect's own reader, side by side.

    python bench/bench_inspect.py LOG.eval [LOG2.eval ...] [--repeat 1]

For each log (generate them with bench/make_inspect_log.py), as separate processes (wall seconds, peak RSS of the
process from wait4): `aefgate import inspect LOG OUT --target-mode scripted` (read, convert, write, seal: the whole
import), the same with `--content-capture off`, and `inspect_ai.log.read_eval_log(LOG)` merely reading the file.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_core import measure  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("logs", nargs="+", type=Path)
    ap.add_argument("--repeat", type=int, default=1)
    a = ap.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "run"

        def fresh():
            shutil.rmtree(out, ignore_errors=True)

        for log in a.logs:
            aef = [sys.executable, "-m", "aefgate", "import", "inspect", str(log), str(out), "--target-mode", "scripted"]
            t_on, m_on = measure(aef, setup=fresh, repeat=a.repeat)
            t_off, m_off = measure([*aef, "--content-capture", "off"], setup=fresh, repeat=a.repeat)
            code = f"from inspect_ai.log import read_eval_log; read_eval_log({str(log)!r})"
            t_ins, m_ins = measure([sys.executable, "-c", code], repeat=a.repeat)
            rows.append(f"| {log.name} | {log.stat().st_size / 2**20:.1f} MiB | {t_on:.2f} s, {m_on:.0f} MB | "
                        f"{t_off:.2f} s, {m_off:.0f} MB | {t_ins:.2f} s, {m_ins:.0f} MB | **{t_ins / t_on:.2f}** |")
            print(rows[-1], flush=True)
    print("\n| log | size | aefgate import (content on) | aefgate import (content off) | read_eval_log | "
          "Inspect's read time / aefgate's import time |\n|---|---|---|---|---|---|")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
