/* libnccl-profiler-sleuth.so: sleuth's CommOps records straight from NCCL's profiler plugin API.
 *
 * NCCL loads it with NCCL_PROFILER_PLUGIN=/path/libnccl-profiler-sleuth.so and finds the symbols
 * ncclProfiler_v5 (NCCL >= 2.28) or ncclProfiler_v4 (2.26, 2.27). Every collective and P2P
 * operation becomes one 64-byte record, the logger's `Record` (logger/_commops.c).
 *
 * Where records go:
 *   - a Python logger in this process attached its ring (sleuth_nccl_attach.h): into that ring,
 *     through the logger's C API, so its drainer sends them where it sends its own (gateway or
 *     Parquet). `comm` is SLEUTH_NCCL_RING_COMM | the communicator's index in the table the logger
 *     polls, `iteration` the logger's at the issue, GPU times moved onto the host's monotonic clock.
 *     No file is opened then.
 *   - else SLEUTH_LOG_DIR/nccl-<host>-<pid>.bin; the sidecar nccl-<host>-<pid>.json names this
 *     process (job, global rank, host, GPU), its communicators (record `comm` = index into that
 *     list) and the clock pair that moves host times onto the wall clock. `sleuth import
 *     nccl-profiler DIR --out F` turns a folder of them into a records folder.
 *
 * What each record's fields hold here:
 *   t_issue_ns   host CLOCK_MONOTONIC when NCCL started the Coll/P2p event (the op was issued)
 *   t_start_ns   earliest KernelCh start over the op's channels, GPU globaltimer ns (flag GPU);
 *                without kernel events: the first child event's host start, else t_issue_ns
 *   t_end_ns     latest KernelCh stop (GPU globaltimer, flag GPU); without: the last child
 *                event's host stop (flag HOST_CHILD), else the Coll/P2p stopEvent (flag ENQUEUE)
 *   iteration    -1 in files; the logger's iteration at the issue in its ring
 *   seq          coll: a per-communicator counter of Coll events (NCCL's own seqNumber counts per
 *                collective function, so an all-reduce and an all-gather could share one);
 *                P2P: per (comm, direction, peer) counter on this rank
 *   peer         P2P: the peer's rank in the communicator (the importer maps it to global); else -1
 *   nbytes       count x datatype size (reduce-scatter: x nranks, the input size as the logger)
 *   pad[0]       flags (FLAG_*)
 *
 * Chaining: SLEUTH_NCCL_PROFILER_NEXT=/path/libnccl-profiler-other.so is loaded too; every call
 * is forwarded to it (same API version), its activation mask is added to ours, and parent
 * handles in descriptors are translated to its own handles.
 *
 * Concurrency: NCCL calls from application threads and proxy threads; each communicator's
 * context has a mutex, the output buffer has one. No call blocks on I/O except a buffer flush:
 * every 1024 records, or with the first record after SLEUTH_FLUSH_S seconds (the logger's drain
 * interval, default 0.5) since the last, so that a process killed before its communicators'
 * finalize (a launcher's SIGTERM then SIGKILL) leaves all but its last interval's records. A
 * flusher thread writes what waited a whole interval with no record after it: a process hung in a
 * collective, the very one on-call wants to read, records nothing more.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "nccl_profiler_api.h"
#include "sleuth_nccl_attach.h"

/* ---- the record (logger/_commops.c) -------------------------------------------------------- */

enum { FLAG_GPU_START = 1, FLAG_GPU_END = 2, FLAG_HOST_CHILD = 4, FLAG_ENQUEUE = 8, FLAG_FORCED = 16 };

/* OpKind numbers of sleuth.records.OpKind. */
enum { OP_UNKNOWN = 0, OP_ALL_REDUCE, OP_ALL_GATHER, OP_REDUCE_SCATTER, OP_ALL_TO_ALL, OP_BROADCAST,
       OP_REDUCE, OP_SEND, OP_RECV, OP_BARRIER, OP_GATHER, OP_SCATTER };

static int64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int64_t real_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* "AllReduce", "allreduce", "all_reduce" -> OP_ALL_REDUCE. */
static uint8_t op_kind(const char *func) {
    static const struct { const char *name; uint8_t op; } names[] = {
        {"allreduce", OP_ALL_REDUCE}, {"allgather", OP_ALL_GATHER}, {"allgatherv", OP_ALL_GATHER},
        {"reducescatter", OP_REDUCE_SCATTER}, {"alltoall", OP_ALL_TO_ALL}, {"alltoallv", OP_ALL_TO_ALL}, {"all2all", OP_ALL_TO_ALL},
        {"broadcast", OP_BROADCAST}, {"bcast", OP_BROADCAST}, {"reduce", OP_REDUCE}, {"send", OP_SEND},
        {"recv", OP_RECV}, {"gather", OP_GATHER}, {"scatter", OP_SCATTER}, {NULL, 0}};
    char low[32];
    size_t n = 0;
    if (!func) return OP_UNKNOWN;
    for (const char *p = func; *p && n + 1 < sizeof low; p++)
        if (*p != '_') low[n++] = (char)tolower((unsigned char)*p);
    low[n] = 0;
    if (strncmp(low, "nccl", 4) == 0) memmove(low, low + 4, n - 3);
    for (int i = 0; names[i].name; i++)
        if (strcmp(low, names[i].name) == 0) return names[i].op;
    return OP_UNKNOWN;
}

