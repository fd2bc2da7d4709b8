"""The round-trip harness: one for every format the registry converts both ways.

Two cycles, each through the registry's converters (so a plug-in format gets them too):

- :func:`fidelity` (``aefgate fidelity FORMAT RUN``): AEF -> FORMAT -> AEF. The run is exported with the
  ``aef -> FORMAT`` converter and imported back with the ``FORMAT -> aef`` converter (with the import options its
  ``back_options`` gives for the original run: same run id, times, modes, so result ids match, [RES-4]); the two
  runs are compared file by file and field by field as JSON values.
- :func:`fidelity_from_source` (``aefgate fidelity FORMAT --from-source FILE``): FORMAT -> AEF -> FORMAT, where the
  import converter gives ``records`` (the format's file as comparable records).

In both cycles the export takes its ``round_trip_options`` (for Inspect: rebuild outputs from their evidence)
unless the caller gives those options; in the source cycle the import takes its own (for Inspect: ``lossless``), in
the AEF cycle the options its ``back_options`` give for the run.

The run that comes back must verify (``intact``, or ``unsealed`` for a running run), or the trip fails.
Every field of the original is reported as **kept**, **lost as declared** (a :class:`~.registry.Loss` of either
direction that applies to the options used covers it), or **lost but not declared** (a defect: the report is not
``ok``); a declared loss whose fields were all kept is reported as **declared but kept** (not a failure). Both
cycles compare every member of both sides: a field (or record) only on the way back is listed as ``added`` and is a
difference of that field too, declared only when a loss covers it; in the AEF cycle, what an import adds by the
specification (:data:`ADDED_BY_IMPORT`: ``imported``, the ingest seal) is not. A loss covers exactly the fields its
patterns name (:func:`aefgate.converters.registry.field_matches`). A refusal of the way back is a failure too; a
refusal of either step names the run or source file given and the step, never the trip's temporary files.

Field names, AEF cycle:

- ``run.json:<dotted path>`` for each leaf of ``run.json`` (lists compared whole);
- ``file:<name>`` for each other file or folder at the run's top (``file:blobs``: every blob of the original is
  back; JSON files compared as values, NDJSON/JSONL line by line as values, others as bytes);
- ``results:(line)`` (the line came back: paired by ``resultId``, or by the import converter's ``match_lines``
  where the format cannot keep ids), ``results:<member>`` and ``results:<member>.<sub>`` for each member of a
  paired line, ``resultId`` included (one level of objects opened), ``results:scores[].<member>`` (scores
  matched by metric, or paired when each line has one), ``results:usage`` (the line's entries),
  ``results:usage(totals)`` (token and cost sums per case, trial and role) and ``results:usage[].costSource``,
  ``results:order`` (the order of the lines).

Source cycle: ``<record kind>:<dotted path>`` (for Inspect, ``header:...`` and ``samples:...``), and
``<kind>:(record)`` for a record that did not come back.

Values compare as JSON values: numbers by value (``1`` and ``1.0`` are one value); members named ``...At`` that
hold RFC 3339 times compare as instants (and Inspect's ``..._at`` and ``created``).
"""

from __future__ import annotations

import contextlib
import datetime
import os
import re
import shutil
import tempfile
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from aefgate.converters.registry import HUB, Converter, Loss, Registry, _step_options, field_matches, registry
from aefgate.errors import Refusal
from aefgate.aef import jsonio
from aefgate.aef.times import parse_time
from aefgate.aef.verifier import verify_run
from aefgate.aef.vocab import TYPED_ABSENCES

__all__ = ["FieldCount", "FidelityReport", "compare_runs", "fidelity", "fidelity_from_source", "seal_time"]


@dataclass
class FieldCount:
    """One field of the original: on how many of its places it was kept, lost as declared, lost undeclared, and
    the texts of the losses that declared it."""

    kept: int = 0
    declared: int = 0
    undeclared: int = 0
    losses: set[str] = field(default_factory=set)

    @property
    def lost(self) -> int:
        return self.declared + self.undeclared


