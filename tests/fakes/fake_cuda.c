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
 *   GPUMEM_FAKE_POOL_LOG    a file the stream-ordered pool's counts are written to at exit
 * Build with -DOMIT_MEMGETINFO to leave out cuMemGetInfo_v2 (the missing-symbol path), with
 * -DOMIT_MEMPOOLS to leave out the stream-ordered allocator (a driver before CUDA 11.2).
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
#ifndef OMIT_MEMPOOLS
    case 115: *value = 1; return CUDA_SUCCESS; /* memory pools supported */
#endif
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

#ifndef OMIT_MEMPOOLS
/* The stream-ordered allocator (cuMemAllocAsync on each device's default pool). Streams run at
 * once, so a free is done when it is queued. The pool caches what is freed: a later allocation
 * takes the smallest cached block that holds it, and cached memory goes back to the device
 * when the pool is trimmed, when a synchronisation finds more reserved than the release
 * threshold, and when the device is too full for a new block. Blocks are charged to the device
 * (cuMemGetInfo sees them) from when they are made until they are given back. */
typedef struct {
    int device;
    unsigned long long threshold, reserved, used, reserved_high, used_high;
} FakePool;
static FakePool pools[MAX_DEVICES];
static struct { void *ptr; size_t size; int device; int live; int cached; } pool_blocks[MAX_ALLOCS];
static unsigned long long async_allocs, async_frees;

enum {
    ATTR_RELEASE_THRESHOLD = 4, ATTR_RESERVED_MEM_CURRENT = 5, ATTR_RESERVED_MEM_HIGH = 6,
    ATTR_USED_MEM_CURRENT = 7, ATTR_USED_MEM_HIGH = 8,
};

