"""AgentEval store v1: the ``.agenteval/`` workspace AgentEval wrote before AEF
(``../shared/samples/store-v1/FORMAT.md``).

:mod:`.reader` reads a workspace strictly (refusals ``SV1-n``, the file at fault); :mod:`.values` reads the .NET
values it holds (``DateTimeOffset``, ``TimeSpan``) exactly. The mapping to AEF (spec 07 §7.5) is
:mod:`aefgate.converters.store_v1`; its page is ``docs/mappings/store-v1.md``.
"""

from aefgate.formats.store_v1.reader import (
    RULES,
    ComplianceDoc,
    RunRef,
    Scenario,
    StoreRun,
    Workspace,
    compliance_index,
    locate_run_folder,
    native_links,
    open_workspace,
    read_run,
    source_digest,
)

__all__ = [
    "RULES",
    "ComplianceDoc",
    "RunRef",
    "Scenario",
    "StoreRun",
    "Workspace",
    "compliance_index",
    "locate_run_folder",
    "native_links",
    "open_workspace",
    "read_run",
    "source_digest",
]
