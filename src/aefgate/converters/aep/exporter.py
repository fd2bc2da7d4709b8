"""AEF -> AEP (docs/mappings/aep.md, AEP-1 .. AEP-12): a run that verifies ``intact`` -> AEP assessment events.

:func:`export_events` streams them over ``results.ndjson`` (memory does not grow with the run), in a deterministic
order with deterministic ids; :func:`to_aep` writes them as JSONL, and
:func:`aefgate.converters.cloudevents.exporter.to_cloudevents` as CloudEvents (AEP-18).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

import msgspec

from aefgate.converters.aigp import calibrated_models, grader_of
from aefgate.converters.checks import verified
from aefgate.errors import EXIT_INTEGRITY, Refusal
from aefgate.aef import jsonio
from aefgate.aef.onepass import LineMapper
from aefgate.aef.overlays import verify_chain
from aefgate.aef.seal import read_seal_lean
from aefgate.fsutil import append_file, atomic_file, check_file_destination
from aefgate.converters.aep.vocabulary import (
    AEP_VERSION, EXT_KEY, OVERLAY_SEVERITY, T_EVAL, T_FEEDBACK, T_GUARD, _AEF_COPY, _AEF_KEYS, _CONTROL,
    _FAIL_SEVERITY, _RANK, _STATE_SEVERITY, _aep_module, _check_host, _check_level, _load_cause_map,
)


# ---------------------------------------------------------------------------------------------------------------
# AEF -> AEP


class _Export:
    """What one export needs per event, computed once (AEP-3 .. AEP-10)."""

    def __init__(self, root: Path, run: dict, run_hash: str, ceiling: str, agent: str, host: str,
                 cause_map: dict[str, str]):
        self.root = root
        self.run = run
        self.ceiling = ceiling
        self.text = _RANK[ceiling] >= _RANK["redacted"]  # AEP-8: redacted-class fields are built at all
        self.data = ceiling != "none"
        self.prefix = f"aef-{run_hash[:16]}-"
        self.run_id = run["runId"]
        self.agent = agent
        self.source = f"aep://{host}/agent/{quote(agent, safe='')}/session/{quote(self.run_id, safe='')}"
        self.cause_map = cause_map
        self.run_time = run.get("endedAt") or run.get("startedAt")
        self.content_on = run.get("contentCapture", "on") == "on"
        self.calibrated = calibrated_models(run)
        self.seq = 0
        self.check_blobs = False  # a blob read must hash to its name (set by an export beside the verification)
        self._graders: dict[tuple, dict | None] = {}  # _grader: the grader of (kind, model, aggregation)

    def envelope(self, eid: str, etype: str, time: str, run: str | None, cause: str | None,
                 traceparent: str | None, severity: str, data: dict) -> dict:
        ev: dict[str, Any] = {"aep": AEP_VERSION, "id": eid, "type": etype, "time": time, "source": self.source,
                              "agent": self.agent, "session": self.run_id}
        if run is not None:
            ev["run"] = run
        ev["seq"] = self.seq
        self.seq += 1
        ev["epoch"] = 0
        if cause is not None:
            ev["cause"] = cause
        if traceparent is not None:
            ev["traceparent"] = traceparent
        ev["severity"] = severity
        ev["capture"] = self.ceiling
        if self.data:
            ev["data"] = data
        return ev

    def explanation(self, line: Mapping[str, Any]) -> str | None:
        """AEP-9: the reason, else the reasoning blob's text (UTF-8, present)."""
        reason = line.get("reason")
        if isinstance(reason, str):
            return reason
        reasoning = line.get("reasoning")
        if not self.content_on or not isinstance(reasoning, dict):
            return None
        blob = reasoning.get("blob")
        if not isinstance(blob, str) or not blob.startswith("sha256:"):
            return None
        hexd = blob[7:]
        try:
            data = (self.root / "blobs" / "sha256" / hexd[:2] / hexd).read_bytes()
        except OSError:  # withheld ([OVL-10]): no explanation
            return None
        if self.check_blobs:  # read beside the verification (aefgate.bus.pipeline): the bytes are the blob's name
            if hashlib.sha256(data).hexdigest() != hexd.lower():
                raise Refusal("AEP-1", "the run changed after it was verified", f"blobs/sha256/{hexd[:2]}/{hexd}",
                              exit_code=EXIT_INTEGRITY)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:  # not text: no explanation
            return None

    def aef_object(self, line: Mapping[str, Any], shared: bool = False) -> dict:
        """AEP-10: the line's structure, identifiers and numbers only. ``shared`` (only for events that are encoded
        and never handed out, :func:`_encode_fast`): the same members in the same order, but the annotator (when it
        has no ``promptHash``) and the grader may be objects shared between events."""
        a: dict[str, Any] = {"path": line["path"]}
        present = _AEF_KEYS.intersection(line)  # most lines have few of the optional members
        if present:
            if "trial" in present:
                a["trial"] = line["trial"]
            if "trials" in present:
                a["trials"] = line["trials"]
            if "parentResultId" in present and line["parentResultId"]:
                a["parent"] = line["parentResultId"]  # an AEF result id (the parent assessment), not the target's
            for k in _AEF_COPY:
                if k in present:
                    a[k] = line[k]
        version = line["evaluator"].get("version")
        if version is not None:
            a["evaluatorVersion"] = version
        ann = line.get("annotator")
        if "annotator" in present:  # AEP-9: without its promptHash
            a["annotator"] = ann if shared and type(ann) is dict and "promptHash" not in ann else {
                k: v for k, v in ann.items() if k != "promptHash"}
        # AEP-10: the AIGP grader type (converters/aigp.py, the one place)
        g = self._grader(line, ann) if shared else grader_of(line, self.calibrated)
        if g is not None:
            a["grader"] = g
        if "traceLink" in present:
            tl = line["traceLink"]
            if "spanId" not in tl and "traceId" in tl:
                a["traceId"] = tl["traceId"]
        return a

    def _grader(self, line: Mapping[str, Any], ann: Any) -> dict | None:
        """``grader_of(line)``, remembered by what it reads: the annotator's kind and model, and (no kind) whether
        the line has an aggregation (a shared object: only for :meth:`aef_object`'s ``shared``)."""
        if type(ann) is dict:
            key: tuple | None = (ann.get("kind"), ann.get("model"), "aggregation" in line)
        elif ann is None:
            key = (None, None, "aggregation" in line)
        else:
            key = None
        if key is None:
            return grader_of(line, self.calibrated)
        try:
            return self._graders[key]
        except KeyError:
            g = grader_of(line, self.calibrated)
            if len(self._graders) < 256:  # a few kinds and models in a run: the cache stays small
                self._graders[key] = g
            return g
        except TypeError:  # a kind or model that is not hashable: not cached
            return grader_of(line, self.calibrated)


