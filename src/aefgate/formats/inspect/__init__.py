"""Inspect AI eval logs: reading and writing the ``.eval`` and ``.json`` files (no conversion here).

- :func:`open_log` (``path``) -> :class:`InspectLog`: ``.header`` (the ``EvalLog`` without ``samples``),
  ``.sample_count``, ``.samples()`` (one sample at a time), ``.summaries()``; ``.eval`` and ``.json`` told apart
  by content. See :mod:`.reader`.
- :func:`write_log` (``path, header, samples, *, fmt="json"|"eval", overwrite=False``): atomic, streamed; the
  ``.eval`` in Inspect's member layout with zstd members. See :mod:`.writer`.
- :mod:`.zipsafe`: the untrusted-ZIP reader and its bounds; :mod:`.jsontext`: Inspect's JSON (``NaN``);
  :mod:`.rules`: the rule ids refused with.

This package does not import ``inspect_ai``: it works without it. ``docs/mappings/inspect-format.md`` says what
is accepted, refused and written.
"""

from aefgate.formats.inspect.jsontext import MAX_VALUE_CHARS
from aefgate.formats.inspect.reader import InspectLog, Sample, open_log, resolve_events_data
from aefgate.formats.inspect.writer import write_log
from aefgate.formats.inspect.zipsafe import (
    MAX_DIRECTORY,
    MAX_MEMBER_SIZE,
    MAX_MEMBERS,
    MAX_RATIO,
    RATIO_FLOOR,
)

__all__ = [
    "Sample",
    "InspectLog",
    "open_log",
    "write_log",
    "resolve_events_data",
    "MAX_MEMBERS",
    "MAX_DIRECTORY",
    "MAX_MEMBER_SIZE",
    "MAX_RATIO",
    "RATIO_FLOOR",
    "MAX_VALUE_CHARS",
]
