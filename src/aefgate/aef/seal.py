"""``seal.json`` as read and checked, and the manifest (spec 04 §4.1, [SEAL-1]..[SEAL-4], [SEAL-6]).

- :class:`Manifest`, :func:`build_manifest`, :func:`manifest_from`: the manifest of [SEAL-3] over the sealed files
  of [SEAL-1] and the run hash of [SEAL-4].
- :func:`read_seal` / :func:`read_seal_lean`: ``seal.json`` as read (``doc`` None when it is not valid against the
  reader schema); :func:`seal_run_hash`: its ``predicate.runHash``, for showing it.
- :func:`seal_problems`: the checks of [SEAL-6], given the digests of the files as the verifier read them (so every
  file is read once).

Layering: this module is below the verifier (``verifier.py`` reads a seal with it) and below the sealer
(``sealer.py``: writing ``seal.json`` and the §9.3 ``seal`` operation, which re-exports what is here); it imports
neither.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import msgspec

from aefgate import progress
from aefgate.aef import jsonio, runfs
from aefgate.aef.schema import validator
from aefgate.aef.times import parse_time

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
EVIDENCE_PREDICATE = "https://agenteval.dev/aef/1/evidence"


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
    def files(self) -> runfs.Files | None:
        """The table of files the manifest is built over (every file seen, hashed or not), or None (a list)."""
        return self._src if isinstance(self._src, runfs.Files) else None

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
    others = [(p, size) for p, size in files.other.items() if not sealed_only or runfs.is_sealed_path(p)]
    with progress.task("hash files", len(others) + files.n, "files") as bar:  # files.n: the packed blobs
        for p, size in others:
            files.set_digest(p, runfs.sha256_file(root / p), size)
            bar.advance()
        for i, p, _ in files.blob_items():
            files.set_blob_digest(i, bytes.fromhex(runfs.sha256_file(root / p)))
            bar.advance()


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


def predicate_differs(pred: dict, run: dict) -> bool:
    """[SEAL-6] ``predicate``: the predicate differs from run.json about producer, subject, deployment, suite,
    judges or closedAt (an absent deployment/suite equals null, absent judges equal []).

    ``run`` is run.json as read, valid against its schema or not (the verifier compares a run.json that reads but
    fails its schema too): any shape is compared without failing. The predicate holds these fields "as run.json
    gives them" ([SEAL-5]), so a field of run.json that does not give them is a difference: one absent (producer,
    subject, endedAt) or of another type (an object that is not one, a judge that is not an object, judges that
    are not an array) differs from the predicate's, which its schema requires. Only what [SEAL-5] makes equal to
    the field's absence is not: a deployment or suite that is absent or null against a null one, judges absent or
    null against []. Values compare as JSON values (``1`` is not ``"1"``), times as times ([ENC-8])."""
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
        judges = run.get("judges")
        if judges is None:
            judges = []
        elif type(judges) is not list:  # ill-typed ({}, "", 0, false): not the [] of no judges
            return True
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
