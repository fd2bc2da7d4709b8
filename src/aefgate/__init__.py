"""aefgate: an interop gateway for AI-evaluation evidence, with AEF 1.0 as its hub."""

from aefgate._version import PRODUCER_NAME, __version__
