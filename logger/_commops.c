/* sleuth.logger._commops: the hot path of the CommOps logger.
 *
 * One job: time the begin and end of a communication operator and put one fixed-size record
 * into a fixed-size ring that a background thread drains. Everything else (hooks, identity,
 * iterations, sending) is Python. `_commops_py.py` is the pure-Python twin with the same API;
 * the same tests run against both.
 *
 * Concurrency: producers are the training thread, torch's callback threads and, through the C API
 * (commops_capi.h, the capsule `_C_API`), native hooks that fire on threads without the GIL (DDP's
 * reducer runs in autograd threads). So producers are serialized by a spinlock of the recorder's
 * own around each begin/end/record: its critical sections are a few stores, far shorter than a
 * futex round trip. The ring itself is single-consumer (the drainer, holding the GIL) with
 * acquire/release indices; a full ring drops the new record and counts it, it never waits.
 *
 * CUDA: libcudart is opened with dlopen only when `cuda_available()` is called, through a few
 * function pointers declared here, so this file builds with plain gcc and no CUDA toolkit.
 * Device times come from CUDA events (each pending slot owns a reusable start/end pair),
 * completion is found by `poll()` with cudaEventQuery (never a synchronize on the training
 * stream), and event times are mapped to the host clock through a reference event recorded on
 * a private stream. `poll()` asks in the order operators ended and stops at the first still
 * running: events on one stream complete in order, so a GPU far behind the host costs one
 * query per poll, not one per operator in flight (a poll holds the GIL the training thread needs).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "commops_capi.h"
#include "commops_record.h"

static int64_t now_ns(void) {
    /* The monotonic clock: a step of the wall clock (NTP) never makes a duration negative. The
     * session moves drained records onto the wall clock, which ranks on different hosts share. */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* ---- libcudart, loaded at run time ------------------------------------------------------- */

typedef void *cudaEvent_t;
typedef void *cudaStream_t;
typedef int (*EventCreateFn)(cudaEvent_t *, unsigned int);
typedef int (*EventRecordFn)(cudaEvent_t, cudaStream_t);
typedef int (*EventQueryFn)(cudaEvent_t);
typedef int (*EventSyncFn)(cudaEvent_t);
typedef int (*EventElapsedFn)(float *, cudaEvent_t, cudaEvent_t);
typedef int (*StreamCreateFn)(cudaStream_t *, unsigned int);

static struct {
    int tried, ok;
    EventCreateFn event_create;
    EventRecordFn event_record;
    EventQueryFn event_query;
    EventSyncFn event_sync;
    EventElapsedFn elapsed;
    StreamCreateFn stream_create;
} cuda;

#define CUDA_SUCCESS 0
#define CUDA_NOT_READY 600
#define CUDA_STREAM_NON_BLOCKING 1

static int load_cudart(const char *path) {
    static const char *names[] = {"libcudart.so", "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0", NULL};
    void *lib = NULL;
    if (cuda.tried) return cuda.ok;
    cuda.tried = 1;
    if (path) lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    for (int i = 0; !lib && names[i]; i++) lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!lib) return 0;
    cuda.event_create = (EventCreateFn)dlsym(lib, "cudaEventCreateWithFlags");
    cuda.event_record = (EventRecordFn)dlsym(lib, "cudaEventRecord");
    cuda.event_query = (EventQueryFn)dlsym(lib, "cudaEventQuery");
    cuda.event_sync = (EventSyncFn)dlsym(lib, "cudaEventSynchronize");
    cuda.elapsed = (EventElapsedFn)dlsym(lib, "cudaEventElapsedTime");
    cuda.stream_create = (StreamCreateFn)dlsym(lib, "cudaStreamCreateWithFlags");
    cuda.ok = cuda.event_create && cuda.event_record && cuda.event_query && cuda.event_sync &&
              cuda.elapsed && cuda.stream_create;
    return cuda.ok;
}

/* ---- the recorder ------------------------------------------------------------------------ */

enum { SLOT_FREE = 0, SLOT_HOST = 1, SLOT_CUDA_OPEN = 2, SLOT_CUDA_FLIGHT = 3 };

