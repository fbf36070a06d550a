"""Settings, declared once: name, type, default, environment variable and help.

Only entry points (the CLI, the logger's startup hook, service mains) call ``Settings.from_env``;
library code receives a ``Settings`` (or plain arguments) and never reads the environment itself.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sleuth.errors import ConfigError


def _port(text: str) -> int:
    value = int(text)
    if not 1 <= value <= 65535:
        raise ValueError(f"{value} is not a TCP port (1-65535)")
    return value


def _listen_port(text: str) -> int:
    # 0 asks the OS for a free port (tests, several gateways on one machine).
    return 0 if int(text) == 0 else _port(text)


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError(f"{value} is not a positive integer")
    return value


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError(f"{value} is a negative integer")
    return value


def _collector(text: str) -> str:
    if not text:
        return text
    host, sep, port = text.rpartition(":")
    if not sep or not host:
        raise ValueError("expected host:port")
    _port(port)
    return text


def _seconds(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise ValueError(f"{value} is not a positive number of seconds")
    return value


def _url(text: str) -> str:
    if not text.startswith(("http://", "https://")):
        raise ValueError(f"{text!r} is not an http:// or https:// URL")
    return text


# Alertmanager's own alerts API takes postable alerts, not webhooks (and v1 is gone since 0.27).
_ALERTS_API = ("/api/v1/alerts", "/api/v2/alerts")


def _webhook_urls(text: str) -> str:
    # Comma-separated http(s) URLs; checked here so a typo fails at start, naming the setting.
    for url in filter(None, (u.strip() for u in text.split(","))):
        _url(url)
        if url.rstrip("/").endswith(_ALERTS_API):
            base = url.rstrip("/").removesuffix(_ALERTS_API[0]).removesuffix(_ALERTS_API[1])
            raise ValueError(f"{url!r} is Alertmanager's alerts API, which takes no webhooks; "
                             f"give its base URL to SLEUTH_ALERTMANAGERS instead: {base}")
    return text


def _alertmanager_urls(text: str) -> str:
    for url in filter(None, (u.strip() for u in text.split(","))):
        _url(url)
        if url.rstrip("/").endswith(_ALERTS_API):
            raise ValueError(f"{url!r}: give Alertmanager's base URL (e.g. http://127.0.0.1:9093); "
                             "sleuth posts to <url>/api/v2/alerts")
    return text


def _optional_url(text: str) -> str:
    return _url(text) if text else text


def _non_negative(text: str) -> float:
    value = float(text)
    if not value >= 0:
        raise ValueError(f"{value} is negative")
    return value


#: The logger's ways of capturing operators (``SLEUTH_CAPTURE``).
CAPTURE_MODES = ("auto", "native", "process-group", "functions")


def _capture(text: str) -> str:
    if text not in CAPTURE_MODES:
        raise ValueError(f"expected one of {', '.join(CAPTURE_MODES)}")
    return text


def _above_one(text: str) -> float:
    value = float(text)
    if not value > 1:
        raise ValueError(f"{value} is not above 1")
    return value


def _setting(default: Any, env: str, help: str, parse: Callable[[str], Any] = str) -> Any:
    """A dataclass field that also carries its environment variable, parser and help."""
    return dataclasses.field(default=default, metadata={"env": env, "help": help, "parse": parse})


@dataclass(frozen=True, kw_only=True)
class Settings:
    """Every setting sleuth reads from the environment, with its default."""

    state_dir: str = _setting(
        ".sleuth", "SLEUTH_STATE_DIR", "folder for service state (Kafka jars and logs, ClickHouse data)"
    )
    kafka_host: str = _setting("127.0.0.1", "SLEUTH_KAFKA_HOST", "Kafka broker host")
    kafka_port: int = _setting(19092, "SLEUTH_KAFKA_PORT", "Kafka broker port", _port)
    clickhouse_host: str = _setting("127.0.0.1", "SLEUTH_CLICKHOUSE_HOST", "ClickHouse server host")
    clickhouse_port: int = _setting(
        19000, "SLEUTH_CLICKHOUSE_PORT", "ClickHouse native-protocol port", _port
    )
    clickhouse_http_port: int = _setting(
        18123, "SLEUTH_CLICKHOUSE_HTTP_PORT", "ClickHouse HTTP port", _port
    )
    clickhouse_database: str = _setting("sleuth", "SLEUTH_CLICKHOUSE_DB", "ClickHouse database")
    alertmanager_port: int = _setting(
        19193, "SLEUTH_ALERTMANAGER_PORT", "port of the local Alertmanager that deploy/alertmanager.sh runs", _port
    )
    records_topic: str = _setting("sleuth.records", "SLEUTH_RECORDS_TOPIC", "Kafka topic of CommOps records")
    rejects_topic: str = _setting(
        "sleuth.rejects", "SLEUTH_REJECTS_TOPIC", "Kafka dead-letter topic of rejected batches, with the reason"
    )
    jobs_topic: str = _setting(
        "sleuth.jobs", "SLEUTH_JOBS_TOPIC", "compacted Kafka topic of registered job specs (the gateway reloads it)"
    )
    # One broker here; a cluster sets 3 and 2, so that acks=all survives a broker lost with nothing lost.
    kafka_replication: int = _setting(
        1, "SLEUTH_KAFKA_REPLICATION", "replicas of each topic sleuth creates (at most the brokers in the cluster)",
        _positive_int,
    )
    kafka_min_insync: int = _setting(
        1, "SLEUTH_KAFKA_MIN_INSYNC_REPLICAS", "min.insync.replicas of each topic sleuth creates: replicas that must "
        "have a message before acks=all confirms it (at most SLEUTH_KAFKA_REPLICATION)", _positive_int,
    )
    records_partitions: int = _setting(
        4, "SLEUTH_RECORDS_PARTITIONS", "partitions of the records topic when sleuth creates it", _positive_int
    )
    gateway_host: str = _setting("127.0.0.1", "SLEUTH_GATEWAY_HOST", "address the gRPC gateway listens on")
    gateway_port: int = _setting(
        50151, "SLEUTH_GATEWAY_PORT", "port of the gRPC gateway (0: any free port)", _listen_port
    )
    gateway_threads: int = _setting(
        16, "SLEUTH_GATEWAY_THREADS",
        "gateway threads that parse, validate and hand batches to Kafka (streams wait on the event loop, not on these)",
        _positive_int,
    )
    gateway_max_streams: int = _setting(
        32768, "SLEUTH_GATEWAY_MAX_STREAMS",
        "streams the gateway serves at once (two 16,384-rank jobs); beyond it a stream is refused with "
        "RESOURCE_EXHAUSTED and the logger retries", _positive_int,
    )
    gateway_tokens_file: str = _setting(
        "", "SLEUTH_GATEWAY_TOKENS", "JSON file mapping job -> bearer token; empty: no authentication"
    )
    gateway_tls_cert: str = _setting("", "SLEUTH_GATEWAY_TLS_CERT", "PEM certificate chain; empty: no TLS")
    gateway_tls_key: str = _setting("", "SLEUTH_GATEWAY_TLS_KEY", "PEM private key of the TLS certificate")
    gateway_max_batch_records: int = _setting(
        1_000_000, "SLEUTH_GATEWAY_MAX_BATCH_RECORDS", "largest batch the gateway accepts (records)", _positive_int
    )
    gateway_max_string_bytes: int = _setting(
        256, "SLEUTH_GATEWAY_MAX_STRING_BYTES", "longest job or communicator name accepted (UTF-8 bytes)",
        _positive_int,
    )
    gateway_max_strings: int = _setting(
        100_000, "SLEUTH_GATEWAY_MAX_STRINGS", "largest string table accepted in one batch", _positive_int
    )
    gateway_max_iteration: int = _setting(
        10**12, "SLEUTH_GATEWAY_MAX_ITERATION",
        "largest training step number accepted: a step holds at least one collective across GPUs (~10 us at "
        "the very least), so 10^12 steps take months at that floor and centuries for any real model",
        _positive_int,
    )
    gateway_inflight_bytes: int = _setting(
        64 << 20, "SLEUTH_GATEWAY_INFLIGHT_BYTES",
        "bytes sent to Kafka but not yet acknowledged; beyond it clients wait", _positive_int,
    )
    worker_group: str = _setting("sleuth.workers", "SLEUTH_WORKER_GROUP", "Kafka consumer group of the workers")
    worker_max_records: int = _setting(
        2_000, "SLEUTH_WORKER_MAX_MESSAGES", "Kafka messages a worker takes per batch (one insert each)",
        _positive_int,
    )
    irregularities_topic: str = _setting(
        "sleuth.irregularities", "SLEUTH_IRREGULARITIES_TOPIC",
        "Kafka topic the workers publish irregular iterations to (JSON, keyed by job)",
    )
    incidents_topic: str = _setting(
        "sleuth.incidents", "SLEUTH_INCIDENTS_TOPIC",
        "Kafka topic the streaming localizer publishes incidents to (JSON, keyed by job)",
    )
    localizer_group: str = _setting(
        "sleuth.localizers", "SLEUTH_LOCALIZER_GROUP", "Kafka consumer group of the streaming localizers"
    )
    localizer_topology: str = _setting(
        "", "SLEUTH_LOCALIZER_TOPOLOGY",
        "topology YAML the streaming localizer scores devices on (empty: per job, one leaf over its hosts)",
    )
    localizer_debounce_s: float = _setting(
        5.0, "SLEUTH_LOCALIZER_DEBOUNCE_S",
        "seconds the localizer gathers a job's irregularities after the first one before localizing", _seconds,
    )
    localizer_land_timeout_s: float = _setting(
        60.0, "SLEUTH_LOCALIZER_LAND_TIMEOUT_S",
        "seconds the localizer then waits at most for every rank's records of those iterations and the few "
        "after them; then it localizes and judges what has landed (the job ended or stalls)", _seconds,
    )
    localizer_window: int = _setting(
        100, "SLEUTH_LOCALIZER_WINDOW", "iterations T of the streaming localizer's cross-iteration analysis",
        _positive_int,
    )
    attribution_slowdown: float = _setting(
        1.05, "SLEUTH_ATTRIBUTION_SLOWDOWN",
        "what-if slowdown S from which a job pays for stragglers and an incident opens: the labels' own "
        "line (an operator 5% over its fault-free length is abnormal)", _above_one,
    )
    attribution_sustain: int = _setting(
        3, "SLEUTH_ATTRIBUTION_SUSTAIN",
        "consecutive iterations at or above that slowdown that open an incident: a benign pause lasts "
        "one iteration and spills into at most the next", _positive_int,
    )
    attribution_interval_s: float = _setting(
        1.0, "SLEUTH_ATTRIBUTION_INTERVAL_S",
        "seconds between the streaming localizer's rounds of what-if slowdown over every job's newest landed "
        "iterations: what a sustained slowdown waits at most before its round, out of the 5 s in which it "
        "should become an incident (a round with nothing new asks which jobs are active and how far each landed: "
        "indexed queries, about 30 ms at 8,192 GPUs)", _seconds,
    )
    attribution_warmup: int = _setting(
        5, "SLEUTH_ATTRIBUTION_WARMUP",
        "first iterations of a job (numbered from 0) the localizer leaves out, from the what-if attribution and "
        "from the irregular iterations it searches, unless that leaves fewer than the sustained run (a short "
        "profiler trace): process start, communicator setup, allocator growth and autotuning make them uneven "
        "across ranks by nature", _non_negative_int,
    )
    attribution_window: int = _setting(
        12, "SLEUTH_ATTRIBUTION_WINDOW",
        "newest iterations the streaming localizer replays per job and round: a sustained run with three "
        "times as many around it, whose lengths the peers' medians rest on", _positive_int,
    )
    job_idle_s: float = _setting(
        3600.0, "SLEUTH_JOB_IDLE_S",
        "seconds without a record after which the gateway, workers and localizer drop a job's state (a job "
        "that comes back is registered or read again) and the alerter resolves its alerts (it stopped "
        "reporting): an hour outlasts checkpoint saves and evaluation pauses",
        _seconds,
    )
    detect_model: str = _setting(
        "", "SLEUTH_DETECT_MODEL", "abnormal-operator model file the workers load (empty: the shipped default)"
    )

    # -- on-call: alerts (``sleuth alerter``) and metrics endpoints -------------------------------
    alerts_topic: str = _setting(
        "sleuth.alerts", "SLEUTH_ALERTS_TOPIC", "Kafka topic the alerter publishes alerts to (Alertmanager JSON, keyed by job)"
    )
    alertmanagers: str = _setting(
        "", "SLEUTH_ALERTMANAGERS", "comma-separated base URLs of the Alertmanagers the alerter pushes alerts to "
        "(POST <url>/api/v2/alerts); empty: none", _alertmanager_urls,
    )
    alert_resend_s: float = _setting(
        60.0, "SLEUTH_ALERT_RESEND_S", "seconds between two pushes of a firing alert to Alertmanager; "
        "each push keeps it firing for 4 times as long", _seconds,
    )
    alert_webhooks: str = _setting(
        "", "SLEUTH_ALERT_WEBHOOKS", "comma-separated URLs the alerter POSTs Alertmanager-format webhooks to "
        "(receivers other than Alertmanager); empty: none", _webhook_urls,
    )
    alert_retries: int = _setting(
        5, "SLEUTH_ALERT_RETRIES", "retries of an alert POST that failed (connection error, 5xx, 408 or 429)",
        _positive_int,
    )
    alert_backoff_s: float = _setting(
        0.5, "SLEUTH_ALERT_BACKOFF_S", "first wait before an alert POST is retried; doubles each retry", _seconds
    )
    alert_resolve_iterations: int = _setting(
        50, "SLEUTH_ALERT_RESOLVE_ITERATIONS",
        "regular iterations after the last irregular one that resolve a job's alerts", _positive_int,
    )
    alert_critical_slowdown: float = _setting(
        1.5, "SLEUTH_ALERT_CRITICAL_SLOWDOWN", "slowdown from which an alert is critical (else warning)", _seconds
    )
    alert_critical_gpu_hours: float = _setting(
        10.0, "SLEUTH_ALERT_CRITICAL_GPU_HOURS", "GPU-hours lost from which an alert is critical", _non_negative
    )
    alerter_group: str = _setting("sleuth.alerter", "SLEUTH_ALERTER_GROUP", "Kafka consumer group of the alerter")
    gateway_metrics_port: int = _setting(
        0, "SLEUTH_GATEWAY_METRICS_PORT", "Prometheus /metrics port of the gateway (0: off)", _listen_port
    )
    worker_metrics_port: int = _setting(
        0, "SLEUTH_WORKER_METRICS_PORT", "Prometheus /metrics port of a worker (0: off)", _listen_port
    )
    localizer_metrics_port: int = _setting(
        0, "SLEUTH_LOCALIZER_METRICS_PORT", "Prometheus /metrics port of the streaming localizer (0: off)", _listen_port
    )
    alerter_metrics_port: int = _setting(
        0, "SLEUTH_ALERTER_METRICS_PORT", "Prometheus /metrics port of the alerter (0: off)", _listen_port
    )
    gpus_per_host: int = _setting(
        8, "SLEUTH_GPUS_PER_HOST", "GPUs per host when a layout or topology does not say", _positive_int
    )

    # -- the CommOps logger (read by its startup hook, sleuth.logger.autostart) ----------------
    collector: str = _setting(
        "", "SLEUTH_COLLECTOR", "host:port of the gateway a training job streams records to; "
        "with SLEUTH_LOG_DIR unset too, the logger stays off", _collector
    )
    collector_token: str = _setting(
        "", "SLEUTH_COLLECTOR_TOKEN", "bearer token the logger presents to a gateway that checks tokens "
        "(SLEUTH_GATEWAY_TOKENS there); empty: none"
    )
    collector_tls_ca: str = _setting(
        "", "SLEUTH_COLLECTOR_TLS_CA", "PEM file of the CA (or the certificate) the gateway's TLS "
        "certificate is checked against; set: the logger connects with TLS, empty: plaintext"
    )
    log_dir: str = _setting(
        "", "SLEUTH_LOG_DIR", "folder a training job writes Parquet records (per rank) and job.json into"
    )
    job: str = _setting(
        "", "SLEUTH_JOB", "job id of the records (default: TORCHELASTIC_RUN_ID, else SLURM_JOB_ID)"
    )
    logger_buffer_bytes: int = _setting(
        64 << 20, "SLEUTH_BUFFER_BYTES", "most memory the logger's sender holds (bytes)", _positive_int
    )
    logger_spill_dir: str = _setting(
        "", "SLEUTH_SPILL_DIR", "folder for records held while the collector is away "
        "(default: <temp dir>/sleuth-spill-<uid>; must be the user's own, mode 700)"
    )
    logger_spill_bytes: int = _setting(
        1 << 30, "SLEUTH_SPILL_BYTES", "most disk the spill file takes (bytes); past it the oldest "
        "records are dropped and counted", _positive_int
    )
    logger_ring: int = _setting(
        1 << 16, "SLEUTH_RING", "records the logger's ring holds between two drains", _positive_int
    )
    logger_capture: str = _setting(
        "auto", "SLEUTH_CAPTURE", "how the logger sees operators: native (C++ hooks on every group: "
        "DDP, FSDP, functional collectives too; torch >= 2.15; compiled on first use, fails if it cannot "
        "be), process-group (the same hooks in Python), functions (wraps torch.distributed's Python "
        "functions only), auto (native where it builds and CUDA-event timing is off, else process-group "
        "where torch has it, else functions)", _capture
    )
    logger_flush_s: float = _setting(
        0.5, "SLEUTH_FLUSH_S", "seconds between two drains of the ring", _seconds
    )
    serve_host: str = _setting("127.0.0.1", "SLEUTH_SERVE_HOST", "address `sleuth serve` (incident reports over HTTP) listens on")
    serve_port: int = _setting(
        18080, "SLEUTH_SERVE_PORT", "HTTP port of `sleuth serve` (0: any free port)", _listen_port
    )
    serve_token: str = _setting(
        "", "SLEUTH_SERVE_TOKEN", "bearer token `sleuth serve` requires on every request (header "
        "'Authorization: Bearer <token>', at least 16 characters); empty: no authentication"
    )
    serve_url: str = _setting(
        "", "SLEUTH_SERVE_URL", "URL on-call reaches `sleuth serve` at; alerts link to <url>/incidents/<id> "
        "(empty: http://SLEUTH_SERVE_HOST:SLEUTH_SERVE_PORT)", _optional_url,
    )

    @property
    def logger_enabled(self) -> bool:
        return bool(self.collector or self.log_dir)

    @property
    def kafka_bootstrap(self) -> str:
        return f"{self.kafka_host}:{self.kafka_port}"

    @property
    def alert_webhook_urls(self) -> list[str]:
        return [u.strip() for u in self.alert_webhooks.split(",") if u.strip()]

    @property
    def alertmanager_urls(self) -> list[str]:
        return [u.strip() for u in self.alertmanagers.split(",") if u.strip()]

    @property
    def serve_base_url(self) -> str:
        """Where alerts link incidents to: ``SLEUTH_SERVE_URL``, else the address `sleuth serve` listens on."""
        return self.serve_url or f"http://{self.serve_host}:{self.serve_port}"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Settings with every variable that is set in ``environ`` (default ``os.environ``) applied.

        A value that does not parse fails here, naming the variable, not later where it is used.
        """
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for field in dataclasses.fields(cls):
            env = field.metadata["env"]
            if env not in environ:
                continue
            try:
                values[field.name] = field.metadata["parse"](environ[env])
            except ValueError as error:
                raise ConfigError(f"{env}={environ[env]!r}: {error}") from None
        return cls(**values)

    def to_env(self) -> dict[str, str]:
        """The environment variables that give these settings (to start a service process with)."""
        return {f.metadata["env"]: str(getattr(self, f.name)) for f in dataclasses.fields(self)}

    @classmethod
    def describe(cls) -> list[tuple[str, str, Any, str]]:
        """(environment variable, setting, default, help) for each setting, for docs and --help."""
        return [
            (f.metadata["env"], f.name, f.default, f.metadata["help"]) for f in dataclasses.fields(cls)
        ]
