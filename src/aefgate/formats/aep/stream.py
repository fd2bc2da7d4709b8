"""Cross-event rules of an AEP stream read in emission order (one emitter's JSONL file, or several emitters'
interleaved): the rules the conformance ``invalid`` corpus pins on streams (cases with ``events``).

* AEP-0001 §5.1 #2, §7 rule 4: ``(source, id)`` is the identity; the same ``(source, id)`` with the same
  content again is redelivery (skipped, never a second fact), with different content a collision.
* AEP-0001 §7 rule 2 (emitter side): per ``(source, session)`` the ``epoch`` never decreases, and within one
  epoch ``seq`` strictly increases (no regression, no position reused). A file is read as the emitter's
  order, so a below-high-water position is a regression here, not backfill (choice recorded in
  docs/design/aep-format.md).
* AEP-0002 §2 convention 5: at most one run terminal (``run.finished``/``run.failed``/``run.cancelled``) per
  ``(source, session, run)``, at most one ``session.ended`` per ``(source, session)``.
* AEP-0002 §7.2: a session never ends with an ``attention.requested`` its emitter raised still pending (closed
  by ``attention.resolved`` or ``attention.timeout`` whose ``subject`` is the request's id).
* AEP-0004 §3: one ack decision (``control.accepted``/``control.rejected``) per command (``cause``), per session.
* AEP-0002 §5.3 (AEP-0006): an ``attention.answered`` / ``control.attention.respond`` answering a
  ``kind: "form"`` request (by ``subject``) carries, for a ``select`` field whose ``other`` is not true, only
  ``choices[].id`` strings.

Problems are ``(index, rule, message)``; ``index`` is the 0-based position of the offending event.
"""

from __future__ import annotations

import hashlib
from typing import Any, Iterable

from aefgate.aef.jsonio import dumps

__all__ = ["StreamChecker", "stream_problems"]

_RUN_TERMINALS = frozenset(["run.finished", "run.failed", "run.cancelled"])
_ACKS = frozenset(["control.accepted", "control.rejected"])
_ANSWERS = frozenset(["attention.answered", "control.attention.respond"])
_ATTENTION_TERMINALS = frozenset(["attention.resolved", "attention.timeout"])


class StreamChecker:
    """Feed events in order (:meth:`feed`); each call returns the problems that event raises."""

    def __init__(self) -> None:
        self._seen: dict[tuple, bytes] = {}
        self._pos: dict[tuple, tuple[int, int]] = {}
        self._run_end: set[tuple] = set()
        self._session_end: set[tuple] = set()
        self._pending: dict[tuple, set[str]] = {}
        self._acked: set[tuple] = set()
        self._forms: dict[tuple, list] = {}
        self.index = 0

    def feed(self, event: dict) -> list[tuple[int, str, str]]:
        i = self.index
        self.index += 1
        out: list[tuple[int, str, str]] = []
        source, ident, typ = event.get("source"), event.get("id"), event.get("type")
        digest = hashlib.blake2b(dumps(event), digest_size=16).digest()
        before = self._seen.get((source, ident))
        if before is not None:
            if before != digest:
                out.append((i, "AEP-0001§7", f"id {ident!r} of source {source!r} names two different events "
                            "((source, id) is unique per emitter, AEP-0001 §5.1 #2, §7 rule 4)"))
            return out  # redelivery (or a collision, reported): not a second fact
        self._seen[(source, ident)] = digest
        session = event.get("session")
        skey = (source, session)
        if "seq" in event and session is not None:
            epoch, seq = event.get("epoch", 0), event["seq"]
            last = self._pos.get(skey)
            if last is not None:
                if epoch < last[0]:
                    out.append((i, "AEP-0001§7", f"epoch {epoch} after epoch {last[0]} in session {session!r}: "
                                "an epoch is never reused (AEP-0001 §7 rule 2)"))
                elif epoch == last[0] and seq <= last[1]:
                    out.append((i, "AEP-0001§7", f"seq {seq} at or below seq {last[1]} in epoch {epoch} of session "
                                f"{session!r}: a regression without an epoch bump (AEP-0001 §7 rule 2)"))
            if last is None or (epoch, seq) > last:
                self._pos[skey] = (epoch, seq)
        if typ in _RUN_TERMINALS and "run" in event:
            key = (source, session, event["run"])
            if key in self._run_end:
                out.append((i, "AEP-0002§2", f"a second terminal ({typ}) for run {event['run']!r} "
                            "(terminal exclusivity, AEP-0002 §2 convention 5)"))
            self._run_end.add(key)
        elif typ == "attention.requested":
            self._pending.setdefault(skey, set()).add(ident)
            data = event.get("data")
            if isinstance(data, dict) and data.get("kind") == "form" and isinstance(data.get("fields"), list):
                self._forms[(session, ident)] = data["fields"]
        elif typ in _ATTENTION_TERMINALS:
            pending = self._pending.get(skey)
            if pending is not None:
                pending.discard(event.get("subject"))
        elif typ == "session.ended":
            if skey in self._session_end:
                out.append((i, "AEP-0002§2", f"a second session.ended for session {session!r} "
                            "(terminal exclusivity, AEP-0002 §2 convention 5)"))
            self._session_end.add(skey)
            pending = self._pending.get(skey)
            if pending:
                out.append((i, "AEP-0002§7.2", f"session {session!r} ends with attention request(s) "
                            f"{', '.join(sorted(map(str, pending)))} still pending (AEP-0002 §7 rule 2)"))
        elif typ in _ACKS and "cause" in event:
            key = (session, event["cause"])
            if key in self._acked:
                out.append((i, "AEP-0004§3", f"a second ack decision for command {event['cause']!r} "
                            "(one ack decision per command, AEP-0004 §3)"))
            self._acked.add(key)
        if typ in _ANSWERS:
            out += self._check_values(i, event, session)
        return out

    def _check_values(self, i: int, event: dict, session: Any) -> list[tuple[int, str, str]]:
        data = event.get("data")
        answer = data.get("answer") if isinstance(data, dict) else None
        values = answer.get("values") if isinstance(answer, dict) else None
        fields = self._forms.get((session, event.get("subject")))
        if not isinstance(values, dict) or fields is None:
            return []
        out = []
        for f in fields:
            if not isinstance(f, dict) or f.get("type") != "select" or f.get("other") is True:
                continue
            if f.get("id") not in values:
                continue
            v = values[f["id"]]
            ids = {c.get("id") for c in f.get("choices") or () if isinstance(c, dict)}
            vs = v if isinstance(v, list) else [v]
            bad = [x for x in vs if not (type(x) is str and x in ids)]
            if bad:
                out.append((i, "AEP-0002§5.3", f"values/{f['id']}: {bad[0]!r} is not a choices[].id of a select "
                            "field without other:true (AEP-0002 §5.3, AEP-0006)"))
        return out


def stream_problems(events: Iterable[dict]) -> list[tuple[int, str, str]]:
    """Every cross-event problem of ``events`` taken in order (see the module docstring)."""
    chk = StreamChecker()
    out: list[tuple[int, str, str]] = []
    for e in events:
        out += chk.feed(e)
    return out
