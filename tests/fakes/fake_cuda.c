/*
 * A stand-in for libcuda, for gpumem's tests only: never shipped, never used by the product.
 *
 * It exports the few driver-API functions gpumem calls, backed by host memory, so that the CUDA
 * code paths (enumeration, memory queries, allocation, copies, error handling) run for real
 * without an NVIDIA driver. Behaviour is set through the environment:
 *   GPUMEM_FAKE_DEVICES     number of devices (default 1; 0 makes cuInit fail with NO_DEVICE)
 *   GPUMEM_FAKE_TOTAL       bytes per device (default 24 GiB)
 *   GPUMEM_FAKE_INIT_ERROR  a CUresult for cuInit to return (e.g. 3 = NOT_INITIALIZED)
 *   GPUMEM_FAKE_INIT_DELAY_MS  make cuInit hang this long (the probe-timeout path)
 *   GPUMEM_FAKE_INIT_CRASH  "segv" or "abort": cuInit kills the process (a broken driver)
 * Build with -DOMIT_MEMGETINFO to leave out cuMemGetInfo_v2 (the missing-symbol path).
 *
 * Virtual memory management (cuMemAddressReserve, cuMemCreate, cuMemMap, cuMemSetAccess,
 * cuMemUnmap, cuMemRelease, cuMemAddressFree) is modelled with host address space: a reserved
 * range is an inaccessible mapping, cuMemMap makes part of it accessible, and physical memory
 * (cuMemCreate) is charged to the device until it is both released and unmapped.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef unsigned long long CUdeviceptr;
typedef struct { char bytes[16]; } CUuuid;

enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_INVALID_DEVICE = 101,
    CUDA_ERROR_INVALID_CONTEXT = 201,
};

#define MAX_DEVICES 16
#define MAX_ALLOCS 65536

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int initialised;
static unsigned long long used[MAX_DEVICES];
static struct { CUdeviceptr ptr; size_t size; int device; } allocs[MAX_ALLOCS];
static __thread int current = -1;

static long long env_ll(const char *name, long long fallback) {
    const char *v = getenv(name);
    return v && *v ? atoll(v) : fallback;
}
static int device_count(void) {
    long long n = env_ll("GPUMEM_FAKE_DEVICES", 1);
    return n < 0 ? 0 : (n > MAX_DEVICES ? MAX_DEVICES : (int)n);
}
static unsigned long long total_bytes(void) {
    return (unsigned long long)env_ll("GPUMEM_FAKE_TOTAL", 24LL << 30);
}
static int valid(CUdevice d) { return initialised && d >= 0 && d < device_count(); }

CUresult cuInit(unsigned int flags) {
    (void)flags;
    const char *crash = getenv("GPUMEM_FAKE_INIT_CRASH");
    /* A real fault, as a broken driver makes: raise() would be absorbed by Rust's handler. */
    if (crash && strcmp(crash, "segv") == 0) *(volatile int *)0 = 0;
    if (crash && strcmp(crash, "abort") == 0) abort();
    long long delay = env_ll("GPUMEM_FAKE_INIT_DELAY_MS", 0);
    if (delay > 0) usleep((useconds_t)(delay * 1000));
    long long forced = env_ll("GPUMEM_FAKE_INIT_ERROR", 0);
    if (forced) return (CUresult)forced;
    if (device_count() == 0) return CUDA_ERROR_NO_DEVICE;
    initialised = 1;
    return CUDA_SUCCESS;
}
CUresult cuDriverGetVersion(int *v) { *v = 12080; return CUDA_SUCCESS; }
CUresult cuDeviceGetCount(int *n) {
    if (!initialised) return CUDA_ERROR_NOT_INITIALIZED;
    *n = device_count();
    return CUDA_SUCCESS;
}
CUresult cuDeviceGet(CUdevice *d, int ordinal) {
    if (!valid(ordinal)) return CUDA_ERROR_INVALID_DEVICE;
    *d = ordinal;
    return CUDA_SUCCESS;
}
CUresult cuDeviceGetName(char *name, int len, CUdevice d) {
    if (!valid(d)) return CUDA_ERROR_INVALID_DEVICE;
    snprintf(name, (size_t)len, "Fake GPU %d", d);
    return CUDA_SUCCESS;
}
CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice d) {
    if (!valid(d)) return CUDA_ERROR_INVALID_DEVICE;
    *bytes = (size_t)total_bytes();
    return CUDA_SUCCESS;
}
CUresult cuDeviceGetAttribute(int *value, int attribute, CUdevice d) {
    if (!valid(d)) return CUDA_ERROR_INVALID_DEVICE;
    switch (attribute) {
    case 75: *value = 9; return CUDA_SUCCESS; /* compute capability major */
    case 76: *value = 0; return CUDA_SUCCESS; /* minor */
    case 18: *value = 0; return CUDA_SUCCESS; /* integrated */
    case 102: *value = 1; return CUDA_SUCCESS; /* virtual memory management supported */
    default: *value = 0; return CUDA_SUCCESS;
    }
}
CUresult cuDeviceGetPCIBusId(char *id, int len, CUdevice d) {
    if (!valid(d)) return CUDA_ERROR_INVALID_DEVICE;
    snprintf(id, (size_t)len, "0000:%02X:00.0", d + 1);
    return CUDA_SUCCESS;
}
CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice d) {
    if (!valid(d)) return CUDA_ERROR_INVALID_DEVICE;
    for (int i = 0; i < 16; i++) uuid->bytes[i] = (char)(0x10 * (d + 1) + i);
    return CUDA_SUCCESS;
}
CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice d) { return cuDeviceGetUuid(uuid, d); }
CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice d) {
    if (!valid(d)) return CUDA_ERROR_INVALID_DEVICE;
    *ctx = (CUcontext)(uintptr_t)(d + 1);
    return CUDA_SUCCESS;
}
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) { return valid(d) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE; }
CUresult cuCtxSetCurrent(CUcontext ctx) {
    current = ctx ? (int)((uintptr_t)ctx - 1) : -1;
    return CUDA_SUCCESS;
}
#ifndef OMIT_MEMGETINFO
CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total) {
    if (current < 0) return CUDA_ERROR_INVALID_CONTEXT;
    pthread_mutex_lock(&lock);
    *total = (size_t)total_bytes();
    *free_bytes = (size_t)(total_bytes() - used[current]);
    pthread_mutex_unlock(&lock);
    return CUDA_SUCCESS;
}
#endif
CUresult cuMemAlloc_v2(CUdeviceptr *ptr, size_t size) {
    if (current < 0) return CUDA_ERROR_INVALID_CONTEXT;
    if (size == 0) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
    if (used[current] + size <= total_bytes()) {
        for (int i = 0; i < MAX_ALLOCS; i++) {
            if (allocs[i].ptr == 0) {
                void *p = malloc(size);
                if (!p) break;
                allocs[i].ptr = (CUdeviceptr)(uintptr_t)p;
                allocs[i].size = size;
                allocs[i].device = current;
                used[current] += size;
                *ptr = allocs[i].ptr;
                r = CUDA_SUCCESS;
                break;
            }
        }
    }
    pthread_mutex_unlock(&lock);
    return r;
}
CUresult cuMemFree_v2(CUdeviceptr ptr) {
    pthread_mutex_lock(&lock);
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    for (int i = 0; i < MAX_ALLOCS; i++) {
        if (allocs[i].ptr == ptr && ptr != 0) {
            free((void *)(uintptr_t)ptr);
            used[allocs[i].device] -= allocs[i].size;
            allocs[i].ptr = 0;
            r = CUDA_SUCCESS;
            break;
        }
    }
    pthread_mutex_unlock(&lock);
    return r;
}
CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) {
    memcpy((void *)(uintptr_t)dst, src, n);
    return CUDA_SUCCESS;
}
CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) {
    memcpy(dst, (const void *)(uintptr_t)src, n);
    return CUDA_SUCCESS;
}
/* The prefix of CUmemAllocationProp the fake reads: the device in its location. */
typedef struct { int type; int handle_types; int location_type; int location_id; } CUmemAllocationPropPrefix;
typedef unsigned long long CUmemGenericAllocationHandle;

