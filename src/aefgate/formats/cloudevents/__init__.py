"""The AEP-0005 CloudEvents bridge (B1..B5) and its inverse, with the CloudEvents wire bindings.

- :func:`ce_forward` / :func:`ce_inverse`: AEP Event <-> CloudEvents 1.0 structured-JSON dict (plain dicts);
- :func:`is_valid_cloudevent`: CloudEvents 1.0 validity (AEP-0005 §5.2);
- :func:`to_structured` / :func:`from_structured`, :func:`to_binary_http` / :func:`to_structured_http` /
  :func:`to_batch_http` / :func:`from_http`, :func:`to_kafka` / :func:`from_kafka`, :func:`to_amqp` /
  :func:`from_amqp`: the JSON event format and the protocol bindings, on the ``cloudevents`` SDK 2.x;
- :func:`read_jsonl` / :func:`iter_jsonl` / :func:`write_jsonl`: event files; :func:`is_cloudevents_line` /
  :func:`line_events`: the AEP events of one CloudEvents line (JSON format, or an HTTP message).

See docs/design/cloudevents-bridge.md for the choices AEP-0005 leaves and the ``CE-n`` rule ids.
"""

from aefgate.formats.cloudevents.bindings import (
    BATCH_CONTENT_TYPE,
    STRUCTURED_CONTENT_TYPE,
    from_amqp,
    from_http,
    from_kafka,
    from_structured,
    to_amqp,
    to_batch_http,
    to_binary_http,
    to_kafka,
    to_structured,
    to_structured_http,
)
from aefgate.formats.cloudevents.ndjson import is_cloudevents_line, iter_jsonl, line_events, read_jsonl, write_jsonl
from aefgate.formats.cloudevents.mapping import (
    AEP_TO_CE,
    CE_TO_AEP,
    DATACONTENTTYPE,
    SPECVERSION,
    TYPE_ROOT,
    Diagnostic,
    ce_forward,
    ce_inverse,
)
from aefgate.formats.cloudevents.conformance import is_valid_cloudevent

__all__ = [
    "AEP_TO_CE",
    "BATCH_CONTENT_TYPE",
    "CE_TO_AEP",
    "DATACONTENTTYPE",
    "SPECVERSION",
    "STRUCTURED_CONTENT_TYPE",
    "TYPE_ROOT",
    "Diagnostic",
    "ce_forward",
    "ce_inverse",
    "from_amqp",
    "from_http",
    "from_kafka",
    "from_structured",
    "is_valid_cloudevent",
    "is_cloudevents_line",
    "iter_jsonl",
    "line_events",
    "read_jsonl",
    "to_amqp",
    "to_batch_http",
    "to_binary_http",
    "to_kafka",
    "to_structured",
    "to_structured_http",
    "write_jsonl",
]
