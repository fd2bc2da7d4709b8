"""AEP and CloudEvents commands: the hooks of ``aefgate export aep``, ``aefgate export cloudevents``, ``aefgate
import aep`` (``aefgate import cloudevents`` is the generic command, :mod:`aefgate.cli.converter_cmds`).

The mapping is aefgate's own, ``docs/mappings/aep.md`` (rules AEP-1 ...), implemented by
:mod:`aefgate.converters.aep`; the CloudEvents bridge is AEP-0005's (:mod:`aefgate.formats.cloudevents`).
The commands are made from the converters' declared options; these hooks add ``--policy``, ``--key`` and the
output. Refusals follow the CLI's
convention (``error [RULE] at WHERE: message`` on stderr; exit 2 for an input, 1 for a run that does not verify).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from aefgate.cli import render
from aefgate.fsutil import count_lines
from aefgate.cli.converter_cmds import JSON_OPT, POLICY_HELP, command_hook


def _policy(policy: Optional[Path]):
    if policy is None:
        return None
    from aefgate.cli.aef import load_policy

    return load_policy(policy)


def _export(run: Path, out: Path, kind: str, as_json: bool, **options) -> None:
    from aefgate.cli.inputs import require_dir
    from aefgate.converters.aep import exporter as aef_aep
    from aefgate.converters.cloudevents.exporter import to_cloudevents

    require_dir(run)
    if kind == "aep":
        path = aef_aep.to_aep(run, out, **options)
    else:
        path = to_cloudevents(run, out, **options)
    events = count_lines(path)
    if as_json:
        render.emit_json({"run": str(run), "output": str(path), "format": kind, "events": events,
                          **{k: v for k, v in options.items() if k in ("max_capture", "mode") and v is not None}})
        return
    c = render.console()
    c.print(f"exported  {render.escape(str(run))} -> {render.escape(str(path))} ({kind}, {events} events)")


def _options(options: dict) -> dict:
    """The export's options as the exporter takes them (``cause_map`` a path, given as a string)."""
    cause_map = options.get("cause_map")
    return {**options, "cause_map": str(cause_map) if cause_map is not None else None}


@command_hook(types={"cause_map": Optional[Path]})
def export_aep(
    run: Path = typer.Argument(..., metavar="RUN", help="The run folder (it must verify intact)."),
    out: Path = typer.Argument(..., metavar="OUT.jsonl", help="The events file to write (must not exist)."),
    *,
    options: dict,
    policy: Optional[Path] = typer.Option(None, "--policy", help=POLICY_HELP),
    as_json: bool = JSON_OPT,
) -> None:
    """Export a run's results as AEP assessment events (AEP-0009), one per line (docs/mappings/aep.md).

    Only a run that verifies intact is exported (exit 1 otherwise). Exporting twice gives the same bytes.
    Example: aefgate export aep runs/refunds out/refunds.aep.jsonl --max-capture metadata
    """
    _export(run, out, "aep", as_json, **_options(options), policy=_policy(policy))


@command_hook(types={"cause_map": Optional[Path]})
def export_cloudevents(
    run: Path = typer.Argument(..., metavar="RUN", help="The run folder (it must verify intact)."),
    out: Path = typer.Argument(..., metavar="OUT.jsonl", help="The CloudEvents file to write (must not exist)."),
    *,
    options: dict,
    policy: Optional[Path] = typer.Option(None, "--policy", help=POLICY_HELP),
    as_json: bool = JSON_OPT,
) -> None:
    """Export a run's results as AEP assessment events carried as CloudEvents 1.0 (the AEP-0005 bridge).

    Example: aefgate export cloudevents runs/refunds out/refunds.ce.jsonl --mode structured
    """
    _export(run, out, "cloudevents", as_json, **_options(options), policy=_policy(policy))


def import_aep(
    events: Path = typer.Argument(..., metavar="EVENTS", help="AEP assessment events, one per line (AEP JSON, or "
                                  "structured CloudEvents carrying them)."),
    out: Path = typer.Argument(..., metavar="OUT", help="The run folder to write (absent or empty)."),
    *,
    options: dict,
    key: Optional[Path] = typer.Option(None, "--key", help="Sign the seal with this PKCS#8 PEM private key."),
    as_json: bool = JSON_OPT,
) -> None:
    """Import AEP assessment events as an AEF run, sealed ingest (docs/mappings/aep.md, AEP -> AEF).

    Example: aefgate import aep out/refunds.aep.jsonl runs/refunds-back --at 2026-12-01T00:00:00Z
    """
    import msgspec

    from aefgate.cli.inputs import require_file
    from aefgate.converters.aep import importer as aef_aep
    from aefgate.aef.signatures import signing_key_of
    from aefgate.aef import jsonio

    require_file(events)
    signing_key = signing_key_of(key)  # before anything is written
    run_dir = aef_aep.from_aep(events, out, key=signing_key, **options)
    run = jsonio.read_json(run_dir / "run.json")
    seal = msgspec.json.decode((run_dir / "seal.json").read_bytes())
    lines = count_lines(run_dir / "results.ndjson")
    signed = (run_dir / "attestation.dsse.json").exists()
    if as_json:
        render.emit_json({"input": str(events), "output": str(run_dir), "runId": run["runId"],
                          "status": run["status"], "results": lines, "outcome": "intact",
                          "runHash": seal["predicate"]["runHash"], "signed": signed})
        return
    c = render.console()
    c.print(f"imported  {render.escape(str(events))} -> {render.escape(str(run_dir))}")
    c.print(f"run id    {render.escape(run['runId'])} ({run['status']}, {lines} result lines)")
    c.print(f"outcome   intact ({'signed' if signed else 'unsigned'}), sealed ingest")
    c.print(f"run hash  {seal['predicate']['runHash']}")