typedef struct {
    Record rec;
    int state;
    cudaEvent_t ev_start, ev_end;
} Slot;

typedef struct {
    PyObject_HEAD
    Record *ring;
    uint64_t capacity;           /* a power of two */
    uint64_t head, tail;         /* head: next write (producer), tail: next read (consumer) */
    Slot *slots;
    int32_t *free_list;
    int32_t n_slots, n_free;
    /* Slots whose end event is recorded, oldest first: a circular queue of n_slots. */
    int32_t *flight;
    int32_t flight_head, flight_count;
    uint64_t dropped;
    uint64_t begun;              /* records begun or recorded whole, ever */
    int64_t iteration;           /* the session's current iteration, read by native hooks */
    int lock;                    /* the producers' spinlock (see the top of this file) */
    /* CUDA reference: event `ref` happened at host time `ref_ns`. */
    cudaStream_t ref_stream;
    cudaEvent_t ref;
    int64_t ref_ns;
    int has_ref;
} Recorder;

static void lock(Recorder *self) {
    while (__atomic_exchange_n(&self->lock, 1, __ATOMIC_ACQUIRE)) {
        while (__atomic_load_n(&self->lock, __ATOMIC_RELAXED)) sched_yield();
    }
}

static void unlock(Recorder *self) { __atomic_store_n(&self->lock, 0, __ATOMIC_RELEASE); }

/* push, take_slot and give_slot: the caller holds the lock. */
static void push(Recorder *self, const Record *rec) {
    uint64_t head = self->head;
    uint64_t tail = __atomic_load_n(&self->tail, __ATOMIC_ACQUIRE);
    if (head - tail >= self->capacity) {
        self->dropped++;
        return;
    }
    self->ring[head & (self->capacity - 1)] = *rec;
    __atomic_store_n(&self->head, head + 1, __ATOMIC_RELEASE);
}

static int32_t take_slot(Recorder *self) {
    if (self->n_free == 0) {
        self->dropped++;
        return -1;
    }
    return self->free_list[--self->n_free];
}

static void give_slot(Recorder *self, int32_t i) {
    self->slots[i].state = SLOT_FREE;
    self->free_list[self->n_free++] = i;
}

static int Recorder_init(Recorder *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"capacity", "slots", NULL};
    Py_ssize_t capacity, n_slots = 4096;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "n|n", kwlist, &capacity, &n_slots)) return -1;
    if (capacity < 1 || capacity > ((Py_ssize_t)1 << 40)) {
        PyErr_SetString(PyExc_ValueError, "capacity must be between 1 and 2**40");
        return -1;
    }
    if (n_slots < 1 || n_slots > (1 << 30)) {
        PyErr_SetString(PyExc_ValueError, "slots must be between 1 and 2**30");
        return -1;
    }
    uint64_t cap = 1;
    while (cap < (uint64_t)capacity) cap <<= 1;
    if (self->ring) return 0; /* __init__ called twice: keep the first ring */
    self->ring = PyMem_Calloc(cap, sizeof(Record));
    self->slots = PyMem_Calloc((size_t)n_slots, sizeof(Slot));
    self->free_list = PyMem_Calloc((size_t)n_slots, sizeof(int32_t));
    self->flight = PyMem_Calloc((size_t)n_slots, sizeof(int32_t));
    if (!self->ring || !self->slots || !self->free_list || !self->flight) {
        PyErr_NoMemory();
        return -1;
    }
    self->capacity = cap;
    self->n_slots = self->n_free = (int32_t)n_slots;
    /* Pop order low index first: slot 0 is on top of the stack. */
    for (int32_t i = 0; i < self->n_slots; i++) self->free_list[i] = self->n_slots - 1 - i;
    return 0;
}

