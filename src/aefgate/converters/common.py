"""What every importer checks the same way: the run-header options a caller gives (before anything is read or
written), refused as usage errors (``CLI-2``) at the option."""

from __future__ import annotations

from aefgate.errors import Refusal

__all__ = ["TARGET_MODES", "check_import_options", "verified_run"]

#: execution.targetMode ([RUN-7])
TARGET_MODES = ("live", "replayed", "scripted", "mocked")


def check_import_options(*, target_mode: str, content_capture: str, at: str | None) -> None:
    """``--target-mode`` one of :data:`TARGET_MODES`, ``--content-capture`` on or off, ``--at`` an [ENC-8] time."""
    from aefgate.formats.aef.times import parse_time

    if target_mode not in TARGET_MODES:
        raise Refusal("CLI-2", f"--target-mode is {', '.join(TARGET_MODES[:-1])} or {TARGET_MODES[-1]}, not "
                               f"{target_mode!r}", "--target-mode")
    if content_capture not in ("on", "off"):
        raise Refusal("CLI-2", f"--content-capture is on or off, not {content_capture!r}", "--content-capture")
    if at is not None:
        try:
            parse_time(at)
        except ValueError:
            raise Refusal("CLI-2", f"--at {at!r} is not an RFC 3339 UTC time (ENC-8)", "--at") from None


def verified_run(root, rule: str) -> dict:
    """The ``run.json`` of a run folder that verifies (intact or unsealed, with no problem), for an exporter: ``CLI-1``
    when ``root`` is no run folder, the exporter's own ``rule`` (exit 1) when the run does not verify (only a run
    that verifies is exported: AEP-1, IN-11, OT-8 and their kin)."""
    from pathlib import Path

    from aefgate.errors import EXIT_INTEGRITY
    from aefgate.formats.aef import jsonio
    from aefgate.formats.aef.verifier import verify_run

    root = Path(root)
    if not (root / "run.json").is_file():
        raise Refusal("CLI-1", "not a run folder (no run.json)", str(root))
    v = verify_run(root)
    if v.outcome == "invalid" or v.problems:
        where, code = v.problems[0] if v.problems else ("", "invalid")
        raise Refusal(rule, f"the run does not verify ({v.outcome}: {code} at {where}); only a run that verifies "
                            "is exported", where or str(root), exit_code=EXIT_INTEGRITY)
    return jsonio.read_json(root / "run.json")
