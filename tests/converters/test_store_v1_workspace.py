"""``import store-v1 --all`` over a whole workspace (issue 29): every folder and file that is no run is listed with
its reason (``notMigrated`` in ``--json``, ``not migrated: ...`` on stderr), never skipped in silence, and the exit
code stays 0 when every run migrated (docs/mappings/store-v1.md, "What --all does not migrate"). The real
``benchmarks/`` folder AgentEval wrote (``../shared/samples/peers-legacy``) is copied into the store-v1 sample.

And the output folder's own files (issue 28): a ``run.json`` of ``OUT_DIR`` or a line of a batch journal nested
10,000 deep is read by AEF's strict reader, never by raw msgspec (which raised RecursionError: an internal error).

Every expected value below is written by hand from the page and the files; none is computed by aefgate."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from aefgate.converters import batch
from aefgate.converters.store_v1.migrate import existing_migrations, migrate_all
from aefgate.errors import Refusal
from aefgate.aef.verifier import verify_run
from tests.conftest import aefgate, one_json
from tests.formats.store_v1.workspace import RUN1, RUN2, SAMPLES, copy_sample

AT = "2026-12-01T00:00:00Z"
BENCHMARKS = SAMPLES / "peers-legacy" / "agenteval-9e73b571" / ".agenteval" / "benchmarks"
SUBJ = "subjects/agents/Support Agent"
DEEP = b"[" * 10_000 + b"]" * 10_000  # 10,000 levels: past Python's recursion limit, where raw msgspec crashed

NOT_71 = "not a store v1 run, and spec 07 §7.5 maps none"
# what the sample workspace itself holds beside its runs (its files: ../shared/samples/store-v1/.agenteval)
SAMPLE_NOT_MIGRATED = {
    ".gitignore": ("file", None, "workspace-template", "written by agenteval init: not evidence"),
    "README.md": ("file", None, "workspace-template", "written by agenteval init: not evidence"),
    "runs-index": ("folder", 1, "runs-index", "the runs index (a pointer per completed run): repeats what the runs "
                   "hold; read only to warn about a run it names that the workspace does not hold"),
    "solution.json": ("file", None, "solution.json", "the solution's identity: read and checked, not a run (each "
                      "run's manifest carries its own copy, kept in the run's ext)"),
    f"{SUBJ}/history.jsonl": ("file", None, "history.jsonl", "the subject's history (a line per completed run): "
                              "repeats what the runs hold"),
    f"{SUBJ}/subject.json": ("file", None, "subject.json", "the subject's record: read and checked for each of its "
                             "runs, not mapped (the manifest's subject is)"),
    f"{SUBJ}/subject.json.lock": ("file", None, "subject.json.lock", "AgentEval's lock sentinel (empty): not "
                                  "evidence"),
}


def _writable(p: Path) -> None:
    for q in [p, *p.rglob("*")]:
        q.chmod(0o755 if q.is_dir() else 0o644)


def _entries(report: dict) -> dict[str, tuple]:
    out = {}
    for x in report["notMigrated"]:
        assert x["path"] not in out, f"{x['path']} listed twice"
        out[x["path"]] = (x["type"], x.get("files"), x["what"], x["reason"])
    return out


def _human(path: str, type_: str, files: int | None, reason: str) -> str:
    """The stderr line, as the page writes it."""
    n = f" ({files} file{'' if files == 1 else 's'})" if type_ == "folder" else ""
    return f"not migrated: {path}{'/' if type_ == 'folder' else ''}{n}: {reason}"


def test_all_lists_benchmarks_red_team_and_stray_files_and_migrates_the_runs(tmp_path: Path):
    ws = copy_sample(tmp_path)
    shutil.copytree(BENCHMARKS, ws / "benchmarks")  # the real files AgentEval wrote, byte for byte
    _writable(ws / "benchmarks")
    assert sorted(p.relative_to(ws).as_posix() for p in (ws / "benchmarks").rglob("*") if p.is_file()) == [
        "benchmarks/memoryagent/baselines/2026-03-23_memory-optimized-prompt.json",
        "benchmarks/memoryagent/manifest.json"]
    camp = ws / "red-team" / "support-jailbreak_2026-05-22_10-00-00"  # FORMAT.md §1: <campaign>_<ts>/{...}
    (camp / "reports").mkdir(parents=True)
    (camp / "manifest.json").write_text('{"schemaVersion": "1.0", "campaign": "support-jailbreak"}')
    (camp / "findings.json").write_text('{"findings": []}')
    (camp / "reports" / "report.md").write_text("# red team\n")
    (ws / "notes.txt").write_text("stray\n")
    out = tmp_path / "out"

    p = aefgate("import", "store-v1", "--all", ws, out, "--at", AT, "--json")
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr
    report = one_json(p.stdout)
    assert report["counts"] == {"migrated": 2, "re-migrated": 0, "skipped": 0, "refused": 0}
    assert [r["runId"] for r in report["runs"]] == [RUN1, RUN2]
    for run_id in (RUN1, RUN2):
        v = verify_run(out / run_id)
        assert v.outcome == "intact", v.problems
    assert sorted(x.name for x in out.iterdir()) == [RUN1, RUN2]

    expected = {
        **SAMPLE_NOT_MIGRATED,
        "benchmarks": ("folder", 2, "benchmarks", "AgentEval benchmark results (memory-benchmark baselines, agentic "
                       f"benchmarks): {NOT_71}"),
        "notes.txt": ("file", None, "unknown", "not part of AgentEval's store v1 layout: not read"),
        "red-team": ("folder", 3, "red-team", f"AgentEval red-team campaigns (manifest, findings, reports): {NOT_71}"),
    }
    assert _entries(report) == expected
    # in the order of the walk: the top level in ordinal order, subjects/ where it falls
    assert [x["path"] for x in report["notMigrated"]] == [
        ".gitignore", "README.md", "benchmarks", "notes.txt", "red-team", "runs-index", "solution.json",
        f"{SUBJ}/history.jsonl", f"{SUBJ}/subject.json", f"{SUBJ}/subject.json.lock"]
    err = p.stderr.splitlines()
    for path, (type_, files, _what, reason) in expected.items():
        assert _human(path, type_, files, reason) in err, (path, p.stderr)

    # the human form (no --json): the same lines, and the summary counts them; a second --all skips both runs
    h = aefgate("import", "store-v1", "--all", ws, out, "--jobs", "1")
    assert h.returncode == 0 and h.stdout == "", h.stderr
    assert "0 migrated, 0 re-migrated (source changed), 2 skipped (unchanged), 0 refused, 10 not migrated" in h.stderr
    assert _human("benchmarks", "folder", 2, expected["benchmarks"][3]) in h.stderr.splitlines()


def test_non_runs_inside_subjects_and_compliance_are_named(tmp_path: Path):
    ws = copy_sample(tmp_path)
    subj = ws / SUBJ
    (ws / "subjects" / "robots" / "R2").mkdir(parents=True)  # no subject kind of store v1
    (ws / "subjects" / "robots" / "R2" / "subject.json").write_text("{}")
    (ws / "subjects" / "agents" / "stray.json").write_text("{}")  # a file where subject folders are
    (subj / "runs" / "2026-05-22_00-00-00_00000000.json").write_text("{}")  # a file where run folders are
    (subj / "baselines").mkdir()
    (subj / "baselines" / "v1.json").write_text("{}")
    (subj / "baseline.json").write_text("{}")
    (subj / "subject.json.1a2b3c4d.tmp").write_text("")
    empty = ws / "subjects" / "workflows" / "Empty Flow"  # a subject that never ran
    empty.mkdir(parents=True)
    (empty / "subject.json").write_text('{"schemaVersion": "1.0", "kind": "workflow", "name": "Empty Flow"}')
    ts = ws / "compliance" / "gdpr" / "Support Agent" / "2026-05-20_09-15-31"
    (ts / "report.pdf").write_bytes(b"%PDF-1.7\n")  # beside the document: not one
    orphan = ws / "compliance" / "gdpr" / "Support Agent" / "2026-05-25_08-00-00"
    orphan.mkdir()
    doc = json.loads((ts / "evidence.json").read_text())
    doc["sourceRun"]["runId"] = "2026-05-25_07-59-00_deadbeef"
    (orphan / "evidence.json").write_text(json.dumps(doc))
    (ws / "compliance" / "index.txt").write_text("x")
    os.symlink(tmp_path, ws / "elsewhere")  # a link out of the workspace, beside subjects/: not followed

    report = migrate_all(ws, tmp_path / "out", jobs=1, at=AT)
    assert report["counts"] == {"migrated": 2, "re-migrated": 0, "skipped": 0, "refused": 0}
    got = _entries(report)
    for path in SAMPLE_NOT_MIGRATED:
        assert got.pop(path) == SAMPLE_NOT_MIGRATED[path]
    assert got == {
        "compliance/gdpr/Support Agent/2026-05-20_09-15-31/report.pdf": (
            "file", None, "compliance-other",
            "not a compliance document: only compliance/<regulation>/<subject>/<timestamp>/evidence.json is one"),
        "compliance/gdpr/Support Agent/2026-05-25_08-00-00/evidence.json": (
            "file", None, "compliance-orphan", "a compliance document of run '2026-05-25_07-59-00_deadbeef', which "
                                               "the workspace does not hold: no run to attach it to"),
        "compliance/index.txt": (
            "file", None, "compliance-other",
            "not a compliance document: only compliance/<regulation>/<subject>/<timestamp>/evidence.json is one"),
        "elsewhere": ("link", None, "link", "a symbolic link that leads out of the workspace: not followed (SV1-2): "
                                            "not read"),
        "subjects/agents/stray.json": ("file", None, "kind-file", "a file where store v1 keeps subject folders: not a "
                                                                  "subject"),
        f"{SUBJ}/baseline.json": ("file", None, "baselines", "the subject's baselines (run summaries AgentEval "
                                                             f"compares against): {NOT_71}"),
        f"{SUBJ}/baselines": ("folder", 1, "baselines", "the subject's baselines (run summaries AgentEval compares "
                                                        f"against): {NOT_71}"),
        f"{SUBJ}/runs/2026-05-22_00-00-00_00000000.json": ("file", None, "runs-file", "a file in runs/, where store "
                                                           "v1 keeps run folders: not a run"),
        f"{SUBJ}/subject.json.1a2b3c4d.tmp": ("file", None, "tmp", "AgentEval's temporary file (a write that never "
                                                                   "finished): not read"),
        "subjects/robots": ("folder", 1, "subject-kind", "not a subject kind: store v1 keeps subjects under "
                                                         "subjects/agents and subjects/workflows only"),
        "subjects/workflows/Empty Flow": ("folder", 1, "subject-no-runs", "a subject with no run (no folder under "
                                                                          "runs/): nothing to migrate"),
    }


def test_a_run_folder_without_its_manifest_is_refused_not_listed(tmp_path: Path):
    """A folder under runs/ is a run: one without manifest.json is refused (SV1-4, exit 1), not listed."""
    ws = copy_sample(tmp_path)
    bare = ws / SUBJ / "runs" / "2026-05-22_00-00-00_0badc0de"
    (bare / "scenarios").mkdir(parents=True)
    (bare / "scenarios" / "x.json").write_text("{}")
    p = aefgate("import", "store-v1", "--all", ws, tmp_path / "out", "--at", AT, "--json")
    assert p.returncode == 1, p.stderr
    report = one_json(p.stdout)
    assert report["counts"] == {"migrated": 2, "re-migrated": 0, "skipped": 0, "refused": 1}
    row = next(r for r in report["runs"] if r["status"] == "refused")
    assert (row["runId"], row["error"]["rule"], row["error"]["where"]) == (
        "2026-05-22_00-00-00_0badc0de", "SV1-4", str(bare / "manifest.json"))
    assert not [x for x in report["notMigrated"] if "0badc0de" in x["path"]]


# -- the output folder's own files: read strictly (issue 28) ----------------------------------------------------------


def test_a_10000_deep_run_json_in_out_is_no_migration_and_all_resumes(tmp_path: Path):
    ws = copy_sample(tmp_path)
    out = tmp_path / "out"
    p = aefgate("import", "store-v1", "--all", ws, out, "--at", AT, "--json")
    assert p.returncode == 0, p.stderr
    (out / RUN1 / "run.json").write_bytes(DEEP)  # RUN1's output spoiled
    (out / "junk").mkdir()
    (out / "junk" / "run.json").write_bytes(DEEP)  # and a folder that was never a migration

    p = aefgate("import", "store-v1", "--all", ws, out, "--at", AT, "--json", "--jobs", "1")
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr and "internal" not in p.stderr + p.stdout
    report = one_json(p.stdout)
    assert report["counts"] == {"migrated": 1, "re-migrated": 0, "skipped": 1, "refused": 0}
    rows = {r["runId"]: r for r in report["runs"]}
    assert rows[RUN2]["status"] == "skipped"
    # RUN1's folder is taken (left as it is, never overwritten): the run goes to RUN1--<key>
    assert rows[RUN1]["status"] == "migrated"
    assert re.fullmatch(re.escape(str(out / RUN1)) + "--[0-9a-f]{12}", rows[RUN1]["output"]), rows[RUN1]
    assert verify_run(Path(rows[RUN1]["output"])).outcome == "intact"
    assert (out / RUN1 / "run.json").read_bytes() == DEEP and (out / "junk" / "run.json").read_bytes() == DEEP
    for folder in (RUN1, "junk"):
        w = (f"{out / folder / 'run.json'} does not read ([ENC-17] nesting deeper than 64): not taken for an earlier "
             "migration; the folder is left as it is")
        assert w in report["warnings"], report["warnings"]
        assert f"warning: {w}" in p.stderr.splitlines()


@pytest.mark.parametrize("content,rule", [
    (b'{"runId": "x", "imported": ', "ENC-1"),  # cut short
    (b'{"runId": "x", "runId": "y"}', "ENC-2"),  # a member twice
    (b'{"n": ' + b"9" * 400 + b"}", "ENC-3"),  # beyond binary64
    (b"[]", "ENC-1"),  # not an object
])
def test_existing_migrations_reads_run_json_strictly(tmp_path: Path, content: bytes, rule: str):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "run.json").write_bytes(content)
    warnings: list[str] = []
    assert existing_migrations(tmp_path, warnings) == {}
    assert len(warnings) == 1 and warnings[0].startswith(f"{tmp_path / 'a' / 'run.json'} does not read ([{rule}] ")


def test_a_10000_deep_journal_line_is_refused_by_rule(tmp_path: Path):
    """batch.StateFile (the journal of ``import inspect DIR``): a line of JSON that is none of its own is OUT-1 with
    the line, the strict reader's rule in the message; a line cut short by a crash is still ignored."""
    good = b'{"format":"inspect","input":"a.eval","folder":"a","key":"0123456789ab"}\n'
    (tmp_path / "j").write_bytes(good + b'{"format":"insp\n')
    assert batch.StateFile(tmp_path, "j", "inspect").earlier("a.eval") == [("a", "0123456789ab")]
    (tmp_path / "j").write_bytes(good + DEEP + b"\n")
    with pytest.raises(Refusal) as e:
        batch.StateFile(tmp_path, "j", "inspect")
    assert (e.value.rule, e.value.where) == ("OUT-1", f"{tmp_path / 'j'}:2")
    assert "[ENC-17] nesting deeper than 64" in e.value.message
