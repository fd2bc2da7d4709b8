"""What every destination of a publish shares: the item in flight and the result callback."""

from __future__ import annotations

from typing import Callable

# The results of an event: acknowledged; acknowledged by JetStream as a duplicate (its Nats-Msg-Id was already in
# the stream's duplicate window); sent but not acknowledged (given up); never sent (the publish stopped first).
ACKED, DUPLICATE, FAILED, UNSENT = "acked", "duplicate", "failed", "unsent"


class Item:
    """One event on its way: its index (its line in the spool, else its position), id, AEP event (None when the
    producer sent only its wire form), its wire form (``headers``, ``body``: None until encoded), its spool line,
    and the state of its delivery."""

    __slots__ = ("index", "id", "event", "headers", "body", "line", "deadline", "attempt", "expiry")

    def __init__(self, index: int, event: dict | None, id: str | None = None, headers: dict | bytes | None = None,
                 body: bytes | None = None, line: bytes | None = None) -> None:
        self.index = index
        self.id = event.get("id") if id is None and event is not None else id
        self.event = event
        self.headers = headers  # a dict, or (NATS) the header block the producer made
        self.body = body
        self.line = line
        self.deadline = 0.0
        self.attempt = 0
        self.expiry = 0.0


ResultCallback = Callable[[Item, str, "str | None"], None]
