"""The retry policy of a publish (docs/design/bus.md, "Retries").

An event (or an HTTP batch) is sent at most ``1 + retries`` times, all within ``timeout`` seconds of its first
send (its deadline). Between two sends it waits a full-jitter exponential backoff, ``uniform(0, min(CAP, BASE *
2**attempt))``, or the server's ``Retry-After`` when it gave one (seconds or an HTTP date), never past the deadline:
a wait that would end after it is not waited, the event fails.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

BASE = 0.05  # seconds
CAP = 5.0  # seconds


@dataclass
class Policy:
    retries: int = 5
    timeout: float = 30.0

    def attempt_wait(self, remaining: float) -> float:
        """How long one attempt waits for its acknowledgement: a share of the deadline, so that a lost
        acknowledgement leaves room for a retry (at least 0.5 s, at most 10 s, never past the deadline)."""
        return max(0.0, min(remaining, max(0.5, min(10.0, self.timeout / 3))))


def backoff(attempt: int, rng: random.Random | None = None) -> float:
    """Full jitter: a uniform wait in [0, min(CAP, BASE * 2**attempt)] (``attempt`` counts from 0)."""
    r = rng or random
    return r.uniform(0.0, min(CAP, BASE * (2 ** min(attempt, 20))))


def retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header: delay-seconds, or an HTTP date (RFC 9110 §10.2.3).
    None when absent or unreadable."""
    if value is None:
        return None
    v = value.strip()
    if v.isdigit():
        return float(int(v))
    try:
        dt = parsedate_to_datetime(v)
    except (TypeError, ValueError, IndexError):
        return None
    if dt is None:
        return None
    wall = time.time() if now is None else now
    return max(0.0, dt.timestamp() - wall)
