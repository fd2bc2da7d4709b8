"""The Inspect log format layer (aefgate.formats.inspect): reading and writing ``.eval`` and ``.json`` logs.

Real logs: the files inspect-ai 0.3.285 wrote in shared/samples/inspect/, the interop examples, and logs that
inspect-ai writes here, in a temporary folder, with its ``mockllm/model`` (no network). inspect-ai itself is the
oracle: what this layer reads must be what ``inspect_ai.log.read_eval_log`` reads, and what it writes must load
with it. Hostile archives are built here, byte by byte where needed.
"""

from __future__ import annotations

import io
import json
import math
import os
import random
import struct
import tracemalloc
import warnings
import zipfile
from pathlib import Path
from typing import Any, Iterable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inspect_ai import Task
from inspect_ai import eval as inspect_eval
from inspect_ai.dataset import Sample
from inspect_ai.log import read_eval_log
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import Score, match, mean, scorer
from inspect_ai.solver import generate

from aefgate.errors import Refusal
from aefgate.formats.inspect import InspectLog, jsontext, open_log, write_log, zipsafe
from aefgate.formats.inspect.writer import ZipWriter
from tests._shared import EXAMPLES, SAMPLES

INSPECT_SAMPLES = SAMPLES / "inspect"


# -- helpers ------------------------------------------------------------------------------------------------------


def canon(value: Any) -> str:
    """A JSON value as canonical text: equal texts, equal values (NaN included, which ``==`` never equals)."""
    return json.dumps(value, sort_keys=True, allow_nan=True, ensure_ascii=False)


