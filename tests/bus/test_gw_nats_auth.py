"""Issue 28: production NATS. ``aefgate publish`` and ``aefgate serve ingest`` against real nats-servers started
with TLS (client certificates verified), a token, NKEY users, and operator mode with a user credentials file
(JWTs made here with the ``nkeys`` package, as ``nsc`` would); the wrong credentials are refused as an
authentication failure (``PUB-6`` / ``INGEST-6``, exit 2) within seconds, not as a timeout, and never shown.

The throwaway CA and certificates are made with ``cryptography``; the NKEYs and JWTs with ``nkeys`` (nats-py's
optional dependency for NKEY authentication).
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import ipaddress
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aefgate.bus.ingest import run_name
from aefgate.converters.aep.exporter import export_events
from aefgate.aef.verifier import verify_run
from tests.bus._nats import NatsServer
from tests.bus.test_ingest import AT, ENTRY, SPEC, reference, results, wait_for
from tests.conftest import aefgate, cli_env

try:
    import nkeys  # nats-py's optional dependency for NKEY and credentials-file authentication
except ImportError:  # the NKEY and credentials-file cases are skipped, and say why; TLS and tokens still run
    nkeys = None
NO_NKEYS = "NKEY and credentials-file authentication need the nkeys package (pip install nkeys)"

RUN = SPEC / "aef-inspect" / "run"
TOKEN = "gw-token-5e6f7a8b9c"


# -- credentials made here --------------------------------------------------------------------------------------

def _pki(d: Path) -> dict[str, Path]:
    """A CA, a server certificate for 127.0.0.1, a client certificate, and a second CA that signs nothing here."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc)

    def name(cn: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    def write(stem: str, key, cert) -> None:
        (d / f"{stem}.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        (d / f"{stem}-key.pem").write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                                              serialization.PrivateFormat.PKCS8,
                                                              serialization.NoEncryption()))

    def ca(stem: str):
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (x509.CertificateBuilder().subject_name(name(stem)).issuer_name(name(stem))
                .public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
                .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                             content_commitment=False, key_encipherment=False,
                                             data_encipherment=False, key_agreement=False, encipher_only=False,
                                             decipher_only=False), critical=True)
                .sign(key, hashes.SHA256()))
        write(stem, key, cert)
        return key, cert

    def leaf(stem: str, issuer, usage, sans):
        ikey, icert = issuer
        key = ec.generate_private_key(ec.SECP256R1())
        b = (x509.CertificateBuilder().subject_name(name(stem)).issuer_name(icert.subject)
             .public_key(key.public_key()).serial_number(x509.random_serial_number())
             .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
             .add_extension(x509.ExtendedKeyUsage([usage]), critical=False))
        if sans:
            b = b.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        write(stem, key, b.sign(ikey, hashes.SHA256()))

    root = ca("ca")
    ca("other-ca")
    leaf("server", root, ExtendedKeyUsageOID.SERVER_AUTH,
         [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")])
    leaf("client", root, ExtendedKeyUsageOID.CLIENT_AUTH, [])
    return {k: d / f"{k}.pem" for k in ("ca", "other-ca", "server", "client")} | {
        "server-key": d / "server-key.pem", "client-key": d / "client-key.pem"}


def _b64(b: bytes) -> str:
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def _keypair(prefix: int):
    seed = nkeys.encode_seed(os.urandom(32), prefix)
    kp = nkeys.from_seed(seed)
    return seed, kp, kp.public_key.decode()


def _jwt(nats_claims: dict, sub: str, issuer, name: str) -> str:
    """A NATS v2 JWT (``ed25519-nkey``) signed by ``issuer``."""
    claims = {"iat": int(time.time()), "iss": issuer.public_key.decode(), "name": name, "sub": sub,
              "nats": nats_claims}
    claims["jti"] = base64.b32encode(hashlib.sha256(json.dumps(claims, sort_keys=True).encode()).digest()).decode()
    head = _b64(json.dumps({"typ": "JWT", "alg": "ed25519-nkey"}).encode())
    body = _b64(json.dumps(claims).encode())
    return f"{head}.{body}.{_b64(issuer.sign(f'{head}.{body}'.encode()))}"


def _creds(jwt: str, seed: bytes) -> str:
    return (f"-----BEGIN NATS USER JWT-----\n{jwt}\n------END NATS USER JWT------\n\n"
            f"-----BEGIN USER NKEY SEED-----\n{seed.decode()}\n------END USER NKEY SEED------\n")


def _operator(d: Path) -> tuple[str, Path, Path]:
    """Operator-mode configuration (a memory resolver with an account that has JetStream), a user's credentials
    file, and the credentials of a user signed by an account the server does not know."""
    _o, op, op_pub = _keypair(nkeys.PREFIX_BYTE_OPERATOR)
    _a, acct, acct_pub = _keypair(nkeys.PREFIX_BYTE_ACCOUNT)
    _s, sysa, sys_pub = _keypair(nkeys.PREFIX_BYTE_ACCOUNT)
    _x, stranger, _ = _keypair(nkeys.PREFIX_BYTE_ACCOUNT)
    lim = {"subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1, "wildcards": True, "conn": -1,
           "leaf": -1}
    js = {"mem_storage": -1, "disk_storage": -1, "streams": -1, "consumer": -1}
    conf = (f"operator: {_jwt({'type': 'operator', 'version': 2, 'system_account': sys_pub}, op_pub, op, 'op')}\n"
            f"system_account: {sys_pub}\nresolver: MEMORY\nresolver_preload: {{\n"
            f"  {acct_pub}: {_jwt({'type': 'account', 'version': 2, 'limits': lim | js}, acct_pub, op, 'acct')}\n"
            f"  {sys_pub}: {_jwt({'type': 'account', 'version': 2, 'limits': lim}, sys_pub, op, 'SYS')}\n}}\n")
    paths = []
    for stem, issuer in (("user", acct), ("stranger", stranger)):
        seed, _kp, pub = _keypair(nkeys.PREFIX_BYTE_USER)
        user = {"type": "user", "version": 2, "pub": {}, "sub": {}, "subs": -1, "data": -1, "payload": -1}
        p = d / f"{stem}.creds"
        p.write_text(_creds(_jwt(user, pub, issuer, stem), seed))
        paths.append(p)
    return conf, paths[0], paths[1]


# -- one server per kind of authentication, shared by the module ---------------------------------------------------

@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    d = tmp_path_factory.mktemp("natsauth")
    pki = _pki(d)
    confs = {
        "token": f'authorization {{ token: "{TOKEN}" }}\n',
        "tls": f'tls {{ cert_file: "{pki["server"]}", key_file: "{pki["server-key"]}", ca_file: "{pki["ca"]}", '
               f"verify: true, timeout: 5 }}\n",
    }
    creds = stranger = d / "absent.creds"
    (d / "good.nk").write_text("none")
    (d / "bad.nk").write_text("none")
    if nkeys is not None:
        good_seed, _kp, good_pub = _keypair(nkeys.PREFIX_BYTE_USER)
        bad_seed, _kp2, _ = _keypair(nkeys.PREFIX_BYTE_USER)
        (d / "good.nk").write_bytes(good_seed)
        (d / "bad.nk").write_bytes(bad_seed)
        op_conf, creds, stranger = _operator(d)
        confs["nkey"] = f"authorization {{ users: [ {{ nkey: {good_pub} }} ] }}\n"
        confs["creds"] = op_conf
    ok = {"token": ["--nats-token-env", "GW_NATS_TOKEN"],
          "nkey": ["--nats-nkey", str(d / "good.nk")],
          "tls": ["--nats-tls-ca", str(pki["ca"]), "--nats-tls-cert", str(pki["client"]),
                  "--nats-tls-key", str(pki["client-key"])],
          "creds": ["--nats-creds", str(creds)]}
    bad = {"token": ["--nats-token-env", "GW_NATS_WRONG"],
           "nkey": ["--nats-nkey", str(d / "bad.nk")],
           "tls": ["--nats-tls-ca", str(pki["ca"])],  # no client certificate: the server refuses the handshake
           "creds": ["--nats-creds", str(stranger)]}
    started = {}
    try:
        for kind, conf in confs.items():
            (d / f"{kind}.conf").write_text(conf)
            started[kind] = NatsServer(d / kind, config=d / f"{kind}.conf").start()
        yield {"servers": started, "ok": ok, "bad": bad, "pki": pki, "dir": d}
    finally:
        for s in started.values():
            s.stop()


ENV = {"GW_NATS_TOKEN": TOKEN, "GW_NATS_WRONG": "not-the-token-1234"}
KINDS = ["token", "nkey", "tls", "creds"]


@pytest.fixture(scope="module")
def events():
    if not SPEC.is_dir():
        pytest.fail(f"the AEF spec examples are missing: {SPEC}")
    return list(export_events(RUN))


def _no_secret(text: str, d: Path) -> None:
    assert TOKEN not in text and "not-the-token-1234" not in text
    for nk in ("good.nk", "bad.nk"):
        seed = (d / nk).read_text().strip()
        assert seed == "none" or seed not in text


@pytest.mark.parametrize("kind", KINDS)
def test_publish_and_ingest_with_production_auth(servers, events, tmp_path, kind):
    if kind in ("nkey", "creds") and nkeys is None:
        pytest.skip(NO_NKEYS)
    server = servers["servers"][kind]
    url = f"{server.url}/aef.gw.{kind}"
    r = aefgate("publish", RUN, "--to", url, "--create-stream", "--json", *servers["ok"][kind], env=ENV)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["acked"] == report["total"] == len(events)
    _no_secret(r.stdout + r.stderr, servers["dir"])

    out = tmp_path / "out"
    log = tmp_path / "ingest.log"
    with open(log, "wb") as err:
        proc = subprocess.Popen([sys.executable, "-c", ENTRY, "serve", "ingest", "--from", url, "--durable",
                                 f"gw-{kind}", "--out", str(out), "--idle", "0.5", "--at-fixed", AT, "--json",
                                 *servers["ok"][kind]], stdout=subprocess.PIPE, stderr=err, env=cli_env(**ENV))
    try:
        name = run_name(events[0]["session"])
        wait_for(lambda: (out / name).is_dir(), timeout=60, what=f"the run sealed ({log.read_text()[-1500:]})")
        proc.send_signal(signal.SIGTERM)
        stdout, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert proc.returncode == 0, log.read_text()
    assert json.loads(stdout)["events"] == len(events)
    assert verify_run(out / name).outcome == "intact"
    assert results(out / name) == results(reference(events, tmp_path))
    _no_secret(log.read_text(), servers["dir"])


@pytest.mark.parametrize("kind", KINDS + ["none"])
def test_wrong_credentials_are_an_authentication_failure_not_a_timeout(servers, tmp_path, kind):
    if kind in ("nkey", "creds") and nkeys is None:
        pytest.skip(NO_NKEYS)
    server = servers["servers"]["token" if kind == "none" else kind]
    url = f"{server.url}/aef.gw.{kind}"
    flags = [] if kind == "none" else servers["bad"][kind]
    t0 = time.monotonic()
    r = aefgate("publish", RUN, "--to", url, "--create-stream", "--timeout", "60", *flags, env=ENV)
    assert time.monotonic() - t0 < 30  # the deadline is 60 s: refused at once, not timed out
    assert r.returncode == 2, r.stderr
    assert "error [PUB-6]" in r.stderr and "NATS authentication failed" in r.stderr, r.stderr
    _no_secret(r.stderr + r.stdout, servers["dir"])

    out = tmp_path / "out"
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-c", ENTRY, "serve", "ingest", "--from", url, "--durable", "gw",
                        "--out", str(out), *flags], capture_output=True, text=True, timeout=120,
                       env=cli_env(**ENV))
    assert time.monotonic() - t0 < 30
    assert p.returncode == 2, p.stderr
    assert "error [INGEST-6]" in p.stderr and "NATS authentication failed" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr
    _no_secret(p.stderr + p.stdout, servers["dir"])


