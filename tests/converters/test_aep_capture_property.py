"""No redacted-class text at a metadata ceiling (docs/mappings/aep.md AEP-8, AEP-0003 §9.1): a property over
generated runs holding secrets in result reasons, explanations (reasoning blobs) and reviewers' comments (overlay
decisions), exported as AEP events and as CloudEvents, structured and binary."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aefgate.converters.aep import exporter as aep_exporter
from aefgate.converters.cloudevents import exporter as ce_exporter
from aefgate.aef import decisions
from aefgate.aef.builder import RunBuilder
from aefgate.formats.aep import validate_event
from tests.aef.test_builder import END, HEADER, METRICS, leaf

AT = "2026-12-01T00:00:00Z"
_ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

# secrets of the shapes people leak: provider keys, tokens, e-mail addresses, passwords; long enough to be unique
secrets = st.one_of(
    st.text(_ALNUM, min_size=24, max_size=32).map(lambda s: "sk-" + s),
    st.text(_ALNUM, min_size=30, max_size=36).map(lambda s: "ghp_" + s),
    st.tuples(st.text("abcdefghijklmnopqrstuvwxyz", min_size=6, max_size=10),
              st.text("abcdefghijklmnopqrstuvwxyz", min_size=5, max_size=9)).map(lambda t: f"{t[0]}@{t[1]}.example"),
    st.text(_ALNUM, min_size=16, max_size=24).map(lambda s: "password=" + s),
)
STATES = ("passed", "failed", "warn", "error", "not_measured", "skipped")


@st.composite
def runs(draw):
    cases = []
    for i in range(draw(st.integers(1, 4))):
        lines = []
        for j in range(draw(st.integers(1, 3))):
            state = draw(st.sampled_from(STATES))
            reason = draw(secrets) if state not in ("passed", "failed", "warn") or draw(st.booleans()) else None
            lines.append((f"m{j}", state, reason, draw(secrets), draw(st.booleans())))
        cases.append((f"case-{i}", lines))
    return cases, draw(secrets), draw(st.sampled_from(["on", "off"]))


def _build(root: Path, cases, capture: str) -> tuple[Path, set[str]]:
    planted: set[str] = set()
    run = root / "run"
    with RunBuilder(run, {**HEADER, "contentCapture": capture}, metrics=METRICS) as b:
        for case_id, lines in cases:
            for path, state, reason, explanation, human in lines:
                more: dict = {}
                if reason is not None:
                    more["reason"] = f"the grader said: {reason}"
                    planted.add(reason)
                if human:
                    more["annotator"] = {"kind": "HUMAN"}
                if capture == "on" and state in ("passed", "failed", "warn"):
                    text = f"because {explanation}"
                    digest = b.add_blob(text, kind="reasoning")
                    more["reasoning"] = {"blob": digest, "bytes": len(text.encode())}
                    planted.add(explanation)
                node = leaf(path, state, **more)
                if state in ("not_measured", "skipped", "error"):
                    node["reason"] = more["reason"]  # leaf() writes a reason of its own for these
                b.add_case(case_id, node)
        b.finish(ended_at=END, seal="producer")
    return run, planted


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runs())
def test_no_redacted_class_text_at_a_metadata_ceiling(generated) -> None:
    cases, comment, capture = generated
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        run, planted = _build(root, cases, capture)
        decisions.decide(run, kind="annotate", by="reviewer-9", reason=f"note: {comment}", at=AT)
        planted.add(comment)
        outputs = {
            "aep": aep_exporter.to_aep(run, root / "events.jsonl"),
            "structured": ce_exporter.to_cloudevents(run, root / "ce.jsonl"),
            "binary": ce_exporter.to_cloudevents(run, root / "bin.jsonl", mode="binary"),
        }
        for name, path in outputs.items():
            data = path.read_bytes()
            assert data, name
            for secret in planted:
                assert secret.encode() not in data, (name, secret)
        import json

        events = [json.loads(x) for x in outputs["aep"].read_text().splitlines()]
        assert all(e["capture"] in ("metadata", "none") for e in events)
        assert all(validate_event(e) is None for e in events)
        # the same run at full capture does carry them (when the run kept content): the property is not vacuous
        if capture == "on":
            # (AEP-9: a line's text is its reason, else its reasoning blob's)
            full = aep_exporter.to_aep(run, root / "full.jsonl", max_capture="full").read_bytes()
            texts = {reason if reason is not None else explanation
                     for _, lines in cases for _, state, reason, explanation, _ in lines
                     if reason is not None or state in ("passed", "failed", "warn")}
            assert all(secret.encode() in full for secret in texts | {comment})
