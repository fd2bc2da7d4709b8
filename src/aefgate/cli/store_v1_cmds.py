"""``aefgate import store-v1``: AgentEval store v1 (``.agenteval/``) runs migrated into AEF (spec 07 §7.5), one run
or, with ``--all``, every run of a workspace in worker processes, resumably. Implemented by
:mod:`aefgate.converters.store_v1`; the workspace is read by :mod:`aefgate.formats.store_v1`; the mapping and the
rules SV1-1 .. SV1-10 are in ``docs/mappings/store-v1.md``. The command is made from the converter's declared
options (:mod:`aefgate.cli.converter_cmds`); this hook adds ``--all`` and ``--jobs`` and the output."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from aefgate.cli import render
from aefgate.cli.converter_cmds import JSON_OPT, command_hook


def _warn(lines: list[str]) -> None:
    c = render.console()
    for w in lines:
        c.print(f"[yellow]warning[/]: {render.escape(w)}", soft_wrap=True)


@command_hook(types={"key": Optional[Path]})
def import_store_v1(
    source: Path = typer.Argument(..., metavar="SOURCE", help="A store v1 run folder (<workspace>/subjects/<agents|"
                                  "workflows>/<subject>/runs/<run id>); with --run or --all, the workspace "
                                  "(.agenteval, or the folder holding it)."),
    out: Path = typer.Argument(..., metavar="OUT", help="The run folder to write (absent or empty); with --all, the "
                               "folder the runs go into (OUT/<run id>; created when absent; the migrations it "
                               "already holds are kept)."),
    *,
    options: dict,
    all_runs: bool = typer.Option(False, "--all", help="Migrate every run of every subject of the workspace SOURCE "
                                  "into OUT: in worker processes, skipping the runs OUT already holds unchanged, "
                                  "again into OUT/<run id>--<key> those whose source changed; exit 1 when a run "
                                  "is refused (the others go on). Every folder and file of the workspace that is "
                                  "no run (benchmarks/, red-team/, ...) is listed with the reason: not an error."),
    jobs: Optional[int] = typer.Option(None, "--jobs", help="With --all: worker processes (default: the number of "
                                       "cores)."),
    as_json: bool = JSON_OPT,
) -> None:
    """Migrate AgentEval store v1 runs (.agenteval/) into imported AEF runs, sealed ingest (spec 07 §7.5).

    Examples: aefgate import store-v1 .agenteval out/run --run 2026-05-20_09-14-07_3fa9c2e1;
    aefgate import store-v1 ".agenteval/subjects/agents/Support Agent/runs/2026-05-20_09-14-07_3fa9c2e1" out/run;
    aefgate import store-v1 --all .agenteval out/runs --jobs 4
    """
    from aefgate.errors import Refusal

    run, subject = options.pop("run"), options["subject"]
    target_mode, content_capture, at, key = (options[k] for k in ("target_mode", "content_capture", "at", "key"))
    if all_runs:
        if run is not None:
            raise Refusal("CLI-2", "--all migrates every run: it takes no --run", "--run")
        if subject is not None:
            raise Refusal("CLI-2", "--subject names one subject: it is for one run, not --all", "--subject")
        _all(source, out, jobs=jobs, target_mode=target_mode, content_capture=content_capture, at=at, key=key,
             as_json=as_json)
        return
    if jobs is not None:
        raise Refusal("CLI-2", "--jobs is for --all", "--jobs")
    from aefgate.converters.store_v1.importer import from_store_v1

    try:
        m = from_store_v1(source, out, run=run, target_mode=target_mode, content_capture=content_capture,
                          subject=subject, at=at, key=key)
    except Refusal as r:  # this command alone can also migrate every run of a workspace
        if r.rule == "SV1-1" and r.message.startswith("this is a workspace"):
            raise Refusal(r.rule, f"{r.message}, or migrate every run with --all", r.where) from None
        raise
    _warn(m.warnings)
    if as_json:
        render.emit_json({"input": str(source), **m.to_json(), "warnings": m.warnings})
        return
    c = render.console()
    c.print(f"migrated  {render.escape(str(source))} -> {render.escape(str(m.path))}")
    c.print(f"run id    {render.escape(m.run_id)} ({m.status}, {m.results} result lines), subject "
            f"{render.escape(m.subject)}")
    c.print(f"outcome   intact ({'signed' if m.signed else 'unsigned'}), sealed ingest")
    c.print(f"run hash  {m.run_hash}")


def _not_migrated(items: list[dict]) -> None:
    """What ``--all`` did not migrate, one line each on stderr (also with --json): ``not migrated: <path>[/] (<n>
    files): <reason>``."""
    c = render.console()
    for x in items:
        path = x["path"] + ("/" if x["type"] == "folder" else "")
        n = f" ({x['files']} file{'' if x['files'] == 1 else 's'})" if x["type"] == "folder" else ""
        c.print(f"[cyan]not migrated[/]: {render.escape(path)}{n}: {render.escape(x['reason'])}", soft_wrap=True)


def _all(source: Path, out: Path, *, jobs, target_mode, content_capture, at, key, as_json: bool) -> None:
    from rich.table import Table

    from aefgate.converters.store_v1.migrate import migrate_all
    from aefgate.errors import EXIT_INTEGRITY

    report = migrate_all(source, out, jobs=jobs, target_mode=target_mode, content_capture=content_capture, at=at,
                         key=key)
    _warn(report["warnings"])
    _not_migrated(report["notMigrated"])
    refused = report["counts"]["refused"]
    if as_json:
        render.emit_json(report)
    else:
        c = render.console()
        table = Table(title=f"store v1 -> AEF: {render.escape(report['workspace'])} -> "
                            f"{render.escape(report['output'])}")
        for col in ("run", "subject", "status", "results", "outcome or refusal"):
            table.add_column(col, overflow="fold")
        for r in report["runs"]:
            if r["status"] == "refused":
                e = r["error"]
                what = (f"[red]\\[{render.escape(e['rule'])}][/] {render.escape(e['where'])}: "
                        f"{render.escape(e['message'])}")
            elif r["status"] == "skipped":
                what = f"unchanged: {render.escape(r['output'])}"
            else:
                what = f"intact, {r['runStatus']}"
            subject = r.get("subject") or r.get("subjectFolder") or "-"
            table.add_row(render.escape(r["runId"] or "-"), render.escape(subject), r["status"],
                          str(r.get("results", "-")) if r["status"] in ("migrated", "re-migrated") else "-", what)
        c.print(table)
        n = report["counts"]
        rate = len(report["runs"]) / report["seconds"] if report["seconds"] else 0.0
        c.print(f"{n['migrated']} migrated, {n['re-migrated']} re-migrated (source changed), {n['skipped']} skipped "
                f"(unchanged), {refused} refused, {len(report['notMigrated'])} not migrated (no run: listed above); "
                f"{report['jobs']} worker(s), {report['seconds']:.2f} s "
                f"({rate:.1f} runs/s)")
    if refused:
        raise typer.Exit(EXIT_INTEGRITY)
