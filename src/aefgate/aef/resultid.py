"""Result ids ([RES-4]).

::

    resultId = "r_" + first 32 hex characters of SHA-256( UTF-8( runId ␟ caseId ␟ path ␟ trial ) )

where ␟ is U+001F and ``trial`` is the trial number in plain decimal digits, or the empty string on a line without
one. ``caseId`` and ``path`` hold no control character (the ``text`` pattern of the schemas), so the separator
cannot occur inside them.

A trial read from JSON is a binary64 number ([ENC-4]): ``3``, ``3.0`` and ``3e0`` are all the trial 3 and are
hashed as ``"3"`` (``conformance/result-ids.json`` has such a vector).
"""

from __future__ import annotations

import hashlib

__all__ = ["result_id", "trial_digits"]

_SEP = "\x1f"


def trial_digits(trial: int | float | None) -> str:
    """The ``trial`` part of [RES-4]: plain decimal digits, or ``""`` for ``None``.

    Accepts an int or an integral float (a JSON ``3.0`` is the integer 3, [ENC-4]). Raises ``TypeError`` for a
    bool or a non-number, ``ValueError`` for a negative, fractional or non-finite number (no plain digits spell it).
    """
    if trial is None:
        return ""
    if isinstance(trial, bool) or not isinstance(trial, (int, float)):
        raise TypeError(f"a trial is an integer, not {type(trial).__name__}")
    if isinstance(trial, float):
        if not trial.is_integer():  # False for nan and the infinities too
            raise ValueError(f"a trial is an integer, not {trial!r}")
        trial = int(trial)
    if trial < 0:
        raise ValueError(f"a trial is not negative: {trial}")
    return str(trial)


def result_id(run_id: str, case_id: str, path: str, trial: int | float | None) -> str:
    """The [RES-4] ``resultId`` of a line of run ``run_id`` for ``case_id`` at ``path`` and ``trial``.

    Raises ``ValueError`` when an input holds U+001F (the hash would be ambiguous; the schemas refuse it) or a
    lone surrogate (no UTF-8 spells it), and as :func:`trial_digits` does for a trial that is not one.
    """
    if _SEP in run_id or _SEP in case_id or _SEP in path:
        raise ValueError("runId, caseId and path hold no U+001F")
    text = _SEP.join((run_id, case_id, path, trial_digits(trial)))
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(f"not encodable as UTF-8: {e.reason}") from None
    return "r_" + hashlib.sha256(data).hexdigest()[:32]
