"""Issue 27's two OpenTelemetry speed ratios, measured side by side in one run (each against its baseline):

    python bench/bench_otel_ratios.py [--events 100000] [--rx-events 20000] [--repeat 3]

1. ``bench_otel.py``: ``aefgate import otel`` of ``--events`` SDK-shaped evaluation events (OTLP/JSON, 512 records
   a request, observed times only, empty bodies), read, checked, written, verified and sealed, against a process
   that ``json.loads`` every line of the same file (target: 100,000 events/s, memory flat);
2. ``bench_otlp_receiver.py``: the OpenTelemetry SDK's batch exporter into ``aefgate serve otlp`` against a
   discarding aiohttp receiver (target: a ratio of 0.8 or more).

Prints each benchmark's own lines, the machine's load average before each, and the two ratios last.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def run(args: list[str]) -> str:
    print(f"# load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}: "
          f"{' '.join(args)}", flush=True)
    p = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=3600)
    if p.returncode != 0:
        raise SystemExit(p.stderr)
    print(p.stdout, end="", flush=True)
    return p.stdout


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--rx-events", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    imp = run([str(HERE / "bench_otel.py"), "--events", str(a.events), "--repeat", str(a.repeat)])
    rx = run([str(HERE / "bench_otlp_receiver.py"), "--events", str(a.rx_events), "--repeat", str(a.repeat)])
    ratio_imp = next(x for x in imp.splitlines() if x.startswith("ratio"))
    ratio_rx = next(x for x in rx.splitlines() if x.startswith("ratio"))
    print(f"import otel  : {ratio_imp}")
    print(f"serve otlp   : {ratio_rx}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
