"""Evaluation API -> AEF (docs/mappings/evaluation-api.md, "Evaluation API -> AEF"): one ``EvaluationStatusResponse``
per session (files, a folder of them, or fetched live by :mod:`.live`) as one imported run, sealed ``ingest``.

A session is a case (its ``sessionId``); each insight is a root result line (EVAPI-10): at ``<ref>`` for a
standalone insight, ``<group name>/<ref>`` for an insight of a group (``%`` and ``/`` inside a name or ref written
``%25`` and ``%2F``), ``featured`` for the featured outcome (counted once: the response holds it twice, EVAPI-4).
Its value (EVAPI-11): a boolean is a score 1 / 0 with the display label as the score's ``label``, a number a score
whose metric has the declared range as its scale, text and lists an evidence blob (content: kept with
``--content-capture on`` only), ``null`` the typed absence ``not_measured``; the insight's reasoning is the line's
reasoning blob and its evidence quote a ``transcript`` evidence record (content). A non-FINISHED status is one line
at ``evaluation`` (EVAPI-12): ``NO_EVALS`` ``not_measured``, ``FAILED`` ``error``, ``NOT_READY`` (a snapshot, or
live polling that timed out) ``error``. Everything else of the section (ids, order, names, descriptions, execution
mode, the original ``created`` with its offset, display labels, members aefgate does not know) is kept in the
line's ``ext["aefgate.evaluationApi"]``, so the export gives the response back.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any, Iterable, Iterator

from aefgate.converters.checks import check_import_options
from aefgate.errors import Refusal
from aefgate.aef import jsonio
from aefgate.aef.builder import RunBuilder
from aefgate.aef.sealer import NotVerified
from aefgate.aef.signatures import signing_key_of
from aefgate.aef.times import now, parse_time, to_utc
from aefgate.aef.verifier import in_one_process
from aefgate.formats.evaluation_api import (
    BooleanValue, FeaturedSection, GroupSection, Insight, ListValue, NumberValue, StandaloneSection, StatusResponse,
    TextValue, iter_insights, parse, session_of, unknown,
)
from aefgate.fsutil import MISSING, check_destination, input_file_problem, open_regular

__all__ = ["EXT", "from_evaluation_api", "input_files", "escape", "insight_path"]

EXT = "aefgate.evaluationApi"  # [ENC-19]: the line's ext member
STATUS_PATH = "evaluation"
FEATURED_PATH = "featured"
_STATUS_STATE = {
    "NO_EVALS": ("not_measured", "NO_EVALS: the agent has no user-facing evaluations configured; nothing was "
                                 "measured"),
    "FAILED": ("error", "FAILED: the evaluation could not be completed"),
    "NOT_READY": ("error", "NOT_READY: the evaluation had not finished when the response was read"),
}


def escape(text: str) -> str:
    """A name or ref as one path level: ``%`` -> ``%25``, ``/`` -> ``%2F``."""
    return text.replace("%", "%25").replace("/", "%2F")


def insight_path(item: Any, group: GroupSection | None, where: str) -> str:
    if isinstance(item, FeaturedSection):
        return FEATURED_PATH
    if not item.ref:
        raise Refusal("EVAPI-1", "an insight without a ref: its result has no path", f"{where}.ref")
    if group is None:
        return escape(item.ref)
    if not group.name:
        raise Refusal("EVAPI-1", "a group without a name: its insights' results have no path", f"{where}.name")
    name = getattr(item, "name", None)
    if (name == f"{group.name}/{item.ref}" and "/" not in group.name and "%" not in name
            and all(name.split("/"))):
        return name  # a deeper path, as the export writes it (its name: the path; docs/mappings/evaluation-api.md)
    return f"{escape(group.name)}/{escape(item.ref)}"


def input_files(path: str | os.PathLike[str]) -> list[Path]:
    """The response files ``path`` names: itself, or a folder's ``*.json``. A ``.json`` entry that is not a regular
    file (a pipe, a device, a link that loops or leads nowhere) is refused (CLI-1), never skipped nor waited on."""
    p = Path(path)
    if p.is_dir():
        files = []
        for x in sorted(p.iterdir()):
            if x.suffix != ".json":
                continue
            problem = input_file_problem(x)
            if problem is not None:
                raise Refusal("CLI-1", f"a response file: {problem}", str(x))
            files.append(x)
        if not files:
            raise Refusal("CLI-1", "the folder holds no .json response", str(p))
        return files
    problem = input_file_problem(p)
    if problem is not None:
        raise Refusal("CLI-1", "no such file or folder" if problem == MISSING else problem, str(p))
    return [p]


def _read(p: Path) -> bytes:
    """A response file's bytes (at most the 4 MiB a JSON document is read at, [ENC-17]), only if a regular file."""
    try:
        with open_regular(p) as f:
            return f.read(jsonio.MAX_DOC + 1)
    except OSError as e:
        raise Refusal("CLI-1", f"a response file cannot be read: {e.strerror or e}", str(p)) from None


