"""The round-trip harness (aefgate.converters.fidelity) for every format with both directions, the loss
declarations it checks against, and the command `aefgate fidelity`."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from aefgate.converters.fidelity import fidelity, fidelity_from_source, same
from aefgate.converters.inspect.importer import from_inspect
from aefgate.converters.registry import Loss, Registry, field_matches, registry
from aefgate.errors import Refusal
from tests._shared import AEF, EXAMPLES, SAMPLES, SEALED_EXAMPLE_RUNS
from tests.conftest import aefgate, one_json, write_broken

AT = "2026-12-01T00:00:00Z"
INSPECT_LOGS = ["basic.json", "basic.eval", "epochs_mean.eval", "epochs_majority.eval", "errors_limits.json"]
# the complete example runs an Inspect log can hold (the others have no suite: IN-1 refuses their export)
INSPECT_RUNS = [EXAMPLES / "aef-inspect" / "run", EXAMPLES / "aef-inspect-edges" / "run",
                EXAMPLES / "inspect-aef" / "run", EXAMPLES / "inspect-aef" / "run-off",
                EXAMPLES / "inspect-aef-edges" / "run", AEF / "conformance" / "valid" / "completed-eval" / "run"]


@pytest.fixture(scope="session")
def imported_runs(tmp_path_factory) -> dict[str, Path]:
    """The shared real Inspect logs, each imported once for the whole session."""
    root = tmp_path_factory.mktemp("imported")
    return {log: from_inspect(SAMPLES / "inspect" / log, root / log.replace(".", "_"), at=AT)
            for log in INSPECT_LOGS}


def _ids(paths):
    return ["/".join(p.parts[-2:]) for p in paths]


# -- every format, every complete example run --------------------------------------------------------------------


@pytest.mark.parametrize("run", INSPECT_RUNS, ids=_ids(INSPECT_RUNS))
def test_inspect_round_trip_of_the_example_runs(run: Path):
    report = fidelity("inspect", run)
    assert report.ok, report.summary()
    assert {"results:resultId", "results:caseId", "results:path", "run.json:runId"} <= set(report.kept)


@pytest.mark.parametrize("run", SEALED_EXAMPLE_RUNS, ids=_ids(SEALED_EXAMPLE_RUNS))
def test_cloudevents_round_trips_of_the_example_runs(run: Path):
    """(The AEP trips of the same runs, at every ceiling: tests/converters/test_aef_aep.py.)"""
    report = fidelity("cloudevents", run, options={"mode": "binary"})
    assert report.ok, report.summary()
    assert {"results:resultId", "results:state", "results:caseId"} <= set(report.kept)


@pytest.mark.parametrize("fmt", ["inspect", "cloudevents"])  # aep: test_aef_aep.py::test_round_trip_of_inspect_samples
def test_round_trips_of_runs_imported_from_real_inspect_logs(fmt: str, imported_runs: dict[str, Path]):
    for log, run in imported_runs.items():
        report = fidelity(fmt, run)
        assert report.ok, report.summary()
        if fmt == "inspect":  # the way back keeps the scores and the content
            assert "results:scores[].value" in report.kept, log
            assert "file:blobs" in report.kept or "file:blobs" not in report.fields, log


def test_a_run_with_overlay_decisions_round_trips_through_events(tmp_path: Path):
    """The decisions travel as feedback events dated after the seal; the way back does not import them (AEP-15),
    nor take their time as the run's end."""
    from tests.converters.test_inspect_aef import prepare

    run = prepare("aef-inspect", "input", tmp_path)  # a sealed run with one sealed overlay batch
    assert (run / "overlays").is_dir()
    for fmt in ("aep", "cloudevents"):
        report = fidelity(fmt, run)
        assert report.ok, report.summary()
        assert dict(report.lost)["file:overlays"] is not None


def test_each_loss_is_declared_by_the_item_that_says_it():
    """A scored line whose reason and reasoning both travel as one explanation: its reasoning's loss is aefgate's
    item for lines that are not typed absences, never the page's item for typed absences."""
    report = fidelity("inspect", EXAMPLES / "inspect-aef" / "run")
    assert report.ok, report.summary()
    texts = sorted(report.fields["results:reasoning.blob"].losses)  # typed absences' lines, and the failed one's
    assert [t.split(":")[0][:48] for t in texts] == ["A typed absence's reason",
                                                     "The reason and reasoning of a line that is not a"]
    # without aefgate's item, the page's item for typed absences does not excuse the failed line's loss
    import dataclasses

    narrowed = Registry([dataclasses.replace(c, losses=tuple(x for x in c.losses if x.lines != "not_typed_absence"))
                         for c in registry().converters])
    report = fidelity("inspect", EXAMPLES / "inspect-aef" / "run", reg=narrowed)
    assert "results:reasoning.blob" in report.undeclared
    report = fidelity("aep", EXAMPLES / "aef-inspect" / "run", options={"max_capture": "none"})
    assert report.ok and "results:order" not in report.fields  # no line came back: no order to judge


