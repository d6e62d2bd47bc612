/*
 * A stand-in for libamdhip64, for gpumem's tests only: never shipped, never used by the product.
 * hipMalloc is backed by host memory with a per-device capacity (GPUMEM_FAKE_TOTAL, default
 * 16 GiB; GPUMEM_FAKE_DEVICES devices, default 1).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int hipError_t;
enum { hipSuccess = 0, hipErrorInvalidValue = 1, hipErrorOutOfMemory = 2, hipErrorInvalidDevice = 101 };

#define MAX_ALLOCS 65536
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long long used[16];
static struct { void *ptr; size_t size; int device; } allocs[MAX_ALLOCS];
static __thread int current;

static long long env_ll(const char *name, long long fallback) {
    const char *v = getenv(name);
    return v && *v ? atoll(v) : fallback;
}
static int count(void) { return (int)env_ll("GPUMEM_FAKE_DEVICES", 1); }
static unsigned long long total(void) { return (unsigned long long)env_ll("GPUMEM_FAKE_TOTAL", 16LL << 30); }

/* Streams and events for hipMemcpyAsync: the stand-in copies at once and events record the
 * host clock, so elapsed times are real. */
#include <time.h>
typedef struct { double ms; int recorded; } FakeEvent;
static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}
hipError_t hipStreamCreate(void **stream) { *stream = malloc(1); return *stream ? hipSuccess : hipErrorOutOfMemory; }
hipError_t hipStreamDestroy(void *stream) { free(stream); return hipSuccess; }
hipError_t hipEventCreate(FakeEvent **e) { *e = calloc(1, sizeof(FakeEvent)); return *e ? hipSuccess : hipErrorOutOfMemory; }
hipError_t hipEventDestroy(FakeEvent *e) { free(e); return hipSuccess; }
hipError_t hipEventRecord(FakeEvent *e, void *stream) { (void)stream; e->ms = now_ms(); e->recorded = 1; return hipSuccess; }
hipError_t hipEventSynchronize(FakeEvent *e) { return e->recorded ? hipSuccess : hipErrorInvalidValue; }
hipError_t hipEventElapsedTime(float *ms, FakeEvent *start, FakeEvent *end) {
    if (!start->recorded || !end->recorded) return hipErrorInvalidValue;
    *ms = (float)(end->ms - start->ms);
    return hipSuccess;
}
hipError_t hipMemcpyAsync(void *dst, const void *src, size_t n, int kind, void *stream) {
    (void)kind; (void)stream;
    memcpy(dst, src, n);
    return hipSuccess;
}

hipError_t hipInit(unsigned int flags) { (void)flags; return hipSuccess; }
hipError_t hipGetDeviceCount(int *n) { *n = count(); return hipSuccess; }
hipError_t hipSetDevice(int d) {
    if (d < 0 || d >= count()) return hipErrorInvalidDevice;
    current = d;
    return hipSuccess;
}
hipError_t hipMalloc(void **ptr, size_t size) {
    hipError_t r = hipErrorOutOfMemory;
    pthread_mutex_lock(&lock);
    if (used[current] + size <= total()) {
        for (int i = 0; i < MAX_ALLOCS; i++) {
            if (!allocs[i].ptr) {
                void *p = malloc(size ? size : 1);
                if (!p) break;
                allocs[i].ptr = p;
                allocs[i].size = size;
                allocs[i].device = current;
                used[current] += size;
                *ptr = p;
                r = hipSuccess;
                break;
            }
        }
    }
    pthread_mutex_unlock(&lock);
    return r;
}
hipError_t hipFree(void *ptr) {
    hipError_t r = hipErrorInvalidValue;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_ALLOCS; i++) {
        if (ptr && allocs[i].ptr == ptr) {
            free(ptr);
            used[allocs[i].device] -= allocs[i].size;
            allocs[i].ptr = 0;
            r = hipSuccess;
            break;
        }
    }
    pthread_mutex_unlock(&lock);
    return r;
}
hipError_t hipMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
    pthread_mutex_lock(&lock);
    *total_bytes = (size_t)total();
    *free_bytes = (size_t)(total() - used[current]);
    pthread_mutex_unlock(&lock);
    return hipSuccess;
}
hipError_t hipMemcpy(void *dst, const void *src, size_t n, int kind) {
    (void)kind;
    memcpy(dst, src, n);
    return hipSuccess;
}
