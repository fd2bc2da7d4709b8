"""Signing on the command line, as a real process: ``keygen``, ``seal --key``, ``sign-attestation``,
``verify --policy``, and the §9.3 ``aef signature`` / ``aef sign`` / ``aef run --policy`` contract."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import stat
from pathlib import Path

import pytest

from tests._keys import openssl, openssl_key, openssl_public_der, pem_body_lines
from tests._shared import EXAMPLES, copy_run
from tests.conftest import aefgate, one_json

IN_TOTO = "application/vnd.in-toto+json"
CHECKPOINT = "application/vnd.agenteval.aef.checkpoint+json"
KEYID = re.compile(r"sha256:[0-9a-f]{64}")
STD_B64 = re.compile(r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?")


def tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def unsealed_run(tmp_path: Path, name: str = "run") -> Path:
    """A fresh closed, unsealed run (the demo scenario, through ``aef produce``)."""
    scenario = Path(__file__).resolve().parents[2] / "src" / "aefgate" / "fixtures" / "demo" / "scenario.json"
    out = tmp_path / name
    p = aefgate("aef", "produce", scenario, out)
    assert p.returncode == 0, p.stderr
    return out


def keygen(tmp_path: Path, name: str, identity: str, algorithm: str = "ecdsa-p256") -> tuple[Path, str]:
    """``aefgate keygen``; returns the folder and the printed key id."""
    out = tmp_path / name
    p = aefgate("keygen", out, "--identity", identity, "--algorithm", algorithm)
    assert p.returncode == 0, p.stderr
    m = KEYID.search(p.stderr)
    assert m is not None, p.stderr
    assert_no_secret(out / "private.pem", p.stdout, p.stderr)
    return out, m.group(0)


def assert_no_secret(private_key: Path, *texts: str | bytes) -> None:
    """No line of the private key's PEM, nor its DER in base64 or hex, is in any of ``texts``."""
    pem = private_key.read_bytes()
    der = base64.b64decode("".join(pem_body_lines(pem)))
    needles = [*pem_body_lines(pem), der.hex(), base64.b64encode(der).decode()[:40]]
    for text in texts:
        t = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
        for n in needles:
            assert n not in t, "private key material in an output"


