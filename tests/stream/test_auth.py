"""``auth.check_jobs``: what a job's token may write, by the attempt-id grammar of ``logger.identity``."""

from __future__ import annotations

import pytest

from sleuth.errors import Forbidden
from sleuth.stream.ingest.auth import check_jobs


def test_a_token_covers_its_job_and_the_jobs_restarted_attempts_and_rendezvous_rounds() -> None:
    check_jobs("train", ["train", "train.r1", "train.r12", "train.m1", "train.r2.m3"])
    check_jobs(None, ["anything", "else.r1"])  # authentication off


@pytest.mark.parametrize("job", ["other", "other.r1", "train.other", "trainr1", "train.r0", "train.r01", "train.r",
                                 "train.r-1", "train.r1x", "train.r1.r2", "xtrain.r1", "train.m0", "train.m1.r2",
                                 "train.m1.m2"])
def test_a_token_covers_nothing_else(job) -> None:
    with pytest.raises(Forbidden, match=rf"job: the token is for job 'train', not for \['{job}'\]"):
        check_jobs("train", ["train", job])