/* Bytes of one element from the datatype's name: the first number in it is its width in bits
 * ("ncclFloat32" -> 4, "ncclBfloat16" -> 2, "ncclFloat8e4m3" -> 1); "ncclChar" -> 1. 0: unknown. */
static unsigned type_size(const char *datatype) {
    if (!datatype) return 0;
    for (const char *p = datatype; *p; p++) {
        if (isdigit((unsigned char)*p)) {
            unsigned bits = (unsigned)strtoul(p, NULL, 10);
            return (bits == 8 || bits == 16 || bits == 32 || bits == 64) ? bits / 8 : 0;
        }
    }
    return strstr(datatype, "Char") || strstr(datatype, "char") ? 1 : 0;
}

/* ---- the process: output file, sidecar, next plugin ---------------------------------------- */

#define MAX_COMMS 4096
#define BUF_RECORDS 1024

typedef struct {
    uint64_t hash;
    char name[128];
    int nranks, rank, nnodes, version;
    uint64_t records;
} CommInfo;

static struct {
    pthread_mutex_t mu;
    int opened;            /* 1: output open; -1: no output (SLEUTH_LOG_DIR unset or unusable) */
    int fd;
    char bin_path[4096], json_path[4096], host[256];
    Record buf[BUF_RECORDS];
    int nbuf;
    CommInfo comms[MAX_COMMS];
    int ncomms;
    int64_t mono0, real0;  /* the clock pair: real0 - mono0 moves monotonic times to wall clock */
    int64_t flush_every_ns, flushed_at;  /* SLEUTH_FLUSH_S; the monotonic time of the last flush */
    int flusher;           /* 1: this process's flusher thread runs */
    uint64_t written, dropped, unknown_ops, late_children, forced;
    int write_failed;
    /* the next plugin */
    int next_loaded;       /* 0: not tried; 1: tried */
    void *next_lib;
    ProfilerV4 *next_v4;
    ProfilerV5 *next_v5;
    char next_error[512];
    /* The logger's ring, when one is attached (atomic: read without g.mu at each issue). */
    struct Ring *ring;
} g = {.mu = PTHREAD_MUTEX_INITIALIZER, .fd = -1};

/* Never freed once attached: a thread that read the pointer just before a detach may still use
 * it, and the logger keeps the recorder alive for as long as the process runs. */
typedef struct Ring {
    const CommopsCApi *api;
    void *recorder;
} Ring;

static Ring *attached_ring(void) { return __atomic_load_n(&g.ring, __ATOMIC_ACQUIRE); }

static void json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

static const char *env_first(const char *const *names) {
    for (int i = 0; names[i]; i++) {
        const char *v = getenv(names[i]);
        if (v && *v) return v;
    }
    return NULL;
}

static int is_integer(const char *s) {
    if (!s || !*s) return 0;
    for (; *s; s++) if (!isdigit((unsigned char)*s)) return 0;
    return 1;
}

/* The sidecar, rewritten whole (tmp + rename) at each communicator's init and finalize. Called
 * holding g.mu. */
