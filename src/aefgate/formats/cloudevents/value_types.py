"""CloudEvents 1.0's value types, as both the bridge (``mapping.py``) and the validity check (``conformance.py``) read
them: the String type's forbidden characters (:func:`bad_chars`), the Integer range (``_INT_MIN``..``_INT_MAX``), the
Timestamp (an RFC 3339 ``date-time``, ``rfc3339``), and the JSON type of a value, for messages (``_json_type``).

Layering: the bottom of the package; ``conformance.py`` imports it, ``mapping.py`` imports both (and re-exports these
names), so the dependencies go one way: ``value_types`` < ``conformance`` < ``mapping``.
"""

from __future__ import annotations

import re
from typing import Any

# CloudEvents 1.0 String: no C0/C1 controls, no surrogates, no noncharacters
_CE_BAD_CHARS = re.compile(
    "[\x00-\x1f\x7f-\x9f\ud800-\udfff\ufdd0-\ufdef\ufffe\uffff"
    "\U0001fffe\U0001ffff\U0002fffe\U0002ffff\U0003fffe\U0003ffff\U0004fffe\U0004ffff\U0005fffe\U0005ffff"
    "\U0006fffe\U0006ffff\U0007fffe\U0007ffff\U0008fffe\U0008ffff\U0009fffe\U0009ffff\U000afffe\U000affff"
    "\U000bfffe\U000bffff\U000cfffe\U000cffff\U000dfffe\U000dffff\U000efffe\U000effff\U000ffffe\U000fffff"
    "\U0010fffe\U0010ffff]"
)
_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1  # CloudEvents 1.0 Integer


def bad_chars(text: str) -> bool:
    """True when ``text`` holds a character CloudEvents' String type forbids (fast for ASCII text)."""
    if text.isascii():
        return not text.isprintable()  # in ASCII: exactly the C0 controls and DEL
    return _CE_BAD_CHARS.search(text) is not None


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    return {dict: "object", list: "array", float: "number", str: "string", bool: "boolean", int: "integer"}.get(
        type(value), type(value).__name__
    )


# RFC 3339 date-time (section 5.6), time zone required; lower-case t/z allowed by RFC 3339 §5.6's NOTE
_RFC3339 = re.compile(
    r"([0-9]{4})-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])[Tt]([01][0-9]|2[0-3]):([0-5][0-9]):([0-5][0-9]|60)"
    r"(\.[0-9]+)?([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"
)
_DAYS = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def rfc3339(text: str) -> bool:
    """True when ``text`` is an RFC 3339 ``date-time`` (the day exists in its month and year)."""
    m = _RFC3339.fullmatch(text)
    if m is None:
        return False
    if text[8:10] > "28":
        year, month, day = int(m.group(1)), int(m.group(2)), int(m.group(3))
        if day > _DAYS[month - 1]:
            return False
        if month == 2 and day == 29 and not (year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)):
            return False
    return True
