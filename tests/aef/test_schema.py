"""aefgate.aef.schema against jsonschema, the oracle.

Two oracles, both ``jsonschema.Draft202012Validator`` over a ``referencing`` registry of the
vendored schema files, with no format checker:

* STOCK: jsonschema as it is. It applies patterns with Python's ``re.search``, whose ``$`` also
  matches before a final newline, so it accepts ``"abc\\n"`` where AEF's [ENC-15] refuses it.
  Our verdict must equal it on every instance that holds no string ending in a newline.
* ENC15: jsonschema with its ``pattern`` keyword replaced by one that turns each pattern's final
  ``$`` into ``\\Z`` (the schemas have no other ``$`` anchor; a test checks it). Our verdict must
  equal it on every instance.

The instances: every JSON document and NDJSON line of the spec's corpus (conformance/ and
interop/examples/), hypothesis mutations of them, and instances hypothesis generates from every
document schema (then mutates).
"""

from __future__ import annotations

import copy
import json
import re
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from jsonschema.exceptions import ValidationError
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from aefgate.aef import schema as S
from tests.conftest import shared_root

REPO = Path(__file__).resolve().parents[2]
SPEC = REPO.parent / "shared" / "spec" / "aef"
SIDES = ("reader", "writer")
CORPUS_FILES = {
    "run.json": "run",
    "metrics.json": "metrics",
    "summary.json": "summary",
    "seal.json": "seal",
    "results.ndjson": "result",
    "evidence.ndjson": "evidence",
    "gates.ndjson": "gate-decision",
}
MAX_SAFE = 9007199254740991


# ---------------------------------------------------------------------------------------------
# schemas and oracles


def _schema_files(side: str) -> dict[str, Any]:
    return {
        p.name: json.loads(p.read_text(encoding="utf-8"))
        for p in sorted((S.SCHEMA_DIR / side).glob("*.schema.json"))
    }


SCHEMAS = {side: _schema_files(side) for side in SIDES}


def _walk(node: Any, path: tuple = ()):
    """Every (path, schema object) in a schema document."""
    if isinstance(node, dict):
        yield path, node
        for k, v in node.items():
            if k in ("enum", "const", "required", "examples", "default"):
                continue
            if k in ("properties", "$defs"):
                for name, sub in v.items():
                    yield from _walk(sub, path + (k, name))
            else:
                yield from _walk(v, path + (k,))
    elif isinstance(node, list):
        for i, sub in enumerate(node):
            yield from _walk(sub, path + (i,))


def _all_patterns() -> set[str]:
    return {
        node["pattern"]
        for side in SIDES
        for doc in SCHEMAS[side].values()
        for _, node in _walk(doc)
        if isinstance(node.get("pattern"), str)
    }


PATTERNS = sorted(_all_patterns())


def _enc15(pattern: str) -> str:
    """The oracle's reading of [ENC-15]: the final ``$`` anchor matches only at the very end."""
    if pattern.endswith("$") and not pattern.endswith("\\$"):
        return pattern[:-1] + r"\Z"
    return pattern


def _enc15_pattern(validator, patrn, instance, schema):
    if validator.is_type(instance, "string") and not re.search(_enc15(patrn), instance):
        yield ValidationError(f"{instance!r} does not match {patrn!r}")


Enc15Validator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator, {"pattern": _enc15_pattern}
)


def _registry(side: str) -> Registry:
    return Registry().with_resources(
        (doc["$id"], Resource.from_contents(doc, default_specification=DRAFT202012))
        for doc in SCHEMAS[side].values()
    )


REGISTRIES = {side: _registry(side) for side in SIDES}
STOCK = {
    (n, side): jsonschema.Draft202012Validator(
        SCHEMAS[side][f"{n}.schema.json"], registry=REGISTRIES[side]
    )
    for n in S.SCHEMA_NAMES
    for side in SIDES
}
ENC15 = {
    (n, side): Enc15Validator(SCHEMAS[side][f"{n}.schema.json"], registry=REGISTRIES[side])
    for n in S.SCHEMA_NAMES
    for side in SIDES
}


def _has_newline_end(v: Any) -> bool:
    if isinstance(v, str):
        return v.endswith("\n")
    if isinstance(v, list):
        return any(_has_newline_end(i) for i in v)
    if isinstance(v, dict):
        return any(_has_newline_end(k) or _has_newline_end(i) for k, i in v.items())
    return False