def _traceparent(line: Mapping[str, Any]) -> str | None:
    """AEP-6."""
    tl = line.get("traceLink")
    if isinstance(tl, dict) and "spanId" in tl and "traceId" in tl:
        return f"00-{tl['traceId'].lower()}-{tl['spanId'].lower()}-01"
    return None


class _Options:
    """The export's options, checked (:func:`check_options`)."""

    __slots__ = ("root", "level", "host", "cmap", "agent")

    def __init__(self, root: Path, level: str, host: str, cmap: dict[str, str], agent: str | None):
        self.root, self.level, self.host, self.cmap, self.agent = root, level, host, cmap, agent


def check_options(run_dir: str | os.PathLike[str], *, max_capture: str = "metadata", agent: str | None = None,
                  source_host: str | None = None, cause_map: Any = None) -> _Options:
    """AEP-8, AEP-3, AEP-7 and RUN-1, in this order: what is checked before the verification (public: the bus's
    forked producer checks them before it verifies, as :func:`export_events` does)."""
    root = Path(run_dir)
    level = _check_level(max_capture)
    host = _check_host(source_host if source_host not in (None, "") else "aefgate")
    cmap = _load_cause_map(cause_map)
    if agent is not None and (not isinstance(agent, str) or not agent or _CONTROL.search(agent)):
        raise Refusal("AEP-3", "the agent is a non-empty string without control characters", "agent")
    if root.is_symlink():
        raise Refusal("RUN-1", "a symbolic link: give the run folder itself", str(root))
    if not (root / "run.json").is_file():
        raise Refusal("RUN-1", "not a run folder (a run is a folder holding run.json)", str(root))
    return _Options(root, level, host, cmap, agent)


