/* NCCL's profiler plugin interface, versions 4 and 5, declared from NCCL's documented interface
 * (ext-profiler/README.md and the versioned profiler_vN.h descriptions of NVIDIA/nccl). Written
 * here so the plugin builds with plain gcc: no CUDA toolkit, no NCCL headers.
 *
 * Layout facts relied on (x86-64 / aarch64 LP64):
 *   - an event descriptor is {type; void *parentObj; int rank; union {...}}; v4's type is a
 *     uint8_t, v5's a uint64_t, so parentObj (offset 8), rank (16) and the union (24) line up;
 *   - v5's coll and p2p members append `parentGroup` after v4's members.
 */
#ifndef SLEUTH_NCCL_PROFILER_API_H
#define SLEUTH_NCCL_PROFILER_API_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef int ncclResult_t; /* an enum in NCCL: int-sized */
#define NCCL_OK 0
#define NCCL_INTERNAL_ERROR 3
#define NCCL_INVALID_ARGUMENT 4

/* ncclDebugLogger_t: (level, flags, file, line, fmt, ...); level 2 = WARN, 3 = INFO; flag 1 = INIT. */
typedef void (*ncclDebugLogger_t)(int level, unsigned long flags, const char *file, int line, const char *fmt, ...);
#define NCCL_LOG_WARN 2
#define NCCL_LOG_INFO 3
#define NCCL_FLAG_INIT 1UL

/* Event types (a bit each, also the activation mask's bits). */
enum {
    PROF_GROUP = 1 << 0,
    PROF_COLL = 1 << 1,
    PROF_P2P = 1 << 2,
    PROF_PROXY_OP = 1 << 3,
    PROF_PROXY_STEP = 1 << 4,
    PROF_PROXY_CTRL = 1 << 5,
    PROF_KERNEL_CH = 1 << 6,
    PROF_NET_PLUGIN = 1 << 7,
    PROF_GROUP_API = 1 << 8,     /* v5 */
    PROF_COLL_API = 1 << 9,      /* v5 */
    PROF_P2P_API = 1 << 10,      /* v5 */
    PROF_KERNEL_LAUNCH = 1 << 11 /* v5 */
};

/* Event states passed to recordEventState (one enum shared by every version). */
enum { PROF_STATE_KERNEL_CH_STOP = 22 };

typedef struct {
    uint64_t seqNumber;
    const char *func;
    const void *sendBuff;
    void *recvBuff;
    size_t count;
    int root;
    const char *datatype;
    uint8_t nChannels;
    uint8_t nWarps;
    const char *algo;
    const char *proto;
} ProfColl;

typedef struct {
    const char *func;
    void *buff;
    const char *datatype;
    size_t count;
    int peer;
    uint8_t nChannels;
} ProfP2p;

typedef struct {
    pid_t pid;
    uint8_t channelId;
    int peer;
    int nSteps;
    int chunkSize;
    int isSend;
} ProfProxyOp;

typedef struct {
    uint8_t channelId;
    uint64_t pTimer; /* the channel's start, GPU globaltimer (ns) */
} ProfKernelCh;

typedef struct {
    uint8_t type;
    void *parentObj;
    int rank;
    union {
        ProfColl coll;
        ProfP2p p2p;
        ProfProxyOp proxyOp;
        struct { int step; } proxyStep;
        ProfKernelCh kernelCh;
        struct { int64_t id; void *data; } netPlugin;
    };
} ProfDescrV4;

typedef struct {
    uint64_t type;
    void *parentObj;
    int rank;
    union {
        struct { int graphCaptured; int groupDepth; } groupApi;
        struct { const char *func; size_t count; const char *datatype; int root; void *stream; _Bool graphCaptured; } collApi;
        struct { const char *func; size_t count; const char *datatype; void *stream; _Bool graphCaptured; } p2pApi;
        struct { void *stream; } kernelLaunch;
        struct { ProfColl c; void *parentGroup; } coll;
        struct { ProfP2p p; void *parentGroup; } p2p;
        ProfProxyOp proxyOp;
        struct { int step; } proxyStep;
        ProfKernelCh kernelCh;
        struct { int64_t id; void *data; } netPlugin;
    };
} ProfDescrV5;

typedef union {
    struct { size_t transSize; } proxyStep;
    struct { int appendedProxyOps; } proxyCtrl;
    struct { void *data; } netPlugin;
    struct { uint64_t pTimer; } kernelCh; /* the channel's stop, GPU globaltimer (ns) */
} ProfStateArgs;

typedef struct {
    const char *name;
    ncclResult_t (*init)(void **context, int *eActivationMask, const char *commName, uint64_t commHash,
                         int nNodes, int nranks, int rank, ncclDebugLogger_t logfn);
    ncclResult_t (*startEvent)(void *context, void **eHandle, ProfDescrV4 *eDescr);
    ncclResult_t (*stopEvent)(void *eHandle);
    ncclResult_t (*recordEventState)(void *eHandle, int eState, ProfStateArgs *eStateArgs);
    ncclResult_t (*finalize)(void *context);
} ProfilerV4;

typedef struct {
    const char *name;
    ncclResult_t (*init)(void **context, uint64_t commId, int *eActivationMask, const char *commName,
                         int nNodes, int nranks, int rank, ncclDebugLogger_t logfn);
    ncclResult_t (*startEvent)(void *context, void **eHandle, ProfDescrV5 *eDescr);
    ncclResult_t (*stopEvent)(void *eHandle);
    ncclResult_t (*recordEventState)(void *eHandle, int eState, ProfStateArgs *eStateArgs);
    ncclResult_t (*finalize)(void *context);
} ProfilerV5;

_Static_assert(offsetof(ProfDescrV4, parentObj) == offsetof(ProfDescrV5, parentObj), "parentObj offsets differ");
_Static_assert(offsetof(ProfDescrV4, coll) == offsetof(ProfDescrV5, coll), "union offsets differ");

#endif
