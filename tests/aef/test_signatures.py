"""Signatures and trust policies (spec 04 §4.4 [SIG-1]..[SIG-5], §4.5; spec 09 §9.3 ``signature`` and ``sign``).

The conformance signature vectors are not in the shared copy: these cases are written from the spec text. Keys are
made by aefgate and by the OpenSSL command line; OpenSSL also signs and verifies, as an independent implementation
of ECDSA P-256 / Ed25519 over the PAE bytes. Nothing is mocked.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature, encode_dss_signature

from aefgate.errors import Refusal
from aefgate.aef import jsonio
from aefgate.aef.signatures import (
    PAYLOAD_TYPES,
    B64Error,
    SigResult,
    TrustPolicy,
    attestation_result,
    attestation_signed_by,
    b64decode_strict,
    envelope_path_for,
    keygen,
    keyid_of,
    load_private_key,
    pae,
    payload_type_for,
    sign,
    verify_envelope,
)
from tests._keys import (
    make_key,
    openssl,
    openssl_key,
    openssl_public_der,
    openssl_public_pem,
    openssl_sign,
    openssl_verify,
    pem_body_lines,
    policy_doc,
    public_pem_of,
)
from tests._shared import EXAMPLES, copy_run

IN_TOTO = "application/vnd.in-toto+json"
CHECKPOINT = "application/vnd.agenteval.aef.checkpoint+json"
P256_N = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551
SOURCES = [("aefgate", "ecdsa-p256"), ("aefgate", "ed25519"), ("openssl", "ecdsa-p256"), ("openssl", "ed25519")]
SOURCE_IDS = [f"{s}-{a}" for s, a in SOURCES]
FILE = b'{"_type":"https://in-toto.io/Statement/v1","note":"caf\xc3\xa9\\r\\n"}'


def policy(*entries) -> TrustPolicy:
    return TrustPolicy.from_json(policy_doc(*entries))


def env_bytes(env: dict) -> bytes:
    return json.dumps(env).encode("utf-8")


def with_sig(env: dict, **changes) -> dict:
    """A copy of ``env`` whose first signature has ``changes`` (a value None removes the member)."""
    sig = dict(env["signatures"][0])
    for k, v in changes.items():
        if v is None:
            sig.pop(k, None)
        else:
            sig[k] = v
    return {**env, "signatures": [sig, *env["signatures"][1:]]}


def sig_bytes(env: dict, i: int = 0) -> bytes:
    return base64.b64decode(env["signatures"][i]["sig"])


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def der_int(x: int, pad: bool = False) -> bytes:
    body = x.to_bytes((x.bit_length() + 8) // 8, "big")  # room for the sign bit: DER's minimal form
    if pad:
        body = b"\x00" + body
    return b"\x02" + bytes([len(body)]) + body


@pytest.fixture(scope="module")
def keys(tmp_path_factory) -> dict[tuple[str, str], Path]:
    """One private key per (source, algorithm), each a PKCS#8 PEM file."""
    folder = tmp_path_factory.mktemp("keys")
    return {(s, a): make_key(folder, s, a) for s, a in SOURCES}


