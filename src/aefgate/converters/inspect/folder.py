"""Every Inspect log of a folder imported at once (``aefgate import inspect DIR OUT``): one run per log, in worker
processes, resumably (:mod:`aefgate.converters.batch`, as ``import store-v1 --all``). docs/mappings/inspect.md,
"Log folders", is the contract:

- The logs: every ``*.eval`` and ``*.json`` file under ``DIR``, recursively, in path order. Folders and files whose
  name starts with ``.`` are not looked into; symbolic links are not followed (listed as skipped). Inspect's own
  files that are not logs (an eval-set's ``logs.json`` listing, its ``eval-set.json``) are listed as skipped, not
  refused. Any other ``.json`` is read as a log: one that is not is refused by the reader's rule.
- The run folder of ``DIR/a/b.eval`` is ``OUT/a/b`` (the log's path relative to ``DIR``, without its suffix). When
  two logs would share one (``b.eval`` and ``b.json``), or a log's would hold another's (``a.eval`` beside the
  folder ``a/``), the log's keeps its suffix as ``--eval`` / ``--json`` (``OUT/a/b--json``).
- Each log is imported by :func:`~.importer.from_inspect` (the single-log import, with its options: ``lossless``
  on by default), atomically: a refused log leaves nothing, the others go on.
- Resumable: ``OUT/.aefgate-inspect-import.jsonl`` records, per log, the folders it was imported into and their
  key (the log's SHA-256 and the options that change what is written), each line written before its import starts
  (:class:`~aefgate.converters.batch.StateFile`). A log whose key is recorded, its folder holding a run, is skipped
  (``unchanged``); a log that changed (or is imported with other options) is imported again into
  ``<folder>--<key>``, the earlier run kept as it was.
"""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path, PurePosixPath
from typing import Any

from aefgate.converters import batch
from aefgate.converters.checks import check_import_options
from aefgate.converters.inspect.importer import from_inspect
from aefgate.errors import Refusal
from aefgate.aef import jsonio
from aefgate.aef.sealer import seal_run_hash
from aefgate.aef.signatures import signing_key_of
from aefgate.fsutil import count_lines

__all__ = ["import_folder", "find_logs", "run_folders", "describe_run", "STATE_FILE", "STATUSES", "NOT_LOGS"]

STATE_FILE = ".aefgate-inspect-import.jsonl"
STATUSES = ("imported", "re-imported", "skipped", "refused")
SUFFIXES = (".eval", ".json")
#: files Inspect writes beside its logs that are not logs: skipped (with this reason), never refused
NOT_LOGS = {
    "logs.json": "not a log: Inspect's listing of the folder's logs (written by eval-set and write_log_dir_manifest)",
    "eval-set.json": "not a log: Inspect's eval-set manifest",
}


def find_logs(root: Path, unread: list[OSError] | None = None) -> tuple[list[str], list[tuple[str, str]]]:
    """The logs under ``root`` (paths relative to it, POSIX, in path order) and the candidates skipped, each with
    its reason (Inspect's own files that are not logs, symbolic links); the folders that could not be listed are
    added to ``unread``."""
    logs: list[str] = []
    skipped: list[tuple[str, str]] = []
    for dirpath, dirs, files in os.walk(root, onerror=None if unread is None else unread.append):
        here = Path(dirpath)
        rel = PurePosixPath(*here.relative_to(root).parts) if here != root else PurePosixPath()
        keep = []
        for d in sorted(dirs):
            if d.startswith("."):
                continue
            if (here / d).is_symlink():
                skipped.append((str(rel / d), "a symbolic link to a folder: not followed"))
                continue
            keep.append(d)
        dirs[:] = keep
        for name in sorted(files):
            if name.startswith(".") or not name.endswith(SUFFIXES):
                continue
            path = str(rel / name)
            if (here / name).is_symlink():
                skipped.append((path, "a symbolic link: not followed"))
            elif name in NOT_LOGS:
                skipped.append((path, NOT_LOGS[name]))
            elif not (here / name).is_file():
                skipped.append((path, "not a regular file"))
            else:
                logs.append(path)
    logs.sort()
    skipped.sort()
    return logs, skipped


def run_folders(logs: list[str]) -> dict[str, str]:
    """The run folder (relative to ``OUT``) of each log: its path without its suffix, or with it as ``--eval`` /
    ``--json`` where two logs would share a folder or one log's would hold another's."""
    plain = {log: log.rsplit(".", 1)[0] for log in logs}
    count: dict[str, int] = {}
    for name in plain.values():
        count[name] = count.get(name, 0) + 1
    ancestors = {str(p) for name in plain.values() for p in PurePosixPath(name).parents if str(p) != "."}
    out: dict[str, str] = {}
    used: set[str] = set()
    for log in logs:
        name = plain[log]
        if count[name] > 1 or name in ancestors:
            stem, suffix = log.rsplit(".", 1)
            name = f"{stem}--{suffix}"
        base, n = name, 1
        while name in used or name in ancestors:  # a log literally named like another's suffixed folder
            n += 1
            name = f"{base}--{n}"
        used.add(name)
        out[log] = name
    return out


def describe_run(run_dir: Path) -> dict[str, Any]:
    """What an import wrote (read back from the run, not verified again: the import verified it): run id and
    status, result lines, outcome (``intact`` when sealed, ``unsealed`` for a running run, IN-11), run hash, signed."""
    run = jsonio.read_json(run_dir / "run.json")
    run_hash = seal_run_hash(run_dir) if (run_dir / "seal.json").exists() else None
    return {"output": str(run_dir), "runId": run["runId"], "runStatus": run["status"],
            "results": count_lines(run_dir / "results.ndjson"), "outcome": "intact" if run_hash else "unsealed",
            "runHash": run_hash, "signed": (run_dir / "attestation.dsse.json").exists(),
            "importedFrom": run["imported"]["from"], "asserted": run["imported"]["asserted"]}


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


