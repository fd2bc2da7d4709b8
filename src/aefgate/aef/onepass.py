"""The one pass: verify a run and convert it at once (issue 20; docs/design/one-pass.md).

An exporter supplies a :class:`LineMapper`: what it makes of the run header and of each result line. The verifier
(:func:`aefgate.aef.verifier.verify_run`) hands the mapper the ``run.json`` and ``summary.json`` it read
(the very bytes it hashes), then every line of ``results.ndjson`` that reads (decoded and valid against the reader
schema) as it checks it: in this process, or in its worker processes over ranges of whole lines, the mapped output
coming back to :meth:`LineMapper.put` in line order. The mapper writes that output somewhere nothing reads yet (a
temporary file, a spool); ``verify_run(root, mapper=...)`` returns the verdict, and the exporter releases the output only
when the verdict is one it accepts (``intact``; ``unsealed`` where the command allows it). So every exporter's rule
"only a verified run is exported" (AEP-1, IN-11, OT-8 and their kin) holds while the run is read once:

- what is mapped is what was checked (the same decoded line), and what was checked is what was hashed: in this
  process the hash is fed by the same reads; across worker processes each range is hashed twice, by the worker
  that read it and by the verifier's hashing thread, and a difference (the file changed during the pass) is a
  framing problem of the file and a refusal of the mapper's;
- a line that does not read is never mapped, and the run is then invalid: nothing derived from it is released;
- a refusal of the mapper's (a line it cannot convert) is kept and raised after the verdict, which comes first.

A mapper that numbers its output across lines (the AEP events' ``seq``) sets :attr:`LineMapper.counts`: with
worker processes each range is counted first (:meth:`LineMapper.count`, a cheap skipping decode) so the range
knows where its numbering starts.
"""

from __future__ import annotations

import traceback
from typing import Any

from aefgate.errors import Refusal

__all__ = ["LineMapper", "MappingError"]


class MappingError(RuntimeError):
    """The mapper failed in an unexpected way on a run that verified (a bug: the message is its traceback)."""


class _Refused:
    """A mapper's refusal or error, as it travels back from a worker process (picklable)."""

    __slots__ = ("args",)

    def __init__(self, e: BaseException):
        if isinstance(e, Refusal):
            self.args = (e.rule, e.message, e.where, e.exit_code)
        else:
            self.args = ("".join(traceback.format_exception(e)),)

    def refusal(self) -> Exception:
        if len(self.args) == 1:
            return MappingError(self.args[0])
        rule, message, where, code = self.args
        return Refusal(rule, message, where, exit_code=code)


class _Partial:
    """The outputs of the lines of a batch before the one the mapper failed on, and that failure."""

    __slots__ = ("done", "refused")

    def __init__(self, done: list, refused: _Refused | None):
        self.done, self.refused = done, refused


class LineMapper:
    """What an exporter supplies to the one pass (the verifier calls these; see the module docstring).

    In the parent process: :meth:`begin` (before the result lines), :meth:`put` (each batch's output, in line
    order), :meth:`failed`. In the worker processes too (forked after :meth:`begin`, so they inherit its state):
    :meth:`map` and :meth:`count`."""

    rule = "AEP-1"  # the exporter's rule for "only a verified run is exported" (refusals of a changed run)
    counts = False  # whether map numbers its output across lines (then count and first_count are used)

    def __init__(self) -> None:
        self.failure: Exception | None = None

    def begin(self, run: dict, summary: dict | None) -> None:
        """The verified header: ``run.json`` (with its ``ext``) and ``summary.json`` (None when absent or invalid)."""

    def first_count(self) -> int:
        """Where the numbering starts (the first range's base)."""
        return 0

    def count(self, data: bytes) -> int:  # pragma: no cover - a mapper with counts overrides it
        """How many numbers the lines of ``data`` (whole lines of results.ndjson) take."""
        raise NotImplementedError

    def map(self, lines: list[tuple[int, dict]], base: int | None) -> Any:  # pragma: no cover - abstract
        """The output of ``lines`` (``(line number, decoded line)``, in order), picklable; ``base``: where the
        numbering starts for them (None: where the previous call's ended, in this process)."""
        raise NotImplementedError

    def put(self, payload: Any) -> None:  # pragma: no cover - abstract
        """Keep one batch's output (in the parent, in line order), where nothing reads it before the verdict."""
        raise NotImplementedError

    # -- called by the verifier ----------------------------------------------------------------------------
    def map_lines(self, lines: list[tuple[int, dict]], base: int | None) -> Any:
        if self.failure is not None:
            return None
        try:
            return self.map(lines, base)
        except Exception:  # noqa: BLE001 - kept for after the verdict: a broken run may break the mapping
            pass
        # line by line, to hand on what the lines before the failing one make (as a line-at-a-time export would)
        done: list = []
        for i, line in enumerate(lines):
            try:
                done.append(self.map([line], base if i == 0 else None))
            except Exception as e:  # noqa: BLE001
                return _Partial(done, _Refused(e))
        return _Partial(done, None)  # pragma: no cover - the batch failed, one of its lines must

    def take(self, payload: Any) -> None:
        if type(payload) is _Partial:
            for p in payload.done:
                self.take(p)
            if payload.refused is not None:
                self.failed(payload.refused.refusal())
        elif self.failure is None and payload is not None:
            self.put(payload)

    def failed(self, e: Exception) -> None:
        """Keep the first refusal (or :class:`MappingError`); nothing more is put."""
        if self.failure is None:
            self.failure = e
