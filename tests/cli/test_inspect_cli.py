"""``aefgate import inspect``, ``export inspect``, ``fidelity inspect`` and ``convert --from inspect``: the real
command line in a subprocess, over every step and refusal of the five Inspect examples (driven from their
``expected.json``, as the library tests are)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests._shared import EXAMPLES
from tests.conftest import aefgate, one_json
from tests.converters.test_inspect_aef import (
    AT,
    REFUSALS,
    STEPS,
    assert_same_log,
    assert_same_run,
    expected,
    parse_args,
    prepare,
    step_id,
)

COMMAND = {"from-inspect": ["import", "inspect"], "to-inspect": ["export", "inspect"]}


def cli_args(example: str, entry: dict, tmp: Path) -> tuple[list[str], Path]:
    """The command line of an example entry: its op as the aefgate command, ``{out}`` a fresh path."""
    op, pos, _ = parse_args(entry["args"])
    src = prepare(example, pos[0], tmp)
    out_dir = tmp / "out"
    out_dir.mkdir(exist_ok=True)
    out = out_dir / ("run" if op == "from-inspect" else "inspect.json")
    args = list(COMMAND[op])
    if op == "from-inspect":  # the page's exact run: --no-lossless (lossless is aefgate's extension, on by default)
        args.append("--no-lossless")
    first = True
    for a in entry["args"][1:]:
        if a == "{out}":
            args.append(str(out))
        elif first and not a.startswith("--"):
            args.append(str(src))
            first = False
        else:
            args.append(a)
    return args, out


@pytest.mark.parametrize("item", STEPS, ids=step_id)
def test_step_through_the_cli(tmp_path: Path, item) -> None:
    example, _, step = item
    args, out = cli_args(example, step, tmp_path)
    p = aefgate(*args, "--json")
    assert p.returncode == 0, p.stderr
    report = one_json(p.stdout)
    ref = EXAMPLES / example / step["expected"]
    if ref.is_dir():
        assert_same_run(out, ref)
        assert report["outcome"] == expected(example)["runs"][step["expected"]]
        assert report["output"] == str(out) and report["runId"]
    else:
        assert_same_log(out, ref)
        assert report["format"] == "json"


@pytest.mark.parametrize("item", REFUSALS, ids=step_id)
def test_refusal_through_the_cli(tmp_path: Path, item) -> None:
    example, _, ref = item
    args, out = cli_args(example, ref, tmp_path)
    p = aefgate(*args)
    assert p.returncode == 2, (p.returncode, p.stderr)
    line = p.stderr.strip().splitlines()[-1]
    assert re.match(rf"error \[{re.escape(ref['says'])}\]( at .+)?: .+", line), line
    assert p.stdout == ""
    assert list((tmp_path / "out").iterdir()) == []  # nothing written
    if item[1] == 0:  # with --json (once per example): one JSON value naming the rule
        p = aefgate(*args, "--json")
        assert p.returncode == 2 and one_json(p.stdout)["error"]["rule"] == ref["says"]


def test_import_human_output_and_key(tmp_path: Path) -> None:
    from aefgate.aef.signatures import keygen

    private, _, _ = keygen("ecdsa-p256", "ingest@example.com")
    key = tmp_path / "key.pem"
    key.write_bytes(private)
    out = tmp_path / "run"
    p = aefgate("import", "inspect", EXAMPLES / "inspect-aef" / "log.json", out, "--at", AT, "--key", key)
    assert p.returncode == 0, p.stderr
    assert p.stdout == ""
    assert "intact" in p.stderr and "attestation.dsse.json" in p.stderr
    assert (out / "attestation.dsse.json").is_file()
    p = aefgate("verify", out, "--json")
    assert p.returncode == 0 and one_json(p.stdout)["outcome"] == "intact"
    # a key that does not load: refused, nothing written
    bad = tmp_path / "bad.pem"
    bad.write_text("-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n")
    p = aefgate("import", "inspect", EXAMPLES / "inspect-aef" / "log.json", tmp_path / "run2", "--key", bad)
    assert p.returncode == 2 and "[SIG-2]" in p.stderr and not (tmp_path / "run2").exists()


def test_import_refuses_a_missing_log_and_a_bad_option(tmp_path: Path) -> None:
    p = aefgate("import", "inspect", tmp_path / "nope.eval", tmp_path / "run")
    assert p.returncode == 2 and "[CLI-1]" in p.stderr
    p = aefgate("import", "inspect", EXAMPLES / "inspect-aef" / "log.json", tmp_path / "run", "--target-mode", "x")
    assert p.returncode == 2 and "[CLI-2]" in p.stderr and not (tmp_path / "run").exists()


def test_export_eval_and_a_run_that_does_not_verify(tmp_path: Path) -> None:
    run = prepare("aef-inspect-edges", "input", tmp_path)
    p = aefgate("export", "inspect", run, tmp_path / "x.eval", "--json")
    assert p.returncode == 0, p.stderr
    assert one_json(p.stdout) == {"run": str(run), "output": str(tmp_path / "x.eval"), "format": "eval",
                                  "status": "error", "samples": 2}
    # an existing output is refused
    p = aefgate("export", "inspect", run, tmp_path / "x.eval")
    assert p.returncode == 2 and "[OUT-1]" in p.stderr
    # a run that does not verify: IN-11, exit 1
    (run / "results.ndjson").write_text((run / "results.ndjson").read_text().replace('"c2"', '"c3"'))
    p = aefgate("export", "inspect", run, tmp_path / "y.json")
    assert p.returncode == 1 and "[IN-11]" in p.stderr and not (tmp_path / "y.json").exists()
    p = aefgate("export", "inspect", run, tmp_path / "y.txt")
    assert p.returncode == 2 and "[CLI-2]" in p.stderr


def test_fidelity(tmp_path: Path) -> None:
    run = prepare("aef-inspect", "input", tmp_path)  # with its overlays
    p = aefgate("fidelity", "inspect", run, "--json")
    assert p.returncode == 2 and one_json(p.stdout)["error"]["rule"] == "IN-4"
    p = aefgate("fidelity", "inspect", run, "--ignore-overlays", "--json")
    assert p.returncode == 0, p.stderr
    report = one_json(p.stdout)
    assert report["ok"] is True and report["undeclared"] == []
    assert all(x["declared"] for x in report["lost"])
    assert "file:overlays" in {x["field"] for x in report["lost"]}
    p = aefgate("fidelity", "inspect", run, "--ignore-overlays")
    assert p.returncode == 0 and "only declared losses" in p.stderr
    # the lines' ext, which the page's list does not name, is aefgate's declared addition
    p = aefgate("fidelity", "inspect", EXAMPLES / "aef-inspect" / "run", "--json")
    assert p.returncode == 0, p.stderr
    lost = {x["field"]: x for x in one_json(p.stdout)["lost"]}
    assert any(f.startswith("results:ext") and x["declared"] for f, x in lost.items())


def test_convert_and_formats(tmp_path: Path) -> None:
    p = aefgate("convert", EXAMPLES / "inspect-aef" / "log.json", tmp_path / "run", "--from", "inspect", "--to",
                "aef", "--target-mode", "live", "--at", AT, "--opt", "lossless=false", "--json")  # the page's run
    assert p.returncode == 0, p.stderr
    assert one_json(p.stdout)["route"] == ["inspect-to-aef"]
    assert_same_run(tmp_path / "run", EXAMPLES / "inspect-aef" / "run")
    p = aefgate("convert", prepare("aef-inspect", "input", tmp_path), tmp_path / "log.json", "--from", "aef", "--to",
                "inspect", "--ignore-overlays")
    assert p.returncode == 0, p.stderr
    assert_same_log(tmp_path / "log.json", EXAMPLES / "aef-inspect" / "inspect.json")
    p = aefgate("formats", "--json")
    inspect = next(f for f in one_json(p.stdout)["formats"] if f["format"] == "inspect")
    assert inspect["import"]["converter"] == "inspect-to-aef" and inspect["export"]["converter"] == "aef-to-inspect"
    assert "working_time" in inspect["import"]["fidelity"]
    assert {"text": "working_time", "fields": ["samples:working_time"], "source": "page"} in \
        inspect["import"]["losses"]
    p = aefgate("formats", "inspect")
    assert p.returncode == 0 and "working_time" in p.stderr and "Score.explanation" in p.stderr
    p = aefgate("formats", "nosuch", "--json")
    assert p.returncode == 2 and one_json(p.stdout)["error"]["rule"] == "CONV-1"


@pytest.mark.parametrize("cmd", [["import", "inspect"], ["export", "inspect"], ["fidelity"],
                                 ["import"], ["export"], ["formats"]])
def test_help(cmd: list[str]) -> None:
    p = aefgate(*cmd, "--help")
    assert p.returncode == 0 and "Usage" in p.stdout
