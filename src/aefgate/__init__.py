"""aefgate: an interop gateway for AI-evaluation evidence, with AEF 1.0 as its hub.

The public Python API (:mod:`aefgate.api`, re-exported here): :func:`verify`, :func:`seal`, :func:`convert`,
:func:`fidelity`, :func:`list_formats`, and the types :class:`Refusal`, :class:`Verification`, :class:`FidelityReport`.
They are imported when first used, so ``import aefgate`` stays cheap. Everything else is private by convention.
"""

from typing import TYPE_CHECKING, Any

from aefgate._version import PRODUCER_NAME, __version__

if TYPE_CHECKING:  # pragma: no cover - types only
    from aefgate.api import (FidelityReport, Refusal, Verification, convert, fidelity, list_formats, seal,
                             verify)

__all__ = ["FidelityReport", "PRODUCER_NAME", "Refusal", "Verification", "__version__", "convert", "fidelity",
           "list_formats", "seal", "verify"]

_PUBLIC = frozenset(__all__) - {"PRODUCER_NAME", "__version__"}


def __getattr__(name: str) -> Any:
    if name == "Refusal":  # the error type alone: without loading the API's formats and converters
        from aefgate.errors import Refusal

        return Refusal
    if name in _PUBLIC:
        # lazy: `import aefgate` stays cheap (the API loads every format and converter)
        from aefgate import api

        return getattr(api, name)
    raise AttributeError(f"module 'aefgate' has no attribute {name!r}")