def _verify_intact(root: Path, policy: Any = None):
    """AEP-1: the run's :class:`Verification`, when it is ``intact``; refused otherwise (exit 1)."""
    return verified(root, "AEP-1", policy=policy, unsealed_ok=False)


def export_context(opts: _Options, run_hash: str, run: dict | None = None) -> tuple[_Export, list[dict], set[str],
                                                                                   Any]:
    """What follows the verification: the run header (``run``, when the caller read run.json itself), the
    ceiling (AEP-8), the agent (AEP-3), the overlay decisions (AEP-12); ``run_hash`` names the events (AEP-4)."""
    root, level, agent = opts.root, opts.level, opts.agent
    if run is None:
        run = jsonio.read_json(root / "run.json")
    run_level = "full" if run.get("contentCapture", "on") == "on" else "metadata"  # AEP-8, [SEC-6]
    ceiling = min(level, run_level, key=_RANK.__getitem__)
    redact: Any = None
    if ceiling == "redacted":
        # AEP-0001 §8.2(e): built at full, then through the §9.4 pipeline by a redacting hop; never minted
        mod = _aep_module()
        if mod is None or not hasattr(mod, "apply_ceiling") or not hasattr(mod, "Redactor"):
            raise Refusal("AEP-8", "the AEP-0003 §9.4 redaction pipeline (aefgate.formats.aep) is not available: "
                          "a redacted ceiling cannot be honored", "max_capture")
        apply_ceiling, redactor = mod.apply_ceiling, mod.Redactor()

        def _redacting(ev: dict, _level: str) -> dict:
            return apply_ceiling(ev, "redacted", redactor=redactor)

        redact = _redacting
    if agent is None:
        subject = run.get("subject") or {}
        agent = (subject.get("telemetry") or {}).get("agentId") or subject.get("ref") or run["runId"]
    ctx = _Export(root, run, run_hash, "full" if redact is not None else ceiling, agent, opts.host, opts.cmap)

    chain = verify_chain(root)
    decisions = [ln.event for ln in chain.lines if ln.ok and ln.event.get("kind") in OVERLAY_SEVERITY]
    targets = {ev["target"]["result"] for ev in decisions if "result" in ev["target"]}
    return ctx, decisions, targets, redact


def export_events(
    run_dir: str | os.PathLike[str],
    *,
    max_capture: str = "metadata",
    agent: str | None = None,
    source_host: str | None = None,
    cause_map: Any = None,
    policy: Any = None,
) -> Iterator[dict]:
    """The AEP events of a run that verifies ``intact`` (AEP-1), in the order of AEP-2.

    The run is verified and converted in one pass (:mod:`aefgate.aef.onepass`), the events kept in an
    unnamed temporary file, and every option checked, before the iterator is returned: a refusal comes from this
    call, not from the first ``next()``, and no event of a run that does not verify is ever yielded.
    ``max_capture`` is the capture ceiling (AEP-8), ``agent`` overrides the envelope's ``agent``, ``source_host``
    the host of ``source`` (AEP-3), ``cause_map`` maps resultIds or caseIds to assessed event ids (AEP-7),
    ``policy`` is the trust policy the verification uses for withheld blobs.
    """
    spool = tempfile.TemporaryFile(prefix="aefgate-export-")
    try:
        mapper = _one_pass(run_dir, spool, _encode, {"max_capture": max_capture, "agent": agent,
                                                     "source_host": source_host, "cause_map": cause_map,
                                                     "policy": policy})
    except BaseException:
        spool.close()
        raise
    return _spooled(spool, mapper)


def _one_pass(run_dir: str | os.PathLike[str], out, encode, options: Mapping[str, Any],
              parts: Path | None = None) -> "_AepMapper":
    """AEP-1, AEP-3, AEP-7, AEP-8: the options checked, then the run verified while its result events are made and
    written by ``encode`` (a batch of events -> their lines) to ``out``; refused unless it verifies intact.
    The mapper holds what the decision events need (AEP-12)."""
    opts = {k: v for k, v in options.items() if v is not None}
    policy = opts.pop("policy", None)
    checked = check_options(run_dir, **opts)
    mapper = _AepMapper(checked, sealed_run_hash(checked.root), encode, out, parts)
    verify_for_export(checked.root, mapper, policy)
    return mapper


