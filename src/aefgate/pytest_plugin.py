"""aefgate's pytest plugin (entry point ``pytest11``: ``aefgate``): the fixture ``aefgate_round_trip``.

Example, in a user's test suite::

    def test_my_runs_round_trip(aefgate_round_trip):
        report = aefgate_round_trip("runs/nightly", "inspect")
        assert "results:scores[].value" in report.kept

The fixture is :func:`aefgate.testing.assert_round_trip`: it fails the test with the harness's report naming every
field lost but not declared.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest

from aefgate.testing import assert_round_trip


@pytest.fixture
def aefgate_round_trip() -> Callable[..., Any]:
    """``aefgate_round_trip(path, format, *, from_source=False, **options)``: assert a faithful round trip."""
    return assert_round_trip
