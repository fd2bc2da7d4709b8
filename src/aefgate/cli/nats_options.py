"""The NATS connection options every command that talks to NATS takes (``publish``, ``serve ingest``, ``serve otlp
--bus``), built into :class:`aefgate.bus.nats_connect.NatsAuth` (docs/design/bus.md, "Production NATS")."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

TLS_CA = typer.Option(None, "--nats-tls-ca", help="NATS: a PEM file of the CA certificates that sign the server's "
                      "certificate (TLS, the server verified).")
TLS_CERT = typer.Option(None, "--nats-tls-cert", help="NATS: the client certificate (PEM), for a server that "
                        "verifies its clients; with --nats-tls-key.")
TLS_KEY = typer.Option(None, "--nats-tls-key", help="NATS: the client certificate's private key (PEM).")
CREDS = typer.Option(None, "--nats-creds", help="NATS: a credentials file (.creds: user JWT and NKEY seed, as nsc "
                     "writes it).")
NKEY = typer.Option(None, "--nats-nkey", help="NATS: a file holding a user NKEY seed (SU...).")
TOKEN_ENV = typer.Option(None, "--nats-token-env", help="NATS: the environment variable holding the server's "
                         "token (never on the command line, never written). user:password@ in the URL works too.")

FLAGS = {"nats_tls_ca": "--nats-tls-ca", "nats_tls_cert": "--nats-tls-cert", "nats_tls_key": "--nats-tls-key",
         "nats_creds": "--nats-creds", "nats_nkey": "--nats-nkey", "nats_token_env": "--nats-token-env",
         "nats_auth": "--nats-*"}


def nats_auth(tls_ca: Optional[Path], tls_cert: Optional[Path], tls_key: Optional[Path], creds: Optional[Path],
              nkey: Optional[Path], token_env: Optional[str]):
    """The options as a :class:`NatsAuth`, or None when none is given."""
    from aefgate.bus.nats_connect import NatsAuth

    auth = NatsAuth(tls_ca=_s(tls_ca), tls_cert=_s(tls_cert), tls_key=_s(tls_key), creds=_s(creds), nkey=_s(nkey),
                    token_env=token_env)
    return auth if auth.given() else None


def flag_refusal(r):
    """A library refusal placed at a NATS parameter (``nats_tls_ca``, ...), placed at its flag instead."""
    from aefgate.errors import Refusal

    if isinstance(r, Refusal) and r.where in FLAGS:
        return Refusal(r.rule, r.message, FLAGS[r.where], exit_code=r.exit_code)
    return r


def _s(p: Optional[Path]) -> Optional[str]:
    return str(p) if p is not None else None