def verify_for_export(root: Path, mapper: Any, policy: Any) -> None:
    """AEP-1: verify the run at ``root`` while ``mapper`` (which names the events by ``mapper.run_hash``, the
    seal's) maps it (``verify_run(mapper=)``); refused unless it verifies intact, then the mapper's own
    refusal; the run hash must be the verdict's. The mapper's output may then be released."""
    v = verified(root, "AEP-1", mapper=mapper, policy=policy, unsealed_ok=False)
    if v.run_hash != mapper.run_hash:  # pragma: no cover - intact means the seal's run hash is the run's
        raise Refusal("AEP-1", "the run changed during the export", str(root), exit_code=EXIT_INTEGRITY)


def _spooled(spool, mapper: "_AepMapper") -> Iterator[dict]:
    """The result events back from the spool, then the decision events (AEP-12)."""
    decode = msgspec.json.Decoder().decode
    try:
        spool.seek(0)
        for raw in spool:
            yield decode(raw)
    finally:
        spool.close()
    yield from decision_events(mapper.ctx, mapper.decisions, mapper.seen, mapper.redact)


def result_events(ctx: _Export, lines: Iterable[dict], targets: set[str],
                  seen_targets: dict[str, tuple[str, str, Any, str]], redact, structs: bool = False) -> Iterator[Any]:
    """AEP-2 .. AEP-11: the events of result lines, in order; numbered from ``ctx.seq``. Notes in ``seen_targets``
    the lines that overlay decisions target (AEP-12).

    ``structs`` (only for :func:`_encode_fast`, never with ``redact``): the common event (an evaluation, the plain
    envelope) is made as :class:`_EvalEvent` / :class:`_EvalData` structs instead of dicts; they encode to the same
    bytes as the dicts (the same members in the same order, the constant members pre-encoded once)."""
    if structs:
        k_aep, k_source, k_agent, k_session, k_capture = _raw_constants(ctx)
        unset = msgspec.UNSET
    text = ctx.text
    prefix = ctx.prefix
    cmap = ctx.cause_map
    source, agent, session, capture, plain = ctx.source, ctx.agent, ctx.run_id, ctx.ceiling, ctx.data
    run_time = ctx.run_time
    fail_sev, state_sev = _FAIL_SEVERITY, _STATE_SEVERITY
    for line in lines:
        rid = line["resultId"]
        case = line["caseId"]
        state = line["state"]
        aef = ctx.aef_object(line, structs)
        time = line.get("endedAt") or line.get("startedAt") or run_time
        cause = (cmap.get(rid) or cmap.get(case)) if cmap else None
        tp = _traceparent(line) if "traceLink" in line else None
        if state == "failed" or state == "warn":  # AEP-5, as _severity
            sev = fail_sev.get(line.get("severity") or "critical", "critical")
        else:
            sev = state_sev.get(state, "info")
        expl = ctx.explanation(line) if text else None
        fast = structs and plain and cause is None and tp is None
        evaluator = line["evaluator"]["id"]
        scores = line.get("scores") or ()
        ann = line.get("annotator")
        human = isinstance(ann, dict) and ann.get("kind") == "HUMAN"
        first_id = None
        last = len(scores) - 1  # -1: no scores, one event
        for k, score in enumerate(scores or (None,)):
            a = aef
            if human or (score is not None and ("normalized" in score or "label" in score)):
                if last > 0:  # one score (or none): its event may take the line's aef object itself
                    a = dict(aef)
                if score is not None and "normalized" in score:
                    a["normalized"] = score["normalized"]
                if score is not None and "label" in score:
                    a["scoreLabel"] = score["label"]
            if human:  # AEP-2: a person's judgment is feedback (AEP-0009 §4)
                data = _feedback_data(a, score, state, expl, evaluator)
                eid, etype = f"{prefix}{rid}-f{k}", T_FEEDBACK
            elif fast:  # the common event as structs: the same members in the same order, no dicts
                eid = f"{prefix}{rid}-e{k}"
                if first_id is None:
                    first_id = eid
                yield _EvalEvent(k_aep, eid, T_EVAL, time, k_source, k_agent, k_session, case, ctx.seq, 0, sev,
                                 k_capture, _EvalData(score["metric"] if score is not None else line["path"],
                                                      score["value"] if score is not None else unset, state,
                                                      expl if expl is not None else unset, evaluator, a))
                ctx.seq += 1
                continue
            else:
                data = _evaluation_data(a, score, line["path"], state, expl, evaluator)
                eid, etype = f"{prefix}{rid}-e{k}", T_EVAL
            if first_id is None:
                first_id = eid
            if plain and cause is None and tp is None:  # the common envelope, as one literal (AEP-3)
                ev = {"aep": AEP_VERSION, "id": eid, "type": etype, "time": time, "source": source, "agent": agent,
                      "session": session, "run": case, "seq": ctx.seq, "epoch": 0, "severity": sev,
                      "capture": capture, "data": data}
                ctx.seq += 1
            else:
                ev = ctx.envelope(eid, etype, time, case, cause, tp, sev, data)
            yield redact(ev, "redacted") if redact is not None else ev
        guard = _guardrail(line, aef, expl) if ("attack" in line or "ext" in line) else None
        if guard is not None:
            ev = ctx.envelope(f"{prefix}{rid}-g", T_GUARD, time, case, cause, tp, sev, guard)
            yield redact(ev, "redacted") if redact is not None else ev
        if rid in targets:
            seen_targets[rid] = (case, line["path"], line.get("trial"), first_id)


