"""AgentEval store v1 -> AEF: one run of a ``.agenteval/`` workspace as an imported AEF run, sealed ``ingest``
(spec 07 §7.5; aefgate's choices where §7.5 is informative: ``docs/mappings/store-v1.md``).

The store is read by :mod:`aefgate.formats.store_v1` (refusals ``SV1-1`` .. ``SV1-9`` with the file at fault); the
run is written by :class:`~aefgate.aef.builder.RunBuilder`, verified and sealed before it is renamed into
place (``SV1-10``, exit 1, when it would not verify), so a refused run leaves nothing behind.

- ``run.json``: the store's run id; ``imported.from`` ``agenteval store v1 (AgentEval <manifest agentEval.version>)``;
  ``subject`` ``<kind>:<name percent-encoded ([ENC-13])>`` and the version when it is exact ([ENC-10]);
  ``startedAt`` the manifest's timestamp in UTC, ``endedAt`` plus its duration; a run that never completed (no
  ``summary.json``, or the verdict still ``PENDING``) ``aborted`` with ``endedAt`` = ``startedAt``;
  ``execution.targetMode`` (default ``mocked``) and ``contentCapture`` (default ``on``) supplied; ``judges`` from
  the comparability facts in order of first appearance; ``ext."agenteval.store-v1"`` the manifest's other fields
  without the machine name; ``ext."aefgate.store-v1"`` the migration's own facts (the digest of the run's source
  files, :func:`migration_key`, what was left out).
- ``results.ndjson``: one root per scenario (``caseId`` its id, ``path`` ``scenario``) and a child per assertion
  (``scenario/assertions/<n>``), so two migrations of one store give the same result ids ([RES-4]).
- ``summary.json``: one lane (the run's kind), ``pass`` (rate) and ``score`` at ``scenario``, no rule; the store
  summary's cost and tokens, and its verdict, stats and metrics in ``ext``.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aefgate.converters.checks import check_import_options
from aefgate.errors import EXIT_INTEGRITY, Refusal
from aefgate.aef.builder import RunBuilder
from aefgate.aef.canonical import jcs
from aefgate.aef.refs import encode_name
from aefgate.aef.sealer import NotVerified
from aefgate.aef.signatures import signing_key_of
from aefgate.aef.times import now, parse_time
from aefgate.aef.verifier import in_one_process
from aefgate.formats.store_v1.reader import (
    ComplianceDoc,
    RunRef,
    Scenario,
    StoreRun,
    Workspace,
    compliance_index,
    locate_run_folder,
    native_links,
    open_workspace,
    read_run,
    source_digest,
)
from aefgate.formats.store_v1.dotnet import add_ns
from aefgate.fsutil import check_destination

__all__ = ["Migrated", "from_store_v1", "migrate_run", "migration_key", "resolve", "subject_ref", "native_warnings",
           "IMPORTED_FROM_PREFIX"]

IMPORTED_FROM_PREFIX = "agenteval store v1"
EXT = "agenteval.store-v1"  # the original's fields
OWN_EXT = "aefgate.store-v1"  # the migration's own facts
MAX_REASON = 4096
_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}\Z")
_REF = re.compile(r"[a-z][a-z0-9-]{0,31}:[!-~]{1,256}\Z")
_EXACT_VERSION = re.compile(r"[!-~]{1,128}\Z")
_SHA256 = re.compile(r"(sha256:)?([0-9a-f]{64})\Z")
_LABELS = {"pass": "passed", "fail": "failed", "warn": "warn", "error": "error", "skipped": "skipped",
           "inapplicable": "not_applicable"}
_MEASURED = ("passed", "failed", "warn", "inconclusive", "scored")
_RENAMED = {"pass": "dimension:pass", "score": "dimension:score"}  # a metric named as a summary entry's metric


@dataclass
class Migrated:
    """What one migration wrote: the run folder, its status and result lines, its run hash, the digest of its
    source files and its migration key, and the warnings it gave (a native AEF run linking the same store run)."""

    path: Path
    run_id: str
    status: str
    results: int
    run_hash: str
    signed: bool
    source_digest: str
    key: str
    subject: str
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"output": str(self.path), "runId": self.run_id, "status": self.status, "results": self.results,
                "outcome": "intact", "runHash": self.run_hash, "signed": self.signed,
                "sourceDigest": self.source_digest, "migrationKey": self.key, "subject": self.subject}


def subject_ref(kind: str, name: str) -> str:
    """``<kind>:<name>``, the name encoded as [ENC-13] asks (printable ASCII without spaces): each byte of its UTF-8
    outside ``!``..``~``, and ``%`` itself, as ``%XX`` (upper-case hex), so the encoding reads back exactly."""
    return f"{kind}:{encode_name(name)}"


def migration_key(digest: str, *, target_mode: str, content_capture: str, subject: str | None,
                  key_id: str | None) -> str:
    """12 hex characters naming one migration of one source: the digest of the run's source files and the options
    that change what is written. A second ``--all`` skips a run whose key an output already records."""
    doc = {"sourceDigest": digest, "targetMode": target_mode, "contentCapture": content_capture,
           "subject": subject, "keyId": key_id}
    return hashlib.sha256(jcs(doc)).hexdigest()[:12]


def resolve(src: str | os.PathLike[str], run: str | None) -> tuple[Workspace, RunRef]:
    """The workspace and the run: ``src`` a workspace and ``run`` its run id, or ``src`` a run folder (SV1-1)."""
    if run is not None:
        if not run:
            raise Refusal("CLI-2", "option 'run' is a run id, not empty", "option 'run'")
        ws = open_workspace(src)
        return ws, ws.find_run(run)
    return locate_run_folder(src)


def native_warnings(ws: Workspace, run_id: str, links: dict[str, list[Path]] | None = None) -> list[str]:
    """The warnings for native AEF runs under ``<workspace>/aef/runs/`` that link the store run ``run_id``."""
    links = native_links(ws) if links is None else links
    return [f"{ws.rel(p)}: a native AEF run links store run {run_id}; prefer that native evidence (this migration "
            "is a separate, imported projection of the same run)" for p in links.get(run_id, [])]


# -- the mapping ----------------------------------------------------------------------------------------------------


def _cut(text: str) -> str:
    return text if len(text) <= MAX_REASON else text[: MAX_REASON - 1] + "\u2026"


def _root_state(sc: Scenario) -> tuple[str, str | None]:
    """§7.5's state table: ``(state, what decided it)`` (the second is for a generated reason)."""
    t = sc.tree
    if t is None:  # no eval-result tree: the pass flag decides, nothing gives a severity
        return ("passed" if sc.passed else "failed"), None
    if t.measurement == "notApplicable":
        return "not_applicable", "the eval's measurement state is notApplicable"
    if t.measurement == "notMeasured":
        return "not_measured", "the eval's measurement state is notMeasured"
    if t.label in _LABELS:
        return _LABELS[t.label], f"the eval's score is labelled {t.label!r}"
    return ("passed" if t.passed else "failed"), None  # a free-text label: the score's pass flag, as AgentEval reads it


