"""AEF -> ASSERT (interop/assert.md, "AEF -> ASSERT"; aefgate's choices: docs/mappings/assert.md): a run that
verifies, with captured conversations -> an ASSERT run that needs only ASSERT's judge stage (a "judge kit",
:mod:`aefgate.formats.assert_ai.writer`), with ``agenteval-cases.json`` mapping ASSERT's positional
``test_case_id`` back to each case id.

What travels is the conversation. For each case (in the order of its first line in ``results.ndjson``), the
evidence its lines cite, as the page's table says:

- a ``transcript`` blob that is an ASSERT inference row (an object with ``events``: what the ASSERT import keeps)
  is written back as that row (its ``type``, ``tester_model``, ``target``, ``llm_calls`` and ``stop_reason`` kept;
  only ``test_case_id`` is renumbered);
- a ``transcript`` blob holding chat messages (a JSON list, or an object with ``messages``: Inspect's, OpenAI's)
  becomes ``set_system_message``, ``add_message`` and ``tool_call`` events; a transcript that is text and not JSON is
  one user message holding the text;
- without a transcript: the ``input`` (a user message, or its messages), each ``tool_call`` (a ``tool_call`` event:
  name, arguments, result) and the ``output`` (the assistant's message) make the conversation;
- ``document`` evidence (retrieved context) has no place in ASSERT's transcripts; a case with neither a transcript
  nor an output (nothing the subject said) is not exported (the command reports how many).

Refused: a run that does not verify (ASSERT-12, exit 1); a run that keeps no content or holds no conversation
(ASSERT-10); no usable taxonomy, no judge model (ASSERT-11); a suite or run name ASSERT does not take (ASSERT-14).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterator

from aefgate.converters.assert_ai.names import EXT_FOLDER, EXT_NAME, decode_name
from aefgate.converters.checks import verified_lines
from aefgate.errors import Refusal
from aefgate.aef import jsonio
from aefgate.aef.runfs import blob_path
from aefgate.formats.assert_ai.reader import ASSERT_ID
from aefgate.formats.assert_ai.writer import KitCase, write_judge_kit
from aefgate.fsutil import atomic_dir, check_destination

__all__ = ["to_assert", "events_from_messages", "NO_RESULT"]

#: the tool result written for a call that got none, so the judge sees the call without reading it as run
NO_RESULT = "(no result: the call was not run)"
CONVERSATION_KINDS = ("transcript", "input", "output", "tool_call")


def _taxonomy(run_dir: Path, given: str | os.PathLike[str] | None) -> tuple[bytes, str]:
    """The taxonomy's bytes (as supplied) and its behavior name; ASSERT-11 when there is none ASSERT's judge can
    use (ASSERT skips categories without a name and refuses one named twice)."""
    path = Path(given) if given is not None else run_dir / "ext" / EXT_FOLDER / "taxonomy.json"
    where = str(path) if given is not None else "option 'taxonomy'"
    if not path.is_file():
        raise Refusal("ASSERT-11", "ASSERT's judge needs a taxonomy (taxonomy.json) and the run keeps none (a run "
                                   "imported from ASSERT keeps it under ext/assert-ai/): give option 'taxonomy'"
                      if given is None
                      else "no such taxonomy file", where)
    data = path.read_bytes()
    try:
        doc = _json(data[3:] if data[:3] == b"\xef\xbb\xbf" else data)
    except jsonio.JsonProblem as e:
        raise Refusal("ASSERT-11", f"the taxonomy is not JSON: {e.reason}", where) from None
    cats = doc.get("behavior_categories") if isinstance(doc, dict) else None
    if not isinstance(cats, list):
        raise Refusal("ASSERT-11", "a taxonomy is an object with behavior_categories (a list)", where)
    names: set[str] = set()
    for c in cats:
        name = c.get("name") if isinstance(c, dict) else None
        if not isinstance(name, str) or not name.strip():
            continue
        if name.strip() in names:
            raise Refusal("ASSERT-11", f"the taxonomy names {name.strip()!r} twice; ASSERT's judge refuses that",
                          where)
        names.add(name.strip())
    if not names:
        raise Refusal("ASSERT-11", "the taxonomy has no named behavior category; ASSERT's judge cannot run without "
                                   "one", where)
    behavior = doc.get("behavior")
    name = behavior.get("name") if isinstance(behavior, dict) and isinstance(behavior.get("name"), str) else None
    return data, name or "agenteval"


def _text_of(content: Any) -> str:
    """A message's text: a string, or the text parts of a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for p in content:
            if isinstance(p, str):
                parts.append(p)
            elif isinstance(p, dict) and isinstance(p.get("text"), str):
                parts.append(p["text"])
        return "".join(parts)
    if content is None:
        return ""
    return json.dumps(content, ensure_ascii=False)


