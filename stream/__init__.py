"""The analytics stream: gRPC gateway, Kafka, Faust workers, detection and the ClickHouse sink."""
