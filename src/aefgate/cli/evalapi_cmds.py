"""Evaluation API commands: ``aefgate import evaluation-api``, ``aefgate export evaluation-api`` and ``aefgate serve
evaluation-api`` (docs/mappings/evaluation-api.md; :mod:`aefgate.converters.evaluation_api`). The import and export
commands are made from the converters' declared options (:mod:`aefgate.cli.converter_cmds`); these hooks add the
live API (``--url``, ``--session``, ...) and the output."""

from __future__ import annotations

import os
from pathlib import Path
from typing import List, Optional

import typer

from aefgate.cli import render
from aefgate.cli.converter_cmds import JSON_OPT, command_hook
from aefgate.cli.serve_cmds import serve_app


@command_hook(types={"key": Optional[Path]})
def import_evaluation_api(
    paths: List[Path] = typer.Argument(..., metavar="[RESPONSES...] OUT", help="Response files (one "
                                       "EvaluationStatusResponse each) or folders of .json files, then the run "
                                       "folder to write (absent or empty). With --url, only OUT."),
    *,
    options: dict,
    url: Optional[str] = typer.Option(None, "--url", help="The API's base URL, http(s)://host:port/prefix (port and prefix optional): "
                                      "poll GET /api/v2/evaluation/status for each --session until it is "
                                      "terminal."),
    session: List[str] = typer.Option([], "--session", help="With --url: a session id (repeatable)."),
    token_env: Optional[str] = typer.Option(None, "--token-env", help="With --url: the environment variable "
                                            "holding the bearer token (sent as Authorization; never written)."),
    timeout: float = typer.Option(300.0, "--timeout", help="With --url: seconds to poll a session before taking "
                                  "its NOT_READY answer as the result (an error line, EVAPI-12)."),
    poll: float = typer.Option(1.0, "--poll", help="With --url: seconds between polls at first (doubling, at most "
                               "30; Retry-After honoured)."),
    api: str = typer.Option("v2", "--api", help="With --url: v2 (/api/v2/evaluation/status) or v1 "
                            "(/api/evaluation/status)."),
    as_json: bool = JSON_OPT,
) -> None:
    """Import Evaluation API responses (one session each) as an AEF run, sealed ingest: a session is a case, each
    insight a result line (docs/mappings/evaluation-api.md).

    Examples: aefgate import evaluation-api responses/ runs/support --subject agent:acme-support;
    aefgate import evaluation-api runs/live --url https://api.example --session 3fa85f64-... --token-env EVAL_TOKEN
    --subject agent:acme-support
    """
    from aefgate.converters.evaluation_api.importer import from_evaluation_api
    from aefgate.errors import Refusal
    from aefgate.aef.signatures import signing_key_of

    *inputs, out = paths
    signing_key = signing_key_of(options.pop("key"))  # before anything is written
    subject = options["subject"]
    fetched: list = []
    source = options.pop("from")
    if url is not None:
        fetched, source = _fetch_live(url, inputs, out, session=session, token_env=token_env, timeout=timeout,
                                      poll=poll, api=api, subject=subject, source=source, as_json=as_json)
    elif session or token_env is not None:
        raise Refusal("CLI-2", "--session and --token-env go with --url", "--session" if session else "--token-env")
    elif not inputs:
        raise Refusal("CLI-2", "give the response files (or folders) and OUT, or --url", "RESPONSES")
    run_dir = from_evaluation_api(inputs or None, out, fetched=fetched, source=source, key=signing_key, **options)
    _report_import(inputs, url, run_dir, as_json=as_json)


