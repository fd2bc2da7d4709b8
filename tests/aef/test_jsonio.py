"""The strict reader and the one writer (spec 02)."""

from __future__ import annotations

import io
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aefgate.errors import Refusal
from aefgate.aef import jsonio
from aefgate.aef.jsonio import JsonProblem
from tests._shared import AEF


def code(buf: bytes, **kw) -> str | None:
    try:
        jsonio.loads(buf, **kw)
    except JsonProblem as e:
        return e.code
    return None


@pytest.mark.parametrize(
    "buf,expected",
    [
        (b'{"a":1}', None),
        (b' {"a": 1}\n', None),
        (b'{"a":1,"a":1}', "encoding"),  # [ENC-2]: refused, not first- or last-wins
        (b'{"a":1, "b":{"c":[{"d":1,"d":2}]}}', "encoding"),  # at any depth
        (b'{"a":"\\u0041", "\\u0061":2}', "encoding"),  # one name, spelled two ways
        (b'{"s":"\\ud800"}', "encoding"),  # unpaired surrogate
        (b'{"s":"\\udc00\\ud800"}', "encoding"),
        (b'{"s":"\\ud83d\\ude00"}', None),  # a valid pair
        (b'{"x":NaN}', "encoding"),
        (b'{"x":Infinity}', "encoding"),
        (b'{"x":-Infinity}', "encoding"),
        (b'{"x":1e400}', "encoding"),  # [ENC-3]
        (b'{"x":-1e400}', "encoding"),
        (b'{"x":' + b"2" * 309 + b"}", "encoding"),  # an integer literal beyond binary64 (2.2e308)
        (b'{"x":-' + b"2" * 309 + b"}", "encoding"),
        (b'{"x":' + b"1" * 309 + b"}", None),  # 1.1e308 is finite
        (b'{"x":1e308}', None),
        (b'{"x":9007199254740993}', None),  # exact; whether it fits is the schema's question ([ENC-4])
        (b"\xef\xbb\xbf{}", "encoding"),  # a byte-order mark
        (b'{"s":"\xff"}', "encoding"),  # not UTF-8
        (b'{"s":"\xed\xa0\x80"}', "encoding"),  # a surrogate encoded in UTF-8
        (b'{"s":"a\x01"}', "encoding"),  # a control character in a string
        (b"[1]", "encoding"),  # [ENC-1]: the top-level value is an object
        (b'{"a":1} {"b":2}', "encoding"),  # one value
        (b"", "encoding"),
        (b'{"a":1', "encoding"),
    ],
)
def test_loads(buf, expected):
    assert code(buf) == expected


def test_depth_limit():
    def nested(n):
        return b'{"a":' * (n - 1) + b"{}" + b"}" * (n - 1)

    assert code(nested(64)) is None
    assert code(nested(65)) == "limit"
    assert code(b'{"a":' + b"[" * 63 + b"]" * 63 + b"}") is None
    assert code(b'{"a":' + b"[" * 64 + b"]" * 64 + b"}") == "limit"
    # many brackets inside strings are no depth at all
    assert code(b'{"a":"' + b"[" * 100 + b'"}') is None
    # deeper than Python's recursion limit: msgspec raises RecursionError, which is the same limit, not a crash
    assert code(nested(10_000)) == "limit"
    assert code(b"[" * 100_000 + b"]" * 100_000) == "limit"


def test_size_limit():
    big = b'{"a":"' + b"x" * (4 * 1024 * 1024 - 8) + b'"}'
    assert len(big) == 4 * 1024 * 1024
    assert code(big) is None
    assert code(big[:-2] + b'x"}') == "limit"


def _lines(data: bytes, **kw):
    return list(jsonio.iter_lines(io.BytesIO(data), **kw))


def test_ndjson_framing():
    assert _lines(b"") == []
    assert _lines(b'{"a":1}\n{"b":2}\n') == [(1, b'{"a":1}'), (2, b'{"b":2}')]
    # U+2028 and U+2029 are text, not line breaks ([ENC-6])
    assert _lines('{"a":"x\u2028y\u2029"}\n'.encode()) == [(1, '{"a":"x\u2028y\u2029"}'.encode())]
    for bad in (b'{"a":1}', b'{"a":1}\n{"b":2}', b'{"a":1}\r\n', b'{"a":1}\n\n', b"\n", b'\xef\xbb\xbf{"a":1}\n'):
        with pytest.raises(JsonProblem) as e:
            _lines(bad)
        assert e.value.code == "encoding"


def test_ndjson_long_line_is_never_held_whole():
    data = b"{}\n" + b"x" * (3 * 1024 * 1024) + b"\n{}\n"
    assert _lines(data, max_line=1024 * 1024) == [(1, b"{}"), (2, None), (3, b"{}")]
    with pytest.raises(JsonProblem):  # an over-long last line without its LF is still incomplete
        _lines(b"{}\n" + b"x" * (3 * 1024 * 1024), max_line=1024 * 1024)


def test_ndjson_line_count_limit():
    assert len(_lines(b"{}\n" * 10, max_lines=10)) == 10
    with pytest.raises(JsonProblem) as e:
        _lines(b"{}\n" * 11, max_lines=10)
    assert e.value.code == "limit"


def test_ndjson_chunk_boundaries():
    # lines that straddle the 1 MiB read chunks come out whole
    line = b'{"a":"' + b"y" * 300_000 + b'"}'
    data = (line + b"\n") * 8
    got = _lines(data)
    assert [n for n, _ in got] == list(range(1, 9)) and all(raw == line for _, raw in got)


def test_on_bytes_sees_everything():
    import hashlib

    data = (b'{"k":"' + b"z" * 5000 + b'"}\n') * 500
    h = hashlib.sha256()
    list(jsonio.iter_lines(io.BytesIO(data), on_bytes=h.update))
    assert h.hexdigest() == hashlib.sha256(data).hexdigest()


def test_every_shared_run_document_reads():
    n = 0
    for run_json in AEF.rglob("run.json"):
        run = run_json.parent
        for p in run.rglob("*"):
            if p.name.endswith(".json"):
                jsonio.read_json(p, max_size=jsonio.MAX_SEAL)
                n += 1
            elif p.name.endswith((".ndjson", ".jsonl")):
                for _ in jsonio.iter_ndjson(p):
                    n += 1
    assert n > 100


def test_dumps():
    assert jsonio.dumps({"a": [1, 2.5, "é", None, True]}) == '{"a":[1,2.5,"é",null,true]}'.encode()
    assert jsonio.dump_line({"a": 9007199254740991}) == b'{"a":9007199254740991}\n'
    for bad in (float("nan"), float("inf")):
        with pytest.raises(Refusal) as e:
            jsonio.dumps({"a": [bad]})
        assert e.value.rule == "ENC-3"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=6), json_values, max_size=5))
def test_round_trip_and_agreement_with_the_standard_library(doc):
    out = jsonio.dumps(doc)
    assert jsonio.loads(out) == doc
    # another writer's spelling of the same value (escapes, spaces) reads the same
    assert jsonio.loads(json.dumps(doc, ensure_ascii=True, indent=1).encode()) == doc


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(min_size=1, max_size=4), st.integers(), min_size=1, max_size=5), st.data())
def test_any_duplicate_is_refused(doc, data):
    name = data.draw(st.sampled_from(sorted(doc)))
    text = json.dumps(doc, separators=(",", ":"))
    dup = text[:-1] + "," + json.dumps(name) + ":0}"
    assert code(dup.encode()) == "encoding"
    # nested one level down, too
    assert code(('{"outer":' + dup + "}").encode()) == "encoding"
