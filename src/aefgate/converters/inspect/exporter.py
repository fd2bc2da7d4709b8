"""AEF -> Inspect (interop/inspect.md, "AEF -> Inspect", rules IN-1 to IN-5, IN-11 to IN-13).

:func:`to_inspect` verifies the run (:func:`~aefgate.aef.verifier.verify_run`; a run that does not verify is
refused, IN-11, exit 1), maps it (:func:`export_run`, pure: a header and a list of samples) and writes it with
:func:`aefgate.formats.inspect.write_log` (``.json`` or ``.eval`` by the output's suffix). A run imported with
``lossless`` (its ``ext/inspect_ai/`` files, :class:`_Kept`) is exported as the log it came from: the mapped fields
from its lines and blobs, the rest from what the import kept (docs/mappings/inspect.md, "Lossless round trips").
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any


from aefgate.converters.aigp import calibrated_models, grader_of
from aefgate.converters.checks import CollectLines, verified
from aefgate.converters.inspect.importer import _case_id
from aefgate.errors import EXIT_INTEGRITY, Refusal
from aefgate.progress import task as progress_task
from aefgate.aef import jsonio
from aefgate.aef.times import parse_time
from aefgate.formats.inspect import write_log
from aefgate.formats.inspect.jsontext import loads
from aefgate.fsutil import check_file_destination
from aefgate.converters.inspect.conventions import (CONTENT_KIND, KEPT_HEADER, KEPT_REDUCTIONS, KEPT_SAMPLES, LETTERS,
                                               READ_VERSIONS, TOKENS, _REDUCERS_EXPORT, decode_name)


# ------------------------------------------------------------------------------------------------------------------
# AEF -> Inspect
# ------------------------------------------------------------------------------------------------------------------


def _inspect_usage(members: Mapping[str, Any]) -> dict[str, Any]:
    """AEF usage members as a ModelUsage: ``total_tokens`` is input + output, written when either is present; a
    missing count is left out, never 0 (R7I-4)."""
    out: dict[str, Any] = {}
    for src, dst in TOKENS:
        if dst in members:
            out[src] = members[dst]
    if "input_tokens" in out or "output_tokens" in out:
        out["total_tokens"] = out.get("input_tokens", 0) + out.get("output_tokens", 0)
    if "costUsd" in members:
        out["total_cost"] = members["costUsd"]
    return out


def _sum_into(table: dict[str, dict[str, Any]], key: str, entry: Mapping[str, Any]) -> None:
    acc = table.setdefault(key, {})
    for _, dst in TOKENS:
        if dst in entry:
            acc[dst] = acc.get(dst, 0) + entry[dst]
    if "costUsd" in entry:
        acc["costUsd"] = acc["costUsd"] + entry["costUsd"] if "costUsd" in acc else entry["costUsd"]


def _reducer_name(trials: Mapping[str, Any], policy: Mapping[str, Any], where: str) -> str:
    agg = trials.get("aggregation")
    if agg in _REDUCERS_EXPORT:
        return _REDUCERS_EXPORT[agg]
    if agg == "PassAtK":
        k = trials.get("k", policy.get("k"))
        if not isinstance(k, int):
            raise Refusal("IN-1", "a PassAtK rollup without k has no Inspect reducer", where)
        return f"pass_at_{k}"
    if agg == "AnyPass":
        return "at_least_1"
    if agg == "AllPass":
        return f"at_least_{trials['n']}"
    if agg == "AtLeast":
        rp = policy.get("requirePasses")
        if not isinstance(rp, int):
            raise Refusal("IN-1", "an AtLeast rollup without the run's requirePasses has no Inspect reducer", where)
        return f"at_least_{rp}"
    raise Refusal("IN-1", f"the aggregation {agg!r} has no Inspect reducer", where)


def _config_reducer(policy: Mapping[str, Any]) -> str | None:
    agg = policy.get("aggregation")
    if agg is None:
        return None
    if agg in _REDUCERS_EXPORT:
        return _REDUCERS_EXPORT[agg]
    if agg == "PassAtK":
        k = policy.get("k")
        return f"pass_at_{k}" if isinstance(k, int) else None
    if agg == "AnyPass":
        return "at_least_1"
    if agg == "AllPass":
        return f"at_least_{policy.get('trialsPerCase')}"  # R7I-7: n, the policy's trialsPerCase
    if agg == "AtLeast":
        rp = policy.get("requirePasses")
        return f"at_least_{rp}" if isinstance(rp, int) else None
    return None


class _Blobs:
    """The run's blobs, read as text (IN-12): not UTF-8 refuses the export; a withheld blob is None."""

    def __init__(self, run_dir: Path, withheld: frozenset[str]):
        self.run_dir = run_dir
        self.withheld = withheld

    def text(self, digest: str, where: str) -> str | None:
        hexd = digest[7:] if digest.startswith("sha256:") else digest
        rel = f"blobs/sha256/{hexd[:2]}/{hexd}"
        p = self.run_dir / rel
        if not p.is_file():
            if rel in self.withheld:
                return None  # R7I-9: left out, with nothing in its place
            raise Refusal("IN-11", f"the blob {rel} is not in the run", where, exit_code=EXIT_INTEGRITY)
        data = p.read_bytes()
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise Refusal("IN-12", f"the blob {digest} is not UTF-8: Inspect holds text", where) from None


