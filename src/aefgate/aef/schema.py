"""The AEF 1.0 JSON Schemas (draft 2020-12) compiled to fast Python validators.

``validator(name, side)`` returns a callable that takes a decoded JSON value and returns ``None``
when it is valid against ``schemas/<side>/<name>.schema.json``, else a short reason that starts
with the JSON pointer of the first failure found (``"/scores/0/value: 1.5 is above the maximum
1"``; the document itself is ``(root)``).

How it works: each schema is translated once into Python source (one function per document,
with every ``$ref`` inlined except those that recur, which become named helper functions), which
is compiled with ``compile()`` and cached per ``(name, side)``. The success path builds no
strings: pointers and messages are only computed when something fails. Sub-schemas that only
need a yes/no answer (``anyOf``, ``oneOf``, ``not``, ``if``) are compiled to boolean
expressions, which reuse the members the code before them already read and checked; the error
path calls separate message-producing helpers. ``anyOf``/``oneOf`` whose branches require
distinct types become a dispatch on the instance's type. ``_source(name, side)`` shows the
generated code.

Semantics (exactly JSON Schema 2020-12 for the keywords these schemas use, plus AEF spec 02):

* Keywords: ``type enum const pattern minLength maxLength minimum maximum exclusiveMinimum
  exclusiveMaximum required properties additionalProperties items minItems maxItems uniqueItems
  minProperties propertyNames $ref $defs allOf anyOf oneOf not if then else``. Annotations
  (``description title $comment format $schema $id default examples deprecated``, and for
  :func:`compile_schemas` the keywords with a given prefix, such as AEP's ``x-aep-capture``) are
  ignored; ``format`` is never asserted ([ENC-16]). Any other keyword raises
  :class:`SchemaError` at compile time. :func:`compile_schemas` compiles schema documents
  kept elsewhere (the AEP schemas in ``formats/aep/schemas``) with the same generator.
* ``$ref`` resolves against the ``$id`` of the schema that holds it (so ``common.schema.json#/...``
  is the same side's ``common``); fragments are JSON pointers. A ``$ref`` that recurs is compiled
  as a call to a named helper, so recursive schemas cannot recurse the generator.
* Types: ``integer`` is any number with an integral value (``2.0`` is an integer, [ENC-4]);
  ``bool`` is never a number or an integer; ``number`` is int or float. Bounds compare Python
  ints and floats directly, which is exact (Python never rounds an int to compare it with a
  float), so ``9007199254740992 > 9007199254740991`` holds however large the int.
* ``enum``/``const``/``uniqueItems`` use JSON equality: ``1 == 1.0``, ``True != 1``, arrays and
  objects compared member by member with the same rule.
* ``minLength``/``maxLength`` count code points (``len`` of a Python str).

Patterns (ECMA-262, [ENC-14], [ENC-15]) are translated to Python ``re`` syntax once, and applied
with ``search`` (JSON Schema patterns are not implicitly anchored; a pattern that starts with
``^`` and has no top-level ``|`` uses the equivalent, faster ``match``). Strings a pattern accepted
are remembered in a small bounded memo per string schema, since ids recur across lines.

* ``$`` (outside a class) becomes ``\\Z``: it matches only at the very end, never before a final
  newline as Python's ``$`` does ([ENC-15]). ``^`` stays ``^`` (without MULTILINE, Python's ``^``
  only matches at the start, as ECMA's does).
* Matching is by code point, i.e. ECMA-262 with the ``u`` flag, which JSON Schema 2020-12 asks for.
  For every pattern in the AEF schemas the ``u`` and non-``u`` readings agree anyway (no ``.``,
  and no counted quantifier applies to a class that admits astral characters).
* ``\\d`` is ``[0-9]`` and ``\\w`` is ``[A-Za-z0-9_]`` in ECMA-262 with or without ``u`` (no ``i``
  flag), so they are expanded to those explicit classes rather than taken from Python, where they
  are Unicode-aware. ``\\s`` is expanded to ECMA's own white-space set (which is Unicode and
  differs from both of Python's). ``.`` becomes ``[^\\n\\r\\u2028\\u2029]``. Patterns are compiled
  with ``re.ASCII``, whose only remaining effect is to make ``\\b``/``\\B`` use the ASCII word
  characters, as ECMA's do. (None of the AEF patterns uses these escapes; the translation is
  there so a new pattern cannot silently change meaning.)
* Inside a class every character but a letter or digit is emitted escaped, so classes such as
  ``[!-~]``, ``[A-Za-z0-9_.\\[\\]-]`` or ``[!"$-.0->A-~]`` mean in Python what they mean in ECMA.
* Lookbehind, backreferences, named backreferences and ``\\p{..}`` are refused at compile time
  (ENC-14 excludes them; Python could not mean the same by them).

Outside JSON: a NaN passes numeric bounds (as in jsonschema; [ENC-3] refuses it when decoding);
``str``/``dict``/``list``/``int``/``float`` subclasses are accepted as their JSON types; other
``numbers.Number`` values count as numbers, as jsonschema counts them.
"""

from __future__ import annotations

import functools
import json
import numbers
import os
import re
import threading
from pathlib import Path
from typing import Any, Callable
from urllib.parse import unquote, urljoin, urldefrag

__all__ = ["SCHEMA_NAMES", "SchemaError", "compile_schemas", "is_valid", "validator"]

SCHEMA_DIR = Path(__file__).resolve().parent / "schemas"
SIDES = ("reader", "writer")
_SUFFIX = ".schema.json"
_DRAFT = "https://json-schema.org/draft/2020-12/schema"


class SchemaError(ValueError):
    """A schema this module cannot compile (an unknown keyword, a bad ``$ref``, a bad pattern)."""


def _list_names() -> tuple[str, ...]:
    names = None
    for side in SIDES:
        here = {p.name[: -len(_SUFFIX)] for p in (SCHEMA_DIR / side).glob("*" + _SUFFIX)}
        names = here if names is None else names & here
    names.discard("common")
    return tuple(sorted(names))


SCHEMA_NAMES: tuple[str, ...] = _list_names()

# --------------------------------------------------------------------------------------------
# Runtime helpers the generated code calls (error paths and rare cases only).

_M = object()  # "member absent" sentinel
_MEMO = 2048  # strings remembered per pattern (see _Gen.string_block) ...
_MEMO_LEN = 128  # ... of at most this many characters


def _isnum(x: Any) -> bool:
    return not isinstance(x, bool) and isinstance(x, numbers.Number)


def _isint(x: Any) -> bool:
    if isinstance(x, bool):
        return False
    if isinstance(x, int):
        return True
    return isinstance(x, float) and x.is_integer()


