"""The ``aefgate`` command line (typer + rich).

Thin by design: each command parses its options, calls the library, and renders. People read stderr (rich);
with ``--json`` a command writes exactly one JSON value on stdout and nothing else there.

Exit codes: 0 ok; 1 integrity failure (a run that does not verify: outcome ``invalid``); 2 input error. Every
:class:`aefgate.errors.Refusal` is caught here and printed as one line ``error [RULE] at WHERE: message`` on stderr
(with ``--json``, also as ``{"error": {...}}`` on stdout); an unexpected exception is caught too (exit 2, a hint to
report it; the traceback only with ``AEFGATE_DEBUG=1``). Library modules are imported inside the commands, so
the command line starts fast.

``aefgate aef ...`` is the command-line contract of spec 09 §9.3 (see :mod:`aefgate.cli.aef`).
"""

from __future__ import annotations

import io
import os
import re
import sys
import tempfile
import traceback
from enum import Enum
from pathlib import Path
from typing import List, Optional

import typer

try:  # typer 0.2x and later vendor click
    from typer._click.exceptions import ClickException
except ImportError:  # pragma: no cover - older typer depends on click itself
    from click.exceptions import ClickException  # type: ignore[no-redef]

from aefgate._version import __version__
from aefgate.cli import render
from aefgate.cli.aef import aef_app
from aefgate.cli.inputs import SealedBy, read_anchors, require_dir
from aefgate.errors import EXIT_INPUT, EXIT_INTEGRITY, Refusal

app = typer.Typer(
    name="aefgate",
    help="An interop gateway for AI-evaluation evidence: bidirectional converters with AEF 1.0 as the hub.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.add_typer(aef_app, name="aef")

JSON_OPT = typer.Option(False, "--json", help="Write one JSON value on stdout (people's output stays on stderr).")


def _version(value: bool) -> None:
    if value:
        sys.stdout.write(f"aefgate {__version__}\n")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Show the version."),
) -> None:
    """aefgate: verify, seal and convert AI-evaluation evidence, with AEF 1.0 as the hub."""


# -- verify / seal --------------------------------------------------------------------------------------------------


POLICY_OPT = typer.Option(None, "--policy", help="A trust policy file ([SIG-4]): report who signed the run's "
                                                 "attestation, and honour redactions it authorizes.")
KEY_HELP = "An unencrypted PKCS#8 PEM private key (ECDSA P-256 or Ed25519), e.g. from `aefgate keygen`."


def _signature_note(run: Path, v, policy) -> str:
    """Who the attestation is signed by under ``policy``, or why nobody, for people (§4.5, [SIG-7])."""
    from aefgate.aef.signatures import attestation_result

    if v.outcome != "intact":
        return "(not checked: only an intact run is signed by anyone)"
    if v.signed_by:
        return ", ".join(v.signed_by)
    r = attestation_result(run, policy)
    if r is None:
        return "nobody: the run has no attestation.dsse.json"
    if r.envelope_result is not None:
        return f"nobody: attestation.dsse.json is {r.envelope_result}"
    results = ", ".join(s.result for s in r.signatures)
    return f"nobody the policy trusts: attestation.dsse.json has {len(r.signatures)} signature(s): {results}"


@app.command()
def verify(
    run: Path = typer.Argument(..., help="The run folder (the folder holding run.json)."),
    anchors: Optional[Path] = typer.Option(None, "--anchors", help="A file holding a JSON list of trusted run hashes."),
    policy: Optional[Path] = POLICY_OPT,
    as_json: bool = JSON_OPT,
) -> None:
    """Verify a run (spec §3.9, §4.1, §4.5): intact, unsealed or invalid; with --policy, signed by whom. Exit 1 when
    invalid.

    Example: aefgate verify runs/2026/10/0192.../ --policy trust.json --json
    """
    from aefgate.cli.aef import load_policy
    from aefgate.aef.verifier import verify_run

    trust = load_policy(policy)
    require_dir(run)
    if not (run / "run.json").exists() and not (run / "run.json").is_symlink():
        # [RUN-1]: a run's identity is its run.json; a folder without one is not a damaged run (exit 1) but not a
        # run at all: an input error, said as such (no outcome, no run hash of nothing)
        raise Refusal("RUN-1", "not a run folder: it holds no run.json", str(run))
    anchor_list = read_anchors(anchors) if anchors is not None else None
    v = verify_run(run, policy=trust, anchors=anchor_list)
    if as_json:
        out = v.to_json()
        out["withheld"] = v.withheld
        out["runHash"] = v.run_hash
        if trust is not None and v.outcome == "intact":
            from aefgate.aef.signatures import attestation_result

            r = attestation_result(run, trust)
            out["attestation"] = None if r is None else r.to_json()
        render.emit_json(out)
    else:
        note = _signature_note(run, v, trust) if trust is not None else None
        render.show_verification(v, str(run), anchors_given=anchors is not None, signature=note)
    if v.outcome == "invalid":
        raise typer.Exit(EXIT_INTEGRITY)