def test_a_server_certificate_from_another_ca_is_refused(servers, tmp_path):
    pki = servers["pki"]
    url = f"{servers['servers']['tls'].url}/aef.gw.tls"
    r = aefgate("publish", RUN, "--to", url, "--nats-tls-ca", pki["other-ca"], "--nats-tls-cert", pki["client"],
                "--nats-tls-key", pki["client-key"])
    assert r.returncode == 2 and "error [PUB-6]" in r.stderr and "TLS" in r.stderr, r.stderr


def test_bad_nats_options_are_refused_at_their_flag(servers, tmp_path):
    pki = servers["pki"]
    url = f"{servers['servers']['tls'].url}/aef.gw.tls"
    r = aefgate("publish", RUN, "--to", url, "--nats-tls-cert", pki["client"])
    assert r.returncode == 2 and "error [CLI-2] at --nats-tls-key" in r.stderr, r.stderr
    r = aefgate("publish", RUN, "--to", url, "--nats-creds", tmp_path / "absent.creds")
    assert r.returncode == 2 and "error [CLI-2] at --nats-creds" in r.stderr, r.stderr
    r = aefgate("publish", RUN, "--to", url, "--nats-token-env", "GW_UNSET_VARIABLE_28")
    assert r.returncode == 2 and "error [CLI-2] at --nats-token-env" in r.stderr, r.stderr
    r = aefgate("publish", RUN, "--to", f"file:{tmp_path / 'x.jsonl'}", "--nats-tls-ca", pki["ca"])
    assert r.returncode == 2 and "error [PUB-2]" in r.stderr, r.stderr
    p = subprocess.run([sys.executable, "-c", ENTRY, "serve", "ingest", "--from", "http://127.0.0.1:9", "--out",
                        str(tmp_path / "o"), "--nats-tls-ca", str(pki["ca"])], capture_output=True, text=True,
                       timeout=60, env=cli_env())
    assert p.returncode == 2 and "error [CLI-2]" in p.stderr, p.stderr


