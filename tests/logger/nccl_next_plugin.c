/* A second profiler plugin for the chaining test: counts every call it gets, checks that every
 * handle and parent it is given is its own, and writes the counts to $NEXT_PLUGIN_LOG at its last
 * finalize. It asks for Group, Coll and ProxyStep events (ProxyStep is one sleuth does not follow). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl_profiler_api.h"

#define MAGIC 0x4e455854u

typedef struct { unsigned magic; uint64_t type; } Handle;

static long inits, starts[16], stops, states, finals, bad, live_ctx, kernel_stops;
static int ctx_token;

static int type_index(uint64_t type) {
    for (int i = 0; i < 16; i++) if (type == (1ULL << i)) return i;
    return 15;
}

static int check(void *h) {
    if (!h || ((Handle *)h)->magic != MAGIC) { bad++; return 0; }
    return 1;
}

static ncclResult_t start_common(void *ctx, void **out, uint64_t type, void *parent) {
    if (ctx != &ctx_token) bad++;
    if (parent && type != PROF_PROXY_OP) check(parent); /* the parent must be one of our handles */
    starts[type_index(type)]++;
    Handle *h = malloc(sizeof *h);
    h->magic = MAGIC;
    h->type = type;
    *out = h;
    return 0;
}

static ncclResult_t init4(void **ctx, int *mask, const char *name, uint64_t hash, int nn, int nr, int r, ncclDebugLogger_t l) {
    (void)name; (void)hash; (void)nn; (void)nr; (void)r; (void)l;
    inits++; live_ctx++;
    *ctx = &ctx_token;
    *mask = PROF_GROUP | PROF_COLL | PROF_PROXY_STEP;
    return 0;
}

static ncclResult_t init5(void **ctx, uint64_t id, int *mask, const char *name, int nn, int nr, int r, ncclDebugLogger_t l) {
    return init4(ctx, mask, name, id, nn, nr, r, l);
}

static ncclResult_t start4(void *ctx, void **out, ProfDescrV4 *d) { return start_common(ctx, out, d->type, d->parentObj); }

static ncclResult_t start5(void *ctx, void **out, ProfDescrV5 *d) {
    if (d->type == PROF_COLL && d->coll.parentGroup) check(d->coll.parentGroup);
    return start_common(ctx, out, d->type, d->parentObj);
}

static ncclResult_t stop(void *h) {
    if (check(h)) { ((Handle *)h)->magic = 0; free(h); }
    stops++;
    return 0;
}

static ncclResult_t record(void *h, int s, ProfStateArgs *a) {
    (void)a;
    check(h);
    states++;
    if (s == PROF_STATE_KERNEL_CH_STOP) kernel_stops++;
    return 0;
}

static ncclResult_t fin(void *ctx) {
    if (ctx != &ctx_token) bad++;
    finals++;
    if (--live_ctx == 0 && getenv("NEXT_PLUGIN_LOG")) {
        FILE *f = fopen(getenv("NEXT_PLUGIN_LOG"), "w");
        fprintf(f, "{\"init\": %ld, \"group\": %ld, \"coll\": %ld, \"p2p\": %ld, \"kernel_ch\": %ld, \"proxy_op\": %ld, "
                   "\"proxy_step\": %ld, \"other\": %ld, \"stop\": %ld, \"state\": %ld, \"kernel_stop_states\": %ld, "
                   "\"finalize\": %ld, \"bad\": %ld}\n",
                inits, starts[0], starts[1], starts[2], starts[6], starts[3], starts[4], starts[15], stops, states,
                kernel_stops, finals, bad);
        fclose(f);
    }
    return 0;
}

__attribute__((visibility("default"))) ProfilerV4 ncclProfiler_v4 = {"next", init4, start4, stop, record, fin};
__attribute__((visibility("default"))) ProfilerV5 ncclProfiler_v5 = {"next", init5, start5, stop, record, fin};
