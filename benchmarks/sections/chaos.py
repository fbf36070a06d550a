"""``bench_chaos.py``'s section: what the gateway confirmed against what arrived, under injected faults."""

from __future__ import annotations

from .cells import require, table

__all__ = ["chaos_section"]


def chaos_section(document: dict) -> str:
    """``bench_chaos.py``'s records, iterations and alerts confirmed, lost and counted twice, the
    faults injected by kind, the jobs and what their loggers dropped, as markdown."""
    require(document, "bench_chaos.py", "records_confirmed", "faults_injected")
    d, faults = document, document["faults_injected"]
    return table(["figure", "value"], [
        ["records confirmed / lost / double counted", f"{d['records_confirmed']:,} / {d['records_lost']:,} / {d['records_double_counted']:,}"],
        ["iterations confirmed / lost / double counted",
         f"{d['iterations_confirmed']:,} / {d['iterations_lost']:,} / {d['iterations_double_counted']:,}"],
        ["incidents raised / alerts lost / alerts left unannounced",
         f"{d['incidents_raised']:,} / {d['alerts_lost']:,} / {d['alerts_unannounced']:,}"],
        ["faults: " + ", ".join(faults), ", ".join(str(n) for n in faults.values())],
        ["jobs (attempts), records the loggers dropped", f"{d['jobs']:,}, {d['records_dropped_by_loggers']:,}"],
        ["wall time", f"{d['seconds']:.0f} s"],
    ])