def _jeq(a: Any, b: Any) -> bool:
    """JSON equality: numbers by value (1 == 1.0), booleans only equal booleans, deep for
    arrays and objects."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    if isinstance(a, list) or isinstance(b, list):
        return (
            isinstance(a, list)
            and isinstance(b, list)
            and len(a) == len(b)
            and all(_jeq(p, q) for p, q in zip(a, b))
        )
    if isinstance(a, dict) or isinstance(b, dict):
        return (
            isinstance(a, dict)
            and isinstance(b, dict)
            and a.keys() == b.keys()
            and all(_jeq(v, b[k]) for k, v in a.items())
        )
    if a is None or b is None:
        return a is b
    if isinstance(a, numbers.Number) and isinstance(b, numbers.Number):
        return a == b
    return False


def _in_enum(x: Any, values: tuple) -> bool:
    for v in values:
        if _jeq(x, v):
            return True
    return False


def _ukey(v: Any) -> Any:
    """A hashable key such that two JSON values are equal exactly when their keys are."""
    if isinstance(v, bool):
        return ("b", v)
    if isinstance(v, str):
        return ("s", v)
    if v is None:
        return ("z",)
    if isinstance(v, (int, float)):
        return ("n", v)  # 1 == 1.0 and hash(1) == hash(1.0)
    if isinstance(v, list):
        return ("l", tuple(_ukey(i) for i in v))
    if isinstance(v, dict):
        return ("o", frozenset((k, _ukey(i)) for k, i in v.items()))
    return ("?", id(v))


def _uniq(x: list) -> bool:
    keys = [_ukey(i) for i in x]
    return len(set(keys)) == len(keys)


def _pmatch(search: Callable, memo: set, x: str) -> bool:
    if search(x) is None:
        return False
    if type(x) is str and len(x) <= _MEMO_LEN:
        if len(memo) >= _MEMO:
            memo.clear()
        memo.add(x)
    return True


def _pmatch_or_no(search: Callable, memo: set, nmemo: set, x: str) -> bool:
    """:func:`_pmatch`, remembering a failure too (in ``nmemo``): for the conditions of ``if``
    and ``propertyNames``, where failing is as common as matching."""
    if _pmatch(search, memo, x):
        return True
    if type(x) is str and len(x) <= _MEMO_LEN:
        if len(nmemo) >= _MEMO:
            nmemo.clear()
        nmemo.add(x)
    return False


def _index(items: list, item: Any) -> int:
    """The position of ``item`` in ``items``, by identity: the items are validated in order,
    and an object identical to an earlier one would have failed there first."""
    for i, it in enumerate(items):
        if it is item:
            return i
    return -1  # pragma: no cover


def _esc(k: Any) -> str:
    return str(k).replace("~", "~0").replace("/", "~1")


def _show(v: Any) -> str:
    try:
        s = json.dumps(v, ensure_ascii=False)
    except (TypeError, ValueError):
        s = repr(v)
    return s if len(s) <= 72 else s[:68] + "..."


def _fmt(ptr: str, msg: str) -> str:
    return f"{ptr or '(root)'}: {msg}"


def _missing_err(x: dict, names: tuple) -> tuple:
    for n in names:
        if n not in x:
            return ("/" + _esc(n), "required member is missing", False)
    return ("", "required member is missing", False)  # pragma: no cover


def _extra_err(x: dict, known: frozenset) -> tuple:
    for k in x:
        if k not in known:
            return ("/" + _esc(k), "member is not allowed here", False)
    return ("", "member is not allowed here", False)  # pragma: no cover


def _any_err(x: Any, fns: tuple) -> tuple:
    errs = [e for e in (f(x) for f in fns) if e is not None]
    if not errs:  # pragma: no cover - the boolean and the message paths disagree
        return ("", "matches none of the allowed alternatives", False)
    strong = [e for e in errs if not e[2]]
    if not strong and len({e[0] for e in errs}) == 1:
        return (errs[0][0], _alternatives(list(dict.fromkeys(e[1] for e in errs))), True)
    pool = strong or errs
    return max(pool, key=lambda e: e[0].count("/"))


def _alternatives(msgs: list[str]) -> str:
    """One message for an instance that no alternative takes, from the alternatives' own
    (``5 is not of type string``, ``5 is not of type null`` -> ``5 is not of type string or
    null``)."""
    if len(msgs) == 1:
        return msgs[0]
    common = os.path.commonprefix(msgs)
    for sep, joiner, lead in ((" is not of type ", " or ", ""), (" is not ", ", ", "any of ")):
        i = common.find(sep)
        if i >= 0:
            head = common[: i + len(sep)]
            tails = [m[len(head):] for m in msgs]
            if sep == " is not " and any(t.startswith("of type ") for t in tails):
                continue
            why = head + lead + joiner.join(tails)
            break
    else:
        why = "matches none of the allowed alternatives (" + "; ".join(msgs) + ")"
    return why if len(why) <= 200 else why[:196] + "..."


def _one_err(count: int, x: Any, fns: tuple) -> tuple:
    if count == 0:
        return _any_err(x, fns)
    return ("", f"matches {count} of the oneOf alternatives, not exactly one", False)


def _not_req_err(x: Any, groups: tuple) -> tuple:
    if isinstance(x, dict):
        for g in groups:
            if all(n in x for n in g):
                if len(g) == 1:
                    return ("/" + _esc(g[0]), "member is not allowed here", False)
                return ("", "members " + ", ".join(g) + " must not all be present", False)
    return ("", f"{_show(x)} is not allowed here", False)


_RUNTIME = {
    "_M": _M,
    "_NUMBER": frozenset([int, float]),
    "_isnum": _isnum,
    "_isint": _isint,
    "_jeq": _jeq,
    "_in_enum": _in_enum,
    "_uniq": _uniq,
    "_pmatch": _pmatch,
    "_pmatch_or_no": _pmatch_or_no,
    "_esc": _esc,
    "_index": _index,
    "_show": _show,
    "_fmt": _fmt,
    "_missing_err": _missing_err,
    "_extra_err": _extra_err,
    "_any_err": _any_err,
    "_one_err": _one_err,
    "_not_req_err": _not_req_err,
}

# --------------------------------------------------------------------------------------------
# ECMA-262 pattern -> Python re.

_ECMA_WS = [(0x09, 0x0D), (0x20, 0x20), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A),
            (0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000),
            (0xFEFF, 0xFEFF)]
_CLASS_ESCAPES = {
    "d": [(0x30, 0x39)],
    "w": [(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)],
    "s": _ECMA_WS,
}
_CHAR_ESCAPES = {"t": 9, "n": 10, "v": 11, "f": 12, "r": 13}
_HEX = "0123456789abcdefABCDEF"


def _cls_char(cp: int) -> str:
    c = chr(cp)
    if c.isascii() and c.isalnum():
        return c
    if 0x20 <= cp <= 0x7E:
        return "\\" + c
    if cp <= 0xFF:
        return f"\\x{cp:02x}"
    if cp <= 0xFFFF:
        return f"\\u{cp:04x}"
    return f"\\U{cp:08x}"


def _lit(cp: int) -> str:
    """A literal code point outside a class."""
    c = chr(cp)
    if c.isascii() and (c.isalnum() or c == "_"):
        return c
    if 0x20 <= cp <= 0x7E:
        return re.escape(c)
    return _cls_char(cp)


def _ranges_body(ranges: list[tuple[int, int]]) -> str:
    return "".join(
        _cls_char(lo) if lo == hi else _cls_char(lo) + "-" + _cls_char(hi) for lo, hi in ranges
    )


class _PatternReader:
    def __init__(self, pat: str):
        self.p = pat
        self.i = 0
        self.top_alternation = False  # a | outside every group

    def err(self, why: str) -> SchemaError:
        return SchemaError(f"pattern {self.p!r}: {why} (at {self.i})")

    def hex(self, n: int) -> int:
        h = self.p[self.i : self.i + n]
        if len(h) != n or any(c not in _HEX for c in h):
            raise self.err("bad hex escape")
        self.i += n
        return int(h, 16)

    def escape(self, in_class: bool) -> tuple[str, Any]:
        """Reads an escape after its backslash: ('char', cp), ('class', (ranges, negated)) or
        ('assert', python_source)."""
        p = self.p
        if self.i >= len(p):
            raise self.err("pattern ends with a backslash")
        c = p[self.i]
        self.i += 1
        if c.lower() in _CLASS_ESCAPES:
            return "class", (_CLASS_ESCAPES[c.lower()], c.isupper())
        if c in _CHAR_ESCAPES:
            return "char", _CHAR_ESCAPES[c]
        if c == "b":
            return ("char", 8) if in_class else ("assert", r"\b")
        if c == "B":
            if in_class:
                raise self.err(r"\B in a class")
            return "assert", r"\B"
        if c == "0" and not (self.i < len(p) and p[self.i].isdigit()):
            return "char", 0
        if c.isdigit():
            raise self.err("backreferences and octal escapes are not supported")
        if c == "x":
            return "char", self.hex(2)
        if c == "u":
            if self.i < len(p) and p[self.i] == "{":
                end = p.find("}", self.i)
                if end < 0:
                    raise self.err("bad \\u{...} escape")
                h = p[self.i + 1 : end]
                if not h or any(ch not in _HEX for ch in h) or int(h, 16) > 0x10FFFF:
                    raise self.err("bad \\u{...} escape")
                self.i = end + 1
                return "char", int(h, 16)
            cp = self.hex(4)
            if 0xD800 <= cp <= 0xDBFF and p.startswith("\\u", self.i):
                save = self.i
                self.i += 2
                try:
                    lo = self.hex(4)
                except SchemaError:
                    lo = -1
                if 0xDC00 <= lo <= 0xDFFF:
                    return "char", 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00)
                self.i = save
            return "char", cp
        if c == "c":
            if self.i < len(p) and p[self.i].isascii() and p[self.i].isalpha():
                self.i += 1
                return "char", ord(p[self.i - 1]) % 32
            raise self.err("bad \\c escape")
        if c in "pPk":
            raise self.err(f"\\{c} is not supported")
        if c.isascii() and c.isalnum():
            raise self.err(f"unknown escape \\{c}")
        return "char", ord(c)

    def char_class(self) -> str:
        p = self.p
        self.i += 1  # '['
        negated = p.startswith("^", self.i)
        if negated:
            self.i += 1
        items: list[str] = []
        while True:
            if self.i >= len(p):
                raise self.err("unterminated class")
            if p[self.i] == "]":
                self.i += 1
                break
            kind, val = self.atom()
            if (
                p.startswith("-", self.i)
                and self.i + 1 < len(p)
                and p[self.i + 1] != "]"
            ):
                self.i += 1
                kind2, val2 = self.atom()
                if kind != "char" or kind2 != "char":
                    raise self.err("a class escape as a range bound")
                if val > val2:
                    raise self.err("range out of order")
                items.append(_ranges_body([(val, val2)]))
            elif kind == "char":
                items.append(_cls_char(val))
            else:
                ranges, neg = val
                if neg:
                    raise self.err("a negated class escape inside a class")
                items.append(_ranges_body(ranges))
        if not items:
            return r"[\s\S]" if negated else "(?!)"
        return "[" + ("^" if negated else "") + "".join(items) + "]"

    def atom(self) -> tuple[str, Any]:
        c = self.p[self.i]
        if c == "\\":
            self.i += 1
            kind, val = self.escape(in_class=True)
            if kind == "assert":  # pragma: no cover - escape() never returns it in a class
                raise self.err("assertion in a class")
            return kind, val
        self.i += 1
        cp = ord(c)
        nxt = self.p[self.i] if self.i < len(self.p) else ""
        if 0xD800 <= cp <= 0xDBFF and nxt and 0xDC00 <= ord(nxt) <= 0xDFFF:
            cp = 0x10000 + ((cp - 0xD800) << 10) + (ord(self.p[self.i]) - 0xDC00)
            self.i += 1
        return "char", cp

    def translate(self) -> str:
        p = self.p
        out: list[str] = []
        depth = 0
        while self.i < len(p):
            c = p[self.i]
            if c == "\\":
                self.i += 1
                kind, val = self.escape(in_class=False)
                if kind == "char":
                    out.append(_lit(val))
                elif kind == "assert":
                    out.append(val)
                else:
                    ranges, neg = val
                    out.append("[" + ("^" if neg else "") + _ranges_body(ranges) + "]")
            elif c == "[":
                out.append(self.char_class())
            elif c == "$":
                out.append(r"\Z")
                self.i += 1
            elif c == ".":
                out.append(r"[^\n\r\u2028\u2029]")
                self.i += 1
            elif c == "(":
                if p[self.i : self.i + 3] in ("(?:", "(?=", "(?!"):
                    out.append(p[self.i : self.i + 3])
                    self.i += 3
                elif p.startswith("(?<=", self.i) or p.startswith("(?<!", self.i):
                    raise self.err("lookbehind is not supported")
                elif p.startswith("(?<", self.i):
                    end = p.find(">", self.i)
                    name = p[self.i + 3 : end] if end > 0 else ""
                    if not name.isidentifier():
                        raise self.err("bad group name")
                    out.append(f"(?P<{name}>")
                    self.i = end + 1
                elif p.startswith("(?", self.i):
                    raise self.err("unsupported group")
                else:
                    out.append("(")
                    self.i += 1
                depth += 1
            elif c == ")":
                depth -= 1
                if depth < 0:
                    raise self.err("unbalanced )")
                out.append(")")
                self.i += 1
            elif c in "^|*+?":
                if c == "|" and depth == 0:
                    self.top_alternation = True
                out.append(c)
                self.i += 1
            elif c == "{":
                m = re.compile(r"\{[0-9]+(,[0-9]*)?\}").match(p, self.i)
                if m:
                    out.append(m.group(0))
                    self.i = m.end()
                else:
                    out.append(r"\{")
                    self.i += 1
            else:
                kind, val = self.atom()
                out.append(_lit(val))
        if depth:
            raise self.err("unbalanced (")
        return "".join(out)


def translate_pattern(pattern: str) -> str:
    """The Python ``re`` source (to compile with ``re.ASCII``) that means what the ECMA-262
    ``pattern`` means (see the module docstring)."""
    return _PatternReader(pattern).translate()


@functools.lru_cache(maxsize=None)
def compile_pattern(pattern: str) -> re.Pattern:
    """The compiled Python pattern for ``pattern``; apply it with ``search``."""
    try:
        return re.compile(translate_pattern(pattern), re.ASCII)
    except re.error as e:
        raise SchemaError(f"pattern {pattern!r} does not compile: {e}") from None


def _pattern_test(pattern: str) -> Callable[[str], Any]:
    """``search`` of the compiled pattern, or the equivalent and faster ``match`` when every
    match must start at 0 (the pattern begins with ``^`` and has no top-level ``|``)."""
    compiled = compile_pattern(pattern)
    reader = _PatternReader(pattern)
    reader.translate()
    if pattern.startswith("^") and not reader.top_alternation:
        return compiled.match
    return compiled.search


# --------------------------------------------------------------------------------------------
# Loading and resolving.

_ANNOTATIONS = frozenset(
    ["description", "title", "$comment", "format", "$schema", "$id", "default", "examples",
     "deprecated"]
)
_KEYWORDS = frozenset(
    ["type", "enum", "const", "pattern", "minLength", "maxLength", "minimum", "maximum",
     "exclusiveMinimum", "exclusiveMaximum", "required", "properties", "additionalProperties",
     "items", "maxItems", "minItems", "uniqueItems", "minProperties", "propertyNames", "$ref",
     "allOf", "anyOf", "oneOf", "not", "if", "then", "else", "$defs"]
)
_TYPES = frozenset(["object", "array", "string", "number", "integer", "boolean", "null"])
_GROUPS = (
    ("string", ("minLength", "maxLength", "pattern")),
    ("number", ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")),
    ("object", ("required", "properties", "additionalProperties", "minProperties",
                "propertyNames")),
    ("array", ("items", "minItems", "maxItems", "uniqueItems")),
)

Loc = tuple  # (uri, (token, ...))


class _Registry:
    """The schema documents of one side, by ``$id`` (and by file URI)."""

    def __init__(self, docs: dict[str, Any], annotation_prefixes: tuple[str, ...] = ()):
        self.docs = docs
        # keywords starting with one of these are annotations too (``x-aep-capture``): opt-in,
        # so that a typo in an AEF schema is still refused
        self.annotation_prefixes = tuple(annotation_prefixes)

    def unknown(self, node: dict) -> set:
        """The keywords of ``node`` this module does not know (annotations excluded)."""
        unknown = set(node) - _KEYWORDS - _ANNOTATIONS
        if unknown and self.annotation_prefixes:
            unknown = {k for k in unknown if not k.startswith(self.annotation_prefixes)}
        return unknown

    @classmethod
    def for_side(cls, side: str) -> "_Registry":
        docs: dict[str, Any] = {}
        for path in sorted((SCHEMA_DIR / side).glob("*" + _SUFFIX)):
            doc = json.loads(path.read_text(encoding="utf-8"))
            docs[path.as_uri()] = doc
            if isinstance(doc, dict) and isinstance(doc.get("$id"), str):
                docs[urldefrag(doc["$id"])[0]] = doc
        reg = cls(docs)
        reg.check_all()
        return reg

    def check_all(self) -> None:
        """Refuses, now, any keyword this module does not know anywhere in the documents (in
        unused ``$defs`` too)."""

        def walk(node: Any, where: str) -> None:
            if isinstance(node, bool):
                return
            if not isinstance(node, dict):
                raise SchemaError(f"{where}: a schema must be an object or a boolean")
            unknown = self.unknown(node)
            if unknown:
                raise SchemaError(f"{where}: unsupported keyword(s) {sorted(unknown)}")
            for k in ("properties", "$defs"):
                for name, sub in (node.get(k) or {}).items():
                    walk(sub, f"{where}/{k}/{name}")
            for k in ("allOf", "anyOf", "oneOf"):
                for i, sub in enumerate(node.get(k) or ()):
                    walk(sub, f"{where}/{k}/{i}")
            for k in ("items", "additionalProperties", "propertyNames", "not", "if", "then",
                      "else"):
                if k in node:
                    walk(node[k], f"{where}/{k}")

        for uri, doc in self.docs.items():
            walk(doc, uri + "#")

    def base(self, uri: str) -> str:
        doc = self.docs[uri]
        if isinstance(doc, dict) and isinstance(doc.get("$id"), str):
            return urldefrag(doc["$id"])[0]
        return uri

    def at(self, loc: Loc) -> Any:
        node = self.docs[loc[0]]
        for tok in loc[1]:
            if isinstance(node, list):
                node = node[int(tok)]
            else:
                node = node[tok]
        return node

    def resolve(self, loc: Loc, ref: str) -> Loc:
        base = self.base(loc[0])
        target = base + ref if ref.startswith("#") else urljoin(base, ref)
        uri, frag = urldefrag(target)
        if uri not in self.docs:
            raise SchemaError(f"$ref {ref!r} at {loc}: no schema {uri!r}")
        uri = self.base(uri)
        if frag and not frag.startswith("/"):
            raise SchemaError(f"$ref {ref!r}: only JSON-pointer fragments are supported")
        toks: list[Any] = []
        node = self.docs[uri]
        for raw in frag.split("/")[1:] if frag else []:
            tok = unquote(raw).replace("~1", "/").replace("~0", "~")
            if isinstance(node, list):
                if not tok.isdigit() or int(tok) >= len(node):
                    raise SchemaError(f"$ref {ref!r}: no such location")
                tok = int(tok)
            elif not isinstance(node, dict) or tok not in node:
                raise SchemaError(f"$ref {ref!r}: no such location")
            node = node[tok]
            toks.append(tok)
        return (uri, tuple(toks))


# --------------------------------------------------------------------------------------------
# The code generator.

_TESTS = {  # the exact types first (msgspec and json decode to them), subclasses after
    "object": "({x}.__class__ is dict or isinstance({x}, dict))",
    "array": "({x}.__class__ is list or isinstance({x}, list))",
    "string": "({x}.__class__ is str or isinstance({x}, str))",
    "null": "({x} is None)",
    "boolean": "({x} is True or {x} is False)",
    "number": "({x}.__class__ in _NUMBER or _isnum({x}))",
    "integer": "({x}.__class__ is int or ({x}.__class__ is float and {x}.is_integer())"
               " or _isint({x}))",
}
_EXPR_DEPTH = 8  # boolean expressions nest at most this many schema levels before a helper
_STMT_DEPTH = 12  # statement blocks nest at most this deep before a helper
_IND = "    "


def _test(t: str, x: str) -> str:
    return _TESTS[t].format(x=x)


def _satisfies(known: str | None, t: str) -> bool:
    return known == t or (t == "number" and known == "integer")


def _may_be(group: str, t: str) -> bool:
    return group == t or (group == "number" and t == "integer")


def _indent(lines: list[str]) -> list[str]:
    return [_IND + ln for ln in lines]


def _num_lit(v: Any, where: str) -> str:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise SchemaError(f"{where}: not a number: {v!r}")
    return repr(v)


def _count(v: Any, where: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0 or int(v) != v:
        raise SchemaError(f"{where}: not a non-negative integer: {v!r}")
    return int(v)


def _ptr_src(ptr: tuple) -> str:
    """Python source of the JSON pointer ``ptr`` (static tokens and loop variables)."""
    parts: list[str] = []
    static = ""
    for kind, val in ptr:
        if kind == "s":
            static += "/" + _esc(val)
            continue
        parts.append(repr(static + "/"))
        static = ""
        parts.append(f"str(_index({val[0]}, {val[1]}))" if kind == "i" else f"_esc({val})")
    if static:
        parts.append(repr(static))
    return " + ".join(parts) if parts else "''"


class _Gen:
    def __init__(self, reg: _Registry):
        self.reg = reg
        self.ns: dict[str, Any] = dict(_RUNTIME)
        self.n = 0
        self.consts: dict[Any, str] = {}
        self.helpers: dict[tuple, str] = {}
        self.todo: list[tuple] = []
        self.blocks: list[str] = []

    # -- names and constants
    def var(self, prefix: str = "v") -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def const(self, key: Any, value: Any, prefix: str) -> str:
        name = self.consts.get(key)
        if name is None:
            name = self.consts[key] = self.var(prefix)
            self.ns[name] = value
        return name

    def req_set(self, names: list[str]) -> str:
        return self.const(("R", tuple(sorted(names))), frozenset(names), "_R")

    def pattern(self, p: Any, where: str) -> str:
        if not isinstance(p, str):
            raise SchemaError(f"{where}: pattern is not a string")
        return self.const(("p", p), _pattern_test(p), "_P")

    def helper(self, kind: str, loc: Loc) -> str:
        key = (kind, loc)
        name = self.helpers.get(key)
        if name is None:
            name = self.helpers[key] = self.var("_" + kind)
            self.todo.append((kind, loc, name))
        return name

    def drain(self) -> None:
        while self.todo:
            kind, loc, name = self.todo.pop()
            schema = self.reg.at(loc)
            if kind == "b":
                body = [_IND + "return " + self.expr(schema, loc, "x", (loc,), None, 0)]
            else:
                body = _indent(self.stmts(schema, loc, "x", (), "helper", (loc,), None, 0))
                body.append(_IND + "return None")
            self.blocks.append("\n".join([f"def {name}(x):"] + body))

    # -- checks common to both modes
    def check(self, s: Any, loc: Loc) -> None:
        where = f"{loc[0]}#/{'/'.join(map(str, loc[1]))}"
        if not isinstance(s, dict):
            raise SchemaError(f"{where}: a schema must be an object or a boolean")
        for k in self.reg.unknown(s):
            raise SchemaError(f"{where}: unsupported keyword {k!r}")
        if loc[1] and "$id" in s:
            raise SchemaError(f"{where}: $id inside a schema is not supported")
        if "$schema" in s and s["$schema"] != _DRAFT:
            raise SchemaError(f"{where}: not a draft 2020-12 schema: {s['$schema']!r}")
        if "items" in s and not isinstance(s["items"], (dict, bool)):
            raise SchemaError(f"{where}: items must be a schema")
        for k in ("properties", "$defs"):
            if k in s and not isinstance(s[k], dict):
                raise SchemaError(f"{where}: {k} must be an object")
        for k in ("allOf", "anyOf", "oneOf"):
            if k in s and (not isinstance(s[k], list) or not s[k]):
                raise SchemaError(f"{where}: {k} must be a non-empty array")
        req = s.get("required", [])
        if not isinstance(req, list) or not all(isinstance(n, str) for n in req):
            raise SchemaError(f"{where}: required must be an array of strings")
        if "enum" in s and not isinstance(s["enum"], list):
            raise SchemaError(f"{where}: enum must be an array")
        if "$ref" in s and not isinstance(s["$ref"], str):
            raise SchemaError(f"{where}: $ref must be a string")
        for k in ("uniqueItems",):
            if k in s and not isinstance(s[k], bool):
                raise SchemaError(f"{where}: {k} must be a boolean")

    def types(self, s: dict, loc: Loc) -> list[str]:
        t = s.get("type")
        if t is None:
            return []
        ts = [t] if isinstance(t, str) else t
        if not isinstance(ts, list) or not ts or any(x not in _TYPES for x in ts):
            raise SchemaError(f"{loc}: bad type {t!r}")
        return list(dict.fromkeys(ts))

    def definite_type(self, s: Any, loc: Loc, stack: tuple) -> str | None:
        """The one JSON type ``s`` requires of an instance (through ``type``, ``$ref`` or
        ``allOf``), if there is one."""
        if not isinstance(s, dict):
            return None
        self.check(s, loc)
        types = self.types(s, loc)
        if len(types) == 1:
            return types[0]
        if not types and (
            ("const" in s and type(s["const"]) is str)
            or ("enum" in s and s["enum"] and all(type(v) is str for v in s["enum"]))
        ):
            return "string"
        if "$ref" in s:
            tloc = self.reg.resolve(loc, s["$ref"])
            if tloc not in stack:
                t = self.definite_type(self.reg.at(tloc), tloc, stack + (tloc,))
                if t:
                    return t
        for i, sub in enumerate(s.get("allOf", ())):
            t = self.definite_type(sub, _loc_add(loc, "allOf", i), stack)
            if t:
                return t
        return None

    def dispatch_types(self, branches: list, loc: Loc, kw: str, stack: tuple) -> list[str] | None:
        """The branches' definite types when they are pairwise disjoint (so at most one branch
        can hold for any instance), else None."""
        ts = [self.definite_type(b, _loc_add(loc, kw, i), stack) for i, b in enumerate(branches)]
        if None in ts or len(set(ts)) != len(ts) or {"integer", "number"} <= set(ts):
            return None
        return ts

    def enum_expr(self, values: list, x: str, known: str | None) -> str:
        if values and all(type(v) is str for v in values):
            e = self.const(("E", tuple(values)), frozenset(values), "_E")
            if known == "string":
                return f"({x} in {e})"
            el = self.const(("EL", tuple(values)), tuple(values), "_EL")
            return f"({x} in {e} if {x}.__class__ is str else _in_enum({x}, {el}))"
        el = self.const(("EL", json.dumps(values)), tuple(values), "_EL")
        return f"_in_enum({x}, {el})"

    def const_expr(self, value: Any, x: str) -> str:
        if type(value) is str:
            return f"({x} == {value!r})"
        if value is None:
            return f"({x} is None)"
        if value is True or value is False:
            return f"({x} is {value!r})"
        c = self.const(("C", json.dumps(value)), value, "_C")
        return f"_jeq({x}, {c})"

    # -- failure statements
    def fail(self, mode: str, ptr: tuple, msg: str, weak: bool) -> list[str]:
        if mode == "entry":
            return [f"return _fmt({_ptr_src(ptr)}, {msg})"]
        return [f"return ({_ptr_src(ptr)}, {msg}, {weak})"]

    def fail_t(self, mode: str, ptr: tuple, tup: str) -> list[str]:
        p = _ptr_src(ptr)
        pre = "" if p == "''" else p + " + "
        if mode != "entry" and not pre:
            return [f"return {tup}"]
        out = [] if tup == "_r" else [f"_r = {tup}"]
        if mode == "entry":
            return out + [f"return _fmt({pre}_r[0], _r[1])"]
        return out + [f"return ({pre}_r[0], _r[1], _r[2])"]

    # -- statement mode: lines that return a failure when x is invalid
    def stmts(self, s: Any, loc: Loc, x: str, ptr: tuple, mode: str, stack: tuple,
              known: str | None, level: int, facts: dict | None = None) -> list[str]:
        """``facts``: members of ``x`` already read into variables, ``{name: (var, type)}``
        (required members a schema on the same instance validated before this code)."""
        if s is True:
            return []
        if s is False:
            return self.fail(mode, ptr, repr("no value is allowed here"), False)
        self.check(s, loc)
        if level > _STMT_DEPTH:
            name = self.helper("e", loc)
            return [f"_r = {name}({x})", "if _r is not None:"] + _indent(
                self.fail_t(mode, ptr, "_r")
            )
        facts = dict(facts) if facts else {}
        types = self.types(s, loc)
        out, known, string_done = self.type_stmts(s, loc, x, ptr, mode, stack, known, types)
        out += self.group_stmts(s, loc, x, ptr, mode, stack, known, level, facts, types, string_done)
        if "$ref" in s:
            tloc = self.reg.resolve(loc, s["$ref"])
            if tloc in stack:
                name = self.helper("e", tloc)
                out += [f"_r = {name}({x})", "if _r is not None:"]
                out += _indent(self.fail_t(mode, ptr, "_r"))
            else:
                out += self.stmts(self.reg.at(tloc), tloc, x, ptr, mode, stack + (tloc,), known,
                                  level, facts)
        for i, sub in enumerate(s.get("allOf", ())):
            out += self.stmts(sub, _loc_add(loc, "allOf", i), x, ptr, mode, stack, known, level,
                              facts)
        lines, s = self.dispatch_stmts(s, loc, x, ptr, mode, stack, level, facts)
        out += lines
        out += self.combinator_stmts(s, loc, x, ptr, mode, stack, known, level, facts)
        return out

    def type_stmts(self, s: dict, loc: Loc, x: str, ptr: tuple, mode: str, stack: tuple,
                   known: str | None, types: list) -> tuple[list[str], str | None, bool]:
        """The type, ``enum`` and ``const`` checks of schema ``s`` (with a pattern, the string
        block too): the lines, the type then known, and whether the string keywords are done."""
        out: list[str] = []
        # The one type the instance must have: this schema's, or (checked first, so that the
        # keywords beside it need no type guard) the one a $ref or an allOf member requires.
        if types:
            single = types[0] if len(types) == 1 else None
        else:
            single = self.definite_type(s, loc, stack)
        string_done = False
        if single == "string" and "pattern" in s:
            out += self.string_block(s, loc, x, ptr, mode, known)
            known, string_done = "string", True
        elif single and not _satisfies(known, single):
            out.append(f"if not {_test(single, x)}:")
            msg = " is not of type " + single
            out += _indent(self.fail(mode, ptr, f"_show({x}) + {msg!r}", True))
            known = single
        if len(types) > 1 and not any(_satisfies(known, t) for t in types):
            out.append(f"if not ({' or '.join(_test(t, x) for t in types)}):")
            msg = " is not of type " + " or ".join(types)
            out += _indent(self.fail(mode, ptr, f"_show({x}) + {msg!r}", True))
        if "enum" in s:
            out.append(f"if not {self.enum_expr(s['enum'], x, known)}:")
            msg = " is not one of " + _show(s["enum"])
            out += _indent(self.fail(mode, ptr, f"_show({x}) + {msg!r}", True))
        if "const" in s:
            out.append(f"if not {self.const_expr(s['const'], x)}:")
            msg = " is not " + _show(s["const"])
            out += _indent(self.fail(mode, ptr, f"_show({x}) + {msg!r}", True))
        return out, known, string_done

    def group_stmts(self, s: dict, loc: Loc, x: str, ptr: tuple, mode: str, stack: tuple,
                    known: str | None, level: int, facts: dict, types: list,
                    string_done: bool) -> list[str]:
        """The keywords of each type group (string, number, array, object) of schema ``s``,
        behind a type test unless the type is known."""
        out: list[str] = []
        for group, kws in _GROUPS:
            if not any(k in s for k in kws) or (group == "string" and string_done):
                continue
            gen = getattr(self, "s_" + group)
            if _satisfies(known, group):
                out += gen(s, loc, x, ptr, mode, stack, level, facts=facts)
            elif known is not None or (types and not any(_may_be(group, t) for t in types)):
                continue  # the instance is of another type: the keywords do not apply
            else:
                body = gen(s, loc, x, ptr, mode, stack, level + 1)
                if body:
                    out.append(f"if {_test(group, x)}:")
                    out += _indent(body)
        return out

    def dispatch_stmts(self, s: dict, loc: Loc, x: str, ptr: tuple, mode: str, stack: tuple,
                       level: int, facts: dict) -> tuple[list[str], dict]:
        """The ``anyOf``/``oneOf`` whose branches are of distinct types, as a dispatch on the
        instance's type: the lines, and ``s`` without those keywords."""
        out: list[str] = []
        for kw in ("anyOf", "oneOf"):
            if kw not in s:
                continue
            ts = self.dispatch_types(s[kw], loc, kw, stack)
            if ts is None:
                continue
            # Branches of distinct types: only the branch of the instance's type can hold, so
            # anyOf and oneOf both mean "the instance is valid against that branch". The cheap
            # type tests (null, boolean) go first.
            order = sorted(range(len(ts)), key=lambda j: ts[j] not in ("null", "boolean"))
            for n_, i in enumerate(order):
                sub, t = s[kw][i], ts[i]
                body = self.stmts(sub, _loc_add(loc, kw, i), x, ptr, mode, stack, t, level + 1,
                                  facts)
                out.append(f"{'if' if n_ == 0 else 'elif'} {_test(t, x)}:")
                out += _indent(body or ["pass"])
            out.append("else:")
            msg = " is not of type " + " or ".join(ts)
            out += _indent(self.fail(mode, ptr, f"_show({x}) + {msg!r}", True))
            s = {k: v for k, v in s.items() if k != kw}
        return out, s

    def combinator_stmts(self, s: dict, loc: Loc, x: str, ptr: tuple, mode: str, stack: tuple,
                         known: str | None, level: int, facts: dict) -> list[str]:
        """The ``anyOf``, ``oneOf``, ``not`` and ``if``/``then``/``else`` of schema ``s``."""
        out: list[str] = []
        if "anyOf" in s:
            locs = [_loc_add(loc, "anyOf", i) for i in range(len(s["anyOf"]))]
            exprs = [self.expr(sub, l, x, stack, known, 1, facts)
                     for sub, l in zip(s["anyOf"], locs)]
            if "True" not in exprs:
                fns = ", ".join(self.helper("e", l) for l in locs)
                out.append(f"if not ({' or '.join(exprs)}):")
                out += _indent(self.fail_t(mode, ptr, f"_any_err({x}, ({fns},))"))
        if "oneOf" in s:
            locs = [_loc_add(loc, "oneOf", i) for i in range(len(s["oneOf"]))]
            exprs = [self.expr(sub, l, x, stack, known, 1, facts)
                     for sub, l in zip(s["oneOf"], locs)]
            fns = ", ".join(self.helper("e", l) for l in locs)
            c = self.var("c")
            out.append(f"{c} = " + " + ".join(f"(1 if {e} else 0)" for e in exprs))
            out.append(f"if {c} != 1:")
            out += _indent(self.fail_t(mode, ptr, f"_one_err({c}, {x}, ({fns},))"))
        if "not" in s:
            sub = s["not"]
            e = self.expr(sub, _loc_add(loc, "not"), x, stack, known, 1, facts)
            out.append(f"if {e}:")
            out += _indent(self.not_fail(sub, x, ptr, mode))
        if "if" in s and ("then" in s or "else" in s):
            cond = self.expr(s["if"], _loc_add(loc, "if"), x, stack, known, 1, facts)
            then = self.stmts(s.get("then", True), _loc_add(loc, "then"), x, ptr, mode, stack,
                              known, level + 1, facts)
            other = self.stmts(s.get("else", True), _loc_add(loc, "else"), x, ptr, mode, stack,
                               known, level + 1, facts)
            if then:
                out.append(f"if {cond}:")
                out += _indent(then)
                if other:
                    out.append("else:")
                    out += _indent(other)
            elif other:
                out.append(f"if not {cond}:")
                out += _indent(other)
        return out

    def not_fail(self, sub: Any, x: str, ptr: tuple, mode: str) -> list[str]:
        groups = None
        if isinstance(sub, dict):
            keys = set(sub) - _ANNOTATIONS
            if keys == {"required"}:
                groups = (tuple(sub["required"]),)
            elif keys == {"anyOf"} and all(
                isinstance(b, dict) and set(b) - _ANNOTATIONS == {"required"} for b in sub["anyOf"]
            ):
                groups = tuple(tuple(b["required"]) for b in sub["anyOf"])
            if groups is not None and all(groups):
                g = self.const(("G", groups), groups, "_G")
                return self.fail_t(mode, ptr, f"_not_req_err({x}, {g})")
            if keys == {"pattern"}:
                msg = " must not match " + str(sub["pattern"])
                return self.fail(mode, ptr, f"_show({x}) + {msg!r}", False)
        return self.fail(mode, ptr, f"_show({x}) + ' is not allowed here'", False)

    def string_block(self, s, loc, x, ptr, mode, known) -> list[str]:
        """The type check (unless ``known``) and the string keywords of a schema with a pattern,
        behind a bounded memo of the strings that passed them: ids, versions, case ids and
        paths recur across the lines of a file, and a set lookup costs a fraction of a regex
        match. The memo is keyed by the whole string schema (pattern and lengths), holds only
        exact ``str`` values of at most ``_MEMO_LEN`` characters, and is emptied when full."""
        memo = self.const(
            ("S", s.get("minLength"), s.get("maxLength"), s["pattern"]), set(), "_S"
        )
        body: list[str] = []
        if known == "string":
            out = [f"if {x} not in {memo}:"]
        else:
            out = [f"if {x}.__class__ is not str or {x} not in {memo}:"]
            body.append(f"if not isinstance({x}, str):")
            body += _indent(self.fail(mode, ptr, f"_show({x}) + ' is not of type string'", True))
        body += self.s_string(s, loc, x, ptr, mode, None, 0, memo=False)
        body += [f"if type({x}) is str and len({x}) <= {_MEMO_LEN}:",
                 f"{_IND}if len({memo}) >= {_MEMO}:",
                 f"{_IND}{_IND}{memo}.clear()",
                 f"{_IND}{memo}.add({x})"]
        return out + _indent(body)

    def s_string(self, s, loc, x, ptr, mode, stack, level, facts=None, memo=True) -> list[str]:
        if memo and "pattern" in s:
            return self.string_block(s, loc, x, ptr, mode, "string")
        out: list[str] = []
        if "minLength" in s:
            n = _count(s["minLength"], "minLength")
            if n > 0:
                out.append(f"if not {x}:" if n == 1 else f"if len({x}) < {n}:")
                msg = f" is shorter than the minimum length {n}"
                out += _indent(self.fail(mode, ptr, f"_show({x}) + {msg!r}", False))
        if "maxLength" in s:
            n = _count(s["maxLength"], "maxLength")
            out.append(f"if len({x}) > {n}:")
            msg = f" is longer than the maximum length {n}"
            out += _indent(self.fail(mode, ptr, f"_show({x}) + {msg!r}", False))
        if "pattern" in s:
            p = self.pattern(s["pattern"], str(loc))
            out.append(f"if {p}({x}) is None:")
            msg = " does not match " + s["pattern"]
            out += _indent(self.fail(mode, ptr, f"_show({x}) + {msg!r}", False))
        return out

    _NUM = (
        ("minimum", "<", "is below the minimum"),
        ("maximum", ">", "is above the maximum"),
        ("exclusiveMinimum", "<=", "is not above the exclusive minimum"),
        ("exclusiveMaximum", ">=", "is not below the exclusive maximum"),
    )

    def s_number(self, s, loc, x, ptr, mode, stack, level, facts=None) -> list[str]:
        out: list[str] = []
        for kw, op, text in self._NUM:
            if kw in s:
                lit = _num_lit(s[kw], kw)
                out.append(f"if {x} {op} {lit}:")
                out += _indent(self.fail(mode, ptr, f"_show({x}) + {f' {text} {lit}'!r}", False))
        return out

    def s_object(self, s, loc, x, ptr, mode, stack, level, facts=None) -> list[str]:
        props = s.get("properties", {})
        req = list(dict.fromkeys(s.get("required", ())))
        out, first = self.discriminator_stmts(props, loc, x, ptr, mode, stack, level)
        out += self.required_stmts(req, x, ptr, mode)
        ap = s.get("additionalProperties", True)
        lines, kset = self.member_name_stmts(s, loc, x, ptr, mode, stack, props, ap)
        out += lines
        out += self.property_stmts(props, req, first, loc, x, ptr, mode, stack, level, facts)
        if ap is not True and ap is not False:
            k, v = self.var("k"), self.var()
            body = self.stmts(ap, _loc_add(loc, "additionalProperties"), v, ptr + (("k", k),),
                              mode, stack, None, level + 2)
            if body:
                if kset:
                    out.append(f"if not {kset}.issuperset({x}):")
                    out.append(f"{_IND}for {k}, {v} in {x}.items():")
                    out.append(f"{_IND}{_IND}if {k} not in {kset}:")
                    out += _indent(_indent(_indent(body)))
                else:
                    out.append(f"for {k}, {v} in {x}.items():")
                    out += _indent(body)
        return out

    def discriminator_stmts(self, props: dict, loc: Loc, x: str, ptr: tuple, mode: str,
                            stack: tuple, level: int) -> tuple[list[str], set[str]]:
        """In helper mode, the checks of the members with a ``const`` or an ``enum``, first:
        the lines and the names checked."""
        out: list[str] = []
        first: set[str] = set()
        if mode == "helper":
            # In the message helpers of anyOf/oneOf branches, check the discriminators (members
            # with a const or an enum) first: a branch whose discriminator does not match then
            # fails with a weak error, and the branch meant is the one reported.
            for name, sub in props.items():
                if isinstance(sub, dict) and ("const" in sub or "enum" in sub):
                    v = self.var()
                    body = self.stmts(sub, _loc_add(loc, "properties", name), v,
                                      ptr + (("s", name),), mode, stack, None, level + 1)
                    out.append(f"if {name!r} in {x}:")
                    out.append(f"{_IND}{v} = {x}[{name!r}]")
                    out += _indent(body)
                    first.add(name)
        return out, first

    def required_stmts(self, req: list[str], x: str, ptr: tuple, mode: str) -> list[str]:
        """The check that the ``required`` members are present."""
        out: list[str] = []
        if len(req) == 1:
            out.append(f"if {req[0]!r} not in {x}:")
            missing = repr("required member is missing")
            out += _indent(self.fail(mode, ptr + (("s", req[0]),), missing, False))
        elif req:
            if len(req) <= 3:
                cond = " or ".join(f"{n!r} not in {x}" for n in req)
            else:
                cond = f"not {self.req_set(req)}.issubset({x})"
            names = self.const(("RL", tuple(req)), tuple(req), "_RL")
            out.append(f"if {cond}:")
            out += _indent(self.fail_t(mode, ptr, f"_missing_err({x}, {names})"))
        return out

    def member_name_stmts(self, s: dict, loc: Loc, x: str, ptr: tuple, mode: str, stack: tuple,
                          props: dict, ap: Any) -> tuple[list[str], str | None]:
        """The checks on the members as a set (``additionalProperties: false``,
        ``minProperties``, ``propertyNames``): the lines, and the constant holding the declared
        member names (None without them, or with a ``propertyNames`` that :meth:`names_ok`
        does not certify them against)."""
        out: list[str] = []
        kset = self.const(("K", tuple(sorted(props))), frozenset(props), "_K") if props else None
        if ap is False:
            if props:
                out.append(f"if not {kset}.issuperset({x}):")
                out += _indent(self.fail_t(mode, ptr, f"_extra_err({x}, {kset})"))
            else:
                out.append(f"if {x}:")
                out += _indent(self.fail_t(mode, ptr, f"_extra_err({x}, frozenset())"))
        if "minProperties" in s:
            n = _count(s["minProperties"], "minProperties")
            out.append(f"if len({x}) < {n}:")
            out += _indent(self.fail(mode, ptr, f"{f'has fewer than {n} members'!r}", False))
        if "propertyNames" in s:
            k = self.var("k")
            e = self.expr(s["propertyNames"], _loc_add(loc, "propertyNames"), k, stack, "string",
                          1)
            if e != "True":
                msg = " is not an allowed member name"
                loop = [f"for {k} in {x}:", f"{_IND}if not {e}:"] + _indent(_indent(
                    self.fail(mode, ptr + (("k", k),), f"_show({k}) + {msg!r}", False)))
                kset = self.names_ok(props, s["propertyNames"], loc)
                if kset:  # the declared names are allowed: only other members need the check
                    out.append(f"if not {kset}.issuperset({x}):")
                    loop = _indent(loop)
                out += loop
        return out, kset

    def property_stmts(self, props: dict, req: list[str], first: set[str], loc: Loc, x: str,
                       ptr: tuple, mode: str, stack: tuple, level: int,
                       facts: dict | None) -> list[str]:
        """The checks of the declared members not in ``first``: the required ones (recorded in
        ``facts``), then the optional ones, each when present."""
        out: list[str] = []
        optional: list[tuple[str, str, list[str]]] = []
        for name, sub in props.items():
            if name in first:
                continue
            v = self.var()
            body = self.stmts(sub, _loc_add(loc, "properties", name), v, ptr + (("s", name),),
                              mode, stack, None, level + 1)
            if not body:
                continue
            if name in req:
                out.append(f"{v} = {x}[{name!r}]")
                out += body
                if facts is not None:  # validated: later schemas on x may use it
                    t = self.definite_type(sub, _loc_add(loc, "properties", name), stack)
                    facts[name] = (v, t)
            else:
                optional.append((name, v, body))
        for name, v, body in optional:
            out.append(f"if {name!r} in {x}:")
            out.append(f"{_IND}{v} = {x}[{name!r}]")
            out += _indent(body)
        return out

    def names_ok(self, props: dict, names_schema: Any, loc: Loc) -> str | None:
        """The constant holding the declared member names when every one of them is valid
        against the ``propertyNames`` schema (decided now, by compiling that schema alone), so
        that only undeclared members need the check at run time; else None."""
        if not props:
            return None
        try:
            check = _compile(self.reg, _loc_add(loc, "propertyNames"), "propertyNames")[0]
        except SchemaError:
            return None
        if any(check(name) is not None for name in props):
            return None
        return self.const(("K", tuple(sorted(props))), frozenset(props), "_K")

    def s_array(self, s, loc, x, ptr, mode, stack, level, facts=None) -> list[str]:
        out: list[str] = []
        if "minItems" in s:
            n = _count(s["minItems"], "minItems")
            if n > 0:
                out.append(f"if not {x}:" if n == 1 else f"if len({x}) < {n}:")
                out += _indent(self.fail(mode, ptr, repr(f"has fewer than {n} items"), False))
        if "maxItems" in s:
            n = _count(s["maxItems"], "maxItems")
            out.append(f"if len({x}) > {n}:")
            out += _indent(self.fail(mode, ptr, repr(f"has more than {n} items"), False))
        if s.get("uniqueItems") is True:
            out.append(f"if len({x}) > 1 and not _uniq({x}):")
            out += _indent(self.fail(mode, ptr, repr("has duplicate items"), False))
        if "items" in s:
            v = self.var()
            body = self.stmts(s["items"], _loc_add(loc, "items"), v, ptr + (("i", (x, v)),), mode,
                              stack, None, level + 1)
            if body:
                out.append(f"for {v} in {x}:")
                out += _indent(body)
        return out

    # -- expression mode: a boolean expression, true when x is valid
    def expr(self, s: Any, loc: Loc, x: str, stack: tuple, known: str | None, depth: int,
             facts: dict | None = None) -> str:
        """A boolean expression, true when ``x`` is valid (``facts`` as in :meth:`stmts`)."""
        if s is True:
            return "True"
        if s is False:
            return "False"
        self.check(s, loc)
        if depth > _EXPR_DEPTH:
            return f"{self.helper('b', loc)}({x})"
        parts: list[str] = []
        types = self.types(s, loc)
        if len(types) == 1:
            t = types[0]
            if not _satisfies(known, t):
                parts.append(_test(t, x))
                known = t
        elif types and not any(_satisfies(known, t) for t in types):
            parts.append("(" + " or ".join(_test(t, x) for t in types) + ")")
        if "enum" in s:
            parts.append(self.enum_expr(s["enum"], x, known))
        if "const" in s:
            parts.append(self.const_expr(s["const"], x))
        for group, kws in _GROUPS:
            if not any(k in s for k in kws):
                continue
            gparts = getattr(self, "e_" + group)(s, loc, x, stack, depth, facts)
            if not gparts:
                continue
            if _satisfies(known, group):
                parts += gparts
            elif known is not None or (types and not any(_may_be(group, t) for t in types)):
                continue
            else:
                parts.append(f"(not {_test(group, x)} or ({' and '.join(gparts)}))")
        if "$ref" in s:
            tloc = self.reg.resolve(loc, s["$ref"])
            if tloc in stack:
                parts.append(f"{self.helper('b', tloc)}({x})")
            else:
                target = self.reg.at(tloc)
                parts.append(self.expr(target, tloc, x, stack + (tloc,), known, depth + 1,
                                       facts))
        for i, sub in enumerate(s.get("allOf", ())):
            parts.append(self.expr(sub, _loc_add(loc, "allOf", i), x, stack, known, depth + 1,
                                   facts))
        if "anyOf" in s:
            es = [self.expr(sub, _loc_add(loc, "anyOf", i), x, stack, known, depth + 1, facts)
                  for i, sub in enumerate(s["anyOf"])]
            if "True" not in es:
                parts.append("(" + " or ".join(es) + ")")
        if "oneOf" in s:
            es = [self.expr(sub, _loc_add(loc, "oneOf", i), x, stack, known, depth + 1, facts)
                  for i, sub in enumerate(s["oneOf"])]
            parts.append("((" + " + ".join(f"(1 if {e} else 0)" for e in es) + ") == 1)")
        if "not" in s:
            e = self.expr(s["not"], _loc_add(loc, "not"), x, stack, known, depth + 1, facts)
            parts.append(f"(not {e})")
        if "if" in s and ("then" in s or "else" in s):
            cond = self.expr(s["if"], _loc_add(loc, "if"), x, stack, known, depth + 1, facts)
            then = self.expr(s.get("then", True), _loc_add(loc, "then"), x, stack, known,
                             depth + 1, facts)
            other = self.expr(s.get("else", True), _loc_add(loc, "else"), x, stack, known,
                              depth + 1, facts)
            if then != "True" or other != "True":
                parts.append(f"({then} if {cond} else {other})")
        parts = [p for p in parts if p != "True"]
        if not parts:
            return "True"
        return parts[0] if len(parts) == 1 else "(" + " and ".join(parts) + ")"

    def e_string(self, s, loc, x, stack, depth, facts=None) -> list[str]:
        out: list[str] = []
        if "minLength" in s and _count(s["minLength"], "minLength") > 0:
            out.append(f"len({x}) >= {_count(s['minLength'], 'minLength')}")
        if "maxLength" in s:
            out.append(f"len({x}) <= {_count(s['maxLength'], 'maxLength')}")
        if "pattern" in s:
            p = self.pattern(s["pattern"], str(loc))
            memo = self.const(("S", None, None, s["pattern"]), set(), "_S")
            nmemo = self.const(("SN", s["pattern"]), set(), "_SN")
            out.append(f"({x} in {memo} or ({x} not in {nmemo} and "
                       f"_pmatch_or_no({p}, {memo}, {nmemo}, {x})))")
        return out

    def e_number(self, s, loc, x, stack, depth, facts=None) -> list[str]:
        return [f"not {x} {op} {_num_lit(s[kw], kw)}" for kw, op, _ in self._NUM if kw in s]

    def e_object(self, s, loc, x, stack, depth, facts=None) -> list[str]:
        out: list[str] = []
        facts = facts or {}
        props = s.get("properties", {})
        req = [n for n in dict.fromkeys(s.get("required", ())) if n not in facts]
        if len(req) == 1:
            out.append(f"{req[0]!r} in {x}")
        elif req:
            out.append(f"{self.req_set(req)}.issubset({x})")
        ap = s.get("additionalProperties", True)
        kset = self.const(("K", tuple(sorted(props))), frozenset(props), "_K") if props else None
        if ap is False:
            out.append(f"{kset}.issuperset({x})" if props else f"not {x}")
        if "minProperties" in s:
            out.append(f"len({x}) >= {_count(s['minProperties'], 'minProperties')}")
        if "propertyNames" in s:
            k = self.var("k")
            e = self.expr(s["propertyNames"], _loc_add(loc, "propertyNames"), k, stack, "string",
                          depth + 1)
            if e != "True":
                out.append(f"all({e} for {k} in {x})")
        for name, sub in props.items():
            if name in facts:  # already read and validated: use its variable
                var, t = facts[name]
                out.append(self.expr(sub, _loc_add(loc, "properties", name), var, stack, t,
                                     depth + 1))
                continue
            v = self.var("t")
            e = self.expr(sub, _loc_add(loc, "properties", name), v, stack, None, depth + 1)
            if e == "True":
                continue
            if name in req:
                out.append(f"(({v} := {x}[{name!r}]) is not _M and {e})")
            else:
                out.append(f"(({v} := {x}.get({name!r}, _M)) is _M or {e})")
        if ap is not True and ap is not False:
            k, v = self.var("k"), self.var("t")
            e = self.expr(ap, _loc_add(loc, "additionalProperties"), v, stack, None, depth + 1)
            if e != "True":
                if kset:
                    out.append(f"all({k} in {kset} or {e} for {k}, {v} in {x}.items())")
                else:
                    out.append(f"all({e} for {v} in {x}.values())")
        return out

    def e_array(self, s, loc, x, stack, depth, facts=None) -> list[str]:
        out: list[str] = []
        if "minItems" in s and _count(s["minItems"], "minItems") > 0:
            out.append(f"len({x}) >= {_count(s['minItems'], 'minItems')}")
        if "maxItems" in s:
            out.append(f"len({x}) <= {_count(s['maxItems'], 'maxItems')}")
        if s.get("uniqueItems") is True:
            out.append(f"(len({x}) < 2 or _uniq({x}))")
        if "items" in s:
            v = self.var("t")
            e = self.expr(s["items"], _loc_add(loc, "items"), v, stack, None, depth + 1)
            if e != "True":
                out.append(f"all({e} for {v} in {x})")
        return out

    # -- the whole module
    def module(self, root: Loc, fname: str) -> str:
        body = _indent(self.stmts(self.reg.at(root), root, "x", (), "entry", (root,), None, 0))
        body.append(_IND + "return None")
        self.blocks.append("\n".join([f"def {fname}(x):"] + body))
        self.drain()
        return "\n\n".join(self.blocks) + "\n"


