/* SPDX-License-Identifier: MIT */
/*
 * fake-cuda.c - a stand-in for libcuda.so.1 with the device queries the
 * agent makes for its inventory: two H100-like devices with fixed UUIDs
 * 00112233-4455-6677-8899-aabbccddee0<i>. CUDA_VISIBLE_DEVICES (indices,
 * e.g. "1" or "1,0") picks and orders them as the real driver does, so a
 * process's "device 0" can be physical GPU 1. FAKE_CUDA_MIG=1 puts them in
 * MIG mode: cuDeviceGetUuid_v2 then names the MIG instance (first byte
 * 0xee), cuDeviceGetUuid still the GPU.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>

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

EXPORT CUresult cuDriverGetVersion(int *v)
{
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
