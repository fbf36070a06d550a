"""Which iterations ``sleuth localize`` reads: past the warm-up, unless the records hold too few."""

from __future__ import annotations

import pytest

from sleuth.localizer.offline import steady_from
from sleuth.records import IterationBatch, RecordBatch


def _records(iterations: list[int]) -> RecordBatch:
    n = len(iterations)
    return RecordBatch.from_columns(job="j", rank=[0] * n, comm="dp.0", seq=list(range(n)), op=[1] * n, peer=[-1] * n,
                                    nbytes=[8] * n, iteration=iterations, t_issue_ns=list(range(n)),
                                    t_start_ns=list(range(n)), t_end_ns=list(range(1, n + 1)))


def _rows(iterations: list[int]) -> IterationBatch:
    n = len(iterations)
    return IterationBatch.from_columns(job="j", rank=[0] * n, iteration=iterations, t_start_ns=list(range(n)),
                                       t_end_ns=list(range(1, n + 1)))


@pytest.mark.parametrize(("steps", "first"), [
    (list(range(30)), 5),  # a whole job: its warm-up is left out
    ([2, 3, 4], 2),  # torch's tutorial profiler schedule: every step is read
    (list(range(7)), 4),  # as much of the warm-up left out as leaves three steps
    ([-1, 2, 3, 4, 5], 3),  # operators outside every step count for none
    ([40, 41], 5),  # a trace from later in the job holds no warm-up
    ([], 5),
])
def test_the_warm_up_is_left_out_as_far_as_the_records_spare_a_sustained_run(steps: list[int], first: int) -> None:
    assert steady_from(_records(steps), IterationBatch.empty(), warmup=5, sustain=3) == first


def test_steps_past_the_last_one_any_rank_closed_are_not_counted() -> None:
    # A final barrier's operators after step 4 (the ranks closed steps 2-4) are no step.
    assert steady_from(_records([2, 3, 4, 5, 6]), _rows([2, 3, 4]), warmup=5, sustain=3) == 2
