"""The §9.3 ``produce`` operation: a §9.2.1 scenario -> a run folder, written by :class:`RunBuilder`.

A scenario is the facts a producer has when it writes a closed run, and nothing it must derive::

    {"run": <run.json, closed>, "metrics": <metrics.json>,
     "cases": [<node with its caseId>, ...],        # one per case and root path
     "summary": <a summarize request: {"lanes": [{"lane", "metrics": [{"metric", "path", ...}]}]}>}

A node holds ``path``, ``evaluator``, ``state`` and optionally ``scores``, ``severity``, ``reason``, ``lane`` (and
any other result member), ``component`` on every child and only there, ``aggregation`` facts (``strategy``,
``rulePath``, optionally ``threshold``, ``score``, ``decisive`` child paths) on every node with children, and
``children``. A case run in trials also has ``trials`` (``aggregation``, and ``k`` for ``PassAtK``) and ``trees``:
one node per trial, in trial order, each at the case's ``path``; the case's own node and its children are then its
rollups. ``trees`` is read beside ``trials`` on the case node, or inside it (``trials.trees``).

The run is written by :class:`~aefgate.aef.builder.RunBuilder` in its as-given mode: ``run.json`` and
``metrics.json`` exactly as given, ``results.ndjson`` and ``summary.json``, and nothing else. Every input error of
§9.3 is a :class:`~aefgate.errors.Refusal` (exit 2) and nothing is written.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from aefgate.errors import Refusal
from aefgate.aef.builder import RunBuilder

__all__ = ["produce"]

_RULE = "CONF-3"  # a scenario not of the shape §9.2.1 gives


def _shape(message: str, where: str = "scenario") -> Refusal:
    return Refusal(_RULE, f"the scenario is not of the §9.2.1 shape: {message}", where)


def produce(scenario: Mapping[str, Any], out_dir: str | os.PathLike[str]) -> int:
    """Write the run ``scenario`` describes into ``out_dir`` (absent or empty); return its number of result lines.

    Refused (:class:`Refusal`, exit 2, nothing written): a scenario not of the §9.2.1 shape; a run that is not
    closed; a ``pending`` node ([RES-3]); a child whose ``path`` is not its parent's and one more level; a
    ``decisive`` path that is no child's ([RES-6]); a node with children and no ``aggregation``, or a child without
    ``component`` ([RES-5]); a trial tree rooted elsewhere than its case, or a path the case's tree and its trial
    trees do not both have ([RES-8]); two lines of one case at one path and trial ([RES-4]); the input errors of
    ``summarize``; and anything that would make a file invalid against its writer schema (``VER-2``).
    """
    if not isinstance(scenario, Mapping):
        raise _shape("it is not a JSON object")
    for key, typ, name in (("run", Mapping, "an object"), ("metrics", Mapping, "an object"),
                           ("cases", list, "a list"), ("summary", Mapping, "an object")):
        if key not in scenario:
            raise _shape(f"it has no {key!r}")
        if not isinstance(scenario[key], typ):
            raise _shape(f"{key!r} is not {name}", f"scenario/{key}")
    run = scenario["run"]
    if run.get("status") not in ("completed", "aborted"):
        raise Refusal(
            "RUN-5", f"the scenario's run is not closed (status {run.get('status')!r})", "scenario/run/status"
        )

    cases: list[tuple[str, dict[str, Any], Any, Any, Any]] = []
    for i, case in enumerate(scenario["cases"]):
        where = f"scenario/cases/{i}"
        if not isinstance(case, Mapping):
            raise _shape("a case is a node object", where)
        node = dict(case)  # a shallow copy: the scenario is never modified
        case_id = node.pop("caseId", None)
        if not isinstance(case_id, str) or not case_id:
            raise _shape("a case's node has its caseId (a non-empty string)", where)
        trials = node.pop("trials", None)
        trees = node.pop("trees", None)
        aggregation = k = None
        if trials is not None:
            if not isinstance(trials, Mapping):
                raise _shape("trials is an object (aggregation, k)", where + "/trials")
            unknown = set(trials) - {"aggregation", "k", "trees"}
            if unknown:
                raise _shape(f"trials holds {sorted(unknown)}", where + "/trials")
            if "trees" in trials:
                if trees is not None:
                    raise _shape("trees is given twice", where)
                trees = trials["trees"]
            aggregation = trials.get("aggregation")
            k = trials.get("k")
            if not isinstance(trees, list):
                raise _shape("a case run in trials has trees: one node per trial", where)
        elif trees is not None:
            raise _shape("trees without trials (the rollups' aggregation)", where)
        cases.append((case_id, node, trees, aggregation, k))

    with RunBuilder(out_dir, run, metrics=scenario["metrics"], as_given=True, strict_paths=True) as b:
        for case_id, node, trees, aggregation, k in cases:
            b.add_case(case_id, node, trees, aggregation=aggregation, k=k)
        built = b.finish(summary=scenario["summary"])
    return built.results
