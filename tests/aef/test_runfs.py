"""runfs.sha256_file: the digest of the bytes on disk, whatever size a scan saw before."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from aefgate.aef import runfs


@pytest.mark.parametrize("size", [0, 1, 300, (1 << 20) - 1, 1 << 20, (1 << 20) + 7, 3 * (1 << 20)])
def test_sha256_file_with_and_without_a_size_hint(tmp_path: Path, size: int) -> None:
    data = bytes(i % 251 for i in range(size))
    p = tmp_path / "f"
    p.write_bytes(data)
    want = hashlib.sha256(data).hexdigest()
    assert runfs.sha256_file(p) == want
    assert runfs.sha256_file(p, size_hint=size) == want


@pytest.mark.parametrize("hint", [0, 10, 299])
def test_a_file_longer_than_its_hint_is_hashed_whole(tmp_path: Path, hint: int) -> None:
    """A file that grew after the scan: the digest is still of every byte, so the change is seen."""
    data = b"x" * 300 + b"y" * (2 << 20)
    p = tmp_path / "f"
    p.write_bytes(data)
    assert runfs.sha256_file(p, size_hint=hint) == hashlib.sha256(data).hexdigest()


# -- the table of files, in memory and on disk (runfs.Files) ----------------------------------------------------


def _blob(rnd) -> str:
    return runfs.blob_path(bytes(rnd.randrange(256) for _ in range(32)).hex())


@pytest.mark.parametrize("limit", ["0", "1", "3", "64", "100000"])
@pytest.mark.parametrize("count", [0, 1, 63, 64, 65, 700])
def test_files_table_in_memory_or_on_disk_is_the_dict(monkeypatch, limit, count):
    import heapq
    import random

    rnd = random.Random(count * 7 + len(limit))
    monkeypatch.setenv("AEFGATE_SPILL_FILES", limit)
    ref: dict[str, int] = {}
    for i in range(count):
        ref[_blob(rnd)] = rnd.randrange(1 << 40)
    others = {"run.json": 5, "blobs/sha256/zz/" + "a" * 64: 3, "blobs/sha256/ab/notahash": 1, "ext/x": 0}
    ref.update(others)
    files = runfs.Files()
    keys = list(ref)
    rnd.shuffle(keys)
    for p in keys:
        files.add(p, ref[p])
    files.freeze()
    assert files.on_disk == (count > int(limit))
    blobs = sorted(p for p in ref if p not in others)
    assert files.n == len(blobs) and files.other == others and len(files) == len(ref)
    assert list(files.blob_paths()) == blobs
    assert [bytes.fromhex(p[-64:]) for p in blobs] == list(files.blob_keys())
    assert list(files.blob_items()) == [(i, p, ref[p]) for i, p in enumerate(blobs)]
    assert dict(files.items()) == ref and sorted(files) == sorted(ref)
    for i, p in enumerate(blobs):
        assert files.blob_index(p) == i and files.blob_path(i) == p and files[p] == ref[p] and p in files
    absent = [_blob(rnd) for _ in range(50)] + [runfs.blob_path("00" * 32), runfs.blob_path("ff" * 32)]
    absent += [p[:-1] + ("0" if p[-1] != "0" else "1") for p in blobs[:20]]
    for p in absent:
        if p not in ref:
            assert files.blob_index(p) == -1 and p not in files and files.get(p, 7) == 7
    # digests: some blobs hashed, some not; the sealed entries are the hashed ones in path order
    dg = runfs.Digests(files)
    hashed = {}
    for i, p in enumerate(blobs):
        if i % 3:
            h = bytes(rnd.randrange(256) for _ in range(32)).hex()
            if i % 2:
                dg[p] = (h, ref[p])
            else:
                files.set_blob_digest(i, bytes.fromhex(h))
            hashed[p] = (h, ref[p])
    dg["run.json"] = ("c" * 64, 5)
    for p in blobs:
        assert dg.get(p) == hashed.get(p) and (p in dg) == (p in hashed)
    assert list(files.unhashed()) == [(i, p) for i, p in enumerate(blobs) if p not in hashed]
    want = heapq.merge([("run.json", "c" * 64, 5)], [(p, h, s) for p, (h, s) in sorted(hashed.items())],
                       key=lambda e: e[0].encode())
    assert list(files.sealed_entries()) == list(want)
    files.close()


def _lookups(files, paths, q) -> None:
    q.put([files.get(p) for p in paths])


def test_files_table_on_disk_read_in_a_forked_process(monkeypatch):
    import multiprocessing
    import random

    if "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("fork only")
    rnd = random.Random(5)
    monkeypatch.setenv("AEFGATE_SPILL_FILES", "10")
    ref = {_blob(rnd): i for i in range(300)}
    files = runfs.Files()
    for p, s in ref.items():
        files.add(p, s)
    files.freeze()
    assert files.on_disk
    probes = list(ref) + [_blob(rnd) for _ in range(30)]
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    proc = ctx.Process(target=_lookups, args=(files, probes, q))
    proc.start()
    assert q.get(timeout=60) == [ref.get(p) for p in probes]
    proc.join(60)
