/* SPDX-License-Identifier: MIT */
/*
 * test-convert.c - the CUPTI -> compact record converter, fed with
 * synthetic CUpti_Activity* structs (no GPU, no CUPTI calls).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "convert.h"
#include "harness.h"

struct sink {
	uint8_t data[1 << 20];
	size_t len;
	unsigned frames;
	int fail_next;
};

static int emit(void *ud, const void *p, size_t len)
{
	struct sink *s = ud;

	if (s->fail_next) {
		s->fail_next--;
		return -EAGAIN;
	}
	ASSERT_TRUE(s->len + len <= sizeof(s->data));
	memcpy(s->data + s->len, p, len);
	s->len += len;
	s->frames++;
	return 0;
}

static const char *api_name(void *ud, uint32_t domain, uint32_t cbid)
{
	(void)ud;
	if (domain == AGENT_API_DRIVER && cbid == 307)
		return "cuLaunchKernel";
	if (domain == AGENT_API_DRIVER && cbid == 279)
		return "cuMemcpyDtoHAsync_v2";
	if (domain == AGENT_API_DRIVER && cbid == 140)
		return "cuCtxGetCurrent";
	if (domain == AGENT_API_RUNTIME && cbid == 211)
		return "cudaLaunchKernel_v7000";
	if (domain == AGENT_API_DRIVER && cbid == CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch)
		return "cuGraphLaunch";
	if (domain == AGENT_API_RUNTIME && cbid == CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000)
		return "cudaGraphLaunch_ptsz_v10000";
	return NULL;
}

static const struct agent_device dev = {
	.cc_major = 9, .warp_size = 32, .max_threads_per_block = 1024, .max_threads_per_sm = 2048,
	.max_blocks_per_sm = 32, .regs_per_block = 65536, .regs_per_sm = 65536,
	.smem_per_block = 49152, .smem_per_block_optin = 232448, .smem_per_sm = 233472,
	.reserved_smem_per_block = 1024,
};

static struct sink sink;
static struct agent_conv cv;

static void setup(void)
{
	memset(&sink, 0, sizeof(sink));
	agent_conv_init(&cv, emit, api_name, &sink);
	cv.devs = &dev;
	cv.n_devs = 1;
}

/* Walk the records in the sink; returns the @n-th record of @type. */
static const struct agent_rec *find(uint16_t type, unsigned n)
{
	for (size_t off = 0; off < sink.len;) {
		const struct agent_rec *h = (const void *)(sink.data + off);

		ASSERT_TRUE(h->size >= sizeof(*h) && h->size % 8 == 0 && off + h->size <= sink.len);
		if (h->type == type && n-- == 0)
			return h;
		off += h->size;
	}
	return NULL;
}

static unsigned count(uint16_t type)
{
	unsigned n = 0;

	while (find(type, n))
		n++;
	return n;
}

static const char *string(uint32_t id)
{
	static char out[256];

	for (unsigned i = 0; find(AGENT_REC_STRING, i); i++) {
		const struct agent_rec_string *s = (const void *)find(AGENT_REC_STRING, i);

		if (s->id == id) {
			memcpy(out, s + 1, s->h.aux);
			out[s->h.aux] = 0;
			return out;
		}
	}
	return NULL;
}

static CUpti_ActivityKernel10 kernel(uint32_t corr)
{
	CUpti_ActivityKernel10 k;

	memset(&k, 0, sizeof(k));
	k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
	k.start = 1000000;
	k.end = 1005000;
	k.deviceId = 0;
	k.contextId = 1;
	k.streamId = 7;
	k.correlationId = corr;
	k.gridX = 128;
	k.gridY = k.gridZ = 1;
	k.blockX = 128;
	k.blockY = k.blockZ = 1;
	k.registersPerThread = 64;
	k.dynamicSharedMemory = 16384;
	k.staticSharedMemory = 0;
	k.name = "_Z4gemmPf";
	return k;
}

TEST(convert_kernel_with_name_and_occupancy)
{
	CUpti_ActivityKernel10 k = kernel(42);
	const struct agent_rec_kernel *r;

	setup();
	ASSERT_EQ(agent_conv_record(&cv, (CUpti_Activity *)&k), 1);
	ASSERT_OK(agent_conv_flush(&cv));
	ASSERT_EQ(count(AGENT_REC_STRING), 1);
	r = (const void *)find(AGENT_REC_KERNEL, 0);
	ASSERT_TRUE(r);
	ASSERT_TRUE((const uint8_t *)find(AGENT_REC_STRING, 0) < (const uint8_t *)r);
	ASSERT_STREQ(string(r->name_id), "_Z4gemmPf");
	ASSERT_U64_EQ(r->start, 1000000);
	ASSERT_U64_EQ(r->end, 1005000);
	ASSERT_EQ(r->correlation, 42);
	ASSERT_EQ(r->stream, 7);
	ASSERT_EQ(r->context, 1);
	ASSERT_EQ(r->regs, 64);
	ASSERT_EQ(r->dynamic_smem, 16384);
	ASSERT_EQ(r->grid[0], 128);
	ASSERT_EQ(r->block[0], 128);
	ASSERT_EQ(r->occ_pct_e4, 500000); /* 8 blocks x 4 warps / 64 */
	agent_conv_free(&cv);
}

