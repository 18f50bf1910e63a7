/* SPDX-License-Identifier: MIT */
/*
 * fake-cuda.c - a stand-in for libcuda.so.1 with the device queries the
 * agent makes for its inventory: two H100-like devices with fixed UUIDs
 * 00112233-4455-6677-8899-aabbccddee0<i>. CUDA_VISIBLE_DEVICES (indices,
 * e.g. "1" or "1,0") picks and orders them as the real driver does, so a
 * process's "device 0" can be physical GPU 1. FAKE_CUDA_MIG=1 puts them in
 * MIG mode: cuDeviceGetUuid_v2 then names the MIG instance (first byte
 * 0xee), cuDeviceGetUuid still the GPU.
 *
 * Memory: each device's primary context is active and holds
 * FAKECUDA_CONTEXT_BYTES; fakecuda_mem_alloc/free (the app's malloc
 * commands) add to and take from what cuMemGetInfo reports in that context,
 * as the agent asks when a capture opens. FAKE_CUDA_NO_CONTEXT=1: no
 * primary context is active (a job that made none yet).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda-abi.h"
#include "cupti-abi.h"

#define EXPORT __attribute__((visibility("default")))
#define N_DEV 2

static int n_visible = -1, visible[N_DEV];

static void pick_devices(void)
{
	const char *v = getenv("CUDA_VISIBLE_DEVICES");

	if (n_visible >= 0)
		return;
	n_visible = 0;
	if (!v) {
		for (int i = 0; i < N_DEV; i++)
			visible[n_visible++] = i;
		return;
	}
	while (*v && n_visible < N_DEV) {
		char *end;
		long i = strtol(v, &end, 10);

		if (end == v || i < 0 || i >= N_DEV)
			break; /* the driver stops at the first bad entry */
		visible[n_visible++] = (int)i;
		v = *end == ',' ? end + 1 : end;
	}
}

/* Physical index of ordinal @d, -1 if there is none. */
static int phys(CUdevice d)
{
	pick_devices();
	return d >= 0 && d < n_visible ? visible[d] : -1;
}

/* Traced as the real driver traces every call, once a CUPTI is loaded:
 * the agent's buffer canary is this call (collectors/cupti/agent-capture.c). */