static void write_sidecar(void) {
    static const char *const rank_vars[] = {"SLEUTH_RANK", "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID", NULL};
    static const char *const gpu_vars[] = {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", NULL};
    static const char *const job_vars[] = {"SLEUTH_JOB", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", NULL};
    char tmp[4200];
    if (g.opened != 1) return;
    snprintf(tmp, sizeof tmp, "%s.tmp", g.json_path);
    FILE *f = fopen(tmp, "w");
    if (!f) return;
    const char *rank = env_first(rank_vars), *gpu = env_first(gpu_vars), *job = env_first(job_vars);
    if (job && strcmp(job, "none") == 0) job = NULL; /* torchrun's default run id */
    fprintf(f, "{\"format\": \"sleuth-nccl-profiler\", \"version\": 1, \"record_size\": %zu,\n", sizeof(Record));
    fprintf(f, " \"pid\": %d, \"host\": ", (int)getpid());
    json_string(f, g.host);
    fprintf(f, ", \"job\": ");
    if (job) json_string(f, job); else fputs("null", f);
    /* rank and gpu come from the environment: written only when they are plain integers */
    fprintf(f, ", \"global_rank\": %s, \"gpu\": %s,\n", is_integer(rank) ? rank : "null", is_integer(gpu) ? gpu : "null");
    fprintf(f, " \"clock\": {\"monotonic_ns\": %lld, \"realtime_ns\": %lld},\n", (long long)g.mono0, (long long)g.real0);
    fprintf(f, " \"written\": %llu, \"dropped\": %llu, \"unknown_ops\": %llu, \"late_children\": %llu, \"forced\": %llu,\n",
            (unsigned long long)g.written, (unsigned long long)g.dropped, (unsigned long long)g.unknown_ops,
            (unsigned long long)g.late_children, (unsigned long long)g.forced);
    fprintf(f, " \"comms\": [");
    for (int i = 0; i < g.ncomms; i++) {
        CommInfo *c = &g.comms[i];
        fprintf(f, "%s\n  {\"index\": %d, \"hash\": \"%016llx\", \"name\": ", i ? "," : "", i, (unsigned long long)c->hash);
        json_string(f, c->name);
        fprintf(f, ", \"nranks\": %d, \"rank\": %d, \"nnodes\": %d, \"api\": %d}", c->nranks, c->rank, c->nnodes, c->version);
    }
    fprintf(f, "]}\n");
    fclose(f);
    rename(tmp, g.json_path);
}

/* mkdir -p, mode 755 for the folders it makes; 0 when the folder exists afterwards. */
static int make_dirs(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s", dir);
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        mkdir(path, 0755);
        *p = '/';
    }
    return mkdir(path, 0755) == 0 || errno == EEXIST ? 0 : -1;
}

/* SLEUTH_FLUSH_S as nanoseconds: the logger's drain interval, read the logger's way (a positive
 * number of seconds); the default, with a warning naming the value, when it is not one. */
static int64_t flush_interval_ns(ncclDebugLogger_t logfn) {
    const int64_t fallback = 500000000; /* the logger's default, 0.5 s */
    const char *text = getenv("SLEUTH_FLUSH_S");
    if (!text || !*text) return fallback;
    char *end = NULL;
    errno = 0;
    double seconds = strtod(text, &end);
    if (errno || end == text || *end || !(seconds > 0.0) || seconds > 86400.0) {
        if (logfn) logfn(NCCL_LOG_WARN, NCCL_FLAG_INIT, __FILE__, __LINE__,
                         "sleuth profiler: SLEUTH_FLUSH_S=%s is not a positive number of seconds (at most 86400): "
                         "flushing every 0.5 s", text);
        return fallback;
    }
    return (int64_t)(seconds * 1e9);
}

static void flush_locked(void) {
    size_t left = (size_t)g.nbuf * sizeof(Record);
    const char *p = (const char *)g.buf;
    while (left && g.fd >= 0) {
        ssize_t n = write(g.fd, p, left);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            g.dropped += left / sizeof(Record);
            g.write_failed = 1;
            break;
        }
        p += n;
        left -= (size_t)n;
    }
    g.nbuf = 0;
    g.flushed_at = mono_ns();
}

/* Every interval, what waited a whole one goes out. The library is pinned (pin_library), so the
 * thread runs for the process's life; it sleeps at least 1 ms so a tiny interval cannot spin. */
static void *flusher_main(void *unused) {
    (void)unused;
    for (;;) {
        int64_t ns = g.flush_every_ns > 1000000 ? g.flush_every_ns : 1000000;
        struct timespec nap = {(time_t)(ns / 1000000000), (long)(ns % 1000000000)};
        while (nanosleep(&nap, &nap) != 0 && errno == EINTR) {}
        pthread_mutex_lock(&g.mu);
        if (g.opened == 1 && g.nbuf && mono_ns() - g.flushed_at >= g.flush_every_ns) flush_locked();
        pthread_mutex_unlock(&g.mu);
    }
    return NULL;
}

/* Start the flusher once per process, every signal blocked in it: the job's handlers run on its own
 * threads. Called holding g.mu. */
static void start_flusher(ncclDebugLogger_t logfn) {
    if (g.flusher) return;
    sigset_t all, before;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &before);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t thread;
    int failed = pthread_create(&thread, &attr, flusher_main, NULL);
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &before, NULL);
    if (failed) {
        if (logfn) logfn(NCCL_LOG_WARN, NCCL_FLAG_INIT, __FILE__, __LINE__,
                         "sleuth profiler: no flusher thread (%s): a process hung in a collective keeps "
                         "its last records in memory", strerror(failed));
        return;
    }
    g.flusher = 1;
}

