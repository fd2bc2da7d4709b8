"""A tool-using agent: react with an @tool; the scripted model calls the tool, then submits its result."""

from corpus_mock import scripted
from inspect_ai import Task, task
from inspect_ai.agent import as_solver, react
from inspect_ai.dataset import Sample
from inspect_ai.scorer import includes
from inspect_ai.tool import tool


@tool
def add():
    async def execute(x: int, y: int) -> str:
        """Add two integers.

        Args:
            x: the first integer
            y: the second integer

        Returns:
            The sum.
        """
        return str(x + y)

    return execute


@task
def react_tool() -> Task:
    data = [Sample(id=1, input="Use the add tool: what is 2 plus 3?", target="5"),
            Sample(id="ü-2", input="Addiere 2 und 3 mit dem Werkzeug.", target="5")]
    return Task(dataset=data, solver=[scripted(), as_solver(react(tools=[add()]))], scorer=includes())
