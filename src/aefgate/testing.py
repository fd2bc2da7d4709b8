"""Round-trip assertions for a user's own tests (no pytest needed to import this module).

``assert_round_trip(path, "inspect")`` runs aefgate's round-trip harness (:func:`aefgate.fidelity`) on a run
folder (AEF -> FORMAT -> AEF) or, with ``from_source=True``, on a file in FORMAT (FORMAT -> AEF -> FORMAT), and
raises ``AssertionError`` with the harness's report of what was lost but not declared (or of a refused way back).
It returns the report, for further assertions. The pytest plugin (:mod:`aefgate.pytest_plugin`, registered through
the ``pytest11`` entry point) offers it as the fixture ``aefgate_round_trip``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aefgate.errors import Refusal

if TYPE_CHECKING:  # pragma: no cover - types only
    from aefgate.converters.fidelity import FidelityReport

__all__ = ["assert_round_trip"]


def assert_round_trip(path: str | os.PathLike[str], fmt: str, *, from_source: bool = False,
                      **options: Any) -> "FidelityReport":
    """Assert that ``path`` round-trips through ``fmt`` with only the losses the converters declare; ``options``
    go to the conversion steps that take them (``max_capture="full"``, ``ignore_overlays=True``, ...)."""
    from aefgate.api import fidelity  # lazy: the pytest plugin imports this module in every pytest session

    p = Path(path)
    try:
        report = fidelity(fmt, from_source=p, options=options) if from_source else fidelity(fmt, p, options=options)
    except Refusal as r:
        raise AssertionError(f"the round trip through {fmt} could not start: [{r.rule}] at {r.where}: {r.message}") \
            from None
    if not report.ok:
        raise AssertionError(report.summary())
    return report
