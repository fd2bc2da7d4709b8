"""Generate a large Inspect AI eval log with inspect-ai itself (no network: the mockllm provider).

    python bench/make_inspect_log.py OUT.eval --samples 10000 --epochs 2

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
    a = ap.parse_args(argv)

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


if __name__ == "__main__":
    raise SystemExit(main())
