"""Event-bus publishing of a verified run's assessment events (docs/design/bus.md).

- :func:`publish` / :func:`resume` and :class:`PublishReport` (:mod:`aefgate.bus.publish`);
- the destinations: JetStream (:mod:`aefgate.bus.nats_sink`), HTTP (:mod:`aefgate.bus.http_sink`), a file or
  stdout; the wire forms (:mod:`aefgate.bus.codec`, with the CloudEvents NATS binding); the retry policy
  (:mod:`aefgate.net.retry`); the spool of unacknowledged events (:mod:`aefgate.bus.spool`).
"""

from aefgate.bus.publish import Destination, PublishReport, parse_destination, publish, resume

__all__ = ["Destination", "PublishReport", "parse_destination", "publish", "resume"]
