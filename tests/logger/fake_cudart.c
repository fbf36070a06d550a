/* A CUDA runtime double for testing the recorder's CUDA-event path on machines without a GPU.
 *
 * It exports the six libcudart entry points that sleuth.logger._commops loads with dlopen, with
 * the semantics that path relies on: an event recorded on a stream completes when the work queued
 * before it on that stream is done. Here every stream the test passes in (the "training stream")
 * runs `delay_ns` behind the host, as a busy GPU would, while streams created through
 * cudaStreamCreateWithFlags (the recorder's private reference stream) are idle and complete at
 * once. The device clock has an arbitrary offset from the host clock, so a recorder that assumed
 * the two were one clock would be caught.
 *
 * It also counts what the test must check and a real GPU cannot easily show: which streams were
 * waited on with cudaEventSynchronize, and how many events were created (the pool is reused).
 */
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#define SUCCESS 0
#define INVALID_RESOURCE 400
#define NOT_READY 600
#define MAX_STREAMS 64
#define DEVICE_CLOCK_OFFSET_NS 987654321000LL

typedef struct {
    int recorded;
    void *stream;
    int64_t device_ns; /* when the event completes, on the device clock */
} Event;

static int64_t delay_ns;
static long events_created, syncs_on_private, syncs_on_others, queries, fail_records_after = -1;
static void *private_streams[MAX_STREAMS];
static int n_private;

static int64_t device_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec + DEVICE_CLOCK_OFFSET_NS;
}

static int is_private(void *stream) {
    for (int i = 0; i < n_private; i++)
        if (private_streams[i] == stream) return 1;
    return 0;
}

/* ---- the test's handles ---- */
void fake_cuda_set_delay_ns(int64_t ns) { delay_ns = ns; }
void fake_cuda_fail_records_after(long n) { fail_records_after = n; }
long fake_cuda_events_created(void) { return events_created; }
long fake_cuda_syncs_on_private_streams(void) { return syncs_on_private; }
long fake_cuda_syncs_on_other_streams(void) { return syncs_on_others; }
long fake_cuda_queries(void) { return queries; }

/* ---- libcudart ---- */
int cudaStreamCreateWithFlags(void **stream, unsigned int flags) {
    if (n_private == MAX_STREAMS) return INVALID_RESOURCE;
    *stream = malloc(1);
    private_streams[n_private++] = *stream;
    return SUCCESS;
}

int cudaEventCreateWithFlags(void **event, unsigned int flags) {
    *event = calloc(1, sizeof(Event));
    events_created++;
    return SUCCESS;
}

int cudaEventRecord(void *event, void *stream) {
    Event *e = event;
    if (fail_records_after == 0) return INVALID_RESOURCE;
    if (fail_records_after > 0) fail_records_after--;
    e->recorded = 1;
    e->stream = stream;
    e->device_ns = device_now() + (is_private(stream) ? 0 : delay_ns);
    return SUCCESS;
}

static int query(Event *e) {
    if (!e->recorded) return INVALID_RESOURCE;
    return device_now() >= e->device_ns ? SUCCESS : NOT_READY;
}

int cudaEventQuery(void *event) {
    queries++;
    return query(event);
}

int cudaEventSynchronize(void *event) {
    Event *e = event;
    if (!e->recorded) return INVALID_RESOURCE;
    if (is_private(e->stream)) syncs_on_private++;
    else syncs_on_others++;
    while (device_now() < e->device_ns) {
    }
    return SUCCESS;
}

int cudaEventElapsedTime(float *ms, void *start, void *end) {
    Event *a = start, *b = end;
    if (!a->recorded || !b->recorded) return INVALID_RESOURCE;
    if (query(a) != SUCCESS || query(b) != SUCCESS) return NOT_READY;
    *ms = (float)((double)(b->device_ns - a->device_ns) / 1e6);
    return SUCCESS;
}