def _raw_constants(ctx: _Export) -> tuple[msgspec.Raw, ...]:
    """The struct path's constant envelope members (``aep``, ``source``, ``agent``, ``session``, ``capture``),
    encoded once."""
    return tuple(msgspec.Raw(_LINES_ENCODER.encode(v)) for v in (AEP_VERSION, ctx.source, ctx.agent, ctx.run_id,
                                                                 ctx.ceiling))


def _feedback_data(a: dict, score: Mapping[str, Any] | None, state: str, expl: str | None,
                   evaluator: str) -> dict[str, Any]:
    """AEP-2, AEP-10: the ``data`` of a person's judgment, a feedback event (AEP-0009 §4); the evaluator and the
    metric ride in ``aef`` (the feedback type has no field for them)."""
    data: dict[str, Any] = {}
    if score is not None:
        data["rating"] = score["value"]
        a["metric"] = score["metric"]
    data["label"] = state
    if expl is not None:
        data["comment"] = expl
    data["source"] = "human"
    a["evaluator"] = evaluator
    data["aef"] = a
    return data


def _evaluation_data(a: dict, score: Mapping[str, Any] | None, path: str, state: str, expl: str | None,
                     evaluator: str) -> dict[str, Any]:
    """AEP-2: the ``data`` of an evaluation event (one score, or the line's state without one)."""
    data: dict[str, Any] = {"gen_ai.evaluation.name": score["metric"] if score is not None else path}
    if score is not None:
        data["gen_ai.evaluation.score.value"] = score["value"]
    data["gen_ai.evaluation.score.label"] = state
    if expl is not None:
        data["gen_ai.evaluation.explanation"] = expl
    data["evaluator"] = evaluator
    data["aef"] = a
    return data


def decision_events(ctx: _Export, decisions: list[dict], seen_targets: dict[str, tuple[str, str, Any, str]],
                    redact) -> Iterator[dict]:
    """AEP-12: the feedback events of the overlay decisions, after every result line's."""
    text = ctx.text
    prefix = ctx.prefix
    for ov in decisions:  # AEP-12, file order ([OVL-6])
        kind = ov["kind"]
        target = ov["target"]
        a = {"decision": kind, "overlayEvent": ov["eventId"]}
        run = cause = None
        if "result" in target:
            case, path, trial, first_id = seen_targets.get(target["result"], (None, None, None, None))
            run, cause = case, first_id
            if path is not None:
                a["path"] = path
            if trial is not None:
                a["trial"] = trial
        if "requirement" in target:
            a["requirement"] = target["requirement"]
        if "expires" in ov:
            a["expires"] = ov["expires"]
        data = {}
        if kind in ("approve", "reject"):
            data["rating"] = 1 if kind == "approve" else -1
        data["label"] = ov["state"] if kind in ("override", "adjudicate") else kind
        if text and isinstance(ov.get("reason"), str):
            data["comment"] = ov["reason"]
        data["source"] = "human"
        data["aef"] = a
        ev = ctx.envelope(f"{prefix}{ov['eventId']}", T_FEEDBACK, ov["at"], run, cause, None,
                          OVERLAY_SEVERITY[kind], data)
        yield redact(ev, "redacted") if redact is not None else ev


