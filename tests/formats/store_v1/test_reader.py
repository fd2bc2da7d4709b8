"""The store v1 reader (aefgate.formats.store_v1): the .NET values read exactly, the sample workspace read as
FORMAT.md describes it, and every refusal naming its rule and the file at fault (workspaces built in tmp_path with
the store's real layout)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from aefgate.errors import Refusal
from aefgate.formats.store_v1.reader import (
    compliance_index,
    locate_run_folder,
    native_links,
    open_workspace,
    read_run,
    source_digest,
)
from aefgate.formats.store_v1.dotnet import add_ns, timespan_ns, utc_time
from tests.formats.store_v1.workspace import (
    RUN1,
    RUN2,
    SAMPLE,
    Store,
    assertion,
    copy_sample,
    dotnet,
    scenario,
    tree,
    tree_output,
)

# -- values ---------------------------------------------------------------------------------------------------------


def test_datetimeoffset_to_utc_keeps_the_instant_and_the_digits():
    assert utc_time("2026-05-20T09:14:07.4137251+00:00") == "2026-05-20T09:14:07.4137251Z"
    assert utc_time("2026-05-20T01:14:07.5+02:30") == "2026-05-19T22:44:07.5Z"
    assert utc_time("2026-12-31T23:30:00-01:00") == "2027-01-01T00:30:00Z"
    assert utc_time("2026-05-20T09:14:07Z") == "2026-05-20T09:14:07Z"
    for bad in ("2026-02-31T00:00:00+00:00", "2026-05-20 09:14:07+00:00", "2026-05-20T09:14:07", "x",
                "2026-05-20T24:00:00+00:00", "2026-05-20T09:14:07+15:00"):
        with pytest.raises(ValueError):
            utc_time(bad)


def test_timespan_c_format_and_exact_addition():
    assert timespan_ns("00:00:48.2164093") == 48_216_409_300
    assert timespan_ns("1.02:03:04") == ((26 * 60 + 3) * 60 + 4) * 10**9
    assert timespan_ns("-00:00:01") == -(10**9)
    for bad in ("0:0:1", "00:60:00", "00:00:01.12345678", "P1D"):
        with pytest.raises(ValueError):
            timespan_ns(bad)
    # the sample's run: 09:14:07.4137251 + 48.2164093 s, no rounding anywhere
    assert add_ns("2026-05-20T09:14:07.4137251Z", 48_216_409_300) == "2026-05-20T09:14:55.6301344Z"
    assert add_ns("2026-12-31T23:59:59.9Z", 100_000_000) == "2027-01-01T00:00:00Z"
    assert add_ns("2026-01-01T00:00:00.10Z", 0) == "2026-01-01T00:00:00.10Z"


# -- the sample workspace ---------------------------------------------------------------------------------------------


def test_the_sample_reads_as_format_md_describes_it():
    ws = open_workspace(SAMPLE.parent)  # the folder holding .agenteval is accepted too
    assert ws.path == SAMPLE
    refs = ws.runs()
    assert [r.run_id for r in refs] == [RUN1, RUN2] and {r.subject_kind for r in refs} == {"agent"}
    index, bad = compliance_index(ws)
    assert bad == [] and list(index) == [RUN1]
    assert index[RUN1][0].scenario_refs == ["gdpr-erasure", "tone-escalation"]
    r1 = read_run(ws, refs[0], compliance=index[RUN1])
    assert r1.completed and r1.verdict == "FAIL" and r1.run_kind == "eval" and r1.agenteval_version == "0.43.0.0"
    assert r1.started_at == "2026-05-20T09:14:07.4137251Z" and r1.duration_ns == 48_216_409_300
    assert r1.machine == "fv-az1742-318" and r1.subject_name == "Support Agent" and r1.subject_version == "1.4.2"
    assert [s.id for s in r1.scenarios] == ["gdpr-erasure", "refund-order", "tone-escalation"]  # file-name order
    gdpr, refund, tone = r1.scenarios
    assert gdpr.tree is not None and (gdpr.tree.metric_key, gdpr.tree.label, gdpr.tree.severity) == \
        ("gdpr.art17", "fail", "medium")
    assert refund.tree is None and [a.outcome for a in refund.assertions] == \
        ["passed", "passed", "failed", "inconclusive"]
    assert tone.tree.label == "error" and tone.tree.summary.startswith("Judge response was not valid JSON")
    assert r1.trace is not None and r1.trace.scenario_id == "refund-order" and r1.other_files == []
    r2 = read_run(ws, refs[1], compliance=[])
    assert not r2.completed and r2.summary is None and r2.verdict == "PENDING"
    ws2, ref2 = locate_run_folder(refs[1].path)
    assert ws2.path == SAMPLE and ref2 == refs[1]
    assert native_links(ws) == {}


def test_workspace_and_run_folder_refusals(tmp_path: Path):
    (tmp_path / "empty").mkdir()
    for call, where in ((lambda: open_workspace(tmp_path / "empty"), "empty"),
                        (lambda: open_workspace(tmp_path / "nope"), "nope"),
                        (lambda: locate_run_folder(tmp_path / "empty"), "empty"),
                        (lambda: locate_run_folder(SAMPLE), ".agenteval"),
                        (lambda: open_workspace(SAMPLE).find_run("2026-01-01_00-00-00_00000000"), ".agenteval")):
        with pytest.raises(Refusal) as e:
            call()
        assert e.value.rule == "SV1-1" and e.value.where.endswith(where), e.value


# -- refusals in built workspaces ---------------------------------------------------------------------------------


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / ".agenteval")


def _read(store: Store, run_id: str):
    ws = open_workspace(store.root)
    return read_run(ws, ws.find_run(run_id))


def test_truncated_json_names_the_file(store: Store):
    subj = store.subject("Bot")
    rdir = store.run(subj, "2026-06-01_10-00-00_aaaaaaaa", [scenario("s1")])
    f = rdir / "scenarios" / "s1.json"
    f.write_bytes(f.read_bytes()[:-20])
    with pytest.raises(Refusal) as e:
        _read(store, "2026-06-01_10-00-00_aaaaaaaa")
    assert e.value.rule == "SV1-3" and e.value.where == str(f) and "truncated" in e.value.message


def test_missing_subject_json(store: Store):
    subj = store.subject("Bot", subject_json=False)
    store.run(subj, "2026-06-01_10-00-00_aaaaaaaa", [scenario("s1")], name="Bot")
    with pytest.raises(Refusal) as e:
        _read(store, "2026-06-01_10-00-00_aaaaaaaa")
    assert e.value.rule == "SV1-4" and e.value.where == str(subj / "subject.json")


def test_links_out_of_the_workspace_are_never_followed(store: Store, tmp_path: Path):
    subj = store.subject("Bot")
    rdir = store.run(subj, "2026-06-01_10-00-00_aaaaaaaa", [scenario("s1")])
    outside = tmp_path / "outside.json"
    outside.write_bytes(dotnet(scenario("s2")))
    link = rdir / "scenarios" / "s2.json"
    link.symlink_to(outside)
    with pytest.raises(Refusal) as e:
        _read(store, "2026-06-01_10-00-00_aaaaaaaa")
    assert e.value.rule == "SV1-2" and e.value.where == str(link)
    # a link that stays inside the workspace is followed
    link.unlink()
    inside = store.root / "kept.json"
    inside.write_bytes(dotnet(scenario("s2")))
    link.symlink_to(inside)
    assert [s.id for s in _read(store, "2026-06-01_10-00-00_aaaaaaaa").scenarios] == ["s1", "s2"]
    # a pipe is never opened
    link.unlink()
    os.mkfifo(rdir / "scenarios" / "s3.json")
    with pytest.raises(Refusal) as e:
        _read(store, "2026-06-01_10-00-00_aaaaaaaa")
    assert e.value.rule == "SV1-2" and e.value.where.endswith("s3.json")


def test_a_run_folder_linked_out_of_the_workspace(store: Store, tmp_path: Path):
    subj = store.subject("Bot")
    elsewhere = tmp_path / "elsewhere" / "2026-06-01_10-00-00_bbbbbbbb"
    elsewhere.mkdir(parents=True)
    (subj / "runs" / "2026-06-01_10-00-00_bbbbbbbb").symlink_to(elsewhere)
    with pytest.raises(Refusal) as e:
        open_workspace(store.root).find_run("2026-06-01_10-00-00_bbbbbbbb")
    assert e.value.rule == "SV1-2" and e.value.where.endswith("runs/2026-06-01_10-00-00_bbbbbbbb")


def test_tolerant_where_agenteval_is(store: Store):
    subj = store.subject("Bot")
    sc = scenario("s1", assertions=[{"assertion": "A", "passed": False}])  # no outcome: derived from passed
    rdir = store.run(subj, "2026-06-01_10-00-00_aaaaaaaa", [sc])
    f = rdir / "scenarios" / "s1.json"
    text = f.read_text()
    # a byte-order mark, an unknown member, a member given twice (the last one counts), an enum in another case
    f.write_bytes(b"\xef\xbb\xbf" + text.replace('"id": "s1",', '"id": "old", "id": "s1", "customField": 7,')
                  .encode())
    m = rdir / "manifest.json"
    m.write_text(m.read_text().replace('"kind": "agent"', '"kind": "Agent"', 1))
    run = _read(store, "2026-06-01_10-00-00_aaaaaaaa")
    (s,) = run.scenarios
    assert s.id == "s1" and s.extra == {"customField": 7} and s.assertions[0].outcome == "failed"
    assert run.subject_kind == "agent"


@pytest.mark.parametrize("change, rule, where", [
    (lambda sc: sc.pop("id"), "SV1-5", "s1.json"),
    (lambda sc: sc.update(passed="yes"), "SV1-5", "s1.json"),
    (lambda sc: sc.update(duration="-00:00:01"), "SV1-6", "s1.json"),
    (lambda sc: sc.update(estimatedCost=-1), "SV1-6", "s1.json"),
    (lambda sc: sc.update(id="a\u0007b"), "SV1-7", "s1.json"),
    (lambda sc: sc.update(assertions=[{"assertion": "A", "passed": True, "outcome": "failed"}]), "SV1-6",
     "s1.json (assertion 1)"),
    (lambda sc: sc.update(assertions=[{"assertion": "A", "passed": False, "outcome": "maybe"}]), "SV1-5",
     "s1.json (assertion 1)"),
    (lambda sc: sc.update(output=tree_output(tree("k", "pass", severity="dire"))), "SV1-8", "its output's"),
    (lambda sc: sc.update(output='{"metric":{"key":"k"},"score":{"label":"pass","passed":true}}'), "SV1-8",
     "its output's"),
    (lambda sc: sc.update(comparability={"evalKey": "k"}), "SV1-5", "s1.json"),
])
def test_scenario_refusals(store: Store, change, rule, where):
    subj = store.subject("Bot")
    sc = scenario("s1")
    change(sc)
    store.run(subj, "2026-06-01_10-00-00_aaaaaaaa", [sc], files=["s1"])
    with pytest.raises(Refusal) as e:
        _read(store, "2026-06-01_10-00-00_aaaaaaaa")
    assert e.value.rule == rule and where in e.value.where, e.value


def test_output_that_only_looks_like_json_is_the_agents(store: Store):
    subj = store.subject("Bot")
    store.run(subj, "2026-06-01_10-00-00_aaaaaaaa", [scenario("a", output='{"answer": 42}'),
                                                     scenario("b", output="{not json"),
                                                     scenario("c", output=tree_output(tree("k", "warn")))])
    a, b, c = _read(store, "2026-06-01_10-00-00_aaaaaaaa").scenarios
    assert a.tree is None and b.tree is None and c.tree is not None and c.tree.label == "warn"


def test_two_scenarios_with_one_id(store: Store):
    subj = store.subject("Bot")
    rdir = store.run(subj, "2026-06-01_10-00-00_aaaaaaaa", [scenario("s1")])
    (rdir / "scenarios" / "copy.json").write_bytes((rdir / "scenarios" / "s1.json").read_bytes())
    with pytest.raises(Refusal) as e:
        _read(store, "2026-06-01_10-00-00_aaaaaaaa")
    assert e.value.rule == "SV1-7" and e.value.where.endswith("s1.json")


@pytest.mark.parametrize("trace, rule", [
    (b'{"runId":"2026-06-01_10-00-00_aaaaaaaa","scenarioId":"s1","events":[{"kind":"x"', "SV1-3"),
    (b'{"runId":"2026-06-01_10-00-00_aaaaaaaa","scenarioId":"s1","events":[{"payload":"\xff"}]}', "SV1-3"),
    (b'[{"runId":"2026-06-01_10-00-00_aaaaaaaa"}]', "SV1-3"),
    (b'{"runId":"2026-06-01_10-00-00_aaaaaaaa","scenarioId":"s1","events":{}}', "SV1-5"),
    (b'{"runId":"2026-06-01_10-00-00_aaaaaaaa","events":[]}', "SV1-5"),
    (b'{"runId":"2026-06-01_10-00-00_zzzzzzzz","scenarioId":"s1","events":[]}', "SV1-6"),
])
def test_trace_refusals(store: Store, trace: bytes, rule: str):
    subj = store.subject("Bot")
    rdir = store.run(subj, "2026-06-01_10-00-00_aaaaaaaa", [scenario("s1")],
                     trace={"scenarioId": "s1", "events": []})
    (rdir / "traces" / "agent-trace.json").write_bytes(trace)
    with pytest.raises(Refusal) as e:
        _read(store, "2026-06-01_10-00-00_aaaaaaaa")
    assert e.value.rule == rule and e.value.where.endswith("agent-trace.json")


@pytest.mark.parametrize("edit, rule", [
    (lambda m: m["run"].pop("timestamp"), "SV1-5"),
    (lambda m: m["run"].update(timestamp="2026-02-30T00:00:00+00:00"), "SV1-6"),
    (lambda m: m["run"].update(runId="2026-06-01_10-00-00_cccccccc"), "SV1-1"),
    (lambda m: m["subject"].update(kind="workflow"), "SV1-6"),
    (lambda m: m.update(schemaVersion="2.0"), "SV1-6"),
    (lambda m: m.pop("agentEval"), "SV1-5"),
])
def test_manifest_refusals(store: Store, edit, rule):
    import json

    subj = store.subject("Bot")
    rdir = store.run(subj, "2026-06-01_10-00-00_aaaaaaaa", [scenario("s1")])
    m = json.loads((rdir / "manifest.json").read_text())
    edit(m)
    (rdir / "manifest.json").write_bytes(dotnet(m))
    with pytest.raises(Refusal) as e:
        _read(store, "2026-06-01_10-00-00_aaaaaaaa")
    assert e.value.rule == rule and e.value.where == str(rdir / "manifest.json"), e.value


def test_compliance_documents_that_do_not_read_are_reported(store: Store):
    doc = store.compliance("gdpr", "Bot", "2026-06-01_10-05-00", "2026-06-01_10-00-00_aaaaaaaa", ["s1"])
    doc.write_bytes(doc.read_bytes()[:40])
    index, bad = compliance_index(open_workspace(store.root))
    assert index == {} and [(b.rule, b.where) for b in bad] == [("SV1-3", str(doc))]


def test_source_digest_follows_every_source_byte(tmp_path: Path):
    ws_path = copy_sample(tmp_path)
    ws = open_workspace(ws_path)
    ref = ws.find_run(RUN1)
    docs = compliance_index(ws)[0][RUN1]
    first = source_digest(ws, ref, docs)
    assert first == source_digest(ws, ref, docs) and first[1] == 7  # manifest, summary, 3 scenarios, trace, 1 doc
    docs[0].path.write_bytes(docs[0].path.read_bytes() + b" ")
    assert source_digest(ws, ref, docs)[0] != first[0]  # the compliance document is part of the run's source
    (ref.path / "reports").mkdir()
    (ref.path / "reports" / "report.md").write_text("# report")
    assert source_digest(ws, ref, docs)[1] == 8


def test_native_links_found_imported_ignored(tmp_path: Path):
    import json

    ws_path = copy_sample(tmp_path)
    native = ws_path / "aef" / "runs" / "2026" / "05" / "native-1"
    native.mkdir(parents=True)
    (native / "run.json").write_text(json.dumps({"runId": "native-1", "ext": {"agenteval.store-v1": {"runId": RUN1}}}))
    imported = ws_path / "aef" / "runs" / "2026" / "05" / "imp-1"
    imported.mkdir(parents=True)
    (imported / "run.json").write_text(json.dumps({"runId": "imp-1", "imported": {"from": "x", "asserted": []},
                                                   "ext": {"agenteval.store-v1": {"runId": RUN2}}}))
    (ws_path / "aef" / "runs" / "2026" / "05" / "broken").mkdir()
    (ws_path / "aef" / "runs" / "2026" / "05" / "broken" / "run.json").write_text("{")
    assert native_links(open_workspace(ws_path)) == {RUN1: [native]}


def test_assertion_helper_invariant():
    # the helper writes what AgentEval writes (passed exactly when the outcome is passed)
    assert assertion("A", "inconclusive") == {"assertion": "A", "message": None, "passed": False,
                                              "outcome": "inconclusive"}
