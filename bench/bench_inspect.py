"""Benchmark the Inspect import against Inspect's own reader, side by side.

    python bench/bench_inspect.py LOG.eval [LOG2.eval ...] [--repeat 1]

For each log (generate them with bench/make_inspect_log.py), as separate processes (wall seconds, peak RSS of the
process from wait4): `aefgate import inspect LOG OUT --target-mode scripted` (read, convert, write, seal: the whole
import), the same with `--content-capture off`, and `inspect_ai.log.read_eval_log(LOG)` merely reading the file.

With ``--baseline-src DIR`` (a copy of another version's ``src``) the whole import is also measured with that version,
on the same log just before this tree's (``PYTHONPATH=DIR``; ``--this-src DIR2`` for another copy as "this tree"), in
``--repeat`` interleaved rounds with medians, and the table gets its columns and the ratio of each import's time to
``read_eval_log``'s (the target of issues 20 and 31: at most 0.7). Both Inspect log shapes (issue 31):

    python bench/make_inspect_log.py /tmp/aefgate-bench/small-10000.eval --small --samples 10000 --epochs 1
    python bench/make_inspect_log.py /tmp/aefgate-bench/small-10000.json --small --samples 10000 --epochs 1 --format json
    python bench/bench_inspect.py /tmp/aefgate-bench/small-10000.eval /tmp/aefgate-bench/small-10000.json \
        /tmp/aefgate-bench/inspect-1000x2.eval --baseline-src BASE --repeat 3

    python bench/bench_inspect.py LOG.eval [LOG2.eval ...] --phase build [--tracemalloc] [--baseline-src DIR]

measures the part before the seal alone, in a separate process per log: the import runs through the CLI's code
path (``open_log`` then ``import_log``) and stops when the sealer is called (``RunBuilder.finish`` has written
``results.ndjson``, ``evidence.ndjson``, the blobs, ``summary.json``, ``metrics.json``, ``run.json``); it reports
the wall time to there and the process's peak RSS (``ru_maxrss``; the blob writer child is a separate ``python -S``
of constant size), and with ``--tracemalloc`` the peak of traced Python allocations (slower: for the size, not the
time). With ``--baseline-src DIR`` (a copy of another version's ``src``, e.g. ``git archive HEAD src | tar -x -C
DIR``) the same is measured with that version first, one after the other for each log, so both see the same machine.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_core import measure  # noqa: E402


_PROBE = r"""
import os, resource, sys, time, tracemalloc
t0 = time.perf_counter()
if sys.argv[3] == "1":
    tracemalloc.start()
from aefgate.converters.inspect.importer import import_log
from aefgate.aef import sealer
from aefgate.formats.inspect import open_log

def stop(*a, **k):
    dt = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1] / 2**20 if tracemalloc.is_tracing() else 0.0
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu, kids_cpu = me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime
    print(f"{dt:.2f} {me.ru_maxrss / 1024:.1f} {peak:.1f} {cpu:.2f} {kids_cpu:.2f}", flush=True)
    os._exit(0)

