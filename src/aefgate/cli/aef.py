"""``aefgate aef ...``: the command-line contract of spec 09 §9.3.

One invocation per operation, input paths as arguments, one JSON value (UTF-8, no BOM) on stdout, exit 0 when the
operation ran, and exit 2 with a message on stderr for a usage or input error (typer's own usage errors included:
the entry point, :func:`aefgate.cli.app.run`, maps every refusal to exit 2 here). Problems are ``[path, code]``
pairs in the order of §3.9.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from aefgate.cli import render
from aefgate.cli.inputs import SealedBy, read_anchors, read_input, require_dir, require_file
from aefgate.errors import Refusal

aef_app = typer.Typer(
    name="aef",
    help="The command-line contract of AEF 1.0 spec 09 §9.3 (what a conformance runner drives): one JSON value "
    "on stdout, exit 0 when the operation ran, exit 2 with a message on stderr for a usage or input error.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


POLICY_OPT = typer.Option(None, "--policy", help="A trust policy file ([SIG-4]): the keys to trust, each with its "
                                                 "identity and, optionally, \"may\": [\"redact\"].")


def load_policy(policy: Optional[Path]) -> Any:
    """``--policy``: the trust policy (a :class:`~aefgate.aef.signatures.TrustPolicy`), or None when not
    given. A policy the reader refuses, or whose key does not read, is an input error (exit 2)."""
    if policy is None:
        return None
    from aefgate.aef.signatures import TrustPolicy

    return TrustPolicy.load(policy)



def authorized_withheld(run_dir: Path, policy: Any) -> frozenset[str]:
    """The blob paths authorized redactions withhold under ``policy`` ([OVL-10], computed by the overlay verifier:
    :func:`aefgate.aef.overlays.authorized_redactions`); none without a policy."""
    if policy is None:
        return frozenset()
    from aefgate.aef.overlays import authorized_redactions

    return frozenset(authorized_redactions(run_dir, policy))


PAYLOAD_TYPE_OPT = typer.Option(..., "--payload-type", help="The payloadType [SIG-1] gives the signed file: "
                                "application/vnd.in-toto+json (seal.json, a batch seal) or "
                                "application/vnd.agenteval.aef.checkpoint+json (a checkpoint manifest).")


def check_payload_type(payload_type: str) -> str:
    from aefgate.aef.signatures import PAYLOAD_TYPES

    known = sorted(set(PAYLOAD_TYPES.values()))
    if payload_type not in known:
        raise Refusal("SIG-1", f"no file is signed with payloadType {payload_type!r}; [SIG-1] gives "
                               f"{' or '.join(known)}", "--payload-type")
    return payload_type


# -- operations -----------------------------------------------------------------------------------------------------


@aef_app.command("run")
def run_op(
    run_dir: Path = typer.Argument(..., metavar="DIR", help="The run folder."),
    policy: Optional[Path] = POLICY_OPT,
    anchors: Optional[Path] = typer.Option(None, "--anchors", help="A file holding a JSON list of run hashes."),
) -> None:
    """Verify a run: {"outcome", "problems"[, "withheld"][, "signedBy"][, "anchored"]}."""
    trust = load_policy(policy)
    require_dir(run_dir)
    anchor_list = read_anchors(anchors) if anchors is not None else None
    from aefgate.aef.verifier import verify_run  # the CLI's start time: formats load when a command runs

    render.emit_json(verify_run(run_dir, policy=trust, anchors=anchor_list).to_json())


@aef_app.command("seal")
def seal_op(
    run_dir: Path = typer.Argument(..., metavar="DIR", help="The run folder."),
    policy: Optional[Path] = POLICY_OPT,
) -> None:
    """Check a run's seal (§4.1): {"manifest": text, "runHash": hex, "problems"}."""
    from aefgate.aef.sealer import check_seal

    trust = load_policy(policy)
    require_dir(run_dir)
    render.emit_json(check_seal(run_dir, withheld_ok=authorized_withheld(run_dir, trust)).to_json())


NDJSON_SUFFIXES = (".ndjson", ".jsonl")


@aef_app.command("document")
def document_op(
    schema_name: str = typer.Argument(..., metavar="SCHEMA", help="A schema name: run, result, seal, ..."),
    file: Path = typer.Argument(..., metavar="FILE", help="The document (.ndjson: checked line by line)."),
) -> None:
    """Check a document against the writer and reader schemas: {"writer", "reader", "reads"}."""
    from aefgate.cli.reads import reads_of
    from aefgate.aef import jsonio, schema

    if schema_name not in schema.SCHEMA_NAMES:
        raise Refusal("CLI-2", f"no schema {schema_name!r}; known: {', '.join(schema.SCHEMA_NAMES)}", "SCHEMA")
    require_file(file)
    writer = schema.validator(schema_name, "writer")
    reader = schema.validator(schema_name, "reader")
    limit = jsonio.MAX_SEAL if schema_name == "seal" else jsonio.MAX_DOC
    writer_ok = reader_ok = True
    count = 0
    only: Any = None
    try:
        if file.suffix in NDJSON_SUFFIXES:
            docs = (doc for _, doc in jsonio.iter_ndjson(file, max_line=limit))
        else:
            docs = iter([jsonio.read_json(file, max_size=limit)])
        for doc in docs:
            count += 1
            only = doc if count == 1 else None
            if writer_ok and writer(doc) is not None:
                writer_ok = False
            if reader_ok and reader(doc) is not None:
                reader_ok = False
    except jsonio.JsonProblem:
        writer_ok = reader_ok = False
    reads: dict = {}
    if reader_ok and count == 1:
        reads = reads_of(schema_name, only)
    render.emit_json({"writer": "valid" if writer_ok else "invalid", "reader": "valid" if reader_ok else "invalid",
                      "reads": reads})