def same_value(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return a == b
    return canon(a) == canon(b)


def score_view(scores: dict | None) -> dict:
    """A sample's scores as comparable values: for each scorer its value, answer, explanation and reason."""
    out = {}
    for name, score in (scores or {}).items():
        out[name] = {k: score.get(k) for k in ("value", "answer", "explanation", "reason")}
    return out


def inspect_sample_view(sample) -> tuple:
    dumped = sample.model_dump()
    return sample.id, sample.epoch, score_view(dumped["scores"])


def mine_sample_view(sample: dict) -> tuple:
    return sample["id"], sample["epoch"], score_view(sample.get("scores"))


def assert_views_equal(mine: list[tuple], theirs: list[tuple]) -> None:
    assert len(mine) == len(theirs)
    for (mid, mep, msc), (tid, tep, tsc) in zip(mine, theirs):
        assert (mid, mep) == (tid, tep)
        assert msc.keys() == tsc.keys(), (mid, mep)
        for name in msc:
            for field in ("value", "answer", "explanation", "reason"):
                assert same_value(msc[name][field], tsc[name][field]), (mid, mep, name, field)


def refusal_is_clean(r: Refusal) -> None:
    """A refusal the command line prints as one line (exit 2), with no internal exception chained to it."""
    assert r.exit_code == 2
    assert "\n" not in str(r)
    assert r.__cause__ is None
    assert r.__context__ is None or r.__suppress_context__


def refused(call, rule: str) -> Refusal:
    with pytest.raises(Refusal) as e:
        call()
    assert e.value.rule == rule, str(e.value)
    refusal_is_clean(e.value)
    return e.value


def read_all(path: Path) -> tuple[InspectLog, list[dict]]:
    log = open_log(path)
    return log, list(log.samples())


def zip_members(path: Path) -> list[tuple[str, bytes]]:
    """Every member of a checked archive, decompressed (by this layer's own reader: no zstd in stdlib zipfile)."""
    archive = zipsafe.Archive(path)
    with archive.open() as f:
        return [(m.name, archive.read(f, m)) for m in archive.members]


def write_zip(path: Path, members: Iterable[tuple[str | zipfile.ZipInfo, bytes]],
              compression: int = zipfile.ZIP_DEFLATED) -> Path:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # duplicate names, on purpose
        with zipfile.ZipFile(path, "w", compression=compression) as z:
            for name, data in members:
                z.writestr(name, data)
    return path


# -- logs written by inspect-ai -------------------------------------------------------------------------------------


def _mock_outputs(input, tools, tool_choice, config):  # noqa: A002 - mockllm's signature
    text = input[-1].text
    answer = "4" if "2+2" in text else ("Paris" if "France" in text else "I do not know")
    output = ModelOutput.from_content(model="mockllm/model", content=answer)
    output.usage = ModelUsage(input_tokens=len(text.split()), output_tokens=len(answer.split()),
                              total_tokens=len(text.split()) + len(answer.split()))
    return output


@scorer(metrics=[mean()])
def unscored_sometimes():
    """1.0, or NaN (Inspect's unscored value) for the sample ``paris``."""

    async def score(state, target):
        if state.sample_id == "paris":
            return Score(value=math.nan, explanation="no grade")
        return Score(value=1.0, answer=state.output.completion)

    return score


def _task() -> Task:
    return Task(
        dataset=[
            Sample(input="What is 2+2?", target="4", id="sum"),
            Sample(input="Capital of France?", target="Paris", id="paris"),
            Sample(input="x 2+2 = ?", target="4", id=7, metadata={"topic": "math"}),
            Sample(input="Unknowable?", target="42", id=12),
        ],
        solver=generate(),
        scorer=[match(), unscored_sometimes()],
        epochs=2,
    )


@pytest.fixture(scope="module")
def inspect_logs(tmp_path_factory) -> dict[str, Path]:
    """One log of the same task in each format, written by inspect-ai's own recorders."""
    out = {}
    for fmt in ("eval", "json"):
        log_dir = tmp_path_factory.mktemp(f"inspect-{fmt}")
        logs = inspect_eval(_task(), model=get_model("mockllm/model", custom_outputs=_mock_outputs),
                            log_dir=str(log_dir), log_format=fmt, display="none")
        assert logs[0].status == "success"
        out[fmt] = Path(logs[0].location)
    return out


@pytest.fixture(scope="module")
def deflate_eval(inspect_logs, tmp_path_factory) -> Path:
    """The inspect-ai ``.eval`` rewritten with DEFLATE members (method 8) by the standard library."""
    path = tmp_path_factory.mktemp("deflate") / "deflate.eval"
    return write_zip(path, zip_members(inspect_logs["eval"]))


# -- the real files -------------------------------------------------------------------------------------------------


def _sample_files() -> list[Path]:
    return sorted(p for p in INSPECT_SAMPLES.iterdir() if p.suffix in (".eval", ".json"))


def test_the_samples_folder_holds_logs():
    names = {p.name for p in _sample_files()}
    assert {"basic.eval", "basic.json", "epochs_mean.eval", "epochs_majority.eval", "errors_limits.json"} <= names


@pytest.mark.parametrize("path", _sample_files(), ids=lambda p: p.name)
def test_every_shared_sample_reads_as_inspect_reads_it(path: Path):
    log, samples = read_all(path)
    assert log.format == path.suffix[1:]
    assert log.header["version"] == 2 and log.header["status"] == "success"
    assert "samples" not in log.header
    assert log.sample_count == len(samples) > 0
    theirs = read_eval_log(str(path))
    assert_views_equal([mine_sample_view(s) for s in samples], [inspect_sample_view(s) for s in theirs.samples])
    assert canon(log.header["eval"]["eval_id"]) == canon(theirs.eval.eval_id)
    assert canon(log.header["results"]) == canon(theirs.results.model_dump(mode="json", exclude_none=True))
    assert "reductions" not in log.header  # they grow with the samples: log.reductions(), reduction_events()
    if theirs.reductions:
        assert len(log.reductions()) == len(theirs.reductions)
        assert_events_give(log.reduction_events(), log.reductions())


def assert_events_give(events, reductions):
    """The reductions rebuilt from reduction_events() are the reductions."""
    rebuilt, pending = [], []
    for ev in events:
        if ev[0] == "sample":
            assert ev[1] == len(rebuilt) and ev[2] == len(pending)
            pending.append(ev[3])
        else:
            assert ev[0] == "end" and ev[1] == len(rebuilt)
            rebuilt.append({**ev[2], "samples": pending} if "samples" not in ev[2] else ev[2])
            pending = []
    assert canon(rebuilt) == canon(reductions)


def test_basic_eval_and_basic_json_give_the_same_samples():
    eval_log, eval_samples = read_all(INSPECT_SAMPLES / "basic.eval")
    json_log, json_samples = read_all(INSPECT_SAMPLES / "basic.json")
    assert [canon(s) for s in eval_samples] == [canon(s) for s in json_samples]
    # the raw .eval members keep events_data (Inspect's message pool); resolved, they equal the .json's samples
    raw = list(eval_log.samples(resolve_events=False))
    assert all("events_data" in s for s in raw)
    assert [canon(s) for s in raw] != [canon(s) for s in json_samples]
    for key in ("version", "status", "plan", "results", "stats"):
        assert canon(eval_log.header[key]) == canon(json_log.header[key])
    assert canon(eval_log.reductions()) == canon(json_log.reductions())


def test_epochs_order_and_reductions():
    log, samples = read_all(INSPECT_SAMPLES / "epochs_mean.eval")
    assert [(s["id"], s["epoch"]) for s in samples] == [(f"e{i}", ep) for ep in (1, 2, 3) for i in (1, 2, 3, 4)]
    assert log.header["eval"]["config"]["epochs"] == 3
    assert [r["scorer"] for r in log.reductions()] == ["match", "answer_length"]
    assert_events_give(log.reduction_events(), log.reductions())
    # by case: each id's epochs one after the other, ids in Inspect's order
    stream = log.samples(order="case")
    assert stream.order == "case" and not stream.started
    by_case = [(s["id"], s["epoch"]) for s in stream]
    assert stream.started and by_case == [(f"e{i}", ep) for i in (1, 2, 3, 4) for ep in (1, 2, 3)]
    assert log.samples().order == "inspect"
    json_log = open_log(INSPECT_SAMPLES / "basic.json")
    assert json_log.samples(order="case").order == "file"
    with pytest.raises(ValueError):
        log.samples(order="random")
    summaries = log.summaries()
    assert len(summaries) == 12 and {(s["id"], s["epoch"]) for s in summaries} == {
        (s["id"], s["epoch"]) for s in samples}


def test_errors_and_limits_json():
    _, samples = read_all(INSPECT_SAMPLES / "errors_limits.json")
    by_id = {s["id"]: s for s in samples}
    assert by_id["boom"]["error"]["message"] and not by_id["boom"].get("scores")
    limit = by_id["chatty"]["limit"]
    assert limit["type"] == "message" and limit["limit"] == 6 and isinstance(limit["limit"], float)  # written 6.0
    assert by_id["wordy"]["limit"]["type"] == "token"


def _interop_logs() -> list[Path]:
    found = sorted(EXAMPLES.glob("**/log.json")) + sorted(EXAMPLES.glob("*/inspect*.json"))
    return found


def test_the_interop_examples_are_found():
    names = {str(p.relative_to(EXAMPLES)) for p in _interop_logs()}
    assert {"inspect-aef/log.json", "inspect-aef-edges/log.json", "aef-inspect/inspect.json",
            "aef-inspect-trials/inspect.json", "aef-inspect-edges/inspect.json",
            "aef-inspect-edges/inspect-off.json"} <= names


@pytest.mark.parametrize("path", _interop_logs(), ids=lambda p: str(p.relative_to(EXAMPLES)))
def test_every_interop_log_reads(path: Path):
    log, samples = read_all(path)
    assert log.format == "json"
    assert log.sample_count == len(samples) > 0
    with path.open("rb") as f:
        whole = json.load(f)  # the standard library reads these (they hold no infinity and no duplicate)
    assert canon(samples) == canon(whole["samples"])
    assert canon(log.header) == canon({k: v for k, v in whole.items() if k not in ("samples", "reductions")})
    assert canon(log.reductions()) == canon(whole.get("reductions"))


REFUSED_ON_READ = {
    "read-infinity.json": ("IN-6", 78, 20, "Infinity"),
    "read-member-twice.json": ("IN-6", 45, 7, "appears twice"),
    "read-overflow.json": ("IN-6", 110, 21, "1e400"),
    "content-nan-member-name.json": ("IN-6", 196, 22, "not JSON"),
    "type-samples-string.json": ("IN-8", 70, 14, "samples is not a list"),
}


@pytest.mark.parametrize("name", sorted((EXAMPLES / "inspect-aef-edges" / "refusals").glob("*.json")),
                         ids=lambda p: p.name)
def test_edge_refusals_the_reader_decides(name: Path):
    """The reader refuses what is not JSON as Inspect's logs are, with the rule the example expects; the rest of
    the examples' refusals are the converter's (they read)."""
    expected = json.loads((EXAMPLES / "inspect-aef-edges" / "expected.json").read_text())
    says = {Path(r["args"][1]).name: r["says"] for r in expected["refusals"]}
    if name.name in REFUSED_ON_READ:
        rule, line, col, text = REFUSED_ON_READ[name.name]
        r = refused(lambda: read_all(name), rule)
        assert says[name.name] == rule
        assert r.where == f"{name}:{line}:{col}"
        assert text in r.message
    else:
        _, samples = read_all(name)
        assert len(samples) == 12


# -- logs written by inspect-ai, read back ----------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["eval", "json", "deflate"])
def test_generated_logs_read_as_inspect_reads_them(fmt, inspect_logs, deflate_eval):
    path = deflate_eval if fmt == "deflate" else inspect_logs[fmt]
    log, samples = read_all(path)
    theirs = read_eval_log(str(path))
    assert log.sample_count == len(theirs.samples) == 8
    assert_views_equal([mine_sample_view(s) for s in samples], [inspect_sample_view(s) for s in theirs.samples])
    assert [(s["id"], s["epoch"]) for s in samples] == [(7, 1), (12, 1), ("paris", 1), ("sum", 1), (7, 2),
                                                        (12, 2), ("paris", 2), ("sum", 2)]
    paris = next(s for s in samples if s["id"] == "paris")
    assert math.isnan(paris["scores"]["unscored_sometimes"]["value"])
    for mine, their in zip(samples, theirs.samples):
        dumped = their.model_dump(mode="json", exclude_none=True)
        for key in ("input", "target", "metadata", "uuid", "total_time"):
            assert canon(mine.get(key)) == canon(dumped.get(key)), key
        assert len(mine["messages"]) == len(their.messages)
        assert len(mine["events"]) == len(their.events)
    assert log.header["status"] == theirs.status == "success"
    assert canon(log.header["results"]) == canon(theirs.results.model_dump(mode="json", exclude_none=True))


def test_deflate_is_really_deflate(deflate_eval):
    assert {m.method for m in zipsafe.Archive(deflate_eval).members} == {zipsafe.DEFLATED}


def test_the_eval_and_json_recorders_agree(inspect_logs):
    _, from_eval = read_all(inspect_logs["eval"])
    _, from_json = read_all(inspect_logs["json"])
    assert_views_equal([mine_sample_view(s) for s in from_eval], [mine_sample_view(s) for s in from_json])


def test_unfinished_eval_header_comes_from_the_journal(inspect_logs, tmp_path):
    finished = ("header.json", "summaries.json", "reductions.json")
    path = write_zip(tmp_path / "running.eval",
                     [(n, d) for n, d in zip_members(inspect_logs["eval"]) if n not in finished])
    log, samples = read_all(path)
    assert log.from_journal
    assert log.header["status"] == "started" and "results" not in log.header
    theirs = read_eval_log(str(path))
    assert theirs.status == "started"
    assert canon(log.header["eval"]["eval_id"]) == canon(theirs.eval.eval_id)
    assert_views_equal([mine_sample_view(s) for s in samples], [inspect_sample_view(s) for s in theirs.samples])
    assert len(log.summaries()) == 8  # from _journal/summaries/<n>.json


def test_a_member_written_twice_counts_once_its_last_entry_winning(inspect_logs, tmp_path):
    members = zip_members(inspect_logs["eval"])
    name, data = next((n, d) for n, d in members if n == "samples/sum_epoch_1.json")
    changed = json.loads(data)
    changed["metadata"] = {"superseded": True}
    path = write_zip(tmp_path / "twice.eval", members + [(name, json.dumps(changed).encode())])
    log, samples = read_all(path)
    assert log.sample_count == 8
    again = [s for s in samples if (s["id"], s["epoch"]) == ("sum", 1)]
    assert len(again) == 1 and again[0]["metadata"] == {"superseded": True}
    theirs = read_eval_log(str(path))
    assert next(s for s in theirs.samples if (s.id, s.epoch) == ("sum", 1)).metadata == {"superseded": True}


def test_sample_order_is_inspects(inspect_logs, tmp_path):
    """Inspect sorts by epoch, then id (an integer id as 20 zero-filled digits), whatever the members' order."""
    header = open_log(inspect_logs["eval"]).header
    template = next(open_log(inspect_logs["eval"]).samples())
    keys = [(10, 2), ("b", 1), (9, 1), (10, 1), ("a", 2), (-3, 1), (100, 1), ("a", 1)]
    samples = []
    for sid, epoch in keys:
        s = dict(template, id=sid, epoch=epoch)
        samples.append(s)
    path = tmp_path / "order.eval"
    write_log(path, header, samples, fmt="eval")
    mine = [(s["id"], s["epoch"]) for s in open_log(path).samples()]
    theirs = [(s.id, s.epoch) for s in read_eval_log(str(path)).samples]
    assert mine == theirs


# -- writing -------------------------------------------------------------------------------------------------------


def whole_header(log) -> dict:
    """The header with the reductions (as write_log takes them)."""
    red = log.reductions()
    return {**log.header, "reductions": red} if red is not None else dict(log.header)


@pytest.mark.parametrize("fmt", ["json", "eval"])
@pytest.mark.parametrize("source", ["eval", "json"])
def test_written_logs_load_with_inspect(fmt, source, inspect_logs, tmp_path):
    src, samples = read_all(inspect_logs[source])
    out = tmp_path / f"out.{fmt}"
    assert write_log(out, whole_header(src), iter(samples), fmt=fmt) == len(samples)
    theirs = read_eval_log(str(out))
    assert len(theirs.samples) == len(samples)
    assert_views_equal([mine_sample_view(s) for s in samples], [inspect_sample_view(s) for s in theirs.samples])
    assert theirs.status == "success"
    assert canon(theirs.results.model_dump(mode="json", exclude_none=True)) == canon(src.header["results"])
    assert len(theirs.reductions or []) == len(src.reductions() or []) > 0
    back, back_samples = read_all(out)
    assert back.format == fmt
    assert [canon(s) for s in back_samples] == [canon(s) for s in samples]
    assert canon(back.header) == canon(src.header) and canon(back.reductions()) == canon(src.reductions())
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_written_json_holds_nan_as_the_bare_token(inspect_logs, tmp_path):
    src, samples = read_all(inspect_logs["eval"])
    out = tmp_path / "nan.json"
    write_log(out, src.header, samples, fmt="json")
    text = out.read_text()
    assert '"value":NaN' in text and "Infinity" not in text


def test_written_eval_has_inspects_layout(inspect_logs, tmp_path):
    src, samples = read_all(inspect_logs["eval"])
    out = tmp_path / "layout.eval"
    write_log(out, whole_header(src), samples, fmt="eval")
    with zipfile.ZipFile(out) as z:
        infos = z.infolist()
    names = [i.filename for i in infos]
    assert names[0] == "_journal/start.json"
    assert names[1:9] == [f"samples/{s['id']}_epoch_{s['epoch']}.json" for s in samples]
    assert names[9:] == ["_journal/summaries/1.json", "summaries.json", "reductions.json", "header.json"]
    assert {i.compress_type for i in infos} == {zipsafe.ZSTD}
    members = dict(zip_members(out))
    assert set(json.loads(members["_journal/start.json"])) == {"version", "eval", "plan"}
    assert "reductions" not in json.loads(members["header.json"])
    summaries = json.loads(members["summaries.json"])
    assert [(s["id"], s["epoch"]) for s in summaries] == [(s["id"], s["epoch"]) for s in samples]
    from inspect_ai.log import read_eval_log_sample_summaries

    assert len(read_eval_log_sample_summaries(str(out))) == len(samples)


def test_write_refuses_what_it_cannot_write(inspect_logs, tmp_path):
    src, samples = read_all(inspect_logs["json"])
    header = src.header
    good = samples[0]
    cases = [
        ("eval", [dict(good, id="../escape")], "IN-FMT-7"),
        ("eval", [dict(good, id="a\\b")], "IN-FMT-7"),
        ("eval", [good, dict(good)], "IN-FMT-7"),
        ("json", [good, dict(good)], "IN-FMT-7"),
        ("json", [dict(good, id=True)], "IN-FMT-7"),
        ("eval", [dict(good, epoch="1")], "IN-FMT-7"),
        ("json", [dict(good, total_time=math.inf)], "IN-FMT-7"),
        ("eval", [dict(good, metadata={"x": {1, 2}})], "IN-FMT-7"),
        ("json", ["not a sample"], "IN-FMT-7"),
    ]
    for i, (fmt, bad, rule) in enumerate(cases):
        out = tmp_path / f"bad{i}.{fmt}"
        refused(lambda: write_log(out, header, iter(bad), fmt=fmt), rule)
        assert not out.exists()
    refused(lambda: write_log(tmp_path / "h.json", dict(header, samples=[]), []), "IN-FMT-7")
    refused(lambda: write_log(tmp_path / "h.json", {1: "x"}, []), "IN-FMT-7")
    refused(lambda: write_log(tmp_path / "h.json", header, [], fmt="yaml"), "IN-FMT-7")
    assert not [p for p in tmp_path.iterdir()]


def test_write_is_atomic_and_refuses_an_existing_destination(inspect_logs, tmp_path):
    src, samples = read_all(inspect_logs["json"])
    out = tmp_path / "log.eval"
    out.write_bytes(b"keep me")
    refused(lambda: write_log(out, src.header, samples, fmt="eval"), "OUT-1")
    assert out.read_bytes() == b"keep me"

    def failing():
        yield samples[0]
        raise Refusal("IN-7", "the caller refuses a sample", "x")

    with pytest.raises(Refusal, match="IN-7"):
        write_log(out, src.header, failing(), fmt="eval", overwrite=True)
    assert out.read_bytes() == b"keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log.eval"]
    write_log(out, src.header, samples, fmt="eval", overwrite=True)
    assert open_log(out).sample_count == len(samples)
    refused(lambda: write_log(tmp_path, src.header, samples), "OUT-1")


