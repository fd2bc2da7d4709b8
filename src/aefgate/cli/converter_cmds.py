"""``aefgate import NAME`` and ``aefgate export NAME``, made from the converter registry.

Each converter registered under the entry-point group ``aefgate.converters`` gets its command: a converter to AEF
(``NAME -> aef``) ``aefgate import NAME SRC OUT``, a converter from AEF (``aef -> NAME``) ``aefgate export NAME RUN
OUT``. The command has one flag per :class:`~aefgate.converters.registry.Option` the converter declares: the flag
``--opt-name`` of the option ``opt_name``, its help and default the option's; a ``bool`` option is a flag
(``--x``, or ``--x/--no-x`` when it is true by default), a ``str``/``int``/``float`` option takes a value of
that type; and ``--json``. So a third-party converter gets its commands with no change to aefgate.

What a command needs beyond its converter's options is the converter's **command hook** (``Converter.cli``: a
function, or ``"module:attr"`` naming one, loaded only when the command is built): a typer-style function whose
signature declares the command's arguments (parameters whose default is a ``typer.Argument``) and its extra
options (the other parameters: ``--jobs``, ``--policy``, ``--json``, ...), and that receives ``options`` (the
converter's options as given: a dict by option name) and, when it asks for it, ``converter``. Its docstring is the
command's help. :func:`command_hook` adds what the declared options need on the command line: another flag name
(``flags``) or another Python type (``types``: ``Path`` for a file, ``List[Path]`` for a repeatable one). A
converter without a hook gets :func:`generic_import` or :func:`generic_export`: the route of that one converter
(:func:`~aefgate.converters.registry.run_route`), then, for an import, the run it wrote verified.

The groups are built lazily (:class:`ConverterGroup`): only ``aefgate import``/``export`` read the registry.
"""

from __future__ import annotations

import importlib
import inspect
import keyword
import re
import sys
import typing
from pathlib import Path
from typing import Any, Callable, List, Mapping, Optional

import typer
from typer.core import TyperGroup
from typer.models import ArgumentInfo

from aefgate.cli import render

__all__ = ["JSON_OPT", "POLICY_HELP", "ConverterGroup", "command_hook", "converter_command", "generic_export",
           "generic_import", "option_help"]

JSON_OPT = typer.Option(False, "--json", help="Write one JSON value on stdout (people's output stays on stderr).")
POLICY_HELP = ("A trust policy file ([SIG-4]): blobs its authorized redactions withhold are left out ([OVL-10], "
               "R7I-9) instead of refusing the run.")

#: the parameters of a hook the command fills, not the command line
INJECTED = ("options", "converter")


def command_hook(*, flags: Mapping[str, str] | None = None,
                 types: Mapping[str, Any] | None = None) -> Callable[[Callable], Callable]:
    """Mark a function as a converter's command hook: ``flags`` maps an option to its flag where it is not
    ``--opt-name`` (``{"assert_suite": "--suite"}``), ``types`` to the Python type the command line reads it as
    (``{"key": Optional[Path], "traces": List[Path]}``); the option's help and default stay the converter's."""
    def mark(func: Callable) -> Callable:
        func.__aefgate_cli__ = {"flags": dict(flags or {}), "types": dict(types or {})}  # type: ignore[attr-defined]
        return func

    return mark


def _load(ref: Any) -> Callable | None:
    if ref is None or callable(ref):
        return ref
    module, _, attr = str(ref).partition(":")
    obj: Any = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def option_help(text: str) -> str:
    """An option's help as a sentence of the command's help: its first word capitalized (unless it names a field,
    ``execution.targetMode``), a full stop at its end."""
    text = text.strip()
    if not text:
        return text
    first = text.split(None, 1)[0]
    if first.isalpha() and first.islower():
        text = text[0].upper() + text[1:]
    return text if text[-1] in ".!?" else text + "."


