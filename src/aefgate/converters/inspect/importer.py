"""Inspect -> AEF (interop/inspect.md, "Inspect -> AEF", rules IN-6 to IN-10, R7I-n, R8-4).

:func:`from_inspect` reads an eval log with :func:`aefgate.formats.inspect.open_log` (``.eval`` or ``.json``) and
writes one AEF run with :class:`~aefgate.aef.builder.RunBuilder`, streaming the samples, sealed as
``ingest`` (a ``started`` log gives a running run, which is not sealed). The run is verified before it is renamed
into place (IN-11); every refusal names its rule and leaves nothing behind. :func:`import_log` is the same over a
header and an iterable of samples.
"""

from __future__ import annotations

import hashlib
import math
import os
import pickle
import re
import shutil
import sqlite3
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


from aefgate.converters.checks import check_import_options
from aefgate.errors import EXIT_INTEGRITY, Refusal
from aefgate.progress import task as progress_task
from aefgate.aef import jsonio
from aefgate.aef.signatures import signing_key_of
from aefgate.aef.canonical import jcs, number_to_string
from aefgate.aef.builder import RunBuilder
from aefgate.aef.sealer import NotVerified
from aefgate.aef.spill import SpillIndex
from aefgate.aef.summary import summarize
from aefgate.aef.times import parse_time
from aefgate.aef.verifier import in_one_process, verify_run
from aefgate.formats.inspect import open_log
from aefgate.formats.inspect.jsontext import dumps
from aefgate.formats.inspect.reader import RESOLVE_EXTRA_DEPTH
from aefgate.fsutil import check_destination
from aefgate.converters.inspect.conventions import (
    AEF_ROLES, MAX_DEPTH, _SURROGATE, CONTENT_FIELDS, CONTENT_KIND, INSTRUMENT_BLAME, LETTERS, MAX_ABORT,
    MAX_REASON, MEAN_METRICS, MODEL_BLAME, NO_MESSAGE, NO_VALUE, READ_VERSIONS, RECOMPUTED, SAFE_INT, TOKENS,
    TYPED_ABSENCES, _ID, CONTENT_MEMBERS, KEPT_HEADER, KEPT_REDUCTIONS, KEPT_SAMPLES, SCORE_CONTENT,
    _KIND_BYTE, _METHOD, _REDUCERS_IMPORT, _TEXT_BAD, _VERSION, _close, _cut, _int_value, _is_nan, _is_num, _kind,
    _utc, encode_name, without_credentials,
)


# ------------------------------------------------------------------------------------------------------------------
# reading checks of an Inspect document (IN-6): NaN where no unscored value can be, unpaired surrogates, depth
# ------------------------------------------------------------------------------------------------------------------


def _check_value(value: Any, where: str, base_depth: int, *, nan_ok: bool = False, text_ok: bool = True) -> None:
    """Refuse (IN-6) an unpaired surrogate (in a string or a member name), a NaN (unless ``nan_ok``: the value
    itself), an infinity, or nesting beyond [ENC-17]'s 64 levels (counted from the log document's top)."""
    stack: list[tuple[Any, int, str]] = [(value, base_depth, where)]
    while stack:
        v, d, w = stack.pop()
        t = type(v)
        if t is dict:
            if d > MAX_DEPTH:
                raise Refusal("IN-6", f"nesting deeper than {MAX_DEPTH} levels (ENC-17)", w)
            for k, x in v.items():
                if isinstance(k, str) and text_ok and _SURROGATE.search(k):
                    raise Refusal("IN-6", "a member name with an unpaired surrogate (not I-JSON)", w)
                stack.append((x, d + 1, f"{w}/{k}"))
        elif t is list:
            if d > MAX_DEPTH:
                raise Refusal("IN-6", f"nesting deeper than {MAX_DEPTH} levels (ENC-17)", w)
            stack.extend((x, d + 1, f"{w}/{i}") for i, x in enumerate(v))
        elif t is str:
            if text_ok and _SURROGATE.search(v):
                raise Refusal("IN-6", "a string with an unpaired surrogate (not I-JSON)", w)
        elif t is float:
            if v != v:
                if not (nan_ok and w == where):
                    raise Refusal("IN-6", "NaN where no unscored value can be", w)
            elif v in (math.inf, -math.inf):
                raise Refusal("IN-6", "Infinity: no AEF number holds it (ENC-3)", w)
        elif t is int and abs(v) > _MAX_FLOAT_INT:
            raise Refusal("IN-6", "an integer beyond binary64: no AEF number holds it (ENC-3)", w)


_MAX_FLOAT_INT = int(float.fromhex("0x1.fffffffffffffp+1023"))


def _depth_only(value: Any, where: str, base_depth: int) -> None:
    stack: list[tuple[Any, int]] = [(value, base_depth)]
    while stack:
        v, d = stack.pop()
        if type(v) is dict:
            if d > MAX_DEPTH:
                raise Refusal("IN-6", f"nesting deeper than {MAX_DEPTH} levels (ENC-17)", where)
            stack.extend((x, d + 1) for x in v.values())
        elif type(v) is list:
            if d > MAX_DEPTH:
                raise Refusal("IN-6", f"nesting deeper than {MAX_DEPTH} levels (ENC-17)", where)
            stack.extend((x, d + 1) for x in v)
        elif type(v) is float and v in (math.inf, -math.inf):
            raise Refusal("IN-6", "Infinity: no AEF number holds it (ENC-3)", where)


def _check_score_doc(score: Any, where: str, depth: int, text_ok: bool = True) -> None:
    """A Score (in a sample, or a reduction's sample): NaN is allowed as its value and as a member of a map value.
    ``text_ok`` False: no surrogate can be in it (the text read shows none), not searched for."""
    if not isinstance(score, dict):
        return  # its type is refused by the score rules (IN-7)
    for k, v in score.items():
        w = f"{where}/{k}"
        if text_ok and isinstance(k, str) and _SURROGATE.search(k):
            raise Refusal("IN-6", "a member name with an unpaired surrogate (not I-JSON)", where)
        if k == "value":
            if isinstance(v, dict):
                for mk, mv in v.items():
                    if text_ok and isinstance(mk, str) and _SURROGATE.search(mk):
                        raise Refusal("IN-6", "a member name with an unpaired surrogate (not I-JSON)", w)
                    _check_value(mv, f"{w}/{mk}", depth + 2, nan_ok=True, text_ok=text_ok)
            else:
                _check_value(v, w, depth + 1, nan_ok=True, text_ok=text_ok)
        else:
            _check_value(v, w, depth + 1, text_ok=text_ok)


def _check_header_doc(header: Mapping[str, Any]) -> None:
    for k, v in header.items():
        w = f"/{k}"
        if k == "samples":
            continue
        if k == "results" and isinstance(v, dict):
            for rk, rv in v.items():
                rw = f"{w}/{rk}"
                if rk == "scores" and isinstance(rv, list):
                    for i, es in enumerate(rv):
                        ew = f"{rw}/{i}"
                        if not isinstance(es, dict):
                            continue
                        for ek, ev in es.items():
                            if ek == "metrics" and isinstance(ev, dict):
                                for mk, mv in ev.items():
                                    if not isinstance(mv, dict):
                                        _check_value(mv, f"{ew}/metrics/{mk}", 6)
                                        continue
                                    for xk, xv in mv.items():
                                        _check_value(xv, f"{ew}/metrics/{mk}/{xk}", 7, nan_ok=(xk == "value"))
                            else:
                                _check_value(ev, f"{ew}/{ek}", 5)
                else:
                    _check_value(rv, rw, 3)
        elif k == "reductions" and isinstance(v, list):
            for i, red in enumerate(v):
                rw = f"{w}/{i}"
                if not isinstance(red, dict):
                    continue
                for rk, rv in red.items():
                    if rk == "samples" and isinstance(rv, list):
                        for j, s in enumerate(rv):
                            _check_score_doc(s, f"{rw}/samples/{j}", 5)
                    else:
                        _check_value(rv, f"{rw}/{rk}", 4)
        else:
            _check_value(v, w, 2)


def _check_sample_doc(sample: Mapping[str, Any], where: str, content_on: bool) -> None:
    # A sample read by aefgate's reader has the facts of its text (see _events_plain): no surrogate escape means no
    # surrogate anywhere in it, and its depth bounds every member but the events (which resolving events_data nests
    # deeper); the reader refused every infinity. The walks below then have nothing to find: skipped.
    facts = getattr(sample, "facts", None)
    if facts is not None and not facts.surrogate_escapes and facts.depth + 2 <= MAX_DEPTH:
        _check_plain_sample_doc(sample, where)
        return
    for k, v in sample.items():
        w = f"{where}/{k}"
        if isinstance(k, str) and _SURROGATE.search(k):
            raise Refusal("IN-6", "a member name with an unpaired surrogate (not I-JSON)", where)
        if k == "scores" and isinstance(v, dict):
            for sk, sv in v.items():
                if isinstance(sk, str) and _SURROGATE.search(sk):
                    raise Refusal("IN-6", "a member name with an unpaired surrogate (not I-JSON)", w)
                _check_score_doc(sv, f"{w}/{sk}", 5)
        elif k in CONTENT_FIELDS:
            # content: what JCS cannot write is refused as IN-8 when it is kept, and not read at all when it is not
            _depth_only(v, w, 4)
        elif k == "limit" and isinstance(v, dict):
            for lk, lv in v.items():
                _check_value(lv, f"{w}/{lk}", 5, nan_ok=(lk == "limit"))  # a NaN limit is IN-8 (R8-4)
        elif k == "events":
            if not _events_plain(sample):
                _check_events(v, w)
        else:
            _check_value(v, w, 4)


