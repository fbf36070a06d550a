"""Ingest: the ``Collector`` gRPC gateway that training jobs stream into, the checks it runs on every
batch, the jobs it accepts and their tokens, and the records' Kafka messages."""
