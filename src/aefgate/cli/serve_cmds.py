"""Long-running services: ``aefgate serve ingest`` (AEP assessment events -> sealed AEF runs).

The library is :mod:`aefgate.bus.ingest`; the design (journal, acknowledgements, names, late batches) is
docs/design/ingest.md. Refusals follow the CLI's convention (``error [RULE] at WHERE: message`` on stderr, exit 2).
People's output (one log line per sealed run or dead letter) goes to stderr; with ``--json`` the counters are
written as one JSON value on stdout when the service stops.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from aefgate.cli import nats_options as nopt
from aefgate.cli import render

serve_app = typer.Typer(name="serve", help="Long-running services: serve ingest (AEP events -> sealed AEF runs), "
                        "serve otlp (OpenTelemetry evaluation events -> sealed AEF runs).",
                        no_args_is_help=True)


def register(app, aef_app) -> None:
    """Adds the ``serve`` group to the app."""
    app.add_typer(serve_app, name="serve")


@serve_app.command("ingest")
def ingest(
    source: str = typer.Option(..., "--from", help="nats://HOST:PORT/SUBJECT (a JetStream stream must hold the "
                               "subject) or http://HOST:PORT (POST CloudEvents: binary, structured or batch mode, or "
                               "plain AEP JSON)."),
    out: Path = typer.Option(..., "--out", help="The folder of the runs: one run folder per session, named from "
                             "the session id (percent-encoded); OUT/.journal and OUT/.ingest hold the service's "
                             "state."),
    durable: Optional[str] = typer.Option(None, "--durable", help="The JetStream durable pull consumer (NATS): "
                                          "processes on one durable share the load, on one host or several."),
    node: Optional[str] = typer.Option(None, "--node", help="NATS: this node's name ([A-Za-z0-9_-], stable across "
                                       "restarts; default: the one kept in OUT/.ingest/node, first derived from "
                                       "the host name and OUT). Each session is owned by one node; the others "
                                       "forward its events there. Processes sharing one OUT are one node."),
    idle: float = typer.Option(5.0, "--idle", help="Seconds without a new event after which a session is complete "
                               "and its run sealed."),
    dead_letter: Optional[str] = typer.Option(None, "--dead-letter", help="Where malformed messages go: a JSONL "
                                              "file (default OUT/.ingest/dead-letter.jsonl) or nats:SUBJECT."),
    max_inflight: int = typer.Option(64, "--max-inflight", help="At most this many unacknowledged messages (the "
                                     "pull batch size; for HTTP, requests handled at once)."),
    ack_wait: float = typer.Option(30.0, "--ack-wait", help="NATS: seconds before an unacknowledged message is "
                                   "redelivered (the consumer's AckWait, when this command creates the consumer)."),
    at_fixed: Optional[str] = typer.Option(None, "--at-fixed", help="sealedAt of every run (RFC 3339 UTC; default "
                                           "now): fixes the output, for tests."),
    target_mode: Optional[str] = typer.Option(None, "--target-mode", help="execution.targetMode of the runs: "
                                              "live (default), replayed, scripted or mocked."),
    key: Optional[Path] = typer.Option(None, "--key", help="Sign every seal with this PKCS#8 PEM private key."),
    metrics_listen: Optional[str] = typer.Option(None, "--metrics-listen", help="HOST:PORT for Prometheus metrics "
                                                 "(/metrics: the counters as aefgate_ingest_*_total)."),
    nats_tls_ca: Optional[Path] = nopt.TLS_CA,
    nats_tls_cert: Optional[Path] = nopt.TLS_CERT,
    nats_tls_key: Optional[Path] = nopt.TLS_KEY,
    nats_creds: Optional[Path] = nopt.CREDS,
    nats_nkey: Optional[Path] = nopt.NKEY,
    nats_token_env: Optional[str] = nopt.TOKEN_ENV,
    as_json: bool = typer.Option(False, "--json", help="When the service stops, write its counters as one JSON "
                                 "value on stdout."),
) -> None:
    """Ingest AEP assessment events into sealed AEF runs, one run per session (docs/design/ingest.md).

    A message is acknowledged (HTTP: answered 202) only once its events are fsynced in the journal.
    A session's run is sealed ingest once the session is idle for --idle seconds, or on SIGTERM/SIGINT.
    NATS: several processes, each with its own --out (on different hosts), share one --durable; every session is
    claimed by one node (a JetStream key-value bucket) and sealed there, whole.
    Malformed messages go to the dead-letter sink and are acknowledged (HTTP: 400).
    Example: aefgate serve ingest --from nats://127.0.0.1:4222/aep.assessments --durable ingest --out runs/
    Production NATS: --nats-tls-ca, --nats-tls-cert/--nats-tls-key, --nats-creds, --nats-nkey, --nats-token-env
    (a server refusing the credentials: INGEST-6, exit 2).
    """
    from aefgate.bus.ingest import IngestConfig, serve_ingest
    from aefgate.errors import Refusal
    from aefgate.aef.signatures import signing_key_of

    signing_key = signing_key_of(key)
    cfg = IngestConfig(source=source, out=out, durable=durable, idle=idle, dead_letter=dead_letter,
                       max_inflight=max_inflight, at=at_fixed, key=signing_key, target_mode=target_mode,
                       ack_wait=ack_wait, node=node, metrics_listen=metrics_listen,
                       nats_auth=nopt.nats_auth(nats_tls_ca, nats_tls_cert, nats_tls_key, nats_creds, nats_nkey,
                                                nats_token_env))
    try:
        stats = serve_ingest(cfg)
    except Refusal as r:
        raise nopt.flag_refusal(r) from None
    if as_json:
        render.emit_json(stats.as_dict())
        return
    c = render.console()
    s = stats.as_dict()
    c.print(f"stopped   {s['received']} messages, {s['events']} events journaled, {s['runs']} runs sealed "
            f"({s['sealed_events']} events, {s['duplicates']} duplicates), {s['forwarded']} forwarded to other "
            f"nodes, {s['dead']} dead-lettered")


@serve_app.command("otlp")
def otlp(
    out: Optional[Path] = typer.Option(None, "--out", help="The folder of the runs (one run folder per run id); "
                                       "OUT/.otlp holds the receiver's journal. Not with --bus."),
    bus: Optional[str] = typer.Option(None, "--bus", help="nats://HOST:PORT/SUBJECT: answer once JetStream has the "
                                      "records (spans on SUBJECT.trace.<trace id>) and leave the runs to the "
                                      "serve ingest fleet reading SUBJECT (docs/gateway.md, past one machine)."),
    bus_timeout: float = typer.Option(10.0, "--bus-timeout", help="With --bus: seconds to wait for JetStream's "
                                      "acknowledgement before answering 503 with Retry-After."),
    listen: str = typer.Option("127.0.0.1:4318", "--listen", help="HOST:PORT of the OTLP/HTTP receiver "
                               "(/v1/logs, /v1/traces, /healthz)."),
    metrics_listen: Optional[str] = typer.Option(None, "--metrics-listen", help="HOST:PORT for Prometheus metrics "
                                                 "(/metrics)."),
    grpc_listen: Optional[str] = typer.Option(None, "--grpc-listen", help="HOST:PORT for OTLP/gRPC too (needs the "
                                              "grpc extra: pip install 'aefgate\\[grpc]')."),
    idle: float = typer.Option(5.0, "--idle", help="Seconds without a new record after which a run is complete and "
                               "sealed."),
    max_body: int = typer.Option(16 * 1024 * 1024, "--max-body", help="The largest request body, in bytes, before "
                                 "or after gzip (413 above)."),
    queue: int = typer.Option(1024, "--queue", help="Requests that may wait for the journal; past it, 503 with "
                              "Retry-After."),
    subject: Optional[str] = typer.Option(None, "--subject", help="subject.ref of the runs (default: "
                                          "agent:<service.name>)."),
    key: Optional[Path] = typer.Option(None, "--key", help="Sign each run's seal with this PKCS#8 PEM private "
                                       "key."),
    drain_timeout: float = typer.Option(30.0, "--drain-timeout", help="Seconds SIGTERM/SIGINT may take: the "
                                        "requests under way answered, the open runs sealed; what is left (a full "
                                        "disk) stays journaled and is sealed after the next start."),
    dedup_window: float = typer.Option(600.0, "--dedup-window", help="Seconds a request body is still recognised "
                                       "as a retry (answered 200, kept once) after its run was sealed; at most the "
                                       "last 10,000 such bodies. Past it the same body is a new run."),
    nats_tls_ca: Optional[Path] = nopt.TLS_CA,
    nats_tls_cert: Optional[Path] = nopt.TLS_CERT,
    nats_tls_key: Optional[Path] = nopt.TLS_KEY,
    nats_creds: Optional[Path] = nopt.CREDS,
    nats_nkey: Optional[Path] = nopt.NKEY,
    nats_token_env: Optional[str] = nopt.TOKEN_ENV,
    as_json: bool = typer.Option(False, "--json", help="Write the counters as one JSON value on stdout when the "
                                 "receiver stops."),
) -> None:
    """Receive OpenTelemetry evaluation events over OTLP/HTTP and write each run, sealed ingest, when it goes idle
    (docs/gateway.md). A request is answered 200 only once its records are in an fsynced journal; SIGTERM seals the
    open runs, then stops.

    Example: aefgate serve otlp --listen 127.0.0.1:4318 --out runs/ --metrics-listen 127.0.0.1:9464
    Past one machine: aefgate serve otlp --bus nats://127.0.0.1:4222/otlp.logs, and serve ingest --from
    nats://127.0.0.1:4222/otlp.logs --durable ingest --out runs/ on each node.
    """
    from aefgate.bus.otlp_receiver import serve
    from aefgate.aef.signatures import signing_key_of

    signing_key = signing_key_of(key)  # before anything is written

    def say(line: str) -> None:
        render.console().print(render.escape(line), soft_wrap=True)

    from aefgate.errors import Refusal

    auth = nopt.nats_auth(nats_tls_ca, nats_tls_cert, nats_tls_key, nats_creds, nats_nkey, nats_token_env)
    if auth is not None and bus is None:
        raise Refusal("CLI-2", "the --nats-* options go with --bus nats://HOST:PORT/SUBJECT", "--nats-*")
    try:
        counts = serve(out, listen=listen, metrics_listen=metrics_listen, idle=idle, key=signing_key,
                       max_body=max_body, queue=queue, subject=subject, say=say, grpc_listen=grpc_listen, bus=bus,
                       bus_timeout=bus_timeout, nats_auth=auth, drain=drain_timeout, dedup_window=dedup_window)
    except Refusal as r:
        raise nopt.flag_refusal(r) from None
    if as_json:
        render.emit_json(counts)