EXPORT CUresult cuDriverGetVersion(int *v)
{
	void *h = dlopen("libcupti.so.13", RTLD_NOW | RTLD_NOLOAD);
	uint32_t (*api)(CUpti_CallbackDomain, CUpti_CallbackId, const char *) = NULL;

	if (h) {
		*(void **)&api = dlsym(h, "fakecupti_api");
		if (api)
			api(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuDriverGetVersion,
			    "cuDriverGetVersion");
		dlclose(h);
	}
	*v = 13000;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetCount(int *n)
{
	pick_devices();
	*n = n_visible;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGet(CUdevice *d, int i)
{
	if (phys(i) < 0)
		return CUDA_ERROR_INVALID_DEVICE;
	*d = i;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d)
{
	if (phys(d) < 0)
		return CUDA_ERROR_INVALID_DEVICE;
	d = phys(d);
	switch (a) {
	case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: *v = 0x18 + d; break;
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = 9; break;
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = 0; break;
	case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = 132; break;
	case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: *v = 1980000; break;
	case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: *v = 2619000; break;
	case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: *v = 5120; break;
	case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *v = 32; break;
	case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *v = 1024; break;
	case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: *v = 2048; break;
	case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR: *v = 32; break;
	case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: *v = 65536; break;
	case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR: *v = 65536; break;
	case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: *v = 49152; break;
	case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *v = 232448; break;
	case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: *v = 233472; break;
	case CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK: *v = 1024; break;
	default: *v = 0; break;
	}
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice d)
{
	snprintf(name, (size_t)len, "NVIDIA H100 80GB HBM3 (fake %d)", phys(d));
	return CUDA_SUCCESS;
}

static CUresult uuid_of(CUuuid *u, CUdevice d, bool instance)
{
	static const unsigned char base[16] = { 0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77,
						0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0x00 };
	const char *mig = getenv("FAKE_CUDA_MIG");

	if (phys(d) < 0)
		return CUDA_ERROR_INVALID_DEVICE;
	memcpy(u->bytes, base, sizeof(base));
	u->bytes[15] = (char)phys(d);
	if (instance && mig && strcmp(mig, "1") == 0)
		u->bytes[0] = (char)0xee;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetUuid_v2(CUuuid *u, CUdevice d)
{
	return uuid_of(u, d, true);
}

/* The old call: always the physical GPU, also in MIG mode. */
#undef cuDeviceGetUuid
EXPORT CUresult cuDeviceGetUuid(CUuuid *u, CUdevice d);
EXPORT CUresult cuDeviceGetUuid(CUuuid *u, CUdevice d)
{
	return uuid_of(u, d, false);
}

EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice d)
{
	(void)d;
	*bytes = 80ull << 30;
	return CUDA_SUCCESS;
}

/* ---- memory (see the top) ---------------------------------------------------- */

#define FAKECUDA_CONTEXT_BYTES (300ull << 20)
#define FAKECUDA_TOTAL_BYTES (80ull << 30)
#define MAX_ALLOCS 4096

static struct {
	pthread_mutex_t lock;
	uint64_t used[N_DEV]; /* by allocations, per physical device */
	uint64_t next[N_DEV]; /* bump allocator: next address */
	struct { uint64_t addr, bytes; int dev; } live[MAX_ALLOCS];
	unsigned n_live;
} mem = { .lock = PTHREAD_MUTEX_INITIALIZER };

static __thread CUcontext current;

static bool no_context(void) { return getenv("FAKE_CUDA_NO_CONTEXT") != NULL; }
static CUcontext ctx_of(int p) { return (CUcontext)(uintptr_t)(0x1000u + (unsigned)p); }

EXPORT CUresult cuDevicePrimaryCtxGetState(CUdevice d, unsigned int *flags, int *active)
{
	if (phys(d) < 0)
		return CUDA_ERROR_INVALID_DEVICE;
	*flags = 0;
	*active = !no_context();
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice d)
{
	if (phys(d) < 0)
		return CUDA_ERROR_INVALID_DEVICE;
	*ctx = ctx_of(phys(d));
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d)
{
	return phys(d) < 0 ? CUDA_ERROR_INVALID_DEVICE : CUDA_SUCCESS;
}

EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
	current = ctx;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxPopCurrent_v2(CUcontext *ctx)
{
	if (ctx)
		*ctx = current;
	current = NULL;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuMemGetInfo_v2(size_t *free_b, size_t *total)
{
	uintptr_t c = (uintptr_t)current;
	int p = (int)(c - 0x1000u);

	if (!current || p < 0 || p >= N_DEV)
		return CUDA_ERROR_INVALID_CONTEXT;
	pthread_mutex_lock(&mem.lock);
	*total = FAKECUDA_TOTAL_BYTES;
	*free_b = FAKECUDA_TOTAL_BYTES - FAKECUDA_CONTEXT_BYTES - mem.used[p];
	pthread_mutex_unlock(&mem.lock);
	return CUDA_SUCCESS;
}

/* An allocation of @bytes on ordinal @d: its address, 0 when refused. */
EXPORT uint64_t fakecuda_mem_alloc(int d, uint64_t bytes);
EXPORT uint64_t fakecuda_mem_alloc(int d, uint64_t bytes)
{
	int p = phys(d);
	uint64_t a = 0;

	if (p < 0 || bytes == 0 || bytes > FAKECUDA_TOTAL_BYTES)
		return 0;
	pthread_mutex_lock(&mem.lock);
	if (mem.n_live < MAX_ALLOCS && mem.used[p] + bytes <= FAKECUDA_TOTAL_BYTES - FAKECUDA_CONTEXT_BYTES) {
		if (!mem.next[p])
			mem.next[p] = 0x7f0000000000ull + ((uint64_t)p << 40);
		a = mem.next[p];
		mem.next[p] += (bytes + 511) & ~511ull;
		mem.live[mem.n_live].addr = a;
		mem.live[mem.n_live].bytes = bytes;
		mem.live[mem.n_live].dev = d;
		mem.n_live++;
		mem.used[p] += bytes;
	}
	pthread_mutex_unlock(&mem.lock);
	return a;
}

/* Release @addr: 0 with its ordinal and size, -1 when it is not live. */
EXPORT int fakecuda_mem_free(uint64_t addr, int *d, uint64_t *bytes);
EXPORT int fakecuda_mem_free(uint64_t addr, int *d, uint64_t *bytes)
{
	int r = -1;

	pthread_mutex_lock(&mem.lock);
	for (unsigned i = 0; i < mem.n_live; i++) {
		if (mem.live[i].addr != addr)
			continue;
		*d = mem.live[i].dev;
		*bytes = mem.live[i].bytes;
		mem.used[phys(*d)] -= *bytes;
		mem.live[i] = mem.live[--mem.n_live];
		r = 0;
		break;
	}
	pthread_mutex_unlock(&mem.lock);
	return r;
}

/* ---- calls for scripts ------------------------------------------------------
 * A Python job (tests/agent/pystacks-app.py) drives the fake through ctypes
 * with these, as fake-cuda-app's commands do: cuInit loads the tool named
 * by CUDA_INJECTION64_PATH as the real driver does; launches and copies go
 * through the CUPTI the process loaded (their API callbacks run on the
 * calling thread, as the real driver's do), each kernel 3 µs on device 0.
 * A CUfunction here is the kernel's name. */

static struct {
	pthread_mutex_t lock;
	void *h;
	uint32_t (*api)(CUpti_CallbackDomain, CUpti_CallbackId, const char *);
	void (*kernel)(uint32_t, uint32_t, uint32_t, const char *, uint64_t, uint32_t);
	void (*copy)(uint32_t, uint32_t, uint32_t, uint64_t, uint64_t);
	void (*memory)(uint32_t, uint32_t, uint32_t, bool, uint64_t, uint64_t, uint64_t, uint64_t);
	uint64_t next_ptr; /* the addresses cuMemAlloc_v2 hands out */
	const char *names[64]; /* kernel names live as long as the process, like a module's */
	unsigned n_names;
} scr = { .lock = PTHREAD_MUTEX_INITIALIZER };

static bool script_cupti(void)
{
	bool ok;

	pthread_mutex_lock(&scr.lock);
	if (!scr.h && (scr.h = dlopen("libcupti.so.13", RTLD_NOW | RTLD_NOLOAD))) {
		*(void **)&scr.api = dlsym(scr.h, "fakecupti_api");
		*(void **)&scr.kernel = dlsym(scr.h, "fakecupti_kernel");
		*(void **)&scr.copy = dlsym(scr.h, "fakecupti_memcpy");
		*(void **)&scr.memory = dlsym(scr.h, "fakecupti_memory");
	}
	ok = scr.api && scr.kernel && scr.copy && scr.memory;
	pthread_mutex_unlock(&scr.lock);
	return ok;
}

static const char *script_name(const char *s)
{
	const char *r = "too_many_names";

	pthread_mutex_lock(&scr.lock);
	for (unsigned i = 0; i < scr.n_names; i++)
		if (strcmp(scr.names[i], s) == 0) {
			r = scr.names[i];
			goto out;
		}
	if (scr.n_names < 64 && (scr.names[scr.n_names] = strdup(s)))
		r = scr.names[scr.n_names++];
out:
	pthread_mutex_unlock(&scr.lock);
	return r;
}

static CUresult init_result = CUDA_SUCCESS;

static void init_once(void)
{
	const char *path = getenv("CUDA_INJECTION64_PATH");
	int (*fn)(void) = NULL;
	void *h;

	if (!path || !*path)
		return; /* a job without a tool */
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (h)
		*(void **)&fn = dlsym(h, "InitializeInjection");
	if (!fn || fn() != 1) {
		fprintf(stderr, "fake libcuda: cannot load %s\n", path);
		init_result = CUDA_ERROR_INVALID_DEVICE;
	}
}

EXPORT CUresult cuInit(unsigned flags);
EXPORT CUresult cuInit(unsigned flags)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	(void)flags;
	pthread_once(&once, init_once);
	return init_result;
}

EXPORT CUresult cuLaunchKernel(const void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
			       unsigned bz, unsigned smem, CUstream stream, void **params, void **extra);
EXPORT CUresult cuLaunchKernel(const void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
			       unsigned bz, unsigned smem, CUstream stream, void **params, void **extra)
{
	uint32_t c;

	(void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)smem, (void)params, (void)extra;
	if (!script_cupti())
		return CUDA_SUCCESS; /* no tool loaded CUPTI: an untraced launch */
	c = scr.api(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, "cuLaunchKernel");
	scr.kernel(c, 0, (uint32_t)(uintptr_t)stream, script_name(f), 3000, 0);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuMemcpyHtoDAsync_v2(uint64_t dst, const void *src, size_t bytes, CUstream stream);
EXPORT CUresult cuMemcpyHtoDAsync_v2(uint64_t dst, const void *src, size_t bytes, CUstream stream)
{
	uint32_t c;

	(void)dst, (void)src;
	if (!script_cupti())
		return CUDA_SUCCESS;
	c = scr.api(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2,
		    "cuMemcpyHtoDAsync_v2");
	scr.copy(c, 0, (uint32_t)(uintptr_t)stream, bytes, 3000);
	return CUDA_SUCCESS;
}

/* A call that launches nothing (frameworks make several per launch): its
 * API callback only. */
EXPORT CUresult cuCtxGetCurrent(CUcontext *ctx);
EXPORT CUresult cuCtxGetCurrent(CUcontext *ctx)
{
	if (ctx)
		*ctx = (CUcontext)(uintptr_t)1;
	if (script_cupti())
		scr.api(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent, "cuCtxGetCurrent");
	return CUDA_SUCCESS;
}

/* An allocation on device 0: its API callback, then its MEMORY2 record. */
EXPORT CUresult cuMemAlloc_v2(uint64_t *ptr, size_t bytes);
EXPORT CUresult cuMemAlloc_v2(uint64_t *ptr, size_t bytes)
{
	uint32_t c;

	if (!ptr)
		return (CUresult)1; /* CUDA_ERROR_INVALID_VALUE */
	pthread_mutex_lock(&scr.lock);
	*ptr = 0x7f0000000000ull + (scr.next_ptr += 1u << 20);
	pthread_mutex_unlock(&scr.lock);
	if (!script_cupti())
		return CUDA_SUCCESS;
	c = scr.api(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, "cuMemAlloc_v2");
	scr.memory(c, 0, 0, true, *ptr, bytes, 0, 0);
	return CUDA_SUCCESS;
}

struct native_job {
	const char *name;
	unsigned n;
	uint32_t tid;
};

static void *native_main(void *arg)
{
	struct native_job *j = arg;

	j->tid = (uint32_t)gettid();
	for (unsigned i = 0; i < j->n; i++)
		cuLaunchKernel(j->name, 1, 1, 1, 1, 1, 1, 0, (CUstream)(uintptr_t)9, NULL, NULL);
	return NULL;
}

/* @n launches of @name from a thread of its own that never ran Python (as
 * PyTorch's autograd device threads launch); joined. Returns its tid. */
EXPORT uint32_t fakecuda_native_launches(const char *name, unsigned n);
EXPORT uint32_t fakecuda_native_launches(const char *name, unsigned n)
{
	struct native_job j = { .name = name, .n = n };
	pthread_t t;

	if (pthread_create(&t, NULL, native_main, &j) != 0)
		return 0;
	pthread_join(t, NULL);
	return j.tid;
}
