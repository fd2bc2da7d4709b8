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
  runs index naming a run the workspace does not hold, or not read.

The report (:func:`migrate_all`'s return value, the CLI's ``--json``) lists every run in discovery order with its
status (``migrated``, ``re-migrated``, ``skipped``, ``refused``), and per worker process its peak RSS.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

import msgspec

from aefgate.converters.common import check_import_options
from aefgate.converters.store_v1.importer import (
    IMPORTED_FROM_PREFIX,
    OWN_EXT,
    migrate_run,
    migration_key,
    native_warnings,
)
from aefgate.errors import Refusal
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


def existing_migrations(out_dir: Path) -> dict[str, list[tuple[str, str]]]:
    """The store v1 migrations ``out_dir`` already holds: by run id, ``(folder name, migration key)`` each. Folders
    whose ``run.json`` does not read, or that are no store v1 migration, are left alone (and never overwritten)."""
    out: dict[str, list[tuple[str, str]]] = {}
    if not out_dir.is_dir():
        return out
    for child in sorted(out_dir.iterdir()):
        if child.name.startswith(".") or child.is_symlink() or not child.is_dir():
            continue
        p = child / "run.json"
        try:
            if not p.is_file() or p.stat().st_size > 4 << 20:
                continue
            doc = msgspec.json.decode(p.read_bytes())
        except (OSError, msgspec.DecodeError):
            continue
        if not isinstance(doc, dict) or not isinstance(doc.get("runId"), str):
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

_KEYS: dict[str, Any] = {}


def _signing_key(path: str | None) -> Any:
    if path is None:
        return None
    if path not in _KEYS:
        from aefgate.formats.aef.signatures import load_private_key

        _KEYS[path] = load_private_key(path)
    return _KEYS[path]


_STOPPING = False


def _interrupted(signum: int, frame: Any) -> None:  # pragma: no cover - runs in an interrupted worker
    # the first signal unwinds the run being written (its temporary folder removed); a second one (Ctrl-C reaches
    # the workers and the parent then asks them to end) must not cut that cleanup short
    global _STOPPING
    if _STOPPING:
        return
    _STOPPING = True
    raise SystemExit(128 + signum)


def _init_worker() -> None:
    signal.signal(signal.SIGTERM, _interrupted)
    signal.signal(signal.SIGINT, _interrupted)
    if sys.platform.startswith("linux"):  # a worker whose parent dies (even by SIGKILL) gets SIGTERM: no orphan
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):  # pragma: no cover - no prctl
            pass
        if os.getppid() == 1:  # pragma: no cover - the parent died before prctl
            os._exit(1)


def _parent_terminated(signum: int, frame: Any) -> None:  # pragma: no cover - runs when the command is killed
    raise SystemExit(128 + signum)  # through migrate_all's cleanup: the workers are stopped, not orphaned


def _peak_rss_kib() -> int | None:
    try:
        import resource
    except ImportError:  # pragma: no cover - not POSIX
        return None
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss // 1024 if sys.platform == "darwin" else rss


def _error(e: BaseException) -> dict[str, Any]:
    if isinstance(e, Refusal):
        return {"rule": e.rule, "where": e.where, "message": e.message, "exitCode": e.exit_code}
    if isinstance(e, OSError):
        return {"rule": "IO-1", "where": str(e.filename or ""), "message": e.strerror or str(e), "exitCode": 2}
    return {"rule": "internal", "where": "", "exitCode": 2,
            "message": f"unexpected {type(e).__name__}: {e}. This is a bug: please report it with the command you ran"}


def _row_head(task: dict[str, Any]) -> dict[str, Any]:
    ref: RunRef = task["ref"]
    return {"runId": ref.run_id, "subjectFolder": f"{ref.kind_folder}/{ref.subject_folder}", "source": str(ref.path)}


def _ready() -> int:
    return os.getpid()


