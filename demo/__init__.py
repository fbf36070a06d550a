"""The one-command demo (``sleuth demo``): a real training job with one slowed rank, then an
emulated 4,096-GPU job with a spine switch fault, each localized and written up for on-call.

``cases`` defines the two jobs and their ground truth; ``embedded`` runs them with no services
(the logger writes Parquet, detection and localization run in this process); ``stack`` runs
them through the real gateway, Kafka, workers and ClickHouse; ``run`` picks the path and prints.
"""

#: Where the demo runs: ``stack`` through the running services, ``embedded`` in this process,
#: ``auto`` the stack when it answers.
MODES = ("auto", "embedded", "stack")
