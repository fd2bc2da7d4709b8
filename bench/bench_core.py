"""Benchmark the AEF core: `aefgate verify` and `aefgate seal` against `sha256sum` over the same files.

    python bench/bench_core.py [--work DIR] [--sizes 10000,1000000] [--blob-mib 1024] [--repeat 3]

For each generated run (bench/make_runs.py) it measures, as separate processes (wall seconds, peak RSS from
wait4), the best of ``--repeat`` runs of:

- ``sha256sum`` over every file of the run (the baseline: the bytes any verifier must hash);
- ``aefgate aef seal RUN``: the manifest and run hash (hashing every file, nothing else);
- ``aefgate verify RUN --json``: the whole verification (hash, parse, schemas, rules across files);
- ``aefgate seal RUN``: verifying and sealing (on a fresh unsealed copy each time).

and prints a Markdown table; hashing throughput is reported as a ratio to sha256sum's.
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


def files_of(run: Path) -> list[str]:
    return sorted(str(p) for p in run.rglob("*") if p.is_file())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", type=Path, default=Path("/tmp/aefgate-bench"))
    ap.add_argument("--sizes", default="10000,1000000")
    ap.add_argument("--blob-mib", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args(argv)
    a.work.mkdir(parents=True, exist_ok=True)
    aefgate = [sys.executable, "-m", "aefgate"]
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
