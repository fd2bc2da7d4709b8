"""Sealing a run and checking a seal (spec 04 §4.1, [SEAL-1]..[SEAL-6]).

- :func:`build_manifest`: the manifest of [SEAL-3] over the sealed files of [SEAL-1] and the run hash of [SEAL-4].
- :func:`seal_run`: writes ``seal.json``, an in-toto Statement v1 whose predicate is built from ``run.json``
  ([SEAL-5]), atomically. It seals only a closed run that verifies with no problem (so nothing aefgate seals can fail
  to verify), with ``sealedBy`` ``producer`` or ``ingest``; an ``ingest`` seal is also refused over a run that is not
  valid against the reader schemas ([SEAL-1]).
- :func:`seal_problems`: the checks of [SEAL-6], given the digests of the files as the verifier read them (so every
  file is read once).
- :func:`check_seal`: the §9.3 ``seal`` operation: the manifest, the run hash and the seal problems of a folder.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aefgate.errors import Refusal
from aefgate.formats.aef import jsonio, runfs
from aefgate.formats.aef.schema import validator
from aefgate.formats.aef.times import now, parse_time

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
EVIDENCE_PREDICATE = "https://agenteval.dev/aef/1/evidence"
SEALED_BY = ("producer", "ingest")


@dataclass
class Manifest:
    entries: list[tuple[str, str, int]]  # (path, sha256 hex, size), in [SEAL-3] order

    @property
    def text(self) -> str:
        return "".join(f"{h}  {size}  {path}\n" for path, h, size in self.entries)

    @property
    def run_hash(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()


def path_order(path: str) -> bytes:
    return path.encode("utf-8")


def manifest_from(digests: dict[str, tuple[str, int]]) -> Manifest:
    """The manifest over ``{path: (sha256 hex, size)}`` of sealed files."""
    items = sorted(
        ((p, h, s) for p, (h, s) in digests.items() if runfs.is_sealed_path(p)), key=lambda e: path_order(e[0])
    )
    return Manifest(items)


def build_manifest(run_dir: str | Path) -> Manifest:
    """Hash every sealed file of ``run_dir`` ([SEAL-1], [SEAL-2]) and return the manifest ([SEAL-3])."""
    root = Path(run_dir)
    sc = runfs.scan(root)
    digests = {p: (runfs.sha256_file(root / p), size) for p, size in sc.files.items() if runfs.is_sealed_path(p)}
    return manifest_from(digests)


def _times_equal(a: Any, b: Any) -> bool:
    try:
        return parse_time(a) == parse_time(b)
    except (ValueError, TypeError):
        return a == b


def predicate_for(run: dict, run_hash: str, sealed_by: str, sealed_at: str) -> dict:
    """The [SEAL-5] predicate: the run's identity as run.json gives it."""
    subject = {"ref": run["subject"]["ref"]}
    if "version" in run["subject"]:
        subject["version"] = run["subject"]["version"]
    dep = run.get("deployment")
    suite = run.get("suite")
    s = None
    if suite is not None:
        s = {"ref": suite["ref"], "version": suite["version"]}
        if "digest" in suite:
            s["digest"] = suite["digest"]
    judges = []
    for j in run.get("judges") or []:
        jj = {"model": j["model"]}
        if "rubricDigest" in j:
            jj["rubricDigest"] = j["rubricDigest"]
        judges.append(jj)
    return {
        "schemaVersion": "1.0",
        "runId": run["runId"],
        "runHash": run_hash,
        "producer": {"name": run["producer"]["name"], "version": run["producer"]["version"]},
        "subject": subject,
        "deployment": None if dep is None else {"ref": dep["ref"]},
        "suite": s,
        "judges": judges,
        "closedAt": run["endedAt"],
        "sealedAt": sealed_at,
        "sealedBy": sealed_by,
    }


