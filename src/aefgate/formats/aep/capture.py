"""Capture gating: the ``x-aep-capture`` class of every payload field, capture ceilings (down-leveling) and the
type-dependent gating of form answers.

Rules implemented (AEP-0001 §8.2, AEP-0002 §5.1, AEP-0003 §6.4 and §9):

* Levels are ordered ``none < metadata < redacted < full`` (``schemas/registry/capture.json``); an absent
  ``capture`` is ``metadata`` (AEP-0001 §5.1 #16).
* A payload field's class is its ``x-aep-capture`` annotation, the minimum level at which it may be present;
  a field without one is ``metadata`` (AEP-0002 §5.1 rule 4). A type without a payload schema (a vendor type,
  a reserved type) has no annotations at all, so its ``data`` is dropped wholesale when an event of it is
  down-leveled (the conservative direction: conformance ``downlevel`` case DL8).
* Down-leveling to a ceiling below the event's ``capture`` drops every field whose class is above the new
  level and rewrites ``capture`` to the level actually honored (AEP-0002 §5.1 rule 3, AEP-0003 §9 rule 5);
  a ceiling at or above the event's ``capture`` leaves the event as it is (never up-level, AEP-0001 §8.2(b)).
  Ceiling ``none``: envelope only, ``data`` removed.
* ``redacted`` is a provenance claim (AEP-0001 §8.2(e)): a mechanical hop holding a ``full`` event against a
  ``redacted`` ceiling rewrites it to ``metadata`` (DL6, DL10, DL11). A hop that applies the AEP-0003 §9.4
  pipeline itself (a *redacting re-emitter*: pass ``redactor=``) keeps the ``redacted``-class fields after
  the pipeline ran on them and rewrites to ``redacted``. A ``redacted``-source event passes a ``redacted``
  ceiling unchanged (DL12): its claim was minted at the source; a redacting re-emitter runs the pipeline over
  its ``redacted``-class fields once more (the floor again; a no-op on text that already passed it).
* The ``[metadata*]`` exception fields (AEP-0002 §5.2 field_spec, §5.3, §8): at ``metadata`` their content
  must be structural, so below ``redacted`` a hop degrades them structurally (it has no source context to
  synthesize or classify): ``attention.requested.prompt`` becomes ``"{agent} requests {kind}: {subject}"``
  (AEP-0003 §9 rule 2), an option's / field's / choice's ``label`` becomes its ``id``, and
  ``answer.values`` (``attention.answered``, ``control.attention.respond``) keeps only its number and boolean
  entries (DL1..DL4). At ``redacted`` through a redacting re-emitter they pass the §9.4 pipeline.

The returned event is new (the input is never modified) but shares every sub-value it did not change with the
input: treat both as immutable.
"""

from __future__ import annotations

from typing import Any, Iterable

from aefgate.errors import Refusal
from aefgate.formats.aep.redact import Redactor
from aefgate.formats.aep.event_schema import load_schema_documents

__all__ = [
    "CAPTURE_LEVELS",
    "ENVELOPE_CAPTURE_LEVELS",
    "STARRED",
    "apply_ceiling",
    "capture_classes",
    "capture_problem",
    "gate_form_values",
]

CAPTURE_LEVELS = ("metadata", "redacted", "full")  # the classes a payload field can have (AEP-0002 §5.1)
ENVELOPE_CAPTURE_LEVELS = ("none", "metadata", "redacted", "full")  # AEP-0001 §8.2, in order
_RANK = {"none": 0, "metadata": 1, "redacted": 2, "full": 3}
_NONE, _METADATA, _REDACTED, _FULL = 0, 1, 2, 3
_TYPES_PREFIX = "aep://schemas/0.1/types/"

# The [metadata*] exception fields (AEP-0002 §5.2 field_spec, §5.3): pointer (``*`` = every array item) ->
# how a hop degrades them below ``redacted``.
STARRED: dict[str, dict[str, str]] = {
    "attention.requested": {
        "/prompt": "prompt",
        "/options/*/label": "label",
        "/fields/*/label": "label",
        "/fields/*/choices/*/label": "label",
    },
    "attention.answered": {"/answer/values": "values"},
    "control.attention.respond": {"/answer/values": "values"},
}