def test_zero_samples(inspect_logs, tmp_path):
    src = open_log(inspect_logs["json"])
    for fmt in ("json", "eval"):
        out = tmp_path / f"empty.{fmt}"
        assert write_log(out, src.header, [], fmt=fmt) == 0
        log, samples = read_all(out)
        assert samples == [] and log.sample_count == 0
        assert read_eval_log(str(out)).samples in (None, [])


def test_large_members_are_written_in_frames(tmp_path, monkeypatch):
    from aefgate.formats.inspect import writer

    monkeypatch.setattr(writer, "FRAME_INPUT", 1000)
    sample = {"id": 1, "epoch": 1, "input": "x" * 5000, "target": "", "blob": os.urandom(3000).hex()}
    out = tmp_path / "frames.eval"
    write_log(out, {"version": 2, "status": "success"}, [sample], fmt="eval")
    (got,) = open_log(out).samples()
    assert got == sample
    raw = dict((m.name, m) for m in zipsafe.Archive(out).members)["samples/1_epoch_1.json"]
    with open(out, "rb") as f:
        f.seek(raw.offset + 30 + len("samples/1_epoch_1.json") + 20)
        data = f.read(raw.csize)
    assert data.count(b"\x28\xb5\x2f\xfd") >= 5  # one zstd frame per 1000 bytes of input