def _one(task: dict[str, Any]) -> dict[str, Any]:
    """Migrate one run (in a worker process): the report's row."""
    from aefgate import progress

    ref: RunRef = task["ref"]
    row = _row_head(task)
    opts = task["options"]
    with progress.showing(None):  # a worker shows nothing: the parent's bar counts the runs
        try:
            ws: Workspace = task["ws"]
            bad = task["bad"]  # a refusal met before (as a dict: a Refusal does not pickle)
            if bad is not None:
                raise Refusal(bad["rule"], bad["message"], bad["where"], exit_code=bad["exitCode"])
            docs = task["compliance"]
            digest = source_digest(ws, ref, docs)
            key = migration_key(digest[0], target_mode=opts["target_mode"],
                                content_capture=opts["content_capture"], subject=None, key_id=opts["key_id"])
            out_dir = Path(task["out_dir"])
            earlier = task["existing"]
            done = [name for name, k in earlier if k == key]
            if done:
                row.update(status="skipped", output=str(out_dir / done[0]), sourceDigest=digest[0],
                           migrationKey=key)
            else:
                store = read_run(ws, ref, compliance=docs)
                name = ref.run_id
                dest = out_dir / name
                if dest.exists() or dest.is_symlink():
                    if not (dest.is_dir() and not dest.is_symlink() and not any(dest.iterdir())):
                        name = f"{ref.run_id}--{key}"
                m = migrate_run(store, out_dir / name, target_mode=opts["target_mode"],
                                content_capture=opts["content_capture"], at=opts["at"],
                                signing_key=_signing_key(opts["key"]), digest=digest)
                run_json = m.to_json()
                run_json["runStatus"] = run_json.pop("status")
                row.update(run_json)
                row["status"] = "re-migrated" if earlier else "migrated"
                if earlier:
                    row["previous"] = [str(out_dir / n) for n, _ in earlier]
        except (Refusal, OSError) as e:
            row.update(status="refused", error=_error(e))
        except Exception as e:  # a bug in one run: reported, the others go on
            row.update(status="refused", error=_error(e))
        except (KeyboardInterrupt, SystemExit):
            # interrupted (Ctrl-C reaches the workers too; SIGTERM raises SystemExit): the run being written has
            # removed its temporary folder on the way here. A worker process ends now rather than take the next run
            if multiprocessing.parent_process() is not None:
                os._exit(130)
            raise
    row["pid"] = os.getpid()
    row["peakRssKiB"] = _peak_rss_kib()
    return row


# -- the parent -----------------------------------------------------------------------------------------------------