class _Session:
    """One response, read and checked: its case id, lines and the metrics they name."""

    def __init__(self, where: str, data: bytes, hint: str | None, asked: str | None = None) -> None:
        self.where = where
        self.resp, self.raw = parse(data, where)
        sid = session_of(self.resp)
        if asked is not None and sid is not None and sid != asked:
            raise Refusal("EVAPI-6", f"the response is for session {sid!r}, not the one asked for ({asked!r})",
                          where)
        self.case = sid or asked or hint
        if not self.case:
            raise Refusal("EVAPI-6", "the response names no session (no results): name the file after its session "
                                     "id", where)
        self.times = [t for t in self._times()]

    def _times(self) -> Iterator[str]:
        for item, _g in iter_insights(self.resp):
            t = to_utc(item.created)
            if t is not None:
                yield t

    def raw_items(self) -> Iterator[tuple[Any, GroupSection | None, dict, dict | None, str]]:
        """Each insight with its raw JSON (and its group's), in reading order, and its place in the input."""
        raws = list(self.raw.get("results") or [])
        order = sorted(range(len(raws)), key=lambda i: raws[i].get("order", 0))
        sections = self.resp.results or []
        for i in order:
            s, rs = sections[i], raws[i]
            at = f"{self.where}#.results[{i}]"
            if isinstance(s, GroupSection):
                rins = list(rs.get("insights") or [])
                for j in sorted(range(len(rins)), key=lambda j: rins[j].get("order", 0)):
                    yield s.insights[j], s, rins[j], rs, f"{at}.insights[{j}]"
            else:
                yield s, None, rs, None, at


def _value_line(item: Any, path: str, content_on: bool, b: Any, metrics: dict, where: str) -> dict:
    """The state, scores and value evidence of an insight's line; declares its metric."""
    v = item.value
    node: dict[str, Any] = {}
    if v is None:
        node["state"] = "not_measured"
        node["reason"] = "the insight could not be decided (value null)"
        return node
    node["state"] = "scored"
    if isinstance(v, BooleanValue):
        score: dict[str, Any] = {"metric": path, "value": 1 if v.value else 0}
        label = v.trueText if v.value else v.falseText
        if label is not None:
            score["label"] = label
        node["scores"] = [score]
        _declare(metrics, b, path, {"min": 0, "max": 1}, where)
    elif isinstance(v, NumberValue):
        node["scores"] = [{"metric": path, "value": v.value}]
        scale: Any = {"min": v.minValue, "max": v.maxValue} if v.minValue is not None and v.maxValue is not None \
            else "unbounded"
        _declare(metrics, b, path, scale, where)
    elif isinstance(v, (TextValue, ListValue)):
        if content_on:
            data = v.value.encode("utf-8") if isinstance(v, TextValue) else jsonio.dumps(v.value)
            node["evidence"] = [b.add_evidence("other", content=data, description=f"the insight's {v.__struct_config__.tag} value")]
    return node


def _declare(metrics: dict, b: Any, metric: str, scale: Any, where: str) -> None:
    known = metrics.get(metric)
    if known is None:
        metrics[metric] = scale
        b.declare_metric(metric, "score", "none", scale)
    elif known != scale:
        raise Refusal("EVAPI-5", f"the insight {metric!r} has the range {scale} here and {known} in another "
                                 "session: one metric has one scale ([SUM-1])", where)