def predicate_differs(pred: dict, run: dict) -> bool:
    """[SEAL-6] ``predicate``: the predicate differs from run.json about producer, subject, deployment, suite,
    judges or closedAt (an absent deployment/suite equals null, absent judges equal [])."""
    try:
        prod = run.get("producer") or {}
        if pred["producer"].get("name") != prod.get("name") or pred["producer"].get("version") != prod.get("version"):
            return True
        subj = run.get("subject") or {}
        ps = pred["subject"]
        if ps.get("ref") != subj.get("ref") or ps.get("version") != subj.get("version"):
            return True
        dep, pdep = run.get("deployment"), pred.get("deployment")
        if (dep is None) != (pdep is None) or (dep is not None and dep.get("ref") != pdep.get("ref")):
            return True
        suite, psuite = run.get("suite"), pred.get("suite")
        if (suite is None) != (psuite is None):
            return True
        if suite is not None:
            for k in ("ref", "version", "digest"):
                if suite.get(k) != psuite.get(k):
                    return True
        judges = run.get("judges") or []
        pj = pred.get("judges") or []
        if len(judges) != len(pj):
            return True
        for a, b in zip(judges, pj):
            if a.get("model") != b.get("model") or a.get("rubricDigest") != b.get("rubricDigest"):
                return True
        ended = run.get("endedAt")
        if ended is None or not _times_equal(pred.get("closedAt"), ended):
            return True
    except (AttributeError, TypeError, KeyError):
        return True
    return False


@dataclass
class SealReading:
    """``seal.json`` as read: ``doc`` when it is valid against the reader schema, else None (``seal-invalid``)."""

    doc: dict | None
    invalid_reason: str | None = None


def read_seal(run_dir: Path) -> SealReading:
    try:
        doc = jsonio.read_json(run_dir / "seal.json", max_size=jsonio.MAX_SEAL)
    except jsonio.JsonProblem as e:
        return SealReading(None, e.reason)
    reason = validator("seal", "reader")(doc)
    if reason is not None:
        return SealReading(None, reason)
    return SealReading(doc)


def seal_problems(
    seal: SealReading,
    digests: dict[str, tuple[str, int]],
    present: set[str],
    run_doc: dict | None,
    *,
    withheld_ok: set[str] = frozenset(),
) -> tuple[list[tuple[str, str]], list[str]]:
    """[SEAL-6]: the problems of a seal, given ``digests`` ``{path: (hex, size)}`` of the files read and the set
    of ``present`` regular files (outside overlays/). ``withheld_ok``: blob paths an authorized redaction withholds
    ([OVL-10]). Returns ``(problems, withheld paths)``; the caller orders them."""
    if seal.doc is None:
        return [("seal.json", "seal-invalid")], []
    probs: list[tuple[str, str]] = []
    withheld: list[str] = []
    pred = seal.doc["predicate"]
    names: dict[str, int] = {}
    for s in seal.doc["subject"]:
        names[s["name"]] = names.get(s["name"], 0) + 1
    sealed_ok = True
    reported: set[str] = set()
    for s in seal.doc["subject"]:
        name = s["name"]
        if names[name] > 1:  # its digests are not compared
            if name not in reported:
                probs.append((name, "duplicate-subject"))
                reported.add(name)
            sealed_ok = False
            continue
        if not runfs.is_sealed_path(name):
            probs.append((name, "subject-path"))
            sealed_ok = False
            continue
        if name not in present:
            if name in withheld_ok:
                probs.append((name, "withheld"))
                withheld.append(name)
            else:
                probs.append((name, "missing"))
            sealed_ok = False
            continue
        d = digests.get(name)
        if d is None or d[0] != s["digest"]["sha256"]:
            probs.append((name, "digest"))
            sealed_ok = False
    listed = set(names)
    for p in present:
        if runfs.is_sealed_path(p) and p not in listed:
            probs.append((p, "not-sealed"))
            sealed_ok = False
    if sealed_ok:
        if manifest_from({p: digests[p] for p in present if runfs.is_sealed_path(p)}).run_hash != pred["runHash"]:
            probs.append(("seal.json", "run-hash"))
    if run_doc is not None:
        if pred.get("runId") != run_doc.get("runId"):
            probs.append(("seal.json", "run-id"))
        if predicate_differs(pred, run_doc):
            probs.append(("seal.json", "predicate"))
        if run_doc.get("status") == "running":
            probs.append(("run.json", "run-open"))
    return probs, withheld


@dataclass
class SealCheck:
    manifest: str
    run_hash: str
    problems: list[tuple[str, str]] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"manifest": self.manifest, "runHash": self.run_hash, "problems": [list(p) for p in self.problems]}


