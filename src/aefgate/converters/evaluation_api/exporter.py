"""AEF -> Evaluation API (docs/mappings/evaluation-api.md, "AEF -> Evaluation API"): a run that verifies as one
``EvaluationStatusResponse`` per case, so it can be served to the API's clients (``aefgate serve evaluation-api``).

A line the importer wrote (``ext["aefgate.evaluationApi"]``) comes back as its section, exactly (EVAPI-20). Any other
line becomes an insight (EVAPI-21): ``passed`` / ``failed`` a boolean (``trueText`` ``passed``, ``falseText``
``failed``); a measured line with a score a number when the score is an integer, else a text holding the number; a
typed absence ``null`` with its reason as the reasoning; a root path a ``STANDALONE_INSIGHT`` (``ref`` the path), a
deeper path an insight of the ``GROUP`` named by its first level (``ref`` the rest). Trial lines are left out (their
rollup is the case's result, [RES-8]). Sections are written ascending by ``order``, the featured outcome twice.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterator

from aefgate.converters.evaluation_api.importer import EXT, STATUS_PATH
from aefgate.converters.checks import verified_lines
from aefgate.errors import Refusal
from aefgate.aef import jsonio
from aefgate.aef.canonical import number_to_string
from aefgate.aef.runfs import blob_path
from aefgate.formats.evaluation_api import dumps
from aefgate.fsutil import atomic_dir, atomic_lines, check_destination, check_file_destination, parents_for

__all__ = ["export_responses", "to_evaluation_api", "file_name"]

_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.")
_ABSENT = ("not_measured", "not_applicable", "skipped", "error", "pending")


def file_name(case_id: str) -> str:
    """A case's response file: the case id percent-encoded (bytes outside ``[A-Za-z0-9_.-]``), ``.json``."""
    name = "".join(chr(b) if chr(b) in _SAFE else f"%{b:02X}" for b in case_id.encode("utf-8"))
    if name.startswith("."):
        name = "%2E" + name[1:]
    return name + ".json"


class _Run:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.run, self.lines = verified_lines(root, "EVAPI-8")
        self.content_on = self.run.get("contentCapture", "on") == "on"
        self.evidence: dict[str, dict] = {}
        p = root / "evidence.ndjson"
        if p.is_file():
            for _, rec in jsonio.iter_ndjson(p):
                self.evidence[rec["evidenceId"]] = rec
        self._blob_path = blob_path

    def blob_text(self, digest: str, where: str) -> str:
        data = (self.root / self._blob_path(digest.split(":", 1)[1])).read_bytes()
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise Refusal("EVAPI-22", "a blob that is not UTF-8 text: the response holds text", where) from None

    def evidence_text(self, line: dict, kind: str, where: str) -> str | None:
        for eid in line.get("evidence") or ():
            rec = self.evidence.get(eid)
            if rec and rec.get("kind") == kind and "blob" in (rec.get("link") or {}):
                return self.blob_text(rec["link"]["blob"], where)
        return None

    def reasoning(self, line: dict, where: str) -> str | None:
        r = line.get("reasoning")
        if isinstance(r, dict) and r.get("blob") and self.content_on:
            return self.blob_text(r["blob"], where)
        return None


def _value_of(x: _Run, line: dict, ext: dict, where: str) -> tuple[bool, Any]:
    """``(kept, value)`` of an imported line: kept False when the value is gone (a text or list value of a run that
    keeps no content)."""
    vt = ext.get("valueType")
    if vt is None:
        return True, None
    score = (line.get("scores") or [{}])[0]
    if vt == "boolean":
        v: dict[str, Any] = {"type": "boolean", "value": score.get("value") == 1}
        for k in ("trueText", "falseText"):
            if k in ext:
                v[k] = ext[k]
    elif vt == "number":
        v = {"type": "number", "value": int(score["value"])}
        for k in ("minValue", "maxValue"):
            if k in ext:
                v[k] = ext[k]
    else:
        text = x.evidence_text(line, "other", where)
        if text is None:
            return False, None
        v = {"type": vt, "value": text if vt == "text" else jsonio.loads(text.encode("utf-8"), top_object=False)}
    v.update(ext.get("valueUnknown") or {})
    return True, v


def _imported(x: _Run, line: dict, ext: dict, where: str) -> tuple[str, dict | None, dict | None]:
    """An imported line back as ``(kind, section or insight, group)``; None when its value is gone."""
    kept, value = _value_of(x, line, ext, where)
    if not kept:
        return "gone", None, None
    case = line["caseId"]
    if ext.get("section") == "FEATURED_INSIGHT":
        s: dict[str, Any] = {"type": "FEATURED_INSIGHT", "order": ext["order"],
                             "evaluationDefinitionId": ext["evaluationDefinitionId"], "sessionId": case,
                             "value": value}
        if "subtitle" in ext:
            s["subtitle"] = ext["subtitle"]
        text = x.reasoning(line, where)
        if text is not None:
            s["text"] = text
        s["created"] = ext["created"]
        s.update(ext.get("unknown") or {})
        return "featured", s, None
    ins: dict[str, Any] = {"id": ext["id"], "evaluationInsightDefinitionId": line["evaluator"]["id"],
                           "sessionId": case, "ref": ext["ref"], "name": ext["name"]}
    if "description" in ext:
        ins["description"] = ext["description"]
    if "order" in ext:
        ins["order"] = ext["order"]
    ins["value"] = value
    text = x.reasoning(line, where)
    if text is not None:
        ins["reasoning"] = text
    quote = x.evidence_text(line, "transcript", where) if x.content_on else None
    if quote is not None:
        ins["evidence"] = quote
    ins["executionMode"] = ext["executionMode"]
    ins["created"] = ext["created"]
    ins.update(ext.get("unknown") or {})
    if ext.get("section") == "GROUP":
        return "grouped", ins, ext.get("group")
    return "standalone", {"type": "STANDALONE_INSIGHT", **ins}, None


