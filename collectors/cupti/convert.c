/* SPDX-License-Identifier: MIT */
/*
 * convert.c - CUPTI activity records -> compact records; see convert.h.
 *
 * Struct versions are those of the CUDA 13.0 headers: CUpti_ActivityKernel10,
 * Memcpy6, MemcpyPtoP4, Memset4, Memory4 (-> MEMORY2), Overhead3, ActivityAPI
 * and GraphTrace2.
 * Kernel names are copied into our own intern table at once: CUPTI's
 * pointers may not outlive a module unload.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "base/macro.h"
#include "convert.h"
#include "occupancy.h"

void agent_conv_init(struct agent_conv *cv, agent_conv_emit_cb emit, agent_conv_api_name_cb api_name,
		     void *ud)
{
	memset(cv, 0, sizeof(*cv));
	cv->emit = emit;
	cv->api_name = api_name;
	cv->ud = ud;
	cv->frame_max = AGENT_FRAME_MAX;
	cv->next_id = 1;
}

void agent_conv_reset(struct agent_conv *cv)
{
	for (uint32_t i = 0; i < cv->names_cap; i++)
		free(cv->names[i].s);
	free(cv->names);
	cv->names = NULL;
	cv->n_names = cv->names_cap = 0;
	cv->next_id = 1;
	cv->len = 0;
	memset(cv->api_name_id, 0, sizeof(cv->api_name_id));
}

void agent_conv_free(struct agent_conv *cv)
{
	agent_conv_reset(cv);
	free(cv->out);
	cv->out = NULL;
	cv->cap = 0;
}

int agent_conv_flush(struct agent_conv *cv)
{
	int r = 0;

	if (cv->len && cv->emit) {
		r = cv->emit(cv->ud, cv->out, cv->len);
		if (r < 0) {
			/* The batch may have defined names: define them again later. */
			cv->emit_failed++;
			cv->names_lost = true;
		}
	}
	cv->len = 0;
	return r;
}

/* Room for @n more bytes in the batch; flushes first when the frame is full. */
static void *reserve(struct agent_conv *cv, size_t n)
{
	size_t max = cv->frame_max ? cv->frame_max : AGENT_FRAME_MAX;
	void *p;

	if (cv->len + n > max)
		agent_conv_flush(cv);
	if (cv->len + n > cv->cap) {
		size_t cap = cv->cap ? cv->cap : 64u << 10;
		uint8_t *o;

		while (cap < cv->len + n)
			cap *= 2;
		o = realloc(cv->out, cap);
		if (!o)
			return NULL;
		cv->out = o;
		cv->cap = cap;
	}
	p = cv->out + cv->len;
	memset(p, 0, n);
	cv->len += n;
	return p;
}


/* The text a kernel name is shown as: the owner's demangler's output when
 * it gives one, cut to the string limit (a readable prefix beats a mangled
 * name), else NULL (the name as CUPTI gave it). Caller frees. */
static char *display_name(struct agent_conv *cv, const char *mangled)
{
	char *d;

	if (!cv->demangle || strncmp(mangled, "_Z", 2) != 0 ||
	    strnlen(mangled, AGENT_MAX_STRING_LEN + 1) > AGENT_MAX_STRING_LEN)
		return NULL;
	d = cv->demangle(cv->ud, mangled);
	if (d && strlen(d) > AGENT_MAX_STRING_LEN) {
		/* Cut on a byte below 0x80 so the prefix stays valid UTF-8. */
		size_t n = AGENT_MAX_STRING_LEN - 3;

		while (n > 0 && (unsigned char)d[n] >= 0x80)
			n--;
		memcpy(d + n, "...", 4);
	}
	return d;
}

/* Define @s as a STRING record (once) and return its id; 0 on failure.
 * The table is keyed by @s as given; with @demangle the STRING record
 * carries display_name(@s), computed once per distinct name. */