@dataclass
class FidelityReport:
    """The outcome of one round trip, field by field (see the module docstring)."""

    cycle: str
    input: str
    losses: list[Loss] = field(default_factory=list)
    fields: dict[str, FieldCount] = field(default_factory=dict)
    added: list[str] = field(default_factory=list)
    refusal: Refusal | None = None

    back_outcome: str | None = None  # the AEF cycle: the verification of the run that came back

    def note(self, fieldname: str, kept: bool, line: Mapping[str, Any] | None = None, *,
             case_root: bool = True) -> None:
        """Record one place of ``fieldname``: kept, or lost (then matched against the declared losses; ``line`` and
        ``case_root`` decide a loss limited to some lines)."""
        c = self.fields.setdefault(fieldname, FieldCount())
        if kept:
            c.kept += 1
            return
        for loss in self.losses:
            if loss.covers(fieldname) and _in_scope(loss, line, case_root, fieldname):
                c.declared += 1
                c.losses.add(loss.text)
                return
        c.undeclared += 1

    @property
    def kept(self) -> list[str]:
        """The fields kept on every place."""
        return [f for f, c in self.fields.items() if not c.lost]

    @property
    def lost(self) -> list[tuple[str, str | None]]:
        """Each field lost somewhere, with the first loss that declares it (None: not declared)."""
        return [(f, sorted(c.losses)[0] if c.losses and not c.undeclared else None)
                for f, c in self.fields.items() if c.lost]

    @property
    def undeclared(self) -> list[str]:
        """The fields lost on some place no declared loss covers: defects."""
        return [f for f, c in self.fields.items() if c.undeclared]

    unlisted = undeclared

    @property
    def declared_but_kept(self) -> list[Loss]:
        """The declared losses that name fields, some of which the trip saw, all of them kept."""
        out = []
        for loss in self.losses:
            seen = [c for f, c in self.fields.items() if loss.covers(f)]
            if loss.fields and seen and not any(c.lost for c in seen):
                out.append(loss)
        return out

    @property
    def ok(self) -> bool:
        return self.refusal is None and not self.undeclared and self.back_outcome in (None, "intact", "unsealed")

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "cycle": self.cycle,
            "input": self.input,
            "ok": self.ok,
            "kept": [{"field": f, "places": self.fields[f].kept} for f in self.kept],
            "lost": [{"field": f, "places": c.lost, "of": c.lost + c.kept, "declared": not c.undeclared,
                      **({"undeclaredPlaces": c.undeclared} if c.undeclared else {}),
                      "losses": sorted(c.losses)} for f, c in self.fields.items() if c.lost],
            "undeclared": self.undeclared,
            "declaredButKept": [x.text for x in self.declared_but_kept],
            "added": self.added,
            "losses": [x.to_json() for x in self.losses],
        }
        if self.back_outcome is not None:
            out["backOutcome"] = self.back_outcome
        if self.refusal is not None:
            out["refusal"] = self.refusal.to_json()["error"]
        return out

    def summary(self) -> str:
        """One paragraph for a failed test or a person: what was lost and not declared."""
        if self.ok:
            return f"{self.cycle}: only declared losses ({len(self.kept)} fields kept)"
        parts = [f"{self.cycle} on {self.input}:"]
        if self.refusal is not None:
            r = self.refusal
            parts.append(f"the way back was refused: [{r.rule}] at {r.where}: {r.message}")
        if self.back_outcome not in (None, "intact", "unsealed"):
            parts.append(f"the run that came back does not verify ({self.back_outcome})")
        for f in self.undeclared:
            c = self.fields[f]
            parts.append(f"lost but not declared: {f} ({c.undeclared} of {c.lost + c.kept} places)")
        return "\n  ".join(parts)


def _outcome(run_dir: Path) -> str:
    return verify_run(run_dir).outcome


def _in_scope(loss: Loss, line: Mapping[str, Any] | None, case_root: bool, fieldname: str = "") -> bool:
    if loss.lines is None or line is None:
        return True
    if loss.lines == "lacking":  # the original line has no such member: the way back added it
        member = re.split(r"[.\[(]", fieldname.split(":", 1)[-1], maxsplit=1)[0]
        return member not in line
    if loss.lines == "root":
        return line.get("parentResultId") is None
    if loss.lines == "typed_absence":
        return line.get("state") in TYPED_ABSENCES
    if loss.lines == "not_typed_absence":
        return line.get("state") not in TYPED_ABSENCES
    return not case_root  # not_case_root