sealer.seal_run = stop
log = open_log(sys.argv[1])
import_log(log.header, log.samples(), sys.argv[2], target_mode="scripted", total=log.sample_count)
raise SystemExit("the import ended without sealing")
"""


def _aside(out: Path):
    """A setup that moves the previous output out of the way (into ``old-outputs/`` beside it) instead of deleting
    it: the temporary folder is removed at the end. Deleting 30,000 files just before an import makes its own 30,000
    files much slower to create on ext4 without a journal (as here: the inode allocator skips every inode freed in
    the last 60-300 s, ``recently_deleted`` in the kernel's profile), which no user importing into a new folder pays;
    the folder holds every output of the run until then (~150 MB per content-on import of 10,000 samples). The same
    holds between two benchmarks: one started within 5 minutes of another's end pays for the other's deleted
    outputs (measure every version in one command: ``--baseline-src``)."""

    def setup() -> None:
        if out.exists() or out.is_symlink():
            old = out.parent / "old-outputs"  # (no output name starts with it)
            old.mkdir(exist_ok=True)
            out.rename(old / str(len(list(old.iterdir())) + 1))

    return setup


def build_phase(logs: list[Path], traced: bool, repeat: int, baseline: Path | None = None) -> int:
    import os
    import subprocess

    print("| log | version | to the seal: wall | CPU (user+sys) | the blob writer's CPU | peak RSS | peak traced "
          "(tracemalloc) |\n|---|---|---|---|---|---|---|")
    versions = ([("baseline", str(baseline.resolve()))] if baseline is not None else []) + [("this tree", None)]
    with tempfile.TemporaryDirectory() as d:
        for log in logs:
            for label, src in versions:
                env = dict(os.environ)
                if src is not None:
                    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
                best = None
                for _ in range(repeat):
                    out = Path(d) / "run"
                    _aside(out)()
                    for p in Path(d).glob(".run*"):
                        _aside(p)()
                    r = subprocess.run([sys.executable, "-c", _PROBE, str(log), str(out), "1" if traced else "0"],
                                       capture_output=True, text=True, env=env)
                    if r.returncode != 0:
                        raise SystemExit(r.stderr[-2000:] or r.stdout)
                    t, rss, peak, cpu, kids = (float(x) for x in r.stdout.split())
                    best = (t, rss, peak, cpu, kids) if best is None or t < best[0] else best
                t, rss, peak, cpu, kids = best
                traced_text = f"{peak:.1f} MB" if traced else "-"
                print(f"| {log.name} | {label} | {t:.2f} s | {cpu:.2f} s | {kids:.2f} s | {rss:.1f} MB | "
                      f"{traced_text} |", flush=True)
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("logs", nargs="+", type=Path)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--phase", choices=["all", "build"], default="all",
                    help="all: the whole import against read_eval_log; build: the import until the seal, alone")
    ap.add_argument("--tracemalloc", action="store_true", help="with --phase build: also trace Python allocations")
    ap.add_argument("--baseline-src", type=Path, help="also measure this copy of src first (either phase)")
    ap.add_argument("--this-src", type=Path, help="with --baseline-src, phase all: measure this copy of src as 'this "
                                                  "tree' (other people's edits to the checkout left out)")
    a = ap.parse_args(argv)
    if a.phase == "build":
        return build_phase(a.logs, a.tracemalloc, a.repeat, a.baseline_src)
    if a.baseline_src is not None:
        return whole_with_baseline(a.logs, a.repeat, a.baseline_src, a.this_src)
    rows = []
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "run"

        fresh = _aside(out)

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


def whole_with_baseline(logs: list[Path], repeat: int, baseline: Path, this: Path | None = None) -> int:
    """The whole import with ``baseline`` (a copy of src) and with this tree (or ``this``, another copy), side by
    side with read_eval_log, in interleaved rounds: each round measures, for each log, read_eval_log, then each
    version's import with content capture on, then off (one run each); the table gives each cell's median over
    ``repeat`` rounds, and the load average (1 minute) before the first and after the last round."""
    import os
    import statistics

    print("| log | size | read_eval_log | baseline: import (content on) | this tree: import (content on) | "
          "baseline: content off | this tree: content off | import / read_eval_log (content on): baseline, "
          "this tree |\n|---|---|---|---|---|---|---|---|", flush=True)
    src = str(baseline.resolve())
    mine = str(this.resolve()) if this is not None else None
    load0 = os.getloadavg()[0]
    cells: dict[tuple[str, str], list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "run"

        fresh = _aside(out)

        def timed(cmd: list[str], path: str | None) -> tuple[float, float]:
            old = os.environ.get("PYTHONPATH")
            try:
                if path is not None:
                    os.environ["PYTHONPATH"] = path + (os.pathsep + old if old else "")
                return measure(cmd, setup=fresh, repeat=1)
            finally:
                if old is None:
                    os.environ.pop("PYTHONPATH", None)
                else:
                    os.environ["PYTHONPATH"] = old

        for _ in range(repeat):
            for log in logs:
                code = f"from inspect_ai.log import read_eval_log; read_eval_log({str(log)!r})"
                cells.setdefault((log.name, "read"), []).append(measure([sys.executable, "-c", code], repeat=1))
                aef = [sys.executable, "-m", "aefgate", "import", "inspect", str(log), str(out), "--target-mode",
                       "scripted"]
                for capture, extra in (("on", []), ("off", ["--content-capture", "off"])):
                    for label, path in (("baseline", src), ("this", mine)):
                        cells.setdefault((log.name, f"{label} {capture}"), []).append(timed([*aef, *extra], path))

        def med(key: tuple[str, str]) -> tuple[float, float]:
            xs = cells[key]
            return statistics.median(t for t, _ in xs), max(m for _, m in xs)

        for log in logs:
            t_ins, m_ins = med((log.name, "read"))
            cols = [med((log.name, k)) for k in ("baseline on", "this on", "baseline off", "this off")]
            text = " | ".join(f"{t:.2f} s, {m:.0f} MB" for t, m in cols)
            print(f"| {log.name} | {log.stat().st_size / 2**20:.1f} MiB | {t_ins:.2f} s, {m_ins:.0f} MB | {text} | "
                  f"{cols[0][0] / t_ins:.2f}, **{cols[1][0] / t_ins:.2f}** |", flush=True)
    print(f"\n{repeat} interleaved round(s), medians; load average (1 min) {load0:.2f} before, "
          f"{os.getloadavg()[0]:.2f} after", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