class _Node:
    __slots__ = ("rank", "props", "items", "star", "deep", "has_star", "has_red")

    def __init__(self) -> None:
        self.rank = _METADATA
        self.props: dict[str, _Node] | None = None
        self.items: _Node | None = None
        self.star: str | None = None
        self.deep = _METADATA  # the highest class in the subtree (this node included)
        self.has_star = False  # a [metadata*] field below (or at) this node
        self.has_red = False  # a redacted-class field below (or at) this node


def _merge(node: _Node, schema: Any) -> None:
    """Adds the annotations of ``schema`` (and of the schemas that apply with it) to ``node``."""
    if not isinstance(schema, dict):
        return
    cls = schema.get("x-aep-capture")
    if cls in CAPTURE_LEVELS:
        node.rank = max(node.rank, _RANK[cls])
    for name, sub in (schema.get("properties") or {}).items():
        if node.props is None:
            node.props = {}
        child = node.props.get(name)
        if child is None:
            child = node.props[name] = _Node()
        _merge(child, sub)
    if isinstance(schema.get("items"), dict):
        if node.items is None:
            node.items = _Node()
        _merge(node.items, schema["items"])
    for kw in ("allOf", "anyOf", "oneOf"):
        for sub in schema.get(kw) or ():
            _merge(node, sub)
    for kw in ("then", "else"):
        _merge(node, schema.get(kw))


def _finish(node: _Node) -> None:
    deep, star, red = node.rank, node.star is not None, node.rank == _REDACTED
    for child in list((node.props or {}).values()) + ([node.items] if node.items else []):
        _finish(child)
        deep = max(deep, child.deep)
        star = star or child.has_star
        red = red or child.has_red
    node.deep, node.has_star, node.has_red = deep, star, red


def _at(root: _Node, pointer: str) -> _Node:
    node = root
    for tok in pointer.split("/")[1:]:
        node = node.items if tok == "*" else node.props[tok]  # type: ignore[index,assignment]
    return node


def _build() -> dict[str, _Node]:
    trees: dict[str, _Node] = {}
    for uri, doc in load_schema_documents().items():
        if not uri.startswith(_TYPES_PREFIX):
            continue
        name = uri[len(_TYPES_PREFIX) : -len(".schema.json")]
        root = _Node()
        _merge(root, doc)
        root.rank = _METADATA  # data itself
        for ptr, kind in STARRED.get(name, {}).items():
            _at(root, ptr).star = kind
        _finish(root)
        trees[name] = root
    return trees


_TREES: dict[str, _Node] = {}


def _trees() -> dict[str, _Node]:
    if not _TREES:
        _TREES.update(_build())
    return _TREES


def capture_classes(event_type: str) -> dict[str, str]:
    """The ``x-aep-capture`` class of every payload field of ``event_type``, by JSON pointer inside ``data``
    (``/answer/text``; ``*`` stands for every item of an array: ``/options/*/label``; a member name with a dot
    stays one token: ``/gen_ai.evaluation.explanation``). Unannotated fields are ``metadata`` (AEP-0002 §5.1
    rule 4). ``{}`` for a type without a payload schema."""
    root = _trees().get(event_type)
    out: dict[str, str] = {}

    def walk(node: _Node, ptr: str) -> None:
        for name, child in (node.props or {}).items():
            p = ptr + "/" + name.replace("~", "~0").replace("/", "~1")
            out[p] = CAPTURE_LEVELS[child.rank - 1]
            walk(child, p)
        if node.items is not None:
            walk(node.items, ptr + "/*")

    if root is not None:
        walk(root, "")
    return out


# -- down-leveling -------------------------------------------------------------------------------------------------


def _rank_of(event: dict) -> int:
    cap = event.get("capture", "metadata")
    r = _RANK.get(cap) if type(cap) is str else None
    if r is None:
        raise Refusal("AEP-0001§8.2", f"capture {cap!r} is not one of none, metadata, redacted, full", "/capture")
    return r


