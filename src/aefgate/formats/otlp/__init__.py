"""OTLP/JSON and OTLP protobuf bodies and files: decoding, encoding, ids, values and times
(the package's face: :mod:`.codec` holds them)."""

from aefgate.formats.otlp.codec import (
    MAX_BODY,
    SIGNALS,
    attributes,
    decode_body,
    encode_body,
    from_json,
    is_null_id,
    iter_file,
    nanos_to_time,
    time_to_nanos,
    to_json,
    value_of,
)

__all__ = [
    "MAX_BODY",
    "SIGNALS",
    "attributes",
    "decode_body",
    "encode_body",
    "from_json",
    "is_null_id",
    "iter_file",
    "nanos_to_time",
    "time_to_nanos",
    "to_json",
    "value_of",
]
