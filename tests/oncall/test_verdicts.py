"""``label_rows``: an on-call verdict labels the operator instances an incident's roots name."""

from __future__ import annotations

from sleuth.localizer.impact import Impact
from sleuth.localizer.incident import Incident, IncidentCause, RootOperator, Suspect
from sleuth.localizer.search import Cause
from sleuth.oncall.verdicts import CONFIRMED, REJECTED, label_rows
from sleuth.topology import DeviceKind


def _incident() -> Incident:
    return Incident(
        job="job-1", incident="job-1-16-16", t_from_ns=1, t_to_ns=2, iterations=(16,), cause=IncidentCause.NETWORK,
        suspects=(Suspect("nic:h0001/3", DeviceKind.NIC, 0.6),),
        # Searched from iteration 16, the slow send ran at the end of 15: seq 40 is iteration 15's.
        roots=(RootOperator(16, Cause.NETWORK, 3, "pp.0", 40, "send", (3, 11), 0.8, 15),),
        traversal=(0, 3), steps=(), ranks_fetched=4, world=16, impact=Impact(1.1, 100.0, 110.0, 0.1, 1), advice="",
        seconds=0.1,
    )


def test_a_verdict_labels_each_rank_of_a_root_in_the_iteration_the_operator_ran_in():
    rows = label_rows(_incident(), CONFIRMED, labeled_ns=7)
    assert sorted(rows) == [
        ("job-1", 3, "pp.0", 40, 15, 1, "oncall:confirmed:job-1-16-16", 7),
        ("job-1", 11, "pp.0", 40, 15, 1, "oncall:confirmed:job-1-16-16", 7),
    ]
    assert {row[5] for row in label_rows(_incident(), REJECTED, labeled_ns=7)} == {0}
