"""An ASSERT suite and run folder as assert-ai 0.3 lays them out (``<artifacts_root>/results/<suite>/<run>/``).

:func:`open_run` finds the run (``RESULTS_DIR/SUITE/RUN``, or a results root with the suite and run names) and reads
the small files whole: ``manifest.json``, ``config.yaml`` (PyYAML), ``taxonomy.json``, and a judge kit's case map
(``agenteval-cases.json`` beside ``results/``). The large files (``test_set.jsonl``, ``inference_set.jsonl``,
``scores.jsonl``) are only located here; a converter streams them with :func:`.files.iter_jsonl`.

Which taxonomy and test set: the run's ``manifest.json`` names, under ``artifact_versions``, the versioned copies it
used (``artifacts/systematize/v0001/taxonomy.json``, ``artifacts/test_set/v0001/test_set.jsonl``, relative to the
suite folder) with their SHA-256 (``file_hashes``). The reader takes that copy when it is there, else the suite's
``taxonomy.json`` / ``test_set.jsonl``; a file whose bytes are not the ones the manifest recorded, or that is absent
though the manifest records its hash, is refused (ASSERT-5): the run was judged against another taxonomy, or
generated from another test set, and its rates would be misread. With ``accept_changed_suite`` (aefgate's option, as
ASSERT itself reads such a run against the present files) the present file is read instead, absent or changed alike,
and each difference is listed in :attr:`AssertRun.changed` for the converter to record.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from aefgate.errors import Refusal
from aefgate.formats.assert_ai.files import read_object, read_yaml, sha256_file
from aefgate.formats.assert_ai.model import CASE_TYPES, Taxonomy, case_id_problem
from aefgate.fsutil import MISSING, input_file_problem

__all__ = ["CASE_MAP", "AssertRun", "CaseMap", "open_run", "read_case_map", "ASSERT_ID"]

CASE_MAP = "agenteval-cases.json"
#: a suite or run name ASSERT takes (letters, digits, ``.``, ``_``, ``-``, starting with a letter or digit)
ASSERT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\Z")
RUN_FILES = ("inference_set.jsonl", "scores.jsonl", "manifest.json")


@dataclass
class CaseMap:
    """A judge kit's ``agenteval-cases.json``: ASSERT case -> the case id it was exported from."""

    path: Path
    label_set: str | None
    inference_sha256: str | None
    cases: dict[tuple[str, str], str]


@dataclass
class AssertRun:
    """One ASSERT run and its suite: where its files are, and what its small files hold."""

    run_dir: Path
    suite_dir: Path
    suite: str
    run: str
    manifest: dict | None = None
    manifest_bytes: bytes | None = None
    config: dict | None = None
    config_bytes: bytes | None = None
    taxonomy: Taxonomy | None = None
    taxonomy_path: Path | None = None
    taxonomy_bytes: bytes | None = None
    test_set: Path | None = None
    inference_set: Path | None = None
    scores: Path | None = None
    case_map: CaseMap | None = None
    notes: list[str] = field(default_factory=list)
    #: the suite files that changed since the run (``accept_changed_suite``): ``file`` (the name), ``stage``
    #: (``artifact_versions.<stage>``), ``recorded`` (the manifest's sha256), ``present`` (the file read's, or None
    #: when it is absent), ``path`` (the file read, or None)
    changed: list[dict] = field(default_factory=list)

    def file(self, name: str, level: str = "run") -> Path | None:
        return _present((self.run_dir if level == "run" else self.suite_dir) / name)

    @property
    def judge_only(self) -> bool:
        """A run that needs (or had) only ASSERT's judge stage: a judge kit's (its case map is beside
        ``results/``), or one whose manifest lists stages without ``inference``."""
        if self.case_map is not None:
            return True
        stages = (self.manifest or {}).get("stages")
        return isinstance(stages, dict) and bool(stages) and "inference" not in stages


def _present(p: Path) -> Path | None:
    """``p`` when it is a regular file, None when nothing is there; ASSERT-2 for anything else (a pipe, a device, a
    folder, a link that loops or leads nowhere): a file that is there but cannot be read is never taken as absent."""
    problem = input_file_problem(p)
    if problem is None:
        return p
    if problem == MISSING:
        return None
    raise Refusal("ASSERT-2", problem, str(p))


def _artifact(suite_dir: Path, manifest: dict | None, stage: str, key: str) -> tuple[Path | None, str | None]:
    """The versioned file the manifest names for ``stage`` (``artifact_versions.<stage>``) and its recorded hash."""
    versions = (manifest or {}).get("artifact_versions")
    entry = versions.get(stage) if isinstance(versions, dict) else None
    if not isinstance(entry, dict):
        return None, None
    hashes = entry.get("file_hashes")
    recorded = hashes.get(key) if isinstance(hashes, dict) and isinstance(hashes.get(key), str) else None
    path = None
    rel = entry.get("path")
    folder = entry.get("artifact_dir")
    name = {"taxonomy": "taxonomy.json", "test_set": "test_set.jsonl"}[key]
    if isinstance(rel, str) and rel.endswith(name):
        path = rel
    elif isinstance(folder, str):
        path = f"{folder}/{name}"
    if path is not None and not Path(path).is_absolute() and ".." not in Path(path).parts:
        p = _present(suite_dir / path)
        if p is not None:
            return p, recorded
    return None, recorded


