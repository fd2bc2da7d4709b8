"""Microsoft ASSERT commands: ``aefgate import assert`` and ``aefgate export assert`` (interop/assert.md, implemented by
:mod:`aefgate.converters.assert_ai`; ASSERT's files by :mod:`aefgate.formats.assert_ai`; aefgate's choices and rule
ids: docs/mappings/assert.md). The commands are made from the converters' declared options
(:mod:`aefgate.cli.converter_cmds`); these hooks add the output, and the flags ``--suite`` and ``--run`` of ``export
assert`` for its options ``assert_suite`` and ``assert_run``."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from aefgate.cli import render
from aefgate.cli.converter_cmds import JSON_OPT, command_hook


@command_hook(types={"key": Optional[Path]})
def import_assert(
    src: Path = typer.Argument(..., metavar="RUN", help="The ASSERT run folder (RESULTS_DIR/SUITE/RUN), or with "
                               "--suite and --run a results folder."),
    out: Path = typer.Argument(..., metavar="OUT", help="The run folder to write (absent or empty)."),
    *,
    options: dict,
    as_json: bool = JSON_OPT,
) -> None:
    """Import a Microsoft ASSERT (assert-ai 0.3) run as an AEF run, sealed ingest (interop/assert.md, ASSERT -> AEF):
    each case a root line and its harm and over-refusal children, lane prompt or scenario; summary.json recomputes
    ASSERT's rates per lane and counts the cases they leave out (notMeasured).

    Examples: aefgate import assert results/billing-safety/run-1 runs/billing --wilson --max-harm-rate 0.05;
    aefgate import assert results runs/billing --suite billing-safety --run run-1 --content-capture on
    """
    from aefgate.converters.assert_ai.importer import from_assert
    from aefgate.aef import jsonio
    from aefgate.aef.signatures import signing_key_of

    signing_key = signing_key_of(options.pop("key"))  # before anything is written
    options["source"], options["wilson_ci"] = options.pop("from"), options.pop("wilson")
    done = from_assert(src, out, key=signing_key, **options)
    rates: dict[str, dict] = {}
    summary = done.path / "summary.json"
    if summary.is_file():
        for lane in jsonio.read_json(summary)["lanes"]:
            rates[lane["lane"]] = {e["metric"]: {k: e.get(k) for k in ("value", "n", "N", "notMeasured", "verdict")}
                                   for e in lane["metrics"]}
    outcome = "intact" if done.sealed else "unsealed"
    signed = (done.path / "attestation.dsse.json").exists()
    if as_json:
        render.emit_json({"input": str(src), "output": str(done.path), "runId": done.run_id, "status": done.status,
                          "cases": done.cases, "results": done.lines, "rates": rates, "outcome": outcome,
                          "runHash": done.run_hash, "signed": signed, "notes": done.notes})
        return
    c = render.console()
    c.print(f"imported  {render.escape(str(src))} -> {render.escape(str(done.path))}")
    c.print(f"run id    {render.escape(done.run_id)} ({done.status}, {done.cases} cases, {done.lines} result lines)")
    for lane, entries in rates.items():
        for metric, e in entries.items():
            value = "null" if e["value"] is None else f"{e['value']:.4g}"
            c.print(f"{lane:9} {metric}: {value} (n {e['n']} of N {e['N']}, not measured {e['notMeasured']}; "
                    f"{e['verdict']})")
    for note in done.notes:
        c.print(f"note      {render.escape(note)}")
    c.print(f"outcome   {outcome} ({'signed' if signed else 'unsigned'})" + (", sealed ingest" if done.sealed else
                                                                             ": a running run is not sealed"))
    if done.run_hash:
        c.print(f"run hash  {done.run_hash}")


@command_hook(flags={"assert_suite": "--suite", "assert_run": "--run"}, types={"taxonomy": Optional[Path]})
def export_assert(
    run: Path = typer.Argument(..., metavar="RUN", help="The run folder (it must verify, and keep conversations)."),
    out: Path = typer.Argument(..., metavar="OUT_DIR", help="The folder to write (absent or empty): ASSERT's "
                               "judge-only run, its configuration and its case map."),
    *,
    options: dict,
    as_json: bool = JSON_OPT,
) -> None:
    """Export a run's captured conversations as an ASSERT run that needs only ASSERT's judge stage (interop/assert.md,
    AEF -> ASSERT), with agenteval-cases.json mapping ASSERT's positional test_case_ids back to the case ids. A run
    that does not verify is refused (ASSERT-12, exit 1); one without captured conversations too (ASSERT-10).

    Example: aefgate export assert runs/billing kit --taxonomy taxonomy.json --judge-model azure/gpt-5.4, then
    assert-ai run --config kit/assert-judge-config.yaml
    """
    from aefgate.cli.inputs import require_dir
    from aefgate.converters.assert_ai.exporter import to_assert

    require_dir(run)
    options["suite"], options["run"] = options.pop("assert_suite"), options.pop("assert_run")
    written = to_assert(run, out, **options)
    if as_json:
        render.emit_json({"run": str(run), **written})
        return
    c = render.console()
    c.print(f"exported  {render.escape(str(run))} -> {render.escape(written['output'])}")
    c.print(f"cases     {written['cases']} conversations as results/{render.escape(written['assertSuite'])}/"
            f"{render.escape(written['assertRun'])}/inference_set.jsonl"
            + (f"; {written['notExported']} cases hold none and were not exported" if written["notExported"] else ""))
    c.print(f"case map  {render.escape(written['caseMap'])}")
    c.print(f"next      assert-ai run --config {render.escape(written['config'])}")
