/* sleuth.stream.detection._screen: vote_screen.VoteScreen.kinds and screened, compiled.
 *
 * ``kinds``: per row of a float32 feature matrix, in one pass over the row, its kind's key as
 * VoteScreen._numpy_kinds (its reference) builds it column by column: a bit a split feature for
 * "missing", then each categorical code in its bits; -1 where a known code is out of range.
 *
 * ``screened``: per row of a float32 feature matrix and its kind: whether it lies in one of its kind's boxes,
 * each box's float32 edges [lo, hi] checked only on the columns it bounds (an unbounded column
 * excludes nothing). A value the row has missing (NaN) compares false both ways, as numpy's
 * comparisons do, so it is never outside. The numpy version in vote_screen.py is its reference
 * (used when this module is not built): it gathers each kind's rows and compares every column.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>

/* kinds(width, X, split, categorical, code_bits, out): each row's kind key into out (int64). */
static PyObject *kinds(PyObject *self, PyObject *args) {
    Py_buffer X, split, categorical, out;
    Py_ssize_t width, code_bits;
    (void)self;
    if (!PyArg_ParseTuple(args, "ny*y*y*nw*", &width, &X, &split, &categorical, &code_bits, &out))
        return NULL;
    PyObject *result = NULL;
    const Py_ssize_t rows = width > 0 ? X.len / 4 / width : 0, nsplit = split.len / 8, ncat = categorical.len / 8;
    const int64_t *split_at = split.buf, *cat_at = categorical.buf;
    int bad = width < 1 || X.len != rows * width * 4 || out.len != rows * 8 || code_bits < 1 ||
              nsplit + code_bits * ncat > 63;
    for (Py_ssize_t j = 0; !bad && j < nsplit; j++) bad = split_at[j] < 0 || split_at[j] >= width;
    for (Py_ssize_t j = 0; !bad && j < ncat; j++) bad = cat_at[j] < 0 || cat_at[j] >= width;
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "kinds: columns outside the matrix, or keys over 63 bits");
        goto done;
    }
    const float *x = X.buf;
    int64_t *key = out.buf;
    const double top = (double)((int64_t)1 << code_bits);
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < rows; i++) {
        const float *row = x + i * width;
        int64_t k = 0;
        for (Py_ssize_t j = 0; j < nsplit; j++) k |= (int64_t)isnan(row[split_at[j]]) << j;
        for (Py_ssize_t j = 0; j < ncat; j++) {
            const double code = row[cat_at[j]];
            if (isnan(code)) continue;
            if (!(code >= 0 && code < top && code == floor(code))) {
                k = -1;  /* every bit set: no code ORed in after it changes it */
                continue;
            }
            k |= (int64_t)code << (nsplit + j * code_bits);
        }
        key[i] = k;
    }
    Py_END_ALLOW_THREADS
    result = Py_None;
    Py_INCREF(result);
done:
    PyBuffer_Release(&X);
    PyBuffer_Release(&split);
    PyBuffer_Release(&categorical);
    PyBuffer_Release(&out);
    return result;
}

/* The index of ``kind`` among the ascending ``keys``, or -1. */
static Py_ssize_t find(const int64_t *keys, Py_ssize_t n, int64_t kind) {
    Py_ssize_t a = 0, b = n;
    while (a < b) {
        const Py_ssize_t m = a + (b - a) / 2;
        if (keys[m] < kind) a = m + 1;
        else b = m;
    }
    return a < n && keys[a] == kind ? a : -1;
}

static PyObject *screened(PyObject *self, PyObject *args) {
    Py_buffer X, kinds, keys, first_box, lo, hi, columns, first_column, inside;
    Py_ssize_t width;
    (void)self;
    if (!PyArg_ParseTuple(args, "ny*y*y*y*y*y*y*y*w*", &width, &X, &kinds, &keys, &first_box, &lo, &hi, &columns,
                          &first_column, &inside))
        return NULL;
    PyObject *result = NULL;
    const Py_ssize_t rows = kinds.len / 8, nkeys = keys.len / 8, boxes = first_column.len / 8 - 1;
    const int64_t *kind = kinds.buf, *key = keys.buf, *fb = first_box.buf, *col = columns.buf, *fc = first_column.buf;
    if (width < 1 || X.len != rows * width * 4 || inside.len != rows || first_box.len != (nkeys + 1) * 8 ||
        boxes < 0 || lo.len != boxes * width * 4 || hi.len != lo.len || fb[0] != 0 || fb[nkeys] != boxes ||
        fc[0] != 0 || fc[boxes] != columns.len / 8) {
        PyErr_SetString(PyExc_ValueError, "screened: rows, kinds, boxes and columns of different sizes");
        goto done;
    }
    for (Py_ssize_t k = 0; k < nkeys; k++)
        if (fb[k] > fb[k + 1]) {
            PyErr_SetString(PyExc_ValueError, "screened: a kind's boxes out of order");
            goto done;
        }
    for (Py_ssize_t b = 0; b < boxes; b++)
        if (fc[b] > fc[b + 1]) {
            PyErr_SetString(PyExc_ValueError, "screened: a box's columns out of order");
            goto done;
        }
    for (Py_ssize_t c = 0; c < columns.len / 8; c++)
        if (col[c] < 0 || col[c] >= width) {
            PyErr_SetString(PyExc_ValueError, "screened: a column outside the rows");
            goto done;
        }
    const float *x = X.buf, *low = lo.buf, *high = hi.buf;
    uint8_t *out = inside.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < rows; i++) {
        const Py_ssize_t k = find(key, nkeys, kind[i]);
        uint8_t in = 0;
        if (k >= 0) {
            const float *row = x + i * width;
            for (int64_t b = fb[k]; b < fb[k + 1] && !in; b++) {
                const float *l = low + b * width, *h = high + b * width;
                in = 1;
                for (int64_t c = fc[b]; c < fc[b + 1]; c++) {
                    const int64_t j = col[c];
                    if (row[j] < l[j] || row[j] > h[j]) {
                        in = 0;
                        break;
                    }
                }
            }
        }
        out[i] = in;
    }
    Py_END_ALLOW_THREADS
    result = Py_None;
    Py_INCREF(result);
done:
    PyBuffer_Release(&X);
    PyBuffer_Release(&kinds);
    PyBuffer_Release(&keys);
    PyBuffer_Release(&first_box);
    PyBuffer_Release(&lo);
    PyBuffer_Release(&hi);
    PyBuffer_Release(&columns);
    PyBuffer_Release(&first_column);
    PyBuffer_Release(&inside);
    return result;
}

static PyMethodDef methods[] = {
    {"kinds", kinds, METH_VARARGS,
     "kinds(width, X, split, categorical, code_bits, out): each row's kind key (missing bits, then codes) into out."},
    {"screened", screened, METH_VARARGS,
     "screened(width, X, kinds, keys, first_box, lo, hi, columns, first_column, inside): whether each row lies in one "
     "of its kind's boxes, into inside."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_screen", NULL, -1, methods};

PyMODINIT_FUNC PyInit__screen(void) { return PyModule_Create(&module); }