def test_resume_uses_the_nats_options_the_spool_recorded(servers, events, tmp_path):
    """A publish with TLS and a client certificate to a server that is not there: every event spooled, with the
    options' file paths (never a secret); --resume to the TLS server connects with them and delivers everything."""
    from tests.bus._nats import free_port

    spool = tmp_path / "spool"
    dead = f"nats://127.0.0.1:{free_port()}/aef.gw.resume"
    r = aefgate("publish", RUN, "--to", dead, "--timeout", "1", "--retries", "0", "--spool", spool, "--json",
                *servers["ok"]["tls"])
    assert r.returncode == 1, r.stderr
    meta = json.loads((spool / "spool.json").read_text())
    assert meta["pending"] == len(events)
    assert meta["nats"] == {"tls_ca": str(servers["pki"]["ca"]), "tls_cert": str(servers["pki"]["client"]),
                            "tls_key": str(servers["pki"]["client-key"])}
    url = f"{servers['servers']['tls'].url}/aef.gw.resume"
    r = aefgate("publish", "--resume", spool, "--to", url, "--create-stream", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["acked"] == len(events)
    assert json.loads((spool / "spool.json").read_text())["pending"] == 0


SAMPLE_BODY = Path(__file__).resolve().parents[2].parent / "shared" / "samples" / "otel" / "logs-1.pb"


@pytest.mark.parametrize("kind", ["token", "tls"])
def test_serve_otlp_bus_with_production_auth(servers, tmp_path, kind):
    """serve otlp --bus reaches a NATS server that wants a token or a client certificate through the same --nats-*
    options (one connection layer, bus/nats_connect.py): a real OTLP body is answered 200 once JetStream has it; wrong
    credentials are an authentication failure (OTLP-4, exit 2) at once, not a timeout, and name no secret."""
    import urllib.request

    from tests.bus._nats import free_port

    server = servers["servers"][kind]
    url = f"{server.url}/otlp.gw.{kind}"
    port = free_port()
    log = tmp_path / "otlp.log"
    with open(log, "wb") as err:
        proc = subprocess.Popen([sys.executable, "-c", ENTRY, "serve", "otlp", "--bus", url, "--listen",
                                 f"127.0.0.1:{port}", *servers["ok"][kind]], stdout=subprocess.PIPE, stderr=err,
                                env=cli_env(**ENV))
    try:
        def healthy() -> bool:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as r:
                    return r.status == 200
            except OSError:
                return proc.poll() is not None

        wait_for(healthy, timeout=60, what=f"serve otlp up ({log.read_text()[-1500:]})")
        assert proc.poll() is None, log.read_text()
        req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/logs", data=SAMPLE_BODY.read_bytes(),
                                     headers={"Content-Type": "application/x-protobuf"}, method="POST")
        with urllib.request.urlopen(req, timeout=60) as r:
            assert r.status == 200  # answered only once JetStream acknowledged the records
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
    _no_secret(log.read_text(), servers["dir"])

    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-c", ENTRY, "serve", "otlp", "--bus", url, "--listen",
                        f"127.0.0.1:{free_port()}", "--bus-timeout", "60", *servers["bad"][kind]],
                       capture_output=True, text=True, timeout=120, env=cli_env(**ENV))
    assert time.monotonic() - t0 < 30
    assert p.returncode == 2, p.stderr
    assert "error [OTLP-4]" in p.stderr and "NATS authentication failed" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr
    _no_secret(p.stderr + p.stdout, servers["dir"])
