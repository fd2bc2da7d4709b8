"""Overlay commands: ``aefgate view``, ``aefgate decide``, ``aefgate aef chain``, ``aefgate aef view`` (issue 3)."""

from __future__ import annotations


def register(app, aef_app) -> None:
    """Add the overlay commands to the ``aefgate`` app and to its ``aef`` sub-app."""
