"""Reading the command line's inputs: run folders, input files, anchors. Each problem is a refusal (exit 2)."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Any

from aefgate.errors import Refusal
from aefgate.fsutil import input_file_problem


class SealedBy(str, Enum):
    """Who seals a run ([SEAL-5] ``sealedBy``)."""

    producer = "producer"
    ingest = "ingest"


def require_dir(path: Path) -> None:
    """Refuse (exit 2) a run folder that is not there: a folder holding no run is an input error."""
    if not path.exists():
        raise Refusal("RUN-1", "no such run folder", str(path))
    if not path.is_dir():
        raise Refusal("RUN-1", "a run is a folder, and this is not one", str(path))


def require_file(path: Path) -> None:
    problem = input_file_problem(path)
    if problem is not None:
        raise Refusal("CLI-1", problem, str(path))


def read_input(path: Path, *, top_object: bool = True) -> Any:
    """An input JSON file (a scenario, a request, an anchors list), read strictly; exit 2 when it does not read."""
    from aefgate.aef import jsonio

    require_file(path)
    try:
        return jsonio.read_json(path, top_object=top_object)
    except jsonio.JsonProblem as e:
        raise e.refusal(str(path)) from None


def read_anchors(path: Path) -> list[str]:
    """``--anchors``: a file holding a JSON list of run hashes (strings)."""
    value = read_input(path, top_object=False)
    if not isinstance(value, list) or not all(isinstance(h, str) for h in value):
        raise Refusal("CLI-2", "the anchors file holds a JSON list of run hashes (strings)", str(path))
    return value