static void Recorder_dealloc(Recorder *self) {
    /* CUDA events are left to the driver: destroying them needs a context that may be gone. */
    PyMem_Free(self->ring);
    PyMem_Free(self->slots);
    PyMem_Free(self->free_list);
    PyMem_Free(self->flight);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int parse_op(PyObject *args, Record *rec, int extra, unsigned long long *stream) {
    unsigned int comm, op;
    int peer;
    unsigned long long seq, nbytes;
    long long iteration;
    memset(rec, 0, sizeof(*rec));
    if (extra) {
        if (!PyArg_ParseTuple(args, "IKIiKLK", &comm, &seq, &op, &peer, &nbytes, &iteration, stream)) return 0;
    } else if (!PyArg_ParseTuple(args, "IKIiKL", &comm, &seq, &op, &peer, &nbytes, &iteration)) {
        return 0;
    }
    if (op > 255) {
        PyErr_SetString(PyExc_ValueError, "op must fit in a byte");
        return 0;
    }
    rec->comm = comm;
    rec->seq = seq;
    rec->op = (uint8_t)op;
    rec->peer = peer;
    rec->nbytes = nbytes;
    rec->iteration = iteration;
    return 1;
}

static int32_t host_begin(Recorder *self, const Record *rec) {
    lock(self);
    self->begun++;
    int32_t i = take_slot(self);
    if (i >= 0) {
        Slot *slot = &self->slots[i];
        slot->rec = *rec;
        slot->rec.t_issue_ns = slot->rec.t_start_ns = now_ns();
        slot->state = SLOT_HOST;
    }
    unlock(self);
    return i;
}

static void host_end(Recorder *self, long i) {
    /* A handle of -1 (no slot was free) or a stale one is ignored: the loss is already counted. */
    lock(self);
    if (i >= 0 && i < self->n_slots && self->slots[i].state == SLOT_HOST) {
        Slot *slot = &self->slots[i];
        slot->rec.t_end_ns = now_ns();
        push(self, &slot->rec);
        give_slot(self, (int32_t)i);
    }
    unlock(self);
}

static int push_whole(Recorder *self, const Record *rec) {
    lock(self);
    self->begun++;
    uint64_t before = self->dropped;
    push(self, rec);
    int kept = self->dropped == before;
    unlock(self);
    return kept;
}

static PyObject *Recorder_begin(Recorder *self, PyObject *args) {
    Record rec;
    if (!parse_op(args, &rec, 0, NULL)) return NULL;
    return PyLong_FromLong(host_begin(self, &rec));
}

static int check_handle(Recorder *self, PyObject *arg, long *out) {
    long i = PyLong_AsLong(arg);
    if (i == -1 && PyErr_Occurred()) return 0;
    *out = i;
    return 1;
}

static PyObject *Recorder_end(Recorder *self, PyObject *arg) {
    long i;
    if (!check_handle(self, arg, &i)) return NULL;
    host_end(self, i);
    Py_RETURN_NONE;
}

static PyObject *Recorder_record(Recorder *self, PyObject *args) {
    unsigned int comm, op;
    int peer;
    unsigned long long seq, nbytes;
    long long iteration, t_issue, t_start, t_end;
    if (!PyArg_ParseTuple(args, "IKIiKLLLL", &comm, &seq, &op, &peer, &nbytes, &iteration, &t_issue, &t_start,
                          &t_end))
        return NULL;
    if (op > 255) {
        PyErr_SetString(PyExc_ValueError, "op must fit in a byte");
        return NULL;
    }
    Record rec = {t_issue, t_start, t_end, seq, nbytes, iteration, comm, peer, (uint8_t)op, {0}};
    return PyBool_FromLong(push_whole(self, &rec));
}

static PyObject *Recorder_drain(Recorder *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"max", NULL};
    Py_ssize_t max = -1;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|n", kwlist, &max)) return NULL;
    uint64_t tail = self->tail;
    uint64_t head = __atomic_load_n(&self->head, __ATOMIC_ACQUIRE);
    uint64_t n = head - tail;
    if (max >= 0 && (uint64_t)max < n) n = (uint64_t)max;
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(n * sizeof(Record)));
    if (!out) return NULL;
    char *dst = PyBytes_AS_STRING(out);
    /* At most two contiguous pieces: up to the end of the ring, then from its start. */
    uint64_t start = tail & (self->capacity - 1);
    uint64_t first = n < self->capacity - start ? n : self->capacity - start;
    memcpy(dst, self->ring + start, first * sizeof(Record));
    memcpy(dst + first * sizeof(Record), self->ring, (n - first) * sizeof(Record));
    __atomic_store_n(&self->tail, tail + n, __ATOMIC_RELEASE);
    return out;
}

