/* sleuth.whatif._sweep: timeline.replay's sweep over the dependency levels, for many variants at once,
 * and the levels themselves (timeline.dependencies; the second function below).
 *
 * The same rules in the same order as the numpy sweep in sleuth/whatif/timeline.py (the reference, and
 * the fallback when this module is not built): per level, each operator's start from its chain's clock
 * plus its gap, the ends of operators whose group is not whole, then the groups that complete there,
 * ending one transfer after their last member started; last, each segment's latest end. Variant w of
 * an operator takes the recorded or the ideal gap (transfer) as keep_gap (keep_transfer) says.
 * Levels come part by part where the graph splits into independent parts (a job's iterations): the
 * scratch holds one part's rows at a time, and each segment's latest end is taken as its part ends.
 * Parts can carry each rank's clock from one to the next (the job's one timeline, What-if §3.2):
 * a chain's last operator in a part leaves its clock in its slot of carry, and a chain that
 * continues in a later part opens from it; carry is kept relative to the latest end of the last
 * part swept, so that each part's latest end is its own length.
 *
 * Everything comes in level order (position k; timeline.Dependencies.order): a level's operators
 * are contiguous rows, so the sweep reads and writes memory nearly in sequence where chain order
 * would scatter a level over every rank's chain. Buffers only (no numpy headers); the Python
 * caller passes C-contiguous arrays, and every index is checked here before the sweep reads it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    /* The graph, per position: opens its chain, the chain's previous operator holds the rank, its position. */
    Py_buffer first, holds_previous, previous, op_bounds, loose, loose_bounds, group_begin, group_bounds, members;
    /* The levels where each independent part begins, then the levels' count; each position's segment. */
    Py_buffer part_bounds, segment;
    /* Per position: lengths and anchors; per position and variant column: which length is kept. */
    Py_buffer anchor, gap, ideal_gap, transfer, ideal_transfer, own, keep_gap, keep_transfer;
    /* Per position, or empty (nothing carried): its carry slot (its rank, int32) and its link flags. */
    Py_buffer slot, link;
    /* Scratch (one part's positions x W), the result (segments x W) and the carried clocks (slots x W, in and out). */
    Py_buffer start, end, latest, carry;
} Args;

#define N_BUFFERS 25
/* link flags: a chain's first operator that continues a chain of an earlier part (it opens from its
 * slot's carried clock); a chain's last operator in its part whose clock is its end, or its start. */
enum { CONTINUES = 1, CLOSES_AT_END = 2, CLOSES_AT_START = 4 };

static void release(Args *a) {
    Py_buffer *buffers = (Py_buffer *)a;
    for (int i = 0; i < N_BUFFERS; i++) PyBuffer_Release(&buffers[i]);
}

static int ascending_to(const int64_t *bounds, Py_ssize_t levels, int64_t last) {
    if (bounds[0] != 0 || bounds[levels] != last) return 0;
    for (Py_ssize_t k = 0; k < levels; k++)
        if (bounds[k] > bounds[k + 1]) return 0;
    return 1;
}

/* What is wrong with the graph, or NULL: every read of the sweep is of a value it wrote before,
 * in the scratch of the part it sweeps (a part's reads stay in its own positions). */