def _pointer_ok(inst: Any, reason: str) -> bool:
    """The reason starts with a pointer that names a place in the instance (or a missing
    member of one)."""
    ptr, sep, msg = reason.partition(": ")
    if not sep or not msg:
        return False
    if ptr == "(root)":
        return True
    if not ptr.startswith("/"):
        return False
    toks = [t.replace("~1", "/").replace("~0", "~") for t in ptr.split("/")[1:]]
    node = inst
    for i, tok in enumerate(toks):
        if isinstance(node, dict) and tok in node:
            node = node[tok]
        elif isinstance(node, list) and tok.isdigit() and int(tok) < len(node):
            node = node[int(tok)]
        else:
            return i == len(toks) - 1 and isinstance(node, dict) and "missing" in msg
    return True


def assert_agrees(name: str, side: str, inst: Any) -> str | None:
    mine = S.validator(name, side)(inst)
    enc15 = ENC15[(name, side)].is_valid(inst)
    assert (mine is None) == enc15, (name, side, mine, inst)
    stock = STOCK[(name, side)].is_valid(inst)
    if _has_newline_end(inst):
        assert stock or not enc15  # jsonschema can only be more lenient than [ENC-15]
    else:
        assert stock == enc15, (name, side, inst)
    if mine is not None:
        assert _pointer_ok(inst, mine), mine
    return mine


# ---------------------------------------------------------------------------------------------
# the corpus


def _corpus() -> list[tuple[str, str, Any]]:
    out = []
    for sub in ("conformance", "interop/examples"):
        for path in sorted((SPEC / sub).rglob("*")):
            name = CORPUS_FILES.get(path.name)
            if name is None or not path.is_file():
                continue
            rel = str(path.relative_to(SPEC))
            if path.suffix == ".ndjson":
                for i, line in enumerate(path.read_bytes().split(b"\n"), 1):
                    if line.strip():
                        try:
                            out.append((name, f"{rel}:{i}", json.loads(line)))
                        except ValueError:
                            pass  # a refusal vector of the encoding rules, not of the schemas
            else:
                try:
                    out.append((name, rel, json.loads(path.read_bytes())))
                except ValueError:
                    pass
    return out


CORPUS = _corpus() if SPEC.is_dir() else []


@pytest.fixture(scope="module")
def corpus() -> list[tuple[str, str, Any]]:
    shared_root()  # fails, never skips, without shared/
    assert {n for n, _, _ in CORPUS} == set(CORPUS_FILES.values())
    assert len(CORPUS) > 100
    return CORPUS


@pytest.mark.parametrize("side", SIDES)
def test_corpus_agrees_with_jsonschema(corpus, side):
    for name, where, inst in corpus:
        reason = assert_agrees(name, side, inst)
        if "/refusals/" not in where:  # the refusal vectors are of converters, not schemas
            assert reason is None, (where, reason)


# ---------------------------------------------------------------------------------------------
# mutations


def _enum_strings() -> list[str]:
    out: set[str] = set()
    for side in SIDES:
        for doc in SCHEMAS[side].values():
            for _, node in _walk(doc):
                for v in node.get("enum", []) + ([node["const"]] if "const" in node else []):
                    if isinstance(v, str):
                        out.add(v)
    return sorted(out)


ENUM_STRINGS = _enum_strings()
NUMBERS = [0, -1, 1, 0.5, 1.0, 2.0, -0.0, 0.999, 1.0000001, 999, 1000, 1001, 1024, 1025,
           MAX_SAFE, MAX_SAFE + 1, -MAX_SAFE, -MAX_SAFE - 1, 9007199254740992.0, 2**64, 10**30,
           1e308, -1e308, 4.5e15]
STRINGS = ["", "a", "x" * 31, "x" * 32, "x" * 33, "a" * 64, "a" * 65, "a" * 128, "a" * 129,
           "a" * 256, "a" * 257, "latest", "LaTeSt", "1.0", "1.9", "2.0", "1.00", "ci:x",
           "sha256:" + "0" * 64, "0" * 64, "r_" + "0" * 32, "E-1", "2026-02-31T00:00:00Z",
           "2026-10-08T12:00:00Z", "agent:a/b", "a b", "é", "\u2028", "\x7f", "P1D", "PT"]
ODD = ["x", 1, 1.5, True, False, None, [], {}, [1], {"a": 1}]
MUTATIONS = ("drop", "type", "number", "unknown", "newline", "enum", "float", "true", "string",
             "dup", "empty", "int-float", "huge")


