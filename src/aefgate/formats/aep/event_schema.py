"""AEP 0.1 event validation: the envelope schema (AEP-0001 §5) and the payload schema of the event's type
(AEP-0002 §5), both compiled once by the AEF schema compiler (``aefgate.aef.schema.compile_schemas``).

The schemas are packaged copies of the AEP specification's ``schemas/`` (``schemas/aep-event.schema.json``,
``schemas/types/*.schema.json``, ``schemas/registry/*.json``), unchanged. ``x-aep-capture`` annotations are
ignored by validation (they are read by :mod:`aefgate.formats.aep.capture`).

A reason starts with the JSON pointer of the first failure (``/seq: required member is missing``, the event
itself is ``(root)``); payload pointers are inside the event (``/data/state: ...``).

Choice (docs/design/aep-format.md): an event without ``data`` is not checked against its type's payload
schema even when that schema requires members, because ``data`` is OPTIONAL in the envelope (AEP-0001 §5.1
#17) and the payload schema describes ``data`` when there is one.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, Callable

from aefgate.errors import Refusal
from aefgate.aef.schema import compile_schemas

__all__ = [
    "CORE_ATTRIBUTES",
    "ENVELOPE_ID",
    "SCHEMA_DIR",
    "check_event",
    "load_schema_documents",
    "payload_schema",
    "registered_types",
    "rule_for",
    "validate_event",
]

SCHEMA_DIR = Path(__file__).resolve().parent / "schemas"
ENVELOPE_ID = "aep://schemas/0.1/aep-event.schema.json"
_TYPES_PREFIX = "aep://schemas/0.1/types/"
_SUFFIX = ".schema.json"

# AEP-0001 §5.1: the sixteen context attributes plus data
CORE_ATTRIBUTES = frozenset(
    ["aep", "id", "type", "subject", "time", "source", "agent", "session", "run", "step", "seq", "epoch",
     "cause", "traceparent", "severity", "capture", "data"]
)

_lock = threading.Lock()
_state: dict[str, Any] = {}


def load_schema_documents() -> dict[str, dict]:
    """Every packaged AEP schema document by ``$id`` (the envelope and the payload schemas)."""
    docs: dict[str, dict] = {}
    for path in [SCHEMA_DIR / "aep-event.schema.json", *sorted((SCHEMA_DIR / "types").glob("*" + _SUFFIX))]:
        doc = json.loads(path.read_text(encoding="utf-8"))
        docs[doc["$id"]] = doc
    return docs


def registered_types() -> dict[str, dict]:
    """The registry's types (``schemas/registry/types.json``, AEP-0002 §4) by type name."""
    reg = json.loads((SCHEMA_DIR / "registry" / "types.json").read_text(encoding="utf-8"))
    return {row["type"]: row for row in reg["types"]}


def _compiled() -> dict[str, Any]:
    if _state:
        return _state
    with _lock:
        if not _state:
            docs = load_schema_documents()
            fns = compile_schemas(list(docs.values()), annotation_prefixes=("x-",), label="AEP")
            payload: dict[str, Callable[[Any], str | None]] = {}
            for uri, fn in fns.items():
                if uri.startswith(_TYPES_PREFIX):
                    payload[uri[len(_TYPES_PREFIX) : -len(_SUFFIX)]] = fn
            _state["payload_docs"] = {
                uri[len(_TYPES_PREFIX) : -len(_SUFFIX)]: doc
                for uri, doc in docs.items()
                if uri.startswith(_TYPES_PREFIX)
            }
            _state["payload"] = payload
            _state["envelope"] = fns[ENVELOPE_ID]
    return _state


def payload_schema(event_type: str) -> dict | None:
    """The payload schema document of ``event_type``, or None (a vendor type, a reserved type)."""
    return _compiled()["payload_docs"].get(event_type)


def validate_event(event: Any) -> str | None:
    """None when ``event`` is valid against the envelope schema and (when it carries ``data`` and its type has
    a payload schema) its type's payload schema; else a short reason starting with a JSON pointer."""
    st = _state or _compiled()
    why = st["envelope"](event)
    if why is not None:
        return why
    data = event.get("data")
    if data is None:
        return None
    fn = st["payload"].get(event["type"])
    if fn is None:
        return None
    why = fn(data)
    if why is None:
        return None
    return "/data" + why[6:] if why.startswith("(root)") else "/data" + why


# Where the failure's pointer lands -> the AEP section that states the violated requirement.
_SECTION = {
    "aep": "AEP-0001§5.1",
    "id": "AEP-0001§5.1",
    "subject": "AEP-0001§5.1",
    "time": "AEP-0001§5.1",
    "source": "AEP-0001§5.1",
    "agent": "AEP-0001§5.1",
    "epoch": "AEP-0001§7",
    "cause": "AEP-0001§5.1",
    "traceparent": "AEP-0001§5.1",
    "type": "AEP-0001§6",
    "session": "AEP-0001§5.2",
    "run": "AEP-0001§5.2",
    "step": "AEP-0001§5.2",
    "seq": "AEP-0001§5.2",
    "severity": "AEP-0001§8.1",
    "capture": "AEP-0001§8.2",
    "data": "AEP-0002§5",
}


_SCOPED = frozenset(["session", "run", "step", "seq"])
_CATEGORIES = frozenset(["agent", "session", "run", "progress", "tool", "delegation", "attention", "resource",
                         "error", "state", "assessment", "message", "control", "x"])


def rule_for(reason: str, event: Any = None) -> str:
    """The rule id of a :func:`validate_event` reason: the AEP section its pointer falls under
    (``AEP-0001§5.2`` for session/seq presence, ``AEP-0001§5.4`` for an extension attribute,
    ``AEP-0002§3`` for a type outside the closed category set, ``AEP-0002§5`` for the payload ...), else
    ``AEP-SCHEMA``."""
    ptr, _, msg = reason.partition(": ")
    if not ptr.startswith("/"):
        return "AEP-SCHEMA"
    first = ptr[1:].split("/", 1)[0].replace("~1", "/").replace("~0", "~")
    if first in _SCOPED and ptr == "/" + first and msg not in (
        "required member is missing", "no value is allowed here"
    ):
        return "AEP-0001§5.1"  # a present member of the wrong type or range (§5.1 #8..#11)
    if first == "type" and isinstance(event, dict) and isinstance(event.get("type"), str):
        if event["type"].split(".", 1)[0] not in _CATEGORIES:
            return "AEP-0002§3"  # the closed category set
    if first in _SECTION:
        return _SECTION[first]
    return "AEP-0001§5.4"  # any other member is an extension attribute


def check_event(event: Any, where: str = "") -> None:
    """Raises :class:`Refusal` (exit 2) when ``event`` is not a valid AEP event (:func:`validate_event`)."""
    why = validate_event(event)
    if why is not None:
        rule = rule_for(why, event)
        raise Refusal(rule, f"not a valid AEP 0.1 event ({rule}): {why}", where)
