"""Benchmark the AEF core: `aefgate verify` and `aefgate seal` against `sha256sum` over the same files.

    python bench/bench_core.py [--work DIR] [--sizes 10000,1000000] [--blob-mib 1024] [--repeat 3]

For each generated run (bench/make_runs.py) it measures, as separate processes (wall seconds, peak RSS from
wait4), the best of ``--repeat`` runs of:

- ``sha256sum`` over every file of the run (the baseline: the bytes any verifier must hash);
- ``aefgate aef seal RUN``: the manifest and run hash (hashing every file, nothing else);
- ``aefgate verify RUN --json``: the whole verification (hash, parse, schemas, rules across files);
- ``aefgate seal RUN``: verifying and sealing (on a fresh unsealed copy each time).

and prints a Markdown table; hashing throughput is reported as a ratio to sha256sum's.

With ``--memory`` it measures instead, for each run (generated sizes, or existing run folders given with
``--runs``), ``aefgate verify`` and ``aefgate seal`` twice: with the per-line state in memory (the baseline:
``AEFGATE_SPILL_RESULTS`` and ``AEFGATE_SPILL_VALUES`` set beyond any run) and bounded (the defaults), reporting
wall time and the peak of the summed RSS of the whole process tree (worker processes included, polled every
0.05 s from /proc, as bench/treerss.py), and the ratios bounded / in memory:

    python bench/bench_core.py --memory --sizes 100000,1000000 --runs /tmp/x1,/tmp/x10 --repeat 1

With ``--files RUN,RUN...`` it measures how memory grows with the number of files (issue 4): for each run folder
(sealed; the seal is measured on a fresh unsealed copy), ``aefgate verify`` and ``aefgate seal`` with the defaults
(worker processes when results.ndjson is large) and in one process (``AEFGATE_WORKERS=0``), the peak summed RSS
of the process tree, and each figure's ratio to the first run's:

    python bench/bench_core.py --files /tmp/x1,/tmp/x10 --repeat 1
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from make_runs import make_run  # noqa: E402

from aefgate.fsutil import count_lines  # noqa: E402


def measure(cmd: list[str], *, setup=None, repeat: int = 3) -> tuple[float, float]:
    """(best wall seconds, peak RSS in MB of that process) over ``repeat`` runs."""
    best = None
    rss = 0.0
    for _ in range(repeat):
        if setup is not None:
            setup()
        t = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, status, ru = os.wait4(p.pid, 0)
        dt = time.perf_counter() - t
        code = os.waitstatus_to_exitcode(status)
        if code != 0:
            raise SystemExit(f"{cmd} exited {code}")
        if best is None or dt < best:
            best = dt
        rss = max(rss, ru.ru_maxrss / 1024)
    return best, rss


def _tree(pid: int) -> list[int]:
    out = [pid]
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            kids = f.read().split()
    except OSError:
        return out
    for c in kids:
        out += _tree(int(c))
    return out


def _tree_rss_kib(pid: int) -> int:
    total = 0
    for q in _tree(pid):
        try:
            with open(f"/proc/{q}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
                        break
        except OSError:
            pass
    return total


IN_MEMORY = {"AEFGATE_SPILL_RESULTS": str(1 << 50), "AEFGATE_SPILL_VALUES": str(1 << 50)}


def measure_tree(cmd: list[str], *, setup=None, repeat: int = 1, env: dict | None = None) -> tuple[float, float]:
    """(best wall seconds, peak summed RSS in MB of the process tree) over ``repeat`` runs."""
    best = None
    peak = 0
    for _ in range(repeat):
        if setup is not None:
            setup()
        t = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             env={**os.environ, **(env or {})})
        while p.poll() is None:
            peak = max(peak, _tree_rss_kib(p.pid))
            time.sleep(0.05)
        dt = time.perf_counter() - t
        if p.returncode != 0:
            raise SystemExit(f"{cmd} exited {p.returncode}")
        best = dt if best is None else min(best, dt)
    return best, peak / 1024


def memory_table(a, aefgate: list[str]) -> int:
    runs = []
    for n in [int(x) for x in a.sizes.split(",") if x]:
        run = a.work / f"run-{n}"
        if not (run / "summary.json").exists():
            shutil.rmtree(run, ignore_errors=True)
            make_run(run, n, 0)
        runs.append((f"{n:,} result lines", run))
    for r in [x for x in (a.runs or "").split(",") if x]:
        runs.append((r, Path(r)))
    print("| run | lines | files | verify in memory | verify bounded | ratio (time, RSS) "
          "| seal in memory | seal bounded | ratio (time, RSS) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for label, run in runs:
        files = [p for p in run.rglob("*") if p.is_file()]
        lines = count_lines(run / "results.ndjson")
        cells = []
        for op in ("verify", "seal"):
            cmd, setup, copy = _command(op, run, a.work, aefgate)
            mt, mr = measure_tree(cmd, setup=setup, repeat=a.repeat, env=IN_MEMORY)
            bt, br = measure_tree(cmd, setup=setup, repeat=a.repeat)
            cells += [f"{mt:.2f} s, {mr:.0f} MB", f"{bt:.2f} s, {br:.0f} MB", f"{bt / mt:.2f}, {br / mr:.2f}"]
            shutil.rmtree(copy, ignore_errors=True)
        print(f"| {label} | {lines:,} | {len(files):,} | " + " | ".join(cells) + " |", flush=True)
    return 0


def _command(op: str, run: Path, work: Path, aefgate: list[str]):
    """``(command, setup before each repeat, the copy it seals)`` for ``verify`` of ``run`` or ``seal`` of an unsealed
    copy of it (made fresh by the setup)."""
    copy = work / "seal-copy"

    def fresh():
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(run, copy, ignore=shutil.ignore_patterns("seal.json", "attestation.dsse.json"))

    if op == "verify":
        return [*aefgate, "verify", str(run), "--json"], None, copy
    return [*aefgate, "seal", str(copy)], fresh, copy


def files_table(a, aefgate: list[str]) -> int:
    runs = [Path(r) for r in a.files.split(",") if r]
    cols = [("verify", {}), ("verify", {"AEFGATE_WORKERS": "0"}), ("seal", {}), ("seal", {"AEFGATE_WORKERS": "0"})]
    print("| run | lines | files | verify | verify, one process | seal | seal, one process |")
    print("|---|---|---|---|---|---|---|")
    first = None
    for run in runs:
        nfiles = sum(1 for p in run.rglob("*") if p.is_file())
        lines = count_lines(run / "results.ndjson")
        figures = []
        for op, env in cols:
            cmd, setup, copy = _command(op, run, a.work, aefgate)
            figures.append(measure_tree(cmd, setup=setup, repeat=a.repeat, env=env))
            shutil.rmtree(copy, ignore_errors=True)
        if first is None:
            first = figures
        cells = [f"{t:.2f} s, {r:.1f} MB (x{r / fr:.2f})" for (t, r), (_, fr) in zip(figures, first)]
        print(f"| {run} | {lines:,} | {nfiles:,} | " + " | ".join(cells) + " |", flush=True)
    return 0


def files_of(run: Path) -> list[str]:
    return sorted(str(p) for p in run.rglob("*") if p.is_file())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", type=Path, default=Path("/tmp/aefgate-bench"))
    ap.add_argument("--sizes", default="10000,1000000")
    ap.add_argument("--blob-mib", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--memory", action="store_true", help="bounded memory against in memory (tree RSS)")
    ap.add_argument("--runs", default="", help="with --memory: existing run folders too, comma-separated")
    ap.add_argument("--files", default="", help="memory against the number of files: run folders, comma-separated")
    a = ap.parse_args(argv)
    a.work.mkdir(parents=True, exist_ok=True)
    aefgate = [sys.executable, "-m", "aefgate"]
    if a.memory:
        return memory_table(a, aefgate)
    if a.files:
        return files_table(a, aefgate)
    runs = []
    for n in [int(x) for x in a.sizes.split(",") if x]:
        runs.append((f"{n:,} result lines", a.work / f"run-{n}", n, 0))
    if a.blob_mib:
        runs.append((f"1,000 lines + {a.blob_mib} MiB blob", a.work / f"run-blob-{a.blob_mib}", 1000, a.blob_mib))
    rows = []
    for label, run, n, blob in runs:
        if not (run / "summary.json").exists():
            shutil.rmtree(run, ignore_errors=True)
            make_run(run, n, blob)
        size = sum(p.stat().st_size for p in run.rglob("*") if p.is_file())
        base_t, base_rss = measure(["sha256sum", *files_of(run)], repeat=a.repeat)
        man_t, man_rss = measure([*aefgate, "aef", "seal", str(run)], repeat=a.repeat)
        ver_t, ver_rss = measure([*aefgate, "verify", str(run), "--json"], repeat=a.repeat)
        copy = a.work / "seal-copy"

        def fresh():
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(run, copy)

        seal_t, seal_rss = measure([*aefgate, "seal", str(copy)], setup=fresh, repeat=a.repeat)
        shutil.rmtree(copy, ignore_errors=True)
        mib = size / 2**20
        rows.append(
            f"| {label} | {mib:,.0f} MiB | {base_t:.2f} s ({mib / base_t:,.0f} MiB/s) | "
            f"{man_t:.2f} s ({mib / man_t:,.0f} MiB/s, **{base_t / man_t:.2f}**) | {man_rss:.0f} MB | "
            f"{ver_t:.2f} s | {ver_rss:.0f} MB | {seal_t:.2f} s | {seal_rss:.0f} MB |"
        )
        print(rows[-1], flush=True)
    print()
    print("| run | size | sha256sum | aefgate aef seal (hash only; ratio to sha256sum) | RSS | aefgate verify | RSS "
          "| aefgate seal (verify + seal) | RSS |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(r)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