@pytest.mark.parametrize("algorithm", ["ecdsa-p256", "ed25519"])
def test_keygen_seal_verify(tmp_path: Path, algorithm: str) -> None:
    alice, keyid = keygen(tmp_path, "alice", "git:alice@example.com", algorithm)
    mode = stat.S_IMODE((alice / "private.pem").stat().st_mode)
    assert mode == 0o600
    assert sorted(p.name for p in alice.iterdir()) == ["policy.json", "private.pem", "public.pem"]
    pol = json.loads((alice / "policy.json").read_text())
    assert [k["identity"] for k in pol["keys"]] == ["git:alice@example.com"]
    assert pol["keys"][0]["publicKey"] == (alice / "public.pem").read_text()
    run = unsealed_run(tmp_path)
    p = aefgate("seal", run, "--key", alice / "private.pem")
    assert p.returncode == 0, p.stderr
    assert keyid in p.stderr and (run / "attestation.dsse.json").is_file()
    env = json.loads((run / "attestation.dsse.json").read_bytes())
    assert base64.b64decode(env["payload"]) == (run / "seal.json").read_bytes()
    assert env["payloadType"] == IN_TOTO and [s["keyid"] for s in env["signatures"]] == [keyid]
    # verify with the policy that trusts the key: signed by the identity
    p = aefgate("verify", run, "--policy", alice / "policy.json")
    assert p.returncode == 0, p.stderr
    assert "signed by git:alice@example.com" in p.stderr and "authentic" not in p.stderr
    out = one_json(aefgate("verify", run, "--policy", alice / "policy.json", "--json").stdout)
    assert out["outcome"] == "intact" and out["signedBy"] == ["git:alice@example.com"]
    assert out["attestation"]["signatures"][0]["result"] == "verified"
    # with another policy: intact, no signer ([SIG-7]: "intact (unsigned)", never authentic)
    bob, _ = keygen(tmp_path, "bob", "git:bob@example.com", "ed25519")
    p = aefgate("verify", run, "--policy", bob / "policy.json")
    assert p.returncode == 0, p.stderr
    assert "intact (unsigned)" in p.stderr and "alice" not in p.stderr and "untrusted-key" in p.stderr
    out = one_json(aefgate("verify", run, "--policy", bob / "policy.json", "--json").stdout)
    assert out["outcome"] == "intact" and out["signedBy"] == []
    # without a policy: signatures are not looked at
    out = one_json(aefgate("verify", run, "--json").stdout)
    assert "signedBy" not in out and out["outcome"] == "intact"
    # the §9.3 contract
    p = aefgate("aef", "run", run, "--policy", alice / "policy.json")
    assert p.returncode == 0 and one_json(p.stdout) == {"outcome": "intact", "problems": [],
                                                        "signedBy": ["git:alice@example.com"]}
    assert one_json(aefgate("aef", "run", run, "--policy", bob / "policy.json").stdout)["signedBy"] == []
    p = aefgate("aef", "signature", run / "attestation.dsse.json", run / "seal.json", alice / "policy.json",
                "--payload-type", IN_TOTO)
    assert p.returncode == 0 and one_json(p.stdout) == {
        "envelopeResult": None,
        "signatures": [{"keyid": keyid, "result": "verified", "identity": "git:alice@example.com"}],
        "verifiesFor": ["git:alice@example.com"],
    }
    assert_no_secret(alice / "private.pem", *tree(run).values(), (alice / "policy.json").read_bytes(),
                     (alice / "public.pem").read_bytes())


def test_policy_in_policy_order(tmp_path: Path) -> None:
    alice, _ = keygen(tmp_path, "alice", "git:alice@example.com")
    bob, _ = keygen(tmp_path, "bob", "git:bob@example.com", "ed25519")
    run = unsealed_run(tmp_path)
    assert aefgate("seal", run, "--key", alice / "private.pem").returncode == 0
    both = tmp_path / "both.json"
    keys = [json.loads((f / "policy.json").read_text())["keys"][0] for f in (bob, alice)]
    both.write_text(json.dumps({"keys": keys}))
    assert one_json(aefgate("aef", "run", run, "--policy", both).stdout)["signedBy"] == ["git:alice@example.com"]


def test_resealed_run_is_no_longer_signed(tmp_path: Path) -> None:
    """§4.5: a change after sealing by anyone without the key: re-sealing is not enough."""
    alice, _ = keygen(tmp_path, "alice", "git:alice@example.com")
    run = unsealed_run(tmp_path)
    assert aefgate("seal", run, "--key", alice / "private.pem").returncode == 0
    (run / "seal.json").unlink()
    ext = run / "ext"
    ext.mkdir()
    (ext / "note.txt").write_text("added after signing")
    assert aefgate("seal", run).returncode == 0  # anyone can re-seal
    p = aefgate("verify", run, "--policy", alice / "policy.json")
    assert p.returncode == 0 and "intact (unsigned)" in p.stderr and "payload-mismatch" in p.stderr
    assert one_json(aefgate("aef", "run", run, "--policy", alice / "policy.json").stdout)["signedBy"] == []
    # an invalid run is signed by nobody, and the exit code says invalid
    (ext / "note.txt").write_text("changed")
    p = aefgate("verify", run, "--policy", alice / "policy.json", "--json")
    assert p.returncode == 1 and one_json(p.stdout)["signedBy"] == []


