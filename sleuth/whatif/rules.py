"""The what-if attribution's rules: which lengths are put back, which variants run, declared once.

The attribution, the contributors, the program slots and detection's counterfactual replay read
them from ``ATTRIBUTION_RULES``; a function that already takes one of them as a keyword
(``attribute(top_workers=...)``) defaults to it there.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from sleuth.validation import checked, fraction, number_above, positive_int

__all__ = ["ATTRIBUTION_RULES", "AttributionRules"]


@dataclass(frozen=True, kw_only=True)
class AttributionRules:
    """When a length is a straggler's, and how much of the job the variants replay."""

    #: A length is put back to its peers' median beyond this many robust standard deviations above
    #: it: jitter alone passes it about once in 700 draws (one-sided normal tail at 3 sigma).
    spread_k: float = 3.0
    #: Ranks a program needs before its slot medians stand for the straggler-free length: with
    #: four, one or two slowed ranks are still a minority the median ignores.
    min_peers: int = 4
    #: Iterations each level of a transfer's stepping history needs (``keys.lower_level``): more
    #: than a pause and the iteration it spills into, so that a level is a regime, not an event.
    level_iterations: int = 4
    #: Share of the workers whose slowdowns are the highest that ``M_W`` asks about: the paper's 3%
    #: (§5.1), the few hosts a hardware or software fault can be on.
    top_workers: float = 0.03
    #: Iterations the workers' variants replay: the slowest few, since a straggling job's steps
    #: have similar slowdowns (What-if §4.2); three, so that the device search's support rule (two
    #: iterations) never rests on one benign pause among them.
    worker_iterations: int = 3
    #: A replica whose put-back lengths add up to at most this share of what the costliest replica
    #: adds cannot be among the top workers beside it: its bound stands for it, unreplayed.
    negligible: float = 0.1
    #: A replica whose slowdown is bounded under 1 + this is no straggler whatever its rank, and is
    #: left unreplayed: a tenth of the slowdown line's margin (S 1.05), jitter to what a job pays.
    worker_floor: float = 0.005
    #: Without a layout, per-rank variants (one replay each) run up to this world size; above it
    #: the paper's approximation needs the layout's replicas and stages.
    max_rank_variants: int = 256
    #: Groups with a transfer put back kept per iteration: as many slow rings as the device search
    #: follows per irregular iteration (``LocalizerRules.member_rings``).
    groups_per_iteration: int = 8

    def __post_init__(self) -> None:
        checked(
            self, prefix="rules.", spread_k=partial(number_above, low=0), min_peers=positive_int, level_iterations=positive_int,
            top_workers=fraction, worker_iterations=positive_int, negligible=partial(fraction, zero=True, one=False),
            worker_floor=partial(fraction, zero=True, one=False),
            max_rank_variants=positive_int, groups_per_iteration=positive_int,
        )


ATTRIBUTION_RULES = AttributionRules()