def _guardrail(line: Mapping[str, Any], aef: Mapping[str, Any], expl: str | None) -> dict | None:
    """AEP-11: the guardrail payload of a line with ``attack`` or imported from a guardrail event, else None."""
    attack = line.get("attack")
    ext = line.get("ext")
    imported = ext.get(EXT_KEY, {}).get("guardrail") if isinstance(ext, dict) and isinstance(
        ext.get(EXT_KEY), dict) else None
    if not isinstance(attack, dict) and not isinstance(imported, dict):
        return None
    a: dict[str, Any] = {"path": aef["path"]}
    for k in ("trial", "trials"):
        if k in aef:
            a[k] = aef[k]
    if isinstance(attack, dict):
        g: dict[str, Any] = {"stage": "input"}
        success = attack.get("success")
        if success is True:
            g["verdict"] = "allowed"
        elif success is False:
            g["verdict"] = "blocked"
        cats = [{"name": attack["technique"]}]
        cats += [{"name": f"{t['scheme']}:{t['id']}"} for t in attack.get("taxonomy") or ()]
        g["categories"] = cats
        det = {"name": line["evaluator"]["id"]}
        if "version" in line["evaluator"]:
            det["version"] = line["evaluator"]["version"]
        g["detector"] = det
        a["attack"] = attack
    else:
        g = {k: v for k, v in imported.items() if k != "explanation"}
        a["guardrail"] = True
    if expl is not None:
        g["explanation"] = expl
    return {"guardrail": g, "aef": a}


def to_aep(run_dir: str | os.PathLike[str], out_path: str | os.PathLike[str], **options: Any) -> Path:
    """AEP-18: the run's events as JSONL at ``out_path``, written atomically (nothing on a refusal)."""
    out = Path(out_path)
    check_file_destination(out, (run_dir,))
    return _write_jsonl(run_dir, out, options, _encode)


def _write_jsonl(run_dir: str | os.PathLike[str], out: Path, options: Mapping[str, Any], encode) -> Path:
    """The export's lines (``encode`` of each batch of events) written atomically at ``out`` in one pass over the
    run (:mod:`aefgate.aef.onepass`): the run is verified while its events are made and written to a
    temporary sibling of ``out``, which is moved into place only when the run verifies intact (AEP-1)."""
    parts = out.parent / f".{out.name}.part-{secrets.token_hex(4)}"
    try:
        with atomic_file(out) as f:
            mapper = _one_pass(run_dir, f, encode, _export_options(options), parts)
            tail = list(decision_events(mapper.ctx, mapper.decisions, mapper.seen, mapper.redact))
            if tail:
                f.write(encode(tail))
    finally:  # the part files of ranges never appended (a refusal, an error)
        prefix = f"{parts.name}-"
        with contextlib.suppress(OSError):
            for name in os.listdir(parts.parent):
                if name.startswith(prefix):
                    (parts.parent / name).unlink(missing_ok=True)
    return out


def sealed_run_hash(root: Path) -> str | None:
    """The run hash seal.json names (AEP-4 names the events after it), or None when there is none to read: then
    nothing is mapped, and the verification refuses the run (only an intact run is exported)."""
    try:
        reading = read_seal_lean(root)
    except Exception:  # noqa: BLE001 - any seal that does not read: the verification reports it
        return None
    doc = getattr(reading, "doc", None)
    try:
        h = doc["predicate"]["runHash"]
    except (TypeError, KeyError):
        return None
    return h if isinstance(h, str) else None


