"""Memory per file in `verify` and `seal` (issue 4, docs/design/bounded-memory.md): the packed table of files
(``runfs.Files``), the seal read in parts (``sealer.read_seal_lean``) and written a chunk of subjects at a time.

Every case is checked against an oracle: the run's problems with the seal read whole (``sealer.read_seal``), the
[SEAL-6] checks as they were written over dicts (``_seal_problems_dicts`` below), the [RUN-3] rules over every
path (``paths.path_problems``), and the statement built whole and written by ``jsonio.dumps``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from aefgate.aef import jsonio, runfs, seal, sealer, verifier
from aefgate.aef.paths import path_problems
from aefgate.aef.sealer import (
    EVIDENCE_PREDICATE,
    STATEMENT_TYPE,
    manifest_from,
    predicate_differs,
    predicate_for,
    read_seal,
    read_seal_lean,
    seal_problems,
    seal_run,
)
from aefgate.aef.verifier import verify_run
from tests._shared import AEF, copy_run

TRIALS_RUN = AEF / "interop" / "examples" / "inspect-aef" / "run"  # sealed, 20 blobs


@pytest.fixture(autouse=True, params=["memory", "disk"])
def table(request, monkeypatch):
    """Every test with the packed blobs in memory, and on disk (runs of 3 blobs merged, a sparse index)."""
    monkeypatch.setenv("AEFGATE_SPILL_FILES", "100000" if request.param == "memory" else "3")
    return request.param


def _seal_problems_dicts(doc, digests, present, run_doc, withheld_ok=frozenset()):
    """[SEAL-6] over dicts, as seal_problems was written before the packed table (the oracle)."""
    if doc is None:
        return [("seal.json", "seal-invalid")], []
    probs, withheld = [], []
    pred = doc["predicate"]
    names: dict[str, int] = {}
    for s in doc["subject"]:
        names[s["name"]] = names.get(s["name"], 0) + 1
    sealed_ok = True
    reported: set[str] = set()
    for s in doc["subject"]:
        name = s["name"]
        if names[name] > 1:
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
    for p in present:
        if runfs.is_sealed_path(p) and p not in names:
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


def _all_files(root: Path) -> dict[str, int]:
    return {p: st.st_size for p, st in runfs.walk(root) if not p.startswith("overlays/") and p != "overlays"}


def _blobs(run: Path) -> list[str]:
    return sorted(p for p in _all_files(run) if p.startswith("blobs/"))


def _doc(run: Path) -> dict:
    return json.loads((run / "seal.json").read_bytes())


def _write(run: Path, doc_or_bytes) -> None:
    data = doc_or_bytes if isinstance(doc_or_bytes, bytes) else jsonio.dumps(doc_or_bytes)
    (run / "seal.json").write_bytes(data)


def _other_blob(hexd: str) -> str:
    return runfs.blob_path(hexd)


# -- the table of files ---------------------------------------------------------------------------------------


def test_files_table_is_the_scan_as_a_dict(tmp_path, table):
    run = copy_run(TRIALS_RUN, tmp_path / "run")
    # a blob outside its canonical folder, one not named by a digest, a file in ext/
    blobs = _blobs(run)
    h = blobs[0].rsplit("/", 1)[1]
    wrong = f"blobs/sha256/zz/{h}"
    (run / "blobs/sha256/zz").mkdir(parents=True)
    (run / wrong).write_bytes((run / blobs[0]).read_bytes())
    (run / "blobs/sha256/ab").mkdir(parents=True, exist_ok=True)
    (run / "blobs/sha256/ab/notahash").write_bytes(b"x")
    (run / "ext").mkdir()
    (run / "ext/n.txt").write_bytes(b"note")
    ref = _all_files(run)
    files = runfs.scan(run).files
    assert files.n == len(blobs) > 10
    assert files.on_disk == (table == "disk")
    assert wrong in files.other and "blobs/sha256/ab/notahash" in files.other
    assert dict(files.items()) == ref and len(files) == len(ref) and sorted(files) == sorted(ref)
    # the packed blobs come in the byte order of their paths
    assert list(files.blob_paths()) == sorted(blobs, key=lambda p: p.encode())
    for p, size in ref.items():
        assert p in files and files[p] == size and files.get(p) == size
    for absent in ("blobs/sha256/00/" + "0" * 64, _other_blob("f" * 64), "nope", "blobs/sha256/" + h[:2] + "/" + h[:-1]):
        assert absent not in files and files.get(absent) is None and files.get(absent, 7) == 7
        with pytest.raises(KeyError):
            files[absent]
    # digests: packed for the blobs, in a dict for the others
    dg = runfs.Digests(files)
    dg[blobs[1]] = ("a" * 64, 5)
    dg["run.json"] = ("b" * 64, 9)
    assert dg[blobs[1]] == ("a" * 64, files[blobs[1]]) and dg["run.json"] == ("b" * 64, 9)
    assert blobs[2] not in dg and dg.get(blobs[2]) is None


def test_blob_folder_order_is_sorted_whatever_the_walk(tmp_path, table):
    # many blobs over a few folders, created in an order unlike their names'
    run = tmp_path / "run"
    names = []
    for i in range(300):
        h = format((i * 7919) % 1000, "03x") + format(i, "061x")
        names.append(_other_blob(h))
    for p in reversed(names):
        (run / p).parent.mkdir(parents=True, exist_ok=True)
        (run / p).write_bytes(b"x" * (len(p) % 7))
    files = runfs.scan(run).files
    assert files.n == 300 and files.other == {} and files.on_disk == (table == "disk")
    assert list(files.blob_paths()) == sorted(names)
    assert dict(files.items()) == _all_files(run)


# -- [RUN-3] with packed blobs ------------------------------------------------------------------------------------


CLASHES = [
    "Blobs/x.txt",  # a folder that clashes with blobs/
    "blobs/SHA256/y",  # with blobs/sha256
    "blobs/sha256/{HI}/z",  # with one blob folder
    "blobs/sha256/{hi}/{HEX}",  # with one blob, in letter case
    "blobs/Sha256",  # a file that clashes with a folder
    "ext/ok.txt",  # no clash: the blobs need not be seen
]


@pytest.mark.parametrize("extra", CLASHES)
def test_path_rules_over_packed_blobs(tmp_path, extra):
    run = copy_run(TRIALS_RUN, tmp_path / "run")
    blob = _blobs(run)[3]
    hexd = blob.rsplit("/", 1)[1]
    extra = extra.format(HI=hexd[:2].upper() if hexd[:2] != hexd[:2].upper() else "AB", hi=hexd[:2],
                         HEX=hexd.upper() if hexd.upper() != hexd else hexd[:-1] + "A")
    (run / extra).parent.mkdir(parents=True, exist_ok=True)
    (run / extra).write_bytes(b"x")
    sc = runfs.scan(run)
    mine = path_problems(verifier._path_rule_input(sc.files, sc.special))
    assert mine == path_problems(list(_all_files(run)))
    if not extra.startswith("ext/"):
        assert mine
    # and the verification reports them as before
    assert set(mine) <= set(verify_run(run).problems)


# -- reading seal.json in parts -------------------------------------------------------------------------------------


def _edits(run: Path):
    """(name, edit of the run folder) for the seal cases; each edit rewrites seal.json (compactly unless said)."""
    blobs = _blobs(run)
    b0, b1, b2 = blobs[0], blobs[1], blobs[2]

    def doc_edit(f):
        def apply():
            d = _doc(run)
            f(d)
            _write(run, d)

        return apply

    def raw_edit(f):
        def apply():
            _write(run, f(jsonio.dumps(_doc(run))))

        return apply

    def subj(d, name):
        return next(s for s in d["subject"] if s["name"] == name)

    def bump(d, name):
        s = subj(d, name)
        s["digest"]["sha256"] = ("0" if s["digest"]["sha256"][0] != "0" else "1") + s["digest"]["sha256"][1:]

    def remove_blob():
        os.unlink(run / b2)

    def add_unsealed_blob():
        (run / _other_blob("e" * 64)).parent.mkdir(parents=True, exist_ok=True)
        (run / _other_blob("e" * 64)).write_bytes(b"unsealed")

    def blob_bytes_changed():
        (run / b1).write_bytes(b"changed")

    return [
        ("compact", doc_edit(lambda d: None)),
        ("as the reference wrote it", lambda: None),
        ("pretty", lambda: _write(run, json.dumps(_doc(run), indent=2).encode())),
        ("final newline", raw_edit(lambda b: b + b"\n")),
        ("blob not listed", doc_edit(lambda d: d["subject"].remove(subj(d, b0)))),
        ("blob listed twice", doc_edit(lambda d: d["subject"].append(dict(subj(d, b0))))),
        ("blob listed three times", doc_edit(lambda d: d["subject"].extend([subj(d, b0), subj(d, b0)]))),
        ("run.json listed twice", doc_edit(lambda d: d["subject"].append(subj(d, "run.json")))),
        ("blob digest", doc_edit(lambda d: bump(d, b1))),
        ("results digest", doc_edit(lambda d: bump(d, "results.ndjson"))),
        ("blob missing", remove_blob),
        ("absent blob listed", doc_edit(lambda d: d["subject"].append({"name": _other_blob("d" * 64),
                                                                      "digest": {"sha256": "d" * 64}}))),
        ("blob not sealed", add_unsealed_blob),
        ("blob bytes changed", blob_bytes_changed),
        ("subject-path", doc_edit(lambda d: d["subject"].append({"name": "overlays/x.json",
                                                                "digest": {"sha256": "d" * 64}}))),
        ("run hash", doc_edit(lambda d: d["predicate"].update(runHash="0" * 64))),
        ("run id", doc_edit(lambda d: d["predicate"].update(runId="other-run"))),
        ("extra member in a subject", doc_edit(lambda d: subj(d, b0).update(note="x"))),
        ("extra member at the top", doc_edit(lambda d: d.update(note={"a": [1, 2]}))),
        ("digest with another member", doc_edit(lambda d: subj(d, b0)["digest"].update(sha512="ab"))),
        ("uppercase digest", doc_edit(lambda d: subj(d, b0)["digest"].update(sha256=b0[-64:].upper()))),
        ("bad name", doc_edit(lambda d: subj(d, b0).update(name="../x"))),
        ("name escaped", raw_edit(lambda b: b.replace(b'"name":"blobs/', b'"name":"\\u0062lobs/', 1))),
        ("member twice in a subject", raw_edit(lambda b: b.replace(b'{"name":', b'{"name":"x","name":', 1))),
        ("member twice at the top", raw_edit(lambda b: b[:-1] + b',"_type":"' + STATEMENT_TYPE.encode() + b'"}')),
        ("member twice in the predicate", raw_edit(lambda b: b.replace(b'"predicate":{', b'"predicate":{"runId":"x",', 1))),
        ("no subject", doc_edit(lambda d: d.update(subject=[]))),
        ("subject not a list", doc_edit(lambda d: d.update(subject={"name": "run.json"}))),
        ("subject not an object", doc_edit(lambda d: d["subject"].append("run.json"))),
        ("no predicate", doc_edit(lambda d: d.pop("predicate"))),
        ("wrong type", doc_edit(lambda d: d.update(_type="x"))),
        ("not an object", lambda: _write(run, b"[1]")),
        ("byte-order mark", raw_edit(lambda b: jsonio.BOM + b)),
        ("invalid UTF-8", raw_edit(lambda b: b.replace(b'"sealedBy":"', b'"sealedBy":"\xff', 1))),
        ("deep predicate", doc_edit(lambda d: d["predicate"].update(x=json.loads("[" * 70 + "]" * 70)))),
        ("big number", raw_edit(lambda b: b[:-1] + b',"n":1' + b"0" * 400 + b"}")),
        ("not JSON", lambda: _write(run, b'{"subject":[')),
        ("empty", lambda: _write(run, b"")),
    ]


CASES = [name for name, _ in _edits(TRIALS_RUN)]


@pytest.fixture(params=[0, 1])
def tiny_chunks(request, monkeypatch):
    if request.param:
        monkeypatch.setattr(sealer, "_LEAN_CHUNK", 2)
        monkeypatch.setattr(seal, "_LEAN_CHUNK", 2)
    return request.param


@pytest.mark.parametrize("case", CASES)
def test_seal_read_in_parts_matches_the_whole(tmp_path, monkeypatch, tiny_chunks, case):
    run = copy_run(TRIALS_RUN, tmp_path / "run")
    dict(_edits(run))[case]()
    whole = read_seal(run)
    lean = read_seal_lean(run)
    assert (lean.doc is None) == (whole.doc is None)
    if whole.doc is not None:
        assert list(lean.subjects()) == list(whole.subjects())
        assert {k: v for k, v in lean.doc.items() if k != "subject"} == {
            k: v for k, v in whole.doc.items() if k != "subject"
        }
    if case in ("compact", "blob not listed", "blob listed twice", "blob digest", "absent blob listed", "run hash"):
        assert lean.raw_subjects is not None  # these take the lean path
    if case in ("pretty", "final newline", "extra member in a subject", "name escaped", "member twice in a subject"):
        assert lean.raw_subjects is None  # and these are read whole

    # the [SEAL-6] problems over the packed table equal the oracle's over dicts
    sc = runfs.scan(run)
    sealer._hash_all(run, sc.files, sealed_only=False)
    digests = {p: (runfs.sha256_file(run / p), s) for p, s in _all_files(run).items()}
    run_doc = json.loads((run / "run.json").read_bytes())
    withheld_ok = frozenset({_other_blob("d" * 64), _blobs(TRIALS_RUN)[2]})
    for ok in (frozenset(), withheld_ok):
        mine, mine_w = seal_problems(lean, sc.files, run_doc, withheld_ok=ok)
        ref, ref_w = _seal_problems_dicts(whole.doc, digests, set(digests), run_doc, ok)
        assert sorted(set(mine)) == sorted(set(ref)) and sorted(mine_w) == sorted(ref_w)

    # the whole verification: the same outcome and problems as with the seal read whole
    v = verify_run(run)
    monkeypatch.setattr(verifier, "read_seal_lean", read_seal)
    w = verify_run(run)
    assert (v.outcome, v.problems, v.withheld, v.run_hash) == (w.outcome, w.problems, w.withheld, w.run_hash)
    if case in ("compact", "as the reference wrote it", "pretty", "final newline", "extra member in a subject",
                "extra member at the top", "digest with another member", "name escaped"):
        assert (v.outcome, v.problems) == ("intact", [])


def test_check_seal_matches_the_whole_reading(tmp_path, monkeypatch):
    run = copy_run(TRIALS_RUN, tmp_path / "run")
    d = _doc(run)
    d["subject"] = d["subject"][1:] + [d["subject"][3]]
    _write(run, d)
    lean = sealer.check_seal(run).to_json()
    monkeypatch.setattr(sealer, "read_seal_lean", read_seal)
    assert sealer.check_seal(run).to_json() == lean and lean["problems"]


# -- writing seal.json -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("chunk", [1, 2, 1024])
def test_seal_written_in_chunks_is_the_statement_dumped_whole(tmp_path, monkeypatch, chunk):
    monkeypatch.setattr(sealer, "_LEAN_CHUNK", chunk)
    run = copy_run(TRIALS_RUN, tmp_path / "run")
    ref = _doc(run)
    (run / "seal.json").unlink()
    at = ref["predicate"]["sealedAt"]
    h = seal_run(run, sealed_by=ref["predicate"]["sealedBy"], sealed_at=at)
    data = (run / "seal.json").read_bytes()
    man = sealer.build_manifest(run)
    whole = {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": p, "digest": {"sha256": hx}} for p, hx, _ in man.entries],
        "predicateType": EVIDENCE_PREDICATE,
        "predicate": predicate_for(json.loads((run / "run.json").read_bytes()), man.run_hash,
                                   ref["predicate"]["sealedBy"], at),
    }
    assert data == jsonio.dumps(whole)
    assert h == ref["predicate"]["runHash"] == man.run_hash
    assert json.loads(data) == ref
    assert read_seal_lean(run).raw_subjects is not None  # what aefgate writes is read in parts
    v = verify_run(run)
    assert (v.outcome, v.problems) == ("intact", [])


def test_writer_schema_checked_on_every_chunk(tmp_path, monkeypatch):
    # a subject the writer schema refuses, in the last chunk: refused, nothing written
    monkeypatch.setattr(sealer, "_LEAN_CHUNK", 2)
    run = copy_run(TRIALS_RUN, tmp_path / "run")
    (run / "seal.json").unlink()
    real = sealer._subject_chunks

    def spoiled(man):
        chunks = list(real(man))
        chunks[-1][-1]["digest"]["sha256"] = "NOT-HEX"
        return iter(chunks)

    monkeypatch.setattr(sealer, "_subject_chunks", spoiled)
    from aefgate.errors import Refusal

    with pytest.raises(Refusal) as e:
        seal_run(run, sealed_at="2030-01-01T00:00:00Z")
    assert e.value.rule == "SEAL-5"
    assert not (run / "seal.json").exists()


def test_seal_run_hash_reads_the_end_of_a_seal_aefgate_wrote(tmp_path, monkeypatch):
    run = copy_run(TRIALS_RUN, tmp_path / "run")
    (run / "seal.json").unlink()
    seal_run(run, sealed_by="ingest", sealed_at="2030-01-01T00:00:00Z")
    want = _doc(run)["predicate"]["runHash"]
    read_whole = []
    real = Path.read_bytes
    monkeypatch.setattr(Path, "read_bytes", lambda self: (read_whole.append(self), real(self))[1])
    assert sealer.seal_run_hash(run) == want and read_whole == []  # the subjects are not read
    # any other layout is read whole, with the same answer
    d = _doc(run)
    for data in (json.dumps(d, indent=2).encode(), jsonio.dumps({"predicate": d["predicate"], **d})):
        (run / "seal.json").write_bytes(data)
        read_whole.clear()
        assert sealer.seal_run_hash(run) == want and read_whole
