"""Summary arithmetic ([SUM-3]..[SUM-9]) and the ``summarize`` operation (spec 09 §9.3).

One implementation serves the run verifier (which recomputes every entry of a written ``summary.json`` while it
streams ``results.ndjson``), the run writer (which computes ``summary.json``) and ``aefgate aef summarize``.

What an entry counts
--------------------
An entry (``lane``, ``metric``, ``path``) summarises the result lines of that lane at that path, one per case
([SUM-3]):

- a line belongs to the lane its ``lane`` names; when the summary has a single lane *name*, a line without ``lane``
  belongs to it (:func:`line_lane`);
- a line carrying ``trial`` is a trial line and is never counted; the case's rollup line (the one carrying
  ``trials``) is counted like any other line (:func:`is_trial_line`, :func:`entry_key`);
- ``path`` is compared as written, byte for byte.

Each such line is then, for the entry's metric ([SUM-4], :func:`measure`): left out (``not_applicable``), not
measured (``not_measured``, ``skipped``, ``error``, ``pending``), or measured with a value: for a metric of kind
``rate`` or ``verdict``, 1 when ``passed`` and 0 when ``failed``, ``warn`` or ``inconclusive`` (a ``scored`` line has
no verdict: not measured); for every other kind the value of the line's score for the metric (no score: not
measured). A line that scores the metric twice is a ``metric`` problem (§3.9) and counts as not measured for it,
whatever the metric's kind.

Then ([SUM-5], [SUM-8], :class:`EntryAccumulator`): ``N`` lines not left out, ``n`` measured,
``notMeasured = N - n``; ``sum`` the exact sum of the measured values rounded once to binary64; ``sumSq`` the
binary64 sum of their squares in line order; ``value`` the sum for a ``count``, otherwise the mean: ``sum`` (binary64)
divided by ``n`` in one binary64 division, as [SUM-5] writes it and the reference writer computes it (``null``, and
the entry ``not_measured``, when the sum is beyond binary64: R10-3), or, with an ``aggregate`` of method ``median``, ``min`` or ``max``,
that statistic of the measured values (the median of an even count is the mean of the two middle ones); ``null`` when ``n`` is 0. For any other
aggregate method the value is the producer's: it is not recomputed (``result()["value"]`` is ``None`` and
:attr:`EntryAccumulator.recomputes_value` is False).

Driving the accumulators from a verifier
----------------------------------------
:class:`SummaryAccumulator` does the routing; a verifier checking a written summary does::

    lanes = [lane["lane"] for lane in summary["lanes"]]
    acc = SummaryAccumulator(lanes)
    checks = []
    for lane in summary["lanes"]:
        for entry in lane["metrics"]:
            kind = kinds.get(entry["metric"])      # metric id -> kind, from metrics.json
            if kind is None:
                continue                           # a `metric` problem, reported elsewhere
            method = (entry.get("aggregate") or {}).get("method")
            checks.append((entry, acc.add_entry(lane["lane"], entry["path"], entry["metric"], kind, method)))
    for lineno, line in results:                   # one pass; every line, trial lines included
        acc.add(line)                              # skips trial lines itself; counts rollup lines
    for entry, ea in checks:
        got = ea.result()
        keys = ("N", "n", "notMeasured", "sum", "sumSq", "value") if ea.recomputes_value else (
               "N", "n", "notMeasured", "sum")
        for k in keys:   # `sum`, `sumSq` are optional; `sumSq` within §3.6's tolerance, the others exactly
            match = value_matches if k == "sumSq" else exactly_matches
            if k in entry and not match(entry[k], got[k]):
                ...report ("summary.json", "summary")
        # `value` and N/n/notMeasured are required by the schema, so they are always present when schema-valid

(``sumSq`` is not part of the `summary` code's list in §3.9 but §3.6 says it is compared when present.)
Lines that failed their schema never reach here: §3.9 checks these rules only when nothing had an ``encoding``,
``limit`` or ``schema`` problem. :func:`measure` raises ``ValueError`` for a line it cannot read (an unknown
``state``, a score ``value`` that is not a finite number): with schema-valid lines that does not happen.

Memory: every accumulator is O(1) (the exact sum is one integer of at most about 2,100 bits plus the bits of the
line count), except for ``median``, which keeps the measured values.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from aefgate.errors import Refusal
from aefgate.aef import jsonio
from aefgate.aef.spill import Floats, bound
from aefgate.aef.vocab import MEASURED_STATES

__all__ = [
    "KINDS",
    "STATES",
    "VERDICTS",
    "DEFINED_METHODS",
    "LEFT_OUT",
    "measure",
    "is_trial_line",
    "line_lane",
    "entry_key",
    "EntryAccumulator",
    "SummaryAccumulator",
    "exactly_matches",
    "value_matches",
    "TOLERANCE",
    "compute_summary",
    "summarize",
]

KINDS = frozenset({"score", "rate", "count", "duration", "cost", "verdict"})
_VERDICT_KINDS = frozenset({"rate", "verdict"})
_MEASURED_STATES = MEASURED_STATES
_UNMEASURED_STATES = frozenset({"not_measured", "skipped", "error", "pending"})
_LEFT_OUT_STATES = frozenset({"not_applicable"})
STATES = _MEASURED_STATES | _UNMEASURED_STATES | _LEFT_OUT_STATES
VERDICTS = frozenset({"passed", "failed", "warn", "inconclusive", "not_measured", "scored"})
DEFINED_METHODS = frozenset({"median", "min", "max"})  # [SUM-8]: fixed for major 1
TOLERANCE = 1e-9  # §3.6

# Exact sums: every finite binary64 value is an integer multiple of 2**-1074, so it is kept as that integer.
_SCALE_BITS = 1074
_ONE = 1 << _SCALE_BITS


class _LeftOut:
    __slots__ = ()

    def __repr__(self) -> str:
        return "LEFT_OUT"


LEFT_OUT: Any = _LeftOut()
"""What :func:`measure` returns for a line the entry leaves out entirely (``not_applicable``)."""


def _scaled(x: float) -> int:
    """``x * 2**1074`` as an exact integer (``x`` finite binary64)."""
    num, den = x.as_integer_ratio()
    return num << (_SCALE_BITS + 1 - den.bit_length())  # den is 2**k, k <= 1074


def _round(num: int, den: int) -> float | None:
    """``num / den`` correctly rounded to binary64, or None when it is not finite (overflow)."""
    try:
        return num / den  # int / int is correctly rounded (round half to even) in CPython
    except OverflowError:
        return None


def _number(v: Any) -> float:
    """A JSON number as the binary64 value a reader takes it as ([ENC-4]); ValueError for anything else."""
    if type(v) is float:
        if v - v == 0.0:  # finite (nan - nan and inf - inf are nan)
            return v
        raise ValueError("a score value is not finite")
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError(f"a score value is a number, not {type(v).__name__}")
    try:
        f = float(v)
    except OverflowError:
        raise ValueError("a score value overflows binary64") from None
    if not math.isfinite(f):
        raise ValueError("a score value is not finite")
    return f


_NONE: Any = object()  # the line has no score for the metric
_TWICE: Any = object()  # the line scores the metric more than once


def _one_score(line: Mapping[str, Any], metric: str) -> Any:
    """The ``value`` of the line's one score for ``metric``, or ``_NONE`` / ``_TWICE``."""
    hit = _NONE
    scores = line.get("scores")
    if scores:
        for s in scores:
            if isinstance(s, dict) and s.get("metric") == metric:
                if hit is not _NONE:
                    return _TWICE
                hit = s.get("value")
    return hit