static const char *check(const Args *a, Py_ssize_t levels, Py_ssize_t n, Py_ssize_t segments, Py_ssize_t parts,
                         Py_ssize_t slots) {
    const uint8_t *first = a->first.buf;
    const int64_t *previous = a->previous.buf, *op_bounds = a->op_bounds.buf, *loose = a->loose.buf;
    const int64_t *loose_bounds = a->loose_bounds.buf, *group_begin = a->group_begin.buf;
    const int64_t *group_bounds = a->group_bounds.buf, *members = a->members.buf, *segment = a->segment.buf;
    const int64_t *part_bounds = a->part_bounds.buf;
    const Py_ssize_t n_loose = a->loose.len / 8, n_groups = a->group_begin.len / 8, n_members = a->members.len / 8;
    if (!ascending_to(op_bounds, levels, n) || !ascending_to(loose_bounds, levels, n_loose) ||
        !ascending_to(group_bounds, levels, n_groups) || !ascending_to(part_bounds, parts, levels))
        return "level bounds that do not ascend over their arrays";
    for (Py_ssize_t q = 0; q < parts; q++) {
        const int64_t base = op_bounds[part_bounds[q]];
        for (int64_t level = part_bounds[q]; level < part_bounds[q + 1]; level++) {
            for (int64_t k = op_bounds[level]; k < op_bounds[level + 1]; k++)
                if (!first[k] && (previous[k] < base || previous[k] >= op_bounds[level]))
                    return "an operator whose chain's previous one is not in an earlier level of its part";
            for (int64_t k = loose_bounds[level]; k < loose_bounds[level + 1]; k++)
                if (loose[k] < op_bounds[level] || loose[k] >= op_bounds[level + 1])
                    return "an operator not whole in its group that is not of its level";
            for (int64_t g = group_bounds[level]; g < group_bounds[level + 1]; g++) {
                const int64_t hi = g + 1 < n_groups ? group_begin[g + 1] : n_members;
                if (group_begin[g] < 0 || group_begin[g] >= hi || hi > n_members) return "a group without members";
                for (int64_t m = group_begin[g]; m < hi; m++)
                    if (members[m] < base || members[m] >= op_bounds[level + 1])
                        return "a group member that has not started in its part";
            }
        }
    }
    for (Py_ssize_t k = 0; k < n; k++)
        if (segment[k] < 0 || segment[k] >= segments) return "an operator outside the segments";
    if (a->link.len) {
        const uint8_t *link = a->link.buf;
        const int32_t *slot = a->slot.buf;
        for (Py_ssize_t k = 0; k < n; k++) {
            if (link[k] && (slot[k] < 0 || slot[k] >= slots)) return "a carried operator outside the carry's slots";
            if ((link[k] & CONTINUES) && !first[k]) return "an operator that continues a chain but does not open one";
            if ((link[k] & CLOSES_AT_END) && (link[k] & CLOSES_AT_START)) return "an operator closing its chain twice";
        }
    }
    return NULL;
}