# -- JSON: NaN, Infinity, duplicates, streaming -----------------------------------------------------------------------


def _log_text(sample_text: str, extra: str = "") -> str:
    return ('{\n  "version": 2,\n  "status": "success",\n  "eval": {"task": "t"},' + extra +
            '\n  "samples": [\n' + sample_text + "\n  ]\n}\n")


def test_nan_is_read_as_a_float_nan(tmp_path):
    p = tmp_path / "nan.json"
    p.write_text(_log_text('    {"id": 1, "epoch": 1, "scores": {"s": {"value": NaN}}, "xs": [NaN, 1.5]}'))
    (s,) = open_log(p).samples()
    assert math.isnan(s["scores"]["s"]["value"]) and math.isnan(s["xs"][0]) and s["xs"][1] == 1.5


@pytest.mark.parametrize("token", ["Infinity", "-Infinity"])
def test_infinity_is_refused_with_its_line_and_column(tmp_path, token):
    p = tmp_path / "inf.json"
    p.write_text(_log_text('    {"id": 1, "epoch": 1,\n     "scores": {"s": {"value": ' + token + "}}}"))
    r = refused(lambda: open_log(p), "IN-6")
    assert r.where == f"{p}:7:32"
    assert token in r.message


def test_infinity_in_an_eval_member_is_refused(tmp_path):
    p = write_zip(tmp_path / "inf.eval", [
        ("header.json", b'{"version": 2, "status": "success"}'),
        ("samples/1_epoch_1.json", b'{"id": 1,\n"epoch": 1, "v": -Infinity}'),
    ])
    log = open_log(p)
    r = refused(lambda: list(log.samples()), "IN-6")
    assert r.where == f"{p}!samples/1_epoch_1.json:2:18"


@pytest.mark.parametrize("where,text,line,col", [
    ("nested", '    {"id": 1, "epoch": 1, "metadata": {"a": 1, "b": {"c": 1, "c": 2}}}', 6, 62),
    ("sample", '    {"id": 1, "epoch": 1, "id": 2}', 6, 27),
    ("escaped", '    {"id": 1, "epoch": 1, "\\u0069d": 2}', 6, 27),
])
def test_a_member_name_twice_is_refused(tmp_path, where, text, line, col):
    p = tmp_path / "dup.json"
    p.write_text(_log_text(text))
    r = refused(lambda: open_log(p), "IN-6")
    assert r.where == f"{p}:{line}:{col}"


