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
    log: Path = typer.Argument(..., metavar="LOG", help="The Inspect eval log: a .eval or a .json file."),
    out: Path = typer.Argument(..., metavar="OUT", help="The run folder to write (absent or empty)."),
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
    as_json: bool = JSON_OPT,
) -> None:
    """Import an Inspect AI eval log as an AEF run, sealed as ingest (interop/inspect.md, Inspect -> AEF).

    Example: aefgate import inspect logs/2026-10-06_refunds.eval runs/refunds --target-mode live
    """
    from aefgate.converters.inspect.importer import import_log
    from aefgate.formats.aef.signatures import signing_key_of
    from aefgate.formats.aef import jsonio
    from aefgate.formats.aef.sealer import seal_run_hash

    from aefgate.formats.inspect import open_log
    from aefgate.fsutil import count_lines
    from aefgate.cli.inputs import require_file

    require_file(log)
    signing_key = signing_key_of(key)  # before anything is written
    opened = open_log(log)
    total = opened.sample_count
    run_dir = import_log(opened.header, opened.samples(), out, target_mode=target_mode,
                         content_capture=content_capture, at=at, key=signing_key, total=total,
                         grader_types=grader_types)
    # the import verified the run (before sealing it, or after writing a running run: IN-11); what is shown here is
    # read from what it wrote, not verified a second time
    run = jsonio.read_json(run_dir / "run.json")
    lines = count_lines(run_dir / "results.ndjson")
    run_hash = None
    if (run_dir / "seal.json").exists():  # the seal the import just wrote and checked: its hash (not the subjects)
        run_hash = seal_run_hash(run_dir)
    outcome = "intact" if run_hash is not None else "unsealed"
    signed = (run_dir / "attestation.dsse.json").exists()
    if as_json:
        render.emit_json({"input": str(log), "output": str(run_dir), "runId": run["runId"], "status": run["status"],
                          "samples": total, "results": lines, "outcome": outcome, "runHash": run_hash,
                          "signed": signed})
        return
    c = render.console()
    c.print(f"imported  {render.escape(str(log))} -> {render.escape(str(run_dir))}")
    c.print(f"run id    {render.escape(run['runId'])} ({run['status']}, {lines} result lines from {total} samples)")
    c.print(f"imported  from {render.escape(run['imported']['from'])}; asserted: "
            f"{render.escape(', '.join(run['imported']['asserted']))}")
    c.print(f"outcome   {outcome} (" + ("signed: `aefgate verify --policy` says by whom" if signed else "unsigned")
            + ")")
    c.print(f"run hash  {run_hash or '(none: a running run is not sealed)'}")
    if signed:
        c.print("signed    attestation.dsse.json")


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
                      grader_types=grader_types)
    written = open_log(path)
    if as_json:
        render.emit_json({"run": str(run), "output": str(path), "format": written.format,
                          "status": written.header.get("status"), "samples": written.sample_count})
        return
    c = render.console()
    c.print(f"exported  {render.escape(str(run))} -> {render.escape(str(path))} ({written.format})")
    c.print(f"log       status {written.header.get('status')}, {written.sample_count} samples")
