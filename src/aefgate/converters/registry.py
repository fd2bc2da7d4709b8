"""The converter registry: discovery through entry points, and routing through the AEF hub.

A :class:`Converter` converts one format into another in one direction (a module that converts both ways
registers two). It declares its ``source`` and ``target`` format names, the options it takes, and what it loses
(its fidelity: ``losses``, empty when the conversion is exact), and its ``run(src_path, dst_path, **options)``
callable writes ``dst_path`` (a file or a folder, as the target format is), which does not exist yet.

Converters are found through the entry-point group ``aefgate.converters``: each entry point loads to a
``Converter`` or a list of them. aefgate's own converters register the same way in its ``pyproject.toml``, so a
third-party distribution adds a format with no change here.

Routing: :func:`find_route` gives the direct converter when there is one, else the two steps through the hub
(``source -> aef -> target``). :func:`run_route` runs a route: the intermediate AEF run lives in a temporary
folder removed afterwards, and only the final destination appears, only on success.

Refusals (exit 2), aefgate's own rule ids:

- ``CONV-1``: a format no converter reads or writes;
- ``CONV-2``: known formats with no route between them (or a format to itself);
- ``CONV-3``: an option no step of the route declares, or a value that is not of the option's type;
- ``CONV-4``: two converters registered for one source and target (ambiguous);
- ``CONV-5``: an input that does not exist;
- ``OUT-1`` (:mod:`aefgate.fsutil`): a destination that exists and is not an empty folder.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from aefgate.errors import Refusal
from aefgate.fsutil import check_destination, parents_for

__all__ = [
    "GROUP",
    "HUB",
    "GIVEN",
    "LINE_SCOPES",
    "Loss",
    "Option",
    "Converter",
    "Registry",
    "registry",
    "find_route",
    "route",
    "run_route",
    "formats",
]

GROUP = "aefgate.converters"
HUB = "aef"

_TYPES: dict[str, type] = {"str": str, "int": int, "float": float, "bool": bool}
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


@dataclass(frozen=True)
class Option:
    """An option a converter takes: its ``name`` (passed as a keyword), a ``help`` line, its ``type``
    (``str``, ``int``, ``float`` or ``bool``) and its ``default`` (passed when the caller gives none)."""

    name: str
    help: str = ""
    type: type = str
    default: Any = None

    def __post_init__(self) -> None:
        t = _TYPES.get(self.type, self.type) if isinstance(self.type, str) else self.type
        if t not in (str, int, float, bool):
            raise TypeError(f"option {self.name!r}: type must be str, int, float or bool, not {self.type!r}")
        object.__setattr__(self, "type", t)

    def coerce(self, value: Any, where: str = "") -> Any:
        """``value`` as this option's type: a string from the command line is parsed (CONV-3 when it does not)."""
        t = self.type
        if value is None:
            return None
        if t is bool:
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
                return value.strip().lower() in _TRUE
        elif t is int:
            if isinstance(value, int) and not isinstance(value, bool):
                return value
            if isinstance(value, str):
                try:
                    return int(value.strip(), 10)
                except ValueError:
                    pass
        elif t is float:
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return float(value)
            if isinstance(value, str):
                try:
                    return float(value.strip())
                except ValueError:
                    pass
        elif isinstance(value, str):
            return value
        raise Refusal("CONV-3", f"option {self.name!r} takes a {t.__name__}, not {value!r}", where)

    def to_json(self) -> dict:
        return {"name": self.name, "help": self.help, "type": self.type.__name__, "default": self.default}


def _as_option(o: Option | Mapping[str, Any] | Sequence[Any]) -> Option:
    if isinstance(o, Option):
        return o
    if isinstance(o, Mapping):
        return Option(**o)
    return Option(*o)


#: the lines a :class:`Loss` may be limited to (``lines=``), as the round-trip harness decides them on the original
#: run: ``root`` (a line without a parent), ``not_case_root`` (every line but the first root line of its case and
#: trial: children, rollups and a case's later roots), ``typed_absence`` (a line whose state is one of [RES-1]'s
#: typed absences), ``not_typed_absence`` (any other line) and ``lacking`` (a line of the original without the member
#: the field names, which the way back adds: ``results:endedAt`` on a line that had no ``endedAt``)
LINE_SCOPES = ("root", "not_case_root", "typed_absence", "not_typed_absence", "lacking")