def _ext(item: Any, group: GroupSection | None, raw: dict, raw_group: dict | None) -> dict:
    ext: dict[str, Any] = {}
    if isinstance(item, FeaturedSection):
        ext.update(section="FEATURED_INSIGHT", order=item.order, evaluationDefinitionId=item.evaluationDefinitionId,
                   created=item.created)
        if item.subtitle is not None:
            ext["subtitle"] = item.subtitle
        more = unknown(raw, FeaturedSection)
    else:
        ext["section"] = "GROUP" if group is not None else "STANDALONE_INSIGHT"
        ext.update(id=item.id, ref=item.ref, name=item.name, executionMode=item.executionMode, created=item.created)
        if item.order is not None:
            ext["order"] = item.order
        if item.description is not None:
            ext["description"] = item.description
        more = unknown(raw, StandaloneSection if group is None else Insight)
    v = item.value
    ext["valueType"] = None if v is None else v.__struct_config__.tag
    if isinstance(v, BooleanValue):
        for k in ("trueText", "falseText"):
            if getattr(v, k) is not None:
                ext[k] = getattr(v, k)
    elif isinstance(v, NumberValue):
        for k in ("minValue", "maxValue"):
            if getattr(v, k) is not None:
                ext[k] = getattr(v, k)
    if isinstance(raw.get("value"), dict):
        vu = unknown(raw["value"], type(v)) if v is not None else {}
        if vu:
            ext["valueUnknown"] = vu
    if more:
        ext["unknown"] = more
    if group is not None:
        g: dict[str, Any] = {"id": group.id, "name": group.name, "order": group.order, "created": group.created}
        if group.description is not None:
            g["description"] = group.description
        gu = unknown(raw_group, GroupSection)
        if gu:
            g["unknown"] = gu
        ext["group"] = g
    return ext


def _case_lines(sess: _Session, content_on: bool, b: Any, metrics: dict) -> Iterator[dict]:
    resp: StatusResponse = sess.resp
    seen: dict[str, str] = {}
    for item, group, raw, raw_group, at in sess.raw_items():
        path = insight_path(item, group, at)
        if path in seen or path == STATUS_PATH and resp.status != "FINISHED":
            raise Refusal("EVAPI-10", f"two insights at the path {path!r} ({seen.get(path, 'the status line')} "
                                      "and here): a result has one path in its case", at)
        seen[path] = at
        node: dict[str, Any] = {"path": path, "evaluator": {
            "id": item.evaluationDefinitionId if isinstance(item, FeaturedSection)
            else item.evaluationInsightDefinitionId}}
        node.update(_value_line(item, path, content_on, b, metrics, at))
        node["annotator"] = {"kind": "LLM"}
        reasoning = item.text if isinstance(item, FeaturedSection) else item.reasoning
        if content_on and reasoning:
            node["reasoning"] = reasoning.encode("utf-8")
        quote = None if isinstance(item, FeaturedSection) else item.evidence
        if content_on and quote is not None:
            node.setdefault("evidence", []).append(
                b.add_evidence("transcript", content=quote.encode("utf-8"), description="the insight's evidence"))
        ended = to_utc(item.created)
        if ended is not None:
            node["endedAt"] = ended
        node["ext"] = {EXT: _ext(item, group, raw, raw_group)}
        node["_where"] = at
        yield node
    if resp.status != "FINISHED":
        state, reason = _STATUS_STATE[resp.status]
        node = {"path": STATUS_PATH, "evaluator": {"id": "evaluation-api:status"}, "state": state, "reason": reason,
                "ext": {EXT: {"status": resp.status}}, "_where": sess.where}
        top = unknown(sess.raw, StatusResponse)
        if top:
            node["ext"][EXT]["unknown"] = top
        yield node


def _top_unknown(sess: _Session) -> dict:
    return unknown(sess.raw, StatusResponse) if sess.resp.status == "FINISHED" else {}


def read_sessions(items: Iterable[tuple[str, bytes, str | None, str | None]]) -> list[_Session]:
    """``(where, body, name hint, session asked)`` -> the checked sessions (EVAPI-6: one case each)."""
    sessions: list[_Session] = []
    seen: dict[str, str] = {}
    for where, data, hint, asked in items:
        s = _Session(where, data, hint, asked)
        if s.case in seen:
            raise Refusal("EVAPI-6", f"the session {s.case!r} twice ({seen[s.case]} and here): a case is imported "
                                     "once", where)
        seen[s.case] = where
        sessions.append(s)
    return sessions