def _check_plain_sample_doc(sample: Mapping[str, Any], where: str) -> None:
    """:func:`_check_sample_doc` of a sample whose text shows no surrogate and a depth within [ENC-17] (the events
    aside): what remains to refuse is a NaN where no unscored value can be and an integer beyond binary64, so the
    content fields (depth and infinities only) are not walked, and nothing is searched for surrogates."""
    for k, v in sample.items():
        w = f"{where}/{k}"
        if k == "scores" and isinstance(v, dict):
            for sk, sv in v.items():
                _check_score_doc(sv, f"{w}/{sk}", 5, text_ok=False)
        elif k in CONTENT_FIELDS:
            continue
        elif k == "limit" and isinstance(v, dict):
            for lk, lv in v.items():
                _check_value(lv, f"{w}/{lk}", 5, nan_ok=(lk == "limit"), text_ok=False)
        elif k == "events":
            if not _events_plain(sample):
                _check_events(v, w)
        else:
            _check_value(v, w, 4, text_ok=False)


def _events_plain(sample: Mapping[str, Any]) -> bool:
    """True when the text the sample was read from shows :func:`_check_events` has nothing to find: no surrogate
    escape, no integer long enough to pass binary64, and nesting well inside [ENC-17] (the events array is at
    depth 2 of the sample and checked from depth 4; resolving events_data nests at most RESOLVE_EXTRA_DEPTH deeper).
    The reader refused every infinity already. A sample not read by aefgate's reader has no facts: walked."""
    facts = getattr(sample, "facts", None)
    if facts is None:
        return False
    return (not facts.surrogate_escapes and not facts.long_digit_runs
            and facts.depth + 2 + RESOLVE_EXTRA_DEPTH <= MAX_DEPTH)


def _check_events(events: Any, where: str) -> None:
    """Inspect's event transcript is not carried (none of it reaches the run): its depth and infinities are checked,
    and its strings for unpaired surrogates; a NaN in it is Inspect's unscored value in a score event, allowed."""
    stack: list[tuple[Any, int]] = [(events, 4)]
    while stack:
        v, d = stack.pop()
        t = type(v)
        if t is dict:
            if d > MAX_DEPTH:
                raise Refusal("IN-6", f"nesting deeper than {MAX_DEPTH} levels (ENC-17)", where)
            for k, x in v.items():
                if isinstance(k, str) and _SURROGATE.search(k):
                    raise Refusal("IN-6", "a member name with an unpaired surrogate (not I-JSON)", where)
                stack.append((x, d + 1))
        elif t is list:
            if d > MAX_DEPTH:
                raise Refusal("IN-6", f"nesting deeper than {MAX_DEPTH} levels (ENC-17)", where)
            stack.extend((x, d + 1) for x in v)
        elif t is str:
            if _SURROGATE.search(v):
                raise Refusal("IN-6", "a string with an unpaired surrogate (not I-JSON)", where)
        elif t is float and v in (math.inf, -math.inf):
            raise Refusal("IN-6", "Infinity: no AEF number holds it (ENC-3)", where)
        elif t is int and abs(v) > _MAX_FLOAT_INT:
            raise Refusal("IN-6", "an integer beyond binary64: no AEF number holds it (ENC-3)", where)


# ------------------------------------------------------------------------------------------------------------------
# Inspect -> AEF
# ------------------------------------------------------------------------------------------------------------------


def _aef_role(name: str, model_roles: Mapping[str, Any]) -> str:
    """IN-8: ``agent``, ``judge`` and ``attacker`` as they are, a role of ``eval.model_roles`` as ``judge``, any other
    as ``other``."""
    if name in AEF_ROLES:
        return name
    if name in model_roles:
        return "judge"
    return "other"


def _usage_members(u: Any, rule: str, where: str) -> dict[str, Any]:
    """A ModelUsage as AEF usage members (tokens by their gen_ai names, ``total_cost`` as ``costUsd``); a count that
    is not a non-negative integer, or a cost that is not a non-negative number, is refused (settled 10-10)."""
    if not isinstance(u, dict):
        raise Refusal(rule, f"a usage is an object, not {_kind(u)}", where)
    out: dict[str, Any] = {}
    for src, dst in TOKENS:
        v = u.get(src)
        if v is not None:
            out[dst] = _int_value(v, rule, f"{where}/{src}")
    if u.get("total_tokens") is not None:
        _int_value(u["total_tokens"], rule, f"{where}/total_tokens")  # checked, not carried (AEF has no total)
    cost = u.get("total_cost")
    if cost is not None:
        if not _is_num(cost) or not math.isfinite(cost) or cost < 0:
            raise Refusal(rule, f"a cost is a non-negative number, not {cost!r}", f"{where}/total_cost")
        out["costUsd"] = cost
    return out


def _add_usage(into: dict[str, Any], members: Mapping[str, Any]) -> None:
    for k, v in members.items():
        into[k] = into[k] + v if k in into else v


