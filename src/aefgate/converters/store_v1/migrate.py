"""Every run of a store v1 workspace migrated at once, in worker processes, resumably
(``aefgate import store-v1 --all WORKSPACE OUT_DIR``).

- Each run is migrated by :func:`~.importer.migrate_run` in a worker process (``jobs``, default the number of
  cores), into ``OUT_DIR/<runId>`` (atomically: a refused run leaves nothing); a refused run does not stop the others.
- Resumable: every migrated run records the digest of its source files and its migration key (the digest and the
  options that change what is written, :func:`~.importer.migration_key`) in ``run.json``
  ``ext."aefgate.store-v1"``. A run whose key an output of ``OUT_DIR`` already records is **skipped**; a run whose
  source (or options) changed since is migrated again into a new folder ``OUT_DIR/<runId>--<key>`` and reported
  **re-migrated**, the earlier folder kept as it was.
- Interruptions: Ctrl-C (or SIGTERM to the command) stops the workers; each removes the run it was writing, so
  ``OUT_DIR`` holds whole runs only and the next ``--all`` takes up the rest. A worker whose parent dies gets
  SIGTERM (Linux ``PR_SET_PDEATHSIG``); a worker that dies makes the runs not done ``refused`` (rule ``internal``).
- Warnings: a native AEF run under ``<workspace>/aef/runs/`` linking a store run (prefer the native evidence); the
  runs index naming a run the workspace does not hold, or not read; an output folder whose ``run.json`` does not
  read (strictly, :mod:`aefgate.aef.jsonio`): left as it is, never taken for an earlier migration.
- What is not migrated: every folder and file of the workspace that is no run (``benchmarks/``, ``red-team/``, a
  stray file, an unknown subject kind, ...), with the reason (:mod:`.inventory`); listed, not refused.

The report (:func:`migrate_all`'s return value, the CLI's ``--json``) lists every run in discovery order with its
status (``migrated``, ``re-migrated``, ``skipped``, ``refused``), what of the workspace it did not migrate
(``notMigrated``: ``{path, type, files, what, reason}``), and per worker process its peak RSS.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from aefgate.converters import batch
from aefgate.converters.checks import check_import_options
from aefgate.converters.store_v1.importer import (
    IMPORTED_FROM_PREFIX,
    OWN_EXT,
    migrate_run,
    migration_key,
    native_warnings,
)
from aefgate.converters.store_v1.inventory import not_migrated
from aefgate.errors import Refusal
from aefgate.aef import jsonio
from aefgate.aef.signatures import signing_key_of
from aefgate.formats.store_v1.reader import (
    RunRef,
    Workspace,
    compliance_index,
    native_links,
    open_workspace,
    read_jsonl,
    read_run,
    source_digest,
)

__all__ = ["migrate_all", "existing_migrations"]

STATUSES = ("migrated", "re-migrated", "skipped", "refused")


def existing_migrations(out_dir: Path, warnings: list[str] | None = None) -> dict[str, list[tuple[str, str]]]:
    """The store v1 migrations ``out_dir`` already holds: by run id, ``(folder name, migration key)`` each. Folders
    whose ``run.json`` does not read, or that are no store v1 migration, are left alone (and never overwritten).

    ``run.json`` is read by AEF's one strict reader (:func:`aefgate.aef.jsonio.read_json`: 4 MiB, nesting
    64, ENC-1..3, ENC-17), never trusted to be sane: one that does not read (malformed, too deep, too large, not
    readable) is no finished migration; with ``warnings``, each such folder is named there with the rule."""
    out: dict[str, list[tuple[str, str]]] = {}
    if not out_dir.is_dir():
        return out
    for child in sorted(out_dir.iterdir()):
        if child.name.startswith(".") or child.is_symlink() or not child.is_dir():
            continue
        p = child / "run.json"
        try:
            if p.is_symlink() or not p.is_file():
                continue
            doc = jsonio.read_json(p)
        except (OSError, jsonio.JsonProblem) as e:
            if warnings is not None:
                why = (f"[{e.rule}] {e.reason}" if isinstance(e, jsonio.JsonProblem)
                       else f"[IO-1] {e.strerror or e}")
                warnings.append(f"{p} does not read ({why}): not taken for an earlier migration; the folder is "
                                "left as it is")
            continue
        if not isinstance(doc.get("runId"), str):
            continue
        src = (doc.get("imported") or {}).get("from") if isinstance(doc.get("imported"), dict) else None
        own = (doc.get("ext") or {}).get(OWN_EXT) if isinstance(doc.get("ext"), dict) else None
        if not isinstance(src, str) or not src.startswith(IMPORTED_FROM_PREFIX) or not isinstance(own, dict):
            continue
        key = own.get("migrationKey")
        if isinstance(key, str):
            out.setdefault(doc["runId"], []).append((child.name, key))
    return out


# -- the worker -----------------------------------------------------------------------------------------------------


def _row_head(task: dict[str, Any]) -> dict[str, Any]:
    ref: RunRef = task["ref"]
    return {"runId": ref.run_id, "subjectFolder": f"{ref.kind_folder}/{ref.subject_folder}", "source": str(ref.path)}


def _one(task: dict[str, Any]) -> dict[str, Any]:
    """Migrate one run (in a worker process): what the report's row says of it (:func:`batch.WorkerPool.run`
    reports a refusal)."""
    ref: RunRef = task["ref"]
    opts = task["options"]
    ws: Workspace = task["ws"]
    bad = task["bad"]  # a refusal met before (as a dict: a Refusal does not pickle)
    if bad is not None:
        raise Refusal(bad["rule"], bad["message"], bad["where"], exit_code=bad["exitCode"])
    docs = task["compliance"]
    digest = source_digest(ws, ref, docs)
    key = migration_key(digest[0], target_mode=opts["target_mode"], content_capture=opts["content_capture"],
                        subject=None, key_id=opts["key_id"])
    out_dir = Path(task["out_dir"])
    d = batch.decide(out_dir, ref.run_id, key, task["existing"])
    if d.skip:
        return {"status": "skipped", "output": str(out_dir / d.folder), "sourceDigest": digest[0], "migrationKey": key}
    store = read_run(ws, ref, compliance=docs)
    m = migrate_run(store, out_dir / d.folder, target_mode=opts["target_mode"], content_capture=opts["content_capture"],
                    at=opts["at"], signing_key=batch.signing_key(opts["key"]), digest=digest)
    row = m.to_json()
    row["runStatus"] = row.pop("status")
    row["status"] = "re-migrated" if d.again else "migrated"
    if d.again:
        row["previous"] = [str(out_dir / n) for n in d.previous]
    return row


# -- the parent -----------------------------------------------------------------------------------------------------


def _index_warnings(ws: Workspace, run_ids: set[str]) -> list[str]:
    path = ws.path / "runs-index" / "recent.jsonl"
    try:
        if not ws.check(path, missing_ok=True):
            return []
        lines = read_jsonl(ws, path)
    except Refusal as e:
        return [f"runs-index/recent.jsonl is not read ([{e.rule}] {e.message}); the runs are found from subjects/"]
    missing = [x.get("runId") for x in lines if isinstance(x.get("runId"), str) and x["runId"] not in run_ids]
    return [f"runs-index/recent.jsonl names run {rid}, which the workspace does not hold" for rid in missing]


def migrate_all(src: str | os.PathLike[str], out_dir: str | os.PathLike[str], *, jobs: int | None = None,
                target_mode: str = "mocked", content_capture: str = "on", at: str | None = None,
                key: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Migrate every run of the workspace ``src`` into ``out_dir`` (see the module docstring); the report.

    Refused as a whole (exit 2, nothing written): bad options (CLI-2), a workspace that is not one (SV1-1), an
    output folder that is a file, a link, or inside the workspace (OUT-1, OUT-2), a key that does not load."""
    check_import_options(target_mode=target_mode, content_capture=content_capture, at=at)
    n_jobs = batch.check_jobs(jobs)
    signing_key = signing_key_of(key)  # before anything is written
    started = time.monotonic()
    ws = open_workspace(src)
    out = batch.output_folder(out_dir, [ws.path])
    # the workers are forked first, before the runs are listed (so a worker's memory does not hold the parent's list
    # of runs, and its peak stays flat in their number) and before any progress thread starts
    with batch.WorkerPool(n_jobs) as pool:
        tasks, problems, warnings, unread = _plan(ws, out, target_mode, content_capture, at, key, signing_key)
        rows = pool.run(tasks, _one, _row_head, label="migrate store v1 runs", unit="runs")
    for p in problems:
        rows.append({"runId": None, "subjectFolder": None, "source": p.where, "status": "refused",
                     "error": batch.error_row(p)})
    tally, workers = batch.summarize(rows, STATUSES)
    elapsed = time.monotonic() - started
    return {"workspace": str(ws.path), "output": str(out), "jobs": pool.used, "runs": rows, "counts": tally,
            "notMigrated": unread, "warnings": warnings, "workers": workers, "seconds": round(elapsed, 3)}