def _loc_add(loc: Loc, *toks: Any) -> Loc:
    return (loc[0], loc[1] + toks)


def _compile(reg: _Registry, root: Loc, label: str) -> tuple[Callable[[Any], str | None], str]:
    gen = _Gen(reg)
    src = gen.module(root, "validate")
    code = compile(src, f"<aef schema {label}>", "exec")
    ns = gen.ns
    exec(code, ns)
    fn = ns["validate"]
    fn.__qualname__ = fn.__name__ = "validate_" + re.sub(r"\W", "_", label)
    fn.__doc__ = f"Validates a decoded JSON value against the schema {label}."
    return fn, src


def compile_schemas(
    docs: list[dict] | tuple, *, annotation_prefixes: tuple[str, ...] = (), label: str = "schema"
) -> dict[str, Callable[[Any], str | None]]:
    """Compiles schema documents that live outside ``schemas/`` (another format's, e.g. AEP's),
    each identified by its ``$id``, with ``$ref`` resolved among them. Returns ``{$id:
    validator}`` for every document; validators behave as :func:`validator`'s do.

    ``annotation_prefixes``: keywords starting with one of these are annotations (``("x-",)``
    for vendor annotations such as ``x-aep-capture``); every other unknown keyword is refused.
    """
    by_id: dict[str, Any] = {}
    for doc in docs:
        uri = doc.get("$id") if isinstance(doc, dict) else None
        if not isinstance(uri, str):
            raise SchemaError("every schema document needs a $id")
        by_id[urldefrag(uri)[0]] = doc
    reg = _Registry(by_id, annotation_prefixes)
    reg.check_all()
    return {
        uri: _compile(reg, (uri, ()), f"{label} {uri.rsplit('/', 1)[-1]}")[0] for uri in by_id
    }


