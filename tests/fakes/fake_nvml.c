/*
 * A stand-in for libnvidia-ml, for gpumem's tests only: never shipped, never used by the product.
 *
 * It answers the NVML queries gpumem makes with fixed, recognisable values so the NVML code path
 * and its merge with CUDA rows run without an NVIDIA driver. Environment:
 *   GPUMEM_FAKE_DEVICES          number of devices (default 1)
 *   GPUMEM_FAKE_TOTAL            bytes per device (default 24 GiB)
 *   GPUMEM_FAKE_NVML_INIT_ERROR  an nvmlReturn_t for nvmlInit_v2 (e.g. 9 = DRIVER_NOT_LOADED)
 * Per device: 1 GiB used, 300 MiB reserved, one process (pid 4242) using 1 GiB, MIG off.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvmlReturn_t;
typedef void *nvmlDevice_t;
typedef struct {
    unsigned int version;
    unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;
typedef struct {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;
typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_t;

enum { NVML_SUCCESS = 0, NVML_ERROR_INVALID_ARGUMENT = 2, NVML_ERROR_INSUFFICIENT_SIZE = 7 };

static long long env_ll(const char *name, long long fallback) {
    const char *v = getenv(name);
    return v && *v ? atoll(v) : fallback;
}
static unsigned int count(void) { return (unsigned int)env_ll("GPUMEM_FAKE_DEVICES", 1); }
static int index_of(nvmlDevice_t d) { return (int)((uintptr_t)d - 1); }

nvmlReturn_t nvmlInit_v2(void) { return (nvmlReturn_t)env_ll("GPUMEM_FAKE_NVML_INIT_ERROR", 0); }
nvmlReturn_t nvmlInitWithFlags(unsigned int flags) { (void)flags; return nvmlInit_v2(); }
nvmlReturn_t nvmlShutdown(void) { return NVML_SUCCESS; }
const char *nvmlErrorString(nvmlReturn_t r) { (void)r; return "fake NVML error"; }
nvmlReturn_t nvmlSystemGetDriverVersion(char *v, unsigned int len) {
    snprintf(v, len, "570.86.15");
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v) { *v = 12080; return NVML_SUCCESS; }
nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *v) { *v = 12080; return NVML_SUCCESS; }
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *n) { *n = count(); return NVML_SUCCESS; }
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d) {
    if (i >= count()) return NVML_ERROR_INVALID_ARGUMENT;
    *d = (nvmlDevice_t)(uintptr_t)(i + 1);
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned int len) {
    snprintf(name, len, "Fake GPU %d", index_of(d));
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2_t *m) {
    (void)d;
    m->total = (unsigned long long)env_ll("GPUMEM_FAKE_TOTAL", 24LL << 30);
    m->reserved = 300ULL << 20;
    m->used = 1ULL << 30;
    m->free = m->total - m->used - m->reserved;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t d, int *major, int *minor) {
    (void)d;
    *major = 9;
    *minor = 0;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t *p) {
    memset(p, 0, sizeof *p);
    p->bus = (unsigned int)index_of(d) + 1;
    snprintf(p->busId, sizeof p->busId, "00000000:%02X:00.0", index_of(d) + 1);
    snprintf(p->busIdLegacy, sizeof p->busIdLegacy, "0000:%02X:00.0", index_of(d) + 1);
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *uuid, unsigned int len) {
    unsigned char b[16];
    for (int i = 0; i < 16; i++) b[i] = (unsigned char)(0x10 * (index_of(d) + 1) + i);
    snprintf(uuid, len, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *n, nvmlProcessInfo_t *infos) {
    (void)d;
    if (*n < 1 || !infos) {
        *n = 1;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    *n = 1;
    memset(infos, 0, sizeof *infos);
    infos[0].pid = 4242;
    infos[0].usedGpuMemory = 1ULL << 30;
    return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t d, unsigned int *current, unsigned int *pending) {
    (void)d;
    *current = 0;
    *pending = 0;
    return NVML_SUCCESS;
}
