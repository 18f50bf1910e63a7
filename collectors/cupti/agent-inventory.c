/* SPDX-License-Identifier: MIT */
/*
 * agent-inventory.c - the agent's devices and driver: the inventory sent in
 * HELLO and DEVICE frames, and the device memory in use as a capture opens
 * (MEM_STATE). Agent thread, after cuInit.
 *
 * Driver calls use the libcuda the process has already loaded, found with
 * dlopen(RTLD_NOLOAD); the calls MEM_STATE needs are kept in g.mem.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/macro.h"

#include "agent-int.h"

typedef CUresult (*fn_int)(int *);
typedef CUresult (*fn_attr)(int *, CUdevice_attribute, CUdevice);
typedef CUresult (*fn_name)(char *, int, CUdevice);
typedef CUresult (*fn_uuid)(CUuuid *, CUdevice);
typedef CUresult (*fn_mem)(size_t *, CUdevice);
typedef int (*fn_rt_ver)(int *);

static int attr(fn_attr f, CUdevice d, CUdevice_attribute a)
{
	int v = 0;

	return f(&v, a, d) == CUDA_SUCCESS && v > 0 ? v : 0;
}

/* cudaRuntimeGetVersion of the runtime the job loaded. Frameworks load
 * libcudart with RTLD_LOCAL (Python extensions), where RTLD_DEFAULT does
 * not see it: ask for the loaded copy by name too (RTLD_NOLOAD never loads
 * one the job does not use). */
static fn_rt_ver find_runtime_version(void)
{
	static const char *const names[] = { "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0" };
	fn_rt_ver f = NULL;

	SYM(RTLD_DEFAULT, "cudaRuntimeGetVersion", f);
	for (size_t i = 0; !f && i < ARRAY_SIZE(names); i++) {
		void *h = dlopen(names[i], RTLD_NOW | RTLD_NOLOAD);

		if (h) {
			SYM(h, "cudaRuntimeGetVersion", f);
			dlclose(h); /* drops only the reference NOLOAD took */
		}
	}
	return f;
}

/* "GPU-xxxxxxxx-xxxx-..." for a GPU, "MIG-..." for a MIG instance, as
 * NVML and nvidia-smi name them. */
static void format_uuid(char *out, size_t size, const char *prefix, const CUuuid *u)
{
	const unsigned char *b = (const unsigned char *)u->bytes;

	snprintf(out, size, "%s-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", prefix,
		 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
		 b[15]);
}