/* Open the output once per process. Called holding g.mu. */
static void open_output(ncclDebugLogger_t logfn) {
    if (g.opened) return;
    g.opened = -1;
    const char *dir = getenv("SLEUTH_LOG_DIR");
    if (!dir || !*dir) {
        if (logfn) logfn(NCCL_LOG_WARN, NCCL_FLAG_INIT, __FILE__, __LINE__,
                         "sleuth profiler: SLEUTH_LOG_DIR is not set: no records are written");
        return;
    }
    const char *r = getenv("SLEUTH_RANK") ? getenv("SLEUTH_RANK") : getenv("RANK");
    if (r && !is_integer(r)) {
        if (logfn) logfn(NCCL_LOG_WARN, NCCL_FLAG_INIT, __FILE__, __LINE__,
                         "sleuth profiler: rank variable %s is not an integer: no records are written", r);
        return;
    }
    gethostname(g.host, sizeof g.host - 1);
    make_dirs(dir); /* a failure shows as the open's error below */
    snprintf(g.bin_path, sizeof g.bin_path, "%s/nccl-%s-%d.bin", dir, g.host, (int)getpid());
    snprintf(g.json_path, sizeof g.json_path, "%s/nccl-%s-%d.json", dir, g.host, (int)getpid());
    g.fd = open(g.bin_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (g.fd < 0) {
        if (logfn) logfn(NCCL_LOG_WARN, NCCL_FLAG_INIT, __FILE__, __LINE__,
                         "sleuth profiler: cannot open %s (%s): no records are written", g.bin_path, strerror(errno));
        return;
    }
    g.mono0 = mono_ns();
    g.real0 = real_ns();
    g.flushed_at = g.mono0;
    g.flush_every_ns = flush_interval_ns(logfn);
    g.opened = 1;
    start_flusher(logfn);
}

/* The record goes to the attached ring, else to the file. `to_ring` moves its times onto the
 * ring's clock (called holding the op's ctx->mu). g.mu is held around the ring's call so that no
 * record enters a ring after sleuth_nccl_profiler_detach returned. */
static void emit(Record *rec, int comm_index, void (*to_ring)(void *, Record *), void *arg) {
    pthread_mutex_lock(&g.mu);
    Ring *ring = attached_ring();
    if (ring && comm_index >= 0) {
        to_ring(arg, rec);
        rec->comm = SLEUTH_NCCL_RING_COMM | (uint32_t)comm_index;
        ring->api->record(ring->recorder, rec); /* a full ring counts the loss in the logger's dropped */
        g.comms[comm_index].records++;
    } else if (g.opened == 1) {
        if (rec->op == OP_UNKNOWN) g.unknown_ops++;
        g.buf[g.nbuf++] = *rec;
        g.written++;
        if (comm_index >= 0) g.comms[comm_index].records++;
        if (g.nbuf == BUF_RECORDS || mono_ns() - g.flushed_at >= g.flush_every_ns) flush_locked();
    }
    pthread_mutex_unlock(&g.mu);
}

/* Load SLEUTH_NCCL_PROFILER_NEXT once. Called holding g.mu. */
static void load_next(ncclDebugLogger_t logfn) {
    if (g.next_loaded) return;
    g.next_loaded = 1;
    const char *path = getenv("SLEUTH_NCCL_PROFILER_NEXT");
    if (!path || !*path) return;
    g.next_lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!g.next_lib) {
        snprintf(g.next_error, sizeof g.next_error, "SLEUTH_NCCL_PROFILER_NEXT=%s: cannot load: %s", path, dlerror());
    } else {
        g.next_v5 = (ProfilerV5 *)dlsym(g.next_lib, "ncclProfiler_v5");
        g.next_v4 = (ProfilerV4 *)dlsym(g.next_lib, "ncclProfiler_v4");
        if (!g.next_v5 && !g.next_v4)
            snprintf(g.next_error, sizeof g.next_error,
                     "SLEUTH_NCCL_PROFILER_NEXT=%s: has neither ncclProfiler_v5 nor ncclProfiler_v4 (older API "
                     "versions cannot be chained)", path);
    }
    if (g.next_error[0] && logfn) logfn(NCCL_LOG_WARN, NCCL_FLAG_INIT, __FILE__, __LINE__, "sleuth profiler: %s", g.next_error);
}

/* NCCL dlcloses the plugin when its last communicator is destroyed and dlopens it again for the
 * next one. Unloaded, this file's state would start over and reopen (truncate) the process's
 * files: the library keeps itself loaded instead. Called holding g.mu. */
static void pin_library(void) {
    static int pinned;
    Dl_info info;
    if (pinned) return;
    pinned = 1;
    if (dladdr((void *)&pin_library, &info) && info.dli_fname)
        dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
}

/* ---- per communicator ------------------------------------------------------------------- */

#define EV_MAGIC 0x534c4555u   /* "SLEU" */
#define CTX_MAGIC 0x534c4358u  /* "SLCX" */
#define OP_SLOTS 4096          /* ops in flight per communicator before the oldest is forced out */
#define SLEUTH_MASK (PROF_COLL | PROF_P2P | PROF_KERNEL_CH | PROF_PROXY_OP)

typedef struct Ctx Ctx;
typedef struct Op Op;

typedef struct {
    uint32_t magic;
    uint32_t type;     /* the PROF_* bit */
    Ctx *ctx;
    void *next;        /* the next plugin's handle, or NULL */
    Op *op;            /* coll/p2p: itself; kernelCh/proxyOp: the parent op (NULL when foreign) */
    uint32_t op_gen;   /* the parent op's generation when this child started */
    int owned;         /* 1: malloc'd here (freed at stop); 0: inside an Op slot */
} Ev;

struct Op {
    Ev ev;
    Record rec;
    uint32_t gen;
    int busy;          /* started, not yet emitted */
    int stopped;       /* the Coll/P2p stopEvent came */
    int children;      /* child events started and not stopped */
    int kernels_done, channels;
    int64_t host_stop, child_start, child_end;
    uint64_t gpu_start, gpu_end;
};

