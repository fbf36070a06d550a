/* sleuth.whatif._sweep: timeline.replay's sweep over the dependency levels, for many variants at once.
 *
 * The same rules in the same order as the numpy sweep in sleuth/whatif/timeline.py (the reference, and
 * the fallback when this module is not built): per level, each operator's start from its chain's clock
 * plus its gap, the ends of operators whose group is not whole, then the groups that complete there,
 * ending one transfer after their last member started; last, each segment's latest end. Variant w of
 * an operator takes the recorded or the ideal gap (transfer) as keep_gap (keep_transfer) says.
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
    Py_buffer first, holds_previous, previous, op_bounds, loose, loose_bounds, group_begin, group_bounds, members, segment;
    /* Per position: lengths and anchors; per position and variant column: which length is kept. */
    Py_buffer anchor, gap, ideal_gap, transfer, ideal_transfer, own, keep_gap, keep_transfer;
    /* Scratch (positions x W) and the result (segments x W). */
    Py_buffer start, end, latest;
} Args;

#define N_BUFFERS 21

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

/* What is wrong with the graph, or NULL: every read of the sweep is of a value it wrote before. */
static const char *check(const Args *a, Py_ssize_t levels, Py_ssize_t n, Py_ssize_t segments) {
    const uint8_t *first = a->first.buf;
    const int64_t *previous = a->previous.buf, *op_bounds = a->op_bounds.buf, *loose = a->loose.buf;
    const int64_t *loose_bounds = a->loose_bounds.buf, *group_begin = a->group_begin.buf;
    const int64_t *group_bounds = a->group_bounds.buf, *members = a->members.buf, *segment = a->segment.buf;
    const Py_ssize_t n_loose = a->loose.len / 8, n_groups = a->group_begin.len / 8, n_members = a->members.len / 8;
    if (!ascending_to(op_bounds, levels, n) || !ascending_to(loose_bounds, levels, n_loose) ||
        !ascending_to(group_bounds, levels, n_groups))
        return "level bounds that do not ascend over their arrays";
    for (Py_ssize_t level = 0; level < levels; level++) {
        for (int64_t k = op_bounds[level]; k < op_bounds[level + 1]; k++)
            if (!first[k] && (previous[k] < 0 || previous[k] >= op_bounds[level]))
                return "an operator whose chain's previous one is not in an earlier level";
        for (int64_t k = loose_bounds[level]; k < loose_bounds[level + 1]; k++)
            if (loose[k] < op_bounds[level] || loose[k] >= op_bounds[level + 1])
                return "an operator not whole in its group that is not of its level";
        for (int64_t g = group_bounds[level]; g < group_bounds[level + 1]; g++) {
            const int64_t hi = g + 1 < n_groups ? group_begin[g + 1] : n_members;
            if (group_begin[g] < 0 || group_begin[g] >= hi || hi > n_members) return "a group without members";
            for (int64_t m = group_begin[g]; m < hi; m++)
                if (members[m] < 0 || members[m] >= op_bounds[level + 1]) return "a group member that has not started";
        }
    }
    for (Py_ssize_t k = 0; k < n; k++)
        if (segment[k] < 0 || segment[k] >= segments) return "an operator outside the segments";
    return NULL;
}

