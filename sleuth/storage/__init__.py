"""Storage: the one home of the ClickHouse schema, every table's rows and the queries on them.

The contracts these implement are in ``sleuth.stores`` (and ``sleuth.sources.RecordSource``).
Modules, one job each:

* :mod:`~sleuth.storage.schema` — the tables, as numbered migrations (``sleuth db migrate``);
* :mod:`~sleuth.storage.tables` — each table's column order and its rows from and to sleuth's types;
* :mod:`~sleuth.storage.records_table` — CommOps records: the table's layout, columnar insert and select;
* :mod:`~sleuth.storage.sink` — the workers' ``RecordSink`` (records, iterations, jobs, abnormal operators, drops);
* :mod:`~sleuth.storage.source` — the localizer's ``RecordSource`` over one job, and the jobs' progress;
* :mod:`~sleuth.storage.incidents` — the ``IncidentStore`` and the on-call commands' incident queries;
* :mod:`~sleuth.storage.pauses` — the streaming localizer's ``PauseStore`` of benign pauses;
* :mod:`~sleuth.storage.alerts` — the alerter's ``AlertStore``;
* :mod:`~sleuth.storage.labels` — the ``LabelStore`` of on-call verdicts;
* :mod:`~sleuth.storage.progress` — how far jobs got, which resolves their alerts, and which jobs still run;
* :mod:`~sleuth.storage.report_queries` — the SQL printed under the report's figures;
* :mod:`~sleuth.storage.memory` — in-memory twins of the contracts, for unit tests.

Clients come from ``sleuth.stream.connect``; every module here takes one, never reads settings.
"""
