"""Signatures and trust policies (spec 04 §4.4, [SIG-1]..[SIG-8]; spec 09 §9.3 ``signature`` and ``sign``).

- Envelopes ([SIG-1]) are DSSE v1: ``payloadType``, ``payload`` (base64 of the signed bytes) and ``signatures``
  (each a ``sig`` in base64 and an optional ``keyid``). The signed message is the pre-authentication encoding
  :func:`pae`. Base64 is written in the standard alphabet with padding (:func:`b64encode`) and read by
  :func:`b64decode_strict`: the standard or the URL-safe alphabet, padded or not, refusing whitespace, set unused bits
  and mixed alphabets.
- Algorithms ([SIG-2]): ECDSA P-256 with SHA-256 (DER signatures read strictly: canonical DER only, a raw ``r||s``
  is not a signature; no low-S rule) and Ed25519. A trusted key of another algorithm gives ``unsupported-algorithm``.
- Key ids ([SIG-3]): ``sha256:`` and the hex SHA-256 of the key's DER SubjectPublicKeyInfo (:func:`keyid_of`).
- Trust policies ([SIG-4]): :class:`TrustPolicy`, an input of verification, never read from a run.
- Results ([SIG-5]): :func:`verify_envelope` gives an :class:`EnvelopeResult` (the §9.3 ``signature`` output).
- Signing: :func:`load_private_key` (an unencrypted PKCS#8 PEM, P-256 or Ed25519), :func:`sign`, :func:`keygen`.
- Runs: :func:`attestation_signed_by` (the identities ``attestation.dsse.json`` verifies for over ``seal.json``:
  §4.5 "signed by").

Nothing here prints or raises a message holding private key material: refusals name the file and what is wrong
with it, never its content.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, NamedTuple

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import dsa, ec, ed448, ed25519, rsa, x448, x25519
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature, encode_dss_signature

from aefgate.errors import Refusal
from aefgate.aef import jsonio
from aefgate.aef.schema import validator
from aefgate.fsutil import atomic_write

__all__ = [
    "ALGORITHMS",
    "ATTESTATION",
    "B64Error",
    "EnvelopeResult",
    "MAX_ENVELOPE",
    "PAYLOAD_TYPES",
    "SigResult",
    "SigningKey",
    "TrustKey",
    "TrustPolicy",
    "attestation_result",
    "attestation_signed_by",
    "b64decode_strict",
    "b64encode",
    "envelope_path_for",
    "keygen",
    "keyid_of",
    "load_private_key",
    "signing_key_of",
    "check_no_attestation",
    "write_attestation",
    "pae",
    "payload_type_for",
    "sign",
    "verify_envelope",
]

IN_TOTO = "application/vnd.in-toto+json"
CHECKPOINT_TYPE = "application/vnd.agenteval.aef.checkpoint+json"

#: [SIG-1]: the kind of the signed file -> its payloadType (kinds are the signed files' schema names)
PAYLOAD_TYPES: dict[str, str] = {
    "seal": IN_TOTO,  # seal.json, signed by attestation.dsse.json
    "overlay-seal": IN_TOTO,  # overlays/seal-<nnnn>.json, signed by overlays/seal-<nnnn>.dsse.json
    "checkpoint": CHECKPOINT_TYPE,  # a checkpoint manifest, signed by <checkpoint>.dsse.json beside it
}

ATTESTATION = "attestation.dsse.json"
SEAL = "seal.json"
MAX_ENVELOPE = 56 * jsonio.MIB  # ENC-17 as the rationale gives it: a signature envelope holds a seal in base64
MAX_KEY_FILE = 64 * 1024  # a PEM private key is a few hundred bytes

#: the algorithms aefgate signs and verifies with ([SIG-2])
ALGORITHMS = ("ecdsa-p256", "ed25519")

# result codes ([SIG-5])
VERIFIED = "verified"
UNTRUSTED = "untrusted-key"
INVALID = "invalid"
UNSUPPORTED = "unsupported-algorithm"
MALFORMED = "malformed"
PAYLOAD_MISMATCH = "payload-mismatch"

_OVERLAY_SEAL = re.compile(r"(?:^|/)overlays/seal-[0-9]{4}(?:\.dsse)?\.json\Z")


def payload_type_for(relpath: str) -> str:
    """The payloadType [SIG-1]'s table gives for a signed file (or for its envelope), by its path in the run.

    ``seal.json`` and ``attestation.dsse.json``, and ``overlays/seal-<nnnn>.json`` and its ``.dsse.json``, are
    in-toto statements; any other file is a checkpoint manifest (the table's third row).
    """
    p = str(relpath).replace("\\", "/")
    name = p.rsplit("/", 1)[-1]
    if name in (SEAL, ATTESTATION):
        return PAYLOAD_TYPES["seal"]
    if _OVERLAY_SEAL.search(p):
        return PAYLOAD_TYPES["overlay-seal"]
    return PAYLOAD_TYPES["checkpoint"]


def envelope_path_for(relpath: str) -> str:
    """Where [SIG-1] puts the envelope of a signed file: ``seal.json`` -> ``attestation.dsse.json``, any other
    ``X.json`` -> ``X.dsse.json`` (a batch seal's, a checkpoint's)."""
    p = str(relpath)
    head, sep, name = p.replace("\\", "/").rpartition("/")
    if name == SEAL:
        return f"{head}{sep}{ATTESTATION}"
    stem = name[:-5] if name.endswith(".json") else name
    return f"{head}{sep}{stem}.dsse.json"


# -- DSSE: PAE and base64 ------------------------------------------------------------------------------------------


def pae(payload_type: str, payload: bytes) -> bytes:
    """[SIG-1] ``"DSSEv1" SP LEN(type) SP type SP LEN(payload) SP payload``, lengths in ASCII decimal of bytes."""
    t = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(payload), payload)


class B64Error(ValueError):
    """Text that [SIG-1]'s base64 reading refuses."""


_STD_BODY = re.compile(r"[A-Za-z0-9+/]*")
_URL_BODY = re.compile(r"[A-Za-z0-9_-]*")
_URL_TO_STD = str.maketrans("-_", "+/")
_B64_VALUE = {c: i for i, c in enumerate("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")}
_B64_VALUE.update({"-": 62, "_": 63})


def b64encode(data: bytes) -> str:
    """Base64 as [SIG-1] writes it: the standard alphabet, with padding."""
    return base64.b64encode(data).decode("ascii")


def b64decode_strict(text: Any) -> bytes:
    """Base64 as [SIG-1] reads it: the standard alphabet or the URL-safe one (never both in one value), with
    padding or without; refused (:class:`B64Error`): whitespace or any other character, misplaced or partial
    padding, a length no encoding has, and set unused bits (a non-canonical encoding)."""
    if type(text) is not str:
        raise B64Error("not a string")
    if not text.isascii():
        raise B64Error("a character outside base64's alphabets")
    body = text.rstrip("=")
    pad = len(text) - len(body)
    if _STD_BODY.fullmatch(body):
        url = False
    elif _URL_BODY.fullmatch(body):
        url = True
    else:
        raise B64Error("whitespace, padding inside, a character outside base64's alphabets, or mixed alphabets")
    rem = len(body) % 4
    if rem == 1:
        raise B64Error("a length no base64 encoding has")
    if pad and (pad > 2 or len(text) % 4 != 0):
        raise B64Error("partial or excess padding")
    if rem:
        mask = 0x0F if rem == 2 else 0x03
        if _B64_VALUE[body[-1]] & mask:
            raise B64Error("set unused bits (a non-canonical encoding)")
    if url:
        body = body.translate(_URL_TO_STD)
    try:
        return binascii.a2b_base64(body + "=" * ((4 - rem) % 4), strict_mode=True)
    except binascii.Error as e:  # pragma: no cover - the checks above leave nothing for it
        raise B64Error(str(e)) from None


# -- keys ----------------------------------------------------------------------------------------------------------


def _spki_der(public_key: Any) -> bytes:
    return public_key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def keyid_of(public_key: Any) -> str:
    """[SIG-3]: ``sha256:`` and the hex SHA-256 of the key's DER-encoded SubjectPublicKeyInfo."""
    der = public_key if isinstance(public_key, (bytes, bytearray)) else _spki_der(public_key)
    return "sha256:" + hashlib.sha256(der).hexdigest()


def _algorithm_of(key: Any) -> str:
    """``ecdsa-p256`` or ``ed25519`` for the keys of [SIG-2]; a descriptive name for any other (unsupported)."""
    if isinstance(key, (ec.EllipticCurvePublicKey, ec.EllipticCurvePrivateKey)):
        return "ecdsa-p256" if isinstance(key.curve, ec.SECP256R1) else f"ec-{key.curve.name}"
    if isinstance(key, (ed25519.Ed25519PublicKey, ed25519.Ed25519PrivateKey)):
        return "ed25519"
    for types, name in (
        ((rsa.RSAPublicKey, rsa.RSAPrivateKey), "rsa"),
        ((dsa.DSAPublicKey, dsa.DSAPrivateKey), "dsa"),
        ((ed448.Ed448PublicKey, ed448.Ed448PrivateKey), "ed448"),
        ((x25519.X25519PublicKey, x25519.X25519PrivateKey), "x25519"),
        ((x448.X448PublicKey, x448.X448PrivateKey), "x448"),
    ):
        if isinstance(key, types):
            return name
    return "unknown"


def _der_item(buf: bytes, pos: int, end: int) -> tuple[int, int, int]:
    """One DER TLV at ``pos``: (tag, start of the value, end of the value); ValueError when it is not DER."""
    if pos + 2 > end:
        raise ValueError("truncated")
    tag, first = buf[pos], buf[pos + 1]
    pos += 2
    if first < 0x80:
        length = first
    else:
        n = first & 0x7F
        if n == 0 or n > 4 or pos + n > end or buf[pos] == 0:
            raise ValueError("not a DER length")
        length = int.from_bytes(buf[pos:pos + n], "big")
        pos += n
        if length < 0x80:
            raise ValueError("not a minimal DER length")
    if pos + length > end:
        raise ValueError("truncated")
    return tag, pos, pos + length


def _is_spki(der: bytes) -> bool:
    """Whether ``der`` is exactly one ``SEQUENCE { SEQUENCE { OID, ... }, BIT STRING }`` (a SubjectPublicKeyInfo
    of an algorithm the crypto library may not know)."""
    try:
        tag, start, end = _der_item(der, 0, len(der))
        if tag != 0x30 or end != len(der):
            return False
        tag, a_start, a_end = _der_item(der, start, end)
        if tag != 0x30:
            return False
        oid_tag, _, _ = _der_item(der, a_start, a_end)
        if oid_tag != 0x06:
            return False
        tag, _, b_end = _der_item(der, a_end, end)
        return tag == 0x03 and b_end == end
    except ValueError:
        return False


_PEM_PUBLIC = re.compile(r"-----BEGIN PUBLIC KEY-----\r?\n([A-Za-z0-9+/=\r\n]+)-----END PUBLIC KEY-----(?:\r?\n)?")


@dataclass(frozen=True)
class TrustKey:
    """One key of a trust policy ([SIG-4]): the identity it speaks for, its key id ([SIG-3], computed from the key,
    never read), what the identity may do beyond signing, and the key (None for an algorithm the crypto library does
    not know: such a key only ever gives ``unsupported-algorithm``)."""

    identity: str
    keyid: str
    may: tuple[str, ...]
    public_key: Any
    algorithm: str  # "ecdsa-p256", "ed25519", or the name of an unsupported algorithm
    public_pem: str = field(repr=False, default="")

    @property
    def supported(self) -> bool:
        return self.algorithm in ALGORITHMS


def _read_public_key(pem: str, where: str) -> tuple[Any, str, str]:
    """(key or None, keyid, algorithm) of a policy's ``publicKey``; Refusal ([SIG-3]) when it is no SPKI PEM."""
    data = pem.encode("ascii", "replace")
    try:
        key = serialization.load_pem_public_key(data)
    except UnsupportedAlgorithm:
        # a well-formed SubjectPublicKeyInfo of an algorithm the crypto library does not know: trusted, unsupported
        m = _PEM_PUBLIC.fullmatch(pem)
        der = None
        if m is not None:
            try:
                der = base64.b64decode(re.sub(r"[\r\n]", "", m.group(1)), validate=True)
            except binascii.Error:
                der = None
        if der is None or not _is_spki(der):
            raise Refusal("SIG-3", "publicKey is not a readable SubjectPublicKeyInfo PEM", where) from None
        return None, keyid_of(der), "unknown"
    except (ValueError, TypeError):
        raise Refusal("SIG-3", "publicKey is not a readable SubjectPublicKeyInfo PEM", where) from None
    return key, keyid_of(key), _algorithm_of(key)


class TrustPolicy:
    """A trust policy ([SIG-4]): the keys a verifier trusts, in policy order. An input to verification, never
    something read from a run.

    Refused (:class:`Refusal`, exit 2): a file that does not read as strict JSON, a document the reader
    ``trust-policy`` schema refuses (closed for readers, [VER-9]), a ``publicKey`` that is not a readable SPKI PEM
    ([SIG-3]), and the same key listed twice ([SIG-5] names one trusted key per key id).
    """

    def __init__(self, keys: Iterable[TrustKey] = ()):
        self.keys: list[TrustKey] = list(keys)
        self._by_id = {k.keyid: k for k in self.keys}

    def __repr__(self) -> str:
        return f"TrustPolicy({[k.identity for k in self.keys]!r})"

    @classmethod
    def from_json(cls, doc: Any, where: str = "") -> "TrustPolicy":
        reason = validator("trust-policy", "reader")(doc)
        if reason is not None:
            raise Refusal("SIG-4", f"not a trust policy this reader accepts: {reason}", where)
        keys: list[TrustKey] = []
        seen: dict[str, int] = {}
        for i, entry in enumerate(doc["keys"]):
            at = f"{where}#/keys/{i}" if where else f"/keys/{i}"
            key, kid, alg = _read_public_key(entry["publicKey"], at + "/publicKey")
            if kid in seen:
                raise Refusal("SIG-4", f"the key of /keys/{seen[kid]} is listed again (one key, one identity: "
                                       f"a signature's result names one identity)", at)
            seen[kid] = i
            keys.append(TrustKey(entry["identity"], kid, tuple(entry.get("may", ())), key, alg,
                                 entry["publicKey"]))
        return cls(keys)

    @classmethod
    def load(cls, path: str | Path) -> "TrustPolicy":
        p = Path(path)
        if not p.exists():
            raise Refusal("CLI-1", "no such trust policy file", str(p))
        if p.is_dir():
            raise Refusal("CLI-1", "a folder, not a trust policy file", str(p))
        try:
            doc = jsonio.read_json(p)
        except jsonio.JsonProblem as e:
            raise Refusal("SIG-4", f"the trust policy does not read: {e.reason}", str(p)) from None
        except OSError as e:
            raise Refusal("CLI-1", f"cannot read the trust policy: {e.strerror}", str(p)) from None
        return cls.from_json(doc, str(p))

    def key(self, keyid: str) -> TrustKey | None:
        """The trusted key with that id, or None."""
        return self._by_id.get(keyid)

    @property
    def identities(self) -> list[str]:
        """Every identity of the policy, once each, in policy order."""
        return list(dict.fromkeys(k.identity for k in self.keys))

    def allows(self, identity: str, action: str) -> bool:
        """Whether the policy lets ``identity`` do ``action`` beyond signing (``"redact"``, [OVL-10]): some key of
        that identity lists it in ``may``."""
        return any(k.identity == identity and action in k.may for k in self.keys)


# -- verifying -----------------------------------------------------------------------------------------------------


class SigResult(NamedTuple):
    """One signature's result ([SIG-5]): the key id (as written, or the verifying key's for a keyless signature),
    the result code, and the identity when ``verified``."""

    keyid: str
    result: str
    identity: str | None = None

    def to_json(self) -> dict:
        out: dict[str, Any] = {"keyid": self.keyid, "result": self.result}
        if self.identity is not None:
            out["identity"] = self.identity
        return out


@dataclass
class EnvelopeResult:
    """An envelope's verification ([SIG-5]): ``envelope_result`` None, ``malformed`` or ``payload-mismatch``; the
    per-signature results in envelope order (none when malformed); the identities it verifies for, in policy order
    (none when malformed or payload-mismatch)."""

    envelope_result: str | None
    signatures: list[SigResult] = field(default_factory=list)
    verifies_for: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        """The §9.3 ``signature`` output."""
        return {
            "envelopeResult": self.envelope_result,
            "signatures": [s.to_json() for s in self.signatures],
            "verifiesFor": list(self.verifies_for),
        }

    def verifies(self, identity: str) -> bool:
        return identity in self.verifies_for


def _verify_ecdsa(key: ec.EllipticCurvePublicKey, sig: bytes, message: bytes) -> bool:
    try:
        r, s = decode_dss_signature(sig)
        if encode_dss_signature(r, s) != sig:  # strict DER: one encoding per (r, s)
            return False
        key.verify(sig, message, ec.ECDSA(hashes.SHA256()))  # no low-S rule ([SIG-2])
        return True
    except (InvalidSignature, ValueError, TypeError, OverflowError):
        return False


def _verify_ed25519(key: ed25519.Ed25519PublicKey, sig: bytes, message: bytes) -> bool:
    try:
        key.verify(sig, message)
        return True
    except (InvalidSignature, ValueError, TypeError):
        return False


def _check(key: TrustKey, sig: bytes, message: bytes) -> str:
    """``verified``, ``invalid`` or ``unsupported-algorithm`` for one signature under one trusted key."""
    if key.algorithm == "ecdsa-p256":
        return VERIFIED if _verify_ecdsa(key.public_key, sig, message) else INVALID
    if key.algorithm == "ed25519":
        return VERIFIED if _verify_ed25519(key.public_key, sig, message) else INVALID
    return UNSUPPORTED


def _parse_envelope(envelope_bytes: bytes) -> tuple[str, bytes, list[tuple[str, bytes]]] | None:
    """(payloadType, payload, [(keyid, sig)]) of a well-formed envelope ([SIG-1]); None when it is malformed."""
    try:
        env = jsonio.loads(envelope_bytes, max_size=MAX_ENVELOPE)
    except jsonio.JsonProblem:
        return None
    ptype, payload, sigs = env.get("payloadType"), env.get("payload"), env.get("signatures")
    if type(ptype) is not str or type(payload) is not str or type(sigs) is not list or not sigs:
        return None
    out: list[tuple[str, bytes]] = []
    try:
        data = b64decode_strict(payload)
        for s in sigs:
            if type(s) is not dict or type(s.get("sig")) is not str:
                return None
            keyid = s.get("keyid", "")
            if type(keyid) is not str:
                return None
            out.append((keyid, b64decode_strict(s["sig"])))
    except B64Error:
        return None
    return ptype, data, out


def verify_envelope(envelope_bytes: bytes, signed_file: bytes, payload_type: str,
                    policy: TrustPolicy) -> EnvelopeResult:
    """Verify a DSSE envelope over ``signed_file`` (its exact bytes) under a trust policy ([SIG-1], [SIG-5]).

    ``payload_type`` is the type [SIG-1]'s table gives the signed file. Each signature is checked over the
    envelope's own PAE; the envelope verifies for an identity only when its payload is byte for byte the file and
    its payloadType the expected one (``payload-mismatch`` otherwise), and some signature is verified for it.
    """
    parsed = _parse_envelope(envelope_bytes)
    if parsed is None:
        return EnvelopeResult(MALFORMED)
    ptype, payload, sigs = parsed
    message = pae(ptype, payload)
    results: list[SigResult] = []
    for keyid, sig in sigs:
        if keyid:
            key = policy.key(keyid)
            if key is None:
                results.append(SigResult(keyid, UNTRUSTED))
                continue
            code = _check(key, sig, message)
            results.append(SigResult(keyid, code, key.identity if code == VERIFIED else None))
            continue
        # keyless: every trusted key in policy order; the first that verifies it is named
        for key in policy.keys:
            if key.supported and _check(key, sig, message) == VERIFIED:
                results.append(SigResult(key.keyid, VERIFIED, key.identity))
                break
        else:
            results.append(SigResult("", UNTRUSTED))
    if ptype != payload_type or payload != signed_file:
        return EnvelopeResult(PAYLOAD_MISMATCH, results, [])
    verified = {r.identity for r in results if r.result == VERIFIED}
    return EnvelopeResult(None, results, [i for i in policy.identities if i in verified])


_OVER = object()


def _read_regular(path: Path, limit: int) -> Any:
    """The bytes of a regular file, never through a link; None when absent or not a regular file, ``_OVER`` when
    it holds more than ``limit`` bytes (never read truncated: a prefix must not pass for the file)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        if st.st_size > limit:
            return _OVER
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(limit + 1)
        return data if len(data) <= limit else _OVER
    finally:
        os.close(fd)


def attestation_result(run_dir: str | Path, policy: TrustPolicy) -> EnvelopeResult | None:
    """The verification of a run's ``attestation.dsse.json`` over its ``seal.json`` ([SIG-1]); None when the run
    has no attestation (no regular file of that name) or no seal. An envelope over 56 MiB is ``malformed``; a seal
    over its limit is a file no payload can be ([SIG-1]: ``payload-mismatch``)."""
    root = Path(run_dir)
    envelope = _read_regular(root / ATTESTATION, MAX_ENVELOPE)
    if envelope is None:
        return None
    seal = _read_regular(root / SEAL, jsonio.MAX_SEAL)
    if seal is None:
        return None
    if envelope is _OVER:
        return EnvelopeResult(MALFORMED)
    if seal is _OVER:
        r = verify_envelope(envelope, b"", PAYLOAD_TYPES["seal"], policy)
        return r if r.envelope_result == MALFORMED else EnvelopeResult(PAYLOAD_MISMATCH, r.signatures, [])
    return verify_envelope(envelope, seal, PAYLOAD_TYPES["seal"], policy)


def attestation_signed_by(run_dir: str | Path, policy: TrustPolicy) -> list[str]:
    """The identities ``attestation.dsse.json`` verifies for over ``seal.json`` under ``policy``, in policy order
    (§4.5 "signed by"); [] when there is no attestation or it verifies for nobody. The caller checks the run is
    intact first: a signature over the seal says nothing about files that no longer match it."""
    r = attestation_result(run_dir, policy)
    return [] if r is None else list(r.verifies_for)


# -- signing -------------------------------------------------------------------------------------------------------


class SigningKey:
    """A private key aefgate signs with ([SIG-2]): ECDSA P-256 or Ed25519. Its repr holds no key material."""

    def __init__(self, private_key: Any, source: str = ""):
        algorithm = _algorithm_of(private_key)
        if algorithm not in ALGORITHMS or not hasattr(private_key, "sign"):
            raise Refusal("SIG-2", f"aefgate signs with ECDSA P-256 or Ed25519, not {algorithm}", source)
        self._key = private_key
        self.algorithm: str = algorithm
        self.keyid: str = keyid_of(private_key.public_key())
        self.source = source

    def __repr__(self) -> str:
        return f"SigningKey({self.algorithm}, {self.keyid})"

    @property
    def public_key(self) -> Any:
        return self._key.public_key()

    def public_pem(self) -> bytes:
        """The public key as an SPKI PEM (what a trust policy's ``publicKey`` holds)."""
        return self._key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )

    def policy_entry(self, identity: str, may: Iterable[str] = ()) -> dict:
        """A trust policy's entry for this key ([SIG-4])."""
        entry: dict[str, Any] = {"identity": identity, "publicKey": self.public_pem().decode("ascii")}
        may = list(may)
        if may:
            entry["may"] = may
        return entry

    def sign_raw(self, message: bytes) -> bytes:
        """The signature over ``message`` itself: DER ``SEQUENCE {r, s}`` for ECDSA P-256 with SHA-256 (random
        nonces: not deterministic), the 64 bytes of RFC 8032 for Ed25519 (deterministic)."""
        if self.algorithm == "ecdsa-p256":
            return self._key.sign(message, ec.ECDSA(hashes.SHA256()))
        return self._key.sign(message)


_PEM_BLOCK = re.compile(rb"-----BEGIN ([A-Z0-9 ]+)-----")


def load_private_key(path: str | Path) -> SigningKey:
    """Read a signing key: an unencrypted PKCS#8 PEM private key, ECDSA P-256 or Ed25519 ([SIG-2], §9.3 ``sign``).

    Refused (:class:`Refusal`, rule ``SIG-2``, exit 2): a missing or unreadable file, one that is not a single
    PEM block ``PRIVATE KEY`` (an encrypted PKCS#8 key, a SEC1 ``EC PRIVATE KEY``, a PKCS#1 ``RSA PRIVATE KEY``, an
    OpenSSH key...), a key that does not read, and a key of another algorithm or curve. No message holds key
    material.
    """
    p = Path(path)
    where = str(p)
    if not p.exists():
        raise Refusal("SIG-2", "no such private key file", where)
    if not p.is_file():
        raise Refusal("SIG-2", "not a file: a private key is a PEM file", where)
    try:
        with open(p, "rb") as f:
            data = f.read(MAX_KEY_FILE + 1)
    except OSError as e:
        raise Refusal("SIG-2", f"cannot read the private key: {e.strerror}", where) from None
    if len(data) > MAX_KEY_FILE:
        raise Refusal("SIG-2", "too large for a PEM private key", where)
    labels = [m.group(1).decode("ascii") for m in _PEM_BLOCK.finditer(data)]
    if not labels:
        raise Refusal("SIG-2", "not a PEM private key (expected -----BEGIN PRIVATE KEY-----)", where)
    if len(labels) > 1:
        raise Refusal("SIG-2", f"{len(labels)} PEM blocks: a key file holds exactly one private key", where)
    label = labels[0]
    if label == "ENCRYPTED PRIVATE KEY":
        raise Refusal("SIG-2", "an encrypted private key: aefgate reads an unencrypted PKCS#8 PEM key "
                               "(decrypt it, e.g. `openssl pkcs8 -in KEY -out KEY.pem`)", where)
    if label != "PRIVATE KEY":
        raise Refusal("SIG-2", f"a {label!r} PEM block, not an unencrypted PKCS#8 private key "
                               "(convert it with `openssl pkcs8 -topk8 -nocrypt`)", where)
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except UnsupportedAlgorithm:
        raise Refusal("SIG-2", "a private key of an algorithm aefgate does not sign with "
                               "(ECDSA P-256 or Ed25519)", where) from None
    except (ValueError, TypeError):  # the library's message is not repeated: it might quote the input
        raise Refusal("SIG-2", "the private key does not read as an unencrypted PKCS#8 PEM key", where) from None
    return SigningKey(key, where)


def sign(payload: bytes, payload_type: str, key: SigningKey) -> dict:
    """A DSSE envelope over ``payload`` ([SIG-1]) with one signature under ``key``'s key id ([SIG-3]); base64 in
    the standard alphabet with padding."""
    if type(payload_type) is not str or not payload_type:
        raise Refusal("SIG-1", "a payloadType is a non-empty string")
    sig = key.sign_raw(pae(payload_type, payload))
    return {
        "payloadType": payload_type,
        "payload": b64encode(payload),
        "signatures": [{"keyid": key.keyid, "sig": b64encode(sig)}],
    }


def keygen(algorithm: str, identity: str, may: Iterable[str] = ()) -> tuple[bytes, bytes, dict]:
    """A new key pair: (private key as an unencrypted PKCS#8 PEM, public key as an SPKI PEM, a trust policy entry
    for ``identity``). ``algorithm``: ``ecdsa-p256`` or ``ed25519``."""
    if algorithm == "ecdsa-p256":
        private = ec.generate_private_key(ec.SECP256R1())
    elif algorithm == "ed25519":
        private = ed25519.Ed25519PrivateKey.generate()
    else:
        raise Refusal("SIG-2", f"aefgate signs with ecdsa-p256 or ed25519, not {algorithm!r}", "option 'algorithm'")
    key = SigningKey(private)
    entry = key.policy_entry(identity, may)

    reason = validator("trust-policy", "writer")({"keys": [entry]})
    if reason is not None:
        where = "option 'may'" if reason.startswith("/keys/0/may") else "option 'identity'"
        raise Refusal("SIG-4", f"not a trust policy entry: {reason}", where)
    private_pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return private_pem, key.public_pem(), entry


def signing_key_of(key: "str | os.PathLike[str] | SigningKey | None") -> "SigningKey | None":
    """A signing key from what a caller gives: a path to a private key file (loaded now, so that a bad key is
    refused before anything is written), a key already loaded, or None."""
    if isinstance(key, (str, os.PathLike)):
        return load_private_key(key)
    return key


def check_no_attestation(run_dir: str | os.PathLike[str]) -> None:
    """OUT-1 when the run already has an attestation: aefgate never replaces one."""
    p = Path(run_dir) / ATTESTATION
    if p.exists() or p.is_symlink():
        raise Refusal("OUT-1", "the run already has an attestation; aefgate does not replace one", ATTESTATION)


def write_attestation(run_dir: str | os.PathLike[str], key: "SigningKey") -> str:
    """Sign the run's ``seal.json`` ([SIG-1]) and write ``attestation.dsse.json`` atomically; returns the key id."""
    root = Path(run_dir)
    envelope = sign((root / "seal.json").read_bytes(), PAYLOAD_TYPES["seal"], key)
    atomic_write(root / ATTESTATION, jsonio.dumps(envelope))
    return key.keyid