class _AepMapper(LineMapper):
    """The AEP events of each result line (AEP-2 .. AEP-11), encoded by ``encode`` into ``out`` as the run is
    verified; numbered across lines (``seq``, AEP-3), so worker processes count their ranges first."""

    rule = "AEP-1"
    counts = True

    def __init__(self, opts: "_Options", run_hash: str | None, encode, out, parts: Path | None = None) -> None:
        super().__init__()
        self.opts, self.run_hash, self.encode, self.out, self.parts = opts, run_hash, encode, out, parts
        self.seen: dict[str, tuple[str, str, Any, str]] = {}

    def begin(self, run: dict, summary: dict | None) -> None:
        if self.run_hash is None:
            raise Refusal("AEP-1", "the run has no seal to name its events by", "seal.json", exit_code=EXIT_INTEGRITY)
        self.ctx, self.decisions, self.targets, self.redact = export_context(self.opts, self.run_hash, run)
        self.ctx.check_blobs = True  # a blob is read before the verification hashed it: it must hash to its name
        self.pid = os.getpid()  # a worker process (another pid) writes its lines to part files

    def count(self, data: bytes) -> int:
        return _count_events(data)

    def map(self, lines: list[tuple[int, dict]], base: int | None) -> tuple[bytes, dict]:
        ctx = self.ctx
        if base is not None:
            ctx.seq = base
        seen: dict[str, tuple[str, str, Any, str]] = {}
        encode = self.encode
        docs = [line for _, line in lines]
        # the plain AEP lines (or an encoder's own struct path, ``encode.fast``): the common events as structs
        fast = _encode_fast if encode is _encode else getattr(encode, "fast", None)
        if fast is not None and self.redact is None:
            blobs = fast(ctx, docs, self.targets, seen)
        else:
            blobs = []
            batch: list[dict] = []
            for ev in result_events(ctx, docs, self.targets, seen, self.redact):
                batch.append(ev)
                if len(batch) >= _BATCH:
                    blobs.append(encode(batch))
                    batch = []
            if batch:
                blobs.append(encode(batch))
        if self.parts is None or not lines or os.getpid() == self.pid:
            return b"".join(blobs), seen, ctx.seq
        # a worker process: the range's lines in a part file beside the destination (appended in the kernel)
        part = self.parts.with_name(f"{self.parts.name}-{lines[0][0]:09d}")
        with open(part, "xb") as f:
            f.writelines(blobs)
        return part, seen, ctx.seq

    def put(self, payload: tuple[bytes | Path, dict, int]) -> None:
        data, seen, seq = payload
        if isinstance(data, Path):
            self.out.flush()
            append_file(self.out, data)
        else:
            self.out.write(data)
        if seen:
            self.seen.update(seen)
        self.ctx.seq = seq  # where the decision events go on numbering (the lines may be mapped in workers)


# -- the JSONL bytes of an export: in this process, or in worker processes over ranges of results.ndjson ----------

_BATCH = 1024  # events encoded at a time


def _encode(batch: list[dict]) -> bytes:
    """``jsonio.dump_line`` of each event, joined (one encoder call per batch; the same bytes)."""
    blob = _LINES_ENCODER.encode_lines(batch)
    if b"null" in blob:  # a null or a non-finite number (ENC-3): event by event, as dump_line does it
        return b"".join([jsonio.dump_line(ev) for ev in batch])
    return blob


class _EvalData(msgspec.Struct, gc=False):
    """The ``data`` of an evaluation event, as :func:`result_events` builds it as a dict (the members in the
    same order; ``UNSET`` is omitted, as the dict omits the member: a JSON null is written as null)."""

    name: Any = msgspec.field(name="gen_ai.evaluation.name")
    value: Any = msgspec.field(name="gen_ai.evaluation.score.value")
    label: Any = msgspec.field(name="gen_ai.evaluation.score.label")
    explanation: Any = msgspec.field(name="gen_ai.evaluation.explanation")
    evaluator: Any
    aef: Any


class _EvalEvent(msgspec.Struct, gc=False):
    """The plain envelope of an evaluation event (the dict literal of :func:`result_events`, members in order);
    the constant members are ``msgspec.Raw``, encoded once per export."""

    aep: Any
    id: Any
    type: Any
    time: Any
    source: Any
    agent: Any
    session: Any
    run: Any
    seq: Any
    epoch: Any
    severity: Any
    capture: Any
    data: Any


def _encode_fast(ctx: _Export, docs: list[dict], targets: set[str],
                 seen: dict[str, tuple[str, str, Any, str]]) -> list[bytes]:
    """The bytes :func:`_encode` gives for the events of the result lines ``docs`` (no redaction), ``_BATCH`` lines
    at a time, the common events made as structs (:func:`result_events` with ``structs``), one encoder call a
    batch. A batch whose bytes hold ``null`` (a null, or the word in a string) is made again by the dict path and
    :func:`_encode`, which writes it event by event and refuses a non-finite number, as ``jsonio.dump_line`` does."""
    encode_lines = _LINES_ENCODER.encode_lines
    blobs: list[bytes] = []
    for i in range(0, len(docs), _BATCH):
        chunk = docs[i:i + _BATCH]
        seq0 = ctx.seq
        noted: dict[str, tuple[str, str, Any, str]] = {}
        blob = encode_lines(list(result_events(ctx, chunk, targets, noted, None, structs=True)))
        if b"null" in blob:
            ctx.seq = seq0
            noted = {}
            blob = _encode(list(result_events(ctx, chunk, targets, noted, None)))
        if noted:
            seen.update(noted)
        blobs.append(blob)
    return blobs


