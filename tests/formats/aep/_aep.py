"""Where the AEP specification's schemas and conformance fixtures are (``../shared/spec/aep``)."""

from __future__ import annotations

import json

from tests._shared import SHARED

AEP = SHARED / "spec" / "aep"
FIXTURES = AEP / "conformance" / "fixtures"
if not (FIXTURES / "golden" / "golden.jsonl").is_file():  # pragma: no cover - a broken checkout
    raise RuntimeError(f"the AEP specification is not at {AEP}: tests need ../shared/spec/aep")
GOLDEN = FIXTURES / "golden" / "golden.jsonl"


def golden() -> list[dict]:
    return [json.loads(line) for line in GOLDEN.read_text(encoding="utf-8").splitlines()]


def cases(name: str) -> dict:
    return json.loads((FIXTURES / name / "cases.json").read_text(encoding="utf-8"))


def ids(items: list[dict], key: str = "name") -> list[str]:
    return [str(c.get(key, i)) for i, c in enumerate(items)]
