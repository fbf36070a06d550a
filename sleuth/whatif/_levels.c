/* sleuth.whatif._levels: keys.lower_level and keys.row_spread row by row, compiled.
 *
 * The same rules, in the same float operations, as the numpy reference in sleuth/whatif/keys.py
 * (used when this module is not built): per row of a table of values in time order (NaN where
 * none), its values first; Pettitt's split, the rank-sum change point with at least `least` values
 * each side, its statistic standardized (ties ranked by time, the first of equal statistics kept),
 * then moved to where the values cross midway between the two sides' medians (the first best);
 * each side's median; the robust standard deviation (interquartile range / 1.349) of the values
 * around their own side's median, over both sides and each alone; whether the sides' medians lie
 * more than k of each side's apart. numpy spends most of that on whole-table temporaries and
 * sorts; a row here is a few dozen values in scratch memory. row_spread: each row's median and
 * robust standard deviation, as the reference's sort of the whole table gives them.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

/* Ascending; the values are never NaN here. Insertion sort: rows are short. */
static void sort_values(double *v, Py_ssize_t n) {
    for (Py_ssize_t i = 1; i < n; i++) {
        double x = v[i];
        Py_ssize_t j = i;
        for (; j > 0 && v[j - 1] > x; j--) v[j] = v[j - 1];
        v[j] = x;
    }
}

/* What numpy's median of a sorted row gives: NaN when empty (the reference pads with NaN). */
static double median_of(double *v, Py_ssize_t n) {
    if (n == 0) return NAN;
    sort_values(v, n);
    return (v[(n - 1) / 2] + v[n / 2]) / 2;
}

static double spread_of(double *v, Py_ssize_t n) {
    if (n == 0) return NAN;
    sort_values(v, n);
    return (v[(3 * (n - 1)) / 4] - v[(n - 1) / 4]) / 1.349;
}

/* A row's values in time order, its NaN (no value) left out; returns how many. */
static Py_ssize_t values_of(const double *row, Py_ssize_t width, double *out) {
    Py_ssize_t c = 0;
    for (Py_ssize_t j = 0; j < width; j++)
        if (!isnan(row[j])) out[c++] = row[j];
    return c;
}