@app.command()
def seal(
    run: Path = typer.Argument(..., help="The closed run folder to seal (writes its seal.json)."),
    sealed_by: SealedBy = typer.Option(
        SealedBy.producer, "--sealed-by",
        help="producer (the run's own producer) or ingest (a run received from elsewhere).",
    ),
    at: Optional[str] = typer.Option(None, "--at", help="The sealing time, RFC 3339 UTC (default: now)."),
    key: Optional[Path] = typer.Option(None, "--key", help=KEY_HELP + " Also writes attestation.dsse.json."),
    as_json: bool = JSON_OPT,
) -> None:
    """Seal a closed run: write seal.json ([SEAL-1]..[SEAL-6]) and print its run hash; with --key, also sign it
    (attestation.dsse.json, [SIG-1]).

    Example: aefgate seal out/run --sealed-by ingest --key keys/private.pem
    """
    from aefgate import api
    from aefgate.aef.signatures import load_private_key

    signing_key = load_private_key(key) if key is not None else None  # a bad key changes nothing
    require_dir(run)
    run_hash = api.seal(run, sealed_by=sealed_by.value, at=at, key=signing_key)
    keyid = signing_key.keyid if signing_key is not None else None
    if as_json:
        out = {"run": str(run), "runHash": run_hash, "sealedBy": sealed_by.value}
        if keyid is not None:
            out["attestation"] = {"keyid": keyid, "algorithm": signing_key.algorithm}
        render.emit_json(out)
    else:
        c = render.console()
        c.print(f"sealed    {render.escape(str(run))} (sealed by {sealed_by.value})")
        c.print(f"run hash  {run_hash}")
        if keyid is not None:
            c.print(f"signed    attestation.dsse.json ({signing_key.algorithm}, keyid {keyid})", soft_wrap=True)


@app.command("sign-attestation")
def sign_attestation(
    run: Path = typer.Argument(..., help="A sealed run that verifies intact."),
    key: Path = typer.Option(..., "--key", help=KEY_HELP),
    as_json: bool = JSON_OPT,
) -> None:
    """Sign an already sealed run: write attestation.dsse.json over its seal.json ([SIG-1]). The run must verify
    intact and have no attestation yet.

    Example: aefgate sign-attestation out/run --key keys/private.pem
    """
    from aefgate.aef.verifier import verify_run
    from aefgate.aef.signatures import check_no_attestation, load_private_key, write_attestation

    signing_key = load_private_key(key)
    require_dir(run)
    check_no_attestation(run)
    v = verify_run(run)
    if v.outcome != "intact":
        where = v.problems[0][0] if v.problems else "seal.json"
        raise Refusal("SIG-1", f"the run is {v.outcome}, not intact: aefgate signs only a seal that verifies "
                               "(`aefgate verify` says why)", where)
    keyid = write_attestation(run, signing_key)
    if as_json:
        render.emit_json({"run": str(run), "runHash": v.run_hash, "keyid": keyid, "algorithm": signing_key.algorithm})
    else:
        c = render.console()
        c.print(f"signed    {render.escape(str(run))}/attestation.dsse.json ({signing_key.algorithm}, keyid {keyid})",
                soft_wrap=True)
        c.print(f"run hash  {v.run_hash}")


class KeyAlgorithm(str, Enum):
    """The signing algorithms of [SIG-2]."""

    ecdsa_p256 = "ecdsa-p256"
    ed25519 = "ed25519"


