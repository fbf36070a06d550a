/* What libnccl-profiler-sleuth.so exports besides NCCL's tables: the hand-over of its records to
 * the logger's ring (sleuth.logger.nccl_plugin attaches it) and the table of the communicators
 * NCCL initialized in this process, which the logger polls to map them to global ranks. */
#ifndef SLEUTH_NCCL_ATTACH_H
#define SLEUTH_NCCL_ATTACH_H

#include <stdint.h>

#include "../commops_capi.h"

/* A record's `comm` in the ring: this bit, or'ed with the communicator's index in the table.
 * The logger's own groups are numbered from 0 upwards and never reach it. */
#define SLEUTH_NCCL_RING_COMM 0x80000000u

typedef struct {
    uint64_t hash;   /* NCCL's commHash (v4) or commId (v5): the same on every member */
    int32_t index;   /* the position in this process's table, the low bits of a record's comm */
    int32_t nranks;
    int32_t rank;    /* this process's rank in the communicator */
    int32_t nnodes;
    char name[128];  /* the communicator's name, "" when NCCL gave none */
} SleuthNcclComm;

/* From now on, records go into `recorder`'s ring through `api` (commops_capi.h) instead of files,
 * with the recorder's iteration at each operation's issue and times on its clock. 0: attached;
 * -1: a null argument; else the C API version this plugin was built for (the logger's differs). */
int sleuth_nccl_profiler_attach(const CommopsCApi *api, void *recorder);

/* Records go to files again (when SLEUTH_LOG_DIR is set), as before any attach. */
void sleuth_nccl_profiler_detach(void);

/* Copies up to `max` entries of the table, from index `from`; returns how many it copied. */
int sleuth_nccl_profiler_comms(int from, SleuthNcclComm *out, int max);

#endif