def _line_encoder():
    return msgspec.json.Encoder(enc_hook=jsonio._enc_hook)


_LINES_ENCODER = _line_encoder()


def _guard_count(line: Mapping[str, Any]) -> int:
    """1 when :func:`_guardrail` gives the line a guardrail event, else 0."""
    if isinstance(line.get("attack"), dict):
        return 1
    ext = line.get("ext")
    ours = ext.get(EXT_KEY) if isinstance(ext, dict) else None
    return 1 if isinstance(ours, dict) and isinstance(ours.get("guardrail"), dict) else 0


def _count_events(data: bytes) -> int:
    """The events of whole result lines, as :func:`result_events` gives them (a score each, or one for a line
    without scores; one more for a guardrail), read with a decoder that skips every other member. A line that
    does not decode counts nothing here: it is refused when it is checked."""
    lines = data.count(b"\n")
    try:  # the usual range: one decoder call, every line plain
        counted = _count_decoder().decode_lines(data)
    except (msgspec.DecodeError, RecursionError):
        counted = None
    if counted is not None and len(counted) == lines and not any(c.attack or c.ext for c in counted):
        return sum([len(c.scores) if c.scores else 1 for c in counted])
    decode = _count_decoder().decode
    full = msgspec.json.Decoder().decode
    parts = data.split(b"\n")
    parts.pop()
    events = 0
    for raw in parts:
        try:
            c = decode(raw)
        except (msgspec.DecodeError, RecursionError):
            c = None
        if c is not None and not c.attack and not c.ext:
            events += len(c.scores) if c.scores else 1
            continue
        try:  # an unusual line: read in full, counted as the stream counts it
            line = full(raw)
        except (msgspec.DecodeError, RecursionError):
            continue
        if type(line) is dict:
            events += (len(line.get("scores") or ()) or 1) + _guard_count(line)
    return events


class _CountItem(msgspec.Struct):
    pass


class _Counted(msgspec.Struct, gc=False):
    """The members of a result line that say how many events it gives."""

    scores: list[_CountItem] | None = None
    attack: msgspec.Raw = msgspec.Raw(b"")  # empty: absent
    ext: msgspec.Raw = msgspec.Raw(b"")


_COUNT_DECODER = None


def _count_decoder():
    global _COUNT_DECODER
    if _COUNT_DECODER is None:
        _COUNT_DECODER = msgspec.json.Decoder(_Counted)
    return _COUNT_DECODER


def _with_aigp(event: dict) -> dict:
    """The event with its AIGP grader (``data.aef.grader``, AEP-10) also as the CloudEvents extension attributes
    ``aigpgrader`` and ``aigpconfidence`` (docs/mappings/aigp.md): a CloudEvents consumer routes on the grader type
    without reading the data. The AEP event itself is unchanged (AEP-0005's bridge carries extension attributes
    verbatim, B4)."""
    data = event.get("data")
    aef = data.get("aef") if isinstance(data, dict) else None
    g = aef.get("grader") if isinstance(aef, dict) else None
    if not isinstance(g, dict) or "type" not in g:
        return event
    out = {**event, "aigpgrader": g["type"]}
    if g.get("confidence"):
        out["aigpconfidence"] = g["confidence"]
    return out


def _export_options(options: Mapping[str, Any]) -> dict:
    allowed = ("max_capture", "agent", "source_host", "cause_map", "policy")
    unknown = sorted(k for k in options if k not in allowed)
    if unknown:
        raise Refusal("CONV-3", f"the AEP export takes no option {', '.join(unknown)}", "options")
    out = {k: v for k, v in options.items() if v is not None}
    return out


# The streaming seam the bus uses (aefgate.bus.pipeline, the forked producer of `publish`), in its order:
# check_options -> sealed_run_hash -> verify_for_export(root, mapper) -> export_context (in the mapper's begin) ->
# result_events over the checked lines -> decision_events (docs/design/bus.md). Everyone else uses export_events.