struct Ctx {
    uint32_t magic;
    int version, comm_index, nranks, rank;
    int mask, next_mask;
    pthread_mutex_t mu;
    Op *ops;
    uint32_t next_slot;
    uint64_t coll_seq; /* Coll events so far: every member issues a communicator's collectives in one order */
    uint64_t *p2p_seq; /* [2 * nranks]: send counters then recv counters, per peer */
    void *next_ctx;
    ncclDebugLogger_t logfn;
    /* GPU times onto the ring's clock: whether the first GPU-timed op decided, and the shift. */
    int gpu_clock_known;
    int64_t gpu_shift;
};

/* GPU times (the globaltimer) onto CLOCK_MONOTONIC for the ring, by `sleuth import nccl-profiler`'s
 * rule streamed: kept as wall clock when the first op's GPU start falls within a second after its
 * issue, else shifted; the shift grows only as far as needed to put every start after its issue.
 * Per communicator: a communicator's rank runs on one GPU (one globaltimer), a process may drive several. */
static void gpu_to_ring_clock(void *arg, Record *rec) {
    Ctx *ctx = arg;
    if ((rec->pad[0] & (FLAG_GPU_START | FLAG_GPU_END)) != (FLAG_GPU_START | FLAG_GPU_END)) return;
    int64_t wall_minus_mono = real_ns() - mono_ns();
    int64_t start = rec->t_start_ns - wall_minus_mono, end = rec->t_end_ns - wall_minus_mono;
    int64_t gap = start - rec->t_issue_ns;
    if (!ctx->gpu_clock_known) {
        ctx->gpu_clock_known = 1;
        ctx->gpu_shift = gap >= 0 && gap < 1000000000LL ? 0 : -gap;
    } else if (gap + ctx->gpu_shift < 0) {
        ctx->gpu_shift = -gap;
    }
    rec->t_start_ns = start + ctx->gpu_shift;
    rec->t_end_ns = end + ctx->gpu_shift;
}

static void finish(Ctx *ctx, Op *op, int forced) {
    Record rec = op->rec;
    if (op->gpu_start && op->gpu_end >= op->gpu_start) {
        rec.t_start_ns = (int64_t)op->gpu_start;
        rec.t_end_ns = (int64_t)op->gpu_end;
        rec.pad[0] |= FLAG_GPU_START | FLAG_GPU_END;
    } else if (op->child_end) {
        rec.t_start_ns = op->child_start ? op->child_start : rec.t_issue_ns;
        rec.t_end_ns = op->child_end;
        rec.pad[0] |= FLAG_HOST_CHILD;
    } else {
        rec.t_start_ns = rec.t_issue_ns;
        rec.t_end_ns = op->stopped ? op->host_stop : rec.t_issue_ns;
        rec.pad[0] |= FLAG_ENQUEUE;
    }
    if (forced) rec.pad[0] |= FLAG_FORCED;
    op->busy = 0;
    op->gen++;
    emit(&rec, ctx->comm_index, gpu_to_ring_clock, ctx);
    if (forced) {
        pthread_mutex_lock(&g.mu);
        g.forced++;
        pthread_mutex_unlock(&g.mu);
    }
}

/* An op is complete once NCCL stopped it, no child is open, and (when kernel events are on)
 * every channel it announced reported its kernel stop. Called holding ctx->mu. */
static void maybe_finish(Ctx *ctx, Op *op) {
    if (!op->busy || !op->stopped || op->children) return;
    if ((ctx->mask & PROF_KERNEL_CH) && op->kernels_done < (op->channels > 0 ? op->channels : 1)) return;
    finish(ctx, op, 0);
}