@app.command()
def keygen(
    out_dir: Path = typer.Argument(..., metavar="OUT_DIR", help="A new folder (absent or empty) for the key pair."),
    identity: str = typer.Option(..., "--identity", help="Who the key speaks for, e.g. git:alice@example.com."),
    algorithm: KeyAlgorithm = typer.Option(KeyAlgorithm.ecdsa_p256, "--algorithm", help="ecdsa-p256 or ed25519."),
    may: List[str] = typer.Option([], "--may", help="What the identity may do beyond signing, e.g. redact "
                                                    "(repeatable; written to policy.json)."),
    as_json: bool = JSON_OPT,
) -> None:
    """Make a signing key pair: OUT_DIR/private.pem (mode 0600, keep it secret), public.pem, and policy.json (a
    trust policy that trusts the key for --identity). Prints the key id, never the private key.

    Example: aefgate keygen keys/alice --identity git:alice@example.com --algorithm ed25519
    """
    from aefgate.aef import jsonio
    from aefgate.aef.signatures import TrustPolicy
    from aefgate.aef.signatures import keygen as make_key
    from aefgate.fsutil import atomic_dir, check_destination

    check_destination(out_dir)  # refuse early; atomic_dir checks again before the rename
    private_pem, public_pem, entry = make_key(algorithm.value, identity, may)
    policy_doc = {"schemaVersion": "1.0", "keys": [entry]}
    keyid = TrustPolicy.from_json(policy_doc).keys[0].keyid
    with atomic_dir(out_dir) as tmp:
        tmp.chmod(0o700)  # the folder holds a private key
        fd = os.open(tmp / "private.pem", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # never readable by others
        os.fchmod(fd, 0o600)  # whatever the umask
        with os.fdopen(fd, "wb") as f:
            f.write(private_pem)
        (tmp / "public.pem").write_bytes(public_pem)
        (tmp / "policy.json").write_bytes(jsonio.dumps(policy_doc) + b"\n")
    if as_json:
        render.emit_json({"out": str(out_dir), "identity": identity, "algorithm": algorithm.value, "keyid": keyid,
                          "privateKey": str(out_dir / "private.pem"), "publicKey": str(out_dir / "public.pem"),
                          "policy": str(out_dir / "policy.json")})
    else:
        c = render.console()
        c.print(f"keyid     {keyid}", soft_wrap=True)  # never broken across lines
        c.print(f"identity  {render.escape(identity)} ({algorithm.value})")
        c.print(f"wrote     {render.escape(str(out_dir / 'private.pem'))} (mode 0600: keep it secret)")
        c.print(f"wrote     {render.escape(str(out_dir / 'public.pem'))}, "
                f"{render.escape(str(out_dir / 'policy.json'))} (a trust policy that trusts this key)")
        c.print(f"sign      aefgate seal RUN --key {render.escape(str(out_dir / 'private.pem'))}")
        c.print(f"verify    aefgate verify RUN --policy {render.escape(str(out_dir / 'policy.json'))}")


# -- formats / convert ----------------------------------------------------------------------------------------------


def _warn_broken(reg) -> None:
    for label, reason in reg.broken:
        render.console().print(f"[yellow]warning[/]: converter plug-in {render.escape(label)} not loaded: "
                               f"{render.escape(reason)}")


def _summary(d: dict | None) -> str:
    """A direction in a word: absent, exact, or how many losses it declares."""
    if d is None:
        return "-"
    return f"{len(d['losses'])} losses" if d["losses"] else "exact"


@app.command()
def formats(
    name: Optional[str] = typer.Argument(None, metavar="[FORMAT]", help="One format: its full loss lists."),
    as_json: bool = JSON_OPT,
) -> None:
    """List the formats aefgate converts: one row each, with its import (to AEF), export (from AEF) and direct
    routes and a one-line fidelity summary; `aefgate formats NAME` prints that format's loss lists in full.

    Example: aefgate formats inspect
    """
    from rich.table import Table

    from aefgate.converters.registry import registry

    reg = registry()
    listing = reg.formats()
    if name is not None:
        wanted = name.strip().lower()
        listing = [f for f in listing if f["format"] == wanted]
        if not listing:
            raise Refusal("CONV-1", f"unknown format {name!r}; known formats: {', '.join(reg.names())}", "FORMAT")
    if as_json:
        render.emit_json({"formats": listing, "broken": [{"entryPoint": a, "reason": b} for a, b in reg.broken]})
        return
    _warn_broken(reg)
    c = render.console()
    if name is not None:
        f = listing[0]
        if f["hub"]:
            c.print("aef: the hub (AEF 1.0); every other format converts to it and from it.")
            return
        for label, d in (("import", f["import"]), ("export", f["export"])):
            if d is None:
                why = f.get("noExport" if label == "export" else "noImport")
                c.print(f"[bold]{label}[/]: none" + (f" ({render.escape(why)})" if why else ""))
                continue
            c.print(f"[bold]{label}[/]: {render.escape(d['converter'])}: {render.escape(d['description'])}")
            for x in d["losses"] or [{"text": "exact", "source": "page"}]:
                mark = "" if x["source"] == "page" else f" [dim]({x['source']})[/]"
                c.print(f"  - {render.escape(x['text'])}{mark}")
        for d in f["direct"]:
            c.print(f"[bold]direct[/]: {render.escape(d['name'])}: {d['source']} -> {d['target']}")
            for x in d["losses"] or [{"text": "exact"}]:
                c.print(f"  - {render.escape(x['text'])}")
        return
    if len(listing) == 1:
        c.print("aef (the hub) only: no converter is installed yet.")
        return
    table = Table(title="Formats (AEF 1.0 is the hub; `aefgate formats NAME` lists the losses)")
    for col in ("format", "import", "export", "direct", "fidelity"):
        table.add_column(col, overflow="fold")
    for f in listing:
        if f["hub"]:
            table.add_row("aef", "(hub)", "(hub)", "-", "-")
            continue
        direct = ", ".join(sorted({d["target"] if d["source"] == f["format"] else d["source"]
                                   for d in f["direct"]})) or "-"
        fid = f"import {_summary(f['import'])}, export {_summary(f['export'])}"
        table.add_row(f["format"], f["import"]["converter"] if f["import"] else "-",
                      f["export"]["converter"] if f["export"] else "-", direct, render.escape(fid))
    c.print(table)


@app.command()
def fidelity(
    fmt: str = typer.Argument(..., metavar="FORMAT", help="A format aefgate converts both ways (`aefgate formats`)."),
    run: Optional[Path] = typer.Argument(None, metavar="[RUN]", help="The run folder: AEF -> FORMAT -> AEF."),
    from_source: Optional[Path] = typer.Option(None, "--from-source", metavar="FILE", help="A file in FORMAT "
                                               "instead of a run: FORMAT -> AEF -> FORMAT, for the formats whose "
                                               "mapping makes that meaningful (inspect; others refuse, CONV-2)."),
    opt: List[str] = typer.Option([], "--opt", help="A converter option, k=v (repeatable), for the step that "
                                  "takes it."),
    ignore_overlays: bool = typer.Option(False, "--ignore-overlays", help="Option `ignore_overlays`: round-trip a "
                                         "run with overlay events without them."),
    policy: Optional[Path] = typer.Option(None, "--policy", help="A trust policy ([SIG-4]): blobs its authorized "
                                          "redactions withhold are left out ([OVL-10])."),
    as_json: bool = JSON_OPT,
) -> None:
    """Round-trip through FORMAT and report, field by field, what was kept, what was lost as the converters
    declare, and what was lost but not declared (a defect: exit 1). A declared loss whose fields were all kept is
    reported too (exit 0).

    Examples: aefgate fidelity inspect runs/refunds --json; aefgate fidelity inspect --from-source log.eval
    """
    from aefgate import api

    api.list_formats(fmt)  # CONV-1 for a format no converter knows, before the input is looked at
    if (run is None) == (from_source is None):
        raise Refusal("CLI-2", "give a RUN or --from-source FILE (one of them)", "RUN")
    options: dict[str, object] = parse_opts(opt)
    if ignore_overlays:
        options["ignore_overlays"] = True
    if run is not None:
        require_dir(run)
        withheld: frozenset[str] = frozenset()
        if policy is not None:
            from aefgate.cli.aef import authorized_withheld, load_policy

            withheld = authorized_withheld(run, load_policy(policy))
        report = api.fidelity(fmt, run, options=options, withheld_ok=withheld)
    else:
        from aefgate.cli.inputs import require_file

        require_file(from_source)
        report = api.fidelity(fmt, from_source=from_source, options=options)
    if report.refusal is not None:  # the way back's refusal, as this command spells the options it names
        report.refusal = in_flags(report.refusal, ["fidelity"])
    if as_json:
        render.emit_json(report.to_json())
    else:
        c = render.console()
        c.print(f"round trip  {render.escape(report.cycle)} on {render.escape(report.input)}")
        c.print(f"fields      {len(report.kept)} kept, {len(report.lost)} lost ({len(report.undeclared)} not "
                "declared)")
        for f, item in report.lost:
            count = report.fields[f]
            where = f" ({count.lost} of {count.lost + count.kept})" if count.kept else ""
            if item is None:
                c.print(f"  [bold red]LOST, NOT DECLARED[/]  {render.escape(f)}{where}")
            else:
                label = item if len(item) <= 70 else item[:67] + "..."
                c.print(f"  [yellow]lost[/]  {render.escape(f)}{where}  [dim](declared: {render.escape(label)})[/]")
        for loss in report.declared_but_kept:
            c.print(f"  [cyan]declared but kept[/]  {render.escape(loss.text)}")
        if report.refusal is not None:
            r = report.refusal
            c.print("[bold red]the way back was refused[/]: "
                    f"{render.escape(render.error_line(r.rule, r.where, r.message))}")
        verdict = "[bold green]only declared losses[/]" if report.ok else "[bold red]FAILED[/]: " + (
            f"{len(report.undeclared)} loss(es) not declared" if report.undeclared else "the round trip broke")
        c.print(f"result      {verdict}")
    if not report.ok:
        raise typer.Exit(EXIT_INTEGRITY)


# The conversion options that also have a flag of their own: flag -> option name.
COMMON_FLAGS = {
    "at": "at",
    "run_id": "run_id",
    "from_tool": "from",
    "subject": "subject",
    "subject_kind": "subject_kind",
    "target_mode": "target_mode",
    "content_capture": "content_capture",
    "ignore_overlays": "ignore_overlays",
}


def parse_opts(pairs: List[str]) -> dict[str, str]:
    """``--opt k=v`` pairs as a dict (a ``-`` in a name is read as ``_``). CLI-2 for a malformed or repeated one."""
    out: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        name = name.strip().replace("-", "_")
        if not sep or not name:
            raise Refusal("CLI-2", f"an option is written k=v, not {pair!r}", "--opt")
        if name in out:
            raise Refusal("CLI-2", f"the option {name!r} is given twice", "--opt")
        out[name] = value
    return out


@app.command()
def convert(
    src: Path = typer.Argument(..., metavar="IN", help="The input (a file or a folder, as its format is)."),
    dst: Path = typer.Argument(..., metavar="OUT", help="The output; must not exist (or be an empty folder)."),
    from_: str = typer.Option(..., "--from", help="The input's format (see `aefgate formats`)."),
    to: str = typer.Option(..., "--to", help="The output's format."),
    opt: List[str] = typer.Option([], "--opt", help="A converter option, k=v (repeatable)."),
    at: Optional[str] = typer.Option(None, "--at", help="Option `at`: a time, RFC 3339 UTC."),
    run_id: Optional[str] = typer.Option(None, "--run-id", help="Option `run_id`: the runId to write."),
    from_tool: Optional[str] = typer.Option(None, "--from-tool", help="Option `from`: the tool that wrote the input."),
    subject: Optional[str] = typer.Option(None, "--subject", help="Option `subject`: the subject's ref."),
    subject_kind: Optional[str] = typer.Option(None, "--subject-kind", help="Option `subject_kind`."),
    target_mode: Optional[str] = typer.Option(None, "--target-mode", help="Option `target_mode`: live, replayed, ..."),
    content_capture: Optional[str] = typer.Option(None, "--content-capture", help="Option `content_capture`: on/off."),
    ignore_overlays: bool = typer.Option(False, "--ignore-overlays", help="Option `ignore_overlays`."),
    as_json: bool = JSON_OPT,
) -> None:
    """Convert IN (format --from) to OUT (format --to), directly or through AEF.

    Each option goes to the steps that declare it; an option no step declares is an input error.
    Example: aefgate convert log.json out/run --from inspect --to aef --target-mode live
    """
    from aefgate import api
    from aefgate.converters.registry import find_route, registry

    options: dict[str, object] = parse_opts(opt)
    given = {"at": at, "run_id": run_id, "from_tool": from_tool, "subject": subject, "subject_kind": subject_kind,
             "target_mode": target_mode, "content_capture": content_capture,
             "ignore_overlays": ignore_overlays or None}
    for flag, value in given.items():
        if value is None:
            continue
        name = COMMON_FLAGS[flag]
        if name in options:
            raise Refusal("CLI-2", f"the option {name!r} is given both as a flag and with --opt", "--opt")
        options[name] = value
    reg = registry()
    _warn_broken(reg)
    steps = find_route(from_, to, reg)
    if not as_json:
        render.console().print("route     " + " -> ".join(f"{c.source} ({c.name})" for c in steps)
                               + f" -> {steps[-1].target}")
    api.convert(src, dst, source=from_, target=to, options=options)
    losses = [{"converter": c.name, "fidelity": c.fidelity} for c in steps]
    if as_json:
        render.emit_json({"input": str(src), "output": str(dst), "from": steps[0].source, "to": steps[-1].target,
                          "route": [c.name for c in steps], "fidelity": losses})
    else:
        c = render.console()
        c.print(f"wrote     {render.escape(str(dst))}")
        for step in steps:
            n = len(step.losses)
            fmt_name = step.target if step.source == "aef" else step.source
            c.print(f"fidelity  {step.name}: " + (f"{n} declared losses (`aefgate formats {fmt_name}` lists them)"
                                                  if n else "exact"))


# -- demo -----------------------------------------------------------------------------------------------------------


def _demo_scenario() -> dict:
    from importlib.resources import files

    from aefgate.aef import jsonio

    data = files("aefgate").joinpath("fixtures/demo/scenario.json").read_bytes()
    return jsonio.loads(data)


TARGET_MODES = {  # [RUN-7]: a reader shows the target mode wherever it shows results
    "live": "the real subject, answering at run time",
    "replayed": "recorded answers of the real subject, played back",
    "scripted": "a scripted stand-in: shows what the checks do, not how the subject behaves",
    "mocked": "a stand-in that is not the subject",
}


def _case_rows(run_dir: Path) -> list[dict]:
    """One row per line of results.ndjson, in file order: case, path, trial, state, and a note (the reason of a
    typed absence, a rollup's trials)."""
    from aefgate.aef import jsonio

    rows = []
    for _, line in jsonio.iter_ndjson(run_dir / "results.ndjson"):
        row = {"case": line["caseId"], "path": line["path"], "state": line["state"]}
        if "trial" in line:
            row["trial"] = line["trial"]
        if "trials" in line:
            t = line["trials"]
            row["note"] = (f"rollup: {t['passed']}/{t['n']} trials passed ({t['aggregation']})"
                           + ("" if t["agree"] else ", flaky"))
        elif line.get("reason"):
            row["note"] = line["reason"]
        rows.append(row)
    return rows


@app.command()
def demo(
    out: Optional[Path] = typer.Option(None, "--out", help="Where to write the run (absent or empty; default: a new "
                                                           "temporary folder)."),
    as_json: bool = JSON_OPT,
) -> None:
    """Produce a small evaluation run from a bundled scenario, verify it, seal it, verify it again.

    Example: aefgate demo --out /tmp/demo-run
    """
    from aefgate.aef import jsonio
    from aefgate.aef.produce import produce
    from aefgate.aef.sealer import seal_run
    from aefgate.aef.verifier import verify_run

    c = render.console()
    run_dir = out if out is not None else Path(tempfile.mkdtemp(prefix="aefgate-demo-")) / "run"
    if not as_json:
        c.print(f"writing   {render.escape(str(run_dir))}")
    n = produce(_demo_scenario(), run_dir)
    before = verify_run(run_dir)
    if not as_json:
        c.print(f"produced  {n} result lines; verified: {before.describe()}")
    after = before
    if before.outcome == "unsealed":
        seal_run(run_dir, sealed_by="producer")
        after = verify_run(run_dir)
    run = jsonio.read_json(run_dir / "run.json")
    rows = _case_rows(run_dir)
    summary = jsonio.read_json(run_dir / "summary.json")
    entries = [{"lane": lane["lane"], **e} for lane in summary["lanes"] for e in lane["metrics"]]
    if as_json:
        render.emit_json({
            "out": str(run_dir), "results": n, "runId": run["runId"],
            "targetMode": run["execution"]["targetMode"],
            "beforeSeal": before.to_json(), "afterSeal": after.to_json(),
            "runHash": after.run_hash, "cases": rows, "summary": entries,
        })
    else:
        _show_demo(run_dir, run, rows, entries, after)
    if not (before.outcome == "unsealed" and after.outcome == "intact"):
        raise typer.Exit(EXIT_INTEGRITY)


def _fmt_num(x) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.4g}"
    return str(x)


