"""The pytest plugin (entry point pytest11): a user's test project asserts round trips with the fixture
``aefgate_round_trip``, run through pytest's own pytester (a real pytest session, in a subprocess)."""

from __future__ import annotations

import os

import pytest

from tests._shared import EXAMPLES, SAMPLES
from tests.conftest import write_broken

pytest_plugins = ["pytester"]

USER_TESTS = '''
FAITHFUL_RUN = {run!r}
SOURCE_LOG = {log!r}


def test_faithful_run(aefgate_round_trip):
    report = aefgate_round_trip(FAITHFUL_RUN, "aep", max_capture="full")
    assert "results:state" in report.kept


def test_faithful_source(aefgate_round_trip):
    aefgate_round_trip(SOURCE_LOG, "inspect", from_source=True)


def test_unfaithful_source(aefgate_round_trip):
    aefgate_round_trip(SOURCE_LOG, "brokenlog", from_source=True)
'''


def test_plugin_passes_faithful_round_trips_and_fails_naming_the_field(pytester: pytest.Pytester, tmp_path,
                                                                        monkeypatch):
    site = write_broken(tmp_path / "site")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))
    pytester.makepyfile(test_user=USER_TESTS.format(run=str(EXAMPLES / "aef-inspect" / "run"),
                                                    log=str(SAMPLES / "inspect" / "basic.json")))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:xdist", "-q")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*lost but not declared: samples:total_time*"])
