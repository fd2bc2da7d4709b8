"""``aefgate serve evaluation-api RUN``: a run served as the Evaluation API, for integration tests of its clients
(docs/mappings/evaluation-api.md, "Serving a run"). The responses are the export's (:mod:`.exporter`), made once at
start from a run that verifies (EVAPI-8); the HTTP layer is aefgate's one (:mod:`aefgate.net.http_server`).

- ``GET /api/v2/evaluation/status?sessionId=ID``: 200 with the case's response; 404 for a session the run does not
  hold; 400 without ``sessionId``.
- ``GET /api/evaluation/status?sessionId=ID`` (v1): the same, except that a FINISHED response with an insight still
  undecided (``value: null``) is answered ``{"status": "NOT_READY"}`` (v1 reports results only once every insight
  is decided).
- ``GET /healthz``: 200.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Any, Callable

from aefgate.formats.evaluation_api import dumps
from aefgate.net.http_server import application, hostport, start

__all__ = ["serve", "responses"]


def _undecided(resp: dict) -> bool:
    for s in resp.get("results") or ():
        items = s.get("insights") if s.get("type") == "GROUP" else [s]
        if any(i.get("value") is None for i in items or ()):
            return True
    return False


def responses(run_dir: str | os.PathLike[str]) -> dict[str, tuple[bytes, bytes]]:
    """session id -> (the v2 body, the v1 body)."""
    from aefgate.converters.evaluation_api.exporter import export_responses

    out = {}
    for case, resp in export_responses(run_dir):
        v2 = dumps(resp)
        v1 = dumps({"status": "NOT_READY"}) if resp["status"] == "FINISHED" and _undecided(resp) else v2
        out[case] = (v2, v1)
    return out


def serve(run_dir: str | os.PathLike[str], *, listen: str = "127.0.0.1:8080",
          say: Callable[[str], None] | None = None) -> dict:
    """Serve until SIGTERM or SIGINT; return the request counts by status."""
    from aiohttp import web  # lazy: a service's dependency, not every command's

    host, port = hostport(listen, "listen")
    say = say or (lambda s: None)
    bodies = responses(Path(run_dir))  # the run verifies, or EVAPI-8 before listening
    counts: dict[str, int] = {}

    def handler(v1: bool):
        async def handle(request: Any) -> Any:
            session = request.query.get("sessionId")
            if not session:
                status, body = 400, {"error": "sessionId is required"}
                counts["400"] = counts.get("400", 0) + 1
                return web.json_response(body, status=status)
            found = bodies.get(session)
            if found is None:
                counts["404"] = counts.get("404", 0) + 1
                return web.json_response({"error": f"no session {session}"}, status=404)
            counts["200"] = counts.get("200", 0) + 1
            return web.Response(body=found[1] if v1 else found[0], content_type="application/json")
        return handle

    async def healthz(_r: Any) -> Any:
        return web.Response(text="ok\n")

    async def main() -> None:
        app = application(1 << 16)
        app.router.add_get("/api/v2/evaluation/status", handler(False))
        app.router.add_get("/api/evaluation/status", handler(True))
        app.router.add_get("/healthz", healthz)
        runner = await start(app, host, port)
        say(f"listening http://{host}:{port}/api/v2/evaluation/status ({len(bodies)} sessions of {run_dir})")
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for s in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(s, stop.set)
        await stop.wait()
        await runner.cleanup()

    asyncio.run(main())
    say(f"stopped   {sum(counts.values())} requests")
    return {"sessions": len(bodies), "requests": counts}
