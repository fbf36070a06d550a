/* sleuth.stream.detection._window_stats: features.OperatorWindows._refresh's statistics, compiled.
 *
 * Per identity row of the duration and transfer rings (NaN in an empty slot): its count, mean,
 * standard deviation, quartiles and its transfers' median, in the same float operations as the
 * numpy reference in features.py (used when this module is not built): each ring sorted with its
 * empty slots last; the sums over a whole ring, empty slots as zeros where it is not full, in
 * numpy's pairwise order (eight running sums over blocks of up to 128 values, then a tree of
 * them, then the rest in turn), which numpy's sum along a row takes; the quantiles interpolated
 * linearly between the two sorted values around (count - 1) q. numpy spends most of it on copies
 * of the rings and whole-table temporaries; a row here is its window in scratch memory.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* numpy's pairwise summation of n doubles (its pairwise_sum for a contiguous run). */
static double pairwise_sum(const double *a, Py_ssize_t n) {
    if (n < 8) {
        double res = 0.;
        for (Py_ssize_t i = 0; i < n; i++) res += a[i];
        return res;
    }
    if (n <= 128) {
        double r[8];
        for (int j = 0; j < 8; j++) r[j] = a[j];
        Py_ssize_t i = 8;
        for (; i < n - (n % 8); i += 8)
            for (int j = 0; j < 8; j++) r[j] += a[i + j];
        double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++) res += a[i];
        return res;
    }
    Py_ssize_t half = n / 2;
    half -= half % 8;
    return pairwise_sum(a, half) + pairwise_sum(a + half, n - half);
}

/* The default window's width (``DetectionRules.operator_window``), whose rings sort by the network below. */
#define UNROLLED 20

/* Batcher's odd-even merge sort of 20 values: its 103 compare-exchanges in order (the network for
 * 32 with every exchange that reaches past the 20th dropped, as if those were +inf). */
#define BATCHER_20(X) \
    X(0, 1) X(2, 3) X(4, 5) X(6, 7) X(8, 9) X(10, 11) X(12, 13) X(14, 15) X(16, 17) X(18, 19) X(0, 2) X(1, 3) \
    X(4, 6) X(5, 7) X(8, 10) X(9, 11) X(12, 14) X(13, 15) X(16, 18) X(17, 19) X(1, 2) X(5, 6) X(9, 10) \
    X(13, 14) X(17, 18) X(0, 4) X(1, 5) X(2, 6) X(3, 7) X(8, 12) X(9, 13) X(10, 14) X(11, 15) X(2, 4) X(3, 5) \
    X(10, 12) X(11, 13) X(1, 2) X(3, 4) X(5, 6) X(9, 10) X(11, 12) X(13, 14) X(17, 18) X(0, 8) X(1, 9) \
    X(2, 10) X(3, 11) X(4, 12) X(5, 13) X(6, 14) X(7, 15) X(4, 8) X(5, 9) X(6, 10) X(7, 11) X(2, 4) X(3, 5) \
    X(6, 8) X(7, 9) X(10, 12) X(11, 13) X(1, 2) X(3, 4) X(5, 6) X(7, 8) X(9, 10) X(11, 12) X(13, 14) \
    X(17, 18) X(0, 16) X(1, 17) X(2, 18) X(3, 19) X(8, 16) X(9, 17) X(10, 18) X(11, 19) X(4, 8) X(5, 9) \
    X(6, 10) X(7, 11) X(12, 16) X(13, 17) X(14, 18) X(15, 19) X(2, 4) X(3, 5) X(6, 8) X(7, 9) X(10, 12) \
    X(11, 13) X(14, 16) X(15, 17) X(1, 2) X(3, 4) X(5, 6) X(7, 8) X(9, 10) X(11, 12) X(13, 14) X(15, 16) \
    X(17, 18)

/* A double as an int64 that orders as it does (negatives' magnitude bits flipped), and back: the
 * network's exchanges become integer min/max, which compile to conditional moves, not branches. */
static inline int64_t order_key(double x) {
    int64_t i;
    memcpy(&i, &x, sizeof i);
    return i ^ ((i >> 63) & INT64_MAX);
}

static inline double from_order_key(int64_t k) {
    const int64_t i = k ^ ((k >> 63) & INT64_MAX);
    double x;
    memcpy(&x, &i, sizeof x);
    return x;
}

/* The row's values ascending, its empty (NaN) slots after them, as numpy's sort leaves it. A ring
 * of the default width runs the network in registers (an insertion sort mispredicts about every
 * other comparison on a ring's unordered values: 2.5x the time); any other, an insertion sort. */