def _show_demo(run_dir: Path, run: dict, rows: list[dict], entries: list[dict], after) -> None:
    from rich.table import Table

    c = render.console()
    mode = run["execution"]["targetMode"]
    c.print(f"run id    {render.escape(run['runId'])}")
    c.print(f"subject   {render.escape(run['subject']['ref'])}")
    c.print(f"target    [bold]{mode}[/]: {TARGET_MODES.get(mode, mode)}")
    cases = Table(title="Results (results.ndjson)")
    for col in ("case", "path", "trial", "state", "note"):
        cases.add_column(col, overflow="fold")
    for r in rows:
        cases.add_row(r["case"], r["path"], _fmt_num(r.get("trial")), r["state"], render.escape(r.get("note", "")))
    c.print(cases)
    summ = Table(title="Summary (summary.json)")
    for col in ("lane", "metric", "path", "N", "n", "not measured", "value", "verdict", "rule"):
        summ.add_column(col)
    for e in entries:
        value = _fmt_num(e.get("value"))
        if e.get("aggregate"):
            value += f" ({e['aggregate']['method']})"
        summ.add_row(e["lane"], e["metric"], e["path"], str(e["N"]), str(e["n"]), str(e["notMeasured"]), value,
                     e["verdict"], render.escape(e.get("rule", "")))
    c.print(summ)
    render.show_verification(after, str(run_dir))


