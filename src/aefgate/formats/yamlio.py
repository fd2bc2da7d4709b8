"""The one YAML reader: ``yaml.safe_load`` (no Python object is built from a tag) with the bounds of aefgate's JSON
reader (:mod:`aefgate.aef.jsonio`, the AEF limits of [ENC-17] and [ENC-3]).

- nesting at most ``max_depth`` (64) mappings and sequences deep, aliases counted at the depth they are used (a
  YAML alias can repeat a deep node anywhere); an alias of a node that holds it (a recursive structure) is refused,
  and so is a document whose aliases, expanded, would make more than ``MAX_NODES`` values (a "billion laughs": a
  reader that writes the value out as JSON would expand them);
- no number that overflows binary64: an integer whose magnitude is 2^1024 or more (the literal's length is bounded
  before it is converted, so a 5,000-digit integer is refused without converting it), a float literal that is not
  ``.inf`` but reads as an infinity (``1.0e+400``);
- composing a document nested past Python's recursion limit is the same ``limit`` problem, not a crash;
- before parsing, the flow brackets (``[`` ``{``) are counted on the text: nested deeper than ``max_depth`` there,
  the text is refused without being parsed (PyYAML's scanner takes a time quadratic in the flow depth: 1,000 levels
  cost seconds). The count is conservative: brackets inside quoted strings and comments count too.

Problems raise :class:`YamlProblem` (``code`` ``limit`` or ``encoding``, ``rule`` as jsonio's, ``line`` 1-based or
None); what PyYAML itself refuses is ``yaml.YAMLError``, left to the caller (it carries its own place).
"""

from __future__ import annotations

import math
import re
from itertools import accumulate
from typing import Any

import yaml

from aefgate.aef.jsonio import MAX_DEPTH

__all__ = ["YamlProblem", "load"]

_MAX_INT = 2**1024 - 2**970  # as jsonio: the first integer that does not round to a finite binary64
MAX_NODES = 1_000_000
_MAX_LITERAL = 400  # characters of a number literal converted at all (310 digits suffice for any binary64 integer)


class YamlProblem(Exception):
    def __init__(self, code: str, reason: str, rule: str, line: int | None = None):
        self.code, self.reason, self.rule, self.line = code, reason, rule, line
        super().__init__(f"{code}: {reason}")


def _line(node: Any) -> int | None:
    mark = getattr(node, "start_mark", None)
    return mark.line + 1 if mark is not None else None


class _Loader(yaml.SafeLoader):
    def construct_yaml_int(self, node: Any) -> int:  # noqa: D102
        text = str(node.value)
        if len(text.replace("_", "")) > _MAX_LITERAL:
            raise YamlProblem("encoding", f"an integer of {len(text)} characters overflows binary64", "ENC-3",
                              _line(node))
        value = super().construct_yaml_int(node)
        if abs(value) >= _MAX_INT:
            raise YamlProblem("encoding", "an integer overflows binary64", "ENC-3", _line(node))
        return value

    def construct_yaml_float(self, node: Any) -> float:  # noqa: D102
        text = str(node.value)
        if len(text) > _MAX_LITERAL:
            raise YamlProblem("encoding", f"a number of {len(text)} characters", "ENC-3", _line(node))
        value = super().construct_yaml_float(node)
        if math.isinf(value) and ".inf" not in text.lower():
            raise YamlProblem("encoding", f"the number {text[:40]} overflows binary64", "ENC-3", _line(node))
        return value


_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)
_Loader.add_constructor("tag:yaml.org,2002:float", _Loader.construct_yaml_float)


def _check_depth(root: yaml.Node, max_depth: int) -> None:
    """Refuse a node graph deeper than ``max_depth`` collections, or holding itself; iterative, each node's depth
    computed once (aliases share nodes)."""
    depth: dict[int, int] = {}
    size: dict[int, int] = {}
    open_: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        if not isinstance(node, (yaml.SequenceNode, yaml.MappingNode)):
            continue
        key = id(node)
        children = [c for pair in node.value for c in pair] if isinstance(node, yaml.MappingNode) else node.value
        if done:
            open_.discard(key)
            d = 1 + max((depth.get(id(c), 0) for c in children), default=0)
            if d > max_depth:
                raise YamlProblem("limit", f"nesting deeper than {max_depth}", "ENC-17", _line(node))
            depth[key] = d
            size[key] = n = 1 + sum(size.get(id(c), 1) for c in children)
            if n > MAX_NODES:
                raise YamlProblem("limit", f"more than {MAX_NODES} values once its aliases are expanded", "ENC-17",
                                  _line(node))
            continue
        if key in depth:
            continue
        if key in open_:
            raise YamlProblem("limit", "an alias of a node that holds it (a structure without an end)", "ENC-17",
                              _line(node))
        open_.add(key)
        stack.append((node, True))
        for c in children:
            if id(c) in open_:
                raise YamlProblem("limit", "an alias of a node that holds it (a structure without an end)",
                                  "ENC-17", _line(c))
            stack.append((c, False))


_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}
_KEEP = "[]{}"


def _flow_depth(text: str) -> int:
    """The deepest nesting of ``[``/``{`` in ``text``, counted on the characters alone (strings and comments too)."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return 0
    only = "".join(c for c in text if c in _KEEP) if len(text) < 4096 else _only_brackets(text)
    return max(accumulate(map(_STEP.__getitem__, only)), default=0)


def _only_brackets(text: str) -> str:
    return "".join(re.findall(r"[\[\]{}]+", text))


def load(text: str, *, max_depth: int = MAX_DEPTH) -> Any:
    """The one YAML document of ``text`` (None when it is empty), within the bounds above. Raises
    :class:`YamlProblem`, or ``yaml.YAMLError`` for text that is not YAML."""
    if _flow_depth(text) > max_depth:
        raise YamlProblem("limit", f"flow collections ([ or {{) nested deeper than {max_depth} (counted on the text)",
                          "ENC-17")
    loader = _Loader(text)
    try:
        try:
            node = loader.get_single_node()
        except RecursionError:
            raise YamlProblem("limit", f"nesting deeper than {max_depth}", "ENC-17") from None
        if node is None:
            return None
        _check_depth(node, max_depth)
        try:
            return loader.construct_document(node)
        except RecursionError:  # pragma: no cover - the depth was checked
            raise YamlProblem("limit", f"nesting deeper than {max_depth}", "ENC-17") from None
    finally:
        loader.dispose()
