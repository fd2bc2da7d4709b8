"""One task run with different generate configs (--temperature, --seed): logs that differ only there."""

from corpus_mock import scripted
from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.scorer import match
from inspect_ai.solver import generate


@task
def pair() -> Task:
    return Task(dataset=[Sample(id=1, input="What is the capital of France?", target="Paris"),
                         Sample(id=2, input="2+2?", target="4")],
                solver=[scripted(), generate()], scorer=match())