static PyObject *sweep(PyObject *self, PyObject *args) {
    Args a;
    Py_ssize_t W, columns, column;
    memset(&a, 0, sizeof a);
    if (!PyArg_ParseTuple(args, "nnny*y*y*y*y*y*y*y*y*y*y*y*y*y*y*y*y*y*y*y*y*w*w*w*w*", &W, &columns, &column,
                          &a.first, &a.holds_previous, &a.previous, &a.op_bounds, &a.loose, &a.loose_bounds,
                          &a.group_begin, &a.group_bounds, &a.members, &a.part_bounds, &a.segment, &a.anchor, &a.gap,
                          &a.ideal_gap, &a.transfer, &a.ideal_transfer, &a.own, &a.keep_gap, &a.keep_transfer, &a.slot,
                          &a.link, &a.start, &a.end, &a.latest, &a.carry))
        return NULL;
    const Py_ssize_t n = a.first.len, levels = a.op_bounds.len / 8 - 1, segments = W > 0 ? a.latest.len / 8 / W : 0;
    const Py_ssize_t floats = 8 * n, parts = a.part_bounds.len / 8 - 1;
    const int64_t *op_bounds = a.op_bounds.buf, *part_bounds = a.part_bounds.buf;
    if (W < 1 || column < 0 || column + W > columns || levels < 0 || parts < 0 || a.holds_previous.len != n ||
        a.previous.len != floats || a.segment.len != floats || a.anchor.len != floats || a.gap.len != floats ||
        a.ideal_gap.len != floats || a.transfer.len != floats || a.ideal_transfer.len != floats || a.own.len != floats ||
        a.keep_gap.len != n * columns || a.keep_transfer.len != n * columns ||
        a.latest.len != 8 * segments * W || a.loose_bounds.len != a.op_bounds.len ||
        a.group_bounds.len != a.op_bounds.len || (a.link.len && (a.link.len != n || a.slot.len != 4 * n)) ||
        (!a.link.len && a.slot.len) || a.carry.len % (8 * W)) {
        release(&a);
        PyErr_SetString(PyExc_ValueError, "sweep: arrays of mismatched lengths");
        return NULL;
    }
    const Py_ssize_t slots = a.carry.len / 8 / W;
    const char *bad = check(&a, levels, n, segments, parts, slots);
    if (bad) {
        release(&a);
        PyErr_Format(PyExc_ValueError, "sweep: %s", bad);
        return NULL;
    }
    Py_ssize_t span = 0;  /* the widest part's positions: the scratch holds one part at a time */
    for (Py_ssize_t q = 0; q < parts; q++)
        if (op_bounds[part_bounds[q + 1]] - op_bounds[part_bounds[q]] > span)
            span = op_bounds[part_bounds[q + 1]] - op_bounds[part_bounds[q]];
    if (a.start.len < 8 * span * W || a.end.len < 8 * span * W) {
        release(&a);
        PyErr_SetString(PyExc_ValueError, "sweep: scratch shorter than the widest part's positions by W");
        return NULL;
    }
    /* A group's latest start, then a part's latest end, per variant. */
    double *group_latest = PyMem_RawMalloc(W * sizeof(double)), *part_latest = PyMem_RawMalloc(W * sizeof(double));
    if (!group_latest || !part_latest) {
        PyMem_RawFree(group_latest);
        PyMem_RawFree(part_latest);
        release(&a);
        return PyErr_NoMemory();
    }
    const uint8_t *first = a.first.buf, *holds_previous = a.holds_previous.buf;
    const uint8_t *keep_gap = a.keep_gap.buf, *keep_transfer = a.keep_transfer.buf;
    const int64_t *previous = a.previous.buf, *loose = a.loose.buf;
    const int64_t *loose_bounds = a.loose_bounds.buf, *group_begin = a.group_begin.buf;
    const int64_t *group_bounds = a.group_bounds.buf, *members = a.members.buf, *segment = a.segment.buf;
    const double *anchor = a.anchor.buf, *gap = a.gap.buf, *ideal_gap = a.ideal_gap.buf, *transfer = a.transfer.buf;
    const double *ideal_transfer = a.ideal_transfer.buf, *own = a.own.buf;
    double *latest = a.latest.buf, *carry = a.carry.buf;
    const uint8_t *link = a.link.len ? a.link.buf : NULL;
    const int32_t *slot = a.slot.buf;
    const Py_ssize_t n_groups = a.group_begin.len / 8, n_members = a.members.len / 8;

    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t c = 0; c < segments * W; c++) latest[c] = -INFINITY;
    for (Py_ssize_t q = 0; q < parts; q++) {
        /* A part's rows in the scratch: position k at row k - base (nothing reads across parts). */
        const int64_t base = op_bounds[part_bounds[q]], past = op_bounds[part_bounds[q + 1]];
        double *start = a.start.buf, *end = a.end.buf;
#define ROW(k) (((k) - base) * W)
        for (int64_t level = part_bounds[q]; level < part_bounds[q + 1]; level++) {
            for (int64_t k = op_bounds[level]; k < op_bounds[level + 1]; k++) {
                const double recorded = gap[k], ideal = ideal_gap[k];
                const uint8_t *kept = keep_gap + k * columns + column;
                double *s = start + ROW(k);
                if (first[k] && link && (link[k] & CONTINUES)) {
                    const double *carried = carry + (Py_ssize_t)slot[k] * W;
                    for (Py_ssize_t w = 0; w < W; w++) s[w] = carried[w] + anchor[k] + (kept[w] ? recorded : ideal);
                } else if (first[k]) {
                    for (Py_ssize_t w = 0; w < W; w++) s[w] = anchor[k] + (kept[w] ? recorded : ideal);
                } else {
                    const double *clock = (holds_previous[k] ? end : start) + ROW(previous[k]);
                    for (Py_ssize_t w = 0; w < W; w++) s[w] = clock[w] + (kept[w] ? recorded : ideal);
                }
            }
            for (int64_t j = loose_bounds[level]; j < loose_bounds[level + 1]; j++) {
                const int64_t k = loose[j];
                for (Py_ssize_t w = 0; w < W; w++) end[ROW(k) + w] = start[ROW(k) + w] + own[k];
            }
            for (int64_t g = group_bounds[level]; g < group_bounds[level + 1]; g++) {
                const int64_t lo = group_begin[g], hi = g + 1 < n_groups ? group_begin[g + 1] : n_members;
                memcpy(group_latest, start + ROW(members[lo]), W * sizeof(double));
                for (int64_t m = lo + 1; m < hi; m++) {  /* member rows outside, variants inside: each row read once */
                    const double *s = start + ROW(members[m]);
                    for (Py_ssize_t w = 0; w < W; w++)
                        if (s[w] > group_latest[w] || s[w] != s[w]) group_latest[w] = s[w];  /* NaN wins, as numpy's maximum */
                }
                for (int64_t m = lo; m < hi; m++) {
                    const int64_t k = members[m];
                    const double recorded = transfer[k], ideal = ideal_transfer[k];
                    const uint8_t *kept = keep_transfer + k * columns + column;
                    double *e = end + ROW(k);
                    for (Py_ssize_t w = 0; w < W; w++) e[w] = group_latest[w] + (kept[w] ? recorded : ideal);
                }
            }
        }
        for (Py_ssize_t w = 0; w < W; w++) part_latest[w] = -INFINITY;
        for (int64_t k = base; k < past; k++) {  /* the part's ends, before the next part takes the scratch */
            double *out = latest + segment[k] * W;
            const double *e = end + ROW(k);
            for (Py_ssize_t w = 0; w < W; w++) {
                if (e[w] > out[w] || e[w] != e[w]) out[w] = e[w];
                if (e[w] > part_latest[w] || e[w] != e[w]) part_latest[w] = e[w];
            }
        }
        if (link && past > base) {  /* the chains' clocks carried on, relative to this part's latest end */
            for (int64_t k = base; k < past; k++) {
                if (!(link[k] & (CLOSES_AT_END | CLOSES_AT_START))) continue;
                const double *clock = ((link[k] & CLOSES_AT_END) ? end : start) + ROW(k);
                memcpy(carry + (Py_ssize_t)slot[k] * W, clock, W * sizeof(double));
            }
            for (Py_ssize_t c = 0; c < slots * W; c++) carry[c] -= part_latest[c % W];
        }
#undef ROW
    }
    Py_END_ALLOW_THREADS
    PyMem_RawFree(group_latest);
    PyMem_RawFree(part_latest);
    release(&a);
    Py_RETURN_NONE;
}

