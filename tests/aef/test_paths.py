"""[RUN-3] paths in a run folder: the cases of the spec text, the length bound, case clashes and their order."""

from __future__ import annotations

import os
import random

import pytest

from aefgate.aef.paths import MAX_PATH_BYTES, check_path, path_problems, segment_ok

BLOB = "blobs/sha256/63/635221c9c64f48e2843e4186b0a1b66f07a1492c14dcb866bb83dba6a5e5fef5"

VALID = [
    "run.json",
    "results.ndjson",
    "metrics.json",
    "summary.json",
    "overlays-not-really/x",  # only the caller leaves out overlays/; this is an ordinary name
    BLOB,
    "ext/a_b-c.d/x.y.z",
    "ext/A-Z_0-9",
    "COM10",  # only COM1-COM9 are reserved
    "ext/LPT10.txt",
    "ext/COM0",
    "ext/LPT0",
    "ext/CONSOLE",  # CON only as the whole name before the first "."
    "ext/NULL",
    "ext/AUXILIARY.md",
    "ext/CON_x",  # "_" is no separator
    "ext/CON-1.txt",
    "ext/a..b",  # dots inside a segment are allowed
    "ext/x.CON",  # everything from the first "." is ignored, not kept
    "a",
]

INVALID = [
    ".DS_Store",
    "ext/.DS_Store",
    ".",
    "..",
    "ext/../run.json",
    "ext/./x",
    "ext/x.",
    "ext/.x",
    "CON",
    "con",
    "con.txt",
    "ext/Con.tar.gz",
    "COM1",
    "COM1.x",
    "ext/com9",
    "LPT1",
    "lpt9.log",
    "PRN",
    "aux.json",
    "NUL",
    "ext/nul.x.y",
    "",
    "/run.json",
    "ext/",
    "ext//x",
    "ext/a b",
    "ext/a\tb",
    "ext\\x",
    "ext/x:y",
    "ext/café",
    "ext/x~",
    "ext/x+y",
    "ext/COM\u00b9",  # Windows reserves COM¹ too, but it is not ASCII anyway
    "ext/\u212a",  # KELVIN SIGN, not ASCII
]


@pytest.mark.parametrize("path", VALID)
def test_valid_path(path):
    assert check_path(path)
    assert path_problems([path]) == []


@pytest.mark.parametrize("path", INVALID)
def test_invalid_path(path):
    assert not check_path(path)
    assert path_problems([path]) == [(path, "path")]


@pytest.mark.parametrize(
    "seg,ok",
    [
        ("run.json", True),
        (".DS_Store", False),
        ("..", False),
        (".", False),
        ("", False),
        ("x.", False),
        ("CON", False),
        ("con.txt", False),
        ("COM1.x", False),
        ("COM10", True),
        ("a/b", False),
        ("Lpt5.", False),
        ("lpt5x", True),
    ],
)
def test_segment_ok(seg, ok):
    assert segment_ok(seg) is ok


def test_length_bound_is_255_bytes():
    assert MAX_PATH_BYTES == 255
    p255 = "ext/" + "a" * 251
    p256 = "ext/" + "a" * 252
    assert len(p255.encode()) == 255 and len(p256.encode()) == 256
    assert check_path(p255)
    assert not check_path(p256)
    assert path_problems([p255, p256]) == [(p256, "path")]
    # the bound is on the whole path, not on a segment
    deep = "/".join(["abcdefg"] * 32)  # 32*7 + 31 = 255 bytes
    assert len(deep) == 255 and check_path(deep)
    assert not check_path(deep + "h")


def test_folder_case_clash_reports_the_later_folder():
    # the spec's example: ext/data > ext/Data in bytes, so the files under ext/data/ are reported
    assert path_problems(["ext/Data/x", "ext/data/y"]) == [("ext/data/y", "path")]
    assert path_problems(["ext/data/y", "ext/Data/x"]) == [("ext/data/y", "path")]


def test_folder_case_clash_reports_every_file_under_the_later_folder():
    paths = ["ext/Data/x", "ext/data/z", "ext/data/y", "ext/data/sub/w", "ext/datum", "run.json"]
    assert path_problems(paths) == [("ext/data/sub/w", "path"), ("ext/data/y", "path"), ("ext/data/z", "path")]


def test_file_case_clash_reports_the_later_file():
    assert path_problems(["ext/a", "ext/A"]) == [("ext/a", "path")]
    assert path_problems(["ext/Readme.md", "ext/README.md"]) == [("ext/Readme.md", "path")]


def test_three_way_clash_reports_all_but_the_first():
    assert path_problems(["x/ab", "x/AB", "x/Ab"]) == [("x/Ab", "path"), ("x/ab", "path")]


def test_clash_deeper_in_the_tree():
    # the top folders clash: everything under the later one is reported
    assert path_problems(["A/x/1", "a/x/2", "a/y/3"]) == [("a/x/2", "path"), ("a/y/3", "path")]
    # only an inner folder clashes
    assert path_problems(["e/A/1", "e/a/2", "f/a/3"]) == [("e/a/2", "path")]


def test_file_and_folder_differing_only_in_case_clash():
    # a case-insensitive file system cannot hold a file "data" beside a folder "Data"
    assert path_problems(["ext/data", "ext/Data/x"]) == [("ext/data", "path")]
    assert path_problems(["ext/Data", "ext/data/x"]) == [("ext/data/x", "path")]


def test_case_folding_is_ascii_only():
    # KELVIN SIGN lower-cases to "k" in Unicode, but only ASCII letters are folded: "ext/k" is not reported
    assert path_problems(["ext/k", "ext/\u212a"]) == [("ext/\u212a", "path")]


def test_clash_with_an_invalid_path():
    assert path_problems(["A/x", "a/.hidden"]) == [("a/.hidden", "path")]
    assert path_problems(["a/x", "A/.hidden"]) == [("A/.hidden", "path"), ("a/x", "path")]


def test_identical_paths_do_not_clash():
    assert path_problems(["ext/a", "ext/a"]) == []
    assert path_problems(["ext/.a", "ext/.a"]) == [("ext/.a", "path")]


def test_reported_once_in_byte_order():
    paths = ["z/.x", "A/.y", "a/CON", "a/b", "B", "b", "\u00e9", "\uff01", "\U0001f600", "é/x"]
    got = path_problems(paths)
    assert [p for p, _ in got] == sorted({p for p, _ in got}, key=lambda p: p.encode("utf-8"))
    assert all(code == "path" for _, code in got)
    assert {p for p, _ in got} == {"z/.x", "A/.y", "a/CON", "a/b", "b", "\u00e9", "\uff01", "\U0001f600", "é/x"}


def test_not_utf8_file_name_from_the_file_system():
    name = os.fsdecode(b"ext/\xff")  # what os.listdir gives on a POSIX system for a name that is not UTF-8
    assert path_problems(["ext/a", name]) == [(name, "path")]


def test_accepts_any_iterable():
    assert path_problems(iter(["run.json", ".DS_Store"])) == [(".DS_Store", "path")]


def test_many_paths_scale():
    rnd = random.Random(7)
    paths = [f"blobs/sha256/{i % 256:02x}/{rnd.getrandbits(256):064x}" for i in range(50_000)]
    paths.append("blobs/SHA256/00/x")
    got = path_problems(paths)
    # blobs/sha256 > blobs/SHA256 in bytes: every file under blobs/sha256/ is reported, the other is not
    assert len(got) == 50_000
    assert ("blobs/SHA256/00/x", "path") not in got
