"""Verification problems ``(path, code)`` and their order (spec 03 §3.9), shared by the run verifier and the overlay
chain's reader."""

from __future__ import annotations

from typing import Iterable

__all__ = ["LINE_FILES", "order_problems", "problem_sort_key"]

# the run's NDJSON files, whose problems are reported at ``<file>:<line>``
LINE_FILES = (
    "results.ndjson",
    "evidence.ndjson",
    "gates.ndjson",
    "traces.otlp.jsonl",
    "logs.otlp.jsonl",
    "overlays/events.ndjson",
)
_LINE_FILES = frozenset(LINE_FILES)


def problem_sort_key(problem: tuple[str, str]) -> tuple[bytes, int, bytes]:
    """§3.9 order: path bytes (line paths of the run's NDJSON files by line number), then code bytes."""
    path, code = problem
    i = path.rfind(":")
    if i > 0 and path[i + 1 :].isdigit() and path[:i] in _LINE_FILES:
        return (path[: i + 1].encode("utf-8"), int(path[i + 1 :]), code.encode("utf-8"))
    return (path.encode("utf-8"), -1, code.encode("utf-8"))


def order_problems(problems: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    return sorted(set(problems), key=problem_sort_key)