# -- entry point ----------------------------------------------------------------------------------------------------


from aefgate.cli import evalapi_cmds, overlay_cmds, publish_cmds, serve_cmds  # noqa: E402,F401
from aefgate.cli.converter_cmds import ExportGroup, ImportGroup  # noqa: E402

#: ``aefgate import NAME`` / ``aefgate export NAME``: a command per converter to / from AEF, made from the registry
#: (:mod:`aefgate.cli.converter_cmds`), the converter's own hook adding what its options do not say
import_app = typer.Typer(name="import", cls=ImportGroup, no_args_is_help=True, add_completion=False,
                         help="Import another tool's output as an AEF run (sealed as ingest).")
export_app = typer.Typer(name="export", cls=ExportGroup, no_args_is_help=True, add_completion=False,
                         help="Export an AEF run in another tool's format.")

overlay_cmds.register(app, aef_app)
app.add_typer(import_app, name="import")
app.add_typer(export_app, name="export")
for _commands in (publish_cmds, serve_cmds):
    _commands.register(app, aef_app)


# -- a library refusal's options, as the command that ran spells them ------------------------------------------------

#: library code names a converter option as ``option 'NAME'`` (its parameter), or ``option 'NAME=VALUE'`` with the
#: value that would do; the command line shows it as the flag of the command that ran (:func:`in_flags`)
OPTION_REF = re.compile(r"option '([A-Za-z_][A-Za-z0-9_]*)(?:=([^']*))?'")