TEST(convert_interns_each_name_once)
{
	setup();
	for (uint32_t i = 0; i < 100; i++) {
		CUpti_ActivityKernel10 k = kernel(i);
		char name[32];

		snprintf(name, sizeof(name), "kernel_%u", i % 3);
		k.name = name; /* a new pointer each time: interned by content */
		ASSERT_EQ(agent_conv_record(&cv, (CUpti_Activity *)&k), 1);
	}
	agent_conv_flush(&cv);
	ASSERT_EQ(count(AGENT_REC_STRING), 3);
	ASSERT_EQ(count(AGENT_REC_KERNEL), 100);
	agent_conv_free(&cv);
}

TEST(convert_skips_incomplete_and_unknown)
{
	CUpti_ActivityKernel10 k = kernel(1);
	CUpti_ActivityAPI a;

	setup();
	k.start = 0; /* still running at a forced flush */
	ASSERT_EQ(agent_conv_record(&cv, (CUpti_Activity *)&k), 0);
	memset(&a, 0, sizeof(a));
	a.kind = CUPTI_ACTIVITY_KIND_NAME;
	ASSERT_EQ(agent_conv_record(&cv, (CUpti_Activity *)&a), 0);
	agent_conv_flush(&cv);
	ASSERT_EQ(count(AGENT_REC_KERNEL), 0);
	ASSERT_U64_EQ(cv.unknown, 1);
	ASSERT_U64_EQ(cv.skipped, 1);
	agent_conv_free(&cv);
}

TEST(convert_memcpy_kinds_and_peer)
{
	CUpti_ActivityMemcpy6 m;
	CUpti_ActivityMemcpyPtoP4 p;
	const struct agent_rec_memcpy *r;

	setup();
	memset(&m, 0, sizeof(m));
	m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
	m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
	m.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
	m.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
	m.flags = CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC;
	m.bytes = 4096;
	m.start = 10;
	m.end = 20;
	m.streamId = 3;
	m.correlationId = 9;
	ASSERT_EQ(agent_conv_record(&cv, (CUpti_Activity *)&m), 1);
	m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOA;
	m.flags = 0;
	ASSERT_EQ(agent_conv_record(&cv, (CUpti_Activity *)&m), 1);
	memset(&p, 0, sizeof(p));
	p.kind = CUPTI_ACTIVITY_KIND_MEMCPY2;
	p.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_PTOP;
	p.srcKind = p.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
	p.bytes = 1 << 20;
	p.start = 30;
	p.end = 40;
	p.deviceId = 0;
	p.srcDeviceId = 0;
	p.dstDeviceId = 1;
	ASSERT_EQ(agent_conv_record(&cv, (CUpti_Activity *)&p), 1);
	agent_conv_flush(&cv);
	r = (const void *)find(AGENT_REC_MEMCPY, 0);
	ASSERT_EQ(r->copy_kind, AGENT_COPY_D2H);
	ASSERT_EQ(r->src_kind, AGENT_MEM_DEVICE);
	ASSERT_EQ(r->dst_kind, AGENT_MEM_PINNED);
	ASSERT_EQ(r->async, 1);
	ASSERT_U64_EQ(r->bytes, 4096);
	ASSERT_EQ(r->correlation, 9);
	r = (const void *)find(AGENT_REC_MEMCPY, 1);
	ASSERT_EQ(r->copy_kind, AGENT_COPY_OTHER);
	ASSERT_EQ(r->async, 0);
	r = (const void *)find(AGENT_REC_MEMCPY, 2);
	ASSERT_EQ(r->copy_kind, AGENT_COPY_P2P);
	ASSERT_EQ(r->dst_device, 1);
	agent_conv_free(&cv);
}

