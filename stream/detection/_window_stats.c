/* sleuth.stream.detection._window_stats: features.OperatorWindows' windows kept sorted, and their
 * statistics, compiled.
 *
 * Each identity's window holds its values ascending, its empty slots (NaN) after them, and each
 * value's push count modulo 2**16 (``born``), by which the oldest is found once the window is full.
 * ``push`` evicts that one and inserts the new value in place (a window changes by one value a push:
 * an insertion moves at most the window's width, where sorting it anew took most of the time), then,
 * while the row is at hand, its count, mean, standard deviation, quartiles and its transfers' median
 * in the same float operations as the numpy reference in features.py (used when this module is not
 * built), which sorts a copy of the window (the same values, so the same order): the sums over a
 * whole window, empty slots as zeros where it is not full, in numpy's pairwise order (eight running
 * sums over blocks of up to 128 values, then a tree of them, then the rest in turn), which numpy's
 * sum along a row takes; the quantiles interpolated linearly between the two sorted values around
 * (count - 1) q.
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

/* features._sorted_quantile of one sorted row holding n values. */
static double quantile(const double *sorted, int64_t n, double q) {
    if (n <= 0) return NAN;
    const double pos = (double)(n - 1) * q;
    const int64_t lo = (int64_t)floor(pos), hi = lo + 1 < n - 1 ? lo + 1 : n - 1;
    return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - (double)lo);
}

/* One window takes x: once full, its oldest value (pushed ``width`` pushes before) goes and the values
 * after it move down one; x goes after the values not above it. */
static void insert(double *w, uint16_t *b, int64_t *filled, Py_ssize_t width, double x) {
    const int64_t c = *filled;
    Py_ssize_t n = c < width ? (Py_ssize_t)c : width;
    if (c >= width) {
        const uint16_t oldest = (uint16_t)(c - width);
        Py_ssize_t j = 0;
        while (j < width - 1 && b[j] != oldest) j++;
        for (; j < width - 1; j++) {
            w[j] = w[j + 1];
            b[j] = b[j + 1];
        }
        n = width - 1;
    }
    Py_ssize_t k = n;
    for (; k > 0 && (w[k - 1] > x || isnan(w[k - 1])); k--) {  /* NaN orders last, as numpy sorts it */
        w[k] = w[k - 1];
        b[k] = b[k - 1];
    }
    w[k] = x;
    b[k] = (uint16_t)c;
    *filled = c + 1;
}

/* features.OperatorWindows._numpy_refresh of one row: its sorted windows of n and tn values. */
static void row_stats(const double *sorted, int64_t n, const double *tsorted, int64_t tn, Py_ssize_t width,
                      double *terms, double *s) {
    /* features._nan_mean_std: a full window as it is, else its empty slots as zeros. */
    const int full = n == width;
    for (Py_ssize_t j = 0; j < width; j++) terms[j] = full || !isnan(sorted[j]) ? sorted[j] : 0.0;
    const double mean = pairwise_sum(terms, width) / (double)n;
    for (Py_ssize_t j = 0; j < width; j++) {
        const double deviation = full || !isnan(sorted[j]) ? sorted[j] - mean : 0.0;
        terms[j] = deviation * deviation;
    }
    s[0] = (double)n;
    s[1] = mean;
    s[2] = sqrt(pairwise_sum(terms, width) / (double)n);
    s[3] = quantile(sorted, n, 0.25);
    s[4] = quantile(sorted, n, 0.5);
    s[5] = quantile(sorted, n, 0.75);
    s[6] = quantile(tsorted, tn, 0.5);
}

/* push(width, rows, values, transfers, window, filled, born, transfer_window, transfer_filled,
 * transfer_born, stats): each of the distinct ``rows`` takes its value, and its transfer where known
 * (not NaN), into its sorted windows; then its statistics. */
static PyObject *push(PyObject *self, PyObject *args) {
    Py_buffer rows, values, transfers, window, filled, born, twindow, tfilled, tborn, stats;
    Py_ssize_t width;
    (void)self;
    if (!PyArg_ParseTuple(args, "ny*y*y*w*w*w*w*w*w*w*", &width, &rows, &values, &transfers, &window, &filled, &born,
                          &twindow, &tfilled, &tborn, &stats))
        return NULL;
    PyObject *result = NULL;
    double *terms = NULL;
    const Py_ssize_t identities = width > 0 ? window.len / 8 / width : 0, count = rows.len / 8;
    if (width < 1 || width > 65535 || window.len != identities * width * 8 || twindow.len != window.len ||
        filled.len != identities * 8 || tfilled.len != filled.len || born.len != identities * width * 2 ||
        tborn.len != born.len || stats.len != identities * 8 * 8 || values.len != count * 8 ||
        transfers.len != values.len) {
        PyErr_SetString(PyExc_ValueError,
                        "push: windows, counts, push marks, statistics and values of different sizes");
        goto done;
    }
    const int64_t *row_of = rows.buf;
    for (Py_ssize_t i = 0; i < count; i++)
        if (row_of[i] < 0 || row_of[i] >= identities) {
            PyErr_SetString(PyExc_ValueError, "push: a row outside the windows");
            goto done;
        }
    terms = malloc(sizeof(double) * (size_t)width);
    if (!terms) {
        PyErr_NoMemory();
        goto done;
    }
    const double *value = values.buf, *transfer = transfers.buf;
    double *durations = window.buf, *tdurations = twindow.buf, *out = stats.buf;
    int64_t *fill = filled.buf, *tfill = tfilled.buf;
    uint16_t *marks = born.buf, *tmarks = tborn.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < count; i++) {
        const int64_t r = row_of[i];
        insert(durations + r * width, marks + r * width, fill + r, width, value[i]);
        if (!isnan(transfer[i])) insert(tdurations + r * width, tmarks + r * width, tfill + r, width, transfer[i]);
        row_stats(durations + r * width, fill[r] < width ? fill[r] : width, tdurations + r * width,
                  tfill[r] < width ? tfill[r] : width, width, terms, out + r * 8);
    }
    Py_END_ALLOW_THREADS
    result = Py_None;
    Py_INCREF(result);
done:
    free(terms);
    PyBuffer_Release(&rows);
    PyBuffer_Release(&values);
    PyBuffer_Release(&transfers);
    PyBuffer_Release(&window);
    PyBuffer_Release(&filled);
    PyBuffer_Release(&born);
    PyBuffer_Release(&twindow);
    PyBuffer_Release(&tfilled);
    PyBuffer_Release(&tborn);
    PyBuffer_Release(&stats);
    return result;
}

static PyMethodDef methods[] = {
    {"push", push, METH_VARARGS,
     "push(width, rows, values, transfers, window, filled, born, transfer_window, transfer_filled, transfer_born, "
     "stats):\neach row's value (and transfer, where not NaN) into its sorted windows, then its statistics."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_window_stats", NULL, -1, methods};

PyMODINIT_FUNC PyInit__window_stats(void) {
    return PyModule_Create(&module);
}