#: a converter option a command takes under a flag of another name: command path -> {option: flag}
OPTION_FLAGS = {
    "convert": {"from": "--from-tool", "source": "--from", "target": "--to"},
    "serve otlp": {"drain": "--drain-timeout"},
    "serve ingest": {"listen": "--from"},  # its HTTP intake listens where --from http://HOST:PORT says
}


def _command_of(args: list[str]) -> tuple[str, object | None]:
    """The command ``args`` run (its path, ``export assert``, and its click command), as far as it resolves."""
    cmd: object = _command()
    path: list[str] = []
    for a in args:
        if not hasattr(cmd, "get_command") or a.startswith("-"):
            break
        try:  # a converter's command is made when asked for (CONV-4: two converters claim it)
            sub = cmd.get_command(None, a)  # type: ignore[attr-defined]
        except Refusal:
            sub = None
        if sub is None:
            break
        path.append(a)
        cmd = sub
    return " ".join(path), cmd


def flag_for(option: str, args: list[str]) -> str | None:
    """How the command ``args`` run takes the converter option ``option``: its own flag (``--taxonomy`` in
    ``export assert``), else ``--opt option=...`` where it has ``--opt`` (``convert``, ``fidelity``); None when it
    takes it in no way."""
    path, cmd = _command_of(args)
    if option in OPTION_FLAGS.get(path, {}):
        return OPTION_FLAGS[path][option]
    params = [p for p in getattr(cmd, "params", ()) if getattr(p, "param_type_name", "") == "option"]
    for p in params:
        longs = [o for o in p.opts if o.startswith("--")]
        if longs and p.name not in ("from_", "opt") and (
                p.name == option or any(o[2:].replace("-", "_") == option for o in longs)):
            return longs[0]
    if any("--opt" in p.opts for p in params):
        return f"--opt {option}=..."
    return None


