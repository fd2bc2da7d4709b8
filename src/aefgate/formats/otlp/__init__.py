"""OTLP/JSON and OTLP protobuf bodies and files: decoding, encoding, ids, values and times
(the package's face: :mod:`.codec` holds them)."""

from aefgate.formats.otlp.codec import *  # noqa: F403 - the package's face is the module's __all__
from aefgate.formats.otlp.codec import __all__  # noqa: F401