/* ---- CUDA path --------------------------------------------------------------------------- */

static void give_locked(Recorder *self, int32_t i, int lost) {
    lock(self);
    give_slot(self, i);
    self->dropped += lost;
    unlock(self);
}

static int cuda_fail(const char *what, int code) {
    PyErr_Format(PyExc_RuntimeError, "%s failed with CUDA error %d", what, code);
    return 0;
}

static int calibrate(Recorder *self) {
    /* A reference event on a private non-blocking stream: synchronizing on it waits for that
     * empty stream only, never for the training stream. */
    int rc;
    if (!self->ref_stream && (rc = cuda.stream_create(&self->ref_stream, CUDA_STREAM_NON_BLOCKING)))
        return cuda_fail("cudaStreamCreateWithFlags", rc);
    if (!self->ref && (rc = cuda.event_create(&self->ref, 0))) return cuda_fail("cudaEventCreateWithFlags", rc);
    int64_t before = now_ns();
    if ((rc = cuda.event_record(self->ref, self->ref_stream))) return cuda_fail("cudaEventRecord", rc);
    if ((rc = cuda.event_sync(self->ref))) return cuda_fail("cudaEventSynchronize", rc);
    self->ref_ns = before + (now_ns() - before) / 2;
    self->has_ref = 1;
    return 1;
}

static PyObject *Recorder_begin_cuda(Recorder *self, PyObject *args) {
    Record rec;
    unsigned long long stream;
    int rc;
    if (!parse_op(args, &rec, 1, &stream)) return NULL;
    if (!cuda.ok) {
        PyErr_SetString(PyExc_RuntimeError, "the CUDA path needs cuda_available() to be true first");
        return NULL;
    }
    if (!self->has_ref && !calibrate(self)) return NULL;
    lock(self);
    self->begun++;
    int32_t i = take_slot(self);
    unlock(self);
    if (i < 0) return PyLong_FromLong(-1);
    Slot *slot = &self->slots[i];
    if (!slot->ev_start && ((rc = cuda.event_create(&slot->ev_start, 0)) || (rc = cuda.event_create(&slot->ev_end, 0)))) {
        give_locked(self, i, 0);
        cuda_fail("cudaEventCreateWithFlags", rc);
        return NULL;
    }
    rec.t_issue_ns = now_ns();
    slot->rec = rec;
    if ((rc = cuda.event_record(slot->ev_start, (cudaStream_t)(uintptr_t)stream))) {
        give_locked(self, i, 0);
        cuda_fail("cudaEventRecord", rc);
        return NULL;
    }
    slot->state = SLOT_CUDA_OPEN;
    return PyLong_FromLong(i);
}

static PyObject *Recorder_end_cuda(Recorder *self, PyObject *args) {
    long i;
    unsigned long long stream;
    int rc;
    if (!PyArg_ParseTuple(args, "lK", &i, &stream)) return NULL;
    if (i < 0 || i >= self->n_slots || self->slots[i].state != SLOT_CUDA_OPEN) Py_RETURN_NONE;
    Slot *slot = &self->slots[i];
    if ((rc = cuda.event_record(slot->ev_end, (cudaStream_t)(uintptr_t)stream))) {
        give_locked(self, (int32_t)i, 1);
        cuda_fail("cudaEventRecord", rc);
        return NULL;
    }
    slot->state = SLOT_CUDA_FLIGHT;
    /* A slot is in flight at most once, so the queue of n_slots never overflows. */
    self->flight[(self->flight_head + self->flight_count) % self->n_slots] = (int32_t)i;
    self->flight_count++;
    Py_RETURN_NONE;
}