def in_flags(r: Refusal, args: list[str]) -> Refusal:
    """The refusal ``r`` with each option it names (``option 'NAME'``, in its message and its place) written as the
    command that ran (``args``) takes it: the one place where the command line turns a converter's parameter into
    a flag. An option the command takes in no way stays as the library named it."""
    def one(m: "re.Match[str]") -> str:
        flag = flag_for(m.group(1), args)
        if flag is None:
            return m.group(0)
        if m.group(2) is None:
            return flag
        return flag.replace("=...", "=" + m.group(2)) if flag.endswith("=...") else f"{flag} {m.group(2)}"

    message, where = OPTION_REF.sub(one, r.message), OPTION_REF.sub(one, r.where or "")
    if (message, where) == (r.message, r.where or ""):
        return r
    return Refusal(r.rule, message, where, exit_code=r.exit_code)


def _json_requested(args: list[str]) -> bool:
    head = args[: args.index("--")] if "--" in args else args
    return "--json" in head


def _usage_where(e: Exception) -> str:
    """The option or argument a usage error is about (``--sealed-by``, ``run``), or ``""``."""
    param = getattr(e, "param", None)
    if param is not None:
        opts = getattr(param, "opts", None) or []
        return opts[0] if opts and opts[0].startswith("-") else (getattr(param, "name", None) or "")
    name = getattr(e, "option_name", None)
    return name if isinstance(name, str) else ""


