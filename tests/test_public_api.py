"""The public Python API: only the names ``import aefgate`` gives (no private module is imported here)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import aefgate
from tests._shared import EXAMPLES, SAMPLES

AT = "2026-12-01T00:00:00Z"


def test_public_names():
    assert set(aefgate.__all__) >= {"verify", "seal", "convert", "fidelity", "list_formats", "Refusal", "Verification",
                                    "FidelityReport"}
    with pytest.raises(AttributeError):
        aefgate.not_a_name  # noqa: B018


def test_convert_verify_seal_fidelity_formats(tmp_path: Path):
    run = aefgate.convert(SAMPLES / "inspect" / "basic.eval", tmp_path / "run", source="inspect", target="aef",
                          options={"at": AT})
    v = aefgate.verify(run)
    assert isinstance(v, aefgate.Verification) and v.outcome == "intact" and v.run_hash
    report = aefgate.fidelity("inspect", run)
    assert isinstance(report, aefgate.FidelityReport) and report.ok, report.summary()
    assert aefgate.fidelity("inspect", from_source=SAMPLES / "inspect" / "basic.json").ok
    names = [f["format"] for f in aefgate.list_formats()]
    assert names[0] == "aef" and {"inspect", "aep", "cloudevents"} <= set(names)
    (inspect,) = aefgate.list_formats("inspect")
    assert inspect["import"]["losses"] and inspect["export"]["losses"]
    # seal: an unsealed copy of a sealed run, sealed again, gives the run hash the verifier computes
    copy = tmp_path / "copy"
    shutil.copytree(EXAMPLES / "aef-inspect" / "run", copy)
    for p in [copy, *copy.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)
    (copy / "seal.json").unlink()
    assert aefgate.verify(copy).outcome == "unsealed"
    run_hash = aefgate.seal(copy, sealed_by="producer", at=AT)
    assert aefgate.verify(copy).run_hash == run_hash and aefgate.verify(copy).outcome == "intact"


def test_refusals_are_the_public_type(tmp_path: Path):
    with pytest.raises(aefgate.Refusal) as e:
        aefgate.convert(SAMPLES / "inspect" / "basic.eval", tmp_path / "x", source="inspect", target="nosuch")
    assert e.value.rule == "CONV-1"
    with pytest.raises(aefgate.Refusal) as e:
        aefgate.fidelity("inspect")
    assert e.value.rule == "CLI-2"
