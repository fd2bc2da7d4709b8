"""AEP -> AEF (docs/mappings/aep.md, AEP-13 .. AEP-17): AEP events (JSONL, or structured CloudEvents detected per
line by ``specversion``) -> an imported AEF run written by RunBuilder and sealed ``ingest``
(:func:`from_aep`, :func:`from_cloudevents`, :func:`import_events`).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote


from aefgate.errors import Refusal
from aefgate.progress import task as progress_task
from aefgate.aef import jsonio
from aefgate.aef.builder import RunBuilder, _where
from aefgate.aef.resultid import result_id
from aefgate.aef.sealer import NotVerified
from aefgate.aef.signatures import load_private_key
from aefgate.aef.times import parse_time
from aefgate.aef.vocab import STATES, TYPED_ABSENCES
from aefgate.fsutil import check_destination, input_file_problem
from aefgate.converters.aep.vocabulary import (
    AEP_VERSION, ASSESSMENT_TYPES, EXT_KEY, MAX_LABEL, MAX_REASON, T_FEEDBACK, T_GUARD, _AEF_COPY, _CORRECTIONS,
    _HEX32, _RANK, _REF, _TRACEPARENT, _VERDICT_STATE, _aep_module, _ce_lines, _utc,
)


# ---------------------------------------------------------------------------------------------------------------
# AEP -> AEF


class _Line:
    """One result line being rebuilt from its events (AEP-15, AEP-16)."""

    __slots__ = ("case", "path", "marker", "aef", "state", "evaluator", "version", "scores", "reason", "human",
                 "attack", "guardrail", "time", "traceparent", "corrections", "where", "foreign", "session")

    def __init__(self, case: str, path: str, marker: tuple, where: str, session: str = ""):
        self.session = session
        self.case = case
        self.path = path
        self.marker = marker  # ("p",) plain, ("t", n) a trial line, ("r",) a rollup
        self.aef: dict | None = None
        self.state: str | None = None
        self.evaluator: str | None = None
        self.version: str | None = None
        self.scores: list[dict] = []
        self.reason: str | None = None
        self.human = False
        self.attack: dict | None = None
        self.guardrail: dict | None = None
        self.time: str | None = None
        self.traceparent: str | None = None
        self.corrections: list[str] = []
        self.where = where
        self.foreign = False


class _Importer:
    def __init__(self, run_id: str | None):
        self.run_id = run_id
        self.lines: dict[tuple, _Line] = {}
        self.seen: set[tuple[str, str]] = set()
        self.sessions: dict[tuple[str, str], str] = {}
        self.agent: str | None = None
        self.times: list[tuple[tuple[int, int], str]] = []
        self.content = False
        self.cloudevents = False
        self.skipped_major = 0
        self.levels: set[str] = set()
        self.foreign_paths: dict[tuple[str, str], int] = {}
        self._session = ""

    # -- reading -------------------------------------------------------------------------------------------------

    def take(self, ev: Any, where: str) -> None:
        if not isinstance(ev, dict):
            raise Refusal("AEP-13", "an event is a JSON object", where)
        is_ce, line_events = _ce_lines()
        if is_ce(ev):  # AEP-13: a CloudEvent, JSON format or an HTTP message line (export --mode binary)
            self.cloudevents = True
            for one in line_events(ev, where):
                if not isinstance(one, dict):
                    raise Refusal("AEP-13", "the CloudEvent does not give an AEP event", where)
                self._take(one, where)
            return
        self._take(ev, where)

    def _take(self, ev: dict, where: str) -> None:
        version = ev.get("aep")
        if not isinstance(version, str) or not version:
            raise Refusal("AEP-13", "an AEP event has a string aep (AEP-0001 §5.1)", where)
        if version.split(".", 1)[0] != "0":  # AEP-0003 §3.1: skipped, reported once
            self.skipped_major += 1
            return
        mod = _aep_module()
        if mod is not None and hasattr(mod, "check_event"):
            mod.check_event(ev, where)
        for k in ("id", "type", "time", "source", "agent"):
            if not isinstance(ev.get(k), str) or not ev.get(k):
                raise Refusal("AEP-13", f"the event has no string {k} (AEP-0001 §5.1)", where)
        etype = ev["type"]
        if etype not in ASSESSMENT_TYPES:  # AEP-13: other types are read, not imported
            return
        key = (ev["source"], ev["id"])
        if key in self.seen:  # AEP-0001 §7: a redelivery
            return
        self.seen.add(key)
        session = ev.get("session")
        if not isinstance(session, str) or not session:
            raise Refusal("AEP-13", "an assessment event has a session (AEP-0009 §1)", where)
        run = ev.get("run", session)
        if not isinstance(run, str) or not run:
            raise Refusal("AEP-13", "run is a non-empty string", where)
        data = ev.get("data", {})
        if not isinstance(data, dict):
            raise Refusal("AEP-13", "data is a JSON object", where)
        time = _utc(ev["time"])
        if time is None:
            raise Refusal("AEP-13", f"time {ev['time']!r} is not an RFC 3339 time with an offset", where)
        capture = ev.get("capture", "metadata")
        if capture not in _RANK:
            raise Refusal("AEP-13", f"capture {capture!r} is not a capture level", where)
        tp = ev.get("traceparent")
        if tp is not None and (not isinstance(tp, str) or not _TRACEPARENT.match(tp)):
            raise Refusal("AEP-13", "traceparent is not a W3C traceparent (version 00)", where)
        self.sessions.setdefault((ev["source"], session), where)
        self._session = session
        if self.agent is None:
            self.agent = ev["agent"]
        self.levels.add(capture)
        when = parse_time(time)
        aef = data.get("aef")
        if aef is not None and not isinstance(aef, dict):
            raise Refusal("AEP-13", "data.aef is a JSON object (AEP-10)", where)
        if aef is not None and "decision" in aef:  # AEP-15: an overlay decision is not imported (nor its time)
            return
        self.times.append((when, time))
        if aef is not None:
            for k, typ in (("parent", str), ("lane", str), ("metric", str), ("evaluator", str),
                           ("traceId", str), ("attack", dict), ("annotator", dict)):
                if k in aef and not isinstance(aef[k], typ):
                    raise Refusal("AEP-13", f"aef.{k} is a {'string' if typ is str else 'JSON object'}", where)
            if "traceId" in aef and not _HEX32.match(aef["traceId"]):
                raise Refusal("AEP-13", "aef.traceId is a 32-digit hex trace id", where)
            usage = aef.get("usage")
            if isinstance(usage, list):  # its entries' role and model are compared (RES-10) before the line's schema
                for i, u in enumerate(usage):  # is checked (VER-2 for the rest): their types first
                    for k in ("role", "model"):
                        if isinstance(u, dict) and k in u and not isinstance(u[k], str):
                            raise Refusal("AEP-13", f"aef.usage[{i}].{k} is a string", where)
        if etype == T_GUARD:
            self._guardrail(run, data, aef, time, tp, capture, where)
        elif etype == T_FEEDBACK:
            self._scored(run, data, aef, time, tp, capture, where, human=True)
        else:
            self._scored(run, data, aef, time, tp, capture, where, human=False)

    def _line(self, run: str, aef: dict | None, path_hint: str, where: str) -> _Line:
        if aef is not None and "path" in aef:
            path = aef["path"]
            if not isinstance(path, str) or not path:
                raise Refusal("AEP-13", "aef.path is a non-empty string", where)
            if "trial" in aef:
                t = aef["trial"]
                if not isinstance(t, int) or isinstance(t, bool) or not 0 <= t <= 999:
                    raise Refusal("AEP-13", "aef.trial is an integer from 0 to 999 (an AEF line's trial)", where)
                marker: tuple = ("t", aef["trial"])
            elif "trials" in aef:
                if not isinstance(aef["trials"], dict):
                    raise Refusal("AEP-13", "aef.trials is a JSON object", where)
                marker = ("r",)
            else:
                marker = ("p",)
            key = (run, path, marker)
            ln = self.lines.get(key)
            if ln is None:
                ln = self.lines[key] = _Line(run, path, marker, where, self._session)
                ln.aef = aef
            return ln
        # AEP-16: a foreign event is a line of its own; a second one at the same case and path is renamed
        n = self.foreign_paths.get((run, path_hint), 0) + 1
        self.foreign_paths[(run, path_hint)] = n
        path = path_hint if n == 1 else f"{path_hint}#{n}"
        while (run, path, ("p",)) in self.lines:
            n += 1
            self.foreign_paths[(run, path_hint)] = n
            path = f"{path_hint}#{n}"
        ln = self.lines[(run, path, ("p",))] = _Line(run, path, ("p",), where, self._session)
        ln.foreign = True
        return ln

    def _set_state(self, ln: _Line, state: str, where: str) -> None:
        if ln.state is not None and ln.state != state:
            raise Refusal("AEP-15", f"two states for one line ({ln.state}, {state}) at case {ln.case!r}, path "
                          f"{ln.path!r}", where)
        ln.state = state

    def _scored(self, run: str, data: dict, aef: dict | None, time: str, tp: str | None, capture: str,
                where: str, *, human: bool) -> None:
        if human:
            value, label, text = data.get("rating"), data.get("label"), data.get("comment")
            name = aef.get("metric") if aef is not None else "rating"
            who = aef.get("evaluator") if aef is not None else data.get("source")
        else:
            value = data.get("gen_ai.evaluation.score.value")
            label = data.get("gen_ai.evaluation.score.label")
            text = data.get("gen_ai.evaluation.explanation")
            name = data.get("gen_ai.evaluation.name")
            who = data.get("evaluator")
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise Refusal("AEP-13", "a score value or rating is a number", where)
        for what, v in (("label", label), ("explanation or comment", text), ("name", name), ("evaluator", who)):
            if v is not None and (not isinstance(v, str) or not v):
                raise Refusal("AEP-13", f"the {what} is a non-empty string", where)
        hint = ("feedback" if human else (name or "evaluation"))
        ln = self._line(run, aef, hint, where)
        ln.human = ln.human or human
        ln.time = ln.time or time
        ln.traceparent = ln.traceparent or tp
        if ln.foreign:
            ln.evaluator = who or (name if not human else "feedback")
        elif ln.evaluator is None:
            ln.evaluator = who or ln.path
        if text is not None and ln.reason is None:
            ln.reason = text
        if human and isinstance(data.get("correction"), str) and data["correction"]:
            ln.corrections.append(data["correction"])
        state_label = label in STATES and label != "pending"
        if ln.foreign:
            state = label if state_label else ("scored" if value is not None else "not_measured")
            self._set_state(ln, state, where)
            if value is not None:
                score: dict[str, Any] = {"metric": name if not human else "rating", "value": value}
                if label is not None and not state_label:
                    score["label"] = label[:MAX_LABEL]
                ln.scores.append(score)
            elif not state_label and ln.reason is None:
                ln.reason = "the event carries no score" + (f" (label {label[:256]})" if label else "")
            return
        if not state_label:
            raise Refusal("AEP-15", f"an event with data.aef has a state name as its label, not {label!r}", where)
        self._set_state(ln, label, where)
        if value is not None:
            metric = name if not human else aef.get("metric")
            if not isinstance(metric, str) or not metric:
                raise Refusal("AEP-13", "a scored event names its metric", where)
            score = {"metric": metric, "value": value}
            if "normalized" in aef:
                score["normalized"] = aef["normalized"]
            if "scoreLabel" in aef:
                score["label"] = aef["scoreLabel"]
            ln.scores.append(score)

    def _guardrail(self, run: str, data: dict, aef: dict | None, time: str, tp: str | None, capture: str,
                   where: str) -> None:
        g = data.get("guardrail", {})
        if not isinstance(g, dict):
            raise Refusal("AEP-13", "data.guardrail is a JSON object", where)
        text = g.get("explanation")
        if text is not None and (not isinstance(text, str) or not text):
            raise Refusal("AEP-13", "guardrail.explanation is a non-empty string", where)
        kept = {k: v for k, v in g.items() if k != "explanation"}
        if aef is not None and "path" in aef:
            ln = self._line(run, aef, "", where)
            if isinstance(aef.get("attack"), dict):
                ln.attack = aef["attack"]
            else:
                ln.guardrail = kept
            if text is not None and ln.reason is None:
                ln.reason = text
            return
        stage = g.get("stage")
        hint = f"guardrail/{stage}" if isinstance(stage, str) and stage else "guardrail"
        ln = self._line(run, None, hint, where)
        det = g.get("detector") if isinstance(g.get("detector"), dict) else {}
        ln.evaluator = det.get("name") if isinstance(det.get("name"), str) and det.get("name") else "guardrail"
        if isinstance(det.get("version"), str):
            ln.version = det["version"][:64]
        ln.time, ln.traceparent, ln.guardrail = time, tp, kept
        verdict = g.get("verdict") if isinstance(g.get("verdict"), str) else None
        self._set_state(ln, _VERDICT_STATE.get(verdict, "inconclusive"), where)
        if verdict not in _VERDICT_STATE and text is None:
            ln.reason = "the guardrail event gives no verdict"
        seen: set[str] = set()
        cats = g.get("categories")
        for c in cats if isinstance(cats, list) else ():
            if isinstance(c, dict) and isinstance(c.get("name"), str) and c["name"] and c["name"] not in seen \
                    and isinstance(c.get("score"), (int, float)) and not isinstance(c.get("score"), bool):
                seen.add(c["name"])
                ln.scores.append({"metric": c["name"][:256], "value": c["score"]})
        if text is not None:
            ln.reason = text

    # -- writing -------------------------------------------------------------------------------------------------

    def node(self, ln: _Line, level: str) -> dict:
        a = ln.aef or {}
        node: dict[str, Any] = {"path": ln.path, "evaluator": {"id": (ln.evaluator or ln.path)[:256]},
                                "state": ln.state or "not_measured"}
        version = a.get("evaluatorVersion", ln.version)
        if version is not None:
            node["evaluator"]["version"] = version
        if ln.reason is not None:
            node["reason"] = ln.reason[:MAX_REASON]
        elif node["state"] in TYPED_ABSENCES:  # AEP-15, [RES-2]
            node["reason"] = f"not exported (AEP capture {level})"
        if ln.scores and node["state"] not in TYPED_ABSENCES:
            node["scores"] = ln.scores
        for k in _AEF_COPY:
            if k in a:
                node[k] = a[k]
        if "annotator" in a:
            node["annotator"] = a["annotator"]
        elif ln.human:
            node["annotator"] = {"kind": "HUMAN"}
        if ln.foreign and ln.time is not None:
            node["endedAt"] = ln.time
        if ln.traceparent is not None:
            m = _TRACEPARENT.match(ln.traceparent)
            node["traceLink"] = {"traceId": m.group(1), "spanId": m.group(2)}
        elif isinstance(a.get("traceId"), str):
            node["traceLink"] = {"traceId": a["traceId"]}
        if ln.attack is not None:
            node["attack"] = ln.attack
        if ln.guardrail is not None:
            node["ext"] = {EXT_KEY: {"guardrail": ln.guardrail}}
        if ln.corrections:
            node[_CORRECTIONS] = list(ln.corrections)
        return node


def check_event(event: Any, where: str) -> None:
    """The import's own checks of one AEP event (AEP-13 and the rules :func:`import_events` applies to each event),
    on this event alone: what the bus (``serve ingest``) checks at intake before an event is journaled. Refuses
    with :class:`~aefgate.errors.Refusal`; returns nothing."""
    _Importer(None).take(event, where)


def _subject_ref(agent: str) -> str:
    """AEP-14: ``subject.ref`` of the envelope's ``agent``: the agent itself when it is a typed reference already
    (``<scheme>:<printable ASCII>``, the AEF pattern), else ``agent:`` and the agent with every character outside
    printable ASCII (a space, a non-ASCII letter, a control) and ``%`` percent-encoded (UTF-8, RFC 3986), cut at
    256 characters (never inside an escape)."""
    if _REF.match(agent):
        return agent
    enc = quote(agent, safe="".join(chr(c) for c in range(0x21, 0x7F) if chr(c) != "%"))
    if len(enc) > 256:
        enc = enc[:256]
        cut = enc.rfind("%", len(enc) - 2)
        if cut >= 0:
            enc = enc[:cut]
    return f"agent:{enc}"


def _trees(imp: _Importer, level: str) -> list[tuple[str, tuple, dict]]:
    """AEP-15: the roots (case, marker, node tree) in the order their lines first came; rollups last."""
    nodes: dict[tuple, dict] = {}
    by_rid: dict[str, tuple] = {}  # the result ids the exporting run gave (RES-4 over the session's runId)
    for key, ln in imp.lines.items():
        nodes[key] = imp.node(ln, level)
        trial = ln.marker[1] if ln.marker[0] == "t" else None
        by_rid[result_id(ln.session, ln.case, ln.path, trial)] = key
    roots: list[tuple] = []
    for key, ln in imp.lines.items():
        node = nodes[key]
        agg = node.get("aggregation")
        if isinstance(agg, dict) and isinstance(agg.get("decisive"), list):  # ids -> the children's paths
            agg = node["aggregation"] = dict(agg)
            if not all(isinstance(d, str) for d in agg["decisive"]):  # ids are compared: their type first
                raise Refusal("AEP-13", "aef.aggregation.decisive is an array of strings (result ids or paths)",
                              ln.where)
            agg["decisive"] = [by_rid[d][1] if d in by_rid else d for d in agg["decisive"]]
        parent = (ln.aef or {}).get("parent")
        if parent:
            pkey = by_rid.get(parent) if isinstance(parent, str) else None
            if pkey is None or pkey[0] != ln.case or pkey[2][0] != ln.marker[0] or (
                    ln.marker[0] == "t" and pkey[2] != ln.marker):
                raise Refusal("AEP-15", f"the parent {parent!r} of case {ln.case!r}, path {ln.path!r} is no line "
                              "of the same case and trial among the events", ln.where)
            nodes[pkey].setdefault("children", []).append(node)
        else:
            roots.append(key)
    plain = [k for k in roots if k[2][0] != "r"]
    rollups = [k for k in roots if k[2][0] == "r"]
    return [(k[0], k[2], nodes[k]) for k in plain + rollups]


def import_events(
    events: Iterable[Any],
    out_dir: str | os.PathLike[str],
    *,
    at: str | None = None,
    key: Any = None,
    run_id: str | None = None,
    target_mode: str | None = None,
    name: str = "<events>",
) -> Path:
    """AEP events (dicts, or ``(where, event)`` pairs) -> an imported AEF run at ``out_dir``, sealed ``ingest``
    (AEP-13 .. AEP-17). Nothing is written on a refusal."""
    out = Path(out_dir)
    check_destination(out)
    if at is not None:  # refused before any event is read (the seal would refuse it at the end)
        try:
            parse_time(at)
        except (ValueError, TypeError):
            raise Refusal("ENC-8", f"sealedAt is not an RFC 3339 UTC time: {at!r}", "at") from None
    imp = _Importer(run_id)
    for i, item in enumerate(events, 1):
        if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str):
            where, ev = item
        else:
            where, ev = f"{name}:{i}", item
        imp.take(ev, where)
    if imp.skipped_major:  # AEP-0003 §3.1: skipped, reported once
        warnings.warn(f"{name}: {imp.skipped_major} event(s) of an unsupported AEP major version were skipped",
                      stacklevel=2)
    return _write(imp, out, at=at, key=key, run_id=run_id, target_mode=target_mode or "live", name=name)


def _write(imp: _Importer, out: Path, *, at: str | None, key: Any, run_id: str | None, target_mode: str,
           name: str) -> Path:
    if not imp.lines:
        raise Refusal("AEP-14", "no assessment event to import", name)
    if len(imp.sessions) > 1 and run_id is None:
        (_src, _ses), where = list(imp.sessions.items())[1]
        raise Refusal("AEP-14", "the events come from several sessions (source, session); import one session per "
                      "run, or give run_id", where)
    if run_id is not None and (not isinstance(run_id, str) or not run_id):
        raise Refusal("AEP-14", "run_id is a non-empty string", "run_id")
    (_src, session), _w = next(iter(imp.sessions.items()))
    rid = run_id or session
    if target_mode not in ("live", "replayed", "scripted", "mocked"):
        raise Refusal("RUN-7", f"{target_mode!r} is not a target mode", "target_mode")
    times = sorted(imp.times)
    started, ended = times[0][1], times[-1][1]
    level = max(imp.levels, key=_RANK.__getitem__)
    content = "on" if _RANK[level] >= _RANK["redacted"] else "off"
    agent = imp.agent or rid
    header = {
        "runId": rid,
        "subject": {"ref": _subject_ref(agent), "kind": "agent"},
        "execution": {"targetMode": target_mode},
        "startedAt": started,
        "contentCapture": content,
    }
    asserted = ["status", "subject.ref", "subject.kind", "execution.targetMode", "startedAt", "endedAt",
                "contentCapture"]
    if run_id is not None:
        asserted.insert(0, "runId")
    signing_key = None
    if key is not None:
        signing_key = load_private_key(key) if isinstance(key, (str, os.PathLike)) else key
    trees = _trees(imp, level)
    # the summary request: one lane per lane met ("main" without one), one entry per scored metric and path
    lanes: dict[str, dict[tuple[str, str], None]] = {}
    metrics: dict[str, None] = {}
    for ln in imp.lines.values():
        for s in ln.scores:
            metrics.setdefault(s["metric"], None)
        if ln.marker[0] == "t" or not ln.scores or (ln.state in TYPED_ABSENCES):
            continue
        lane = (ln.aef or {}).get("lane") or "main"  # a string: AEP-13 checked it
        for s in ln.scores:
            lanes.setdefault(lane, {}).setdefault((s["metric"], ln.path), None)
    request = {"lanes": [{"lane": lane, "metrics": [{"metric": m, "path": p} for m, p in entries]}
                         for lane, entries in lanes.items()] or [{"lane": "main", "metrics": []}]}
    source = f"aep {AEP_VERSION}" + (" (cloudevents)" if imp.cloudevents else "")
    try:
        with RunBuilder(out, header, metrics=[], imported_from=source, asserted=asserted) as b:
            for m in metrics:
                b.declare_metric(m, "score", "none", "unbounded")
            for case, marker, node in trees:
                _add_corrections(b, node, content == "on")
                try:
                    if marker[0] == "t":
                        b.add_trial(case, node, marker[1])
                    elif marker[0] == "r":
                        trials = (imp.lines[(case, node["path"], marker)].aef or {}).get("trials") or {}
                        b.add_rollup(case, node, aggregation=trials.get("aggregation"), k=trials.get("k"))
                    else:
                        b.add_case(case, node)
                except Refusal as e:
                    raise _at_event(e, imp, case, marker, node) from None
            b.finish("completed", ended_at=ended, summary=request, seal="ingest", sealed_at=at,
                     signing_key=signing_key)
    except NotVerified as e:
        raise e.as_refusal("AEP-17", "the imported run") from None
    return out


def _at_event(e: Refusal, imp: _Importer, case: str, marker: tuple, node: dict) -> Refusal:
    """A refusal of RunBuilder for a line made from events (a member of ``aef`` of the wrong shape, say): the same
    rule and message, placed at the event that gave the line (``file:line``), the line's own place in the message.
    The line is found by the place the builder gives it (``builder._where``) in the tree being added."""
    where = e.where or ""
    stack = [node]
    while stack:
        n = stack.pop()
        path = n.get("path")
        if isinstance(path, str) and _where(case, path, None) in where:
            ln = imp.lines.get((case, path, marker))
            if ln is None:
                ln = next((v for k, v in imp.lines.items() if k[0] == case and k[1] == path), None)
            if ln is not None:
                return Refusal(e.rule, f"{e.message} (the imported line: {where})", ln.where, exit_code=e.exit_code)
        stack.extend(n.get("children", ()))
    return e


def _add_corrections(b: Any, node: dict, content_on: bool) -> None:
    """A feedback ``correction`` as an ``expected`` evidence record of its line (only with contentCapture on,
    [RUN-11]); walks the tree."""
    stack = [node]
    while stack:
        n = stack.pop()
        texts = n.pop(_CORRECTIONS, None)
        if texts and content_on:
            ids = n.setdefault("evidence", [])
            for text in texts:
                ids.append(b.add_evidence("expected", content=text, description="a correction from AEP feedback"))
        stack.extend(n.get("children", ()))


def _read_lines(path: Path) -> Iterator[tuple[str, Any]]:
    """AEP-13: each line of a JSONL file, strictly (I-JSON), as ``(file:line, value)``."""
    name = str(path)
    try:
        f = open(path, "rb")
    except OSError as e:
        raise Refusal("AEP-13", f"cannot read the events: {e.strerror}", name) from None
    with f, progress_task("import events", os.fstat(f.fileno()).st_size, "bytes") as bar:
        lineno = 0
        try:
            for lineno, raw in jsonio.iter_lines(f, max_lines=1 << 62):
                where = f"{name}:{lineno}"
                if raw is None:
                    raise Refusal("AEP-13", f"a line over {jsonio.MAX_DOC} bytes", where)
                bar.advance(len(raw) + 1)
                try:
                    yield where, jsonio.loads(raw)
                except jsonio.JsonProblem as e:
                    raise Refusal("AEP-13", f"not an I-JSON object: {e.reason}", where) from None
        except jsonio.JsonProblem as e:
            raise Refusal("AEP-13", f"not JSONL (AEP-0003 §3.1): {e.reason}",
                          f"{name}:{lineno + 1}" if lineno else name) from None


def from_aep(
    events_path: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    at: str | None = None,
    key: Any = None,
    run_id: str | None = None,
    target_mode: str | None = None,
) -> Path:
    """AEP-13 .. AEP-17: a JSONL file of AEP events (or structured CloudEvents) -> an imported run at ``out_dir``."""
    path = Path(events_path)
    problem = input_file_problem(path)
    if problem is not None:
        raise Refusal("CONV-5", f"the events file: {problem}", str(path))
    return import_events(_read_lines(path), out_dir, at=at, key=key, run_id=run_id, target_mode=target_mode,
                         name=str(path))


def from_cloudevents(events_path: str | os.PathLike[str], out_dir: str | os.PathLike[str], **options: Any) -> Path:
    """A JSONL file of structured CloudEvents -> an imported run (AEP-13: each line is detected by ``specversion``)."""
    return from_aep(events_path, out_dir, **options)