TEST(convert_memset_and_memory)
{
	CUpti_ActivityMemset4 s;
	CUpti_ActivityMemory4 m;
	const struct agent_rec_memset *rs;
	const struct agent_rec_memory2 *rm;

	setup();
	memset(&s, 0, sizeof(s));
	s.kind = CUPTI_ACTIVITY_KIND_MEMSET;
	s.bytes = 256;
	s.start = 5;
	s.end = 6;
	s.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
	s.flags = CUPTI_ACTIVITY_FLAG_MEMSET_ASYNC;
	s.value = 0xff;
	ASSERT_EQ(agent_conv_record(&cv, (CUpti_Activity *)&s), 1);
	memset(&m, 0, sizeof(m));
	m.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
	m.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
	m.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
	m.bytes = 1 << 20;
	m.timestamp = 77;
	m.streamId = 4;
	m.isAsync = 0;
	ASSERT_EQ(agent_conv_record(&cv, (CUpti_Activity *)&m), 1);
	m.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
	m.isAsync = 1;
	/* A cudaFreeAsync: the pool it returns to goes along. */
	m.memoryPoolConfig.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL;
	m.memoryPoolConfig.address = 0x7e0000000000ull;
	m.memoryPoolConfig.pool.size = 1ull << 30;
	m.memoryPoolConfig.utilizedSize = 1ull << 21;
	ASSERT_EQ(agent_conv_record(&cv, (CUpti_Activity *)&m), 1);
	m.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_INVALID;
	ASSERT_EQ(agent_conv_record(&cv, (CUpti_Activity *)&m), 0);
	agent_conv_flush(&cv);
	rs = (const void *)find(AGENT_REC_MEMSET, 0);
	ASSERT_EQ(rs->async, 1);
	ASSERT_EQ(rs->mem_kind, AGENT_MEM_DEVICE);
	ASSERT_U64_EQ(rs->bytes, 256);
	ASSERT_EQ(rs->value, 0xff);
	rm = (const void *)find(AGENT_REC_MEMORY2, 0);
	ASSERT_EQ(rm->op, AGENT_MEMOP_ALLOC);
	ASSERT_U64_EQ(rm->stream, UINT32_MAX); /* not async: no stream */
	ASSERT_U64_EQ(rm->ts, 77);
	ASSERT_EQ(rm->pool_type, AGENT_POOL_NONE);
	ASSERT_U64_EQ(rm->pool_address, 0);
	rm = (const void *)find(AGENT_REC_MEMORY2, 1);
	ASSERT_EQ(rm->op, AGENT_MEMOP_FREE);
	ASSERT_EQ(rm->stream, 4);
	ASSERT_EQ(rm->pool_type, AGENT_POOL_LOCAL);
	ASSERT_U64_EQ(rm->pool_address, 0x7e0000000000ull);
	ASSERT_U64_EQ(rm->pool_size, 1ull << 30);
	ASSERT_U64_EQ(rm->pool_utilized, 1ull << 21);
	ASSERT_EQ(count(AGENT_REC_MEMORY2), 2);
	agent_conv_free(&cv);
}

TEST(convert_api_filter_and_names)
{
	CUpti_ActivityAPI a;
	const struct agent_rec_api *r;

	setup();
	memset(&a, 0, sizeof(a));
	a.kind = CUPTI_ACTIVITY_KIND_DRIVER;
	a.start = 100;
	a.end = 200;
	a.threadId = 1234;
	a.correlationId = 42;
	a.cbid = 307;
	ASSERT_EQ(agent_conv_record(&cv, (CUpti_Activity *)&a), 1);
	a.cbid = 140; /* cuCtxGetCurrent: noise */
	ASSERT_EQ(agent_conv_record(&cv, (CUpti_Activity *)&a), 0);
	a.cbid = 307;
	a.correlationId = 43;
	ASSERT_EQ(agent_conv_record(&cv, (CUpti_Activity *)&a), 1);
	a.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
	a.cbid = 211;
	ASSERT_EQ(agent_conv_record(&cv, (CUpti_Activity *)&a), 1);
	agent_conv_flush(&cv);
	ASSERT_EQ(count(AGENT_REC_API), 3);
	ASSERT_EQ(count(AGENT_REC_STRING), 2);
	r = (const void *)find(AGENT_REC_API, 0);
	ASSERT_STREQ(string(r->name_id), "cuLaunchKernel");
	ASSERT_EQ(r->tid, 1234);
	ASSERT_EQ(r->correlation, 42);
	ASSERT_EQ(r->domain, AGENT_API_DRIVER);
	r = (const void *)find(AGENT_REC_API, 2);
	ASSERT_STREQ(string(r->name_id), "cudaLaunchKernel_v7000");
	ASSERT_EQ(r->domain, AGENT_API_RUNTIME);
	ASSERT_TRUE(agent_conv_api_wanted("cuMemsetD32Async"));
	ASSERT_TRUE(agent_conv_api_wanted("cudaDeviceSynchronize_v3020"));
	ASSERT_TRUE(!agent_conv_api_wanted("cuDevicePrimaryCtxGetState"));
	ASSERT_TRUE(!agent_conv_api_wanted(NULL));
	agent_conv_free(&cv);
}