def test_the_plugin_assertion_names_a_refusal():
    from aefgate.testing import assert_round_trip

    with pytest.raises(AssertionError, match=r"could not start: \[IN-1\] at run.json/suite"):
        assert_round_trip(EXAMPLES / "otel-aef" / "run", "inspect")


def test_a_run_the_export_refuses_is_refused_by_rule():
    with pytest.raises(Refusal) as e:
        fidelity("inspect", EXAMPLES / "otel-aef" / "run")
    assert e.value.rule == "IN-1"


def test_a_loss_applies_under_its_options_only():
    """At the full ceiling the AEP export carries free text: the loss of a reason is declared below it only."""
    loss = next(x for x in registry().between("aef", "aep").losses if x.when)
    assert loss.applies({"max_capture": "metadata"}) and not loss.applies({"max_capture": "full"})
    report = fidelity("aep", EXAMPLES / "aef-inspect" / "run", options={"max_capture": "full"})
    assert report.ok, report.summary()
    assert loss not in report.losses


# -- the source cycle: Inspect -> AEF -> Inspect -------------------------------------------------------------------


def test_a_loss_when_an_option_is_given():
    """``GIVEN`` in a loss's ``when``: the option given, whatever its value (not None, empty or False)."""
    from aefgate.converters.registry import GIVEN, Loss

    loss = Loss("x", ("run.json:suite.ref",), when={"task": (GIVEN,)})
    assert loss.applies({"task": "routes"}) and loss.applies({"task": "other"})
    assert not loss.applies({"task": None}) and not loss.applies({"task": ""}) and not loss.applies({})
    assert loss.to_json()["when"] == [{"task": ["(given)"]}]


def test_the_source_cycle_takes_the_import_converters_round_trip_options(tmp_path: Path):
    """The import step of FORMAT -> AEF -> FORMAT takes its converter's ``round_trip_options`` unless the caller gives
    the option (Inspect: ``lossless``), as the export takes its own."""
    seen: list[dict] = []
    imp = registry().between("inspect", "aef")

    def spy(src, dst, **kw):
        seen.append(kw)
        return imp.run(src, dst, **kw)

    import dataclasses

    reg = Registry([dataclasses.replace(c, run=spy, round_trip_options={"lossless": True, "grader_types": True})
                    if c.name == imp.name else c for c in registry().converters])
    log = SAMPLES / "inspect" / "basic.eval"
    fidelity_from_source("inspect", log, reg=reg)
    fidelity_from_source("inspect", log, reg=reg, options={"grader_types": False})
    assert [(kw["lossless"], kw["grader_types"]) for kw in seen] == [(True, True), (True, False)]


@pytest.mark.parametrize("log", INSPECT_LOGS)
def test_inspect_source_cycle_keeps_samples_ids_epochs_scores_and_content(log: str, tmp_path: Path):
    """The log written back is read by inspect-ai itself and holds the original's samples, ids, epochs, scores,
    input, target and output text; every other loss is declared."""
    from inspect_ai.log import read_eval_log

    from aefgate.converters.registry import find_route, run_route

    src = SAMPLES / "inspect" / log
    report = fidelity_from_source("inspect", src)
    assert report.ok, report.summary()
    for f in ("samples:(record)", "samples:id", "samples:epoch", "samples:input", "samples:target"):
        assert f in report.kept, f
    # the same trip by hand, read back by inspect_ai
    run = run_route(find_route("inspect", "aef"), src, tmp_path / "run", {"at": AT})
    back = run_route(find_route("aef", "inspect"), run, tmp_path / f"back{src.suffix}", {"output_from_evidence": True})
    orig, got = read_eval_log(str(src)), read_eval_log(str(back))
    key = lambda s: (str(s.id), s.epoch)  # noqa: E731
    a, b = sorted(orig.samples, key=key), sorted(got.samples, key=key)
    assert [key(s) for s in a] == [key(s) for s in b]
    for sa, sb in zip(a, b):
        assert sa.input == sb.input and sa.target == sb.target
        assert sa.output.completion == sb.output.completion
        # (lossless, the default: a sample stopped before it was scored comes back unscored, as it was; the page's
        # mapping gives it one unscored Score per scorer, IN-8: test_inspect_lossless)
        assert set(sa.scores or {}) == set(sb.scores or {}), key(sa)
        for name, score in (sa.scores or {}).items():
            va, vb = score.value, sb.scores[name].value
            assert va == vb or (isinstance(va, float) and math.isnan(va) and math.isnan(vb)), (key(sa), name)