def _generic(x: _Run, line: dict, index: int, where: str) -> tuple[str, dict, dict | None]:
    """A line aefgate did not import from the API, as an insight (EVAPI-21)."""
    state = line["state"]
    scores = line.get("scores") or []
    value: Any
    if state in _ABSENT:
        value = None
    elif state in ("passed", "failed"):
        value = {"type": "boolean", "value": state == "passed", "trueText": "passed", "falseText": "failed"}
    elif scores:
        n = scores[0]["value"]
        if isinstance(n, int) or (isinstance(n, float) and n.is_integer() and abs(n) < 2 ** 53):
            value = {"type": "number", "value": int(n)}
        else:
            value = {"type": "text", "value": number_to_string(n)}
    else:
        value = None
    path = line["path"]
    group_name, _, rest = path.partition("/")
    created = line.get("endedAt") or line.get("startedAt") or x.run.get("endedAt") or x.run.get("startedAt")
    ins: dict[str, Any] = {"id": line["resultId"], "evaluationInsightDefinitionId": line["evaluator"]["id"],
                           "sessionId": line["caseId"], "ref": rest or path, "name": path, "order": index,
                           "value": value}
    text = x.reasoning(line, where)
    if text is None and value is None:
        text = line.get("reason")
    if text is not None:
        ins["reasoning"] = text
    ins["executionMode"] = "ON_CONVERSATION_END"
    ins["created"] = created
    if rest:
        return "grouped", ins, {"id": f"group:{group_name}", "name": group_name, "order": index, "created": created}
    return "standalone", {"type": "STANDALONE_INSIGHT", **ins}, None


def _response(x: _Run, lines: list[tuple[dict, str]]) -> tuple[str, dict]:
    status = "FINISHED"
    sections: list[dict] = []
    groups: dict[str, dict] = {}
    featured: dict | None = None
    top_unknown: dict = {}
    for index, (line, where) in enumerate(lines, 1):
        if "trial" in line:
            continue
        ext = (line.get("ext") or {}).get(EXT)
        if isinstance(ext, dict) and "status" in ext and line["path"] == STATUS_PATH:
            status = ext["status"]
            top_unknown.update(ext.get("unknown") or {})
            continue
        if isinstance(ext, dict) and "section" in ext:
            top_unknown.update(ext.get("responseUnknown") or {})
            kind, item, group = _imported(x, line, ext, where)
        else:
            kind, item, group = _generic(x, line, index, where)
        if item is None:
            continue
        if kind == "featured":
            sections.append(item)
            if item["value"] is not None:
                featured = {k: item[k] for k in ("evaluationDefinitionId", "value", "subtitle", "text") if k in item}
        elif kind == "standalone":
            sections.append(item)
        else:
            assert group is not None
            g = groups.get(group["id"])
            if g is None:
                g = groups[group["id"]] = {"type": "GROUP", "order": group["order"], "id": group["id"],
                                           "sessionId": line["caseId"], "name": group["name"]}
                if "description" in group:
                    g["description"] = group["description"]
                g["insights"] = []
                g["created"] = group["created"]
                g.update(group.get("unknown") or {})
                sections.append(g)
            g["insights"].append(item)
    for g in groups.values():
        g["insights"].sort(key=lambda i: i.get("order", 0))
    sections.sort(key=lambda s: s["order"])
    resp: dict[str, Any] = {"status": status}
    if sections or status == "FINISHED":
        resp["results"] = sections
    if featured is not None:
        resp["featured"] = featured
    resp.update(top_unknown)
    return lines[0][0]["caseId"], resp


def export_responses(run_dir: str | os.PathLike[str]) -> Iterator[tuple[str, dict]]:
    """``(case id, response)`` for each case of a run that verifies (EVAPI-8), in the order of the cases' first
    lines. The lines are gathered by case first (a case's lines need not follow each other in results.ndjson), so
    memory holds the run's lines (without their blobs)."""

    root = Path(run_dir)
    x = _Run(root)
    cases: dict[str, list[tuple[dict, str]]] = {}
    for lineno, line in x.lines:
        cases.setdefault(line["caseId"], []).append((line, f"results.ndjson:{lineno}"))
    x.lines = []
    for lines in cases.values():
        yield _response(x, lines)


def to_evaluation_api(run_dir: str | os.PathLike[str], out: str | os.PathLike[str]) -> Path:
    """Write the run's responses: ``out`` ending in ``.json`` is one response file (a run of one case; EVAPI-23
    otherwise), any other ``out`` a folder of ``<case id>.json`` files (absent or empty). Atomic: nothing appears at
    ``out`` unless every case was exported."""
    dest = Path(out)
    if dest.suffix == ".json":
        check_file_destination(dest, (run_dir,))
        responses = list(export_responses(run_dir))
        if len(responses) != 1:
            raise Refusal("EVAPI-23", f"the run has {len(responses)} cases: a .json output holds one response; "
                                      "give a folder", str(dest))
        with parents_for(dest):
            atomic_lines(dest, [dumps(responses[0][1])])
        return dest
    check_destination(dest, inputs=(Path(run_dir),))
    with parents_for(dest), atomic_dir(dest) as tmp:
        for case, resp in export_responses(run_dir):
            (Path(tmp) / file_name(case)).write_bytes(dumps(resp))
    return dest
