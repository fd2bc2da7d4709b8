"""Times ([ENC-8]): RFC 3339 UTC timestamps with 0..9 fraction digits, compared exactly.

A timestamp is parsed to ``(seconds since 0001-01-01, nanoseconds)``: an exact, totally ordered value, so
``…:02Z`` equals ``…:02.000Z`` and nothing is rounded. A date that does not exist (``2026-02-31``) is refused,
never rolled over.
"""

from __future__ import annotations

import datetime as _dt
import re

_TS = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]{1,9}))?Z\Z"
)


def parse_time(text: str) -> tuple[int, int]:
    """``(seconds, nanoseconds)`` of an [ENC-8] timestamp; ValueError when it is not one or does not exist."""
    m = _TS.match(text) if type(text) is str else None
    if m is None:
        raise ValueError(f"not an RFC 3339 UTC timestamp: {text!r}")
    y, mo, d, h, mi, s, frac = m.groups()
    day = _dt.date(int(y), int(mo), int(d))  # ValueError for a date that does not exist
    hh, mm, ss = int(h), int(mi), int(s)
    if hh > 23 or mm > 59 or ss > 59:
        raise ValueError(f"not a time of day: {text!r}")
    secs = day.toordinal() * 86400 + hh * 3600 + mm * 60 + ss
    nanos = int((frac or "").ljust(9, "0")) if frac else 0
    return secs, nanos


def format_time(dt: _dt.datetime) -> str:
    """An aware or naive-UTC datetime as an [ENC-8] string (microseconds when present)."""
    if dt.tzinfo is not None:
        dt = dt.astimezone(_dt.timezone.utc).replace(tzinfo=None)
    s = dt.strftime("%Y-%m-%dT%H:%M:%S")
    if dt.microsecond:
        s += "." + f"{dt.microsecond:06d}".rstrip("0")
    return s + "Z"


def now() -> str:
    return format_time(_dt.datetime.now(_dt.timezone.utc))


_OFFSET_TS = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt]([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]{1,9}))?(?:([Zz])|([+-])([0-9]{2}):([0-9]{2}))\Z"
)


def to_utc(text: str) -> str | None:
    """An RFC 3339 time with any offset as the [ENC-8] UTC string of the same instant, every fraction digit kept
    (``2026-09-09T14:31:07.412+02:00`` -> ``2026-09-09T12:31:07.412Z``); None when it is not one."""
    m = _OFFSET_TS.match(text) if type(text) is str else None
    if m is None:
        return None
    y, mo, d, h, mi, s, frac, z, sign, oh, om = m.groups()
    try:
        day = _dt.date(int(y), int(mo), int(d))
    except ValueError:
        return None
    if int(h) > 23 or int(mi) > 59 or int(s) > 59 or (oh is not None and (int(oh) > 23 or int(om) > 59)):
        return None
    t = _dt.datetime(day.year, day.month, day.day, int(h), int(mi), int(s))
    if not z:
        delta = _dt.timedelta(hours=int(oh), minutes=int(om))
        t = t - delta if sign == "+" else t + delta
    if not 1 <= t.year <= 9999:
        return None
    return t.strftime("%Y-%m-%dT%H:%M:%S") + (f".{frac}" if frac else "") + "Z"
