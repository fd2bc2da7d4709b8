"""A converter a third party installs gets ``aefgate import NAME`` and ``aefgate export NAME``, made from its declared
options, with no change to aefgate (issue 30).

The distribution ``toy-aefgate`` (format ``toy``: a small JSON file) is built here as a wheel and installed for real
with pip (``--no-index --no-deps --target``: no network), so that ``importlib.metadata`` finds its entry point in
the group ``aefgate.converters``; the commands run in a subprocess with the target folder on ``PYTHONPATH``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from tests.conftest import one_json

TOY_MODULE = '''
"""The toy format: {"toy": 1, "runId": ..., "producer": ...} <-> an AEF run (the demo's, renamed)."""
import json
from pathlib import Path

from aefgate.converters.registry import Converter, Option


def toy_to_aef(src, dst, *, producer="toy", shout=False, **_):
    from importlib.resources import files

    from aefgate import api
    from aefgate.aef.produce import produce

    toy = json.loads(Path(src).read_text())
    scenario = json.loads(files("aefgate").joinpath("fixtures/demo/scenario.json").read_text())
    scenario["run"]["runId"] = toy["runId"]
    scenario["run"]["producer"]["name"] = producer.upper() if shout else producer
    produce(scenario, Path(dst))
    api.seal(dst, sealed_by="ingest", at="2026-12-01T00:00:00Z")


def aef_to_toy(src, dst, *, indent=0, **_):
    run = json.loads((Path(src) / "run.json").read_text())
    toy = {"toy": 1, "runId": run["runId"], "producer": run["producer"]["name"]}
    Path(dst).write_text(json.dumps(toy, indent=indent or None))


CONVERTERS = [
    Converter("toy-to-aef", "toy", "aef", toy_to_aef,
              options=[Option("producer", "the producer name the run says wrote it", str, "toy"),
                       Option("shout", "write the producer name in capitals", bool, False)],
              description="toy files into AEF runs (the demo run, renamed)"),
    Converter("aef-to-toy", "aef", "toy", aef_to_toy,
              options=[Option("indent", "indent the JSON by this many spaces", int, 0)],
              description="AEF runs into toy files"),
]
'''


def _wheel(dist: Path) -> Path:
    """The wheel ``toy_aefgate-0.1-py3-none-any.whl``: the module, its metadata and its entry point."""
    files = {
        "toy_aefgate.py": textwrap.dedent(TOY_MODULE),
        "toy_aefgate-0.1.dist-info/METADATA": "Metadata-Version: 2.1\nName: toy-aefgate\nVersion: 0.1\n",
        "toy_aefgate-0.1.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                                           "Tag: py3-none-any\n",
        "toy_aefgate-0.1.dist-info/entry_points.txt": "[aefgate.converters]\ntoy = toy_aefgate:CONVERTERS\n",
    }
    record = []
    for name, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(text.encode())}")
    record.append("toy_aefgate-0.1.dist-info/RECORD,,")
    files["toy_aefgate-0.1.dist-info/RECORD"] = "\n".join(record) + "\n"
    wheel = dist / "toy_aefgate-0.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
    return wheel


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The toy distribution, installed by pip into a folder of its own."""
    root = tmp_path_factory.mktemp("toy")
    wheel = _wheel(root)
    target = root / "site"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-index", "--no-deps", "--no-compile",
                        "--disable-pip-version-check", "--target", str(target), str(wheel)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (target / "toy_aefgate-0.1.dist-info" / "entry_points.txt").is_file()
    return target


def aefgate(site: Path, *args: object) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), *filter(None, [os.environ.get("PYTHONPATH")])]),
           "COLUMNS": "200", "NO_COLOR": "1"}
    return subprocess.run([sys.executable, "-m", "aefgate", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=120)


def test_the_installed_converter_is_found_by_its_entry_point(site: Path):
    code = ("import importlib.metadata as m, json; "
            "print(json.dumps(sorted(ep.value for ep in m.entry_points(group='aefgate.converters'))))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(site)})
    assert "toy_aefgate:CONVERTERS" in json.loads(r.stdout), r.stdout + r.stderr


def test_import_and_export_list_the_toy_format(site: Path):
    for group, text in (("import", "toy files into AEF runs"), ("export", "AEF runs into toy files")):
        r = aefgate(site, group, "--help")
        assert r.returncode == 0, r.stderr
        assert " toy " in r.stdout and text in r.stdout, r.stdout


def test_the_commands_have_the_declared_options_and_their_help(site: Path):
    r = aefgate(site, "import", "toy", "--help")
    assert r.returncode == 0, r.stderr
    out = " ".join(r.stdout.split())
    for text in ("SRC", "OUT", "--producer", "The producer name the run says wrote it.", "[default: toy]",
                 "--shout", "Write the producer name in capitals.", "--json", "toy-to-aef"):
        assert text in out, (text, r.stdout)
    assert "--no-shout" not in out  # a bool option false by default is a flag
    r = aefgate(site, "export", "toy", "--help")
    assert r.returncode == 0, r.stderr
    out = " ".join(r.stdout.split())
    for text in ("RUN", "OUT", "--indent", "Indent the JSON by this many spaces.", "[default: 0]", "--json"):
        assert text in out, (text, r.stdout)


def test_import_toy_then_export_toy(site: Path, tmp_path: Path):
    src = tmp_path / "in.toy.json"
    src.write_text(json.dumps({"toy": 1, "runId": "0193a7c2-5d10-7e4b-9c21-4a6f8e2b1d99", "producer": "x"}))
    run = tmp_path / "run"
    r = aefgate(site, "import", "toy", src, run, "--producer", "toolkit", "--shout", "--json")
    assert r.returncode == 0, r.stderr
    got = one_json(r.stdout)
    assert got["output"] == str(run) and got["converter"] == "toy-to-aef" and got["outcome"] == "intact", got
    assert json.loads((run / "run.json").read_text())["producer"]["name"] == "TOOLKIT"
    r = aefgate(site, "verify", run, "--json")
    assert r.returncode == 0 and one_json(r.stdout)["outcome"] == "intact", r.stdout + r.stderr

    out = tmp_path / "out.toy.json"
    r = aefgate(site, "export", "toy", run, out, "--indent", "2")
    assert r.returncode == 0, r.stderr
    assert "exported" in r.stderr and r.stdout == ""
    assert json.loads(out.read_text()) == {"toy": 1, "runId": "0193a7c2-5d10-7e4b-9c21-4a6f8e2b1d99",
                                           "producer": "TOOLKIT"}
    assert out.read_text().startswith('{\n  "toy"')


def test_a_bad_value_or_an_unknown_flag_is_a_usage_error(site: Path, tmp_path: Path):
    r = aefgate(site, "export", "toy", tmp_path, tmp_path / "o.json", "--indent", "two", "--json")
    assert r.returncode == 2 and one_json(r.stdout)["error"]["rule"] == "CLI-2", r.stdout + r.stderr
    r = aefgate(site, "import", "toy", tmp_path / "absent.json", tmp_path / "run", "--colour", "red", "--json")
    err = one_json(r.stdout)["error"]
    assert r.returncode == 2 and err["rule"] == "CLI-2" and err["where"] == "--colour", err
