"""Fixtures of the converter tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def assert_ai_corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """ASSERT runs written by the real assert-ai with a mock model (``tests/_assert_corpus.py``), built once per
    session: ``v03/run-a``, ``v03/run-b``, ``legacy/run-a``, ``legacy/run-b`` -> run folder. Read only.

    Under pytest-xdist the workers share one copy, built in the session's temporary root (the parent of each
    worker's base temp) under a lock, in a folder named by the assert-ai version; a worker that finds it built reuses
    it. Fails (never skips) when assert-ai is not installed: it is in the ``test`` extra.
    """
    import fcntl

    from tests._assert_corpus import assert_ai_version, build_corpus, read_corpus

    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    dest = root / f"assert-ai-corpus-{assert_ai_version()}"
    with open(root / "assert-ai-corpus.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            return read_corpus(dest) or build_corpus(dest)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