/* An overhead record of @kind on object @object (process @pid, thread
 * @tid), [1, 2] ns. */
static void overhead_at(CUpti_ActivityOverhead3 *o, CUpti_ActivityOverheadKind kind,
			CUpti_ActivityObjectKind object, uint32_t pid, uint32_t tid)
{
	memset(o, 0, sizeof(*o));
	o->kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
	o->overheadKind = kind;
	o->objectKind = object;
	o->objectId.pt.processId = pid;
	o->objectId.pt.threadId = tid;
	o->start = 1;
	o->end = 2;
}

TEST(convert_overhead_objects)
{
	CUpti_ActivityOverhead3 o;
	const struct agent_rec_overhead *r;

	setup();
	overhead_at(&o, CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH, CUPTI_ACTIVITY_OBJECT_THREAD, 1, 99);
	ASSERT_EQ(agent_conv_record(&cv, (CUpti_Activity *)&o), 1);
	o.objectKind = CUPTI_ACTIVITY_OBJECT_DEVICE;
	o.objectId.dcs.deviceId = 0;
	o.objectId.dcs.contextId = 5;
	o.objectId.dcs.streamId = 6;
	ASSERT_EQ(agent_conv_record(&cv, (CUpti_Activity *)&o), 1);
	agent_conv_flush(&cv);
	r = (const void *)find(AGENT_REC_OVERHEAD, 0);
	ASSERT_U64_EQ(r->object_id, 99);
	ASSERT_U64_EQ(r->device, UINT32_MAX);
	r = (const void *)find(AGENT_REC_OVERHEAD, 1);
	ASSERT_EQ(r->device, 0);
	ASSERT_U64_EQ(r->object_id, (5ull << 32) | 6);
	agent_conv_free(&cv);
}

/* CUDA 12's CUPTI writes older struct versions (Kernel9, Memcpy5, Memory3,
 * Overhead2): the fields the converter reads sit at the same offsets, so a
 * record built from the 12.x definitions (cupti_activity_deprecated.h)
 * converts exactly as its 13.0 twin. Each is allocated at its own size:
 * ASan catches a read past a shorter struct. */
TEST(convert_cuda_12_record_layouts)
{
	CUpti_ActivityKernel10 k13 = kernel(5);
	CUpti_ActivityKernel9 *k12 = calloc(1, sizeof(*k12));
	CUpti_ActivityMemcpy5 *m12 = calloc(1, sizeof(*m12));
	CUpti_ActivityMemory3 *a12 = calloc(1, sizeof(*a12));
	CUpti_ActivityOverhead2 *o12 = calloc(1, sizeof(*o12));
	const struct agent_rec_kernel *r13, *r12;
	const struct agent_rec_memcpy *mr;
	const struct agent_rec_memory2 *ar;
	const struct agent_rec_overhead *orr;

	ASSERT_TRUE(k12 && m12 && a12 && o12);
	setup();
	k12->kind = k13.kind;
	k12->start = k13.start;
	k12->end = k13.end;
	k12->deviceId = k13.deviceId;
	k12->contextId = k13.contextId;
	k12->streamId = k13.streamId;
	k12->correlationId = k13.correlationId;
	k12->gridX = k13.gridX;
	k12->gridY = k13.gridY;
	k12->gridZ = k13.gridZ;
	k12->blockX = k13.blockX;
	k12->blockY = k13.blockY;
	k12->blockZ = k13.blockZ;
	k12->registersPerThread = k13.registersPerThread;
	k12->dynamicSharedMemory = k13.dynamicSharedMemory;
	k12->name = k13.name;
	m12->kind = CUPTI_ACTIVITY_KIND_MEMCPY;
	m12->copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
	m12->srcKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
	m12->dstKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
	m12->bytes = 4096;
	m12->start = 10;
	m12->end = 30;
	m12->streamId = 8;
	m12->correlationId = 6;
	a12->kind = CUPTI_ACTIVITY_KIND_MEMORY2;
	a12->memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
	a12->memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
	a12->bytes = 1 << 20;
	a12->timestamp = 40;
	a12->isAsync = 1;
	a12->streamId = 9;
	a12->correlationId = 7;
	o12->kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
	o12->objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
	o12->objectId.pt.threadId = 31;
	o12->start = 50;
	o12->end = 60;
	ASSERT_EQ(agent_conv_record(&cv, (CUpti_Activity *)&k13), 1);
	ASSERT_EQ(agent_conv_record(&cv, (CUpti_Activity *)k12), 1);
	ASSERT_EQ(agent_conv_record(&cv, (CUpti_Activity *)m12), 1);
	ASSERT_EQ(agent_conv_record(&cv, (CUpti_Activity *)a12), 1);
	ASSERT_EQ(agent_conv_record(&cv, (CUpti_Activity *)o12), 1);
	ASSERT_OK(agent_conv_flush(&cv));
	r13 = (const void *)find(AGENT_REC_KERNEL, 0);
	r12 = (const void *)find(AGENT_REC_KERNEL, 1);
	ASSERT_TRUE(r13 && r12);
	ASSERT_TRUE(memcmp(r12, r13, sizeof(*r12)) == 0);
	mr = (const void *)find(AGENT_REC_MEMCPY, 0);
	ASSERT_EQ(mr->copy_kind, AGENT_COPY_D2H);
	ASSERT_EQ(mr->dst_kind, AGENT_MEM_PINNED);
	ASSERT_U64_EQ(mr->bytes, 4096);
	ASSERT_EQ(mr->stream, 8);
	ASSERT_EQ(mr->correlation, 6);
	ar = (const void *)find(AGENT_REC_MEMORY2, 0);
	ASSERT_EQ(ar->op, AGENT_MEMOP_ALLOC);
	ASSERT_U64_EQ(ar->ts, 40);
	ASSERT_EQ(ar->stream, 9);
	orr = (const void *)find(AGENT_REC_OVERHEAD, 0);
	ASSERT_U64_EQ(orr->object_id, 31);
	ASSERT_U64_EQ(orr->end, 60);
	free(k12);
	free(m12);
	free(a12);
	free(o12);
	agent_conv_free(&cv);
}