static ncclResult_t ctx_init(Ctx **out, int version, int *mask, const char *name, uint64_t hash, int nnodes,
                             int nranks, int rank, ncclDebugLogger_t logfn) {
    *out = NULL;
    if (!mask || nranks < 1 || rank < 0 || rank >= nranks) {
        if (logfn) logfn(NCCL_LOG_WARN, NCCL_FLAG_INIT, __FILE__, __LINE__,
                         "sleuth profiler: init with rank %d of %d ranks: plugin disabled", rank, nranks);
        return NCCL_INVALID_ARGUMENT;
    }
    Ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return NCCL_INTERNAL_ERROR;
    ctx->ops = calloc(OP_SLOTS, sizeof(Op));
    ctx->p2p_seq = calloc(2 * (size_t)nranks, sizeof(uint64_t));
    if (!ctx->ops || !ctx->p2p_seq) {
        free(ctx->ops);
        free(ctx->p2p_seq);
        free(ctx);
        return NCCL_INTERNAL_ERROR;
    }
    ctx->magic = CTX_MAGIC;
    ctx->version = version;
    ctx->nranks = nranks;
    ctx->rank = rank;
    ctx->logfn = logfn;
    ctx->comm_index = -1;
    pthread_mutex_init(&ctx->mu, NULL);

    pthread_mutex_lock(&g.mu);
    pin_library();
    int to_ring = attached_ring() != NULL;
    if (!to_ring) open_output(logfn); /* with a logger attached no file is opened */
    load_next(logfn);
    int have_output = (to_ring || g.opened == 1) && g.ncomms < MAX_COMMS;
    if ((to_ring || g.opened == 1) && !have_output && logfn)
        logfn(NCCL_LOG_WARN, NCCL_FLAG_INIT, __FILE__, __LINE__,
              "sleuth profiler: more than %d communicators in this process: communicator %016llx is not recorded",
              MAX_COMMS, (unsigned long long)hash);
    if (have_output) {
        CommInfo *c = &g.comms[g.ncomms];
        c->hash = hash;
        snprintf(c->name, sizeof c->name, "%s", name ? name : "");
        c->nranks = nranks;
        c->rank = rank;
        c->nnodes = nnodes;
        c->version = version;
        ctx->comm_index = g.ncomms++;
        write_sidecar();
    }
    pthread_mutex_unlock(&g.mu);

    int next_mask = *mask;
    if (version == 5 && g.next_v5) {
        if (g.next_v5->init(&ctx->next_ctx, hash, &next_mask, name, nnodes, nranks, rank, logfn) != NCCL_OK)
            ctx->next_ctx = NULL;
    } else if (version == 4 && g.next_v4) {
        if (g.next_v4->init(&ctx->next_ctx, &next_mask, name, hash, nnodes, nranks, rank, logfn) != NCCL_OK)
            ctx->next_ctx = NULL;
    } else if (g.next_lib && (g.next_v4 || g.next_v5) && logfn) {
        logfn(NCCL_LOG_WARN, NCCL_FLAG_INIT, __FILE__, __LINE__,
              "sleuth profiler: NCCL uses profiler API v%d but SLEUTH_NCCL_PROFILER_NEXT has no ncclProfiler_v%d: "
              "not chained", version, version);
    }
    ctx->next_mask = ctx->next_ctx ? next_mask : 0;
    if (!have_output && !ctx->next_ctx) {
        /* nothing to do for this communicator: let NCCL drop the plugin (zero cost) */
        free(ctx->ops);
        free(ctx->p2p_seq);
        free(ctx);
        return NCCL_INVALID_ARGUMENT;
    }
    ctx->mask = have_output ? SLEUTH_MASK : 0;
    *mask = ctx->mask | ctx->next_mask;
    *out = ctx;
    return NCCL_OK;
}

static Ev *as_ev(void *handle) {
    Ev *ev = handle;
    return ev && ev->magic == EV_MAGIC ? ev : NULL;
}

/* The common part of startEvent. `d4` and `d5` point at the same descriptor (one is NULL). */
static ncclResult_t start_event(Ctx *ctx, void **handle, uint64_t type, ProfDescrV4 *d4, ProfDescrV5 *d5) {
    int64_t now = mono_ns();
    void *parent_obj = d4 ? d4->parentObj : d5->parentObj;
    Ev *parent = NULL;
    /* A proxyOp from another process (PXN) carries a parent handle of that address space. */
    int foreign = type == PROF_PROXY_OP && (d4 ? d4->proxyOp.pid : d5->proxyOp.pid) != getpid();
    if (!foreign) parent = as_ev(parent_obj);
    *handle = NULL;

    void *next = NULL;
    if (ctx->next_ctx && (type & (uint64_t)ctx->next_mask)) {
        if (d5) {
            ProfDescrV5 copy = *d5;
            if (parent) copy.parentObj = parent->next;
            if (type == PROF_COLL) { Ev *pg = as_ev(d5->coll.parentGroup); if (pg) copy.coll.parentGroup = pg->next; }
            if (type == PROF_P2P) { Ev *pg = as_ev(d5->p2p.parentGroup); if (pg) copy.p2p.parentGroup = pg->next; }
            g.next_v5->startEvent(ctx->next_ctx, &next, &copy);
        } else {
            ProfDescrV4 copy = *d4;
            if (parent) copy.parentObj = parent->next;
            g.next_v4->startEvent(ctx->next_ctx, &next, &copy);
        }
    }

    int ours = (type & (uint64_t)ctx->mask) != 0;
    if (ours && (type == PROF_COLL || type == PROF_P2P)) {
        const ProfColl *c = d4 ? &d4->coll : &d5->coll.c;
        const ProfP2p *p = d4 ? &d4->p2p : &d5->p2p.p;
        pthread_mutex_lock(&ctx->mu);
        Op *op = &ctx->ops[ctx->next_slot];
        ctx->next_slot = (ctx->next_slot + 1) % OP_SLOTS;
        if (op->busy) finish(ctx, op, 1); /* 4096 ops later and still open: NCCL is done with it */
        uint32_t gen = op->gen;
        memset(op, 0, sizeof *op);
        op->gen = gen;
        op->busy = 1;
        op->ev = (Ev){EV_MAGIC, (uint32_t)type, ctx, next, op, gen, 0};
        Record *r = &op->rec;
        Ring *ring = attached_ring();
        r->t_issue_ns = now;
        r->iteration = ring ? ring->api->iteration(ring->recorder) : -1;
        r->comm = (uint32_t)(ctx->comm_index < 0 ? 0 : ctx->comm_index);
        if (type == PROF_COLL) {
            r->op = op_kind(c->func);
            r->seq = ctx->coll_seq++;
            r->peer = -1;
            r->nbytes = (uint64_t)c->count * type_size(c->datatype);
            if (r->op == OP_REDUCE_SCATTER) r->nbytes *= (uint64_t)ctx->nranks;
            op->channels = c->nChannels;
        } else {
            r->op = op_kind(p->func);
            r->peer = p->peer;
            r->nbytes = (uint64_t)p->count * type_size(p->datatype);
            op->channels = p->nChannels;
            if (p->peer >= 0 && p->peer < ctx->nranks && (r->op == OP_SEND || r->op == OP_RECV))
                r->seq = ctx->p2p_seq[(r->op == OP_RECV ? ctx->nranks : 0) + p->peer]++;
        }
        pthread_mutex_unlock(&ctx->mu);
        *handle = &op->ev;
        return NCCL_OK;
    }

    Op *op = NULL;
    if (ours && (type == PROF_KERNEL_CH || type == PROF_PROXY_OP) && parent && parent->op == (Op *)parent &&
        parent->ctx == ctx)
        op = parent->op;
    if (!op && !next) return NCCL_OK; /* neither we nor the next plugin follow this event */
    Ev *ev = calloc(1, sizeof *ev);
    if (!ev) return NCCL_OK; /* a profiler never fails NCCL: this event goes unrecorded */
    *ev = (Ev){EV_MAGIC, (uint32_t)type, ctx, next, op, 0, 1};
    if (op) {
        pthread_mutex_lock(&ctx->mu);
        if (op->busy) {
            ev->op_gen = op->gen;
            op->children++;
            if (!op->child_start || now < op->child_start) op->child_start = now;
            if (type == PROF_KERNEL_CH) {
                uint64_t t = d4 ? d4->kernelCh.pTimer : d5->kernelCh.pTimer;
                if (t && (!op->gpu_start || t < op->gpu_start)) op->gpu_start = t;
            }
        } else {
            ev->op = NULL; /* the op was already written: this child comes too late */
            pthread_mutex_lock(&g.mu);
            g.late_children++;
            pthread_mutex_unlock(&g.mu);
        }
        pthread_mutex_unlock(&ctx->mu);
    }
    *handle = ev;
    return NCCL_OK;
}

