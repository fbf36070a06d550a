"""The localizer's rules: the shares, probes and bars its steps decide by, declared once.

Every module of the localizer reads its rules from ``LOCALIZER_RULES``; a function that already
takes one of them as a keyword (``nonhardware.classify(moves=...)``) defaults to it there.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from sleuth.validation import checked, fraction, integer, number_above, positive_int

__all__ = ["LOCALIZER_RULES", "LocalizerRules"]


@dataclass(frozen=True, kw_only=True)
class LocalizerRules:
    """When the localizer searches more, reads more, and which reading of the evidence wins."""

    # -- localize: which iterations are searched, and which diagnosis decides -----------------
    #: Compute roots must carry at least this share of the irregularity rate before a straggler
    #: diagnosis applies: a congested spine also leaves a few compute roots behind it.
    straggler_share: float = 0.5
    #: Iterations searched after a level shift of the iteration time: 5 past the step, plus the 5
    #: columns by which the segmentation's minimum segment may place the step early.
    shift_probe: int = 10
    #: Iterations searched after a lone irregular onset whose level stays up: enough for the
    #: support rule, where every one searched fetches ranks of its own.
    onset_probe: int = 3
    #: A network root of a probed level step needs a transfer excess of at least this share of the
    #: step: a transfer microseconds over its level does not make a step of milliseconds.
    probe_transfer_share: float = 0.1
    #: Robust spreads over its own level that make an operator abnormal in a probed step: a step
    #: never δ-irregular is small next to the operators it lands on, so no share of their duration.
    probe_spread_k: float = 3.0
    #: The segmentation's bar for a step before the onset, below ``level_shifts``' 8: t grows with
    #: the square root of the columns and that stretch is short, while the δ-irregular iteration
    #: after it already says the job is no longer healthy.
    earlier_t_min: float = 6.0

    # -- search: which ring members are read and followed --------------------------------------
    #: Members of a collective read before its last launcher is looked for among them: a handful,
    #: so that judging a healthy collective touches few ranks.
    first_read: int = 8
    #: Members read at a time after that, and the stride that spreads the reads over a large
    #: group: twice the first read, so that a large group is settled in a few rounds.
    read_batch: int = 16
    #: A ring member's operator elsewhere is judged only when it ran at least this share as long
    #: (against its baseline) as the longest of them: a delay that size is a lead, less is noise.
    member_share: float = 0.5

    # -- reading the what-if attribution (attributed, nonhardware, episodes) -------------------
    #: The share of the slowdown that "most" of it is: the paper's line for workers and for the
    #: last stage (What-if §5.1, §5.2).
    majority: float = 0.5
    #: A side (compute, or transfers) carrying less than this share of what the operator types add
    #: up to is not searched: it is the jitter a 3-sigma put-back still lets through.
    minor: float = 0.1
    #: Ranks the device search from an attribution starts from at most: a tensor group's worth,
    #: tied in the worker slowdowns.
    max_candidates: int = 64
    #: Slowness seen on at least this many hosts or replicas, in as many iterations, moves: two
    #: could be two broken devices; a third, in a third iteration, is the work moving.
    moves: int = 3
    #: A replica stands apart from the others (how often and how much it pays: one-sided tests, half
    #: this level each) at the usual 5%: a job's jitter makes some replica the costliest of every iteration.
    significance: float = 0.05
    #: The costliest replica's share of places computing over their median above which its cost is its
    #: data's: midway between a slow device's (chance elsewhere, a half) and costly data's (every place, 1).
    data_breadth: float = 0.75
    #: Suspects of an incident that can tie it to another: a NIC and its own cable, a GPU and its
    #: host, explain the same delays, so either may rank first in one analysis and second in the next.
    tied_suspects: int = 2

    def __post_init__(self) -> None:
        checked(
            self, prefix="rules.", straggler_share=fraction, shift_probe=positive_int, onset_probe=positive_int,
            probe_transfer_share=partial(fraction, zero=True), probe_spread_k=partial(number_above, low=0),
            earlier_t_min=partial(number_above, low=0), first_read=positive_int, read_batch=positive_int,
            member_share=fraction, majority=fraction, minor=partial(fraction, zero=True, one=False),
            max_candidates=positive_int, moves=partial(integer, low=2), significance=fraction, data_breadth=fraction,
            tied_suspects=positive_int,
        )


LOCALIZER_RULES = LocalizerRules()
