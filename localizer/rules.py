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
    #: up to is not searched and names no suspect: it is the jitter a 3-sigma put-back still lets through.
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
    #: A step cuts a run of S in two when noise fits as well in at most this share of the run's
    #: shuffles: a cut parts one incident in two, which noise may do to one run in a hundred.
    step_significance: float = 0.01
    #: Shuffles of the run that test it: the smallest p-value they can give, 1/(n+1), is a tenth of that level.
    step_shuffles: int = 999
    #: Network suspects weighed by what they carried (``carried``), the ranking's head: more than an
    #: incident lists, so that a device cleared lets the next ones in.
    carried_head: int = 16
    #: Ranks near a device, then transfer groups through it, read for its slow share at most: a share
    #: needs tens of groups, not every one of a spine's thousands.
    carried_sample: int = 96

    # -- localize: the support rule and where the search starts ---------------------------------
    #: A suspect needs evidence from at least this many irregular iterations (those its roots ran
    #: in, or were abnormal again in): one random hiccup never raises an incident.
    min_support: int = 2
    #: The pivot's abnormal operators the search starts from, largest excess first (and as many it
    #: launched late): the delay to explain is among the largest, and each more reads more ranks.
    pivot_ops: int = 3

    # -- search: how far a slow ring's members are followed ------------------------------------
    #: Newly found slow rings (and pairs) per search whose members' other operators are examined:
    #: unbounded, a slow spine, which slows every ring, would make the search walk half the job.
    member_rings: int = 8
    #: Members of each examined, those whose other operator ran longest first: a slow NIC lengthens
    #: only its own rank's other transfers, so it is among these few even in a 64-rank ring.
    member_fanout: int = 4

    #: Irregular iterations exactly one period apart that read as a program's beat (``periodic``):
    #: three equal gaps, which a handful of spikes or a fluctuating device's drifting ones rarely make.
    min_beats: int = 4

    # -- operators: the healthy iterations of a window -----------------------------------------
    #: Regular iterations an irregular one needs before it to close the window's reference: a lone
    #: early hiccup leaves fewer, and a later fault's caught-up iterations must not stand in as healthy.
    min_reference: int = 5

    # -- shifts: level steps of the iteration time ---------------------------------------------
    #: Columns on each side of a level step at least: a median of five shrugs off a pause or two.
    shift_min_len: int = 5
    #: A level shift's step over its standard error at least: the segmentation takes the best of
    #: every cut, so the bar sits far above one test's, out of reach of a healthy job's jitter.
    shift_t_min: float = 8.0
    #: The same bar for the one step at a known onset (``shifts.persists``): one test, not the best
    #: of every cut, on the pivot's own times, several times noisier than the job's.
    lasting_t_min: float = 5.0
    #: A step under this share of the level before it is no shift: the noise of a new level is no
    #: second shift, while a step that δ (a tenth) misses is still well above it.
    shift_min_step: float = 0.01

    # -- peers: is a late rank's slowness its own? ---------------------------------------------
    #: Data-parallel peers on other hosts a late rank is compared with, spread over the replicas:
    #: a few tell the job's work from a broken GPU at the cost of fetching that few.
    peer_sample: int = 4
    #: A peer's compute excess over the later iterations is read at this quantile: slow in a fifth
    #: of them is slow at some time, one stray iteration is not.
    peer_quantile: float = 0.8
    #: A rank is steadily slow when slow in this share of the iterations since it first was: a
    #: broken GPU is slow in nearly every one, a replica that drew long documents only now and then.
    steady_share: float = 0.9
    #: ... and in at least this many of them: a peak in the window's last iteration or two says
    #: nothing about what follows it.
    steady_min_run: int = 3
    #: A rank's compute excess stands out of its noise beyond this many robust spreads of its healthy
    #: iterations' excess: half of a jitter-sized excess is reached by chance (3 sigma, as the what-if's).
    stands_out_spreads: float = 3.0

    # -- nonhardware: hardware, or the job's own uneven work -----------------------------------
    #: The share of the compute evidence whose spread decides ("most" of it, less the jitter of a
    #: fault's stray roots): hardware keeps it on one GPU, a few, or one host.
    imbalance_cover: float = 0.8
    #: Ranks it takes to cover that share from which the evidence is spread, not hardware: a broken
    #: GPU's sits on it and the one or two ranks it delays most.
    diffuse_ranks: int = 4
    #: A late rank not steadily slow whose sampled peers were as slow at some time, at least this
    #: share of them (one of the four), has slowness moving between replicas: a broken GPU's never are.
    peers_moving_share: float = 0.25
    #: Peers slow in the same iterations, at least this share ("nearly all": three of the four), are a
    #: slow stage: a heavier stage slows every replica of it at once.
    stage_together: float = 0.75

    # -- explain: several faults at once -------------------------------------------------------
    #: Faults one incident separates at most: each adds its top K suspects, and more than a few at
    #: once is a list that names the fabric, not a device to replace.
    max_faults: int = 3
    #: A further fault counts while the roots it explains keep a mean irregularity rate R of at least
    #: this share of the first fault's: one fault's leftovers (jitter, a stray hiccup) barely track the time.
    second_fault_share: float = 0.25
    #: A switch does not lead a fault when one device below it carries this share of its evidence: that
    #: device explains the same delays at fewer endpoints, while a faulty switch's evidence is spread.
    dominant_below: float = 0.8

    def __post_init__(self) -> None:
        checked(
            self, prefix="rules.", straggler_share=fraction, shift_probe=positive_int, onset_probe=positive_int,
            probe_transfer_share=partial(fraction, zero=True), probe_spread_k=partial(number_above, low=0),
            earlier_t_min=partial(number_above, low=0), first_read=positive_int, read_batch=positive_int,
            member_share=fraction, majority=fraction, minor=partial(fraction, zero=True, one=False),
            max_candidates=positive_int, moves=partial(integer, low=2), significance=fraction, data_breadth=fraction,
            tied_suspects=positive_int, step_significance=fraction,
            step_shuffles=positive_int, carried_head=positive_int, carried_sample=positive_int,
        )
        checked(
            self, prefix="rules.", min_support=positive_int, pivot_ops=positive_int, min_beats=partial(integer, low=3),
            member_rings=partial(integer, low=0),
            member_fanout=positive_int, min_reference=positive_int, shift_min_len=positive_int,
            shift_t_min=partial(number_above, low=0), lasting_t_min=partial(number_above, low=0),
            shift_min_step=partial(fraction, zero=True, one=False), peer_sample=positive_int, peer_quantile=fraction,
            steady_share=fraction, steady_min_run=positive_int, stands_out_spreads=partial(number_above, low=0),
            imbalance_cover=fraction, diffuse_ranks=partial(integer, low=2), peers_moving_share=fraction,
            stage_together=fraction, max_faults=positive_int, second_fault_share=fraction, dominant_below=fraction,
        )


LOCALIZER_RULES = LocalizerRules()
