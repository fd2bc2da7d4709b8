"""spill.StrSet (the verifier's evidence ids): answers exactly as a ``set`` would, whichever way a string is kept
(a bit for a numbered id, the set in memory, the table on disk behind the Bloom filter), in this process and in
a forked one."""

from __future__ import annotations

import multiprocessing
import random

import pytest

from aefgate.aef.spill import StrSet

EDGES = [
    "E-1", "E-2", "E-10", "E-0", "E-01", "E-", "E", "e-1", "E-1 ", " E-1", "E--1", "E-+1", "E-1.0", "E-1e3",
    "E-\u0661", "E-\uff11", "E-16777215", "E-16777216", "E-999999999999", "E-9999999999999", "E-" + "9" * 40,
    "", "ev-1", "\u00e9", "\U0001f600", "a\u0000b", "x" * 500, "E-\ud800",
]


def _strings(seed: int, n: int) -> list[str]:
    rnd = random.Random(seed)
    out = list(EDGES)
    for _ in range(n):
        k = rnd.random()
        if k < 0.4:
            out.append(f"E-{rnd.randrange(1, 5000)}")
        elif k < 0.5:  # zero-padded, or beyond the bits
            out.append(f"E-0{rnd.randrange(0, 50)}" if rnd.random() < 0.5 else f"E-{rnd.randrange(1 << 30)}")
        else:
            out.append(f"ev-{rnd.randrange(3000)}-{rnd.choice(['a', 'b', chr(0x100 + rnd.randrange(300))])}")
    return out


KINDS = [
    pytest.param({"numbered": "E-", "hot": 4096}, id="bits-and-memory"),
    pytest.param({"numbered": "E-", "hot": 0}, id="bits-and-disk"),
    pytest.param({"numbered": None, "hot": 3}, id="memory-then-disk"),
    pytest.param({"numbered": None, "hot": 1, "bloom_bytes": 1}, id="disk-every-bloom-bit-set"),
    pytest.param({"numbered": "E-", "hot": 5, "max_number": 8}, id="few-numbers-as-bits"),
]


@pytest.mark.parametrize("kw", KINDS)
def test_strset_is_a_set(kw):
    added = _strings(1, 3000)
    probes = _strings(2, 3000)
    ref: set[str] = set()
    s = StrSet(**kw)
    try:
        for x in added:
            assert s.add(x) == (x in ref), x
            ref.add(x)
        s.freeze()
        for x in added + probes:
            assert (x in s) == (x in ref), x
    finally:
        s.close()


def _probe(s: StrSet, xs: list[str], q) -> None:
    q.put([x in s for x in xs])


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="fork only")
@pytest.mark.parametrize("kw", KINDS)
def test_strset_read_in_a_forked_process(kw):
    added = _strings(3, 2000)
    probes = _strings(4, 2000)
    s = StrSet(**kw)
    try:
        for x in added:
            s.add(x)
        s.freeze()
        ctx = multiprocessing.get_context("fork")
        q = ctx.Queue()
        p = ctx.Process(target=_probe, args=(s, added + probes, q))
        p.start()
        got = q.get(timeout=60)
        p.join(60)
        ref = set(added)
        assert got == [x in ref for x in added + probes]
        # and the parent still reads its own connection
        assert [x in s for x in probes] == [x in ref for x in probes]
    finally:
        s.close()


def test_strset_memory_does_not_grow_with_numbered_ids():
    s = StrSet(numbered="E-", hot=0)
    for i in range(1, 100_001):
        assert not s.add(f"E-{i}")
    assert s._db is None and len(s._bits) <= 1 << 15  # 100,000 ids: bits, no table
    assert "E-100000" in s and "E-100001" not in s and s.add("E-5")
    s.close()
