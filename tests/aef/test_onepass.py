"""The one pass (aefgate.aef.onepass): a verification that also maps every line gives the same verdict as
the verification alone, hands the mapper exactly the lines it checked, and keeps a mapper's refusal for after the
verdict; a range read differently by a worker and by the hashing thread is caught."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from aefgate.converters.checks import CollectLines
from aefgate.errors import Refusal
from aefgate.aef import jsonio, verifier
from aefgate.aef.onepass import LineMapper, MappingError
from aefgate.aef.verifier import verify_run
from tests.conftest import shared_root

EXAMPLES = shared_root() / "spec" / "aef" / "interop" / "examples"
RUNS = [EXAMPLES / "aef-inspect" / "run", EXAMPLES / "inspect-aef-edges" / "run", EXAMPLES / "otel-aef" / "run",
        shared_root() / "spec" / "aef" / "conformance" / "valid" / "completed-eval" / "run"]


def _copy(src: Path, tmp: Path) -> Path:
    dst = tmp / "run"
    shutil.copytree(src, dst)
    return dst


@pytest.mark.parametrize("src", RUNS, ids=lambda p: "/".join(p.parts[-2:]))
def test_same_verdict_and_exactly_the_lines_checked(src: Path) -> None:
    plain = verifier.verify_run(src)
    m = CollectLines("TEST-1")
    v = verify_run(src, mapper=m)
    assert (v.outcome, v.problems, v.run_hash) == (plain.outcome, plain.problems, plain.run_hash)
    assert v.outcome in ("intact", "unsealed")
    expected = list(jsonio.iter_ndjson(src / "results.ndjson"))
    assert m.lines == expected and m.run == jsonio.read_json(src / "run.json")


@pytest.mark.parametrize("workers", ["0", "2"])
def test_lines_that_do_not_read_are_never_mapped(tmp_path: Path, monkeypatch, workers: str) -> None:
    run = _copy(RUNS[0], tmp_path)
    p = run / "results.ndjson"
    lines = p.read_bytes().split(b"\n")
    lines[1] = b'{"schemaVersion": 7}'  # valid JSON, not a result line
    p.write_bytes(b"\n".join(lines))
    monkeypatch.setenv("AEFGATE_WORKERS", workers)
    monkeypatch.setattr(verifier, "_PARALLEL_FROM", 0)
    monkeypatch.setattr(verifier, "_RANGE", 1)
    m = CollectLines("TEST-1")
    v = verify_run(run, mapper=m)
    assert v.outcome == "invalid" and ("results.ndjson:2", "schema") in v.problems
    assert [n for n, _ in m.lines] == [n for n in range(1, len(lines)) if n != 2]


class _Refusing(LineMapper):
    def __init__(self, exc: Exception) -> None:
        super().__init__()
        self.exc, self.got = exc, []

    def map(self, lines, base):
        if any(n == 3 for n, _ in lines):
            raise self.exc
        return [n for n, _ in lines]

    def put(self, payload) -> None:
        self.got.extend(payload)


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_mappers_refusal_is_kept_for_after_the_verdict(monkeypatch, workers: str) -> None:
    monkeypatch.setenv("AEFGATE_WORKERS", workers)
    monkeypatch.setattr(verifier, "_PARALLEL_FROM", 0)
    monkeypatch.setattr(verifier, "_RANGE", 1)  # one line a range
    m = _Refusing(Refusal("TEST-9", "line 3 cannot be converted", "results.ndjson:3"))
    v = verify_run(RUNS[0], mapper=m)
    assert v.outcome == "intact"  # the verdict is the run's
    assert isinstance(m.failure, Refusal) and (m.failure.rule, m.failure.where) == ("TEST-9", "results.ndjson:3")
    assert m.got == [1, 2]  # what came before it, in order; nothing after


def test_an_unexpected_mapper_error_is_not_swallowed(monkeypatch) -> None:
    m = _Refusing(KeyError("boom"))
    verify_run(RUNS[0], mapper=m)
    assert isinstance(m.failure, MappingError) and "KeyError" in str(m.failure)


_REAL_CHECK_RANGE = verifier._check_range


def _other_bytes(path, item):
    """verifier._check_range, except that the range starting at line 2 reports another digest of its bytes."""
    out = _REAL_CHECK_RANGE(path, item)
    if item[1][0] == 2:
        out = out[:-1] + (b"\0" * 32,)  # the digest comes last
    return out


def test_a_range_read_differently_is_a_framing_problem_and_a_refusal(tmp_path: Path, monkeypatch) -> None:
    """The worker's digest of its range differs from the hashing thread's (the file changed between the two
    reads): results.ndjson is reported once, at the file, and the mapper is refused: nothing it made is used."""
    monkeypatch.setenv("AEFGATE_WORKERS", "2")
    monkeypatch.setattr(verifier, "_PARALLEL_FROM", 0)
    monkeypatch.setattr(verifier, "_RANGE", 1)
    monkeypatch.setattr(verifier, "_check_range", _other_bytes)
    m = CollectLines("TEST-1")
    v = verify_run(RUNS[0], mapper=m)
    assert v.outcome == "invalid" and ("results.ndjson", "encoding") in v.problems
    assert isinstance(m.failure, Refusal) and m.failure.rule == "TEST-1" and m.failure.exit_code == 1
    assert [n for n, _ in m.lines] == [1]  # the range before it; nothing from the range read twice, or after