/* An operator as the queue reads it: its group, its level (-1: none yet) and its flags. */
enum { WHOLE = 1, HOLDS = 2, CHAINED = 4 }; /* in a whole group; holds its rank; the next operator is its chain's */
typedef struct {
    int32_t group, level;
    uint8_t flags;
} Op;

/* A group as the queue reads it: its whole members still to start, the latest level they started at. */
typedef struct {
    int32_t pending, latest;
} Group;

typedef struct {
    Py_buffer first, holds, complete, group, parts, settled, op_order, op_bounds, loose, loose_bounds, members,
        member_bounds, begins, begin_bounds, part_levels;
} LevelArgs;

#define N_LEVEL_BUFFERS 15

static void release_levels(LevelArgs *a) {
    Py_buffer *buffers = (Py_buffer *)a;
    for (int i = 0; i < N_LEVEL_BUFFERS; i++) PyBuffer_Release(&buffers[i]);
}

/* Renumbers the levels part by part where the parts are independent: no part's first operator
 * continues a chain, and every whole group's members are of one part. Each part's levels stay in
 * order and none is empty (an operator one past level 0 waits on one of its own part a level
 * before), so the sweep's rules are kept; only its levels' sizes change. Returns 1 when split, 0
 * when the parts are not independent (the levels stay), -1 out of memory. */
static int split_by_part(Py_ssize_t n, Py_ssize_t groups, const uint8_t *first, const uint8_t *complete,
                         const int64_t *parts, Py_ssize_t n_parts, Op *op, int32_t *ends_at, Py_ssize_t *count,
                         int64_t *part_levels) {
    for (Py_ssize_t p = 1; p < n_parts; p++)
        if (!first[parts[p]]) return 0;
    int32_t *group_part = PyMem_RawMalloc((size_t)(groups ? groups : 1) * sizeof(int32_t));
    int64_t *offset = PyMem_RawCalloc((size_t)n_parts + 1, sizeof(int64_t));
    if (!group_part || !offset) {
        PyMem_RawFree(group_part);
        PyMem_RawFree(offset);
        return -1;
    }
    int split = 1;
    for (Py_ssize_t g = 0; g < groups; g++) group_part[g] = -1;
    for (Py_ssize_t p = 0, i = 0; p < n_parts && split; p++) {
        const Py_ssize_t end = p + 1 < n_parts ? parts[p + 1] : n;
        for (; i < end; i++) {
            if (op[i].level + 1 > offset[p + 1]) offset[p + 1] = op[i].level + 1;  /* the part's levels */
            if (!complete[i]) continue;
            int32_t *mine = &group_part[op[i].group];
            if (*mine < 0) *mine = (int32_t)p;
            else if (*mine != p) { split = 0; break; }
        }
    }
    if (split) {
        for (Py_ssize_t p = 0; p < n_parts; p++) offset[p + 1] += offset[p];
        if (offset[n_parts] > INT32_MAX) split = 0;
    }
    if (split) {
        for (Py_ssize_t p = 0, i = 0; p < n_parts; p++)
            for (const Py_ssize_t end = p + 1 < n_parts ? parts[p + 1] : n; i < end; i++)
                if (op[i].level >= 0) op[i].level += (int32_t)offset[p];
        for (Py_ssize_t g = 0; g < groups; g++)
            if (ends_at[g] >= 0) ends_at[g] += (int32_t)offset[group_part[g]];
        *count = (Py_ssize_t)offset[n_parts];
        memcpy(part_levels, offset, (size_t)n_parts * sizeof(int64_t));
    }
    PyMem_RawFree(group_part);
    PyMem_RawFree(offset);
    return split;
}