#: what the way back of the AEF cycle adds by the specification, not a difference: an import is an imported run,
#: which says so ([RUN-15]: imported.from, imported.asserted), and is sealed ``ingest`` (a seal where the original,
#: a running or unsealed run, had none). Anything else the way back adds is a difference of that field.
ADDED_BY_IMPORT = ("run.json:imported.**", "file:seal.json")


def _added(report: FidelityReport, fieldname: str, line: Mapping[str, Any] | None = None, case_root: bool = True,
           *, exempt: bool = True) -> None:
    """A field present only on the way back: listed in ``added`` and, unless the import adds it by the
    specification (:data:`ADDED_BY_IMPORT`, the AEF cycle only), a difference (a lost place of that field)."""
    if fieldname not in report.added:
        report.added.append(fieldname)
    if exempt and any(field_matches(p, fieldname) for p in ADDED_BY_IMPORT):
        return
    report.note(fieldname, False, line, case_root=case_root)


# -- values ---------------------------------------------------------------------------------------------------------


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def same(a: Any, b: Any, name: str = "") -> bool:
    """Equal as JSON values: numbers by value, objects member by member, a time (a member named ``...At``,
    ``..._at`` or ``created``) as an instant."""
    if _num(a) and _num(b):
        return a == b or (a != a and b != b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k], k) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, str) and isinstance(b, str) and a != b and (name.endswith(("At", "_at")) or name == "created"):
        return _instant(a) is not None and _instant(a) == _instant(b)
    return type(a) is type(b) and a == b


