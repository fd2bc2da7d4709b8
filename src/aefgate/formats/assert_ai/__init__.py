"""Microsoft ASSERT (PyPI ``assert-ai``, 0.3) files: reading a suite and a run, ASSERT's own rules for what its
rows mean, and writing a judge-only run. No AEF logic here (that is :mod:`aefgate.converters.assert_ai`).

- :mod:`.files`: JSON, JSON Lines (streamed) and YAML as assert-ai writes them (ASSERT-2, ASSERT-7);
- :mod:`.model`: case keys, ``infer_judge_status``, the headline's permissible / not-permissible split, lanes;
- :mod:`.reader`: a run folder and its suite: manifest, configuration, taxonomy, test set, a judge kit's case map;
- :mod:`.writer`: a judge-only run (a "judge kit") with its case map.

Rule ids (aefgate's own, docs/mappings/assert.md): ASSERT-1 not a run, ASSERT-2 a file that does not read,
ASSERT-3 a case that cannot be named, ASSERT-4 a case twice, ASSERT-5 the taxonomy or test set, ASSERT-7 the
configuration, ASSERT-13 a case map.
"""

from aefgate.formats.assert_ai.files import iter_jsonl, read_line_at, read_object, read_yaml, sha256_file
from aefgate.formats.assert_ai.model import (
    BUILT_IN_DIMENSIONS,
    Taxonomy,
    case_key,
    dimension_scale_values,
    infer_judge_status,
    lane_of,
)
from aefgate.formats.assert_ai.reader import CASE_MAP, AssertRun, CaseMap, open_run, read_case_map
from aefgate.formats.assert_ai.writer import CONFIG, KitCase, positional_id, write_judge_kit

__all__ = [
    "BUILT_IN_DIMENSIONS",
    "CASE_MAP",
    "CONFIG",
    "AssertRun",
    "CaseMap",
    "KitCase",
    "Taxonomy",
    "case_key",
    "dimension_scale_values",
    "infer_judge_status",
    "iter_jsonl",
    "lane_of",
    "open_run",
    "read_case_map",
    "read_line_at",
    "read_object",
    "read_yaml",
    "sha256_file",
    "positional_id",
    "write_judge_kit",
]
