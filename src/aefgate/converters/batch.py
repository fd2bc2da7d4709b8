"""Many inputs converted at once, in worker processes, resumably: what ``import store-v1 --all`` and
``import inspect DIR`` share.

- :class:`WorkerPool`: ``jobs`` worker processes, forked before the inputs are listed (a worker's memory does not
  hold the parent's list). :meth:`WorkerPool.run` gives each task to ``work`` in a worker (one task: in this
  process), counts them on a progress bar and returns one report row per task, in the tasks' order. A task that
  raises is a ``refused`` row with its error (:func:`error_row`: the refusal's rule, place and message; an
  unexpected exception is rule ``internal``); the others go on.
- Interruptions: Ctrl-C (or SIGTERM to the command) stops the workers; each removes the output it was writing (the
  converters write into a temporary sibling), so the output folder holds whole outputs only and the next run takes
  up the rest. A worker whose parent dies gets SIGTERM (Linux ``PR_SET_PDEATHSIG``); a worker that dies makes the
  tasks not done ``refused`` (rule ``internal``).
- Resuming: each output records a key naming its input and the options that change what is written (the caller's
  digest). :func:`decide` says, from the ``(folder, key)`` pairs an output folder already holds for an input, whether
  the input is skipped (its key is there), converted into its own folder, or converted again into a new folder
  ``NAME--<key>`` (the input changed; the earlier folder kept as it was). :class:`StateFile` keeps those pairs in
  a journal of the output folder, for outputs that cannot record them themselves.
- The summary: :func:`summarize` counts the rows by status and lists each worker process with its peak RSS.
"""

from __future__ import annotations

import ctypes
import fcntl
import hashlib
import multiprocessing
import os
import signal
import sys
import threading
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from aefgate import progress
from aefgate.errors import Refusal
from aefgate.aef import jsonio
from aefgate.aef.canonical import jcs
from aefgate.aef.signatures import load_private_key
from aefgate.fsutil import check_outside

try:
    import resource
except ImportError:  # pragma: no cover - not POSIX
    resource = None  # type: ignore[assignment]

__all__ = ["WorkerPool", "Decision", "StateFile", "decide", "error_row", "output_folder", "signing_key",
           "summarize", "check_jobs", "input_key"]

Row = dict[str, Any]


def check_jobs(jobs: int | None) -> int:
    """The number of worker processes: ``jobs`` (1 or more, CLI-2), or the number of cores."""
    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1):
        raise Refusal("CLI-2", f"option 'jobs' is 1 or more, not {jobs!r}", "option 'jobs'")
    return max(1, jobs or os.cpu_count() or 1)


def error_row(e: BaseException) -> dict[str, Any]:
    """A task's error as a report's ``error`` member (a refusal does not pickle: it crosses processes as this)."""
    if isinstance(e, Refusal):
        return {"rule": e.rule, "where": e.where, "message": e.message, "exitCode": e.exit_code}
    if isinstance(e, OSError):
        return {"rule": "IO-1", "where": str(e.filename or ""), "message": e.strerror or str(e), "exitCode": 2}
    return {"rule": "internal", "where": "", "exitCode": 2,
            "message": f"unexpected {type(e).__name__}: {e}. This is a bug: please report it with the command you ran"}


def output_folder(out: str | os.PathLike[str], inputs: Iterable[str | os.PathLike[str]]) -> Path:
    """The output folder of a batch, created when absent (its earlier outputs kept): refused when it is a file or a
    symbolic link (OUT-1) or inside an input folder (OUT-2)."""
    out = Path(os.path.abspath(out))
    if out.is_symlink():
        raise Refusal("OUT-1", "the output folder is a symbolic link", str(out))
    if out.exists() and not out.is_dir():
        raise Refusal("OUT-1", "the output folder exists and is not a folder", str(out))
    check_outside(out, inputs)
    if not out.exists():
        parent = out.parent
        while not parent.exists():
            parent = parent.parent
        if not parent.is_dir():
            raise Refusal("OUT-1", "a parent of the output folder exists and is not a folder", str(parent))
        out.mkdir(parents=True)
    return out


def input_key(doc: dict[str, Any]) -> str:
    """12 hex characters naming one conversion of one input: the digest of ``doc`` (the input's digest and the
    options that change what is written) in canonical JSON."""
    return hashlib.sha256(jcs(doc)).hexdigest()[:12]


# -- resuming ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Decision:
    """What to do with one input: ``skip`` (the folder already holding it, unchanged), else convert it into
    ``folder`` (``again``: an earlier conversion of it exists, from another key)."""

    folder: str
    skip: bool
    again: bool
    previous: tuple[str, ...] = ()


def _taken(dest: Path) -> bool:
    return dest.is_symlink() or (dest.exists() and not (dest.is_dir() and not any(dest.iterdir())))