void agent_take_inventory(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	fn_int drv_ver = NULL, count = NULL;
	fn_dev_get get = NULL;
	fn_attr ga = NULL;
	fn_name gname = NULL;
	fn_uuid guuid = NULL, guuid_v1 = NULL;
	fn_mem gmem = NULL;
	fn_rt_ver rt;
	int n = 0;

	if (!h)
		h = dlopen("libcuda.so.1", RTLD_NOW);
	if (!h)
		return;
	SYM(h, "cuDriverGetVersion", drv_ver);
	g.canary_call = drv_ver;
	SYM(h, "cuDeviceGetCount", count);
	SYM(h, "cuDeviceGet", get);
	SYM(h, "cuDeviceGetAttribute", ga);
	SYM(h, "cuDeviceGetName", gname);
	SYM(h, "cuDeviceGetUuid_v2", guuid);
	SYM(h, "cuDeviceGetUuid", guuid_v1);
	SYM(h, "cuDeviceTotalMem_v2", gmem);
	g.mem.get = get;
	SYM(h, "cuDevicePrimaryCtxGetState", g.mem.state);
	SYM(h, "cuDevicePrimaryCtxRetain", g.mem.retain);
	SYM(h, "cuDevicePrimaryCtxRelease_v2", g.mem.release);
	SYM(h, "cuCtxPushCurrent_v2", g.mem.push);
	SYM(h, "cuCtxPopCurrent_v2", g.mem.pop);
	SYM(h, "cuMemGetInfo_v2", g.mem.info);
	if (!drv_ver || !count || !get || !ga || !gname || !guuid || !gmem)
		return;
	/* cuInit may still be running on the app thread: retry briefly. */
	for (int i = 0; i < 50 && count(&n) != CUDA_SUCCESS; i++)
		usleep(100000);
	if (drv_ver((int *)&g.driver_version) != CUDA_SUCCESS)
		g.driver_version = 0;
	rt = find_runtime_version();
	if (rt && rt((int *)&g.runtime_version) != 0)
		g.runtime_version = 0;
	if (n > (int)AGENT_MAX_DEVICES)
		n = AGENT_MAX_DEVICES;
	for (int i = 0; i < n; i++) {
		struct agent_device *d = &g.devs[g.n_devs];
		CUdevice dev;
		CUuuid u, parent;
		size_t mem = 0;
		int dom, bus, slot;

		if (get(&dev, i) != CUDA_SUCCESS)
			continue;
		memset(d, 0, sizeof(*d));
		d->local_ordinal = (uint32_t)i;
		/* _v2 gives a MIG instance's own UUID; the old call its GPU's. */
		if (guuid(&u, dev) == CUDA_SUCCESS) {
			bool mig = guuid_v1 && guuid_v1(&parent, dev) == CUDA_SUCCESS &&
				   memcmp(parent.bytes, u.bytes, sizeof(u.bytes)) != 0;

			format_uuid(d->uuid, sizeof(d->uuid), mig ? "MIG" : "GPU", &u);
		}
		gname(d->name, sizeof(d->name), dev);
		dom = attr(ga, dev, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID);
		bus = attr(ga, dev, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID);
		slot = attr(ga, dev, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID);
		snprintf(d->pci_bus_id, sizeof(d->pci_bus_id), "%08x:%02x:%02x.0", (unsigned)dom,
			 (unsigned)bus, (unsigned)slot);
		d->cc_major = (uint32_t)attr(ga, dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
		d->cc_minor = (uint32_t)attr(ga, dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
		d->sm_count = (uint32_t)attr(ga, dev, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
		d->sm_clock_khz = (uint32_t)attr(ga, dev, CU_DEVICE_ATTRIBUTE_CLOCK_RATE);
		d->mem_clock_khz = (uint32_t)attr(ga, dev, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE);
		d->bus_width_bits = (uint32_t)attr(ga, dev, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH);
		d->warp_size = (uint32_t)attr(ga, dev, CU_DEVICE_ATTRIBUTE_WARP_SIZE);
		d->max_threads_per_block = (uint32_t)attr(ga, dev, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
		d->max_threads_per_sm = (uint32_t)attr(ga, dev, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
		d->max_blocks_per_sm = (uint32_t)attr(ga, dev, CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR);
		d->regs_per_block = (uint32_t)attr(ga, dev, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK);
		d->regs_per_sm = (uint32_t)attr(ga, dev, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR);
		d->smem_per_block = (uint32_t)attr(ga, dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
		d->smem_per_block_optin = (uint32_t)attr(ga, dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
		d->smem_per_sm = (uint32_t)attr(ga, dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
		d->reserved_smem_per_block = (uint32_t)attr(ga, dev, CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK);
		if (gmem(&mem, dev) == CUDA_SUCCESS)
			d->mem_bytes = mem;
		d->mem_bandwidth = agent_mem_bandwidth(d->mem_clock_khz, d->bus_width_bits);
		g.n_devs++;
	}
	g.inventory = true;
}

/*
 * MEM_STATE: device memory in use as a capture opens, so the memory
 * profile starts at the true level (docs/agent.md "Memory profile"). The
 * agent is idle between captures (no subscriber, no callbacks), so it has
 * not seen earlier allocations; it asks the driver instead: cuMemGetInfo in
 * the device's primary context, only when the job already made that
 * context active (retaining an inactive one would create a context, and
 * hundreds of MiB, in the job). That is the whole device's use, other
 * processes' included. Sent after CLOCK (start), before any kind is enabled,
 * so these driver calls never show up as the job's API records.
 */
void agent_send_mem_state(void)
{
	struct agent_rec_mem_state recs[AGENT_MAX_DEVICES];
	uint32_t n = 0;

	for (uint32_t i = 0; i < g.n_devs; i++) {
		struct agent_rec_mem_state *r = &recs[n++];
		size_t free_b = 0, total_b = 0;
		unsigned flags = 0;
		int active = 0;
		CUcontext ctx = NULL, popped = NULL;
		CUdevice dev;
		uint64_t ts = 0;

		memset(r, 0, sizeof(*r));
		r->h.type = AGENT_REC_MEM_STATE;
		r->h.size = sizeof(*r);
		r->device = g.devs[i].local_ordinal;
		r->source = AGENT_MEMSTATE_UNKNOWN;
		if (g.C.cuptiGetTimestamp(&ts) != CUPTI_SUCCESS)
			ts = 0;
		r->ts = ts;
		if (!g.mem.get || !g.mem.state || !g.mem.retain || !g.mem.release || !g.mem.push ||
		    !g.mem.pop || !g.mem.info || g.mem.get(&dev, (int)r->device) != CUDA_SUCCESS ||
		    g.mem.state(dev, &flags, &active) != CUDA_SUCCESS || !active ||
		    g.mem.retain(&ctx, dev) != CUDA_SUCCESS)
			continue;
		if (g.mem.push(ctx) == CUDA_SUCCESS) {
			if (g.mem.info(&free_b, &total_b) == CUDA_SUCCESS && free_b <= total_b) {
				r->used_bytes = total_b - free_b;
				r->total_bytes = total_b;
				r->source = AGENT_MEMSTATE_DEVICE;
			}
			g.mem.pop(&popped);
		}
		g.mem.release(dev);
	}
	if (n)
		agent_client_send(&g.cl, AGENT_FRAME_RECORDS, recs, (uint32_t)(n * sizeof(recs[0])));
}