static uint32_t intern(struct agent_conv *cv, const char *s, bool demangle)
{
	uint64_t h;
	uint32_t i, len;
	struct agent_rec_string *r;
	char *shown = NULL;
	const char *text;

	if (!s)
		return 0;
	if (cv->n_names * 2 >= cv->names_cap) {
		uint32_t cap = cv->names_cap ? cv->names_cap * 2 : 1024;
		struct agent_conv_name *v;

		if (cv->next_id >= AGENT_MAX_STRINGS)
			return 0;
		v = calloc(cap, sizeof(*v));
		if (!v)
			return 0;
		for (i = 0; i < cv->names_cap; i++) {
			uint32_t j;

			if (!cv->names[i].hash)
				continue;
			for (j = (uint32_t)cv->names[i].hash & (cap - 1); v[j].hash; j = (j + 1) & (cap - 1))
				;
			v[j] = cv->names[i];
		}
		free(cv->names);
		cv->names = v;
		cv->names_cap = cap;
	}
	h = hash_str64(s) | 1; /* 0 marks an empty slot */
	for (i = (uint32_t)h & (cv->names_cap - 1); cv->names[i].hash; i = (i + 1) & (cv->names_cap - 1))
		if (cv->names[i].hash == h && strcmp(cv->names[i].s, s) == 0)
			return cv->names[i].id;
	if (cv->next_id > AGENT_MAX_STRINGS)
		return 0;
	if (demangle)
		shown = display_name(cv, s);
	text = shown ? shown : s;
	len = (uint32_t)strnlen(text, AGENT_MAX_STRING_LEN);
	r = reserve(cv, sizeof(*r) + agent_rec_align(len));
	/* The key keeps the whole name: two long names sharing a prefix stay two. */
	if (r)
		cv->names[i].s = strdup(s);
	if (!r || !cv->names[i].s) {
		if (r)
			cv->len -= sizeof(*r) + agent_rec_align(len);
		free(shown);
		return 0;
	}
	cv->names[i].hash = h;
	cv->names[i].id = cv->next_id++;
	cv->n_names++;
	r->h.type = AGENT_REC_STRING;
	r->h.size = (uint16_t)(sizeof(*r) + agent_rec_align(len));
	r->h.aux = len;
	r->id = cv->names[i].id;
	memcpy(r + 1, text, len);
	free(shown);
	return r->id;
}

static void *rec(struct agent_conv *cv, uint16_t type, size_t size)
{
	struct agent_rec *h = reserve(cv, size);

	if (!h)
		return NULL;
	h->type = type;
	h->size = (uint16_t)size;
	return h;
}

uint32_t agent_conv_intern(struct agent_conv *cv, const char *s) { return intern(cv, s, false); }

void *agent_conv_rec(struct agent_conv *cv, uint16_t type, size_t size) { return rec(cv, type, size); }

bool agent_conv_api_wanted(const char *n)
{
	static const char *const keep[] = {
		"cuLaunch", "cuMemcpy", "cuMemset", "cuMemAlloc", "cuMemFree", "cuMemHostAlloc",
		"cuMemAllocHost", "cuMemFreeHost", "cuCtxSynchronize", "cuStreamSynchronize",
		"cuEventSynchronize", "cuStreamWaitEvent", "cuGraphLaunch",
		"cudaLaunch", "__cudaLaunch", "cudaMemcpy", "cudaMemset", "cudaMalloc", "cudaFree",
		"cudaHostAlloc", "cudaDeviceSynchronize", "cudaStreamSynchronize",
		"cudaEventSynchronize", "cudaStreamWaitEvent", "cudaGraphLaunch",
	};

	if (!n)
		return false;
	for (size_t i = 0; i < ARRAY_SIZE(keep); i++)
		if (strncmp(n, keep[i], strlen(keep[i])) == 0)
			return true;
	return false;
}

static uint8_t copy_kind(uint8_t k)
{
	switch (k) {
	case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return AGENT_COPY_H2D;
	case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return AGENT_COPY_D2H;
	case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return AGENT_COPY_D2D;
	case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return AGENT_COPY_P2P;
	default: return AGENT_COPY_OTHER;
	}
}

static uint8_t mem_kind(uint32_t k) { return k < AGENT_MEM__MAX ? (uint8_t)k : AGENT_MEM_UNKNOWN; }

