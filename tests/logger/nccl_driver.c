/* A stand-in for NCCL as a library that Python drives with ctypes: it loads a profiler plugin and
 * calls it, API v5, as NCCL's documentation describes (ext-profiler/README.md): init per
 * communicator, per operation a Coll or P2p event whose children are KernelCh events (start with
 * the GPU start timer, recordEventState(KernelChStop) with the stop timer, stop), finalize.
 * tests/logger/test_nccl_plugin_stream.py runs it inside processes that have sleuth's logger.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "nccl_profiler_api.h"

static ProfilerV5 *v5;

/* 0: the plugin is loaded; else its dlerror on stderr. */
int drv_load(const char *path) {
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return -1;
    }
    v5 = (ProfilerV5 *)dlsym(lib, "ncclProfiler_v5");
    return v5 ? 0 : -1;
}

/* The communicator's context, or NULL when the plugin declined it. */
void *drv_init(unsigned long long hash, const char *name, int nranks, int rank) {
    void *ctx = NULL;
    int mask = 0;
    if (v5->init(&ctx, hash, &mask, name, 1, nranks, rank, NULL) != 0) return NULL;
    return ctx;
}

/* One collective (peer < 0) or P2P operation (`func` "Send"/"Recv", peer: its rank in the
 * communicator), enqueued, then one kernel channel per [t0[i], t1[i]] on the GPU clock. */
void drv_op(void *ctx, const char *func, unsigned long long count, const char *datatype, int peer, int nchannels,
            const unsigned long long *t0, const unsigned long long *t1) {
    ProfDescrV5 d;
    memset(&d, 0, sizeof d);
    void *op = NULL;
    if (peer < 0) {
        d.type = PROF_COLL;
        d.coll.c.func = func;
        d.coll.c.count = count;
        d.coll.c.datatype = datatype;
        d.coll.c.nChannels = (uint8_t)nchannels;
    } else {
        d.type = PROF_P2P;
        d.p2p.p.func = func;
        d.p2p.p.count = count;
        d.p2p.p.datatype = datatype;
        d.p2p.p.peer = peer;
        d.p2p.p.nChannels = (uint8_t)nchannels;
    }
    v5->startEvent(ctx, &op, &d);
    v5->stopEvent(op);
    for (int ch = 0; ch < nchannels; ch++) {
        ProfDescrV5 k;
        memset(&k, 0, sizeof k);
        k.type = PROF_KERNEL_CH;
        k.parentObj = op;
        k.kernelCh.channelId = (uint8_t)ch;
        k.kernelCh.pTimer = t0[ch];
        void *kh = NULL;
        v5->startEvent(ctx, &kh, &k);
        ProfStateArgs a;
        memset(&a, 0, sizeof a);
        a.kernelCh.pTimer = t1[ch];
        v5->recordEventState(kh, PROF_STATE_KERNEL_CH_STOP, &a);
        v5->stopEvent(kh);
    }
}

void drv_finalize(void *ctx) { v5->finalize(ctx); }
