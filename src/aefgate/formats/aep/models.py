"""A typed view of an AEP event (AEP-0001 §5.1). Events travel as plain dicts everywhere in this package; this
Struct is for code that wants attribute access and types. It round-trips exactly: absent attributes stay absent
(``msgspec.UNSET``; AEP-0001 §5.1: "absent OPTIONAL attributes MUST be omitted, not set to null") and extension
attributes (AEP-0001 §5.4, which relays MUST preserve) are kept in ``extensions``."""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

from aefgate.formats.aep.event_schema import CORE_ATTRIBUTES

__all__ = ["Event"]

_FIELDS = ("aep", "id", "type", "subject", "time", "source", "agent", "session", "run", "step", "seq", "epoch",
           "cause", "traceparent", "severity", "capture", "data")


class Event(msgspec.Struct, kw_only=True, omit_defaults=True):
    aep: str
    id: str
    type: str
    time: str
    source: str
    agent: str
    subject: str | UnsetType = UNSET
    session: str | UnsetType = UNSET
    run: str | UnsetType = UNSET
    step: str | UnsetType = UNSET
    seq: int | UnsetType = UNSET
    epoch: int | UnsetType = UNSET
    cause: str | UnsetType = UNSET
    traceparent: str | UnsetType = UNSET
    severity: str | UnsetType = UNSET
    capture: str | UnsetType = UNSET
    data: dict[str, Any] | UnsetType = UNSET
    extensions: dict[str, str | int | bool] = {}

    @classmethod
    def from_dict(cls, event: dict) -> "Event":
        """The typed view of a (valid) event dict; raises ``msgspec.ValidationError`` on a wrong type."""
        core = {k: v for k, v in event.items() if k in CORE_ATTRIBUTES}
        ext = {k: v for k, v in event.items() if k not in CORE_ATTRIBUTES}
        return msgspec.convert({**core, "extensions": ext}, cls)

    def to_dict(self) -> dict:
        """The event as a plain dict, in the attribute order of AEP-0001 §5.1, extensions last."""
        out: dict[str, Any] = {}
        for name in _FIELDS:
            v = getattr(self, name)
            if v is not UNSET:
                out[name] = v
        out.update(self.extensions)
        return out

    @property
    def effective_capture(self) -> str:
        """``capture`` with the AEP-0001 §5.1 default applied."""
        return "metadata" if self.capture is UNSET else self.capture  # type: ignore[return-value]
