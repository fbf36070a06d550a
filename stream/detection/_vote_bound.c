/* sleuth.stream.detection._vote_bound: vote_screen.vote_bound, compiled.
 *
 * The trees of a forest, their nodes in one set of arrays, and a box (per feature an interval
 * [lo, hi], or missing): per tree, the largest class-1 fraction of the leaves a row inside the box
 * can reach, walking as scikit-learn's tree_.apply does (a missing value goes where the node's
 * missing_go_to_left says, else left where the value is <= the threshold); their sum. The Python
 * walk in vote_screen.py is its reference (used when this module is not built). A box is grown with
 * a few hundred of these bounds; a Python walk takes about a millisecond each, this a few microseconds.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>

static PyObject *vote_bound(PyObject *self, PyObject *args) {
    Py_buffer roots, left, right, feature, threshold, missing_left, value, lo, hi, missing;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*y*y*y*y*", &roots, &left, &right, &feature, &threshold, &missing_left,
                          &value, &lo, &hi, &missing))
        return NULL;
    PyObject *result = NULL;
    int64_t *stack = NULL;
    Py_ssize_t nodes = left.len / 8, trees = roots.len / 8, features = lo.len / 8;
    if (right.len != left.len || feature.len != left.len || threshold.len != left.len || value.len != left.len ||
        missing_left.len != nodes || hi.len != lo.len || missing.len != features) {
        PyErr_SetString(PyExc_ValueError, "vote_bound: arrays of different lengths");
        goto done;
    }
    const int64_t *root = roots.buf, *l = left.buf, *r = right.buf, *f = feature.buf;
    const double *t = threshold.buf, *v = value.buf, *low = lo.buf, *high = hi.buf;
    const uint8_t *ml = missing_left.buf, *miss = missing.buf;
    /* A walk visits at most the nodes (checked below) and pushes at most two a visit. */
    stack = malloc(sizeof(int64_t) * (size_t)(2 * nodes + 1));
    if (!stack) {
        PyErr_NoMemory();
        goto done;
    }
    double total = 0.0;
    int bad = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t k = 0; k < trees && !bad; k++) {
        if (root[k] < 0 || root[k] >= nodes) {
            bad = 1;
            break;
        }
        Py_ssize_t top = 0, visits = 0;
        double best = 0.0;
        stack[top++] = root[k];
        while (top > 0) {
            int64_t n = stack[--top];
            if (++visits > nodes) {  /* a tree visits each node once at most: these children loop */
                bad = 1;
                break;
            }
            if (l[n] < 0) {
                if (v[n] > best) best = v[n];
                continue;
            }
            int64_t j = f[n];
            /* Checked as walked: a walk visits a few of the nodes. */
            if (l[n] >= nodes || r[n] < 0 || r[n] >= nodes || j < 0 || j >= features) {
                bad = 1;
                break;
            }
            if (miss[j]) {
                stack[top++] = ml[n] ? l[n] : r[n];
            } else {
                if (low[j] <= t[n]) stack[top++] = l[n];   /* some value in the box goes left */
                if (high[j] > t[n]) stack[top++] = r[n];   /* some value goes right */
            }
        }
        total += best;
    }
    Py_END_ALLOW_THREADS
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "vote_bound: a root, child or feature out of range, or the nodes loop");
        goto done;
    }
    result = PyFloat_FromDouble(total);
done:
    free(stack);
    PyBuffer_Release(&roots);
    PyBuffer_Release(&left);
    PyBuffer_Release(&right);
    PyBuffer_Release(&feature);
    PyBuffer_Release(&threshold);
    PyBuffer_Release(&missing_left);
    PyBuffer_Release(&value);
    PyBuffer_Release(&lo);
    PyBuffer_Release(&hi);
    PyBuffer_Release(&missing);
    return result;
}

static PyMethodDef methods[] = {
    {"vote_bound", vote_bound, METH_VARARGS,
     "vote_bound(roots, left, right, feature, threshold, missing_left, value, lo, hi, missing): the sum over trees "
     "of the largest leaf value a row in the box reaches."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_vote_bound", NULL, -1, methods};

PyMODINIT_FUNC PyInit__vote_bound(void) { return PyModule_Create(&module); }