def _out_dir(out: Path, ws: Workspace) -> Path:
    from aefgate.fsutil import check_outside

    out = Path(os.path.abspath(out))
    if out.is_symlink():
        raise Refusal("OUT-1", "the output folder is a symbolic link", str(out))
    if out.exists() and not out.is_dir():
        raise Refusal("OUT-1", "the output folder exists and is not a folder", str(out))
    check_outside(out, [ws.path])
    if not out.exists():
        parent = out.parent
        while not parent.exists():
            parent = parent.parent
        if not parent.is_dir():
            raise Refusal("OUT-1", "a parent of the output folder exists and is not a folder", str(parent))
        out.mkdir(parents=True)
    return out


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
    from aefgate import progress
    from aefgate.formats.aef.signatures import signing_key_of

    check_import_options(target_mode=target_mode, content_capture=content_capture, at=at)
    if jobs is not None and jobs < 1:
        raise Refusal("CLI-2", "--jobs is 1 or more", "--jobs")
    signing_key = signing_key_of(key)  # before anything is written
    started = time.monotonic()
    ws = open_workspace(src)
    out = _out_dir(Path(out_dir), ws)
    n_jobs = max(1, jobs or os.cpu_count() or 1)
    # the workers are forked now, before the runs are listed (so a worker's memory does not hold the parent's list
    # of runs, and its peak stays flat in their number) and before any progress thread starts
    pool = _pool(n_jobs)
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _parent_terminated) if main else None
    try:
        for f in [pool.submit(_ready) for _ in range(n_jobs)]:  # one submit forks one worker (until n_jobs)
            f.result()
        rows, tasks, problems, warnings = _plan(ws, out, target_mode, content_capture, at, key, signing_key)
        used = max(1, min(n_jobs, len(tasks)))
        with progress.task("migrate store v1 runs", len(tasks), "runs") as bar:
            if len(tasks) <= 1:  # one run: in this process
                for i, t in enumerate(tasks):
                    rows[i] = _one(t)
                    bar.advance()
            else:
                futures = {pool.submit(_one, t): i for i, t in enumerate(tasks)}
                try:
                    for f in as_completed(futures):
                        rows[futures[f]] = f.result()
                        bar.advance()
                except BrokenProcessPool:  # a worker was killed (out of memory?): the runs it left are refused
                    for i, t in enumerate(tasks):
                        if rows[i] is None:
                            rows[i] = {**_row_head(t), "status": "refused", "error": {
                                "rule": "internal", "where": "", "exitCode": 2,
                                "message": "a worker process ended abruptly (killed, out of memory?) before this "
                                           "run was migrated; nothing of it was written: run the migration again"}}
        pool.shutdown(wait=True)
    except BaseException:
        _stop(pool)
        raise
    finally:
        if main:
            signal.signal(signal.SIGTERM, previous)
    report_rows: list[dict[str, Any]] = [r for r in rows if r is not None]
    for p in problems:
        report_rows.append({"runId": None, "subjectFolder": None, "source": p.where, "status": "refused",
                            "error": _error(p)})
    tally = {s: sum(1 for r in report_rows if r["status"] == s) for s in STATUSES}
    workers: dict[int, dict[str, Any]] = {}
    for r in report_rows:
        pid = r.pop("pid", None)
        rss = r.pop("peakRssKiB", None)
        if pid is None:
            continue
        w = workers.setdefault(pid, {"pid": pid, "runs": 0, "peakRssKiB": 0})
        w["runs"] += 1
        w["peakRssKiB"] = max(w["peakRssKiB"], rss or 0)
    elapsed = time.monotonic() - started
    return {"workspace": str(ws.path), "output": str(out), "jobs": used, "runs": report_rows, "counts": tally,
            "warnings": warnings, "workers": sorted(workers.values(), key=lambda w: w["pid"]),
            "seconds": round(elapsed, 3)}


def _stop(pool: ProcessPoolExecutor) -> None:
    """Interrupted: no further run starts, each worker is asked to end (SIGTERM: the run it writes removes its
    temporary folder, then it exits), and the pool is joined (so the interpreter's exit has nothing left to tidy)."""
    for p in list(getattr(pool, "_processes", {}).values()):
        try:
            if p.is_alive():
                p.terminate()
        except (OSError, ValueError):  # pragma: no cover - already gone
            pass
    pool.shutdown(wait=True, cancel_futures=True)


def _pool(n: int) -> ProcessPoolExecutor:
    methods = multiprocessing.get_all_start_methods()
    ctx = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    return ProcessPoolExecutor(n, mp_context=ctx, initializer=_init_worker)


def _plan(ws: Workspace, out: Path, target_mode: str, content_capture: str, at: str | None, key: Any,
          signing_key: Any) -> tuple[list[Any], list[dict[str, Any]], list[Refusal], list[str]]:
    """The runs to migrate, as tasks (in discovery order), the refusals met while listing them, the warnings."""
    problems: list[Refusal] = []
    refs = ws.runs(problems)
    index, bad_docs = compliance_index(ws)
    bad = _error(bad_docs[0]) if bad_docs else None
    existing = existing_migrations(out)
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
            task_bad = _error(Refusal("SV1-1", f"the run id {r.run_id!r} is in the workspace {counts[r.run_id]} times "
                                               "(under several subjects): one of them cannot be named by it",
                                      str(r.path)))
        tasks.append({"ws": ws, "ref": r, "out_dir": str(out), "compliance": index.get(r.run_id, []),
                      "existing": existing.get(r.run_id, []), "options": opts, "bad": task_bad})
    warnings: list[str] = []
    for r in refs:
        warnings += native_warnings(ws, r.run_id, links)
    warnings += _index_warnings(ws, {r.run_id for r in refs})
    return [None] * len(tasks), tasks, problems, warnings