def _paths(node: Any, path: tuple = ()) -> list[tuple]:
    out = [path]
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, path + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, path + (i,))
    return out


def _get(node: Any, path: tuple) -> Any:
    for tok in path:
        node = node[tok]
    return node


def _mutate_once(data, doc: Any) -> Any:
    path = data.draw(st.sampled_from(_paths(doc)), label="path")
    kind = data.draw(st.sampled_from(MUTATIONS), label="kind")
    node = _get(doc, path)
    new: Any = node
    if kind == "drop":
        if path and isinstance(_get(doc, path[:-1]), dict):
            del _get(doc, path[:-1])[path[-1]]
        elif path:
            _get(doc, path[:-1]).pop(path[-1])
        return doc
    if kind == "unknown":
        if isinstance(node, dict):
            node[data.draw(st.sampled_from(["zzUnknown", "ext", "kind", "x"]))] = data.draw(
                st.sampled_from(ODD)
            )
        return doc
    if kind == "dup":
        if isinstance(node, list) and node:
            node.append(copy.deepcopy(node[0]))
        return doc
    if kind == "empty":
        if isinstance(node, (list, dict)):
            node.clear()
        return doc
    if kind == "type":
        new = copy.deepcopy(data.draw(st.sampled_from(ODD)))
    elif kind == "number":
        new = data.draw(st.sampled_from(NUMBERS))
    elif kind == "newline":
        new = (node + "\n") if isinstance(node, str) else "abc\n"
    elif kind == "enum":
        new = data.draw(st.sampled_from(ENUM_STRINGS + ["bogus-value"]))
    elif kind == "float":
        new = float(node) if isinstance(node, int) and not isinstance(node, bool) else 2.5
    elif kind == "true":
        new = True
    elif kind == "string":
        new = data.draw(st.sampled_from(STRINGS))
    elif kind == "int-float":
        new = float(node) if type(node) is int else 2.0
    elif kind == "huge":
        new = data.draw(st.sampled_from([MAX_SAFE + 1, -(2**53), 2**64, 10**40]))
    if not path:
        return new
    _get(doc, path[:-1])[path[-1]] = new
    return doc


def _mutate(data, doc: Any) -> Any:
    doc = copy.deepcopy(doc)
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        doc = _mutate_once(data, doc)
    return doc


SETTINGS = dict(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=True,
)


@settings(max_examples=800, **SETTINGS)
@given(data=st.data())
def test_mutated_corpus_agrees_with_jsonschema(corpus, data):
    name, where, doc = data.draw(st.sampled_from(corpus), label="document")
    inst = _mutate(data, doc)
    for side in SIDES:
        event(f"{side}: {'valid' if assert_agrees(name, side, inst) is None else 'refused'}")


@settings(max_examples=150, **SETTINGS)
@given(data=st.data())
def test_newline_at_the_end_of_an_id_like_field(corpus, data):
    """[ENC-15]: a pattern-checked string with a trailing newline is refused, even where
    jsonschema (Python's ``$``) accepts it, and the reason names that string."""
    name, where, doc = data.draw(st.sampled_from(corpus), label="document")
    doc = copy.deepcopy(doc)
    targets = [
        p for p in _paths(doc)
        if p and isinstance(p[-1], str) and isinstance(_get(doc, p), str) and "ext" not in p
        and re.search(r"(Id|Hash|At|^lane|^schemaVersion)$", p[-1])
    ]
    if not targets:
        return
    path = data.draw(st.sampled_from(targets), label="path")
    _get(doc, path[:-1])[path[-1]] += "\n"
    for side in SIDES:
        mine = assert_agrees(name, side, doc)
        if mine is None:  # a free-text field
            event("accepted")
            continue
        assert mine.startswith("/" + "/".join(map(str, path)) + ": "), mine
        event("refused where jsonschema accepts" if STOCK[(name, side)].is_valid(doc) else "refused")


# ---------------------------------------------------------------------------------------------
# instances generated from the schemas (covers the documents the corpus has none of)


def _string_pool() -> dict[str, list[str]]:
    strings: set[str] = set()

    def walk(v: Any) -> None:
        if isinstance(v, str):
            strings.add(v)
        elif isinstance(v, list):
            for i in v:
                walk(i)
        elif isinstance(v, dict):
            for i in v.values():
                walk(i)

    for _, _, doc in CORPUS:
        walk(doc)
    return {p: sorted(x for x in strings if re.search(_enc15(p), x))[:40] for p in PATTERNS}


