/* One CommOps record, 64 bytes: the layout of sleuth.logger.core.RECORD_DTYPE, written by the
 * logger's C recorder (_commops.c), its native hooks (native/) and the NCCL profiler plugin (nccl_profiler/). */
#ifndef SLEUTH_COMMOPS_RECORD_H
#define SLEUTH_COMMOPS_RECORD_H

#include <stdint.h>

typedef struct {
    int64_t t_issue_ns, t_start_ns, t_end_ns;
    uint64_t seq, nbytes;
    int64_t iteration;
    uint32_t comm;
    int32_t peer;
    uint8_t op;
    uint8_t pad[7];
} Record;

#ifdef __cplusplus
static_assert(sizeof(Record) == 64, "Record must be 64 bytes");
#else
_Static_assert(sizeof(Record) == 64, "Record must be 64 bytes");
#endif

#endif