def _fetch_live(url: str, inputs: list, out: Path, *, session: list[str], token_env: str | None, timeout: float,
                poll: float, api: str, subject: str | None, source: str | None,
                as_json: bool) -> tuple[list, str | None]:
    """``import evaluation-api --url``: the options checked, then each session polled until it is terminal;
    ``(the responses fetched, the run's imported.from)``."""
    from aefgate.converters.evaluation_api.live import fetch_sessions, status_url
    from aefgate.errors import Refusal
    from aefgate.fsutil import check_destination

    if inputs:
        raise Refusal("CLI-2", "with --url give only OUT (the responses come from the API)", str(inputs[0]))
    if not session:
        raise Refusal("CLI-2", "--url needs at least one --session", "--session")
    if api not in ("v1", "v2"):
        raise Refusal("CLI-2", f"--api is v1 or v2, not {api!r}", "--api")
    token = None
    if token_env is not None:
        token = os.environ.get(token_env)
        if not token:
            raise Refusal("CLI-2", f"the environment variable {token_env} is not set", "--token-env")
    if subject is None:
        raise Refusal("EVAPI-7", "no subject: a response names no agent; give --subject", "--subject")
    status_url(url, session[0], api)  # a malformed URL before any request
    check_destination(Path(os.path.abspath(out)))  # before polling: a destination in use is refused at once
    say = (lambda s: None) if as_json else (lambda s: render.console().print(render.escape(s)))
    fetched = list(fetch_sessions(url, list(session), token=token, timeout=timeout, poll=poll, version=api,
                                  say=say))
    from aefgate.masking import strip_userinfo

    source = source or f"Evaluation API {strip_userinfo(url).rstrip('/')}"  # imported.from: no credentials
    return fetched, source


def _report_import(inputs: list, url: str | None, run_dir: Path, *, as_json: bool) -> None:
    """Report the imported run: its id, status, lines, run hash and whether it is signed (JSON or words)."""
    from aefgate.aef import jsonio
    from aefgate.aef.seal import seal_run_hash
    from aefgate.fsutil import count_lines

    run = jsonio.read_json(run_dir / "run.json")
    lines = count_lines(run_dir / "results.ndjson")
    run_hash = seal_run_hash(run_dir)
    signed = (run_dir / "attestation.dsse.json").exists()
    if as_json:
        render.emit_json({"input": [str(x) for x in inputs] or [url], "output": str(run_dir), "runId": run["runId"],
                          "status": run["status"], "results": lines, "outcome": "intact", "runHash": run_hash,
                          "signed": signed})
        return
    c = render.console()
    c.print(f"imported  {render.escape(', '.join(map(str, inputs)) or str(url))} -> {render.escape(str(run_dir))}")
    c.print(f"run id    {render.escape(run['runId'])} ({run['status']}, {lines} result lines)")
    c.print(f"outcome   intact ({'signed' if signed else 'unsigned'}), sealed ingest")
    c.print(f"run hash  {run_hash}")


def export_evaluation_api(
    run: Path = typer.Argument(..., metavar="RUN", help="The run folder."),
    out: Path = typer.Argument(..., metavar="OUT", help="A folder (absent or empty) of <case id>.json responses, or "
                                "one .json file for a run of one case."),
    as_json: bool = JSON_OPT,
) -> None:
    """Export a run that verifies as Evaluation API responses, one EvaluationStatusResponse per case (FINISHED,
    sections ascending by order, the featured outcome twice); EVAPI-8 (exit 1) for a run that does not verify.

    Example: aefgate export evaluation-api runs/support out/responses/
    """
    from aefgate.cli.inputs import require_dir
    from aefgate.converters.evaluation_api.exporter import to_evaluation_api

    require_dir(run)
    dest = to_evaluation_api(run, out)
    files = [dest] if dest.is_file() else sorted(dest.iterdir())
    if as_json:
        render.emit_json({"run": str(run), "output": str(dest), "responses": len(files)})
        return
    render.console().print(f"exported  {render.escape(str(run))} -> {render.escape(str(dest))} ({len(files)} "
                           f"responses)")


@serve_app.command("evaluation-api")
def serve_evaluation_api(
    run: Path = typer.Argument(..., metavar="RUN", help="The run folder (verified at start)."),
    listen: str = typer.Option("127.0.0.1:8080", "--listen", help="HOST:PORT to serve on."),
    as_json: bool = typer.Option(False, "--json", help="Write the request counts as one JSON value on stdout when "
                                 "the server stops."),
) -> None:
    """Serve a run as the Evaluation API: GET /api/v2/evaluation/status?sessionId=ID (and the v1 path) answer the
    case's response, 404 for an unknown session, 400 without sessionId; for integration tests of the API's clients
    (docs/mappings/evaluation-api.md). SIGTERM or SIGINT stops it.

    Example: aefgate serve evaluation-api runs/support --listen 127.0.0.1:8080
    """
    from aefgate.cli.inputs import require_dir
    from aefgate.converters.evaluation_api.server import serve

    require_dir(run)

    def say(line: str) -> None:
        render.console().print(render.escape(line), soft_wrap=True)

    counts = serve(run, listen=listen, say=say)
    if as_json:
        render.emit_json(counts)