static ncclResult_t stop_event(void *handle) {
    Ev *ev = as_ev(handle);
    if (!ev) return NCCL_OK;
    Ctx *ctx = ev->ctx;
    int64_t now = mono_ns();
    if (ev->next) {
        if (ctx->version == 5) g.next_v5->stopEvent(ev->next);
        else g.next_v4->stopEvent(ev->next);
    }
    if (!ev->owned) { /* a Coll/P2p op */
        Op *op = ev->op;
        pthread_mutex_lock(&ctx->mu);
        if (op->busy && op->gen == ev->op_gen && !op->stopped) {
            op->stopped = 1;
            op->host_stop = now;
            maybe_finish(ctx, op);
        }
        pthread_mutex_unlock(&ctx->mu);
        return NCCL_OK;
    }
    Op *op = ev->op;
    if (op) {
        pthread_mutex_lock(&ctx->mu);
        if (op->busy && op->gen == ev->op_gen) {
            op->children--;
            if (now > op->child_end) op->child_end = now;
            if (ev->type == PROF_KERNEL_CH) op->kernels_done++;
            maybe_finish(ctx, op);
        }
        pthread_mutex_unlock(&ctx->mu);
    }
    ev->magic = 0;
    free(ev);
    return NCCL_OK;
}

static ncclResult_t record_state(void *handle, int state, ProfStateArgs *args) {
    Ev *ev = as_ev(handle);
    if (!ev) return NCCL_OK;
    Ctx *ctx = ev->ctx;
    if (ev->next) {
        if (ctx->version == 5) g.next_v5->recordEventState(ev->next, state, args);
        else g.next_v4->recordEventState(ev->next, state, args);
    }
    if (ev->owned && ev->op && ev->type == PROF_KERNEL_CH && state == PROF_STATE_KERNEL_CH_STOP && args) {
        Op *op = ev->op;
        pthread_mutex_lock(&ctx->mu);
        if (op->busy && op->gen == ev->op_gen && args->kernelCh.pTimer > op->gpu_end) op->gpu_end = args->kernelCh.pTimer;
        pthread_mutex_unlock(&ctx->mu);
    }
    return NCCL_OK;
}

static ncclResult_t finalize(void *context) {
    Ctx *ctx = context;
    if (!ctx || ctx->magic != CTX_MAGIC) return NCCL_OK;
    if (ctx->next_ctx) {
        if (ctx->version == 5) g.next_v5->finalize(ctx->next_ctx);
        else g.next_v4->finalize(ctx->next_ctx);
    }
    pthread_mutex_lock(&ctx->mu);
    /* what is still open goes out in issue order, with what is known of its times */
    for (uint32_t i = 0; i < OP_SLOTS; i++) {
        Op *op = &ctx->ops[(ctx->next_slot + i) % OP_SLOTS];
        if (op->busy) finish(ctx, op, 1);
    }
    pthread_mutex_unlock(&ctx->mu);
    pthread_mutex_lock(&g.mu);
    if (g.opened == 1) {
        flush_locked();
        write_sidecar();
    }
    pthread_mutex_unlock(&g.mu);
    ctx->magic = 0;
    pthread_mutex_destroy(&ctx->mu);
    free(ctx->ops);
    free(ctx->p2p_seq);
    free(ctx);
    return NCCL_OK;
}

