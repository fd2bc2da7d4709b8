"""Where the shared specification and samples are, for tests (CI lays ../shared beside the clone)."""

from __future__ import annotations

import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = (REPO.parent / "shared").resolve()
if not (SHARED / "spec" / "aef").is_dir():  # pragma: no cover - a broken checkout
    raise RuntimeError(f"the shared specification is not at {SHARED}: tests need ../shared beside the checkout")
AEF = SHARED / "spec" / "aef"
EXAMPLES = AEF / "interop" / "examples"
CONFORMANCE = AEF / "conformance"
SAMPLES = SHARED / "samples"
# the complete, sealed example runs (../shared/spec/README.md)
SEALED_EXAMPLE_RUNS = [
    CONFORMANCE / "valid" / "completed-eval" / "run",
    EXAMPLES / "aef-inspect" / "run",
    EXAMPLES / "aef-inspect-edges" / "run",
    EXAMPLES / "inspect-aef" / "run",
    EXAMPLES / "inspect-aef" / "run-off",
    EXAMPLES / "inspect-aef-edges" / "run",
    EXAMPLES / "otel-aef" / "run",
    EXAMPLES / "aef-otel-aef" / "run",
    EXAMPLES / "aef-otel-aef-redteam" / "run",
]


def copy_run(src: Path, dst: Path) -> Path:
    """A writable copy of a run folder (the shared files are read-only)."""
    shutil.copytree(src, dst)
    for p in [dst, *dst.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)
    return dst
