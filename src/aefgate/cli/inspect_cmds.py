"""Inspect AI commands: ``aefgate import inspect``, ``aefgate export inspect``.

The two groups ``import`` and ``export`` are typer sub-apps shared by every format: another module
adds its command to them (``from aefgate.cli.inspect_cmds import import_app`` then ``@import_app.command("x")``),
and :func:`register` adds the groups to the ``aefgate`` app once.

The mapping is ``../shared/spec/aef/interop/inspect.md``, implemented by :mod:`aefgate.converters.inspect`;
refusals follow the CLI's convention (``error [RULE] at WHERE: message`` on stderr; exit 2 for an input, 1 for a
run that does not verify).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from aefgate.cli import render

JSON_OPT = typer.Option(False, "--json", help="Write one JSON value on stdout (people's output stays on stderr).")
POLICY_HELP = ("A trust policy file ([SIG-4]): blobs its authorized redactions withhold are left out ([OVL-10], "
               "R7I-9) instead of refusing the run.")

import_app = typer.Typer(name="import", help="Import another tool's output as an AEF run (sealed as ingest).",
                         no_args_is_help=True, add_completion=False)
export_app = typer.Typer(name="export", help="Export an AEF run in another tool's format.", no_args_is_help=True,
                         add_completion=False)


def register(app, aef_app) -> None:
    """Add the ``import`` and ``export`` groups to the ``aefgate`` app (once)."""
    present = {getattr(g, "name", None) for g in getattr(app, "registered_groups", [])}
    for sub in (import_app, export_app):
        name = sub.info.name
        if name not in present:
            app.add_typer(sub, name=name)


def _withheld(run: Path, policy: Optional[Path]) -> frozenset[str]:
    if policy is None:
        return frozenset()
    from aefgate.cli.aef import authorized_withheld, load_policy

    return authorized_withheld(run, load_policy(policy))


# -- aefgate import inspect ---------------------------------------------------------------------------------------


@import_app.command("inspect")
def import_inspect(
    log: Path = typer.Argument(..., metavar="LOG", help="The Inspect eval log: a .eval or a .json file; or a folder "
                               "of logs (DIR): every .eval and .json under it, one run each."),
    out: Path = typer.Argument(..., metavar="OUT", help="The run folder to write (absent or empty); for a folder of "
                               "logs, the folder the runs go into (OUT/<the log's path in DIR, without suffix>; "
                               "created when absent; the runs it already holds are kept)."),
    target_mode: str = typer.Option("live", "--target-mode", help="execution.targetMode: live, replayed, scripted "
                                    "or mocked. Inspect does not record it: the converter's claim, listed in "
                                    "imported.asserted."),
    content_capture: str = typer.Option("on", "--content-capture", help="on: keep the case content, explanations "
                                        "and answers (blobs, evidence); off: none of it (RUN-11)."),
    at: Optional[str] = typer.Option(None, "--at", help="The seal's sealedAt, RFC 3339 UTC (default: now)."),
    key: Optional[Path] = typer.Option(None, "--key", help="An unencrypted PKCS#8 PEM private key: also sign the "
                                       "seal (attestation.dsse.json)."),
    grader_types: bool = typer.Option(False, "--grader-types", help="Set annotator.kind LLM (and the judge's "
                                      "model) on the lines of Inspect's model-graded scorers (model_graded_qa, "
                                      "model_graded_fact): aefgate's extension, docs/mappings/aigp.md."),
    lossless: bool = typer.Option(True, "--lossless/--no-lossless", help="Also keep what the page's mapping does "
                                  "not place (the log's header, each sample's other members, the reductions) in "
                                  "ext/inspect_ai/ files of the run, so that export inspect gives the log back "
                                  "(aefgate's extension, on by default); --no-lossless writes exactly the page's "
                                  "run."),
    jobs: Optional[int] = typer.Option(None, "--jobs", help="For a folder of logs: worker processes (default: the "
                                       "number of cores)."),
    as_json: bool = JSON_OPT,
) -> None:
    """Import an Inspect AI eval log as an AEF run, sealed as ingest (interop/inspect.md, Inspect -> AEF).

    A folder of logs (DIR): every log under it, one run each, in worker processes, resumably (logs imported before
    and unchanged are skipped, changed ones imported again into a new folder); a summary lists each refused log
    with its rule; exit 0 only when every log imported (docs/mappings/inspect.md, "Log folders").

    Examples: aefgate import inspect logs/2026-10-06_refunds.eval runs/refunds --target-mode live;
    aefgate import inspect logs/ runs/ --jobs 4
    """
    from aefgate.cli.inputs import require_file
    from aefgate.converters.inspect.folder import describe_run
    from aefgate.converters.inspect.importer import import_log
    from aefgate.errors import Refusal
    from aefgate.formats.aef.signatures import signing_key_of
    from aefgate.formats.inspect import open_log

    if log.is_dir():
        _import_folder(log, out, jobs=jobs, target_mode=target_mode, content_capture=content_capture, at=at,
                       key=key, grader_types=grader_types, lossless=lossless, as_json=as_json)
        return
    if jobs is not None:
        raise Refusal("CLI-2", "--jobs is for a folder of logs", "--jobs")
    require_file(log)
    signing_key = signing_key_of(key)  # before anything is written
    opened = open_log(log)
    total = opened.sample_count
    run_dir = import_log(opened.header, opened.samples(), out, target_mode=target_mode,
                         content_capture=content_capture, at=at, key=signing_key, total=total,
                         grader_types=grader_types, lossless=lossless)
    # the import verified the run (before sealing it, or after writing a running run: IN-11); what is shown here is
    # read from what it wrote, not verified a second time
    r = describe_run(run_dir)
    if as_json:
        render.emit_json({"input": str(log), "output": r["output"], "runId": r["runId"], "status": r["runStatus"],
                          "samples": total, "results": r["results"], "outcome": r["outcome"],
                          "runHash": r["runHash"], "signed": r["signed"]})
        return
    c = render.console()
    c.print(f"imported  {render.escape(str(log))} -> {render.escape(str(run_dir))}")
    c.print(f"run id    {render.escape(r['runId'])} ({r['runStatus']}, {r['results']} result lines from {total} "
            "samples)")
    c.print(f"imported  from {render.escape(r['importedFrom'])}; asserted: "
            f"{render.escape(', '.join(r['asserted']))}")
    c.print(f"outcome   {r['outcome']} (" + ("signed: `aefgate verify --policy` says by whom" if r["signed"]
                                             else "unsigned") + ")")
    c.print(f"run hash  {r['runHash'] or '(none: a running run is not sealed)'}")
    if r["signed"]:
        c.print("signed    attestation.dsse.json")


def _import_folder(src: Path, out: Path, *, jobs, target_mode, content_capture, at, key, grader_types, lossless,
                   as_json: bool) -> None:
    """``import inspect DIR OUT``: the report (``--json``) or a summary on stderr; exit 1 when a run did not
    verify, else 2 when a log was refused, else 0."""
    from aefgate.converters.inspect.folder import import_folder
    from aefgate.errors import EXIT_INPUT, EXIT_INTEGRITY, EXIT_OK

    report = import_folder(src, out, jobs=jobs, target_mode=target_mode, content_capture=content_capture, at=at,
                           key=key, grader_types=grader_types, lossless=lossless)
    refused = [r for r in report["logs"] if r["status"] == "refused"]
    code = EXIT_OK
    if refused:
        code = EXIT_INTEGRITY if any(r["error"]["exitCode"] == EXIT_INTEGRITY for r in refused) else EXIT_INPUT
    if as_json:
        render.emit_json(report)
    else:
        c = render.console()
        n = report["counts"]
        c.print(f"Inspect logs: {render.escape(report['input'])} -> {render.escape(report['output'])}",
                soft_wrap=True)
        for r in report["logs"]:
            if r["status"] in ("imported", "re-imported"):
                c.print(f"  {r['status']:<11} {render.escape(r['log'])} -> {render.escape(r['folder'])} "
                        f"({r['outcome']}, {r['results']} result lines)", soft_wrap=True)
            elif r["status"] == "skipped":
                c.print(f"  skipped     {render.escape(r['log'])}: {render.escape(r['reason'])}", soft_wrap=True)
        for r in refused:  # last, each on one line: what to fix
            e = r["error"]
            c.print(f"  refused     {render.escape(r['log'])}: "
                    f"{render.escape(render.error_line(e['rule'], e['where'], e['message']))}", soft_wrap=True)
        unchanged = sum(1 for r in report["logs"] if r.get("reason") == "unchanged")
        c.print(f"{n['imported']} imported, {n['re-imported']} re-imported (changed), {n['skipped']} skipped "
                f"({unchanged} unchanged, {n['skipped'] - unchanged} not logs), {n['refused']} refused; "
                f"{report['jobs']} worker(s), {report['seconds']:.2f} s", soft_wrap=True)
    if code != EXIT_OK:
        raise typer.Exit(code)


# -- aefgate export inspect ---------------------------------------------------------------------------------------


@export_app.command("inspect")
def export_inspect(
    run: Path = typer.Argument(..., metavar="RUN", help="The run folder."),
    out: Path = typer.Argument(..., metavar="OUT", help="The Inspect log to write: OUT.eval or OUT.json."),
    ignore_overlays: bool = typer.Option(False, "--ignore-overlays", help="Convert a run with overlay events "
                                         "without them (IN-4): its sealed lines only."),
    output_from_evidence: bool = typer.Option(False, "--output-from-evidence", help="Rebuild each sample's output "
                                              "(and messages) from its captured output evidence, where the page "
                                              "refuses the run (IN-5): aefgate's extension, for runs imported from "
                                              "Inspect (docs/mappings/inspect.md)."),
    map_scorers: bool = typer.Option(False, "--map-scorers", help="Write a path summarized for several metrics as "
                                     "Inspect writes a map-valued scorer (one EvalScore per metric), where the page "
                                     "refuses the run (IN-3): aefgate's extension."),
    grader_types: bool = typer.Option(False, "--grader-types", help="Also write each score's AIGP grader type "
                                      "(Score.metadata.aigp.grader; UNCALIBRATED for a judge without calibration): "
                                      "docs/mappings/aigp.md."),
    task: Optional[str] = typer.Option(None, "--task", help="eval.task for a run without a suite: the Inspect task "
                                       "name (IN-1; aefgate's extension)."),
    model: Optional[str] = typer.Option(None, "--model", help="eval.model for a run whose subject is not a model "
                                        "(default: the subject's kind:name): aefgate's extension."),
    case_times: Optional[str] = typer.Option(None, "--case-times", help="span: a sample whose root lines carry "
                                             "different times gets their span (the earliest start, the latest end, "
                                             "the longest duration), where the page refuses the run (IN-5): "
                                             "aefgate's extension."),
    omit_unscored: bool = typer.Option(False, "--omit-unscored", help="With --map-scorers, leave out of results a "
                                       "summary entry whose metric no line at its path scores (a rate of the lines' "
                                       "states), where the export refuses the run (IN-3): aefgate's extension."),
    label_values: bool = typer.Option(False, "--label-values", help="Write a score whose label is not one of "
                                      "Inspect's letters (C, I, P, N) as its value, the label in "
                                      "Score.metadata.aef.labels, where the page writes the label, which its import "
                                      "refuses (IN-7): aefgate's extension."),
    policy: Optional[Path] = typer.Option(None, "--policy", help=POLICY_HELP),
    as_json: bool = JSON_OPT,
) -> None:
    """Export an AEF run as an Inspect AI eval log (interop/inspect.md, AEF -> Inspect). Only a run that verifies
    is exported (IN-11, exit 1). A run whose samples cite output evidence (every run imported from Inspect with
    content) is refused (IN-5) unless --output-from-evidence.

    Example: aefgate export inspect runs/refunds out/refunds.eval
    """
    from aefgate.cli.inputs import require_dir
    from aefgate.converters.inspect.exporter import to_inspect
    from aefgate.formats.inspect import open_log

    require_dir(run)
    path = to_inspect(run, out, ignore_overlays=ignore_overlays, withheld_ok=_withheld(run, policy),
                      output_from_evidence=output_from_evidence, map_scorers=map_scorers,
                      grader_types=grader_types, task=task, model=model, case_times=case_times,
                      omit_unscored=omit_unscored, label_values=label_values)
    written = open_log(path)
    if as_json:
        render.emit_json({"run": str(run), "output": str(path), "format": written.format,
                          "status": written.header.get("status"), "samples": written.sample_count})
        return
    c = render.console()
    c.print(f"exported  {render.escape(str(run))} -> {render.escape(str(path))} ({written.format})")
    c.print(f"log       status {written.header.get('status')}, {written.sample_count} samples")