@pytest.fixture(scope="module")
def other_keys(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("other-keys")
    return {
        "carol": make_key(folder, "aefgate", "ed25519", "carol"),
        "dave": make_key(folder, "aefgate", "ecdsa-p256", "dave"),
        "rsa": openssl_key(folder, "rsa"),
        "p384": openssl_key(folder, "ecdsa-p384"),
    }


# -- PAE, base64, payload types ------------------------------------------------------------------------------------


def test_pae_is_exactly_sig1() -> None:
    assert pae(IN_TOTO, b"hello") == b"DSSEv1 28 application/vnd.in-toto+json 5 hello"
    # the DSSE specification's own example
    assert pae("http://example.com/HelloWorld", b"hello world") == (
        b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    )
    assert pae("t", b"") == b"DSSEv1 1 t 0 "
    # lengths are in bytes, not characters
    assert pae("caf\u00e9", "\u00e9".encode()) == b"DSSEv1 5 caf\xc3\xa9 2 \xc3\xa9"


@pytest.mark.parametrize("text,data", [
    ("aGk=", b"hi"),  # standard, padded
    ("aGk", b"hi"),  # unpadded
    ("aQ==", b"i"),
    ("aQ", b"i"),
    ("+/8=", b"\xfb\xff"),  # standard alphabet
    ("-_8=", b"\xfb\xff"),  # URL-safe, padded
    ("-_8", b"\xfb\xff"),  # URL-safe, unpadded
    ("+/+/", b"\xfb\xff\xbf"),
    ("", b""),
])
def test_base64_accepted(text: str, data: bytes) -> None:
    assert b64decode_strict(text) == data


@pytest.mark.parametrize("text", [
    "aGk= ", " aGk=", "aG k=", "aGk=\n", "aG\nk=", "aGk\t",  # whitespace
    "-/+/", "+_8=", "-/8=",  # mixed alphabets
    "aGl=", "aGl", "aR==", "aR", "+/9=",  # set unused bits (non-canonical)
    "aGk==", "aQ=", "aQ===", "=", "==", "aG=k", "a===",  # misplaced, partial or excess padding
    "a", "aGk=a", "abcde",  # lengths no encoding has
    "aG\u00e9=", "aGk*", "aGk.",  # outside both alphabets
])
def test_base64_refused(text: str) -> None:
    with pytest.raises(B64Error):
        b64decode_strict(text)


def test_base64_refuses_non_strings() -> None:
    for value in (None, 1, b"aGk=", ["aGk="]):
        with pytest.raises(B64Error):
            b64decode_strict(value)


def test_payload_types_follow_the_sig1_table() -> None:
    assert PAYLOAD_TYPES == {"seal": IN_TOTO, "overlay-seal": IN_TOTO, "checkpoint": CHECKPOINT}
    assert payload_type_for("seal.json") == IN_TOTO
    assert payload_type_for("attestation.dsse.json") == IN_TOTO
    assert payload_type_for("overlays/seal-0001.json") == IN_TOTO
    assert payload_type_for("runs/x/overlays/seal-0042.dsse.json") == IN_TOTO
    assert payload_type_for("checkpoints/release-7.json") == CHECKPOINT
    assert payload_type_for("checkpoints/release-7.dsse.json") == CHECKPOINT
    assert envelope_path_for("seal.json") == "attestation.dsse.json"
    assert envelope_path_for("run/seal.json") == "run/attestation.dsse.json"
    assert envelope_path_for("overlays/seal-0003.json") == "overlays/seal-0003.dsse.json"
    assert envelope_path_for("release-7.json") == "release-7.dsse.json"


# -- key ids, trust policies ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("algorithm", ["ecdsa-p256", "ed25519"])
def test_keyid_is_sha256_of_the_spki_der_as_openssl_writes_it(tmp_path: Path, algorithm: str) -> None:
    key = openssl_key(tmp_path, algorithm)
    expected = "sha256:" + hashlib.sha256(openssl_public_der(key)).hexdigest()
    assert load_private_key(key).keyid == expected
    assert keyid_of(load_private_key(key).public_key) == expected == keyid_of(openssl_public_der(key))
    pol = policy(("alice", openssl_public_pem(key)))
    assert pol.keys[0].keyid == expected and pol.keys[0].algorithm == algorithm


def test_policy_reads_identities_may_and_order(keys, other_keys) -> None:
    a = public_pem_of(keys["aefgate", "ecdsa-p256"])
    b = public_pem_of(keys["openssl", "ed25519"])
    pol = TrustPolicy.from_json({"schemaVersion": "1.0", "keys": [
        {"identity": "git:bob@example.com", "publicKey": b, "may": ["redact", "future-power"]},
        {"identity": "git:alice@example.com", "publicKey": a},
    ]})
    assert [k.identity for k in pol.keys] == ["git:bob@example.com", "git:alice@example.com"]
    assert pol.keys[0].may == ("redact", "future-power") and pol.keys[1].may == ()
    assert pol.allows("git:bob@example.com", "redact") and not pol.allows("git:alice@example.com", "redact")
    assert pol.key(pol.keys[1].keyid) is pol.keys[1] and pol.key("sha256:00") is None
    assert pol.identities == ["git:bob@example.com", "git:alice@example.com"]


@pytest.mark.parametrize("doc,rule", [
    ({}, "SIG-4"),
    ({"keys": {}}, "SIG-4"),
    ({"keys": [{"identity": "a"}]}, "SIG-4"),
    ({"keys": [{"identity": "", "publicKey": "PEM"}]}, "SIG-4"),
    ({"keys": [{"identity": "a", "publicKey": "PEM", "comment": "x"}]}, "SIG-4"),  # closed for readers, [VER-9]
    ({"keys": [], "trustEverything": True}, "SIG-4"),
    ({"schemaVersion": "1.1", "keys": []}, "SIG-4"),  # a later version is refused
    ({"keys": [{"identity": "a", "publicKey": "PEM", "may": ["redact", "redact"]}]}, "SIG-4"),
    ({"keys": [{"identity": "a", "publicKey": "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"}]},
     "SIG-3"),
    ({"keys": [{"identity": "a", "publicKey": "-----BEGIN PUBLIC KEY-----\nMFkw\n-----END PUBLIC KEY-----\n"}]},
     "SIG-3"),
])
def test_policy_refused(keys, doc: dict, rule: str) -> None:
    pem = public_pem_of(keys["aefgate", "ed25519"])
    text = json.dumps(doc).replace('"PEM"', json.dumps(pem))
    with pytest.raises(Refusal) as e:
        TrustPolicy.from_json(json.loads(text))
    assert e.value.rule == rule and e.value.exit_code == 2


def test_policy_listing_one_key_twice_is_refused(keys) -> None:
    pem = public_pem_of(keys["aefgate", "ed25519"])
    with pytest.raises(Refusal) as e:
        policy(("alice", pem), ("bob", pem))
    assert e.value.rule == "SIG-4" and "/keys/1" in e.value.where


def test_policy_load_from_files(tmp_path: Path, keys) -> None:
    pem = public_pem_of(keys["aefgate", "ed25519"])
    good = tmp_path / "policy.json"
    good.write_bytes(jsonio.dumps(policy_doc(("alice", pem, ["redact"]))))
    assert TrustPolicy.load(good).keys[0].identity == "alice"
    dup = tmp_path / "dup.json"
    dup.write_text('{"keys": [], "keys": []}')  # strict reading ([ENC-2])
    for path in (tmp_path / "absent.json", tmp_path, dup):
        with pytest.raises(Refusal) as e:
            TrustPolicy.load(path)
        assert e.value.exit_code == 2


def test_policy_keeps_keys_of_other_algorithms_as_unsupported(other_keys) -> None:
    # an SPKI of an algorithm no library here knows (OID 1.2.3.4) is still a key the policy lists
    der = bytes.fromhex("300c" "3005" "06032a0304" "0303000102")
    unknown = "-----BEGIN PUBLIC KEY-----\n" + b64(der) + "\n-----END PUBLIC KEY-----\n"
    pol = policy(("r", openssl_public_pem(other_keys["rsa"])), ("p", openssl_public_pem(other_keys["p384"])),
                 ("u", unknown))
    assert [k.algorithm for k in pol.keys] == ["rsa", "ec-secp384r1", "unknown"]
    assert not any(k.supported for k in pol.keys)
    assert pol.keys[2].keyid == "sha256:" + hashlib.sha256(der).hexdigest()


# -- signing and verifying -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("source,algorithm", SOURCES, ids=SOURCE_IDS)
def test_sign_and_verify(keys, other_keys, source: str, algorithm: str) -> None:
    key = load_private_key(keys[source, algorithm])
    assert key.algorithm == algorithm
    env = sign(FILE, IN_TOTO, key)
    assert env["payloadType"] == IN_TOTO and base64.b64decode(env["payload"], validate=True) == FILE
    assert [s["keyid"] for s in env["signatures"]] == [key.keyid]
    assert all(len(s) % 4 == 0 for s in (env["payload"], env["signatures"][0]["sig"]))  # padded, standard
    pem = key.public_pem().decode("ascii")
    trusting = policy(("git:bob@example.com", public_pem_of(other_keys["carol"])), ("git:alice@example.com", pem))
    r = verify_envelope(jsonio.dumps(env), FILE, IN_TOTO, trusting)
    assert r.to_json() == {
        "envelopeResult": None,
        "signatures": [{"keyid": key.keyid, "result": "verified", "identity": "git:alice@example.com"}],
        "verifiesFor": ["git:alice@example.com"],
    }
    assert r.verifies("git:alice@example.com") and not r.verifies("git:bob@example.com")
    # a policy that does not list the key
    other = policy(("git:bob@example.com", public_pem_of(other_keys["carol"])))
    r = verify_envelope(jsonio.dumps(env), FILE, IN_TOTO, other)
    assert r.envelope_result is None and r.signatures == [SigResult(key.keyid, "untrusted-key")]
    assert r.verifies_for == []
    # the signature checks out with OpenSSL too (the other direction of the independent check)
    sig = sig_bytes(env)
    folder = keys[source, algorithm].parent
    assert openssl_verify(pem, pae(IN_TOTO, FILE), sig, algorithm, folder)


@pytest.mark.parametrize("source,algorithm", SOURCES, ids=SOURCE_IDS)
def test_tampering(keys, source: str, algorithm: str) -> None:
    key = load_private_key(keys[source, algorithm])
    pol = policy(("alice", key.public_pem().decode()))
    env = sign(FILE, IN_TOTO, key)
    # a flipped bit in the signed file: the envelope no longer carries it
    flipped = bytes([FILE[0] ^ 0x01]) + FILE[1:]
    r = verify_envelope(jsonio.dumps(env), flipped, IN_TOTO, pol)
    assert r.envelope_result == "payload-mismatch" and r.verifies_for == []
    assert r.signatures == [SigResult(key.keyid, "verified", "alice")]  # the envelope itself is sound
    # a flipped bit in the envelope's payload: no longer the file, and no longer what was signed
    bad = {**env, "payload": b64(flipped)}
    r = verify_envelope(jsonio.dumps(bad), FILE, IN_TOTO, pol)
    assert r.to_json() == {"envelopeResult": "payload-mismatch",
                           "signatures": [{"keyid": key.keyid, "result": "invalid"}], "verifiesFor": []}
    # a flipped bit in the signature (its last byte: the DER stays well-formed)
    sig = bytearray(sig_bytes(env))
    sig[-1] ^= 0x01
    r = verify_envelope(jsonio.dumps(with_sig(env, sig=b64(bytes(sig)))), FILE, IN_TOTO, pol)
    assert r.envelope_result is None and r.signatures == [SigResult(key.keyid, "invalid")] and not r.verifies_for
    # the right payload under another payloadType ([SIG-1]: the type is the one the table gives the file)
    r = verify_envelope(jsonio.dumps(env), FILE, CHECKPOINT, pol)
    assert r.envelope_result == "payload-mismatch" and r.verifies_for == []
    checkpoint_env = sign(FILE, CHECKPOINT, key)
    r = verify_envelope(jsonio.dumps(checkpoint_env), FILE, IN_TOTO, pol)
    assert r.envelope_result == "payload-mismatch"
    assert verify_envelope(jsonio.dumps(checkpoint_env), FILE, CHECKPOINT, pol).verifies_for == ["alice"]


@pytest.mark.parametrize("algorithm", ["ecdsa-p256", "ed25519"])
def test_openssl_signature_verifies(tmp_path: Path, algorithm: str) -> None:
    """An envelope whose signature OpenSSL made over the PAE bytes (an independent implementation)."""
    key = openssl_key(tmp_path, algorithm)
    pem = openssl_public_pem(key)
    keyid = "sha256:" + hashlib.sha256(openssl_public_der(key)).hexdigest()
    sig = openssl_sign(key, pae(IN_TOTO, FILE), algorithm, tmp_path)
    env = {"payloadType": IN_TOTO, "payload": b64(FILE), "signatures": [{"keyid": keyid, "sig": b64(sig)}]}
    r = verify_envelope(env_bytes(env), FILE, IN_TOTO, policy(("git:alice@example.com", pem)))
    assert r.to_json()["signatures"] == [{"keyid": keyid, "result": "verified", "identity": "git:alice@example.com"}]
    assert r.verifies_for == ["git:alice@example.com"]


def test_ed25519_is_deterministic_and_equals_openssl(tmp_path: Path) -> None:
    path = openssl_key(tmp_path, "ed25519")
    key = load_private_key(path)
    a, b = sign(FILE, IN_TOTO, key), sign(FILE, IN_TOTO, key)
    assert a == b
    assert sig_bytes(a) == openssl_sign(path, pae(IN_TOTO, FILE), "ed25519", tmp_path)
    assert sign(FILE + b" ", IN_TOTO, key)["signatures"][0]["sig"] != a["signatures"][0]["sig"]


def test_rfc8032_test_1(tmp_path: Path) -> None:
    """RFC 8032 §7.1 TEST 1 (an empty message), through a PKCS#8 PEM file and ``sign_raw``."""
    secret = bytes.fromhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
    public = bytes.fromhex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")
    expected = bytes.fromhex(
        "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595b"
        "be24655141438e7a100b"
    )
    pem = ed25519.Ed25519PrivateKey.from_private_bytes(secret).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    path = tmp_path / "rfc8032.pem"
    path.write_bytes(pem)
    key = load_private_key(path)
    assert key.sign_raw(b"") == expected
    spki = bytes.fromhex("302a300506032b6570032100") + public  # RFC 8410's SubjectPublicKeyInfo
    assert key.keyid == "sha256:" + hashlib.sha256(spki).hexdigest()
    # and the envelope's signature is that primitive over the PAE
    env = sign(b"", IN_TOTO, key)
    assert sig_bytes(env) == key.sign_raw(pae(IN_TOTO, b""))
    r = verify_envelope(jsonio.dumps(env), b"", IN_TOTO, policy(("rfc", key.public_pem().decode())))
    assert r.verifies_for == ["rfc"]


def test_ecdsa_der_is_read_strictly(keys) -> None:
    key = load_private_key(keys["openssl", "ecdsa-p256"])
    pol = policy(("alice", key.public_pem().decode()))
    env = sign(FILE, IN_TOTO, key)
    r_, s_ = decode_dss_signature(sig_bytes(env))

    def result(sig: bytes) -> str:
        res = verify_envelope(jsonio.dumps(with_sig(env, sig=b64(sig))), FILE, IN_TOTO, pol)
        assert res.envelope_result is None
        return res.signatures[0].result

    assert result(sig_bytes(env)) == "verified"
    assert encode_dss_signature(r_, s_) == b"\x30" + bytes([len(der_int(r_) + der_int(s_))]) + der_int(r_) + der_int(s_)
    # raw r||s is not a signature ([SIG-2])
    assert result(r_.to_bytes(32, "big") + s_.to_bytes(32, "big")) == "invalid"
    # no low-S rule: n - s verifies too
    assert result(encode_dss_signature(r_, P256_N - s_)) == "verified"
    # non-canonical DER: a needless leading zero, a long-form length, trailing bytes
    padded = der_int(r_, pad=True) + der_int(s_)
    assert result(b"\x30" + bytes([len(padded)]) + padded) == "invalid"
    body = der_int(r_) + der_int(s_)
    assert result(b"\x30\x81" + bytes([len(body)]) + body) == "invalid"
    assert result(sig_bytes(env) + b"\x00") == "invalid"
    assert result(b"") == "invalid"


def test_url_safe_unpadded_base64_is_read(keys) -> None:
    key = load_private_key(keys["aefgate", "ed25519"])
    pol = policy(("alice", key.public_pem().decode()))
    payload = b"\xfb\xff\xbe" * 10 + b"?>" + FILE  # an encoding with + and / in it, and padding
    env = sign(payload, IN_TOTO, key)
    assert "+" in env["payload"] and "/" in env["payload"] and env["payload"].endswith("=")

    def url(text: str) -> str:
        return base64.urlsafe_b64encode(base64.b64decode(text)).decode().rstrip("=")

    urlsafe = {**with_sig(env, sig=url(env["signatures"][0]["sig"])), "payload": url(env["payload"])}
    assert "-" in urlsafe["payload"] and "_" in urlsafe["payload"] and "=" not in urlsafe["payload"]
    assert verify_envelope(env_bytes(urlsafe), payload, IN_TOTO, pol).verifies_for == ["alice"]
    padded_url = {**env, "payload": base64.urlsafe_b64encode(payload).decode()}
    assert verify_envelope(env_bytes(padded_url), payload, IN_TOTO, pol).verifies_for == ["alice"]
    # mixed alphabets in one value, whitespace, set unused bits: malformed
    mixed = {**env, "payload": env["payload"].replace("+", "-", 1)}
    wrapped = {**env, "payload": env["payload"][:8] + "\n" + env["payload"][8:]}
    sig = env["signatures"][0]["sig"]
    assert sig.endswith("==")  # 64 bytes: the last character carries 4 unused bits, which must be 0
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    bits = sig[:-3] + alphabet[alphabet.index(sig[-3]) | 1] + "=="
    for bad in (mixed, wrapped, with_sig(env, sig=" " + sig), with_sig(env, sig=bits),
                with_sig(env, sig=sig.replace("=", "") + "="), {**env, "payload": env["payload"] + "="}):
        r = verify_envelope(env_bytes(bad), payload, IN_TOTO, pol)
        assert r.to_json() == {"envelopeResult": "malformed", "signatures": [], "verifiesFor": []}


GOOD = {"payloadType": IN_TOTO, "payload": b64(FILE), "signatures": [{"keyid": "k", "sig": "AAAA"}]}


@pytest.mark.parametrize("text", [
    b"", b"not json", b"[]", b"null", b'"x"', b"\xef\xbb\xbf{}",
    json.dumps({**GOOD, "payloadType": None}).encode(),
    json.dumps({**GOOD, "payloadType": 1}).encode(),
    json.dumps({k: v for k, v in GOOD.items() if k != "payloadType"}).encode(),
    json.dumps({k: v for k, v in GOOD.items() if k != "payload"}).encode(),
    json.dumps({**GOOD, "payload": ["AAAA"]}).encode(),
    json.dumps({**GOOD, "signatures": []}).encode(),  # at least one ([SIG-1])
    json.dumps({k: v for k, v in GOOD.items() if k != "signatures"}).encode(),
    json.dumps({**GOOD, "signatures": {"keyid": "k", "sig": "AAAA"}}).encode(),
    json.dumps({**GOOD, "signatures": ["AAAA"]}).encode(),
    json.dumps({**GOOD, "signatures": [{"keyid": "k"}]}).encode(),
    json.dumps({**GOOD, "signatures": [{"keyid": "k", "sig": None}]}).encode(),
    json.dumps({**GOOD, "signatures": [{"keyid": None, "sig": "AAAA"}]}).encode(),
    json.dumps({**GOOD, "signatures": [{"keyid": 7, "sig": "AAAA"}]}).encode(),
    json.dumps({**GOOD, "signatures": [{"keyid": "k", "sig": "AAAA"}, {"sig": "AA A"}]}).encode(),
    json.dumps({**GOOD, "payload": "AAA="}).replace('"payload"', '"payload": "AAAA", "payload"', 1).encode(),
    json.dumps(GOOD).encode() + b" x",
], ids=lambda b: b.decode("utf-8", "replace")[:40] or "empty")
def test_malformed_envelopes(keys, text: bytes) -> None:
    pol = policy(("alice", public_pem_of(keys["aefgate", "ed25519"])))
    r = verify_envelope(text, FILE, IN_TOTO, pol)
    assert r.to_json() == {"envelopeResult": "malformed", "signatures": [], "verifiesFor": []}


def test_the_well_formed_baseline_of_the_malformed_cases(keys) -> None:
    pol = policy(("alice", public_pem_of(keys["aefgate", "ed25519"])))
    r = verify_envelope(env_bytes(GOOD), FILE, IN_TOTO, pol)
    assert r.to_json() == {"envelopeResult": None, "signatures": [{"keyid": "k", "result": "untrusted-key"}],
                           "verifiesFor": []}
    extra = {**GOOD, "signatures": [{"keyid": "k", "sig": "AAAA", "comment": "x"}], "x": 1}  # DSSE is open
    assert verify_envelope(env_bytes(extra), FILE, IN_TOTO, pol).envelope_result is None


def test_keyless_signatures_are_tried_in_policy_order(keys, other_keys) -> None:
    alice = load_private_key(keys["aefgate", "ecdsa-p256"])
    bob = load_private_key(keys["openssl", "ed25519"])
    carol = load_private_key(other_keys["carol"])
    pol = policy(("git:bob", bob.public_pem().decode()), ("git:alice", alice.public_pem().decode()))
    sigs = [
        {"sig": sign(FILE, IN_TOTO, alice)["signatures"][0]["sig"]},  # keyid absent
        {"keyid": "", "sig": sign(FILE, IN_TOTO, bob)["signatures"][0]["sig"]},  # keyid empty
        {"keyid": "", "sig": sign(FILE, IN_TOTO, carol)["signatures"][0]["sig"]},  # nobody trusted
        {"sig": "AAAA"},  # garbage, keyless: not invalid, untrusted
    ]
    env = {"payloadType": IN_TOTO, "payload": b64(FILE), "signatures": sigs}
    r = verify_envelope(env_bytes(env), FILE, IN_TOTO, pol)
    assert r.to_json() == {
        "envelopeResult": None,
        "signatures": [
            {"keyid": alice.keyid, "result": "verified", "identity": "git:alice"},
            {"keyid": bob.keyid, "result": "verified", "identity": "git:bob"},
            {"keyid": "", "result": "untrusted-key"},
            {"keyid": "", "result": "untrusted-key"},
        ],
        "verifiesFor": ["git:bob", "git:alice"],  # policy order, not envelope order
    }


def test_keyless_names_the_first_key_in_policy_order(tmp_path: Path, keys) -> None:
    # one identity, two keys (a rotation): the keyless signature names the key that verifies it
    alice_old = load_private_key(keys["aefgate", "ed25519"])
    alice_new = load_private_key(keys["openssl", "ecdsa-p256"])
    pol = policy(("git:alice", alice_old.public_pem().decode()), ("git:alice", alice_new.public_pem().decode()))
    env = with_sig(sign(FILE, IN_TOTO, alice_new), keyid=None)
    r = verify_envelope(jsonio.dumps(env), FILE, IN_TOTO, pol)
    assert r.signatures == [SigResult(alice_new.keyid, "verified", "git:alice")]
    assert r.verifies_for == ["git:alice"]


def test_keyid_checks_only_that_key(keys, other_keys) -> None:
    alice = load_private_key(keys["aefgate", "ed25519"])
    dave = load_private_key(other_keys["dave"])
    pol = policy(("alice", alice.public_pem().decode()), ("dave", dave.public_pem().decode()))
    # signed by dave but claiming alice's key id: checked against alice's key only
    env = with_sig(sign(FILE, IN_TOTO, dave), keyid=alice.keyid)
    assert verify_envelope(jsonio.dumps(env), FILE, IN_TOTO, pol).signatures == [SigResult(alice.keyid, "invalid")]
    # a key id no key has: untrusted, whatever the signature
    env = with_sig(sign(FILE, IN_TOTO, dave), keyid="sha256:" + "0" * 64)
    assert verify_envelope(jsonio.dumps(env), FILE, IN_TOTO, pol).signatures[0].result == "untrusted-key"
    # two signatures, one good: verifies for its identity only
    two = {**sign(FILE, IN_TOTO, alice)}
    two["signatures"] = two["signatures"] + [{"keyid": dave.keyid, "sig": "AAAA"}]
    r = verify_envelope(jsonio.dumps(two), FILE, IN_TOTO, pol)
    assert [s.result for s in r.signatures] == ["verified", "invalid"] and r.verifies_for == ["alice"]


def test_unsupported_algorithms(keys, other_keys) -> None:
    alice = load_private_key(keys["aefgate", "ed25519"])
    rsa_pem = openssl_public_pem(other_keys["rsa"])
    p384_pem = openssl_public_pem(other_keys["p384"])
    pol = policy(("rsa", rsa_pem), ("p384", p384_pem), ("alice", alice.public_pem().decode()))
    rsa_id, p384_id = pol.keys[0].keyid, pol.keys[1].keyid
    # a signature the RSA / P-384 key would check (OpenSSL signs with them for real)
    folder = other_keys["rsa"].parent
    rsa_sig = openssl("pkeyutl", "-sign", "-inkey", other_keys["rsa"], "-rawin", "-digest", "sha256",
                      "-in", _write(folder / "m.bin", pae(IN_TOTO, FILE)))
    p384_sig = openssl("pkeyutl", "-sign", "-inkey", other_keys["p384"], "-rawin", "-digest", "sha256",
                       "-in", folder / "m.bin")
    env = {"payloadType": IN_TOTO, "payload": b64(FILE), "signatures": [
        {"keyid": rsa_id, "sig": b64(rsa_sig)},
        {"keyid": p384_id, "sig": b64(p384_sig)},
        {"sig": b64(rsa_sig)},  # keyless: only keys of [SIG-2] can verify it
        sign(FILE, IN_TOTO, alice)["signatures"][0],
    ]}
    r = verify_envelope(env_bytes(env), FILE, IN_TOTO, pol)
    assert r.to_json()["signatures"] == [
        {"keyid": rsa_id, "result": "unsupported-algorithm"},
        {"keyid": p384_id, "result": "unsupported-algorithm"},
        {"keyid": "", "result": "untrusted-key"},
        {"keyid": alice.keyid, "result": "verified", "identity": "alice"},
    ]
    assert r.verifies_for == ["alice"]


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


# -- private keys --------------------------------------------------------------------------------------------------


def _refused_key(path: Path) -> Refusal:
    with pytest.raises(Refusal) as e:
        load_private_key(path)
    assert e.value.rule == "SIG-2" and e.value.exit_code == 2
    return e.value


def test_private_keys_refused(tmp_path: Path) -> None:
    ec_key = openssl_key(tmp_path, "ecdsa-p256", "ec")
    cases: dict[str, Path] = {
        "missing": tmp_path / "absent.pem",
        "folder": tmp_path,
        "encrypted": _write(tmp_path / "enc.pem", openssl(
            "genpkey", *["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"], "-aes256", "-pass",
            "pass:secret")),
        "sec1": _write(tmp_path / "sec1.pem", openssl("ec", "-in", ec_key)),
        "rsa": openssl_key(tmp_path, "rsa"),
        "p384": openssl_key(tmp_path, "ecdsa-p384"),
        "public": _write(tmp_path / "pub.pem", openssl_public_pem(ec_key).encode()),
        "der": _write(tmp_path / "key.der", openssl("pkey", "-in", ec_key, "-outform", "DER")),
        "two": _write(tmp_path / "two.pem", ec_key.read_bytes() * 2),
        "garbage": _write(tmp_path / "garbage.pem", b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"),
        "empty": _write(tmp_path / "empty.pem", b""),
    }
    assert (tmp_path / "sec1.pem").read_bytes().startswith(b"-----BEGIN EC PRIVATE KEY-----")
    assert (tmp_path / "enc.pem").read_bytes().startswith(b"-----BEGIN ENCRYPTED PRIVATE KEY-----")
    for name, path in cases.items():
        err = _refused_key(path)
        if path.is_file():
            text = str(err) + err.message + err.where
            for line in pem_body_lines(path.read_bytes().decode("latin-1")):
                # a binary (DER) file splits into arbitrary short "lines" ("_"): only runs long enough to be key
                # material are looked for
                if len(line) >= 16:
                    assert line not in text, f"{name}: key material in the message"
    load_private_key(ec_key)  # the key they were made from reads


def test_keygen_api() -> None:
    for algorithm in ("ecdsa-p256", "ed25519"):
        private_pem, public_pem, entry = keygen(algorithm, "git:alice@example.com", ["redact"])
        assert private_pem.startswith(b"-----BEGIN PRIVATE KEY-----\n")
        assert public_pem.startswith(b"-----BEGIN PUBLIC KEY-----\n")
        assert entry == {"identity": "git:alice@example.com", "publicKey": public_pem.decode(), "may": ["redact"]}
        pol = TrustPolicy.from_json({"keys": [entry]})
        assert pol.keys[0].algorithm == algorithm and pol.allows("git:alice@example.com", "redact")
    for bad_alg, ident in (("rsa", "x"), ("ecdsa-p384", "x"), ("ed25519", "")):
        with pytest.raises(Refusal):
            keygen(bad_alg, ident)


def test_signing_key_repr_holds_no_material(tmp_path: Path) -> None:
    path = openssl_key(tmp_path, "ed25519")
    key = load_private_key(path)
    for text in (repr(key), str(key), repr(vars(key))):
        for line in pem_body_lines(path.read_bytes()):
            assert line not in text


# -- runs: attestation.dsse.json over seal.json ----------------------------------------------------------------------


@pytest.fixture
def signed_run(tmp_path: Path, keys) -> tuple[Path, TrustPolicy]:
    run = copy_run(EXAMPLES / "aef-inspect" / "input", tmp_path / "run")
    key = load_private_key(keys["openssl", "ecdsa-p256"])
    (run / "attestation.dsse.json").write_bytes(
        jsonio.dumps(sign((run / "seal.json").read_bytes(), payload_type_for("seal.json"), key))
    )
    return run, policy(("git:bob", public_pem_of(keys["aefgate", "ed25519"])), ("git:alice", key.public_pem().decode()))


def test_attestation_signed_by(signed_run, keys) -> None:
    run, pol = signed_run
    assert attestation_signed_by(run, pol) == ["git:alice"]
    assert attestation_signed_by(run, policy(("git:bob", public_pem_of(keys["aefgate", "ed25519"])))) == []
    r = attestation_result(run, pol)
    assert r is not None and r.envelope_result is None
    # seal.json edited after signing (re-sealed by someone without the key): no longer signed
    seal = run / "seal.json"
    seal.write_bytes(seal.read_bytes() + b" ")
    assert attestation_signed_by(run, pol) == []
    assert attestation_result(run, pol).envelope_result == "payload-mismatch"


def test_attestation_absent_or_odd(signed_run, tmp_path: Path) -> None:
    run, pol = signed_run
    env = run / "attestation.dsse.json"
    data = env.read_bytes()
    env.unlink()
    assert attestation_signed_by(run, pol) == [] and attestation_result(run, pol) is None
    # through a link: not followed
    outside = _write(tmp_path / "elsewhere.json", data)
    os.symlink(outside, env)
    assert attestation_signed_by(run, pol) == []
    env.unlink()
    env.write_bytes(b"{not json")
    assert attestation_result(run, pol).envelope_result == "malformed"
    env.write_bytes(data)
    (run / "seal.json").unlink()
    assert attestation_signed_by(run, pol) == [] and attestation_result(run, pol) is None
