"""The run verification under a trust policy (spec 04 §4.5 with [OVL-10] and [SIG-7]).

:func:`verify_run` is the verifier's :func:`~aefgate.formats.aef.verifier.verify_run` with a ``policy``: blobs
withheld by the redactions the policy authorizes (computed from the overlay chain,
:func:`~aefgate.formats.aef.overlays.authorized_redactions`) are ``withheld``, not ``missing``, and ``signed_by``
lists the identities ``attestation.dsse.json`` verifies for.

Layering: above both the verifier and the overlays (which verify a run before a decision is appended), so neither
imports the other's upper half: ``seal`` < ``verifier`` < ``overlays`` < ``trust``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from aefgate.errors import Refusal
from aefgate.formats.aef import verifier
from aefgate.formats.aef.overlays import authorized_redactions
from aefgate.formats.aef.verifier import Verification

__all__ = ["verify_run"]


def verify_run(
    run_dir: str | Path,
    *,
    anchors: Iterable[str] | None = None,
    policy: Any = None,
    withheld_ok: Iterable[str] = (),
) -> Verification:
    """Verify a run folder (§3.9, §4.1, §4.5), under a trust policy when one is given.

    ``anchors``: trusted run hashes (hex): sets ``anchored``. ``policy``: a trust policy ([SIG-4]; a
    ``signatures.TrustPolicy`` or the path of one): blobs withheld by authorized redactions ([OVL-10]) are
    ``withheld``, not ``missing``, and ``signed_by`` lists the identities ``attestation.dsse.json`` verifies for,
    for an intact run ([SIG-7]; None when no policy is given: not checked). ``withheld_ok``: blob paths withheld
    by authorized redactions, when the caller computed them already."""
    if policy is None:
        return verifier.verify_run(run_dir, anchors=anchors, withheld_ok=withheld_ok)
    root = Path(run_dir)
    if root.is_symlink() or not root.is_dir():  # before the policy is read, as the verifier does
        raise Refusal("RUN-1", "not a run folder (a run is a folder holding run.json)", str(run_dir))
    from aefgate.formats.aef.signatures import TrustPolicy, attestation_signed_by

    if not isinstance(policy, TrustPolicy):
        policy = TrustPolicy.load(policy)
    withheld = set(withheld_ok) | set(authorized_redactions(root, policy))
    v = verifier.verify_run(run_dir, anchors=anchors, withheld_ok=withheld)
    v.signed_by = attestation_signed_by(root, policy) if v.outcome == "intact" else []
    return v