#define MAX_HANDLES 65536
#define GRANULE (2ULL << 20)
static struct { size_t size; int device; int live; int released; int mapped; CUdeviceptr at; } handles[MAX_HANDLES];

CUresult cuMemGetAllocationGranularity(size_t *granularity, const void *prop, int option) {
    (void)prop; (void)option;
    *granularity = (size_t)GRANULE;
    return CUDA_SUCCESS;
}
CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr, unsigned long long flags) {
    (void)alignment; (void)addr; (void)flags;
    if (size == 0 || size % GRANULE) return CUDA_ERROR_INVALID_VALUE;
    void *p = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
    *ptr = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}
CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
    return munmap((void *)(uintptr_t)ptr, size) == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
static void drop_if_unused(int i) {
    if (handles[i].live && handles[i].released && !handles[i].mapped) {
        used[handles[i].device] -= handles[i].size;
        handles[i].live = 0;
    }
}
CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const void *prop, unsigned long long flags) {
    (void)flags;
    int device = ((const CUmemAllocationPropPrefix *)prop)->location_id;
    if (!valid(device)) return CUDA_ERROR_INVALID_DEVICE;
    if (size == 0 || size % GRANULE) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
    if (used[device] + size <= total_bytes()) {
        for (int i = 1; i < MAX_HANDLES; i++) {
            if (!handles[i].live) {
                handles[i].size = size;
                handles[i].device = device;
                handles[i].live = 1;
                handles[i].released = 0;
                handles[i].mapped = 0;
                used[device] += size;
                *handle = (CUmemGenericAllocationHandle)i;
                r = CUDA_SUCCESS;
                break;
            }
        }
    }
    pthread_mutex_unlock(&lock);
    return r;
}
CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
    pthread_mutex_lock(&lock);
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    if (handle > 0 && handle < MAX_HANDLES && handles[handle].live && !handles[handle].released) {
        handles[handle].released = 1;
        drop_if_unused((int)handle);
        r = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&lock);
    return r;
}
CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle, unsigned long long flags) {
    (void)flags;
    pthread_mutex_lock(&lock);
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    if (handle > 0 && handle < MAX_HANDLES && handles[handle].live && !handles[handle].mapped
        && offset == 0 && size == handles[handle].size) {
        handles[handle].mapped = 1;
        handles[handle].at = ptr;
        r = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&lock);
    return r;
}
CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const void *desc, size_t count) {
    (void)desc;
    if (count == 0) return CUDA_ERROR_INVALID_VALUE;
    return mprotect((void *)(uintptr_t)ptr, size, PROT_READ | PROT_WRITE) == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
    pthread_mutex_lock(&lock);
    /* Every mapping inside the span goes; the span must hold whole mappings only. */
    CUresult r = CUDA_SUCCESS;
    for (int i = 1; i < MAX_HANDLES; i++) {
        if (handles[i].live && handles[i].mapped && handles[i].at >= ptr && handles[i].at < ptr + size) {
            if (handles[i].at + handles[i].size > ptr + size) { r = CUDA_ERROR_INVALID_VALUE; break; }
            handles[i].mapped = 0;
            drop_if_unused(i);
        }
    }
    if (r == CUDA_SUCCESS) {
        madvise((void *)(uintptr_t)ptr, size, MADV_DONTNEED);
        mprotect((void *)(uintptr_t)ptr, size, PROT_NONE);
    }
    pthread_mutex_unlock(&lock);
    return r;
}
/* Streams, events and page-locked host memory for the asynchronous copies. The stand-in runs
 * each copy at once (a stream that is always idle); events record the host clock, so elapsed
 * times are real. */