STRING_POOL = _string_pool()


def _resolve(doc_name: str, side: str, ref: str) -> tuple[str, Any]:
    file, _, frag = ref.partition("#")
    doc_name = file or doc_name
    node = SCHEMAS[side][doc_name]
    for tok in frag.split("/")[1:] if frag else []:
        tok = tok.replace("~1", "/").replace("~0", "~")
        node = node[int(tok)] if isinstance(node, list) else node[tok]
    return doc_name, node


def _facets(data, side: str, doc_name: str, node: Any) -> list[tuple[str, dict]]:
    out, todo = [], [(doc_name, node)]
    while todo:
        d, s = todo.pop()
        if not isinstance(s, dict):
            continue
        out.append((d, s))
        if "$ref" in s:
            todo.append(_resolve(d, side, s["$ref"]))
        todo += [(d, sub) for sub in s.get("allOf", [])]
        for kw in ("anyOf", "oneOf"):
            if kw in s:
                todo.append((d, data.draw(st.sampled_from(s[kw]))))
        if "if" in s and "then" in s and data.draw(st.booleans()):
            todo.append((d, s["then"]))
    return out


def _gen(data, side: str, doc_name: str, node: Any, depth: int = 0) -> Any:
    facets = _facets(data, side, doc_name, node)
    for _, s in facets:
        if "const" in s:
            return copy.deepcopy(s["const"])
    for _, s in facets:
        if "enum" in s:
            return copy.deepcopy(data.draw(st.sampled_from(s["enum"])))
    t = next((s["type"] for _, s in facets if "type" in s), None)
    if isinstance(t, list):
        t = data.draw(st.sampled_from(t))
    if t is None:
        t = "object" if any("properties" in s or "required" in s for _, s in facets) else "string"
    kw = {k: v for _, s in reversed(facets) for k, v in s.items()}
    if t == "object":
        props: dict[str, tuple[str, Any]] = {}
        req: list[str] = []
        for d, s in facets:
            for k, v in s.get("properties", {}).items():
                props.setdefault(k, (d, v))
            req += [r for r in s.get("required", []) if r not in req]
        obj = {}
        for k in req + [k for k in props if k not in req]:
            if k in req or (depth < 4 and data.draw(st.booleans())):
                d, v = props.get(k, (doc_name, True))
                obj[k] = _gen(data, side, d, v, depth + 1)
        return obj
    if t == "array":
        items = kw.get("items", True)
        lo = kw.get("minItems", 0)
        n = data.draw(st.integers(lo, min(kw.get("maxItems", 2), max(2, lo))))
        return [_gen(data, side, doc_name, items, depth + 1) for _ in range(n)]
    if t == "string":
        if "pattern" in kw:
            pool = STRING_POOL.get(kw["pattern"], ())
            if len(pool) >= 3:  # drawing from_regex is slow; the pattern tests use it
                return data.draw(st.sampled_from(pool))
            return data.draw(st.from_regex(kw["pattern"], fullmatch=True))
        lo = kw.get("minLength", 0)
        return data.draw(st.text(min_size=lo, max_size=max(lo, min(kw.get("maxLength", 8), 8))))
    if t in ("integer", "number"):
        lo, hi = kw.get("minimum", 0), kw.get("maximum", 10**6)
        if t == "number" and data.draw(st.booleans()):
            return data.draw(st.floats(lo, hi, allow_nan=False))
        return data.draw(st.integers(int(lo) + (lo != int(lo)), int(hi)))
    if t == "boolean":
        return data.draw(st.booleans())
    return None


@settings(max_examples=500, **SETTINGS)
@given(st.data())
def test_generated_instances_agree_with_jsonschema(data):
    name = data.draw(st.sampled_from(S.SCHEMA_NAMES), label="schema")
    side = data.draw(st.sampled_from(SIDES), label="generated on")
    inst = _gen(data, side, f"{name}.schema.json", SCHEMAS[side][f"{name}.schema.json"])
    if data.draw(st.booleans(), label="mutate"):
        inst = _mutate(data, inst)
    for side in SIDES:
        event(f"{side}: {'valid' if assert_agrees(name, side, inst) is None else 'refused'}")


# ---------------------------------------------------------------------------------------------
# explicit cases


