"""Fixtures of the converter tests."""

from __future__ import annotations

import os
import threading
from concurrent.futures import Future
from pathlib import Path

import pytest

#: the corpus build started in the background at the end of collection (see ``pytest_collection_finish``)
_CORPUS: dict[str, Future] = {}


def _corpus_dest(factory: pytest.TempPathFactory) -> Path:
    from tests._assert_corpus import assert_ai_version

    root = factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    return root / f"assert-ai-corpus-{assert_ai_version()}"


def _read_or_build(dest: Path) -> dict[str, Path]:
    """The corpus in ``dest``: read when this assert-ai version built it there, else built, under a lock (one
    builder per session; a worker that finds it built reuses it)."""
    import fcntl

    from tests._assert_corpus import build_corpus, read_corpus

    with open(dest.parent / "assert-ai-corpus.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            return read_corpus(dest) or build_corpus(dest)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _start(factory: pytest.TempPathFactory) -> Future:
    if "job" not in _CORPUS:
        job: Future = Future()
        dest = _corpus_dest(factory)

        def run() -> None:
            try:
                job.set_result(_read_or_build(dest))
            except BaseException as e:  # noqa: BLE001 - handed to the fixture, which raises it in the test
                job.set_exception(e)

        threading.Thread(target=run, name="assert-ai-corpus", daemon=True).start()
        _CORPUS["job"] = job
    return _CORPUS["job"]


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start building the assert-ai corpus as soon as a collected test needs it: the build is assert-ai's own
    command line in a child process (~6 s of CPU, most of it importing LiteLLM), and in the background the worker
    runs the tests that do not need it meanwhile instead of waiting for it at the first test that does."""
    factory = getattr(session.config, "_tmp_path_factory", None)
    if factory is not None and any("assert_ai_corpus" in getattr(item, "fixturenames", ()) for item in session.items):
        _start(factory)


@pytest.fixture(scope="session")
def assert_ai_corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """ASSERT runs written by the real assert-ai with a mock model (``tests/_assert_corpus.py``), built once per
    session: ``v03/run-a``, ``v03/run-b``, ``legacy/run-a``, ``legacy/run-b`` -> run folder. Read only.

    Under pytest-xdist the workers share one copy, built in the session's temporary root (the parent of each
    worker's base temp) under a lock, in a folder named by the assert-ai version; a worker that finds it built reuses
    it. The build starts in the background when collection ends (:func:`pytest_collection_finish`); this waits for
    it. Fails (never skips) when assert-ai is not installed: it is in the ``test`` extra.
    """
    return _start(tmp_path_factory).result(timeout=600)
