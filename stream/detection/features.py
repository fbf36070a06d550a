"""Features of each operator instance (Holmes §4.2.2), computed a chunk of records at a time.

An *operator identity* is one operator of one rank's program: (job, rank, communicator, its
ordinal among that communicator's operators in the iteration). Its instances, one per iteration,
form a duration series; an instance is judged against the window statistics of that series.

The window holds the identity's last ``window`` durations *judged normal* (by the detector when
scoring, by the labels when building a training set). Why not simply the last ``window``: a
persistent degradation would fill the window within ``window`` iterations and then look normal,
while it is still abnormal against the healthy run (the labels' counterfactual).
Before an identity has ``min_history`` normal values (a job's first iterations, a new rank), its
*peers* stand in: the chunk's instances of the same program slot (communicator kind, ordinal, op
and size) on at least ``AttributionRules.min_peers`` ranks, which run the same operator in the same iteration and
need no history. An operator of a slow GPU's group is then judged against the job's other groups
from the first iteration on, as long as the slowed ranks are a minority of the slot's (the
median and quartiles are robust to a minority). With fewer peers in the chunk (one rank's
records alone), the chunk's own instances of the identity stand in (Holmes's self-window).

Beyond the instance's own window, context: its communicator and program slot in the iteration
(``_chunk_context``), the whole job's instances in the iteration (``_job_context``) and the
identity's previous instance (``prev_ratio``, remembered whether or not it entered the window).
A rank's pause slows every group of its iteration as a slow NIC does, and a group whose late
member's records are elsewhere shows it as a long transfer; what tells them apart is whether some
transfer of the job is several times its usual one, and whether the slowdown outlasts the iteration.
The instance's tensor-parallel mates (``_mate_context``) tell what a pipeline send or receive whose
peer is on another worker cannot: whether the same operator of the same micro-batch ran long on the
ranks it runs in lockstep with.

Every statistic is kept per identity in numpy rows, refreshed only for identities that received a
value; scoring a chunk is a gather plus a few vectorized ufuncs, never a loop over records.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from sleuth.errors import RecordError
from sleuth.records import IterationBatch, RecordBatch
from sleuth.stream.detection.group_keys import by_group_then_value, unique_inverse
from sleuth.stream.detection.rules import DETECTION_RULES
from sleuth.stream.detection.key_ids import KeyIds
from sleuth.validation import integer
from sleuth.whatif.keys import dense_ids as _group_ids
from sleuth.whatif.keys import packed_key, places_in_runs
# A program slot needs this many ranks in the chunk before its median stands in for a cold identity's window.
from sleuth.whatif.rules import ATTRIBUTION_RULES
from sleuth.whatif.timeline import member_groups

try:  # the compiled windows (stream/detection/_window_stats.c); OperatorWindows._numpy_append is their reference
    from sleuth.stream.detection import _window_stats
except ImportError as error:  # not built on this machine: numpy, a few times slower
    _window_stats = None  # type: ignore[assignment]
    logging.getLogger(__name__).warning("the detectors' compiled window statistics are not built (%s): numpy, a few "
                                        "times slower; reinstall sleuth with a C compiler", error)

__all__ = ["COMM_KINDS", "DRIFT_PRONE", "FEATURE_NAMES", "Chunk", "OperatorWindows"]

#: The widest window: its slots' push counts are told apart modulo 2**16.
_MAX_WINDOW = 65_535

#: Column order of the feature matrix; saved with every model and checked on load.
FEATURE_NAMES: tuple[str, ...] = (
    "duration_ns",
    "win_mean_ns", "win_std_ns", "zscore", "win_q1_ns", "win_q2_ns", "win_q3_ns", "win_iqr_ns",
    "ratio", "rel_iqr", "win_count",
    "rank", "nbytes", "op", "comm_kind",
    "iteration_ns", "iteration_mean_ns", "iteration_ratio", "rank_mean_op_ns",
    "blocking_rel", "transfer_ratio",
    "comm_iter_ratio", "slot_iter_ratio", "rank_peak_transfer", "group_peak_transfer",
    "peer_ratio",
    "prev_ratio", "job_iter_ratio", "job_peak_transfer",
    "mate_slot_peak", "mate_slot_ratio",
)

#: Features in nanoseconds of the job's own clock: they move when the job drifts (Holmes fig. 10a),
#: so the drift tuner tracks their means and shifts the trees' thresholds on them.
DRIFT_PRONE: tuple[str, ...] = (
    "duration_ns", "win_mean_ns", "win_q1_ns", "win_q2_ns", "win_q3_ns",
    "iteration_ns", "iteration_mean_ns", "rank_mean_op_ns",
)

#: Communicator kinds, from the name's prefix (``tp.12`` -> tp); 0 for names without a known one.
#: New kinds go last: a model's splits on ``comm_kind`` hold the old numbers. ``edp`` and ``embd``
#: are the layout's names (``sleuth.layout.KINDS``) for the expert data-parallel and tied-embedding
#: groups; until they were listed both read as 0, one kind with every unknown name.
COMM_KINDS: tuple[str, ...] = ("", "tp", "pp", "dp", "cp", "ep", "sp", "emb", "world", "edp", "embd")


_TENSOR_KIND = COMM_KINDS.index("tp")
_ORDINAL_BITS = 24
_RANK_LIMIT = 1 << 20


@dataclass(frozen=True)
class Chunk:
    """Features of a chunk's records: ``X`` rows align with ``index`` (positions in the batch)."""

    X: np.ndarray  # (n, len(FEATURE_NAMES)) float64, NaN where unknown
    index: np.ndarray  # positions in the RecordBatch of each row
    rows: np.ndarray  # identity row of each instance
    duration: np.ndarray  # float64 ns
    transfer: np.ndarray  # float64 ns, NaN when the peers' records were not all present
    iteration: np.ndarray  # int64, each instance's training step
    start: np.ndarray  # int64 ns, each instance's start
    group: np.ndarray  # int64 0..G-1, the instance's group in the chunk: one collective's members, or a send and its receive
    rank_rows: np.ndarray  # int64, the instance's (job, rank) row, stable across chunks