/* A process-level overhead names the process, not a thread. */
TEST(convert_overhead_of_a_process_is_its_pid)
{
	CUpti_ActivityOverhead3 o;
	const struct agent_rec_overhead *r;

	setup();
	overhead_at(&o, CUPTI_ACTIVITY_OVERHEAD_CUPTI_RESOURCE, CUPTI_ACTIVITY_OBJECT_PROCESS, 4242, 77);
	ASSERT_EQ(agent_conv_record(&cv, (CUpti_Activity *)&o), 1);
	agent_conv_flush(&cv);
	r = (const void *)find(AGENT_REC_OVERHEAD, 0);
	ASSERT_U64_EQ(r->object_id, 4242);
	ASSERT_EQ(r->object_kind, CUPTI_ACTIVITY_OBJECT_PROCESS);
	agent_conv_free(&cv);
}

/* Launches CUDA makes itself become host calls the kernels link to;
 * legacy device-launched kernel records are known kinds, not "unknown";
 * graph kernels are counted (the CUPTI 13.0 graph-correlation notice). */
TEST(convert_internal_launches_cdp_and_graphs)
{
	CUpti_ActivityAPI a;
	CUpti_ActivityKernel10 k = kernel(9);
	CUpti_ActivityCdpKernel cdp;
	const struct agent_rec_api *r;

	setup();
	memset(&a, 0, sizeof(a));
	a.kind = CUPTI_ACTIVITY_KIND_INTERNAL_LAUNCH_API;
	a.cbid = 12345; /* no domain of ours names it */
	a.start = 10;
	a.end = 20;
	a.threadId = 7;
	a.correlationId = 9;
	ASSERT_EQ(agent_conv_record(&cv, (CUpti_Activity *)&a), 1);
	memset(&cdp, 0, sizeof(cdp));
	cdp.kind = CUPTI_ACTIVITY_KIND_CDP_KERNEL;
	ASSERT_EQ(agent_conv_record(&cv, (CUpti_Activity *)&cdp), 0);
	k.graphId = 3;
	ASSERT_EQ(agent_conv_record(&cv, (CUpti_Activity *)&k), 1);
	agent_conv_flush(&cv);
	ASSERT_U64_EQ(cv.unknown, 0);
	ASSERT_U64_EQ(cv.graph_kernels, 1);
	r = (const void *)find(AGENT_REC_API, 0);
	ASSERT_EQ(r->correlation, 9);
	ASSERT_EQ(r->cbid, 0);
	ASSERT_STREQ(string(r->name_id), "CUDA internal launch");
	agent_conv_free(&cv);
}

/* The agent's lookup: exec id 40 + correlation for the launches it saw
 * (correlations below 100), nothing for others. */
static unsigned graph_lookups;

static void graph_launch(void *ud, uint32_t correlation, uint32_t *graph_id, uint32_t *exec_id)
{
	(void)ud;
	graph_lookups++;
	*graph_id = 0;
	*exec_id = correlation < 100 ? 40 + correlation : 0;
}

