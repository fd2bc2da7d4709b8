"""``aefgate publish`` to ``file:`` and ``-``, and its refusals: nothing written, the right exit code and rule."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aefgate.bus import parse_destination, publish
from aefgate.converters.aep.exporter import export_events
from aefgate.formats.cloudevents import ce_forward, from_structured
from tests._shared import copy_run
from tests.bus.test_publish_nats import RUN, cli


def lines(path: Path) -> list:
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_file_destination_each_format(tmp_path, capsys) -> None:
    expected = list(export_events(RUN))
    code, out, err = cli("publish", RUN, "--to", f"file:{tmp_path / 'a.jsonl'}", "--format", "aep", "--json",
                         capsys=capsys)
    rep = json.loads(out)
    assert code == 0 and rep["acked"] == rep["total"] == len(expected) and rep["transport"] == "file"
    assert lines(tmp_path / "a.jsonl") == expected
    rep = publish(RUN, f"file:{tmp_path / 'c.jsonl'}")  # cloudevents, structured: the default
    assert rep.ok and lines(tmp_path / "c.jsonl") == [ce_forward(e) for e in expected]
    assert [from_structured(x.encode()) for x in (tmp_path / "c.jsonl").read_text().splitlines()] == expected
    rep = publish(RUN, f"file://{tmp_path / 'b.jsonl'}", mode="binary")
    got = lines(tmp_path / "b.jsonl")
    assert rep.ok and [g["headers"]["ce-id"] for g in got] == [e["id"] for e in expected]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary file left
    # an existing file is never overwritten
    before = (tmp_path / "a.jsonl").read_bytes()
    code, out, err = cli("publish", RUN, "--to", f"file:{tmp_path / 'a.jsonl'}", capsys=capsys)
    assert code == 2 and "[OUT-1]" in err and (tmp_path / "a.jsonl").read_bytes() == before


def test_stdout_destination(capsys) -> None:
    expected = list(export_events(RUN))
    code, out, err = cli("publish", RUN, "--to", "-", "--format", "aep", capsys=capsys)
    assert code == 0 and [json.loads(x) for x in out.splitlines()] == expected
    assert f"acked {len(expected)}" in err
    code, out, err = cli("publish", RUN, "--to", "-", "--json", capsys=capsys)  # stdout cannot hold both
    assert code == 2 and "[CLI-2]" in err and json.loads(out)["error"]["rule"] == "CLI-2"


@pytest.mark.parametrize("args,rule", [
    (["--to", "kafka://h/t"], "PUB-1"),
    (["--to", "nats://127.0.0.1:1/"], "PUB-1"),
    (["--to", "nats://127.0.0.1:1/a.*"], "PUB-1"),
    (["--to", "file:"], "PUB-1"),
    (["--to", "http://127.0.0.1:1/x", "--format", "xml"], "PUB-2"),
    (["--to", "http://127.0.0.1:1/x", "--mode", "both"], "PUB-2"),
    (["--to", "http://127.0.0.1:1/x", "--format", "aep", "--mode", "binary"], "PUB-2"),
    (["--to", "http://127.0.0.1:1/x", "--batch", "0"], "PUB-2"),
    (["--to", "http://127.0.0.1:1/x", "--batch", "5", "--mode", "binary"], "PUB-2"),
    (["--to", "nats://127.0.0.1:1/s", "--batch", "5"], "PUB-2"),
    (["--to", "http://127.0.0.1:1/x", "--retries", "-1"], "PUB-2"),
    (["--to", "http://127.0.0.1:1/x", "--timeout", "0"], "PUB-2"),
    (["--to", "http://127.0.0.1:1/x", "--create-stream"], "PUB-2"),
    (["--to", "-", "--spool", "SPOOL"], "PUB-2"),
    (["--to", "http://127.0.0.1:1/x", "--max-capture", "everything"], "AEP-8"),
    (["--to", "file:OUT"], None),  # control: this one works
])
def test_refusals_write_nothing(tmp_path, capsys, args, rule) -> None:
    args = [str(tmp_path / "sp") if a == "SPOOL" else str(tmp_path / "out.jsonl") if a == "file:OUT" else a
            for a in args]
    args = [f"file:{a}" if a == str(tmp_path / "out.jsonl") else a for a in args]
    code, out, err = cli("publish", RUN, *args, capsys=capsys)
    if rule is None:
        assert code == 0, err
        return
    assert code == 2, err
    assert f"[{rule}]" in err
    assert [p for p in tmp_path.iterdir()] == []  # no spool, no output, no temporary file


def test_run_that_does_not_verify(tmp_path, capsys) -> None:
    run = copy_run(RUN, tmp_path / "run")
    res = run / "results.ndjson"
    data = res.read_bytes()
    res.write_bytes(data.replace(b'"passed"', b'"failed"', 1) if b'"passed"' in data else data + b"\n")
    code, out, err = cli("publish", run, "--to", f"file:{tmp_path / 'out.jsonl'}", "--spool", tmp_path / "sp",
                         capsys=capsys)
    assert code == 2 and "[PUB-2]" in err  # a spool does not go with a file
    code, out, err = cli("publish", run, "--to", f"file:{tmp_path / 'out.jsonl'}", capsys=capsys)
    assert code == 1 and "[AEP-1]" in err
    code, out, err = cli("publish", run, "--to", "http://127.0.0.1:9/x", "--spool", tmp_path / "sp",
                         capsys=capsys)
    assert code == 1 and "[AEP-1]" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def test_usage(tmp_path, capsys) -> None:
    code, out, err = cli("publish", "--to", "-", capsys=capsys)
    assert code == 2 and "[CLI-2]" in err
    code, out, err = cli("publish", RUN, capsys=capsys)
    assert code == 2 and "--to" in err
    code, out, err = cli("publish", RUN, "--resume", tmp_path, capsys=capsys)
    assert code == 2 and "[CLI-2]" in err
    code, out, err = cli("publish", "--resume", tmp_path / "nope", capsys=capsys)
    assert code == 2 and "[PUB-3]" in err
    code, out, err = cli("publish", "--resume", tmp_path, capsys=capsys)
    assert code == 2 and "[PUB-3]" in err and "spool.json" in err
    sp = tmp_path / "sp"
    sp.mkdir()
    (sp / "x").write_text("x")
    code, out, err = cli("publish", RUN, "--to", "http://127.0.0.1:9/x", "--spool", sp, capsys=capsys)
    assert code == 2 and "[OUT-1]" in err


def test_destination_display_hides_credentials() -> None:
    d = parse_destination("nats://alice:s3cret@127.0.0.1:4222/aef.results")
    assert d.display == "nats://***@127.0.0.1:4222/aef.results" and d.subject == "aef.results"
    assert d.server == "nats://alice:s3cret@127.0.0.1:4222"
    assert parse_destination("https://h.example/in?x=1").target == "/in?x=1"