@pytest.fixture(scope="module")
def result_line() -> dict:
    return {
        "schemaVersion": "1.0",
        "resultId": "r_479d157f3423e95d566bcbfc0c6d2461",
        "caseId": "case-17",
        "path": "triage",
        "evaluator": {"id": "composite:triage", "version": "2"},
        "state": "failed",
        "severity": "medium",
        "scores": [{"metric": "triage", "value": 0.55, "normalized": 0.55}],
        "turns": 3,
        "lane": "main",
    }


def _with(doc: dict, **members) -> dict:
    d = copy.deepcopy(doc)
    d.update(members)
    return d


@pytest.mark.parametrize("side", SIDES)
def test_valid_line(result_line, side):
    assert S.validator("result", side)(result_line) is None
    assert S.is_valid("result", result_line, side)


@pytest.mark.parametrize("side", SIDES)
def test_trailing_newline_refused_for_an_id(result_line, side):
    v = S.validator("result", side)
    doc = _with(result_line, lane="abc\n")
    assert v(doc) == '/lane: "abc\\n" does not match ^[A-Za-z0-9._:-]{1,128}$'
    assert not S.is_valid("result", doc, side)
    assert STOCK[("result", side)].is_valid(doc)  # Python's $ would accept it
    assert v(_with(result_line, lane="abc")) is None
    # the memo of accepted strings must not let it through either
    assert v(_with(result_line, lane="abc\n")) is not None
    assert v(_with(result_line, schemaVersion="1.0\n")) is not None
    assert v(_with(result_line, resultId=result_line["resultId"] + "\n")) is not None


@pytest.mark.parametrize("side", SIDES)
def test_integral_float_is_an_integer(result_line, side):
    v = S.validator("result", side)
    assert v(_with(result_line, turns=2.0)) is None
    assert v(_with(result_line, turns=2e0)) is None
    assert v(_with(result_line, turns=2.5)) == "/turns: 2.5 is not of type integer"
    assert v(_with(result_line, turns=True)) == "/turns: true is not of type integer"
    assert v(_with(result_line, turns="2")) is not None


@pytest.mark.parametrize("side", SIDES)
def test_integer_bound_is_exact(result_line, side):
    v = S.validator("result", side)
    assert v(_with(result_line, turns=MAX_SAFE)) is None
    assert v(_with(result_line, turns=MAX_SAFE + 1)) == (
        "/turns: 9007199254740992 is above the maximum 9007199254740991"
    )
    assert v(_with(result_line, turns=9007199254740992.0)) is not None
    assert v(_with(result_line, turns=2**200)) is not None
    assert v(_with(result_line, turns=0)) == "/turns: 0 is below the minimum 1"


@pytest.mark.parametrize("side", SIDES)
def test_bool_is_not_a_number(result_line, side):
    v = S.validator("result", side)
    bad = _with(result_line, scores=[{"metric": "m", "value": True}])
    assert v(bad) == "/scores/0/value: true is not of type number"
    assert v(_with(result_line, scores=[{"metric": "m", "value": 1}])) is None
    assert v(_with(result_line, scores=[{"metric": "m", "value": 1, "normalized": 1.5}])) == (
        "/scores/0/normalized: 1.5 is above the maximum 1"
    )
    assert v(_with(result_line, scores=[{"metric": "m", "value": 1, "normalized": None}])) is None


def test_reader_accepts_an_unknown_enum_value_the_writer_refuses(result_line):
    # severity: an enum for writers, any string for readers ([VER-8]: read as critical)
    doc = _with(result_line, severity="catastrophic")
    assert S.validator("result", "reader")(doc) is None
    assert S.validator("result", "writer")(doc) == (
        '/severity: "catastrophic" is not one of ["none", "low", "medium", "high", "critical"]'
    )
    # state is closed for major 1 on both sides ([VER-9])
    for side in SIDES:
        assert S.validator("result", side)(_with(result_line, state="fine")) is not None
    # unknown members: ignored by readers, refused by writers ([VER-3])
    doc = _with(result_line, futureField=1)
    assert S.validator("result", "reader")(doc) is None
    assert S.validator("result", "writer")(doc) == "/futureField: member is not allowed here"
    # a later minor: readers take it, writers write their own
    doc = _with(result_line, schemaVersion="1.7")
    assert S.validator("result", "reader")(doc) is None
    assert S.validator("result", "writer")(doc) is not None
    for side in SIDES:
        assert S.validator("result", side)(_with(result_line, schemaVersion="2.0")) is not None
        assert S.validator("result", side)(_with(result_line, schemaVersion="1.00")) is not None


