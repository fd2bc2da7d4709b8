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
import os
import shutil
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import SimpleNamespace

import pytest

# assert-ai 0.3.0 is in the test extra: its own rates; a missing install fails, never skips
from assert_ai import results as assert_results

from tests._shared import SAMPLES
from tests.conftest import aefgate

AT = "2026-12-07T00:00:00Z"
PEERS = SAMPLES / "peers-legacy"
CORPUS_RUNS = ("v03/run-a", "v03/run-b", "legacy/run-a", "legacy/run-b")
PEER_RUNS = sorted(
    str(p.relative_to(PEERS)) for p in PEERS.glob("assert-*/results/*/*")
    if p.is_dir() and any((p / f).is_file() for f in ("scores.jsonl", "manifest.json", "inference_set.jsonl"))
)
ROOT = "assert_ai_verdict"
EXT_NAME = "aefgate.assert-ai"  # the line ext the importer writes (ENC-19: prefixed by the producer, aefgate)
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


class _Imports:
    """name -> (source run folder, AEF run folder, the import's result: ``returncode``, ``stdout``, ``stderr``),
    each run imported once per session on first use, under a lock, in a folder every pytest-xdist worker shares
    (the session's temporary root): the imports are ``aefgate`` processes, and a module fixture per worker would make
    every worker import every run again."""

    def __init__(self, base: Path, sources: dict[str, Path]) -> None:
        self.base, self.sources, self.names = base, sources, list(sources)

    def __getitem__(self, name: str) -> tuple[Path, Path, SimpleNamespace]:
        import fcntl

        src, i = self.sources[name], self.names.index(name)
        dst, done = self.base / f"run{i}", self.base / f"run{i}.result.json"
        with open(self.base / f"run{i}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                if not done.is_file():
                    if dst.exists():  # an import cut short (a worker that died): start again
                        shutil.rmtree(dst)
                    extra = ["--accept-changed-suite"] if _suite_changed(src) else []
                    p = aefgate("import", "assert", src, dst, "--at", _seal_at(src), "--content-capture", "on",
                                *extra)
                    tmp = done.with_suffix(".tmp")
                    tmp.write_text(json.dumps({"returncode": p.returncode, "stdout": p.stdout, "stderr": p.stderr}))
                    tmp.replace(done)
                result = SimpleNamespace(**json.loads(done.read_text()))
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
        return src, dst, result


@pytest.fixture(scope="session")
def imported(assert_ai_corpus, tmp_path_factory) -> _Imports:
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    base = root / "assert-real-imports"
    base.mkdir(exist_ok=True)
    sources = {f"corpus:{n}": assert_ai_corpus[n] for n in CORPUS_RUNS}
    sources.update({f"peer:{n}": PEERS / n for n in PEER_RUNS})
    return _Imports(base, sources)


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
    """(lane, kind) -> rate and (lane, dimension) -> (rate, how many judged cases carry it), recomputed from the result lines (interop/assert.md):
    a kind's child is ``failed`` (score 1) or ``passed`` (score 0) when a category of that kind was relevant, any
    other state is out of the rate; a dimension's rate is the mean of the flag (value 0/1) over the judged cases
    that carry it: the scores of a ``passed`` / ``failed`` root, the boolean values of
    ``ext."aefgate.assert-ai".verdictDimensions`` of a ``not_applicable`` root."""
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
        elif line["path"] == ROOT and line["state"] in ("passed", "failed"):
            for s in line.get("scores") or []:
                if "label" not in s:
                    dims.setdefault((lane, s["metric"]), []).append(s["value"])
        elif line["path"] == ROOT and line["state"] == "not_applicable":
            # a judged row where no category is relevant: ASSERT counts its flags, but the root may carry no score
            # (a typed absence, RES-2); the importer keeps the verdict's dimensions in the line's ext
            # (docs/mappings/assert.md, "Dimension rates")
            kept = (line.get("ext") or {}).get(EXT_NAME, {}).get("verdictDimensions")
            assert isinstance(kept, dict), f"{line['caseId']}: not_applicable root without verdictDimensions"
            for metric, value in kept.items():
                if isinstance(value, bool):
                    dims.setdefault((lane, metric), []).append(int(value))
    rate = lambda v: (sum(v) / len(v)) if v else None  # noqa: E731
    return {k: rate(v) for k, v in kinds.items()}, {k: (rate(v), len(v)) for k, v in dims.items()}


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
            rate, count = dims.get((lane, dim), (None, 0))
            assert (rate, count) == (pytest.approx(s["rate"]), s["count"]), (lane, dim, rate, count, s)
            checked += 1
    if summary is not None and (summary["prompt_rows"] or summary["scenario_rows"]):
        assert checked


def _by_case(rows: list[dict]) -> dict[tuple[str, str], dict]:
    return {(r.get("type"), r.get("test_case_id")): r for r in rows}


def _kit_cases(kit: Path) -> dict[tuple[str, str], tuple[str, str]]:
    """The kit's ``(type, test_case_id)`` -> the source's ``(type, test_case_id)``, read from the kit's own
    ``agenteval-cases.json`` (interop/assert.md: ASSERT numbers a kit's cases by position, ``test_case_000001``,
    ...; the case map names the case each position stands for, ``caseId`` = ``<type>:<test_case_id>`` of the
    import)."""
    doc = json.loads((kit / "agenteval-cases.json").read_text(encoding="utf-8"))
    out: dict[tuple[str, str], tuple[str, str]] = {}
    for c in doc["cases"]:
        kind, _, tcid = c["caseId"].partition(":")
        assert (c["type"], c["testCaseId"]) not in out, c
        out[(c["type"], c["testCaseId"])] = (kind, tcid)
    assert len(set(out.values())) == len(out), "two kit cases name one source case"
    return out


def _in_source(kit: Path, rows: list[dict]) -> dict[tuple[str, str], dict]:
    """The kit's rows keyed by the source case they stand for (through the case map); a row the case map does not
    name fails."""
    names = _kit_cases(kit)
    out = {}
    for r in rows:
        key = (r.get("type"), r.get("test_case_id"))
        assert key in names, f"{key}: a kit row the case map does not name"
        assert names[key] not in out, f"{names[key]}: two kit rows for one source case"
        out[names[key]] = r
    return out


def _exportable(name: str) -> bool:
    if name.startswith("corpus:"):
        return True
    run = PEERS / name.split(":", 1)[1]
    return (run / "inference_set.jsonl").is_file()  # no transcripts: nothing for ASSERT's judge (ASSERT-10)


#: a taxonomy for a run whose suite has none (the langfuse-bridge sample: ASSERT's judge needs one, ASSERT-11):
#: another real run's, given with ``--taxonomy``; which one does not matter to the members compared
DEMO_TAXONOMY = PEERS / "assert-8a7dce1c" / "results" / "bank-manager-demo" / "taxonomy.json"
EXPORTABLE = [n for n in ALL if _exportable(n)]
VERDICT_MEMBERS = ("judgment_warnings", "citation_warnings", "error")
SEED_MEMBERS = ("title", "system_prompt")


def test_exportable_runs_cover_every_member() -> None:
    """The export test below sees each member at least once in some source (else it would check nothing)."""
    seen: set[str] = set()
    for name in EXPORTABLE:
        if name.startswith("peer:"):
            run = PEERS / name.split(":", 1)[1]
            for row in _rows(run / "scores.jsonl"):
                seen |= {m for m in VERDICT_MEMBERS if m in (row.get("verdict") or {})}
                seen |= {"inference_row_sha256"} & set(row)
            for row in _rows(run.parent / "test_set.jsonl"):
                seen |= {m for m in SEED_MEMBERS if m in (row.get("seed") or {})}
    # the corpus (made at session time) has judgment_warnings, citation_warnings, error, title, system_prompt
    # (tests/_assert_corpus.py: warn, every judged row, judge_failed, every seed, even prompt seeds)
    assert "inference_row_sha256" in seen, EXPORTABLE
    assert {f"peer:{p}" for p in PEER_RUNS if "langfuse-bridge" in p} <= set(EXPORTABLE)


@pytest.mark.parametrize("name", EXPORTABLE)
def test_export_keeps_verdict_members(imported, name: str, tmp_path: Path) -> None:
    src, dst = _ok(imported, name)
    back = tmp_path / "back"
    extra = [] if (src.parent / "taxonomy.json").is_file() else ["--taxonomy", DEMO_TAXONOMY]
    p = aefgate("export", "assert", dst, back, *extra)
    assert p.returncode == 0, f"export exited {p.returncode}:\n{p.stdout}\n{p.stderr}"
    back_scores = sorted(back.rglob("scores.jsonl"))
    assert len(back_scores) == 1, back_scores
    theirs = _in_source(back, _rows(back_scores[0]))
    source = _by_case(_rows(src / "scores.jsonl"))
    in_kit = {(r.get("type"), r.get("test_case_id")) for r in _rows(back_scores[0].parent / "inference_set.jsonl")}
    exported = {_kit_cases(back)[k] for k in in_kit}
    transcripts = _by_case(_rows(src / "inference_set.jsonl"))
    assert exported == set(transcripts), "every case with a transcript is exported, and only those"
    # every score row of an exported case comes back (docs/mappings/assert.md: the kit writes the kept score row
    # back whole), whatever ASSERT made of it: a row ASSERT did not judge too (scoring_skipped, filter_skipped)
    missing = {key: row.get("judge_status") for key, row in source.items() if key in exported and key not in theirs}
    assert not missing, f"score rows not exported back (case: judge_status): {missing}"
    compared: dict[str, int] = {}  # member -> how many source values were compared
    for key, row in source.items():
        if key not in exported:
            continue
        verdict = row.get("verdict") or {}
        for member in VERDICT_MEMBERS:
            if member in verdict:
                assert (theirs[key].get("verdict") or {}).get(member) == verdict[member], (key, member)
                compared[member] = compared.get(member, 0) + 1
        if "inference_row_sha256" in row:
            assert theirs[key].get("inference_row_sha256") == row["inference_row_sha256"], key
            compared["inference_row_sha256"] = compared.get("inference_row_sha256", 0) + 1
    seeds = _by_case(_rows(src.parent / "test_set.jsonl"))
    back_seeds = _in_source(back, [r for f in back.rglob("test_set.jsonl") for r in _rows(f)])
    for key, row in seeds.items():  # a case never run too: its test-set row travels alone (issue 29)
        for member in SEED_MEMBERS:
            if member in (row.get("seed") or {}):
                assert key in back_seeds, f"{key}: its test-set row was not exported back"
                assert (back_seeds[key].get("seed") or {}).get(member) == row["seed"][member], (key, member)
                compared[member] = compared.get(member, 0) + 1
    assert compared, "the source has none of the members: the test compares nothing"
    if name.startswith("corpus:"):  # tests/_assert_corpus.py gives each of these
        assert set(VERDICT_MEMBERS + SEED_MEMBERS) <= set(compared), compared
    if "langfuse-bridge" in name:
        assert compared.get("inference_row_sha256") == len(source), compared
