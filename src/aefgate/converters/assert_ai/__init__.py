"""Microsoft ASSERT (``assert-ai``) <-> AEF: the converter of ``../shared/spec/aef/interop/assert.md``.

The converter shape (docs/design/converters.md): :mod:`.importer` (an ASSERT run -> an imported AEF run, sealed
``ingest``), :mod:`.exporter` (a run with captured conversations -> a judge-only ASSERT run and its case map),
:mod:`.losses` (the page's "What does not carry over", and aefgate's own, as data); this module registers both
directions (entry point ``assert``). ASSERT's files are read and written by :mod:`aefgate.formats.assert_ai`.
aefgate's choices and rule ids (ASSERT-1 .. ASSERT-14): ``docs/mappings/assert.md``.

Round trips: ``aefgate fidelity assert RUN`` (AEF -> ASSERT -> AEF: the run comes back through the case map, with
its case ids; the conversations come back as evidence, their bytes renumbered); and the source cycle ASSERT -> AEF
-> ASSERT, ``aefgate fidelity assert --from-source RESULTS/SUITE/RUN/inference_set.jsonl --opt content_capture=on``
(a run is named by one of its files there), which compares each case's test-set row, conversation and verdict
(``samples:conversation.*``, ...).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Hashable, Iterator

from aefgate.converters.assert_ai.losses import LOSSES_FROM_ASSERT, LOSSES_TO_ASSERT
from aefgate.converters.registry import Converter, Option

__all__ = ["CONVERTERS", "LOSSES_FROM_ASSERT", "LOSSES_TO_ASSERT", "back_options", "match_lines", "records",
           "run_folder"]

_RUN_FILES = ("inference_set.jsonl", "scores.jsonl", "manifest.json", "config.yaml", "metrics.json")


def run_folder(path: Any) -> Path:
    """The ASSERT run a path names: the folder itself, the run folder of one of its files, or the one run of a
    judge kit (a folder with ``agenteval-cases.json`` and ``results/<suite>/<run>/``)."""
    from aefgate.formats.assert_ai.reader import CASE_MAP

    p = Path(path)
    if p.is_file() and p.name in _RUN_FILES:
        return p.parent
    if p.is_dir() and (p / CASE_MAP).is_file() and (p / "results").is_dir():
        runs = [r for s in sorted((p / "results").iterdir()) if s.is_dir() for r in sorted(s.iterdir())
                if r.is_dir()]
        if len(runs) == 1:
            return runs[0]
    return p


def _import(src: Any, dst: Any, **options: Any) -> Any:
    from aefgate.converters.assert_ai.importer import from_assert

    if "from" in options:
        options["source"] = options.pop("from")
    options["wilson_ci"] = bool(options.pop("wilson", False))
    options["accept_changed_suite"] = bool(options.pop("accept_changed_suite", False))
    suite, run = options.pop("suite", None), options.pop("run", None)
    src = run_folder(src) if suite is None else src
    return from_assert(src, dst, suite=suite, run=run, **{k: v for k, v in options.items() if v is not None})


def _export(src: Any, dst: Any, **options: Any) -> Any:
    from aefgate.converters.assert_ai.exporter import to_assert

    options["suite"], options["run"] = options.pop("assert_suite", None), options.pop("assert_run", None)
    return to_assert(src, dst, **{k: v for k, v in options.items() if v is not None})


def back_options(run_dir: Path) -> dict[str, Any]:
    """The import options that bring an export of ``run_dir`` back as close to it as the page allows: its run id
    (so a case's lines come back at the same result ids), subject and target mode, and the conversations kept
    (``content_capture`` on). Its times cannot come back: a judge-only run has no manifest until ASSERT runs it."""
    from aefgate.aef import jsonio

    run = jsonio.read_json(Path(run_dir) / "run.json")
    subject = run.get("subject") or {}
    return {"run_id": run.get("runId"), "subject": subject.get("ref"), "subject_kind": subject.get("kind"),
            "target_mode": (run.get("execution") or {}).get("targetMode", "live"), "content_capture": "on"}


def match_lines(run_dir: Path) -> Callable[[dict, bool], Hashable]:
    """How a line of the original and a line that came back are the same result: a case's root line (the first of
    the original's, ``assert_ai_verdict`` of the one that came back) by its case id, since ASSERT keeps the case
    (through the case map) and not the result tree; every other line by its ``resultId`` (a run that came from
    ASSERT gets its children back at the same ids)."""
    from aefgate.converters.assert_ai.names import ROOT

    firsts: set[str] = set()
    seen: set[str] = set()
    from aefgate.aef import jsonio

    for _n, line in jsonio.iter_ndjson(Path(run_dir) / "results.ndjson"):
        if line.get("parentResultId") is None and "trial" not in line and line["caseId"] not in seen:
            seen.add(line["caseId"])
            firsts.add(line["resultId"])

    def key(line: dict, original: bool) -> Hashable:
        if original:
            return ("case", line["caseId"]) if line["resultId"] in firsts else ("line", line["resultId"])
        if line.get("parentResultId") is None and line.get("path") == ROOT:
            return ("case", line["caseId"])
        return ("line", line["resultId"])

    return key


def records(path: Path) -> Iterator[tuple[str, str, Any]]:
    """An ASSERT run (or a judge kit) as comparable records: one ``samples`` record per case (the harness's name for
    a case's record), keyed by its case id (a judge kit's through its case map), holding its ``test_case`` (the
    test-set row), ``conversation`` (the inference row) and ``verdict`` (the score row), each without ``type`` and
    ``test_case_id`` (ASSERT renumbers them by position). In file order: the test set's cases first."""
    from aefgate.formats.assert_ai.files import iter_jsonl
    from aefgate.formats.assert_ai.model import case_key
    from aefgate.formats.assert_ai.reader import open_run

    # the files as they are: whether a changed suite may be imported is the import's to decide (ASSERT-5)
    r = open_run(run_folder(path), accept_changed_suite=True)
    names = r.case_map.cases if r.case_map is not None else {}
    cases: dict[str, dict[str, Any]] = {}
    for part, p in (("test_case", r.test_set), ("conversation", r.inference_set), ("verdict", r.scores)):
        if p is None:
            continue
        for lineno, _off, _raw, row in iter_jsonl(p):
            k = case_key(row, f"{p}:{lineno}")
            rec = cases.setdefault(names.get(k, f"{k[0]}:{k[1]}"), {})
            rec[part] = {m: v for m, v in row.items() if m not in ("type", "test_case_id")}
    for case_id, rec in cases.items():
        yield "samples", case_id, rec


CONVERTERS = [
    Converter(
        "assert-to-aef", "assert", "aef", _import,
        options=[
            Option("suite", "with run: the suite folder under the input, a results root (the run is "
                            "RESULTS/SUITE/RUN)", str, None),
            Option("run", "with suite: the run folder under the suite", str, None),
            Option("run_id", "the runId to write (default: <suite>.<run>)", str, None),
            Option("from", "imported.from (default: assert-ai 0.3)", str, None),
            Option("subject", "subject.ref (default: the converter's reading of ASSERT's target: endpoint:<URL>, "
                              "agent:<callable> or model:<name>)", str, None),
            Option("subject_kind", "subject.kind (with subject; default: the ref's kind when it is one)", str, None),
            Option("target_mode", "execution.targetMode: live, replayed, scripted or mocked (default: live; replayed "
                                  "for a judge-only run). The converter's claim, listed in imported.asserted", str,
                   None),
            Option("content_capture", "on: also keep the seeds, transcripts, tool calls and the judge's reasoning as "
                                      "blobs (and each case's ASSERT facts in ext); off: none of it, nor the judge's "
                                      "justification (RUN-11). Not given: the page's worked example (contentCapture "
                                      "on, no blob)", str, None),
            Option("at", "the seal's sealedAt, RFC 3339 UTC (default: now)", str, None),
            Option("key", "a private key (PKCS#8 PEM) that signs the seal", str, None),
            Option("wilson", "add the 95% Wilson interval to each rate (ASSERT prints none)", bool, False),
            Option("max_harm_rate", "a gate limit on the harm rate: the summary entry's rule (harm <= X) and verdict",
                   float, None),
            Option("max_over_refusal_rate", "a gate limit on the over-refusal rate (over_refusal <= Y)", float, None),
            Option("accept_changed_suite", "import a run whose taxonomy.json or test_set.jsonl changed (or went "
                                           "missing) since it ran, against the present files as ASSERT reads it; "
                                           "the recorded and present hashes are noted (ASSERT-5 otherwise)", bool,
                   False),
        ],
        losses=LOSSES_FROM_ASSERT,
        description="an ASSERT (assert-ai 0.3) run results/<suite>/<run>/ into an imported AEF run, sealed ingest: "
                    "ASSERT's harm and over-refusal rates per lane (interop/assert.md)",
        back_options=back_options,
        match_lines=match_lines,
        records=records,
        cli="aefgate.cli.assert_cmds:import_assert",
    ),
    Converter(
        "aef-to-assert", "aef", "assert", _export,
        options=[
            Option("taxonomy", "the taxonomy.json ASSERT's judge grades against (default: the one a run imported "
                               "from ASSERT keeps under ext/assert-ai/)", str, None),
            Option("judge_model", "ASSERT's judge model, as LiteLLM names it (default: the run's first judge)", str,
                   None),
            Option("assert_suite", "the kit's suite name (default: the run's suite, else agenteval)", str, None),
            Option("assert_run", "the kit's run name (default: judge-1)", str, None),
            Option("target", "the target named on each row (default: deployment.endpoint, else the subject)", str,
                   None),
            Option("assert_root", "the kit's folder (OUT_DIR) as ASSERT will see it (an absolute path, e.g. in a "
                                  "container; default: OUT_DIR)", str, None),
            Option("label_set", "the case map's labelSet (default: aef:<runId>)", str, None),
        ],
        losses=LOSSES_TO_ASSERT,
        description="AEF runs with captured conversations into a judge-only ASSERT run (results/<suite>/<run>/) and "
                    "its case map agenteval-cases.json (interop/assert.md)",
        cli="aefgate.cli.assert_cmds:export_assert",
    ),
]
