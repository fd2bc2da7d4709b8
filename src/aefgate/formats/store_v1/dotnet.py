"""The values store v1 writes as .NET serialises them (``../shared/samples/store-v1/FORMAT.md`` §2), read exactly.

- A ``DateTimeOffset`` (``2026-05-20T09:14:07.4137251+00:00``; ``Z`` is read too) becomes an [ENC-8] UTC time with
  the same instant and the fraction digits as written (nothing rounded): :func:`utc_time`.
- A ``TimeSpan`` in its ``"c"`` form (``[-][d.]hh:mm:ss[.fffffff]``) becomes nanoseconds: :func:`timespan_ns`.
- :func:`add_ns` adds nanoseconds to an [ENC-8] time exactly (``endedAt`` = ``startedAt`` + the run's duration).

Each raises ``ValueError`` for a value that is not of its form or does not exist (``2026-02-31``); the reader turns
that into its refusal with the file at fault.
"""

from __future__ import annotations

import datetime as _dt
import re

__all__ = ["utc_time", "timespan_ns", "add_ns", "split_time"]

_DTO = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]{1,9}))?"
    r"(Z|[+-][0-9]{2}:[0-9]{2})\Z"
)
_SPAN = re.compile(r"(-)?(?:([0-9]{1,8})\.)?([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]{1,7}))?\Z")
_UTC = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]{1,9}))?Z\Z")
_EPOCH = _dt.datetime(1, 1, 1)


def _seconds(y: str, mo: str, d: str, h: str, mi: str, s: str, text: str) -> int:
    """Whole seconds since 0001-01-01T00:00:00 of a calendar time; ValueError when it does not exist."""
    hh, mm, ss = int(h), int(mi), int(s)
    if hh > 23 or mm > 59 or ss > 59:
        raise ValueError(f"not a time of day: {text!r}")
    day = _dt.date(int(y), int(mo), int(d))  # ValueError for a date that does not exist
    return (day.toordinal() - 1) * 86400 + hh * 3600 + mm * 60 + ss


def _format(seconds: int, frac: str) -> str:
    if seconds < 0:
        raise ValueError("a time before the year 1")
    t = _EPOCH + _dt.timedelta(seconds=seconds)
    if t.year > 9999:  # pragma: no cover - timedelta overflows first
        raise ValueError("a time after the year 9999")
    stamp = f"{t.year:04d}-{t.month:02d}-{t.day:02d}T{t.hour:02d}:{t.minute:02d}:{t.second:02d}"
    return stamp + (f".{frac}" if frac else "") + "Z"


def utc_time(text: str) -> str:
    """A ``DateTimeOffset`` as the [ENC-8] UTC time of the same instant, its fraction digits kept as written."""
    m = _DTO.match(text) if isinstance(text, str) else None
    if m is None:
        raise ValueError(f"not a date and time with an offset: {text!r}")
    y, mo, d, h, mi, s, frac, off = m.groups()
    secs = _seconds(y, mo, d, h, mi, s, text)
    if off != "Z":
        oh, om = int(off[1:3]), int(off[4:6])
        if oh > 14 or om > 59 or (oh == 14 and om):
            raise ValueError(f"not an offset: {off!r}")
        delta = oh * 3600 + om * 60
        secs = secs - delta if off[0] == "+" else secs + delta
    try:
        return _format(secs, frac or "")
    except OverflowError:
        raise ValueError(f"out of range once in UTC: {text!r}") from None


def split_time(text: str) -> tuple[int, int]:
    """``(seconds since 0001-01-01, nanoseconds)`` of an [ENC-8] time."""
    m = _UTC.match(text)
    if m is None:
        raise ValueError(f"not an RFC 3339 UTC time: {text!r}")
    y, mo, d, h, mi, s, frac = m.groups()
    return _seconds(y, mo, d, h, mi, s, text), int((frac or "").ljust(9, "0") or 0)


def timespan_ns(text: str) -> int:
    """A ``TimeSpan`` in its ``"c"`` form (``00:00:48.2164093``, ``1.02:00:00``, ``-00:00:01``) in nanoseconds."""
    m = _SPAN.match(text) if isinstance(text, str) else None
    if m is None:
        raise ValueError(f"not a TimeSpan ([-][d.]hh:mm:ss[.fffffff]): {text!r}")
    neg, days, h, mi, s, frac = m.groups()
    hh, mm, ss = int(h), int(mi), int(s)
    if hh > 23 or mm > 59 or ss > 59:
        raise ValueError(f"not a TimeSpan: {text!r}")
    ns = ((int(days or 0) * 24 + hh) * 60 + mm) * 60 + ss
    ns = ns * 1_000_000_000 + int((frac or "").ljust(9, "0") or 0)
    return -ns if neg else ns


def add_ns(utc: str, ns: int) -> str:
    """``utc`` (an [ENC-8] time) plus ``ns`` nanoseconds, exactly; the fraction without trailing zeros (none when
    it is zero), or as written when ``ns`` is 0."""
    if ns == 0:
        return utc
    secs, nanos = split_time(utc)
    total = secs * 1_000_000_000 + nanos + ns
    s, n = divmod(total, 1_000_000_000)
    try:
        return _format(s, f"{n:09d}".rstrip("0") if n else "")
    except OverflowError:
        raise ValueError("the time is out of range") from None
