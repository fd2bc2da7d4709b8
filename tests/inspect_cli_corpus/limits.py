"""Samples that fail (fail_on_error=False): one raises, one hits the message limit, one the token limit."""

from agent import add
from corpus_mock import scripted
from inspect_ai import Task, task
from inspect_ai.agent import as_solver, react
from inspect_ai.dataset import Sample
from inspect_ai.scorer import includes
from inspect_ai.solver import Generate, TaskState, solver


@solver
def fail_on(marker: str):
    async def solve(state: TaskState, generate: Generate) -> TaskState:
        if marker in state.input_text:
            raise RuntimeError(f"deliberate failure \u2717 on sample {state.sample_id}")
        return state

    return solve


@task
def limits() -> Task:
    data = [Sample(id=1, input="Use the add tool: what is 2 plus 3?", target="5"),
            Sample(id=2, input="Use the add tool in a loop, forever.", target="5"),
            Sample(id=3, input="Spend many tokens: what is 2 plus 3?", target="5"),
            Sample(id="boom-ü", input="BOOM: this sample raises.", target="5")]
    return Task(dataset=data, solver=[scripted(), fail_on("BOOM"), as_solver(react(tools=[add()]))],
                scorer=includes(), message_limit=8, token_limit=2000, fail_on_error=False)