@pytest.mark.parametrize("side", SIDES)
def test_messages_name_the_pointer(result_line, side):
    v = S.validator("result", side)
    doc = copy.deepcopy(result_line)
    del doc["caseId"]
    assert v(doc) == "/caseId: required member is missing"
    assert v([]) == "(root): [] is not of type object"
    doc = _with(result_line, state="skipped")
    assert v(doc) == "/reason: required member is missing"  # an if/then rule
    doc = _with(result_line, state="skipped", reason="no judge")
    assert v(doc) == "/scores: member is not allowed here"  # a typed absence has no scores
    trials = {"n": 1, "passed": 1, "aggregation": "AllPass", "agree": True}
    doc = _with(result_line, trial=0, trials=trials)
    assert v(doc) == "(root): members trial, trials must not all be present"
    ok, bad = {"metric": "m", "value": 1}, {"metric": "m", "value": "1"}
    doc = _with(result_line, scores=[ok, ok, bad, bad, ok])  # the same objects, repeated
    assert v(doc) == '/scores/2/value: "1" is not of type number'
    doc = _with(result_line, parentResultId=5)
    assert v(doc) == "/parentResultId: 5 is not of type string or null"
    doc = _with(result_line, parentResultId="r_x")
    assert v(doc).startswith('/parentResultId: "r_x" does not match ')


def test_api():
    assert "common" not in S.SCHEMA_NAMES
    files = (S.SCHEMA_DIR / "reader").glob("*.schema.json")
    expected = {p.name[: -len(".schema.json")] for p in files}
    assert set(S.SCHEMA_NAMES) == expected - {"common"}
    assert {"run", "result", "metrics", "summary", "evidence", "gate-decision", "seal",
            "overlay-event", "overlay-seal", "trust-policy", "checkpoint", "decision",
            "run-plan", "runner", "runner-event"} <= set(S.SCHEMA_NAMES)
    assert S.validator("run") is S.validator("run", "reader")
    assert S.validator("run", "writer") is not S.validator("run", "reader")
    with pytest.raises(ValueError):
        S.validator("common")
    with pytest.raises(ValueError):
        S.validator("nope")
    with pytest.raises(ValueError):
        S.validator("run", "both")
    for name in S.SCHEMA_NAMES:
        for side in SIDES:
            assert S.validator(name, side)(None) == "(root): null is not of type object"


# ---------------------------------------------------------------------------------------------
# patterns


def test_every_pattern_ends_in_its_only_dollar_anchor():
    """The ENC15 oracle's rewrite is only right if the final $ is the only $ anchor."""
    for p in PATTERNS:
        bare = re.sub(r"\\.", "", p)
        bare = re.sub(r"\[[^\]]*\]", "", bare)
        assert bare.count("$") == (1 if p.endswith("$") else 0), p
        assert p.startswith("^") and p.endswith("$"), p


def test_patterns_translate():
    assert S.translate_pattern("^a$") == r"^a\Z"
    assert S.translate_pattern(r"^\d+$") == r"^[0-9]+\Z"
    assert S.translate_pattern("^[!-~]$") == r"^[\!-\~]\Z"
    assert re.compile(S.translate_pattern(r"\w"), re.ASCII).search("é") is None
    assert S.compile_pattern(r"^\d$").search("\u0663") is None  # Arabic-Indic 3 is no ECMA \d
    assert S.compile_pattern(r"^\s$").search("\ufeff")  # ECMA \s includes U+FEFF
    assert S.compile_pattern(r"^\s$").search("\x1c") is None  # Python's \s would match it
    assert S.compile_pattern("^.$").search("\u2028") is None
    assert S.compile_pattern("^.$").search("\U0001F600")
    assert S.compile_pattern("^[]$").search("") is None
    assert S.compile_pattern("^[^]$").search("\n")
    assert S.compile_pattern(r"^\u00e9$").search("é")
    assert S.compile_pattern(r"^\ud83d\ude00$").search("\U0001F600")
    assert S.compile_pattern("a{,2}").search("a{,2}")  # not a quantifier in ECMA
    assert S._pattern_test("^a|b$")("xb")  # not anchored at 0: searched
    assert S._pattern_test("^(a|b)$")("xb") is None
    assert S._pattern_test("a$")("ba")
    for bad in (r"(a)\1", "(?<=a)b", r"\p{L}", r"\k<x>", "(a", "a)", r"\q"):
        with pytest.raises(S.SchemaError):
            S.compile_pattern(bad)