def test_a_top_level_member_twice_is_refused(tmp_path):
    p = tmp_path / "dup.json"
    p.write_text(_log_text("", extra='\n  "status": "error",'))
    r = refused(lambda: open_log(p), "IN-6")
    assert r.where == f"{p}:5:3" and "'status'" in r.message
    p.write_text('{"samples": [], "samples": []}')
    refused(lambda: open_log(p), "IN-6")


@pytest.mark.parametrize("text,rule", [
    ("{", "IN-6"),
    ('{"version": 2,}', "IN-6"),
    ('{"version": 2} x', "IN-6"),
    ('{"samples": [1]}', "IN-8"),
    ('{"samples": {"a": 1}}', "IN-8"),
    ('{"samples": [{"id": 1}, ]}', "IN-6"),
    ('{"a": "tab\tinside"}', "IN-6"),
    ('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}", "IN-6"),
    ('{"a": 1' + "0" * 5000 + "}", "IN-6"),
    ('{"a": 1.5e999999999999}', "IN-6"),
])
def test_malformed_json_logs_are_refused(tmp_path, text, rule):
    p = tmp_path / "bad.json"
    p.write_text(text)
    refused(lambda: (lambda log: list(log.samples()))(open_log(p)), rule)


def test_samples_null_and_absent(tmp_path):
    p = tmp_path / "none.json"
    p.write_text('{"version": 2, "samples": null, "reductions": []}')
    log = open_log(p)
    assert log.sample_count == 0 and list(log.samples()) == [] and log.header == {"version": 2}
    assert log.reductions() == [] and list(log.reduction_events()) == []
    p.write_text('{"version": 2}')
    assert open_log(p).sample_count == 0


def test_not_a_log(tmp_path):
    for name, data, rule in [
        ("empty", b"", "IN-FMT-1"),
        ("text", b"hello", "IN-FMT-1"),
        ("array", b"  [1, 2]", "IN-FMT-1"),
        ("bom", b"\xef\xbb\xbf{}", "IN-6"),
        ("latin1", b'{"a": "\xe9"}', "IN-6"),
        ("cut-utf8", b'{"a": "\xc3', "IN-6"),
    ]:
        p = tmp_path / name
        p.write_bytes(data)
        refused(lambda: open_log(p), rule)
    refused(lambda: open_log(tmp_path / "absent.json"), "CLI-1")
    refused(lambda: open_log(tmp_path), "CLI-1")


def test_invalid_utf8_has_its_place(tmp_path):
    p = tmp_path / "bad.json"
    p.write_bytes(b'{\n "a": "ok",\n "b": "x\xffy"}')
    r = refused(lambda: open_log(p), "IN-6")
    assert r.where == f"{p}:3:9" and "byte offset 22" in r.message


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 64, 4096])
def test_json_streaming_across_chunk_boundaries(tmp_path, monkeypatch, chunk):
    monkeypatch.setattr(jsontext, "READ_CHUNK", chunk)
    for path in (INSPECT_SAMPLES / "basic.json", INSPECT_SAMPLES / "errors_limits.json"):
        log = open_log(path)
        samples = list(log.samples(resolve_events=False))
        whole = json.loads(path.read_text())
        assert canon(samples) == canon(whole["samples"])
        assert canon(log.header) == canon({k: v for k, v in whole.items() if k not in ("samples", "reductions")})
        assert canon(log.reductions()) == canon(whole.get("reductions"))
    epochs = open_log(INSPECT_SAMPLES / "epochs_mean.eval")
    assert_events_give(epochs.reduction_events(), epochs.reductions())
    p = tmp_path / "tricky.json"
    p.write_text(_log_text('    {"id": "é€😀", "epoch": 1, "v": NaN, "n": 123456789.25e-3, "t": true},\n'
                           '    {"id": 2, "epoch": 1, "v": -0.0, "big": 12345678901234567890}'), encoding="utf-8")
    (a, b) = open_log(p).samples()
    assert a["id"] == "é€😀" and math.isnan(a["v"]) and a["n"] == 123456789.25e-3 and a["t"] is True
    assert b["big"] == 12345678901234567890 and math.copysign(1, b["v"]) == -1
    p.write_text(_log_text('    {"id": 1, "epoch": 1, "v": 1e400}'))
    assert refused(lambda: open_log(p), "IN-6").where == f"{p}:6:32"


_json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70),
                          st.floats(allow_infinity=False), st.text(max_size=12))
_json_values = st.recursive(_json_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)), max_leaves=20)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=st.lists(_json_values, max_size=5), chunk=st.integers(1, 40), indent=st.sampled_from([None, 1]))
def test_json_stream_reads_what_json_writes(tmp_path, values, chunk, indent):
    samples = [{"id": i, "epoch": 1, "v": v} for i, v in enumerate(values)]
    text = json.dumps({"version": 2, "samples": samples, "after": values[:1]}, indent=indent, allow_nan=True,
                      ensure_ascii=False)
    p = tmp_path / "h.json"
    p.write_text(text, encoding="utf-8")
    old = jsontext.READ_CHUNK
    jsontext.READ_CHUNK = chunk
    try:
        log, got = read_all(p)
    finally:
        jsontext.READ_CHUNK = old
    assert canon(got) == canon(samples)
    assert canon(log.header) == canon({"version": 2, "after": values[:1]})
    assert jsontext.loads(jsontext.dumps(samples), "x") is not None
    assert canon(jsontext.loads(jsontext.dumps(samples), "x")) == canon(samples)


def test_loads_and_dumps():
    assert math.isnan(jsontext.loads(b'{"a": NaN}', "m")["a"])
    assert jsontext.dumps({"a": math.nan, "b": "é"}) == '{"a":NaN,"b":"é"}'.encode()
    assert jsontext.dumps("\ud800") == b'"\\ud800"'
    assert refused(lambda: jsontext.loads(b'{"a": 1}\n{"b": 2}', "m"), "IN-6").where == "m:2:1"
    assert refused(lambda: jsontext.loads(b"  ", "m"), "IN-6")
    assert refused(lambda: jsontext.loads("\ufeff{}", "m"), "IN-6")
    assert refused(lambda: jsontext.dumps({"a": [1, -math.inf]}, "s"), "IN-FMT-7").where == "s"
    # a string that says Infinity is a string
    assert jsontext.dumps({"a": "Infinity"}) == b'{"a":"Infinity"}'


# -- hostile archives ---------------------------------------------------------------------------------------------

HEADER = b'{"version": 2, "status": "success", "eval": {"task": "t"}}'
SAMPLE = b'{"id": "x", "epoch": 1, "scores": {"s": {"value": 1.0}}}'


