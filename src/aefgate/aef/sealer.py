"""Sealing a run and checking a seal (spec 04 §4.1, [SEAL-1]..[SEAL-6]).

- :func:`build_manifest`: the manifest of [SEAL-3] over the sealed files of [SEAL-1] and the run hash of [SEAL-4]
  (in ``seal.py``, importable from here).
- :func:`seal_run`: writes ``seal.json``, an in-toto Statement v1 whose predicate is built from ``run.json``
  ([SEAL-5]), atomically. It seals only a closed run that verifies with no problem (so nothing aefgate seals can fail
  to verify), with ``sealedBy`` ``producer`` or ``ingest``; an ``ingest`` seal is also refused over a run that is not
  valid against the reader schemas ([SEAL-1]).
- :func:`seal_problems`: the checks of [SEAL-6], given the digests of the files as the verifier read them (so every
  file is read once) (in ``seal.py`` with the reading of ``seal.json``, importable from here).
- :func:`check_seal`: the §9.3 ``seal`` operation: the manifest, the run hash and the seal problems of a folder.

Layering: ``seal.py`` (the manifest, ``seal.json`` read and checked) is below the verifier, which reads a seal with
it; this module is above the verifier (:func:`seal_run` seals only a run that verifies).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

from aefgate.errors import EXIT_INTEGRITY, Refusal
from aefgate.aef import jsonio, runfs
from aefgate.aef.problems import problem_sort_key
from aefgate.aef.schema import validator

# the layer below: the manifest, seal.json read and checked (importable from here as before)
from aefgate.aef.seal import (  # noqa: F401
    _LEAN_CHUNK,
    EVIDENCE_PREDICATE,
    STATEMENT_TYPE,
    Manifest,
    SealReading,
    _hash_all,
    _raw_encoder,
    build_manifest,
    manifest_from,
    path_order,
    predicate_differs,
    read_seal,
    read_seal_lean,
    seal_problems,
    seal_run_hash,
)
from aefgate.aef.times import now, parse_time
from aefgate.aef.verifier import verify_run
from aefgate.fsutil import atomic_lines

SEALED_BY = ("producer", "ingest")


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
    root = Path(run_dir)
    if not root.is_dir():
        raise Refusal("RUN-1", "not a run folder", str(run_dir))
    sc = runfs.scan(root)
    _hash_all(root, sc.files, sealed_only=False)
    man = Manifest(sc.files)
    problems: list[tuple[str, str]] = []
    if (root / "seal.json").is_file():
        run_doc = None
        try:
            rd = jsonio.read_json(root / "run.json")
            if type(rd) is dict:
                run_doc = rd
        except (jsonio.JsonProblem, OSError):
            pass
        problems, _ = seal_problems(read_seal_lean(root), sc.files, run_doc, withheld_ok=withheld_ok)
        problems = sorted(set(problems), key=problem_sort_key)
    return SealCheck(man.text, man.run_hash, problems)


class NotVerified(Refusal):
    """:func:`seal_run`'s refusal of a run that does not verify; ``problems`` lists what the verification found
    (a converter that wrote the run turns this into its own integrity refusal, e.g. IN-11)."""

    def __init__(self, problems: list[tuple[str, str]], rule: str, message: str, where: str = ""):
        super().__init__(rule, message, where)
        self.problems = problems

    def as_refusal(self, rule: str, what: str = "the imported run") -> Refusal:
        """The converter's own integrity refusal (exit 1) under ``rule``, at the first problem."""
        where, code = self.problems[0] if self.problems else ("", "invalid")
        return Refusal(rule, f"{what} does not verify: {code} at {where}", where, exit_code=EXIT_INTEGRITY)


def seal_run(
    run_dir: str | Path,
    *,
    sealed_by: str = "producer",
    sealed_at: str | None = None,
    written: runfs.Written | None = None,
) -> str:
    """Seal a closed run: write ``seal.json`` ([SEAL-5]) and return the run hash.

    Refused (exit 2, nothing written): an unknown ``sealed_by``; a folder that is not a run; a run already sealed;
    an open run; ``sealed_at`` before the run's ``endedAt``; a run that does not verify (every problem of §3.9 —
    an ``ingest`` seal in particular only over a run valid against the reader schemas, [SEAL-1]).

    ``written``: only for the writer of ``run_dir`` sealing its own private folder (the RunBuilder): the files it
    created with the digests of the bytes it wrote, passed to ``verify_run(written=)``: the verification only lists
    the folder (which must hold exactly those files) and does not read back the blobs, and still runs every check
    on what it parses (the seal is refused just the same for a run that would not verify).
    """
    if sealed_by not in SEALED_BY:
        raise Refusal("SEAL-5", f"sealedBy is producer or ingest, not {sealed_by!r}")
    root = Path(run_dir)
    run, sealed_at = _closed_run(root, run_dir, sealed_at)
    man = _verified_manifest(root, sealed_by, written)  # the digests the verification read: every file is read once
    pred = predicate_for(run, man.run_hash, sealed_by, sealed_at)
    _write_seal(root, man, pred)
    return man.run_hash


