"""The analytics stream, in its parts:

* :mod:`sleuth.stream.ingest` — the gRPC gateway: checks, job registry, tokens, records to Kafka
* :mod:`sleuth.stream.detection` — the workers' detectors: irregular iterations, abnormal operators
* :mod:`sleuth.stream.services` — the long-running services (worker, streaming localizer, the stack)
  and what they share (the faust app, at-least-once consumption)
* :mod:`sleuth.storage` — ClickHouse: schema, sinks, sources and stores (shared with the localizer and on-call)
* :mod:`sleuth.stream.connect` — the clients of Kafka and ClickHouse, built from ``Settings`` in one place
"""
