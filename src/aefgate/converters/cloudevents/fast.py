"""The CloudEvents export's struct path (issue 31): the bytes of the dict path, without a dict per event.

The dict path of ``aefgate export cloudevents`` (structured mode) makes each AEP event as a dict
(:func:`aefgate.converters.aep.exporter.result_events`), adds the AIGP extension attributes
(``exporter._with_aigp``), maps it to a CloudEvent dict (:func:`aefgate.formats.cloudevents.mapping.ce_forward`)
and encodes the batch (``exporter._encode``). Here the common event (an evaluation with the plain envelope, which
``result_events(structs=True)`` gives as an ``_EvalEvent``) becomes one :class:`_CeEvalEvent` struct instead: the
CloudEvent's members in ``ce_forward``'s order, the constant ones (``specversion``, ``type``,
``datacontenttype``, and the export's ``aep``, ``source``, ``agent``, ``session``, ``capture``) pre-encoded once,
``data`` the AEP event's own ``_EvalData`` struct. Every other event takes the dict path event by event.

The same bytes as the dict path: each struct event is checked as ``ce_forward`` checks it (its fast checks only);
a batch holding an event those checks do not clear, a refusal, or ``null`` in its bytes (a null, a non-finite
number, or the word in a string) is made again by the dict path, which accepts it as it always did or refuses it
with the same refusal.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from aefgate.converters.aep import exporter as _x
from aefgate.converters.aep.vocabulary import AEP_VERSION, T_EVAL
from aefgate.errors import Refusal
from aefgate.formats.cloudevents.mapping import (
    AEP_TYPE,
    CAPTURES,
    DATACONTENTTYPE,
    SEVERITIES,
    SPECVERSION,
    TYPE_ROOT,
    rfc3339,
)
from aefgate.formats.cloudevents.ndjson import line_value

__all__ = ["encoder"]

_INT_MAX = 2**31 - 1  # CloudEvents' Integer (mapping._INT_MAX)


class _CeEvalEvent(msgspec.Struct, gc=False):
    """The structured CloudEvent of an evaluation event with the plain envelope, as ``ce_forward`` writes its dict
    (members in the same order; ``UNSET`` is omitted, as the dict omits an absent extension attribute)."""

    specversion: Any
    id: Any
    source: Any
    type: Any
    time: Any
    datacontenttype: Any
    aepversion: Any
    aepagentid: Any
    aepsessionid: Any
    aeprunid: Any
    aepsequence: Any
    aepepoch: Any
    aepseverity: Any
    aepcapture: Any
    aigpgrader: Any
    aigpconfidence: Any
    data: Any


def _plain(v: Any) -> bool:
    """``ce_forward``'s fast check of a string attribute (a non-empty printable ASCII string)."""
    return type(v) is str and bool(v) and v.isascii() and v.isprintable()


_K_SPEC = msgspec.Raw(_x._LINES_ENCODER.encode(SPECVERSION))
_K_TYPE = msgspec.Raw(_x._LINES_ENCODER.encode(TYPE_ROOT + T_EVAL))
_K_DCT = msgspec.Raw(_x._LINES_ENCODER.encode(DATACONTENTTYPE))
_TYPE_OK = AEP_TYPE.fullmatch(T_EVAL) is not None


def _constants_ok(ctx: Any) -> bool:
    """The export's constant envelope members pass ``ce_forward``'s fast checks (else every batch takes the dict
    path)."""
    return (_TYPE_OK and _plain(AEP_VERSION) and _plain(ctx.source) and _plain(ctx.agent) and _plain(ctx.run_id)
            and type(ctx.ceiling) is str and ctx.ceiling in CAPTURES)


def _structs(ctx: Any, chunk: list[dict], targets: set[str], noted: dict, where: str) -> list | None:
    """The CloudEvents of the result lines ``chunk``: the common ones as :class:`_CeEvalEvent`, the others as
    ``line_value`` of the dict path; None when an event is not cleared by the fast checks."""
    unset = msgspec.UNSET
    eval_event = _x._EvalEvent
    out: list = []
    append = out.append
    last_time: Any = None
    last_run: Any = None
    for ev in _x.result_events(ctx, chunk, targets, noted, None, structs=True):
        if type(ev) is not eval_event:
            append(line_value(_x._with_aigp(ev), where, "structured"))
            continue
        eid = ev.id
        if not (eid.isascii() and eid.isprintable()):  # a str, never empty (prefix + resultId + -eN)
            return None
        t = ev.time
        if t != last_time:  # the events of a line share its time (and often the lines before it)
            if type(t) is not str or not rfc3339(t):
                return None
            last_time = t
        run = ev.run
        if run != last_run:  # a case's lines are together
            if not (type(run) is str and run and run.isascii() and run.isprintable()):
                return None
            last_run = run
        seq = ev.seq
        if type(seq) is not int or not 0 <= seq <= _INT_MAX:
            return None
        sev = ev.severity
        if type(sev) is not str or sev not in SEVERITIES:
            return None
        data = ev.data
        aef = data.aef
        g = aef.get("grader") if isinstance(aef, dict) else None
        gtype = gconf = unset
        if isinstance(g, dict) and "type" in g:  # exporter._with_aigp: the grader as extension attributes
            gtype = g["type"]
            if not (type(gtype) is str and gtype.isascii() and gtype.isprintable()):
                return None
            c = g.get("confidence")
            if c:
                if not (type(c) is str and c.isascii() and c.isprintable()):
                    return None
                gconf = c
        append(_CeEvalEvent(_K_SPEC, eid, ev.source, _K_TYPE, t, _K_DCT, ev.aep, ev.agent, ev.session, run, seq,
                            ev.epoch, sev, ev.capture, gtype, gconf, data))
    return out


def encoder(where: str):
    """The struct path of the structured CloudEvents export at ``where`` (the refusals' place): a function
    ``(ctx, docs, targets, seen) -> list[bytes]`` like ``exporter._encode_fast``, giving the bytes of
    ``exporter._encode([line_value(_with_aigp(ev), where, "structured") for ev in result_events(...)])``."""

    def dict_blob(ctx: Any, chunk: list[dict], targets: set[str], noted: dict) -> bytes:
        return _x._encode([line_value(_x._with_aigp(ev), where, "structured")
                           for ev in _x.result_events(ctx, chunk, targets, noted, None)])

    def encode_fast(ctx: Any, docs: list[dict], targets: set[str], seen: Mapping[str, Any]) -> list[bytes]:
        encode_lines = _x._LINES_ENCODER.encode_lines
        batch = _x._BATCH
        fast = _constants_ok(ctx)
        blobs: list[bytes] = []
        for i in range(0, len(docs), batch):
            chunk = docs[i:i + batch]
            seq0 = ctx.seq
            noted: dict = {}
            blob = None
            if fast:
                try:
                    evs = _structs(ctx, chunk, targets, noted, where)
                except Refusal:  # the dict path refuses it as it always did
                    evs = None
                if evs is not None:
                    blob = encode_lines(evs)
                    if b"null" in blob:
                        blob = None
            if blob is None:
                ctx.seq = seq0
                noted = {}
                blob = dict_blob(ctx, chunk, targets, noted)
            if noted:
                seen.update(noted)
            blobs.append(blob)
        return blobs

    return encode_fast
