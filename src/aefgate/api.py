"""aefgate's public Python API: what people who call aefgate from their own code use, and what the command line is
built on. ``import aefgate`` gives these names (``aefgate.verify``, ``aefgate.seal``, ...); every other module is
private by convention and may change.

- :func:`verify`: verify a run (spec §3.9, §4.1, §4.5) -> :class:`Verification` (``outcome``, ``problems``,
  ``run_hash``, ``signed_by``).
- :func:`seal`: seal a closed run ([SEAL-1]..[SEAL-6]), optionally sign it ([SIG-1]) -> the run hash.
- :func:`convert`: convert between formats, directly or through AEF -> the output path.
- :func:`fidelity`: a round trip, field by field (AEF -> FORMAT -> AEF, or FORMAT -> AEF -> FORMAT with
  ``from_source``) -> :class:`FidelityReport` (``ok``, ``undeclared``, ``summary()``, ``to_json()``).
- :func:`list_formats`: the formats installed converters connect, with their options and declared losses.
- :class:`Refusal`: what every function raises for bad input (``rule``, ``where``, ``message``, ``exit_code``: 2
  for an input, 1 for a run that does not verify).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable, Mapping

from aefgate.converters import fidelity as harness
from aefgate.converters.fidelity import FidelityReport
from aefgate.converters.registry import find_route, registry, run_route
from aefgate.errors import Refusal
from aefgate.aef.sealer import seal_run
from aefgate.aef.signatures import check_no_attestation, signing_key_of, write_attestation
from aefgate.aef.verifier import Verification, verify_run

__all__ = ["FidelityReport", "Refusal", "Verification", "convert", "fidelity", "list_formats", "seal", "verify"]



def verify(run: str | os.PathLike[str], *, anchors: Iterable[str] | None = None,
           policy: str | os.PathLike[str] | None = None) -> "Verification":
    """Verify the run folder ``run``: its outcome is ``intact``, ``unsealed`` or ``invalid``, with every problem as
    ``(path, code)``. ``anchors`` are trusted run hashes; ``policy`` a trust policy file ([SIG-4]): then
    ``signed_by`` names who signed the attestation and the redactions it authorizes are honoured."""
    return verify_run(Path(run), anchors=list(anchors) if anchors is not None else None, policy=policy)


def seal(run: str | os.PathLike[str], *, sealed_by: str = "producer", at: str | None = None,
         key: Any = None) -> str:
    """Seal the closed run ``run`` (writes ``seal.json``; ``sealed_by`` is ``producer`` or ``ingest``; ``at`` the
    sealing time, RFC 3339 UTC, default now) and return its run hash. With ``key`` (a private key file, PKCS#8 PEM,
    or a loaded key), also sign the seal (``attestation.dsse.json``); the key is loaded before anything is written,
    and a run that already has an attestation is refused (OUT-1)."""
    signing_key = signing_key_of(key)  # a bad key changes nothing
    root = Path(run)
    if not root.is_dir():
        raise Refusal("RUN-1", "no such run folder", str(root))
    if signing_key is not None:
        check_no_attestation(root)
    run_hash = seal_run(root, sealed_by=sealed_by, sealed_at=at)
    if signing_key is not None:
        write_attestation(root, signing_key)
    return run_hash


def convert(src: str | os.PathLike[str], dst: str | os.PathLike[str], *, source: str, target: str,
            options: Mapping[str, Any] | None = None) -> Path:
    """Convert ``src`` (format ``source``) into ``dst`` (format ``target``), directly or through AEF, atomically:
    ``dst`` must be absent or an empty folder, and appears only on success. Each option goes to the steps that
    declare it (CONV-3 for one none declares)."""
    return run_route(find_route(source, target), src, dst, options or {})


def fidelity(fmt: str, run: str | os.PathLike[str] | None = None, *,
             from_source: str | os.PathLike[str] | None = None, options: Mapping[str, Any] | None = None,
             withheld_ok: Iterable[str] = ()) -> "FidelityReport":
    """Round-trip ``run`` through ``fmt`` (AEF -> ``fmt`` -> AEF), or the file ``from_source`` through AEF
    (``fmt`` -> AEF -> ``fmt``), and report each field as kept, lost as declared, or lost but not declared."""
    if (run is None) == (from_source is None):
        raise Refusal("CLI-2", "give a run or from_source (one of them)", "run")
    if run is not None:
        return harness.fidelity(fmt, run, options=options, withheld_ok=withheld_ok)
    return harness.fidelity_from_source(fmt, from_source, options=options)  # type: ignore[arg-type]


def list_formats(name: str | None = None) -> list[dict[str, Any]]:
    """The formats installed converters connect (the hub ``aef`` first), each with its ``import`` (to AEF) and
    ``export`` (from AEF) directions (converter, options, declared losses) and its ``direct`` converters; with
    ``name``, that format only (CONV-1 for one no converter knows)."""
    reg = registry()
    listing = reg.formats()
    if name is None:
        return listing
    found = [f for f in listing if f["format"] == name.strip().lower()]
    if not found:
        raise Refusal("CONV-1", f"unknown format {name!r}; known formats: {', '.join(reg.names())}", "FORMAT")
    return found

