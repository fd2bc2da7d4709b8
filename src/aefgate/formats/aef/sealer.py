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
from typing import Any, Iterator

import msgspec

from aefgate.errors import Refusal
from aefgate.formats.aef import jsonio, runfs
from aefgate.formats.aef.schema import validator
from aefgate.formats.aef.times import now, parse_time

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
EVIDENCE_PREDICATE = "https://agenteval.dev/aef/1/evidence"
SEALED_BY = ("producer", "ingest")


class Manifest:
    """The manifest of [SEAL-3]: ``entries`` iterates ``(path, sha256 hex, size)`` in path order. Built over a list,
    or over a :class:`runfs.Files` whose files were hashed (then the entries are made one by one when iterated,
    and the run hash is computed without the manifest's text)."""

    def __init__(self, entries):
        self._src = entries
        self._run_hash: str | None = None

    @property
    def entries(self):
        src = self._src
        return src.sealed_entries() if isinstance(src, runfs.Files) else src

    @property
    def text(self) -> str:
        return "".join(f"{h}  {size}  {path}\n" for path, h, size in self.entries)

    @property
    def run_hash(self) -> str:
        if self._run_hash is None:
            h = hashlib.sha256()
            for path, hexd, size in self.entries:
                h.update(f"{hexd}  {size}  {path}\n".encode("utf-8"))
            self._run_hash = h.hexdigest()
        return self._run_hash


def path_order(path: str) -> bytes:
    return path.encode("utf-8")


def manifest_from(digests: dict[str, tuple[str, int]]) -> Manifest:
    """The manifest over ``{path: (sha256 hex, size)}`` of sealed files."""
    items = sorted(
        ((p, h, s) for p, (h, s) in digests.items() if runfs.is_sealed_path(p)), key=lambda e: path_order(e[0])
    )
    return Manifest(items)


def _hash_all(root: Path, files: runfs.Files, *, sealed_only: bool) -> None:
    """Hash every file of ``files`` (the sealed ones only with ``sealed_only``) into it."""
    for p, size in list(files.other.items()):
        if not sealed_only or runfs.is_sealed_path(p):
            files.set_digest(p, runfs.sha256_file(root / p), size)
    for i, p, _ in files.blob_items():
        files.set_blob_digest(i, bytes.fromhex(runfs.sha256_file(root / p)))


def build_manifest(run_dir: str | Path) -> Manifest:
    """Hash every sealed file of ``run_dir`` ([SEAL-1], [SEAL-2]) and return the manifest ([SEAL-3])."""
    root = Path(run_dir)
    sc = runfs.scan(root)
    _hash_all(root, sc.files, sealed_only=True)
    return Manifest(sc.files)


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
    """``seal.json`` as read: ``doc`` when it is valid against the reader schema, else None (``seal-invalid``).

    Read by :func:`read_seal_lean`, ``doc["subject"]`` is None and the subjects are kept as the slices of the
    file's bytes (``raw_subjects``), decoded one by one by :meth:`subjects`."""

    doc: dict | None
    invalid_reason: str | None = None
    raw_subjects: list | None = None

    def subjects(self) -> Iterator[tuple[str, str]]:
        """``(name, sha256)`` of every subject, in the seal's order."""
        if self.raw_subjects is None:
            for s in self.doc["subject"]:
                yield s["name"], s["digest"]["sha256"]
        else:
            dec = _subject_decoder
            for raw in self.raw_subjects:
                s = dec.decode(raw)
                yield s.name, s.digest.sha256


def read_seal(run_dir: Path) -> SealReading:
    try:
        doc = jsonio.read_json(run_dir / "seal.json", max_size=jsonio.MAX_SEAL)
    except jsonio.JsonProblem as e:
        return SealReading(None, e.reason)
    reason = validator("seal", "reader")(doc)
    if reason is not None:
        return SealReading(None, reason)
    return SealReading(doc)


class _Digest(msgspec.Struct, forbid_unknown_fields=True):
    sha256: str


class _Subject(msgspec.Struct, forbid_unknown_fields=True):
    name: str
    digest: _Digest


_subject_decoder = msgspec.json.Decoder(_Subject)
_raw_list_decoder = msgspec.json.Decoder(list[msgspec.Raw])
_top_decoder = msgspec.json.Decoder(dict[str, msgspec.Raw])
_raw_encoder = msgspec.json.Encoder()
_LEAN_CHUNK = 1024  # subjects validated at a time


