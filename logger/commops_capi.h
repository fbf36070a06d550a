/* The recorder's C API for native hooks (logger/native/): what `_commops` exports through the
 * capsule `sleuth.logger._commops._C_API`, so that the extension uses the one ring of this
 * module instead of a copy of its code. Every function is safe without the GIL. */
#ifndef SLEUTH_COMMOPS_CAPI_H
#define SLEUTH_COMMOPS_CAPI_H

#include <stdint.h>

#include "commops_record.h"

#define SLEUTH_COMMOPS_CAPI_NAME "sleuth.logger._commops._C_API"
#define SLEUTH_COMMOPS_CAPI_VERSION 1

typedef struct {
    int version;
    /* The host's monotonic clock (CLOCK_MONOTONIC), the recorder's time base. */
    int64_t (*now_ns)(void);
    /* The iteration the session marks as current (Recorder.iteration). */
    int64_t (*iteration)(void *recorder);
    /* Starts a host-clock record; its handle, or -1 when no slot was free (counted as dropped). */
    int32_t (*begin)(void *recorder, uint32_t comm, uint64_t seq, uint8_t op, int32_t peer, uint64_t nbytes,
                     int64_t iteration);
    /* Ends the record `handle` now; a handle of -1 or a stale one is ignored. */
    void (*end)(void *recorder, int32_t handle);
    /* Puts a whole record into the ring; 0 when the ring was full (counted as dropped). */
    int (*record)(void *recorder, const Record *rec);
} CommopsCApi;

#endif