def _score_of(line: Mapping[str, Any], blobs: _Blobs, content_on: bool, where: str,
              aigp: frozenset[str] | None = None, label_values: bool = False) -> dict[str, Any]:
    """A result line as an Inspect Score (R7I-2, IN-2, IN-13); with ``aigp`` (the run's calibrated judges), its AIGP
    grader too, as ``metadata.aigp.grader`` (docs/mappings/aigp.md: Inspect's Score has no field for it)."""
    scores = line.get("scores") or []
    score: dict[str, Any] = {}
    # label_values (aefgate's extension): a label Inspect's import cannot read (IN-7) is written as the value
    labels = {s["metric"]: s["label"] for s in scores
              if label_values and "label" in s and s["label"] not in LETTERS and "value" in s}
    if len(scores) == 1:
        s = scores[0]
        score["value"] = s["label"] if "label" in s and s["metric"] not in labels else s["value"]
    elif len(scores) > 1:
        score["value"] = {s["metric"]: (s["label"] if "label" in s and s["metric"] not in labels else s["value"])
                          for s in scores}
    else:
        score["value"] = math.nan
        score["reason"] = line["state"]
    if content_on:
        if line.get("reason"):
            score["explanation"] = line["reason"]
        elif isinstance(line.get("reasoning"), dict):
            text = blobs.text(line["reasoning"]["blob"], where)
            if text is not None:
                score["explanation"] = text
    aef: dict[str, Any] = {"resultId": line["resultId"], "state": line["state"], "evaluator": line["evaluator"]}
    for k in ("parentResultId", "severity", "verdictRule", "annotator", "aggregation", "component"):
        if line.get(k) is not None:
            aef[k] = line[k]
    if labels:
        aef["labels"] = labels
    score["metadata"] = {"aef": aef}
    if aigp is not None:
        g = grader_of(line, aigp)
        if g is not None:
            score["metadata"]["aigp"] = {"grader": g}
    return score


def _check_overlays(run_dir: Path) -> bool:
    p = run_dir / "overlays" / "events.ndjson"
    try:
        return p.is_file() and p.stat().st_size > 0
    except OSError:
        return False