class _Given(str):
    """The value of :data:`GIVEN` (a string, so that a loss's ``when`` is JSON as it is)."""

    __slots__ = ()


#: in a :class:`Loss`'s ``when``: the option is given (any value but None, an empty string or False), whatever its
#: value (``when={"task": (GIVEN,)}``: a loss of conversions given a task)
GIVEN = _Given("(given)")


@dataclass(frozen=True)
class Loss:
    """One thing a conversion direction does not carry: the sentence people read (``text``, as the mapping page
    states it) and the fields it covers, which a program checks (``fields``: patterns of the round-trip harness's
    field names, see :mod:`aefgate.converters.fidelity`; empty: the loss is stated but no field names it).

    A pattern covers exactly the field of that name: ``results:annotator`` covers ``results:annotator`` and not
    ``results:annotator.promptHash``. Wildcards say what they cover: ``*`` matches any run of characters but ``.``
    (one path segment: ``samples:scores.*.explanation``); a trailing ``.**`` covers the field itself and every field
    below it (``header:eval.task_args.**``: ``header:eval.task_args`` and ``header:eval.task_args.n``, not
    ``header:eval.task_args_passed``); ``**`` anywhere else matches any run of characters (``run.json:**``). No other
    prefix matching; ``[ ] ( )`` are literal (``results:usage[].costSource``). A declaration never hides a field it
    does not name. ``segment``, when given (a callable on a member name, whose ``str`` says what it accepts), limits
    the loss to the fields its patterns match one of whose segments it accepts (a member named like a credential,
    wherever it is, and what it holds). ``when`` limits the loss to the conversions given these options
    (``{"max_capture": ("none", "metadata")}``; :data:`GIVEN` among the values: the option given, whatever its
    value), or to any of several such sets (a list of them); ``lines`` to some result lines (one of
    :data:`LINE_SCOPES`). ``source`` says whose list it is on: ``page`` (the AEF interop page) or ``aefgate``
    (aefgate's own mapping page, where the spec says nothing)."""

    text: str
    fields: tuple[str, ...] = ()
    when: tuple[tuple[tuple[str, tuple[Any, ...]], ...], ...] = ()
    lines: str | None = None
    source: str = "page"
    segment: Callable[[str], bool] | None = None

    def __post_init__(self) -> None:
        if not self.text:
            raise ValueError("a loss has a text")
        object.__setattr__(self, "fields", tuple(self.fields))
        alternatives = [self.when] if isinstance(self.when, Mapping) else list(self.when)
        object.__setattr__(self, "when", tuple(tuple((str(k), tuple(v)) for k, v in dict(alt).items())
                                               for alt in alternatives))
        if self.lines is not None and self.lines not in LINE_SCOPES:
            raise ValueError(f"loss {self.text[:40]!r}: lines must be one of {LINE_SCOPES}, not {self.lines!r}")
        if self.segment is not None and not callable(self.segment):
            raise TypeError(f"loss {self.text[:40]!r}: segment is a callable on a member name")

    def applies(self, options: Mapping[str, Any]) -> bool:
        """Whether the loss holds for a conversion given ``options``: always without ``when``, else when one of its
        alternatives holds (each of its options among its values, or given when :data:`GIVEN` is one). The
        round-trip harness adds the original run's ``run.contentCapture`` to the options."""
        return not self.when or any(all(_option_in(options.get(k), values) for k, values in alt)
                                    for alt in self.when)

    def covers(self, fieldname: str) -> bool:
        if self.segment is not None and not any(self.segment(x) for x in fieldname.split(":", 1)[-1].split(".")):
            return False
        return any(field_matches(p, fieldname) for p in self.fields)

    def to_json(self) -> dict:
        out: dict[str, Any] = {"text": self.text, "fields": list(self.fields), "source": self.source}
        if self.segment is not None:
            out["segment"] = str(self.segment)
        if self.when:
            out["when"] = [{k: [str(x) if x is GIVEN else x for x in v] for k, v in alt} for alt in self.when]
        if self.lines:
            out["lines"] = self.lines
        return out


def _option_in(value: Any, values: tuple[Any, ...]) -> bool:
    if value in values:
        return True
    return any(v is GIVEN for v in values) and value not in (None, "", False)


