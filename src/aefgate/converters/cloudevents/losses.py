"""What the CloudEvents converters do not carry, as data: the AEF <-> CloudEvents directions lose what AEF <-> AEP
loses (docs/mappings/aep.md; the events are AEP's, in CloudEvents' encodings, AEP-0005); the direct event-file
converter CloudEvents -> AEP loses what AEP-0005 §2 drops (docs/design/cloudevents-bridge.md)."""

from __future__ import annotations

from aefgate.converters.aep.losses import LOSSES_FROM_AEP, LOSSES_TO_AEP
from aefgate.converters.registry import Loss

__all__ = ["LOSSES_CLOUDEVENTS_TO_AEP", "LOSSES_FROM_CLOUDEVENTS", "LOSSES_TO_CLOUDEVENTS"]

LOSSES_TO_CLOUDEVENTS: tuple[Loss, ...] = LOSSES_TO_AEP
LOSSES_FROM_CLOUDEVENTS: tuple[Loss, ...] = LOSSES_FROM_AEP

LOSSES_CLOUDEVENTS_TO_AEP: tuple[Loss, ...] = (
    Loss("CloudEvents extension attributes whose names are not legal AEP extension names ([a-z0-9]{1,20}, not an AEP "
         "core name) or whose values cannot ride the envelope: dropped (AEP-0005 §2 rule 2)"),
    Loss("dataschema: dropped (no AEP counterpart)"),
    Loss("binary mode: integer and boolean extension attributes other than aepsequence/aepepoch read as strings"),
)
