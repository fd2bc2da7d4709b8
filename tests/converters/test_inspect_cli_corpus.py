"""The corpus of logs written by the real Inspect CLI (tests/_inspect_corpus.py) has what issue 26 asks of it.

Everything here is read back with Inspect's own reader (``inspect_ai.log.read_eval_log``), not with aefgate's.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests._inspect_corpus import EVAL_SET_TASKS, FORMATS, PAIR, TASKS, eval_set_dir

read_eval_log = pytest.importorskip("inspect_ai.log").read_eval_log


@pytest.fixture(scope="module")
def logs(inspect_cli_corpus: dict[str, Path]) -> dict:
    return {name: read_eval_log(str(path)) for name, path in inspect_cli_corpus.items()}


def test_corpus_has_every_feature(logs: dict) -> None:
    # every task and every pair, in both formats, each read by Inspect, written by the CLI from a task file
    assert set(logs) == {f"{t}.{fmt}" for t in (*TASKS, *PAIR) for fmt in FORMATS}
    for name, log in logs.items():
        assert log.status == "success", name
        assert log.eval.model == "mockllm/model", name
        assert log.eval.task_file and log.eval.task_file.endswith(".py"), name
        assert log.eval.task_registry_name, name
        assert log.samples, name
        cfg = log.eval.model_generate_config  # --temperature 0.2 --seed 7, but in the pair's other two logs
        want = {"pair_t09_s7": (0.9, 7), "pair_t02_s8": (0.2, 8)}.get(name.split(".")[0], (0.2, 7))
        assert (cfg.temperature, cfg.seed) == want, name

    for fmt in FORMATS:
        def samples(task: str) -> list:
            return logs[f"{task}.{fmt}"].samples

        # integer and unicode ids, chat-message input, list targets, unicode metadata
        mi = samples("match_includes")
        ids = {s.id for s in mi}
        assert any(isinstance(i, int) for i in ids)
        assert any(isinstance(i, str) and not i.isascii() for i in ids)
        assert any(isinstance(s.input, list) and {m.role for m in s.input} >= {"system", "user"} for s in mi)
        assert any(isinstance(s.target, list) and len(s.target) > 1 for s in mi)
        assert any(any(not str(k).isascii() or not str(v).isascii() for k, v in (s.metadata or {}).items())
                   for s in mi)
        assert {sc.name for sc in logs[f"match_includes.{fmt}"].eval.scorers} == {"match", "includes"}

        # a dict-valued scorer
        assert all(isinstance(s.scores["shape"].value, dict) for s in samples("dict_scores"))

        # model_graded_qa and model_graded_fact, mockllm/model as the judge (the scorer's model parameter)
        for task, scorer in (("graded_qa", "model_graded_qa"), ("graded_fact", "model_graded_fact")):
            (spec,) = logs[f"{task}.{fmt}"].eval.scorers
            assert spec.name == scorer
            assert spec.options["model"]["model"] == "mockllm/model"
            grades = {s.scores[scorer].value for s in samples(task)}
            assert grades == {"C", "I"}, (task, grades)
            assert all("GRADE:" in s.scores[scorer].explanation for s in samples(task))
        # model_graded_qa judged by the model of the role "grader" (the task's model_roles)
        role = logs[f"graded_role.{fmt}"]
        assert role.eval.model_roles["grader"].model == "mockllm/model"
        assert {s.scores["model_graded_qa"].value for s in role.samples} == {"C", "I"}

        # several epochs, one task per reducer, each with its reductions
        reducers = {}
        for task in (t for t in TASKS if t.startswith("reduce_")):
            log = logs[f"{task}.{fmt}"]
            assert log.eval.config.epochs == 3
            assert {s.epoch for s in log.samples} == {1, 2, 3}
            (reducer,) = log.eval.config.epochs_reducer
            reducers[reducer] = task
            assert log.reductions and log.reductions[0].reducer == reducer
            assert log.results.scores[0].reducer == reducer
        assert set(reducers) == {"mean", "median", "mode", "max", "pass_at_2", "at_least_2"}
        # the epochs of one sample got different answers (the reducers have something to reduce)
        per_sample = {}
        for s in samples("reduce_mean"):
            per_sample.setdefault(s.id, set()).add(s.scores["match"].value)
        assert any(len(v) > 1 for v in per_sample.values())

        # a tool-using agent: react calls the @tool add, gets its result, then submits (the model's outputs)
        for s in samples("react_tool"):
            calls = [c.function for e in s.events if e.event == "model" for c in e.output.message.tool_calls or []]
            assert calls == ["add", "submit"], calls
            assert any(m.role == "assistant" and [c.function for c in m.tool_calls or []] == ["add"]
                       for m in s.messages)
            assert any(m.role == "tool" and m.function == "add" and m.text == "5" for m in s.messages)
            assert s.scores["includes"].value == "C"

        # fail_on_error=False: one sample errors, two hit their message and token limits
        lim = samples("limits")
        assert logs[f"limits.{fmt}"].eval.config.fail_on_error is False
        errors = [s for s in lim if s.error]
        assert [s.id for s in errors] == ["boom-ü"]
        assert "deliberate failure" in errors[0].error.message and errors[0].error.traceback
        assert sorted((s.limit.type, s.limit.limit) for s in lim if s.limit) == [("message", 8), ("token", 2000)]

    # nothing but the deliberate failure errored anywhere (a tokenizer download, blocked offline, would)
    failed = sorted(n for n, log in logs.items() for s in log.samples if s.error)
    assert failed == ["limits.eval", "limits.json"]
    # every model output carries its usage (no tokenizer counted it)
    for name, log in logs.items():
        for s in log.samples:
            for e in s.events:
                if e.event == "model" and e.error is None:
                    assert e.output.usage is not None, name

    # the pair: only the generate config's temperature (or seed) differs
    for fmt in FORMATS:
        a, t, s = (logs[f"{n}.{fmt}"] for n in ("pair_t02_s7", "pair_t09_s7", "pair_t02_s8"))
        cfg = [x.eval.model_generate_config for x in (a, t, s)]
        assert [c.temperature for c in cfg] == [0.2, 0.9, 0.2]
        assert [c.seed for c in cfg] == [7, 7, 8]
        assert [x.plan.config.temperature for x in (a, t, s)] == [0.2, 0.9, 0.2]
        for other in (t, s):
            assert other.eval.task_args == a.eval.task_args and other.eval.config == a.eval.config
            assert [x.output.completion for x in other.samples] == [x.output.completion for x in a.samples]
            diff = {k for k, v in cfg[0].model_dump().items() if other.eval.model_generate_config.model_dump()[k] != v}
            assert diff == ({"temperature"} if other is t else {"seed"})


def test_corpus_has_an_eval_set_folder(inspect_cli_corpus: dict[str, Path]) -> None:
    import json

    d = eval_set_dir(inspect_cli_corpus)
    logs = sorted(d.glob("*.eval"))
    assert len(logs) == len(EVAL_SET_TASKS)
    read = [read_eval_log(str(p)) for p in logs]
    (set_id,) = {log.eval.eval_set_id for log in read}
    assert set_id and {log.eval.task for log in read} == {"pair", "react_tool"}
    assert sorted(json.loads((d / "logs.json").read_text())) == [p.name for p in logs]  # Inspect's listing
    assert json.loads((d / "eval-set.json").read_text())["eval_set_id"] == set_id