@functools.lru_cache(maxsize=4096)
def _pattern(pattern: str) -> "re.Pattern[str]":
    """A loss's field pattern as a regular expression (see :class:`Loss`)."""
    body, tail = (pattern[:-3], r"(?:\..*)?") if pattern.endswith(".**") else (pattern, "")
    out = []
    for part in re.split(r"(\*\*|\*)", body):
        out.append(".*" if part == "**" else "[^.]*" if part == "*" else re.escape(part))
    return re.compile("".join(out) + tail, re.DOTALL)


def field_matches(pattern: str, fieldname: str) -> bool:
    """Whether a loss's field ``pattern`` covers ``fieldname`` (see :class:`Loss`): exactly that field, ``*`` one
    path segment (any characters but ``.``), a trailing ``.**`` the field and every field below it, ``**``
    elsewhere any characters; ``[ ] ( )`` are literal."""
    if "*" not in pattern:
        return fieldname == pattern
    return _pattern(pattern).fullmatch(fieldname) is not None


def _as_loss(x: Loss | str) -> Loss:
    return x if isinstance(x, Loss) else Loss(str(x))


@dataclass(frozen=True)
class Converter:
    """One direction of a conversion: ``source`` format to ``target`` format.

    ``run(src_path, dst_path, **options)`` writes ``dst_path``; ``options`` declares what it takes (an
    :class:`Option`, a dict or a ``(name, help, type, default)`` tuple each); ``losses`` lists what the
    conversion loses (:class:`Loss` entries, or plain sentences; empty: exact); ``description`` is one line for
    people.

    What the round-trip harness (:mod:`aefgate.converters.fidelity`) needs, on an import (``X -> aef``):
    ``back_options(run_dir) -> dict``, the options that import an export of the run at ``run_dir`` back as that
    run (its run id, times, modes: so result ids match, [RES-4]); ``match_lines(run_dir)``, where the format
    cannot keep result ids, a ``key(line, original)`` that pairs a line of the original with the line that came
    back (default: the ``resultId``); for the source cycle ``X -> aef -> X``,
    ``records(path)``, the source file as comparable records (``(kind, key, JSON value)``). On either direction:
    ``round_trip_options``, the options the step takes in a round trip unless the caller gives others (an
    import's in the source cycle, an export's in both).
    ``suffix`` is the file suffix an output it writes takes where the caller names none (a route's intermediate
    file, a round trip's export): ``.json`` for an Inspect log (a ``.eval`` reorders its samples).
    ``one_way``: for a format converted in this direction only, why there is no converter the other way (an
    import-only format says why it has no export); :meth:`Registry.formats` shows it as ``noExport``/``noImport``.

    The command line makes ``aefgate import NAME`` (a converter ``NAME -> aef``) and ``aefgate export NAME`` (``aef ->
    NAME``) from these declarations: one flag per option (``--opt-name``, its help, type and default), and
    ``--json``. ``cli``, when given, is the command's hook (a function, or ``"module:attr"`` naming one, loaded only
    when the command is built): what the command does beyond the options (its arguments, flags of its own, its
    output); see :mod:`aefgate.cli.converter_cmds`. Without one the command runs this converter and, for an import,
    verifies the run it wrote.
    """

    name: str
    source: str
    target: str
    run: Callable[..., Any]
    options: tuple[Option, ...] = ()
    losses: tuple[Loss, ...] = ()
    description: str = ""
    origin: str = field(default="", compare=False)  # the entry point it came from, set by discovery
    back_options: Callable[[Path], dict] | None = field(default=None, compare=False)
    records: Callable[[Path], Iterable[tuple[str, str, Any]]] | None = field(default=None, compare=False)
    match_lines: Callable[[Path], Callable[[dict, bool], Any]] | None = field(default=None, compare=False)
    round_trip_options: Mapping[str, Any] = field(default_factory=dict, compare=False)
    suffix: str = ""
    one_way: str = ""
    cli: Any = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if not self.name or not self.source or not self.target:
            raise ValueError("a converter has a name, a source and a target")
        if not callable(self.run):
            raise TypeError(f"converter {self.name!r}: run is not callable")
        object.__setattr__(self, "source", self.source.strip().lower())
        object.__setattr__(self, "target", self.target.strip().lower())
        object.__setattr__(self, "options", tuple(_as_option(o) for o in self.options))
        object.__setattr__(self, "losses", tuple(_as_loss(x) for x in self.losses))
        names = [o.name for o in self.options]
        if len(set(names)) != len(names):
            raise ValueError(f"converter {self.name!r} declares an option twice")

    @property
    def fidelity(self) -> list[str]:
        """What the conversion loses (each loss's text), or ``["exact"]``."""
        return [x.text for x in self.losses] or ["exact"]

    def option(self, name: str) -> Option | None:
        for o in self.options:
            if o.name == name:
                return o
        return None

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "source": self.source,
            "target": self.target,
            "description": self.description,
            "fidelity": self.fidelity,
            "losses": [x.to_json() for x in self.losses],
            "options": [o.to_json() for o in self.options],
            **({"oneWay": self.one_way} if self.one_way else {}),
        }


