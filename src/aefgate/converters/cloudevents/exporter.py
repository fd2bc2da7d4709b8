"""AEF -> CloudEvents (AEP-18): a run's AEP assessment events (:mod:`aefgate.converters.aep.exporter`) as
CloudEvents 1.0 (AEP-0005), one per line, written atomically; the common event on the struct path
(:mod:`.fast`), byte-identical to the dict path."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from aefgate.converters.aep.exporter import _encode, _with_aigp, _write_jsonl
from aefgate.converters.cloudevents.fast import encoder
from aefgate.fsutil import check_file_destination

__all__ = ["to_cloudevents"]


def to_cloudevents(run_dir: str | os.PathLike[str], out_path: str | os.PathLike[str], mode: str = "structured",
                   **options: Any) -> Path:
    """AEP-18: the run's events as CloudEvents (AEP-0005), one per line, written atomically: ``structured`` (the
    JSON event format) or ``binary`` (the HTTP binary-mode message, ``{"headers", "body"}``, as the bridge's
    event-file converter writes it: docs/design/cloudevents-bridge.md)."""
    # lazy: the CloudEvents SDK (about 25 ms to import) only for this export, not for every AEP export or the bus
    from aefgate.formats.cloudevents.ndjson import check_mode, line_value

    if mode is None:
        mode = "structured"
    check_mode(mode)
    out = Path(out_path)
    check_file_destination(out, (run_dir,))
    where = f"{run_dir}"

    def encode(batch: list[dict]) -> bytes:  # the CloudEvents lines of a batch (in the export's workers too)
        return _encode([line_value(_with_aigp(ev), where, mode) for ev in batch])

    if mode == "structured":  # the same bytes without a dict per common event (issue 31)
        encode.fast = encoder(where)  # type: ignore[attr-defined]

    return _write_jsonl(run_dir, out, options, encode)