static PyObject *sweep(PyObject *self, PyObject *args) {
    Args a;
    Py_ssize_t W, columns, column;
    memset(&a, 0, sizeof a);
    if (!PyArg_ParseTuple(args, "nnny*y*y*y*y*y*y*y*y*y*y*y*y*y*y*y*y*y*w*w*w*", &W, &columns, &column, &a.first,
                          &a.holds_previous, &a.previous, &a.op_bounds, &a.loose, &a.loose_bounds, &a.group_begin,
                          &a.group_bounds, &a.members, &a.segment, &a.anchor, &a.gap, &a.ideal_gap, &a.transfer,
                          &a.ideal_transfer, &a.own, &a.keep_gap, &a.keep_transfer, &a.start, &a.end, &a.latest))
        return NULL;
    const Py_ssize_t n = a.first.len, levels = a.op_bounds.len / 8 - 1, segments = W > 0 ? a.latest.len / 8 / W : 0;
    const Py_ssize_t floats = 8 * n;
    if (W < 1 || column < 0 || column + W > columns || levels < 0 || a.holds_previous.len != n ||
        a.previous.len != floats || a.segment.len != floats || a.anchor.len != floats || a.gap.len != floats ||
        a.ideal_gap.len != floats || a.transfer.len != floats || a.ideal_transfer.len != floats || a.own.len != floats ||
        a.keep_gap.len != n * columns || a.keep_transfer.len != n * columns ||
        a.start.len < 8 * n * W || a.end.len < 8 * n * W || a.latest.len != 8 * segments * W ||
        a.loose_bounds.len != a.op_bounds.len || a.group_bounds.len != a.op_bounds.len) {
        release(&a);
        PyErr_SetString(PyExc_ValueError, "sweep: arrays of mismatched lengths");
        return NULL;
    }
    const char *bad = check(&a, levels, n, segments);
    if (bad) {
        release(&a);
        PyErr_Format(PyExc_ValueError, "sweep: %s", bad);
        return NULL;
    }
    double *group_latest = PyMem_RawMalloc(W * sizeof(double));  /* a group's latest start, per variant */
    if (!group_latest) {
        release(&a);
        return PyErr_NoMemory();
    }
    const uint8_t *first = a.first.buf, *holds_previous = a.holds_previous.buf;
    const uint8_t *keep_gap = a.keep_gap.buf, *keep_transfer = a.keep_transfer.buf;
    const int64_t *previous = a.previous.buf, *op_bounds = a.op_bounds.buf, *loose = a.loose.buf;
    const int64_t *loose_bounds = a.loose_bounds.buf, *group_begin = a.group_begin.buf;
    const int64_t *group_bounds = a.group_bounds.buf, *members = a.members.buf, *segment = a.segment.buf;
    const double *anchor = a.anchor.buf, *gap = a.gap.buf, *ideal_gap = a.ideal_gap.buf, *transfer = a.transfer.buf;
    const double *ideal_transfer = a.ideal_transfer.buf, *own = a.own.buf;
    double *start = a.start.buf, *end = a.end.buf, *latest = a.latest.buf;
    const Py_ssize_t n_groups = a.group_begin.len / 8, n_members = a.members.len / 8;

    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t level = 0; level < levels; level++) {
        for (int64_t k = op_bounds[level]; k < op_bounds[level + 1]; k++) {
            const double recorded = gap[k], ideal = ideal_gap[k];
            const uint8_t *kept = keep_gap + k * columns + column;
            double *s = start + k * W;
            if (first[k]) {
                for (Py_ssize_t w = 0; w < W; w++) s[w] = anchor[k] + (kept[w] ? recorded : ideal);
            } else {
                const double *clock = (holds_previous[k] ? end : start) + previous[k] * W;
                for (Py_ssize_t w = 0; w < W; w++) s[w] = clock[w] + (kept[w] ? recorded : ideal);
            }
        }
        for (int64_t j = loose_bounds[level]; j < loose_bounds[level + 1]; j++) {
            const int64_t k = loose[j];
            for (Py_ssize_t w = 0; w < W; w++) end[k * W + w] = start[k * W + w] + own[k];
        }
        for (int64_t g = group_bounds[level]; g < group_bounds[level + 1]; g++) {
            const int64_t lo = group_begin[g], hi = g + 1 < n_groups ? group_begin[g + 1] : n_members;
            memcpy(group_latest, start + members[lo] * W, W * sizeof(double));
            for (int64_t m = lo + 1; m < hi; m++) {  /* member rows outside, variants inside: each row read once */
                const double *s = start + members[m] * W;
                for (Py_ssize_t w = 0; w < W; w++)
                    if (s[w] > group_latest[w] || s[w] != s[w]) group_latest[w] = s[w];  /* NaN wins, as numpy's maximum */
            }
            for (int64_t m = lo; m < hi; m++) {
                const int64_t k = members[m];
                const double recorded = transfer[k], ideal = ideal_transfer[k];
                const uint8_t *kept = keep_transfer + k * columns + column;
                double *e = end + k * W;
                for (Py_ssize_t w = 0; w < W; w++) e[w] = group_latest[w] + (kept[w] ? recorded : ideal);
            }
        }
    }
    for (Py_ssize_t c = 0; c < segments * W; c++) latest[c] = -INFINITY;
    for (Py_ssize_t k = 0; k < n; k++) {
        double *out = latest + segment[k] * W;
        const double *e = end + k * W;
        for (Py_ssize_t w = 0; w < W; w++)
            if (e[w] > out[w] || e[w] != e[w]) out[w] = e[w];
    }
    Py_END_ALLOW_THREADS
    PyMem_RawFree(group_latest);
    release(&a);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"sweep", sweep, METH_VARARGS,
     "sweep(width, columns, column, first, holds_previous, previous, op_bounds, loose, loose_bounds, group_begin, "
     "group_bounds, members, segment, anchor, gap, ideal_gap, transfer, ideal_transfer, own, keep_gap, keep_transfer, "
     "start, end, latest): fills latest (segments x width) with each segment's latest end in the variants "
     "column..column+width of the keep masks (positions x columns); start and end are scratch"},
    {NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_sweep", "The what-if replay's level sweep (C).", -1, methods};

PyMODINIT_FUNC PyInit__sweep(void) { return PyModule_Create(&module); }