def _hints(func: Callable) -> dict[str, Any]:
    try:
        return typing.get_type_hints(func)
    except Exception:  # an annotation that does not resolve: typer reads the parameter as a string
        return {}


def converter_command(conv: Any, direction: str) -> Callable:
    """The typer function of ``conv``'s command (``direction``: ``import`` or ``export``): the hook's arguments,
    one option per declared option, the hook's other options."""
    hook = _load(getattr(conv, "cli", None)) or (generic_import if direction == "import" else generic_export)
    meta = getattr(hook, "__aefgate_cli__", {})
    flags, types = meta.get("flags", {}), meta.get("types", {})
    sig = inspect.signature(hook)
    hints = _hints(hook)
    own = [p.replace(annotation=hints.get(p.name, p.annotation), kind=inspect.Parameter.KEYWORD_ONLY)
           for p in sig.parameters.values() if p.name not in INJECTED]
    args = [p for p in own if isinstance(p.default, ArgumentInfo)]
    rest = [p for p in own if not isinstance(p.default, ArgumentInfo)]
    taken_names = {p.name for p in own}
    taken_flags = {d.split("/")[0] for p in rest for d in (getattr(p.default, "param_decls", None) or ())}
    names: dict[str, str] = {}  # parameter -> option
    params = []
    flag_of = {o.name: flags.get(o.name, "--" + o.name.replace("_", "-")) for o in conv.options}
    # another option a help names (``with map_scorers``), as this command spells it (a name with an underscore only:
    # ``run`` or ``at`` are words too)
    named = re.compile(r"\b(" + "|".join(re.escape(n) for n in flag_of if "_" in n) + r")\b") \
        if any("_" in n for n in flag_of) else None
    for o in conv.options:
        py = o.name if o.name.isidentifier() and not keyword.iskeyword(o.name) else f"{o.name}_opt"
        py = py if py not in taken_names else f"{py}_opt"
        flag = flag_of[o.name]
        if flag in taken_flags:  # the hook has a flag of that name: the option is reached through convert --opt
            continue
        help_ = option_help(named.sub(lambda m: flag_of[m.group(1)], o.help) if named else o.help)
        if o.type is bool:
            ann: Any = types.get(o.name, bool if o.default is not None else Optional[bool])
            decl = flag if o.default is False else f"{flag}/--no-{flag[2:]}"
            info = typer.Option(o.default if o.default is not None else None, decl, help=help_)
        else:
            ann = types.get(o.name, Optional[o.type])
            default = o.default
            if typing.get_origin(ann) in (list, List) and default is None:
                default = []
            info = typer.Option(default, flag, help=help_)
        names[py] = o.name
        taken_names.add(py)
        params.append(inspect.Parameter(py, inspect.Parameter.KEYWORD_ONLY, default=info, annotation=ann))

    wants = {n for n in INJECTED if n in sig.parameters}

    def command(**kw: Any) -> Any:
        options = {names[k]: kw.pop(k) for k in list(kw) if k in names}
        extra = {"options": options, "converter": conv}
        return hook(**kw, **{k: v for k, v in extra.items() if k in wants})

    signature = inspect.Signature(args + params + rest)
    command.__signature__ = signature  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in signature.parameters.values()}
    generic = hook in (generic_import, generic_export)
    command.__doc__ = _generic_doc(conv, direction) if generic else (hook.__doc__ or conv.description)
    command.__name__ = f"{direction}_{conv.name}".replace("-", "_")
    command.__module__ = getattr(hook, "__module__", __name__)
    return command


def _generic_doc(conv: Any, direction: str) -> str:
    fmt = conv.source if direction == "import" else conv.target
    what = conv.description or f"{conv.source} to {conv.target}"
    if direction == "import":
        return (f"Import SRC ({fmt}) as an AEF run, with the converter {conv.name}: {what}. The run is verified "
                f"(exit 1 when it does not verify).\n\nExample: aefgate import {fmt} SRC OUT")
    return (f"Export the run RUN as {fmt}, with the converter {conv.name}: {what}.\n\nExample: aefgate export {fmt} "
            "RUN OUT")