def decide(out_dir: Path, name: str, key: str, earlier: Iterable[tuple[str, str]]) -> Decision:
    """Skip the input when a folder of ``earlier`` (``(folder, key)`` pairs, folders relative to ``out_dir``)
    records ``key`` and still holds a run; else convert it into ``name``, or into ``name--key`` when ``name`` is
    taken (a file, a link, a folder that is not empty: an earlier conversion, or something else)."""
    earlier = [(f, k) for f, k in earlier if (out_dir / f / "run.json").is_file()]
    for folder, k in earlier:
        if k == key:
            return Decision(folder, skip=True, again=False)
    folder = name if not _taken(out_dir / name) else f"{name}--{key}"
    return Decision(folder, skip=False, again=bool(earlier), previous=tuple(f for f, _ in earlier))


class StateFile:
    """The conversions an output folder holds, for a batch whose outputs cannot record their own key: a journal in
    ``out_dir/NAME``, one JSON line ``{"format": KIND, "input", "folder", "key"}`` per conversion, appended by the
    worker **before** it writes the output (:meth:`append`). Since an output folder appears only whole (renamed into
    place), a line whose folder holds a run names a finished conversion, whenever the batch was interrupted; a line
    whose folder is absent (refused, or cut short) is ignored by :func:`decide`, and so is a line that is not JSON
    (cut short by a crash as it was written). The journal is read by AEF's one strict reader
    (:func:`aefgate.aef.jsonio.loads`: nesting 64, 4 MiB a line): a journal with a line of JSON that is not
    one of its own (nested too deep, too large, a member twice, ...) is refused (``OUT-1``, with the line: the
    output folder holds what it cannot take), never rewritten."""

    def __init__(self, out_dir: Path, name: str, kind: str) -> None:
        self.path = out_dir / name
        self.kind = kind
        self.inputs: dict[str, list[tuple[str, str]]] = {}
        if self.path.is_symlink() or (self.path.exists() and not self.path.is_file()):
            raise Refusal("OUT-1", "the batch's state file is not a regular file", str(self.path))
        if not self.path.exists():
            return
        for i, line in enumerate(self.path.read_bytes().split(b"\n"), 1):
            if not line.strip():
                continue
            try:
                doc = jsonio.loads(line, top_object=False)
            except jsonio.JsonProblem as e:
                if e.rule == "ENC-1":  # malformed: a line cut short by a crash while it was written
                    continue  # its conversion never finished
                # JSON, but none of the journal's own lines (too deep, too large, a member twice, a number beyond
                # binary64): read by the one strict reader, never trusted
                raise Refusal("OUT-1", f"the batch's state file does not read at line {i} ([{e.rule}] {e.reason}): "
                              "move it away to start afresh", f"{self.path}:{i}") from None
            try:
                if not isinstance(doc, dict) or doc.get("format") != kind:
                    raise ValueError(f"not a line of a {kind} batch")
                folder, key, name_ = doc["folder"], doc["key"], doc["input"]
                if not all(isinstance(x, str) for x in (folder, key, name_)):
                    raise ValueError("input, folder and key are strings")
                if Path(folder).is_absolute() or ".." in Path(folder).parts:
                    raise ValueError(f"the folder {folder!r} is not inside the output folder")
                entries = self.inputs.setdefault(name_, [])
                if (folder, key) not in entries:
                    entries.append((folder, key))
            except (ValueError, KeyError) as e:
                raise Refusal("OUT-1", f"the batch's state file does not read at line {i} ({e}): move it away to "
                              "start afresh", f"{self.path}:{i}") from None

    def earlier(self, input_name: str) -> list[tuple[str, str]]:
        return list(self.inputs.get(input_name, []))

    @staticmethod
    def append(path: str | os.PathLike[str], kind: str, input_name: str, folder: str, key: str) -> None:
        """Record (from any process) that ``input_name`` is being converted into ``folder`` under ``key``: one line,
        appended under an exclusive lock."""
        line = jsonio.dump_line({"format": kind, "input": input_name, "folder": folder, "key": key})
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":  # a line cut short by a crash: it stays the last one
                line = b"\n" + line
            os.write(fd, line)
        finally:
            os.close(fd)  # releases the lock


# -- the workers ------------------------------------------------------------------------------------------------

_KEYS: dict[str, Any] = {}


def signing_key(path: str | None) -> Any:
    """The private key at ``path`` (None: none), loaded once per process."""
    if path is None:
        return None
    if path not in _KEYS:
        _KEYS[path] = load_private_key(path)
    return _KEYS[path]


_STOPPING = False


def _interrupted(signum: int, frame: Any) -> None:  # pragma: no cover - runs in an interrupted worker
    # the first signal unwinds the output being written (its temporary folder removed); a second one (Ctrl-C reaches
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
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):  # pragma: no cover - no prctl
            pass
        if os.getppid() == 1:  # pragma: no cover - the parent died before prctl
            os._exit(1)


def _parent_terminated(signum: int, frame: Any) -> None:  # pragma: no cover - runs when the command is killed
    raise SystemExit(128 + signum)  # through the pool's cleanup: the workers are stopped, not orphaned


def _peak_rss_kib() -> int | None:
    if resource is None:  # pragma: no cover - not POSIX
        return None
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss // 1024 if sys.platform == "darwin" else rss


