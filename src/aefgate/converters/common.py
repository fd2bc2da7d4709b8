"""What every importer checks the same way: the run-header options a caller gives (before anything is read or
written), refused as usage errors (``CLI-2``) at the option."""

from __future__ import annotations

from aefgate.errors import Refusal
from aefgate.formats.aef.onepass import LineMapper

__all__ = ["TARGET_MODES", "CollectLines", "check_import_options", "verified_lines", "verified_pass", "verified_run"]

#: execution.targetMode ([RUN-7])
TARGET_MODES = ("live", "replayed", "scripted", "mocked")


def check_import_options(*, target_mode: str, content_capture: str, at: str | None) -> None:
    """Option ``target_mode`` one of :data:`TARGET_MODES`, ``content_capture`` on or off, ``at`` an [ENC-8] time
    (refusals name the option as ``option 'NAME'``: the command line writes it as the flag of the command that ran)."""
    from aefgate.formats.aef.times import parse_time

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


def verified_pass(root, rule: str, mapper, *, withheld_ok=()) -> object:
    """Verify the run folder ``root`` while ``mapper`` (an :class:`aefgate.formats.aef.onepass.LineMapper`) converts
    it, in one pass; refused unless it verifies (intact or unsealed, with no problem but an authorized
    ``withheld``): ``CLI-1`` when ``root`` is no run folder, the exporter's own ``rule`` (exit 1) when the run does
    not verify (only a run that verifies is exported: AEP-1, IN-11, OT-8 and their kin), then the mapper's own
    refusal. Returns the :class:`Verification`; the mapper's output may be released."""
    from pathlib import Path

    from aefgate.errors import EXIT_INTEGRITY
    from aefgate.formats.aef.onepass import verify_mapping

    root = Path(root)
    if not (root / "run.json").is_file():
        raise Refusal("CLI-1", "not a run folder (no run.json)", str(root))
    v = verify_mapping(root, mapper, withheld_ok=withheld_ok)
    bad = [p for p in v.problems if p[1] != "withheld"]
    if v.outcome == "invalid" or bad:
        where, code = bad[0] if bad else ("", "invalid")
        raise Refusal(rule, f"the run does not verify ({v.outcome}: {code} at {where}); only a run that verifies "
                            "is exported", where or str(root), exit_code=EXIT_INTEGRITY)
    if mapper.failure is not None:
        raise mapper.failure
    return v


def verified_lines(root, rule: str, *, withheld_ok=()) -> tuple[dict, list[tuple[int, dict]]]:
    """``(run.json, [(line number, result line)])`` of a run that verifies, read in the one pass that verifies
    it (:func:`verified_pass`): for an exporter that needs every line before it writes."""
    m = CollectLines(rule)
    verified_pass(root, rule, m, withheld_ok=withheld_ok)
    return m.run, m.lines


def verified_run(root, rule: str) -> dict:
    """The ``run.json`` of a run folder that verifies (:func:`verified_pass`), for an exporter."""
    m = CollectLines(rule, keep=False)
    verified_pass(root, rule, m)
    return m.run


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
