"""Inspect AI commands: the hooks of ``aefgate import inspect`` and ``aefgate export inspect``.

The commands are made from the converters' declared options (:mod:`aefgate.cli.converter_cmds`); these hooks add
what the options do not say: a folder of logs and ``--jobs`` on import, ``--policy`` on export, and the output.

The mapping is ``../shared/spec/aef/interop/inspect.md``, implemented by :mod:`aefgate.converters.inspect`;
refusals follow the CLI's convention (``error [RULE] at WHERE: message`` on stderr; exit 2 for an input, 1 for a
run that does not verify).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from aefgate.cli import render
from aefgate.cli.converter_cmds import JSON_OPT, POLICY_HELP, command_hook


def _withheld(run: Path, policy: Optional[Path]) -> frozenset[str]:
    if policy is None:
        return frozenset()
    from aefgate.cli.aef import authorized_withheld, load_policy

    return authorized_withheld(run, load_policy(policy))


# -- aefgate import inspect ---------------------------------------------------------------------------------------


@command_hook(types={"key": Optional[Path]})
def import_inspect(
    log: Path = typer.Argument(..., metavar="LOG", help="The Inspect eval log: a .eval or a .json file; or a folder "
                               "of logs (DIR): every .eval and .json under it, one run each."),
    out: Path = typer.Argument(..., metavar="OUT", help="The run folder to write (absent or empty); for a folder of "
                               "logs, the folder the runs go into (OUT/<the log's path in DIR, without suffix>; "
                               "created when absent; the runs it already holds are kept)."),
    *,
    options: dict,
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
    from aefgate.aef.signatures import signing_key_of
    from aefgate.formats.inspect import open_log

    target_mode, content_capture = options["target_mode"], options["content_capture"]
    at, key, grader_types, lossless = options["at"], options["key"], options["grader_types"], options["lossless"]
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


def export_inspect(
    run: Path = typer.Argument(..., metavar="RUN", help="The run folder."),
    out: Path = typer.Argument(..., metavar="OUT", help="The Inspect log to write: OUT.eval or OUT.json."),
    *,
    options: dict,
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
    path = to_inspect(run, out, withheld_ok=_withheld(run, policy), **options)
    written = open_log(path)
    if as_json:
        render.emit_json({"run": str(run), "output": str(path), "format": written.format,
                          "status": written.header.get("status"), "samples": written.sample_count})
        return
    c = render.console()
    c.print(f"exported  {render.escape(str(run))} -> {render.escape(str(path))} ({written.format})")
    c.print(f"log       status {written.header.get('status')}, {written.sample_count} samples")