def _judge_digest(value: Any) -> str | None:
    m = _SHA256.fullmatch(value) if isinstance(value, str) else None
    return f"sha256:{m.group(2)}" if m else None


def _annotator(sc: Scenario) -> dict[str, Any] | None:
    judge = (sc.comparability or {}).get("judge")
    if isinstance(judge, dict):
        out: dict[str, Any] = {"kind": "LLM", "model": judge["modelId"][:256]}
        digest = _judge_digest(judge.get("rubricDigest"))
        if digest:
            out["rubricDigest"] = digest
        return out
    t = sc.tree
    if t is None:
        return None
    if t.provenance_type in ("atomic-llm", "multi-judge-adjudicated"):
        return {"kind": "LLM", **({"model": t.judge_model[:256]} if t.judge_model else {})}
    if t.provenance_type == "atomic-code":
        return {"kind": "CODE"}
    return None


def _evaluator(sc: Scenario) -> dict[str, Any]:
    comp = sc.comparability
    if comp is not None:
        ev = {"id": comp["evalKey"], "version": comp["evalVersion"]}
    elif sc.tree is not None:
        ev = {"id": sc.tree.metric_key, **({"version": sc.tree.metric_version} if sc.tree.metric_version else {})}
    else:
        return {"id": "agenteval.scenario"}
    if len(ev["id"]) > 256 or len(ev.get("version", "")) > 64:
        raise Refusal("SV1-9", "the eval's key is at most 256 characters and its version at most 64 (an AEF "
                               "evaluator)", str(sc.file))
    return ev