def _event(role: str, text: str) -> dict:
    if role == "system":
        return {"view": ["system", "target", "combined"], "actor": "tester",
                "edit": {"type": "set_system_message", "message": {"role": "system", "content": text}}, "raw": None}
    return {"view": ["target", "combined"], "actor": "target",
            "edit": {"type": "add_message", "message": {"role": role, "content": text}}, "raw": None}


def _json(data: bytes) -> Any:
    """A JSON text as Python's ``json`` reads it (NaN, Infinity), within aefgate's bounds (depth, number size):
    blobs and files hold anything, and what does not read is text (or a refusal where JSON is required)."""
    return jsonio.loads_tolerant(data, nonfinite=True)


def _args(value: Any) -> dict:
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        try:
            parsed = _json(value.encode("utf-8", "surrogatepass"))
        except jsonio.JsonProblem:
            return {"input": value}
        return parsed if isinstance(parsed, dict) else {"input": parsed}
    return {} if value is None else {"input": value}


def _result(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _tool_event(name: str, args: Any, result: Any) -> dict:
    return {"view": ["target", "combined"], "actor": "tool",
            "edit": {"type": "tool_call", "tool_name": name or "tool", "tool_args": _args(args),
                     "tool_result": _result(result)}, "raw": None}


def _call_name(call: dict) -> str:
    fn = call.get("function")
    if isinstance(fn, dict):
        return str(fn.get("name") or call.get("name") or "tool")
    return str(fn or call.get("name") or call.get("tool_name") or "tool")


def _call_args(call: dict) -> Any:
    fn = call.get("function")
    if isinstance(fn, dict) and "arguments" in fn:
        return fn["arguments"]
    for k in ("arguments", "args", "tool_args", "input"):
        if k in call:
            return call[k]
    return None


def events_from_messages(messages: list) -> list[dict]:
    """ASSERT transcript events from chat messages (system, user, assistant text; an assistant's tool calls paired
    with the tool messages that answer them, in place; a call never answered gets :data:`NO_RESULT`)."""
    events: list[dict] = []
    pending: dict[str, tuple[int, dict]] = {}
    for m in messages:
        if not isinstance(m, dict):
            if isinstance(m, str) and m:
                events.append(_event("user", m))
            continue
        role = m.get("role")
        text = _text_of(m.get("content"))
        if role == "system":
            events.append(_event("system", text))
        elif role == "user":
            events.append(_event("user", text))
        elif role == "assistant":
            if text:
                events.append(_event("assistant", text))
            for call in m.get("tool_calls") if isinstance(m.get("tool_calls"), list) else ():
                if not isinstance(call, dict):
                    continue
                events.append(_tool_event(_call_name(call), _call_args(call), NO_RESULT))
                cid = call.get("id")
                if isinstance(cid, str):
                    pending[cid] = (len(events) - 1, call)
        elif role == "tool":
            cid = m.get("tool_call_id")
            if isinstance(cid, str) and cid in pending:
                i, _call = pending.pop(cid)
                events[i]["edit"]["tool_result"] = text
            else:
                events.append(_tool_event(str(m.get("function") or m.get("name") or "tool"), None, text))
    return events


def _tool_edit(data: bytes) -> dict:
    """A ``tool_call`` evidence blob as ASSERT's edit (an ASSERT edit as it is; else name, arguments, result)."""
    try:
        doc = _json(data)
    except jsonio.JsonProblem:
        return _tool_event("tool", None, data.decode("utf-8", "replace"))
    if isinstance(doc, dict) and doc.get("type") == "tool_call" and isinstance(doc.get("tool_name"), str):
        return {"view": ["target", "combined"], "actor": "tool", "edit": doc, "raw": None}
    if isinstance(doc, dict):
        result = next((doc[k] for k in ("tool_result", "result", "output", "content") if k in doc), None)
        return _tool_event(_call_name(doc), _call_args(doc), result)
    return _tool_event("tool", None, doc)


def _messages_of(data: bytes) -> tuple[str, Any]:
    """What a content blob holds: ``("row", dict)`` an ASSERT inference row, ``("messages", list)`` chat messages,
    ``("text", str)``."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return "text", data.decode("utf-8", "replace")
    try:
        doc = _json(data)
    except jsonio.JsonProblem:
        return "text", text
    if isinstance(doc, dict) and isinstance(doc.get("events"), list):
        return "row", doc
    if isinstance(doc, list):
        return "messages", doc
    if isinstance(doc, dict) and isinstance(doc.get("messages"), list):
        return "messages", doc["messages"]
    if isinstance(doc, dict) and isinstance(doc.get("choices"), list):  # a model output (Inspect's, OpenAI's)
        msgs = [c.get("message") for c in doc["choices"] if isinstance(c, dict) and isinstance(c.get("message"), dict)]
        return "messages", [{**m, "role": m.get("role", "assistant")} for m in msgs]
    if isinstance(doc, str):
        return "text", doc
    return "text", text


def _seed_of(data: bytes | None, events: list[dict]) -> str | None:
    if data is not None:
        kind, value = _messages_of(data)
        if kind == "text":
            return value
        if kind == "messages":
            for m in value:
                if isinstance(m, dict) and m.get("role") == "user":
                    return _text_of(m.get("content"))
    for e in events:
        edit = e.get("edit") if isinstance(e, dict) else None
        if isinstance(edit, dict) and edit.get("type") == "add_message" and isinstance(edit.get("message"), dict):
            msg = edit["message"]
            if msg.get("role") == "user":
                return msg.get("content") if isinstance(msg.get("content"), str) else None
    return None


class _Cases:
    """The run's cases in order, each with the evidence ids its lines cite and its root's ASSERT ext."""

    def __init__(self, lines: list[tuple[int, dict]]):
        self.order: dict[str, list[str]] = {}
        self.ext: dict[str, dict] = {}
        for _n, line in lines:
            ids = self.order.setdefault(line["caseId"], [])
            for eid in line.get("evidence") or ():
                if eid not in ids:
                    ids.append(eid)
            ext = (line.get("ext") or {}).get(EXT_NAME)
            if isinstance(ext, dict) and line["caseId"] not in self.ext:
                self.ext[line["caseId"]] = ext


def _evidence(root: Path) -> dict[str, tuple[str, str]]:
    """evidenceId -> (kind, blob hex) of the records that link a blob of a conversation kind."""
    out: dict[str, tuple[str, str]] = {}
    p = root / "evidence.ndjson"
    if not p.is_file():
        return out
    for _n, rec in jsonio.iter_ndjson(p):
        link = rec.get("link") or {}
        if rec.get("kind") in (*CONVERSATION_KINDS, "judge_reasoning") and isinstance(link.get("blob"), str):
            out[rec["evidenceId"]] = (rec["kind"], link["blob"].split(":", 1)[1])
    return out


def _conversations(root: Path, lines: list[tuple[int, dict]], target: str, behavior: str,
                   counts: dict[str, int]) -> Iterator[KitCase]:
    evidence = _evidence(root)
    cases = _Cases(lines)

    def blob(hexd: str) -> bytes:
        return (root / blob_path(hexd)).read_bytes()

    for case_id, ids in cases.order.items():
        by_kind: dict[str, list[str]] = {}
        for eid in ids:
            if eid in evidence:
                kind, hexd = evidence[eid]
                by_kind.setdefault(kind, []).append(hexd)
        dims = (cases.ext.get(case_id) or {}).get("dimensions")
        seed_blob = blob(by_kind["input"][0]) if by_kind.get("input") else None
        row: dict[str, Any] | None = None
        events: list[dict] = []
        if by_kind.get("transcript"):
            kind, value = _messages_of(blob(by_kind["transcript"][0]))
            if kind == "row":
                row = {k: v for k, v in value.items() if k not in ("test_case_id",)}
                events = [e for e in value["events"] if isinstance(e, dict)]
                if not isinstance(dims, dict) and isinstance(value.get("dimensions"), dict):
                    dims = value["dimensions"]
            elif kind == "messages":
                events = events_from_messages(value)
            else:
                events = [_event("user", value)]
        elif by_kind.get("output"):
            if seed_blob is not None:
                kind, value = _messages_of(seed_blob)
                events = events_from_messages(value) if kind == "messages" else [_event("user", value)] \
                    if kind == "text" else []
            events += [_tool_edit(blob(h)) for h in by_kind.get("tool_call", ())]
            kind, value = _messages_of(blob(by_kind["output"][0]))
            if kind == "messages":
                events += events_from_messages([{**m, "role": m.get("role") or "assistant"} if isinstance(m, dict)
                                                else m for m in value])
            elif kind == "text":
                events.append(_event("assistant", value))
        else:
            counts["notExported"] += 1
            ext = cases.ext.get(case_id) or {}
            if isinstance(ext.get("testCase"), dict):
                # a case of ASSERT's test set that never ran (no transcript): its test-set row travels alone, as in
                # ASSERT's own run (a test set larger than its inference set); ASSERT's judge has nothing to grade
                prefix = case_id.split(":", 1)[0]
                yield KitCase(case_id, None, _seed_of(seed_blob, []),
                              dims if isinstance(dims, dict) else {"behavior": behavior},
                              test_case=ext["testCase"], kind=prefix if prefix in ("prompt", "scenario") else "prompt")
            continue
        if row is None:
            row = {"type": "prompt", "behavior": behavior, "events": events, "llm_calls": [],
                   "stop_reason": "completed", "target": target, "tester_model": "",
                   "target_reasoning_effort": None, "tester_reasoning_effort": None}
            if isinstance(dims, dict):
                row["dimensions"] = dims
        counts["cases"] += 1
        ext = cases.ext.get(case_id) or {}
        test_case = ext.get("testCase") if isinstance(ext.get("testCase"), dict) else None
        score_row = None
        if isinstance(ext.get("scoreRow"), dict) and by_kind.get("judge_reasoning") and kind == "row":
            # a case imported from ASSERT with its score row kept (--content-capture on): the row comes back whole,
            # its verdict from the judge_reasoning blob (ASSERT's judge then skips it, as it skips a row it scored)
            verdict = _json(blob(by_kind["judge_reasoning"][0]))
            if isinstance(verdict, dict):
                score_row = {"type": row.get("type", "prompt"), **ext["scoreRow"], "verdict": verdict}
        yield KitCase(case_id, row, _seed_of(seed_blob, events),
                      dims if isinstance(dims, dict) else {"behavior": row.get("behavior", behavior)},
                      test_case=test_case, score_row=score_row)


def to_assert(
    run_dir: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    taxonomy: str | os.PathLike[str] | None = None,
    judge_model: str | None = None,
    suite: str | None = None,
    run: str | None = None,
    target: str | None = None,
    assert_root: str | None = None,
    label_set: str | None = None,
) -> dict[str, Any]:
    """Export the run at ``run_dir`` as a judge-only ASSERT run in the folder ``out_dir`` (absent or empty; written
    atomically). ``taxonomy``: the ``taxonomy.json`` ASSERT's judge grades against (default: the one an ASSERT
    import keeps under ``ext/assert-ai/``); ``judge_model``: default the run's first judge. Returns what was
    written: ``output``, ``cases`` (conversations written), ``notExported`` (cases with none), ``assertSuite``,
    ``assertRun``, and the paths ``caseMap`` and ``config``."""
    root = Path(run_dir)
    out = Path(os.path.abspath(out_dir))
    check_destination(out, (root,))
    for name, value in (("option 'assert_suite'", suite), ("option 'assert_run'", run)):
        if value is not None and not ASSERT_ID.match(value):
            raise Refusal("ASSERT-14", f"{name} {value!r} is not a name ASSERT takes (letters, digits, '.', '_' and "
                                       "'-', starting with a letter or digit)", name)
    if assert_root is not None and not (assert_root.startswith("/") or (len(assert_root) > 2 and
                                                                         assert_root[1:3] in (":\\", ":/"))):
        raise Refusal("CLI-2", f"option 'assert_root' {assert_root!r} is an absolute path: ASSERT resolves a "
                               "relative artifacts_root against its own install", "option 'assert_root'")
    doc, lines = verified_lines(root, "ASSERT-12")
    if doc.get("contentCapture") == "off":
        raise Refusal("ASSERT-10", "the run keeps no content (contentCapture off, RUN-11): it has no conversation "
                                   "for ASSERT's judge", str(root / "run.json"))
    tax_bytes, behavior = _taxonomy(root, taxonomy)
    judges = doc.get("judges") or []
    model = judge_model or next((j.get("model") for j in judges if isinstance(j, dict) and j.get("model")), None)
    if not model:
        raise Refusal("ASSERT-11", "the judge-only configuration names ASSERT's judge model, and the run names no "
                                   "judge: give option 'judge_model'", "option 'judge_model'")
    suite_ref = (doc.get("suite") or {}).get("ref", "")
    named = decode_name(suite_ref.split(":", 1)[1]) if suite_ref.startswith("suite:") else ""
    suite_name = suite or (named if ASSERT_ID.match(named) else "agenteval")
    run_name = run or "judge-1"
    subject = doc.get("subject") or {}
    row_target = target or (doc.get("deployment") or {}).get("endpoint") or decode_name(
        str(subject.get("ref", ":")).split(":", 1)[1]) or "agenteval"
    counts = {"cases": 0, "notExported": 0}
    with atomic_dir(out) as tmp:
        written = write_judge_kit(tmp, _conversations(root, lines, row_target, behavior, counts), taxonomy=tax_bytes,
                                  behavior=behavior, suite=suite_name, run=run_name, judge_model=model,
                                  assert_root=(assert_root or str(out)).replace("\\", "/"),
                                  label_set=label_set or f"aef:{doc['runId']}")
        if not counts["cases"]:
            raise Refusal("ASSERT-10", "no case cites a captured conversation (evidence of kind transcript, or "
                                       "output): there is nothing for ASSERT's judge to grade (an ASSERT import "
                                       "keeps them, given option 'content_capture=on')", str(root))
    return {"output": str(out), "cases": written["cases"], "notExported": counts["notExported"],
            "assertSuite": written["suite"], "assertRun": written["run"],
            "caseMap": str(out / Path(written["caseMap"]).name), "config": str(out / Path(written["config"]).name)}