def read_seal_lean(run_dir: Path) -> SealReading:
    """:func:`read_seal` without the subjects as Python objects (~600 bytes each; a seal lists every file).

    A seal written compactly, whose subjects hold exactly ``name`` and ``digest.sha256`` (what every writer of
    [SEAL-5] writes), is read in parts: the top-level members as slices of the bytes (a re-encoding equal to the
    bytes certifies that no member is repeated, as in ``jsonio.loads``), every member but ``subject`` read
    strictly, each subject decoded into a small struct whose re-encoding must give its bytes back, and the
    schema checked on the document with its subjects a chunk at a time. Anything else (white space, another
    member in a subject, any problem at all) is read by :func:`read_seal`, whole and exactly: the outcome and
    the problems are the same either way, only the memory differs."""
    path = run_dir / "seal.json"
    try:
        with open(path, "rb") as f:
            buf = f.read(jsonio.MAX_SEAL + 1)
    except OSError:
        return read_seal(run_dir)
    lean = _lean(buf)
    if lean is None:
        del buf, lean
        return read_seal(run_dir)
    return lean


def _lean(buf: bytes) -> SealReading | None:
    if len(buf) > jsonio.MAX_SEAL or buf[:1] != b"{":
        return None
    try:
        top = _top_decoder.decode(buf)
        # the re-encoding must give the bytes back (no member dropped, no white space), compared member by
        # member against the bytes (the subjects are not copied)
        mv = memoryview(buf)
        pos = 1
        for k, v in top.items():
            if pos > 1:
                if buf[pos : pos + 1] != b",":
                    return None
                pos += 1
            kb = _raw_encoder.encode(k)
            if mv[pos : pos + len(kb)] != kb or buf[pos + len(kb) : pos + len(kb) + 1] != b":":
                return None
            pos += len(kb) + 1
            rv = memoryview(v)
            if mv[pos : pos + len(rv)] != rv:
                return None
            pos += len(rv)
            del rv
        del mv
        if pos != len(buf) - 1 or buf[pos:] != b"}":
            return None
        raw_subject = top.get("subject")
        if raw_subject is None:
            return None
        raws = _raw_list_decoder.decode(raw_subject)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    if not raws or len(raws) > 100_000:
        return None
    doc: dict[str, Any] = {}
    try:
        for k, v in top.items():
            if k != "subject":
                val = jsonio.loads(bytes(v), max_size=jsonio.MAX_SEAL, top_object=False)
                if jsonio._depth(val) + 1 > jsonio.MAX_DEPTH:
                    return None
                doc[k] = val
            else:
                doc[k] = None
    except jsonio.JsonProblem:
        return None
    del top
    check = validator("seal", "reader")
    dec, enc = _subject_decoder, _raw_encoder
    chunk: list[dict] = []
    try:
        for i, raw in enumerate(raws):
            s = dec.decode(raw)
            if enc.encode(s) != bytes(raw):
                return None
            chunk.append({"name": s.name, "digest": {"sha256": s.digest.sha256}})
            if len(chunk) == _LEAN_CHUNK or i == len(raws) - 1:
                doc["subject"] = chunk
                if check(doc) is not None:
                    return None
                chunk = []
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    doc["subject"] = None
    return SealReading(doc, raw_subjects=raws)


class _PredicateHash(msgspec.Struct):
    runHash: str


class _TailOfStatement(msgspec.Struct, forbid_unknown_fields=True):
    predicateType: str
    predicate: _PredicateHash


_tail_decoder = msgspec.json.Decoder(_TailOfStatement)
_TAIL = 1 << 16


def seal_run_hash(run_dir: str | Path) -> str:
    """The ``predicate.runHash`` of ``seal.json``, for showing it (nothing is checked here: :func:`check_seal`
    and ``verify`` check a seal). A seal as :func:`seal_run` writes it ends with its predicate: that end is read
    alone (the subjects, one per file, are not); any other seal is read whole."""
    path = Path(run_dir) / "seal.json"
    with open(path, "rb") as f:
        size = f.seek(0, 2)
        f.seek(max(0, size - _TAIL))
        tail = f.read()
    cut = tail.rfind(b'],"predicateType":')
    if cut >= 0 and tail.endswith(b"}"):
        try:
            return _tail_decoder.decode(b"{" + tail[cut + 2 : -1] + b"}").predicate.runHash
        except (msgspec.DecodeError, msgspec.ValidationError):
            pass
    return msgspec.json.decode(path.read_bytes())["predicate"]["runHash"]


