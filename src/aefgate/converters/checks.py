"""What converters share: the run-header options every importer checks the same way (before anything is read or
written, refused as usage errors at the option), and every exporter's one verification (:func:`verified`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aefgate.errors import EXIT_INTEGRITY, Refusal
from aefgate.aef.onepass import LineMapper
from aefgate.aef.times import parse_time
from aefgate.aef.verifier import Verification, verify_run

__all__ = ["TARGET_MODES", "CollectLines", "check_import_options", "verified", "verified_lines"]

#: execution.targetMode ([RUN-7])
TARGET_MODES = ("live", "replayed", "scripted", "mocked")


def check_import_options(*, target_mode: str, content_capture: str, at: str | None) -> None:
    """Option ``target_mode`` one of :data:`TARGET_MODES`, ``content_capture`` on or off, ``at`` an [ENC-8] time
    (refusals name the option as ``option 'NAME'``: the command line writes it as the flag of the command that ran)."""
    if target_mode not in TARGET_MODES:
        raise Refusal("CLI-2", f"option 'target_mode' is {', '.join(TARGET_MODES[:-1])} or {TARGET_MODES[-1]}, not "
                               f"{target_mode!r}", "option 'target_mode'")
    if content_capture not in ("on", "off"):
        raise Refusal("CLI-2", f"option 'content_capture' is on or off, not {content_capture!r}",
                      "option 'content_capture'")
    if at is not None:
        try:
            parse_time(at)
        except ValueError:
            raise Refusal("CLI-2", f"option 'at' {at!r} is not an RFC 3339 UTC time (ENC-8)", "option 'at'") from None


def verified(root, rule: str, *, mapper: LineMapper | None = None, policy: Any = None, withheld_ok=(),
             unsealed_ok: bool = True) -> Verification:
    """Every exporter's "only a run that verifies is exported" (AEP-1, IN-11, OT-8, ASSERT-12, EVAPI-8 and their
    kin), in one place: verify the run folder ``root`` (under the trust ``policy`` when given), with ``mapper`` (an
    :class:`aefgate.aef.onepass.LineMapper`) converting it in the same pass, and refuse unless it verifies:
    ``CLI-1`` (the input is not what the parameter takes) when ``root`` is no run folder; the exporter's own ``rule`` (exit 1) when the run is ``invalid``, has
    a problem but an authorized ``withheld``, or is ``unsealed`` while ``unsealed_ok`` is false; then the mapper's
    own refusal. Returns the :class:`Verification`; the mapper's output may then be released."""
    root = Path(root)
    if not (root / "run.json").is_file():
        raise Refusal("CLI-1", "not a run folder (a run is a folder holding run.json)", str(root))
    v = verify_run(root, policy=policy, mapper=mapper, withheld_ok=withheld_ok)
    bad = [p for p in v.problems if p[1] != "withheld"]
    if v.outcome == "invalid" or bad or (v.outcome == "unsealed" and not unsealed_ok):
        where, code = bad[0] if bad else ("seal.json", "no seal") if v.outcome == "unsealed" else ("", "invalid")
        wanted = "verifies" if unsealed_ok else "verifies intact"
        raise Refusal(rule, f"only a run that {wanted} is exported; this one is {v.outcome}: {code} at "
                            f"{where or root}", where or str(root), exit_code=EXIT_INTEGRITY)
    if mapper is not None and mapper.failure is not None:
        raise mapper.failure
    return v


def verified_lines(root, rule: str, *, withheld_ok=()) -> tuple[dict, list[tuple[int, dict]]]:
    """``(run.json, [(line number, result line)])`` of a run that verifies, read in the one pass that verifies
    it (:func:`verified`): for an exporter that needs every line before it writes."""
    m = CollectLines(rule)
    verified(root, rule, mapper=m, withheld_ok=withheld_ok)
    return m.run, m.lines


class CollectLines(LineMapper):
    """The verified run header and result lines themselves, in order (``keep=False``: the header only)."""

    def __init__(self, rule: str, keep: bool = True) -> None:
        super().__init__()
        self.rule, self.keep = rule, keep
        self.run: dict = {}
        self.summary: dict | None = None
        self.lines: list[tuple[int, dict]] = []

    def begin(self, run: dict, summary: dict | None) -> None:
        self.run, self.summary = run, summary

    def map(self, lines: list[tuple[int, dict]], base: int | None) -> list[tuple[int, dict]] | None:
        return lines if self.keep else None

    def put(self, payload: list[tuple[int, dict]]) -> None:
        self.lines.extend(payload)
