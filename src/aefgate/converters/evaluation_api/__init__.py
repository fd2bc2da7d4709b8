"""The vendor Evaluation API (conversation insights) <-> AEF: aefgate's own mapping, docs/mappings/evaluation-api.md
(rules EVAPI-n; no AEF interop page maps this API).

The converter shape (docs/design/converters.md): :mod:`.importer` (responses -> an imported run), :mod:`.live`
(polling a live API), :mod:`.exporter` (a run -> one response per case), :mod:`.losses`; this module registers both
directions (entry point ``evaluation-api``). The response model is :mod:`aefgate.formats.evaluation_api`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Hashable, Iterator

from aefgate.converters.evaluation_api.losses import LOSSES_FROM_EVALUATION_API, LOSSES_TO_EVALUATION_API
from aefgate.converters.registry import Converter, Option

__all__ = ["CONVERTERS", "back_options", "match_lines", "records"]


def _import(src: Any, dst: Any, **options: Any) -> Path:
    # lazy: listing formats loads this package
    from aefgate.converters.evaluation_api.importer import from_evaluation_api

    if "from" in options:
        options["source"] = options.pop("from")
    return from_evaluation_api(src, dst, **{k: v for k, v in options.items() if v is not None})


def _export(src: Any, dst: Any, **_: Any) -> Path:
    from aefgate.converters.evaluation_api.exporter import to_evaluation_api  # lazy: listing formats loads this package

    return to_evaluation_api(src, dst)


def back_options(run_dir: Path) -> dict[str, Any]:
    """The import options that bring an export of ``run_dir`` back as that run: its run id, subject, target mode,
    content capture and seal time (the responses hold none of them)."""
    from aefgate.converters.fidelity import seal_time  # lazy: listing formats loads this package
    from aefgate.aef import jsonio  # lazy: listing formats loads this package

    run = jsonio.read_json(Path(run_dir) / "run.json")
    subject = run.get("subject") or {}
    return {"run_id": run["runId"], "subject": subject.get("ref"), "subject_kind": subject.get("kind", "agent"),
            "target_mode": (run.get("execution") or {}).get("targetMode", "live"),
            "content_capture": "off" if run.get("contentCapture") == "off" else "on", "at": seal_time(run_dir)}


def _unescape(path: str) -> str:
    return path.replace("%2F", "/").replace("%25", "%")


def match_lines(run_dir: Path) -> Callable[[dict, bool], Hashable]:
    """A line of the original and one that came back are the same result when they have the case and the path (a
    deeper path comes back with its later levels in the insight's ref, ``/`` written ``%2F``)."""

    def key(line: dict, original: bool) -> Hashable:
        return line["caseId"], line["path"] if original else _unescape(line["path"])

    return key


def records(path: Path) -> Iterator[tuple[str, str, Any]]:
    """Responses as the source cycle compares them: each file's JSON value, keyed by its session (or its name)."""
    from aefgate.converters.evaluation_api.importer import input_files  # lazy: listing formats loads this package
    from aefgate.aef import jsonio  # lazy: listing formats loads this package

    for f in input_files(path):
        value = jsonio.loads(f.read_bytes())
        session = next((s.get("sessionId") for s in value.get("results") or () if isinstance(s, dict)), None)
        yield "response", session or "(no session)", value


_OPTIONS = [
    Option("run_id", "the runId to write (default: evalapi-<digest of the input>)", str, None),
    Option("from", "imported.from: the tool or service that gave the responses", str, None),
    Option("subject", "subject.ref: the agent the sessions ran (required: a response names none)", str, None),
    Option("subject_kind", "subject.kind", str, "agent"),
    Option("target_mode", "execution.targetMode: live, replayed, scripted or mocked (the converter's claim, listed in "
                          "imported.asserted)", str, "live"),
    Option("content_capture", "contentCapture: on, or off (no reasoning, evidence quote, featured text, text or list "
                              "value is kept)", str, "on"),
    Option("at", "the seal's sealedAt, RFC 3339 UTC (default: now); also the run's times when no insight has one",
           str, None),
    Option("key", "a private key (PKCS#8 PEM) that signs the seal", str, None),
]

CONVERTERS = [
    Converter(
        "evaluation-api-to-aef", "evaluation-api", "aef", _import,
        options=_OPTIONS,
        losses=LOSSES_FROM_EVALUATION_API,
        description="Evaluation API EvaluationStatusResponse files (one per session) into an imported AEF run, "
                    "sealed ingest (docs/mappings/evaluation-api.md)",
        back_options=back_options,
        match_lines=match_lines,
        records=records,
        cli="aefgate.cli.evalapi_cmds:import_evaluation_api",
    ),
    Converter(
        "aef-to-evaluation-api", "aef", "evaluation-api", _export,
        losses=LOSSES_TO_EVALUATION_API,
        description="AEF runs into one EvaluationStatusResponse per case: a .json file for a one-case run, else a "
                    "folder (docs/mappings/evaluation-api.md)",
        cli="aefgate.cli.evalapi_cmds:export_evaluation_api",
    ),
]
