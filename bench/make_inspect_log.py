"""Generate a large Inspect AI eval log with inspect-ai itself (no network: the mockllm provider).

    python bench/make_inspect_log.py OUT.eval --samples 10000 --epochs 2
    python bench/make_inspect_log.py OUT.eval --small --samples 10000 [--format json]

With ``--small``, the log of many small samples (issue 31) is built with inspect-ai's own classes (``EvalLog``,
``EvalSample``, messages, ``ModelOutput``, ``Score``, ``ModelUsage``; no events) and written by
``write_eval_log``: no eval is run, so 10,000 samples take seconds instead of minutes.

One task, N samples with string ids and metadata, `Epochs(E, "mean")`, scorers `match()` and a numeric
`answer_length`; mockllm answers with a ModelOutput carrying usage, as in shared/samples/inspect.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--samples", type=int, default=10_000)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--format", default="eval", choices=["eval", "json"])
    ap.add_argument("--small", action="store_true", help="many small samples, built with inspect-ai's classes")
    a = ap.parse_args(argv)
    if a.small:
        return small(a.out, a.samples, a.epochs, a.format)

    from inspect_ai import Epochs, Task, eval
    from inspect_ai.dataset import Sample
    from inspect_ai.model import ModelOutput, get_model
    from inspect_ai.scorer import Score, mean, match, scorer, stderr
    from inspect_ai.solver import generate

    def outputs():
        i = 0
        while True:
            i += 1
            words = f"answer {i % 7} for the question" if i % 3 else f"{i % 5}"
            out = ModelOutput.from_content(model="mockllm/model", content=words)
            from inspect_ai.model import ModelUsage

            n = len(words.split())
            out.usage = ModelUsage(input_tokens=12, output_tokens=n, total_tokens=12 + n)
            yield out

    @scorer(metrics=[mean(), stderr()])
    def answer_length():
        async def score(state, target):
            return Score(value=len(state.output.completion.split()), answer=state.output.completion)

        return score

    data = [
        Sample(id=f"s{i:06d}", input=f"What is {i} mod 5?", target=str(i % 5), metadata={"topic": f"t{i % 11}"})
        for i in range(a.samples)
    ]
    task = Task(name="bench", dataset=data, solver=[generate()], scorer=[match(), answer_length()],
                epochs=Epochs(a.epochs, "mean"))
    model = get_model("mockllm/model", custom_outputs=outputs())
    with tempfile.TemporaryDirectory() as d:
        logs = eval(task, model=model, log_dir=d, log_format=a.format, display="none", max_samples=64)
        src = Path(logs[0].location)
        a.out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src, a.out)
    print(a.out)
    return 0


def small(out: Path, samples: int, epochs: int, fmt: str) -> int:
    """The small-sample shape: per sample, a system, user and assistant message, the output with usage, two scores
    (``match``: C/I, ``answer_length``: a number); no events. Deterministic but for the ids inspect-ai draws."""
    from inspect_ai.log import (EvalConfig, EvalDataset, EvalLog, EvalMetric, EvalResults, EvalSample, EvalScore,
                                EvalSpec, EvalStats, write_eval_log)
    from inspect_ai.model import (ChatMessageAssistant, ChatMessageSystem, ChatMessageUser, ModelOutput, ModelUsage)
    from inspect_ai.scorer import Score

    created = "2026-12-01T00:00:00+00:00"
    rows, lengths, correct = [], [], []
    for e in range(1, epochs + 1):
        for i in range(samples):
            k = i * epochs + e
            words = f"answer {k % 7} for the question" if k % 3 else f"{k % 5}"
            n = len(words.split())
            usage = ModelUsage(input_tokens=12, output_tokens=n, total_tokens=12 + n)
            output = ModelOutput.from_content(model="mockllm/model", content=words)
            output.usage = usage
            target = str(i % 5)
            ok = words.strip() == target
            correct.append(1.0 if ok else 0.0)
            lengths.append(float(n))
            question = f"What is {i} mod 5?"
            rows.append(EvalSample(
                id=f"s{i:06d}", epoch=e, input=question, target=target, metadata={"topic": f"t{i % 11}"},
                messages=[ChatMessageSystem(content="Answer with one digit."), ChatMessageUser(content=question),
                          ChatMessageAssistant(content=words, model="mockllm/model")],
                output=output,
                scores={"match": Score(value="C" if ok else "I", answer=words, explanation=words),
                        "answer_length": Score(value=n, answer=words)},
                model_usage={"mockllm/model": usage}, total_time=0.01, working_time=0.01))
    mean = lambda xs: sum(xs) / len(xs) if xs else 0.0  # noqa: E731
    log = EvalLog(
        status="success",
        eval=EvalSpec(created=created, task="bench", dataset=EvalDataset(name="bench", samples=samples),
                      model="mockllm/model", config=EvalConfig(epochs=epochs)),
        results=EvalResults(total_samples=samples * epochs, completed_samples=samples * epochs, scores=[
            EvalScore(name="match", scorer="match",
                      metrics={"accuracy": EvalMetric(name="accuracy", value=mean(correct))}),
            EvalScore(name="answer_length", scorer="answer_length",
                      metrics={"mean": EvalMetric(name="mean", value=mean(lengths))})]),
        stats=EvalStats(started_at=created, completed_at=created),
        samples=rows)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_eval_log(log, str(out), format=fmt)
    print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