static void pool_release(int i) {
    FakePool *p = &pools[pool_blocks[i].device];
    free(pool_blocks[i].ptr);
    used[pool_blocks[i].device] -= pool_blocks[i].size;
    p->reserved -= pool_blocks[i].size;
    pool_blocks[i].ptr = NULL;
    pool_blocks[i].cached = 0;
}
/* Gives cached blocks of `p` back, largest first, while it reserves more than `keep`. */
static void pool_trim(FakePool *p, unsigned long long keep) {
    while (p->reserved > keep) {
        int best = -1;
        for (int i = 0; i < MAX_ALLOCS; i++)
            if (pool_blocks[i].cached && pool_blocks[i].device == p->device
                && (best < 0 || pool_blocks[i].size > pool_blocks[best].size)) best = i;
        if (best < 0) break;
        pool_release(best);
    }
}
CUresult cuDeviceGetDefaultMemPool(FakePool **pool, CUdevice d) {
    if (!valid(d)) return CUDA_ERROR_INVALID_DEVICE;
    pools[d].device = d;
    *pool = &pools[d];
    return CUDA_SUCCESS;
}
CUresult cuMemPoolSetAttribute(FakePool *p, int attr, unsigned long long *value) {
    pthread_mutex_lock(&lock);
    CUresult r = CUDA_SUCCESS;
    switch (attr) {
    case ATTR_RELEASE_THRESHOLD: p->threshold = *value; break;
    /* A watermark can only be reset to zero; it then follows from what is held now. */
    case ATTR_RESERVED_MEM_HIGH: if (*value) r = CUDA_ERROR_INVALID_VALUE; else p->reserved_high = p->reserved; break;
    case ATTR_USED_MEM_HIGH: if (*value) r = CUDA_ERROR_INVALID_VALUE; else p->used_high = p->used; break;
    default: r = CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_unlock(&lock);
    return r;
}
CUresult cuMemPoolGetAttribute(FakePool *p, int attr, unsigned long long *value) {
    pthread_mutex_lock(&lock);
    CUresult r = CUDA_SUCCESS;
    switch (attr) {
    case ATTR_RELEASE_THRESHOLD: *value = p->threshold; break;
    case ATTR_RESERVED_MEM_CURRENT: *value = p->reserved; break;
    case ATTR_RESERVED_MEM_HIGH: *value = p->reserved_high; break;
    case ATTR_USED_MEM_CURRENT: *value = p->used; break;
    case ATTR_USED_MEM_HIGH: *value = p->used_high; break;
    default: r = CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_unlock(&lock);
    return r;
}
CUresult cuMemPoolTrimTo(FakePool *p, size_t keep) {
    pthread_mutex_lock(&lock);
    pool_trim(p, keep);
    pthread_mutex_unlock(&lock);
    return CUDA_SUCCESS;
}
CUresult cuMemAllocAsync(CUdeviceptr *ptr, size_t size, CUstream stream) {
    (void)stream;
    if (current < 0) return CUDA_ERROR_INVALID_CONTEXT;
    if (size == 0) return CUDA_ERROR_INVALID_VALUE;
    size_t rounded = (size + 511) / 512 * 512;
    FakePool *p = &pools[current];
    p->device = current;
    pthread_mutex_lock(&lock);
    int best = -1, spare = -1;
    for (int i = 0; i < MAX_ALLOCS; i++) {
        if (pool_blocks[i].cached && pool_blocks[i].device == current && pool_blocks[i].size >= rounded
            && (best < 0 || pool_blocks[i].size < pool_blocks[best].size)) best = i;
        if (spare < 0 && !pool_blocks[i].ptr) spare = i;
    }
    if (best < 0 && spare >= 0) {
        if (used[current] + rounded > total_bytes()) pool_trim(p, 0);
        void *m = used[current] + rounded <= total_bytes() ? malloc(rounded) : NULL;
        if (m) {
            pool_blocks[spare].ptr = m;
            pool_blocks[spare].size = rounded;
            pool_blocks[spare].device = current;
            used[current] += rounded;
            p->reserved += rounded;
            best = spare;
        }
    }
    CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
    if (best >= 0) {
        pool_blocks[best].cached = 0;
        pool_blocks[best].live = 1;
        p->used += pool_blocks[best].size;
        if (p->used > p->used_high) p->used_high = p->used;
        if (p->reserved > p->reserved_high) p->reserved_high = p->reserved;
        async_allocs++;
        *ptr = (CUdeviceptr)(uintptr_t)pool_blocks[best].ptr;
        r = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&lock);
    return r;
}
CUresult cuMemFreeAsync(CUdeviceptr ptr, CUstream stream) {
    (void)stream;
    pthread_mutex_lock(&lock);
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    for (int i = 0; i < MAX_ALLOCS; i++) {
        if (ptr != 0 && pool_blocks[i].live && (CUdeviceptr)(uintptr_t)pool_blocks[i].ptr == ptr) {
            pool_blocks[i].live = 0;
            pool_blocks[i].cached = 1;
            pools[pool_blocks[i].device].used -= pool_blocks[i].size;
            async_frees++;
            r = CUDA_SUCCESS;
            break;
        }
    }
    pthread_mutex_unlock(&lock);
    return r;
}
/* A synchronisation gives back what the pools cache above their release thresholds. */
CUresult cuStreamSynchronize(CUstream stream) {
    (void)stream;
    pthread_mutex_lock(&lock);
    for (int d = 0; d < MAX_DEVICES; d++) pool_trim(&pools[d], pools[d].threshold);
    pthread_mutex_unlock(&lock);
    return CUDA_SUCCESS;
}
__attribute__((destructor)) static void write_pool_log(void) {
    const char *path = getenv("GPUMEM_FAKE_POOL_LOG");
    if (!path || !*path) return;
    FILE *f = fopen(path, "w");
    if (!f) return;
    unsigned long long live = 0;
    for (int i = 0; i < MAX_ALLOCS; i++) if (pool_blocks[i].live) live += pool_blocks[i].size;
    fprintf(f, "allocs %llu\nfrees %llu\nlive_bytes %llu\nreserved_bytes %llu\nreserved_high %llu\nused_high %llu\nthreshold %llu\n",
            async_allocs, async_frees, live, pools[0].reserved, pools[0].reserved_high,
            pools[0].used_high, pools[0].threshold);
    fclose(f);
}
#endif
