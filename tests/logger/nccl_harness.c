/* A stand-in for NCCL: drives a profiler plugin through its API the way NCCL's documentation
 * describes (ext-profiler/README.md): init per communicator with the activation mask, then per
 * operation a Group event whose children are Coll/P2p events; their children are KernelCh
 * events (start with the GPU start timer, recordEventState(KernelChStop) with the stop timer,
 * stop) and ProxyOp events (with ProxyStep children); finalize per communicator.
 *
 * usage: nccl_harness PLUGIN VERSION RANK WORLD ITERS SLOW_RANK SLOW_FROM SLOW_NS BASE_NS
 *
 * GPU clocks are synthetic and the same formula on every rank: in iteration i, rank r launches
 * its all-reduce at BASE + i*PERIOD + compute(r, i), compute(r, i) = COMPUTE + (SLOW_NS when
 * r == SLOW_RANK and i >= SLOW_FROM); the all-reduce ends on every rank at the latest launch
 * + TRANSFER. Then a ring P2P: send to r+1, recv from r-1 (its own comm of the same ranks).
 * The harness prints what it drove, one line per operation, for the test to compare.
 *
 * HARNESS_ATTACH=1: before the first init it attaches a stand-in for the logger's ring (a
 * CommopsCApi whose record() prints "ring ..." lines and whose iteration() is the loop's i) and
 * prints the plugin's communicator table at the end ("comm ..." lines).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nccl_profiler_api.h"
#include "sleuth_nccl_attach.h"

#define PERIOD 5000000LL
#define COMPUTE 1000000LL
#define TRANSFER 400000LL
#define P2P_NS 100000LL

static int version;
static int64_t harness_iteration = -7; /* what the stand-in ring says the logger's iteration is */
static void *plugin;
static ProfilerV4 *v4;
static ProfilerV5 *v5;

