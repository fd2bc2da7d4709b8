"""OpenTelemetry commands: the hooks of ``aefgate import otel`` and ``aefgate export otel`` (interop/opentelemetry.md,
implemented by :mod:`aefgate.converters.otel`; OTLP files by :mod:`aefgate.formats.otlp`). The commands are made from
the converters' declared options (:mod:`aefgate.cli.converter_cmds`); these hooks add several inputs, ``--key``,
``export otel --to`` and its request options, and the output."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from aefgate.cli import render
from aefgate.cli.converter_cmds import JSON_OPT, command_hook


@command_hook(types={"traces": List[Path], "key": Optional[Path]})
def import_otel(
    logs: List[Path] = typer.Argument(..., metavar="LOGS...", help="OTLP logs, one or more: an OTLP/JSON file (one "
                                      "LogsData per line, the file exporter's form), a protobuf request body (.pb, "
                                      "gzip or not), or a folder of them."),
    out: Path = typer.Argument(..., metavar="OUT", help="The run folder to write (absent or empty)."),
    *,
    options: dict,
    as_json: bool = JSON_OPT,
) -> None:
    """Import OpenTelemetry gen_ai.evaluation.result events (and their traces) as an AEF run, sealed ingest
    (interop/opentelemetry.md, OpenTelemetry -> AEF).

    Example: aefgate import otel logs.otlp.jsonl runs/evals --traces traces.otlp.jsonl --subject agent:travel
    """
    from aefgate.converters.otel.importer import from_otel
    from aefgate.aef import jsonio
    from aefgate.aef.seal import seal_run_hash
    from aefgate.aef.signatures import signing_key_of
    from aefgate.fsutil import count_lines

    skipped: list[dict] = []
    signing_key = signing_key_of(options.pop("key"))  # before anything is written
    options["source"] = options.pop("from")
    run_dir = from_otel(logs, out, key=signing_key, skipped=skipped, **options)
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


def export_otel(
    run: Path = typer.Argument(..., metavar="RUN", help="The run folder."),
    out: Optional[Path] = typer.Argument(None, metavar="[OUT]", help="The OTLP/JSON logs file to write (one "
                                         "LogsData per line); or --to."),
    *,
    options: dict,
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
        from aefgate.net.retry import Policy
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
                         **options)
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

    path = to_otel(run, out, **options)
    n = count_lines(path)
    if as_json:
        render.emit_json({"run": str(run), "output": str(path), "lines": n})
        return
    render.console().print(f"exported  {render.escape(str(run))} -> {render.escape(str(path))} ({n} LogsData lines)")
