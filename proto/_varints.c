/* sleuth.proto._varints: proto.wire's packed-varint columns, compiled.
 *
 * A packed column is a run of varints: 7 bits a byte, low bits first, the high bit set on every
 * byte of a value but its last. ``decode`` reads such a run into uint64 values (a value's bits past
 * the 64th are dropped, as protobuf and the numpy reference in wire.py drop them); ``encode``
 * writes uint64 values as such a run, with each value's size in bytes. The numpy versions in
 * wire.py are the reference (used when this module is not built): they find the values by their
 * stop bits and assemble them in a few array passes, one pass per byte of the widest value.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* decode(raw: uint8 buffer, out: uint64 buffer with one slot per stop byte) -> None.
 * ValueError when a value runs past 10 bytes or past the end of ``raw``, or ``out`` does not
 * have one slot per value. */
static PyObject *decode(PyObject *self, PyObject *args) {
    Py_buffer raw, out;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*w*", &raw, &out))
        return NULL;
    const uint8_t *in = raw.buf;
    uint64_t *values = out.buf;
    const Py_ssize_t n = raw.len, slots = out.len / 8;
    Py_ssize_t k = 0, pos = 0;
    int bad = 0;
    Py_BEGIN_ALLOW_THREADS
    while (pos < n) {
        uint64_t value = 0;
        int shift = 0;
        for (;;) {
            if (pos >= n || shift > 63) {  /* cut off, or an 11th byte */
                bad = 1;
                break;
            }
            const uint8_t byte = in[pos++];
            value |= (uint64_t)(byte & 0x7F) << shift;
            if (byte < 0x80)
                break;
            shift += 7;
        }
        if (bad)
            break;
        if (k >= slots) {
            bad = 2;
            break;
        }
        values[k++] = value;
    }
    Py_END_ALLOW_THREADS
    if (!bad && k != slots)
        bad = 2;
    PyBuffer_Release(&raw);
    PyBuffer_Release(&out);
    if (bad) {
        PyErr_SetString(PyExc_ValueError, bad == 1 ? "decode: a varint cut off or longer than 10 bytes"
                                                   : "decode: out has not one slot per varint");
        return NULL;
    }
    Py_RETURN_NONE;
}

static inline int size_of(uint64_t value) {
    int size = 1;
    while (value >= 0x80) {
        value >>= 7;
        size++;
    }
    return size;
}

/* encode(values: uint64 buffer, sizes: int64 buffer of as many) -> bytes: the run of varints,
 * each value's size in bytes written to ``sizes``. */
static PyObject *encode(PyObject *self, PyObject *args) {
    Py_buffer in, sizes_out;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*w*", &in, &sizes_out))
        return NULL;
    PyObject *result = NULL;
    const uint64_t *values = in.buf;
    int64_t *sizes = sizes_out.buf;
    const Py_ssize_t n = in.len / 8;
    if (sizes_out.len != n * 8) {
        PyErr_SetString(PyExc_ValueError, "encode: sizes has not one slot per value");
        goto done;
    }
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        sizes[i] = size_of(values[i]);
        total += sizes[i];
    }
    result = PyBytes_FromStringAndSize(NULL, total);
    if (result == NULL)
        goto done;
    uint8_t *out = (uint8_t *)PyBytes_AS_STRING(result);
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        uint64_t value = values[i];
        while (value >= 0x80) {
            *out++ = (uint8_t)(value & 0x7F) | 0x80;
            value >>= 7;
        }
        *out++ = (uint8_t)value;
    }
    Py_END_ALLOW_THREADS
done:
    PyBuffer_Release(&in);
    PyBuffer_Release(&sizes_out);
    return result;
}

static PyMethodDef methods[] = {
    {"decode", decode, METH_VARARGS, "decode(raw, out): the uint64 values of a run of packed varints, into out"},
    {"encode", encode, METH_VARARGS, "encode(values, sizes) -> bytes: uint64 values as packed varints, each one's size into sizes"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_varints", "proto.wire's packed varints, compiled.", -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__varints(void) { return PyModule_Create(&module); }
