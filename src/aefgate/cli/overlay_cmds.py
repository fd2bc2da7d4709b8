"""Overlay commands: ``aefgate view``, ``aefgate decide``, ``aefgate aef chain``, ``aefgate aef view``.

``view`` shows a run as its overlays leave it (spec 04 §4.3); ``decide`` appends one decision and seals its batch
(§4.2); ``aef chain`` and ``aef view`` are the spec 09 §9.3 operations (one JSON value on stdout). Refusals follow
the CLI's convention (``error [RULE] at WHERE: message`` on stderr, exit code from the refusal: 2 input, 1
integrity); the ``aef`` operations always exit 2 on an input error.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from aefgate.cli import render
from aefgate.cli.inputs import require_dir

JSON_OPT = typer.Option(False, "--json", help="Write one JSON value on stdout (people's output stays on stderr).")
POLICY_HELP = "A trust policy file ([SIG-4]): batch signatures are verified against it (assurance, redactions)."


def register(app, aef_app) -> None:
    """Add the overlay commands to the ``aefgate`` app and to its ``aef`` sub-app."""
    app.command("view")(view)
    app.command("decide")(decide)
    aef_app.command("chain")(chain_op)
    aef_app.command("view")(view_op)


# -- aefgate aef chain / view (spec 09 §9.3) ------------------------------------------------------------------------


def chain_op(
    run_dir: Path = typer.Argument(..., metavar="DIR", help="The run folder (with its overlays/)."),
) -> None:
    """Verify the overlay chain (§4.2, [OVL-5]): {"problems": [[path, code], ...]}."""
    from aefgate.aef.overlays import verify_chain

    require_dir(run_dir)
    render.emit_json(verify_chain(run_dir).to_json())


def view_op(
    run_dir: Path = typer.Argument(..., metavar="DIR", help="The run folder (with its overlays/)."),
    at: str = typer.Option(..., "--at", help="The time the view is computed at, RFC 3339 UTC."),
    policy: Optional[Path] = typer.Option(None, "--policy", help=POLICY_HELP),
) -> None:
    """The effective view at T (§4.3, §9.2.1): {"results", "reviews", "waivers", "withheld", "unsealedEvents",
    "assurance"}."""
    from aefgate.aef.overlays import effective_view, load_policy

    require_dir(run_dir)
    render.emit_json(effective_view(run_dir, at, load_policy(policy)))


# -- aefgate view ---------------------------------------------------------------------------------------------------


def view(
    run: Path = typer.Argument(..., help="The run folder."),
    at: Optional[str] = typer.Option(None, "--at", help="The time the view is computed at, RFC 3339 UTC "
                                                         "(default: now): decides which waivers are in force."),
    policy: Optional[Path] = typer.Option(None, "--policy", help=POLICY_HELP),
    as_json: bool = JSON_OPT,
) -> None:
    """Show a run as its overlays leave it (§4.3): sealed and effective states, reviews, waivers in force or
    expired, withheld blobs, unsealed events, the assurance shown for each decision, and the chain's problems.
    Exit 0 whatever it shows (2 for an input error).

    Example: aefgate view runs/0192... --at 2026-11-01T00:00:00Z --policy trusted-keys.json
    """
    from aefgate.aef.overlays import compute_view, load_policy
    from aefgate.aef.times import now
    from aefgate.aef.verifier import verify_run

    require_dir(run)
    trust = load_policy(policy)
    v = compute_view(run, at if at is not None else now(), trust)
    verification = verify_run(run, withheld_ok=v.withheld_paths())
    if as_json:
        chain = v.chain
        render.emit_json({
            "run": str(run),
            "runId": chain.run_id,
            "at": v.at,
            "verification": {**verification.to_json(), "withheld": verification.withheld,
                             "runHash": verification.run_hash, "shown": verification.describe()},
            "chain": {**chain.to_json(), "batches": chain.highest, "verifiedBatches": chain.verified,
                      "unsealedEvents": chain.unsealed, "unfinishedBytes": chain.unfinished},
            "view": v.to_json(),
            "redactions": v.redactions,
            "events": v.events,
        })
        return
    _show_view(run, v, verification, policy_given=trust is not None)


def _who(v, eid: str, shown: dict[str, str]) -> str:
    ev = v.events.get(eid)
    if ev is None:
        return "?"
    return f"{ev['by']['identity']} ({shown.get(eid, 'self-attested')})"


def _show_view(run: Path, v, verification, *, policy_given: bool) -> None:
    """Print the view of ``run`` through its overlays ``v`` (its chain, the states, the notes) in words."""
    c = render.console()
    shown = {a["event"]: a["shown"] for a in v.assurance}
    _show_chain(c, run, v, verification, policy_given=policy_given)
    _show_states(c, v, shown)
    _show_notes(c, v, shown, policy_given=policy_given)


def _show_chain(c, run: Path, v, verification, *, policy_given: bool) -> None:
    """The view's head: the run, its outcome, the time of the view, the trust policy and the overlay chain."""
    esc = render.escape
    chain = v.chain
    c.print(f"run       {esc(str(run))}")
    style = {"intact": "bold green", "unsealed": "bold yellow"}.get(verification.outcome, "bold red")
    c.print(f"outcome   [{style}]{esc(verification.describe())}[/] (the sealed run; overlays never change it)")
    c.print(f"view at   {esc(v.at)}")
    if not policy_given:
        c.print("trust     no trust policy (--policy): every decision is shown self-attested, no redaction is "
                "authorized")
    verified = f"{chain.verified} verified" if chain.verified == chain.highest else \
        f"[red]{chain.verified} verified[/]: later batches have no effect"
    c.print(f"chain     {chain.highest} batch{'es' if chain.highest != 1 else ''}, {verified}; "
            f"problems {len(chain.problems) or 'none'}")
    for path, code in chain.problems:
        c.print(f"  {esc(path)}  [red]{esc(code)}[/]")
    if verification.problems and verification.outcome == "invalid":
        c.print(f"run problems {len(verification.problems)} (`aefgate verify` lists them)")