def seal_problems(
    seal: SealReading,
    files: runfs.Files,
    run_doc: dict | None,
    *,
    withheld_ok: set[str] = frozenset(),
) -> tuple[list[tuple[str, str]], list[str]]:
    """[SEAL-6]: the problems of a seal, given the regular files present (outside overlays/) and the digests of
    those read (``files``, a :class:`runfs.Files`). ``withheld_ok``: blob paths an authorized redaction withholds
    ([OVL-10]). Returns ``(problems, withheld paths)``; the caller orders them.

    Per subject naming a blob present at its canonical path, a count in a byte array (not a dict of names)."""
    if seal.doc is None:
        return [("seal.json", "seal-invalid")], []
    probs: list[tuple[str, str]] = []
    withheld: list[str] = []
    pred = seal.doc["predicate"]
    blob_count = bytearray(files.n)  # subjects naming each packed blob (up to 2)
    names: dict[str, int] = {}  # subjects naming any other path
    for name, _ in seal.subjects():
        i = files.blob_index(name)
        if i >= 0:
            if blob_count[i] < 2:
                blob_count[i] += 1
        else:
            names[name] = names.get(name, 0) + 1
    sealed_ok = True
    reported: set[str] = set()
    for name, sha in seal.subjects():
        i = files.blob_index(name)
        if (blob_count[i] if i >= 0 else names[name]) > 1:  # its digests are not compared
            if name not in reported:
                probs.append((name, "duplicate-subject"))
                reported.add(name)
            sealed_ok = False
            continue
        if i < 0:
            if not runfs.is_sealed_path(name):
                probs.append((name, "subject-path"))
                sealed_ok = False
                continue
            if name not in files.other:
                if name in withheld_ok:
                    probs.append((name, "withheld"))
                    withheld.append(name)
                else:
                    probs.append((name, "missing"))
                sealed_ok = False
                continue
        d = files.digest(name)
        if d is None or d[0] != sha:
            probs.append((name, "digest"))
            sealed_ok = False
    for p in files.other:
        if runfs.is_sealed_path(p) and p not in names:
            probs.append((p, "not-sealed"))
            sealed_ok = False
    if files.n and blob_count.count(0):
        for i, p, _ in files.blob_items():
            if not blob_count[i]:
                probs.append((p, "not-sealed"))
                sealed_ok = False
    if sealed_ok:
        # every file present is sealed, listed once and read with the digest listed
        if Manifest(files).run_hash != pred["runHash"]:
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
    v = verify_run(root)
    # the files the verification read (no second scan: a run may hold tens of thousands of blobs)
    # (a file beyond the size limits has no digest: then scan again)
    read_all = v.manifest is not None and not any(code == "limit" for _, code in v.problems)
    present = (p for p, _, _ in v.manifest.entries) if read_all else runfs.scan(root).files
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
    man = v.manifest  # the digests the verification read: every file is read once
    pred = predicate_for(run, man.run_hash, sealed_by, sealed_at)
    head = {"_type": STATEMENT_TYPE, "subject": [], "predicateType": EVIDENCE_PREDICATE, "predicate": pred}
    # the writer schema, checked on the statement with its subjects a chunk at a time (a seal lists every file)
    check = validator("seal", "writer")
    count = 0
    for chunk in _subject_chunks(man):
        count += len(chunk)
        head["subject"] = chunk
        reason = check(head) if count <= 100_000 else "/subject: more than 100000 items"
        if reason is not None:
            raise Refusal("SEAL-5", f"the seal would not be valid: {reason}", "seal.json")
    if count == 0:
        head["subject"] = []
        reason = check(head)
        raise Refusal("SEAL-5", f"the seal would not be valid: {reason}", "seal.json")
    from aefgate.fsutil import atomic_lines

    # jsonio.dumps of the whole statement, written a chunk of subjects at a time
    head["subject"] = []
    text = jsonio.dumps(head)
    cut = text.index(b',"subject":[]') + len(b',"subject":[')

    def parts():
        yield text[:cut]
        first = True
        for chunk in _subject_chunks(man):
            yield (b"" if first else b",") + _raw_encoder.encode(chunk)[1:-1]
            first = False
        yield text[cut:]

    atomic_lines(root / "seal.json", parts(), replace=True)
    return man.run_hash


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
