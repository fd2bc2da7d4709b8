"""Writing a judge-only ASSERT run: conversations ASSERT's judge can grade without calling a target again.

The layout (what ``assert-ai run --config assert-judge-config.yaml`` reads and where it writes its scores)::

    OUT/assert-judge-config.yaml                 suite, run, artifacts_root, results_dir, pipeline.judge.model.name
    OUT/agenteval-cases.json                     position -> the case id each conversation came from
    OUT/results/<suite>/taxonomy.json            the taxonomy the judge grades against, as supplied (its bytes)
    OUT/results/<suite>/test_set.jsonl           one row per case: type, test_case_id, behavior, seed, dimensions
    OUT/results/<suite>/<run>/inference_set.jsonl  one row per case, in the shape ASSERT's inference stage writes
    OUT/results/<suite>/<run>/scores.jsonl         only the score rows an ASSERT import kept (ASSERT's judge skips them)

Cases are numbered by position (``test_case_000001``, ...); ``agenteval-cases.json`` (``schemaVersion`` 1,
``labelSet``, ``inferenceSetSha256``: the SHA-256 of the ``inference_set.jsonl`` written with it, ``cases``:
``caseId``, ``type``, ``testCaseId``) maps them back: ASSERT numbers by position, so verdicts on another file would
be matched to the wrong cases.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Iterable, Mapping

import yaml

from aefgate.formats.assert_ai.reader import CASE_MAP

__all__ = ["CONFIG", "KitCase", "positional_id", "write_judge_kit"]

CONFIG = "assert-judge-config.yaml"


def positional_id(position: int) -> str:
    """ASSERT's positional id: ``test_case_000001`` for position 1."""
    return f"test_case_{position:06d}"


class KitCase:
    """One conversation to write: the case id it came from, its inference row (``events`` and the rest; ``type``
    and ``test_case_id`` are set by the writer), and its seed and stratification levels for the test set."""

    __slots__ = ("case_id", "row", "seed", "dimensions", "test_case", "score_row", "kind")

    def __init__(self, case_id: str, row: Mapping[str, Any] | None, seed: str | None,
                 dimensions: Mapping[str, Any] | None, *, test_case: Mapping[str, Any] | None = None,
                 score_row: Mapping[str, Any] | None = None, kind: str = "prompt"):
        self.case_id = case_id
        self.row = row
        self.seed = seed
        self.dimensions = dimensions
        #: the test-set row's other members as an ASSERT import kept them (the seed's title, system prompt, ...)
        self.test_case = test_case
        #: the case's score row as an ASSERT import kept it (written to scores.jsonl), or None
        self.score_row = score_row
        #: the case's type when it has no inference row (``row`` None: a test-set row alone, a case never run)
        self.kind = kind


def _line(obj: Any) -> bytes:
    return (json.dumps(obj, ensure_ascii=False) + "\n").encode("utf-8")


def write_judge_kit(out: Path, cases: Iterable[KitCase], *, taxonomy: bytes, behavior: str, suite: str, run: str,
                    judge_model: str, assert_root: str, label_set: str) -> dict[str, Any]:
    """Write the kit into the folder ``out`` (it exists and is empty; the caller makes the writing atomic). Returns
    what was written: ``cases`` (how many), ``suite``, ``run``, the paths of the case map and the configuration."""
    suite_dir = out / "results" / suite
    run_dir = suite_dir / run
    run_dir.mkdir(parents=True)
    (suite_dir / "taxonomy.json").write_bytes(taxonomy)
    entries: list[dict[str, Any]] = []
    h = hashlib.sha256()
    scores = None
    conversations = 0
    with open(run_dir / "inference_set.jsonl", "xb") as inf, open(suite_dir / "test_set.jsonl", "xb") as ts:
        for position, c in enumerate(cases, 1):
            tcid = positional_id(position)
            if c.row is None:
                kind = c.kind if c.kind in ("prompt", "scenario") else "prompt"
                row = {"type": kind}
            else:
                kind = c.row.get("type") if c.row.get("type") in ("prompt", "scenario") else "prompt"
                row = {"type": kind, "test_case_id": tcid, **{k: v for k, v in c.row.items()
                                                               if k not in ("type", "test_case_id")}}
                data = _line(row)
                h.update(data)
                inf.write(data)
            test_row: dict[str, Any] = {"type": kind, "test_case_id": tcid, "behavior": row.get("behavior", behavior),
                                        "seed": {"title": "", "description": c.seed or ""}}
            kept = dict(c.test_case or {})
            kept_seed = kept.pop("seed", None)
            test_row.update({k: v for k, v in kept.items() if k not in ("type", "test_case_id")})
            if isinstance(kept_seed, dict):
                test_row["seed"] = {**kept_seed, "description": c.seed or ""} if "description" not in kept_seed \
                    else dict(kept_seed)
                test_row["seed"].setdefault("title", "")
            if c.dimensions:
                test_row["dimensions"] = dict(c.dimensions)
            ts.write(_line(test_row))
            if c.score_row is not None:
                if scores is None:
                    scores = open(run_dir / "scores.jsonl", "xb")
                scores.write(_line({"type": kind, "test_case_id": tcid,
                                    **{k: v for k, v in c.score_row.items() if k not in ("type", "test_case_id")}}))
            entries.append({"caseId": c.case_id, "type": kind, "testCaseId": tcid})
            conversations += c.row is not None
    if scores is not None:
        scores.close()
    case_map = {"schemaVersion": 1, "labelSet": label_set, "inferenceSetSha256": h.hexdigest(), "cases": entries}
    (out / CASE_MAP).write_bytes(json.dumps(case_map, ensure_ascii=False, indent=2).encode("utf-8") + b"\n")
    config = {"suite": suite, "run": run, "artifacts_root": assert_root, "results_dir": f"{assert_root}/results",
              "pipeline": {"judge": {"model": {"name": judge_model}}}}
    text = ("# An ASSERT judge-only run over conversations exported by aefgate (aefgate export assert).\n"
            f"# Run: assert-ai run --config {CONFIG}\n"
            "# ASSERT's judge grades results/<suite>/<run>/inference_set.jsonl against results/<suite>/taxonomy.json;\n"
            f"# {CASE_MAP} maps its positional test_case_ids back to the exported case ids.\n")
    text += yaml.safe_dump(config, sort_keys=False, allow_unicode=True, default_flow_style=False)
    (out / CONFIG).write_bytes(text.encode("utf-8"))
    return {"cases": conversations, "suite": suite, "run": run, "caseMap": str(out / CASE_MAP),
            "config": str(out / CONFIG)}
