"""Chaos runs: the real stack on private ports, emulated jobs streaming, faults injected, then a check that nothing
the gateway confirmed was lost or counted twice and that every incident reached an alert receiver.

* :mod:`~sleuth.sim.chaos.stack` — a private stack (ports, state folder), signalled only by its recorded PIDs
* :mod:`~sleuth.sim.chaos.jobs` — emulated jobs through the logger's sender, and the ledger of what was confirmed
* :mod:`~sleuth.sim.chaos.faults` — the fault injector
* :mod:`~sleuth.sim.chaos.receiver` — a webhook receiver for the alerter
* :mod:`~sleuth.sim.chaos.check` — the checker
* :mod:`~sleuth.sim.chaos.run` — one run, start to figures
"""