def _show_states(c, v, shown: dict) -> None:
    """The view's tables: result states (sealed and effective), review status and waivers."""
    from rich.table import Table

    esc = render.escape
    if v.results:
        t = Table(title="Result states (sealed and effective; parents, summaries and gates describe the sealed run)")
        for col in ("result", "sealed", "effective", "event", "by", "at"):
            t.add_column(col, overflow="fold")
        for r in v.results:
            ev = v.events[r["event"]]
            t.add_row(r["resultId"], str(r["sealedState"]), f"[bold]{r['effectiveState']}[/]", r["event"],
                      esc(_who(v, r["event"], shown)), ev["at"])
        c.print(t)
    else:
        c.print("states    no override or adjudication: every result keeps its sealed state")
    if v.reviews:
        t = Table(title="Review status")
        for col in ("target", "status", "event", "by", "at"):
            t.add_column(col, overflow="fold")
        for r in v.reviews:
            ev = v.events[r["event"]]
            style = "green" if r["status"] == "approve" else "red"
            t.add_row(r["target"], f"[{style}]{r['status']}[/]", r["event"], esc(_who(v, r["event"], shown)),
                      ev["at"])
        c.print(t)
    else:
        c.print("reviews   none")
    if v.waivers:
        t = Table(title=f"Waivers at {v.at}")
        for col in ("target", "from", "expires", "status", "event", "by"):
            t.add_column(col, overflow="fold")
        for w in v.waivers:
            ev = v.events[w["event"]]
            target = ", ".join(f"{k} {val}" for k, val in w["target"].items())
            status = "[green]active[/]" if w["active"] else (
                "[yellow]expired[/]" if _after(v.at, w["expires"]) else "not yet in force")
            t.add_row(esc(target), ev["at"], w["expires"], status, w["event"], esc(_who(v, w["event"], shown)))
        c.print(t)
    else:
        c.print("waivers   none")


def _show_notes(c, v, shown: dict, *, policy_given: bool) -> None:
    """The view's tail: redactions, withheld blobs, notes, unsealed event lines and how many decisions are signed."""
    esc = render.escape
    chain = v.chain
    for r in v.redactions:
        note = "[green]authorized[/]: the blob may be deleted (withheld)" if r["authorized"] else \
            "[yellow]not authorized[/] (no batch signature a trust policy lets redact): withholds nothing"
        c.print(f"redact    blob {r['blob']} by {esc(_who(v, r['event'], shown))}: {note}")
    c.print(f"withheld  {len(v.withheld)}" + (": " + ", ".join(v.withheld) if v.withheld else ""))
    if v.annotations:
        c.print(f"notes     {len(v.annotations)} (acknowledgements, annotations: recorded, no effect on states)")
        for eid in v.annotations:
            ev = v.events[eid]
            target = ev["target"].get("result") or ev["target"].get("requirement") or "run"
            c.print(f"  {eid}  {esc(ev['kind'])} on {esc(target)} by {esc(_who(v, eid, shown))}: "
                    f"{esc(ev.get('reason', ''))}")
    if chain.unsealed or chain.unfinished:
        parts = []
        if chain.unsealed:
            parts.append(f"{chain.unsealed} event line{'s' if chain.unsealed != 1 else ''} after the last verified "
                         f"batch")
        if chain.unfinished:
            parts.append(f"an unfinished last line ({chain.unfinished} bytes)")
        c.print(f"[yellow]unsealed[/]  {' and '.join(parts)}: no effect until sealed (an interrupted decide, or "
                f"another writer); `aefgate decide` refuses the run until someone deals with it")
    else:
        c.print("unsealed  0")
    signed = sum(1 for a in v.assurance if a["shown"] == "signed")
    c.print(f"assurance {signed} of {len(v.assurance)} decisions signed by the identity they name"
            + ("" if policy_given else " (no trust policy given)") + "; the rest are self-attested claims")