def _bar(sc: Scenario) -> float | None:
    comp = sc.comparability
    if comp is not None:
        return comp.get("effectiveBar")  # absent: no threshold (never 0)
    return sc.tree.threshold if sc.tree is not None else None


def _scores(sc: Scenario) -> list[dict[str, Any]]:
    scores: list[dict[str, Any]] = []
    names: set[str] = set()
    if sc.score is not None:
        scores.append({"metric": "score", "value": sc.score})
        names.add("score")
    for name, value in sc.metrics.items():
        metric = _RENAMED.get(name, name)
        if not metric or len(metric) > 256:
            raise Refusal("SV1-9", f"the metric name {name[:40]!r} is empty or over 256 characters: AEF names a metric "
                                   "in 1 to 256", str(sc.file))
        if metric in names:
            raise Refusal("SV1-9", f"two metrics named {metric!r} (a metric pass or score is scored as "
                                   "dimension:pass or dimension:score)", str(sc.file))
        names.add(metric)
        scores.append({"metric": metric, "value": value})
    if len(scores) > 256:
        raise Refusal("SV1-9", f"{len(scores)} scores: an AEF line carries at most 256", str(sc.file))
    return scores


def _root(store: StoreRun, sc: Scenario, lane: str, cites: list[str], capture_on: bool) -> dict[str, Any]:
    state, why = _root_state(sc)
    measured = state in _MEASURED
    line: dict[str, Any] = {"path": "scenario", "lane": lane, "evaluator": _evaluator(sc), "state": state}
    t = sc.tree
    if t is not None and t.severity is not None and state in ("failed", "warn"):
        line["severity"] = t.severity
    reason = (t.summary or t.first_recommendation) if (t is not None and capture_on) else None
    if reason is None and not measured:
        reason = f"store v1: {why}" + ("" if capture_on else " (its explanation is not kept: contentCapture off)")
    if reason:
        line["reason"] = _cut(reason)
    scores = _scores(sc)
    if measured and scores:
        line["scores"] = scores
    ann = _annotator(sc)
    if ann:
        line["annotator"] = ann
    if sc.duration_ns > 0:
        line["durationMs"] = sc.duration_ns / 1_000_000
    if sc.estimated_cost > 0:
        line["usage"] = [{"role": "other", "costUsd": sc.estimated_cost}]
    if cites:
        if len(cites) > 256:
            raise Refusal("SV1-9", f"the scenario cites {len(cites)} evidence records: an AEF line cites at most 256",
                          str(sc.file))
        line["evidence"] = cites
    ext: dict[str, Any] = {}
    if sc.name is not None:
        ext["name"] = sc.name
    ext["passed"] = sc.passed
    if sc.score is not None:
        ext["score"] = sc.score
    if sc.comparability is not None:
        ext["comparability"] = sc.comparability
    if sc.stimulus_hash is not None and capture_on:
        ext["stimulusHash"] = sc.stimulus_hash
    if not measured and sc.metrics:
        ext["metrics"] = sc.metrics  # a typed absence carries no scores ([RES-2]): its metrics stay here
    ext.update({k: v for k, v in sc.extra.items() if k not in ext})
    line["ext"] = {EXT: ext}
    if sc.assertions:
        agg: dict[str, Any] = {"strategy": "Own", "rulePath": "threshold" if measured else "nothing-measured",
                               "score": sc.score if measured else None}
        bar = _bar(sc)
        if bar is not None:
            agg["threshold"] = bar
        line["aggregation"] = agg
        line["children"] = [_assertion(a, n, sc.file) for n, a in enumerate(sc.assertions, 1)]
    return line