# -- the commands of a converter without a hook ----------------------------------------------------------------------


def generic_import(
    src: Path = typer.Argument(..., metavar="SRC", help="The input, in the converter's format (a file or a folder)."),
    out: Path = typer.Argument(..., metavar="OUT", help="The run folder to write (absent or empty)."),
    as_json: bool = JSON_OPT,
    *,
    options: dict,
    converter: Any,
) -> None:
    """Import SRC as an AEF run with the converter, then verify it."""
    from aefgate.converters.registry import run_route
    from aefgate.errors import EXIT_INTEGRITY
    from aefgate.aef.verifier import verify_run

    dst = run_route([converter], src, out, options)
    v = verify_run(dst)
    if as_json:
        render.emit_json({"input": str(src), "output": str(dst), "converter": converter.name,
                          "outcome": v.outcome, "runHash": v.run_hash, "fidelity": converter.fidelity})
    else:
        c = render.console()
        c.print(f"imported  {render.escape(str(src))} -> {render.escape(str(dst))} ({render.escape(converter.name)})")
        render.show_verification(v, str(dst))
    if v.outcome == "invalid":
        raise typer.Exit(EXIT_INTEGRITY)


def generic_export(
    run: Path = typer.Argument(..., metavar="RUN", help="The run folder."),
    out: Path = typer.Argument(..., metavar="OUT", help="The output to write (it must not exist)."),
    as_json: bool = JSON_OPT,
    *,
    options: dict,
    converter: Any,
) -> None:
    """Export the run RUN with the converter."""
    from aefgate.cli.inputs import require_dir
    from aefgate.converters.registry import run_route

    require_dir(run)
    dst = run_route([converter], run, out, options)
    if as_json:
        render.emit_json({"run": str(run), "output": str(dst), "converter": converter.name,
                          "fidelity": converter.fidelity})
    else:
        render.console().print(f"exported  {render.escape(str(run))} -> {render.escape(str(dst))} "
                               f"({render.escape(converter.name)})")


# -- the groups ------------------------------------------------------------------------------------------------------


_registries: dict[tuple[str, ...], Any] = {}


def _registry() -> Any:
    """The installed converters, discovered once per ``sys.path`` (entry points follow it)."""
    from aefgate.converters.registry import registry

    key = tuple(sys.path)
    if key not in _registries:
        _registries.clear()
        _registries[key] = registry()
    return _registries[key]


class ConverterGroup(TyperGroup):
    """``aefgate import`` or ``aefgate export``: a command per converter to (or from) AEF, built when asked for."""

    direction = ""

    def _converters(self) -> dict[str, Any]:
        from aefgate.converters.registry import HUB

        out: dict[str, Any] = {}
        for c in _registry().converters:
            if self.direction == "import" and c.target == HUB and c.source != HUB:
                out.setdefault(c.source, c)
            elif self.direction == "export" and c.source == HUB and c.target != HUB:
                out.setdefault(c.target, c)
        return out

    def list_commands(self, ctx: Any) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(self._converters()))

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        from aefgate.converters.registry import HUB

        cmd = super().get_command(ctx, cmd_name)
        if cmd is not None or cmd_name not in self._converters():
            return cmd
        reg = _registry()
        conv = reg.between(cmd_name, HUB) if self.direction == "import" else reg.between(HUB, cmd_name)  # CONV-4
        one = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
        one.command(cmd_name)(converter_command(conv, self.direction))
        cmd = typer.main.get_command(one)
        cmd.name = cmd_name
        self.commands[cmd_name] = cmd
        return cmd


class ImportGroup(ConverterGroup):
    direction = "import"


class ExportGroup(ConverterGroup):
    direction = "export"