def _all_scores(line: Mapping[str, Any]) -> dict[str, Any]:
    """metric id -> the value of the line's one score for it, or ``_TWICE``."""
    out: dict[str, Any] = {}
    scores = line.get("scores")
    if scores:
        for s in scores:
            if isinstance(s, dict):
                m = s.get("metric")
                if type(m) is str:
                    out[m] = _TWICE if m in out else s.get("value")
    return out


def _value_of(state: str, kind: str, hit: Any) -> float | None:
    """The measured value of a line in a measured state (None: not measured), given its score for the metric."""
    if hit is _TWICE:  # §3.9 `metric`: scored twice, so not measured for it
        return None
    if kind in _VERDICT_KINDS:
        if state == "scored":  # no verdict
            return None
        return 1.0 if state == "passed" else 0.0
    if hit is _NONE:
        return None
    return _number(hit)


def measure(line: Mapping[str, Any], metric: str, kind: str) -> Any:
    """What one line gives an entry of ``metric`` (of ``kind``) under [SUM-4].

    Returns :data:`LEFT_OUT` (the line is not counted at all), ``None`` (counted in ``N``, not measured) or the
    measured value as a float. The caller has already decided that the line is in the entry's lane and at its path
    and is not a trial line. Raises ``ValueError`` for an unknown kind or state, or for a score of the metric whose
    value is not a finite number.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown metric kind {kind!r}")
    state = line.get("state")
    if state in _MEASURED_STATES:
        return _value_of(state, kind, _one_score(line, metric))
    if state in _UNMEASURED_STATES:
        return None
    if state in _LEFT_OUT_STATES:
        return LEFT_OUT
    raise ValueError(f"unknown state {state!r}")


def is_trial_line(line: Mapping[str, Any]) -> bool:
    """Whether the line is a trial line (carries ``trial``): [SUM-3] never counts it. A null ``trial`` is none."""
    return line.get("trial") is not None


def _single_lane(summary_lanes: Iterable[str]) -> str | None:
    names = set(summary_lanes)
    return next(iter(names)) if len(names) == 1 else None


def line_lane(line: Mapping[str, Any], summary_lanes: Iterable[str]) -> str | None:
    """The lane a line belongs to ([SUM-3]): its ``lane``; without one, the summary's lane when the summary has a
    single lane name; otherwise None (it belongs to no lane). A null ``lane`` is none."""
    lane = line.get("lane")
    if lane is not None:
        return lane
    return _single_lane(summary_lanes)


def entry_key(line: Mapping[str, Any], summary_lanes: Iterable[str]) -> tuple[str, str] | None:
    """``(lane, path)``: the entries a line counts for are those with this lane and path (any metric); None when
    the line counts for no entry (a trial line, or a line in no lane)."""
    if is_trial_line(line):
        return None
    lane = line_lane(line, summary_lanes)
    if lane is None:
        return None
    return (lane, line.get("path"))  # type: ignore[return-value]


MEDIAN_IN_MEMORY = 1 << 16  # values of a median entry kept in memory; beyond, on disk (AEFGATE_SPILL_VALUES)


def _median_bound() -> int:
    return bound("AEFGATE_SPILL_VALUES", MEDIAN_IN_MEMORY)


class EntryAccumulator:
    """The running figures of one summary entry ([SUM-4], [SUM-5], [SUM-8]).

    ``kind`` is the metric's kind in ``metrics.json``; ``aggregate_method`` the entry's ``aggregate.method`` (None
    for the mean, or the sum of a count); ``metric`` the metric's id (the scores of a line are looked up by it; it is
    required, positionally or by name: ``EntryAccumulator("score", None, "q")``).
    Feed it with :meth:`add` (a line of the entry's lane and path, not a trial line) and read :meth:`result`.
    """

    __slots__ = ("kind", "metric", "aggregate_method", "N", "n", "_exact", "_sumsq", "_min", "_max", "_values")

    def __init__(self, kind: str, aggregate_method: str | None = None, metric: str | None = None):
        if metric is None:
            raise TypeError("EntryAccumulator needs the metric id: EntryAccumulator(kind, method, metric)")
        if kind not in KINDS:
            raise ValueError(f"unknown metric kind {kind!r}")
        self.kind = kind
        self.metric = metric
        self.aggregate_method = aggregate_method
        self.N = 0
        self.n = 0
        self._exact = 0  # the exact sum, times 2**1074
        self._sumsq = 0.0
        self._min: float | None = None
        self._max: float | None = None
        # a median needs every value: 8 bytes each in memory, on disk beyond a bound (spill.Floats)
        self._values: Floats | None = Floats(_median_bound()) if aggregate_method == "median" else None

    @property
    def recomputes_value(self) -> bool:
        """Whether AEF defines this entry's ``value`` (the mean or sum, or median, min, max): [SUM-8]."""
        return self.aggregate_method is None or self.aggregate_method in DEFINED_METHODS

    computes_value = recomputes_value  # the same, by another name

    def add(self, line: Mapping[str, Any]) -> None:
        """Count one line (of this entry's lane and path, not a trial line). ValueError as :func:`measure`."""
        state = line.get("state")
        if state in _MEASURED_STATES:
            self._count(_value_of(state, self.kind, _one_score(line, self.metric)))
        elif state in _UNMEASURED_STATES:
            self.N += 1
        elif state not in _LEFT_OUT_STATES:
            raise ValueError(f"unknown state {state!r}")

    def add_measure(self, m: Any) -> None:
        """Count what :func:`measure` gave: :data:`LEFT_OUT`, None (not measured) or a finite float."""
        if m is not LEFT_OUT:
            self._count(m)

    def add_figures(self, big_n: int, n: int, exact: int, lo: float | None, hi: float | None,
                    values: list[float]) -> None:
        """Count the measures of a batch of lines at once: ``big_n`` lines counted (``N``), ``n`` measured, the exact
        sum of their values (times 2**1074), their least and greatest (the first of equal ones), the values in line
        order. The same figures as :meth:`add_measure` of each in turn (the sum of squares is added value by
        value, in order)."""
        self.N += big_n
        if not n:
            return
        self.n += n
        self._exact += exact
        if self._min is None or lo < self._min:
            self._min = lo
        if self._max is None or hi > self._max:
            self._max = hi
        sq = self._sumsq
        for m in values:
            sq += m * m
        self._sumsq = sq
        if self._values is not None:
            append = self._values.append
            for m in values:
                append(m)

    def _count(self, m: float | None) -> None:
        self.N += 1
        if m is None:
            return
        self.n += 1
        self._exact += _scaled(m)
        self._sumsq += m * m
        if self._min is None or m < self._min:
            self._min = m
        if self._max is None or m > self._max:
            self._max = m
        if self._values is not None:
            self._values.append(m)

    def result(self) -> dict[str, Any]:
        """``N``, ``n``, ``notMeasured``, ``sum``, ``sumSq`` and ``value``.

        ``sum`` is 0.0 when ``n`` is 0, and None when the exact sum rounds beyond binary64; ``sumSq`` is None when
        not finite; ``value`` is None when ``n`` is 0, when it is not finite (a ``count`` whose sum overflows), and
        for an aggregate method AEF does not define (the producer's value stands).
        """
        n = self.n
        total = _round(self._exact, _ONE) if n else 0.0
        sumsq = self._sumsq if math.isfinite(self._sumsq) else None
        value: float | None = None
        if n:
            method = self.aggregate_method
            if method is None:
                # [SUM-5]: the binary64 `sum` divided by `n` in one binary64 division, as the reference writer
                # computes it (2.1 / 5 is 0.42000000000000004, not the exact mean 0.42 rounded once);
                # when the sum is beyond binary64 there is no `sum`, so no value either: null, and the entry's
                # verdict not_measured (R10-3, as the reference verifier rules it; compute_summary writes that)
                value = None if total is None else total if self.kind == "count" else total / n
            elif method == "min":
                value = self._min
            elif method == "max":
                value = self._max
            elif method == "median":
                mid = n // 2
                if n % 2:
                    (value,) = self._values.at([mid])
                else:
                    a, b = self._values.at([mid - 1, mid])
                    value = _round(_scaled(a) + _scaled(b), 2 * _ONE)
        return {"N": self.N, "n": n, "notMeasured": self.N - n, "sum": total, "sumSq": sumsq, "value": value}


class SummaryAccumulator:
    """Routes result lines to the :class:`EntryAccumulator` of every entry they count for ([SUM-3]).

    ``lanes``: the summary's lane names, as written (a name given twice is still one name for [SUM-3]).
    Entries may repeat a lane, metric and path (a verifier checking a summary with a `summary-duplicate` problem
    still recomputes each).
    """

    def __init__(self, lanes: Iterable[str]):
        self._single = _single_lane(lanes)
        self._index: dict[tuple[Any, Any], list[EntryAccumulator]] = {}
        self.entries: list[EntryAccumulator] = []

    def add_entry(
        self, lane: str, path: str, metric: str, kind: str, aggregate_method: str | None = None
    ) -> EntryAccumulator:
        """Add an entry and return its accumulator (entries keep the order they are added in)."""
        acc = EntryAccumulator(kind, aggregate_method, metric=metric)
        self._index.setdefault((lane, path), []).append(acc)
        self.entries.append(acc)
        return acc

    def add(self, line: Mapping[str, Any]) -> None:
        """Count one result line for every entry of its lane and path (nothing for a trial line)."""
        if line.get("trial") is not None:
            return
        lane = line.get("lane")
        if lane is None:
            lane = self._single
            if lane is None:
                return
        accs = self._index.get((lane, line.get("path")))
        if not accs:
            return
        if len(accs) == 1:
            accs[0].add(line)
            return
        # several entries at this lane and path: read the line once for all of them
        state = line.get("state")
        if state in _MEASURED_STATES:
            hits = _all_scores(line)
            for acc in accs:
                acc._count(_value_of(state, acc.kind, hits.get(acc.metric, _NONE)))
        elif state in _UNMEASURED_STATES:
            for acc in accs:
                acc.N += 1
        elif state not in _LEFT_OUT_STATES:
            raise ValueError(f"unknown state {state!r}")


def exactly_matches(written: Any, recomputed: Any) -> bool:
    """A written ``sum`` or ``value`` (mean, count, median, min, max) against its recomputed value: equal as binary64
    numbers, exactly, as the reference verifier compares them (its rulings R10-3 and R11-2, newer than §3.6's
    tolerance: an exact mean rounded once is not SUM-5's ``sum / n``). None (JSON null) matches only None."""
    if recomputed is None or written is None:
        return written is None and recomputed is None
    for v in (written, recomputed):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return False
    try:
        return float(written) == float(recomputed)
    except OverflowError:
        return False


def value_matches(written: Any, recomputed: Any) -> bool:
    """§3.6: a written figure matches its recomputed value when they differ by at most 1e-9 x max(1, |recomputed|).

    None (JSON null) matches only None. Nothing matches a recomputed value that is not finite (None stands for
    one too, when the caller's figure is a number: a written number never matches None). Computed in binary64.
    """
    if recomputed is None:
        return written is None
    if written is None:
        return False
    for v in (written, recomputed):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return False
    try:
        w = float(written)
        r = float(recomputed)
    except OverflowError:
        return False
    if not (math.isfinite(w) and math.isfinite(r)):
        return False
    return abs(w - r) <= TOLERANCE * max(1.0, abs(r))


# -- compute_summary / summarize --------------------------------------------------------------------------------


def _refuse(rule: str, message: str, where: str) -> Refusal:
    return Refusal(rule, message, where)


def _kinds(metrics_doc: Any) -> dict[str, str]:
    if not isinstance(metrics_doc, Mapping) or not isinstance(metrics_doc.get("metrics"), list):
        raise _refuse("SUM-1", "metrics.json has no list of metrics", "metrics.json")
    kinds: dict[str, str] = {}
    for i, m in enumerate(metrics_doc["metrics"]):
        where = f"metrics.json:/metrics/{i}"
        if not isinstance(m, Mapping) or not isinstance(m.get("id"), str):
            raise _refuse("SUM-1", "a metric without a string id", where)
        if m.get("kind") not in KINDS:
            raise _refuse("SUM-1", f"metric {m['id']!r} has no known kind", where)
        if m["id"] in kinds:
            raise _refuse("SUM-1", f"metric {m['id']!r} is declared twice", where)
        kinds[m["id"]] = m["kind"]
    return kinds


def _is_number(v: Any) -> bool:
    try:
        _number(v)
    except ValueError:
        return False
    return True


def compute_summary(
    run_id: str, metrics_doc: Mapping[str, Any], lines: Iterable[Mapping[str, Any]], request: Mapping[str, Any]
) -> dict[str, Any]:
    """The ``summary.json`` document of a run for the entries ``request`` asks for (§9.3 ``summarize``).

    ``metrics_doc`` is the run's ``metrics.json``; ``lines`` its result lines, in file order, consumed once (an
    iterator is fine); ``request`` is ``{"lanes": [{"lane", "metrics": [{"metric", "path", "aggregate"?, "rule"?,
    "verdict"?, "value"?}]}]}``. Lanes and entries come out in request order, each entry with ``metric``, ``path``,
    ``N``, ``n``, ``notMeasured``, ``sum``, ``sumSq`` (left out when not finite), ``value``, ``verdict``
    (``not_measured`` when ``n`` is 0, [SUM-6]; else the request's, or ``scored``), and ``rule`` and ``aggregate``
    as requested. For an aggregate method AEF does not define, ``value`` is the request's (null when ``n`` is 0).

    Raises :class:`Refusal` for the input errors of §9.3: a metric ``metrics.json`` does not declare (SUM-1); a
    lane named twice, or one lane, metric and path twice (SUM-9); an aggregate method AEF does not define without a
    ``value``, or a ``value`` for an entry AEF computes (SUM-8). Also for a request not of that shape, a
    ``metrics.json`` that declares a metric twice or without a known kind, a non-null producer ``value`` that is not
    a finite number, a producer ``value`` of null when ``n`` is not 0 ([SUM-8]: a number then), and a result line
    that cannot be counted (no known ``state``, a score value that is not a number). Everything about the request
    that does not depend on the lines (all but the null producer value) is checked before the first line is read.
    """
    kinds = _kinds(metrics_doc)
    lane_names, plan = _plan_lanes(request, kinds)

    router = SummaryAccumulator(lane_names)
    accs: list[list[EntryAccumulator]] = []
    for name, planned in plan:
        accs.append(
            [router.add_entry(name, e["path"], e["metric"], kinds[e["metric"]], method) for e, method in planned]
        )

    for lineno, line in enumerate(lines, 1):
        if not isinstance(line, Mapping):
            raise _refuse("ENC-5", "a result line is not an object", f"results.ndjson:{lineno}")
        try:
            router.add(line)
        except (ValueError, TypeError) as ex:  # TypeError: an unhashable state, lane or path
            raise _refuse("SUM-4", f"the line cannot be counted: {ex}", f"results.ndjson:{lineno}") from None

    out_lanes = []
    for i, ((name, planned), lane_accs) in enumerate(zip(plan, accs)):
        out_entries = []
        for j, ((e, _method), acc) in enumerate(zip(planned, lane_accs)):
            out_entries.append(_summary_entry(e, acc, f"request:/lanes/{i}/metrics/{j}"))
        out_lanes.append({"lane": name, "metrics": out_entries})
    return {"schemaVersion": "1.0", "runId": run_id, "lanes": out_lanes}


def _plan_lanes(
    request: Mapping[str, Any], kinds: dict[str, str]
) -> tuple[list[str], list[tuple[str, list[tuple[Mapping[str, Any], str | None]]]]]:
    """The request checked before any line is read: its lane names, and per lane its entries, each with its
    aggregate method (None for none)."""
    if not isinstance(request, Mapping) or not isinstance(request.get("lanes"), list):
        raise _refuse("CONF-3", "the request is not {\"lanes\": [...]}", "request")

    lane_names: list[str] = []
    plan: list[tuple[str, list[tuple[Mapping[str, Any], str | None]]]] = []
    seen_entries: set[tuple[str, str, str]] = set()
    for i, lane in enumerate(request["lanes"]):
        where = f"request:/lanes/{i}"
        if not isinstance(lane, Mapping) or not isinstance(lane.get("lane"), str):
            raise _refuse("CONF-3", "a lane is {\"lane\": name, \"metrics\": [...]}", where)
        name = lane["lane"]
        if name in lane_names:
            raise _refuse("SUM-9", f"lane {name!r} is named twice", where)
        lane_names.append(name)
        entries = lane.get("metrics")
        if not isinstance(entries, list):
            raise _refuse("CONF-3", f"lane {name!r} has no list of metrics", where)
        planned: list[tuple[Mapping[str, Any], str | None]] = []
        for j, e in enumerate(entries):
            method = _plan_entry(e, f"{where}/metrics/{j}", name, kinds, seen_entries)
            planned.append((e, method))
        plan.append((name, planned))
    return lane_names, plan


def _plan_entry(
    e: Any, ew: str, name: str, kinds: dict[str, str], seen_entries: set[tuple[str, str, str]]
) -> str | None:
    """One requested entry of lane ``name`` checked (its key added to ``seen_entries``): its aggregate method."""
    if not isinstance(e, Mapping) or not isinstance(e.get("metric"), str) or not isinstance(e.get("path"), str):
        raise _refuse("CONF-3", "an entry names a metric and a path (strings)", ew)
    metric, path = e["metric"], e["path"]
    if metric not in kinds:
        raise _refuse("SUM-1", f"metric {metric!r} is not declared in metrics.json", ew)
    key = (name, metric, path)
    if key in seen_entries:
        raise _refuse("SUM-9", f"lane {name!r}, metric {metric!r} and path {path!r} are asked for twice", ew)
    seen_entries.add(key)
    agg = e.get("aggregate")
    method: str | None = None
    if agg is not None:
        if not isinstance(agg, Mapping) or not isinstance(agg.get("method"), str):
            raise _refuse("CONF-3", "an aggregate is {\"method\": name, \"k\"?: k}", ew)
        method = agg["method"]
    computed = method is None or method in DEFINED_METHODS
    if computed:
        if e.get("value") is not None:
            raise _refuse("SUM-8", "a value for an entry AEF computes would contradict it", ew)
    else:
        if "value" not in e:
            raise _refuse("SUM-8", f"aggregate {method!r} is not defined by AEF: its value is needed", ew)
        if e["value"] is not None and not _is_number(e["value"]):
            raise _refuse("SUM-8", "the producer's value is not a finite number", ew)
    verdict = e.get("verdict")
    if verdict is not None and verdict not in VERDICTS:
        raise _refuse("SUM-6", f"unknown verdict {verdict!r}", ew)
    rule = e.get("rule")
    if rule is not None and not isinstance(rule, str):
        raise _refuse("CONF-3", "a rule is text", ew)
    return method


def _summary_entry(e: Mapping[str, Any], acc: EntryAccumulator, where: str) -> dict[str, Any]:
    """The summary entry of requested entry ``e`` from its accumulator (``where``: the entry in the request)."""
    got = acc.result()
    n = got["n"]
    entry: dict[str, Any] = {
        "metric": e["metric"],
        "path": e["path"],
        "N": got["N"],
        "n": n,
        "notMeasured": got["notMeasured"],
    }
    if got["sum"] is not None:
        entry["sum"] = got["sum"]
    if got["sumSq"] is not None:
        entry["sumSq"] = got["sumSq"]
    if acc.recomputes_value:
        value = got["value"]
    elif n == 0:
        value = None
    else:
        value = e["value"]
        if value is None:
            raise _refuse(
                "SUM-8",
                f"aggregate {acc.aggregate_method!r}: {n} values were measured, so the value is a number",
                where,
            )
    entry["value"] = value
    beyond = n > 0 and acc.aggregate_method is None and value is None  # the sum is beyond binary64 (R10-3)
    entry["verdict"] = "not_measured" if n == 0 or beyond else (e.get("verdict") or "scored")
    if e.get("rule") is not None:
        entry["rule"] = e["rule"]
    if e.get("aggregate") is not None:
        entry["aggregate"] = dict(e["aggregate"])
    return entry


def summarize(run_dir: str | os.PathLike[str], request: str | os.PathLike[str] | Mapping[str, Any]) -> dict[str, Any]:
    """§9.3 ``summarize DIR REQUEST``: the ``summary.json`` of the run in ``run_dir`` for the entries of ``request``
    (a request file's path, or the request itself).

    Reads ``run.json`` and ``metrics.json`` and streams ``results.ndjson`` with the strict reader; input that does
    not read is a :class:`Refusal` (``ENC-…`` for a defect, ``RUN-2`` for a missing file, ``RUN-1`` for a
    ``run.json`` without a string ``runId``), as are the input errors of :func:`compute_summary`.
    """
    root = Path(run_dir)

    def read(path: Path, where: str) -> Any:
        try:
            return jsonio.read_json(path)
        except jsonio.JsonProblem as e:
            raise e.refusal(where) from None
        except OSError as e:
            raise Refusal("RUN-2", f"cannot read {where}: {e.strerror or e}", where) from None

    req = request if isinstance(request, Mapping) else read(Path(request), str(request))
    run = read(root / "run.json", "run.json")
    run_id = run.get("runId")
    if not isinstance(run_id, str):
        raise Refusal("RUN-1", "run.json has no string runId", "run.json")
    metrics = read(root / "metrics.json", "metrics.json")

    def lines() -> Iterator[Any]:
        for _lineno, value in jsonio.iter_ndjson(root / "results.ndjson"):
            yield value

    try:
        return compute_summary(run_id, metrics, lines(), req)
    except jsonio.JsonProblem as e:
        lineno = getattr(e, "lineno", None)
        raise e.refusal("results.ndjson" if lineno is None else f"results.ndjson:{lineno}") from None
    except OSError as e:
        raise Refusal("RUN-2", f"cannot read results.ndjson: {e.strerror or e}", "results.ndjson") from None
