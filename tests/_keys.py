"""Keys for signature tests: made by aefgate and, independently, by the OpenSSL command line. Real keys, real
crypto, nothing mocked. These are test keys: never trust them."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

OPENSSL = shutil.which("openssl")

# OpenSSL genpkey arguments per algorithm
GENPKEY = {
    "ecdsa-p256": ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"],
    "ed25519": ["-algorithm", "ed25519"],
    "ecdsa-p384": ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384"],
    "rsa": ["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"],
}


def openssl(*args: str | Path, stdin: bytes | None = None) -> bytes:
    """Run the ``openssl`` command line (skips the test when the machine has none)."""
    if OPENSSL is None:  # pragma: no cover - the test machines have it
        pytest.skip("the openssl command line is not installed: the independent-implementation checks need it")
    p = subprocess.run([OPENSSL, *map(str, args)], input=stdin, capture_output=True, timeout=120)
    assert p.returncode == 0, p.stderr.decode(errors="replace")
    return p.stdout


def openssl_key(folder: Path, algorithm: str, name: str | None = None) -> Path:
    """A PKCS#8 PEM private key made by ``openssl genpkey``."""
    path = folder / f"{name or 'openssl-' + algorithm}.pem"
    openssl("genpkey", *GENPKEY[algorithm], "-out", path)
    return path


def openssl_public_pem(key: Path) -> str:
    return openssl("pkey", "-in", key, "-pubout").decode("ascii")


def openssl_public_der(key: Path) -> bytes:
    return openssl("pkey", "-in", key, "-pubout", "-outform", "DER")


def openssl_sign(key: Path, message: bytes, algorithm: str, folder: Path) -> bytes:
    """``openssl pkeyutl -sign`` over ``message`` itself (ECDSA: SHA-256, DER out; Ed25519: pure)."""
    msg = folder / "message.bin"
    msg.write_bytes(message)
    digest = ["-digest", "sha256"] if algorithm == "ecdsa-p256" else []
    return openssl("pkeyutl", "-sign", "-inkey", key, "-rawin", *digest, "-in", msg)


def openssl_verify(public_pem: str, message: bytes, sig: bytes, algorithm: str, folder: Path) -> bool:
    (folder / "pub.pem").write_text(public_pem)
    (folder / "message.bin").write_bytes(message)
    (folder / "sig.bin").write_bytes(sig)
    digest = ["-digest", "sha256"] if algorithm == "ecdsa-p256" else []
    p = subprocess.run([OPENSSL, "pkeyutl", "-verify", "-pubin", "-inkey", folder / "pub.pem", "-rawin", *digest,
                        "-in", folder / "message.bin", "-sigfile", folder / "sig.bin"], capture_output=True)
    return p.returncode == 0


def aefgate_key(folder: Path, algorithm: str, name: str | None = None) -> Path:
    """A PKCS#8 PEM private key made by aefgate's ``keygen``."""
    from aefgate.aef.signatures import keygen

    private_pem, _public, _entry = keygen(algorithm, "git:test@example.com")
    path = folder / f"{name or 'aefgate-' + algorithm}.pem"
    path.write_bytes(private_pem)
    return path


def make_key(folder: Path, source: str, algorithm: str, name: str | None = None) -> Path:
    return (openssl_key if source == "openssl" else aefgate_key)(folder, algorithm, name)


def public_pem_of(key: Path) -> str:
    from aefgate.aef.signatures import load_private_key

    return load_private_key(key).public_pem().decode("ascii")


def policy_doc(*entries: tuple[str, str] | tuple[str, str, list[str]]) -> dict:
    """``{"keys": [...]}`` from (identity, public PEM[, may]) tuples, in that order."""
    keys = []
    for e in entries:
        k = {"identity": e[0], "publicKey": e[1]}
        if len(e) > 2:
            k["may"] = e[2]
        keys.append(k)
    return {"keys": keys}


def pem_body_lines(pem: bytes | str) -> list[str]:
    """The base64 lines of a PEM (what must never appear in any output when the PEM is a private key)."""
    text = pem.decode("ascii") if isinstance(pem, bytes) else pem
    return [ln for ln in text.splitlines() if ln and not ln.startswith("-----")]