def _assertion(a: Any, n: int, file: Path) -> dict[str, Any]:
    if len(a.name) > 256:
        raise Refusal("SV1-9", f"assertion {n}'s name is {len(a.name)} characters: an AEF evaluator id holds at "
                               "most 256", f"{file} (assertion {n})")
    state = {"passed": "passed", "failed": "failed", "inconclusive": "not_measured"}[a.outcome]
    child: dict[str, Any] = {"path": f"scenario/assertions/{n}", "evaluator": {"id": a.name}, "state": state,
                             "component": {"weight": 0, "required": False}}
    if a.message:
        child["reason"] = _cut(a.message)
    elif state == "not_measured":
        child["reason"] = "store v1: the assertion could not decide (Inconclusive), and gives no message"
    if a.extra:
        child["ext"] = {EXT: a.extra}
    return child


def _scrub(value: Any, machine: str, path: str, omitted: list[str]) -> Any:
    """``value`` without any string equal to the machine name (letter case aside); their dotted paths go to
    ``omitted``."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            p = f"{path}.{k}" if path else k
            if isinstance(v, str) and v.casefold() == machine:
                omitted.append(p)
                continue
            out[k] = _scrub(v, machine, p, omitted)
        return out
    if isinstance(value, list):
        out_list = []
        for i, v in enumerate(value):
            p = f"{path}[{i}]"
            if isinstance(v, str) and v.casefold() == machine:
                omitted.append(p)
                continue
            out_list.append(_scrub(v, machine, p, omitted))
        return out_list
    return value


def _manifest_ext(store: StoreRun, version_used: bool) -> tuple[dict[str, Any], list[str]]:
    """The manifest's other fields for ``ext."agenteval.store-v1"``, and the dotted paths left out for the machine
    name. Left out because they are in run.json already: ``run.runId``, ``run.timestamp`` (``startedAt``, exact),
    ``subject.kind`` and, when it is exact, ``subject.version``."""
    doc = {k: (dict(v) if isinstance(v, dict) else v) for k, v in store.manifest.items()}
    run = doc.get("run")
    if isinstance(run, dict):
        run.pop("runId", None)
        run.pop("timestamp", None)
    subj = doc.get("subject")
    if isinstance(subj, dict):
        subj.pop("kind", None)
        if version_used:
            subj.pop("version", None)
    omitted: list[str] = []
    env = doc.get("environment")
    if isinstance(env, dict) and "machine" in env:
        env.pop("machine")
        omitted.append("environment.machine")
    if store.machine and store.machine.strip():
        doc = _scrub(doc, store.machine.casefold(), "", omitted)
    return doc, omitted


def _header(store: StoreRun, *, target_mode: str, content_capture: str, subject: str | None, digest: str,
            files: int, key: str) -> tuple[dict[str, Any], list[str], str]:
    """``(run.json header, asserted paths, lane)``."""
    where = str(store.ref.path / "manifest.json")
    if not _ID.fullmatch(store.run_id):
        raise Refusal("SV1-9", f"the run id {store.run_id!r} is not an AEF id ([ENC-13]: 1 to 128 letters, digits, "
                               "'.', '_', ':' or '-'): result ids are made from it, so it is not rewritten", where)
    ref = subject if subject is not None else subject_ref(store.subject_kind, store.subject_name)
    if not _REF.fullmatch(ref):
        raise Refusal("SV1-9", f"the subject's reference is over 256 characters once encoded ([ENC-13]): "
                               f"{ref[:60]}...", where)
    version = store.subject_version
    exact = version is not None and bool(_EXACT_VERSION.fullmatch(version)) and version.lower() != "latest"
    notes: list[str] = []
    if version is not None and not exact:
        notes.append(f"subject.version {version!r} is not an exact version ([ENC-10]): not written as "
                     "subject.version (it stays in ext), so the run serves no checkpoint lane")
    judges: list[dict[str, Any]] = []
    seen: set[tuple[str, str | None]] = set()
    for sc in store.scenarios:
        judge = (sc.comparability or {}).get("judge")
        if not isinstance(judge, dict):
            continue
        model = judge["modelId"]
        raw = judge.get("rubricDigest")
        digest_ = _judge_digest(raw)
        if (model, digest_) in seen:
            continue
        seen.add((model, digest_))
        if len(model) > 256:
            raise Refusal("SV1-9", "a judge's modelId is over 256 characters", str(sc.file))
        judges.append({"model": model, **({"rubricDigest": digest_} if digest_ else {})})
        if raw is not None and digest_ is None:
            notes.append(f"judge {model!r}: its rubricDigest {raw!r} (scenario {sc.id!r}) is not a SHA-256: no "
                         "judges[].rubricDigest (it stays in the scenario's comparability facts)")
    if len(judges) > 64:
        raise Refusal("SV1-9", f"{len(judges)} judges: run.json lists at most 64", where)
    lane = store.run_kind if store.run_kind and _ID.fullmatch(store.run_kind) else "main"
    ext, omitted = _manifest_ext(store, exact)
    own: dict[str, Any] = {"sourceDigest": digest, "sourceFiles": files, "migrationKey": key}
    if omitted:
        own["omitted"] = omitted
    if notes:
        own["notes"] = notes
    header: dict[str, Any] = {
        "runId": store.run_id,
        "subject": {"ref": ref, "kind": store.subject_kind, **({"version": version} if exact else {})},
        "execution": {"targetMode": target_mode},
        "startedAt": store.started_at,
        "contentCapture": content_capture,
    }
    if judges:
        header["judges"] = judges
    header["ext"] = {EXT: ext, OWN_EXT: own}
    asserted = ["execution.targetMode", "contentCapture"] + (["subject.ref"] if subject is not None else [])
    if not store.completed:
        asserted += ["status", "endedAt", "abortReason"]
    return header, asserted, lane


def _abort_reason(store: StoreRun) -> str:
    why = []
    if store.summary is None:
        why.append("no summary.json")
    if store.verdict.upper() == "PENDING":
        why.append("the manifest's verdict is still PENDING")
    return ("store v1: the run never completed (" + "; ".join(why) + "): CompleteRunAsync did not finish it, so "
            "its results are what was written before it stopped")


def _summary_request(store: StoreRun, lane: str) -> dict[str, Any]:
    request: dict[str, Any] = {"lanes": [{"lane": lane, "metrics": [{"metric": "pass", "path": "scenario"},
                                                                     {"metric": "score", "path": "scenario"}]}]}
    s = store.summary
    if s is None:
        return request
    cost = s.get("cost")
    if isinstance(cost, dict):
        if cost.get("estimatedCost") is not None:
            request["cost"] = {"totalUsd": cost["estimatedCost"],
                               "source": "AgentEval's estimate (store v1 summary.json cost.estimatedCost)"}
        usage = {"role": "other"}
        if cost.get("promptTokens") is not None:
            usage["gen_ai.usage.input_tokens"] = cost["promptTokens"]
        if cost.get("completionTokens") is not None:
            usage["gen_ai.usage.output_tokens"] = cost["completionTokens"]
        if len(usage) > 1:
            request["usage"] = [usage]
    request["ext"] = {EXT: {k: v for k, v in s.items() if k not in ("runId", "cost", "schemaVersion")}}
    return request


def migrate_run(store: StoreRun, out: str | os.PathLike[str], *, target_mode: str = "mocked",
                content_capture: str = "on", subject: str | None = None, at: str | None = None,
                signing_key: Any = None, digest: tuple[str, int] | None = None) -> Migrated:
    """Write ``store`` (a run :func:`~aefgate.formats.store_v1.reader.read_run` read) as an imported AEF run at
    ``out`` (absent or empty), verified, sealed ``ingest`` at ``at`` (default now, or the run's end when that is
    later), signed with ``signing_key``. ``digest``: its :func:`source_digest` when the caller has it."""
    out = Path(os.path.abspath(out))
    ws, ref = store.ws, store.ref
    digest_, files = digest if digest is not None else source_digest(ws, ref, store.compliance)
    key = migration_key(digest_, target_mode=target_mode, content_capture=content_capture, subject=subject,
                        key_id=getattr(signing_key, "keyid", None))
    header, asserted, lane = _header(store, target_mode=target_mode, content_capture=content_capture,
                                     subject=subject, digest=digest_, files=files, key=key)
    capture_on = content_capture == "on"
    imported_from = f"{IMPORTED_FROM_PREFIX} (AgentEval {store.agenteval_version})"[:256]
    try:
        ended = store.started_at if not store.completed else add_ns(store.started_at, store.duration_ns)
    except ValueError:
        raise Refusal("SV1-6", "run.timestamp plus run.duration is past the year 9999",
                      str(ref.path / "manifest.json")) from None
    metrics = [{"id": "pass", "kind": "rate", "direction": "higher_better", "scale": {"min": 0, "max": 1}},
               {"id": "score", "kind": "score", "direction": "none", "scale": "unbounded"}]
    declared = {"pass", "score"}
    try:
        builder = RunBuilder(out, header, metrics=metrics, imported_from=imported_from, asserted=asserted)
    except Refusal as e:
        raise Refusal(e.rule, f"{e.message} (the migrated run.json: {e.where})", str(ref.path / "manifest.json"),
                      exit_code=e.exit_code) from None
    try:
        with builder as b, in_one_process():
            cites: dict[str, list[str]] = {sc.id: [] for sc in store.scenarios}
            _compliance_evidence(b, store.compliance, cites, store.manifest.get("contentHash"))
            if capture_on and store.trace is not None:
                digest_t = b.add_blob_file(store.trace.path, kind="transcript")
                b.add_evidence("transcript", blob=digest_t, evidence_id="E-trace",
                               description=f"the run's agent trace (traces/agent-trace.json, AgentEval's AgentTrace, "
                                           f"its original bytes), naming scenario {store.trace.scenario_id!r}"[:2000])
                if store.trace.scenario_id in cites:
                    cites[store.trace.scenario_id].insert(0, "E-trace")
            if capture_on:
                for n, (rel, p) in enumerate(store.other_files, 1):
                    blob = b.add_blob_file(p, kind="document")
                    b.add_evidence("document", blob=blob, evidence_id=f"E-file-{n}",
                                   description=f"the run folder's file {rel} (its original bytes)")
            for i, sc in enumerate(store.scenarios, 1):
                own: list[str] = []
                if capture_on and sc.input:
                    own.append(b.add_evidence("input", content=sc.input, evidence_id=f"E-s{i}-input",
                                              description="the scenario's input (stimulus)"))
                if capture_on and sc.output:
                    if sc.tree is not None:
                        own.append(b.add_evidence("other", content=sc.output, evidence_id=f"E-s{i}-eval",
                                                  description="the scenario's output: AgentEval's eval-result tree "
                                                              "(EvalResult JSON), as the output held it"))
                    else:
                        own.append(b.add_evidence("output", content=sc.output, evidence_id=f"E-s{i}-output",
                                                  description="the agent's output"))
                node = _root(store, sc, lane, own + cites[sc.id], capture_on)
                for s in node.get("scores", ()):
                    if s["metric"] not in declared:
                        declared.add(s["metric"])
                        b.declare_metric(s["metric"], "score", "none", "unbounded")
                try:
                    b.add_case(sc.id, node)
                except Refusal as e:
                    raise Refusal(e.rule, f"{e.message} (the migrated line: {e.where})", str(sc.file),
                                  exit_code=e.exit_code) from None
            when = now()
            sealed = at or (ended if parse_time(ended) > parse_time(when) else when)
            built = b.finish("completed" if store.completed else "aborted", ended_at=ended,
                             abort_reason=None if store.completed else _abort_reason(store),
                             summary=_summary_request(store, lane), seal="ingest", sealed_at=sealed,
                             signing_key=signing_key)
    except NotVerified as e:
        where, code = e.problems[0] if e.problems else ("", "invalid")
        raise Refusal("SV1-10", f"the migrated run does not verify: {code} at {where}", str(ref.path),
                      exit_code=EXIT_INTEGRITY) from None
    return Migrated(out, store.run_id, "completed" if store.completed else "aborted", built.results,
                    built.run_hash or "", signing_key is not None, digest_, key, header["subject"]["ref"])


def _compliance_evidence(b: Any, docs: list[ComplianceDoc], cites: dict[str, list[str]],
                         content_hash: Any) -> None:
    """Each compliance document of the run: ``E-compliance-<n>`` (kind ``compliance_artifact``), its original
    bytes as the blob, cited by the root of each scenario its controls name."""
    for n, doc in enumerate(docs, 1):
        blob = b.add_blob_file(doc.path, kind="compliance_artifact")
        eid = f"E-compliance-{n}"
        facts: dict[str, Any] = {"regulation": doc.regulation, "path": doc.rel, "scenarioRefs": doc.scenario_refs}
        if doc.manifest_hash is not None:
            facts["manifestHash"] = doc.manifest_hash
            facts["manifestHashMatches"] = doc.manifest_hash == content_hash
        b.add_evidence("compliance_artifact", blob=blob, evidence_id=eid,
                       description=f"AgentEval compliance evidence ({doc.regulation}), the original bytes of "
                                   f"{doc.rel}"[:2000], ext={EXT: facts})
        for ref in doc.scenario_refs:
            if ref in cites:
                cites[ref].append(eid)


def from_store_v1(src: str | os.PathLike[str], out: str | os.PathLike[str], *, run: str | None = None,
                  target_mode: str = "mocked", content_capture: str = "on", subject: str | None = None,
                  at: str | None = None, key: Any = None) -> Migrated:
    """Migrate one store v1 run: ``src`` a workspace (``.agenteval`` or the folder holding it) and ``run`` its run
    id, or ``src`` a run folder inside its workspace; into ``out`` (absent or empty). Refusals: ``SV1-n`` (the
    store), ``CLI-2`` (an option), ``OUT-1``/``OUT-2`` (the destination), ``SV1-10`` (exit 1)."""
    check_import_options(target_mode=target_mode, content_capture=content_capture, at=at)
    if subject is not None and not _REF.fullmatch(subject):
        raise Refusal("CLI-2", f"option 'subject' is a typed reference kind:name (printable ASCII, no spaces), "
                               f"not {subject!r}", "option 'subject'")
    signing_key = signing_key_of(key)  # before anything is written
    ws, ref = resolve(src, run)
    out_p = Path(os.path.abspath(out))
    check_destination(out_p, inputs=(ws.path,))
    index, bad = compliance_index(ws)
    if bad:
        raise bad[0]
    docs = index.get(ref.run_id, [])
    store = read_run(ws, ref, compliance=docs)
    digest = source_digest(ws, ref, docs)
    warnings = native_warnings(ws, ref.run_id)
    m = migrate_run(store, out_p, target_mode=target_mode, content_capture=content_capture, subject=subject, at=at,
                    signing_key=signing_key, digest=digest)
    m.warnings = warnings
    return m