def test_export_refuses_cited_output_by_default_and_rebuilds_it_on_request(tmp_path: Path):
    from aefgate.converters.inspect.exporter import export_run

    run = EXAMPLES / "inspect-aef" / "run"
    with pytest.raises(Refusal) as e:
        export_run(run)
    assert e.value.rule == "IN-5"
    _header, samples = export_run(run, output_from_evidence=True)
    log = EXAMPLES / "inspect-aef" / "log.json"
    import json

    orig = {(str(s["id"]), s["epoch"]): s for s in json.loads(log.read_text())["samples"]}
    for s in samples:
        o = orig[(str(s["id"]), s["epoch"])]
        if o.get("output", {}).get("choices"):
            assert same(s["output"], o["output"])


# -- a converter that drops a field it does not declare -------------------------------------------------------------

@pytest.fixture
def broken_dist(tmp_path: Path, monkeypatch) -> Path:
    root = write_broken(tmp_path / "site")
    monkeypatch.syspath_prepend(str(root))
    return root


def test_a_converter_dropping_an_undeclared_field_fails_naming_it(broken_dist: Path, imported_runs):
    run = imported_runs["basic.json"]
    report = fidelity("brokenlog", run, reg=Registry.discover())
    assert not report.ok
    assert report.undeclared == ["results:durationMs"], report.summary()
    assert "lost but not declared: results:durationMs" in report.summary()
    src = fidelity_from_source("brokenlog", SAMPLES / "inspect" / "basic.json", reg=Registry.discover())
    assert src.undeclared == ["samples:total_time"], src.summary()
    # the command line: exit 1, the field named, in both renderings
    r = aefgate("fidelity", "brokenlog", run, "--json", extra_path=broken_dist)
    assert r.returncode == 1, r.stderr
    doc = one_json(r.stdout)
    assert doc["ok"] is False and doc["undeclared"] == ["results:durationMs"]
    r = aefgate("fidelity", "brokenlog", "--from-source", SAMPLES / "inspect" / "basic.json", extra_path=broken_dist)
    assert r.returncode == 1
    assert "LOST, NOT DECLARED" in r.stderr and "samples:total_time" in r.stderr


# -- the command line ----------------------------------------------------------------------------------------------


def test_cli_fidelity_json_is_one_value_and_exit_0(imported_runs):
    r = aefgate("fidelity", "inspect", imported_runs["epochs_mean.eval"], "--json")
    assert r.returncode == 0, r.stderr
    doc = one_json(r.stdout)
    assert doc["ok"] is True and doc["cycle"] == "aef -> inspect -> aef" and doc["undeclared"] == []
    assert all(x["declared"] for x in doc["lost"])
    r = aefgate("fidelity", "aep", EXAMPLES / "aef-inspect" / "run", "--opt", "max_capture=full")
    assert r.returncode == 0, r.stderr
    assert "only declared losses" in r.stderr


@pytest.mark.parametrize("args,rule", [
    (["fidelity", "inspect"], "CLI-2"),
    (["fidelity", "nosuch", str(EXAMPLES / "aef-inspect" / "run")], "CONV-1"),
    (["fidelity", "nosuch", "/nonexistent-run"], "CONV-1"),
    (["fidelity", "inspect", str(EXAMPLES / "aef-inspect" / "run"), "--opt", "nosuch=1"], "CONV-3"),
    (["fidelity", "inspect", "--from-source", "/nonexistent.eval"], "CLI-1"),
    (["fidelity", "aep", "--from-source", str(SAMPLES / "inspect" / "basic.json")], "CONV-2"),
])
def test_cli_fidelity_refusals(args, rule):
    r = aefgate(*args, "--json")
    assert r.returncode == 2, r.stderr
    assert one_json(r.stdout)["error"]["rule"] == rule
    assert "Traceback" not in r.stderr


# -- declarations ---------------------------------------------------------------------------------------------------


