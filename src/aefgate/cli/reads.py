"""The reading of §7.3 ([VER-8]): how a reader takes a value this version does not know.

A value is *known* when this version's writer schema accepts it at that field (a value of its enum, or one a
pattern there allows). For each field of the §7.3 table whose value in a document is unknown, :func:`reads_of`
gives the value a reader takes it as, keyed by the field's path (``.name`` for a member, ``[i]`` for an array item;
a member name holding ``.`` or ``[`` written ``["name"]``, a JSON string), as ``aefgate aef document`` reports it
(spec 09 §9.3). A field "shown as written" (descriptive) reads as its own value.

Only the rows that replace a field's value are here; rows whose effect is on a computation (a lane rule kind gives
``not_measured``, a plan provider makes the runner refuse the plan) are not readings of one field.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Iterator

AS_WRITTEN = None  # the reader shows the value as written

# schema name -> [(field spec, value read)]; "*" is every item of an array or member of an object
TABLE: dict[str, list[tuple[tuple[str, ...], str | None]]] = {
    "result": [
        (("severity",), "critical"),
        (("annotator", "kind"), "OTHER"),
        (("usage", "*", "role"), "other"),
        (("attack", "taxonomy", "*", "scheme"), "other"),
        (("trials", "aggregation"), AS_WRITTEN),
        (("aggregation", "strategy"), AS_WRITTEN),
        (("aggregation", "rulePath"), AS_WRITTEN),
    ],
    "run": [
        (("execution", "targetMode"), "mocked"),
        (("execution", "stimulus"), "other"),
        (("contentCapture",), "on"),
        (("subject", "kind"), "other"),
        (("judges", "*", "mode"), "other"),
        (("suite", "executionPolicy", "aggregation"), AS_WRITTEN),
        (("config", "thresholds", "*", "op"), AS_WRITTEN),
    ],
    "evidence": [(("kind",), "other")],
    "summary": [
        (("lanes", "*", "metrics", "*", "verdict"), "inconclusive"),
        (("usage", "*", "role"), "other"),
    ],
    "metrics": [(("metrics", "*", "direction"), "none")],
    "gate-decision": [(("outcome",), "inconclusive"), (("comparability",), "incomparable")],
    "overlay-event": [(("kind",), "annotate"), (("by", "assurance"), "self-attested")],
    "seal": [(("predicate", "sealedBy"), "ingest")],
    "checkpoint": [
        (("state",), "unverifiable"),
        (("outcome",), "unverifiable"),
        (("budget", "approvedBy", "assurance"), "self-attested"),
    ],
    "decision": [(("outcome",), "unverifiable"), (("lanes", "*", "status"), "unverifiable")],
}

_SIMPLE_NAME = re.compile(r"[^.\[]+")


def _member(name: str) -> str:
    if _SIMPLE_NAME.fullmatch(name):
        return f".{name}"
    from aefgate.aef import jsonio

    return "[" + jsonio.dumps(name).decode("utf-8") + "]"


@lru_cache(maxsize=None)
def _load(file_name: str) -> dict:
    from aefgate.aef import jsonio
    from aefgate.aef.schema import SCHEMA_DIR

    return jsonio.loads((SCHEMA_DIR / "writer" / file_name).read_bytes())


def _resolve(node: dict, base: str) -> tuple[dict, str]:
    """Follow ``$ref`` (``file#/pointer`` or ``#/pointer``) until a schema without one."""
    seen = 0
    while isinstance(node, dict) and "$ref" in node and seen < 32:
        seen += 1
        ref = node["$ref"]
        file_part, _, pointer = ref.partition("#")
        base = file_part or base
        target: Any = _load(base)
        for part in [p for p in pointer.split("/") if p]:
            target = target[part.replace("~1", "/").replace("~0", "~")]
        node = target
    return node, base


def _branches(node: dict, base: str) -> Iterator[tuple[dict, str]]:
    """The schema and every branch it is composed of (allOf, anyOf, oneOf, then), each resolved."""
    stack = [(node, base)]
    while stack:
        n, b = stack.pop()
        n, b = _resolve(n, b)
        if not isinstance(n, dict):
            continue
        yield n, b
        for key in ("allOf", "anyOf", "oneOf"):
            for sub in n.get(key, []) or []:
                stack.append((sub, b))
        if isinstance(n.get("then"), dict):
            stack.append((n["then"], b))


def _field(schema_file: str, spec: tuple[str, ...]) -> list[tuple[dict, str]]:
    """The writer subschemas at a field spec (several when the schema is a union)."""
    current = [(_load(schema_file), schema_file)]
    for key in spec:
        nxt: list[tuple[dict, str]] = []
        for node, base in current:
            for n, b in _branches(node, base):
                if key == "*":
                    for sub in (n.get("items"), n.get("additionalProperties")):
                        if isinstance(sub, dict):
                            nxt.append((sub, b))
                elif isinstance(n.get("properties"), dict) and key in n["properties"]:
                    nxt.append((n["properties"][key], b))
        current = nxt
    return current


@lru_cache(maxsize=None)
def _known(schema_name: str, spec: tuple[str, ...]) -> tuple[frozenset, tuple[str, ...]]:
    """The values the writer schema names at a field (enums and consts) and its patterns."""
    values: set = set()
    patterns: list[str] = []
    for node, base in _field(f"{schema_name}.schema.json", spec):
        for n, _ in _branches(node, base):
            if isinstance(n.get("enum"), list):
                values.update(v for v in n["enum"] if isinstance(v, str))
            if isinstance(n.get("const"), str):
                values.add(n["const"])
            if isinstance(n.get("pattern"), str):
                patterns.append(n["pattern"])
    return frozenset(values), tuple(patterns)


def _locations(doc: Any, spec: tuple[str, ...], prefix: str = "") -> Iterator[tuple[str, Any]]:
    if not spec:
        yield prefix, doc
        return
    key, rest = spec[0], spec[1:]
    if key == "*":
        if isinstance(doc, list):
            for i, item in enumerate(doc):
                yield from _locations(item, rest, f"{prefix}[{i}]")
        elif isinstance(doc, dict):
            for name, item in doc.items():
                yield from _locations(item, rest, prefix + _member(name))
    elif isinstance(doc, dict) and key in doc:
        yield from _locations(doc[key], rest, prefix + _member(key))


def reads_of(schema_name: str, doc: Any) -> dict[str, Any]:
    """For each §7.3 field of ``doc`` whose value the writer schema does not know, the value a reader reads."""
    out: dict[str, Any] = {}
    for spec, read_as in TABLE.get(schema_name, []):
        try:
            values, patterns = _known(schema_name, spec)
        except (OSError, KeyError, ValueError):
            continue
        if not values and not patterns:
            continue  # this version's schema has no closed vocabulary there
        for where, value in _locations(doc, spec):
            if not isinstance(value, str) or value in values:
                continue
            if any(re.search(p, value) for p in patterns):
                continue
            out[where] = value if read_as is AS_WRITTEN else read_as
    return out
