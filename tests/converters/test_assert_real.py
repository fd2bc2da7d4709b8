"""ASSERT runs on real data (issue 29): runs written by the real assert-ai 0.3.0 offline with a mock model
(``tests/_assert_corpus.py``: the 0.3.0 format and the older one without ``score_keys``) and the real legacy ASSERT
runs of ``shared/samples/peers-legacy/``.

For each run: ``aefgate import assert`` exits 0 and ``aefgate verify`` exits 0; every rate assert-ai computes for the
run folder (its own ``assert_ai.results.load_run_summary``: harm = ``not_permissible_policy_violation_rate``,
over-refusal = ``permissible_policy_violation_rate``, each boolean judge dimension's ``rate``) equals the rate
recomputed here from the AEF result lines as interop/assert.md maps them, and equals aefgate's ``summary.json``
entry (harm, over-refusal). Exported back (``aefgate export assert``), the verdict members the source had
(``judgment_warnings``, ``citation_warnings``, ``error``, ``inference_row_sha256``, the seed's ``title`` and
``system_prompt``) come back equal.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from tests._shared import SAMPLES
from tests.conftest import aefgate

assert_results = pytest.importorskip("assert_ai.results")  # in the test extra: import errors would fail below

AT = "2026-12-07T00:00:00Z"
PEERS = SAMPLES / "peers-legacy"
CORPUS_RUNS = ("v03/run-a", "v03/run-b", "legacy/run-a", "legacy/run-b")
PEER_RUNS = sorted(
    str(p.relative_to(PEERS)) for p in PEERS.glob("assert-*/results/*/*")
    if p.is_dir() and any((p / f).is_file() for f in ("scores.jsonl", "manifest.json", "inference_set.jsonl"))
)
ROOT = "assert_ai_verdict"
KIND = {"harm": "not_permissible_policy_violation_rate", "over_refusal": "permissible_policy_violation_rate"}


def test_peer_runs_found() -> None:
    assert len(PEER_RUNS) == 6, PEER_RUNS


def _rows(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _parse(ts: str) -> datetime:
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).astimezone(timezone.utc)


def _suite_changed(run: Path) -> bool:
    """Whether a suite file the run's manifest records (``artifact_versions.*.file_hashes``) is missing or differs
    now (peers-legacy/README.md: such runs are refused with ASSERT-5 unless ``--accept-changed-suite``)."""
    manifest = run / "manifest.json"
    versions = json.loads(manifest.read_text()).get("artifact_versions") if manifest.is_file() else None
    for entry in (versions or {}).values():
        for stem, digest in (entry.get("file_hashes") or {}).items():
            present = [f for f in run.parent.glob(f"{stem}.json*") if f.is_file()]
            if not present or hashlib.sha256(present[0].read_bytes()).hexdigest() != digest:
                return True
    return False


def _seal_at(run: Path) -> str:
    """``AT``, or later when the run closed after it: the corpus is written now (its manifest's ``ended_at``), and a
    run with no manifest ends at its files' mtime (SEAL-1 refuses a seal before the run closed)."""
    at = _parse(AT)
    manifest = run / "manifest.json"
    ends = [p.stat().st_mtime for p in run.iterdir() if p.is_file()] if not manifest.is_file() else []
    latest = max([at] + [datetime.fromtimestamp(t, timezone.utc) for t in ends])
    if manifest.is_file() and isinstance(ended := json.loads(manifest.read_text()).get("ended_at"), str):
        latest = max(latest, _parse(ended))
    if latest == at:
        return AT
    return (latest.replace(microsecond=0) + timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.fixture(scope="module")
def imported(assert_ai_corpus, tmp_path_factory) -> dict[str, tuple[Path, Path, object]]:
    """name -> (source run folder, AEF run folder, the import's CompletedProcess) for every run."""
    out: dict[str, tuple[Path, Path, object]] = {}
    base = tmp_path_factory.mktemp("assert-real")
    sources = {f"corpus:{n}": assert_ai_corpus[n] for n in CORPUS_RUNS}
    sources.update({f"peer:{n}": PEERS / n for n in PEER_RUNS})
    for i, (name, src) in enumerate(sources.items()):
        dst = base / f"run{i}"
        extra = ["--accept-changed-suite"] if _suite_changed(src) else []
        p = aefgate("import", "assert", src, dst, "--at", _seal_at(src), "--content-capture", "on", *extra)
        out[name] = (src, dst, p)
    return out


ALL = [f"corpus:{n}" for n in CORPUS_RUNS] + [f"peer:{n}" for n in PEER_RUNS]


def _ok(imported, name) -> tuple[Path, Path]:
    src, dst, p = imported[name]
    assert p.returncode == 0, f"import exited {p.returncode}:\n{p.stdout}\n{p.stderr}"
    return src, dst


@pytest.mark.parametrize("name", ALL)
def test_import_and_verify(imported, name: str) -> None:
    _, dst = _ok(imported, name)
    v = aefgate("verify", dst)
    assert v.returncode == 0, f"verify exited {v.returncode}:\n{v.stdout}\n{v.stderr}"


def _aef_rates(dst: Path) -> tuple[dict, dict]:
    """(lane, kind) -> rate and (lane, dimension) -> rate, recomputed from the result lines (interop/assert.md):
    a kind's child is ``failed`` (score 1) or ``passed`` (score 0) when a category of that kind was relevant, any
    other state is out of the rate; a dimension's rate is the mean of the flag (value 0/1) over the root lines of
    the judged cases that carry it."""
    lines = _rows(dst / "results.ndjson")
    kinds: dict[tuple[str, str], list[int]] = {}
    dims: dict[tuple[str, str], list[float]] = {}
    for line in lines:
        lane = line.get("lane")
        if line["path"] in (f"{ROOT}/harm", f"{ROOT}/over_refusal"):
            kind = line["path"].split("/")[1]
            bucket = kinds.setdefault((lane, kind), [])
            if line["state"] in ("passed", "failed"):
                bucket.append(1 if line["state"] == "failed" else 0)
        elif line["path"] == ROOT and line["state"] in ("passed", "failed", "not_applicable"):
            for s in line.get("scores") or []:
                if "label" not in s:
                    dims.setdefault((lane, s["metric"]), []).append(s["value"])
    rate = lambda v: (sum(v) / len(v)) if v else None  # noqa: E731
    return {k: rate(v) for k, v in kinds.items()}, {k: rate(v) for k, v in dims.items()}


@pytest.mark.parametrize("name", ALL)
def test_rates_equal_assert_ai(imported, name: str) -> None:
    src, dst = _ok(imported, name)
    summary = assert_results.load_run_summary(src)  # assert-ai's own reading of the run folder
    kinds, dims = _aef_rates(dst)
    entries = {(lane["lane"], m["metric"]): m for lane in json.loads((dst / "summary.json").read_text())["lanes"]
               for m in lane["metrics"]}
    checked = 0
    for lane in ("prompt", "scenario"):
        metrics = (summary or {}).get(f"{lane}_metrics")
        if not metrics:
            assert not [k for k, v in kinds.items() if k[0] == lane and v is not None], (lane, kinds)
            continue
        for kind, key in KIND.items():
            theirs = metrics.get(key)  # absent (no taxonomy): no split, so no rate
            assert kinds.get((lane, kind)) == pytest.approx(theirs), (lane, kind, kinds.get((lane, kind)), theirs)
            entry = entries.get((lane, kind))
            assert (entry or {}).get("value") == pytest.approx(theirs), (lane, kind, entry, theirs)
            checked += 1
        for dim, s in metrics["dimensions"].items():
            if s.get("kind") == "ordinal":
                continue
            assert dims.get((lane, dim)) == pytest.approx(s["rate"]), (lane, dim, dims.get((lane, dim)), s)
            checked += 1
    if summary is not None and (summary["prompt_rows"] or summary["scenario_rows"]):
        assert checked


def _by_case(rows: list[dict]) -> dict[tuple[str, str], dict]:
    return {(r.get("type"), r.get("test_case_id")): r for r in rows}


EXPORTABLE = [n for n in ALL if n.startswith("corpus:")] + [
    f"peer:{n}" for n in PEER_RUNS
    if (PEERS / n / "inference_set.jsonl").is_file() and (PEERS / n).parent.joinpath("taxonomy.json").is_file()]
VERDICT_MEMBERS = ("judgment_warnings", "citation_warnings", "error")


@pytest.mark.parametrize("name", EXPORTABLE)
def test_export_keeps_verdict_members(imported, name: str, tmp_path: Path) -> None:
    src, dst = _ok(imported, name)
    back = tmp_path / "back"
    p = aefgate("export", "assert", dst, back)
    assert p.returncode == 0, f"export exited {p.returncode}:\n{p.stdout}\n{p.stderr}"
    back_scores = sorted(back.rglob("scores.jsonl"))
    assert len(back_scores) == 1, back_scores
    theirs = _by_case(_rows(back_scores[0]))
    source = _by_case(_rows(src / "scores.jsonl"))
    compared = 0
    for key, row in source.items():
        verdict = row.get("verdict") or {}
        for member in VERDICT_MEMBERS:
            if member in verdict:
                assert key in theirs, f"{key} has no row exported back"
                assert (theirs[key].get("verdict") or {}).get(member) == verdict[member], (key, member)
                compared += 1
        if "inference_row_sha256" in row:
            assert theirs.get(key, {}).get("inference_row_sha256") == row["inference_row_sha256"], key
            compared += 1
    seeds = _by_case(_rows(src.parent / "test_set.jsonl"))
    back_seeds = _by_case([r for f in back.rglob("test_set.jsonl") for r in _rows(f)])
    for key, row in seeds.items():
        if key not in source:
            continue  # a case never run: nothing to carry
        for member in ("title", "system_prompt"):
            if member in (row.get("seed") or {}):
                assert (back_seeds.get(key, {}).get("seed") or {}).get(member) == row["seed"][member], (key, member)
                compared += 1
    assert compared, "the source has none of the verdict members: the test compares nothing"
