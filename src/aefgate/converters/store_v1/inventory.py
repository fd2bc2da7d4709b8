"""What ``import store-v1 --all`` does not migrate: every folder and file of the workspace that is not (part of) a
run it migrates, named with the reason (the report's ``notMigrated``; docs/mappings/store-v1.md, "What --all does
not migrate").

Spec 07 §7.5 maps runs (``subjects/<agents|workflows>/<subject>/runs/<run id>/``) and the compliance documents that
name them; nothing else of a workspace. So ``benchmarks/`` (AgentEval's memory-benchmark baselines and agentic
benchmarks), ``red-team/``, ``config/``, ``projects/``, ``portal/``, the runs index, a subject's baselines and
history, and anything AgentEval's layout does not know are listed here, never read. Each entry is the topmost path
not migrated (a folder stands for everything below it, its file count given), workspace-relative, in ordinal order
of the walk (top level, then ``subjects/``, then ``compliance/``).

Not listed here because they are reported elsewhere: a folder under ``runs/`` (a run: migrated, skipped unchanged,
or refused, e.g. SV1-4 without its manifest), a link out of the workspace where a run or a run's subject would be
and a compliance document that does not read (refused rows), and the files inside a run folder (the run's
migration keeps or declares them: docs/mappings/store-v1.md).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from aefgate.errors import Refusal
from aefgate.formats.store_v1.reader import ComplianceDoc, RunRef, Workspace

__all__ = ["not_migrated", "REASONS"]

_NOT_71 = "not a store v1 run, and spec 07 §7.5 maps none"

#: the reasons, by what the entry is (the keys are stable: the report's ``what``)
REASONS: dict[str, str] = {
    # the workspace's top level (FORMAT.md §1)
    "benchmarks": f"AgentEval benchmark results (memory-benchmark baselines, agentic benchmarks): {_NOT_71}",
    "red-team": f"AgentEval red-team campaigns (manifest, findings, reports): {_NOT_71}",
    "config": f"AgentEval's settings and thresholds: configuration, {_NOT_71}",
    "projects": f"AgentEval project declarations: {_NOT_71}",
    "portal": f"AgentEval portal data: {_NOT_71}",
    "runs-index": "the runs index (a pointer per completed run): repeats what the runs hold; read only to warn "
                  "about a run it names that the workspace does not hold",
    "aef": "AgentEval's native AEF output: already AEF, not migrated; read only to warn about store runs it links",
    "solution.json": "the solution's identity: read and checked, not a run (each run's manifest carries its own "
                     "copy, kept in the run's ext)",
    "workspace-template": "written by agenteval init: not evidence",
    # subjects/
    "subject-kind": "not a subject kind: store v1 keeps subjects under subjects/agents and subjects/workflows only",
    "kind-file": "a file where store v1 keeps subject folders: not a subject",
    "subject-no-runs": "a subject with no run (no folder under runs/): nothing to migrate",
    "subject.json": "the subject's record: read and checked for each of its runs, not mapped (the manifest's "
                    "subject is)",
    "subject.json.lock": "AgentEval's lock sentinel (empty): not evidence",
    "history.jsonl": "the subject's history (a line per completed run): repeats what the runs hold",
    "baselines": f"the subject's baselines (run summaries AgentEval compares against): {_NOT_71}",
    "runs-file": "a file in runs/, where store v1 keeps run folders: not a run",
    # compliance/
    "compliance-other": "not a compliance document: only compliance/<regulation>/<subject>/<timestamp>/"
                        "evidence.json is one",
    "compliance-orphan": "a compliance document of run {run_id}, which the workspace does not hold: no run to "
                         "attach it to",
    # anywhere
    "tmp": "AgentEval's temporary file (a write that never finished): not read",
    "invalid": "AgentEval's copy of a file that failed its schema validation: not read",
    "unknown": "not part of AgentEval's store v1 layout: not read",
    "link": "{message} (SV1-2): not read",
}

_TOP_FOLDERS = ("benchmarks", "red-team", "config", "projects", "portal", "runs-index", "aef")
_TOP_FILES = {"solution.json": "solution.json", "README.md": "workspace-template",
              ".gitignore": "workspace-template"}
_SUBJECT_FILES = ("subject.json", "subject.json.lock", "history.jsonl")


def _count_files(p: Path) -> int:
    n = 0
    for _dirpath, dirs, files in os.walk(p, followlinks=False):
        n += len(files) + sum(1 for d in dirs if os.path.islink(os.path.join(_dirpath, d)))
    return n


class _List:
    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        self.items: list[dict[str, Any]] = []

    def add(self, p: Path, is_dir: bool, what: str, **fmt: str) -> None:
        item: dict[str, Any] = {"path": self.ws.rel(p), "type": "folder" if is_dir else "file"}
        if is_dir:
            item["files"] = _count_files(p)
        item["what"] = what
        item["reason"] = REASONS[what].format(**fmt)
        self.items.append(item)

    def links(self, problems: list[Refusal], skip: set[str] = frozenset()) -> None:
        for r in problems:
            p = Path(r.where)
            if p.name not in skip:
                self.items.append({"path": self.ws.rel(p), "type": "link", "what": "link",
                                   "reason": REASONS["link"].format(message=r.message)})

    def generic(self, name: str, p: Path, is_dir: bool) -> None:
        if not is_dir and name.endswith(".tmp"):
            self.add(p, is_dir, "tmp")
        elif not is_dir and name.endswith(".invalid.json"):
            self.add(p, is_dir, "invalid")
        else:
            self.add(p, is_dir, "unknown")


def not_migrated(ws: Workspace, refs: list[RunRef], compliance: dict[str, list[ComplianceDoc]],
                 unreadable: list[Refusal]) -> list[dict[str, Any]]:
    """Every folder and file of ``ws`` that ``--all`` does not migrate (see the module docstring): ``{path, type
    (folder, file, link), files (a folder's), what, reason}``. ``refs`` are the runs found, ``compliance`` and
    ``unreadable`` what :func:`~aefgate.formats.store_v1.reader.compliance_index` gave."""
    out = _List(ws)
    problems: list[Refusal] = []
    top = ws.entries(ws.path, problems)
    out.links(problems)
    for name, p, is_dir in top:
        if name == "subjects" and is_dir:
            _subjects(out, p)
        elif name == "compliance" and is_dir:
            _compliance(out, p, {r.run_id for r in refs}, compliance, {r.where for r in unreadable})
        elif is_dir and name in _TOP_FOLDERS:
            out.add(p, True, name)
        elif not is_dir and name in _TOP_FILES:
            out.add(p, False, _TOP_FILES[name])
        else:
            out.generic(name, p, is_dir)
    return out.items


def _subjects(out: _List, subjects: Path) -> None:
    ws = out.ws
    problems: list[Refusal] = []
    entries = ws.entries(subjects, problems)
    out.links(problems)
    for kind, kdir, k_is_dir in entries:
        if not (k_is_dir and kind in ("agents", "workflows")):
            if k_is_dir:
                out.add(kdir, True, "subject-kind")
            else:
                out.generic(kind, kdir, False)
            continue
        for name, sdir, s_is_dir in ws.entries(kdir, []):  # links: refused rows of the runs already
            if not s_is_dir:
                out.add(sdir, False, "kind-file")
                continue
            _subject(out, sdir)


def _subject(out: _List, sdir: Path) -> None:
    ws = out.ws
    problems: list[Refusal] = []
    entries = ws.entries(sdir, problems)
    rdir = sdir / "runs"
    # a runs/ that is a link out of the workspace is a refused row already (SV1-2)
    runs_refused = os.path.islink(rdir) and not ws.inside(rdir)
    in_runs: list[Refusal] = []  # links out in runs/: refused rows of the runs already
    run_entries = ws.entries(rdir, in_runs) if any(n == "runs" and d for n, _, d in entries) else []
    if not runs_refused and not in_runs and not any(d for _, _, d in run_entries):
        out.add(sdir, True, "subject-no-runs")
        return
    out.links(problems, skip={"runs"} if runs_refused else set())
    for name, p, is_dir in entries:
        if name == "runs" and is_dir:
            for rname, rp, r_is_dir in run_entries:
                if not r_is_dir:
                    out.add(rp, False, "runs-file")
        elif not is_dir and name in _SUBJECT_FILES:
            out.add(p, False, name)
        elif (name == "baselines" and is_dir) or (name == "baseline.json" and not is_dir):
            out.add(p, is_dir, "baselines")
        else:
            out.generic(name, p, is_dir)


def _compliance(out: _List, top: Path, run_ids: set[str], index: dict[str, list[ComplianceDoc]],
                unreadable: set[str]) -> None:
    ws = out.ws
    docs = {str(d.path): d for ds in index.values() for d in ds}

    def level(folder: Path, depth: int) -> None:
        problems: list[Refusal] = []
        entries = ws.entries(folder, problems)
        out.links(problems)
        for name, p, is_dir in entries:
            if depth < 3 and is_dir:
                level(p, depth + 1)
            elif str(p) in unreadable:
                continue  # a refused row of every run already
            elif depth == 3 and name == "evidence.json" and not is_dir:
                d = docs.get(str(p))
                if d is not None and d.run_id not in run_ids:
                    out.add(p, False, "compliance-orphan", run_id=repr(d.run_id))
            elif name.endswith(".tmp") and not is_dir:
                out.add(p, False, "tmp")
            else:
                out.add(p, is_dir, "compliance-other")

    level(top, 0)
