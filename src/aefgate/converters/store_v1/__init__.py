"""AgentEval store v1 -> AEF: the migration of spec 07 §7.5 (import only).

The converter shape (docs/design/converters.md): :mod:`.importer` (one store run -> an imported AEF run, sealed
``ingest``), :mod:`.migrate` (every run of a workspace, in worker processes, resumably), :mod:`.losses` (what does
not carry over, as data); this module registers the one direction (entry point ``store-v1``). There is no exporter:
store v1 is a closed legacy format (:data:`~.losses.WHY_NO_EXPORT`, which ``aefgate formats`` shows). The store's
files are read by :mod:`aefgate.formats.store_v1`. aefgate's choices: ``docs/mappings/store-v1.md``.
"""

from __future__ import annotations

from typing import Any

from aefgate.converters.registry import Converter, Option
from aefgate.converters.store_v1.losses import LOSSES_FROM_STORE_V1, WHY_NO_EXPORT

__all__ = ["CONVERTERS", "LOSSES_FROM_STORE_V1", "WHY_NO_EXPORT"]


def _import(src: Any, dst: Any, *, run: str | None = None, target_mode: str = "mocked", content_capture: str = "on",
            subject: str | None = None, at: str | None = None, key: str | None = None, **_: Any) -> None:
    from aefgate.converters.store_v1.importer import from_store_v1  # lazy: listing formats loads this package

    from_store_v1(src, dst, run=run, target_mode=target_mode or "mocked", content_capture=content_capture or "on",
                  subject=subject, at=at, key=key)


CONVERTERS = [
    Converter(
        "store-v1-to-aef", "store-v1", "aef", _import,
        options=[
            Option("run", "the run id, when the input is a workspace (.agenteval) rather than a run folder", str,
                   None),
            Option("target_mode", "execution.targetMode: mocked (store v1 records no provider), or live, replayed or "
                   "scripted when you know how the run drove its subject; listed in imported.asserted", str, "mocked"),
            Option("content_capture", "contentCapture: on (inputs, outputs, eval-result trees, the agent trace and "
                   "the run's other files are kept as evidence), or off (none of them; RUN-11). Listed in "
                   "imported.asserted", str, "on"),
            Option("subject", "subject.ref instead of <kind>:<the store's subject name, percent-encoded> (listed in "
                   "imported.asserted); for one run, not a whole workspace", str, None),
            Option("at", "the seal's sealedAt, RFC 3339 UTC (default: now): with it fixed, two migrations of one "
                   "store give the same run hash", str, None),
            Option("key", "a private key (PKCS#8 PEM) that signs the seal", str, None),
        ],
        losses=LOSSES_FROM_STORE_V1,
        description="AgentEval store v1 (.agenteval/ workspace: a run folder, or a workspace and a run id) into an "
                    "imported AEF run, sealed ingest (spec 07 §7.5). Import only: " + WHY_NO_EXPORT,
        one_way=WHY_NO_EXPORT,
        cli="aefgate.cli.store_v1_cmds:import_store_v1",
    ),
]