static PyObject *Recorder_poll(Recorder *self, PyObject *Py_UNUSED(ignored)) {
    /* Completed CUDA operators move to the ring, oldest first; the first one still running and
     * all after it stay for the next poll. */
    long done = 0;
    if (!cuda.ok || !self->has_ref) return PyLong_FromLong(0);
    while (self->flight_count > 0) {
        int32_t i = self->flight[self->flight_head];
        Slot *slot = &self->slots[i];
        int rc = cuda.event_query(slot->ev_end);
        if (rc == CUDA_NOT_READY) break;
        self->flight_head = (self->flight_head + 1) % self->n_slots;
        self->flight_count--;
        float start_ms = 0, end_ms = 0;
        int timed = rc == CUDA_SUCCESS && !cuda.elapsed(&start_ms, self->ref, slot->ev_start) &&
                    !cuda.elapsed(&end_ms, self->ref, slot->ev_end);
        lock(self);
        if (timed) {
            slot->rec.t_start_ns = self->ref_ns + (int64_t)((double)start_ms * 1e6);
            slot->rec.t_end_ns = self->ref_ns + (int64_t)((double)end_ms * 1e6);
            push(self, &slot->rec);
            done++;
        } else {
            self->dropped++; /* an event error: the record's times are unknown */
        }
        give_slot(self, i);
        unlock(self);
    }
    return PyLong_FromLong(done);
}

static PyObject *Recorder_recalibrate(Recorder *self, PyObject *Py_UNUSED(ignored)) {
    /* cudaEventElapsedTime gives float milliseconds, whose resolution coarsens with distance
     * from the reference: the sender calls this about once a second to keep it close. Elapsed
     * times from a newer reference may be negative, which maps correctly. */
    if (!cuda.ok) Py_RETURN_FALSE;
    if (!calibrate(self)) return NULL;
    Py_RETURN_TRUE;
}

static PyObject *Recorder_get_dropped(Recorder *self, void *c) {
    return PyLong_FromUnsignedLongLong(__atomic_load_n(&self->dropped, __ATOMIC_RELAXED));
}
static PyObject *Recorder_get_begun(Recorder *self, void *c) {
    return PyLong_FromUnsignedLongLong(__atomic_load_n(&self->begun, __ATOMIC_RELAXED));
}
static PyObject *Recorder_get_iteration(Recorder *self, void *c) {
    return PyLong_FromLongLong(__atomic_load_n(&self->iteration, __ATOMIC_RELAXED));
}
static int Recorder_set_iteration(Recorder *self, PyObject *value, void *c) {
    if (!value) {
        PyErr_SetString(PyExc_AttributeError, "iteration cannot be deleted");
        return -1;
    }
    long long iteration = PyLong_AsLongLong(value);
    if (iteration == -1 && PyErr_Occurred()) return -1;
    __atomic_store_n(&self->iteration, (int64_t)iteration, __ATOMIC_RELAXED);
    return 0;
}
static PyObject *Recorder_get_size(Recorder *self, void *c) {
    return PyLong_FromUnsignedLongLong(__atomic_load_n(&self->head, __ATOMIC_ACQUIRE) - self->tail);
}
static PyObject *Recorder_get_capacity(Recorder *self, void *c) { return PyLong_FromUnsignedLongLong(self->capacity); }
static PyObject *Recorder_get_pending(Recorder *self, void *c) { return PyLong_FromLong(self->n_slots - self->n_free); }

static PyMethodDef Recorder_methods[] = {
    {"begin", (PyCFunction)Recorder_begin, METH_VARARGS, "begin(comm, seq, op, peer, nbytes, iteration) -> handle"},
    {"end", (PyCFunction)Recorder_end, METH_O, "end(handle): the operator is done; its record enters the ring"},
    {"record", (PyCFunction)Recorder_record, METH_VARARGS, "record(..., t_issue_ns, t_start_ns, t_end_ns) -> kept"},
    {"drain", (PyCFunction)(void (*)(void))Recorder_drain, METH_VARARGS | METH_KEYWORDS, "drain(max=-1) -> bytes"},
    {"begin_cuda", (PyCFunction)Recorder_begin_cuda, METH_VARARGS, "begin_cuda(..., stream) -> handle"},
    {"end_cuda", (PyCFunction)Recorder_end_cuda, METH_VARARGS, "end_cuda(handle, stream)"},
    {"poll", (PyCFunction)Recorder_poll, METH_NOARGS, "poll() -> CUDA operators completed"},
    {"recalibrate", (PyCFunction)Recorder_recalibrate, METH_NOARGS, "recalibrate() -> bool"},
    {NULL},
};

