"""Shared fixtures: where ``shared/`` is, how to run the real command line, and a tiny third-party converter
distribution (for real entry-point discovery, without mocking importlib)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src"


def shared_root() -> Path:
    """``shared/`` beside the repository (CI runs in a fresh clone with a copy of shared/ beside it).

    Fails, never skips, when it is absent: tests that need the specification's examples must not pass silently
    without them.
    """
    shared = REPO.parent / "shared"
    if not (shared / "spec" / "aef").is_dir():
        pytest.fail(
            f"shared/ not found at {shared} (expected {shared / 'spec' / 'aef'}): the tests read the AEF "
            "specification's examples from the shared/ folder beside the repository; put a copy of it there",
            pytrace=False,
        )
    return shared


@pytest.fixture(scope="session")
def shared() -> Path:
    return shared_root()


@pytest.fixture(scope="session")
def spec_dir(shared: Path) -> Path:
    return shared / "spec" / "aef"


@pytest.fixture(scope="session")
def sealed_run(spec_dir: Path) -> Path:
    """A sealed valid run (outcome intact). Read only: copy it before changing anything."""
    path = spec_dir / "interop" / "examples" / "aef-inspect" / "input"
    assert (path / "run.json").is_file(), f"missing example run {path}"
    return path


@pytest.fixture
def run_copy(sealed_run: Path, tmp_path: Path) -> Path:
    """A writable copy of the sealed run (shared/ may be read-only)."""
    dst = tmp_path / "run"
    shutil.copytree(sealed_run, dst)
    for p in [dst, *dst.rglob("*")]:
        p.chmod(p.stat().st_mode | 0o200)
    return dst


# -- Inspect logs written by the real Inspect CLI (tests/_inspect_corpus.py) -------------------------------------------


@pytest.fixture(scope="session")
def inspect_cli_corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The corpus of Inspect logs (name -> path: ``match_includes.eval``, ``limits.json``, ...), built once per session.

    Read only. Under pytest-xdist the workers share one copy: it is built in the session's temporary root (the
    parent of each worker's base temp) under a lock; a worker that finds it built reuses it.
    """
    import fcntl

    from tests._inspect_corpus import build_corpus, read_corpus

    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    dest = root / "inspect-cli-corpus"
    with open(root / "inspect-cli-corpus.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            return read_corpus(dest) or build_corpus(dest)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


# -- the command line -----------------------------------------------------------------------------------------------


def cli_env(extra_path: Path | None = None, **env: str) -> dict[str, str]:
    e = dict(os.environ)
    paths = [str(SRC)] + ([str(extra_path)] if extra_path else [])
    if e.get("PYTHONPATH"):
        paths.append(e["PYTHONPATH"])
    e["PYTHONPATH"] = os.pathsep.join(paths)
    e.pop("AEFGATE_DEBUG", None)
    e["COLUMNS"] = "200"
    e.update(env)
    return e


def aefgate(*args: str | Path, extra_path: Path | None = None, env: dict[str, str] | None = None,
            cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run ``python -m aefgate ARGS`` (the real console command) and capture its output as text."""
    return subprocess.run(
        [sys.executable, "-m", "aefgate", *map(str, args)],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=cli_env(extra_path, **(env or {})),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        timeout=300,
    )


def one_json(stdout: str):
    """The stdout of a ``--json`` command: exactly one JSON value (json.loads refuses extra data)."""
    assert stdout.strip(), "nothing on stdout"
    return json.loads(stdout)


# -- a third-party converter distribution ---------------------------------------------------------------------------

THIRDPARTY_MODULE = '''
"""A third party's converters: format x (a text file) <-> aef (a folder), aef -> y (a text file)."""
from pathlib import Path

from aefgate.converters.registry import Converter, Option


def x_to_aef(src, dst, *, label="x", **_):
    dst = Path(dst)
    dst.mkdir()
    (dst / "payload.txt").write_text(Path(src).read_text() + f"|x->aef:{label}")


def aef_to_x(src, dst, **_):
    Path(dst).write_text((Path(src) / "payload.txt").read_text() + "|aef->x")


def aef_to_y(src, dst, *, upper=False, explode=False, repeat=1, **_):
    text = ((Path(src) / "payload.txt").read_text() + "|aef->y") * repeat
    Path(dst).write_text(text[: len(text) // 2])  # half written ...
    if explode:
        raise RuntimeError("the y writer exploded mid-way")
    Path(dst).write_text(text.upper() if upper else text)


def unexpected(src, dst, **_):
    raise ZeroDivisionError("a bug in a converter")


CONVERTERS = [
    Converter("x-to-aef", "x", "aef", x_to_aef, options=[Option("label", "a label to append", str, "x")],
              losses=["x's colours"], description="x files into AEF runs"),
    Converter("aef-to-x", "aef", "x", aef_to_x, description="AEF runs into x files"),
    Converter("aef-to-y", "aef", "y", aef_to_y,
              options=[("upper", "upper-case the output", bool, False),
                       {"name": "explode", "help": "fail mid-way", "type": "bool", "default": False},
                       Option("repeat", "repeat the text", int, 1)],
              losses=["line breaks", "everything but the payload"]),
]

BUGGY = Converter("z-to-aef", "z", "aef", unexpected, description="always fails with an unexpected error")
'''

THIRDPARTY_ENTRY_POINTS = """\
[aefgate.converters]
thirdparty = thirdparty_conv:CONVERTERS
buggy = thirdparty_conv:BUGGY
"""


def write_thirdparty(root: Path, *, broken: bool = False) -> Path:
    """Write the distribution ``thirdparty_conv-0.1`` (a module and its ``.dist-info``) under ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "thirdparty_conv.py").write_text(textwrap.dedent(THIRDPARTY_MODULE))
    info = root / "thirdparty_conv-0.1.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: thirdparty-conv\nVersion: 0.1\n")
    eps = THIRDPARTY_ENTRY_POINTS + ("missing = thirdparty_conv:NOT_THERE\n" if broken else "")
    (info / "entry_points.txt").write_text(eps)
    return root


@pytest.fixture
def thirdparty(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The third-party distribution, on ``sys.path`` for this test (and a fresh import of its module)."""
    root = write_thirdparty(tmp_path / "site")
    monkeypatch.delitem(sys.modules, "thirdparty_conv", raising=False)
    monkeypatch.syspath_prepend(str(root))
    return root


# -- a converter that drops a field it does not declare (the round-trip harness must catch it) ---------------

BROKEN_MODULE = '''
"""A broken Inspect exporter: it drops every sample's total_time (a case's duration) and does not say so."""
import json
from pathlib import Path

from aefgate.converters.inspect import CONVERTERS as INSPECT
from aefgate.converters.inspect.exporter import export_run
from aefgate.converters.registry import Converter
from aefgate.formats.inspect import write_log

IMPORT = [c for c in INSPECT if c.target == "aef"][0]
EXPORT = [c for c in INSPECT if c.source == "aef"][0]


def export(src, dst, **options):
    header, samples = export_run(src, output_from_evidence=True)
    for s in samples:
        s.pop("total_time", None)
    write_log(Path(dst), header, samples, fmt="json")


CONVERTERS = [
    Converter("brokenlog-to-aef", "brokenlog", "aef", IMPORT.run, IMPORT.options, IMPORT.losses,
              back_options=IMPORT.back_options, records=IMPORT.records),
    Converter("aef-to-brokenlog", "aef", "brokenlog", export, losses=EXPORT.losses, suffix=".json"),
]
'''


def write_broken(root: Path) -> Path:
    """Write the distribution ``broken_conv-0.1`` (format ``brokenlog``: Inspect's converters, its export dropping
    every sample's total_time without declaring it) under ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "broken_conv.py").write_text(textwrap.dedent(BROKEN_MODULE))
    info = root / "broken_conv-0.1.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-conv\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[aefgate.converters]\nbroken = broken_conv:CONVERTERS\n")
    return root
