"""A corpus of Inspect logs written by the real Inspect CLI (issue 26), built once per test session.

``build_corpus(dest)`` runs ``inspect eval`` on the task files of ``tests/inspect_cli_corpus/`` with
``--model mockllm/model`` (the scripted mock of ``corpus_mock.py``, also the judge of the model-graded scorers) and
the generate config ``--temperature 0.2 --seed 7``, once with ``--log-format eval`` and once with ``json``; then the
task ``pair`` again with ``--temperature 0.9`` and with ``--seed 8`` (so ``pair`` has three logs: two differ only in
the temperature, two only in the seed). Each log is renamed to a stable name: ``TASK.eval`` /
``TASK.json`` (Inspect's task name), and ``pair_t02_s7``, ``pair_t09_s7`` (temperature 0.9), ``pair_t02_s8`` (seed 8).
Beside them, ``eval-set/`` is a folder as ``inspect eval-set`` leaves it (tasks ``pair`` and ``react_tool``: two
``.eval`` logs named by Inspect, its ``logs.json`` listing, ``eval-set.json`` and ``.eval-set-id``); it is not in the
returned mapping (:func:`eval_set_dir`).

The logs (each as ``.eval`` and ``.json``; every sample's model is ``mockllm/model``):

- ``match_includes``: scorers match and includes; ids 1, 2, 10, ``σ-ελληνικά``, ``ü-Hauptstadt``; a chat-message
  input (system + user); list targets; unicode and nested metadata. ``dict_scores``: the same samples, a
  dict-valued scorer (``shape``: ``{exact, length}``, with answer and explanation) and match.
- ``graded_qa`` / ``graded_fact``: model_graded_qa / model_graded_fact with ``model=`` a mockllm/model judge (the
  scorer's options name it); ``graded_role``: model_graded_qa judged by the task's ``model_roles`` grader.
- ``reduce_mean``, ``reduce_median``, ``reduce_mode`` (includes), ``reduce_max``, ``reduce_pass_at_2``,
  ``reduce_at_least_2``: 3 epochs (answers differ by epoch), one reducer each.
- ``react_tool``: a react agent with the @tool ``add``: the model calls it, then ``submit``.
- ``limits`` (fail_on_error=False): one sample raises (id ``boom-ü``: ``error`` with traceback), one hits the
  message limit (8), one the token limit (2000), one passes.
- ``pair_t02_s7``, ``pair_t09_s7``, ``pair_t02_s8``: one task, two samples; the generate configs above.

Offline: every mock output carries its usage, so Inspect never loads a tokenizer (which downloads its data); the CLI
runs with HTTP(S) proxies pointing at a closed loopback port, so any attempt to reach the network fails instead of
being silently satisfied.

Command line: ``python -m tests._inspect_corpus DEST`` builds into DEST (which must not exist or be empty) and prints
one line per log.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

TASKS_DIR = Path(__file__).resolve().parent / "inspect_cli_corpus"
# the task files run together in one CLI invocation per format (Inspect runs their tasks at once, --max-tasks)
TASK_FILES = ("scoring.py", "epochs.py", "agent.py", "limits.py", "pair.py")
TASKS = ("match_includes", "graded_qa", "graded_fact", "graded_role", "dict_scores", "reduce_mean", "reduce_median",
         "reduce_mode", "reduce_max", "reduce_pass_at_2", "reduce_at_least_2", "react_tool", "limits")
# the generate config of every log, and of the pair's other logs: name -> flags (the first: the task files' run)
PAIR = {
    "pair_t02_s7": ("--temperature", "0.2", "--seed", "7"),
    "pair_t09_s7": ("--temperature", "0.9", "--seed", "7"),
    "pair_t02_s8": ("--temperature", "0.2", "--seed", "8"),
}
PAIR_BASE = "pair_t02_s7"  # the log of the task pair from the task files' run
CONFIG = PAIR[PAIR_BASE]
FORMATS = ("eval", "json")
MANIFEST = ".corpus.json"  # hidden: a folder import of the corpus skips it
EVAL_SET = "eval-set"
EVAL_SET_TASKS = ("pair.py", "agent.py")


def inspect_command() -> list[str]:
    """The ``inspect`` console script installed beside this Python (``python -m inspect_ai`` otherwise)."""
    script = Path(sys.executable).with_name("inspect")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "inspect_ai"]


def cli_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("INSPECT_")}
    closed = "http://127.0.0.1:9"  # the discard port: nothing listens, so a download fails at once
    env.update(INSPECT_DISPLAY="none", NO_COLOR="1", HTTP_PROXY=closed, HTTPS_PROXY=closed, http_proxy=closed,
               https_proxy=closed, NO_PROXY="", no_proxy="", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               PYTHONDONTWRITEBYTECODE="1")  # no __pycache__ in tests/inspect_cli_corpus/
    return env


def _eval(files: tuple[str, ...], log_dir: Path, fmt: str, extra: tuple[str, ...] = (),
          command: str = "eval") -> list[Path]:
    cmd = [*inspect_command(), command, *files, "--model", "mockllm/model", "--log-dir", str(log_dir),
           "--log-format", fmt, "--display", "none", "--max-tasks", "16", *extra]
    p = subprocess.run(cmd, cwd=TASKS_DIR, env=cli_env(), capture_output=True, text=True, timeout=300,
                       stdin=subprocess.DEVNULL)
    logs = sorted(log_dir.glob(f"*.{fmt}"))
    if p.returncode != 0 or not logs:
        raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stdout[-2000:]}\n{p.stderr[-4000:]}")
    return logs


def _task_of(log: Path) -> str:
    """The task of a log Inspect named ``{created}_{task-with-dashes}_{id}.{ext}``."""
    return log.stem.split("_")[1].replace("-", "_")


def build_corpus(dest: Path) -> dict[str, Path]:
    """Build the corpus into ``dest`` (absent or empty); returns log name -> path (``match_includes.eval``, ...)."""
    dest = Path(dest)
    if dest.exists() and any(dest.iterdir()):
        raise FileExistsError(f"{dest} is not empty")
    dest.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        jobs = [(TASK_FILES, work / f"raw-{fmt}", fmt, CONFIG, None) for fmt in FORMATS]
        jobs += [(("pair.py",), work / f"raw-{name}-{fmt}", fmt, flags, name)
                 for name, flags in PAIR.items() if flags != CONFIG for fmt in FORMATS]
        with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
            eval_set = pool.submit(_eval, EVAL_SET_TASKS, work / EVAL_SET, "eval", (), "eval-set")
            done = list(pool.map(lambda j: (j, _eval(*j[:4])), jobs))
            if len(eval_set.result()) != len(EVAL_SET_TASKS) or not (work / EVAL_SET / "logs.json").is_file():
                raise RuntimeError(f"inspect eval-set left {sorted(p.name for p in (work / EVAL_SET).iterdir())}")
        out: dict[str, Path] = {}
        for (_, _, fmt, _, pair_name), logs in done:
            for log in logs:
                task = _task_of(log)
                name = f"{pair_name or (PAIR_BASE if task == 'pair' else task)}.{fmt}"
                if name in out:
                    raise RuntimeError(f"two logs named {name}")
                out[name] = work / name
                log.rename(out[name])
        want = {f"{t}.{fmt}" for t in (*TASKS, *PAIR) for fmt in FORMATS}
        if set(out) != want:
            raise RuntimeError(f"the corpus has {sorted(out)}, expected {sorted(want)}")
        for raw in work.glob("raw-*"):
            shutil.rmtree(raw)
        (work / MANIFEST).write_text(json.dumps(sorted(out), indent=1) + "\n")
        if dest.exists():
            dest.rmdir()
        work.rename(dest)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return {name: dest / name for name in sorted(out)}


def eval_set_dir(corpus: dict[str, Path]) -> Path:
    """The ``inspect eval-set`` folder built beside the logs of ``corpus``."""
    return next(iter(corpus.values())).parent / EVAL_SET


def read_corpus(dest: Path) -> dict[str, Path] | None:
    """The corpus already built in ``dest`` (its manifest), or None."""
    manifest = Path(dest) / MANIFEST
    if not manifest.is_file():
        return None
    return {name: Path(dest) / name for name in json.loads(manifest.read_text())}


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m tests._inspect_corpus DEST", file=sys.stderr)
        return 2
    start = time.monotonic()
    logs = build_corpus(Path(argv[0]))
    for name, path in logs.items():
        print(f"{name}\t{path}")
    print(f"{len(logs)} logs in {time.monotonic() - start:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