static int kernel(struct agent_conv *cv, const CUpti_ActivityKernel10 *k)
{
	struct agent_rec_kernel *r;
	uint32_t name_id = intern(cv, k->name, true);

	if (k->start == 0 || k->end < k->start)
		return 0; /* still running at a forced flush: no timing */
	r = rec(cv, AGENT_REC_KERNEL, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->start = k->start;
	r->end = k->end;
	r->device = k->deviceId;
	r->context = k->contextId;
	r->stream = k->streamId;
	r->correlation = k->correlationId;
	r->name_id = name_id;
	r->regs = k->registersPerThread;
	r->static_smem = (uint32_t)k->staticSharedMemory;
	r->dynamic_smem = (uint32_t)k->dynamicSharedMemory;
	r->grid[0] = k->gridX;
	r->grid[1] = k->gridY;
	r->grid[2] = k->gridZ;
	r->block[0] = k->blockX;
	r->block[1] = k->blockY;
	r->block[2] = k->blockZ;
	r->graph_id = k->graphId;
	r->graph_node_id = k->graphNodeId;
	if (k->graphId)
		cv->graph_kernels++;
	r->occ_pct_e4 = UINT32_MAX;
	if (k->deviceId < cv->n_devs && cv->devs && cv->devs[k->deviceId].warp_size) {
		struct occ_launch l = {
			.block_size = (uint32_t)(k->blockX * k->blockY * k->blockZ),
			.regs = k->registersPerThread,
			.static_smem = (uint32_t)k->staticSharedMemory,
			.dynamic_smem = (uint32_t)k->dynamicSharedMemory,
			.carveout_pct = k->isSharedMemoryCarveoutRequested ?
						(int32_t)k->sharedMemoryCarveoutRequested : -1,
		};

		r->occ_pct_e4 = occ_pct_e4(&cv->devs[k->deviceId], &l);
	}
	return 1;
}

/*
 * The copy and memset records are different CUPTI structs with the same
 * leading fields; this fills @r from any of them. It returns from the
 * calling converter: 0 for a record CUPTI left incomplete, -ENOMEM when
 * the batch is full.
 */
#define DEVICE_REC(r, cv, kind, m)                                       \
	do {                                                             \
		if ((m)->start == 0 || (m)->end < (m)->start)            \
			return 0;                                        \
		(r) = rec(cv, kind, sizeof(*(r)));                       \
		if (!(r))                                                \
			return -ENOMEM;                                  \
		(r)->start = (m)->start;                                 \
		(r)->end = (m)->end;                                     \
		(r)->bytes = (m)->bytes;                                 \
		(r)->device = (m)->deviceId;                             \
		(r)->context = (m)->contextId;                           \
		(r)->stream = (m)->streamId;                             \
		(r)->correlation = (m)->correlationId;                   \
	} while (0)

static int memcpy_rec(struct agent_conv *cv, const CUpti_ActivityMemcpy6 *m)
{
	struct agent_rec_memcpy *r;

	DEVICE_REC(r, cv, AGENT_REC_MEMCPY, m);
	r->dst_device = m->deviceId;
	r->copy_kind = copy_kind(m->copyKind);
	r->src_kind = mem_kind(m->srcKind);
	r->dst_kind = mem_kind(m->dstKind);
	r->async = (m->flags & CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC) ? 1 : 0;
	r->graph_id = m->graphId;
	r->graph_node_id = m->graphNodeId;
	return 1;
}

static int peer(struct agent_conv *cv, const CUpti_ActivityMemcpyPtoP4 *m)
{
	struct agent_rec_memcpy *r;

	DEVICE_REC(r, cv, AGENT_REC_MEMCPY, m);
	r->dst_device = m->dstDeviceId;
	r->copy_kind = AGENT_COPY_P2P;
	r->src_kind = mem_kind(m->srcKind);
	r->dst_kind = mem_kind(m->dstKind);
	r->async = (m->flags & CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC) ? 1 : 0;
	r->graph_id = m->graphId;
	r->graph_node_id = m->graphNodeId;
	return 1;
}

static int memset_rec(struct agent_conv *cv, const CUpti_ActivityMemset4 *m)
{
	struct agent_rec_memset *r;

	DEVICE_REC(r, cv, AGENT_REC_MEMSET, m);
	r->value = m->value;
	r->mem_kind = mem_kind(m->memoryKind);
	r->async = (m->flags & CUPTI_ACTIVITY_FLAG_MEMSET_ASYNC) ? 1 : 0;
	r->graph_id = m->graphId;
	r->graph_node_id = m->graphNodeId;
	return 1;
}

/* Allocations and releases go out as MEMORY2, with the pool a
 * cudaMallocAsync allocation came from; the memory profile needs both. */
static int memory(struct agent_conv *cv, const CUpti_ActivityMemory4 *m)
{
	struct agent_rec_memory2 *r;

	if (m->memoryOperationType != CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION &&
	    m->memoryOperationType != CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE)
		return 0;
	r = rec(cv, AGENT_REC_MEMORY2, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->ts = m->timestamp;
	r->bytes = m->bytes;
	r->address = m->address;
	r->device = m->deviceId;
	r->context = m->contextId;
	r->stream = m->isAsync ? m->streamId : UINT32_MAX;
	r->correlation = m->correlationId;
	r->op = m->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION ?
			AGENT_MEMOP_ALLOC : AGENT_MEMOP_FREE;
	r->mem_kind = mem_kind(m->memoryKind);
	switch (m->memoryPoolConfig.memoryPoolType) {
	case CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL:
		r->pool_type = AGENT_POOL_LOCAL;
		r->pool_size = m->memoryPoolConfig.pool.size;
		break;
	case CUPTI_ACTIVITY_MEMORY_POOL_TYPE_IMPORTED: r->pool_type = AGENT_POOL_IMPORTED; break;
	default: r->pool_type = AGENT_POOL_NONE; break;
	}
	if (r->pool_type != AGENT_POOL_NONE) {
		r->pool_address = m->memoryPoolConfig.address;
		r->pool_utilized = m->memoryPoolConfig.utilizedSize;
	}
	return 1;
}

static int overhead(struct agent_conv *cv, const CUpti_ActivityOverhead3 *o)
{
	struct agent_rec_overhead *r;

	if (o->start == 0 || o->end < o->start)
		return 0;
	r = rec(cv, AGENT_REC_OVERHEAD, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->start = o->start;
	r->end = o->end;
	r->kind = (uint32_t)o->overheadKind;
	r->object_kind = (uint32_t)o->objectKind;
	r->device = UINT32_MAX;
	switch (o->objectKind) {
	case CUPTI_ACTIVITY_OBJECT_PROCESS:
		r->object_id = o->objectId.pt.processId;
		break;
	case CUPTI_ACTIVITY_OBJECT_THREAD:
		r->object_id = o->objectId.pt.threadId;
		break;
	case CUPTI_ACTIVITY_OBJECT_DEVICE:
	case CUPTI_ACTIVITY_OBJECT_CONTEXT:
	case CUPTI_ACTIVITY_OBJECT_STREAM:
		r->device = o->objectId.dcs.deviceId;
		r->object_id = ((uint64_t)o->objectId.dcs.contextId << 32) | o->objectId.dcs.streamId;
		break;
	default:
		break;
	}
	return 1;
}

/* @domain 0: a launch CUDA made internally (CUPTI_ACTIVITY_KIND_INTERNAL_LAUNCH_API):
 * no callback id of ours names it, but its kernels link to it. */
static int api(struct agent_conv *cv, const CUpti_ActivityAPI *a, uint32_t domain)
{
	uint32_t d = domain - 1, cbid = (uint32_t)a->cbid;
	struct agent_rec_api *r;
	uint32_t name_id = 0;

	if (domain == AGENT_API_DRIVER && cbid == CUPTI_DRIVER_TRACE_CBID_cuDriverGetVersion && cv->canary_tid &&
	    a->threadId == cv->canary_tid) {
		cv->canary_seen++; /* the agent's own call, not the job's */
		return 0;
	}
	if (a->start == 0 || a->end < a->start)
		return 0;
	if (domain == 0) {
		name_id = intern(cv, "CUDA internal launch", false);
		domain = AGENT_API_DRIVER;
		cbid = 0;
	} else if (cbid < 1024) {
		if (!cv->api_keep[d][cbid]) {
			const char *n = cv->api_name ? cv->api_name(cv->ud, domain, cbid) : NULL;

			cv->api_keep[d][cbid] = agent_conv_api_wanted(n) ? 1 : 2;
		}
		if (cv->api_keep[d][cbid] != 1)
			return 0;
		name_id = cv->api_name_id[d][cbid];
	}
	if (!name_id && d < 2) {
		name_id = intern(cv, cv->api_name ? cv->api_name(cv->ud, domain, cbid) : NULL, false);
		if (cbid < 1024)
			cv->api_name_id[d][cbid] = name_id;
	}
	r = rec(cv, AGENT_REC_API, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->start = a->start;
	r->end = a->end;
	r->tid = a->threadId;
	r->correlation = a->correlationId;
	r->cbid = cbid;
	r->name_id = name_id;
	r->domain = (uint16_t)domain;
	r->ret = (int32_t)a->returnValue;
	if (cv->graph_launch && d < 2 && agent_conv_is_graph_launch(domain, cbid))
		cv->graph_launch(cv->ud, a->correlationId, &r->graph_id, &r->graph_exec_id);
	return 1;
}

bool agent_conv_is_graph_launch(uint32_t domain, uint32_t cbid)
{
	if (domain == AGENT_API_DRIVER)
		return cbid == CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch ||
		       cbid == CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz;
	if (domain == AGENT_API_RUNTIME)
		return cbid == CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000 ||
		       cbid == CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000;
	return false;
}

/*
 * One graph launch traced as a whole (CUPTI_ACTIVITY_KIND_GRAPH_TRACE).
 * deviceId/contextId INT_MAX mean the graph started on the host (a host
 * node first): the device it ended on is the one we can draw it on.
 */
static int graph_trace(struct agent_conv *cv, const CUpti_ActivityGraphTrace2 *t)
{
	struct agent_rec_graph *r;
	uint32_t device = t->deviceId, context = t->contextId;
	/* A v1 record stops before endDeviceId: reading it would read the
	 * next record. v1 has no host-started graphs (INT_MAX) either. */
	uint32_t end_device = cv->graph_trace_v1 ? device : t->endDeviceId;

	if (t->start == 0 || t->end < t->start)
		return 0; /* CUPTI could not time it */
	if (device == (uint32_t)INT32_MAX && !cv->graph_trace_v1) {
		device = t->endDeviceId;
		context = t->endContextId;
	}
	r = rec(cv, AGENT_REC_GRAPH, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->start = t->start;
	r->end = t->end;
	r->device = device;
	r->context = context;
	r->stream = t->streamId;
	r->correlation = t->correlationId;
	r->graph_id = t->graphId;
	r->end_device = end_device;
	cv->graph_launches++;
	return 1;
}

int agent_conv_record(struct agent_conv *cv, const CUpti_Activity *a)
{
	int r;

	if (cv->names_lost) {
		size_t keep = cv->len;

		cv->len = 0;
		agent_conv_reset(cv);
		cv->len = keep;
		cv->names_lost = false;
	}
	cv->records++;
	switch (a->kind) {
	case CUPTI_ACTIVITY_KIND_KERNEL:
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
		r = kernel(cv, (const CUpti_ActivityKernel10 *)a);
		break;
	case CUPTI_ACTIVITY_KIND_MEMCPY:
		r = memcpy_rec(cv, (const CUpti_ActivityMemcpy6 *)a);
		break;
	case CUPTI_ACTIVITY_KIND_MEMCPY2:
		r = peer(cv, (const CUpti_ActivityMemcpyPtoP4 *)a);
		break;
	case CUPTI_ACTIVITY_KIND_MEMSET:
		r = memset_rec(cv, (const CUpti_ActivityMemset4 *)a);
		break;
	case CUPTI_ACTIVITY_KIND_MEMORY2:
		r = memory(cv, (const CUpti_ActivityMemory4 *)a);
		break;
	case CUPTI_ACTIVITY_KIND_OVERHEAD:
		r = overhead(cv, (const CUpti_ActivityOverhead3 *)a);
		break;
	case CUPTI_ACTIVITY_KIND_DRIVER:
		r = api(cv, (const CUpti_ActivityAPI *)a, AGENT_API_DRIVER);
		break;
	case CUPTI_ACTIVITY_KIND_RUNTIME:
		r = api(cv, (const CUpti_ActivityAPI *)a, AGENT_API_RUNTIME);
		break;
	case CUPTI_ACTIVITY_KIND_INTERNAL_LAUNCH_API:
		r = api(cv, (const CUpti_ActivityAPI *)a, 0);
		break;
	case CUPTI_ACTIVITY_KIND_GRAPH_TRACE:
		r = graph_trace(cv, (const CUpti_ActivityGraphTrace2 *)a);
		break;
	case CUPTI_ACTIVITY_KIND_CDP_KERNEL:
		/* Kernels launched by kernels (legacy CDP records): known, not
		 * drawn; CONCURRENT_KERNEL records carry isDeviceLaunched. */
		r = 0;
		break;
	default:
		cv->unknown++;
		return 0;
	}
	if (r > 0)
		cv->converted++;
	else if (r == 0)
		cv->skipped++;
	return r;
}
