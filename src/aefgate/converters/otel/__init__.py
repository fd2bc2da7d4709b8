"""OpenTelemetry <-> AEF: the converter of ``../shared/spec/aef/interop/opentelemetry.md`` (rules OT-1 .. OT-9, as
the page's checked examples name them; ``../shared/spec/README.md``).

The converter shape (docs/design/converters.md): :mod:`.importer` (OTLP logs and traces -> an imported run),
:mod:`.exporter` (a run -> ``gen_ai.evaluation.result`` events), :mod:`.losses` (the page's "What does not carry
over" as data); this module registers both directions (entry point ``otel``). The OTLP file layer (OTLP/JSON and
protobuf) is :mod:`aefgate.formats.otlp`. aefgate's choices: ``docs/mappings/otel.md``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Hashable

from aefgate.converters.otel.losses import LOSSES_FROM_OTEL, LOSSES_TO_OTEL
from aefgate.converters.registry import Converter, Option

__all__ = ["CONVERTERS", "LOSSES_FROM_OTEL", "LOSSES_TO_OTEL", "back_options", "match_lines"]


def _import(src: Any, dst: Any, *, traces: str | None = None, run_id: str | None = None, **options: Any) -> Path:
    # lazy: the converter (0.1-0.3 s of imports) when it runs, not when the registry lists it
    from aefgate.converters.otel.importer import from_otel

    if "from" in options:
        options["source"] = options.pop("from")
    return from_otel(src, dst, traces=[traces] if traces else [], run_id=run_id,
                     **{k: v for k, v in options.items() if v is not None})


def _export(src: Any, dst: Any, *, aigp: bool = False, name_from: str | None = None,
            service_name: str | None = None, **_: Any) -> Path:
    # lazy: the converter (0.1-0.3 s of imports) when it runs, not when the registry lists it
    from aefgate.converters.otel.exporter import to_otel

    return to_otel(src, dst, aigp=bool(aigp), name_from=name_from or "summary", service_name=service_name)


def back_options(run_dir: Path) -> dict[str, Any]:
    """The import options that bring an export of ``run_dir`` back as close to it as the page allows: its subject,
    target mode, content capture and seal time. The run id and the paths cannot come back (the page: the importer
    builds them), so the lines are paired by :func:`match_lines`."""
    # lazy: the converter (0.1-0.3 s of imports) when it runs, not when the registry lists it
    from aefgate.converters.fidelity import seal_time
    from aefgate.aef import jsonio

    run = jsonio.read_json(Path(run_dir) / "run.json")
    subject = run.get("subject") or {}
    return {"subject": subject.get("ref"), "subject_kind": subject.get("kind", "agent"),
            "target_mode": (run.get("execution") or {}).get("targetMode", "live"), "at": seal_time(run_dir),
            "content_capture": "off" if run.get("contentCapture") == "off" else "on"}


def match_lines(run_dir: Path) -> Callable[[dict, bool], Hashable]:
    """How a line of the original and a line that came back are the same result: the case, the trial and the
    metric (the event's name; a line without scores is named after its summary entry's metric, OT-1)."""
    # lazy: the converter (0.1-0.3 s of imports) when it runs, not when the registry lists it
    from aefgate.converters.otel.exporter import _summary_names

    from aefgate.aef import jsonio

    p = Path(run_dir) / "summary.json"
    names = _summary_names(jsonio.read_json(p) if p.is_file() else None)

    def key(line: dict, original: bool) -> Hashable:
        trial = line.get("trial"), "trials" in line  # a trial line and a rollup come back as such (their attributes)
        if not original:
            return line["caseId"], line["path"], *trial
        scores = line.get("scores") or []  # a line no summary entry names comes back at its path (name_from path)
        return line["caseId"], scores[0]["metric"] if scores else names.get(line["path"], line["path"]), *trial

    return key


CONVERTERS = [
    Converter(
        "otel-to-aef", "otel", "aef", _import,
        options=[
            Option("traces", "OTLP traces the events belong to (a file or a folder of them; the command takes it "
                             "repeated): kept in traces.otlp.jsonl", str, None),
            Option("run_id", "the runId to write (default: otel-<digest of the input>)", str, None),
            Option("from", "imported.from: the tool that wrote the input", str, None),
            Option("subject", "subject.ref (default: agent:<service.name>)", str, None),
            Option("subject_kind", "subject.kind", str, "agent"),
            Option("target_mode", "execution.targetMode: live, replayed, scripted or mocked (the converter's claim, "
                                  "listed in imported.asserted)", str, "live"),
            Option("content_capture", "contentCapture: on, or off (a record with content is then refused: "
                                      "content-capture, [SEC-6])", str, "on"),
            Option("at", "the seal's sealedAt, RFC 3339 UTC (default: now); also the run's times when no event has "
                         "one (OT-4)", str, None),
            Option("key", "a private key (PKCS#8 PEM) that signs the seal", str, None),
            Option("skip_unplaceable", "leave out the evaluation events the page cannot place (OT-6: no name, no "
                                       "case, a label without a value, a non-finite value, the same metric twice for "
                                       "one case ...) instead of refusing the input: each is listed (rule, case, "
                                       "evaluation, where), and the sealed run counts them (run.json ext "
                                       "aefgate.otel.unplaceable)", bool, False),
            Option("suite_run", "import the events of this test.suite.run.id only (the input holds several runs; "
                                "the receiver groups by it the same way)", str, None),
        ],
        losses=LOSSES_FROM_OTEL,
        description="OTLP logs (OTLP/JSON lines or protobuf bodies) and traces into an imported AEF run, sealed "
                    "ingest (interop/opentelemetry.md)",
        back_options=back_options,
        match_lines=match_lines,
        cli="aefgate.cli.otel_cmds:import_otel",
    ),
    Converter(
        "aef-to-otel", "aef", "otel", _export,
        options=[Option("aigp", "also write each line's AIGP grader type (aigp.grader.type; aigp.grader.confidence "
                                "UNCALIBRATED for a judge without calibration): docs/mappings/aigp.md", bool, False),
                 Option("name_from", "how a line without scores that no summary entry names is named (OT-1): "
                                     "summary (the page: refused), or path (aefgate's extension: the event is named "
                                     "after the line's path; docs/mappings/otel.md)", str, "summary"),
                 Option("service_name", "the events' resource service.name (default: the run's "
                                        "subject.telemetry.serviceName; sent to an endpoint, else the subject's name, "
                                        "so a receiver groups the run's events together; a file keeps the page's "
                                        "rule, no resource: OT-2)", str, None)],
        losses=LOSSES_TO_OTEL,
        description="AEF runs into OTLP/JSON gen_ai.evaluation.result events, one LogsData line per result line "
                    "(interop/opentelemetry.md)",
        suffix=".jsonl",
        cli="aefgate.cli.otel_cmds:export_otel",
    ),
]