@pytest.mark.parametrize("pattern", PATTERNS)
@settings(max_examples=40, **SETTINGS)
@given(data=st.data())
def test_schema_patterns_mean_the_same_in_python(pattern, data):
    """Each translated pattern agrees with the original (read by Python, which for these
    patterns reads ECMA's meaning) on strings without a final newline, and refuses every
    string with one."""
    ours = S.compile_pattern(pattern)
    test = S._pattern_test(pattern)  # what the validators call: match when anchored at 0
    chars = set(re.sub(r"\\.", "", pattern)) | set("aZ09_-:./\n\r \x00\x85é\u2028")
    alphabet = st.sampled_from(sorted(chars))
    s = data.draw(st.one_of(st.from_regex(pattern, fullmatch=True), st.text(alphabet, max_size=80)))
    if s.endswith("\n"):
        # refused, unless the pattern itself allows a final newline (the public key's)
        assert ours.search(s) is None or pattern.endswith("(\\r?\\n)?$"), (pattern, s)
    else:
        assert (ours.search(s) is None) == (re.search(pattern, s) is None), (pattern, s)
    assert (ours.search(s) is None) == (re.search(_enc15(pattern), s) is None), (pattern, s)
    assert (test(s) is None) == (ours.search(s) is None), (pattern, s)


# ---------------------------------------------------------------------------------------------
# keyword semantics on small schemas


def _both(schema: Any, others: tuple = ()):
    mine = S._compile_schema(schema, others)
    reg = Registry().with_resources(
        (o["$id"], Resource.from_contents(o, default_specification=DRAFT202012)) for o in others
    )
    return mine, Enc15Validator(schema, registry=reg)


def _agree_adhoc(schema: Any, instances: list, others: tuple = ()) -> None:
    mine, oracle = _both(schema, others)
    for inst in instances:
        assert (mine(inst) is None) == oracle.is_valid(inst), (schema, inst, mine(inst))


JSON_VALUES = [
    None, True, False, 0, 1, -1, 1.0, 0.0, -0.0, 2.5, 2**53, "", "1", "a", [], [1], [1.0], [True],
    [1, 1.0], [1, True], [[1], [1.0]], {}, {"a": 1}, {"a": 1.0}, {"a": True},
    [{"a": 1}, {"a": 1.0}], [{"a": 1}, {"a": True}], ["a", "a"], [0, False], [None, None], [[], {}],
]


def test_enum_const_unique_use_json_equality():
    _agree_adhoc({"enum": [1, "a", None, [1, {"b": False}], {"k": [2]}]}, JSON_VALUES + [
        [1.0, {"b": False}], [1, {"b": 0}], {"k": [2.0]}, {"k": [True]}])
    _agree_adhoc({"const": 1}, JSON_VALUES)
    _agree_adhoc({"const": False}, JSON_VALUES)
    _agree_adhoc({"const": [1, {"a": None}]},
                 JSON_VALUES + [[1.0, {"a": None}], [True, {"a": None}]])
    _agree_adhoc({"uniqueItems": True}, JSON_VALUES)
    _agree_adhoc({"enum": ["a", "b"]}, JSON_VALUES)
    _agree_adhoc({"type": "integer"}, JSON_VALUES + [1e300, float("inf")])
    _agree_adhoc({"type": "number"}, JSON_VALUES)
    _agree_adhoc({"type": ["integer", "null"], "minimum": 1}, JSON_VALUES)
    _agree_adhoc({"maximum": 2**53 - 1},
                 [2**53, 2**53 - 1, float(2**53), 9007199254740991.0, 10**400])
    _agree_adhoc({"exclusiveMinimum": 0, "exclusiveMaximum": 1}, [0, 1, 0.5, 1e-300, True, "x"])
    _agree_adhoc({"minLength": 2, "maxLength": 2}, ["ab", "\U0001F600\U0001F600", "a", "abc", 12])


TREE = _both(
    {
        "$id": "urn:test:tree",
        "$defs": {
            "node": {
                "type": "object",
                "properties": {
                    "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2},
                    "a": {"oneOf": [{"type": "integer"}, {"type": "number", "minimum": 0}]},
                    "b": {"not": {"enum": [None, "a"]}},
                    "x": {"anyOf": [{"type": "string", "pattern": "^[ab]$"}, {"const": 1},
                                    {"$ref": "#/$defs/node"}]},
                },
                "additionalProperties": {"type": ["boolean", "null", "array"], "uniqueItems": True},
                "if": {"required": ["a"]},
                "then": {"minProperties": 2},
                "else": {"not": {"required": ["b", "x"]}},
            }
        },
        "anyOf": [{"$ref": "#/$defs/node"}, {"type": "array", "items": {"$ref": "#"}}],
    }
)


