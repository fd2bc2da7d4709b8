"""aefgate: an interop gateway for AI-evaluation evidence, with AEF 1.0 as its hub."""

__version__ = "0.1.0"
PRODUCER_NAME = "aefgate"
