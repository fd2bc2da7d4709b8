"""The scripted model behind the corpus: ``mockllm/model`` (given with ``--model``) answering through a function.

Inspect's mockllm takes ``custom_outputs`` (here one function for every task, so tasks that run at once in one
process agree); the CLI cannot pass a function, so the first solver of each task gives it to the active model
(:func:`scripted`). Every output carries its usage, counted in words: mockllm counts tokens with a tokenizer only
when an output has no usage, and that tokenizer downloads its data (the corpus must build offline).
"""

from __future__ import annotations

import contextvars

from inspect_ai.model import ChatMessageTool, Model, ModelOutput, ModelUsage, get_model
from inspect_ai.solver import Generate, Solver, TaskState, solver

MODEL = "mockllm/model"

# the answer to each question in each epoch (epochs of one sample differ, for the reducers): the same logs every time
ANSWERS = {
    "capital of france": ["Paris", "Lyon", "Paris"],
    "2+2": ["5", "4", "5"],
    "ελληνικά": ["ναι"],
    "hauptstadt": ["Berlin"],
    "colour of the sky": ["The sky is blue", "grey", "blue"],
}
# the epoch of the sample being run: set by scripted(), read by respond() (the generate calls run in its context)
EPOCH: contextvars.ContextVar[int] = contextvars.ContextVar("corpus_epoch", default=1)


def words(messages) -> int:
    return sum(len(m.text.split()) for m in messages)


def with_usage(output: ModelOutput, input_tokens: int) -> ModelOutput:
    out = len(output.completion.split()) + sum(len(str(c.arguments).split()) for c in output.message.tool_calls or [])
    output.usage = ModelUsage(input_tokens=input_tokens, output_tokens=out, total_tokens=input_tokens + out)
    return output


def _question(input) -> str:
    users = [m for m in input if m.role == "user"]
    return users[0].text.lower() if users else ""


def respond(input, tools, tool_choice, config) -> ModelOutput:
    """The model's next output for a conversation (every task of the corpus)."""
    if input and "[Submission]:" in input[-1].text:  # a grading prompt: the model in the grader role
        return grade(input, tools, tool_choice, config)
    question = _question(input)
    names = {t.name for t in tools}
    n = words(input)
    if "tokens" in question:  # a sample meant to hit its token limit
        o = ModelOutput.from_content(model=MODEL, content="many words " * 10)
        o.usage = ModelUsage(input_tokens=n, output_tokens=5000, total_tokens=n + 5000)
        return o
    if "add" in names:  # the react agent: add, then submit the sum (or add forever: the message limit)
        done = [m for m in input if isinstance(m, ChatMessageTool) and m.function == "add"]
        if "loop" in question or not done:
            return with_usage(ModelOutput.for_tool_call(MODEL, "add", {"x": 2, "y": 3 + len(done)},
                                                        content="Let me add."), n)
        return with_usage(ModelOutput.for_tool_call(MODEL, "submit", {"answer": done[-1].text}), n)
    for key, answers in ANSWERS.items():
        if key in question:
            answer = answers[(EPOCH.get() - 1) % len(answers)]
            return with_usage(ModelOutput.from_content(model=MODEL, content=answer), n)
    return with_usage(ModelOutput.from_content(model=MODEL, content="I do not know \u2014 désolé"), n)


def grade(input, tools, tool_choice, config) -> ModelOutput:
    """The grader: C for a submission that names Paris, 4 or blue, else I, after a line of reasoning."""
    prompt = input[-1].text
    sub = prompt.split("[Submission]:")[-1].split("***")[0] if "[Submission]:" in prompt else prompt
    ok = any(w in sub for w in ("Paris", "4", "blue"))
    verdict = "matches" if ok else "does not match"
    text = f"The submission {verdict} the criterion \u2714.\n\nGRADE: {'C' if ok else 'I'}"
    return with_usage(ModelOutput.from_content(model=MODEL, content=text), words(input))


def grader() -> Model:
    """``mockllm/model`` as the judge of model-graded scorers."""
    return get_model(MODEL, custom_outputs=grade, memoize=False)


@solver
def scripted() -> Solver:
    """Give the active model (``--model mockllm/model``), and the grader role's when the task has one, the corpus's
    outputs."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        for model in (get_model(), *_role("grader")):
            if not str(model).startswith("mockllm/"):
                raise RuntimeError(f"the corpus runs on mockllm/model, not {model}")
            model.api.outputs = respond
        EPOCH.set(state.epoch)
        return state

    return solve


def _role(role: str) -> list[Model]:
    from inspect_ai.model._model import model_roles

    return [get_model(role=role)] if role in model_roles() else []
