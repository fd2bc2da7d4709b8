"""Writing a decision: :func:`decide` appends one overlay event to a sealed run and seals its batch
(``overlays/seal-<nnnn>.json``), signing it with a key when one is given (``seal-<nnnn>.dsse.json``), spec 04 §4.2.
It takes an exclusive lock on the events file from reading the chain to writing the seal, so concurrent writers
never interleave.

Layering: above the verifier (a decision is appended only to a run that verifies intact), which is above
``overlays.py`` (the chain and the views, read under a trust policy by the verifier).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import secrets
import uuid
from pathlib import Path
from typing import Any, Iterator

from aefgate.errors import EXIT_INPUT, EXIT_INTEGRITY, Refusal
from aefgate.aef import jsonio, runfs
from aefgate.aef.overlays import (
    BATCH_PREDICATE,
    EVENTS,
    KINDS,
    MAX_BATCHES,
    OVERLAYS,
    PAYLOAD_TYPE,
    REVIEW_KINDS,
    STATE_KINDS,
    STATES,
    ChainReport,
    _check_at,
    _chain,
    _HEX64,
    _ID,
    _Run,
    authorized_redactions,
    load_policy,
    seal_name,
    signature_name,
)
from aefgate.aef.schema import validator
from aefgate.aef.seal import STATEMENT_TYPE, read_seal
from aefgate.aef.signatures import load_private_key, sign
from aefgate.aef.times import now, parse_time
from aefgate.aef.verifier import verify_run
from aefgate.fsutil import fsync_dir

__all__ = ["decide"]


# -- deciding -------------------------------------------------------------------------------------------------------


def _refuse(rule: str, message: str, where: str = "", *, integrity: bool = False) -> Refusal:
    return Refusal(rule, message, where, exit_code=EXIT_INTEGRITY if integrity else EXIT_INPUT)


def _blank(text: Any) -> bool:
    return not isinstance(text, str) or not text.strip()


def _normalize_blob(blob: str) -> str:
    b = blob.strip()
    if b.startswith("sha256:"):
        b = b[len("sha256:"):]
    m = runfs.BLOB_PATH.match(b)
    if m:
        b = m.group(2)
    if not _HEX64.match(b):
        raise _refuse("OVL-1", f"option 'blob' is a blob's SHA-256 (64 lower-case hex characters, optionally after "
                               f"'sha256:'), not {blob!r}", "option 'blob'")
    return b


def _check_request(kind, by, reason, result, requirement, state, expires, blob, at) -> None:
    """Everything about the decision itself that ``agenteval decide`` refuses (exit 2)."""
    if kind not in KINDS:
        raise _refuse("OVL-1", f"option 'kind' is one of {', '.join(KINDS)}, not {kind!r}", "option 'kind'")
    if _blank(by):
        raise _refuse("OVL-1", "option 'by' names who decides: a non-blank opaque identity", "option 'by'")
    if len(by) > 256:
        raise _refuse("OVL-1", "option 'by' is at most 256 characters", "option 'by'")
    if _blank(reason):
        raise _refuse("OVL-1", "option 'reason' must say why: a non-blank text", "option 'reason'")
    if len(reason) > 4096:
        raise _refuse("OVL-1", "option 'reason' is at most 4096 characters", "option 'reason'")
    if result is not None and requirement is not None:
        raise _refuse("OVL-1", "give option 'result' or option 'requirement', not both: an event has one target",
                      "option 'requirement'")
    if state is not None and kind not in STATE_KINDS:
        raise _refuse("OVL-1", f"option 'state' is for override and adjudicate, not {kind}", "option 'state'")
    if expires is not None and kind != "waive":
        raise _refuse("OVL-9", f"option 'expires' is for waive, not {kind}", "option 'expires'")
    if blob is not None and kind != "redact":
        raise _refuse("OVL-1", f"option 'blob' is for redact, not {kind}", "option 'blob'")
    if kind in REVIEW_KINDS and requirement is not None:
        raise _refuse("OVL-1", f"{kind} is about the run or one result (option 'result'), not a requirement",
                      "option 'requirement'")
    if kind in STATE_KINDS:
        if result is None:
            raise _refuse("OVL-1", f"{kind} names the result whose state it sets: option 'result' ID",
                          "option 'result'")
        if requirement is not None:
            raise _refuse("OVL-1", f"{kind} targets a result, not a requirement", "option 'requirement'")
        if state is None:
            raise _refuse("OVL-1", f"{kind} needs option 'state': one of {', '.join(STATES)}", "option 'state'")
        if state == "pending":
            raise _refuse("RES-3", "option 'state' pending is refused: a closed run has no pending result",
                          "option 'state'")
        if state not in STATES:
            raise _refuse("OVL-1", f"option 'state' is one of {', '.join(STATES)}, not {state!r}", "option 'state'")
    if kind == "waive":
        if result is None and requirement is None:
            raise _refuse("OVL-1", "waive needs exactly one of option 'result' ID or option 'requirement' ID",
                          "option 'result'")
        if expires is None:
            raise _refuse("OVL-9", "waive needs option 'expires': the UTC time (RFC 3339, ending in Z) the waiver "
                                   "ends",
                          "option 'expires'")
        _check_at(expires, "option 'expires'")
        if parse_time(expires) <= parse_time(at):
            raise _refuse("OVL-9", f"option 'expires' {expires} is not after the decision time {at}: a waiver holds "
                                   "from its decision up to, not including, its expiry", "option 'expires'")
    if kind == "redact":
        if result is not None or requirement is not None:
            raise _refuse("OVL-1", "redact targets a blob (option 'blob' SHA256), not a result or a requirement",
                          "option 'result'" if result is not None else "option 'requirement'")
        if blob is None:
            raise _refuse("OVL-1", "redact needs option 'blob': the SHA-256 of the blob of the run to withhold",
                          "option 'blob'")
    if requirement is not None and not _ID.match(requirement):
        raise _refuse("OVL-1", "option 'requirement' is an external id: 1-128 letters, digits and . _ : -",
                      "option 'requirement'")


@contextlib.contextmanager
def _locked_events(root: Path) -> Iterator[int]:
    """The events file opened for appending (created when absent), under an exclusive lock held until the block
    ends: two writers never interleave, and each reads the chain as the other left it."""
    ov = root / OVERLAYS
    if not ov.exists():
        with contextlib.suppress(FileExistsError):
            ov.mkdir()
    fd = os.open(root / EVENTS, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield fd
    finally:
        os.close(fd)  # releases the lock


def _shared_chain(root: Path, run: "_Run") -> "ChainReport":
    """The chain, read while no writer holds the events file's exclusive lock."""
    try:
        fd = os.open(root / EVENTS, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:  # absent (no decision yet), or not a file: the chain reports it
        return _chain(root, run)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        return _chain(root, run)
    finally:
        os.close(fd)  # releases the lock


def _create_new(path: Path, data: bytes) -> None:
    """Write a new file in full, then put it in place under its name only if nothing has that name yet (a hard
    link, which is atomic and never replaces a file); an existing file is a Refusal (exit 1)."""
    tmp = path.parent / f".{path.name}.tmp-{secrets.token_hex(4)}"
    try:
        with open(tmp, "xb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            raise _refuse("OVL-4", "another writer created this file meanwhile: nothing of this decision was "
                                   "sealed", path.name, integrity=True) from None
        except OSError:  # a file system without hard links: exclusive creation instead
            with open(path, "xb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()

    fsync_dir(path.parent)


def _chain_refusal(report: ChainReport) -> Refusal | None:
    """Why a decision cannot be appended to this chain, or None. A chain with a problem about a batch or a file is
    an integrity failure (exit 1); bytes after the last sealed batch (an interrupted write, another writer's
    unsealed events, an unfinished line) are refused as a preflight error (exit 2), never adopted."""
    blocking = [p for p in report.batch_problems() if p[1] != "uncovered"]
    if blocking:
        path, code = blocking[0]
        more = f" (and {len(blocking) - 1} more)" if len(blocking) > 1 else ""
        return _refuse("OVL-5", f"the overlay chain does not verify: {code} at {path}{more}; a new batch would "
                                f"have no effect. `aefgate aef chain RUN` lists the problems; nothing was written",
                       path, integrity=True)
    if report.size > report.verified_end:
        extra = report.size - report.verified_end
        what = []
        if report.unsealed:
            what.append(f"{report.unsealed} unsealed event line{'s' if report.unsealed != 1 else ''}")
        if report.unfinished:
            what.append(f"an unfinished last line ({report.unfinished} bytes without LF)")
        desc = " and ".join(what) or f"{extra} bytes"
        return _refuse(
            "OVL-4",
            f"{EVENTS} holds {desc} after the last sealed batch (byte {report.verified_end} on): an interrupted "
            f"decide, or another writer's work, which a decision never adopts. Inspect and verify the journal "
            f"(`aefgate view RUN`) before retrying; if those bytes are to be dropped, truncate the file to "
            f"{report.verified_end} bytes. Nothing was written",
            EVENTS,
        )
    n = report.highest + 1
    if n > MAX_BATCHES:
        return _refuse("OVL-4", f"the chain already holds {MAX_BATCHES} batches, the most four digits allow",
                       OVERLAYS, integrity=True)
    if n in report.signatures:
        return _refuse("OVL-4", f"{signature_name(n)} exists without its batch seal (an interrupted signed decide?):"
                                f" remove it before deciding again; nothing was written", signature_name(n),
                       integrity=True)
    return None


def decide(
    run_dir: str | Path,
    *,
    kind: str,
    by: str,
    reason: str,
    result: str | None = None,
    requirement: str | None = None,
    state: str | None = None,
    expires: str | None = None,
    key_path: str | Path | None = None,
    at: str | None = None,
    blob: str | None = None,
    policy: Any = None,
) -> dict:
    """Append one event to ``overlays/events.ndjson`` and seal its batch (``overlays/seal-<nnnn>.json``, [OVL-4]);
    with ``key_path``, also sign the batch (``seal-<nnnn>.dsse.json``, [SIG-1]).

    Refused with nothing written (:class:`Refusal`): exit 2 for the decision's inputs (a blank ``by`` or
    ``reason``; a result that is not the run's; ``state`` pending, missing on override/adjudicate, given on another
    kind; ``requirement`` or ``expires`` on approve/reject; a waiver without exactly one target or with an ``expires``
    not strictly after ``at``; a redaction without a sealed blob of the run; a key that is missing, malformed,
    encrypted or of an unsupported algorithm, loaded before anything is written) and for bytes after the last
    sealed batch; exit 1 for a run that is not sealed and intact, and a chain that does not verify. A failure after
    writing started is exit 1. ``policy`` (a trust policy) lets a run whose blobs authorized redactions withhold
    count as intact. Returns what was written.
    """
    root = Path(run_dir)
    if root.is_symlink() or not root.is_dir() or not (root / "run.json").is_file():
        raise Refusal("RUN-1", "not a run folder (a run is a folder holding run.json)", str(run_dir))
    at = _check_at(at if at is not None else now(), "option 'at'")
    if blob is not None:
        blob = _normalize_blob(blob)
    _check_request(kind, by, reason, result, requirement, state, expires, blob, at)

    key = None
    if key_path is not None:  # loaded before anything is written: a bad key causes no mutation
        key = load_private_key(key_path)
    policy = load_policy(policy)
    run = _intact_run(root, run_dir, policy, result, blob)

    # preflight (nothing written): refuse a chain that cannot take a batch; read under a shared lock, so another
    # writer's batch is seen whole or not at all (its line is never taken for an interrupted write)
    refusal = _chain_refusal(_shared_chain(root, run))
    if refusal is not None:
        raise refusal

    event = _new_event(run, kind, by, reason, result, requirement, state, expires, blob, at, key is not None)
    line = jsonio.dump_line(event)

    with _locked_events(root) as fd:
        report = _chain(root, run)  # the chain as the previous holder of the lock left it
        refusal = _chain_refusal(report)
        if refusal is not None:
            raise refusal
        n = report.highest + 1
        offset = report.verified_end
        seal_bytes, envelope_bytes = _batch_seal(report, run, line, key, key_path)
        _append_batch(root, fd, n, offset, line, seal_bytes, envelope_bytes)
    return {
        "run": str(run_dir),
        "runId": run.run_id,
        "runHash": run.run_hash,
        "eventId": event["eventId"],
        "event": event,
        "batch": n,
        "seal": seal_name(n),
        "signature": signature_name(n) if envelope_bytes is not None else None,
        "keyid": key.keyid if key is not None else None,
        "offset": offset,
        "length": len(line),
        "identityVerified": False,
    }


def _intact_run(root: Path, run_dir: str | Path, policy: Any, result: str | None, blob: str | None) -> _Run:
    """The run, refused unless sealed and intact (blobs withheld by redactions ``policy`` authorizes allowed), with
    ``result`` one of its results and ``blob`` one of its sealed blobs."""
    if not (root / "seal.json").is_file():
        raise _refuse("OVL-4", "the run is not sealed: decisions are appended only to a sealed, intact run "
                               "(`aefgate seal RUN` first)", "seal.json", integrity=True)
    withheld_ok = authorized_redactions(root, policy) if policy is not None else set()
    v = verify_run(root, withheld_ok=withheld_ok)
    if v.outcome != "intact":
        path, code = next((p for p in v.problems if p[1] != "withheld"), ("", "?"))
        raise _refuse("SEAL-6", f"the run is {v.outcome} ({code} at {path}): decisions are appended only to an "
                                f"intact run; `aefgate verify RUN` lists the problems", path or str(run_dir),
                      integrity=True)
    run = _Run(root, v.run_hash)
    if result is not None and result not in run.results:
        raise _refuse("OVL-2", f"{result!r} is no result of this run", "option 'result'")
    if blob is not None:
        reading = read_seal(root)
        sealed = {s["name"] for s in reading.doc["subject"]} if reading.doc is not None else set()
        if runfs.blob_path(blob) not in sealed:
            raise _refuse("OVL-1", f"no blob {blob} is sealed in this run", "option 'blob'")
    return run


def _new_event(run: _Run, kind: str, by: str, reason: str, result: str | None, requirement: str | None,
               state: str | None, expires: str | None, blob: str | None, at: str, signed: bool) -> dict[str, Any]:
    """The decision's overlay event (a new eventId), refused unless valid against the writer schema."""
    target: dict[str, Any] = {"run": run.run_id, "runHash": run.run_hash}
    if result is not None:
        target["result"] = result
    if requirement is not None:
        target["requirement"] = requirement
    if blob is not None:
        target["blob"] = blob
    event: dict[str, Any] = {
        "schemaVersion": "1.0",
        "eventId": "ov_" + uuid.uuid4().hex,
        "kind": kind,
        "target": target,
    }
    if state is not None:
        event["state"] = state
    event["reason"] = reason
    if expires is not None:
        event["expires"] = expires
    event["by"] = {"identity": by, "assurance": "signed" if signed else "self-attested"}
    event["at"] = at
    why = validator("overlay-event", "writer")(event)
    if why is not None:
        raise _refuse("OVL-1", f"the event would not be valid: {why}")
    return event


def _batch_seal(report: ChainReport, run: _Run, line: bytes, key: Any,
                key_path: str | Path | None) -> tuple[bytes, bytes | None]:
    """The bytes of the seal of the batch holding ``line`` after the chain's verified batches, and with ``key``
    those of its signature envelope (None without)."""
    n = report.highest + 1
    offset = report.verified_end
    previous = None
    if n > 1:
        prev = report.batches[n - 2]
        previous = {"path": prev.path, "sha256": hashlib.sha256(prev.seal_bytes).hexdigest()}
    statement = {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": EVENTS, "digest": {"sha256": hashlib.sha256(line).hexdigest()}}],
        "predicateType": BATCH_PREDICATE,
        "predicate": {
            "schemaVersion": "1.0",
            "runId": run.run_id,
            "runHash": run.run_hash,
            "batch": n,
            "offset": offset,
            "length": len(line),
            "previous": previous,
        },
    }
    why = validator("overlay-seal", "writer")(statement)
    if why is not None:
        raise _refuse("OVL-4", f"the batch seal would not be valid: {why}", seal_name(n))
    seal_bytes = jsonio.dumps(statement)
    envelope_bytes = None
    if key is not None:
        try:
            envelope_bytes = jsonio.dumps(sign(seal_bytes, PAYLOAD_TYPE, key))
        except Refusal:
            raise
        except Exception as e:  # signing failed before anything was written
            raise _refuse("SIG-2", f"signing the batch failed: {type(e).__name__}; nothing was written",
                          str(key_path)) from None
    return seal_bytes, envelope_bytes


def _append_batch(root: Path, fd: int, n: int, offset: int, line: bytes, seal_bytes: bytes,
                  envelope_bytes: bytes | None) -> None:
    """Write batch ``n`` (the locked events file ``fd`` is ``offset`` bytes long): the event line, the signature
    when there is one, then the seal (the commit point); on failure, roll back and refuse with exit 1."""
    # writing starts: from here a failure is exit 1
    if os.fstat(fd).st_size != offset:
        raise _refuse("OVL-4", f"{EVENTS} changed while it was locked (a writer that does not lock): nothing "
                               f"was written", EVENTS, integrity=True)
    written_sig = False
    try:
        _write_all(fd, line)
        os.fsync(fd)
        if envelope_bytes is not None:  # the signature first: the seal is the commit point
            _create_new(root / signature_name(n), envelope_bytes)
            written_sig = True
        _create_new(root / seal_name(n), seal_bytes)
    except BaseException as e:
        _roll_back(root, fd, n, offset, len(line), written_sig)
        if isinstance(e, Refusal):
            raise
        if isinstance(e, OSError):
            raise _refuse("OVL-4", f"writing the decision failed ({e.strerror or e}); the event line was "
                                   "removed again if nothing followed it", EVENTS, integrity=True) from None
        raise


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        k = os.write(fd, view)
        view = view[k:]


def _roll_back(root: Path, fd: int, n: int, offset: int, length: int, written_sig: bool) -> None:
    """After a failure before the seal was in place: remove this decision's own unsealed line (only when nothing
    was appended after it) and its signature, so the chain is as it was. Best effort. (Once :func:`_create_new` has
    put the seal in place nothing raises, so a failure here always means this decision's seal is not there.)"""
    with contextlib.suppress(OSError):
        size = os.fstat(fd).st_size
        if offset < size <= offset + length:
            os.ftruncate(fd, offset)
            os.fsync(fd)
    if written_sig:
        with contextlib.suppress(OSError):
            (root / signature_name(n)).unlink()
