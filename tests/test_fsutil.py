"""fsutil.atomic_lines: the one way a file of lines is written (nothing half-written, never over a file)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from aefgate.errors import Refusal
from aefgate.fsutil import (
    atomic_dir,
    atomic_lines,
    atomic_write,
    check_destination,
    check_file_destination,
    check_outside,
    count_lines,
    input_file_problem,
)


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def test_lines_and_part_files_in_order(tmp_path: Path) -> None:
    part = tmp_path / "part-1"
    part.write_bytes(b"c\nd\n" * 300_000)  # bigger than one write
    out = tmp_path / "sub" / "out.jsonl"
    n = atomic_lines(out, [b"a\n", b"b\n", part, b"e\n"])
    assert n == 3
    assert out.read_bytes() == b"a\nb\n" + b"c\nd\n" * 300_000 + b"e\n"
    assert not part.exists()  # a part file is removed once copied in
    assert count_lines(out) == 600_003 and count_lines(tmp_path / "absent") == 0
    assert _leftovers(out.parent) == []


def test_an_existing_destination_is_refused_and_left_alone(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    out.write_bytes(b"keep\n")
    with pytest.raises(Refusal) as e:
        atomic_lines(out, [b"x\n"])
    assert e.value.rule == "OUT-1" and out.read_bytes() == b"keep\n"

    def appears():  # the destination appears while the file is written: still never overwritten
        yield b"x\n"
        (tmp_path / "late.jsonl").write_bytes(b"theirs\n")
        yield b"y\n"

    with pytest.raises(Refusal) as e:
        atomic_lines(tmp_path / "late.jsonl", appears())
    assert e.value.rule == "OUT-1" and (tmp_path / "late.jsonl").read_bytes() == b"theirs\n"
    assert _leftovers(tmp_path) == []


def test_a_refusal_half_way_leaves_nothing_and_closes_the_generator(tmp_path: Path) -> None:
    closed = []

    def lines():
        try:
            yield b"a\n"
            raise Refusal("X-1", "half way")
        finally:
            closed.append(True)

    with pytest.raises(Refusal):
        atomic_lines(tmp_path / "out.jsonl", lines())
    assert closed == [True] and list(tmp_path.iterdir()) == []


def test_replace_and_atomic_write_replace(tmp_path: Path) -> None:
    out = tmp_path / "f"
    out.write_bytes(b"old")
    atomic_lines(out, [b"new\n"], replace=True)
    assert out.read_bytes() == b"new\n"
    atomic_write(out, b"newer")
    assert out.read_bytes() == b"newer" and _leftovers(tmp_path) == []


def test_write_lines_gathers_writes_appends_parts_and_counts_bytes_items(tmp_path):
    """The one buffered line writer (atomic_lines, publish to stdout, the spool's compaction use it)."""
    import io

    from aefgate.fsutil import write_lines

    part = tmp_path / "part"
    part.write_bytes(b"p1\np2\n")
    writes: list[int] = []

    class Counting(io.BytesIO):
        def write(self, b):
            writes.append(len(b))
            return super().write(b)

    out = Counting()
    n = write_lines(out, [b"a\n", b"bb\n", part, b"c\n" * 3], chunk=4)
    assert out.getvalue() == b"a\nbb\np1\np2\nc\nc\nc\n"
    assert n == 3 and not part.exists()
    assert max(writes) <= 6  # gathered up to the chunk, never the whole stream at once


def test_a_parent_that_is_a_file_is_refused_not_a_crash(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"x")
    for dest in (tmp_path / "f" / "out.jsonl", tmp_path / "f" / "a" / "b"):
        with pytest.raises(Refusal) as e:
            check_destination(dest)
        assert e.value.rule == "OUT-1" and e.value.where == str(tmp_path / "f")
        with pytest.raises(Refusal) as e:
            atomic_lines(dest, [b"x\n"])
        assert e.value.rule == "OUT-1"
        with pytest.raises(Refusal) as e:
            with atomic_dir(dest):
                pass
        assert e.value.rule == "OUT-1"
    assert (tmp_path / "f").read_bytes() == b"x"


def test_folders_made_for_a_refused_output_are_removed(tmp_path: Path) -> None:
    def refused():
        yield b"x\n"
        raise Refusal("TEST-1", "half-way", "here")

    with pytest.raises(Refusal):
        atomic_lines(tmp_path / "new" / "a" / "out.jsonl", refused())
    with pytest.raises(Refusal):
        with atomic_dir(tmp_path / "new2" / "a" / "run"):
            raise Refusal("TEST-1", "half-way", "here")
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    (tmp_path / "keep").mkdir()  # an existing folder is not removed, even when empty
    with pytest.raises(Refusal):
        atomic_lines(tmp_path / "keep" / "a" / "out.jsonl", refused())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep"] and list((tmp_path / "keep").iterdir()) == []
    atomic_lines(tmp_path / "ok" / "a" / "out.jsonl", [b"x\n"])  # on success they stay
    assert (tmp_path / "ok" / "a" / "out.jsonl").read_bytes() == b"x\n"


def test_a_destination_inside_an_input_folder_is_refused(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (tmp_path / "link").symlink_to(run)
    for dest in (run, run / "x.jsonl", run / "sub" / "y", tmp_path / "link" / "z.jsonl"):
        with pytest.raises(Refusal) as e:
            check_outside(dest, [run])
        assert e.value.rule == "OUT-2" and e.value.where == str(dest)
    check_outside(tmp_path / "runx" / "a.jsonl", [run])  # a sibling whose name starts alike is outside
    check_outside(tmp_path / "a.jsonl", [run, tmp_path / "missing", tmp_path / "link" / "file"])  # files: ignored


def test_file_destinations_and_input_files(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "f").write_bytes(b"x")
    for dest, where in ((tmp_path / "empty", tmp_path / "empty"), (tmp_path / "f", tmp_path / "f"),
                        (tmp_path / "f" / "x.jsonl", tmp_path / "f")):
        with pytest.raises(Refusal) as e:
            check_file_destination(dest)  # a file output: an empty folder is no place for it either
        assert e.value.rule == "OUT-1" and e.value.where == str(where)
    with pytest.raises(Refusal) as e:
        check_file_destination(tmp_path / "empty" / "x.jsonl", [tmp_path / "empty"])
    assert e.value.rule == "OUT-2"
    check_file_destination(tmp_path / "new" / "x.jsonl", [tmp_path / "empty"])
    os.mkfifo(tmp_path / "pipe")
    assert input_file_problem(tmp_path / "f") is None
    assert input_file_problem(tmp_path / "missing") == "no such file"
    assert input_file_problem(tmp_path / "empty") == "a folder, not a file"
    assert input_file_problem(tmp_path / "pipe") == "not a regular file (a pipe, a device?)"