TEST(convert_graph_node_ids_launch_ids_and_graph_trace)
{
	CUpti_ActivityKernel10 k = kernel(5);
	CUpti_ActivityMemcpy6 m;
	CUpti_ActivityMemset4 ms;
	CUpti_ActivityAPI a;
	CUpti_ActivityGraphTrace2 t;
	const struct agent_rec_kernel *rk;
	const struct agent_rec_memcpy *rm;
	const struct agent_rec_memset *rs;
	const struct agent_rec_api *ra;
	const struct agent_rec_graph *rg;

	setup();
	cv.graph_launch = graph_launch;
	graph_lookups = 0;
	/* Node records: CUPTI's graphId and graphNodeId, as they are. */
	k.graphId = 45;
	k.graphNodeId = 0x2d00000003ull;
	ASSERT_EQ(agent_conv_record(&cv, (CUpti_Activity *)&k), 1);
	memset(&m, 0, sizeof(m));
	m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
	m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOD;
	m.start = 10;
	m.end = 20;
	m.correlationId = 5;
	m.graphId = 45;
	m.graphNodeId = 0x2d00000004ull;
	ASSERT_EQ(agent_conv_record(&cv, (CUpti_Activity *)&m), 1);
	memset(&ms, 0, sizeof(ms));
	ms.kind = CUPTI_ACTIVITY_KIND_MEMSET;
	ms.start = 20;
	ms.end = 30;
	ms.correlationId = 5;
	ms.graphId = 45;
	ms.graphNodeId = 0x2d00000005ull;
	ASSERT_EQ(agent_conv_record(&cv, (CUpti_Activity *)&ms), 1);
	/* Launch calls: the exec id from the agent's lookup, by correlation
	 * id; other calls never ask. */
	memset(&a, 0, sizeof(a));
	a.kind = CUPTI_ACTIVITY_KIND_DRIVER;
	a.cbid = CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch;
	a.start = 5;
	a.end = 9;
	a.correlationId = 5;
	ASSERT_EQ(agent_conv_record(&cv, (CUpti_Activity *)&a), 1);
	a.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
	a.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000;
	a.correlationId = 200; /* the agent did not see it: no ids */
	ASSERT_EQ(agent_conv_record(&cv, (CUpti_Activity *)&a), 1);
	a.kind = CUPTI_ACTIVITY_KIND_DRIVER;
	a.cbid = 307; /* cuLaunchKernel */
	a.correlationId = 6;
	ASSERT_EQ(agent_conv_record(&cv, (CUpti_Activity *)&a), 1);
	ASSERT_EQ(graph_lookups, 2);
	/* Graph-level records: one per launch; a graph that started on the
	 * host is drawn where it ended; untimed ones are skipped. */
	memset(&t, 0, sizeof(t));
	t.kind = CUPTI_ACTIVITY_KIND_GRAPH_TRACE;
	t.start = 100;
	t.end = 900;
	t.deviceId = t.endDeviceId = 0;
	t.contextId = t.endContextId = 1;
	t.streamId = 9;
	t.correlationId = 5;
	t.graphId = 45;
	ASSERT_EQ(agent_conv_record(&cv, (CUpti_Activity *)&t), 1);
	t.deviceId = t.contextId = INT32_MAX;
	t.endDeviceId = 1;
	t.endContextId = 2;
	ASSERT_EQ(agent_conv_record(&cv, (CUpti_Activity *)&t), 1);
	t.start = t.end = 0;
	ASSERT_EQ(agent_conv_record(&cv, (CUpti_Activity *)&t), 0);
	agent_conv_flush(&cv);
	ASSERT_U64_EQ(cv.unknown, 0);
	ASSERT_U64_EQ(cv.graph_kernels, 1);
	ASSERT_U64_EQ(cv.graph_launches, 2);

	rk = (const void *)find(AGENT_REC_KERNEL, 0);
	ASSERT_EQ(rk->graph_id, 45);
	ASSERT_U64_EQ(rk->graph_node_id, 0x2d00000003ull);
	rm = (const void *)find(AGENT_REC_MEMCPY, 0);
	ASSERT_EQ(rm->graph_id, 45);
	ASSERT_U64_EQ(rm->graph_node_id, 0x2d00000004ull);
	rs = (const void *)find(AGENT_REC_MEMSET, 0);
	ASSERT_EQ(rs->graph_id, 45);
	ASSERT_U64_EQ(rs->graph_node_id, 0x2d00000005ull);
	ASSERT_EQ(rs->h.size, sizeof(*rs));
	ra = (const void *)find(AGENT_REC_API, 0);
	ASSERT_STREQ(string(ra->name_id), "cuGraphLaunch");
	ASSERT_EQ(ra->graph_exec_id, 45);
	ASSERT_EQ(ra->graph_id, 0);
	ra = (const void *)find(AGENT_REC_API, 1);
	ASSERT_STREQ(string(ra->name_id), "cudaGraphLaunch_ptsz_v10000");
	ASSERT_EQ(ra->graph_exec_id, 0);
	ra = (const void *)find(AGENT_REC_API, 2);
	ASSERT_EQ(ra->graph_exec_id, 0);
	rg = (const void *)find(AGENT_REC_GRAPH, 0);
	ASSERT_EQ(rg->h.size, sizeof(*rg));
	ASSERT_U64_EQ(rg->start, 100);
	ASSERT_U64_EQ(rg->end, 900);
	ASSERT_EQ(rg->device, 0);
	ASSERT_EQ(rg->context, 1);
	ASSERT_EQ(rg->stream, 9);
	ASSERT_EQ(rg->correlation, 5);
	ASSERT_EQ(rg->graph_id, 45);
	rg = (const void *)find(AGENT_REC_GRAPH, 1);
	ASSERT_EQ(rg->device, 1);
	ASSERT_EQ(rg->context, 2);
	ASSERT_EQ(rg->end_device, 1);
	ASSERT_TRUE(find(AGENT_REC_GRAPH, 2) == NULL);
	/* CUPTI before 12.3: a 48-byte v1 record, whatever follows it in the
	 * buffer is not its end device. */
	{
		CUpti_ActivityGraphTrace2 v1; /* only its first 48 bytes are the record */

		ASSERT_EQ(offsetof(CUpti_ActivityGraphTrace2, endDeviceId), 48);
		memset(&v1, 0xee, sizeof(v1)); /* the next record's bytes */
		memset(&v1, 0, offsetof(CUpti_ActivityGraphTrace2, endDeviceId));
		v1.kind = CUPTI_ACTIVITY_KIND_GRAPH_TRACE;
		v1.start = 1000;
		v1.end = 2000;
		v1.deviceId = 1;
		v1.contextId = 3;
		v1.correlationId = 7;
		cv.graph_trace_v1 = true;
		ASSERT_EQ(agent_conv_record(&cv, (CUpti_Activity *)&v1), 1);
		cv.graph_trace_v1 = false;
		agent_conv_flush(&cv);
		rg = (const void *)find(AGENT_REC_GRAPH, 2);
		ASSERT_TRUE(rg != NULL);
		ASSERT_EQ(rg->device, 1);
		ASSERT_EQ(rg->context, 3);
		ASSERT_EQ(rg->end_device, 1);
	}
	ASSERT_TRUE(agent_conv_is_graph_launch(AGENT_API_DRIVER, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz));
	ASSERT_TRUE(agent_conv_is_graph_launch(AGENT_API_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000));
	ASSERT_TRUE(!agent_conv_is_graph_launch(AGENT_API_RUNTIME, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch));
	ASSERT_TRUE(!agent_conv_is_graph_launch(AGENT_API_DRIVER, 307));
	agent_conv_free(&cv);
}