def export_run(
    run_dir: str | os.PathLike[str], *, ignore_overlays: bool = False, withheld_ok: Iterable[str] = (),
    output_from_evidence: bool = False, map_scorers: bool = False, grader_types: bool = False,
    task: str | None = None, model: str | None = None, case_times: str | None = None,
    omit_unscored: bool = False, label_values: bool = False,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """AEF -> Inspect, pure: the EvalLog header (with ``reductions``) and the samples of a run, NaN as float NaN.

    A sample whose lines cite output or transcript evidence is refused (IN-5) unless ``output_from_evidence``:
    then its output (and messages) are rebuilt from that evidence, aefgate's extension
    (docs/mappings/inspect.md, "Output from evidence"). A path summarized for several metrics is refused (IN-3)
    unless ``map_scorers`` (:func:`_results`).

    The run must verify (IN-11: intact or unsealed, with no problem but an authorized withhold; ``withheld_ok``
    are the blob paths an authorized redaction withholds). Refusals name the page's rule (IN-1 to IN-5, IN-11,
    IN-12); a run that does not verify is refused with exit code 1.

    aefgate's extensions where the page refuses (docs/mappings/inspect.md): ``case_times="span"`` gives a sample
    whose root lines carry different times the span of them (IN-5); ``omit_unscored`` leaves out of ``results`` a
    summary entry whose metric no line at its path scores, which ``map_scorers`` cannot write (IN-3);
    ``label_values`` writes a score whose label is not one of Inspect's letters as its value (the label in
    ``Score.metadata.aef.labels``), which the import reads back (the page's import refuses such a label, IN-7)."""
    root = Path(run_dir)
    collected, withheld = _verified_lines(root, case_times, withheld_ok, ignore_overlays)
    run = collected.run
    blobs = _Blobs(root, withheld)
    content_on = run.get("contentCapture") != "off"
    if grader_types:
        aigp: frozenset[str] | None = calibrated_models(run)
    else:
        aigp = None
    suite, judges, task, model = _task_and_model(run, task, model)
    policy = suite.get("executionPolicy") or {}

    ev: dict[str, Any] = {"eval_id": run["runId"], "run_id": run["runId"], "created": run["startedAt"],
                          "task": task, "task_version": suite.get("version", 0)}
    config = _epochs_config(policy)
    meta = _aef_metadata(run, suite, judges)
    producer = run.get("producer") or {}
    packages = {producer["name"]: producer.get("version", "")} if producer.get("name") else {}

    kept = _Kept.read(root)  # a run imported with lossless: what the import kept (docs/mappings/inspect.md)
    evidence = _evidence_records(root)
    lines, collected.lines = collected.lines, []
    groups, reductions, case_ids, scored = _group_lines(lines, policy, blobs, content_on, aigp, label_values)
    samples = _export_samples(groups, kept, evidence, blobs, content_on, output_from_evidence, model, aigp,
                              case_times == "span", label_values)
    ev["dataset"] = {"samples": len(case_ids), "sample_ids": list(case_ids)}
    ev["model"] = model
    if judges:
        ev["model_roles"] = {"judge": {"model": judges[0]["model"]}}
    trials = max((trial for _, trial in groups), default=0) + 1
    if "epochs" not in config and trials > 1:  # trial lines without a policy: the epochs the samples have (aefgate)
        config["epochs"] = trials
    if config.get("epochs", 1) > 1 and kept is None:
        _mark_cases_run_once(groups, samples)
    _add_what_made_the_run(run, ev, config)
    ev["config"] = config
    ev["packages"] = packages
    if map_scorers:  # the import reads an EvalScore named for a metric at its scorer's path when that is a scorer
        ev["scorers"] = [{"name": path} for path in dict.fromkeys(line["path"] for lines in groups.values()
                                                                  for line in lines)]
    if meta:
        ev["metadata"] = {"aef": meta}
    header = _log_header(root, run, ev, kept, len(samples), map_scorers, scored, omit_unscored, reductions)
    if kept is not None:
        return kept.restore(header, samples)
    return header, samples


def _verified_lines(root: Path, case_times: str | None, withheld_ok: Iterable[str],
                    ignore_overlays: bool) -> tuple[CollectLines, frozenset[str]]:
    """The run read once, as its verification checked it (IN-11), with its lines, and the withheld blob paths;
    refused without run.json, with an unknown ``case_times``, or with overlay events unless ``ignore_overlays``
    (IN-4)."""
    if not (root / "run.json").is_file():
        raise Refusal("RUN-1", "not a run folder (a run is a folder holding run.json)", str(root))
    if case_times not in (None, "", "span"):
        raise Refusal("CONV-3", f"option 'case_times' takes span, not {case_times!r}", "option 'case_times'")
    withheld = frozenset(withheld_ok)
    collected = CollectLines("IN-11")  # the run read once: its lines as the verification checked them
    verified(root, "IN-11", mapper=collected, withheld_ok=withheld)
    if _check_overlays(root) and not ignore_overlays:
        raise Refusal("IN-4", "the run has overlay events, whose Score.history and log_updates shape the page does "
                              "not give; the option 'ignore_overlays' converts the sealed lines without them",
                      "overlays/events.ndjson")
    return collected, withheld


def _task_and_model(run: Mapping[str, Any], task: str | None,
                    model: str | None) -> tuple[dict[str, Any], list[Any], str, str]:
    """eval.task and eval.model (IN-1, R7I-8): the suite (an empty one without), the judges, the task's and the
    model's names (the options ``task`` and ``model`` where the run does not give them)."""
    suite = run.get("suite")
    has_suite = isinstance(suite, dict) and str(suite.get("ref", "")).startswith("suite:")
    if task is not None and (not isinstance(task, str) or not task):
        raise Refusal("IN-1", "the option 'task' is an Inspect task name (a non-empty string)", "task")
    if not has_suite and task is None:
        raise Refusal("IN-1", "eval.task is required: the run has no suite, or its ref is not suite:<task>; give "
                              "the option 'task' (the Inspect task name, aefgate's extension)", "run.json/suite")
    suite = suite if isinstance(suite, dict) else {}
    task = task if task is not None else decode_name(suite["ref"][len("suite:"):])
    judges = run.get("judges") or []
    if len(judges) > 1:
        raise Refusal("IN-1", f"{len(judges)} judges: a role of eval.model_roles holds one model", "run.json/judges")
    subject = run["subject"]
    kind, _, name = subject["ref"].partition(":")
    if model is not None and (not isinstance(model, str) or not model):
        raise Refusal("IN-1", "the option 'model' is an Inspect model name (a non-empty string)", "model")
    if kind == "model":
        model = decode_name(name)  # (the option names a model for a run whose subject is none)
    elif model is None:
        model = f"{kind}:{decode_name(name)}"  # R7I-8
    return suite, judges, task, model


def _epochs_config(policy: Mapping[str, Any]) -> dict[str, Any]:
    """eval.config's epochs and epochs_reducer, from the suite's executionPolicy."""
    config: dict[str, Any] = {}
    if "trialsPerCase" in policy:
        config["epochs"] = policy["trialsPerCase"]
    reducer = _config_reducer(policy)
    if reducer is not None:
        config["epochs_reducer"] = [reducer]
    return config


def _add_what_made_the_run(run: Mapping[str, Any], ev: dict[str, Any], config: dict[str, Any]) -> None:
    """What made the run, as an import keeps it in run.json's ext (aefgate's extension, docs/mappings/inspect.md),
    into ``ev`` and its limits into ``config``."""
    made = (run.get("ext") or {}).get("inspect_ai") or {}
    for src_key, dst in (("generate_config", "model_generate_config"), ("task_args", "task_args"),
                         ("sandbox", "sandbox"), ("model_base_url", "model_base_url"), ("tags", "tags")):
        if made.get(src_key):
            ev[dst] = made[src_key]
    if isinstance(made.get("limits"), dict):
        config.update(made["limits"])


def _aef_metadata(run: Mapping[str, Any], suite: Mapping[str, Any], judges: list[Any]) -> dict[str, Any]:
    """eval.metadata.aef: the suite's digest, the judges' rubrics and calibrations, and the run's members Inspect
    has no field for."""
    meta: dict[str, Any] = {}
    if suite.get("digest") is not None:
        meta["suite"] = {"digest": suite["digest"]}
    if any("rubricDigest" in j or "calibration" in j for j in judges):
        meta["judges"] = [{k: j[k] for k in ("model", "rubricDigest", "calibration") if k in j} for j in judges]
    for k in ("execution", "contentCapture", "deployment", "imported"):
        if run.get(k) is not None:
            meta[k] = run[k]
    return meta


def _group_lines(lines: list[tuple[int, dict[str, Any]]], policy: Mapping[str, Any], blobs: _Blobs, content_on: bool,
                 aigp: frozenset[str] | None, label_values: bool) -> tuple[
        dict[tuple[str, int], list[dict[str, Any]]], dict[tuple[str, str], dict[str, Any]], dict[str, None],
        dict[str, set[str]]]:
    """The result lines grouped into samples ((caseId, trial) -> lines) and reductions (the rollups), with the
    case ids in order and, per path, the metrics its lines score."""
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    reductions: dict[tuple[str, str], dict[str, Any]] = {}
    case_ids: dict[str, None] = {}
    scored: dict[str, set[str]] = {}  # path -> the metrics its lines score
    for lineno, line in lines:
        where = f"results.ndjson:{lineno}"
        case_ids.setdefault(line["caseId"], None)
        scored.setdefault(line["path"], set()).update(s["metric"] for s in line.get("scores") or ())
        if "trials" in line:
            red_name = _reducer_name(line["trials"], policy, where)
            red = reductions.setdefault((line["path"], red_name),
                                        {"scorer": line["path"], "reducer": red_name, "samples": []})
            s = _score_of(line, blobs, content_on, where, aigp, label_values)
            s["sample_id"] = line["caseId"]
            red["samples"].append(s)
            continue
        key = (line["caseId"], line.get("trial", 0))
        groups.setdefault(key, []).append(line)
    return groups, reductions, case_ids, scored


def _export_samples(groups: dict[tuple[str, int], list[dict[str, Any]]], kept: _Kept | None, evidence: Any,
                    blobs: _Blobs, content_on: bool, output_from_evidence: bool, model: str,
                    aigp: frozenset[str] | None, span: bool, label_values: bool) -> list[dict[str, Any]]:
    """Each group of lines as an Inspect sample; one the import kept (lossless) restored from what it kept."""
    with progress_task("export samples", len(groups), "samples") as bar:
        samples = []
        for (case, trial), lines in groups.items():
            residue = kept.samples.get((case, trial + 1)) if kept is not None else None
            sample = _sample(case, trial, lines, evidence, blobs, content_on,
                             output_from_evidence or residue is not None, model, aigp=aigp,
                             span=span, label_values=label_values)
            if residue is not None:
                sample = _restored_sample(sample, residue[1], lines, evidence, blobs, content_on, aigp)
            samples.append(sample)
            bar.advance()
    return samples


def _mark_cases_run_once(groups: dict[tuple[str, int], list[dict[str, Any]]], samples: list[dict[str, Any]]) -> None:
    """A case run once in a run with trials (aefgate's extension): its Scores say so (metadata.aef.trial null), so
    that the import does not read its sample as epoch 1 of trials without a reduction (IN-8, RES-8)."""
    for ((case, _trial), glines), sample in zip(groups.items(), samples):
        if all("trial" not in line for line in glines):
            for score in sample["scores"].values():
                score["metadata"]["aef"]["trial"] = None


def _log_header(root: Path, run: Mapping[str, Any], ev: dict[str, Any], kept: _Kept | None, n_samples: int,
                map_scorers: bool, scored: dict[str, set[str]], omit_unscored: bool,
                reductions: dict[tuple[str, str], dict[str, Any]]) -> dict[str, Any]:
    """The EvalLog header around ``ev``: status, results (from summary.json, but for a kept log), stats, error
    and reductions."""
    status = {"completed": "success", "aborted": "error", "running": "started"}[run["status"]]
    header: dict[str, Any] = {"version": 2, "status": status, "eval": ev}
    summary_path = root / "summary.json"
    if summary_path.is_file() and kept is None:  # (a kept log's results are Inspect's, as written)
        header["results"] = _results(jsonio.read_json(summary_path), jsonio.read_json(root / "metrics.json"),
                                     n_samples, map_scorers, scored, omit_unscored)
    header["stats"] = _stats(run, summary_path)
    if run["status"] == "aborted":
        header["error"] = {"message": run.get("abortReason", ""), "traceback": "", "traceback_ansi": ""}
    if reductions:
        header["reductions"] = list(reductions.values())
    return header


def _stats(run: Mapping[str, Any], summary_path: Path) -> dict[str, Any]:
    """EvalStats: the run's times, and the summary's usage by model and by role."""
    stats: dict[str, Any] = {"started_at": run["startedAt"]}
    if run.get("endedAt") is not None:
        stats["completed_at"] = run["endedAt"]
    if summary_path.is_file():
        usage = jsonio.read_json(summary_path).get("usage") or []
        by_role: dict[str, dict[str, Any]] = {}
        by_model: dict[str, dict[str, Any]] = {}
        for u in usage:
            _sum_into(by_role, u["role"], u)
            if u.get("model"):
                _sum_into(by_model, u["model"], u)
        if by_model:
            stats["model_usage"] = {m: _inspect_usage(u) for m, u in by_model.items()}
        if by_role:
            stats["role_usage"] = {r: _inspect_usage(u) for r, u in by_role.items()}
    return stats


class _Kept:
    """What an import with ``lossless`` kept in the run's ``ext/`` files ([RUN-2]): the log's header, per sample what
    its lines and blobs do not hold, and the reductions (docs/mappings/inspect.md, "Lossless round trips")."""

    def __init__(self, header: dict[str, Any], samples: dict[tuple[str, int], tuple[int, dict[str, Any]]],
                 reductions: Any, has_reductions: bool):
        self.header = header
        self.samples = samples
        self.reductions = reductions
        self.has_reductions = has_reductions

    @classmethod
    def read(cls, root: Path) -> _Kept | None:
        ext = root / "ext"
        hp = ext / KEPT_HEADER
        if not hp.is_file():
            return None
        header = loads(hp.read_bytes(), str(hp))
        samples: dict[tuple[str, int], tuple[int, dict[str, Any]]] = {}
        sp = ext / KEPT_SAMPLES
        if sp.is_file():
            with open(sp, "rb") as f:
                for i, raw in enumerate(f):
                    r = loads(raw, f"{sp}:{i + 1}")
                    samples[(_case_id(r["id"], f"{sp}:{i + 1}"), r["epoch"])] = (i, r)
        rp = ext / KEPT_REDUCTIONS
        reductions = loads(rp.read_bytes(), str(rp)) if rp.is_file() else None
        return cls(header, samples, reductions, rp.is_file())

    def restore(self, mapped: dict[str, Any], samples: list[dict[str, Any]]) -> tuple[dict, list]:
        """The header as the log wrote it (the mapping's values where the run says otherwise: its id, task, model
        and epochs), its reductions as written, and the samples in the log's order."""
        header = dict(self.header)
        ev = header.get("eval")
        if isinstance(ev, dict):
            ev = header["eval"] = dict(ev)
            for k in ("task", "model"):
                if ev.get(k) != mapped["eval"][k]:
                    ev[k] = mapped["eval"][k]
            if ev.get("eval_id") not in (None, "", mapped["eval"]["eval_id"]):
                ev["eval_id"] = mapped["eval"]["eval_id"]
        if self.has_reductions:
            header["reductions"] = self.reductions
        elif "reductions" in mapped:
            header["reductions"] = mapped["reductions"]
        order = {(str(s["id"]), s["epoch"]): n for n, s in enumerate(samples)}
        index = {k: v[0] for k, v in self.samples.items()}
        big = len(index)
        samples = sorted(samples, key=lambda s: (index.get((_key_id(s["id"]), s["epoch"]), big),
                                                 order[(str(s["id"]), s["epoch"])]))
        return header, samples


def _key_id(v: Any) -> str:
    return v if isinstance(v, str) else str(int(v))


def _restored_sample(mapped: dict[str, Any], residue: Mapping[str, Any], lines: list[dict[str, Any]],
                     evidence: Mapping[str, Any], blobs: _Blobs, content_on: bool,
                     aigp: frozenset[str] | None) -> dict[str, Any]:
    """A sample as the log wrote it: its members in their order; the id as written; the epoch, the content and
    the Scores' values, explanations, answers and metadata from the lines and their blobs; the rest from what the
    import kept. Content the run does not hold (contentCapture off) is the mapping's (empty input and target)."""
    members = residue.get("members") or {}
    content_kinds = residue.get("content") or {}
    texts: dict[str, str] = {}
    for line in lines:
        for eid in line.get("evidence") or ():
            rec = evidence.get(eid)
            if rec is None or "blob" not in (rec.get("link") or {}):
                continue
            text = blobs.text(rec["link"]["blob"], f"case {line['caseId']!r}: evidence {eid}")
            if text is not None:
                texts.setdefault(rec["kind"], text)
    by_path = {line["path"]: line for line in lines}
    out: dict[str, Any] = {}
    for k in residue.get("order") or list(mapped):
        if k in members:
            out[k] = members[k]
        elif k == "id":
            out[k] = residue["id"]
        elif k == "epoch":
            out[k] = mapped["epoch"]
        elif k in content_kinds and CONTENT_KIND.get(k) in texts:
            text = texts[CONTENT_KIND[k]]
            out[k] = jsonio.loads(text.encode("utf-8"), top_object=False) if content_kinds[k] == "json" else text
        elif k == "scores":
            rests = residue.get("scores") or {}
            out[k] = {key: _restored_score(by_path[key], rest, blobs, content_on, aigp)
                      if key in by_path else rest for key, rest in rests.items()}
        elif k in mapped:
            out[k] = mapped[k]
    return out


def _restored_score(line: Mapping[str, Any], rest: Mapping[str, Any], blobs: _Blobs, content_on: bool,
                    aigp: frozenset[str] | None) -> dict[str, Any]:
    """A Score as the log wrote it: its value from the line (R7I-2) unless the import kept it (a map, a list), its
    explanation from the line's reasoning blob, its answer and metadata from the line's ``ext`` (IN-7), the rest as
    kept."""
    where = f"case {line['caseId']!r} at {line['path']!r}"
    score: dict[str, Any] = {}
    if "value" not in rest:
        score["value"] = _score_of(line, blobs, False, where)["value"]
    if content_on and isinstance(line.get("reasoning"), dict):
        text = blobs.text(line["reasoning"]["blob"], where)
        if text is not None:
            score["explanation"] = text
    kept = (line.get("ext") or {}).get("inspect_ai") or {}
    for k in ("answer", "metadata"):
        if k in kept:
            score[k] = kept[k]
    score.update(rest)
    return score


def _evidence_records(root: Path) -> dict[str, dict[str, Any]]:
    """The evidence records of kinds the export reads (IN-5): input, expected, output, transcript."""
    out: dict[str, dict[str, Any]] = {}
    p = root / "evidence.ndjson"
    if p.is_file():
        for _, rec in jsonio.iter_ndjson(p):
            if rec.get("kind") in ("input", "expected", "output", "transcript"):
                out[rec["evidenceId"]] = rec
    return out


def _sample(case: str, trial: int, lines: list[dict[str, Any]], evidence: Mapping[str, Any], blobs: _Blobs,
            content_on: bool, rebuild: bool = False, model: str = "",
            aigp: frozenset[str] | None = None, span: bool = False, label_values: bool = False) -> dict[str, Any]:
    where = f"case {case!r}" + (f" trial {trial}" if trial else "")
    # case content (IN-5, R7I-6): only the records the sample's lines cite
    content: dict[str, str] = {}
    transcripts: dict[str, None] = {}  # rebuild: every different transcript the lines cite, in order
    for line in lines:
        for eid in line.get("evidence") or ():
            rec = evidence.get(eid)
            if rec is None:
                continue
            kind = rec["kind"]
            if kind in ("output", "transcript") and not rebuild:
                raise Refusal("IN-5", f"cited {kind} evidence ({eid}): the page does not say how a blob's text "
                                      f"becomes a {'ModelOutput' if kind == 'output' else 'list of ChatMessage'} "
                                      "(the option 'output_from_evidence' rebuilds it, aefgate's extension)",
                              f"{where}: evidence {eid}")
            link = rec.get("link") or {}
            if "blob" not in link:
                raise Refusal("IN-5", f"cited {kind} evidence ({eid}) that is not a blob of the run",
                              f"{where}: evidence {eid}")
            text = blobs.text(link["blob"], f"{where}: evidence {eid}")
            if text is None:
                continue
            if kind == "transcript":  # (rebuild) one list of messages: each transcript's in turn
                transcripts.setdefault(text, None)
                content.setdefault(kind, text)
                continue
            if kind in content and content[kind] != text:
                raise Refusal("IN-5", f"two cited {kind} records with different text for one sample",
                              f"{where}: evidence {eid}")
            content[kind] = text
    sample: dict[str, Any] = {"id": case, "epoch": trial + 1, "input": content.get("input", ""),
                              "target": content.get("expected", "")}
    if rebuild:  # aefgate's extension where IN-5 refuses (docs/mappings/inspect.md, "Output from evidence")
        _rebuild_content(sample, content, model, list(transcripts))
    scores: dict[str, Any] = {}
    role_usage: dict[str, dict[str, Any]] = {}
    model_usage: dict[str, dict[str, Any]] = {}
    for line in lines:
        lw = f"{where} at {line['path']!r}"
        if line["path"] in scores:
            raise Refusal("IN-5", "two lines of one sample at one path", lw)
        scores[line["path"]] = _score_of(line, blobs, content_on, lw, aigp, label_values)
        ann_model = (line.get("annotator") or {}).get("model")
        for u in line.get("usage") or ():
            _sum_into(role_usage, u["role"], u)
            m = u.get("model") or (ann_model if u["role"] == "judge" else None)
            if m:
                _sum_into(model_usage, m, u)
    sample["scores"] = scores
    if model_usage:
        sample["model_usage"] = {m: _inspect_usage(u) for m, u in model_usage.items()}
    if role_usage:
        sample["role_usage"] = {r: _inspect_usage(u) for r, u in role_usage.items()}
    # times of the case's root lines (IN-5, R7I-5)
    roots = [line for line in lines if line.get("parentResultId") is None]
    for member, target in (("startedAt", "started_at"), ("endedAt", "completed_at"), ("durationMs", "total_time")):
        values = [line[member] for line in roots if line.get(member) is not None]
        if not values:
            continue
        first = values[0]
        for v in values[1:]:
            same = parse_time(v) == parse_time(first) if member != "durationMs" else v == first
            if same:
                continue
            if not span:
                raise Refusal("IN-5", f"the case's root lines carry two different {member} ({first!r}, {v!r}): an "
                                      "Inspect sample has one; the option 'case_times=span' gives it their span (the "
                                      "earliest start, the latest end, the longest duration; aefgate's extension)",
                              where)
            # the span of the roots (aefgate's extension, docs/mappings/inspect.md)
            later = parse_time(v) > parse_time(first) if member != "durationMs" else v > first
            if later == (member != "startedAt"):
                first = v
        sample[target] = first / 1000 if member == "durationMs" else first  # R7I-11
    return sample


def _json_text(text: str) -> Any:
    """The JSON value a content blob's text holds (the importer writes non-text content as JCS, IN-8), or None."""
    if text[:1] not in ("{", "["):
        return None
    try:
        return jsonio.loads(text.encode("utf-8"), top_object=False)
    except (jsonio.JsonProblem, ValueError):
        return None


def _is_messages(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(m, dict) and isinstance(m.get("role"), str)
                                                           for m in value)


def _rebuild_content(sample: dict[str, Any], content: Mapping[str, str], model: str,
                     transcripts: list[str] | None = None) -> None:
    """A sample's content rebuilt from its captured evidence (``output_from_evidence``): the output evidence as the
    sample's ModelOutput (the ModelOutput itself when the blob is one, as an import from Inspect writes it; else its
    text as the assistant message of one), the transcript as its messages (several different transcripts the lines
    cite: the messages of each in turn), and an input or target that is a list of chat messages (JCS, IN-8) as that
    list."""
    for member in ("input", "target"):
        value = _json_text(sample[member])
        if _is_messages(value) or (member == "target" and isinstance(value, list)
                                   and all(isinstance(x, str) for x in value)):
            sample[member] = value
    text = content.get("output")
    if text is not None:
        value = _json_text(text)
        if isinstance(value, dict) and isinstance(value.get("choices"), list):
            sample["output"] = value
        else:
            sample["output"] = {"model": model, "choices": [{"message": {"role": "assistant", "content": text,
                                                                           "source": "generate"},
                                                              "stop_reason": "stop"}], "completion": text}
    messages: list[Any] = []
    for transcript in transcripts or ([content["transcript"]] if "transcript" in content else []):
        value = _json_text(transcript)
        if _is_messages(value):
            messages.extend(value)
        else:
            messages.append({"role": "assistant", "content": transcript, "source": "generate"})
    if messages:
        sample["messages"] = messages


def _results(summary: Mapping[str, Any], metrics: Mapping[str, Any], n_samples: int,
             map_scorers: bool = False, scored: Mapping[str, set[str]] | None = None,
             omit_unscored: bool = False) -> dict[str, Any]:
    """IN-3: one EvalScore per summary entry. With ``map_scorers`` (aefgate's extension where IN-3 refuses), a path
    with entries for several metrics is written as Inspect writes a map-valued scorer: one EvalScore per metric,
    named after it, with the path as its ``scorer``; an entry whose metric no line at its path scores (``scored``:
    path -> metrics; a rate of the lines' states, like ``pass``) is no member of such a scorer: refused (IN-3), or
    left out with ``omit_unscored``."""
    kinds = {m["id"]: m["kind"] for m in metrics.get("metrics", [])}
    out: list[dict[str, Any]] = []
    paths: set[str] = set()
    per_path: dict[str, int] = {}
    lanes_of: dict[tuple[str, str], str] = {}  # (path, metric) -> the lane of its first entry
    for lane in summary.get("lanes", []):
        for e in lane["metrics"]:
            per_path[e["path"]] = per_path.get(e["path"], 0) + 1
    for lane in summary.get("lanes", []):
        for e in lane["metrics"]:
            where = f"summary.json: {lane['lane']}/{e['metric']} at {e['path']!r}"
            mapped = map_scorers and per_path[e["path"]] > 1
            if mapped and scored is not None and e["metric"] not in scored.get(e["path"], ()):
                if omit_unscored:  # aefgate's extension: left out (the summary is a declared loss)
                    continue
                raise Refusal("IN-3", "two summary entries at one path, and no line at the path scores the metric "
                                      f"{e['metric']!r} (a {kinds.get(e['metric'], 'metric')} of the lines' states): "
                                      "a map-valued scorer's EvalScore reduces its members' scores, so the option "
                                      "'map_scorers' cannot write it, and an import of it would find no line giving "
                                      "its value (IN-9); the option 'omit_unscored' leaves such entries out of "
                                      "results (aefgate's extension)", where)
            name = e["metric"] if mapped else e["path"]
            # names are unique, and a member's EvalScore is not named for another scorer: the import reads an entry
            # named for a scorer at that scorer's path
            if mapped and (e["path"], e["metric"]) in lanes_of:
                first_lane = lanes_of[(e["path"], e["metric"])]
                raise Refusal("IN-3", f"two summary entries for the metric {e['metric']!r} at one path, in the lanes "
                                      f"{first_lane!r} and {lane['lane']!r}: an Inspect log has "
                                      "no lanes and one EvalScore per scorer and metric, so even the option "
                                      "'map_scorers' cannot write both, and no value a user could give would tell "
                                      "them apart", where)
            lanes_of.setdefault((e["path"], e["metric"]), lane["lane"])
            if name in paths or (mapped and name in per_path and name != e["path"]):
                raise Refusal("IN-3", "two summary entries at one path: Inspect has one EvalScore per scorer"
                              + ("" if map_scorers else " (the option 'map_scorers' writes them as a map-valued "
                                                        "scorer's)"),
                              where)
            paths.add(name)
            if kinds.get(e["metric"]) == "count":
                raise Refusal("IN-3", "an entry for a metric of kind count, whose value is a sum, not a mean", where)
            value = e.get("value")
            agg = e.get("aggregate")
            method = agg["method"] if agg else "mean"
            metric: dict[str, Any] = {"name": method, "value": math.nan if value is None else value}
            if agg:
                metric["params"] = {k: v for k, v in agg.items() if k != "method"}
            ms: dict[str, Any] = {method: metric}
            if e.get("stderr") is not None:
                ms["stderr"] = {"name": "stderr", "value": e["stderr"]}
            aef: dict[str, Any] = {"lane": lane["lane"], "metric": e["metric"]}
            for k in ("N", "notMeasured", "verdict", "rule", "ci"):
                if e.get(k) is not None:
                    aef[k] = e[k]
            out.append({"name": name, "scorer": e["path"], "scored_samples": e["n"],
                        "unscored_samples": e["notMeasured"], "metrics": ms, "metadata": {"aef": aef}})
    return {"total_samples": n_samples, "completed_samples": n_samples, "scores": out}


def to_inspect(
    run_dir: str | os.PathLike[str],
    out_path: str | os.PathLike[str],
    *,
    ignore_overlays: bool = False,
    fmt: str | None = None,
    withheld_ok: Iterable[str] = (),
    output_from_evidence: bool = False,
    map_scorers: bool = False,
    grader_types: bool = False,
    task: str | None = None,
    model: str | None = None,
    case_times: str | None = None,
    omit_unscored: bool = False,
    label_values: bool = False,
) -> Path:
    """Convert an AEF run into an Inspect eval log at ``out_path`` (``.json`` or ``.eval``, by its suffix unless
    ``fmt`` says). The run must verify (IN-11, exit 1); a run with overlay events is refused unless
    ``ignore_overlays`` (IN-4)."""
    out = Path(out_path)
    if fmt is None:
        fmt = {".json": "json", ".eval": "eval"}.get(out.suffix.lower())
    if fmt not in ("json", "eval"):
        raise Refusal("CLI-2", "the output is an Inspect log: a .json or .eval file", str(out))

    check_file_destination(out, (run_dir,))  # absent, under a folder (OUT-1), not inside the run (OUT-2)
    header, samples = export_run(run_dir, ignore_overlays=ignore_overlays, withheld_ok=withheld_ok,
                                 output_from_evidence=output_from_evidence, map_scorers=map_scorers,
                                 grader_types=grader_types, task=task, model=model, case_times=case_times,
                                 omit_unscored=omit_unscored, label_values=label_values)
    version = header.get("version")
    if isinstance(version, int) and not isinstance(version, bool) and version not in READ_VERSIONS[fmt]:
        # a kept version-3 header (a .eval's) written as .json: the highest version Inspect's JSON reader reads
        header = {**header, "version": max(READ_VERSIONS[fmt])}
    write_log(out, header, samples, fmt=fmt)
    return out