def _ready() -> int:
    return os.getpid()


def _guarded(work: Callable[[Any], Row], head: Callable[[Any], Row], task: Any) -> Row:
    """``work(task)`` (in a worker process) as a report row: ``head(task)`` updated with what it returns, or
    ``status: refused`` and its error; the worker's pid and peak RSS."""
    row = head(task)
    with progress.showing(None):  # a worker shows nothing: the parent's bar counts the tasks
        try:
            row.update(work(task))
        except Exception as e:  # a refusal, a system error, or a bug in one task: reported, the others go on
            row.update(status="refused", error=error_row(e))
        except (KeyboardInterrupt, SystemExit):
            # interrupted (Ctrl-C reaches the workers too; SIGTERM raises SystemExit): the output being written has
            # removed its temporary folder on the way here. A worker process ends now rather than take the next task
            if multiprocessing.parent_process() is not None:
                os._exit(130)
            raise
    row["pid"] = os.getpid()
    row["peakRssKiB"] = _peak_rss_kib()
    return row


class WorkerPool:
    """``jobs`` worker processes (forked on entry) and the command's SIGTERM handled: ``with WorkerPool(n) as
    pool: rows = pool.run(...)``. Leaving by an exception (Ctrl-C) stops the workers."""

    def __init__(self, jobs: int) -> None:
        self.jobs = jobs
        self.used = 1
        self._pool: ProcessPoolExecutor | None = None
        self._previous: Any = None
        self._main = False

    def __enter__(self) -> "WorkerPool":
        methods = multiprocessing.get_all_start_methods()
        ctx = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
        self._pool = ProcessPoolExecutor(self.jobs, mp_context=ctx, initializer=_init_worker)
        self._main = threading.current_thread() is threading.main_thread()
        if self._main:
            self._previous = signal.signal(signal.SIGTERM, _parent_terminated)
        try:
            for f in [self._pool.submit(_ready) for _ in range(self.jobs)]:  # one submit forks one worker
                f.result()
        except BaseException:
            self.__exit__(*sys.exc_info())
            raise
        return self

    def __exit__(self, kind: Any, value: Any, tb: Any) -> None:
        try:
            if kind is None:
                self._pool.shutdown(wait=True)
            else:
                self._stop()
        finally:
            if self._main:
                signal.signal(signal.SIGTERM, self._previous)

    def _stop(self) -> None:
        """Interrupted: no further task starts, each worker is asked to end (SIGTERM: the output it writes removes
        its temporary folder, then it exits), and the pool is joined (the interpreter's exit has nothing left)."""
        pool = self._pool
        for p in list(getattr(pool, "_processes", {}).values()):
            try:
                if p.is_alive():
                    p.terminate()
            except (OSError, ValueError):  # pragma: no cover - already gone
                pass
        pool.shutdown(wait=True, cancel_futures=True)

    def run(self, tasks: list[Any], work: Callable[[Any], Row], head: Callable[[Any], Row], *, label: str,
            unit: str) -> list[Row]:
        """One row per task, in the tasks' order. ``work`` and ``head`` are module-level functions (they go to the
        workers by name)."""
        rows: list[Row | None] = [None] * len(tasks)
        self.used = max(1, min(self.jobs, len(tasks)))
        with progress.task(label, len(tasks), unit) as bar:
            if len(tasks) <= 1:  # one task: in this process
                for i, t in enumerate(tasks):
                    rows[i] = _guarded(work, head, t)
                    bar.advance()
            else:
                futures = {self._pool.submit(_guarded, work, head, t): i for i, t in enumerate(tasks)}
                try:
                    for f in as_completed(futures):
                        rows[futures[f]] = f.result()
                        bar.advance()
                except BrokenProcessPool:  # a worker was killed (out of memory?): the tasks it left are refused
                    for i, t in enumerate(tasks):
                        if rows[i] is None:
                            rows[i] = {**head(t), "status": "refused", "error": {
                                "rule": "internal", "where": "", "exitCode": 2,
                                "message": f"a worker process ended abruptly (killed, out of memory?) before this "
                                           f"was done; nothing of it was written: run the {label} again"}}
        return [r for r in rows if r is not None]


def summarize(rows: list[Row], statuses: Iterable[str]) -> tuple[dict[str, int], list[dict[str, Any]]]:
    """The rows counted by status, and the worker processes (pid, tasks, peak RSS), the rows' ``pid`` and
    ``peakRssKiB`` taken out of them."""
    counts = {s: sum(1 for r in rows if r.get("status") == s) for s in statuses}
    workers: dict[int, dict[str, Any]] = {}
    for r in rows:
        pid = r.pop("pid", None)
        rss = r.pop("peakRssKiB", None)
        if pid is None:
            continue
        w = workers.setdefault(pid, {"pid": pid, "runs": 0, "peakRssKiB": 0})
        w["runs"] += 1
        w["peakRssKiB"] = max(w["peakRssKiB"], rss or 0)
    return counts, sorted(workers.values(), key=lambda w: w["pid"])
