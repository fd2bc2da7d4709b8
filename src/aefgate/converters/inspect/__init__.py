"""Inspect AI <-> AEF: the converter of ``../shared/spec/aef/interop/inspect.md`` (the normative mapping).

The converter shape every format follows (docs/design/converters.md):

- :mod:`.importer`: Inspect -> AEF (:func:`~.importer.from_inspect`, :func:`~.importer.import_log`);
- :mod:`.exporter`: AEF -> Inspect (:func:`~.exporter.to_inspect`, :func:`~.exporter.export_run`);
- :mod:`.losses`: what each direction does not carry, as data (the page's lists, and aefgate's additions);
- this module: ``CONVERTERS``, the two directions as the registry sees them (entry point ``inspect``), with what
  the round-trip harness needs (:func:`back_options`, :func:`records`). It imports the directions only when a
  conversion runs, so listing the formats stays fast.

The choices the page leaves open, and what aefgate found inconsistent in it, are in ``docs/mappings/inspect.md``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

from aefgate.converters.inspect.losses import LOSSES_FROM_INSPECT, LOSSES_TO_INSPECT
from aefgate.converters.registry import Converter, Option

__all__ = ["CONVERTERS", "LOSSES_FROM_INSPECT", "LOSSES_TO_INSPECT", "back_options", "records"]


def _run_import(src: Any, dst: Any, *, target_mode: str = "live", content_capture: str = "on", at: str | None = None,
                key: str | None = None, grader_types: bool = False, lossless: bool = True, **_: Any) -> None:
    from aefgate.converters.inspect.importer import from_inspect  # lazy: listing formats loads this package

    from_inspect(src, dst, target_mode=target_mode or "live", content_capture=content_capture or "on", at=at,
                 key=key, grader_types=bool(grader_types), lossless=bool(lossless))


def _run_export(src: Any, dst: Any, *, ignore_overlays: bool = False, output_from_evidence: bool = False,
                map_scorers: bool = False, withheld_ok: Any = (), grader_types: bool = False, task: str | None = None,
                model: str | None = None, case_times: str | None = None, omit_unscored: bool = False,
                label_values: bool = False, **_: Any) -> None:
    from aefgate.converters.inspect.exporter import to_inspect  # lazy: listing formats loads this package

    # the route's destination has no suffix of its choosing when it is a staging name: .eval unless it says .json
    fmt = "json" if str(dst).lower().endswith(".json") else "eval"
    to_inspect(src, dst, ignore_overlays=bool(ignore_overlays), fmt=fmt, withheld_ok=withheld_ok,
               output_from_evidence=bool(output_from_evidence), map_scorers=bool(map_scorers),
               grader_types=bool(grader_types), task=task or None, model=model or None,
               case_times=case_times or None, omit_unscored=bool(omit_unscored),
               label_values=bool(label_values))


def back_options(run_dir: Path) -> dict[str, Any]:
    """The import options that bring an export of ``run_dir`` back as that run: its target mode, its content
    capture, and its seal's time (the run's end when it has no seal)."""
    from aefgate.aef import jsonio  # lazy: listing formats loads this package

    run = jsonio.read_json(Path(run_dir) / "run.json")
    at = run.get("endedAt")
    try:
        at = jsonio.read_json(Path(run_dir) / "seal.json", max_size=jsonio.MAX_SEAL)["predicate"]["sealedAt"]
    except (OSError, KeyError, TypeError, jsonio.JsonProblem):
        pass
    from aefgate.converters.inspect.conventions import KEPT_HEADER  # lazy: listing formats loads this package

    return {"target_mode": (run.get("execution") or {}).get("targetMode", "live"),
            "content_capture": "off" if run.get("contentCapture") == "off" else "on", "at": at,
            "lossless": (Path(run_dir) / "ext" / KEPT_HEADER).is_file()}


def records(path: Path) -> Iterator[tuple[str, str, Any]]:
    """An Inspect log as the source cycle compares it, every member of it: ``header`` (everything but reductions and
    samples: version, status, eval, plan, results, stats, error, tags, metadata, invalidated, ...: fields
    ``header:results.scores``, ``header:stats.model_usage...``; the log's results are not named ``results:``, the
    AEF cycle's fields of result lines), ``reductions`` (each keyed by its scorer and reducer) and ``samples`` (keyed
    by id and epoch: an id 3 and an id "3" share a key, and their ``id`` fields differ)."""
    from aefgate.formats.inspect import open_log  # lazy: listing formats loads this package

    log = open_log(Path(path))
    yield "header", "", log.header
    reductions = log.reductions()
    if isinstance(reductions, list):
        for i, red in enumerate(reductions):
            key = f"{red.get('scorer')} {red.get('reducer')}" if isinstance(red, dict) else f"#{i}"
            yield "reductions", key, red
    for sample in log.samples():
        yield "samples", f"{sample.get('id')} epoch {sample.get('epoch')}", sample


CONVERTERS = [
    Converter(
        "inspect-to-aef", "inspect", "aef", _run_import,
        options=[
            Option("target_mode", "execution.targetMode: live, replayed, scripted or mocked. Inspect does not record "
                                  "it: the converter's claim, listed in imported.asserted", str, "live"),
            Option("content_capture", "on: keep the case content, explanations and answers (blobs, evidence); off: "
                                      "none of it (RUN-11)", str, "on"),
            Option("at", "the seal's sealedAt, RFC 3339 UTC (default: now)", str, None),
            Option("key", "an unencrypted PKCS#8 PEM private key: also sign the seal (attestation.dsse.json)", str,
                   None),
            Option("grader_types", "set annotator.kind LLM (and the judge's model) on the lines of Inspect's "
                                   "model-graded scorers (model_graded_qa, model_graded_fact): aefgate's extension, "
                                   "docs/mappings/aigp.md", bool, False),
            Option("lossless", "also keep what the page's mapping does not place (the log's header, each sample's "
                               "other members, the reductions) in ext/inspect_ai/ files of the run, so that an "
                               "export to Inspect gives the log back (aefgate's extension, on by default); off "
                               "(--no-lossless) writes exactly the page's run", bool, True),
        ],
        losses=LOSSES_FROM_INSPECT,
        description="Inspect AI eval logs (.eval, .json) into AEF runs, sealed as ingest (interop/inspect.md)",
        back_options=back_options,
        records=records,
        round_trip_options={"lossless": True},
        cli="aefgate.cli.inspect_cmds:import_inspect",
    ),
    Converter(
        "aef-to-inspect", "aef", "inspect", _run_export,
        options=[
            Option("ignore_overlays", "convert a run with overlay events without them (IN-4): its sealed lines only",
                   bool, False),
            Option("grader_types", "also write each score's AIGP grader type (Score.metadata.aigp.grader; "
                                   "UNCALIBRATED for a judge without calibration): docs/mappings/aigp.md", bool,
                   False),
            Option("output_from_evidence", "rebuild each sample's output (and messages) from its captured output "
                                           "evidence, where the page refuses the run (IN-5): aefgate's extension, for "
                                           "runs imported from Inspect (docs/mappings/inspect.md)", bool, False),
            Option("map_scorers", "write a path summarized for several metrics as Inspect writes a map-valued "
                                  "scorer (one EvalScore per metric), where the page refuses the run (IN-3): "
                                  "aefgate's extension", bool, False),
            Option("task", "eval.task for a run without a suite (suite:<task>): the Inspect task name (IN-1; "
                           "aefgate's extension)", str, None),
            Option("model", "eval.model for a run whose subject is not a model (default: the subject's kind:name, "
                            "R7I-8): the Inspect model name (aefgate's extension)", str, None),
            Option("case_times", "span: a sample whose root lines carry different times gets their span (the "
                                 "earliest start, the latest end, the longest duration) instead of refusing the run "
                                 "(IN-5; aefgate's extension)", str, None),
            Option("omit_unscored", "with map_scorers, leave out of results a summary entry whose metric no line at "
                                    "its path scores (a rate of the lines' states) instead of refusing the run (IN-3; "
                                    "aefgate's extension)", bool, False),
            Option("label_values", "write a score whose label is not one of Inspect's letters (C, I, P, N) as its "
                                   "value, the label in Score.metadata.aef.labels, where the page writes the label, "
                                   "which its import refuses (IN-7); used in round trips (aefgate's extension)",
                   bool, False),
        ],
        losses=LOSSES_TO_INSPECT,
        description="AEF runs into Inspect AI eval logs (.json, or .eval) (interop/inspect.md)",
        round_trip_options={"output_from_evidence": True, "map_scorers": True, "label_values": True},
        suffix=".json",
        cli="aefgate.cli.inspect_cmds:export_inspect",
    ),
]
