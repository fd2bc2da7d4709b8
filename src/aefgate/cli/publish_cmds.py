"""``aefgate publish``: a verified run's assessment events onto an event bus, at least once (docs/design/bus.md).

The library is :mod:`aefgate.bus`. Exit codes: 0 every event acknowledged; 1 some were not (an integrity-style
failure: the report says how many and why, and ``--spool`` keeps them for ``--resume``), or the run does not verify
(AEP-1); 2 an input or usage error (``error [RULE] at WHERE: message``), nothing sent or written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from aefgate.cli import nats_options as nopt
from aefgate.cli import render
from aefgate.cli.converter_cmds import JSON_OPT, POLICY_HELP
from aefgate.errors import EXIT_INTEGRITY, Refusal

TO_HELP = ("Where to: nats://host:port/SUBJECT (JetStream, acknowledged), http(s)://host/path (CloudEvents HTTP "
           "binding), file:PATH (JSONL, written atomically) or - (stdout, JSONL).")
CAPTURE_HELP = ("The capture ceiling (AEP-0003 §9.1): metadata (the default), redacted or full; never above the "
                "run's own contentCapture.")


def register(app, aef_app) -> None:
    app.command("publish")(publish_cmd)


def publish_cmd(
    run: Optional[Path] = typer.Argument(None, metavar="RUN", help="The run folder (it must verify intact)."),
    to: Optional[str] = typer.Option(None, "--to", help=TO_HELP),
    format: Optional[str] = typer.Option(None, "--format", help="cloudevents (the default: the AEP-0005 bridge) "
                                         "or aep (the AEP events as JSON)."),
    mode: Optional[str] = typer.Option(None, "--mode", help="CloudEvents content mode: structured (the default) or "
                                       "binary (attributes as ce- headers)."),
    max_capture: str = typer.Option("metadata", "--max-capture", help=CAPTURE_HELP),
    batch: Optional[int] = typer.Option(None, "--batch", help="HTTP: events per request (N > 1: "
                                        "application/cloudevents-batch+json). Default 1."),
    retries: Optional[int] = typer.Option(None, "--retries", help="Retries of an event or batch after its first "
                                          "send (connection errors, timeouts, 429, 5xx). Default 5."),
    timeout: Optional[float] = typer.Option(None, "--timeout", help="Seconds from an event's (batch's) first send "
                                            "to giving it up, retries included. Default 30."),
    spool: Optional[Path] = typer.Option(None, "--spool", help="A new folder that keeps the events not "
                                         "acknowledged, for --resume."),
    create_stream: bool = typer.Option(False, "--create-stream", help="NATS: create a stream for the subject "
                                       "(named from it: aef.results -> AEF_RESULTS) when none covers it."),
    resume: Optional[Path] = typer.Option(None, "--resume", help="Send the events a spool holds (to its "
                                          "destination, with its options, unless given here) instead of a run."),
    agent: Optional[str] = typer.Option(None, "--agent", help="The envelope's agent (default: the run's subject)."),
    source_host: Optional[str] = typer.Option(None, "--source-host", help="The host of the envelope's source URI."),
    cause_map: Optional[Path] = typer.Option(None, "--cause-map", help="A JSON file mapping resultIds or caseIds to "
                                             "the ids of the assessed AEP events."),
    policy: Optional[Path] = typer.Option(None, "--policy", help=POLICY_HELP),
    nats_tls_ca: Optional[Path] = nopt.TLS_CA,
    nats_tls_cert: Optional[Path] = nopt.TLS_CERT,
    nats_tls_key: Optional[Path] = nopt.TLS_KEY,
    nats_creds: Optional[Path] = nopt.CREDS,
    nats_nkey: Optional[Path] = nopt.NKEY,
    nats_token_env: Optional[str] = nopt.TOKEN_ENV,
    as_json: bool = JSON_OPT,
) -> None:
    """Publish a run's assessment events to an event bus, each until it is acknowledged (at least once).

    Event ids are deterministic (AEP-4) and NATS publishes carry them as Nats-Msg-Id, so publishing again is
    harmless. Exit 0: every event acknowledged; 1: some were not (see the report; --spool keeps them) or the run
    does not verify; 2: a bad input, nothing sent.
    Example: aefgate publish runs/refunds --to nats://127.0.0.1:4222/aef.results --create-stream --spool sp
    Production NATS: --nats-tls-ca, --nats-tls-cert/--nats-tls-key, --nats-creds, --nats-nkey, --nats-token-env
    (a server refusing the credentials: PUB-6, exit 2). A spool keeps the destination without the URL's
    user:password (give it again with --to on --resume) and the NATS options' file paths, never a secret.
    """
    try:
        _publish(run, to, format, mode, max_capture, batch, retries, timeout, spool, create_stream, resume, agent,
                 source_host, cause_map, policy, as_json,
                 nopt.nats_auth(nats_tls_ca, nats_tls_cert, nats_tls_key, nats_creds, nats_nkey, nats_token_env))
    except Refusal as r:
        raise nopt.flag_refusal(r) from None


def _publish(run, to, format, mode, max_capture, batch, retries, timeout, spool, create_stream, resume, agent,
             source_host, cause_map, policy, as_json, nats_auth) -> None:
    from aefgate.bus.publish import DEFAULTS
    from aefgate.bus.publish import publish as do_publish
    from aefgate.bus.publish import resume as do_resume

    if to == "-" and as_json:
        raise Refusal("CLI-2", "--to - writes the events on stdout, where --json would write the report: use one "
                      "or the other", "--to")
    if resume is not None:
        if run is not None:
            raise Refusal("CLI-2", "give a RUN or --resume SPOOL, not both", "RUN")
        given = {"--spool": spool, "--agent": agent, "--source-host": source_host, "--cause-map": cause_map,
                 "--policy": policy}
        for name, value in given.items():
            if value is not None:
                raise Refusal("CLI-2", f"{name} applies to a run, not to --resume", name)
        if max_capture != "metadata":
            raise Refusal("CLI-2", "--max-capture applies to a run: the spool holds the events as exported",
                          "--max-capture")
        report = do_resume(resume, to, format=format, mode=mode, batch=batch, retries=retries, timeout=timeout,
                            create_stream=create_stream or None, nats_auth=nats_auth)
    else:
        if run is None:
            raise Refusal("CLI-2", "give the RUN to publish (or --resume SPOOL)", "RUN")
        if to is None:
            raise Refusal("CLI-2", "give the destination: --to URL", "--to")
        from aefgate.cli.inputs import require_dir

        require_dir(run)
        pol = None
        if policy is not None:
            from aefgate.cli.aef import load_policy

            pol = load_policy(policy)
        d = DEFAULTS
        report = do_publish(
            run, to, format=format or d["format"], mode=mode or d["mode"], max_capture=max_capture, agent=agent,
            source_host=source_host, cause_map=str(cause_map) if cause_map is not None else None, policy=pol,
            batch=d["batch"] if batch is None else batch, retries=d["retries"] if retries is None else retries,
            timeout=d["timeout"] if timeout is None else timeout, spool=spool, create_stream=create_stream,
            nats_auth=nats_auth)
    if as_json:
        render.emit_json(report.to_json())
    else:
        _show(report)
    if not report.ok:
        render.print_error("PUB-5", report.to, f"{report.total - report.acked} of {report.total} events not "
                           f"acknowledged: {report.reason or 'the publish stopped'}")
        raise typer.Exit(EXIT_INTEGRITY)


def _show(r) -> None:
    c = render.console()
    esc = render.escape
    what = f"{r.format}" + (f", {r.mode}" if r.format == "cloudevents" else "")
    src = f"spool {r.resumed}" if r.resumed else (r.run or "")
    c.print(f"published {esc(src)} -> {esc(r.to)} ({r.kind}, {what})")
    if r.destination.get("stream"):
        c.print(f"stream    {esc(r.destination['stream'])}" + (" (created)" if r.destination.get("streamCreated")
                                                                 else ""))
    c.print(f"events    {r.total}: acked {r.acked} ({r.duplicate} duplicates), failed {r.failed}, unsent {r.unsent}"
            f" ({r.attempts} sends, {r.seconds:.2f} s)")
    for w in r.warnings:
        c.print(f"[yellow]warning[/]: {esc(w)}")
    if r.ok:
        c.print("outcome   [bold green]complete[/]: every event acknowledged")
    else:
        c.print(f"outcome   [bold red]incomplete[/]: {r.total - r.acked} events not acknowledged "
                f"(an integrity failure: exit 1)")
        if r.reason:
            c.print(f"reason    {esc(r.reason)}", soft_wrap=True)
    if r.spool is not None:
        if r.pending:
            c.print(f"spool     {esc(r.spool)}: {r.pending} events pending; send them with: aefgate publish "
                    f"--resume {esc(r.spool)}", soft_wrap=True)
        else:
            c.print(f"spool     {esc(r.spool)}: nothing pending")