def _info(name: str, *, mode: int | None = None, system: int = 3) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
    info.create_system = system
    if mode is not None:
        info.external_attr = mode << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    return info


def _base(extra: list[tuple[Any, bytes]] = ()) -> list[tuple[Any, bytes]]:
    return [("header.json", HEADER), ("samples/x_epoch_1.json", SAMPLE), *extra]


def _patch_member(data: bytearray, name: str, *, central: dict[int, tuple[str, int]] = {},
                  local: dict[int, tuple[str, int]] = {}) -> bytearray:
    """Overwrite fields of ``name``'s central entry and local header: ``{offset: (struct format, value)}``."""
    raw = name.encode()
    pos = 0
    done = False
    while True:
        pos = data.find(b"PK\x01\x02", pos)
        if pos < 0:
            break
        n = struct.unpack_from("<H", data, pos + 28)[0]
        if bytes(data[pos + 46:pos + 46 + n]) == raw:
            for off, (fmt, value) in central.items():
                struct.pack_into(fmt, data, pos + off, value)
            local_at = struct.unpack_from("<L", data, pos + 42)[0]
            for off, (fmt, value) in local.items():
                struct.pack_into(fmt, data, local_at + off, value)
            done = True
        pos += 4
    assert done
    return data


def _zip_bytes(members, compression=zipfile.ZIP_DEFLATED) -> bytearray:
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        with zipfile.ZipFile(buf, "w", compression=compression) as z:
            for name, data in members:
                z.writestr(name, data)
    return bytearray(buf.getvalue())


def _open_and_read(path: Path) -> list[dict]:
    log = open_log(path)
    return list(log.samples())


def test_the_hostile_base_reads(tmp_path):
    p = tmp_path / "base.eval"
    p.write_bytes(_zip_bytes(_base()))
    assert _open_and_read(p) == [json.loads(SAMPLE)]


@pytest.mark.parametrize("name,info_kw,why", [
    ("/etc/passwd", {}, "absolute"),
    ("C:/x.json", {}, "absolute"),
    ("samples/../../x_epoch_1.json", {}, ".."),
    ("..", {}, ".."),
    ("samples\\x_epoch_2.json", {}, "backslash"),
    ("samples/link_epoch_1.json", {"mode": 0o120777}, "symbolic link"),
    ("samples/dev_epoch_1.json", {"mode": 0o020644}, "device"),
    ("samples/pipe_epoch_1.json", {"mode": 0o010644}, "device, pipe"),
    ("samples/reparse_epoch_1.json", {"system": 0}, "reparse"),
])
def test_unsafe_members_are_refused(tmp_path, name, info_kw, why):
    info = _info(name, **{k: v for k, v in info_kw.items() if k != "system"},
                 system=info_kw.get("system", 3))
    if info_kw.get("system") == 0:
        info.external_attr = 0x400
    p = tmp_path / "hostile.eval"
    p.write_bytes(_zip_bytes(_base([(info, b"../../etc/passwd")])))
    r = refused(lambda: open_log(p), "IN-FMT-3")
    assert why in r.message and r.where == f"{p}!{name}"


def test_a_nul_in_a_name_is_refused(tmp_path):
    data = _zip_bytes(_base([("samples/nul_epoch_1.json", b"{}")]))
    data = bytearray(bytes(data).replace(b"samples/nul_epoch", b"samples/n\x00l_epoch"))
    p = tmp_path / "nul.eval"
    p.write_bytes(data)
    assert "NUL" in refused(lambda: open_log(p), "IN-FMT-3").message


def test_a_name_with_line_breaks_is_refused_on_one_line(tmp_path):
    """A damaged directory can put CR/LF (and NUL) into a member name: the refusal still prints as one line,
    the name escaped, and `where` keeps the raw name for --json."""
    data = _zip_bytes(_base([("samples/nul_epoch_1.json", b"{}")]))
    data = bytearray(bytes(data).replace(b"samples/nul_epoch", b"samples/\r\n\x00_epoch"))
    p = tmp_path / "breaks.eval"
    p.write_bytes(data)
    r = refused(lambda: open_log(p), "IN-FMT-3")
    assert r.where == f"{p}!samples/\r\n\x00_epoch_1.json"
    assert "samples/\\r\\n\\x00_epoch_1.json" in str(r) and "\n" not in str(r)


@pytest.mark.parametrize("method", ["deflate", "zstd"])
@pytest.mark.parametrize("member", ["header.json", "samples/x_epoch_1.json"])
def test_a_bomb_with_a_lying_declared_size_is_stopped_while_streaming(tmp_path, method, member):
    """A member that declares 1000 bytes but inflates to 64 MiB is refused once past 1000 bytes: the declared
    size is not trusted, the bytes are counted as they come."""
    bomb = b"[" + b" " * (64 * 1024 * 1024) + b"]"
    p = tmp_path / "bomb.eval"
    if method == "deflate":
        members = _base()
        members = [(n, bomb if n == member else d) for n, d in members]
        data = _zip_bytes(members)
    else:
        with open(p, "wb") as f:
            z = ZipWriter(f)
            for n, d in _base():
                z.add(n, [bomb if n == member else d])
            z.close()
        data = bytearray(p.read_bytes())
    data = _patch_member(data, member, central={24: ("<L", 1000)})
    if method == "deflate":
        data = _patch_member(data, member, local={22: ("<L", 1000)})
    p.write_bytes(data)
    tracemalloc.start()
    try:
        with pytest.raises(Refusal) as e:
            _open_and_read(p)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert e.value.rule == "IN-FMT-4" and "more than the 1000 bytes it declares" in e.value.message
    assert e.value.where == f"{p}!{member}"
    refusal_is_clean(e.value)
    assert peak < 4 * 1024 * 1024  # stopped after a chunk, not after 64 MiB


def test_a_high_ratio_member_is_refused(tmp_path):
    p = tmp_path / "ratio.eval"
    big = b'{"id": "x", "epoch": 1, "pad": "' + b"a" * (8 * 1024 * 1024) + b'"}'
    p.write_bytes(_zip_bytes([("header.json", HEADER), ("samples/x_epoch_1.json", big)]))
    log = open_log(p)  # the directory is fine: the member is refused when it is read
    r = refused(lambda: list(log.samples()), "IN-FMT-4")
    assert "ratio" in r.message and "200:1" in r.message
    p.write_bytes(_zip_bytes([("header.json", big)]))
    refused(lambda: open_log(p), "IN-FMT-4")


