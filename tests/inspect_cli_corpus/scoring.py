"""Scorers: match and includes (integer and unicode ids, chat-message input, list targets, unicode metadata),
model_graded_qa and model_graded_fact (mockllm/model as the judge), a dict-valued scorer."""

from corpus_mock import grader, scripted
from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.model import ChatMessageSystem, ChatMessageUser
from inspect_ai.scorer import Score, Target, includes, match, mean, model_graded_fact, model_graded_qa, scorer
from inspect_ai.solver import TaskState, generate


def dataset() -> list[Sample]:
    return [
        Sample(id=1, input="What is the capital of France?", target=["Paris", "paris"],
               metadata={"langue": "français", "drapeau": "\U0001f1eb\U0001f1f7"}),
        Sample(id=2, input="2+2?", target="4", metadata={"level": 1}),
        Sample(id=10, input=[ChatMessageSystem(content="Answer in one word."),
                             ChatMessageUser(content="What is the colour of the sky?")],
               target=["blue", "azure"]),
        Sample(id="σ-ελληνικά", input="Ελληνικά; (ναι ή όχι)", target="ναι",
               metadata={"γλώσσα": "ελληνικά", "nested": {"ü": ["ß", 1.5]}}),
        Sample(id="ü-Hauptstadt", input="Die Hauptstadt Deutschlands?", target="Berlin"),
    ]


@task
def match_includes() -> Task:
    return Task(dataset=dataset(), solver=[scripted(), generate()], scorer=[match(), includes()])


@task
def graded_qa() -> Task:
    return Task(dataset=dataset()[:3], solver=[scripted(), generate()], scorer=model_graded_qa(model=grader()))


@task
def graded_fact() -> Task:
    return Task(dataset=dataset()[:3], solver=[scripted(), generate()], scorer=model_graded_fact(model=grader()))


@scorer(metrics={"exact": [mean()], "length": [mean()]})
def shape():
    """A dict-valued scorer: one value per key."""

    async def score(state: TaskState, target: Target) -> Score:
        answer = state.output.completion
        return Score(value={"exact": 1.0 if answer in target.target else 0.0, "length": float(len(answer))},
                     answer=answer, explanation=f"« {answer} » \u2014 {len(answer)} chars")

    return score


@task
def dict_scores() -> Task:
    return Task(dataset=dataset(), solver=[scripted(), generate()], scorer=[shape(), match()])


@task
def graded_role() -> Task:
    """model_graded_qa judged by the model in the role ``grader`` (the task's model_roles: eval.model_roles)."""
    return Task(dataset=dataset()[:3], solver=[scripted(), generate()], scorer=model_graded_qa(),
                model_roles={"grader": "mockllm/model"})