def _closed_run(root: Path, run_dir: str | Path, sealed_at: str | None) -> tuple[dict, str]:
    """The unsealed, closed run's ``run.json`` (without ``ext``) and the seal's time (default: now), refused when
    before the run's ``endedAt``."""
    if not (root / "run.json").is_file():
        raise Refusal("RUN-1", "no run.json: not a run folder", str(run_dir))
    if (root / "seal.json").exists() or (root / "seal.json").is_symlink():
        raise Refusal("SEAL-1", "the run is already sealed (a closed run never changes, RUN-4)", "seal.json")
    try:
        run = jsonio.read_json(root / "run.json")
    except jsonio.JsonProblem as e:
        raise e.refusal("run.json") from None
    if type(run) is dict:
        run.pop("ext", None)  # the predicate does not read it; held while the run is verified
    status = run.get("status")
    if status not in ("completed", "aborted"):
        raise Refusal("SEAL-1", f"only a closed run is sealed; this run is {status!r}", "run.json")
    if sealed_at is None:
        sealed_at = now()
    try:
        at = parse_time(sealed_at)
    except ValueError:
        raise Refusal("ENC-8", f"sealedAt is not an RFC 3339 UTC time: {sealed_at!r}", "at") from None
    ended = run.get("endedAt")
    try:
        if ended is not None and at < parse_time(ended):
            raise Refusal("SEAL-1", f"sealedAt {sealed_at} is before the run closed ({ended})", "run.json")
    except ValueError:
        pass  # a bad endedAt is a schema problem the verification below reports
    return run, sealed_at


def _verified_manifest(root: Path, sealed_by: str, written: runfs.Written | None) -> Manifest:
    """The manifest of the run's verification, refused when the folder holds a file a run does not list or the
    run does not verify (:class:`NotVerified`)."""
    v = verify_run(root, written=written)
    # the files the verification saw (no second scan: a run may hold tens of thousands of blobs); a blob at its
    # canonical path (packed in runfs.Files) is always listed, so only the other files are looked at
    files = v.manifest.files if v.manifest is not None else None
    present: Iterable[str] = list(files.other) if files is not None else runfs.scan(root).files
    unlisted = sorted(p for p in present if not runfs.is_listed(p))
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
    return v.manifest


def _write_seal(root: Path, man: Manifest, pred: dict) -> None:
    """Write ``seal.json``: the statement of ``pred`` over the manifest's subjects, checked against the writer
    schema a chunk of subjects at a time before each is written (refused, nothing left, when not valid)."""
    head = {"_type": STATEMENT_TYPE, "subject": [], "predicateType": EVIDENCE_PREDICATE, "predicate": pred}
    # the writer schema, checked on the statement with its subjects a chunk at a time (a seal lists every file)
    check = validator("seal", "writer")

    # jsonio.dumps of the whole statement, written a chunk of subjects at a time, each chunk checked before it is
    # written (one pass over the manifest): a seal that would not be valid is refused and nothing is left
    head["subject"] = []
    text = jsonio.dumps(head)
    cut = text.index(b',"subject":[]') + len(b',"subject":[')

    def parts():
        yield text[:cut]
        count = 0
        for chunk in _subject_chunks(man):
            count += len(chunk)
            head["subject"] = chunk
            reason = check(head) if count <= 100_000 else "/subject: more than 100000 items"
            if reason is not None:
                raise Refusal("SEAL-5", f"the seal would not be valid: {reason}", "seal.json")
            yield (b"," if count > len(chunk) else b"") + _raw_encoder.encode(chunk)[1:-1]
        if count == 0:
            head["subject"] = []
            reason = check(head)
            raise Refusal("SEAL-5", f"the seal would not be valid: {reason}", "seal.json")
        yield text[cut:]

    atomic_lines(root / "seal.json", parts(), replace=True)


def _subject_chunks(man: Manifest) -> Iterator[list[dict]]:
    """The subjects of [SEAL-5] in manifest order, ``_LEAN_CHUNK`` at a time."""
    chunk: list[dict] = []
    for p, h, _ in man.entries:
        chunk.append({"name": p, "digest": {"sha256": h}})
        if len(chunk) == _LEAN_CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
