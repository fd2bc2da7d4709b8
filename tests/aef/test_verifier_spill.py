"""The verifier's spilled path (state of the rules across lines on disk, docs/design/bounded-memory.md) gives the
same outcome, problems and run hash as the in-memory path.

The bounds are set through the environment to a few bytes and lines, so these small runs take the spilled path:
``AEFGATE_SPILL_RESULTS=0`` (results.ndjson always spilled), ``AEFGATE_SPILL_WINDOW`` (how many recent lines keep
their resultId in memory: 0 resolves every parent and decisive child on disk at the end, 1..3 mixes the two ways)
``AEFGATE_SPILL_SEEN`` (the bytes of the bitmap of resultIds seen: 1 makes almost every id a possible
duplicate, looked up on disk) and ``AEFGATE_SPILL_VALUES`` (the values of a median entry kept in memory).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aefgate.aef.verifier import verify_run
from tests._shared import copy_run
from tests.aef.test_verifier import COMPLETED_EVAL, MUTATIONS, TRIALS_RUN, _apply

WINDOWS = ["0", "1", "3", "4096"]


class _PlainSet(set):
    """The evidence ids as a plain ``set`` (as the verifier kept them before spill.StrSet): the oracle."""

    def add(self, s):
        had = s in self
        super().add(s)
        return had

    def freeze(self):
        pass

    def close(self):
        pass


def _both(monkeypatch, run: Path, window: str, workers: str = "0"):
    """(in memory, spilled) verifications of ``run``; lines are checked and folded in batches of 2 (lines leave
    the window a batch at a time). In memory: the evidence ids in a plain set, the packed blobs in a bytearray.
    Spilled: every evidence id on disk (no bits for E-n, no set in memory), the blobs in a file."""
    from aefgate.aef import spill, verifier

    monkeypatch.setattr(verifier, "_BATCH", 2)
    monkeypatch.setenv("AEFGATE_WORKERS", workers)
    monkeypatch.setenv("AEFGATE_SPILL_RESULTS", str(1 << 40))
    monkeypatch.setenv("AEFGATE_SPILL_VALUES", str(1 << 40))
    monkeypatch.setenv("AEFGATE_SPILL_FILES", str(1 << 40))
    with monkeypatch.context() as m:
        m.setattr(spill, "StrSet", lambda **kw: _PlainSet())
        memory = verify_run(run)
    monkeypatch.setenv("AEFGATE_SPILL_RESULTS", "0")
    monkeypatch.setenv("AEFGATE_SPILL_VALUES", "0")
    monkeypatch.setenv("AEFGATE_SPILL_FILES", "0" if window in ("0", "3") else "2")
    monkeypatch.setenv("AEFGATE_SPILL_IDS", "0")
    monkeypatch.setattr(verifier, "_NUMBERED", None)
    monkeypatch.setenv("AEFGATE_SPILL_WINDOW", window)
    # a bitmap of 8 buckets: almost every resultId is a possible duplicate, looked up on disk
    monkeypatch.setenv("AEFGATE_SPILL_SEEN", "1" if window in ("0", "3") else str(1 << 22))
    spilled = verify_run(run)
    return memory, spilled


def _same(a, b) -> None:
    assert (b.outcome, b.problems, b.run_hash, b.withheld) == (a.outcome, a.problems, a.run_hash, a.withheld)


@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_every_mutation_spilled(tmp_path, monkeypatch, name, window):
    run, expected, changed = _apply(name, tmp_path, sealed=True)
    memory, spilled = _both(monkeypatch, run, window)
    _same(memory, spilled)
    assert spilled.outcome == "invalid"


@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize("base", [COMPLETED_EVAL, TRIALS_RUN], ids=["completed-eval", "trials"])
def test_intact_runs_spilled(tmp_path, monkeypatch, base, window):
    run = copy_run(base, tmp_path / "run")
    memory, spilled = _both(monkeypatch, run, window)
    _same(memory, spilled)
    assert spilled.outcome == "intact"


@pytest.mark.parametrize("name", ["wrong-result-id", "rollup-wrong-n", "cr", "duplicate-member"])
def test_spilled_with_worker_processes(tmp_path, monkeypatch, name):
    from aefgate.aef import verifier

    run, _, _ = _apply(name, tmp_path, sealed=True)
    monkeypatch.setattr(verifier, "_RANGE", 200)
    memory, spilled = _both(monkeypatch, run, "1", workers="2")
    _same(memory, spilled)


# -- line orders the example runs do not have: children before parents, duplicated ids, far parents -------------


def _lines(run: Path) -> list[dict]:
    return [json.loads(x) for x in (run / "results.ndjson").read_bytes().split(b"\n") if x]


def _write(run: Path, lines: list[dict]) -> None:
    (run / "results.ndjson").write_bytes(b"".join(json.dumps(d).encode() + b"\n" for d in lines))


def _reordered(tmp_path: Path, base: Path, how) -> Path:
    run = copy_run(base, tmp_path / "run")
    (run / "seal.json").unlink(missing_ok=True)
    _write(run, how(_lines(run)))
    return run


def _other_case(ls: list[dict]) -> list[dict]:
    """The second line with a parent moved to another case: a parent of another case ([RES-5])."""
    out = [dict(d) for d in ls]
    kids = [d for d in out if d.get("parentResultId")]
    if kids:
        kids[min(1, len(kids) - 1)]["caseId"] = "another-case"
    return out


ORDERS = {
    "reversed": lambda ls: ls[::-1],  # every child before its parent, every decisive child before its composite
    "rotated": lambda ls: ls[len(ls) // 2 :] + ls[: len(ls) // 2],
    "duplicated-parent": lambda ls: ls + [ls[0]],  # a resultId twice: the first line is the parent
    "duplicated-first": lambda ls: [ls[0]] + ls,  # the parent's id on line 1 and line 2
    "all-twice": lambda ls: ls + ls,
    "interleaved-twice": lambda ls: [d for pair in zip(ls, ls) for d in pair],
    "orphans": lambda ls: [d for d in ls if "aggregation" not in d],  # children whose parent is missing
    "missing-child": lambda ls: ls[:1] + ls[2:],  # a composite one child short, a decisive child missing
    "other-case-parent": _other_case,
    "far-parent": lambda ls: ls[:1] + ls[4:] + ls[1:4],  # the first composite's children at the end
}

BIG = {}


def _big_run() -> Path:
    """A run of 120 lines from the benchmark's generator (30 composites of three children, decisive ids, a median
    entry), made once per test process."""
    if "run" not in BIG:
        import sys
        import tempfile

        sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
        from make_runs import make_run

        BIG["run"] = make_run(Path(tempfile.mkdtemp(prefix="aefgate-test-")) / "run", 120)
    return BIG["run"]


BASES = {"completed-eval": lambda: COMPLETED_EVAL, "trials": lambda: TRIALS_RUN, "generated": _big_run}


@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize("order", sorted(ORDERS))
@pytest.mark.parametrize("base", sorted(BASES))
def test_line_orders_spilled(tmp_path, monkeypatch, base, order, window):
    run = _reordered(tmp_path, BASES[base](), ORDERS[order])
    memory, spilled = _both(monkeypatch, run, window)
    _same(memory, spilled)


def test_reordering_gives_problems(tmp_path, monkeypatch):
    """The orders above are not all trivially clean: the in-memory verifier finds rule problems in them (so the
    comparison of the two paths is a comparison of problem lists, not of empty lists)."""
    found = set()
    for order in ORDERS:
        for base in sorted(BASES):
            run = _reordered(tmp_path / order / base, BASES[base](), ORDERS[order])
            memory, _ = _both(monkeypatch, run, "0")
            found |= {code for _, code in memory.problems}
    assert {"result-id", "parent", "aggregation", "trials", "summary"} <= found


def test_gate_names_a_result_spilled(tmp_path, monkeypatch):
    """gates.ndjson names results: looked up on disk on the spilled path ([GATE] rule ``gate``)."""
    run = copy_run(COMPLETED_EVAL, tmp_path / "run")
    (run / "seal.json").unlink()
    gates = run / "gates.ndjson"
    if not gates.exists():
        pytest.skip("the example run has no gates.ndjson")
    lines = [json.loads(x) for x in gates.read_bytes().split(b"\n") if x]
    lines[0].setdefault("decisive", []).append("r_" + "0" * 32)
    gates.write_bytes(b"".join(json.dumps(d).encode() + b"\n" for d in lines))
    memory, spilled = _both(monkeypatch, run, "0")
    _same(memory, spilled)
    assert ("gates.ndjson:1", "gate") in spilled.problems


def test_the_spill_folder_is_removed(tmp_path, monkeypatch):
    import tempfile

    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", None)
    run = copy_run(COMPLETED_EVAL, tmp_path / "run")
    memory, spilled = _both(monkeypatch, run, "1")
    _same(memory, spilled)
    assert list((tmp_path / "tmp").iterdir()) == []


@pytest.mark.parametrize(("order", "on_disk"), [("rotated", False), ("reversed", True), ("all-twice", True),
                                                ("other-case-parent", False)])
def test_which_way_the_parents_are_checked(tmp_path, monkeypatch, order, on_disk):
    """With the default window, the generated run's parents are all found in the window (the rules are applied
    while folding) unless ids repeat or children come before their parents (then they are redone on disk)."""
    from aefgate.aef import verifier

    calls = []
    real = verifier._RunVerifier._parents_on_disk
    monkeypatch.setattr(verifier._RunVerifier, "_parents_on_disk", lambda self, d: (calls.append(d), real(self, d)))
    run = _reordered(tmp_path, _big_run(), ORDERS[order])
    memory, spilled = _both(monkeypatch, run, "4096")
    _same(memory, spilled)
    assert bool(calls) == on_disk
    assert (memory.outcome == "unsealed") == (order in ("rotated", "reversed"))  # reordering alone is allowed


# -- evidence ids: bits, a set, a table on disk -------------------------------------------------------------------


def _evidence_run(tmp_path: Path, how: str) -> Path:
    """The trials example with its evidence ids renamed (``E-`` and up to 64 of ``[A-Za-z0-9._-]``, the schema's
    pattern) or repeated, or a line citing an id no record has."""
    from tests.aef.test_verifier import TRIALS_RUN as base

    run = copy_run(base, tmp_path / "run")
    (run / "seal.json").unlink()
    ev = [json.loads(x) for x in (run / "evidence.ndjson").read_bytes().split(b"\n") if x]
    lines = _lines(run)
    rename = {}
    if how == "other-ids":  # no id of the E-n form: every one in the set (or on disk)
        rename = {e["evidenceId"]: f"E-ev.{i}_{'x' * i}" for i, e in enumerate(ev)}
    elif how == "zero-padded":  # E-01 is not E-1
        rename = {e["evidenceId"]: "E-0" + e["evidenceId"][2:] for e in ev}
    for e in ev:
        e["evidenceId"] = rename.get(e["evidenceId"], e["evidenceId"])
    for d in lines:
        if d.get("evidence"):
            d["evidence"] = [rename.get(x, x) for x in d["evidence"]]
    if how == "twice":
        ev = ev + ev[:2] + [dict(ev[0], evidenceId="E-x"), dict(ev[1], evidenceId="E-x")]
    cited = [d for d in lines if d.get("evidence")]
    if how == "cites-nothing":
        cited[0]["evidence"] = cited[0]["evidence"] + ["E-999999"]
        cited[-1]["evidence"] = ["E-none"]
    if how == "cites-padded":
        cited[0]["evidence"] = ["E-0" + cited[0]["evidence"][0][2:]]
    (run / "evidence.ndjson").write_bytes(b"".join(json.dumps(e).encode() + b"\n" for e in ev))
    _write(run, lines)
    return run


EVIDENCE = ["other-ids", "zero-padded", "twice", "cites-nothing", "cites-padded"]


@pytest.mark.parametrize("workers", ["0", "2"])
@pytest.mark.parametrize("how", EVIDENCE)
def test_evidence_ids_spilled(tmp_path, monkeypatch, how, workers):
    from aefgate.aef import verifier

    run = _evidence_run(tmp_path, how)
    monkeypatch.setattr(verifier, "_RANGE", 200)
    memory, spilled = _both(monkeypatch, run, "1", workers=workers)
    _same(memory, spilled)
    codes = {c for _, c in memory.problems}
    if how in ("other-ids", "zero-padded"):
        assert memory.outcome == "unsealed" and not memory.problems
    elif how == "twice":
        assert "evidence-id" in codes
    else:
        assert "evidence" in codes


# -- the packed rows of the spilled path: flush boundaries, the end's lookups in passes or on disk -----------------


@pytest.mark.parametrize(("chunk", "passes"), [(1, 1 << 30), (5, 1 << 30), (1 << 15, 8), (1, 0)],
                         ids=["a-key-a-pass", "five-keys-a-pass", "one-pass", "joined-on-disk"])
@pytest.mark.parametrize("window", ["0", "3", "4096"])
@pytest.mark.parametrize("order", ["all-twice", "duplicated-first", "far-parent", "orphans", "reversed", "rotated"])
@pytest.mark.parametrize("base", ["generated", "trials"])
def test_packed_rows_spilled(tmp_path, monkeypatch, base, order, window, chunk, passes):
    """Rows packed 3 lines or more at a time (lines, parents, children and duplicated ids far apart fall in
    different packed rows); the keys the end looks up found a few at a time (several passes over the packed keys)
    or, beyond the passes allowed, by putting every line on disk and joining: the problems of the in-memory path."""
    from aefgate.aef import verifier

    monkeypatch.setattr(verifier, "_PACK", 3)
    monkeypatch.setattr(verifier, "_NEED_CHUNK", chunk)
    monkeypatch.setattr(verifier, "_NEED_PASSES", passes)
    run = _reordered(tmp_path, BASES[base](), ORDERS[order])
    memory, spilled = _both(monkeypatch, run, window)
    _same(memory, spilled)


@pytest.mark.parametrize("order", ["all-twice", "far-parent", "rotated"])
def test_packed_rows_with_worker_processes(tmp_path, monkeypatch, order):
    from aefgate.aef import verifier

    monkeypatch.setattr(verifier, "_PACK", 5)
    monkeypatch.setattr(verifier, "_NEED_CHUNK", 2)
    monkeypatch.setattr(verifier, "_RANGE", 300)
    run = _reordered(tmp_path, _big_run(), ORDERS[order])
    memory, spilled = _both(monkeypatch, run, "3", workers="2")
    _same(memory, spilled)
