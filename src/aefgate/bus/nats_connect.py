"""One way to connect to a production NATS server, for ``publish``, ``serve ingest`` and ``serve otlp --bus``
(issue 28): TLS (a CA file, a client certificate and its key), a credentials file (``.creds``: a user JWT and its
NKEY seed), an NKEY seed file, a token from an environment variable, or ``user:password@`` / ``token@`` in the URL.

- :class:`NatsAuth` holds the options (file paths and an environment variable's name: nothing secret, so a spool
  may keep it); :meth:`NatsAuth.check` refuses a missing file or a bad combination (``CLI-2``) before anything is
  sent.
- :func:`connect_options` gives the keyword arguments of ``nats.connect`` for a URL and a :class:`NatsAuth`.
- :func:`connect` makes the first connection, and reports an authentication failure (the server said
  ``Authorization Violation``, the TLS handshake failed: a certificate not trusted, a client certificate refused) as
  the caller's rule at once, instead of retrying until a timeout: :class:`AuthFailed` carries the reason.

Credentials never appear in a message: the server is shown as :func:`aefgate.masking.mask_url` writes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import ssl
from dataclasses import asdict, dataclass, fields
from typing import Any, Awaitable, Callable
from urllib.parse import urlsplit, urlunsplit

from aefgate.masking import mask, mask_url
from aefgate.errors import Refusal

__all__ = ["AuthFailed", "NatsAuth", "auth_failure", "connect", "connect_options", "server_of"]


@dataclass(frozen=True)
class NatsAuth:
    """How to authenticate to NATS, besides the URL's ``user:password@`` or ``token@``.

    ``tls_ca``: a PEM file of the CA certificates that sign the server's certificate (TLS on, server verified);
    ``tls_cert`` and ``tls_key``: the client certificate and its private key (PEM), for a server that verifies its
    clients (``verify: true``); ``creds``: a NATS credentials file (user JWT + NKEY seed, as ``nsc`` writes it);
    ``nkey``: a file holding a user NKEY seed (``SU...``); ``token_env``: the environment variable holding the
    server's token (read when connecting, never written anywhere)."""

    tls_ca: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    creds: str | None = None
    nkey: str | None = None
    token_env: str | None = None

    def given(self) -> bool:
        return any(getattr(self, f.name) for f in fields(self))

    def to_json(self) -> dict:
        """The options as a spool keeps them: paths made absolute, the variable's name; never a secret."""
        out = {}
        for k, v in asdict(self).items():
            if v:
                out[k] = v if k == "token_env" else os.path.abspath(v)
        return out

    @classmethod
    def from_json(cls, value: Any) -> "NatsAuth":
        if not isinstance(value, dict):
            return cls()
        return cls(**{f.name: value[f.name] for f in fields(cls) if isinstance(value.get(f.name), str)})

    def check(self) -> None:
        """``CLI-2`` for a file that is not there, a certificate without its key (or the reverse), both ``creds``
        and ``nkey``, a token variable that is not set, or NKEYs without the ``nkeys`` package."""
        for name in ("tls_ca", "tls_cert", "tls_key", "creds", "nkey"):
            path = getattr(self, name)
            if path is not None and not os.path.isfile(path):
                raise Refusal("CLI-2", f"no such file: {path}", f"nats_{name}")
        if bool(self.tls_cert) != bool(self.tls_key):
            raise Refusal("CLI-2", "a client certificate goes with its private key: give both nats_tls_cert and "
                          "nats_tls_key", "nats_tls_cert" if not self.tls_cert else "nats_tls_key")
        if self.creds and self.nkey:
            raise Refusal("CLI-2", "a credentials file holds its own NKEY seed: give nats_creds or nats_nkey, not "
                          "both", "nats_nkey")
        if self.token_env is not None and not os.environ.get(self.token_env):
            raise Refusal("CLI-2", f"the environment variable {self.token_env} is not set", "nats_token_env")
        if self.creds or self.nkey:
            try:
                import nkeys  # noqa: F401  (nats-py signs the server's nonce with it)
            except ImportError:
                raise Refusal("CLI-2", "NKEY and credentials-file authentication need the nkeys package: pip "
                              "install nkeys", "nats_creds" if self.creds else "nats_nkey") from None

    def tls_context(self) -> ssl.SSLContext | None:
        if not (self.tls_ca or self.tls_cert):
            return None
        try:
            ctx = ssl.create_default_context(cafile=self.tls_ca)
        except (OSError, ssl.SSLError) as e:
            raise Refusal("CLI-2", f"the CA file does not load: {mask(e)}", "nats_tls_ca") from None
        if self.tls_cert:
            try:
                ctx.load_cert_chain(self.tls_cert, self.tls_key)
            except (OSError, ssl.SSLError) as e:
                raise Refusal("CLI-2", f"the client certificate and key do not load: {mask(e)}",
                              "nats_tls_cert") from None
        return ctx