def _plan(ws: Workspace, out: Path, target_mode: str, content_capture: str, at: str | None, key: Any,
          signing_key: Any) -> tuple[list[dict[str, Any]], list[Refusal], list[str], list[dict[str, Any]]]:
    """The runs to migrate, as tasks (in discovery order), the refusals met while listing them, the warnings, and
    what of the workspace is not migrated (:func:`~.inventory.not_migrated`)."""
    problems: list[Refusal] = []
    refs = ws.runs(problems)
    index, bad_docs = compliance_index(ws)
    bad = batch.error_row(bad_docs[0]) if bad_docs else None
    warnings: list[str] = []
    existing = existing_migrations(out, warnings)
    links = native_links(ws)
    counts: dict[str, int] = {}
    for r in refs:
        counts[r.run_id] = counts.get(r.run_id, 0) + 1
    opts = {"target_mode": target_mode, "content_capture": content_capture, "at": at,
            "key": os.fspath(key) if key is not None else None, "key_id": getattr(signing_key, "keyid", None)}
    tasks = []
    for r in refs:
        task_bad = bad
        if counts[r.run_id] > 1:
            task_bad = batch.error_row(Refusal(
                "SV1-1", f"the run id {r.run_id!r} is in the workspace {counts[r.run_id]} times (under several "
                         "subjects): one of them cannot be named by it", str(r.path)))
        tasks.append({"ws": ws, "ref": r, "out_dir": str(out), "compliance": index.get(r.run_id, []),
                      "existing": existing.get(r.run_id, []), "options": opts, "bad": task_bad})
    for r in refs:
        warnings += native_warnings(ws, r.run_id, links)
    warnings += _index_warnings(ws, {r.run_id for r in refs})
    return tasks, problems, warnings, not_migrated(ws, refs, index, bad_docs)