def test_the_ratio_is_enforced_while_streaming(tmp_path, monkeypatch):
    """A header that declares a size within the ratio but data that go beyond it are stopped by the count."""
    monkeypatch.setattr(zipsafe, "RATIO_FLOOR", 1024)
    monkeypatch.setattr(zipsafe, "MAX_RATIO", 2)
    data = _zip_bytes([("header.json", HEADER), ("samples/x_epoch_1.json", b"[" + b" " * 100_000 + b"]")])
    p = tmp_path / "ratio.eval"
    p.write_bytes(data)
    member = next(m for m in zipsafe.Archive(p).members if m.name.startswith("samples/"))
    data = _patch_member(data, member.name, central={24: ("<L", member.csize * 2)})
    p.write_bytes(data)
    r = refused(lambda: _open_and_read(p), "IN-FMT-4")
    assert "declares" in r.message


def test_a_member_over_the_size_bound_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(zipsafe, "MAX_MEMBER_SIZE", 1024 * 1024)
    p = tmp_path / "big.eval"
    big = b'{"id": "x", "epoch": 1, "r": "' + os.urandom(700_000).hex().encode() + b'"}'
    p.write_bytes(_zip_bytes([("header.json", HEADER), ("samples/x_epoch_1.json", big)],
                             compression=zipfile.ZIP_STORED))
    log = open_log(p)
    assert "1 MiB" in refused(lambda: list(log.samples()), "IN-FMT-4").message


def test_too_many_members(tmp_path, monkeypatch):
    monkeypatch.setattr(zipsafe, "MAX_MEMBERS", 3)
    p = tmp_path / "many.eval"
    p.write_bytes(_zip_bytes(_base([("samples/y_epoch_1.json", SAMPLE), ("samples/z_epoch_1.json", SAMPLE)])))
    assert "more than the reader's bound of 3" in refused(lambda: open_log(p), "IN-FMT-4").message


def test_unknown_methods_and_encryption_are_refused(tmp_path):
    p = tmp_path / "bzip2.eval"
    p.write_bytes(_zip_bytes(_base(), compression=zipfile.ZIP_BZIP2))
    assert "method 12" in refused(lambda: open_log(p), "IN-FMT-5").message
    p.write_bytes(_patch_member(_zip_bytes(_base()), "header.json", central={10: ("<H", 99)}))
    assert "method 99" in refused(lambda: open_log(p), "IN-FMT-5").message
    p.write_bytes(_patch_member(_zip_bytes(_base()), "header.json", central={8: ("<H", 1)}))
    assert "encrypted" in refused(lambda: open_log(p), "IN-FMT-5").message
    p.write_bytes(_patch_member(_zip_bytes(_base()), "samples/x_epoch_1.json", local={6: ("<H", 1)}))
    log = open_log(p)
    assert "encrypted" in refused(lambda: list(log.samples()), "IN-FMT-5").message


def test_overlapping_members_are_refused(tmp_path):
    """Two directory entries for one local header (the 'overlapping files' bomb)."""
    data = _zip_bytes(_base())
    eocd = data.rfind(b"PK\x05\x06")
    n, cd_size, cd_offset = struct.unpack_from("<HLL", data, eocd + 10)
    first = bytes(data[cd_offset:cd_offset + 46 + struct.unpack_from("<H", data, cd_offset + 28)[0]])
    twin = first.replace(b"header.json", b"headez.json")
    new = bytearray(data[:eocd]) + twin + bytearray(data[eocd:])
    struct.pack_into("<HHLL", new, eocd + len(twin) + 8, n + 1, n + 1, cd_size + len(twin), cd_offset)
    p = tmp_path / "overlap.eval"
    p.write_bytes(new)
    assert "overlap" in refused(lambda: open_log(p), "IN-FMT-2").message


@pytest.mark.parametrize("cut", [10, 100, 200, -30, -5])
def test_truncated_archives_are_refused(tmp_path, cut):
    data = bytes(_zip_bytes(_base()))
    assert len(data) > 300
    p = tmp_path / "cut.eval"
    p.write_bytes(data[:cut])
    refused(lambda: _open_and_read(p), "IN-FMT-2")


def test_corrupt_data_and_crc_are_refused(tmp_path):
    data = _zip_bytes(_base())
    p = tmp_path / "crc.eval"
    p.write_bytes(_patch_member(data, "samples/x_epoch_1.json", central={16: ("<L", 12345)}))
    log = open_log(p)
    assert "CRC" in refused(lambda: list(log.samples()), "IN-FMT-2").message
    p.write_bytes(_patch_member(_zip_bytes(_base()), "samples/x_epoch_1.json", local={26: ("<H", 3)}))
    log = open_log(p)
    assert "another member" in refused(lambda: list(log.samples()), "IN-FMT-2").message


def test_a_file_changed_after_opening_is_refused(tmp_path):
    p = tmp_path / "moving.eval"
    p.write_bytes(_zip_bytes(_base()))
    log = open_log(p)
    p.write_bytes(_zip_bytes(_base([("samples/y_epoch_1.json", SAMPLE)])))
    assert "changed" in refused(lambda: list(log.samples()), "IN-FMT-2").message


def test_layout_refusals(tmp_path):
    p = tmp_path / "layout.eval"
    p.write_bytes(_zip_bytes([("samples/x_epoch_1.json", SAMPLE)]))
    assert "neither header.json" in refused(lambda: open_log(p), "IN-FMT-6").message
    p.write_bytes(_zip_bytes([("header.json", b"[1]")]))
    refused(lambda: open_log(p), "IN-FMT-6")
    p.write_bytes(_zip_bytes([("header.json", HEADER), ("samples/odd.json", SAMPLE)]))
    refused(lambda: open_log(p), "IN-FMT-6")
    p.write_bytes(_zip_bytes([("header.json", HEADER), ("samples/x_epoch_1.json", b"[1]")]))
    log = open_log(p)
    refused(lambda: list(log.samples()), "IN-8")
    bad_refs = {"id": 1, "epoch": 1, "events": [{"event": "model", "input": [], "input_refs": [[0]]}],
                "events_data": {"messages": [{"role": "user", "content": "x"}], "calls": []}}
    p.write_bytes(_zip_bytes([("header.json", HEADER), ("samples/1_epoch_1.json", json.dumps(bad_refs).encode())]))
    log = open_log(p)
    refused(lambda: list(log.samples()), "IN-FMT-6")
    assert list(log.samples(resolve_events=False))[0]["events_data"]