def test_openssl_keys_sign_on_the_command_line(tmp_path: Path) -> None:
    for algorithm in ("ecdsa-p256", "ed25519"):
        key = openssl_key(tmp_path, algorithm)
        keyid = "sha256:" + hashlib.sha256(openssl_public_der(key)).hexdigest()
        pem = openssl("pkey", "-in", key, "-pubout").decode()
        pol = tmp_path / f"policy-{algorithm}.json"
        pol.write_text(json.dumps({"keys": [{"identity": "spiffe://ci/sealer", "publicKey": pem}]}))
        run = unsealed_run(tmp_path, f"run-{algorithm}")
        p = aefgate("seal", run, "--key", key, "--json")
        assert p.returncode == 0, p.stderr
        assert one_json(p.stdout)["attestation"] == {"keyid": keyid, "algorithm": algorithm}
        assert one_json(aefgate("aef", "run", run, "--policy", pol).stdout)["signedBy"] == ["spiffe://ci/sealer"]
        assert_no_secret(key, p.stdout, p.stderr, *tree(run).values())


def bad_keys(tmp_path: Path) -> dict[str, Path]:
    ec = openssl_key(tmp_path, "ecdsa-p256", "ec-source")
    out = {
        "missing": tmp_path / "absent.pem",
        "encrypted": tmp_path / "enc.pem",
        "sec1": tmp_path / "sec1.pem",
        "rsa": openssl_key(tmp_path, "rsa"),
        "p384": openssl_key(tmp_path, "ecdsa-p384"),
    }
    out["encrypted"].write_bytes(openssl("pkcs8", "-topk8", "-in", ec, "-passout", "pass:secret", "-v2", "aes256"))
    out["sec1"].write_bytes(openssl("ec", "-in", ec))
    return out


def test_bad_keys_change_nothing(tmp_path: Path) -> None:
    run = unsealed_run(tmp_path)
    before = tree(run)
    for name, key in bad_keys(tmp_path).items():
        for cmd in (["seal", run, "--key", key], ["seal", run, "--key", key, "--json"],
                    ["aef", "sign", run / "run.json", key, "--payload-type", IN_TOTO]):
            p = aefgate(*cmd)
            assert p.returncode == 2, (name, p.stderr)
            assert "SIG-2" in p.stderr and "Traceback" not in p.stderr, name
            if cmd[0] == "aef":
                assert p.stdout == ""
            assert tree(run) == before, f"{name}: the run changed"
            if key.is_file():
                assert_no_secret(key, p.stdout, p.stderr)
    assert not (run / "seal.json").exists()


def test_seal_key_refuses_an_existing_attestation(tmp_path: Path) -> None:
    alice, _ = keygen(tmp_path, "alice", "git:alice@example.com")
    run = unsealed_run(tmp_path)
    (run / "attestation.dsse.json").write_text("{}")
    before = tree(run)
    p = aefgate("seal", run, "--key", alice / "private.pem")
    assert p.returncode == 2 and "OUT-1" in p.stderr and tree(run) == before


def test_sign_attestation(tmp_path: Path) -> None:
    alice, keyid = keygen(tmp_path, "alice", "git:alice@example.com", "ed25519")
    run = copy_run(EXAMPLES / "aef-inspect" / "input", tmp_path / "sealed")
    assert not (run / "attestation.dsse.json").exists()
    p = aefgate("sign-attestation", run, "--key", alice / "private.pem", "--json")
    assert p.returncode == 0, p.stderr
    assert one_json(p.stdout)["keyid"] == keyid
    assert one_json(aefgate("aef", "run", run, "--policy", alice / "policy.json").stdout)["signedBy"] == [
        "git:alice@example.com"]
    again = aefgate("sign-attestation", run, "--key", alice / "private.pem")
    assert again.returncode == 2 and "OUT-1" in again.stderr
    # a run that does not verify intact is not signed
    broken = copy_run(EXAMPLES / "aef-inspect" / "input", tmp_path / "broken")
    (broken / "run.json").write_bytes((broken / "run.json").read_bytes() + b" ")
    p = aefgate("sign-attestation", broken, "--key", alice / "private.pem")
    assert p.returncode == 2 and not (broken / "attestation.dsse.json").exists()
    unsealed = unsealed_run(tmp_path)
    p = aefgate("sign-attestation", unsealed, "--key", alice / "private.pem")
    assert p.returncode == 2 and not (unsealed / "attestation.dsse.json").exists()