static PyGetSetDef Recorder_getset[] = {
    {"dropped", (getter)Recorder_get_dropped, NULL, "records lost (ring full, no free slot)", NULL},
    {"size", (getter)Recorder_get_size, NULL, "records waiting in the ring", NULL},
    {"capacity", (getter)Recorder_get_capacity, NULL, "ring capacity (a power of two)", NULL},
    {"pending", (getter)Recorder_get_pending, NULL, "operators begun and not yet ended", NULL},
    {"begun", (getter)Recorder_get_begun, NULL, "records begun or recorded whole, ever", NULL},
    {"iteration", (getter)Recorder_get_iteration, (setter)Recorder_set_iteration,
     "the current iteration, as native hooks read it (the session sets it)", NULL},
    {NULL},
};

static PyTypeObject RecorderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sleuth.logger._commops.Recorder",
    .tp_basicsize = sizeof(Recorder),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Fixed-size ring of CommOps records with begin/end timing.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Recorder_init,
    .tp_dealloc = (destructor)Recorder_dealloc,
    .tp_methods = Recorder_methods,
    .tp_getset = Recorder_getset,
};

/* ---- the C API for native hooks (commops_capi.h) ------------------------------------------- */

static int64_t capi_iteration(void *recorder) {
    return __atomic_load_n(&((Recorder *)recorder)->iteration, __ATOMIC_RELAXED);
}

static int32_t capi_begin(void *recorder, uint32_t comm, uint64_t seq, uint8_t op, int32_t peer, uint64_t nbytes,
                          int64_t iteration) {
    Record rec;
    memset(&rec, 0, sizeof(rec));
    rec.comm = comm;
    rec.seq = seq;
    rec.op = op;
    rec.peer = peer;
    rec.nbytes = nbytes;
    rec.iteration = iteration;
    return host_begin((Recorder *)recorder, &rec);
}

static void capi_end(void *recorder, int32_t handle) { host_end((Recorder *)recorder, handle); }

static int capi_record(void *recorder, const Record *rec) { return push_whole((Recorder *)recorder, rec); }

static CommopsCApi c_api = {SLEUTH_COMMOPS_CAPI_VERSION, now_ns, capi_iteration, capi_begin, capi_end, capi_record};

static PyObject *mod_now_ns(PyObject *m, PyObject *Py_UNUSED(ignored)) { return PyLong_FromLongLong(now_ns()); }

static PyObject *mod_cuda_available(PyObject *m, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"path", NULL};
    const char *path = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|z", kwlist, &path)) return NULL;
    return PyBool_FromLong(load_cudart(path));
}

static PyMethodDef module_methods[] = {
    {"now_ns", mod_now_ns, METH_NOARGS, "now_ns() -> the host's monotonic clock in nanoseconds (CLOCK_MONOTONIC)"},
    {"cuda_available", (PyCFunction)(void (*)(void))mod_cuda_available, METH_VARARGS | METH_KEYWORDS,
     "cuda_available(path=None) -> whether libcudart could be loaded (tried once)"},
    {NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_commops", "CommOps recorder (C).", -1, module_methods};

PyMODINIT_FUNC PyInit__commops(void) {
    if (PyType_Ready(&RecorderType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&RecorderType);
    if (PyModule_AddObject(m, "Recorder", (PyObject *)&RecorderType) < 0) return NULL;
    PyModule_AddIntConstant(m, "RECORD_SIZE", sizeof(Record));
    PyModule_AddStringConstant(m, "IMPLEMENTATION", "c");
    PyObject *capsule = PyCapsule_New(&c_api, SLEUTH_COMMOPS_CAPI_NAME, NULL);
    if (!capsule || PyModule_AddObject(m, "_C_API", capsule) < 0) return NULL;
    return m;
}
