"""aefgate's version and producer name, in a module of their own: a module that needs them imports this one, not
the package's ``__init__``."""

__version__ = "0.1.0"
PRODUCER_NAME = "aefgate"