static void logfn(int level, unsigned long flags, const char *file, int line, const char *fmt, ...) {
    va_list ap;
    (void)flags;
    (void)file;
    (void)line;
    va_start(ap, fmt);
    fprintf(stderr, "NCCL log level %d: ", level);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* ---- a stand-in for the logger's ring (commops_capi.h) ---- */

static int64_t ring_now(void) { return 0; }
static int64_t ring_iteration(void *recorder) { (void)recorder; return __atomic_load_n(&harness_iteration, __ATOMIC_RELAXED); }
static int32_t ring_begin(void *r, uint32_t c, uint64_t s, uint8_t o, int32_t p, uint64_t n, int64_t i) {
    (void)r; (void)c; (void)s; (void)o; (void)p; (void)n; (void)i;
    return -1;
}
static void ring_end(void *r, int32_t h) { (void)r; (void)h; }
static int ring_record(void *recorder, const Record *rec) {
    if (recorder != (void *)&harness_iteration) { fprintf(stderr, "record() got another recorder\n"); exit(6); }
    printf("ring %u %llu %u %d %llu %lld %lld %lld %lld %u\n", rec->comm, (unsigned long long)rec->seq, rec->op, rec->peer,
           (unsigned long long)rec->nbytes, (long long)rec->iteration, (long long)rec->t_issue_ns, (long long)rec->t_start_ns,
           (long long)rec->t_end_ns, rec->pad[0]);
    return 1;
}
static const CommopsCApi ring_api = {SLEUTH_COMMOPS_CAPI_VERSION, ring_now, ring_iteration, ring_begin, ring_end, ring_record};

static void attach_ring(void) {
    int (*attach)(const CommopsCApi *, void *) = (int (*)(const CommopsCApi *, void *))dlsym(plugin, "sleuth_nccl_profiler_attach");
    if (!attach) { fprintf(stderr, "no sleuth_nccl_profiler_attach\n"); exit(2); }
    CommopsCApi wrong = ring_api;
    wrong.version = SLEUTH_COMMOPS_CAPI_VERSION + 1;
    if (attach(&wrong, &harness_iteration) != SLEUTH_COMMOPS_CAPI_VERSION) { fprintf(stderr, "attached another API version\n"); exit(6); }
    if (attach(&ring_api, &harness_iteration) != 0) { fprintf(stderr, "attach failed\n"); exit(6); }
}

static void print_comms(void) {
    int (*comms)(int, SleuthNcclComm *, int) = (int (*)(int, SleuthNcclComm *, int))dlsym(plugin, "sleuth_nccl_profiler_comms");
    SleuthNcclComm table[8];
    int n = comms(0, table, 8);
    for (int i = 0; i < n; i++)
        printf("comm %d %016llx %d %d %s\n", table[i].index, (unsigned long long)table[i].hash, table[i].nranks, table[i].rank,
               table[i].name[0] ? table[i].name : "-");
}

static int init(void **ctx, int *mask, const char *name, uint64_t hash, int nranks, int rank) {
    if (version == 5) return v5->init(ctx, hash, mask, name, 1, nranks, rank, logfn);
    return v4->init(ctx, mask, name, hash, 1, nranks, rank, logfn);
}

static void *start(void *ctx, ProfDescrV5 *d) {
    void *h = (void *)0x1; /* the plugin must set it */
    if (version == 5) {
        v5->startEvent(ctx, &h, d);
    } else {
        ProfDescrV4 d4;
        memcpy(&d4, d, sizeof d4);
        d4.type = (uint8_t)d->type;
        v4->startEvent(ctx, &h, &d4);
    }
    if (h == (void *)0x1) { fprintf(stderr, "startEvent left the handle unset\n"); exit(3); }
    return h;
}

static void stop(void *h) {
    if (version == 5) v5->stopEvent(h); else v4->stopEvent(h);
}

static void state(void *h, int s, ProfStateArgs *a) {
    if (version == 5) v5->recordEventState(h, s, a); else v4->recordEventState(h, s, a);
}

static void fin(void *ctx) {
    if (version == 5) v5->finalize(ctx); else v4->finalize(ctx);
}

static ProfDescrV5 descr(uint64_t type, void *parent, int rank) {
    ProfDescrV5 d;
    memset(&d, 0, sizeof d);
    d.type = type;
    d.parentObj = parent;
    d.rank = rank;
    return d;
}

/* One kernel channel of `op`, [t0, t1] on the GPU clock, and a proxy op with two steps. */
static void channel(void *ctx, void *op, int rank, int ch, uint64_t t0, uint64_t t1, int peer) {
    ProfDescrV5 d = descr(PROF_KERNEL_CH, op, rank);
    d.kernelCh.channelId = (uint8_t)ch;
    d.kernelCh.pTimer = t0;
    void *k = start(ctx, &d);
    ProfDescrV5 p = descr(PROF_PROXY_OP, op, rank);
    p.proxyOp.pid = getpid();
    p.proxyOp.channelId = (uint8_t)ch;
    p.proxyOp.peer = peer;
    p.proxyOp.nSteps = 2;
    void *po = start(ctx, &p);
    for (int s = 0; s < 2; s++) {
        ProfDescrV5 st = descr(PROF_PROXY_STEP, po, rank);
        st.proxyStep.step = s;
        void *sh = start(ctx, &st);
        ProfStateArgs a = {.proxyStep = {4096}};
        state(sh, 9 /* ProxyStepSendWait */, &a);
        stop(sh);
    }
    stop(po);
    ProfStateArgs a;
    memset(&a, 0, sizeof a);
    a.kernelCh.pTimer = t1;
    state(k, PROF_STATE_KERNEL_CH_STOP, &a);
    stop(k);
}

/* The kernel and proxy events of one iteration. With HARNESS_THREADED they run on a second
 * thread (NCCL's proxy thread) while the main thread issues the next iteration's operations. */
typedef struct { void *ctx, *op; int rank, ch; uint64_t t0, t1; int peer; } Job;
static Job jobs[2][4];
static int njobs[2];
static pthread_t proxy;
static int proxy_running;

static void add_job(int buf, void *ctx, void *op, int rank, int ch, uint64_t t0, uint64_t t1, int peer) {
    jobs[buf][njobs[buf]++] = (Job){ctx, op, rank, ch, t0, t1, peer};
}

static void *run_jobs(void *arg) {
    int buf = (int)(long)arg;
    for (int j = 0; j < njobs[buf]; j++) {
        Job *b = &jobs[buf][j];
        channel(b->ctx, b->op, b->rank, b->ch, b->t0, b->t1, b->peer);
    }
    njobs[buf] = 0;
    return NULL;
}

static void join_proxy(void) {
    if (proxy_running) pthread_join(proxy, NULL);
    proxy_running = 0;
}

static void dispatch(int buf) {
    if (!getenv("HARNESS_THREADED")) {
        run_jobs((void *)(long)buf);
        return;
    }
    join_proxy(); /* the other buffer's jobs are done */
    pthread_create(&proxy, NULL, run_jobs, (void *)(long)buf);
    proxy_running = 1;
}

static long long launch(int r, int i, int slow_rank, int slow_from, long long slow_ns, long long base) {
    return base + i * PERIOD + COMPUTE + (r == slow_rank && i >= slow_from ? slow_ns : 0);
}

int main(int argc, char **argv) {
    if (argc != 10) {
        fprintf(stderr, "usage: %s PLUGIN VERSION RANK WORLD ITERS SLOW_RANK SLOW_FROM SLOW_NS BASE_NS\n", argv[0]);
        return 2;
    }
    version = atoi(argv[2]);
    int rank = atoi(argv[3]), world = atoi(argv[4]), iters = atoi(argv[5]);
    int slow_rank = atoi(argv[6]), slow_from = atoi(argv[7]);
    long long slow_ns = atoll(argv[8]), base = atoll(argv[9]);
    plugin = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!plugin) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 2; }
    v4 = dlsym(plugin, "ncclProfiler_v4");
    v5 = dlsym(plugin, "ncclProfiler_v5");
    if ((version == 4 && !v4) || (version == 5 && !v5)) { fprintf(stderr, "no ncclProfiler_v%d\n", version); return 2; }

    if (getenv("HARNESS_ATTACH")) attach_ring();
    void *world_ctx = NULL, *ring_ctx = NULL;
    int mask = 0, ring_mask = 0;
    if (init(&world_ctx, &mask, "world", 0x1111222233334444ULL, world, rank) != 0) { fprintf(stderr, "init failed\n"); return 4; }
    if (init(&ring_ctx, &ring_mask, "", 0x5555666677778888ULL, world, rank) != 0) { fprintf(stderr, "init failed\n"); return 4; }
    printf("mask %d\n", mask);

    for (int i = 0; i < iters; i++) {
        __atomic_store_n(&harness_iteration, (int64_t)i, __ATOMIC_RELAXED);
        /* all-reduce of 1 MiB float32 on 2 channels */
        long long latest = 0;
        for (int r = 0; r < world; r++) {
            long long l = launch(r, i, slow_rank, slow_from, slow_ns, base);
            if (l > latest) latest = l;
        }
        long long mine = launch(rank, i, slow_rank, slow_from, slow_ns, base), end = latest + TRANSFER;
        ProfDescrV5 gd = descr(PROF_GROUP, NULL, rank);
        void *group = start(world_ctx, &gd);
        ProfDescrV5 cd = descr(PROF_COLL, group, rank);
        cd.coll.c.seqNumber = (uint64_t)i;
        cd.coll.c.func = "AllReduce";
        cd.coll.c.count = 262144;
        cd.coll.c.datatype = "ncclFloat32";
        cd.coll.c.nChannels = 2;
        cd.coll.parentGroup = group;
        void *coll = start(world_ctx, &cd);
        stop(coll); /* enqueued */
        stop(group);
        int buf = i % 2;
        add_job(buf, world_ctx, coll, rank, 0, (uint64_t)mine, (uint64_t)end - 1000, -1);
        add_job(buf, world_ctx, coll, rank, 1, (uint64_t)mine + 500, (uint64_t)end, -1);
        printf("op all_reduce seq %d peer -1 nbytes %d start %lld end %lld\n", i, 262144 * 4, mine, end);

        /* ring P2P, bfloat16, after the all-reduce */
        int to = (rank + 1) % world, from = (rank + world - 1) % world;
        long long p0 = end + 10000;
        group = start(ring_ctx, &gd);
        ProfDescrV5 sd = descr(PROF_P2P, group, rank);
        sd.p2p.p.func = "Send";
        sd.p2p.p.count = 1000;
        sd.p2p.p.datatype = "ncclBfloat16";
        sd.p2p.p.peer = to;
        sd.p2p.p.nChannels = 1;
        sd.p2p.parentGroup = group;
        void *send = start(ring_ctx, &sd);
        ProfDescrV5 rd = sd;
        rd.p2p.p.func = "Recv";
        rd.p2p.p.peer = from;
        void *recv = start(ring_ctx, &rd);
        stop(send);
        stop(recv);
        stop(group);
        add_job(buf, ring_ctx, send, rank, 0, (uint64_t)p0, (uint64_t)(p0 + P2P_NS), to);
        add_job(buf, ring_ctx, recv, rank, 1, (uint64_t)p0 + 100, (uint64_t)(p0 + P2P_NS), from);
        dispatch(buf);
        printf("op send seq %d peer %d nbytes 2000 start %lld end %lld\n", i, to, p0, p0 + P2P_NS);
        printf("op recv seq %d peer %d nbytes 2000 start %lld end %lld\n", i, from, p0 + 100, p0 + P2P_NS);
    }

    join_proxy();

    /* What NCCL may also do, which must not crash the plugin or be recorded as an operation: */
    ProfDescrV5 odd = descr(1ULL << 13, NULL, rank); /* an event type newer than the plugin */
    void *h = start(world_ctx, &odd);
    stop(h);
    ProfDescrV5 pxn = descr(PROF_PROXY_OP, (void *)0x10, rank); /* PXN: parent from another process */
    pxn.proxyOp.pid = getpid() + 1;
    h = start(world_ctx, &pxn);
    state(h, 19, NULL);
    stop(h);
    stop(NULL);
    state(NULL, PROF_STATE_KERNEL_CH_STOP, NULL);
    ProfDescrV5 gd = descr(PROF_GROUP, NULL, rank);
    void *group = start(world_ctx, &gd);
    ProfDescrV5 cd = descr(PROF_COLL, group, rank);
    cd.coll.c.seqNumber = 0; /* NCCL counts per collective function: the first of its kind */
    cd.coll.c.func = "NewCollective"; /* unknown: written with op 0, the importer counts and drops it */
    cd.coll.c.count = 8;
    cd.coll.c.datatype = "ncclFloat32";
    cd.coll.c.nChannels = 1;
    void *coll = start(world_ctx, &cd);
    state(coll, 999, NULL); /* a state the plugin does not know */
    stop(coll);
    stop(group);
    /* this op never gets kernel events: finalize writes it with its enqueue times */
    if (getenv("HARNESS_FORK")) { /* a child forked now finalizes its copies: it must write nothing */
        pid_t child = fork();
        if (child == 0) {
            fin(ring_ctx);
            fin(world_ctx);
            _exit(0);
        }
        int status = 0;
        waitpid(child, &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) { fprintf(stderr, "child failed\n"); return 5; }
    }
    if (getenv("HARNESS_KILLED")) _exit(0); /* killed before NCCL finalized its communicators */
    if (getenv("HARNESS_HUNG")) { /* hung in a collective: no more calls until the test kills it */
        printf("hung\n");
        fflush(stdout);
        for (;;) pause();
    }
    fin(ring_ctx);
    fin(world_ctx);
    if (getenv("HARNESS_RELOAD")) { /* NCCL unloads the plugin with its last communicator, loads it again for a new one */
        dlclose(plugin);
        plugin = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
        v4 = dlsym(plugin, "ncclProfiler_v4");
        v5 = dlsym(plugin, "ncclProfiler_v5");
        void *again = NULL;
        if (init(&again, &mask, "again", 0x9999ULL, world, rank) != 0) { fprintf(stderr, "init failed\n"); return 4; }
        ProfDescrV5 ad = descr(PROF_COLL, NULL, rank);
        ad.coll.c.func = "Broadcast";
        ad.coll.c.count = 4;
        ad.coll.c.datatype = "ncclInt64";
        ad.coll.c.nChannels = 1;
        void *coll2 = start(again, &ad);
        stop(coll2);
        channel(again, coll2, rank, 0, (uint64_t)base, (uint64_t)base + 10, -1);
        fin(again);
    }
    if (getenv("HARNESS_ATTACH")) print_comms();
    return 0;
}