# -- the worker -----------------------------------------------------------------------------------------------------


def _row_head(task: dict[str, Any]) -> dict[str, Any]:
    return {"log": task["log"], "source": task["source"]}


def _one(task: dict[str, Any]) -> dict[str, Any]:
    """Import one log (in a worker process): what the report's row says of it."""
    opts = task["options"]
    source = Path(task["source"])
    out_dir = Path(task["out_dir"])
    digest = _digest(source)
    key = batch.input_key({"sourceDigest": digest, **{k: opts[k] for k in ("target_mode", "content_capture",
                                                                          "grader_types", "lossless", "key_id")}})
    d = batch.decide(out_dir, task["folder"], key, task["earlier"])
    if d.skip:
        return {"status": "skipped", "reason": "unchanged", "output": str(out_dir / d.folder), "key": key,
                "sourceDigest": digest}
    batch.StateFile.append(task["state"], "inspect", task["log"], d.folder, key)  # before: see StateFile
    run_dir = from_inspect(source, out_dir / d.folder, target_mode=opts["target_mode"],
                           content_capture=opts["content_capture"], at=opts["at"],
                           key=batch.signing_key(opts["key"]), grader_types=opts["grader_types"],
                           lossless=opts["lossless"])
    row: dict[str, Any] = {"status": "re-imported" if d.again else "imported", "folder": d.folder, "key": key,
                           "sourceDigest": digest, **describe_run(Path(run_dir))}
    if d.again:
        row["previous"] = [str(out_dir / f) for f in d.previous]
    return row


# -- the parent -----------------------------------------------------------------------------------------------------


def import_folder(src: str | os.PathLike[str], out_dir: str | os.PathLike[str], *, jobs: int | None = None,
                  target_mode: str = "live", content_capture: str = "on", at: str | None = None,
                  key: str | os.PathLike[str] | None = None, grader_types: bool = False,
                  lossless: bool = True) -> dict[str, Any]:
    """Import every Inspect log under the folder ``src`` into ``out_dir`` (see the module docstring); the report:
    ``{"input", "output", "jobs", "logs": [row...], "counts", "workers", "seconds"}``, one row per log and per file
    skipped, in path order, each with its ``status`` (``imported``, ``re-imported``, ``skipped`` with its
    ``reason``, ``refused`` with its ``error``: rule, where, message).

    Refused as a whole (exit 2, nothing written): bad options (CLI-2), ``src`` not a folder (CLI-1), an output
    folder that is a file, a link, or inside ``src`` (OUT-1, OUT-2), a key that does not load, a state file that
    does not read (OUT-1)."""
    check_import_options(target_mode=target_mode, content_capture=content_capture, at=at)
    n_jobs = batch.check_jobs(jobs)
    signing_key = signing_key_of(key)  # before anything is written
    started = time.monotonic()
    root = Path(os.path.abspath(src))
    if not root.is_dir():
        raise Refusal("CLI-1", "no such folder" if not root.exists() else "not a folder", str(src))
    out = batch.output_folder(out_dir, [root])
    state = batch.StateFile(out, STATE_FILE, "inspect")
    unread: list[OSError] = []
    logs, skipped = find_logs(root, unread)
    folders = run_folders(logs)
    opts = {"target_mode": target_mode, "content_capture": content_capture, "at": at, "grader_types": grader_types,
            "lossless": lossless, "key": os.fspath(key) if key is not None else None,
            "key_id": getattr(signing_key, "keyid", None)}
    tasks = [{"log": log, "source": str(root / log), "out_dir": str(out), "folder": folders[log],
              "earlier": state.earlier(log), "options": opts, "state": str(state.path)} for log in logs]
    # the folders above the runs are made here, not by the workers (two workers making and removing one parent
    # would race); those left empty (every log under them refused) are removed again at the end
    made = _make_parents(out, [folders[log] for log in logs])

    try:
        with batch.WorkerPool(min(n_jobs, max(1, len(tasks)))) as pool:
            rows = pool.run(tasks, _one, _row_head, label="import Inspect logs", unit="logs")
    finally:
        _remove_empty(made)
    rows += [{"log": path, "source": str(root / path), "status": "skipped", "reason": reason}
             for path, reason in skipped]
    for e in unread:  # a folder that could not be listed: its logs are not imported, and that is said
        where = Path(e.filename or root)
        rows.append({"log": where.relative_to(root).as_posix() if where != root else ".", "source": str(where),
                     "status": "refused", "error": batch.error_row(e)})
    rows.sort(key=lambda r: r["log"])
    counts, workers = batch.summarize(rows, STATUSES)
    return {"input": str(root), "output": str(out), "jobs": pool.used, "logs": rows, "counts": counts,
            "workers": workers, "seconds": round(time.monotonic() - started, 3)}


def _make_parents(out: Path, folders: list[str]) -> list[Path]:
    made: list[Path] = []
    for folder in folders:
        missing = []
        p = (out / folder).parent
        while p != out and not p.exists():
            missing.append(p)
            p = p.parent
        for q in reversed(missing):
            q.mkdir()
            made.append(q)
    return made


def _remove_empty(made: list[Path]) -> None:
    for q in sorted(made, key=lambda p: len(p.parts), reverse=True):
        try:
            q.rmdir()
        except OSError:  # not empty: it holds runs
            pass