def _norm(fmt: str) -> str:
    return fmt.strip().lower()


class Registry:
    """The converters known to this process, and the formats they connect.

    ``broken`` lists the entry points that could not be loaded, as ``(entry point, reason)``: a broken plug-in
    does not stop the others, and the CLI shows it.
    """

    def __init__(self, converters: Iterable[Converter] = (), broken: Iterable[tuple[str, str]] = ()):
        self.converters: list[Converter] = list(converters)
        self.broken: list[tuple[str, str]] = list(broken)

    # -- discovery ------------------------------------------------------------------------------------------------

    @classmethod
    def discover(cls, group: str = GROUP) -> "Registry":
        found: list[Converter] = []
        broken: list[tuple[str, str]] = []
        eps = sorted(entry_points(group=group), key=lambda ep: (ep.name, ep.value))
        seen: set[tuple[str, str]] = set()
        for ep in eps:
            if (ep.name, ep.value) in seen:  # one distribution seen twice on sys.path
                continue
            seen.add((ep.name, ep.value))
            label = f"{ep.name} = {ep.value}"
            try:
                loaded = ep.load()
            except Exception as e:  # a broken plug-in is reported, not fatal
                broken.append((label, f"{type(e).__name__}: {e}"))
                continue
            items = loaded if isinstance(loaded, (list, tuple)) else [loaded]
            for item in items:
                if not isinstance(item, Converter):
                    broken.append((label, f"loads to a {type(item).__name__}, not a Converter"))
                    continue
                found.append(dataclasses.replace(item, origin=label))
        return cls(found, broken)

    # -- queries --------------------------------------------------------------------------------------------------

    def names(self) -> list[str]:
        """Every format some converter reads or writes, the hub first, then in name order."""
        names = {c.source for c in self.converters} | {c.target for c in self.converters}
        names.discard(HUB)
        return [HUB] + sorted(names)

    def between(self, source: str, target: str) -> Converter | None:
        """The converter from ``source`` to ``target``, or None; CONV-4 when two claim the pair."""
        matches = [c for c in self.converters if c.source == source and c.target == target]
        if len(matches) > 1:
            who = ", ".join(f"{c.name} ({c.origin or 'registered'})" for c in matches)
            raise Refusal("CONV-4", f"two converters from {source} to {target}: {who}; uninstall one", "")
        return matches[0] if matches else None

    def find_route(self, source: str, target: str) -> list[Converter]:
        """The converters that take ``source`` to ``target``: direct, else through the AEF hub."""
        source, target = _norm(source), _norm(target)
        known = set(self.names())
        for fmt, side in ((source, "option 'source'"), (target, "option 'target'")):
            if fmt not in known:
                raise Refusal("CONV-1", f"unknown format {fmt!r}; known formats: {', '.join(sorted(known))}", side)
        if source == target:
            raise Refusal("CONV-2", f"{source} to {source} is no conversion", "option 'target'")
        direct = self.between(source, target)
        if direct is not None:
            return [direct]
        if HUB not in (source, target):
            first, second = self.between(source, HUB), self.between(HUB, target)
            if first is not None and second is not None:
                return [first, second]
        raise Refusal("CONV-2", f"no converter takes {source} to {target}, directly or through {HUB}",
                      "option 'target'")

    def formats(self) -> list[dict]:
        """Each format with its directions: ``import`` (to AEF) and ``export`` (from AEF), with what each loses,
        and ``direct``: converters between it and a format other than AEF. A format converted one way only whose
        converter says why (``one_way``) also has ``noExport`` (or ``noImport``): that reason."""
        out: list[dict] = []
        for name in self.names():
            if name == HUB:
                out.append({"format": HUB, "hub": True, "import": None, "export": None, "direct": []})
                continue
            imp = [c for c in self.converters if c.source == name and c.target == HUB]
            exp = [c for c in self.converters if c.source == HUB and c.target == name]
            direct = [
                c for c in self.converters if HUB not in (c.source, c.target) and name in (c.source, c.target)
            ]
            entry = {
                "format": name,
                "hub": False,
                "import": _direction(imp),
                "export": _direction(exp),
                "direct": [c.to_json() for c in direct],
            }
            if imp and not exp and imp[0].one_way:
                entry["noExport"] = imp[0].one_way
            if exp and not imp and exp[0].one_way:
                entry["noImport"] = exp[0].one_way
            out.append(entry)
        return out