/* timeline.dependencies' levels (Kahn's algorithm), compiled: the same levels, in the same order,
 * as the numpy reference's frontier loop, from one pass over a queue instead of a few vectorised
 * steps per level. An operator's level is one past the level of what it waits on: its chain's
 * previous operator's, or, where that one holds its rank to its group's end, the level at which
 * the last of the group's whole members started. A group is whole for all its members or none.
 * Out (buffers the caller sized): per level, its operators, those not in a whole group, the whole
 * groups ending there (each one's first member's offset in the level) and their members, each
 * list ascending; and which operators have a level. Returns the number of levels.
 * parts (chain-order starts of independent parts, from 0 up; empty: one part): where no chain and no
 * whole group crosses from one part into another, the levels go part by part, each part's in turn,
 * so that a sweep's level holds one part's operators, not every part's (see split_by_part), and
 * part_levels (one per part, at least one) says at which level each part begins (all 0: not split). */
static PyObject *levels(PyObject *self, PyObject *args) {
    Py_ssize_t n, groups;
    LevelArgs a;
    memset(&a, 0, sizeof a);
    (void)self;
    if (!PyArg_ParseTuple(args, "nny*y*y*y*y*w*w*w*w*w*w*w*w*w*w*", &n, &groups, &a.first, &a.holds, &a.complete,
                          &a.group, &a.parts, &a.settled, &a.op_order, &a.op_bounds, &a.loose, &a.loose_bounds,
                          &a.members, &a.member_bounds, &a.begins, &a.begin_bounds, &a.part_levels))
        return NULL;
    const Py_ssize_t bytes = n, words = n * (Py_ssize_t)sizeof(int64_t);
    const Py_ssize_t bound_words = (n + 1) * (Py_ssize_t)sizeof(int64_t);
    if (n < 0 || groups < 0 || a.first.len < bytes || a.holds.len < bytes || a.complete.len < bytes ||
        a.settled.len < bytes || a.group.len < words || a.op_order.len < words || a.loose.len < words ||
        a.members.len < words || a.op_bounds.len < bound_words || a.loose_bounds.len < bound_words ||
        a.member_bounds.len < bound_words || a.begin_bounds.len < bound_words ||
        a.begins.len < groups * (Py_ssize_t)sizeof(int64_t)) {
        release_levels(&a);
        PyErr_SetString(PyExc_ValueError, "levels: buffers shorter than n operators (bounds n + 1, begins groups)");
        return NULL;
    }
    if (n > INT32_MAX || groups > INT32_MAX) {
        release_levels(&a);
        PyErr_SetString(PyExc_ValueError, "levels: more than 2**31 - 1 operators or groups");
        return NULL;
    }
    const uint8_t *first = a.first.buf, *holds = a.holds.buf, *complete = a.complete.buf;
    const int64_t *group = a.group.buf, *parts = a.parts.buf;
    const Py_ssize_t n_parts = a.parts.len / (Py_ssize_t)sizeof(int64_t);
    if (a.part_levels.len < (n_parts > 1 ? n_parts : 1) * (Py_ssize_t)sizeof(int64_t)) {
        release_levels(&a);
        PyErr_SetString(PyExc_ValueError, "levels: part_levels shorter than the parts");
        return NULL;
    }
    memset(a.part_levels.buf, 0, (size_t)a.part_levels.len);
    for (Py_ssize_t p = 0; p < n_parts; p++)
        if ((p == 0 && parts[0] != 0) || (p > 0 && parts[p] <= parts[p - 1]) || parts[p] >= (n ? n : 1)) {
            release_levels(&a);
            PyErr_SetString(PyExc_ValueError, "levels: parts must ascend from 0, each a start below n operators");
            return NULL;
        }
    for (Py_ssize_t i = 0; i < n; i++)
        if (group[i] < 0 || group[i] >= groups) {
            release_levels(&a);
            PyErr_Format(PyExc_ValueError, "levels: group id %lld outside [0, %zd)", (long long)group[i], groups);
            return NULL;
        }
    /* Scratch: per operator, what the queue reads of it in one place (the queue visits operators out
     * of chain order, so separate arrays would cost a cache miss each); per group, its members (by
     * group, ascending), its whole members still to start and the latest level they started at, and
     * its ending level; the queue; cursors. */
    Op *op = PyMem_RawMalloc((size_t)(n ? n : 1) * sizeof(Op));
    int32_t *group_start = PyMem_RawCalloc((size_t)groups + 1, sizeof(int32_t));
    int32_t *group_member = PyMem_RawMalloc((size_t)(n ? n : 1) * sizeof(int32_t));
    Group *state = PyMem_RawMalloc((size_t)(groups ? groups : 1) * sizeof(Group));
    int32_t *ends_at = PyMem_RawMalloc((size_t)(groups ? groups : 1) * sizeof(int32_t));
    int32_t *queue = PyMem_RawMalloc((size_t)(n ? n : 1) * sizeof(int32_t));
    int64_t *cursor = NULL;
    Py_ssize_t count = 0;
    PyObject *result = NULL;
    if (!op || !group_start || !group_member || !state || !ends_at || !queue) {
        PyErr_NoMemory();
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t g = 0; g < groups; g++) {
        state[g].pending = 0;
        state[g].latest = ends_at[g] = -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        const int chained = i + 1 < n && !first[i + 1];
        op[i].group = (int32_t)group[i];
        op[i].level = -1;
        op[i].flags = (uint8_t)((complete[i] ? WHOLE : 0) | (holds[i] ? HOLDS : 0) | (chained ? CHAINED : 0));
        group_start[group[i] + 1]++;
        if (complete[i]) state[group[i]].pending++;
    }
    for (Py_ssize_t g = 0; g < groups; g++) group_start[g + 1] += group_start[g];
    for (Py_ssize_t i = 0; i < n; i++) group_member[group_start[group[i]]++] = (int32_t)i;
    for (Py_ssize_t g = groups; g > 0; g--) group_start[g] = group_start[g - 1];
    group_start[0] = 0;
    Py_ssize_t head = 0, tail = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if (first[i]) {
            op[i].level = 0;
            queue[tail++] = (int32_t)i;
        }
    while (head < tail) {
        const int32_t i = queue[head++], depth = op[i].level;
        const uint8_t flags = op[i].flags;
        if (depth + 1 > count) count = depth + 1;
        if (flags & WHOLE) {
            Group *g = &state[op[i].group];
            if (depth > g->latest) g->latest = depth;
            if (--g->pending == 0) {
                const int32_t id = op[i].group;
                ends_at[id] = g->latest;
                for (int32_t k = group_start[id]; k < group_start[id + 1]; k++) {
                    const int32_t m = group_member[k];
                    if ((op[m].flags & (HOLDS | CHAINED)) == (HOLDS | CHAINED) && op[m + 1].level < 0) {
                        op[m + 1].level = g->latest + 1;
                        queue[tail++] = m + 1;
                    }
                }
            }
        }
        if ((flags & (HOLDS | WHOLE)) != (HOLDS | WHOLE) && (flags & CHAINED) && op[i + 1].level < 0) {
            op[i + 1].level = depth + 1;
            queue[tail++] = i + 1;
        }
    }
    Py_END_ALLOW_THREADS
    if (n_parts > 1) {
        int split;
        Py_BEGIN_ALLOW_THREADS
        split = split_by_part(n, groups, first, complete, parts, n_parts, op, ends_at, &count, a.part_levels.buf);
        Py_END_ALLOW_THREADS
        if (split < 0) {
            PyErr_NoMemory();
            goto done;
        }
    }
    cursor = PyMem_RawMalloc((size_t)(count ? count : 1) * sizeof(int64_t));
    if (!cursor) {
        PyErr_NoMemory();
        goto done;
    }
    {
        uint8_t *settled = a.settled.buf;
        int64_t *op_order = a.op_order.buf, *op_bounds = a.op_bounds.buf, *loose = a.loose.buf;
        int64_t *loose_bounds = a.loose_bounds.buf, *members = a.members.buf, *member_bounds = a.member_bounds.buf;
        int64_t *begins = a.begins.buf, *begin_bounds = a.begin_bounds.buf;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t d = 0; d <= count; d++) op_bounds[d] = loose_bounds[d] = member_bounds[d] = begin_bounds[d] = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            settled[i] = op[i].level >= 0;
            if (op[i].level < 0) continue;
            op_bounds[op[i].level + 1]++;
            if (!complete[i]) loose_bounds[op[i].level + 1]++;
        }
        for (Py_ssize_t g = 0; g < groups; g++)
            if (ends_at[g] >= 0) {
                begin_bounds[ends_at[g] + 1]++;
                member_bounds[ends_at[g] + 1] += group_start[g + 1] - group_start[g];
            }
        for (Py_ssize_t d = 0; d < count; d++) {
            op_bounds[d + 1] += op_bounds[d];
            loose_bounds[d + 1] += loose_bounds[d];
            member_bounds[d + 1] += member_bounds[d];
            begin_bounds[d + 1] += begin_bounds[d];
        }
        /* Counting sorts by level, each stable: a level's operators (groups) stay ascending. */
        for (Py_ssize_t d = 0; d < count; d++) cursor[d] = op_bounds[d];
        for (Py_ssize_t i = 0; i < n; i++)
            if (op[i].level >= 0) op_order[cursor[op[i].level]++] = i;
        for (Py_ssize_t d = 0; d < count; d++) cursor[d] = loose_bounds[d];
        for (Py_ssize_t i = 0; i < n; i++)
            if (op[i].level >= 0 && !complete[i]) loose[cursor[op[i].level]++] = i;
        for (Py_ssize_t d = 0; d < count; d++) cursor[d] = member_bounds[d];
        for (Py_ssize_t g = 0; g < groups; g++) {
            const int64_t d = ends_at[g];
            if (d < 0) continue;
            begins[begin_bounds[d]++] = cursor[d] - member_bounds[d];
            for (int32_t k = group_start[g]; k < group_start[g + 1]; k++) members[cursor[d]++] = group_member[k];
        }
        /* begin_bounds[d] ran to level d's end: back to its start. */
        for (Py_ssize_t d = count; d > 0; d--) begin_bounds[d] = begin_bounds[d - 1];
        begin_bounds[0] = 0;
        Py_END_ALLOW_THREADS
    }
    result = PyLong_FromSsize_t(count);