_click_command: tuple[tuple, object] | None = None


def _command() -> object:
    """The click command typer builds from ``app``, built once per set of registered commands (typer builds it
    anew on every call, reading every command's signature: about 40 ms, paid by each in-process run)."""
    global _click_command
    key = (id(app), len(app.registered_commands), len(app.registered_groups))
    if _click_command is None or _click_command[0] != key:
        _click_command = (key, typer.main.get_command(app))
    return _click_command[1]


def run(argv: Optional[List[str]] = None) -> int:
    """Run the command line on ``argv`` (default: ``sys.argv[1:]``) and return the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    contract = bool(args) and args[0] == "aef"  # spec 09 §9.3: errors on stderr only, always exit 2
    as_json = _json_requested(args) and not contract
    try:
        with render.progress_display(quiet=as_json or contract):
            rv = _command()(args=args, prog_name="aefgate", standalone_mode=False)  # type: ignore[operator]
        return rv if isinstance(rv, int) else 0
    except Refusal as r:
        r = in_flags(r, args)
        if as_json:
            render.emit_json(r.to_json())
        render.print_error(r.rule, r.where, r.message)
        return EXIT_INPUT if contract else r.exit_code
    except typer.Abort:
        sys.stderr.write("aborted\n")
        return 130
    except ClickException as e:  # usage errors: a bad option, a missing argument (CLI-2, at the option)
        where, message = _usage_where(e), e.format_message()
        if as_json:
            render.emit_json({"error": {"rule": "CLI-2", "where": where, "message": message}})
        if contract:
            e.show()
        else:
            ctx = getattr(e, "ctx", None)
            hint = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
            render.print_error("CLI-2", where, message + hint)
        return EXIT_INPUT
    except BrokenPipeError:  # the reader of stdout went away (| head): not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as e:  # the system refused a file or a socket (a read-only place, a full disk): IO-1
        from aefgate.fsutil import output_being_written

        # the file it names, else the output being written (a write to an open file names none)
        where = str(e.filename or output_being_written() or "")
        message = f"{e.strerror or e}" + (" (" + type(e).__name__ + ")" if not e.strerror else "")
        if as_json:
            render.emit_json({"error": {"rule": "IO-1", "where": where, "message": message}})
        render.print_error("IO-1", where, message)
        return EXIT_INPUT
    except Exception as e:  # a bug: say so, never a traceback unless asked
        if render.debug():
            traceback.print_exc()
        msg = (f"unexpected {type(e).__name__}: {e}. This is a bug (in aefgate {__version__}, or in the converter "
               f"plug-in that ran): please report it with the command you ran"
               + ("" if render.debug() else " (AEFGATE_DEBUG=1 prints the traceback)"))
        if as_json:
            render.emit_json({"error": {"rule": "internal", "where": "", "message": msg}})
        render.print_error("internal", "", msg)
        return EXIT_INPUT


class _QuietPipe(io.RawIOBase):
    """A standard stream's file descriptor that a closed reader cannot fail: once a write meets ``EPIPE`` (the reader
    of ``| head -1`` went away), this and every later write is dropped, and the command goes on to its own end and
    exit code (an integrity failure stays 1, a refusal 2, success 0), quietly."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self._fd = fd
        self.broken = False

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        return os.isatty(self._fd)

    def write(self, b) -> int:  # type: ignore[override]
        if self.broken:
            return len(b)
        try:
            return os.write(self._fd, b)
        except BrokenPipeError:
            self.broken = True
            return len(b)


def _quiet_pipes() -> None:
    """Put :class:`_QuietPipe` under ``sys.stdout`` and ``sys.stderr`` (same encoding, error handler, buffering)."""
    for name in ("stdout", "stderr"):
        old = getattr(sys, name)
        try:
            fd = old.fileno()
        except (AttributeError, OSError, ValueError):  # not a real file (a test's capture): left alone
            continue
        try:
            old.flush()
        except OSError:
            pass
        new = io.TextIOWrapper(io.BufferedWriter(_QuietPipe(fd)), encoding=old.encoding, errors=old.errors,
                               line_buffering=old.line_buffering or name == "stderr")
        setattr(sys, name, new)


def main() -> None:
    """The console script ``aefgate``: :func:`run`, with standard streams a closed pipe cannot fail."""
    try:
        _quiet_pipes()
        code = run()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):  # pragma: no cover - a _QuietPipe does not raise
                pass
    except KeyboardInterrupt:  # Ctrl-C outside a command's own handling (its start, its last output): 130, quietly
        code = 130
    sys.exit(code)