def _page_items(path: Path, heading: str) -> list[str]:
    text = path.read_text()
    part = text.split(heading, 1)[1]
    part = part.split("\n**", 1)[0] if heading.startswith("**") else part.split("\n## ", 1)[0]
    items = re.split(r"\n- ", "\n" + part.strip())
    return [" ".join(i.split()).replace("`", "") for i in items if i.strip()]


def test_inspect_page_items_are_declared():
    """Each item of the page's two lists is a declared loss (its first sentence), and each declared page item is
    on the page: one source, checked."""
    page = AEF / "interop" / "inspect.md"
    reg = registry()
    for heading, conv in (("**AEF → Inspect.**", reg.between("aef", "inspect")),
                          ("**Inspect → AEF.**", reg.between("inspect", "aef"))):
        items = _page_items(page, heading)
        declared = [x.text for x in conv.losses if x.source == "page"]
        assert len(items) == len(declared), (heading, len(items), len(declared))
        for item, text in zip(items, declared):
            head = re.split(r"[:(]", text)[0].strip()
            assert item.replace(": ", ": ").startswith(head[:25]), (item, text)


def test_field_patterns_and_loss_shape():
    """A pattern covers exactly the field of that name; its wildcards say what they cover (registry.Loss)."""
    assert field_matches("results:scores[].metric", "results:scores[].metric")  # [ ] literal
    assert field_matches("results:usage[].costSource", "results:usage[].costSource")
    assert not field_matches("results:usage[].costSource", "results:usageX].costSource")
    assert not field_matches("results:annotator", "results:annotator.promptHash")  # no prefix matching
    assert not field_matches("results:reason", "results:reasoning.blob")
    assert not field_matches("samples:scores", "samples:scores.match.value")
    # * is one path segment
    assert field_matches("samples:scores.*.explanation", "samples:scores.match.explanation")
    assert not field_matches("samples:scores.*.explanation", "samples:scores.a.b.explanation")
    assert not field_matches("samples:scores.*.explanation", "samples:scores.match.metadata.explanation")
    assert field_matches("run.json:*", "run.json:runId") and not field_matches("run.json:*", "run.json:subject.ref")
    # a trailing .** is the field and everything below it, nothing beside it
    assert field_matches("header:eval.task_args.**", "header:eval.task_args")
    assert field_matches("header:eval.task_args.**", "header:eval.task_args.n.deep")
    assert not field_matches("header:eval.task_args.**", "header:eval.task_args_passed")
    assert not field_matches("results:ext.**", "results:extra")
    # ** elsewhere: any characters
    assert field_matches("run.json:**", "run.json:subject.ref") and field_matches("a:**.x", "a:b.c.x")
    assert not field_matches("a:**.x", "a:b.c.y")
    with pytest.raises(ValueError):
        Loss("x", lines="sometimes")
    for c in registry().converters:  # every declared field names a field the harness writes
        for loss in c.losses:
            for f in loss.fields:
                assert re.match(r"(run\.json|file|results|header|samples|results|reductions|stats|response):", f), \
                    (c.name, f)


# -- a declaration never hides a field it does not name -------------------------------------------------------------


def _unsealed_copy(run: Path, dst: Path) -> Path:
    """A writable, unsealed copy of a sealed example run (a test changes its lines, then seals it again)."""
    from tests._shared import copy_run

    out = copy_run(run, dst)
    for name in ("seal.json", "attestation.dsse.json"):
        (out / name).unlink(missing_ok=True)
    return out


def _reseal(run: Path) -> Path:
    from aefgate.aef.sealer import seal_run

    seal_run(run, sealed_by="producer")
    return run


def _with_losses(fmt_pair: tuple[str, str], replace: dict[str, tuple[str, ...]], **hooks) -> Registry:
    """The installed registry with the losses of the converter ``fmt_pair`` (source, target) whose fields are a
    key of ``replace`` declaring those fields instead, and the given hooks (``run=``) replaced."""
    import dataclasses

    out = []
    for c in registry().converters:
        if (c.source, c.target) == fmt_pair:
            losses = tuple(dataclasses.replace(x, fields=replace.get(tuple(x.fields), x.fields)) for x in c.losses)
            c = dataclasses.replace(c, losses=losses, **hooks)
        out.append(c)
    return Registry(out)