def _needs(node: _Node, t: int, red: Redactor | None) -> bool:
    return node.deep > t or (node.has_star and (t == _METADATA or red is not None)) or (
        red is not None and t == _REDACTED and node.has_red
    )


def _synth_prompt(event: dict, data: dict) -> str:
    """AEP-0003 §9 rule 2: a prompt from structural metadata only."""
    agent, kind, subject = event.get("agent"), data.get("kind"), event.get("subject")
    text = f"{agent if type(agent) is str else 'agent'} requests {kind if type(kind) is str else 'attention'}"
    return f"{text}: {subject}" if type(subject) is str else text


def _walk(v: Any, node: _Node, t: int, red: Redactor | None, ev: dict) -> Any:
    if red is not None and t == _REDACTED and node.rank == _REDACTED:
        return red.value(v)
    if node.props is not None and type(v) is dict:
        return _walk_obj(v, node.props, t, red, ev)
    if node.items is not None and type(v) is list:
        item = node.items
        if not _needs(item, t, red):
            return v
        return [_walk(x, item, t, red, ev) for x in v]
    return v


def _walk_obj(obj: dict, props: dict[str, _Node], t: int, red: Redactor | None, ev: dict) -> dict:
    out: dict[str, Any] = {}
    for k, v in obj.items():
        node = props.get(k)
        if node is None:  # unannotated: metadata (AEP-0002 §5.1 rule 4)
            out[k] = v
            continue
        if node.rank > t:  # above the level: dropped (AEP-0002 §5.1 rules 1 and 3)
            continue
        star = node.star
        if star is not None:
            if t <= _METADATA:  # degrade structurally (AEP-0002 §5.3, AEP-0003 §9 rule 2)
                if star == "label":
                    ident = obj.get("id")
                    if type(ident) is str:
                        out[k] = ident
                elif star == "prompt":
                    out[k] = _synth_prompt(ev, obj)
                elif type(v) is dict:  # values: structural entries only
                    out[k] = {n: x for n, x in v.items() if type(x) in (bool, int, float)}
            elif red is not None:
                out[k] = red.value(v)
            else:
                out[k] = v
            continue
        out[k] = _walk(v, node, t, red, ev) if _needs(node, t, red) else v
    return out


def apply_ceiling(event: dict, ceiling: str, *, redactor: Redactor | None = None) -> dict:
    """``event`` down-leveled to the capture ceiling ``ceiling`` (``none``, ``metadata``, ``redacted``,
    ``full``), as a new event whose ``capture`` is the level actually honored (see the module docstring).

    Without ``redactor`` this is a mechanical hop: a ``full`` event at a ``redacted`` ceiling lands on
    ``metadata`` (AEP-0001 §8.2(e)). With a :class:`Redactor` the hop is a redacting re-emitter: it keeps the
    ``redacted``-class (and ``[metadata*]``) fields of an event it delivers at ``redacted`` after they passed
    that §9.4 pipeline. Raises :class:`Refusal` for an unknown ``ceiling`` or event ``capture``.
    """
    c = _RANK.get(ceiling) if type(ceiling) is str else None
    if c is None:
        raise Refusal("AEP-0001§8.2", f"capture ceiling {ceiling!r} is not one of none, metadata, redacted, full")
    s = _rank_of(event)
    again = redactor is not None and c == _REDACTED and s == _REDACTED  # a redacting hop: the floor again
    if c >= s and not again:
        return dict(event)  # never up-level (AEP-0001 §8.2(b))
    t = c
    if c == _REDACTED and s == _FULL and redactor is None:
        t = _METADATA  # AEP-0001 §8.2(e): a mechanical hop never mints the redacted claim
    out = dict(event)
    out["capture"] = ENVELOPE_CAPTURE_LEVELS[t]
    if t == _NONE:
        out.pop("data", None)
        return out
    if "data" not in event:
        return out
    data = event["data"]
    root = _trees().get(event.get("type"))  # type: ignore[arg-type]
    if root is None or type(data) is not dict:
        del out["data"]  # no annotations: stripped wholesale (DL8)
        return out
    red = redactor if t == _REDACTED else None
    out["data"] = _walk_obj(data, root.props or {}, t, red, event) if _needs(root, t, red) else data
    return out