TEST(convert_splits_frames_without_splitting_records)
{
	setup();
	cv.frame_max = 1000;
	for (uint32_t i = 0; i < 200; i++) {
		CUpti_ActivityKernel10 k = kernel(i);

		ASSERT_EQ(agent_conv_record(&cv, (CUpti_Activity *)&k), 1);
	}
	agent_conv_flush(&cv);
	ASSERT_TRUE(sink.frames > 10);
	ASSERT_EQ(count(AGENT_REC_KERNEL), 200); /* find() checks every size */
	agent_conv_free(&cv);
}

TEST(convert_redefines_names_after_a_dropped_batch)
{
	CUpti_ActivityKernel10 k = kernel(1);
	const struct agent_rec_kernel *r;

	setup();
	ASSERT_EQ(agent_conv_record(&cv, (CUpti_Activity *)&k), 1);
	sink.fail_next = 1;
	ASSERT_TRUE(agent_conv_flush(&cv) < 0); /* STRING + kernel lost */
	ASSERT_U64_EQ(cv.emit_failed, 1);
	k.correlationId = 2;
	ASSERT_EQ(agent_conv_record(&cv, (CUpti_Activity *)&k), 1);
	agent_conv_flush(&cv);
	ASSERT_EQ(count(AGENT_REC_STRING), 1);
	r = (const void *)find(AGENT_REC_KERNEL, 0);
	ASSERT_EQ(r->correlation, 2);
	ASSERT_STREQ(string(r->name_id), "_Z4gemmPf");
	agent_conv_free(&cv);
}

