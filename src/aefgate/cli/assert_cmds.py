"""Microsoft ASSERT commands: ``aefgate import assert`` and ``aefgate export assert`` (interop/assert.md, implemented by
:mod:`aefgate.converters.assert_ai`; ASSERT's files by :mod:`aefgate.formats.assert_ai`; aefgate's choices and rule
ids: docs/mappings/assert.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from aefgate.cli import render
from aefgate.cli.inspect_cmds import JSON_OPT, export_app, import_app


def register(app, aef_app) -> None:
    """The commands hang on the shared ``import`` and ``export`` groups (added by :mod:`aefgate.cli.inspect_cmds`)."""


@import_app.command("assert")
def import_assert(
    src: Path = typer.Argument(..., metavar="RUN", help="The ASSERT run folder (RESULTS_DIR/SUITE/RUN), or with "
                               "--suite and --run a results folder."),
    out: Path = typer.Argument(..., metavar="OUT", help="The run folder to write (absent or empty)."),
    suite: Optional[str] = typer.Option(None, "--suite", help="With --run: the suite folder under RUN (a results "
                                        "root)."),
    run: Optional[str] = typer.Option(None, "--run", help="With --suite: the run folder under the suite."),
    run_id: Optional[str] = typer.Option(None, "--run-id", help="The runId (default: <suite>.<run>)."),
    from_tool: Optional[str] = typer.Option(None, "--from", help="imported.from (default: assert-ai 0.3)."),
    subject: Optional[str] = typer.Option(None, "--subject", help="subject.ref (default: the converter's reading "
                                          "of ASSERT's target: endpoint:<URL>, agent:<callable> or model:<name>)."),
    subject_kind: Optional[str] = typer.Option(None, "--subject-kind", help="subject.kind (with --subject; "
                                               "default: the ref's kind when it is one)."),
    target_mode: Optional[str] = typer.Option(None, "--target-mode", help="execution.targetMode: live, replayed, "
                                              "scripted or mocked (default: live; replayed for a judge-only run). "
                                              "The converter's claim, listed in imported.asserted."),
    content_capture: Optional[str] = typer.Option(None, "--content-capture", help="on: also keep the seeds, "
                                                  "transcripts, tool calls and the judge's reasoning as blobs (and "
                                                  "each case's ASSERT facts in ext); off: none of it, nor the "
                                                  "judge's justification (RUN-11). Not given: the page's worked "
                                                  "example (contentCapture on, no blob)."),
    wilson: bool = typer.Option(False, "--wilson", help="Add the 95% Wilson interval to each rate (ASSERT prints "
                                "none)."),
    max_harm_rate: Optional[float] = typer.Option(None, "--max-harm-rate", help="A gate limit on the harm rate: "
                                                  "the summary entry's rule (harm <= X) and verdict."),
    max_over_refusal_rate: Optional[float] = typer.Option(None, "--max-over-refusal-rate", help="A gate limit on "
                                                          "the over-refusal rate (over_refusal <= Y)."),
    accept_changed_suite: bool = typer.Option(False, "--accept-changed-suite", help="Import a run whose "
                                              "taxonomy.json or test_set.jsonl changed (or is missing) since it ran, "
                                              "as ASSERT reads it: against the present files, the recorded and "
                                              "present hashes noted in the run (ASSERT-5 without it)."),
    at: Optional[str] = typer.Option(None, "--at", help="The seal's sealedAt, RFC 3339 UTC (default: now)."),
    key: Optional[Path] = typer.Option(None, "--key", help="Sign the seal with this PKCS#8 PEM private key."),
    as_json: bool = JSON_OPT,
) -> None:
    """Import a Microsoft ASSERT (assert-ai 0.3) run as an AEF run, sealed ingest (interop/assert.md, ASSERT -> AEF):
    each case a root line and its harm and over-refusal children, lane prompt or scenario; summary.json recomputes
    ASSERT's rates per lane and counts the cases they leave out (notMeasured).

    Examples: aefgate import assert results/billing-safety/run-1 runs/billing --wilson --max-harm-rate 0.05;
    aefgate import assert results runs/billing --suite billing-safety --run run-1 --content-capture on
    """
    from aefgate.converters.assert_ai.importer import from_assert
    from aefgate.formats.aef import jsonio
    from aefgate.formats.aef.signatures import signing_key_of

    signing_key = signing_key_of(key)  # before anything is written
    done = from_assert(src, out, suite=suite, run=run, run_id=run_id, source=from_tool, subject=subject,
                       subject_kind=subject_kind, target_mode=target_mode, content_capture=content_capture, at=at,
                       key=signing_key, wilson_ci=wilson, max_harm_rate=max_harm_rate,
                       max_over_refusal_rate=max_over_refusal_rate, accept_changed_suite=accept_changed_suite)
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


@export_app.command("assert")
def export_assert(
    run: Path = typer.Argument(..., metavar="RUN", help="The run folder (it must verify, and keep conversations)."),
    out: Path = typer.Argument(..., metavar="OUT_DIR", help="The folder to write (absent or empty): ASSERT's "
                               "judge-only run, its configuration and its case map."),
    taxonomy: Optional[Path] = typer.Option(None, "--taxonomy", help="The taxonomy.json ASSERT's judge grades "
                                            "against (default: the one a run imported from ASSERT keeps under "
                                            "ext/assert-ai/)."),
    judge_model: Optional[str] = typer.Option(None, "--judge-model", help="ASSERT's judge model, as LiteLLM names "
                                              "it (default: the run's first judge)."),
    suite: Optional[str] = typer.Option(None, "--suite", help="The ASSERT suite name (default: the run's suite, "
                                        "else agenteval)."),
    assert_run: Optional[str] = typer.Option(None, "--run", help="The ASSERT run name (default: judge-1)."),
    target: Optional[str] = typer.Option(None, "--target", help="The target named on each row (default: the "
                                         "run's deployment.endpoint, else its subject)."),
    assert_root: Optional[str] = typer.Option(None, "--assert-root", help="OUT_DIR as ASSERT will see it (an "
                                              "absolute path, e.g. in a container); default OUT_DIR."),
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
    written = to_assert(run, out, taxonomy=taxonomy, judge_model=judge_model, suite=suite, run=assert_run,
                        target=target, assert_root=assert_root)
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