def _compile_schema(schema: Any, others: list[Any] | tuple = ()) -> Callable[[Any], str | None]:
    """Compiles an ad-hoc schema (with ``others``, schemas its ``$ref``s may name by ``$id``);
    for tests."""
    docs: dict[str, Any] = {}
    root_uri = "urn:aefgate:adhoc/root.schema.json"
    for i, doc in enumerate(others):
        uri = doc.get("$id") if isinstance(doc, dict) else None
        docs[urldefrag(uri)[0] if uri else f"urn:aefgate:adhoc/other{i}.schema.json"] = doc
    if isinstance(schema, dict) and isinstance(schema.get("$id"), str):
        root_uri = urldefrag(schema["$id"])[0]
    docs[root_uri] = schema
    reg = _Registry(docs)
    reg.check_all()
    return _compile(reg, (root_uri, ()), "adhoc")[0]


# --------------------------------------------------------------------------------------------
# The public API.

_lock = threading.Lock()
_registries: dict[str, _Registry] = {}
_cache: dict[tuple[str, str], tuple[Callable[[Any], str | None], str]] = {}


def _compiled(name: str, side: str) -> tuple[Callable[[Any], str | None], str]:
    key = (name, side)
    hit = _cache.get(key)
    if hit is not None:
        return hit
    if side not in SIDES:
        raise ValueError(f"side must be 'reader' or 'writer', not {side!r}")
    if name not in SCHEMA_NAMES:
        raise ValueError(f"no AEF document schema {name!r}; known: {', '.join(SCHEMA_NAMES)}")
    with _lock:
        hit = _cache.get(key)
        if hit is None:
            reg = _registries.get(side)
            if reg is None:
                reg = _registries[side] = _Registry.for_side(side)
            uri = (SCHEMA_DIR / side / (name + _SUFFIX)).as_uri()
            hit = _cache[key] = _compile(reg, (reg.base(uri), ()), f"{side}/{name}")
    return hit


def validator(name: str, side: str = "reader") -> Callable[[Any], str | None]:
    """The validator of document schema ``name`` (``"result"``, ``"run"`` ...; see
    :data:`SCHEMA_NAMES`) on ``side`` (``"reader"`` or ``"writer"``).

    It takes a decoded JSON value and returns ``None`` when it is valid, else a short reason
    naming the JSON pointer of the first failure found. Compiled once, then cached.
    """
    return _compiled(name, side)[0]


def is_valid(name: str, instance: Any, side: str = "reader") -> bool:
    """Whether ``instance`` is valid against document schema ``name`` on ``side``."""
    return _compiled(name, side)[0](instance) is None


def _source(name: str, side: str = "reader") -> str:
    """The generated Python source of a validator (for debugging)."""
    return _compiled(name, side)[1]