def test_keygen_refusals(tmp_path: Path) -> None:
    full = tmp_path / "full"
    full.mkdir()
    (full / "x").write_text("x")
    p = aefgate("keygen", full, "--identity", "a")
    assert p.returncode == 2 and "OUT-1" in p.stderr and sorted(x.name for x in full.iterdir()) == ["x"]
    p = aefgate("keygen", tmp_path / "k", "--identity", "a", "--algorithm", "rsa")
    assert p.returncode == 2 and not (tmp_path / "k").exists()
    p = aefgate("keygen", tmp_path / "k", "--identity", "")
    assert p.returncode == 2 and not (tmp_path / "k").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    p = aefgate("keygen", empty, "--identity", "git:carol", "--may", "redact", "--json")
    assert p.returncode == 0, p.stderr
    out = one_json(p.stdout)
    assert KEYID.fullmatch(out["keyid"]) and out["algorithm"] == "ecdsa-p256"
    assert json.loads((empty / "policy.json").read_text())["keys"][0]["may"] == ["redact"]
    assert_no_secret(empty / "private.pem", p.stdout, p.stderr)
    assert not [x for x in tmp_path.iterdir() if x.name.startswith(".")]  # no temporary folder left behind


def test_aef_sign_and_signature(tmp_path: Path) -> None:
    alice, keyid = keygen(tmp_path, "alice", "git:alice@example.com", "ed25519")
    manifest = tmp_path / "checkpoint.json"
    manifest.write_bytes(b'{"checkpoint": "caf\xc3\xa9"}\n')
    p = aefgate("aef", "sign", manifest, alice / "private.pem", "--payload-type", CHECKPOINT)
    assert p.returncode == 0, p.stderr
    env = one_json(p.stdout)
    assert set(env) == {"payloadType", "payload", "signatures"} and env["payloadType"] == CHECKPOINT
    assert len(env["signatures"]) == 1 and env["signatures"][0]["keyid"] == keyid
    assert STD_B64.fullmatch(env["payload"]) and STD_B64.fullmatch(env["signatures"][0]["sig"])
    again = one_json(aefgate("aef", "sign", manifest, alice / "private.pem", "--payload-type", CHECKPOINT).stdout)
    assert again == env  # Ed25519 is deterministic
    envelope = tmp_path / "checkpoint.dsse.json"
    envelope.write_text(p.stdout)

    def signature(*args) -> dict:
        p = aefgate("aef", "signature", *args)
        assert p.returncode == 0, p.stderr
        return one_json(p.stdout)

    assert signature(envelope, manifest, alice / "policy.json", "--payload-type", CHECKPOINT)["verifiesFor"] == [
        "git:alice@example.com"]
    assert signature(envelope, manifest, alice / "policy.json", "--payload-type", IN_TOTO)["envelopeResult"] == (
        "payload-mismatch")
    bad = tmp_path / "bad.dsse.json"
    bad.write_text('{"payloadType": "x", "payload": "aGk=", "signatures": []}')
    assert signature(bad, manifest, alice / "policy.json", "--payload-type", CHECKPOINT) == {
        "envelopeResult": "malformed", "signatures": [], "verifiesFor": []}
    # input errors: exit 2, nothing on stdout
    refused = tmp_path / "refused.json"
    refused.write_text('{"keys": [], "extra": 1}')
    for args in (
        (envelope, manifest, refused, "--payload-type", CHECKPOINT),  # policyRefused
        (envelope, manifest, tmp_path / "absent.json", "--payload-type", CHECKPOINT),
        (tmp_path / "absent.dsse.json", manifest, alice / "policy.json", "--payload-type", CHECKPOINT),
        (envelope, tmp_path / "absent", alice / "policy.json", "--payload-type", CHECKPOINT),
        (envelope, manifest, alice / "policy.json", "--payload-type", "text/plain"),
        (envelope, manifest, alice / "policy.json"),
    ):
        p = aefgate("aef", "signature", *args)
        assert p.returncode == 2 and p.stdout == "" and p.stderr, args
    p = aefgate("aef", "sign", tmp_path / "absent", alice / "private.pem", "--payload-type", CHECKPOINT)
    assert p.returncode == 2 and p.stdout == ""


