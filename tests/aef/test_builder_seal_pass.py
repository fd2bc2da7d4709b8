"""The seal's second pass over the lines (issue 31): what ``verify_run(written=)`` re-checks on the builder's own
results.ndjson is load-bearing. Each test here is a run the builder writes without refusing it (its writer-schema
check and ``_encode`` pass it) that does not verify: the seal must be refused, nothing left behind, and the
verification without ``written`` must find the same problem. A shortcut that trusted the builder's lines (skipping
the strict decode's certificates or the reader schema on the written path) would seal these runs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from aefgate.aef.sealer import NotVerified
from aefgate.aef.verifier import verify_run

from tests.aef.test_builder import END, builder, leaf

SEALED_AT = "2026-10-01T10:31:00Z"

# line members the builder writes as given (ext is free-form) whose bytes are not strict AEF JSON
UNSEALABLE = [
    # an int key and its string twin: msgspec writes both as "1": one member twice in one object ([ENC-2])
    ("member-twice", {"ext": {1: "a", "1": "b"}}, ("results.ndjson:1", "encoding")),
    # the same, one level down in a list
    ("member-twice-nested", {"ext": {"x": [{2: 0, "2": 1}]}}, ("results.ndjson:1", "encoding")),
]


@pytest.mark.parametrize("name, more, problem", UNSEALABLE, ids=[u[0] for u in UNSEALABLE])
def test_the_seal_refuses_what_only_the_strict_reading_finds(tmp_path: Path, name: str, more: dict, problem):
    out = tmp_path / "run"
    with pytest.raises(NotVerified) as ei:
        with builder(out) as b:
            b.add_case("c", leaf("q", **more))
            b.finish(ended_at=END, seal=True, sealed_at=SEALED_AT)
    assert problem in ei.value.problems
    assert not out.exists() and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name, more, problem", UNSEALABLE, ids=[u[0] for u in UNSEALABLE])
def test_the_written_path_agrees_with_a_plain_verification(tmp_path: Path, name: str, more: dict, problem):
    """Unsealed, the same run is written; the verification without ``written`` finds the problem the seal's
    verification (with ``written``) refused it for."""
    out = tmp_path / "run"
    with builder(out) as b:
        b.add_case("c", leaf("q", **more))
        b.finish(ended_at=END)
    v = verify_run(out)
    assert v.outcome == "invalid" and problem in v.problems


def test_a_clean_run_seals_and_verifies_intact(tmp_path: Path):
    out = tmp_path / "run"
    with builder(out) as b:
        b.add_case("c", leaf("q", ext={"x": [1, 2], "y": {"z": "1"}}))
        built = b.finish(ended_at=END, seal=True, sealed_at=SEALED_AT)
    v = verify_run(out)
    assert v.outcome == "intact" and v.run_hash == built.run_hash