def from_evaluation_api(
    inputs: str | os.PathLike[str] | Iterable[str | os.PathLike[str]] | None,
    out_dir: str | os.PathLike[str],
    *,
    fetched: Iterable[tuple[str, bytes, str | None, str | None]] = (),
    run_id: str | None = None,
    source: str | None = None,
    subject: str | None = None,
    subject_kind: str = "agent",
    target_mode: str = "live",
    content_capture: str = "on",
    at: str | None = None,
    key: Any = None,
) -> Path:
    """Import Evaluation API responses (files, folders of ``.json`` files, or ``fetched`` bodies) as one AEF run at
    ``out_dir`` (absent or empty), sealed ``ingest`` at ``at`` (default now), signed with ``key``."""
    check_import_options(target_mode=target_mode, content_capture=content_capture, at=at)
    for name, value in (("option 'subject'", subject), ("option 'run_id'", run_id), ("option 'from'", source)):
        if value is not None and not value:
            raise Refusal("CLI-2", f"{name} is not empty", name)
    if subject is None:
        raise Refusal("EVAPI-7", "no subject: a response names no agent; give option 'subject' (e.g. "
                                 "agent:acme-support)", "option 'subject'")
    signing_key = signing_key_of(key)  # before anything is written
    paths: list[Path] = []
    if inputs is not None:
        for p in ([inputs] if isinstance(inputs, (str, os.PathLike)) else inputs):
            paths.extend(input_files(p))
    out = Path(os.path.abspath(out_dir))
    check_destination(out, inputs=tuple(paths))
    items = [(str(p), _read(p), p.stem, None) for p in paths] + list(fetched)
    if not items:
        raise Refusal("CLI-1", "no response to import", "INPUT")
    sessions = read_sessions(items)  # every refusal of the responses before anything is written
    digest = hashlib.sha256()
    for where, data, _h, _a in items:
        digest.update(hashlib.sha256(data).digest())
    rid = run_id or f"evalapi-{digest.hexdigest()[:16]}"
    when = at or now()
    times = sorted((t for s in sessions for t in s.times), key=parse_time)
    started = times[0] if times else when
    ended = times[-1] if times else started
    header: dict[str, Any] = {
        "runId": rid,
        "subject": {"ref": subject, "kind": subject_kind or "agent"},
        "execution": {"targetMode": target_mode},
        "startedAt": started,
        "contentCapture": content_capture,
    }
    asserted = ["runId", "status", "subject.ref", "subject.kind", "execution.targetMode", "startedAt", "endedAt",
                "contentCapture"]
    content_on = content_capture == "on"
    metrics: dict[str, Any] = {}
    try:
        with RunBuilder(out, header, metrics=[], imported_from=source or "Evaluation API (EvaluationStatusResponse)",
                        asserted=asserted) as b:
            for sess in sessions:
                top = _top_unknown(sess)
                for node in _case_lines(sess, content_on, b, metrics):
                    at_item = node.pop("_where")
                    if top:
                        node["ext"][EXT]["responseUnknown"] = top
                        top = {}
                    try:
                        b.add_case(sess.case, node)
                    except Refusal as e:
                        raise Refusal(e.rule, f"{e.message} (the imported line: {e.where})", at_item,
                                      exit_code=e.exit_code) from None
            with in_one_process():
                sealed = at or (ended if parse_time(ended) > parse_time(when) else when)
                # one lane, every boolean and number insight summarised over the sessions (EVAPI-11: the mean, as
                # the API's own aggregations give it)
                lanes = [{"lane": "insights", "metrics": [{"metric": m, "path": m} for m in metrics]}] if metrics \
                    else []
                b.finish("completed", ended_at=ended, summary={"lanes": lanes}, seal="ingest", sealed_at=sealed,
                         signing_key=signing_key)
    except NotVerified as e:
        raise e.as_refusal("EVAPI-9", "the imported run") from None
    return out
