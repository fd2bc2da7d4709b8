"""The event-file converter between AEP and CloudEvents (AEP-0005 §1-§2), both directions.

``aep -> cloudevents``: an AEP event file (NDJSON, one AEP Event per line) into a CloudEvents file, one line per
event, in the order read. Option ``mode``:

- ``structured`` (default): each line is the CloudEvent in the JSON event format (:func:`ce_forward`, the pinned
  structured-JSON form);
- ``binary``: each line is the HTTP binary content mode message the SDK's binding gives,
  ``{"headers": {name: value, ...}, "body": text}``: ``headers`` the ``ce-*`` headers (and ``content-type`` when
  the event has data) as strings, in the binding's order; ``body`` the HTTP body, UTF-8 text (the JSON of
  ``data``, or ``""`` without data).

``cloudevents -> aep``: a CloudEvents file of either shape (each line is read on its own: a line with
``headers`` and ``body`` members and no ``specversion`` or ``aep`` is an HTTP message, binary, structured or a
batch; anything else a JSON-format CloudEvent: :func:`line_events`) into an AEP event file. Extension attributes that
cannot ride the AEP envelope are dropped (AEP-0005 §2 rule 2); ``run`` returns them as diagnostics.

Refusals name the rule and ``path:line``; nothing is written then (the output file is written to a temporary
sibling and renamed into place only when complete). Output is deterministic: same input, same bytes.
"""

from __future__ import annotations

import functools
import multiprocessing
import os
from collections import deque
from pathlib import Path
from typing import Any, Iterator

from aefgate.errors import Refusal
from aefgate.aef import jsonio
from aefgate.aef.verifier import _batches
from aefgate.formats.cloudevents import (
    ce_inverse,
    is_cloudevents_line,
    iter_jsonl,
    line_events,
    write_jsonl,
)
from aefgate.formats.cloudevents.mapping import Diagnostic
from aefgate.formats.cloudevents.ndjson import check_mode, line_value
from aefgate.fsutil import atomic_lines, input_file_problem

def _checked(event: Any, where: str) -> Any:
    """An AEP event read from a file or made by the inverse bridge: valid against the envelope and payload schemas
    (refused with the AEP rule it breaks, at ``where``), so neither direction turns an invalid event into output."""
    _check_event()(event, where)
    return event


@functools.lru_cache(maxsize=None)
def _check_event():
    """``aefgate.formats.aep.event_schema.check_event``, imported when a file is first converted (not when the
    registry loads this module)."""
    # lazy: the AEP schemas (about 20 ms to import) only when a file is converted, not when the registry loads
    from aefgate.formats.aep.event_schema import check_event

    return check_event


def export_lines(src: str | Path, mode: str = "structured") -> Iterator[Any]:
    """The CloudEvents lines of the AEP event file ``src`` (refusals at ``src:line``), in this process."""
    check_mode(mode)
    for lineno, event in iter_jsonl(src):
        where = f"{src}:{lineno}"
        value = line_value(event, where, mode)  # the bridge's own rules (B1-B5) first
        _checked(event, where)
        yield value


# -- the parallel export (a large file: one forked worker per core, as verify does) --------------------------------

_PARALLEL_FROM = 16 * 1024 * 1024  # bytes of input
_BATCH = 8192  # lines per task


def _workers_for(size: int) -> int:
    """Worker processes for an export of ``size`` bytes: none for a small file, else one per core;
    ``AEFGATE_WORKERS`` overrides (0: in this process)."""
    env = os.environ.get("AEFGATE_WORKERS")
    if env is not None:
        try:
            return max(0, int(env))
        except ValueError:
            return 0
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if size < _PARALLEL_FROM or cpus < 2 or "fork" not in multiprocessing.get_all_start_methods():
        return 0
    return cpus


def _export_batch(task: tuple[str, int, list[bytes | None], str]) -> tuple[bytes, tuple[str, str, str] | None]:
    """In a worker: a batch of raw lines -> their output lines joined, or the first refusal as (rule, msg, where)."""
    src, start, lines, mode = task
    out: list[bytes] = []
    dump_line = jsonio.dump_line
    for i, raw in enumerate(lines):
        where = f"{src}:{start + i}"
        try:
            if raw is None:
                return b"", ("ENC-17", f"line {start + i} is over {jsonio.MAX_DOC} bytes", where)
            event = jsonio.loads(raw)
            value = line_value(event, where, mode)  # the bridge's own rules (B1-B5) first
            _checked(event, where)
            out.append(dump_line(value))
        except jsonio.JsonProblem as e:
            return b"", (e.rule, e.reason, where)
        except Refusal as e:
            return b"", (e.rule, e.message, e.where)
    return b"".join(out), None