def _instant(text: str) -> Any:
    """An RFC 3339 time as a comparable instant (AEF's UTC form exactly, another offset to the microsecond), or
    None."""
    try:
        return parse_time(text)
    except ValueError:
        pass
    try:
        t = datetime.datetime.fromisoformat(text)
    except ValueError:
        return None
    if t.tzinfo is None:
        return None
    return parse_time(t.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ"))


def _flat(doc: Any, prefix: str, depth: int | None = None) -> dict[str, Any]:
    """The leaves of a JSON object as dotted paths (lists kept whole; ``depth`` objects opened at most)."""
    out: dict[str, Any] = {}
    if isinstance(doc, dict) and doc and (depth is None or depth > 0):
        for k, v in doc.items():
            out.update(_flat(v, f"{prefix}.{k}" if prefix else k, None if depth is None else depth - 1))
    else:
        out[prefix] = doc
    return out


def seal_time(run_dir: str | os.PathLike[str]) -> str | None:
    """The run's seal time (``sealedAt``), else its ``endedAt``: the time an import of an export of it takes."""
    root = Path(run_dir)
    try:
        return jsonio.read_json(root / "seal.json", max_size=jsonio.MAX_SEAL)["predicate"]["sealedAt"]
    except (OSError, KeyError, TypeError, jsonio.JsonProblem):
        try:
            return jsonio.read_json(root / "run.json").get("endedAt")
        except (OSError, jsonio.JsonProblem):
            return None


# -- the AEF cycle --------------------------------------------------------------------------------------------------


def _both_ways(fmt: str, reg: Registry) -> tuple[Converter, Converter]:
    fmt = fmt.strip().lower()
    if fmt == HUB:
        raise Refusal("CONV-2", "aef to aef is no round trip", "FORMAT")
    if fmt not in reg.names():
        raise Refusal("CONV-1", f"unknown format {fmt!r}; known formats: {', '.join(reg.names())}", "FORMAT")
    exp, imp = reg.between(HUB, fmt), reg.between(fmt, HUB)
    if exp is None or imp is None:
        missing = "export (aef -> " + fmt + ")" if exp is None else "import (" + fmt + " -> aef)"
        raise Refusal("CONV-2", f"{fmt} has no {missing}: a round trip needs both directions", "FORMAT")
    return exp, imp


def fidelity(fmt: str, run_dir: str | os.PathLike[str], *, options: Mapping[str, Any] | None = None,
             withheld_ok: Iterable[str] = (), reg: Registry | None = None) -> FidelityReport:
    """AEF -> ``fmt`` -> AEF on the run at ``run_dir`` (in a temporary folder, removed afterwards), compared field by
    field. ``options`` go to the step that declares them (the import's default to its ``back_options``);
    ``withheld_ok`` are blob paths an authorized redaction withholds (passed to the export when given). A refusal
    of the export raises (the run cannot be exported); one of the way back is reported."""
    reg = reg or registry()
    exp, imp = _both_ways(fmt, reg)
    root = Path(run_dir)
    if not (root / "run.json").is_file():
        raise Refusal("CLI-1", "not a run folder (no run.json)", str(root))
    given = dict(options or {})
    exp_kw, imp_kw = _step_options([exp, imp], given)
    exp_kw.update({k: v for k, v in exp.round_trip_options.items() if k not in given})
    if imp.back_options is not None:
        for k, v in imp.back_options(root).items():
            if k not in given and imp.option(k) is not None:
                imp_kw[k] = v
    if withheld_ok:
        exp_kw["withheld_ok"] = frozenset(withheld_ok)
    run = jsonio.read_json(root / "run.json")
    applied = {**imp_kw, **exp_kw, "run.contentCapture": run.get("contentCapture", "on")}
    report = FidelityReport(f"aef -> {exp.target} -> aef", str(root),
                            [x for x in exp.losses + imp.losses if x.applies(applied)])
    work = Path(tempfile.mkdtemp(prefix="aefgate-fidelity-"))
    try:
        exported = work / f"exported{exp.suffix}"
        with _relocated(work, root, f"step 1 of {report.cycle} ({exp.name}, exporting the run)",
                        {"exported": f"its {fmt} export"}):
            exp.run(root, exported, **exp_kw)
        try:
            with _relocated(work, root, f"step 2 of {report.cycle} ({imp.name}, importing the run's {fmt} export "
                                        "back)", {"exported": f"its {fmt} export", "back": "the run coming back"}):
                imp.run(exported, work / "back", **imp_kw)
        except Refusal as r:
            report.refusal = r
            return report
        report.back_outcome = _outcome(work / "back")
        compare_runs(root, work / "back", report, imp.match_lines(root) if imp.match_lines else None)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return report


@contextlib.contextmanager
def _relocated(work: Path, given: Path, step: str, names: Mapping[str, str]) -> Iterator[None]:
    """A refusal of a step of a round trip that names a place in the trip's temporary folder (removed when the trip
    ends) names instead the input the user gave (``given``: the run or the source file) and says which step refused
    and in which of its files: ``names`` maps the temporary folder's entries to what they are for people."""
    try:
        yield
    except Refusal as r:
        message, where = r.message, r.where or ""
        for p in sorted({str(work.resolve()), str(work)}, key=len, reverse=True):
            message = _rename_temporary(message, p, names)
            if where.startswith(p):
                message = f"{message} (in {_rename_temporary(where, p, names)})"
                where = str(given)
        raise Refusal(r.rule, f"{step}: {message}", where, exit_code=r.exit_code) from None


def _rename_temporary(text: str, prefix: str, names: Mapping[str, str]) -> str:
    """``text`` with each path under ``prefix`` written as what it is (``names``: its first component's meaning)."""
    def one(m: "re.Match[str]") -> str:
        rest = m.group(1).lstrip("/")
        head, _, tail = rest.partition("/")
        stem = head.split(".", 1)[0]
        label = names.get(stem, "a temporary file of the round trip")
        return label + (f", {tail}" if tail else "")

    return re.sub(re.escape(prefix) + r"((?:/[^\s:,'\"()]*)*)", one, text)


def compare_runs(orig: Path, back: Path, report: FidelityReport, key: Any = None) -> FidelityReport:
    """Compare the run at ``back`` with the original at ``orig`` into ``report`` (see the module docstring); lines
    are paired by ``key(line, original)`` (default: their ``resultId``)."""
    _compare_run_json(orig, back, report)
    _compare_files(orig, back, report)
    _compare_results(orig, back, report, key or (lambda line, original: line["resultId"]))
    return report


def _compare_run_json(orig: Path, back: Path, report: FidelityReport) -> None:
    fa = _flat(jsonio.read_json(orig / "run.json"), "")
    fb = _flat(jsonio.read_json(back / "run.json"), "")
    for k, v in fa.items():
        report.note(f"run.json:{k}", k in fb and same(v, fb[k], k.rsplit(".", 1)[-1]))
    for k in fb:
        if k not in fa:
            _added(report, f"run.json:{k}")


def _json_value(path: Path) -> Any:
    if path.suffix == ".json":
        return jsonio.read_json(path, max_size=jsonio.MAX_SEAL if path.name == "seal.json" else jsonio.MAX_DOC)
    if path.suffix in (".ndjson", ".jsonl"):
        return [v for _, v in jsonio.iter_ndjson(path)]
    return path.read_bytes()


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _compare_files(orig: Path, back: Path, report: FidelityReport) -> None:
    for p in sorted(orig.iterdir()):
        name = p.name
        if name in ("run.json", "results.ndjson"):
            continue
        q = back / name
        if name == "blobs" and p.is_dir():
            kept = q.is_dir() and set(_tree(p)) <= set(_tree(q))
        elif p.is_dir():
            kept = q.is_dir() and _tree(p) == _tree(q)
        else:
            kept = q.is_file() and same(_json_value(p), _json_value(q))
        report.note(f"file:{name}", kept)
    for q in sorted(back.iterdir()):
        if not (orig / q.name).exists() and q.name != "results.ndjson":
            _added(report, f"file:{q.name}")


def _usage_totals(lines: Iterable[Mapping[str, Any]]) -> tuple[Counter, dict]:
    totals: Counter = Counter()
    sources: dict = defaultdict(set)
    for line in lines:
        if "trials" in line:
            continue
        for u in line.get("usage") or ():
            key = (line["caseId"], line.get("trial", 0), u.get("role"))
            for m, v in u.items():
                if _num(v):
                    totals[key + (m,)] += v
            if "costSource" in u:
                sources[key].add(u["costSource"])
    return totals, sources


def _compare_results(orig: Path, back: Path, report: FidelityReport, pair: Any) -> None:
    a_order = [line for _, line in jsonio.iter_ndjson(orig / "results.ndjson")]
    b_order = [line for _, line in jsonio.iter_ndjson(back / "results.ndjson")]
    b_lines = {pair(line, False): line for line in b_order}
    first_roots: set[str] = set()
    seen: set[tuple] = set()
    for line in a_order:
        key = (line["caseId"], line.get("trial", 0), "trials" in line)
        if line.get("parentResultId") is None and key not in seen:
            seen.add(key)
            first_roots.add(line["resultId"])
    for a in a_order:
        rid = a["resultId"]
        b = b_lines.get(pair(a, True))
        case_root = rid in first_roots
        report.note("results:(line)", b is not None, a, case_root=case_root)
        if b is None:
            continue
        for k, v in a.items():
            if k == "usage":
                continue
            if k == "scores":
                _compare_scores(v, b.get("scores") or [], report, a, case_root)
                continue
            bv = b.get(k)
            if isinstance(v, dict) and (v or isinstance(bv, dict) and bv):  # one level of objects opened
                bv = bv if isinstance(bv, dict) else {}
                for sk, sv in v.items():
                    report.note(f"results:{k}.{sk}", sk in bv and same(sv, bv[sk], sk), a, case_root=case_root)
                for sk in bv:
                    if sk not in v:
                        _added(report, f"results:{k}.{sk}", a, case_root)
                continue
            report.note(f"results:{k}", k in b and same(v, bv, k), a, case_root=case_root)
        if "usage" in a:
            report.note("results:usage", same(a["usage"], b.get("usage")), a, case_root=case_root)
        for k, bv in b.items():  # members only on the way back
            if k in a:
                continue
            if k == "scores":
                _compare_scores([], bv or [], report, a, case_root)
            elif isinstance(bv, dict) and bv and k != "usage":
                for sk in bv:
                    _added(report, f"results:{k}.{sk}", a, case_root)
            else:
                _added(report, f"results:{k}", a, case_root)
    ta, sa = _usage_totals(a_order)
    tb, sb = _usage_totals(b_order)
    for key in sorted({k[:3] for k in ta}, key=repr):
        report.note("results:usage(totals)", all(same(v, tb.get(k)) for k, v in ta.items() if k[:3] == key))
    for key, values in sa.items():
        report.note("results:usage[].costSource", sb.get(key) == values)
    matched = [pair(line, True) for line in a_order if pair(line, True) in b_lines]
    in_back = set(matched)
    if matched:  # (no line came back: there is no order to speak of)
        report.note("results:order", matched == [pair(line, False) for line in b_order if pair(line, False) in in_back])


def _compare_scores(a: list[dict], b: list[dict], report: FidelityReport, line: Mapping[str, Any],
                    case_root: bool) -> None:
    if len(a) != len(b):
        report.note("results:scores", False, line, case_root=case_root)
    if len(a) == 1 and len(b) == 1:
        pairs = [(a[0], b[0])]
    else:
        by_metric = {s.get("metric"): s for s in b}
        pairs = [(s, by_metric.get(s.get("metric"))) for s in a]
    for sa, sb in pairs:
        if sb is None:
            report.note("results:scores[].metric", False, line, case_root=case_root)
            continue
        for m, v in sa.items():
            report.note(f"results:scores[].{m}", m in sb and same(v, sb[m], m), line, case_root=case_root)
        for m in sb:
            if m not in sa:
                _added(report, f"results:scores[].{m}", line, case_root)


# -- the source cycle -----------------------------------------------------------------------------------------------


def fidelity_from_source(fmt: str, source: str | os.PathLike[str], *, options: Mapping[str, Any] | None = None,
                         reg: Registry | None = None) -> FidelityReport:
    """``fmt`` -> AEF -> ``fmt`` on the file ``source``, its records compared field by field (see the module
    docstring). The import's refusal raises (the source cannot be imported); the export's is reported."""
    reg = reg or registry()
    exp, imp = _both_ways(fmt, reg)
    if imp.records is None:
        raise Refusal("CONV-2", f"{imp.source}'s mapping gives no source cycle ({imp.name} does not read its "
                                "format back as records)", "option 'from_source'")
    src = Path(source)
    if not src.exists():
        raise Refusal("CLI-1", "no such file", str(src))
    given = dict(options or {})
    imp_kw, exp_kw = _step_options([imp, exp], given)
    # each step takes the options its converter gives for a round trip, unless the caller gives them (Inspect: the
    # import keeps the log whole, lossless; the export rebuilds outputs from their evidence)
    imp_kw.update({k: v for k, v in imp.round_trip_options.items() if k not in given})
    exp_kw.update({k: v for k, v in exp.round_trip_options.items() if k not in given})
    report = FidelityReport(f"{imp.source} -> aef -> {imp.source}", str(src),
                            [x for x in imp.losses + exp.losses if x.applies({**imp_kw, **exp_kw})])
    work = Path(tempfile.mkdtemp(prefix="aefgate-fidelity-"))
    try:
        with _relocated(work, src, f"step 1 of {report.cycle} ({imp.name}, importing the input)",
                        {"run": "the run imported from it"}):
            imp.run(src, work / "run", **imp_kw)
        back = work / ("back" + src.suffix)
        try:
            with _relocated(work, src, f"step 2 of {report.cycle} ({exp.name}, exporting the run imported from the "
                                       "input)", {"run": "the run imported from it", "back": f"its {fmt} export"}):
                exp.run(work / "run", back, **exp_kw)
        except Refusal as r:
            report.refusal = r
            return report
        _compare_records(list(imp.records(src)), list(imp.records(back)), report)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return report


def _compare_records(a: list[tuple[str, str, Any]], b: list[tuple[str, str, Any]], report: FidelityReport) -> None:
    """Every member of both sides: a field (or a record) only on the way back is a difference too, lost unless a
    loss covers it (it is also listed in ``added``)."""
    back = {(kind, key): value for kind, key, value in b}
    for kind, key, value in a:
        other = back.pop((kind, key), None)
        report.note(f"{kind}:(record)", other is not None)
        if other is None:
            continue
        fa, fb = _flat(value, ""), _flat(other, "")
        for k, v in fa.items():
            report.note(f"{kind}:{k}", k in fb and same(v, fb[k], k.rsplit(".", 1)[-1]))
        for k in fb:
            if k not in fa:
                _added(report, f"{kind}:{k}", exempt=False)
    for kind, _key in back:
        _added(report, f"{kind}:(record)", exempt=False)