static PyObject *lower_level(PyObject *self, PyObject *args) {
    Py_buffer table, level, jitter, stepped;
    Py_ssize_t rows, width, least;
    double k;
    (void)self;
    if (!PyArg_ParseTuple(args, "nndny*w*w*w*", &rows, &width, &k, &least, &table, &level, &jitter, &stepped))
        return NULL;
    PyObject *result = NULL;
    double *scratch = NULL;
    Py_ssize_t *order = NULL;
    if (rows < 0 || width < 1 || table.len != rows * width * 8 || level.len != rows * 8 || jitter.len != rows * 8 ||
        stepped.len != rows) {
        PyErr_SetString(PyExc_ValueError, "lower_level: buffers of the wrong size for the table");
        goto done;
    }
    scratch = malloc(sizeof(double) * 2 * (size_t)width);
    order = malloc(sizeof(Py_ssize_t) * (size_t)width);
    if (!scratch || !order) {
        PyErr_NoMemory();
        goto done;
    }
    const double *in = table.buf;
    double *out_level = level.buf, *out_jitter = jitter.buf;
    uint8_t *out_stepped = stepped.buf;
    double *series = scratch, *work = scratch + width;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t r = 0; r < rows; r++) {
        const Py_ssize_t c = values_of(in + r * width, width, series);
        /* Ranks from 1 in value order, ties by time: an insertion sort of positions is stable. */
        for (Py_ssize_t i = 0; i < c; i++) {
            Py_ssize_t j = i;
            for (; j > 0 && series[order[j - 1]] > series[i]; j--) order[j] = order[j - 1];
            order[j] = i;
        }
        Py_ssize_t lo = least > 1 ? least : 1, hi = c - least < width ? c - least : width;
        Py_ssize_t split = 1;
        if (lo <= hi) {
            /* Pettitt's statistic after the first t values: |2 x their rank sum - t (c + 1)|. */
            for (Py_ssize_t i = 0; i < c; i++) work[order[i]] = (double)(i + 1);
            int64_t sum = 0;
            double best = -1;
            for (Py_ssize_t t = 1; t <= hi; t++) {
                sum += (int64_t)work[t - 1];
                if (t < lo) continue;
                int64_t s = 2 * sum - (int64_t)t * (int64_t)(c + 1);
                if (s < 0) s = -s;
                /* standardized by its spread without a change, sqrt(t (c - t)) up to a constant */
                double z = t < c ? (double)s / sqrt((double)((int64_t)t * (int64_t)(c - t))) : 0.0;
                if (z > best) best = z, split = t;
            }
        }
        Py_ssize_t before = split < c ? split : c;
        for (Py_ssize_t j = 0; j < before; j++) work[j] = series[j];
        double first = median_of(work, before);
        for (Py_ssize_t j = before; j < c; j++) work[j - before] = series[j];
        double then = median_of(work, c - before);
        if (lo <= hi && first != then && !isnan(first) && !isnan(then)) {
            /* Moved to where the values cross midway between the two levels: the statistic's peak
               can run past a step into the second level, a value's side of the midway cannot. */
            double mid = (first + then) / 2;
            int up = first < then;
            Py_ssize_t wrong_before = 0, wrong_after = 0, best_cost = c + 1, best_t = split;
            for (Py_ssize_t j = 0; j < c; j++) wrong_after += up ? !(series[j] > mid) : series[j] > mid;
            for (Py_ssize_t t = 1; t <= hi; t++) {
                int above = series[t - 1] > mid;
                wrong_before += up ? above : !above;
                wrong_after -= up ? !above : above;
                if (t >= lo && wrong_before + wrong_after < best_cost) best_cost = wrong_before + wrong_after, best_t = t;
            }
            split = best_t;
            before = split < c ? split : c;
            for (Py_ssize_t j = 0; j < before; j++) work[j] = series[j];
            first = median_of(work, before);
            for (Py_ssize_t j = before; j < c; j++) work[j - before] = series[j];
            then = median_of(work, c - before);
        }
        /* Each level's own jitter: a step is a change beyond both (scattered values at one end are no level). */
        for (Py_ssize_t j = 0; j < before; j++) work[j] = series[j] - first;
        double jitter_before = spread_of(work, before);
        for (Py_ssize_t j = before; j < c; j++) work[j - before] = series[j] - then;
        double jitter_then = spread_of(work, c - before);
        for (Py_ssize_t j = 0; j < c; j++) work[j] = series[j] - (j < split ? first : then);
        double spread = spread_of(work, c);
        out_jitter[r] = spread;
        out_level[r] = isnan(first) || isnan(then) ? NAN : (first < then ? first : then);
        out_stepped[r] = lo <= hi && fabs(then - first) > k * fmax(jitter_before, jitter_then);
    }
    Py_END_ALLOW_THREADS
    result = Py_None;
    Py_INCREF(result);
done:
    free(scratch);
    free(order);
    PyBuffer_Release(&table);
    PyBuffer_Release(&level);
    PyBuffer_Release(&jitter);
    PyBuffer_Release(&stepped);
    return result;
}

static PyObject *row_spread(PyObject *self, PyObject *args) {
    Py_buffer table, median, spread;
    Py_ssize_t rows, width;
    (void)self;
    if (!PyArg_ParseTuple(args, "nny*w*w*", &rows, &width, &table, &median, &spread)) return NULL;
    PyObject *result = NULL;
    double *values = NULL;
    if (rows < 0 || width < 1 || table.len != rows * width * 8 || median.len != rows * 8 || spread.len != rows * 8) {
        PyErr_SetString(PyExc_ValueError, "row_spread: buffers of the wrong size for the table");
        goto done;
    }
    values = malloc(sizeof(double) * (size_t)width);
    if (!values) {
        PyErr_NoMemory();
        goto done;
    }
    const double *in = table.buf;
    double *out_median = median.buf, *out_spread = spread.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t r = 0; r < rows; r++) {
        const Py_ssize_t c = values_of(in + r * width, width, values);
        out_median[r] = median_of(values, c);  /* NaN where none: the reference's row of NaN */
        out_spread[r] = spread_of(values, c);  /* its values already sorted: one pass */
    }
    Py_END_ALLOW_THREADS
    result = Py_None;
    Py_INCREF(result);
done:
    free(values);
    PyBuffer_Release(&table);
    PyBuffer_Release(&median);
    PyBuffer_Release(&spread);
    return result;
}

static PyMethodDef methods[] = {
    {"lower_level", lower_level, METH_VARARGS,
     "lower_level(rows, width, k, least, table, level, jitter, stepped): keys.lower_level into the three outputs."},
    {"row_spread", row_spread, METH_VARARGS,
     "row_spread(rows, width, table, median, spread): keys.row_spread into the two outputs."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_levels", NULL, -1, methods};

PyMODINIT_FUNC PyInit__levels(void) { return PyModule_Create(&module); }
