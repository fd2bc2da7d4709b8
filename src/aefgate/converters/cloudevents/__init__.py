"""AEF <-> CloudEvents, and the direct AEP <-> CloudEvents event-file converter (AEP-0005, the CloudEvents bridge).

The converter shape (docs/design/converters.md): the AEF directions are the AEP converter's, its events encoded as
CloudEvents 1.0 (:func:`aefgate.converters.cloudevents.exporter.to_cloudevents`,
:func:`aefgate.converters.aep.importer.from_cloudevents`); :mod:`.direct` converts event files between AEP and
CloudEvents without AEF; :mod:`.losses` declares what each direction loses. This module registers all four
(entry point ``cloudevents``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aefgate.converters.aep import EXPORT_OPTIONS, IMPORT_OPTIONS, back_options
from aefgate.converters.cloudevents.losses import (
    LOSSES_CLOUDEVENTS_TO_AEP,
    LOSSES_FROM_CLOUDEVENTS,
    LOSSES_TO_CLOUDEVENTS,
)
from aefgate.converters.registry import Converter, Option

__all__ = ["CONVERTERS"]

_MODE = "CloudEvents mode: structured (one JSON-format event per line) or binary (one HTTP binary-mode " \
        "{headers, body} per line; AEP-18)"


def _to_cloudevents(src: Any, dst: Any, **options: Any) -> Path:
    # lazy: the converter (0.1-0.3 s of imports) when it runs, not when the registry lists it
    from aefgate.converters.cloudevents.exporter import to_cloudevents

    return to_cloudevents(src, dst, **options)


def _from_cloudevents(src: Any, dst: Any, **options: Any) -> Path:
    # lazy: the converter (0.1-0.3 s of imports) when it runs, not when the registry lists it
    from aefgate.converters.aep.importer import from_cloudevents

    return from_cloudevents(src, dst, **options)


def _aep_to_cloudevents(src: Any, dst: Any, *, mode: str = "structured", **_: Any) -> dict:
    # lazy: the converter (0.1-0.3 s of imports) when it runs, not when the registry lists it
    from aefgate.converters.cloudevents.direct import export_file

    return {"events": export_file(src, dst, mode="structured" if mode is None else mode)}


def _cloudevents_to_aep(src: Any, dst: Any, **_: Any) -> dict:
    # lazy: the converter (0.1-0.3 s of imports) when it runs, not when the registry lists it
    from aefgate.converters.cloudevents.direct import import_file

    n, diagnostics = import_file(src, dst)
    return {"events": n, "dropped": [f"{where}: {d}" for where, d in diagnostics]}


CONVERTERS = [
    Converter("aef-to-cloudevents", "aef", "cloudevents", _to_cloudevents,
              EXPORT_OPTIONS + (Option("mode", _MODE, str, "structured"),), LOSSES_TO_CLOUDEVENTS,
              "an intact AEF run as AEP assessment events in structured CloudEvents (AEP-0005)", suffix=".jsonl",
              cli="aefgate.cli.aep_cmds:export_cloudevents"),
    Converter("cloudevents-to-aef", "cloudevents", "aef", _from_cloudevents, IMPORT_OPTIONS, LOSSES_FROM_CLOUDEVENTS,
              "structured CloudEvents of AEP assessment events as an imported AEF run, sealed ingest",
              back_options=back_options),
    Converter("aep-to-cloudevents", "aep", "cloudevents", _aep_to_cloudevents,
              options=[Option("mode", "structured (one JSON-format CloudEvent per line) or binary (one "
                                      "{\"headers\", \"body\"} HTTP binary-mode message per line)", str, "structured")],
              losses=(), description="AEP event files into CloudEvents 1.0 files (AEP-0005 §1, B1-B5)"),
    Converter("cloudevents-to-aep", "cloudevents", "aep", _cloudevents_to_aep, losses=LOSSES_CLOUDEVENTS_TO_AEP,
              description="CloudEvents files (structured JSON or HTTP messages) into AEP event files (AEP-0005 §2)"),
]
