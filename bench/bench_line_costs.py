"""CPU per result line of the pieces every AEP export of a run needs, in one process: the budget argument of issue 5.

    python bench/bench_line_costs.py RUN [--repeat 3]

RUN is a sealed run (``python bench/make_runs.py DIR --lines 100000`` then ``aefgate seal DIR``). Its results.ndjson
is read into memory and each piece is timed on its own over every line (CPU seconds of this process,
``time.process_time``, best of ``--repeat``), streamed line by line as the export streams them (a list of all the
decoded lines would make the cyclic garbage collector's passes part of the figures):

- a loop over the lines doing nothing (the floor of the loop itself);
- ``msgspec`` decoding a line to Python objects, and re-encoding the decoded line (the verifier's certificate that
  no member is repeated, [ENC-2]);
- ``jsonio.loads``: the strict reader the verifier uses (decoding, the certificate, the limits of [ENC-17]);
- the compiled schema validator of a result line (reader side);
- the line's ``resultId`` ([RES-4], SHA-256);
- the export's mapping and encoding of the events (``aep_exporter.result_events`` and ``aep_exporter._encode``, default
  options), on lines decoded beforehand, batch by batch;
- issue 20: the same mapping and encoding by the struct path (``aep_exporter._encode_fast``: the common events as
  msgspec structs with the constant members pre-encoded, no per-event dicts; the bytes of the row above), on the
  lines decoded beforehand, ``_BATCH`` lines a call;
- issue 20: the typed reader check of a result line (``resultline.reader_valid``, which replaces the schema validator
  in the verifier) and the batch reader (``jsonio.loads_lines``, 512 lines a call, in place of ``jsonio.loads``).

The sum of the per-line pieces, against the budget of a target rate on N cores (``N / rate`` CPU seconds per
event; 2 cores and 150,000 events/s: 13.3 us), says whether any arrangement of these pieces over the cores can reach
the rate, before the rules across lines, the seal's hash and the processes' exchanges are counted.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import msgspec

from aefgate.converters.aep import exporter as aep_exporter
from aefgate.aef import jsonio
from aefgate.aef.resultid import result_id
from aefgate.aef.schema import validator


def best(fn, repeat: int) -> float:
    out = None
    for _ in range(repeat):
        t = time.process_time()
        fn()
        d = time.process_time() - t
        out = d if out is None else min(out, d)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("run", type=Path)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--rate", type=float, default=150_000.0, help="target events per second")
    ap.add_argument("--cores", type=int, default=2)
    a = ap.parse_args(argv)
    data = (a.run / "results.ndjson").read_bytes()
    raws = data.split(b"\n")
    raws.pop()
    n = len(raws)
    dec = msgspec.json.Decoder()
    enc = msgspec.json.Encoder()
    run = jsonio.read_json(a.run / "run.json")
    run_id = run["runId"]
    check = validator("result", "reader")

    def nothing():
        for _ in raws:
            pass

    def decode():
        for r in raws:
            dec.decode(r)

    def reencode():
        for r in raws:
            enc.encode(dec.decode(r))

    def strict():
        for r in raws:
            jsonio.loads(r)

    def schema():
        for r in raws:
            check(dec.decode(r))

    def rid():
        for r in raws:
            ln = dec.decode(r)
            result_id(run_id, ln["caseId"], ln["path"], ln.get("trial"))

    opts = aep_exporter.check_options(a.run)
    v = aep_exporter._verify_intact(opts.root)
    ctx, _decisions, targets, redact = aep_exporter.export_context(opts, v.run_hash)
    events = [0]

    def export():
        ctx.seq = 0
        batch = []
        for ev in aep_exporter.result_events(ctx, (dec.decode(r) for r in raws), targets, {}, redact):
            batch.append(ev)
            if len(batch) >= aep_exporter._BATCH:
                aep_exporter._encode(batch)
                batch = []
        if batch:
            aep_exporter._encode(batch)
        events[0] = ctx.seq

    encode_fast = getattr(aep_exporter, "_encode_fast", None)  # issue 20 (absent from older trees: --baseline)

    def export_fast():
        ctx.seq = 0
        chunk = []
        for r in raws:
            chunk.append(dec.decode(r))
            if len(chunk) >= aep_exporter._BATCH:
                encode_fast(ctx, chunk, targets, {})
                chunk = []
        if chunk:
            encode_fast(ctx, chunk, targets, {})

    try:  # issue 20: the typed reader check and the batch reader (absent from older trees: --baseline runs)
        from aefgate.aef.resultline import reader_valid
    except ImportError:
        reader_valid = None

    def typed():
        for r in raws:
            reader_valid(dec.decode(r))

    def batches():
        for i in range(0, n, 512):
            chunk = raws[i:i + 512]
            jsonio.loads_lines(b"\n".join(chunk) + b"\n", len(chunk))

    us = lambda t: t / n * 1e6  # noqa: E731
    t_loop = best(nothing, a.repeat)
    t_dec = best(decode, a.repeat)
    rows = [
        ("loop over the lines", t_loop, None),
        ("msgspec decode", t_dec, None),
        ("re-encode (the [ENC-2] certificate), beyond the decode", best(reencode, a.repeat) - t_dec, "v"),
        ("jsonio.loads (strict reader), in all", best(strict, a.repeat), None),
        ("schema validator, beyond the decode", best(schema, a.repeat) - t_dec, "v"),
        ("resultId [RES-4], beyond the decode", best(rid, a.repeat) - t_dec, "v"),
        ("export mapping and encoding, beyond the decode", best(export, a.repeat) - t_dec, "e"),
    ]
    if encode_fast is not None and redact is None:
        rows.append(("export mapping and encoding, struct path (_encode_fast), beyond the decode",
                     best(export_fast, a.repeat) - t_dec, None))
    if reader_valid is not None:
        rows += [
            ("typed reader check (resultline.reader_valid), beyond the decode", best(typed, a.repeat) - t_dec, None),
            ("jsonio.loads_lines, 512 lines a call, in all", best(batches, a.repeat), None),
        ]
    budget = a.cores / a.rate * 1e6
    print(f"{a.run}: {n:,} lines, {events[0]:,} events, {len(data) / n:.0f} bytes a line")
    print("| piece | CPU us a line |")
    print("|---|---|")
    for label, t, _ in rows:
        print(f"| {label} | {us(t):.2f} |")
    floor = us(t_dec) + sum(us(t) for _, t, k in rows if k)
    print(f"\nsum (one decode, the certificate, the schema, resultId, the export): {floor:.2f} us a line = "
          f"{floor * n / max(events[0], 1):.2f} us an event; budget at {a.rate:,.0f} events/s on {a.cores} cores: "
          f"{budget:.2f} us an event")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