/* ---- the exported versions -------------------------------------------------------------- */

static ncclResult_t init_v4(void **context, int *mask, const char *name, uint64_t hash, int nnodes, int nranks,
                            int rank, ncclDebugLogger_t logfn) {
    return ctx_init((Ctx **)context, 4, mask, name, hash, nnodes, nranks, rank, logfn);
}

static ncclResult_t init_v5(void **context, uint64_t id, int *mask, const char *name, int nnodes, int nranks,
                            int rank, ncclDebugLogger_t logfn) {
    return ctx_init((Ctx **)context, 5, mask, name, id, nnodes, nranks, rank, logfn);
}

static ncclResult_t start_v4(void *context, void **handle, ProfDescrV4 *d) {
    Ctx *ctx = context;
    if (!handle) return NCCL_OK;
    *handle = NULL;
    if (!ctx || ctx->magic != CTX_MAGIC || !d) return NCCL_OK;
    return start_event(ctx, handle, d->type, d, NULL);
}

static ncclResult_t start_v5(void *context, void **handle, ProfDescrV5 *d) {
    Ctx *ctx = context;
    if (!handle) return NCCL_OK;
    *handle = NULL;
    if (!ctx || ctx->magic != CTX_MAGIC || !d) return NCCL_OK;
    return start_event(ctx, handle, d->type, NULL, d);
}

__attribute__((visibility("default"))) ProfilerV4 ncclProfiler_v4 = {"sleuth", init_v4, start_v4, stop_event, record_state, finalize};
__attribute__((visibility("default"))) ProfilerV5 ncclProfiler_v5 = {"sleuth", init_v5, start_v5, stop_event, record_state, finalize};

/* A forked child starts with nothing of its parent's: not its buffered records (the parent writes
 * them), its file or its communicators. It opens files of its own at its first init. */
static void after_fork_in_child(void) {
    pthread_mutex_init(&g.mu, NULL);
    if (g.fd >= 0) close(g.fd);
    g.fd = -1;
    g.opened = 0;
    g.nbuf = 0;
    g.ncomms = 0;
    g.ring = NULL; /* the parent's logger: a child's own logger attaches again if it installs one */
    g.flusher = 0; /* threads do not survive a fork: the child's own output starts its own */
    g.written = g.dropped = g.unknown_ops = g.late_children = g.forced = 0;
}

/* ---- the logger's ring (sleuth_nccl_attach.h) --------------------------------------------- */

__attribute__((visibility("default"))) int sleuth_nccl_profiler_attach(const CommopsCApi *api, void *recorder) {
    if (!api || !recorder) return -1;
    if (api->version != SLEUTH_COMMOPS_CAPI_VERSION || !api->record || !api->iteration) return SLEUTH_COMMOPS_CAPI_VERSION;
    Ring *ring = malloc(sizeof *ring);
    if (!ring) return -1;
    ring->api = api;
    ring->recorder = recorder;
    pthread_mutex_lock(&g.mu);
    pin_library(); /* NCCL's dlclose of its last communicator must not reset the attachment */
    __atomic_store_n(&g.ring, ring, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&g.mu);
    return 0;
}

__attribute__((visibility("default"))) void sleuth_nccl_profiler_detach(void) {
    pthread_mutex_lock(&g.mu);
    __atomic_store_n(&g.ring, NULL, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&g.mu);
}

__attribute__((visibility("default"))) int sleuth_nccl_profiler_comms(int from, SleuthNcclComm *out, int max) {
    int n = 0;
    if (!out || from < 0 || max <= 0) return 0;
    pthread_mutex_lock(&g.mu);
    for (int i = from; i < g.ncomms && n < max; i++, n++) {
        CommInfo *c = &g.comms[i];
        memset(&out[n], 0, sizeof out[n]);
        out[n].hash = c->hash;
        out[n].index = i;
        out[n].nranks = c->nranks;
        out[n].rank = c->rank;
        out[n].nnodes = c->nnodes;
        snprintf(out[n].name, sizeof out[n].name, "%s", c->name);
    }
    pthread_mutex_unlock(&g.mu);
    return n;
}

__attribute__((constructor)) static void at_load(void) { pthread_atfork(NULL, NULL, after_fork_in_child); }

/* Records still buffered when the process exits without finalizing its communicators. */
__attribute__((destructor)) static void at_exit(void) {
    pthread_mutex_lock(&g.mu);
    if (g.opened == 1) {
        flush_locked();
        write_sidecar();
    }
    pthread_mutex_unlock(&g.mu);
}
