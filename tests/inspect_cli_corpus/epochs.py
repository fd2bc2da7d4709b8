"""Several epochs, one task per Inspect reducer (the scripted model answers a question differently each time)."""

from corpus_mock import scripted
from inspect_ai import Epochs, Task, task
from inspect_ai.dataset import Sample
from inspect_ai.scorer import includes, match
from inspect_ai.solver import generate


def run(reducer: str, epochs: int = 3, scorer=None) -> Task:
    data = [Sample(id=1, input="What is the capital of France?", target="Paris"),
            Sample(id="zwei", input="2+2?", target="4"),
            Sample(id=3, input="The colour of the sky?", target="blue")]
    return Task(dataset=data, solver=[scripted(), generate()], scorer=scorer or match(),
                epochs=Epochs(epochs, reducer))


@task
def reduce_mean() -> Task:
    return run("mean")


@task
def reduce_median() -> Task:
    return run("median")


@task
def reduce_mode() -> Task:
    return run("mode", scorer=includes())


@task
def reduce_max() -> Task:
    return run("max")


@task
def reduce_pass_at_2() -> Task:
    return run("pass_at_2")


@task
def reduce_at_least_2() -> Task:
    return run("at_least_2")