# -- checks --------------------------------------------------------------------------------------------------------


def capture_problem(event: dict) -> str | None:
    """None when ``event``'s ``data`` honors its declared ``capture`` (AEP-0001 §8.2(a), AEP-0002 §5.1 rule 1:
    no field whose class is above it; no ``data`` at ``none``), else a reason with the JSON pointer of the
    first offending field. The ``[metadata*]`` fields cannot be checked mechanically (their content must be
    synthesized at ``metadata``, which no schema says) and are not."""
    s = _rank_of(event)
    if "data" not in event:
        return None
    if s == _NONE:
        return "/data: an event of capture none carries no payload (AEP-0001 §8.2)"
    root = _trees().get(event.get("type"))  # type: ignore[arg-type]
    if root is None or root.deep <= s:
        return None
    found: list[str] = []

    def walk(v: Any, node: _Node, ptr: str) -> None:
        if found or node.deep <= s:
            return
        if node.props is not None and type(v) is dict:
            for k, x in v.items():
                child = node.props.get(k)
                if child is None:
                    continue
                p = ptr + "/" + k.replace("~", "~0").replace("/", "~1")
                if child.rank > s:
                    found.append(
                        f"{p}: a {CAPTURE_LEVELS[child.rank - 1]}-class field in an event of capture "
                        f"{ENVELOPE_CAPTURE_LEVELS[s]} (AEP-0002 §5.1 rule 1)"
                    )
                    return
                walk(x, child, p)
        elif node.items is not None and type(v) is list:
            for i, x in enumerate(v):
                walk(x, node.items, f"{ptr}/{i}")

    walk(event["data"], root, "/data")
    return found[0] if found else None


def gate_form_values(fields: Iterable[dict], values: dict, ceiling: str, *,
                     redactor: Redactor | None = None) -> dict:
    """The type-dependent gating of ``attention.answered.answer.values`` by an emitter that has the request's
    ``fields`` (AEP-0002 §5.3, AEP-0006; conformance ``capture-gating``).

    Below ``redacted`` only structural values survive: a number for a ``number`` field, a boolean for a
    ``boolean`` field, a ``choices[].id`` (or, for ``multi``, an array of them) for a ``select`` field; a
    ``string`` field's value and an ``other`` free-text value are user-authored text (``redacted`` minimum)
    and are dropped. At ``redacted`` and above every value is kept (strings through ``redactor`` when one is
    given, at ``redacted``). A key no field_spec names is dropped (conservative). The ``none`` ceiling is the
    caller's (the whole ``data`` goes): here it gates like ``metadata``.
    """
    c = _RANK.get(ceiling) if type(ceiling) is str else None
    if c is None:
        raise Refusal("AEP-0001§8.2", f"capture ceiling {ceiling!r} is not one of none, metadata, redacted, full")
    specs = {f.get("id"): f for f in fields if isinstance(f, dict) and type(f.get("id")) is str}
    out: dict[str, Any] = {}
    for key, v in values.items():
        spec = specs.get(key)
        if spec is None:
            continue
        kind = spec.get("type")
        if c >= _REDACTED:
            out[key] = redactor.value(v) if (redactor is not None and c == _REDACTED) else v
            continue
        if kind == "number":
            if type(v) in (int, float):
                out[key] = v
        elif kind == "boolean":
            if type(v) is bool:
                out[key] = v
        elif kind == "select":
            ids = {ch.get("id") for ch in spec.get("choices") or () if isinstance(ch, dict)}
            if type(v) is str and v in ids:
                out[key] = v
            elif type(v) is list and v and all(type(x) is str and x in ids for x in v):
                out[key] = v
    return out