@aef_app.command("paths")
def paths_op(
    file: Path = typer.Argument(..., metavar="FILE", help='A JSON list of {"name", "paths"}.'),
) -> None:
    """The [RUN-3] problems of each list of paths: [{"name", "problems"}]."""
    from aefgate.aef.paths import path_problems

    items = read_input(file, top_object=False)
    if not isinstance(items, list) or not all(
        isinstance(i, dict) and isinstance(i.get("paths"), list) and all(isinstance(p, str) for p in i["paths"])
        for i in items
    ):
        raise Refusal("CLI-2", 'the file holds a JSON list of {"name", "paths": [string, ...]}', str(file))
    render.emit_json([{"name": i.get("name"), "problems": [list(x) for x in path_problems(i["paths"])]}
                      for i in items])


def parse_trial(text: Optional[str]) -> int | float | None:
    """TRIAL as the JSON number it spells (``3``, ``3.0``); absent, empty or ``null`` is no trial."""
    from aefgate.aef import jsonio

    if text is None or text in ("", "null"):
        return None
    try:
        value = jsonio.loads(text.encode("utf-8"), top_object=False)
    except jsonio.JsonProblem:
        value = None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Refusal("RES-4", f"a trial is a number, not {text!r}", "TRIAL")
    return value


@aef_app.command("result-id")
def result_id_op(
    run_id: str = typer.Argument(..., metavar="RUNID"),
    case_id: str = typer.Argument(..., metavar="CASEID"),
    path: str = typer.Argument(..., metavar="PATH"),
    trial: Optional[str] = typer.Argument(None, metavar="[TRIAL]", help="The trial number; absent: none."),
) -> None:
    """The [RES-4] result id of a line: {"resultId"}."""
    from aefgate.aef.resultid import result_id

    t = parse_trial(trial)
    try:
        rid = result_id(run_id, case_id, path, t)
    except (TypeError, ValueError) as e:
        raise Refusal("RES-4", str(e), "") from None
    render.emit_json({"resultId": rid})


@aef_app.command("summarize")
def summarize_op(
    run_dir: Path = typer.Argument(..., metavar="DIR", help="The run (without its summary.json)."),
    request: Path = typer.Argument(..., metavar="REQUEST", help='The entries to compute: {"lanes": [...]}.'),
) -> None:
    """The summary.json [SUM-2]..[SUM-9] give for the entries of REQUEST."""
    from aefgate.aef.summary import summarize

    require_dir(run_dir)
    req = read_input(request)
    render.emit_json(summarize(run_dir, req))


@aef_app.command("produce")
def produce_op(
    scenario: Path = typer.Argument(..., metavar="SCENARIO", help="A §9.2.1 scenario file."),
    out: Path = typer.Argument(..., metavar="OUT", help="The run folder to write (absent or empty)."),
) -> None:
    """Write the run a scenario describes (§9.2.1): {"results": the number of lines}."""
    from aefgate.aef.produce import produce

    facts = read_input(scenario)
    render.emit_json({"results": produce(facts, out)})


@aef_app.command("seal-write")
def seal_write_op(
    run_dir: Path = typer.Argument(..., metavar="DIR", help="The closed, unsealed run."),
    sealed_by: SealedBy = typer.Option(..., "--sealed-by", help="producer or ingest."),
    sealed_at: str = typer.Option(..., "--sealed-at", help="The sealing time, RFC 3339 UTC."),
) -> None:
    """Seal a run ([SEAL-1]..[SEAL-5]): writes DIR/seal.json; {"runHash": hex}."""
    from aefgate.aef.sealer import seal_run

    require_dir(run_dir)
    render.emit_json({"runHash": seal_run(run_dir, sealed_by=sealed_by.value, sealed_at=sealed_at)})


@aef_app.command("signature")
def signature_op(
    envelope: Path = typer.Argument(..., metavar="ENVELOPE", help="A DSSE envelope (a .dsse.json file)."),
    file: Path = typer.Argument(..., metavar="FILE", help="The file it signs."),
    policy: Path = typer.Argument(..., metavar="POLICY", help="A trust policy file ([SIG-4])."),
    payload_type: str = PAYLOAD_TYPE_OPT,
) -> None:
    """Verify a signature envelope ([SIG-1]..[SIG-5]): {"envelopeResult", "signatures", "verifiesFor"}."""
    from aefgate.aef.signatures import MAX_ENVELOPE, EnvelopeResult, verify_envelope

    check_payload_type(payload_type)
    trust = load_policy(policy)
    require_file(envelope)
    require_file(file)
    with open(envelope, "rb") as f:
        env = f.read(MAX_ENVELOPE + 1)
    if len(env) > MAX_ENVELOPE:  # never read a prefix as the whole ([ENC-18])
        render.emit_json(EnvelopeResult("malformed").to_json())
        return
    render.emit_json(verify_envelope(env, file.read_bytes(), payload_type, trust).to_json())


@aef_app.command("sign")
def sign_op(
    file: Path = typer.Argument(..., metavar="FILE", help="The file to sign."),
    key: Path = typer.Argument(..., metavar="KEY", help="An unencrypted PKCS#8 PEM private key, P-256 or Ed25519."),
    payload_type: str = PAYLOAD_TYPE_OPT,
) -> None:
    """Sign a file ([SIG-1]..[SIG-3]): the DSSE envelope over its bytes, one signature under the key's keyid."""
    from aefgate.aef.signatures import load_private_key, sign

    check_payload_type(payload_type)
    signing_key = load_private_key(key)
    require_file(file)
    render.emit_json(sign(file.read_bytes(), payload_type, signing_key))