def _direction(convs: list[Converter]) -> dict | None:
    if not convs:
        return None
    c = convs[0]
    return {"converter": c.name, "fidelity": c.fidelity, "losses": [x.to_json() for x in c.losses],
            "description": c.description, "options": [o.to_json() for o in c.options]}


def registry() -> Registry:
    """The converters installed now (discovered afresh: entry points follow ``sys.path``)."""
    return Registry.discover()


def find_route(source: str, target: str, reg: Registry | None = None) -> list[Converter]:
    """See :meth:`Registry.find_route`."""
    return (reg or registry()).find_route(source, target)


route = find_route


def formats(reg: Registry | None = None) -> list[dict]:
    """See :meth:`Registry.formats`."""
    return (reg or registry()).formats()


def _step_options(route_: Sequence[Converter], options: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The keyword options of each step: the declared defaults, overridden by ``options`` (coerced to the
    declared type). An option no step declares is CONV-3."""
    declared = {o.name for c in route_ for o in c.options}
    unknown = sorted(k for k in options if k not in declared)
    if unknown:
        known = ", ".join(sorted(declared)) or "none"
        steps = " -> ".join(c.name for c in route_)
        raise Refusal(
            "CONV-3",
            f"no step of {steps} takes the option{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}"
            f" (options of this route: {known})",
            "options",
        )
    per_step = []
    for c in route_:
        kw: dict[str, Any] = {}
        for o in c.options:
            kw[o.name] = o.coerce(options[o.name], f"option '{o.name}'") if o.name in options else o.default
        per_step.append(kw)
    return per_step


def run_route(route_: Sequence[Converter], src: str | Path, dst: str | Path,
              options: Mapping[str, Any] | None = None) -> Path:
    """Run the converters of ``route_`` from ``src`` into ``dst``, atomically; returns ``dst``.

    Each step gets the options it declares. The intermediate outputs are written in a temporary folder removed
    afterwards; the last step writes into a temporary sibling of ``dst``, renamed into place only when every
    step succeeded. On any error nothing is left at ``dst`` and no temporary folder remains.
    """
    if not route_:
        raise ValueError("an empty route")
    src, dst = Path(src), Path(os.path.abspath(dst))
    if not src.exists():
        raise Refusal("CONV-5", "the input does not exist", str(src))
    check_destination(dst, inputs=(src,))
    kwargs = _step_options(route_, options or {})

    with parents_for(dst):
        stage = Path(tempfile.mkdtemp(prefix=f".{dst.name}.convert-", dir=dst.parent))
        work = Path(tempfile.mkdtemp(prefix="aefgate-route-")) if len(route_) > 1 else None
        try:
            current = src
            for i, (conv, kw) in enumerate(zip(route_, kwargs)):
                last = i == len(route_) - 1
                out = (stage / dst.name if last
                       else work / f"step{i}-{conv.target}{conv.suffix}")  # type: ignore[operator]
                conv.run(current, out, **kw)
                if not out.exists():
                    raise RuntimeError(f"converter {conv.name!r} wrote nothing at {out}")
                current = out
            check_destination(dst)
            if dst.exists():  # an empty folder, replaced
                dst.rmdir()
            (stage / dst.name).rename(dst)
        finally:
            shutil.rmtree(stage, ignore_errors=True)
            if work is not None:
                shutil.rmtree(work, ignore_errors=True)
    return dst
