"""Rows a random forest certainly votes below a share, found without walking its trees.

A box (per feature an interval, or "missing") bounds each tree's vote for every row inside it: the
largest class-1 fraction among the leaves such a row can reach. Where those bounds sum below
``below`` times the number of trees, every row inside is voted below ``below``, so its decisions
(not abnormal, normal enough to enter its window) are known without the walk that costs the
detector most of its time (``tree_votes``). The screen is exact: the same decisions as walking
every tree, whatever the boxes. So the boxes can be learned from the rows themselves: per kind of
row (which features are missing, the values of the categorical ones: trees split op codes at
arbitrary points), from rows the boxes missed, sampled over several chunks (some features are the
same for every row of an iteration), each box grown around the sample's median a feature at a
time towards its quantiles, then past them, as long as the bound allows. A box holds for one
forest: a forest whose splits moved (drift tuning) needs a screen of its own.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
from sklearn.ensemble import RandomForestClassifier

try:  # the compiled kinds and membership test (stream/detection/_screen.c); VoteScreen._numpy_kinds and
    # _numpy_screened are their reference
    from sleuth.stream.detection import _screen
except ImportError as error:  # not built on this machine: numpy gathers each kind's rows, a few times slower
    _screen = None  # type: ignore[assignment]
    logging.getLogger(__name__).warning("the vote screen's compiled membership test is not built (%s): numpy checks "
                                        "the boxes, a few times slower; reinstall sleuth with a C compiler", error)
try:  # the compiled bound (stream/detection/_vote_bound.c); _walk_bound below is its reference
    from sleuth.stream.detection import _vote_bound
except ImportError as error:  # not built on this machine: Python walks, a box takes about a second to grow
    _vote_bound = None  # type: ignore[assignment]
    logging.getLogger(__name__).warning("the forest's compiled vote bound is not built (%s): boxes grow slowly; "
                                        "reinstall sleuth with a C compiler", error)

__all__ = ["VoteScreen"]

#: The quantiles a box grows towards, each feature in turn at each: wide steps first, so that one
#: feature does not spend the bound's room before the others have any.
_GROWTH = (0.25, 0.1, 0.02, 0.005, 0.001, 0.0)
#: Past the sample: each edge moved out by so many of the box's width, in turn, while the bound allows.
_BEYOND = (0.25, 0.5, 1.0, 2.0, np.inf)
#: Room left between the bound and ``below`` x trees: the walk sums the trees' fractions in another
#: order, which may round differently by a few ulps.
_ROUNDING = 1e-9
#: Rows whose kinds are found together.
_BLOCK = 16_384
#: Bits of a kind's key: one a feature for "missing", then each categorical feature's code.
_CODE_BITS = 15
#: One row in so many of a kind enters its sample (at least ``_LEAST_A_CHUNK`` a chunk): a chunk's
#: rows come rank by rank, iteration by iteration, so every so many spans them.
_SAMPLE_EVERY = 64
_LEAST_A_CHUNK = 32
#: A sample this large spans enough to grow a box from at once (a backlog's chunk of many iterations).
_SAMPLE_ROWS = 2048
#: Or one that spans this many chunks: features of the whole iteration (the job's peak transfer)
#: take one value a chunk of one iteration, and a box must span the values they take.
_SPAN = 8
#: Boxes a kind may have: each further one grows from the rows the others missed.
_MAX_BOXES = 8
#: Kinds sampled at once: bounds the samples' memory (under 4,096 rows a kind: about 32 MB at most).
_MAX_KINDS = 64


class VoteScreen:
    """The rows of a feature matrix ``forest`` certainly votes below ``below`` (``screened``), with
    boxes ``learn`` grows from rows the screen did not cover, at most one a kind each call.

    ``categorical``: columns holding codes (integers in [0, 2**15)); a kind's boxes fix them.
    ``min_rows``: the sampled rows of one kind a box is grown from (fewer: quantiles of too few to matter).
    """

    def __init__(self, forest: RandomForestClassifier, below: float, *, categorical: tuple[int, ...] = (),
                 min_rows: int = 256) -> None:
        self.forest = forest
        self.below = below
        self.categorical = tuple(categorical)
        self.min_rows = min_rows
        trees = [e.tree_ for e in forest.estimators_]
        starts = np.cumsum([0] + [t.node_count for t in trees])
        self._roots = starts[:-1].astype(np.int64)

        def joined(name: str, offset: bool) -> np.ndarray:
            parts = [np.asarray(getattr(t, name), np.int64) for t in trees]
            if offset:  # a child's index into the joined arrays; a leaf's -1 stays
                parts = [np.where(p >= 0, p + s, p) for p, s in zip(parts, starts)]
            return np.ascontiguousarray(np.concatenate(parts))

        self._left, self._right = joined("children_left", True), joined("children_right", True)
        self._feature = joined("feature", False)
        self._threshold = np.ascontiguousarray(np.concatenate([t.threshold for t in trees]), np.float64)
        self._missing_left = np.ascontiguousarray(np.concatenate([t.missing_go_to_left for t in trees]), np.uint8)
        # value: (nodes, outputs, classes), each leaf's class fractions, as predict_proba reads them.
        self._value = np.ascontiguousarray(np.concatenate([t.value[:, 0, 1] for t in trees]), np.float64)
        self._limit = below * len(trees) - _ROUNDING
        self.n_features = forest.n_features_in_
        #: The features some tree splits on: a box constrains only these.
        self.split = np.unique(self._feature[self._left >= 0])
        self._split_at = np.ascontiguousarray(self.split, np.int64)  # as the compiled kinds read them
        self._categorical_at = np.asarray(self.categorical, np.int64)
        self._continuous = np.array([f for f in self.split if f not in self.categorical], np.int64)
        if len(self.split) + _CODE_BITS * len(self.categorical) > 62:
            raise ValueError(f"{len(self.split)} split features and {len(self.categorical)} codes do not fit a kind's 63-bit key")
        self._boxes: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}  # kind -> its boxes' edges, every column
        self._samples: dict[int, list[np.ndarray]] = {}  # kind -> rows the boxes missed, a block a chunk
        self._packed: _PackedBoxes | None = None  # the boxes as the compiled test reads them; None: pack anew

    @property
    def boxes(self) -> int:
        return sum(len(b) for b in self._boxes.values())

    def screened(self, X: np.ndarray, kinds: np.ndarray) -> np.ndarray:
        """Per row of ``X`` (the matrix the trees walk) of the ``kinds`` given, whether it lies in one of the boxes."""
        if _screen is None or X.dtype != np.float32 or not X.flags.c_contiguous or X.shape[1] != self.n_features:
            return self._numpy_screened(X, kinds)
        inside = np.zeros(len(X), bool)
        if not self._boxes or not len(X):
            return inside
        if self._packed is None:
            self._packed = _PackedBoxes.of(self._boxes)
        packed = self._packed
        _screen.screened(X.shape[1], X, np.ascontiguousarray(kinds, np.int64), packed.keys, packed.first_box, packed.lo,
                         packed.hi, packed.columns, packed.first_column, inside.view(np.uint8))
        return inside

    def _numpy_screened(self, X: np.ndarray, kinds: np.ndarray) -> np.ndarray:
        """``screened`` in numpy: the reference the compiled one follows, and its stand-in where not built."""
        inside = np.zeros(len(X), bool)
        if not self._boxes or not len(X):
            return inside
        for kind, boxes in self._boxes.items():
            rows = np.flatnonzero(kinds == kind)
            v = X[rows]
            for lo, hi in boxes:
                if not len(rows):
                    break
                # A value its kind has missing (NaN) compares False both ways: only the others are checked.
                within = ~((v < lo) | (v > hi)).any(axis=1)
                inside[rows[within]] = True
                rows, v = rows[~within], v[~within]
        return inside

    def learn(self, X: np.ndarray, kinds: np.ndarray) -> bool:
        """Sample the rows ``X`` (of the ``kinds`` given) the boxes missed; grow a box for each kind whose
        sample spans enough chunks or rows; whether one was grown."""
        for kind in np.unique(kinds[kinds >= 0]).tolist():
            if kind not in self._samples and len(self._samples) >= _MAX_KINDS:
                continue
            if len(self._boxes.get(kind, ())) >= _MAX_BOXES:
                continue
            rows = np.flatnonzero(kinds == kind)
            step = max(1, min(_SAMPLE_EVERY, len(rows) // _LEAST_A_CHUNK))
            blocks = self._samples.setdefault(kind, [])
            blocks.append(X[rows[::step][:_SAMPLE_ROWS]])
            while sum(len(b) for b in blocks[1:]) >= _SAMPLE_ROWS:
                del blocks[0]
        grown = False
        for kind, blocks in list(self._samples.items()):
            sampled = sum(len(b) for b in blocks)
            if sampled >= _SAMPLE_ROWS or (len(blocks) >= _SPAN and sampled >= self.min_rows):
                box = self._grow(np.concatenate(self._samples.pop(kind)))
                if box is not None:
                    self._boxes.setdefault(kind, []).append(box)
                    self._packed = None
                    grown = True
        return grown

    def bound(self, lo: np.ndarray, hi: np.ndarray, missing: np.ndarray) -> float:
        """The sum over trees of the largest class-1 fraction a row in the box can reach (full-width arrays)."""
        args = (self._roots, self._left, self._right, self._feature, self._threshold, self._missing_left, self._value,
                np.ascontiguousarray(lo, np.float64), np.ascontiguousarray(hi, np.float64),
                np.ascontiguousarray(missing, np.uint8))
        if _vote_bound is not None:
            return float(_vote_bound.vote_bound(*args))
        return _walk_bound(*args)

    def _widen(self, lo: np.ndarray, hi: np.ndarray, missing: np.ndarray, column: int, low: float, high: float) -> None:
        """Move the box's edges of ``column`` out to ``low`` and ``high``, each only if the bound allows."""
        for side, edge in ((lo, min(low, lo[column])), (hi, max(high, hi[column]))):
            was, side[column] = side[column], edge
            if edge != was and self.bound(lo, hi, missing) >= self._limit:
                side[column] = was

    def kinds(self, X: np.ndarray) -> np.ndarray:
        """Per row its kind: which split features are missing, and its categorical codes (-1: a code out of range)."""
        if _screen is None or X.dtype != np.float32 or not X.flags.c_contiguous or X.shape[1] != self.n_features:
            return self._numpy_kinds(X)
        key = np.empty(len(X), np.int64)
        _screen.kinds(X.shape[1], X, self._split_at, self._categorical_at, _CODE_BITS, key)
        return key

    def _numpy_kinds(self, X: np.ndarray) -> np.ndarray:
        """``kinds`` in numpy: the reference the compiled one follows, and its stand-in where not built."""
        key = np.zeros(len(X), np.int64)
        for start in range(0, len(X), _BLOCK):  # a block's missing flags stay in cache while each column's are read
            block = X[start:start + _BLOCK]
            missing = np.isnan(block)
            part = key[start:start + _BLOCK]
            for bit, column in enumerate(self.split):
                part |= missing[:, column].astype(np.int64) << bit
            for j, column in enumerate(self.categorical):
                code = block[:, column]
                known = ~missing[:, column]
                ok = ~known | ((code >= 0) & (code < 1 << _CODE_BITS) & (code == np.floor(code)))
                part |= np.where(known & ok, code, 0).astype(np.int64) << (len(self.split) + j * _CODE_BITS)
                part[~ok] = -1
        return key

    def _grow(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """A box around ``rows`` (one kind) within the bound: float32 edges of every column (unbounded
        where no tree splits); None where the kind's median is not below the bound."""
        first = rows[0]
        missing = np.isnan(first).astype(np.uint8)
        lo, hi = np.full(self.n_features, -np.inf), np.full(self.n_features, np.inf)
        for column in self.categorical:
            if not missing[column]:
                lo[column] = hi[column] = first[column]
        edges = {}  # per continuous feature: its values' quantiles at each growth step, low and high
        for column in self._continuous:
            if missing[column]:
                continue
            v = rows[:, column].astype(np.float64)
            v = v[np.isfinite(v)]
            if not len(v):
                return None
            lo[column] = hi[column] = np.median(v)
            edges[column] = np.quantile(v, np.r_[_GROWTH, 1.0 - np.asarray(_GROWTH)]).reshape(2, -1)
        if self.bound(lo, hi, missing) >= self._limit:
            return None  # the kind's own median may be voted abnormal: no box around it
        for step in range(len(_GROWTH)):
            for column, (low, high) in edges.items():
                self._widen(lo, hi, missing, column, low[step], high[step])
        # Then past the sample, as far as the bound allows: values later rows take and the sample did not.
        for reach in _BEYOND:
            for column in edges:
                width = reach * (hi[column] - lo[column]) if np.isfinite(reach) else np.inf
                if width > 0:  # a sample of one value gives no scale to reach out by, short of unbounded
                    self._widen(lo, hi, missing, column, lo[column] - width, hi[column] + width)
        # Edges moved inwards to float32, what the rows hold: a smaller box holds too, and compares without conversion.
        return _float32_at_least(lo), _float32_at_most(hi)


@dataclass(frozen=True)
class _PackedBoxes:
    """Every kind's boxes in flat arrays (``_screen.screened``): the kinds ascending, where each one's
    boxes begin, the boxes' float32 edges a row each, and the columns each box bounds."""

    keys: np.ndarray  # int64, ascending
    first_box: np.ndarray  # int64, len(keys) + 1
    lo: np.ndarray  # float32 (boxes, features)
    hi: np.ndarray
    columns: np.ndarray  # int64: each box's bounded columns, box after box
    first_column: np.ndarray  # int64, boxes + 1

    @classmethod
    def of(cls, boxes: dict[int, list[tuple[np.ndarray, np.ndarray]]]) -> _PackedBoxes:
        keys = sorted(boxes)
        edges = [edge for kind in keys for edge in boxes[kind]]
        lo = np.ascontiguousarray(np.stack([low for low, _ in edges]), np.float32)
        hi = np.ascontiguousarray(np.stack([high for _, high in edges]), np.float32)
        # An infinite edge excludes nothing (a missing value compares false, as with any edge): skipped.
        bounded = [np.flatnonzero(np.isfinite(low) | np.isfinite(high)) for low, high in zip(lo, hi)]
        return cls(np.array(keys, np.int64), np.cumsum([0] + [len(boxes[k]) for k in keys]).astype(np.int64), lo, hi,
                   np.concatenate(bounded).astype(np.int64),
                   np.cumsum([0] + [len(b) for b in bounded]).astype(np.int64))


def _float32_at_least(x: np.ndarray) -> np.ndarray:
    """The smallest float32 at or above each value."""
    y = x.astype(np.float32)
    return np.where(y < x, np.nextafter(y, np.float32(np.inf)), y)


def _float32_at_most(x: np.ndarray) -> np.ndarray:
    """The largest float32 at or below each value."""
    y = x.astype(np.float32)
    return np.where(y > x, np.nextafter(y, np.float32(-np.inf)), y)


def _walk_bound(roots: np.ndarray, left: np.ndarray, right: np.ndarray, feature: np.ndarray, threshold: np.ndarray,
                missing_left: np.ndarray, value: np.ndarray, lo: np.ndarray, hi: np.ndarray, missing: np.ndarray) -> float:
    """``_vote_bound.vote_bound`` in Python: per tree the largest leaf value a row in the box reaches, summed."""
    total = 0.0
    for root in roots:
        best, stack = 0.0, [int(root)]
        while stack:
            node = stack.pop()
            if left[node] < 0:
                best = max(best, float(value[node]))
                continue
            j = feature[node]
            if missing[j]:
                stack.append(int(left[node] if missing_left[node] else right[node]))
                continue
            if lo[j] <= threshold[node]:
                stack.append(int(left[node]))
            if hi[j] > threshold[node]:
                stack.append(int(right[node]))
        total += best
    return total