#include <time.h>
typedef void *CUstream;
typedef struct { double ms; int recorded; } FakeEvent;
static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}
CUresult cuStreamCreate(CUstream *stream, unsigned int flags) {
    (void)flags;
    if (current < 0) return CUDA_ERROR_INVALID_CONTEXT;
    *stream = malloc(1);
    return *stream ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
CUresult cuStreamDestroy_v2(CUstream stream) { free(stream); return CUDA_SUCCESS; }
CUresult cuEventCreate(FakeEvent **event, unsigned int flags) {
    (void)flags;
    *event = calloc(1, sizeof(FakeEvent));
    return *event ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
CUresult cuEventDestroy_v2(FakeEvent *event) { free(event); return CUDA_SUCCESS; }
CUresult cuEventRecord(FakeEvent *event, CUstream stream) {
    (void)stream;
    event->ms = now_ms();
    event->recorded = 1;
    return CUDA_SUCCESS;
}
CUresult cuEventSynchronize(FakeEvent *event) { return event->recorded ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE; }
CUresult cuEventElapsedTime(float *ms, FakeEvent *start, FakeEvent *end) {
    if (!start->recorded || !end->recorded) return CUDA_ERROR_INVALID_VALUE;
    *ms = (float)(end->ms - start->ms);
    return CUDA_SUCCESS;
}
CUresult cuEventElapsedTime_v2(float *ms, FakeEvent *start, FakeEvent *end) { return cuEventElapsedTime(ms, start, end); }
CUresult cuMemHostAlloc(void **p, size_t size, unsigned int flags) {
    (void)flags;
    if (size == 0) return CUDA_ERROR_INVALID_VALUE;
    *p = malloc(size);
    return *p ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
CUresult cuMemFreeHost(void *p) { free(p); return CUDA_SUCCESS; }
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream stream) {
    (void)stream;
    return cuMemcpyHtoD_v2(dst, src, n);
}
CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream stream) {
    (void)stream;
    return cuMemcpyDtoH_v2(dst, src, n);
}
CUresult cuGetErrorName(CUresult r, const char **name) {
    (void)r;
    *name = "CUDA_ERROR_FAKE";
    return CUDA_SUCCESS;
}