@settings(max_examples=200, **SETTINGS)
@given(st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3)
    | st.sampled_from([1.0, 2.5, -0.0, "a", "b", "", "a\n"]),
    lambda kids: st.lists(kids, max_size=3)
    | st.dictionaries(st.sampled_from(["a", "b", "kids", "x"]), kids, max_size=3),
    max_leaves=12,
))
def test_combinators_and_recursion(inst):
    mine, oracle = TREE
    assert (mine(inst) is None) == oracle.is_valid(inst), (inst, mine(inst))



def test_the_memo_of_accepted_strings_is_sound():
    """Strings a pattern accepted are remembered (bounded); a remembered string must never
    let through a value another schema, or the newline rule, refuses."""
    p = "^x+[0-9]*$"
    schema = {
        "properties": {
            "a": {"type": "string", "pattern": p},
            "b": {"type": "string", "pattern": p, "maxLength": 2},
            "c": {"anyOf": [{"pattern": p}, {"minLength": 9}]},
            "d": {"not": {"pattern": p}},
            "e": {"type": ["string", "null"], "pattern": p, "minLength": 4},
        }
    }
    mine, oracle = _both(schema)
    seq = [{"c": "xxx"}, {"c": "xxx\n"}, {"d": "xxxxx"}, {"d": "xxxxx\n"}, {"a": "xxx"},
           {"b": "xxx"}, {"c": "xxx"}, {"c": "xxx\n"}, {"a": "xxx\n"}, {"b": "xx"}, {"d": "xxx"},
           {"d": "xxx\n"}, {"e": "xxx"}, {"e": "xxxx"}, {"a": "xxxx\n"}, {"e": "xxxx\n"},
           {"b": "xxxx"}, {"a": "x" * 200}, {"b": "x" * 200}, {"a": "x" * 200 + "\n"}]
    seq += [{k: f"x{n}"} for n in range(0, 5000, 3) for k in "abcde"]  # fills the memo
    seq += [{k: "x" * n} for n in range(1, 300, 7) for k in "abcde"] + seq
    for inst in seq:
        assert (mine(inst) is None) == oracle.is_valid(inst), inst


def test_refs_across_documents():
    common = {"$id": "https://example.test/s/common.json",
              "$defs": {"id": {"type": "string", "pattern": "^[a-z]+$"}}}
    root = {"$id": "https://example.test/s/root.json",
            "properties": {"id": {"$ref": "common.json#/$defs/id"}}}
    _agree_adhoc(root, [{"id": "abc"}, {"id": "abc\n"}, {"id": 1}, {}, [], {"id": "A"}], (common,))


def test_unknown_keywords_are_refused():
    for schema in ({"patternProperties": {}}, {"multipleOf": 2}, {"prefixItems": []},
                   {"properties": {"a": {"contains": {}}}}, {"items": [{}]},
                   {"$ref": "#/nowhere"}, {"$ref": "other.json"}, {"pattern": "(?<=a)"},
                   {"$defs": {"unused": {"dependentRequired": {}}}}, {"type": "float"},
                   {"items": {"not": {"unevaluatedProperties": False}}}):
        with pytest.raises(S.SchemaError):
            S._compile_schema(schema)
    # annotations are fine, and format is never asserted ([ENC-16])
    v = S._compile_schema({"format": "date-time", "description": "d", "title": "t", "$comment": "c",
                           "examples": [1], "default": 1, "deprecated": True})
    assert v("not a date") is None


def test_no_schema_uses_an_unsupported_keyword():
    for side in SIDES:
        for doc in SCHEMAS[side].values():
            for _, node in _walk(doc):
                unknown = set(node) - S._KEYWORDS - S._ANNOTATIONS
                assert not unknown, unknown


# ---------------------------------------------------------------------------------------------
# speed (a generous bound: a regression guard, not the benchmark)


def test_fast_enough(corpus):
    path = SPEC / "interop" / "examples" / "aef-inspect" / "input" / "results.ndjson"
    lines = [json.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
    v = S.validator("result")
    n = 2000
    t0 = time.perf_counter()
    for _ in range(n):
        for line in lines:
            v(line)
    per_line = (time.perf_counter() - t0) / (n * len(lines))
    assert per_line < 50e-6, per_line
