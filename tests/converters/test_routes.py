"""The route matrix (issue 26): every source aefgate reads, every target it writes.

Sources: runs imported from each format (Inspect: ``basic.eval`` and an epochs log; OpenTelemetry; store v1; ASSERT;
the Evaluation API; AEP and CloudEvents events exported from the demo run and imported back) and native AEF runs
(the demo, the shared examples' sealed runs). Targets: every format aefgate writes. Each cell is checked by the
round-trip harness where the format goes both ways (every target here does): the run comes back with only declared
losses and verifies. A cell either converts, converts once given an option the refusal names (the option exists
in the converter, and the command line spells it as a flag of the command that ran), or is refused by a rule the
specification or a mapping page requires (:data:`REQUIRED`, with why). No traceback, no undeclared loss.

``docs/routes.md`` is rendered from this module's outcome: the test fails when the file differs;
``AEFGATE_UPDATE_ROUTES=1`` rewrites it. The source runs are built once per module, the conversions run in-process
through the registry; a few command-line checks run the flags the messages name.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from aefgate.converters.fidelity import fidelity
from aefgate.converters.registry import find_route, registry, run_route
from aefgate.errors import Refusal
from tests._shared import EXAMPLES, REPO, SAMPLES, SEALED_EXAMPLE_RUNS
from tests.conftest import aefgate, one_json

AT = "2026-12-01T00:00:00Z"
TARGETS = ["inspect", "otel", "aep", "cloudevents", "evaluation-api", "assert"]
STORE_RUN = "2026-05-20_09-14-07_3fa9c2e1"
TAXONOMY = SAMPLES / "assert" / "demo-suite" / "taxonomy.json"
ROUTES_PAGE = REPO / "docs" / "routes.md"

#: the value a test gives an option a refusal names (``option 'NAME'``): what a user would supply
VALUES = {
    "taxonomy": str(TAXONOMY),
    "judge_model": "openai/fake-llm",  # the judge of the shared ASSERT sample
    "name_from": "path",
    "task": "routes",
    "model": "mockllm/model",
    "case_times": "span",
    "omit_unscored": "true",
}

#: refusals the specification or a mapping page requires of a cell, and why: (target, rule) -> why
REQUIRED = {
    ("assert", "ASSERT-10"): "the run holds no captured conversation (it keeps no content, RUN-11, or no line cites "
                             "transcript or output evidence): ASSERT's judge has nothing to grade (interop/assert.md)",
    ("inspect", "IN-1"): "the eval header Inspect requires cannot be written: more than one judge (a role of "
                         "eval.model_roles holds one model), or no task (no suite:<task>) where the option 'task' is "
                         "not given (interop/inspect.md, IN-1)",
    ("inspect", "IN-3"): "two summary entries at one path: an Inspect log has one EvalScore per scorer "
                         "(interop/inspect.md, IN-3); aefgate's option map_scorers writes several metrics of one "
                         "path as a map-valued scorer's, but not one metric of one path in two lanes (Inspect has "
                         "no lanes), as the refusal says",
}

#: cells that fail today because of work in progress elsewhere: (source, target) -> (the rule observed, or
#: ``undeclared``; why). Each is checked to still fail so, so the entry goes when the cell is fixed. The Inspect
#: cells of issue 26 are all closed (docs/mappings/inspect.md: the options case_times, omit_unscored, label_values).
KNOWN_GAPS: dict[tuple[str, str], tuple[str, str]] = {}


def _is_gap(c: dict, gap: tuple[str, str]) -> bool:
    return c["outcome"] == gap[0] if gap[0] == "undeclared" else c["outcome"] == "refused" and c["rule"] == gap[0]


# -- the sources, built once -----------------------------------------------------------------------------------------


def _import(fmt: str, src: Path, dst: Path, **options) -> Path:
    return run_route(find_route(fmt, "aef"), src, dst, {"at": AT, **options})


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> dict[str, Path]:
    """Every source run, named as the page names its row."""
    from aefgate.cli.app import _demo_scenario
    from aefgate.aef.produce import produce
    from aefgate.aef.sealer import seal_run

    base = tmp_path_factory.mktemp("routes")
    out: dict[str, Path] = {}
    for log in ("basic.eval", "epochs_mean.eval"):
        out[f"inspect: {log}"] = _import("inspect", SAMPLES / "inspect" / log, base / log.replace(".", "_"))
    out["otel"] = _import("otel", SAMPLES / "otel" / "logs.otlp.jsonl", base / "otel",
                          traces=str(SAMPLES / "otel" / "traces.otlp.jsonl"))
    out["store-v1"] = _import("store-v1", SAMPLES / "store-v1" / ".agenteval", base / "store-v1", run=STORE_RUN)
    out["assert"] = _import("assert", SAMPLES / "assert" / "demo-suite" / "run-001", base / "assert",
                            content_capture="on")
    out["evaluation-api"] = _import("evaluation-api", SAMPLES / "evaluation-api" / "finished.json", base / "evalapi",
                                    subject="agent:acme-support")
    demo = base / "demo"
    produce(_demo_scenario(), demo)
    seal_run(demo, sealed_by="producer")
    for fmt in ("aep", "cloudevents"):  # events exported from a run, imported back
        events = run_route(find_route("aef", fmt), demo, base / f"demo.{fmt}.jsonl")
        out[fmt] = _import(fmt, events, base / fmt)
    out["aef: demo"] = demo
    for run in SEALED_EXAMPLE_RUNS:
        out["aef: " + "/".join(run.parts[-2:])] = run
    return out


# -- one cell --------------------------------------------------------------------------------------------------------


def _named_options(r: Refusal) -> list[str]:
    """The options a refusal names (``option 'NAME'`` or ``option 'NAME=VALUE'``, as the command line reads them)."""
    from aefgate.cli.app import OPTION_REF

    return [m.group(1) for m in OPTION_REF.finditer(r.message + " " + (r.where or ""))]


def cell(target: str, run: Path) -> dict:
    """The outcome of ``target`` for the run: ``{"outcome": "converts", "options": {...}}`` or
    ``{"outcome": "refused", "rule": ..., "step": 1|2, "message": ...}``, or ``undeclared`` with the fields."""
    options: dict[str, str] = {}
    exp = registry().between("aef", target)
    for _ in range(3):  # an option a refusal names, supplied, may reveal another
        try:
            report = fidelity(target, run, options=options)
        except Refusal as r:
            wanted = [o for o in _named_options(r) if o not in options and exp.option(o) is not None and o in VALUES]
            if wanted:
                options.update({o: VALUES[o] for o in wanted})
                continue
            return {"outcome": "refused", "rule": r.rule, "step": 1, "message": r.message, "where": r.where}
        if report.refusal is not None:
            r = report.refusal
            return {"outcome": "refused", "rule": r.rule, "step": 2, "message": r.message, "where": r.where}
        if not report.ok:
            return {"outcome": "undeclared", "fields": report.undeclared, "back": report.back_outcome,
                    "summary": report.summary()}
        return {"outcome": "converts", "options": options}
    raise AssertionError(f"{target}: options named in a loop: {options}")


@pytest.fixture(scope="module")
def matrix(sources) -> dict[tuple[str, str], dict]:
    return {(name, target): cell(target, run) for name, run in sources.items() for target in TARGETS}


# -- the checks ------------------------------------------------------------------------------------------------------


def test_every_cell_converts_or_is_refused_by_a_required_rule(matrix):
    bad = []
    for (source, target), c in matrix.items():
        gap = KNOWN_GAPS.get((source, target))
        if gap is not None:
            if not _is_gap(c, gap):
                bad.append(f"{source} -> {target}: listed as a known gap ({gap[0]}) but now {c}: update KNOWN_GAPS")
            continue
        if c["outcome"] == "converts":
            continue
        if c["outcome"] == "undeclared":
            bad.append(f"{source} -> {target}: {c['summary']}")
        elif c["step"] == 2:
            bad.append(f"{source} -> {target}: the way back was refused: [{c['rule']}] {c['message']}")
        elif (target, c["rule"]) not in REQUIRED:
            bad.append(f"{source} -> {target}: refused [{c['rule']}] at {c['where']}: {c['message']}")
    assert not bad, "\n".join(bad)


def test_no_refusal_names_a_temporary_file(matrix):
    for (source, target), c in matrix.items():
        if c["outcome"] == "refused":
            assert "aefgate-fidelity-" not in c["message"] + c["where"], (source, target, c)


def test_an_option_a_refusal_names_is_one_the_converter_takes(matrix):
    """Every option a cell needed was named by the refusal (``cell`` supplies only those) and is declared by the
    export converter; each is spelled as a flag by the commands that take it."""
    from aefgate.cli.app import flag_for

    for (source, target), c in matrix.items():  # a refusal names only options its trip's converters take
        if c["outcome"] == "refused":
            named = _named_options(Refusal(c["rule"], c["message"], c["where"]))
            steps = (registry().between("aef", target), registry().between(target, "aef"))
            assert all(any(x.option(o) for x in steps) for o in named), (source, target, named, c["message"])
    used = {(t, o) for (_, t), c in matrix.items() if c["outcome"] == "converts" for o in c["options"]}
    assert ("otel", "name_from") in used and ("assert", "taxonomy") in used  # what the matrix exercises
    for target, option in used:
        assert registry().between("aef", target).option(option) is not None
        assert flag_for(option, ["convert"]) == f"--opt {option}=..."
        assert flag_for(option, ["fidelity"]) == f"--opt {option}=..."
        assert flag_for(option, ["export", target]) == "--" + option.replace("_", "-"), (target, option)


# -- the command line: the flag a message names is accepted ----------------------------------------------------------


def test_fidelity_and_export_name_the_taxonomy_as_their_flag(tmp_path: Path):
    run = EXAMPLES / "inspect-aef" / "run"
    r = aefgate("fidelity", "assert", run, "--json")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    err = one_json(r.stdout)["error"]
    assert err["rule"] == "ASSERT-11" and "give --opt taxonomy=..." in err["message"], err
    r = aefgate("fidelity", "assert", run, "--opt", f"taxonomy={TAXONOMY}", "--json")
    assert r.returncode == 0, r.stderr
    r = aefgate("export", "assert", run, tmp_path / "kit", "--json")
    err = one_json(r.stdout)["error"]
    assert r.returncode == 2 and "give --taxonomy" in err["message"] and err["where"] == "--taxonomy", err
    assert not (tmp_path / "kit").exists()
    r = aefgate("export", "assert", run, tmp_path / "kit", "--taxonomy", TAXONOMY)
    assert r.returncode == 0, r.stderr


def test_convert_and_export_name_the_otel_option_as_their_flag(tmp_path: Path):
    run = EXAMPLES / "otel-aef" / "run"
    r = aefgate("convert", run, tmp_path / "a.jsonl", "--from", "aef", "--to", "otel", "--json")
    err = one_json(r.stdout)["error"]
    assert r.returncode == 2 and err["rule"] == "OT-1" and "--opt name_from=path" in err["message"], err
    r = aefgate("convert", run, tmp_path / "a.jsonl", "--from", "aef", "--to", "otel", "--opt", "name_from=path")
    assert r.returncode == 0, r.stderr
    r = aefgate("export", "otel", run, tmp_path / "b.jsonl", "--json")
    err = one_json(r.stdout)["error"]
    assert r.returncode == 2 and "--name-from" in err["message"] and "--opt" not in err["message"], err
    r = aefgate("export", "otel", run, tmp_path / "b.jsonl", "--name-from", "path")
    assert r.returncode == 0, r.stderr


def test_a_store_v1_workspace_names_the_run_option_of_each_command(tmp_path: Path):
    ws = SAMPLES / "store-v1" / ".agenteval"
    r = aefgate("convert", ws, tmp_path / "a", "--from", "store-v1", "--to", "aef", "--json")
    err = one_json(r.stdout)["error"]
    assert r.returncode == 2 and err["rule"] == "SV1-1" and "--opt run=..." in err["message"], err
    assert "--all" not in err["message"]  # convert migrates one run
    r = aefgate("convert", ws, tmp_path / "a", "--from", "store-v1", "--to", "aef", "--opt", f"run={STORE_RUN}")
    assert r.returncode == 0, r.stderr
    r = aefgate("import", "store-v1", ws, tmp_path / "b", "--json")
    err = one_json(r.stdout)["error"]
    assert "--run" in err["message"] and "--all" in err["message"] and "option '" not in err["message"], err


# -- the page --------------------------------------------------------------------------------------------------------


def _option_text(options: dict[str, str], target: str) -> str:
    from aefgate.cli.app import flag_for

    parts = []
    for k, v in sorted(options.items()):
        shown = "TAXONOMY.json" if k == "taxonomy" else v
        flag = flag_for(k, ["export", target])
        opt = registry().between("aef", target).option(k)
        command = f"export {target} {flag}" if opt is not None and opt.type is bool else \
            f"export {target} {flag} {shown}"  # a boolean flag takes no value
        parts.append(f"`{k}={shown}` (`--opt {k}={shown}`; `{command}`)")
    return ", ".join(parts)


def render(matrix: dict[tuple[str, str], dict]) -> str:
    sources = list(dict.fromkeys(s for s, _ in matrix))
    out = [
        "# Routes: every source, every target",
        "",
        "Generated by `tests/converters/test_routes.py` from what the converters do (the test fails when this page",
        "differs; `AEFGATE_UPDATE_ROUTES=1 python -m pytest tests/converters/test_routes.py` rewrites it).",
        "Do not edit.",
        "",
        "Each row is a run: imported from a format (the shared samples), or a native AEF run (the demo, the shared",
        "examples' sealed runs). Each column is a format aefgate writes; every one of them converts both ways, so each",
        "cell is checked by the round trip (`aefgate fidelity TARGET RUN`): **converts** means the run goes out and",
        "comes back with only declared losses and verifies; **converts with** an option means the conversion is",
        "refused without it, by a rule whose message names the option; **refused** is a rule the specification or a",
        "mapping page requires, explained below; **known gap** is a cell that fails today and is being fixed.",
        "",
        "| source | " + " | ".join(TARGETS) + " |",
        "|---|" + "---|" * len(TARGETS),
    ]
    notes: dict[str, str] = {}
    for s in sources:
        row = []
        for t in TARGETS:
            c = matrix[(s, t)]
            gap = KNOWN_GAPS.get((s, t))
            if gap is not None and _is_gap(c, gap):
                row.append(f"known gap: {gap[0]}")
                seen = notes.get(f"known gap: {gap[0]} ({t})", "")
                notes[f"known gap: {gap[0]} ({t})"] = "; ".join(x for x in dict.fromkeys([*seen.split("; "), gap[1]])
                                                                if x)
            elif c["outcome"] == "converts" and c["options"]:
                row.append("converts with " + ", ".join(f"`{k}`" for k in sorted(c["options"])))
                notes.update({f"`{k}` ({t})": _option_text({k: c["options"][k]}, t) for k in c["options"]})
            elif c["outcome"] == "converts":
                row.append("converts")
            elif c["outcome"] == "refused" and (t, c["rule"]) in REQUIRED and c["step"] == 1:
                row.append(f"refused {c['rule']}")
                notes[f"refused {c['rule']} ({t})"] = REQUIRED[(t, c["rule"])]
            else:
                row.append(f"FAILS ({c['outcome']})")
        out.append(f"| {s} | " + " | ".join(row) + " |")
    out += ["", "## What the cells say", ""]
    out += [f"- **{k}**: {v}" for k, v in sorted(notes.items())]
    return "\n".join(out) + "\n"


def test_the_routes_page_is_the_matrix(matrix):
    text = render(matrix)
    if os.environ.get("AEFGATE_UPDATE_ROUTES") == "1":
        tmp = ROUTES_PAGE.with_name(".routes.md.tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(ROUTES_PAGE)
    assert ROUTES_PAGE.is_file(), "docs/routes.md is missing: AEFGATE_UPDATE_ROUTES=1 writes it"
    assert ROUTES_PAGE.read_text(encoding="utf-8") == text, \
        "docs/routes.md differs from the matrix: AEFGATE_UPDATE_ROUTES=1 rewrites it"


def test_the_matrix_covers_every_format_aefgate_writes():
    writes = {c.target for c in registry().converters if c.source == "aef"}
    assert writes == set(TARGETS), writes