def _raw_batches(src: Path) -> Iterator[tuple[int, list[bytes | None]]]:
    """The file's lines in batches of ``_BATCH`` (the verifier's batching), its framing checked as they are read."""
    with open(src, "rb") as f:
        try:
            yield from _batches(jsonio.iter_lines(f), _BATCH)
        except jsonio.JsonProblem as e:
            raise Refusal(e.rule, e.reason, str(src)) from None


def _export_parallel(src: Path, dst: Path, mode: str, workers: int) -> int:
    """The export with ``workers`` forked processes: this process splits the file into batches of whole lines
    (checking the framing), the workers read, map and serialize them, this process writes the results in order
    (:func:`aefgate.fsutil.atomic_lines`: a temporary sibling of ``dst``, moved into place when complete). The
    first refusal in line order wins."""
    if dst.exists() or dst.is_symlink():
        raise Refusal("OUT-1", "the destination exists", str(dst))
    pool = multiprocessing.get_context("fork").Pool(workers)
    pending: deque = deque()
    n = 0

    def blobs() -> Iterator[bytes]:
        def take() -> bytes:
            nonlocal n
            count, result = pending.popleft()
            blob, problem = result.get()
            if problem is not None:
                raise Refusal(*problem)
            n += count
            return blob

        try:
            for start, batch in _raw_batches(src):
                pending.append((len(batch), pool.apply_async(_export_batch, ((str(src), start, batch, mode),))))
                if len(pending) > 2 * workers:
                    yield take()
        except Refusal:  # a framing problem: a bad line before it is refused first
            while pending:
                yield take()
            raise
        while pending:
            yield take()

    try:
        atomic_lines(dst, blobs())
    finally:
        pool.terminate()
        pool.join()
    return n


def import_lines(src: str | Path, diagnostics: list[tuple[str, Diagnostic]] | None = None) -> Iterator[dict]:
    """The AEP Events of the CloudEvents file ``src`` (refusals at ``src:line``)."""
    for lineno, value in iter_jsonl(src):
        where = f"{src}:{lineno}"
        diags: list[Diagnostic] = []
        if is_cloudevents_line(value):
            events = line_events(value, where, diags)
        else:  # not an object, or neither kind of CloudEvents line: ce_inverse says what is wrong
            events = [ce_inverse(value, where, diagnostics=diags)]
        if diagnostics is not None:
            diagnostics.extend((where, d) for d in diags)
        for ev in events:
            yield _checked(ev, where)


def export_file(src: str | Path, dst: str | Path, *, mode: str = "structured", workers: int | None = None) -> int:
    """AEP event file -> CloudEvents file; returns the number of events. A file of 16 MiB or more is converted by
    one forked worker process per core (``workers`` or ``AEFGATE_WORKERS`` overrides; 0: in this process); the
    output is the same bytes either way."""
    if mode is None:
        mode = "structured"
    check_mode(mode)
    src, dst = Path(src), Path(dst)
    problem = input_file_problem(src)
    if problem is not None:
        raise Refusal("CLI-1", problem, str(src))
    if workers is None:
        workers = _workers_for(src.stat().st_size)
    if workers > 0:
        return _export_parallel(src, dst, mode, workers)
    return write_jsonl(dst, export_lines(src, mode))


def import_file(src: str | Path, dst: str | Path) -> tuple[int, list[tuple[str, Diagnostic]]]:
    """CloudEvents file -> AEP event file; returns the number of events and what was dropped, with where."""
    diagnostics: list[tuple[str, Diagnostic]] = []
    n = write_jsonl(dst, import_lines(src, diagnostics))
    return n, diagnostics


def _run_export(src: Any, dst: Any, *, mode: str = "structured", **_: Any) -> dict:
    n = export_file(src, dst, mode="structured" if mode is None else mode)
    return {"events": n}


def _run_import(src: Any, dst: Any, **_: Any) -> dict:
    n, diagnostics = import_file(src, dst)
    return {"events": n, "dropped": [f"{where}: {d}" for where, d in diagnostics]}
