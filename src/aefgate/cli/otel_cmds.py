"""OpenTelemetry commands: ``aefgate import otel`` and ``aefgate export otel`` (interop/opentelemetry.md, implemented
by :mod:`aefgate.converters.otel`; OTLP files by :mod:`aefgate.formats.otlp`)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from aefgate.cli import render
from aefgate.cli.inspect_cmds import JSON_OPT, export_app, import_app


def register(app, aef_app) -> None:
    """The commands hang on the shared ``import`` and ``export`` groups (added by :mod:`aefgate.cli.inspect_cmds`)."""


@import_app.command("otel")
def import_otel(
    logs: List[Path] = typer.Argument(..., metavar="LOGS...", help="OTLP logs, one or more: an OTLP/JSON file (one "
                                      "LogsData per line, the file exporter's form), a protobuf request body (.pb, "
                                      "gzip or not), or a folder of them."),
    out: Path = typer.Argument(..., metavar="OUT", help="The run folder to write (absent or empty)."),
    traces: List[Path] = typer.Option([], "--traces", help="OTLP traces the events belong to (a file or a folder; "
                                      "repeatable): kept in traces.otlp.jsonl."),
    run_id: Optional[str] = typer.Option(None, "--run-id", help="The runId (default: otel-<digest of the input>)."),
    from_tool: Optional[str] = typer.Option(None, "--from", help="imported.from: the tool that wrote the input."),
    subject: Optional[str] = typer.Option(None, "--subject", help="subject.ref (default: agent:<service.name>)."),
    subject_kind: str = typer.Option("agent", "--subject-kind", help="subject.kind."),
    target_mode: str = typer.Option("live", "--target-mode", help="execution.targetMode: live, replayed, scripted "
                                    "or mocked (the converter's claim, listed in imported.asserted)."),
    content_capture: str = typer.Option("on", "--content-capture", help="on, or off (a record with content is "
                                        "then refused: content-capture, [SEC-6])."),
    at: Optional[str] = typer.Option(None, "--at", help="The seal's sealedAt, RFC 3339 UTC (default: now); also "
                                     "the run's times when no event has one (OT-4)."),
    key: Optional[Path] = typer.Option(None, "--key", help="Sign the seal with this PKCS#8 PEM private key."),
    skip_unplaceable: bool = typer.Option(False, "--skip-unplaceable", help="Leave out the evaluation events the "
                                          "page cannot place (OT-6: no name, no case, a label without a value, a "
                                          "non-finite value, the same metric twice for one case ...) instead of "
                                          "refusing the input: each is listed (rule, case, evaluation, where) on "
                                          "stderr and in --json, and the sealed run counts them (run.json ext)."),
    suite_run: Optional[str] = typer.Option(None, "--suite-run", help="Import the events of this "
                                            "test.suite.run.id only (the input holds several runs; the receiver "
                                            "groups by it the same way)."),
    as_json: bool = JSON_OPT,
) -> None:
    """Import OpenTelemetry gen_ai.evaluation.result events (and their traces) as an AEF run, sealed ingest
    (interop/opentelemetry.md, OpenTelemetry -> AEF).

    Example: aefgate import otel logs.otlp.jsonl runs/evals --traces traces.otlp.jsonl --subject agent:travel
    """
    from aefgate.converters.otel.importer import from_otel
    from aefgate.formats.aef import jsonio
    from aefgate.formats.aef.seal import seal_run_hash
    from aefgate.formats.aef.signatures import signing_key_of
    from aefgate.fsutil import count_lines

    signing_key = signing_key_of(key)  # before anything is written
    skipped: list[dict] = []
    run_dir = from_otel(logs, out, traces=traces, run_id=run_id, source=from_tool, subject=subject,
                        subject_kind=subject_kind, target_mode=target_mode, content_capture=content_capture, at=at,
                        key=signing_key, skip_unplaceable=skip_unplaceable, suite_run=suite_run, skipped=skipped)
    run = jsonio.read_json(run_dir / "run.json")
    lines = count_lines(run_dir / "results.ndjson")
    run_hash = seal_run_hash(run_dir)
    signed = (run_dir / "attestation.dsse.json").exists()
    if as_json:
        render.emit_json({"input": [str(x) for x in logs], "output": str(run_dir), "runId": run["runId"],
                          "status": run["status"], "results": lines, "outcome": "intact", "runHash": run_hash,
                          "signed": signed, "leftOut": skipped})
        _say_left_out(skipped, to_stderr=True)
        return
    c = render.console()
    _say_left_out(skipped, to_stderr=False)
    c.print(f"imported  {render.escape(', '.join(map(str, logs)))} -> {render.escape(str(run_dir))}")
    c.print(f"run id    {render.escape(run['runId'])} ({run['status']}, {lines} result lines)")
    c.print(f"outcome   intact ({'signed' if signed else 'unsigned'}), sealed ingest")
    c.print(f"run hash  {run_hash}")


def _say_left_out(skipped: list[dict], *, to_stderr: bool) -> None:
    """Each event --skip-unplaceable left out, one line each (people's output is stderr in both modes)."""
    if not skipped:
        return
    c = render.console()
    for x in skipped:
        c.print(f"left out  [{x['rule']}] at {render.escape(x['where'])}: case {render.escape(repr(x['case']))}, "
                f"evaluation {render.escape(repr(x['evaluation']))}: {render.escape(x['message'])}")
    c.print(f"left out  {len(skipped)} evaluation events (counted in run.json ext aefgate.otel.unplaceable)")


@export_app.command("otel")
def export_otel(
    run: Path = typer.Argument(..., metavar="RUN", help="The run folder."),
    out: Optional[Path] = typer.Argument(None, metavar="[OUT]", help="The OTLP/JSON logs file to write (one "
                                         "LogsData per line); or --to."),
    to: Optional[str] = typer.Option(None, "--to", help="An OTLP/HTTP endpoint (http(s)://host:4318): POST the "
                                     "events to /v1/logs (with the run's other log records) and the run's traces "
                                     "to /v1/traces, instead of writing a file."),
    encoding: str = typer.Option("protobuf", "--encoding", help="With --to: protobuf (the default of OTLP/HTTP) "
                                 "or json."),
    header: List[str] = typer.Option([], "--header", help="With --to: a request header K=V (repeatable), e.g. an "
                                     "API key; never written anywhere."),
    retries: int = typer.Option(5, "--retries", help="With --to: retries of a request (429, 502, 503, 504, "
                                "connection errors; Retry-After honoured)."),
    timeout: float = typer.Option(30.0, "--timeout", help="With --to: seconds a request may take, retries "
                                  "included."),
    aigp: bool = typer.Option(False, "--aigp", help="Also write each line's AIGP grader type (aigp.grader.type; "
                              "aigp.grader.confidence UNCALIBRATED for a judge without calibration): "
                              "docs/mappings/aigp.md."),
    name_from: str = typer.Option("summary", "--name-from", help="How a line without scores that no summary entry "
                                  "names is named (OT-1): summary (the page: refused) or path (aefgate's "
                                  "extension: the event takes the line's path as its name; docs/mappings/otel.md)."),
    service_name: Optional[str] = typer.Option(None, "--service-name", help="The events' resource service.name "
                                               "(default: the run's subject.telemetry.serviceName; with --to, "
                                               "else the subject's name, so a receiver groups the run's events "
                                               "together; a file keeps the page's rule, no resource: OT-2)."),
    as_json: bool = JSON_OPT,
) -> None:
    """Export a run that verifies as OpenTelemetry gen_ai.evaluation.result events: one OTLP/JSON LogsData line per
    result line, one record per score (interop/opentelemetry.md, AEF -> OpenTelemetry; OT-8: a run that does not
    verify is refused, exit 1), to a file or, with --to, to an OTLP/HTTP endpoint (exit 1 when a request is given
    up or refused: OTLP-3, naming the endpoint and its answer).

    Examples: aefgate export otel runs/refunds out/refunds.otlp.jsonl;
    aefgate export otel runs/refunds --to http://127.0.0.1:4318 --header "api-key=..."
    """
    from aefgate.cli.inputs import require_dir
    from aefgate.errors import Refusal

    require_dir(run)
    if (out is None) == (to is None):
        raise Refusal("CLI-2", "give OUT (a file) or --to URL (an OTLP/HTTP endpoint), one of them", "OUT")
    if to is not None:
        from aefgate.bus.retry import Policy
        from aefgate.converters.otel.exporter import send_otel

        headers = {}
        for pair in header:
            k, sep, v = pair.partition("=")
            if not sep or not k.strip():
                raise Refusal("CLI-2", "a header is written K=V", "--header")
            headers[k.strip()] = v
        if retries < 0:
            raise Refusal("CLI-2", "--retries is 0 or more", "--retries")
        if timeout <= 0:
            raise Refusal("CLI-2", "--timeout is more than 0", "--timeout")
        sent = send_otel(run, to, encoding=encoding, headers=headers, policy=Policy(retries=retries, timeout=timeout),
                         aigp=aigp, name_from=name_from, service_name=service_name)
        rejected = sum(rep["rejected"] for rep in sent.values())
        problem = None
        if rejected:  # the receiver did not keep every record: not done (exit 1), with the counts and first messages
            first = "; ".join(m for rep in sent.values() for m in rep["messages"][:3])
            counts = ", ".join(f"{rep['rejected']} of {rep['records']} {signal} records" for signal, rep in sent.items()
                               if rep["rejected"])
            problem = Refusal("OTLP-3", f"the receiver rejected {counts}: {first}", to, exit_code=1)
        if as_json:  # one JSON value: what was sent, and the problem when there is one
            render.emit_json({"run": str(run), "to": to, **sent, **(problem.to_json() if problem else {})})
            if problem is not None:
                raise typer.Exit(problem.exit_code)
            return
        c = render.console()
        for signal, rep in sent.items():
            c.print(f"sent      {signal}: {rep['records']} records in {rep['requests']} requests to "
                    f"{render.escape(rep['endpoint'])}" + (f", {rep['rejected']} rejected: "
                                                          f"{render.escape('; '.join(rep['messages'][:3]))}"
                                                          if rep["rejected"] else ""))
        if problem is not None:
            raise problem
        return
    from aefgate.converters.otel.exporter import to_otel
    from aefgate.fsutil import count_lines

    path = to_otel(run, out, aigp=aigp, name_from=name_from, service_name=service_name)
    n = count_lines(path)
    if as_json:
        render.emit_json({"run": str(run), "output": str(path), "lines": n})
        return
    render.console().print(f"exported  {render.escape(str(run))} -> {render.escape(str(path))} ({n} LogsData lines)")