def test_zip64_archives_read(tmp_path):
    """Members written with ZIP64 extra fields (as Inspect's compaction writes them) and a ZIP64 end record."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for name, data in _base():
            with z.open(name, "w", force_zip64=True) as w:
                w.write(data)
    data = bytearray(buf.getvalue())
    # a ZIP64 end of central directory record and locator before the classic record
    eocd = data.rfind(b"PK\x05\x06")
    n, cd_size, cd_offset = struct.unpack_from("<HLL", data, eocd + 10)
    rec64 = struct.pack("<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, n, n, cd_size, cd_offset)
    loc = struct.pack("<4sLQL", b"PK\x06\x07", 0, eocd, 1)
    classic = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    p = tmp_path / "z64.eval"
    p.write_bytes(bytes(data[:eocd]) + rec64 + loc + classic)
    assert _open_and_read(p) == [json.loads(SAMPLE)]
    with zipfile.ZipFile(p) as z:  # the standard library agrees
        assert z.read("samples/x_epoch_1.json") == SAMPLE


class _Unseekable(io.RawIOBase):
    """A write-only stream: the standard library then writes data descriptors (flag bit 3) after each member."""

    def __init__(self):
        self.buf = io.BytesIO()

    def writable(self):
        return True

    def write(self, b):
        return self.buf.write(b)


def test_data_descriptors_and_an_archive_comment(tmp_path):
    sink = _Unseekable()
    with zipfile.ZipFile(sink, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for name, data in _base():
            z.writestr(name, data)
        z.comment = b"a comment, PK\x05\x06 inside it"
    p = tmp_path / "dd.eval"
    p.write_bytes(sink.buf.getvalue())
    assert {m.flags & 0x08 for m in zipsafe.Archive(p).members} == {0x08}
    assert _open_and_read(p) == [json.loads(SAMPLE)]


def test_invalid_utf8_in_a_sample_of_a_json_log_has_its_byte_offset(tmp_path):
    p = tmp_path / "late.json"
    head = _log_text('    {"id": 1, "epoch": 1, "x": "PLACE"}').encode()
    p.write_bytes(head.replace(b"PLACE", b"ab\xffc"))
    r = refused(lambda: open_log(p), "IN-6")
    assert f"byte offset {head.index(b'PLACE') + 2}" in r.message and r.where == f"{p}:6:35"


def test_random_damage_is_refused_never_crashes(inspect_logs, tmp_path):
    """Flipped bytes and cut files anywhere in a real .eval: the reader reads or refuses (exit 2), nothing else."""
    original = inspect_logs["eval"].read_bytes()
    rng = random.Random(20261201)
    p = tmp_path / "damaged.eval"
    outcomes = {"read": 0, "refused": 0}
    for i in range(250):
        data = bytearray(original)
        if i % 5 == 0:
            data = data[: rng.randrange(1, len(data))]
        else:
            for _ in range(rng.randint(1, 4)):
                at = rng.randrange(len(data))
                data[at] = rng.randrange(256)
        p.write_bytes(data)
        try:
            _open_and_read(p)
            outcomes["read"] += 1
        except Refusal as r:
            refusal_is_clean(r)
            outcomes["refused"] += 1
    assert outcomes["refused"] > 100


def test_random_damage_in_json_is_refused_never_crashes(tmp_path):
    original = (INSPECT_SAMPLES / "basic.json").read_bytes()
    rng = random.Random(7)
    p = tmp_path / "damaged.json"
    for i in range(150):
        data = bytearray(original)
        if i % 3 == 0:
            data = data[: rng.randrange(1, len(data))]
        else:
            at = rng.randrange(len(data))
            data[at] = rng.choice(b'{}[]",:0123456789NIaex\\\xff \n')
        p.write_bytes(data)
        try:
            _open_and_read(p)
        except Refusal as r:
            refusal_is_clean(r)


# -- streaming: memory does not grow with the number of samples -------------------------------------------------------


def _small_samples(n: int) -> Iterable[dict]:
    for i in range(n):
        yield {"id": i, "epoch": 1 + i % 2, "input": f"question {i} {os.urandom(6).hex()}", "target": "4",
               "scores": {"match": {"value": "C" if i % 3 else "I", "answer": str(i)},
                          "num": {"value": math.nan if i % 7 == 0 else i / 3}},
               "messages": [{"role": "user", "content": f"q{i}"}], "metadata": {"i": i}}


def _iteration_peak(log: InspectLog) -> tuple[int, int]:
    """(samples, peak bytes allocated while iterating, above what was allocated before)."""
    it = log.samples()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        count = 0
        for _ in it:
            count += 1
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    return count, peak


@pytest.mark.parametrize("fmt", ["eval", "json"])
def test_streaming_memory_is_bounded(tmp_path, fmt, monkeypatch):
    """Iterating 20,000 samples takes no more memory than iterating 2,000. (A .json log is read in chunks of
    READ_CHUNK bytes, 1 MiB, larger than the 2,000-sample file: the test reads it in 64 KiB chunks so that both
    files span many chunks.)"""
    if fmt == "json":
        monkeypatch.setattr(jsontext, "READ_CHUNK", 64 * 1024)
    header = json.loads(HEADER)
    peaks = {}
    for n in (2_000, 20_000):
        p = tmp_path / f"n{n}.{fmt}"
        write_log(p, header, _small_samples(n), fmt=fmt)
        if fmt == "json":
            tracemalloc.start()
            try:
                log = open_log(p)
                open_peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
            assert open_peak < 8 * 1024 * 1024  # the header, and one chunk of text at a time
        else:
            log = open_log(p)
        count, peak = _iteration_peak(log)
        assert count == log.sample_count == n
        peaks[n] = peak
    assert peaks[20_000] < 4 * 1024 * 1024, peaks
    assert peaks[20_000] < 2 * peaks[2_000] + 512 * 1024, peaks  # ten times the samples, not ten times the memory


def test_the_module_does_not_import_inspect_ai():
    import subprocess
    import sys

    code = ("import sys; import aefgate.formats.inspect as m; "
            "assert 'inspect_ai' not in sys.modules, 'inspect_ai imported'; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "ok"


@pytest.mark.parametrize("where", ["reduction", "reduction sample"])
def test_a_member_name_twice_in_reductions_is_refused_while_streaming(tmp_path, where):
    """reductions.json is walked member by member (JsonStream.members): a name twice is refused (IN-6, I-JSON),
    and the reductions around it still read as they were."""
    members = zip_members(INSPECT_SAMPLES / "epochs_mean.eval")
    data = dict(members)["reductions.json"].decode()
    if where == "reduction":
        bad = data.replace('"scorer"', '"scorer": "x", "scorer"', 1)
    else:
        bad = data.replace('"sample_id"', '"sample_id": "x", "sample_id"', 1)
    assert bad != data
    path = write_zip(tmp_path / "dup.eval", [(n, bad.encode() if n == "reductions.json" else d) for n, d in members])
    log = open_log(path)
    r = refused(lambda: list(log.reduction_events()), "IN-6")
    assert "appears twice" in r.message
