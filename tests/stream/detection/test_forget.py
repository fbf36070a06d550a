"""A detector that forgets an idle job (SLEUTH_JOB_IDLE_S) holds afterwards exactly what one that
never saw it holds, judges the other jobs the same, and judges the job afresh when it comes back."""

from __future__ import annotations

import numpy as np

from sleuth.stream.detection import StreamDetector
from sleuth.stream.detection.rank_state import RankState

from .conftest import emulation, small_model

GPU = "gpu:h0001/2,slow=1.5,start=15"


def feed(detector: StreamDetector, em, iterations) -> list[tuple]:
    records, rows = em.records(), []
    for it in iterations:
        rows += detector.update(records.take(np.flatnonzero(records["iteration"] == it)),
                                em.iterations(iterations=[it]), RankState())
    return rows


def test_forgetting_a_job_leaves_the_others_judged_as_if_it_never_was_and_it_comes_back_afresh() -> None:
    kept, gone = emulation(GPU), emulation(seed=1)
    both = StreamDetector(small_model(), counterfactual=True, clock=lambda: 0)
    alone = StreamDetector(small_model(), counterfactual=True, clock=lambda: 0)
    fresh = StreamDetector(small_model(), counterfactual=True, clock=lambda: 0)
    feed(both, gone, range(12))  # the job to forget comes first: the kept job's rows are renumbered
    assert feed(both, kept, range(10)) == feed(alone, kept, range(10))
    both.forget({"job-1", "never-seen"})
    assert len(both.windows) == len(alone.windows)
    assert both.monitor.times("job-1")[0].size == 0
    for name in ("_ring", "_filled", "_stats", "_last_ratio", "_rank_iter", "_rank_tensor", "_comm_members"):
        np.testing.assert_array_equal(getattr(both.windows, name)[: len(getattr(alone.windows, name))],
                                      getattr(alone.windows, name)[: len(getattr(both.windows, name))])
    np.testing.assert_array_equal(both.counterfactual._known[: len(alone.counterfactual._known)],
                                  alone.counterfactual._known[: len(both.counterfactual._known)])
    later = feed(both, kept, range(10, 40))
    assert later == feed(alone, kept, range(10, 40)) and later  # the fault's operators are flagged alike
    assert [i.iteration for i in both.take_irregularities() if i.job == "job-0"] == \
        [i.iteration for i in alone.take_irregularities()]
    # The forgotten job comes back: judged as by a detector that never saw it.
    assert feed(both, gone, range(20)) == feed(fresh, gone, range(20))