def _pick(suite_dir: Path, manifest: dict | None, stage: str, key: str, name: str, accept: bool,
          changed: list[dict]) -> Path | None:
    versioned, recorded = _artifact(suite_dir, manifest, stage, key)
    chosen = versioned or _present(suite_dir / name)
    if recorded is None:
        return chosen
    present = sha256_file(chosen) if chosen is not None else None
    if present == recorded.lower():
        return chosen
    if not accept:
        what = (f"the {name} read is not the one the run used" if chosen is not None else
                f"the suite has no {name}, though the run used one")
        raise Refusal("ASSERT-5", f"{what}: ASSERT's manifest.json records sha256 {recorded} for it "
                                  f"(artifact_versions.{stage}). ASSERT itself reads the run against the present "
                                  "suite files: give option 'accept_changed_suite' to import it so, with the recorded "
                                  "and present hashes noted", str(chosen or suite_dir / name))
    changed.append({"file": name, "stage": stage, "recorded": recorded.lower(), "present": present,
                    "path": str(chosen) if chosen is not None else None})
    return chosen


def read_case_map(path: Path) -> CaseMap:
    """A judge kit's case map (ASSERT-13 when it is not one)."""
    doc, _ = read_object(path)
    cases = doc.get("cases")
    if not isinstance(cases, list):
        raise Refusal("ASSERT-13", "a case map holds a list of cases", str(path))
    out: dict[tuple[str, str], str] = {}
    seen: set[str] = set()
    for i, c in enumerate(cases):
        where = f"{path}/cases/{i}"
        if not isinstance(c, dict):
            raise Refusal("ASSERT-13", "a case of the map is an object", where)
        case_id, kind, tcid = c.get("caseId"), c.get("type", "prompt"), c.get("testCaseId")
        if not isinstance(case_id, str) or case_id_problem(case_id) is not None:
            raise Refusal("ASSERT-13", f"caseId {case_id!r} is not a case id (1-256 characters, no control "
                                       "character)", where)
        if kind not in CASE_TYPES or not isinstance(tcid, str) or not tcid:
            raise Refusal("ASSERT-13", "a case names its ASSERT type (prompt or scenario) and testCaseId", where)
        if (kind, tcid) in out:
            raise Refusal("ASSERT-4", f"the map names the ASSERT case {kind}:{tcid} twice", where)
        if case_id in seen:
            raise Refusal("ASSERT-4", f"the map names the case id {case_id!r} twice: its verdicts could not be told "
                                      "apart", where)
        seen.add(case_id)
        out[(kind, tcid)] = case_id
    sha = doc.get("inferenceSetSha256")
    label = doc.get("labelSet")
    return CaseMap(path, label if isinstance(label, str) else None, sha if isinstance(sha, str) else None, out)


def open_run(path: str | os.PathLike[str], *, suite: str | None = None, run: str | None = None,
             accept_changed_suite: bool = False) -> AssertRun:
    """The ASSERT run at ``path`` (``RESULTS_DIR/SUITE/RUN``), or with ``suite`` and ``run`` the run
    ``path/SUITE/RUN`` of a results root. ASSERT-1 when there is no run there; ASSERT-5 when a suite file is not
    the one the manifest records (absent or changed), unless ``accept_changed_suite``."""
    base = Path(path)
    if (suite is None) != (run is None):
        raise Refusal("CLI-2", "option 'suite' and option 'run' go together: the run RESULTS_DIR/SUITE/RUN",
                      "option 'suite'" if suite is None else "option 'run'")
    if suite is not None:
        for name, value in (("option 'suite'", suite), ("option 'run'", run)):
            if not value or "/" in value or "\\" in value or value in (".", ".."):
                raise Refusal("CLI-2", f"{name} names one folder, not {value!r}", name)
        run_dir = base / suite / run  # type: ignore[operator]
    else:
        run_dir = base
    if not run_dir.exists():
        raise Refusal("ASSERT-1", "no such ASSERT run folder", str(run_dir))
    if not run_dir.is_dir():
        raise Refusal("ASSERT-1", "an ASSERT run is a folder (results/<suite>/<run>/), and this is not one",
                      str(run_dir))
    if not any(_present(run_dir / f) is not None for f in RUN_FILES):
        raise Refusal("ASSERT-1", "not an ASSERT run folder: it holds none of inference_set.jsonl, scores.jsonl and "
                                  "manifest.json", str(run_dir))
    run_dir = Path(os.path.abspath(run_dir))
    suite_dir = run_dir.parent
    r = AssertRun(run_dir=run_dir, suite_dir=suite_dir, suite=suite_dir.name, run=run_dir.name)
    mp = r.file("manifest.json")
    if mp is not None:
        r.manifest, r.manifest_bytes = read_object(mp)
    cp = r.file("config.yaml")
    if cp is not None:
        r.config, r.config_bytes = read_yaml(cp)
    r.taxonomy_path = _pick(suite_dir, r.manifest, "systematize", "taxonomy", "taxonomy.json", accept_changed_suite,
                             r.changed)
    if r.taxonomy_path is not None:
        doc, r.taxonomy_bytes = read_object(r.taxonomy_path)
        r.taxonomy = Taxonomy(doc, str(r.taxonomy_path))
    r.test_set = _pick(suite_dir, r.manifest, "test_set", "test_set", "test_set.jsonl", accept_changed_suite,
                       r.changed)
    r.inference_set = r.file("inference_set.jsonl")
    r.scores = r.file("scores.jsonl")
    kit = suite_dir.parent.parent / CASE_MAP
    if suite_dir.parent.name == "results" and _present(kit) is not None:
        r.case_map = read_case_map(kit)
        if r.case_map.inference_sha256 is not None and r.inference_set is not None:
            if sha256_file(r.inference_set) != r.case_map.inference_sha256.lower():
                raise Refusal("ASSERT-13", "the case map was written with another inference_set.jsonl (its "
                                           "inferenceSetSha256 differs): ASSERT numbers cases by position, so its "
                                           "verdicts would be matched to the wrong cases", str(kit))
    return r