def test_policy_refused_everywhere(tmp_path: Path) -> None:
    run = copy_run(EXAMPLES / "aef-inspect" / "input", tmp_path / "run")
    bad = tmp_path / "bad.json"
    bad.write_text('{"keys": [{"identity": "a", "publicKey": "-----BEGIN PUBLIC KEY-----\\nAAAA\\n'
                   '-----END PUBLIC KEY-----\\n"}]}')
    for cmd in (["aef", "run", run, "--policy", bad], ["aef", "seal", run, "--policy", bad],
                ["verify", run, "--policy", bad]):
        p = aefgate(*cmd)
        assert p.returncode == 2 and p.stdout == "" and "SIG-3" in p.stderr, cmd
    p = aefgate("verify", run, "--policy", bad, "--json")
    assert p.returncode == 2 and one_json(p.stdout)["error"]["rule"] == "SIG-3"
    empty = tmp_path / "empty.json"
    empty.write_text('{"keys": []}')
    out = one_json(aefgate("aef", "seal", run, "--policy", empty).stdout)
    assert out["problems"] == []


def test_authorized_redaction_with_a_policy(tmp_path: Path) -> None:
    """[OVL-10] through `verify --policy` / `aef run --policy` / `aef seal --policy`: a blob withheld by a redaction
    whose batch is signed by an identity the policy lets redact is `withheld`, not `missing`."""
    run = copy_run(EXAMPLES / "inspect-aef-edges" / "run", tmp_path / "run")
    blob = sorted((run / "blobs").rglob("*"))[-1]
    assert blob.is_file()
    alice, _ = keygen(tmp_path, "alice", "git:alice@example.com")
    writer, _ = keygen(tmp_path, "writer", "git:writer@example.com")  # may sign, may not redact
    redactor = tmp_path / "redactor.json"
    entry = json.loads((alice / "policy.json").read_text())["keys"][0]
    redactor.write_text(json.dumps({"keys": [json.loads((writer / "policy.json").read_text())["keys"][0],
                                             {**entry, "may": ["redact"]}]}))
    p = aefgate("decide", run, "--kind", "redact", "--blob", blob.name, "--by", "git:alice@example.com",
                "--reason", "personal data", "--key", alice / "private.pem")
    assert p.returncode == 0, p.stderr
    assert aefgate("sign-attestation", run, "--key", writer / "private.pem").returncode == 0
    blob.unlink()
    rel = str(blob.relative_to(run))
    out = one_json(aefgate("aef", "run", run, "--policy", redactor).stdout)
    assert out == {"outcome": "intact", "problems": [[rel, "withheld"]], "withheld": 1,
                   "signedBy": ["git:writer@example.com"]}
    p = aefgate("verify", run, "--policy", redactor)
    assert p.returncode == 0 and "intact, 1 withheld (signed by git:writer@example.com)" in p.stderr
    assert one_json(aefgate("aef", "seal", run, "--policy", redactor).stdout)["problems"] == [[rel, "withheld"]]
    # a policy that trusts alice's key without "may": ["redact"]: the blob is missing, the run invalid
    out = one_json(aefgate("aef", "run", run, "--policy", alice / "policy.json").stdout)
    assert out["outcome"] == "invalid" and [rel, "missing"] in out["problems"] and out["signedBy"] == []
    assert one_json(aefgate("aef", "run", run).stdout)["outcome"] == "invalid"