def server_of(url: str) -> str:
    """The server part of a ``nats://[userinfo@]host[:port]/SUBJECT`` URL, userinfo kept (nats-py reads
    ``user:password`` or a token from it), port 4222 by default."""
    u = urlsplit(url)
    host = u.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    userinfo = u.netloc.rpartition("@")[0]
    netloc = (f"{userinfo}@" if userinfo else "") + f"{host}:{u.port or 4222}"
    return urlunsplit((u.scheme or "nats", netloc, "", "", ""))


def connect_options(url: str, auth: NatsAuth | None) -> dict:
    """``nats.connect`` keyword arguments for ``url`` and ``auth`` (checked first: :meth:`NatsAuth.check`)."""
    auth = auth or NatsAuth()
    auth.check()
    opts: dict[str, Any] = {"servers": [server_of(url)]}
    ctx = auth.tls_context()
    if ctx is not None:
        opts["tls"] = ctx
        opts["tls_hostname"] = urlsplit(url).hostname
    if auth.creds:
        opts["user_credentials"] = auth.creds
    if auth.nkey:
        opts["nkeys_seed"] = auth.nkey
    if auth.token_env:
        opts["token"] = os.environ[auth.token_env]
    return opts


class AuthFailed(Exception):
    """The server refused the connection's credentials, or the TLS handshake failed."""


def auth_failure(e: BaseException) -> str | None:
    """Why ``e`` is an authentication failure (a text without secrets), or None when it is not one."""
    import nats.errors  # lazy: nats-py is heavy, loaded only for a NATS destination

    text = str(e)
    low = text.lower()
    if isinstance(e, nats.errors.AuthorizationError) or "authorization violation" in low or \
            "authentication" in low and ("expired" in low or "timeout" in low or "fail" in low):
        return mask(f"the server refused the credentials ({text.strip() or type(e).__name__})")
    if isinstance(e, ssl.SSLError) or isinstance(e, (nats.errors.SecureConnFailedError,
                                                     nats.errors.SecureConnRequiredError,
                                                     nats.errors.SecureConnWantedError)):
        return mask(f"TLS failed ({type(e).__name__}: {text.strip()})")
    if isinstance(e, nats.errors.InvalidUserCredentialsError) or type(e).__module__.startswith("nkeys"):
        return mask(f"the credentials do not read ({type(e).__name__}: {text.strip()})")
    return None


async def connect(url: str, auth: NatsAuth | None, *, timeout: float | None = None,
                  stop: asyncio.Event | None = None,
                  error_cb: Callable[[Exception], Awaitable[None]] | None = None, **options: Any) -> Any:
    """The first connection to ``url`` (nats-py's client, connected), with nats-py retrying a server that does not
    answer (``max_reconnect_attempts=-1`` unless given) until ``timeout`` seconds (None: no bound) or ``stop`` is
    set (then None is returned). :class:`AuthFailed` as soon as the server refuses the credentials or TLS fails;
    :class:`asyncio.TimeoutError` past ``timeout``. ``options`` go to ``nats.connect`` (``name``, callbacks, ...)."""
    import nats  # lazy: nats-py is heavy, loaded only for a NATS destination

    failed: list[str] = []
    failed_event = asyncio.Event()

    async def watch(e: Exception) -> None:
        why = auth_failure(e)
        if why is not None and not failed:
            failed.append(why)
            failed_event.set()
        if error_cb is not None:
            await error_cb(e)

    opts = {"allow_reconnect": True, "max_reconnect_attempts": -1, "reconnect_time_wait": 0.5,
            **connect_options(url, auth), **options, "error_cb": watch}
    nc = nats.NATS()
    task = asyncio.ensure_future(nc.connect(**opts))
    waiters = {task, asyncio.ensure_future(failed_event.wait())}
    if stop is not None:
        waiters.add(asyncio.ensure_future(stop.wait()))
    try:
        done, _ = await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waiters:
            if w is not task:
                w.cancel()
    if task in done and not failed:
        exc = task.exception()
        if exc is None:
            return nc
        why = auth_failure(exc)
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(nc.close(), 1.0)
        if why is not None:
            raise AuthFailed(why) from None
        raise exc
    task.cancel()
    with contextlib.suppress(BaseException):
        await task
    with contextlib.suppress(BaseException):
        await asyncio.wait_for(nc.close(), 1.0)
    if failed:
        raise AuthFailed(failed[0])
    if stop is not None and stop.is_set():
        return None
    raise asyncio.TimeoutError(f"no connection to {mask_url(server_of(url))} within {timeout:g} s")
