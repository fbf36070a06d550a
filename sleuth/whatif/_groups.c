/* sleuth.whatif._groups: keys.group_spread, compiled.
 *
 * Per group of values (dense group ids), its median and robust standard deviation (interquartile
 * range / 1.349), in the same float operations as the numpy reference in sleuth/whatif/keys.py
 * (used when this module is not built), handed back per value. numpy sorts all the values twice
 * (by value, then by group and value's rank); a counting sort by group and a sort within each
 * group (a slot's peers: a few to a few thousand values) does the same work in one pass.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>

static int ascending(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Ascending; the values are never NaN here. Insertion sort for the many small groups. */
static void sort_values(double *v, Py_ssize_t n) {
    if (n > 32) {
        qsort(v, (size_t)n, sizeof(double), ascending);
        return;
    }
    for (Py_ssize_t i = 1; i < n; i++) {
        double x = v[i];
        Py_ssize_t j = i;
        for (; j > 0 && v[j - 1] > x; j--) v[j] = v[j - 1];
        v[j] = x;
    }
}

static PyObject *spread(PyObject *self, PyObject *args) {
    Py_buffer group, values, median, deviation;
    Py_ssize_t n, groups;
    (void)self;
    if (!PyArg_ParseTuple(args, "nny*y*w*w*", &n, &groups, &group, &values, &median, &deviation)) return NULL;
    PyObject *result = NULL;
    Py_ssize_t *start = NULL;
    double *bucket = NULL, *group_median = NULL, *group_deviation = NULL;
    if (group.len < n * (Py_ssize_t)sizeof(int64_t) || values.len < n * (Py_ssize_t)sizeof(double) ||
        median.len < n * (Py_ssize_t)sizeof(double) || deviation.len < n * (Py_ssize_t)sizeof(double) || groups < 0) {
        PyErr_SetString(PyExc_ValueError, "spread: buffers shorter than n values");
        goto done;
    }
    const int64_t *of = group.buf;
    const double *value = values.buf;
    start = calloc((size_t)groups + 1, sizeof(Py_ssize_t));
    bucket = malloc((size_t)(n ? n : 1) * sizeof(double));
    group_median = malloc((size_t)(groups ? groups : 1) * sizeof(double));
    group_deviation = malloc((size_t)(groups ? groups : 1) * sizeof(double));
    if (!start || !bucket || !group_median || !group_deviation) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (of[i] < 0 || of[i] >= groups) {
            PyErr_Format(PyExc_ValueError, "spread: group id %lld outside [0, %zd)", (long long)of[i], groups);
            goto done;
        }
        start[of[i] + 1]++;
    }
    for (Py_ssize_t g = 0; g < groups; g++) start[g + 1] += start[g];
    Py_BEGIN_ALLOW_THREADS
    /* Counting sort by group: start[g] runs to each group's end, then back to its start below. */
    for (Py_ssize_t i = 0; i < n; i++) bucket[start[of[i]]++] = value[i];
    for (Py_ssize_t g = groups; g > 0; g--) start[g] = start[g - 1];
    start[0] = 0;
    for (Py_ssize_t g = 0; g < groups; g++) {
        double *v = bucket + start[g];
        Py_ssize_t c = start[g + 1] - start[g];
        if (c == 0) continue;
        sort_values(v, c);
        group_median[g] = (v[(c - 1) / 2] + v[c / 2]) / 2;
        group_deviation[g] = (v[(3 * (c - 1)) / 4] - v[(c - 1) / 4]) / 1.349;
    }
    double *out_median = median.buf, *out_deviation = deviation.buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        out_median[i] = group_median[of[i]];
        out_deviation[i] = group_deviation[of[i]];
    }
    Py_END_ALLOW_THREADS
    result = Py_None;
    Py_INCREF(result);
done:
    free(start);
    free(bucket);
    free(group_median);
    free(group_deviation);
    PyBuffer_Release(&group);
    PyBuffer_Release(&values);
    PyBuffer_Release(&median);
    PyBuffer_Release(&deviation);
    return result;
}

static PyMethodDef methods[] = {
    {"spread", spread, METH_VARARGS,
     "spread(n, groups, group, values, median, deviation): keys.group_spread into the two outputs."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_groups", NULL, -1, methods};

PyMODINIT_FUNC PyInit__groups(void) { return PyModule_Create(&module); }
