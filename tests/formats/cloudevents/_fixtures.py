"""The AEP conformance fixtures (../shared/spec/aep/conformance/fixtures), read once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import shared_root

AEP = shared_root() / "spec" / "aep"
FIXTURES = AEP / "conformance" / "fixtures"
GOLDEN = FIXTURES / "golden" / "golden.jsonl"
CE_EXPECTED = FIXTURES / "ce-roundtrip" / "ce-expected.jsonl"
INBOUND = FIXTURES / "ce-roundtrip" / "inbound-cases.json"
ENVELOPE_SCHEMA = AEP / "schemas" / "aep-event.schema.json"


def _lines(path: Path) -> list[bytes]:
    if not path.is_file():
        pytest.fail(f"the AEP conformance fixture {path} is missing", pytrace=False)
    return path.read_bytes().splitlines()


GOLDEN_LINES = _lines(GOLDEN)
CE_LINES = _lines(CE_EXPECTED)
GOLDEN_EVENTS = [json.loads(b) for b in GOLDEN_LINES]
CE_EVENTS = [json.loads(b) for b in CE_LINES]
INBOUND_CASES = json.loads(INBOUND.read_text("utf-8"))["cases"]
PAIRS = list(zip(GOLDEN_EVENTS, CE_EVENTS))
IDS = [f"{i}:{e['type']}" for i, e in enumerate(GOLDEN_EVENTS)]


def canonical(value: object) -> str:
    """Canonical JSON for comparisons modulo member order."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
