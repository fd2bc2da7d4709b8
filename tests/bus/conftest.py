from __future__ import annotations

import pytest

from tests.bus._nats import NatsServer


@pytest.fixture
def nats_server(tmp_path_factory):
    """A fresh nats-server with JetStream on a free loopback port (killed after the test)."""
    server = NatsServer(tmp_path_factory.mktemp("nats"))
    server.start()
    try:
        yield server
    finally:
        server.stop()
