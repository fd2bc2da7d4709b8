"""Canonical JSON: RFC 8785 (the JSON Canonicalization Scheme) and numbers as ECMAScript writes them.

The one implementation in aefgate: every caller that needs JCS bytes (content digests of case content, R8-4) or a
number written as ``Number::toString`` writes it (the Inspect converter's reasons and blobs, the round-trip
harness) uses this module.

- :func:`number_to_string`: a finite number as ECMAScript writes its binary64 value.
- :func:`jcs`: a JSON value as RFC 8785 bytes; ``ValueError`` for what JCS cannot write (a non-finite number, a
  lone surrogate, a value that is not JSON).
"""

from __future__ import annotations

import math
import re
from typing import Any

import msgspec

__all__ = ["jcs", "number_to_string"]

SAFE_INT = 2**53 - 1
_SURROGATE = re.compile("[\ud800-\udfff]")



def number_to_string(x: int | float) -> str:
    """A number as ECMAScript's ``Number::toString`` writes its binary64 value: the shortest decimal that reads back
    as the same value; ``1000`` for ``1000`` and ``1000.0``; plain digits up to 21 digits (``1e16`` is
    ``10000000000000000``), then exponent form (``1e+21``); ``0.000001`` but ``1e-7`` (R8-4, JCS)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise TypeError(f"not a number: {x!r}")
    f = float(x)
    if not math.isfinite(f):
        raise ValueError("no finite value")
    if f == 0:
        return "0"
    sign = "-" if f < 0 else ""
    r = repr(abs(f))  # shortest round-trip digits
    mant, _, exp = r.partition("e")
    e = int(exp) if exp else 0
    intpart, _, frac = mant.partition(".")
    digits = (intpart + frac).lstrip("0")
    # the position of the decimal point relative to the first significant digit
    lead = len(intpart + frac) - len((intpart + frac).lstrip("0"))
    n = len(intpart) - lead + e  # value = 0.d1d2... x 10^n
    digits = digits.rstrip("0") or "0"
    k = len(digits)
    if k <= n <= 21:
        out = digits + "0" * (n - k)
    elif 0 < n <= 21:
        out = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        out = "0." + "0" * (-n) + digits
    else:
        d = n - 1
        out = digits[0] + ("." + digits[1:] if k > 1 else "") + "e" + ("+" if d >= 0 else "-") + str(abs(d))
    return sign + out


class _JcsError(ValueError):
    pass


_JCS_ESC = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _jcs_str(s: str) -> str:
    if _SURROGATE.search(s):
        raise _JcsError("an unpaired surrogate")
    out = []
    for ch in s:
        if ch in _JCS_ESC:
            out.append(_JCS_ESC[ch])
        elif ch < " ":
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


class _HasFloat(Exception):
    pass


def _refuse_float(literal: str) -> float:
    """A float msgspec wrote: kept when it is how ECMAScript writes it (JCS numbers), else the exact writer."""
    value = float(literal)
    if not math.isfinite(value) or number_to_string(value) != literal:
        raise _HasFloat
    return value


_float_probe = msgspec.json.Decoder(float_hook=_refuse_float)
_jcs_encoder = msgspec.json.Encoder(order="sorted")
# Where msgspec's sorted compact JSON may differ from JCS: a run of 16+ digits that does not continue a fraction nor
# go on into one (an integer beyond 2^53 may be one; floats are checked as they are read back), which JCS writes
# as ECMAScript writes the nearest binary64), and UTF-8 lead bytes of U+E000..U+FFFF and of supplementary characters
# (code point order and UTF-16 order sort those names differently). Both send the value to the exact writer.
_JCS_DIFFERS = re.compile(rb"(?<![0-9.])[0-9]{16}(?![.eE])|[\xee-\xf4]")


def jcs(value: Any) -> bytes:
    """``value`` serialized by the JSON Canonicalization Scheme (RFC 8785): no whitespace, numbers as ECMAScript
    writes them, members sorted by the UTF-16 code units of their names, UTF-8. Raises ValueError for what JCS
    cannot write: NaN, an infinity, an unpaired surrogate, a value that is not JSON.

    Fast path: msgspec's compact sorted JSON is JCS for a value whose floats it writes as ECMAScript does (most: the
    shortest round-trip digits, though 1.0 is "1.0" and 1e-07 "1e-07"), without integers beyond 2^53 and
    without names where UTF-16 order is not code point order (its strings escape exactly what JCS escapes, with
    lowercase hex), when reading it back gives the value; anything else goes to the exact writer (:func:`_jcs_exact`).
    """
    if type(value) in (dict, list):
        try:
            out = _jcs_encoder.encode(value)
            # read back (refusing floats not written as JCS writes them), it must be the value itself: bytes, dates,
            # sets... are not JSON values
            if not _JCS_DIFFERS.search(out) and _float_probe.decode(out) == value:
                return out
        except (_HasFloat, TypeError, ValueError, UnicodeEncodeError, msgspec.MsgspecError):
            pass
    return _jcs_exact(value)


def _jcs_exact(value: Any) -> bytes:
    """:func:`jcs`, written value by value."""
    parts: list[str] = []

    def walk(v: Any, depth: int) -> None:
        if depth > 10_000:
            raise _JcsError("too deep")
        if v is None:
            parts.append("null")
        elif v is True:
            parts.append("true")
        elif v is False:
            parts.append("false")
        elif isinstance(v, str):
            parts.append(_jcs_str(v))
        elif isinstance(v, (int, float)):
            if isinstance(v, float) and not math.isfinite(v):
                raise _JcsError("NaN" if v != v else "an infinity")
            if isinstance(v, int) and abs(v) <= SAFE_INT:
                parts.append(str(v))
            else:
                try:
                    parts.append(number_to_string(float(v)))
                except OverflowError:
                    raise _JcsError("a number beyond binary64") from None
        elif isinstance(v, (list, tuple)):
            parts.append("[")
            for i, x in enumerate(v):
                if i:
                    parts.append(",")
                walk(x, depth + 1)
            parts.append("]")
        elif isinstance(v, dict):
            parts.append("{")
            keys = list(v)
            for key in keys:
                if not isinstance(key, str):
                    raise _JcsError("a member name that is not a string")
            for i, key in enumerate(sorted(keys, key=lambda s: s.encode("utf-16-be", "surrogatepass"))):
                if i:
                    parts.append(",")
                parts.append(_jcs_str(key))
                parts.append(":")
                walk(v[key], depth + 1)
            parts.append("}")
        else:
            raise _JcsError(f"a {type(v).__name__}, which is not JSON")

    walk(value, 0)
    return "".join(parts).encode("utf-8")
