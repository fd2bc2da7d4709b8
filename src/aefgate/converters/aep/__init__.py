"""AEF <-> AEP (the Agent Event Protocol's ``assessment.*`` events), as ``docs/mappings/aep.md`` defines it.

No specification maps AEF to AEP; the page is aefgate's mapping and its rules are ``AEP-1`` .. ``AEP-18``. Every
refusal names one of them (or the AEF / AEP rule it enforces) and the place: a run path, or ``file:line``.

The converter shape (docs/design/converters.md): :mod:`.exporter` (AEF -> AEP, AEP-1 .. AEP-12), :mod:`.importer`
(AEP -> AEF, AEP-13 .. AEP-17), :mod:`.losses` (the page's "What does not carry over" as data), :mod:`.common`
(what both share); this module registers both directions (entry point ``aep``). The AEP file layer is
``aefgate.formats.aep``; the CloudEvents encodings of the same events are ``aefgate.converters.cloudevents``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aefgate.converters.aep.losses import LOSSES_FROM_AEP, LOSSES_TO_AEP
from aefgate.converters.registry import Converter, Option

__all__ = ["CONVERTERS", "EXPORT_OPTIONS", "IMPORT_OPTIONS", "LOSSES_FROM_AEP", "LOSSES_TO_AEP", "back_options"]

EXPORT_OPTIONS = (
    Option("max_capture", "the capture ceiling (AEP-0003 §9.1, AEP-8): none, metadata (the default), redacted (kept "
                          "content goes through the §9.4 redaction pipeline) or full; never above the run's own "
                          "contentCapture", str, "metadata"),
    Option("agent", "the envelope's agent (default: subject.telemetry.agentId, else subject.ref; AEP-3)", str),
    Option("source_host", "the host of the envelope's source URI (default aefgate; AEP-3)", str),
    Option("cause_map", "a JSON file (or object) mapping resultIds or caseIds to the ids of the assessed AEP events "
                        "(the envelope's cause; AEP-7)", str),
)
IMPORT_OPTIONS = (
    Option("at", "sealedAt of the imported run, RFC 3339 UTC (default: now): fixes the output", str),
    Option("run_id", "the runId to write (default: the events' session; AEP-14)", str),
    Option("target_mode", "execution.targetMode: live, replayed, scripted or mocked (the importer's claim, listed in "
                          "imported.asserted; AEP-14)", str, "live"),
)


def _to_aep(src: Any, dst: Any, **options: Any) -> Path:
    # lazy: the converter (0.1-0.3 s of imports) when it runs, not when the registry lists it
    from aefgate.converters.aep.exporter import to_aep

    return to_aep(src, dst, **options)


def _from_aep(src: Any, dst: Any, **options: Any) -> Path:
    # lazy: the converter (0.1-0.3 s of imports) when it runs, not when the registry lists it
    from aefgate.converters.aep.importer import from_aep

    return from_aep(src, dst, **options)


def back_options(run_dir: Path) -> dict[str, Any]:
    """The import options that bring an export of ``run_dir`` back as that run: its target mode and its seal's time
    (the run id comes back from the events' session, AEP-14)."""
    # lazy: the converter (0.1-0.3 s of imports) when it runs, not when the registry lists it
    from aefgate.converters.fidelity import seal_time
    from aefgate.aef import jsonio

    run = jsonio.read_json(Path(run_dir) / "run.json")
    return {"target_mode": (run.get("execution") or {}).get("targetMode", "live"), "at": seal_time(run_dir)}


CONVERTERS = [
    Converter("aef-to-aep", "aef", "aep", _to_aep, EXPORT_OPTIONS, LOSSES_TO_AEP,
              "an intact AEF run as AEP assessment events (JSONL), docs/mappings/aep.md", suffix=".jsonl",
              cli="aefgate.cli.aep_cmds:export_aep"),
    Converter("aep-to-aef", "aep", "aef", _from_aep, IMPORT_OPTIONS, LOSSES_FROM_AEP,
              "AEP assessment events (JSONL or CloudEvents) as an imported AEF run, sealed ingest",
              back_options=back_options, cli="aefgate.cli.aep_cmds:import_aep"),
]