def _merge_entries(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Entries of one role and model added together (R7I-12, SUM-9), in order of first appearance."""
    out: dict[tuple[str, str | None], dict[str, Any]] = {}
    for e in entries:
        key = (e["role"], e.get("model"))
        if key in out:
            _add_usage(out[key], {k: v for k, v in e.items() if k not in ("role", "model")})
        else:
            out[key] = dict(e)
    return list(out.values())


def _reducer_to_aef(name: Any, epochs: int) -> tuple[str, int | None] | None:
    """An Inspect epochs reducer's AEF aggregation (and k), or None when it has none (R7I-14)."""
    if not isinstance(name, str):
        return None
    if name in _REDUCERS_IMPORT:
        return _REDUCERS_IMPORT[name], None
    m = re.fullmatch(r"pass_at_([0-9]+)", name)
    if m:
        k = int(m.group(1))
        return ("PassAtK", k) if 1 <= k <= SAFE_INT else None
    m = re.fullmatch(r"at_least_([0-9]+)", name)
    if m:
        k = int(m.group(1))
        if k == 1:
            return "AnyPass", None
        if k == epochs:
            return "AllPass", None
    return None


@dataclass
class _ScoreRead:
    """A Score read as a line (IN-7): the node members it gives."""

    state: str
    scores: list[dict[str, Any]]
    reason: str | None
    explanation: str | None
    ext: dict[str, Any]


def _read_score(score: Any, key: str, where: str, content_on: bool) -> _ScoreRead:
    if not isinstance(score, dict):
        raise Refusal("IN-7", f"a Score is an object, not {_kind(score)}", where)
    history = score.get("history")
    if history is not None and not isinstance(history, list):
        raise Refusal("IN-7", "Score.history is a list", f"{where}/history")
    if history:
        raise Refusal("IN-10", "a Score.history edit: the table makes it an overlay event, and the converter "
                               "writes no overlays", f"{where}/history")
    for member in ("explanation", "answer", "reason"):
        v = score.get(member)
        if v is not None and not isinstance(v, str):
            raise Refusal("IN-7", f"Score.{member} is a string, not {_kind(v)}", f"{where}/{member}")
    meta = score.get("metadata")
    if meta is not None and not isinstance(meta, dict):
        raise Refusal("IN-7", f"Score.metadata is an object, not {_kind(meta)}", f"{where}/metadata")
    if "value" not in score:
        raise Refusal("IN-7", "a Score has a value", where)
    value = score["value"]
    reason = score.get("reason")
    scores: list[dict[str, Any]] = []
    ext: dict[str, Any] = {}
    vw = f"{where}/value"
    if isinstance(value, bool):
        raise Refusal("IN-7", "a boolean value: AEF scores are numbers or the letters C, I, P, N", vw)
    if _is_num(value):
        if _is_nan(value):
            state = "error" if reason in INSTRUMENT_BLAME else "not_measured"
        else:
            scores.append({"metric": key, "value": value})
            state = "scored"
    elif isinstance(value, str):
        if value not in LETTERS:
            raise Refusal("IN-7", f"the string {value!r} is not one of the letters C, I, P, N", vw)
        v, state = LETTERS[value]
        scores.append({"metric": key, "value": v, "label": value})
    elif isinstance(value, dict):
        for mk, mv in value.items():
            mw = f"{vw}/{mk}"
            if isinstance(mv, bool):
                raise Refusal("IN-7", "a boolean value: AEF scores are numbers or the letters C, I, P, N", mw)
            if _is_num(mv):
                if not _is_nan(mv):  # a NaN member of a map gets no score (R7I-13)
                    scores.append({"metric": mk, "value": mv})
            elif isinstance(mv, str):
                if mv not in LETTERS:
                    raise Refusal("IN-7", f"the string {mv!r} is not one of the letters C, I, P, N", mw)
                scores.append({"metric": mk, "value": LETTERS[mv][0], "label": mv})
            else:
                raise Refusal("IN-7", f"a member of a map value is a number or a letter, not {_kind(mv)}", mw)
        state = "scored"
    elif isinstance(value, list):
        ext["value"] = value
        state = "scored"
    else:
        raise Refusal("IN-7", f"a Score value is a number, a letter, a list or a map, not {_kind(value)}", vw)
    if reason in MODEL_BLAME:
        state = "failed"
    line_reason = reason if reason else (NO_VALUE if state in TYPED_ABSENCES else None)
    if line_reason is not None:
        line_reason = _cut(line_reason, MAX_REASON)
    if content_on and score.get("answer") is not None:
        ext["answer"] = score["answer"]
    if meta is not None:
        ext["metadata"] = meta
    explanation = score.get("explanation") if content_on else None
    return _ScoreRead(state, scores, line_reason, explanation or None, ext)


def _run_once(sample: Mapping[str, Any], epoch: int) -> bool:
    """A sample an AEF export wrote for a case run once in a run with trials (aefgate's extension,
    docs/mappings/inspect.md): epoch 1, and each of its Scores' ``metadata.aef`` says ``"trial": null``."""
    scores = sample.get("scores")
    if epoch != 1 or not isinstance(scores, dict) or not scores:
        return False
    for sc in scores.values():
        aef = (sc.get("metadata") or {}).get("aef") if isinstance(sc, dict) and isinstance(sc.get("metadata"), dict) \
            else None
        if not isinstance(aef, dict) or "trial" not in aef or aef["trial"] is not None:
            return False
    return True


#: Inspect's built-in scorers that compare text by code, no model (inspect_ai.scorer): docs/mappings/aigp.md
INSPECT_CODE_SCORERS = frozenset({"match", "includes", "pattern", "answer", "choice", "exact", "f1"})


def _node(path: str, evaluator: str, sr: _ScoreRead) -> dict[str, Any]:
    n: dict[str, Any] = {"path": path, "evaluator": {"id": evaluator}, "state": sr.state}
    if sr.reason is not None:
        n["reason"] = sr.reason
    if sr.scores:
        n["scores"] = sr.scores
    if sr.explanation:
        n["reasoning"] = sr.explanation
    if sr.ext:
        n["ext"] = {"inspect_ai": sr.ext}
    return n


def _case_id(v: Any, where: str) -> str:
    """``samples[].id`` as a caseId, from its value alone (settled 10-10): ``1000.0`` is ``"1000"``."""
    if isinstance(v, str):
        if not v or len(v) > 256 or _TEXT_BAD.search(v):
            raise Refusal("IN-8", "a sample id is 1-256 characters without control characters (RES-4)", where)
        return v
    if _is_num(v):
        if isinstance(v, float) and not (math.isfinite(v) and v == int(v)):
            raise Refusal("IN-8", f"a sample id {v!r} is not an integer", where)
        i = int(v)
        if abs(i) > SAFE_INT:
            raise Refusal("IN-8", f"a sample id {v!r} is beyond 2^53-1: two ids could read as one number", where)
        return str(i)
    raise Refusal("IN-8", f"a sample id is a string or an integer, not {_kind(v)}", where)


def _limit_reason(limit: Any, where: str) -> str:
    """R8-4: ``<type> limit <limit>``, the number written from its value as ECMAScript writes it."""
    if not isinstance(limit, dict) or "type" not in limit or "limit" not in limit:
        raise Refusal("IN-8", "a limit is {type, limit}", where)
    t, n = limit["type"], limit["limit"]
    if not isinstance(t, str) or not t:
        raise Refusal("IN-8", "a limit's type is a non-empty string", f"{where}/type")
    if not _is_num(n) or not math.isfinite(n):
        raise Refusal("IN-8", f"a limit's limit is a finite number, not {n!r}", f"{where}/limit")
    return _cut(f"{t} limit {number_to_string(n)}", MAX_REASON)


def _stop_of(sample: dict[str, Any], where: str) -> tuple[str | None, str | None]:
    """Why a sample stopped (IN-8): its error's message or its limit, and the state of a line it did not score
    (error, not_measured); None, None for a sample that ran to its end."""
    error = sample.get("error")
    if error is not None and not isinstance(error, dict):
        raise Refusal("IN-8", f"a sample's error is an object, not {_kind(error)}", f"{where}/error")
    limit = sample.get("limit")
    stopped_reason: str | None = None
    stopped_state = None
    if error is not None:
        msg = error.get("message")
        if msg is not None and not isinstance(msg, str):
            raise Refusal("IN-8", f"an error's message is a string, not {_kind(msg)}", f"{where}/error/message")
        stopped_reason = _cut(msg, MAX_REASON) if msg else NO_MESSAGE
        stopped_state = "error"
        if limit is not None:
            _limit_reason(limit, f"{where}/limit")
    elif limit is not None:
        stopped_reason = _limit_reason(limit, f"{where}/limit")
        stopped_state = "not_measured"
    return stopped_reason, stopped_state


@dataclass
class _Header:
    """What the import reads from the log's header before the samples."""

    run: dict[str, Any]
    status: str
    abort_reason: str | None
    asserted: list[str]
    imported_from: str
    epochs: int
    aggregation: tuple[str, int | None] | None
    model: str
    model_roles: dict[str, Any]
    scorer_names: list[str]
    evaluator_of: dict[str, str]
    request: dict[str, Any] | None
    compares: list[tuple[str, str, str | None, float]]  # (metric, path, method, Inspect's value)
    reductions: list[Any]
    scorer_models: dict[str, str]  # scorer -> the judge model its options name


def _check_version(header: Mapping[str, Any], fmt: str | None) -> None:
    """IN-6 (a log Inspect cannot read is no Inspect log): the versions inspect-ai 0.3.285 reads
    (:data:`~.common.READ_VERSIONS`: 1 and 2, and 3 in a .eval), any other refused, naming it. A log without a
    version is read as Inspect reads it (version 1's default, older logs)."""
    version = header.get("version")
    if version is None:
        return
    accepted = READ_VERSIONS.get(fmt or "eval", READ_VERSIONS["eval"])
    value: Any = version  # read as Inspect's model reads an int: 2, 2.0 and "2" are 2
    if isinstance(version, str) and re.fullmatch(r"\s*[0-9]{1,4}\s*", version):
        value = int(version)
    elif isinstance(version, float) and version.is_integer():
        value = int(version)
    if isinstance(value, bool) or not isinstance(value, int) or value not in accepted:
        raise Refusal("IN-6", f"log format version {version!r}: inspect-ai reads versions "
                              f"{', '.join(map(str, accepted))} of a {'.json' if fmt == 'json' else '.eval'} log, "
                              "so this is no log Inspect reads", "/version")


def _results_v1(results: Any) -> Any:
    """A version-1 ``results`` (one ``scorer`` and its ``metrics``) as version 2's ``scores`` list, as Inspect
    reads it (IN-9 then reads its metrics)."""
    if not isinstance(results, dict) or "scores" in results or not isinstance(results.get("scorer"), dict):
        return results
    name = results["scorer"].get("name")
    entry = {"name": name, "scorer": name, "params": results["scorer"].get("params") or {},
             "metrics": results.get("metrics") or {}}
    return {**{k: v for k, v in results.items() if k not in ("scorer", "metrics")}, "scores": [entry]}


def _read_header(header: Mapping[str, Any], *, target_mode: str, content_capture: str,
                 fmt: str | None = None) -> _Header:
    if not isinstance(header, Mapping):
        raise Refusal("IN-6", "an eval log is an object", "/")
    _check_version(header, fmt)
    if header.get("version") in (1, "1", 1.0) and "results" in header:  # read as Inspect reads it (a metric may be NaN)
        header = {**header, "results": _results_v1(header["results"])}
    _check_header_doc(header)
    status = header.get("status")
    if status not in ("started", "success", "cancelled", "error"):
        raise Refusal("IN-6", f"status {status!r} is not started, success, cancelled or error", "/status")
    ev = header.get("eval")
    if not isinstance(ev, dict):
        raise Refusal("IN-6", "the log has no eval object", "/eval")
    for key in ("log_updates",):
        if header.get(key):
            raise Refusal("IN-10", "log_updates: the table makes them overlay events, and the converter writes no "
                                   "overlays", f"/{key}")
    run_id, run_id_src = _run_id(ev)
    suite_ref, version, model, subject_ref = _suite_and_subject(ev)
    roles, model_roles, judges = _roles_and_judges(ev)
    config, epochs, reducers, aggregation, policy = _epochs_policy(ev)
    stats, asserted, started, ended, abort_reason = _times(header, ev, status)
    imported_from = _imported_from(ev)
    scorers, scorer_names = _scorer_names(ev)
    results, evaluator_of, request_entries, compares, ext_metrics = _results_entries(header, scorer_names)
    request: dict[str, Any] | None = None
    if status != "started":
        request = {"lanes": [{"lane": "main", "metrics": request_entries}] if request_entries else []}
        if ext_metrics:
            request["ext"] = {"inspect_ai": {"metrics": ext_metrics}}
        usage, total_cost = _run_usage(stats, model, roles)
        if usage:
            request["usage"] = usage
        if total_cost is not None:
            request["cost"] = {"totalUsd": total_cost}
    ext, scorer_models = _run_ext(ev, run_id_src, results, reducers, aggregation, config, scorers)
    run: dict[str, Any] = {
        "schemaVersion": "1.0",
        "runId": run_id,
        "subject": {"ref": subject_ref, "kind": "model"},
        "execution": {"targetMode": target_mode},
        "suite": {"ref": suite_ref, "version": version},
    }
    if policy is not None:
        run["suite"]["executionPolicy"] = policy
    if judges:
        run["judges"] = judges
    run["startedAt"] = started
    if ended is not None:
        run["endedAt"] = ended
    run["contentCapture"] = content_capture
    if ext:  # [RUN-10]: no member named like a credential (a task argument api_key, ...): dropped, a declared loss
        run["ext"] = {"inspect_ai": without_credentials(ext, "", [])}

    reductions = header.get("reductions") or []
    _check_reductions(reductions)
    aef_status = {"started": "running", "success": "completed"}.get(status, "aborted")
    return _Header(run, aef_status, abort_reason, asserted, imported_from, epochs, aggregation, model, model_roles,
                   scorer_names, evaluator_of, request, compares, reductions, scorer_models)


def _run_id(ev: dict[str, Any]) -> tuple[str, Any]:
    """The runId (IN-6): eval.eval_id, else eval.run_id; and eval.run_id as the log has it."""
    eval_id = ev.get("eval_id")
    run_id_src = ev.get("run_id")
    if eval_id is not None and not isinstance(eval_id, str):
        raise Refusal("IN-6", f"eval.eval_id is a string, not {_kind(eval_id)}", "/eval/eval_id")
    if run_id_src is not None and not isinstance(run_id_src, str):
        raise Refusal("IN-6", f"eval.run_id is a string, not {_kind(run_id_src)}", "/eval/run_id")
    run_id = eval_id or run_id_src
    if not isinstance(run_id, str) or not _ID.match(run_id):
        raise Refusal("IN-6", f"{run_id!r} is not an AEF id (1-128 letters, digits, . _ : -)", "/eval/eval_id")
    return run_id, run_id_src


def _suite_and_subject(ev: dict[str, Any]) -> tuple[str, str, str, str]:
    """The suite (IN-6) and the subject: suite ref, suite version, the model's name, subject ref."""
    task = ev.get("task")
    if not isinstance(task, str):
        raise Refusal("IN-6", f"eval.task is a string, not {_kind(task)}", "/eval/task")
    tv = ev.get("task_version", 0)
    if tv is None:
        tv = 0
    if isinstance(tv, str):
        version = tv
    elif _is_num(tv) and not _is_nan(tv):
        version = str(_int_value(tv, "IN-6", "/eval/task_version"))
    else:
        raise Refusal("IN-6", f"eval.task_version is an integer or a string, not {_kind(tv)}", "/eval/task_version")
    if not _VERSION.match(version) or version.lower() == "latest":
        raise Refusal("IN-6", f"task_version {version!r} is not an AEF version (ENC-10)", "/eval/task_version")
    suite_ref = "suite:" + encode_name(task)
    model = ev.get("model")
    if not isinstance(model, str):
        raise Refusal("IN-6", f"eval.model is a string, not {_kind(model)}", "/eval/model")
    subject_ref = "model:" + encode_name(model)
    for ref, w in ((suite_ref, "/eval/task"), (subject_ref, "/eval/model")):
        if len(ref.split(":", 1)[1]) > 256:
            raise Refusal("IN-6", "the encoded name is longer than a ref holds (256)", w)
    return suite_ref, version, model, subject_ref


def _roles_and_judges(ev: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
    """Roles and judges (IN-6, R7I-16): eval.model_roles, role -> model name, the judges."""
    roles = ev.get("model_roles") or {}
    if not isinstance(roles, dict):
        raise Refusal("IN-6", f"eval.model_roles is an object, not {_kind(roles)}", "/eval/model_roles")
    model_roles: dict[str, Any] = {}
    judges: list[dict[str, Any]] = []
    for name, cfg in roles.items():
        w = f"/eval/model_roles/{name}"
        if not isinstance(cfg, dict):
            raise Refusal("IN-6", f"a model role is an object with a model, not {_kind(cfg)}", w)
        m = cfg.get("model")
        if not isinstance(m, str) or not m:
            raise Refusal("IN-6", "a model role names its model (a string)", f"{w}/model")
        model_roles[name] = m
        if _aef_role(name, roles) == "judge" and m not in [j["model"] for j in judges]:
            if len(m) > 256:
                raise Refusal("IN-6", "a judge model is at most 256 characters", f"{w}/model")
            judges.append({"model": m})
    return roles, model_roles, judges


def _epochs_policy(ev: dict[str, Any]) -> tuple[dict[str, Any], int, list[str], Any, dict[str, Any] | None]:
    """eval.config's epochs and reducer: the config, epochs, the reducers, their AEF aggregation, the suite's
    executionPolicy (None without epochs)."""
    config = ev.get("config") or {}
    if not isinstance(config, dict):
        raise Refusal("IN-6", f"eval.config is an object, not {_kind(config)}", "/eval/config")
    epochs_given = config.get("epochs")
    epochs = 1 if epochs_given is None else _int_value(epochs_given, "IN-6", "/eval/config/epochs", minimum=1)
    if epochs > 1000:
        raise Refusal("IN-6", "more than 1000 epochs: AEF's trialsPerCase is at most 1000", "/eval/config/epochs")
    reducers = config.get("epochs_reducer")
    if reducers is not None and not (isinstance(reducers, list) and all(isinstance(r, str) for r in reducers)):
        raise Refusal("IN-6", "eval.config.epochs_reducer is a list of names", "/eval/config/epochs_reducer")
    reducers = reducers or []
    if len(reducers) > 1:
        raise Refusal("IN-8", "more than one epochs reducer: AEF keeps one aggregation per case",
                      "/eval/config/epochs_reducer")
    aggregation = _reducer_to_aef(reducers[0], epochs) if reducers else None
    policy: dict[str, Any] | None = None
    if epochs_given is not None:
        policy = {"trialsPerCase": epochs}
        if aggregation is not None:
            policy["aggregation"] = aggregation[0]
            if aggregation[1] is not None:
                policy["k"] = aggregation[1]
    return config, epochs, reducers, aggregation, policy


def _times(header: Mapping[str, Any], ev: dict[str, Any],
           status: str) -> tuple[dict[str, Any], list[str], str, str | None, str | None]:
    """Times (IN-6) and the abort reason: stats, the asserted fields, startedAt, endedAt, abortReason."""
    stats = header.get("stats") or {}
    if not isinstance(stats, dict):
        raise Refusal("IN-6", f"stats is an object, not {_kind(stats)}", "/stats")
    asserted = ["subject.ref", "subject.kind", "execution.targetMode", "contentCapture"]
    if stats.get("started_at") is not None:
        started = _utc(stats["started_at"], "IN-6", "/stats/started_at")
    else:
        if ev.get("created") is None:
            raise Refusal("IN-6", "the log has neither stats.started_at nor eval.created", "/eval/created")
        started = _utc(ev["created"], "IN-6", "/eval/created")
        asserted.append("startedAt")
    if ev.get("created") is not None:
        _utc(ev["created"], "IN-6", "/eval/created")
    ended = None
    if status != "started":
        if stats.get("completed_at") is None:
            raise Refusal("IN-6", "a closed log without stats.completed_at", "/stats/completed_at")
        ended = _utc(stats["completed_at"], "IN-6", "/stats/completed_at")
        if parse_time(ended) < parse_time(started):
            raise Refusal("IN-6", "the log ends before it starts", "/stats/completed_at")
    abort_reason = None
    if status == "error":
        err = header.get("error")
        msg = err.get("message") if isinstance(err, dict) else None
        if not isinstance(msg, str) or not msg:
            raise Refusal("IN-6", "an error log without an error message", "/error/message")
        abort_reason = _cut(msg, MAX_ABORT)
    elif status == "cancelled":
        abort_reason = "cancelled"
    return stats, asserted, started, ended, abort_reason


def _imported_from(ev: dict[str, Any]) -> str:
    """imported.from: inspect_ai and its version in eval.packages."""
    packages = ev.get("packages") or {}
    if not isinstance(packages, dict):
        raise Refusal("IN-6", f"eval.packages is an object, not {_kind(packages)}", "/eval/packages")
    pv = packages.get("inspect_ai")
    return f"inspect_ai {pv}" if isinstance(pv, str) and pv else "inspect_ai"


def _scorer_names(ev: dict[str, Any]) -> tuple[list[Any], list[str]]:
    """eval.scorers and their names, once each (for a sample that stopped before it was scored)."""
    scorers = ev.get("scorers") or []
    if not isinstance(scorers, list):
        raise Refusal("IN-6", f"eval.scorers is a list, not {_kind(scorers)}", "/eval/scorers")
    scorer_names: list[str] = []
    for i, s in enumerate(scorers):
        name = s.get("name") if isinstance(s, dict) else None
        if not isinstance(name, str) or not name:
            raise Refusal("IN-6", "a scorer has a name", f"/eval/scorers/{i}")
        if name not in scorer_names:
            scorer_names.append(name)
    return scorers, scorer_names


def _results_entries(header: Mapping[str, Any], scorer_names: list[str]) -> tuple[
        Any, dict[str, str], list[dict[str, Any]], list[tuple[str, str, str | None, float]], dict[str, dict[str, Any]]]:
    """results (IN-9): the results, evaluator per metric, the summary request's entries, the values to compare with
    the lines, the metrics kept in ext."""
    results = header.get("results")
    if results is not None and not isinstance(results, dict):
        raise Refusal("IN-9", f"results is an object, not {_kind(results)}", "/results")
    entries = (results or {}).get("scores") or []
    if not isinstance(entries, list):
        raise Refusal("IN-9", f"results.scores is a list of EvalScore, not {_kind(entries)}", "/results/scores")
    evaluator_of: dict[str, str] = {}
    request_entries: list[dict[str, Any]] = []
    compares: list[tuple[str, str, str | None, float]] = []
    ext_metrics: dict[str, dict[str, Any]] = {}
    seen_entries: set[tuple[str, str]] = set()
    for i, es in enumerate(entries):
        w = f"/results/scores/{i}"
        name, scorer, values = _eval_score(es, w)
        evaluator_of.setdefault(name, scorer or name)
        # the entry's path: its name (the key of the samples' scores); a member of a map-valued scorer (an entry
        # named for a member, whose scorer is a key) is summarized at its scorer's path (docs/mappings/inspect.md)
        path = name
        if scorer_names and name not in scorer_names and scorer in scorer_names:
            path = scorer
        if (name, path) in seen_entries:
            raise Refusal("IN-9", "two results.scores entries for one metric and path", w)
        seen_entries.add((name, path))
        request_entries.append(_summary_entry(name, path, values, w, compares, ext_metrics))
    return results, evaluator_of, request_entries, compares, ext_metrics


def _eval_score(es: Any, w: str) -> tuple[str, Any, dict[str, Any]]:
    """An EvalScore, checked (IN-9): its name, its scorer, metric name -> (value, params)."""
    if not isinstance(es, dict):
        raise Refusal("IN-9", f"an EvalScore is an object, not {_kind(es)}", w)
    name, scorer = es.get("name"), es.get("scorer")
    if not isinstance(name, str) or not name:
        raise Refusal("IN-9", "an EvalScore has a name", f"{w}/name")
    if scorer is not None and (not isinstance(scorer, str) or not scorer):
        raise Refusal("IN-9", "an EvalScore's scorer is a name", f"{w}/scorer")
    metrics = es.get("metrics") or {}
    if not isinstance(metrics, dict):
        raise Refusal("IN-9", f"EvalScore.metrics is an object, not {_kind(metrics)}", f"{w}/metrics")
    values: dict[str, Any] = {}
    for mk, mv in metrics.items():
        if not isinstance(mv, dict):
            raise Refusal("IN-9", f"an EvalMetric is an object, not {_kind(mv)}", f"{w}/metrics/{mk}")
        mname = mv.get("name", mk)
        if not isinstance(mname, str):
            raise Refusal("IN-9", "an EvalMetric has a name", f"{w}/metrics/{mk}/name")
        val = mv.get("value")
        if val is not None and (isinstance(val, bool) or not _is_num(val)):
            raise Refusal("IN-9", f"a metric's value is a number, not {_kind(val)}", f"{w}/metrics/{mk}/value")
        values[mname] = (val, mv.get("params"))
    return name, scorer, values


def _summary_entry(name: str, path: str, values: dict[str, Any], w: str,
                   compares: list[tuple[str, str, str | None, float]],
                   ext_metrics: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """An EvalScore's metrics as a summary request entry (IN-9); the values to compare with the lines go to
    ``compares``, the other metrics of an entry with a mean to ``ext_metrics``."""
    means = [m for m in values if m in MEAN_METRICS]
    if len(means) > 1:
        raise Refusal("IN-9", "an entry with both accuracy and mean: which one is the entry's mean?",
                      f"{w}/metrics")
    others = [m for m in values if m not in MEAN_METRICS and m != "stderr"]
    entry: dict[str, Any] = {"metric": name, "path": path}
    if means:
        v = values[means[0]][0]
        compares.append((name, path, None, v))
        for o in others:
            ov = values[o][0]
            ext_metrics.setdefault(name, {})[o] = None if ov is None or _is_nan(ov) else ov
            if o in RECOMPUTED and RECOMPUTED[o] is not None:
                compares.append((name, path, RECOMPUTED[o], ov))
    elif others:
        if len(others) > 1:
            raise Refusal("IN-9", f"an entry with no mean and {len(others)} other metrics ({', '.join(others)}): "
                                  "only one can be its aggregate", f"{w}/metrics")
        method = others[0]
        if not _METHOD.match(method):
            raise Refusal("IN-9", f"the metric {method!r} cannot be an aggregate method (SUM-8)", f"{w}/metrics")
        agg: dict[str, Any] = {"method": method}
        params = values[method][1]
        if isinstance(params, dict) and "k" in params:
            agg["k"] = _int_value(params["k"], "IN-9", f"{w}/metrics/{method}/params/k", minimum=1)
        entry["aggregate"] = agg
        v = values[method][0]
        if method in ("median", "min", "max"):
            compares.append((name, path, method, v))
        else:
            entry["value"] = None if v is None or _is_nan(v) else v
    if "stderr" in values:
        se = values["stderr"][0]
        if se is not None and not _is_nan(se):
            if se < 0:
                raise Refusal("IN-9", "a negative stderr", f"{w}/metrics/stderr")
            entry["stderr"] = se
    if not values:  # no metric of Inspect's: summarized from the lines (declare_summary_metrics)
        entry["_plain"] = True
    return entry


def _run_ext(ev: dict[str, Any], run_id_src: Any, results: Any, reducers: list[str], aggregation: Any,
             config: dict[str, Any], scorers: list[Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """run.json's ext (IN-6): run_id, eval_set_id, dataset, headline, a reducer without an AEF value (R7I-14),
    what made the run; and the scorers' judge models (also kept there)."""
    ext: dict[str, Any] = {}
    if run_id_src is not None:
        ext["run_id"] = run_id_src
    if ev.get("eval_set_id") is not None:
        ext["eval_set_id"] = ev["eval_set_id"]
    if ev.get("dataset") is not None:
        ext["dataset"] = ev["dataset"]
    if isinstance(results, dict) and results.get("headline") is not None:
        ext["headline"] = results["headline"]
    if reducers and aggregation is None:
        ext["epochs_reducer"] = reducers
    # what made the run (aefgate's extension, docs/mappings/inspect.md): kept so it counts in the run hash and comes
    # back on export; only what the log has, so a log without any is imported as the page says
    for src_key, dst in (("model_generate_config", "generate_config"), ("task_args", "task_args"),
                         ("sandbox", "sandbox"), ("model_base_url", "model_base_url"), ("tags", "tags")):
        if ev.get(src_key):
            ext[dst] = ev[src_key]
    limits = {k: v for k, v in config.items() if k.endswith("_limit") and v is not None}
    if limits:
        ext["limits"] = limits
    scorer_models = _scorer_models(scorers)
    if scorer_models:
        ext["scorer_models"] = scorer_models
    return ext, scorer_models


def _scorer_models(scorers: list[Any]) -> dict[str, str]:
    """The judge model each scorer names in its options (``model_graded_qa(model=...)``: a model name, or a model
    as Inspect records it, ``{"model": name, ...}``): scorer name -> model name."""
    out: dict[str, str] = {}
    for s in scorers:
        opts = s.get("options") if isinstance(s, dict) else None
        m = opts.get("model") if isinstance(opts, dict) else None
        if isinstance(m, dict):
            m = m.get("model")
        if isinstance(m, str) and m and isinstance(s.get("name"), str):
            out.setdefault(s["name"], m[:256])
    return out


def _check_reductions(reductions: Any) -> None:
    if not isinstance(reductions, list):
        raise Refusal("IN-8", f"reductions is a list, not {_kind(reductions)}", "/reductions")


def _run_usage(stats: Mapping[str, Any], model: str, roles: Mapping[str, Any]) -> tuple[list[dict], float | None]:
    """IN-9 (R7I-15): one entry per ``stats.model_usage`` model (its role from ``eval.model_roles``, ``agent`` for
    ``eval.model``, ``other`` otherwise); only without it, one entry per ``stats.role_usage`` role, without a model.
    Returns the entries and ``cost.totalUsd`` (the sum of ``total_cost``; None when no entry has a cost)."""
    mu = stats.get("model_usage") or {}
    ru = stats.get("role_usage") or {}
    for name, v in (("model_usage", mu), ("role_usage", ru)):
        if not isinstance(v, dict):
            raise Refusal("IN-9", f"stats.{name} is an object, not {_kind(v)}", f"/stats/{name}")
    entries: list[dict[str, Any]] = []
    costs: list[float] = []
    if mu:
        for m, u in mu.items():
            members = _usage_members(u, "IN-9", f"/stats/model_usage/{m}")
            role = next((_aef_role(r, roles) for r, cfg in roles.items()
                         if isinstance(cfg, dict) and cfg.get("model") == m), None)
            if role is None:
                role = "agent" if m == model else "other"
            entries.append({"role": role, "model": m, **members})
            if "costUsd" in members:
                costs.append(members["costUsd"])
    else:
        for r, u in ru.items():
            members = _usage_members(u, "IN-9", f"/stats/role_usage/{r}")
            entries.append({"role": _aef_role(r, roles), **members})
            if "costUsd" in members:
                costs.append(members["costUsd"])
    return _merge_entries(entries), (math.fsum(costs) if costs else None)


def _sample_usage(sample: Mapping[str, Any], where: str, h: _Header, roles: Mapping[str, Any]) -> list[dict]:
    """IN-8: one entry per ``role_usage`` role, with the role's model when the sample's ``model_usage`` has it; and
    an ``agent`` entry from ``model_usage`` under ``eval.model`` when no role is the agent."""
    ru = sample.get("role_usage") or {}
    mu = sample.get("model_usage") or {}
    for name, v in (("role_usage", ru), ("model_usage", mu)):
        if not isinstance(v, dict):
            raise Refusal("IN-8", f"{name} is an object, not {_kind(v)}", f"{where}/{name}")
    for m, u in mu.items():
        _usage_members(u, "IN-8", f"{where}/model_usage/{m}")
    entries: list[dict[str, Any]] = []
    for r, u in ru.items():
        members = _usage_members(u, "IN-8", f"{where}/role_usage/{r}")
        role = _aef_role(r, roles)
        m = h.model_roles.get(r) if r in h.model_roles else (h.model if role == "agent" else None)
        e: dict[str, Any] = {"role": role}
        if m is not None and m in mu:
            e["model"] = m
        entries.append({**e, **members})
    if not any(e["role"] == "agent" for e in entries) and h.model in mu:
        entries.append({"role": "agent", "model": h.model, **_usage_members(mu[h.model], "IN-8",
                                                                             f"{where}/model_usage/{h.model}")})
    return _merge_entries(entries)


def _content_blob(kind_field: str, value: Any, where: str) -> bytes | None:
    """IN-8 (settled 10-10): text as written (UTF-8), anything else serialized by JCS; empty content gives none."""
    if value is None:
        return None
    if kind_field == "output":
        if not isinstance(value, dict):
            raise Refusal("IN-8", f"output is a ModelOutput object, not {_kind(value)}", where)
        if not value.get("choices"):
            return None
    if isinstance(value, str):
        if value == "":
            return None
        try:
            return value.encode("utf-8")
        except UnicodeEncodeError:
            raise Refusal("IN-8", "content with an unpaired surrogate: it cannot be written as UTF-8", where) from None
    if isinstance(value, (list, dict)) and not value:
        return None
    try:
        return jcs(value)
    except ValueError as e:
        raise Refusal("IN-8", f"content that is not text holds {e}, which JCS (RFC 8785) cannot write", where) from None


def import_log(
    header: Mapping[str, Any],
    samples: Iterable[Mapping[str, Any]],
    out_dir: str | os.PathLike[str],
    *,
    target_mode: str = "live",
    content_capture: str = "on",
    at: str | None = None,
    key: Any = None,
    total: int | None = None,
    progress: Callable[[int, int | None], None] | None = None,
    grader_types: bool = False,
    lossless: bool = True,
) -> Path:
    """Inspect -> AEF over an eval log's header (the EvalLog without samples, with ``reductions``) and its samples
    (an iterable, read once, as they stream). Writes the run at ``out_dir`` (absent or empty) and returns it; see
    :func:`from_inspect`."""
    check_import_options(target_mode=target_mode, content_capture=content_capture, at=at)
    out = Path(os.path.abspath(out_dir))
    check_destination(out)
    content_on = content_capture == "on"
    log = getattr(samples, "log", None)
    h = _read_header(header, target_mode=target_mode, content_capture=content_capture,
                     fmt=getattr(log, "format", None))
    roles = (header.get("eval") or {}).get("model_roles") or {}
    closed = h.status != "running"
    samples, by_case, reduction_events = _sample_order(header, samples, log, h)

    out.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{out.name}.inspect-", dir=out.parent))
    imp = None
    try:
        run_dir = stage / "run"
        with RunBuilder(run_dir, h.run, metrics=[], imported_from=h.imported_from, asserted=h.asserted) as b:
            imp = _Importer(b, h, roles, content_on, closed=closed, by_case=by_case)
            imp.grader_types = grader_types
            if lossless:  # aefgate's extension (docs/mappings/inspect.md, "Lossless round trips")
                b.add_ext_file(KEPT_HEADER, _kept_json(_kept_header(header, content_on), ""))
                imp.kept = b.ext_stream(KEPT_SAMPLES)
            if by_case:
                imp.index_reductions(reduction_events or ())
            done = 0
            with progress_task("import samples", total, "samples") as bar:
                for i, sample in enumerate(samples):
                    imp.sample(sample, f"/samples/{i}")
                    done += 1
                    bar.advance()
                    if progress is not None:
                        progress(done, total)
            if by_case:
                imp.end_case()
                imp.unused_reductions()
            else:
                imp.rollups(closed)
            imp.declare_summary_metrics()
            if lossless:
                reds = header["reductions"] if "reductions" in header else \
                    (log.reductions() if log is not None else None)
                if reds is not None:
                    b.add_ext_file(KEPT_REDUCTIONS, _kept_json(_kept_reductions(reds, content_on), "/reductions"))
            _finish_run(b, h, closed, at, key)
        _check_converted(run_dir, h, closed)
        check_destination(out)
        if out.exists():
            out.rmdir()
        os.rename(run_dir, out)
    finally:
        if imp is not None:
            imp.close()
        shutil.rmtree(stage, ignore_errors=True)
    return out


def _sample_order(header: Mapping[str, Any], samples: Any, log: Any,
                  h: _Header) -> tuple[Any, bool, Iterable[tuple] | None]:
    """The samples to read (by case when they can be), whether they come by case, and the reductions' events then;
    otherwise the log's reductions go to ``h.reductions``, checked."""
    # samples read from a log (aefgate.formats.inspect): a .eval is read by sample id, then epoch, so each case is
    # done when its id changes (its rollups written, its state dropped), and its reductions come from an index on
    # disk; the reductions come from the log (not in its header). See docs/mappings/inspect-format.md.
    by_case = False
    reduction_events: Iterable[tuple] | None = None
    if log is not None and "reductions" not in header:
        if log.format == "eval" and not samples.started and samples.order == "inspect":
            samples = log.samples(order="case", resolve_events=samples.resolve_events)
        by_case = samples.order == "case"
        if by_case:
            reduction_events = log.reduction_events()
        else:
            h.reductions = log.reductions() or []
            _check_reductions(h.reductions)
    return samples, by_case, reduction_events


def _finish_run(b: Any, h: _Header, closed: bool, at: str | None, key: Any) -> None:
    """Seal a closed run (IN-11 when it does not verify); leave a running one unsealed."""
    if closed:
        # sealing verifies the whole run first (every check of section 3.9): that verification is IN-11's
        try:
            with in_one_process():  # flat memory; the conversion, not the check, takes the time
                b.finish(h.status, abort_reason=h.abort_reason, summary=h.request, seal="ingest",
                         sealed_at=at, signing_key=key)
        except NotVerified as e:
            raise e.as_refusal("IN-11", "the converted run") from None
    else:
        b.finish_running()


def _check_converted(run_dir: Path, h: _Header, closed: bool) -> None:
    """A closed run's summary against the log's results; a running run verified (IN-11), as sealing does not."""
    if closed:
        _compare_summary(run_dir, h)
    else:  # a running run is not sealed, so nothing verified it yet
        with in_one_process():
            v = verify_run(run_dir)
        if v.outcome == "invalid" or v.problems:
            where, code = v.problems[0] if v.problems else ("", "")
            raise Refusal("IN-11", f"the converted run does not verify: {code} at {where}", where,
                          exit_code=EXIT_INTEGRITY)


class _Importer:
    """The state of one import while the samples stream: evidence records by content, epoch lines, metrics."""

    def __init__(self, builder: Any, h: _Header, roles: Mapping[str, Any], content_on: bool, *, closed: bool = True,
                 by_case: bool = False):
        self.b = builder
        self.h = h
        self.grader_types = False
        self.roles = roles
        self.content_on = content_on
        self.closed = closed
        # what must be remembered of every sample is in SpillIndexes (on disk past a few thousand keys)
        self.evidence = SpillIndex()  # sha256 of the content + its kind's number -> evidence id
        self.metrics: set[str] = set()
        self.samples_seen = SpillIndex()  # (caseId, epoch), samples in any order
        self.trials = h.epochs > 1
        # samples in any order: (caseId, path) -> rolled up, until the rollups at the end
        self.epoch_paths: dict[tuple[str, str], bool] = {}
        # samples by case (a .eval): the case being read, its paths with epoch lines (-> rolled up), the cases done,
        # and the reduced scores by case (SQLite on disk), with each reduction's path and aggregation
        self.by_case = by_case
        self.case: str | None = None
        self.case_epochs: list[int] = []
        self.case_paths: dict[str, bool] = {}
        self.cases_done = SpillIndex()
        self.red_db: Any = None
        self.red_info: list[tuple[str, tuple[str, int | None]]] = []
        self.kept: Any = None  # lossless: the stream of ext/inspect_ai/samples.ndjson
        self.path_metrics: dict[str, dict[str, None]] = {}  # path -> the metrics its lines score, in order

    def close(self) -> None:
        for idx in (self.evidence, self.samples_seen, self.cases_done):
            idx.close()
        if self.red_db is not None:
            self.red_db.close()
            self.red_db = None

    def _declare(self, metric: str, where: str) -> None:
        if metric not in self.metrics:
            if not metric or len(metric) > 256:
                raise Refusal("IN-7", f"the metric name {metric!r} is not 1-256 characters", where)
            self.b.declare_metric(metric, "score", "none", "unbounded")
            self.metrics.add(metric)

    def declare_summary_metrics(self) -> None:
        """Declare the summary's metrics. An EvalScore with no metric (R7I-15: a plain mean entry) names its scorer;
        when the lines at that path score other metrics (a map-valued scorer whose members Inspect gave no
        metric), the entry is one per member metric the lines score, computed from the lines like every other
        (docs/mappings/inspect.md, "A map-valued scorer's results")."""
        req = self.h.request
        for lane in (req or {}).get("lanes", []):
            entries = []
            for e in lane["metrics"]:
                plain = e.pop("_plain", False)
                found = self.path_metrics.get(e["path"]) or {}
                if plain and e["metric"] not in found and found:
                    entries.extend({"metric": m, "path": e["path"]} for m in found
                                   if not any(x["metric"] == m and x["path"] == e["path"] for x in lane["metrics"]))
                    continue
                entries.append(e)
            lane["metrics"] = entries
            for e in entries:
                self._declare(e["metric"], "/results/scores")

    def _annotate(self, node: dict[str, Any]) -> dict[str, Any]:
        """With ``grader_types`` (docs/mappings/aigp.md): a line scored by one of Inspect's model-graded scorers
        (``model_graded_qa``, ``model_graded_fact``, and any scorer named ``model_graded*``) gets ``annotator``
        ``{"kind": "LLM"}``, with the judge's ``model`` when the run has one judge (IN-6's ``judges``); one of
        Inspect's deterministic built-in scorers (:data:`INSPECT_CODE_SCORERS`) ``{"kind": "CODE"}``; any other
        scorer (a task's own) none: the log does not say who graded. Off by default: the page maps Score -> line
        without an annotator, and its checked examples are written so."""
        if not self.grader_types:
            return node
        name = node["evaluator"]["id"].rsplit("/", 1)[-1]
        if name.startswith("model_graded"):
            ann: dict[str, Any] = {"kind": "LLM"}
            judges = [j["model"] for j in self.h.run.get("judges") or ()]
            own = self.h.scorer_models.get(node["evaluator"]["id"]) or self.h.scorer_models.get(name)
            if own is not None:  # the scorer's own model parameter (model_graded_qa(model=...))
                ann["model"] = own
            elif len(judges) == 1:
                ann["model"] = judges[0]
            node["annotator"] = ann
        elif name in INSPECT_CODE_SCORERS:
            node["annotator"] = {"kind": "CODE"}
        return node

    def _evaluator(self, key: str) -> str:
        ev = self.h.evaluator_of.get(key, key)
        return ev[:256]

    def _path(self, key: Any, where: str) -> str:
        if not isinstance(key, str) or not key or len(key) > 1024 or _TEXT_BAD.search(key):
            raise Refusal("IN-7", f"the scorer name {key!r} cannot be a result path (1-1024 characters, no control "
                                  "character)", where)
        return key

    def _content(self, sample: Mapping[str, Any], where: str, blobbed: dict[str, str] | None = None) -> list[str]:
        """The evidence ids of the sample's content (IN-8); ``blobbed`` gets each field written as a blob, ``text``
        or ``json`` (JCS)."""
        ids: list[str] = []
        for fieldname in CONTENT_FIELDS:
            data = _content_blob(fieldname, sample.get(fieldname), f"{where}/{fieldname}")
            if data is None:
                continue
            if blobbed is not None:
                blobbed[fieldname] = "text" if isinstance(sample.get(fieldname), str) else "json"
            kind = CONTENT_KIND[fieldname]
            key = hashlib.sha256(data).digest() + _KIND_BYTE[kind]
            eid = self.evidence.get(key)
            if eid is None:
                eid = self.b.add_evidence(kind, content=data, description=f"Inspect samples[].{fieldname}")
                self.evidence.add(key, eid)
            if eid not in ids:
                ids.append(eid)
        return ids

    def sample(self, sample: Any, where: str) -> None:
        """One sample (IN-8): its scores as lines of its case (or trial), with its times, usage and content."""
        h = self.h
        if not isinstance(sample, dict):
            raise Refusal("IN-8", f"a sample is an object, not {_kind(sample)}", where)
        _check_sample_doc(sample, where, self.content_on)
        if sample.get("invalidation") is not None:
            raise Refusal("IN-10", "samples[].invalidation: the table makes it an overlay event, and the converter "
                                   "writes no overlays", f"{where}/invalidation")
        case_id, trial = self._case_and_trial(sample, where)

        scores = sample.get("scores")
        if scores is not None and not isinstance(scores, dict):
            raise Refusal("IN-8", f"scores is an object, not {_kind(scores)}", f"{where}/scores")
        stopped_reason, stopped_state = _stop_of(sample, where)

        # times, duration, usage (IN-8)
        times: dict[str, Any] = {}
        if sample.get("started_at") is not None:
            times["startedAt"] = _utc(sample["started_at"], "IN-6", f"{where}/started_at")
        if sample.get("completed_at") is not None:
            times["endedAt"] = _utc(sample["completed_at"], "IN-6", f"{where}/completed_at")
        if "startedAt" in times and "endedAt" in times and \
                parse_time(times["endedAt"]) < parse_time(times["startedAt"]):
            raise Refusal("IN-8", "the sample completes before it starts", f"{where}/completed_at")
        first: dict[str, Any] = {}
        tt = sample.get("total_time")
        if tt is not None:
            if not _is_num(tt) or not math.isfinite(tt) or tt < 0:
                raise Refusal("IN-8", f"total_time is a non-negative number, not {tt!r}", f"{where}/total_time")
            first["durationMs"] = tt * 1000  # R7I-11: one binary64 multiplication, not rounded
        usage = _sample_usage(sample, where, h, self.roles)
        if usage:
            first["usage"] = usage
        blobbed: dict[str, str] = {}
        evidence = self._content(sample, where, blobbed) if self.content_on else []

        nodes = self._score_nodes(scores, stopped_reason, stopped_state, where)
        if self.kept is not None:
            self.kept.write(_kept_json(_residue(sample, blobbed, nodes, self.content_on), where) + b"\n")
        for i, node in enumerate(nodes):
            for s in node.get("scores", ()):
                self._declare(s["metric"], f"{where}/scores/{node['path']}")
                self.path_metrics.setdefault(node["path"], {})[s["metric"]] = None
            node.update(times)
            if i == 0:
                node.update(first)
            if evidence:
                node["evidence"] = list(evidence)
            if trial is None:
                self.b.add_case(case_id, node)
            else:
                self.b.add_trial(case_id, node, trial)
                if self.by_case:
                    self.case_paths[node["path"]] = False
                else:
                    self.epoch_paths[(case_id, node["path"])] = False

    def _case_and_trial(self, sample: dict[str, Any], where: str) -> tuple[str, int | None]:
        """The sample's caseId and trial (None: a case run once), refused when its case and epoch came before (IN-8);
        by case, the case before it ends here."""
        h = self.h
        case_id = _case_id(sample.get("id"), f"{where}/id")
        epoch = _int_value(sample.get("epoch", 1), "IN-8", f"{where}/epoch", minimum=1)
        if epoch > h.epochs:
            raise Refusal("IN-8", f"epoch {epoch} is beyond eval.config.epochs ({h.epochs})", f"{where}/epoch")
        if self.by_case:  # the case's epochs so far; a case done has its epochs in cases_done
            if case_id != self.case:
                self.end_case()
                done = self.cases_done.get(self.cases_done.key(case_id))
                if done is not None:
                    if epoch in (int(e) for e in done.split(",")):
                        raise Refusal("IN-8", f"two samples of case {case_id!r} at epoch {epoch}: two scores of one "
                                              "case, path and epoch", where)
                    raise Refusal("IN-8", f"the samples of case {case_id!r} are not together: a member of the .eval "
                                          "holds a sample whose id is not the one its name gives", where)
                self.case = case_id
            if epoch in self.case_epochs:
                raise Refusal("IN-8", f"two samples of case {case_id!r} at epoch {epoch}: two scores of one case, "
                                      "path and epoch", where)
            self.case_epochs.append(epoch)
        else:
            seen_key = self.samples_seen.key(case_id, epoch)
            if seen_key in self.samples_seen:
                raise Refusal("IN-8", f"two samples of case {case_id!r} at epoch {epoch}: two scores of one case, "
                                      "path and epoch", where)
            self.samples_seen.add(seen_key)
        return case_id, epoch - 1 if self.trials and not _run_once(sample, epoch) else None

    def _score_nodes(self, scores: dict[str, Any] | None, stopped_reason: str | None, stopped_state: str | None,
                     where: str) -> list[dict[str, Any]]:
        """The sample's lines, one per score (IN-8); for a sample stopped before it was scored, one per scorer."""
        h = self.h
        nodes: list[dict[str, Any]] = []
        if scores:
            for key, score in scores.items():
                sw = f"{where}/scores/{key}"
                path = self._path(key, sw)
                sr = _read_score(score, path, sw, self.content_on)
                node = self._annotate(_node(path, self._evaluator(path), sr))
                if stopped_reason is not None:
                    # a sample Inspect stopped and still scored: the scores stand (Inspect's metrics count them,
                    # IN-9); the stop is kept beside them (docs/mappings/inspect.md)
                    stop = "limit" if stopped_state == "not_measured" else "error"
                    node.setdefault("ext", {"inspect_ai": {}})["inspect_ai"][stop] = stopped_reason
                nodes.append(node)
        elif stopped_reason is not None:
            if not h.scorer_names:
                raise Refusal("IN-8", "a sample that stopped before it was scored, in a log that names no scorer",
                              f"{where}/scores")
            for name in h.scorer_names:
                path = self._path(name, "/eval/scorers")
                nodes.append({"path": path, "evaluator": {"id": self._evaluator(path)}, "state": stopped_state,
                              "reason": stopped_reason})
        else:
            raise Refusal("IN-8", "a sample without scores", f"{where}/scores")
        return nodes

    # -- samples by case (a .eval): each case's rollups when its last epoch was read ---------------------------------

    def _reduction(self, i: int, red: Any) -> tuple[str, tuple[str, int | None]]:
        """A reduction's path and aggregation (IN-8), checked as :meth:`rollups` does."""
        h = self.h
        w = f"/reductions/{i}"
        if not isinstance(red, dict):
            raise Refusal("IN-8", f"a reduction is an object, not {_kind(red)}", w)
        path = self._path(red.get("scorer"), f"{w}/scorer")
        reducer = red.get("reducer")
        if reducer is None:
            agg = h.aggregation if h.aggregation is not None else ("Mean", None)
        else:
            agg = _reducer_to_aef(reducer, h.epochs)
        if agg is None:
            raise Refusal("IN-8", f"the reducer {reducer!r} has no AEF value, and the log has more than one epoch",
                          f"{w}/reducer")
        if red.get("samples") is not None and not isinstance(red.get("samples"), list):
            raise Refusal("IN-8", "a reduction's samples are a list", f"{w}/samples")
        return path, agg

    def index_reductions(self, events: Iterable[tuple]) -> None:
        """Read the reductions once (as a stream) into an index on disk: each reduced score under its case."""
        if not self.trials:  # one epoch: reductions make no lines (only their list is checked)
            for ev in events:
                if ev[0] == "value":
                    _check_reductions(ev[1])
            return
        db = sqlite3.connect("", isolation_level=None, check_same_thread=False)
        for pragma in ("journal_mode = OFF", "synchronous = OFF", "cache_size = -512", "temp_store = FILE"):
            db.execute(f"PRAGMA {pragma}")
        db.execute("CREATE TABLE red (c TEXT, i INTEGER, j INTEGER, v BLOB, PRIMARY KEY (c, i, j)) WITHOUT ROWID")
        self.red_db = db

        def rows():
            for ev in events:
                if ev[0] == "value":
                    _check_reductions(ev[1])
                elif ev[0] == "end":
                    i, red = ev[1], ev[2]
                    assert i == len(self.red_info)
                    self.red_info.append(self._reduction(i, red))
                else:
                    _, i, j, rs = ev
                    sw = f"/reductions/{i}/samples/{j}"
                    if not isinstance(rs, dict):
                        raise Refusal("IN-8", f"a reduced score is an object, not {_kind(rs)}", sw)
                    yield _case_id(rs.get("sample_id"), f"{sw}/sample_id"), i, j, pickle.dumps(rs, 5)

        db.execute("BEGIN")
        db.executemany("INSERT INTO red VALUES (?, ?, ?, ?)", rows())
        db.execute("COMMIT")

    def end_case(self) -> None:
        """The case being read is done: its rollups, one per reduction that names it (IN-8), in the reductions'
        order; a closed log needs one at each path with epoch lines (RES-8)."""
        case_id, self.case = self.case, None
        if case_id is None:
            return
        paths, self.case_paths = self.case_paths, {}
        epochs, self.case_epochs = self.case_epochs, []
        self.cases_done.add(self.cases_done.key(case_id), ",".join(map(str, epochs)))
        if self.red_db is None:
            if self.closed and paths:
                path = next(iter(paths))
                raise Refusal("IN-8", f"case {case_id!r} has epoch lines at {path!r} and no reduction (RES-8)",
                              "/reductions")
            return
        found = self.red_db.execute("SELECT i, j, v FROM red WHERE c = ? ORDER BY i, j", (case_id,)).fetchall()
        if found:
            self.red_db.execute("DELETE FROM red WHERE c = ?", (case_id,))
        for i, j, v in found:
            self._rollup(case_id, paths, i, j, pickle.loads(v))
        if self.closed:
            for path, rolled in paths.items():
                if not rolled:
                    raise Refusal("IN-8", f"case {case_id!r} has epoch lines at {path!r} and no reduction (RES-8)",
                                  "/reductions")

    def _rollup(self, case_id: str, paths: dict[str, bool], i: int, j: int, rs: dict) -> None:
        path, agg = self.red_info[i]
        sw = f"/reductions/{i}/samples/{j}"
        if path not in paths:
            raise Refusal("IN-8", f"a reduction for case {case_id!r} at {path!r}, which has no epoch lines", sw)
        if paths[path]:
            raise Refusal("IN-8", f"two reductions of case {case_id!r} at {path!r}", sw)
        sr = _read_score({x: y for x, y in rs.items() if x != "sample_id"}, path, sw, self.content_on)
        node = self._annotate(_node(path, self._evaluator(path), sr))
        for s in node.get("scores", ()):
            self._declare(s["metric"], sw)
        self.b.add_rollup(case_id, node, aggregation=agg[0], k=agg[1])
        paths[path] = True

    def unused_reductions(self) -> None:
        """After the last case: a reduced score for a case that had no sample (IN-8)."""
        if self.red_db is None:
            return
        row = self.red_db.execute("SELECT c, i, j FROM red ORDER BY i, j LIMIT 1").fetchone()
        if row is not None:
            case_id, i, j = row
            path = self.red_info[i][0]
            raise Refusal("IN-8", f"a reduction for case {case_id!r} at {path!r}, which has no epoch lines",
                          f"/reductions/{i}/samples/{j}")

    def rollups(self, closed: bool) -> None:
        """With more than one epoch, each reduction gives the case's rollup at its scorer (IN-8)."""
        h = self.h
        if not self.trials:
            return
        config_reducer = h.aggregation
        for i, red in enumerate(h.reductions):
            w = f"/reductions/{i}"
            if not isinstance(red, dict):
                raise Refusal("IN-8", f"a reduction is an object, not {_kind(red)}", w)
            scorer = red.get("scorer")
            path = self._path(scorer, f"{w}/scorer")
            reducer = red.get("reducer")
            if reducer is None:
                agg = config_reducer if config_reducer is not None else ("Mean", None)
            else:
                agg = _reducer_to_aef(reducer, h.epochs)
            if agg is None:
                raise Refusal("IN-8", f"the reducer {reducer!r} has no AEF value, and the log has more than one epoch",
                              f"{w}/reducer")
            rsamples = red.get("samples") or []
            if not isinstance(rsamples, list):
                raise Refusal("IN-8", "a reduction's samples are a list", f"{w}/samples")
            for j, rs in enumerate(rsamples):
                sw = f"{w}/samples/{j}"
                if not isinstance(rs, dict):
                    raise Refusal("IN-8", f"a reduced score is an object, not {_kind(rs)}", sw)
                case_id = _case_id(rs.get("sample_id"), f"{sw}/sample_id")
                k = (case_id, path)
                if k not in self.epoch_paths:
                    raise Refusal("IN-8", f"a reduction for case {case_id!r} at {path!r}, which has no epoch lines", sw)
                if self.epoch_paths[k]:
                    raise Refusal("IN-8", f"two reductions of case {case_id!r} at {path!r}", sw)
                sr = _read_score({x: y for x, y in rs.items() if x != "sample_id"}, path, sw, self.content_on)
                node = self._annotate(_node(path, self._evaluator(path), sr))
                for s in node.get("scores", ()):
                    self._declare(s["metric"], sw)
                self.b.add_rollup(case_id, node, aggregation=agg[0], k=agg[1])
                self.epoch_paths[k] = True
        if closed:
            for (case_id, path), rolled in self.epoch_paths.items():
                if not rolled:
                    raise Refusal("IN-8", f"case {case_id!r} has epoch lines at {path!r} and no reduction (RES-8)",
                                  "/reductions")


# -- lossless: what the mapping does not place, kept in ext/ files (docs/mappings/inspect.md) ----------------------


def _kept_json(value: Any, where: str) -> bytes:
    """A kept value as Inspect's JSON, without the members named like a credential ([RUN-10]: nothing in ext is a
    key, token or password; ``eval.model_args.api_key`` and the like are dropped, a declared loss)."""
    text = dumps(value)
    dropped: list[str] = []
    value = without_credentials(value, where, dropped, text)
    return dumps(value) if dropped else text


def _kept_header(header: Mapping[str, Any], content_on: bool) -> dict[str, Any]:
    """The log's header as written (no samples, no reductions); with content off, without the plan's step
    parameters, which may hold prompts ([RUN-11])."""
    kept = {k: v for k, v in header.items() if k not in ("samples", "reductions")}
    plan = kept.get("plan")
    if not content_on and isinstance(plan, dict) and isinstance(plan.get("steps"), list):
        kept["plan"] = {**plan, "steps": [{k: v for k, v in step.items() if k != "params"}
                                          if isinstance(step, dict) else step for step in plan["steps"]]}
    return kept


def _score_rest(score: Mapping[str, Any], explained: bool, content_on: bool) -> dict[str, Any]:
    """What a Score's line does not hold: every member but its value when the line gives it back (a number, a
    letter, NaN), its explanation when it is the line's reasoning blob, and its answer and metadata (the line's
    ``ext``, IN-7); with content off, no explanation nor answer ([RUN-11])."""
    value = score.get("value")
    rest: dict[str, Any] = {}
    for k, v in score.items():
        if k == "value" and (_is_num(v) or (isinstance(v, str) and v in LETTERS)):
            continue
        if k in ("answer", "metadata") or (k == "explanation" and explained):
            continue
        if not content_on and k in SCORE_CONTENT:
            continue
        rest[k] = v
    if isinstance(value, bool):  # (refused by IN-7 before)
        rest["value"] = value
    return rest


def _residue(sample: Mapping[str, Any], blobbed: Mapping[str, str], nodes: list[dict[str, Any]],
             content_on: bool) -> dict[str, Any]:
    """One line of ``ext/inspect_ai/samples.ndjson``: the sample's id as written, its epoch, the order of its
    members, the members its lines and blobs do not hold, how each content blob is read back, and what each
    Score's line does not hold. With content off, no content member ([RUN-11])."""
    scores = sample.get("scores")
    placed = {"id", "epoch", *blobbed}
    if scores:
        placed.add("scores")
    members = {k: v for k, v in sample.items()
               if k not in placed and (content_on or k not in CONTENT_MEMBERS)}
    output = sample.get("output")
    if not content_on and isinstance(output, dict):  # its model, usage and times, not its messages
        members["output"] = {k: v for k, v in output.items() if k not in ("choices", "completion")}
    out: dict[str, Any] = {"id": sample.get("id"), "epoch": sample.get("epoch", 1), "order": list(sample),
                           "members": members}
    if blobbed:
        out["content"] = dict(blobbed)
    if scores:
        by_path = {n["path"]: n for n in nodes}
        out["scores"] = {k: _score_rest(v, bool((by_path.get(k) or {}).get("reasoning")), content_on)
                         for k, v in scores.items() if isinstance(v, dict)}
    return out


def _kept_reductions(reductions: Any, content_on: bool) -> Any:
    """The reductions as written; with content off, their scores without explanation and answer ([RUN-11])."""
    if content_on or not isinstance(reductions, list):
        return reductions
    out = []
    for red in reductions:
        if isinstance(red, dict) and isinstance(red.get("samples"), list):
            red = {**red, "samples": [{k: v for k, v in rs.items() if k not in SCORE_CONTENT}
                                      if isinstance(rs, dict) else rs for rs in red["samples"]]}
        out.append(red)
    return out


def _compare_summary(run_dir: Path, h: _Header) -> None:
    """IN-9: a mean, median, minimum or maximum Inspect gives must be the lines' (within §3.6's tolerance)."""
    if not h.compares:
        return
    summary = jsonio.read_json(run_dir / "summary.json")
    written = {(e["metric"], e["path"]): e for lane in summary["lanes"] for e in lane["metrics"]}
    extra = [(m, p, meth) for m, p, meth, _ in h.compares if meth is not None and
             (written.get((m, p)) or {}).get("aggregate", {}).get("method") != meth]
    recomputed: dict[tuple[str, str, str | None], Any] = {}
    for (m, p), e in written.items():
        recomputed[(m, p, (e.get("aggregate") or {}).get("method"))] = e["value"]
    if extra:
        req = {"lanes": [{"lane": "main", "metrics": [{"metric": m, "path": p, "aggregate": {"method": meth}}
                                                       for m, p, meth in extra]}]}
        doc = summarize(run_dir, req)
        for e in doc["lanes"][0]["metrics"]:
            recomputed[(e["metric"], e["path"], e["aggregate"]["method"])] = e["value"]
    for m, p, meth, given in h.compares:
        got = recomputed.get((m, p, meth))
        given_none = given is None or _is_nan(given)
        what = meth or "mean"
        if given_none and got is None:
            continue
        if given_none or got is None or not _close(given, got):
            why = " (no line scores it: the log has no scored sample for it)" if got is None else ""
            raise Refusal("IN-9", f"Inspect's {what} of {m!r} is {given!r}, the lines give {got!r}{why}",
                          f"/results/scores ({m})")


def from_inspect(
    log_path: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    target_mode: str = "live",
    content_capture: str = "on",
    at: str | None = None,
    key: Any = None,
    progress: Callable[[int, int | None], None] | None = None,
    grader_types: bool = False,
    lossless: bool = True,
) -> Path:
    """Convert an Inspect eval log (``.eval`` or ``.json``) into an AEF run at ``out_dir`` (absent or empty).

    ``target_mode`` is ``execution.targetMode`` (Inspect does not record how the target was driven: the converter's
    claim, listed in ``imported.asserted``); ``content_capture`` ``on`` keeps the case content, explanations and
    answers (blobs and evidence), ``off`` none of it (RUN-11); ``at`` is the seal's ``sealedAt`` (default: now);
    ``key`` a path to a private key (or a loaded ``SigningKey``) that signs the seal (``attestation.dsse.json``),
    loaded before anything is written; ``progress(done, total)`` is called after each sample; ``lossless`` also
    keeps what the page's mapping does not place in ``ext/inspect_ai/`` files of the run (the header, each sample's
    other members, the reductions; no content with ``off``), so that :func:`~.exporter.to_inspect` gives the log
    back (aefgate's extension, docs/mappings/inspect.md, "Lossless round trips"). Refusals name the page's rule
    (IN-6 to IN-11) and write nothing.
    """
    signing_key = signing_key_of(key)
    log = _open_log(log_path)
    total = getattr(log, "sample_count", None)
    return import_log(log.header, log.samples(), out_dir, target_mode=target_mode, content_capture=content_capture,
                      at=at, key=signing_key, total=total, progress=progress, grader_types=grader_types,
                      lossless=lossless)


def _open_log(path: str | os.PathLike[str]) -> Any:
    p = Path(path)
    if not p.exists():
        raise Refusal("CLI-1", "no such file", str(p))
    return open_log(p)


