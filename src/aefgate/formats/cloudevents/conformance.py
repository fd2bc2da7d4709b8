"""CloudEvents 1.0 validity of a structured-JSON CloudEvent (a dict), AEP-0005 §5.2.

:func:`is_valid_cloudevent` checks the CloudEvents 1.0.2 core specification and JSON event format rules:

- required ``specversion`` (``"1.0"``), ``id``, ``source``, ``type``: non-empty strings, ``source`` a
  URI-reference (RFC 3986);
- optional ``subject``, ``datacontenttype`` (an RFC 2046 media type), ``dataschema`` (an absolute URI), ``time``
  (an RFC 3339 date-time): present means non-empty and of that form;
- attribute names: lower-case ASCII letters and digits (with ``strict``, also at most 20 characters, the
  specification's SHOULD); ``data`` and ``data_base64`` are the JSON format's data members and exclusive, and
  ``data_base64`` is Base64;
- extension values: String, Integer (32-bit, not a JSON boolean) or Boolean; a JSON ``null`` is refused
  (CloudEvents 1.0 has no null value); every String without the characters CE forbids (C0/C1 controls,
  surrogates, noncharacters).

Layering: CloudEvents' value types come from ``value_types.py`` below; the bridge (``mapping.py``) is above and uses
:func:`core_problem`. Nothing here imports the bridge.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

from aefgate.formats.cloudevents.value_types import _INT_MAX, _INT_MIN, _json_type, rfc3339, bad_chars

__all__ = ["is_valid_cloudevent", "core_problem"]

_NAME = re.compile(r"[a-z0-9]+")
_URI_CHARS = re.compile(r"(?:[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=]|%[0-9A-Fa-f]{2})*")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*")
_TOKEN = r"[!#$%&'*+.^_`|~0-9A-Za-z\-]+"
_MEDIA_TYPE = re.compile(rf"{_TOKEN}/{_TOKEN}(?:\s*;\s*{_TOKEN}=(?:{_TOKEN}|\"(?:[^\"\\]|\\.)*\"))*\s*")
_CORE = ("specversion", "id", "source", "type", "datacontenttype", "dataschema", "subject", "time")
_DATA = ("data", "data_base64")


def _uri_problem(value: str, absolute: bool) -> str | None:
    if not _URI_CHARS.fullmatch(value):
        return "not a URI reference (RFC 3986: a character that must be percent-encoded, or a bad escape)"
    first = re.split(r"[/?#]", value, maxsplit=1)[0]
    if ":" in first:
        if not _SCHEME.fullmatch(first.split(":", 1)[0]):
            return "not a URI reference (RFC 3986: an ill-formed scheme)"
    elif absolute:
        return "not an absolute URI (no scheme)"
    return None


def _string_problem(name: str, value: Any) -> str | None:
    if type(value) is not str:
        return f"{name} must be a string, not {_json_type(value)}"
    if not value:
        return f"{name} must not be empty"
    if bad_chars(value):
        return f"{name} holds a character CloudEvents' String type forbids"
    return None


def core_problem(ce: dict) -> tuple[str, str] | None:
    """``(attribute, reason)`` for the first problem of the CE context attributes and data members, else None.

    Extension attributes are not looked at (the inverse drops an unreadable one with a diagnostic, AEP-0005 §2).
    """
    for name in ("specversion", "id", "source", "type"):
        if name not in ce:
            return name, f"the required attribute {name} is missing"
    for name in _CORE:
        if name not in ce:
            continue
        value = ce[name]
        p = _string_problem(name, value)
        if p:
            return name, p
        if name == "specversion" and value != "1.0":
            return name, f"specversion must be \"1.0\", not {value!r}"
        if name == "source" or name == "dataschema":
            p = _uri_problem(value, absolute=name == "dataschema")
            if p:
                return name, f"{name} is {p}"
        elif name == "time" and not rfc3339(value):
            return name, f"time is not an RFC 3339 date-time: {value!r}"
        elif name == "datacontenttype" and not _MEDIA_TYPE.fullmatch(value):
            return name, f"datacontenttype is not a media type (RFC 2046): {value!r}"
    if "data" in ce and "data_base64" in ce:
        return "data_base64", "data and data_base64 are exclusive"
    if "data_base64" in ce:
        v = ce["data_base64"]
        if type(v) is not str:
            return "data_base64", f"data_base64 must be a string, not {_json_type(v)}"
        try:
            base64.b64decode(v, validate=True)
        except (binascii.Error, ValueError):
            return "data_base64", "data_base64 is not Base64"
    return None


def is_valid_cloudevent(ce: Any, *, strict: bool = False) -> str | None:
    """None when ``ce`` is a valid CloudEvents 1.0 event in the JSON format, else the first reason it is not.

    ``strict`` also applies the specification's SHOULD on attribute names (at most 20 characters): every
    CloudEvent aefgate writes passes with ``strict``.
    """
    if type(ce) is not dict:
        return f"a CloudEvent is a JSON object, not {_json_type(ce)}"
    p = core_problem(ce)
    if p is not None:
        return f"{p[0]}: {p[1]}"
    for name, value in ce.items():
        if name in _CORE or name in _DATA:
            continue
        if type(name) is not str or not _NAME.fullmatch(name):
            return f"attribute name {name!r}: CloudEvents attribute names are lower-case ASCII letters and digits"
        if strict and len(name) > 20:
            return f"attribute name {name!r}: over 20 characters"
        t = type(value)
        if t is str:
            if bad_chars(value):
                return f"{name}: a character CloudEvents' String type forbids"
        elif t is int:
            if value < _INT_MIN or value > _INT_MAX:
                return f"{name}: {value} is outside CloudEvents' Integer range (32-bit)"
        elif t is not bool:
            return f"{name}: an extension attribute is a string, an integer or a boolean, not {_json_type(value)}"
    return None
