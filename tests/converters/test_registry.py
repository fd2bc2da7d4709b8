"""The converter registry, against a real third-party distribution found through its entry points."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from aefgate.converters import registry as reg_mod
from aefgate.converters.registry import Converter, Option, Registry, find_route, formats, registry, run_route
from aefgate.errors import Refusal
from tests.conftest import write_thirdparty


@pytest.fixture
def quiet_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private temporary folder for the route's intermediate steps, to check it is left empty."""
    t = tmp_path / "systmp"
    t.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(t))
    return t


def _x_input(tmp_path: Path) -> Path:
    src = tmp_path / "in.x"
    src.write_text("hello")
    return src


def test_discovers_third_party_converters(thirdparty: Path) -> None:
    reg = registry()
    names = {c.name for c in reg.converters}
    assert {"x-to-aef", "aef-to-x", "aef-to-y", "z-to-aef"} <= names
    conv = next(c for c in reg.converters if c.name == "x-to-aef")
    assert conv.origin == "thirdparty = thirdparty_conv:CONVERTERS"
    assert conv.fidelity == ["x's colours"]
    assert next(c for c in reg.converters if c.name == "aef-to-x").fidelity == ["exact"]
    # options given as an Option, a tuple and a dict all come out as Options of the declared type
    y = next(c for c in reg.converters if c.name == "aef-to-y")
    assert [(o.name, o.type, o.default) for o in y.options] == [
        ("upper", bool, False), ("explode", bool, False), ("repeat", int, 1)]
    assert reg.broken == []
    assert reg.names()[0] == "aef" and {"x", "y", "z"} <= set(reg.names())


def test_nothing_installed_without_the_distribution() -> None:
    # aefgate registers no converter of its own yet: only a third party's would show
    assert "x" not in registry().names()


def test_broken_entry_point_is_reported_not_fatal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = write_thirdparty(tmp_path / "site", broken=True)
    monkeypatch.delitem(__import__("sys").modules, "thirdparty_conv", raising=False)
    monkeypatch.syspath_prepend(str(root))
    reg = registry()
    assert "x-to-aef" in {c.name for c in reg.converters}
    assert [label for label, _ in reg.broken] == ["missing = thirdparty_conv:NOT_THERE"]


def test_routes_through_the_hub_and_passes_options(thirdparty: Path, tmp_path: Path, quiet_tmp: Path) -> None:
    route = find_route("x", "y")
    assert [c.name for c in route] == ["x-to-aef", "aef-to-y"]
    assert [c.name for c in find_route("X", "aef")] == ["x-to-aef"]  # direct; names are case-insensitive
    dst = tmp_path / "out" / "result.y"
    assert run_route(route, _x_input(tmp_path), dst, {"label": "L", "upper": "true", "repeat": "2"}) == dst
    # label went to the first step, upper and repeat (coerced from text) to the second
    assert dst.read_text() == "HELLO|X->AEF:L|AEF->Y" * 2
    assert sorted(p.name for p in dst.parent.iterdir()) == ["result.y"]  # no temporary sibling left
    assert list(quiet_tmp.iterdir()) == []  # the intermediate AEF run is gone


def test_declared_defaults_are_passed(thirdparty: Path, tmp_path: Path) -> None:
    dst = tmp_path / "back.x"
    run_route(find_route("x", "aef") + find_route("aef", "x"), _x_input(tmp_path), dst, {})
    assert dst.read_text() == "hello|x->aef:x|aef->x"


def test_refuses_unknown_format(thirdparty: Path) -> None:
    with pytest.raises(Refusal) as e:
        find_route("x", "nope")
    assert e.value.rule == "CONV-1" and e.value.exit_code == 2 and "nope" in e.value.message
    with pytest.raises(Refusal) as e:
        find_route("y", "x")  # y can be written, not read
    assert e.value.rule == "CONV-2" and e.value.exit_code == 2
    with pytest.raises(Refusal) as e:
        find_route("x", "x")
    assert e.value.rule == "CONV-2"


