"""The stream's long-running services: the worker (Kafka -> detection -> ClickHouse), the streaming
localizer (irregular iterations and what-if rounds -> incidents), the local stack that runs them, and
the faust app and at-least-once consumption they share."""
