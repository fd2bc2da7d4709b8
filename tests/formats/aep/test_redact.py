"""The AEP-0003 §9.4 redaction pipeline against the conformance redaction corpus."""

from __future__ import annotations

import pytest

from aefgate.aef.jsonio import dumps
from aefgate.formats.aep import PII, SECRET, Redactor, redact, redact_value

from ._aep import FIXTURES, ids

CORPUS = FIXTURES / "redaction" / "cases.json"
DOC = __import__("json").loads(CORPUS.read_text(encoding="utf-8"))
TEXT = DOC["text_cases"]
VALUE = DOC["value_cases"]


def _redactor(case: dict) -> Redactor:
    o = case.get("opts", {})
    return Redactor(o.get("secretValues", ()), o.get("home"), o.get("pii", True))


@pytest.mark.parametrize("case", TEXT, ids=ids(TEXT))
def test_text_cases(case):
    out = _redactor(case).text(case["input"])
    for s in case.get("must_not_contain", []):
        assert s not in out, out
    for s in case.get("must_contain", []):
        assert s in out, out
    assert _redactor(case).text(out) == out  # idempotent: a second pass changes nothing


@pytest.mark.parametrize("case", VALUE, ids=ids(VALUE))
def test_value_cases(case):
    before = dumps(case["input"])
    out = dumps(_redactor(case).value(case["input"])).decode()
    assert dumps(case["input"]) == before  # the input is not modified
    for s in case.get("must_not_contain", []):
        assert s not in out, out
    for s in case.get("must_contain", []):
        assert s in out, out


def test_module_functions_and_order():
    assert redact("run with AKIAIOSFODNN7EXAMPLE please", home="/home/op") == f"run with {SECRET} please"
    assert redact("mail a@b.io", pii=False) == "mail a@b.io"
    assert redact("mail a@b.io", home="/home/op") == f"mail {PII}"
    assert redact("deploy k3y-VALUE-1 now", secret_values=["k3y-VALUE-1"]) == f"deploy {SECRET} now"
    assert redact_value({"Api-Key": 5, "n": None, "token": None}, home="/home/op") == {
        "Api-Key": SECRET, "n": None, "token": None}
    # the operator's home only at a path-component boundary
    r = Redactor(home="/home/op")
    assert r.text("/home/op/x and /home/opera/y") == "~/x and ~/y"
    assert r.text("/srv/home/op/x") == "/srv/home/op/x"
    # quoted credentials keep their quotes
    assert r.text('{"token": "tok_9f8e7d6c5b4a"}') == '{"token": "[REDACTED:secret]"}'