def test_refuses_unknown_option_and_bad_value(thirdparty: Path, tmp_path: Path) -> None:
    route = find_route("x", "y")
    with pytest.raises(Refusal) as e:
        run_route(route, _x_input(tmp_path), tmp_path / "o.y", {"colour": "red"})
    assert e.value.rule == "CONV-3" and e.value.exit_code == 2 and "colour" in e.value.message
    with pytest.raises(Refusal) as e:
        run_route(route, _x_input(tmp_path), tmp_path / "o.y", {"repeat": "twice"})
    assert e.value.rule == "CONV-3"
    # an option of aef-to-y is unknown to a route without it
    with pytest.raises(Refusal) as e:
        run_route(find_route("x", "aef"), _x_input(tmp_path), tmp_path / "o", {"upper": "1"})
    assert e.value.rule == "CONV-3"
    assert not (tmp_path / "o.y").exists() and not (tmp_path / "o").exists()


def test_refuses_missing_input_and_existing_output(thirdparty: Path, tmp_path: Path) -> None:
    route = find_route("x", "y")
    with pytest.raises(Refusal) as e:
        run_route(route, tmp_path / "absent.x", tmp_path / "o.y")
    assert e.value.rule == "CONV-5"
    taken = tmp_path / "taken.y"
    taken.write_text("keep me")
    with pytest.raises(Refusal) as e:
        run_route(route, _x_input(tmp_path), taken)
    assert e.value.rule == "OUT-1" and taken.read_text() == "keep me"


def test_failure_mid_way_leaves_no_output(thirdparty: Path, tmp_path: Path, quiet_tmp: Path) -> None:
    out_dir = tmp_path / "outs"
    out_dir.mkdir()
    with pytest.raises(RuntimeError, match="exploded"):
        run_route(find_route("x", "y"), _x_input(tmp_path), out_dir / "o.y", {"explode": True})
    assert list(out_dir.iterdir()) == []  # neither the output nor a temporary sibling
    assert list(quiet_tmp.iterdir()) == []  # nor the intermediate run


def test_empty_folder_destination_is_replaced(thirdparty: Path, tmp_path: Path) -> None:
    dst = tmp_path / "run"
    dst.mkdir()
    run_route(find_route("x", "aef"), _x_input(tmp_path), dst)
    assert (dst / "payload.txt").read_text() == "hello|x->aef:x"


def test_formats_lists_directions_and_losses(thirdparty: Path) -> None:
    listing = {f["format"]: f for f in formats()}
    assert listing["aef"]["hub"] is True
    x = listing["x"]
    assert x["import"]["converter"] == "x-to-aef" and x["import"]["fidelity"] == ["x's colours"]
    assert x["export"]["converter"] == "aef-to-x" and x["export"]["fidelity"] == ["exact"]
    y = listing["y"]
    assert y["import"] is None
    assert y["export"]["fidelity"] == ["line breaks", "everything but the payload"]
    assert [o["name"] for o in y["export"]["options"]] == ["upper", "explode", "repeat"]


def test_direct_converter_wins_and_ambiguity_is_refused(tmp_path: Path) -> None:
    def copy(src, dst, **_):
        Path(dst).write_bytes(Path(src).read_bytes())

    a = Converter("a-to-b", "a", "b", copy)
    hub = [Converter("a-to-aef", "a", "aef", copy), Converter("aef-to-b", "aef", "b", copy)]
    assert [c.name for c in Registry([a, *hub]).find_route("a", "b")] == ["a-to-b"]
    assert [c.name for c in Registry(hub).find_route("a", "b")] == ["a-to-aef", "aef-to-b"]
    listing = {f["format"]: f for f in Registry([a, *hub]).formats()}
    assert [d["name"] for d in listing["a"]["direct"]] == ["a-to-b"]
    with pytest.raises(Refusal) as e:
        Registry([a, Converter("other", "a", "b", copy)]).find_route("a", "b")
    assert e.value.rule == "CONV-4"


def test_converter_declarations_are_checked() -> None:
    with pytest.raises(TypeError):
        Option("n", type=list)
    with pytest.raises(ValueError):
        Converter("c", "a", "b", print, options=[Option("n"), Option("n")])
    with pytest.raises(TypeError):
        Converter("c", "a", "b", "not callable")  # type: ignore[arg-type]
    assert Option("flag", type=bool).coerce("Yes") is True
    assert Option("n", type=float).coerce("2.5") == 2.5


def test_group_name() -> None:
    assert reg_mod.GROUP == "aefgate.converters" and reg_mod.HUB == "aef"
    assert os.path.basename(reg_mod.__file__) == "registry.py"