def test_a_declared_ext_member_does_not_hide_another(tmp_path: Path):
    """AEF -> AEP -> AEF drops a line's ext. Declared as ``results:ext.**`` (the page's item: a line's ext), a
    planted member is declared; declared for one member only, the planted one is reported undeclared."""
    import json

    run = _unsealed_copy(EXAMPLES / "aef-inspect" / "run", tmp_path / "run")
    lines = (run / "results.ndjson").read_text().splitlines()
    first = json.loads(lines[0])
    first.setdefault("ext", {})["planted.member"] = {"x": 1}
    (run / "results.ndjson").write_text("\n".join([json.dumps(first)] + lines[1:]) + "\n")
    _reseal(run)
    report = fidelity("aep", run)
    assert report.ok, report.summary()
    assert report.fields["results:ext.planted.member"].declared == 1
    reg = _with_losses(("aef", "aep"), {("results:ext.**", "results:annotator.promptHash"):
                                        ("results:ext.inspect_ai", "results:annotator.promptHash")})
    report = fidelity("aep", run, reg=reg)
    assert "results:ext.planted.member" in report.undeclared, report.summary()
    assert "results:ext.inspect_ai" not in report.undeclared


def _changed_export(change):
    """An Inspect export (to ``.json``) whose log ``change(doc)`` alters after it is written."""
    import json

    exp = registry().between("aef", "inspect")

    def run(src, dst, **kw):
        exp.run(src, dst, **kw)
        doc = json.loads(Path(dst).read_text())
        change(doc)
        Path(dst).write_text(json.dumps(doc))

    return run


def test_a_declared_score_explanation_does_not_hide_its_metadata():
    """The source cycle, with a Score.metadata member changed on the way back: a loss declared for
    ``samples:scores.*.explanation`` does not cover ``samples:scores.<scorer>.metadata.<member>``; a member that
    appears only on the way back is a difference too (undeclared unless a loss covers it)."""

    def change(doc):
        for sample in doc["samples"]:
            for score in (sample.get("scores") or {}).values():
                score["metadata"] = {**(score.get("metadata") or {}), "planted": "changed"}
            sample["planted_member"] = 1

    import dataclasses

    reg = _with_losses(("aef", "inspect"), {}, run=_changed_export(change))
    only = (Loss("the explanation", ("samples:scores.*.explanation",)),)  # the one declaration of this trip
    reg = Registry([dataclasses.replace(c, losses=only) if "inspect" in (c.source, c.target) else c
                    for c in reg.converters])
    report = fidelity_from_source("inspect", SAMPLES / "inspect" / "basic.json", reg=reg)
    assert set(report.losses) == set(only)  # (once from each direction)
    planted = [f for f in report.fields if f.startswith("samples:scores.") and f.endswith(".metadata.planted")]
    assert planted and set(planted) <= set(report.undeclared), report.summary()
    assert "samples:planted_member" in report.undeclared and "samples:planted_member" in report.added


def test_the_aef_cycle_counts_what_only_the_way_back_has(tmp_path: Path):
    """A member only on the way back is a difference of that field, except what an import adds by the
    specification (imported, [RUN-15]; the ingest seal): fidelity.ADDED_BY_IMPORT, docs/design/converters.md."""
    from aefgate.converters.fidelity import ADDED_BY_IMPORT

    assert ADDED_BY_IMPORT == ("run.json:imported.**", "file:seal.json")
    report = fidelity("aep", EXAMPLES / "aef-inspect" / "run", options={"max_capture": "full"})
    assert report.ok, report.summary()
    # a line with a reasoning blob and no reason gets one on the way back: counted, and declared by the page's item
    c = report.fields["results:reason"]
    assert c.declared >= 1 and not c.undeclared and "results:reason" in report.added


def test_a_refusal_of_the_way_back_names_the_run_and_the_step_not_temporary_files(tmp_path: Path):
    """The way back of a trip is refused at a place in the trip's temporary folder: the report names the run given,
    the step, and the export's line, never the temporary folder (removed when the trip ends)."""
    exp = registry().between("aef", "aep")

    def broken(src, dst, **kw):
        exp.run(src, dst, **kw)
        with open(dst, "a") as f:
            f.write("{not json\n")

    run = EXAMPLES / "aef-inspect" / "run"
    report = fidelity("aep", run, reg=_with_losses(("aef", "aep"), {}, run=broken))
    r = report.refusal
    assert r is not None and not report.ok
    assert r.where == str(run), r
    assert "aefgate-fidelity-" not in r.message and "/tmp/" not in r.message, r
    assert r.message.startswith("step 2 of aef -> aep -> aef (aep-to-aef"), r
    assert "its aep export" in r.message, r
