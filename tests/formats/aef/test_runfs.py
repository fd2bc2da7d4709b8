"""runfs.sha256_file: the digest of the bytes on disk, whatever size a scan saw before."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from aefgate.formats.aef import runfs


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