def _after(a: str, b: str) -> bool:
    from aefgate.aef.times import parse_time

    return parse_time(a) >= parse_time(b)


# -- aefgate decide -------------------------------------------------------------------------------------------------


def decide(
    run: Path = typer.Argument(..., help="The sealed, intact run folder."),
    kind: str = typer.Option(..., "--kind", help="approve, reject, override, adjudicate, waive, acknowledge, "
                                                 "accept_baseline, annotate or redact."),
    by: str = typer.Option(..., "--by", help="Who decides: a stable opaque identity (not verified: a claim, "
                                             "unless a trust policy verifies the batch's signature)."),
    reason: str = typer.Option(..., "--reason", help="Why (non-blank)."),
    result: Optional[str] = typer.Option(None, "--result", help="The result the decision is about (a resultId of "
                                                                "the run); without it, approve/reject/notes are "
                                                                "about the run."),
    requirement: Optional[str] = typer.Option(None, "--requirement", help="An external requirement id (waive, "
                                                                          "acknowledge, annotate)."),
    state: Optional[str] = typer.Option(None, "--state", help="override/adjudicate: the state it sets (passed, "
                                                              "failed, warn, inconclusive, scored, not_measured, "
                                                              "not_applicable, skipped, error)."),
    expires: Optional[str] = typer.Option(None, "--expires", help="waive: when it ends, RFC 3339 UTC, strictly "
                                                                  "after the decision time."),
    blob: Optional[str] = typer.Option(None, "--blob", help="redact: the SHA-256 of the run's blob to withhold "
                                                            "(hex, sha256:hex, or its path blobs/sha256/ab/hex)."),
    key: Optional[Path] = typer.Option(None, "--key", help="Sign the batch with this unencrypted PKCS#8 PEM key "
                                                           "(ECDSA P-256 or Ed25519); keep it outside the run."),
    at: Optional[str] = typer.Option(None, "--at", help="The decision time, RFC 3339 UTC (default: now)."),
    policy: Optional[Path] = typer.Option(None, "--policy", help="A trust policy: lets a run whose blobs "
                                                                 "authorized redactions withhold count as intact."),
    as_json: bool = JSON_OPT,
) -> None:
    """Append one decision to a sealed run's overlays and seal its batch (§4.2); with --key, sign it.

    Exit 0: the batch is sealed. 1: integrity refused it (the run is not sealed and intact, the overlay chain does
    not verify, or writing failed after it started). 2: an input error, or bytes after the last sealed batch
    (an interrupted write: inspect it with `aefgate view` first). Refusals write nothing.

    Example: aefgate decide ./my-run --kind waive --requirement REQ-42 --by reviewer-42 --reason "pending retest"
    --expires 2026-11-01T00:00:00Z
    """
    from aefgate.aef.decisions import decide as do_decide

    require_dir(run)
    out = do_decide(run, kind=kind, by=by, reason=reason, result=result, requirement=requirement, state=state,
                    expires=expires, key_path=key, at=at, blob=blob, policy=policy)
    if as_json:
        render.emit_json(out)
        return
    esc = render.escape
    c = render.console()
    ev = out["event"]
    target = ev["target"].get("result") or ev["target"].get("requirement") or ev["target"].get("blob") or "the run"
    c.print(f"sealed    batch {out['batch']} ({out['seal']}): {ev['kind']} of {esc(target)}")
    c.print(f"event     {out['eventId']} at {ev['at']}")
    if out["signature"]:
        c.print(f"signed    {out['signature']} with key {out['keyid']}: by {esc(by)} is claimed, not verified here;"
                f" `aefgate view RUN --policy P` verifies it against a trust policy")
    else:
        c.print(f"by        {esc(by)} (self-attested: no signature)")
        if kind == "redact":
            c.print("[yellow]warning[/]: an unsigned redaction withholds nothing: deleting the blob makes the run "
                    "invalid ([OVL-10]); sign with --key, a key a trust policy lets redact")