/* A stand-in demangler: "_Z4gemmPf" -> "gemm(float*)"; counts its calls. */
static unsigned demangle_calls;
static size_t demangle_out_len; /* > 0: answer with this many 'x' */

static char *demangle(void *ud, const char *mangled)
{
	char *d;

	(void)ud;
	demangle_calls++;
	if (demangle_out_len) {
		d = malloc(demangle_out_len + 1);
		memset(d, 'x', demangle_out_len);
		d[demangle_out_len] = 0;
		return d;
	}
	return strcmp(mangled, "_Z4gemmPf") == 0 ? strdup("gemm(float*)") : NULL;
}

static const struct agent_rec_string *string_rec(uint32_t id)
{
	const struct agent_rec_string *s;

	for (unsigned i = 0; (s = (const void *)find(AGENT_REC_STRING, i)); i++)
		if (s->id == id)
			return s;
	return NULL;
}

TEST(convert_demangles_kernel_names_once)
{
	setup();
	cv.demangle = demangle;
	demangle_calls = 0;
	demangle_out_len = 0;
	for (uint32_t i = 0; i < 10; i++) {
		CUpti_ActivityKernel10 k = kernel(i);

		/* "_Z4gemmPf" demangles; "_Z3badv" gets NULL; "plain" is not mangled */
		k.name = i % 3 == 0 ? "_Z4gemmPf" : i % 3 == 1 ? "_Z3badv" : "plain";
		ASSERT_EQ(agent_conv_record(&cv, (CUpti_Activity *)&k), 1);
	}
	agent_conv_flush(&cv);
	ASSERT_EQ(count(AGENT_REC_STRING), 3);
	ASSERT_EQ(demangle_calls, 2); /* once per distinct mangled name */
	ASSERT_STREQ(string(((const struct agent_rec_kernel *)find(AGENT_REC_KERNEL, 0))->name_id),
		     "gemm(float*)");
	ASSERT_STREQ(string(((const struct agent_rec_kernel *)find(AGENT_REC_KERNEL, 1))->name_id),
		     "_Z3badv");
	ASSERT_STREQ(string(((const struct agent_rec_kernel *)find(AGENT_REC_KERNEL, 2))->name_id),
		     "plain");
	agent_conv_free(&cv);
}

TEST(convert_cuts_long_names_but_keeps_them_apart)
{
	static char a[AGENT_MAX_STRING_LEN + 64], b[AGENT_MAX_STRING_LEN + 64];
	const struct agent_rec_kernel *ka, *kb;
	const struct agent_rec_string *sa, *sb;
	CUpti_ActivityKernel10 k = kernel(1);

	setup();
	cv.demangle = demangle;
	demangle_calls = 0;
	demangle_out_len = AGENT_MAX_STRING_LEN + 100; /* longer than a STRING may be */
	k.name = "_Z4longv";
	ASSERT_EQ(agent_conv_record(&cv, (CUpti_Activity *)&k), 1);
	/* two unmangled names sharing their first AGENT_MAX_STRING_LEN bytes */
	memset(a, 'k', sizeof(a) - 1);
	memcpy(b, a, sizeof(b));
	b[sizeof(b) - 2] = 'z';
	k.name = a;
	ASSERT_EQ(agent_conv_record(&cv, (CUpti_Activity *)&k), 1);
	k.name = b;
	ASSERT_EQ(agent_conv_record(&cv, (CUpti_Activity *)&k), 1);
	k.name = a; /* seen before: no new STRING */
	ASSERT_EQ(agent_conv_record(&cv, (CUpti_Activity *)&k), 1);
	agent_conv_flush(&cv);
	ASSERT_EQ(count(AGENT_REC_STRING), 3);
	sa = string_rec(((const struct agent_rec_kernel *)find(AGENT_REC_KERNEL, 0))->name_id);
	ASSERT_EQ(sa->h.aux, AGENT_MAX_STRING_LEN);
	ASSERT_TRUE(memcmp((const char *)(sa + 1) + AGENT_MAX_STRING_LEN - 3, "...", 3) == 0);
	ka = (const void *)find(AGENT_REC_KERNEL, 1);
	kb = (const void *)find(AGENT_REC_KERNEL, 2);
	ASSERT_TRUE(ka->name_id != kb->name_id);
	sb = string_rec(kb->name_id);
	ASSERT_EQ(sb->h.aux, AGENT_MAX_STRING_LEN);
	ASSERT_EQ(((const struct agent_rec_kernel *)find(AGENT_REC_KERNEL, 3))->name_id, ka->name_id);
	demangle_out_len = 0;
	agent_conv_free(&cv);
}

TEST_MAIN()
