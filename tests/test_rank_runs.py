"""Member lists as runs: any list comes back as it was, a regular one is one run, bad runs fail by name."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sleuth.errors import ConfigError
from sleuth.rank_runs import expand, runs


@given(st.lists(st.integers(0, 300), max_size=40))
def test_any_rank_list_comes_back_as_it_was(ranks) -> None:
    assert expand(runs(ranks), below=301) == tuple(ranks)


def test_regular_groups_are_one_run_each() -> None:
    assert runs(range(16384)) == [(0, 16384, 1)]
    assert runs(range(3, 16384, 64)) == [(3, 256, 64)]
    assert runs([0, 8, 16, 1, 2, 3]) == [(0, 3, 8), (1, 3, 1)]
    assert runs([4, 2, 2]) == [(4, 1, 1), (2, 1, 1), (2, 1, 1)]


@pytest.mark.parametrize("bad, problem", [([[0, 10**12, 1]], "outside the world of 64"), ([[-1, 2, 1]], "start"),
                                          ([[0, 0, 1]], "count"), ([[1, 2]], "integers"), ([[1, 2, True]], "integers")])
def test_a_bad_run_fails_naming_where_it_is(bad, problem) -> None:
    with pytest.raises(ConfigError, match=rf"^comm\[0\]: .*{problem}"):
        expand(bad, below=64, where="comm")