class OperatorWindows:
    """Per-identity windows of normal durations and the features they give.

    ``window``: normal durations kept per identity; ``min_history``: how many before the window is
    trusted over the chunk's own values. Each window is kept sorted (its empty slots, NaN, last), each
    value marked with its push count modulo 2**16 (``_born``), by which the oldest is evicted: a push
    changes a window by one value, which an insertion places where sorting it anew costs most.
    """

    def __init__(self, *, window: int = DETECTION_RULES.operator_window,
                 min_history: int = DETECTION_RULES.min_history) -> None:
        integer("window", window, low=2, high=_MAX_WINDOW)
        integer("min_history", min_history, low=1, high=window, high_shown=f"window ({window})")
        self.window = window
        self.min_history = min_history
        self._jobs: dict[str, int] = {}
        self._comms: dict[tuple[int, str], int] = {}
        self._comm_kind: list[int] = []
        self._comm_members = np.zeros(0, np.int64)
        self._streams = KeyIds()  # (job, rank, comm) packed -> stream id
        self._keys = np.zeros(0, np.uint64)  # sorted identity keys
        self._key_rows = np.zeros(0, np.int64)
        self._n = 0
        self._ring = np.full((0, window), np.nan)
        self._transfer_ring = np.full((0, window), np.nan)
        self._born = np.zeros((0, window), np.uint16)  # each slot's push count, modulo 2**16
        self._tborn = np.zeros((0, window), np.uint16)
        self._filled = np.zeros(0, np.int64)
        self._tfilled = np.zeros(0, np.int64)
        self._stats = np.full((0, 8), np.nan)  # count mean std q1 q2 q3 transfer-median spare
        self._last_ratio = np.full(0, np.nan)  # each identity's last instance's ratio, judged normal or not
        self._ranks = KeyIds()  # (job, rank) packed -> row
        self._rank_iter = np.full((0, window), np.nan)
        self._rank_iter_filled = np.zeros(0, np.int64)
        self._rank_last_iter = np.full(0, np.nan)
        self._rank_iter_mean = np.full(0, np.nan)
        self._rank_tensor = np.full(0, -1, np.int64)  # each rank row's tensor-parallel comm id, -1 if none seen

    def __len__(self) -> int:
        """Operator identities known."""
        return self._n

    # -- identities ----------------------------------------------------------------------------

    def forget(self, jobs: set[str]) -> np.ndarray:
        """Drop the identities, ranks and communicators of ``jobs`` (idle ones) and number the rest
        afresh, compactly, their windows kept. Returns the new row of each old rank row (-1: dropped),
        for state kept per rank row elsewhere (``CounterfactualReplay.renumber``)."""
        n_ranks = len(self._ranks)
        gone = {self._jobs.pop(job) for job in jobs if job in self._jobs}
        if not gone:
            return np.arange(n_ranks)
        job_map = {old: new for new, old in enumerate(sorted(self._jobs.values()))}
        self._jobs = {name: job_map[old] for name, old in self._jobs.items()}

        comm_map = np.full(len(self._comms), -1, np.int64)
        comms: dict[tuple[int, str], int] = {}
        for (job, name), old in sorted(self._comms.items(), key=lambda item: item[1]):
            if job in job_map:
                comm_map[old] = comms[(job_map[job], name)] = len(comms)
        kept = np.flatnonzero(comm_map >= 0)
        self._comms = comms
        self._comm_kind = [self._comm_kind[c] for c in kept.tolist()]
        self._comm_members = self._comm_members[kept]

        stream_map = np.full(len(self._streams), -1, np.int64)
        streams: dict[int, int] = {}
        for key, old in sorted(self._streams.items(), key=lambda item: item[1]):
            if key >> 44 in job_map:
                rank, comm = (key >> 24) & (_RANK_LIMIT - 1), key & ((1 << 24) - 1)
                new_key = (job_map[key >> 44] << 44) | (rank << 24) | int(comm_map[comm])
                stream_map[old] = streams[new_key] = len(streams)
        self._streams = KeyIds(streams)

        stream = stream_map[(self._keys >> np.uint64(_ORDINAL_BITS)).astype(np.int64)]
        alive = stream >= 0
        ordinal = self._keys[alive] & np.uint64((1 << _ORDINAL_BITS) - 1)
        keys = (stream[alive].astype(np.uint64) << np.uint64(_ORDINAL_BITS)) | ordinal
        old_rows = self._key_rows[alive]
        kept = np.sort(old_rows)
        row_map = np.full(self._n, -1, np.int64)
        row_map[kept] = np.arange(len(kept))
        order = np.argsort(keys, kind="stable")
        self._keys, self._key_rows, self._n = keys[order], row_map[old_rows][order], len(kept)
        for name in ("_ring", "_transfer_ring", "_born", "_tborn", "_filled", "_tfilled", "_stats", "_last_ratio"):
            setattr(self, name, getattr(self, name)[kept])

        rank_map = np.full(n_ranks, -1, np.int64)
        ranks: dict[int, int] = {}
        for key, old in sorted(self._ranks.items(), key=lambda item: item[1]):
            if key >> 32 in job_map:
                rank_map[old] = ranks[(job_map[key >> 32] << 32) | (key & 0xFFFFFFFF)] = len(ranks)
        self._ranks = KeyIds(ranks)
        kept = np.flatnonzero(rank_map >= 0)
        for name in ("_rank_iter", "_rank_iter_filled", "_rank_last_iter", "_rank_iter_mean"):
            setattr(self, name, getattr(self, name)[kept])
        tensor = self._rank_tensor[kept]
        self._rank_tensor = np.where(tensor >= 0, comm_map[np.maximum(tensor, 0)], -1)
        return rank_map

    def _job_ids(self, batch: RecordBatch | IterationBatch) -> np.ndarray:
        return np.array([self._jobs.setdefault(s, len(self._jobs)) for s in batch.strings], np.int64)

    def _comm_ids(self, records: RecordBatch, job_of_string: np.ndarray) -> np.ndarray:
        """Detector-wide comm id of each record (comm names are only unique within a job)."""
        pairs = unique_inverse((records["job"].astype(np.int64) << 32) | records["comm"].astype(np.int64))
        ids = np.empty(len(pairs[0]), np.int64)
        for k, packed in enumerate(pairs[0].tolist()):
            job = int(job_of_string[packed >> 32])
            name = records.strings[packed & 0xFFFFFFFF]
            key = (job, name)
            comm = self._comms.get(key)
            if comm is None:
                comm = self._comms[key] = len(self._comms)
                prefix = name.split(".", 1)[0] if "." in name else ""
                self._comm_kind.append(COMM_KINDS.index(prefix) if prefix in COMM_KINDS else 0)
            ids[k] = comm
        if len(self._comms) > len(self._comm_members):
            grown = np.zeros(max(len(self._comms), 2 * len(self._comm_members), 64), np.int64)
            grown[: len(self._comm_members)] = self._comm_members
            self._comm_members = grown
        return ids[pairs[1]]

    def _rank_rows(self, job: np.ndarray, rank: np.ndarray) -> np.ndarray:
        packed = (job << 32) | rank
        unique, inverse = unique_inverse(packed)
        rows = self._ranks.ids(unique)
        n = len(self._ranks)
        if n > len(self._rank_last_iter):
            size = max(n, 2 * len(self._rank_last_iter), 64)
            self._rank_iter = _grow(self._rank_iter, size, np.nan)
            self._rank_iter_filled = _grow(self._rank_iter_filled, size, 0)
            self._rank_last_iter = _grow(self._rank_last_iter, size, np.nan)
            self._rank_iter_mean = _grow(self._rank_iter_mean, size, np.nan)
            self._rank_tensor = _grow(self._rank_tensor, size, -1)
        return rows[inverse]

    def _identity_rows(self, job: np.ndarray, rank: np.ndarray, comm: np.ndarray,
                       ordinal: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The identity row of each instance, and its (job, rank, comm) stream's dense id in the chunk."""
        stream_key = (job << 44) | (rank << 24) | comm
        unique, inverse = unique_inverse(stream_key)
        streams = self._streams.ids(unique)
        keys = ((streams[inverse] << _ORDINAL_BITS) | ordinal).astype(np.uint64)
        ukeys, kinverse = unique_inverse(keys)
        pos = np.searchsorted(self._keys, ukeys)
        found = (pos < len(self._keys)) & (self._keys[np.minimum(pos, len(self._keys) - 1)] == ukeys) if len(self._keys) else np.zeros(len(ukeys), bool)
        rows = np.empty(len(ukeys), np.int64)
        rows[found] = self._key_rows[pos[found]]
        new = ~found
        if new.any():
            count = int(new.sum())
            rows[new] = np.arange(self._n, self._n + count)
            self._n += count
            merged = np.concatenate([self._keys, ukeys[new]])
            order = np.argsort(merged, kind="stable")
            self._keys = merged[order]
            self._key_rows = np.concatenate([self._key_rows, rows[new]])[order]
            if self._n > len(self._ring):
                size = max(self._n, 2 * len(self._ring), 1024)
                self._ring = _grow(self._ring, size, np.nan)
                self._transfer_ring = _grow(self._transfer_ring, size, np.nan)
                self._born = _grow(self._born, size, 0)
                self._tborn = _grow(self._tborn, size, 0)
                self._filled = _grow(self._filled, size, 0)
                self._tfilled = _grow(self._tfilled, size, 0)
                self._stats = _grow(self._stats, size, np.nan)
                self._last_ratio = _grow(self._last_ratio, size, np.nan)
        return rows[kinverse], inverse

    # -- features ------------------------------------------------------------------------------

    def features(self, records: RecordBatch, iterations: IterationBatch | None = None) -> Chunk:
        """Features of every record with a known iteration (``iteration >= 0``), in one pass.

        ``iterations`` (the same chunk's iteration records, if any) give the iteration-time
        features; ranks without one use the last time seen for them.
        """
        keep = np.flatnonzero(records["iteration"] >= 0)
        if len(keep) < len(records):
            records = records.take(keep)
        n = len(records)
        if n and int(records["rank"].max()) >= _RANK_LIMIT:
            raise RecordError(f"rank {int(records['rank'].max())} is beyond the detector's limit of {_RANK_LIMIT - 1}")
        # Column-major: every column is written below one by one, each then one contiguous pass.
        X = np.empty((n, len(FEATURE_NAMES)), order="F")
        if not n:
            empty = np.zeros(0)
            none = np.zeros(0, np.int64)
            return Chunk(X, keep, none, empty, empty, none, none, none, none)
        job_of_string = self._job_ids(records)
        job = job_of_string[records["job"]]
        rank = records["rank"].astype(np.int64)
        comm = self._comm_ids(records, job_of_string)
        iteration = records["iteration"]
        seq = records["seq"]
        start = records["t_start_ns"]
        duration = (records["t_end_ns"] - start).astype(np.float64)

        # Ordinal of each record among its (job, rank, comm, iteration) in seq order.
        order = _stable_order(job, rank, comm, iteration, seq)
        group = np.stack([job[order], rank[order], comm[order], iteration[order]])
        starts = np.ones(n, bool)
        starts[1:] = (group[:, 1:] != group[:, :-1]).any(axis=0)
        ordinal = np.empty(n, np.int64)
        ordinal[order] = places_in_runs(starts)
        if int(ordinal.max()) >= 1 << _ORDINAL_BITS:
            raise RecordError(f"more than {1 << _ORDINAL_BITS} operators on one communicator in one iteration")
        rows, stream = self._identity_rows(job, rank, comm, ordinal)

        # Blocking and transfer (docs/design.md): from the members' records present in this chunk,
        # grouped as the replay groups them (``sleuth.whatif.timeline.member_groups``).
        peer = records["peer"].astype(np.int64)
        p2p = peer >= 0
        member_group = member_groups(comm, records["seq"], rank, peer, records["op"])
        # Members are distinct ranks (a P2P operator without a direction pairs on {rank, peer}).
        first_of_rank = np.zeros(n, bool)
        first_of_rank[_one_of_each(_group_ids(member_group, rank))] = True
        members = np.bincount(member_group[first_of_rank], minlength=int(member_group.max()) + 1)
        latest = np.full(len(members), np.iinfo(np.int64).min)
        np.maximum.at(latest, member_group, start)
        np.maximum.at(self._comm_members, comm, members[member_group])
        complete = members[member_group] >= self._comm_members[comm]
        complete &= members[member_group] > 1
        blocking = np.where(complete, (latest[member_group] - start).astype(np.float64), np.nan)
        transfer = np.where(complete, (records["t_end_ns"] - latest[member_group]).astype(np.float64), np.nan)

        kind = np.asarray(self._comm_kind, np.int64)[comm]
        peers = _peer_window(_group_ids(job, kind, ordinal, records["op"].astype(np.int64),
                                        records["nbytes"].astype(np.int64)), rank, duration, transfer)
        count, mean, std, q1, q2, q3, tmed = self._window_stats(rows, duration, peers)
        rank_rows = self._rank_rows(job, rank)
        it_time = self._iteration_times(records, iterations, job, rank, iteration, rank_rows)
        it_mean = self._rank_iter_mean[rank_rows]
        it_mean = np.where(np.isnan(it_mean), it_time, it_mean)
        # Mean window operator time of the rank: over this chunk's identities of the rank.
        sums = np.bincount(rank_rows, weights=np.nan_to_num(mean), minlength=len(self._ranks))
        counts = np.bincount(rank_rows, weights=~np.isnan(mean), minlength=len(self._ranks))
        op_mean = (sums / np.maximum(counts, 1))[rank_rows]

        safe_q2 = np.where(q2 > 0, q2, np.nan)
        X[:, 0] = duration
        X[:, 1] = mean
        X[:, 2] = std
        # Robust z-score (median, IQR / 1.349): a few slow values that slipped into the window, or
        # a slot's slowed peers, would inflate a standard deviation and hide the next slow instance.
        robust_std = (q3 - q1) / 1.349
        X[:, 3] = (duration - q2) / np.where(robust_std > 0, robust_std, np.nan)
        X[:, 4] = q1
        X[:, 5] = q2
        X[:, 6] = q3
        X[:, 7] = q3 - q1
        X[:, 8] = duration / safe_q2
        X[:, 9] = (q3 - q1) / safe_q2
        X[:, 10] = count
        X[:, 11] = rank
        X[:, 12] = records["nbytes"].astype(np.float64)
        X[:, 13] = records["op"]
        X[:, 14] = kind
        X[:, 15] = it_time
        X[:, 16] = it_mean
        X[:, 17] = it_time / np.where(it_mean > 0, it_mean, np.nan)
        X[:, 18] = op_mean
        X[:, 19] = blocking / safe_q2
        X[:, 20] = transfer / np.where(tmed > 0, tmed, np.nan)
        slot = _group_ids(kind, ordinal)
        X[:, 21:25] = _chunk_context(X[:, 8], X[:, 20], job, stream, slot, iteration, rank_rows, member_group)
        X[:, 25] = duration / np.where(peers.q2 > 0, peers.q2, np.nan)
        X[:, 26] = _previous(rows, iteration, X[:, 8], self._last_ratio)
        X[:, 27:29] = _job_context(X[:, 8], X[:, 20], job, iteration)
        tensor = kind == _TENSOR_KIND
        self._rank_tensor[rank_rows[tensor]] = comm[tensor]
        # The mates' same operator: same slot, op and, for P2P, the same direction and distance to
        # the peer (a middle pipeline stage has two pp communicators, whose ordinals coincide).
        same_op = _group_ids(slot, records["op"].astype(np.int64), np.where(p2p, peer - rank, 0))
        X[:, 29:31] = _mate_context(X[:, 8], self._rank_tensor[rank_rows], rank_rows, same_op, iteration)
        # A zero spread (identical values) gives an infinite z-score the trees cannot split: cap it.
        np.clip(X[:, 3], -1e6, 1e6, out=X[:, 3])
        return Chunk(X, keep, rows, duration, transfer, iteration.astype(np.int64), start.astype(np.int64), member_group,
                     rank_rows)

    def _window_stats(self, rows: np.ndarray, duration: np.ndarray, peers: _PeerWindow) -> tuple[np.ndarray, ...]:
        """Per instance: the identity's window statistics; where its history is short, its peers'
        (enough ranks in the slot) or else the chunk's own instances of it (the self-window)."""
        st = self._stats[rows]
        count = self._filled[rows].astype(np.float64)
        trusted = count >= self.min_history
        out = [np.minimum(count, self.window)] + [st[:, k].copy() for k in range(1, 6)] + [st[:, 6].copy()]
        if not trusted.all():
            by_peers = np.flatnonzero(~trusted & peers.enough)
            for k, column in enumerate((peers.mean, peers.std, peers.q1, peers.q2, peers.q3, peers.transfer), 1):
                out[k][by_peers] = column[by_peers]
            alone = np.flatnonzero(~trusted & ~peers.enough)
            if len(alone):
                own = _group_stats(rows[alone], duration[alone])
                for k in range(1, 6):
                    out[k][alone] = own[k - 1]
        return tuple(out)

    def _iteration_times(self, records: RecordBatch, iterations: IterationBatch | None, job: np.ndarray,
                         rank: np.ndarray, iteration: np.ndarray, rank_rows: np.ndarray) -> np.ndarray:
        times = self._rank_last_iter[rank_rows].copy()
        if iterations is None or not len(iterations):
            return times
        ijob = self._job_ids(iterations)[iterations["job"]]
        ikey = (ijob << 52) | (iterations["rank"].astype(np.int64) << 32) | (iterations["iteration"] & 0xFFFFFFFF)
        order = np.argsort(ikey)
        ikey = ikey[order]
        spans = (iterations["t_end_ns"] - iterations["t_start_ns"])[order].astype(np.float64)
        key = (job << 52) | (rank << 32) | (iteration & 0xFFFFFFFF)
        pos = np.minimum(np.searchsorted(ikey, key), len(ikey) - 1)
        hit = ikey[pos] == key
        times[hit] = spans[pos[hit]]
        return times

    # -- learning the windows ------------------------------------------------------------------

    def push(self, chunk: Chunk | None, normal: np.ndarray | None, iterations: IterationBatch | None = None) -> None:
        """Add the chunk's instances judged ``normal`` to their identities' windows, and the
        iteration records' times to their ranks' windows; every instance's ratio, normal or not,
        becomes its identity's ``prev_ratio``."""
        one_iteration = chunk is not None and _one_iteration(chunk.iteration)
        if chunk is not None and len(chunk.rows):
            if one_iteration:  # each identity once
                self._last_ratio[chunk.rows] = chunk.X[:, FEATURE_NAMES.index("ratio")]
            else:  # where the chunk holds several iterations of an identity, its latest instance's
                latest = _stable_order(chunk.rows, chunk.iteration)
                last = np.r_[chunk.rows[latest][1:] != chunk.rows[latest][:-1], True]
                self._last_ratio[chunk.rows[latest[last]]] = chunk.X[latest[last], FEATURE_NAMES.index("ratio")]
        rows = chunk.rows[normal] if chunk is not None and normal is not None else np.zeros(0, np.int64)
        if len(rows) and one_iteration:
            self._append(rows, chunk.duration[normal], chunk.transfer[normal])
        elif len(rows):
            # A chunk spanning several iterations may hold an identity more than once: its values go
            # in rounds, oldest first, so that each takes its own slot.
            values, transfers = chunk.duration[normal], chunk.transfer[normal]
            order = np.argsort(rows, kind="stable")
            rows, values, transfers = rows[order], values[order], transfers[order]
            opens = np.r_[True, rows[1:] != rows[:-1]]
            position = np.arange(len(rows))
            rounds = position - np.maximum.accumulate(np.where(opens, position, 0))
            for r in range(int(rounds.max()) + 1):
                pick = rounds == r
                self._append(rows[pick], values[pick], transfers[pick])
        if iterations is not None and len(iterations):
            job = self._job_ids(iterations)[iterations["job"]]
            rank_rows = self._rank_rows(job, iterations["rank"].astype(np.int64))
            spans = (iterations["t_end_ns"] - iterations["t_start_ns"]).astype(np.float64)
            order = np.argsort(iterations["iteration"], kind="stable")
            for r, span in zip(rank_rows[order].tolist(), spans[order].tolist()):
                self._rank_iter[r, self._rank_iter_filled[r] % self.window] = span
                self._rank_iter_filled[r] += 1
                self._rank_last_iter[r] = span
            touched = np.unique(rank_rows)
            with np.errstate(invalid="ignore"):
                self._rank_iter_mean[touched] = np.nanmean(self._rank_iter[touched], axis=1)

    def _append(self, rows: np.ndarray, values: np.ndarray, transfers: np.ndarray) -> None:
        """Each of the distinct ``rows`` takes its value, and its transfer where known, into its sorted
        windows, and its statistics anew from them; compiled where built."""
        if _window_stats is None:
            self._numpy_append(rows, values, transfers)
            return
        _window_stats.push(self.window, np.ascontiguousarray(rows, np.int64), np.ascontiguousarray(values, np.float64),
                           np.ascontiguousarray(transfers, np.float64), self._ring, self._filled, self._born,
                           self._transfer_ring, self._tfilled, self._tborn, self._stats)

    def _numpy_append(self, rows: np.ndarray, values: np.ndarray, transfers: np.ndarray) -> None:
        """``_append`` in numpy: the reference the compiled one follows, and its stand-in where not built."""
        known = ~np.isnan(transfers)
        _numpy_push(self.window, rows, values, self._ring, self._filled, self._born)
        _numpy_push(self.window, rows[known], transfers[known], self._transfer_ring, self._tfilled, self._tborn)
        self._numpy_refresh(rows)

    def _numpy_refresh(self, rows: np.ndarray) -> None:
        """The statistics of the identities at ``rows`` (distinct) from their windows, in numpy."""
        ring = self._ring[rows]  # a copy (fancy index), sorted (NaN last) whatever kept it so: what the statistics need
        ring.sort(axis=1)
        n = np.minimum(self._filled[rows], self.window)
        tring = self._transfer_ring[rows]
        tring.sort(axis=1)
        tn = np.minimum(self._tfilled[rows], self.window)
        mean, std = _nan_mean_std(ring, n)
        self._stats[rows, :7] = np.column_stack([n, mean, std, _sorted_quantile(ring, n, 0.25),
                                                 _sorted_quantile(ring, n, 0.5), _sorted_quantile(ring, n, 0.75),
                                                 _sorted_quantile(tring, tn, 0.5)])


def _numpy_push(width: int, rows: np.ndarray, values: np.ndarray, window: np.ndarray, filled: np.ndarray,
                born: np.ndarray) -> None:
    """The compiled push's insertion in numpy: each of the distinct ``rows`` takes its value into its sorted
    ``window``, in the slot of the value pushed ``width`` pushes before once full (else the first
    empty one), then the window sorted again (NaN last), its push marks along."""
    count = filled[rows]
    oldest = ((count - width) % 2**16).astype(np.uint16)
    slot = np.where(count >= width, np.argmax(born[rows] == oldest[:, None], axis=1), np.minimum(count, width - 1))
    window[rows, slot] = values
    born[rows, slot] = (count % 2**16).astype(np.uint16)
    order = np.argsort(window[rows], axis=1, kind="stable")
    window[rows] = np.take_along_axis(window[rows], order, axis=1)
    born[rows] = np.take_along_axis(born[rows], order, axis=1)
    filled[rows] = count + 1


@dataclass(frozen=True)
class _PeerWindow:
    """Per instance: statistics of its program slot's instances in the chunk (every rank's)."""

    enough: np.ndarray  # the slot spans at least AttributionRules.min_peers ranks
    mean: np.ndarray  # the median: robust to the slowed minority
    std: np.ndarray  # from the IQR, likewise
    q1: np.ndarray
    q2: np.ndarray  # NaN where not enough
    q3: np.ndarray
    transfer: np.ndarray  # median known transfer of the slot, NaN if none


def _peer_window(slot: np.ndarray, rank: np.ndarray, duration: np.ndarray, transfer: np.ndarray) -> _PeerWindow:
    """The peer window of each instance, ``slot`` being its dense program-slot id."""
    first_of_rank = np.zeros(len(slot), bool)
    first_of_rank[_one_of_each(_group_ids(slot, rank))] = True
    enough = np.bincount(slot[first_of_rank], minlength=int(slot.max()) + 1)[slot] >= ATTRIBUTION_RULES.min_peers
    slots = _SortedGroups(slot, duration)
    q1, q2, q3 = (slots.quantile(q)[slots.group] for q in (0.25, 0.5, 0.75))
    # Robust location and scale: the slot's slowed ranks are outliers among its peers, and a mean
    # and standard deviation they inflate would hide them (the z-score of a x3.7 operator was 2.3).
    # IQR / 1.349 is the standard deviation of a normal sample with that IQR.
    mean, std = q2, (q3 - q1) / 1.349
    known = np.flatnonzero(~np.isnan(transfer))
    median_transfer = np.full(len(slot), np.nan)
    if len(known):
        at = np.full(int(slot.max()) + 1, np.nan)
        transfers = _SortedGroups(slot[known], transfer[known])
        at[slot[known][transfers.first]] = transfers.quantile(0.5)
        median_transfer = at[slot]
    return _PeerWindow(enough, mean, std, q1, np.where(enough, q2, np.nan), q3, median_transfer)


def _chunk_context(ratio: np.ndarray, transfer_ratio: np.ndarray, job: np.ndarray, stream: np.ndarray, slot: np.ndarray,
                   iteration: np.ndarray, rank_rows: np.ndarray, member_group: np.ndarray) -> np.ndarray:
    """Scale-free evidence from the instance's neighbours in the chunk, four columns:

    * the geometric mean ratio of the rank's instances on the same communicator in the same
      iteration: a slowdown that lasts the iteration lifts them all, while jitter averages out;
    * the same over every rank's instance of the same program slot (communicator kind and
      ordinal) in the iteration: a fault that slows many groups a little (a slow NIC on a shared
      path) shows across the groups, whose jitter is independent;
    * the largest transfer ratio of the rank in the iteration: its network path was hit;
    * the largest of those over the members of the instance's group (comm, seq / pair): a
      member's slow NIC lengthens an operator whose own transfer barely moved.
    """
    log_ratio = np.log(np.clip(np.nan_to_num(ratio, nan=1.0), 1e-3, 1e3))
    step = iteration.astype(np.int64) & 0xFFFFFF
    # ``stream`` (the chunk's dense (job, rank, comm) ids) spans few values: grouped by a table, not a sort.
    series = _group_ids(stream, step)
    sums = np.bincount(series, weights=log_ratio)
    counts = np.bincount(series)
    out = np.empty((len(ratio), 4))
    out[:, 0] = np.exp(sums / counts)[series]
    slots = _group_ids(job, slot, step)
    out[:, 1] = np.exp(np.bincount(slots, weights=log_ratio) / np.bincount(slots))[slots]
    rank_iteration = _group_ids(rank_rows, step)
    peak = np.zeros(int(rank_iteration.max()) + 1)
    np.maximum.at(peak, rank_iteration, np.nan_to_num(transfer_ratio, nan=0.0))
    out[:, 2] = peak[rank_iteration]
    group_peak = np.zeros(int(member_group.max()) + 1)
    np.maximum.at(group_peak, member_group, out[:, 2])
    out[:, 3] = group_peak[member_group]
    return out


def _previous(rows: np.ndarray, iteration: np.ndarray, ratio: np.ndarray, last: np.ndarray) -> np.ndarray:
    """Each instance's identity's ratio one instance earlier: in the chunk where the chunk holds an
    earlier iteration of the identity, else the last one pushed (``last``, per identity row).

    A slowdown that lasts (a degraded NIC, a contended host) keeps its operators slow from one
    iteration to the next; a benign pause of one rank, which lengthens every group's operators
    in its iteration as a fault does, is over by the next one.
    """
    previous = last[rows]
    if _one_iteration(iteration):  # each identity once: its last one pushed
        return previous
    order = _stable_order(rows, iteration)
    same = rows[order][1:] == rows[order][:-1]
    previous[order[1:][same]] = ratio[order[:-1][same]]
    return previous


def _job_context(ratio: np.ndarray, transfer_ratio: np.ndarray, job: np.ndarray, iteration: np.ndarray) -> np.ndarray:
    """Evidence from the whole job's instances in the chunk, per iteration, two columns:

    * the geometric mean ratio of every instance of the job in the iteration: how far the
      iteration as a whole (as far as the chunk holds it) ran over its windows;
    * the largest transfer ratio of any instance of the job in the iteration: whether some
      group's transfer, not a late launcher, is slow. A rank that stalls (a garbage-collection
      pause) makes every group wait for it and every operator of the job longer, as a slow NIC
      does through the pipeline; but the stalled rank's groups wait in blocking, a slow NIC's
      groups in transfer, several times their usual one. Where the stalled rank is not in the
      chunk its groups' transfers look longer too, by the length of the pause, not by the
      bandwidth a faulty NIC or link lost. 0 where no transfer of the iteration is known (no
      group of the job complete in the chunk).
    """
    log_ratio = np.log(np.clip(np.nan_to_num(ratio, nan=1.0), 1e-3, 1e3))
    steps = _group_ids(job, iteration.astype(np.int64))
    out = np.empty((len(ratio), 2))
    out[:, 0] = np.exp(np.bincount(steps, weights=log_ratio) / np.bincount(steps))[steps]
    peak = np.zeros(int(steps.max()) + 1)
    np.maximum.at(peak, steps, np.nan_to_num(transfer_ratio, nan=0.0))
    out[:, 1] = peak[steps]
    return out


def _mate_context(ratio: np.ndarray, tensor: np.ndarray, rank_rows: np.ndarray, same_op: np.ndarray,
                  iteration: np.ndarray) -> np.ndarray:
    """Evidence from the instance's tensor-parallel mates (the other ranks of its ``tp`` group in
    the chunk), per operator and iteration, two columns:

    * the largest ratio of the same operator on a mate;
    * the geometric mean ratio of the same operator over the mates.

    ``same_op``: the id of each instance's operator in its rank's program (communicator kind,
    ordinal, op, and for P2P the peer's offset from the rank), which a rank holds once an iteration.

    Tensor mates run the same program in lockstep (an all-reduce every layer), so whatever delays
    one delays the others' next operators: a slow NIC's own pipeline send at x4 of its window makes
    its mates' sends of the same micro-batch wait for their receivers, x1.1-1.3 of their windows,
    within their own jitter. Their peers (the next stage) are rarely in a worker's sample, so their
    blocking is unknown; the mate's slow send at the same slot is known. NaN where the rank has no
    mate in the chunk (no ``tp`` communicator seen, or its group's other ranks elsewhere).
    """
    log_ratio = np.log(np.clip(np.nan_to_num(ratio, nan=1.0), 1e-3, 1e3))
    # A rank without a tensor group is a group of its own (negative ids cannot meet a comm id).
    group = np.where(tensor >= 0, tensor, -1 - rank_rows)
    key = _group_ids(group, same_op, iteration.astype(np.int64))
    out = np.full((len(ratio), 2), np.nan)
    counts = np.bincount(key)
    mates = counts[key] - 1
    has = mates > 0
    sums = np.bincount(key, weights=log_ratio)
    out[has, 1] = np.exp((sums[key][has] - log_ratio[has]) / mates[has])
    # The largest of the others: the group's largest, or for the one holding it the largest of the
    # rest (the largest again where several hold it); no sort needed.
    top = np.full(len(counts), -np.inf)
    np.maximum.at(top, key, log_ratio)
    holds = log_ratio == top[key]
    rest = np.full(len(counts), -np.inf)
    np.maximum.at(rest, key[~holds], log_ratio[~holds])
    second = np.where(np.bincount(key[holds], minlength=len(counts)) > 1, top, rest)
    peak = np.where(holds, second[key], top[key])
    out[has, 0] = np.exp(peak[has])
    return out


def _stable_order(*keys: np.ndarray) -> np.ndarray:
    """``np.lexsort(keys[::-1])``: a stable sort by the keys, the first most significant; one
    stable argsort of them packed into one int64 where they fit (records mostly arrive in order)."""
    packed = packed_key(keys)
    return np.lexsort(keys[::-1]) if packed is None else np.argsort(packed, kind="stable")


def _one_iteration(iteration: np.ndarray) -> bool:
    """Whether a chunk's records are all of one iteration: then each identity (job, rank, comm and
    ordinal in the iteration) has one instance in it, and no sort is needed to order its instances."""
    return bool(len(iteration)) and int(iteration.min()) == int(iteration.max())


def _one_of_each(ids: np.ndarray) -> np.ndarray:
    """A position of each dense id (0..max, all present): where counting distinct ids is all that is asked."""
    where = np.empty(int(ids.max()) + 1, np.int64)
    where[ids] = np.arange(len(ids))
    return where


def _nan_mean_std(ring: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.nanmean`` and ``np.nanstd`` of each row holding ``n`` values (never NaN; each row has
    one), bit for bit: the same sums over the row with its empty slots as zeros, in fewer passes."""
    full = n == ring.shape[1]
    if full.all():  # full windows, the steady state: no empty slot to mask
        mean = ring.sum(axis=1) / n
        deviation = ring - mean[:, None]
        return mean, np.sqrt((deviation * deviation).sum(axis=1) / n)
    if full.any():  # each row's figures are its own: the full ones apart, unmasked
        mean, std = np.empty(len(n)), np.empty(len(n))
        for pick in (np.flatnonzero(full), np.flatnonzero(~full)):
            mean[pick], std[pick] = _nan_mean_std(ring[pick], n[pick])
        return mean, std
    empty = np.isnan(ring)
    values = np.where(empty, 0.0, ring)
    mean = values.sum(axis=1) / n
    deviation = np.where(empty, 0.0, values - mean[:, None])
    return mean, np.sqrt((deviation * deviation).sum(axis=1) / n)


def _sorted_quantile(ring: np.ndarray, n: np.ndarray, q: float) -> np.ndarray:
    """Linear-interpolated quantile of each row's first ``n`` (sorted) values; NaN where n == 0."""
    if len(n) and int(n.min()) == int(n.max()) > 0:  # one count for all rows (full windows): columns, no gather
        pos = (int(n[0]) - 1) * q
        lo = int(np.floor(pos))
        hi = min(lo + 1, int(n[0]) - 1)
        return ring[:, lo] + (ring[:, hi] - ring[:, lo]) * (pos - lo)
    pos = np.maximum(n - 1, 0) * q
    lo = np.floor(pos).astype(np.int64)
    hi = np.minimum(lo + 1, np.maximum(n - 1, 0))
    idx = np.arange(len(ring))
    value = ring[idx, lo] + (ring[idx, hi] - ring[idx, lo]) * (pos - lo)
    return np.where(n > 0, value, np.nan)


def _group_stats(rows: np.ndarray, values: np.ndarray) -> list[np.ndarray]:
    """mean, std, q1, q2, q3 of ``values`` grouped by ``rows``, broadcast back to each element."""
    groups = _SortedGroups(rows, values)
    mean = np.add.reduceat(groups.values, groups.starts) / groups.counts
    var = np.add.reduceat((groups.values - mean[groups.sorted_group]) ** 2, groups.starts) / groups.counts
    out = [mean, np.sqrt(var)] + [groups.quantile(q) for q in (0.25, 0.5, 0.75)]
    return [a[groups.group] for a in out]


class _SortedGroups:
    """``values`` sorted by group (``rows``) then value: each group's start, size and quantiles,
    and each element's group (``group``, in the groups' sorted order)."""

    def __init__(self, rows: np.ndarray, values: np.ndarray) -> None:
        order = by_group_then_value(rows, values)
        srows = rows[order]
        self.values = values[order]
        self.starts = np.flatnonzero(np.r_[True, srows[1:] != srows[:-1]])
        self.counts = np.diff(np.r_[self.starts, len(srows)])
        self.sorted_group = np.repeat(np.arange(len(self.starts)), self.counts)
        self.group = np.empty(len(rows), np.int64)
        self.group[order] = self.sorted_group
        self.first = order[self.starts]  # an element of each group

    def quantile(self, q: float) -> np.ndarray:
        """Each group's linear-interpolated ``q`` quantile."""
        pos = (self.counts - 1) * q
        lo = np.floor(pos).astype(np.int64)
        hi = np.minimum(lo + 1, self.counts - 1)
        low = self.values[self.starts + lo]
        return low + (self.values[self.starts + hi] - low) * (pos - lo)


def _grow(array: np.ndarray, size: int, fill: float) -> np.ndarray:
    shape = (size,) + array.shape[1:]
    out = np.full(shape, fill, dtype=array.dtype)
    out[: len(array)] = array
    return out