done:
    PyMem_RawFree(op);
    PyMem_RawFree(group_start);
    PyMem_RawFree(group_member);
    PyMem_RawFree(state);
    PyMem_RawFree(ends_at);
    PyMem_RawFree(queue);
    PyMem_RawFree(cursor);
    release_levels(&a);
    return result;
}

static PyMethodDef methods[] = {
    {"sweep", sweep, METH_VARARGS,
     "sweep(width, columns, column, first, holds_previous, previous, op_bounds, loose, loose_bounds, group_begin, "
     "group_bounds, members, part_bounds, segment, anchor, gap, ideal_gap, transfer, ideal_transfer, own, keep_gap, "
     "keep_transfer, slot, link, start, end, latest, carry): fills latest (segments x width) with each segment's "
     "latest end in the variants column..column+width of the keep masks (positions x columns), carrying chains' "
     "clocks from part to part in carry (slots x width) where link says; start and end are scratch"},
    {"levels", levels, METH_VARARGS,
     "levels(n, groups, first, holds, complete, group, settled, op_order, op_bounds, loose, loose_bounds, members, "
     "member_bounds, begins, begin_bounds): timeline.dependencies' levels into the outputs; returns their number"},
    {NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_sweep", "The what-if replay's level sweep (C).", -1, methods};

PyMODINIT_FUNC PyInit__sweep(void) { return PyModule_Create(&module); }