static void sorted_ring(const double *row, Py_ssize_t width, double *out) {
    Py_ssize_t c = 0;
    if (width == UNROLLED) {
        int64_t v[UNROLLED];
        for (int j = 0; j < UNROLLED; j++) {
            c += !isnan(row[j]);
            v[j] = isnan(row[j]) ? INT64_MAX : order_key(row[j]); /* empty slots past every value */
        }
#define EXCHANGE(a, b) { const int64_t x = v[a], y = v[b]; v[a] = x < y ? x : y; v[b] = x < y ? y : x; }
        BATCHER_20(EXCHANGE)
#undef EXCHANGE
        for (int j = 0; j < UNROLLED; j++) out[j] = j < c ? from_order_key(v[j]) : NAN;
        return;
    }
    for (Py_ssize_t j = 0; j < width; j++) {
        const double x = row[j];
        if (isnan(x)) continue;
        Py_ssize_t k = c++;
        for (; k > 0 && out[k - 1] > x; k--) out[k] = out[k - 1];
        out[k] = x;
    }
    for (Py_ssize_t j = c; j < width; j++) out[j] = NAN;
}

/* features._sorted_quantile of one sorted row holding n values. */
static double quantile(const double *sorted, int64_t n, double q) {
    if (n <= 0) return NAN;
    const double pos = (double)(n - 1) * q;
    const int64_t lo = (int64_t)floor(pos), hi = lo + 1 < n - 1 ? lo + 1 : n - 1;
    return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - (double)lo);
}

static PyObject *refresh(PyObject *self, PyObject *args) {
    Py_buffer rows, ring, filled, transfer_ring, transfer_filled, stats;
    Py_ssize_t width;
    (void)self;
    if (!PyArg_ParseTuple(args, "ny*y*y*y*y*w*", &width, &rows, &ring, &filled, &transfer_ring, &transfer_filled,
                          &stats))
        return NULL;
    PyObject *result = NULL;
    double *scratch = NULL;
    const Py_ssize_t identities = width > 0 ? ring.len / 8 / width : 0, count = rows.len / 8;
    if (width < 1 || ring.len != identities * width * 8 || transfer_ring.len != ring.len ||
        filled.len != identities * 8 || transfer_filled.len != filled.len || stats.len != identities * 8 * 8) {
        PyErr_SetString(PyExc_ValueError, "refresh: rings, counts and statistics of different identities");
        goto done;
    }
    const int64_t *row_of = rows.buf, *fill = filled.buf, *tfill = transfer_filled.buf;
    for (Py_ssize_t i = 0; i < count; i++)
        if (row_of[i] < 0 || row_of[i] >= identities) {
            PyErr_SetString(PyExc_ValueError, "refresh: a row outside the rings");
            goto done;
        }
    scratch = malloc(sizeof(double) * 3 * (size_t)width);
    if (!scratch) {
        PyErr_NoMemory();
        goto done;
    }
    const double *durations = ring.buf, *transfers = transfer_ring.buf;
    double *out = stats.buf, *sorted = scratch, *terms = scratch + width, *tsorted = scratch + 2 * width;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < count; i++) {
        const int64_t r = row_of[i];
        const int64_t n = fill[r] < width ? fill[r] : width, tn = tfill[r] < width ? tfill[r] : width;
        sorted_ring(durations + r * width, width, sorted);
        sorted_ring(transfers + r * width, width, tsorted);
        /* features._nan_mean_std: a full ring as it is, else its empty slots as zeros. */
        const int full = n == width;
        for (Py_ssize_t j = 0; j < width; j++) terms[j] = full || !isnan(sorted[j]) ? sorted[j] : 0.0;
        const double mean = pairwise_sum(terms, width) / (double)n;
        for (Py_ssize_t j = 0; j < width; j++) {
            const double deviation = full || !isnan(sorted[j]) ? sorted[j] - mean : 0.0;
            terms[j] = deviation * deviation;
        }
        double *s = out + r * 8;
        s[0] = (double)n;
        s[1] = mean;
        s[2] = sqrt(pairwise_sum(terms, width) / (double)n);
        s[3] = quantile(sorted, n, 0.25);
        s[4] = quantile(sorted, n, 0.5);
        s[5] = quantile(sorted, n, 0.75);
        s[6] = quantile(tsorted, tn, 0.5);
    }
    Py_END_ALLOW_THREADS
    result = Py_None;
    Py_INCREF(result);
done:
    free(scratch);
    PyBuffer_Release(&rows);
    PyBuffer_Release(&ring);
    PyBuffer_Release(&filled);
    PyBuffer_Release(&transfer_ring);
    PyBuffer_Release(&transfer_filled);
    PyBuffer_Release(&stats);
    return result;
}

static PyMethodDef methods[] = {
    {"refresh", refresh, METH_VARARGS,
     "refresh(width, rows, ring, filled, transfer_ring, transfer_filled, stats): the rows' statistics into stats."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_window_stats", NULL, -1, methods};

PyMODINIT_FUNC PyInit__window_stats(void) {
    PyObject *m = PyModule_Create(&module);
    if (m && PyModule_AddIntConstant(m, "UNROLLED", UNROLLED) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