def check_seal(run_dir: str | Path, *, withheld_ok: set[str] | frozenset[str] = frozenset()) -> SealCheck:
    """The §9.3 ``seal`` operation: the manifest of the files present, its run hash, and the [SEAL-6] problems.
    ``withheld_ok``: blob paths an authorized redaction withholds ([OVL-10]: ``withheld``, not ``missing``)."""
    from aefgate.formats.aef.verifier import problem_sort_key

    root = Path(run_dir)
    if not root.is_dir():
        raise Refusal("RUN-1", "not a run folder", str(run_dir))
    sc = runfs.scan(root)
    digests = {p: (runfs.sha256_file(root / p), size) for p, size in sc.files.items()}
    man = manifest_from(digests)
    problems: list[tuple[str, str]] = []
    if (root / "seal.json").is_file():
        run_doc = None
        try:
            rd = jsonio.read_json(root / "run.json")
            if type(rd) is dict:
                run_doc = rd
        except (jsonio.JsonProblem, OSError):
            pass
        problems, _ = seal_problems(read_seal(root), digests, set(digests), run_doc, withheld_ok=withheld_ok)
        problems = sorted(set(problems), key=problem_sort_key)
    return SealCheck(man.text, man.run_hash, problems)


class NotVerified(Refusal):
    """:func:`seal_run`'s refusal of a run that does not verify; ``problems`` lists what the verification found
    (a converter that wrote the run turns this into its own integrity refusal, e.g. IN-11)."""

    def __init__(self, problems: list[tuple[str, str]], rule: str, message: str, where: str = ""):
        super().__init__(rule, message, where)
        self.problems = problems


def seal_run(run_dir: str | Path, *, sealed_by: str = "producer", sealed_at: str | None = None) -> str:
    """Seal a closed run: write ``seal.json`` ([SEAL-5]) and return the run hash.

    Refused (exit 2, nothing written): an unknown ``sealed_by``; a folder that is not a run; a run already sealed;
    an open run; ``sealed_at`` before the run's ``endedAt``; a run that does not verify (every problem of §3.9 —
    an ``ingest`` seal in particular only over a run valid against the reader schemas, [SEAL-1]).
    """
    from aefgate.formats.aef.verifier import verify_run

    if sealed_by not in SEALED_BY:
        raise Refusal("SEAL-5", f"sealedBy is producer or ingest, not {sealed_by!r}")
    root = Path(run_dir)
    if not (root / "run.json").is_file():
        raise Refusal("RUN-1", "no run.json: not a run folder", str(run_dir))
    if (root / "seal.json").exists() or (root / "seal.json").is_symlink():
        raise Refusal("SEAL-1", "the run is already sealed (a closed run never changes, RUN-4)", "seal.json")
    try:
        run = jsonio.read_json(root / "run.json")
    except jsonio.JsonProblem as e:
        raise e.refusal("run.json") from None
    status = run.get("status")
    if status not in ("completed", "aborted"):
        raise Refusal("SEAL-1", f"only a closed run is sealed; this run is {status!r}", "run.json")
    if sealed_at is None:
        sealed_at = now()
    try:
        at = parse_time(sealed_at)
    except ValueError:
        raise Refusal("ENC-8", f"sealedAt is not an RFC 3339 UTC time: {sealed_at!r}") from None
    ended = run.get("endedAt")
    try:
        if ended is not None and at < parse_time(ended):
            raise Refusal("SEAL-1", f"sealedAt {sealed_at} is before the run closed ({ended})", "run.json")
    except ValueError:
        pass  # a bad endedAt is a schema problem the verification below reports
    v = verify_run(root)
    unlisted = sorted(p for p in runfs.scan(root).files if not runfs.is_listed(p))
    if unlisted:  # sealed, it would be unexpected-file (§3.9): a producer seals only the files [RUN-2] lists
        raise Refusal("RUN-2", "a file a run folder does not hold (outside ext/); move it under ext/ or remove it",
                      unlisted[0])
    if v.problems:
        path, code = v.problems[0]
        more = f" (and {len(v.problems) - 1} more)" if len(v.problems) > 1 else ""
        rule = "SEAL-1" if sealed_by == "ingest" else "RUN-4"
        raise NotVerified(
            v.problems,
            rule,
            f"the run does not verify, refusing to seal it: {code} at {path}{more}; `aefgate verify` lists them",
            path,
        )
    man = v.manifest  # the digests the verification read: every file is read once
    statement = {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": p, "digest": {"sha256": h}} for p, h, _ in man.entries],
        "predicateType": EVIDENCE_PREDICATE,
        "predicate": predicate_for(run, man.run_hash, sealed_by, sealed_at),
    }
    reason = validator("seal", "writer")(statement)
    if reason is not None:
        raise Refusal("SEAL-5", f"the seal would not be valid: {reason}", "seal.json")
    from aefgate.fsutil import atomic_write

    atomic_write(root / "seal.json", jsonio.dumps(statement))
    return man.run_hash
