/* SPDX-License-Identifier: MIT */
/*
 * agent.c - libprofd-agent.so: loaded into a CUDA process through
 * CUDA_INJECTION64_PATH; streams CUPTI activity to profd during captures.
 *
 * DESIGN
 * ------
 * InitializeInjection() (called by CUDA inside the first cuInit) only
 * starts one agent thread and returns 1: no CUPTI and no driver calls there.
 * The agent thread owns everything else:
 *
 *   idle       connected (or reconnecting with backoff) to profd's agent
 *              socket; CUPTI found and loaded (cupti-load.h) but never
 *              called beyond its version; HELLO + DEVICE frames sent. No
 *              subscriber, no callbacks, no kinds: CUDA calls cost nothing.
 *   START      subscribe; per-thread buffers off and pre-zeroed buffers on
 *              (both before the callbacks are registered); register buffer
 *              callbacks; anchor clocks; enable activity kinds, then switch
 *              off at the source the API records we would discard.
 *   capturing  every 100 ms cuptiActivityFlushAll(0); completed buffers are
 *              queued by CUPTI's callbacks and converted + sent here.
 *   FLUSH      a window closes: flush(0) until every buffer CUPTI held when
 *              the FLUSH came is back (bounded), drain, STATS, FLUSHED. A
 *              forced flush here would cut records still being written.
 *   STOP       disable kinds, flush(0) until all buffers are back (bounded),
 *              then forced, counting what that cut; STATS; then detach:
 *              cuptiUnsubscribe + cuptiFinalize from the exit side of the
 *              next driver/runtime API callback (the only safe place,
 *              reference/cupti-agent.md §2.2); if no CUDA call happens
 *              within 2 s, detach without finalize and say so.
 *
 * Buffers (the slabs): one mapping of SLAB_COUNT x SLAB_SIZE, each slab
 * FREE (ours, zeroed), CUPTI (handed out) or DONE (queued to drain). The
 * completion callback accepts only a slab of ours that CUPTI holds; any
 * other buffer belongs to another tool that shares the process-wide
 * Activity API (PyTorch's profiler, say): it is counted and left alone.
 * A slab is never handed out twice and never unmapped while CUPTI might
 * still write it: only after cuptiFinalize returned, or never.
 *
 * Threads: the agent thread owns `g` except what the callbacks touch, which
 * is the slab table under g.lock (held for a few instructions, never across
 * a CUPTI call) and the atomics. CUPTI is called by the agent thread only,
 * except unsubscribe + finalize in the API-exit callback, which the agent
 * thread arms only once its own enable calls are done (CUPTI requires a
 * subscriber to serialise them).
 *
 * Driver calls (device inventory) use the libcuda the process has already
 * loaded, found with dlopen(RTLD_NOLOAD). Kernel names are demangled here,
 * with the C++ runtime's __cxa_demangle (libstdc++, loaded on first use if
 * the job has not): the job's own names, in the job's own process, so
 * profd never demangles what a socket sent it.
 *
 * Process exit: the atexit hook gives a live capture EXIT_WAIT_MS to flush,
 * then sets `too_late`; from then on the agent thread makes no CUPTI call
 * (CUPTI and the driver tear themselves down during exit).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "base/macro.h"
#include "cuda-abi.h"

#include "agent-conn.h"
#include "agent-proto.h"
#include "convert.h"
#include "cupti-load.h"
#include "nvtx.h"
#include "pmsample.h"

#define EXPORT __attribute__((visibility("default")))

#ifndef PROFD_AGENT_SOCKET_DEFAULT
#define PROFD_AGENT_SOCKET_DEFAULT "/run/profd/agent.sock"
#endif

#define SLAB_SIZE (4u << 20)
#define SLAB_COUNT 32u /* at most 128 MiB of activity buffers, touched only as used */
#define FLUSH_PERIOD_MS 100
#define FLUSH_SETTLE_MS 300  /* a window's FLUSH waits this long for buffers CUPTI holds */
#define STOP_SETTLE_MS 1500  /* STOP waits this long before a forced flush */
#define CLAIM_WAIT_MS 2000   /* for a CUDA call whose exit callback can finalize */
#define FINALIZE_WAIT_MS 5000 /* for that finalize to return */
#define EXIT_WAIT_MS 200
/* Callback ids of either API domain are below this. */
#define API_CBID_MAX ((unsigned)CUPTI_DRIVER_TRACE_CBID_SIZE > (unsigned)CUPTI_RUNTIME_TRACE_CBID_SIZE ? \
			      (unsigned)CUPTI_DRIVER_TRACE_CBID_SIZE : (unsigned)CUPTI_RUNTIME_TRACE_CBID_SIZE)
/* CUPTI fixed cudaGraphLaunch correlation ids after a first session here. */
#define CUPTI_GRAPH_CORR_FIXED 130101u

/* Driver calls of the agent thread (found with dlsym, take_inventory()). */
typedef CUresult (*fn_dev_get)(CUdevice *, int);
typedef CUresult (*fn_pctx_state)(CUdevice, unsigned *, int *);
typedef CUresult (*fn_pctx_retain)(CUcontext *, CUdevice);
typedef CUresult (*fn_pctx_release)(CUdevice);
typedef CUresult (*fn_ctx_push)(CUcontext);
typedef CUresult (*fn_ctx_pop)(CUcontext *);
typedef CUresult (*fn_mem_info)(size_t *, size_t *);

enum slab_state { SLAB_FREE, SLAB_CUPTI, SLAB_DONE };

struct slab {
	enum slab_state state;
	uint64_t seq;  /* hand-out order, to know what a FLUSH must wait for */
	size_t valid;  /* DONE: bytes of records */
};

/* finalize_pending: who runs the detach. */
enum { DETACH_IDLE, DETACH_ARMED, DETACH_CLAIMED };

static struct agent {
	pthread_once_t once;
	int efd; /* wakes the agent thread */
	atomic_int dead;    /* forked child or CUPTI fatal error: never touch CUPTI */
	atomic_int exiting; /* atexit: flush once, then stop */
	atomic_int exit_done;
	atomic_int too_late; /* exit is tearing CUDA down: no more CUPTI calls */

	struct agent_client cl;
	struct agent_conv cv;

	/* CUPTI, loaded on the first connection (agent thread) */
	struct cupti_lib C;
	bool cupti_tried, cupti_ok;
	int cupti_err; /* cupti_load()'s verdict */
	char cupti_why[768];
	bool untested_told;

	/* inventory */
	bool inventory;
	uint32_t n_devs;
	struct agent_device devs[AGENT_MAX_DEVICES];
	uint32_t driver_version, runtime_version;
	/* for MEM_STATE (send_mem_state()); NULL when the driver lacks one */
	struct {
		fn_dev_get get;
		fn_pctx_state state;
		fn_pctx_retain retain;
		fn_pctx_release release;
		fn_ctx_push push;
		fn_ctx_pop pop;
		fn_mem_info info;
	} mem;

	/* capture */
	struct agent_start opts;  /* the last START, its options (agent thread; v4) */
	atomic_int capturing;
	CUpti_SubscriberHandle sub;
	bool subscribed;
	atomic_int detach;        /* DETACH_*: the API-exit callback claims an armed detach */
	atomic_int finalize_done; /* the claimed detach returned from cuptiFinalize */
	atomic_int finalized;     /* set before cuptiFinalize, cleared by the next subscribe:
				   * any CUPTI call in between would start CUPTI again */
	bool finalizing;          /* claimed, not yet seen done: slabs stay CUPTI's */
	unsigned sessions;        /* captures started in this process */
	struct agent_stats stats;
	uint64_t cut;             /* buffers a forced flush handed over unfinished */
	unsigned told_foreign, told_graph, told_nvtx; /* notices of this capture already sent */
	bool nvtx_domains;        /* API callbacks on for NVTX launch stacks (nvtx_follow()) */
	bool api_filter_known;
	bool graph_trace;         /* CUPTI_ACTIVITY_KIND_GRAPH_TRACE is on (graphs_apply_options()) */
	bool graph_told;          /* the graph-trace refusal was reported this capture */
	uint8_t api_off[2][API_CBID_MAX / 8 + 1]; /* driver, runtime: records switched off */
	bool driver_records;      /* CUPTI_ACTIVITY_KIND_DRIVER is on this capture */
	unsigned canaries;        /* canary calls made this capture */
	bool told_lost;           /* the canary's takeover notice was sent this capture */
	CUresult (*canary_call)(int *); /* cuDriverGetVersion: the buffer canary (canary_send()) */

	/* slabs (state, free stack and done ring guarded by lock) */
	pthread_mutex_t lock;
	uint8_t *region; /* SLAB_COUNT x SLAB_SIZE, NULL when none */
	struct slab slabs[SLAB_COUNT];
	uint32_t free_stack[SLAB_COUNT], n_free;
	uint32_t done_ring[SLAB_COUNT], done_head, n_done;
	uint64_t hand_seq;
	bool accepting;          /* hand slabs out: only while a capture runs */
	uint64_t declined;       /* requests refused (pool empty) during a capture */
	atomic_ullong foreign;   /* completed buffers that were not ours */
} g = {
	.once = PTHREAD_ONCE_INIT,
	.efd = -1,
	.lock = PTHREAD_MUTEX_INITIALIZER,
};

static void wake(void)
{
	uint64_t one = 1;

	if (g.efd >= 0 && write(g.efd, &one, sizeof(one)) < 0) {
		/* the counter is saturated: the thread is awake anyway */
	}
}

/* Whether the agent thread may still call into CUPTI. */
static bool cupti_usable(void)
{
	return g.cupti_ok && !atomic_load(&g.dead) && !atomic_load(&g.too_late);
}

static void send_error(uint32_t code, int32_t detail, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void send_error(uint32_t code, int32_t detail, const char *fmt, ...)
{
	struct agent_error e = { .code = code, .detail = detail };
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(e.text, sizeof(e.text), fmt, ap);
	va_end(ap);
	agent_client_send(&g.cl, AGENT_FRAME_ERROR, &e, sizeof(e));
}

/* pmsample.c's ERROR frames. */
static void pm_error(uint32_t code, int32_t detail, const char *text)
{
	send_error(code, detail, "%s", text);
}

static const char *cupti_str(CUptiResult r)
{
	const char *s = NULL;

	if (!g.cupti_ok || g.C.cuptiGetResultString(r, &s) != CUPTI_SUCCESS || !s)
		return "unknown CUPTI error";
	return s;
}

/* Map a failed CUPTI call to an ERROR frame the daemon can explain. */
static void report_cupti(const char *call, CUptiResult r)
{
	if (r == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES)
		send_error(AGENT_ERR_PRIVILEGES, (int32_t)r, "%s: %s", call, cupti_str(r));
	else if (r == CUPTI_ERROR_NOT_INITIALIZED)
		send_error(AGENT_ERR_VERSION, (int32_t)r,
			   "%s: %s (CUPTI %u needs a newer driver than %u)", call, cupti_str(r),
			   g.C.version, g.driver_version);
	else
		send_error(AGENT_ERR_CUPTI, (int32_t)r, "%s: %s (%d)", call, cupti_str(r), (int)r);
}

/* ---- driver inventory (agent thread, after cuInit) ------------------------ */

typedef CUresult (*fn_int)(int *);
typedef CUresult (*fn_attr)(int *, CUdevice_attribute, CUdevice);
typedef CUresult (*fn_name)(char *, int, CUdevice);
typedef CUresult (*fn_uuid)(CUuuid *, CUdevice);
typedef CUresult (*fn_mem)(size_t *, CUdevice);
typedef int (*fn_rt_ver)(int *);

/* dlsym into a function pointer without the object-to-function cast. */
#define SYM(h, name, fp)                                      \
	do {                                                  \
		void *s_ = dlsym((h), (name));                \
		memcpy(&(fp), &s_, sizeof(s_));               \
	} while (0)

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

static void take_inventory(void)
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

/* Find CUPTI once (agent thread). Only cuptiGetVersion is called. */
static void load_cupti(void)
{
	if (g.cupti_tried)
		return;
	g.cupti_tried = true;
	g.cupti_err = cupti_load(&g.C, g.cupti_why, sizeof(g.cupti_why));
	g.cupti_ok = g.cupti_err == 0;
	if (g.cupti_ok) {
		g.cv.graph_trace_v1 = g.C.version < CUPTI_GRAPH_TRACE2;
		pm_init(&g.C, &g.cv, pm_error);
	}
}

/* ---- slabs: CUPTI's callbacks (any thread) and the agent thread ------------ */

static uint8_t *slab_buf(uint32_t i) { return g.region + (size_t)i * SLAB_SIZE; }

/* One more slab past the pool: what a CUPTI older than 12.9 gets instead
 * of a refusal (refusing could crash it). Shared, never read: its records
 * are the ones dropped. */
#define DISCARD SLAB_COUNT
#define REGION_SIZE ((size_t)(SLAB_COUNT + 1) * SLAB_SIZE)

/* The index of a buffer that is one of our slabs, or -1. */
static int slab_of(const uint8_t *b)
{
	uintptr_t off;

	if (!g.region || b < g.region)
		return -1;
	off = (uintptr_t)(b - g.region);
	if (off % SLAB_SIZE || off / SLAB_SIZE > DISCARD)
		return -1;
	return (int)(off / SLAB_SIZE);
}

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
	uint8_t *b = NULL;

	pthread_mutex_lock(&g.lock);
	if (g.accepting && g.n_free) {
		uint32_t i = g.free_stack[--g.n_free];

		g.slabs[i].state = SLAB_CUPTI;
		g.slabs[i].seq = ++g.hand_seq;
		b = slab_buf(i);
	} else {
		if (g.accepting)
			g.declined++; /* CUPTI >= 12.9 accepts a declined buffer and counts the drops */
		if (g.region && g.C.version < CUPTI_DECLINE_OK)
			b = slab_buf(DISCARD);
	}
	pthread_mutex_unlock(&g.lock);
	*buffer = b;
	*size = b ? SLAB_SIZE : 0;
	*max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
				      size_t valid)
{
	int i;

	(void)ctx;
	(void)stream;
	(void)size;
	if (!buffer)
		return;
	pthread_mutex_lock(&g.lock);
	i = slab_of(buffer);
	if (i == DISCARD) {
		pthread_mutex_unlock(&g.lock);
		return;
	}
	if (i < 0 || g.slabs[i].state != SLAB_CUPTI) {
		/* Another tool's buffer (the Activity API is per process): not
		 * ours to read, pool or free. */
		pthread_mutex_unlock(&g.lock);
		atomic_fetch_add(&g.foreign, 1);
		return;
	}
	g.slabs[i].state = SLAB_DONE;
	g.slabs[i].valid = valid < SLAB_SIZE ? valid : SLAB_SIZE;
	g.done_ring[(g.done_head + g.n_done) % SLAB_COUNT] = (uint32_t)i;
	g.n_done++; /* each slab is DONE at most once: the ring cannot overflow */
	pthread_mutex_unlock(&g.lock);
	wake();
}

/* Map the slabs (zero pages: CUPTI may skip zeroing them). */
static int slabs_map(void)
{
	void *p;

	if (g.region)
		return 0;
	p = mmap(NULL, REGION_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		 -1, 0);
	if (p == MAP_FAILED)
		return -errno;
	pthread_mutex_lock(&g.lock);
	g.region = p;
	g.n_free = g.n_done = g.done_head = 0;
	for (uint32_t i = SLAB_COUNT; i-- > 0;) {
		g.slabs[i] = (struct slab){ .state = SLAB_FREE };
		g.free_stack[g.n_free++] = i;
	}
	pthread_mutex_unlock(&g.lock);
	return 0;
}

/* Unmap the slabs: only once CUPTI cannot touch them (finalized). */
static void slabs_unmap(void)
{
	pthread_mutex_lock(&g.lock);
	if (g.region)
		munmap(g.region, REGION_SIZE);
	g.region = NULL;
	g.n_free = g.n_done = g.done_head = 0;
	g.accepting = false;
	pthread_mutex_unlock(&g.lock);
}

/* Slabs CUPTI holds, all or those handed out up to @seq. */
static unsigned slabs_held(uint64_t seq)
{
	unsigned n = 0;

	pthread_mutex_lock(&g.lock);
	for (uint32_t i = 0; g.region && i < SLAB_COUNT; i++)
		n += g.slabs[i].state == SLAB_CUPTI && g.slabs[i].seq <= seq;
	pthread_mutex_unlock(&g.lock);
	return n;
}

/* ---- CUPTI callbacks (application threads) -------------------------------- */

/* The NVTX range stack of this thread under the call's correlation id, for
 * the calls whose records we keep (api_off is written before the domains
 * are switched on and not after). */
static void nvtx_launch(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, uint32_t correlation)
{
	int d = domain == CUPTI_CB_DOMAIN_DRIVER_API ? 0 : 1;

	if (cbid < API_CBID_MAX && (g.api_off[d][cbid / 8] & (1u << (cbid % 8))))
		return;
	agent_nvtx_launch(correlation);
}

/* ---- CUDA graphs ------------------------------------------------------------- */

/*
 * The executable graph of each graph launch, by correlation id: the API
 * record CUPTI writes later does not name it, so the launch's enter
 * callback (an application thread) notes it here and the converter (agent
 * thread) looks it up. A slot is a sequence: seq odd while written; a
 * reader takes it only when seq was even and unchanged around the read and
 * the slot holds that correlation id. An overwritten slot (more than
 * GRAPH_SLOTS launches between the call and its record) reads as unknown.
 */
#define GRAPH_SLOTS 4096u

static struct graph_slot {
	atomic_uint seq;
	atomic_uint corr, exec_id;
} graph_slots[GRAPH_SLOTS];

static const struct {
	CUpti_CallbackDomain domain;
	CUpti_CallbackId cbid;
} graph_launch_cbids[] = {
	{ CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch },
	{ CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz },
	{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000 },
	{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000 },
};

/* The parameters of the launch calls as CUPTI passes them: both take the
 * executable graph first (generated_cuda_meta.h's cuGraphLaunch_params,
 * generated_cuda_runtime_api_meta.h's cudaGraphLaunch_v10000_params, the
 * _ptsz twins alike; those headers do not compile on their own in C). */
struct graph_launch_params {
	CUgraphExec exec;
	CUstream stream;
};

/* Application thread, at the enter side of any API call we get. */
static void graph_launch_seen(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const CUpti_CallbackData *cb)
{
	uint32_t d = domain == CUPTI_CB_DOMAIN_DRIVER_API ? AGENT_API_DRIVER :
		     domain == CUPTI_CB_DOMAIN_RUNTIME_API ? AGENT_API_RUNTIME : 0;
	struct graph_slot *sl;
	uint32_t id = 0;
	unsigned seq;

	/* No CUPTI call once a detach on another thread began finalizing. */
	if (!d || !agent_conv_is_graph_launch(d, cbid) || !cb->functionParams || !g.C.cuptiGetGraphExecId ||
	    atomic_load(&g.finalized))
		return;
	if (g.C.cuptiGetGraphExecId(((const struct graph_launch_params *)cb->functionParams)->exec, &id) !=
	    CUPTI_SUCCESS)
		return;
	sl = &graph_slots[cb->correlationId % GRAPH_SLOTS];
	seq = atomic_load(&sl->seq);
	if ((seq & 1) || !atomic_compare_exchange_strong(&sl->seq, &seq, seq + 1))
		return; /* another thread writes it: this launch stays without its id */
	atomic_store(&sl->corr, cb->correlationId);
	atomic_store(&sl->exec_id, id);
	atomic_store(&sl->seq, seq + 2);
}

/* agent_conv_graph_launch_cb (agent thread). CUPTI tells the graph an
 * executable came from only at instantiation (a resource callback), which
 * jobs do before anyone profiles: graph_id stays 0. */
static void graph_launch_ids(void *ud, uint32_t correlation, uint32_t *graph_id, uint32_t *exec_id)
{
	struct graph_slot *sl = &graph_slots[correlation % GRAPH_SLOTS];
	unsigned seq = atomic_load(&sl->seq);
	uint32_t c, id;

	(void)ud;
	*graph_id = 0;
	*exec_id = 0;
	if (seq & 1)
		return;
	c = atomic_load(&sl->corr);
	id = atomic_load(&sl->exec_id);
	if (c == correlation && atomic_load(&sl->seq) == seq)
		*exec_id = id;
}

/* The launch callbacks, at capture start (the subscriber is new). Only
 * these cbids: a job's other calls pay nothing for them. */
static void graphs_follow(void)
{
	if (!g.C.cuptiGetGraphExecId)
		return;
	for (size_t i = 0; i < ARRAY_SIZE(graph_launch_cbids); i++)
		g.C.cuptiEnableCallback(1, g.sub, graph_launch_cbids[i].domain, graph_launch_cbids[i].cbid);
}

/*
 * Graph-level tracing (AGENT_START_GRAPH_TRACE): CUPTI then reports each
 * graph launch as one CUpti_ActivityGraphTrace2 instead of its nodes'
 * kernel/memcpy/memset records; kernels launched outside graphs are still
 * traced. It is an activity kind like any other, so it can be switched
 * while a capture runs: launches from then on follow the new setting.
 * Graphs instantiated before CUPTI attached cannot be traced this way
 * (CUPTI guide §2.3.7): they keep reporting nodes. Agent thread.
 */
static void graphs_apply_options(void)
{
	bool want = (g.opts.flags & AGENT_START_GRAPH_TRACE) != 0;
	CUptiResult r;

	if (want == g.graph_trace || !g.subscribed || !cupti_usable())
		return;
	r = want ? g.C.cuptiActivityEnable(CUPTI_ACTIVITY_KIND_GRAPH_TRACE) :
		   g.C.cuptiActivityDisable(CUPTI_ACTIVITY_KIND_GRAPH_TRACE);
	if (r == CUPTI_SUCCESS) {
		g.graph_trace = want;
		return;
	}
	if (!g.graph_told) {
		g.graph_told = true;
		send_error(AGENT_ERR_NOTICE, (int32_t)r, "CUDA graphs: %s graph-level tracing failed (%s); "
			   "graph launches are traced %s", want ? "enabling" : "disabling", cupti_str(r),
			   want ? "per node" : "as a whole");
	}
}

/* Graph-level tracing off with the capture's other kinds. */
static void graphs_stop(void)
{
	if (g.graph_trace && cupti_usable())
		g.C.cuptiActivityDisable(CUPTI_ACTIVITY_KIND_GRAPH_TRACE);
	g.graph_trace = false;
}

/* The detach, on the exit side of an API call: the one place the CUPTI
 * guide allows cuptiFinalize without the caller synchronising everything.
 * Armed by the agent thread only after its own enable calls. */
static void CUPTIAPI api_callback(void *ud, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
				  const void *data)
{
	const CUpti_CallbackData *cb = data;
	int armed = DETACH_ARMED;

	(void)ud;
	(void)cbid;
	if (atomic_load(&g.dead))
		return; /* a forked child: the detach belongs to the parent */
	if (domain == CUPTI_CB_DOMAIN_STATE) {
		/* CUPTI hit a fatal error and finalizes itself: never touch it again. */
		atomic_store(&g.dead, 1);
		wake();
		return;
	}
	if (domain != CUPTI_CB_DOMAIN_DRIVER_API && domain != CUPTI_CB_DOMAIN_RUNTIME_API)
		return;
	if (cb->callbackSite == CUPTI_API_ENTER) {
		graph_launch_seen(domain, cbid, cb);
		nvtx_launch(domain, cbid, cb->correlationId);
		return;
	}
	if (cb->callbackSite != CUPTI_API_EXIT)
		return;
	if (!atomic_compare_exchange_strong(&g.detach, &armed, DETACH_CLAIMED))
		return;
	/* Unsubscribing drops our domains too; then CUPTI goes entirely. */
	atomic_store(&g.finalized, 1);
	g.C.cuptiUnsubscribe(g.sub);
	g.C.cuptiFinalize();
	atomic_store(&g.finalize_done, 1);
	wake();
}

static const char *api_name(void *ud, uint32_t domain, uint32_t cbid)
{
	const char *n = NULL;

	(void)ud;
	if (!cupti_usable() ||
	    g.C.cuptiGetCallbackName(domain == AGENT_API_DRIVER ? CUPTI_CB_DOMAIN_DRIVER_API :
								  CUPTI_CB_DOMAIN_RUNTIME_API,
				     cbid, &n) != CUPTI_SUCCESS)
		return NULL;
	return n;
}

typedef char *(*cxa_demangle_fn)(const char *mangled, char *out, size_t *len, int *status);

/* The converter's demangler (agent thread only). */
static char *demangle(void *ud, const char *mangled)
{
	static cxa_demangle_fn fn;
	static bool looked;
	int status = -1;
	char *d;

	(void)ud;
	if (!looked) {
		/* The job's libstdc++ when it has one (dlopen finds the loaded copy
		 * even if it was loaded RTLD_LOCAL), else load it: every CUDA
		 * toolkit machine has it. */
		void *h = dlopen("libstdc++.so.6", RTLD_NOW | RTLD_LOCAL);

		looked = true;
		SYM(h ? h : RTLD_DEFAULT, "__cxa_demangle", fn);
	}
	if (!fn)
		return NULL;
	d = fn(mangled, NULL, NULL, &status);
	if (status != 0) {
		free(d);
		return NULL;
	}
	return d;
}

static int emit_records(void *ud, const void *p, size_t len)
{
	(void)ud;
	return agent_client_send(&g.cl, AGENT_FRAME_RECORDS, p, (uint32_t)len);
}

/* ---- capture --------------------------------------------------------------- */

static void send_clock(uint32_t which)
{
	struct agent_clock ck = { .which = which };
	uint64_t best = UINT64_MAX;

	for (int i = 0; i < 32; i++) {
		uint64_t a = agent_wall_ns(), c = 0, b;

		if (!cupti_usable() || g.C.cuptiGetTimestamp(&c) != CUPTI_SUCCESS)
			return;
		b = agent_wall_ns();
		if (b - a < best) {
			best = b - a;
			ck.agent_ns = c;
			ck.wall_ns = a + (b - a) / 2;
		}
	}
	agent_client_send(&g.cl, AGENT_FRAME_CLOCK, &ck, sizeof(ck));
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
static void send_mem_state(void)
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

/* Read one completed slab: convert its records while a capture is on
 * (else discard them), then zero it and put it back. The walk needs a live
 * CUPTI; after finalize the records are dropped unread. */
static void drain_slab(uint32_t i, size_t valid)
{
	uint8_t *buf = slab_buf(i);
	CUpti_Activity *rec = NULL;
	bool convert = atomic_load(&g.capturing);
	CUptiResult r = CUPTI_ERROR_MAX_LIMIT_REACHED;

	g.stats.buffers++;
	/* After cuptiFinalize (it may hand back buffers on its way out) the
	 * records are dropped unread: reading them would restart CUPTI. */
	while (valid && cupti_usable() && !atomic_load(&g.finalized) &&
	       (r = g.C.cuptiActivityGetNextRecord(buf, valid, &rec)) == CUPTI_SUCCESS) {
		if (convert)
			agent_conv_record(&g.cv, rec);
		/* Ours to free, read or not; only CUDA 13's Overhead3 has it. */
		if (rec->kind == CUPTI_ACTIVITY_KIND_OVERHEAD && g.C.version >= CUPTI_V13_MIN)
			free(((CUpti_ActivityOverhead3 *)rec)->overheadData);
	}
	/* A forced flush hands over records still being written: the walk
	 * stops at the first one, and whatever follows it is lost. */
	if (r == CUPTI_ERROR_INVALID_KIND && convert)
		g.cut++;
	/* Zeroed for the next hand-out (CUPTI skips it: we said we would).
	 * CUPTI writes records from the start, so past `valid` it is still
	 * zero, unless the walk stopped short on an unfinished record. */
	memset(buf, 0, r == CUPTI_ERROR_MAX_LIMIT_REACHED && valid ? valid : SLAB_SIZE);
	pthread_mutex_lock(&g.lock);
	g.slabs[i].state = SLAB_FREE;
	g.slabs[i].valid = 0;
	g.free_stack[g.n_free++] = i;
	pthread_mutex_unlock(&g.lock);
}

/* NVTX attached (now or since the capture started): API enter callbacks,
 * so that each launch inside a range is sent with its range stack. Only
 * then: a job without NVTX pays nothing per CUDA call. Agent thread. */
static void nvtx_follow(void)
{
	if (g.nvtx_domains || !agent_nvtx_enabled() || !atomic_load(&g.capturing) || !agent_nvtx_attached() || !g.subscribed ||
	    atomic_load(&g.detach) != DETACH_IDLE)
		return;
	g.C.cuptiEnableDomain(1, g.sub, CUPTI_CB_DOMAIN_DRIVER_API);
	g.C.cuptiEnableDomain(1, g.sub, CUPTI_CB_DOMAIN_RUNTIME_API);
	g.nvtx_domains = true;
	agent_nvtx_following(1);
}

/* Convert and send every completed slab. NVTX first: a launch's range
 * stack is queued at the launch, so it reaches profd before the kernel. */
static void drain(void)
{
	nvtx_follow();
	agent_nvtx_drain(&g.cv);
	for (;;) {
		uint32_t i;
		size_t valid;

		pthread_mutex_lock(&g.lock);
		if (!g.n_done) {
			pthread_mutex_unlock(&g.lock);
			break;
		}
		i = g.done_ring[g.done_head];
		g.done_head = (g.done_head + 1) % SLAB_COUNT;
		g.n_done--;
		valid = g.slabs[i].valid;
		pthread_mutex_unlock(&g.lock);
		drain_slab(i, valid);
	}
	agent_conv_flush(&g.cv);
}

/* flush(0) and drain until CUPTI gave back every slab it was handed up to
 * @seq, or @ms passed. Never a forced flush: that cuts records still
 * being written. True when they all came back. */
static bool settle(uint64_t seq, unsigned ms)
{
	uint64_t deadline = agent_mono_ns() + ms * 1000000ull;

	for (;;) {
		if (!cupti_usable())
			return false;
		g.C.cuptiActivityFlushAll(0);
		drain();
		if (slabs_held(seq) == 0)
			return true;
		if (agent_mono_ns() >= deadline)
			return false;
		usleep(10000);
	}
}

/* Device kinds first, API kinds last: a capture switches them on from the
 * end and off from the start, so the API records are on whenever kernel
 * records are. A launch made by another thread between the two would
 * otherwise reach XProf as a kernel with no launch to flow from (seen on
 * an H200 with JAX: one such kernel in most 200 ms captures). */
static const CUpti_ActivityKind kinds[] = {
	CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMCPY2,
	CUPTI_ACTIVITY_KIND_MEMSET,            CUPTI_ACTIVITY_KIND_MEMORY2, CUPTI_ACTIVITY_KIND_OVERHEAD,
	CUPTI_ACTIVITY_KIND_DRIVER,            CUPTI_ACTIVITY_KIND_RUNTIME,
};

/* Switch off at the source the API records the converter would throw away
 * (cuCtxGetCurrent, cudaGetDevice, ... run every few µs in frameworks).
 * The verdicts come from the callback names once per process. */
static void filter_api_records(void)
{
	static const struct {
		CUpti_CallbackDomain domain;
		uint32_t size;
	} dom[2] = { { CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_SIZE },
		     { CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_SIZE } };

	if (!g.C.cuptiActivityEnableDriverApi || !g.C.cuptiActivityEnableRuntimeApi ||
	    g.C.version < CUPTI_PER_API_SWITCH)
		return; /* before CUDA 12.5: the converter drops them instead */
	for (int d = 0; d < 2; d++) {
		for (uint32_t cbid = 1; cbid < dom[d].size; cbid++) {
			const char *n = NULL;

			if (!g.api_filter_known &&
			    (g.C.cuptiGetCallbackName(dom[d].domain, cbid, &n) != CUPTI_SUCCESS ||
			     !agent_conv_api_wanted(n)))
				g.api_off[d][cbid / 8] |= (uint8_t)(1u << (cbid % 8));
			if (!(g.api_off[d][cbid / 8] & (1u << (cbid % 8))))
				continue;
			if (d == 0)
				g.C.cuptiActivityEnableDriverApi(cbid, 0);
			else
				g.C.cuptiActivityEnableRuntimeApi(cbid, 0);
		}
	}
	g.api_filter_known = true;
}

/* Before any buffer is registered (CUPTI reads both then): one buffer
 * stream for the process instead of one per CUDA-calling thread (JAX and
 * NCCL run dozens; each would hold a slab), and slabs we zero ourselves,
 * off the application threads. */
static void set_buffer_attributes(void)
{
	uint8_t per_thread = 0, zeroed = 1;
	size_t n = sizeof(uint8_t);

	g.C.cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER, &n, &per_thread);
	n = sizeof(uint8_t);
	g.C.cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, &n, &zeroed);
}

/*
 * The buffer canary: a driver call of the agent thread (cuDriverGetVersion:
 * no side effect; an H200 with CUPTI 13.0 records it, tests/gpu/
 * cupti-probe.cc), traced while the API kinds are on, when a capture starts
 * and at each sync point after. Its records must come back in profd's
 * buffers (the converter counts and drops them, agent_conv.canary_*). A
 * profiler in the job that flushes CUPTI and then registers its own buffer
 * callbacks during the capture gets every record from then on with no
 * buffer of profd's left out to miss: the first canary came back, a later
 * one (each window's FLUSH and the STOP send one) did not, and the capture
 * says so instead of ending short in silence (canary_lost()). Agent thread.
 */
static void canary_send(void)
{
	const uint32_t cbid = CUPTI_DRIVER_TRACE_CBID_cuDriverGetVersion;
	bool off = g.api_off[0][cbid / 8] & (1u << (cbid % 8));
	int v;

	if (!g.canary_call || !g.driver_records || !cupti_usable())
		return;
	g.cv.canary_tid = (uint32_t)gettid();
	if (off)
		g.C.cuptiActivityEnableDriverApi(cbid, 1);
	g.canary_call(&v);
	if (off)
		g.C.cuptiActivityEnableDriverApi(cbid, 0);
	g.canaries++;
}

/* After a settle: a canary came back and a later one did not. Said once a
 * capture (told_lost). */
static bool canary_lost(void)
{
	if (g.told_lost || !g.cv.canary_seen || g.cv.canary_seen >= g.canaries || !cupti_usable())
		return false;
	g.told_lost = true;
	return true;
}

static void detach(void);

/* Can this capture use CUPTI at all? Says why not. */
static bool cupti_ready(void)
{
	char ver[48];

	if (!g.cupti_ok && g.cupti_err == -EPROTO) {
		cupti_version_text(g.C.version, ver, sizeof(ver));
		send_error(AGENT_ERR_VERSION, 0,
			   "no usable CUPTI: found CUPTI %s, whose records this agent cannot read (it reads "
			   "CUDA 13); set PROFD_CUPTI_PATH to a CUDA 13 libcupti.so.13. %s", ver, g.cupti_why);
		return false;
	}
	if (!g.cupti_ok) {
		send_error(AGENT_ERR_NO_CUPTI, 0,
			   "no usable CUPTI found; set PROFD_CUPTI_PATH to a CUDA 13 libcupti.so.13. %s",
			   g.cupti_why);
		return false;
	}
	if (!g.untested_told && (g.C.version < CUPTI_TESTED_MIN || g.C.version > CUPTI_TESTED_MAX)) {
		g.untested_told = true;
		cupti_version_text(g.C.version, ver, sizeof(ver));
		send_error(AGENT_ERR_NOTICE, 0, "CUPTI %s (%s) is not a version this agent was tested with "
			   "(13.0); tracing goes on", ver, g.C.path);
	}
	return true;
}

static void capture_start(void)
{
	CUpti_SubscriberParams sp = { .structSize = CUpti_SubscriberParams_STRUCT_SIZE };
	char other[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN + 64] = "";
	CUptiResult r;
	int e;

	if (atomic_load(&g.capturing) || atomic_load(&g.dead) || !cupti_ready())
		return;
	if (g.finalizing) {
		if (!atomic_load(&g.finalize_done)) {
			send_error(AGENT_ERR_NOTICE, 0, "no GPU data: the previous capture's cuptiFinalize has "
				   "not returned yet (a CUDA call blocked, e.g. in a collective)");
			return;
		}
		g.finalizing = false;
		slabs_unmap(); /* CUPTI is gone: the slabs it kept are ours again */
	}
	if (g.subscribed) {
		/* A previous detach is still pending: finish it first. */
		detach();
		if (g.subscribed || g.finalizing)
			return;
	}
	e = slabs_map();
	if (e < 0) {
		send_error(AGENT_ERR_CUPTI, e, "out of memory for activity buffers");
		return;
	}
	sp.subscriberName = "profd";
	sp.oldSubscriberName = other;
	sp.oldSubscriberSize = sizeof(other);
	if (g.C.cuptiSubscribe_v2 && g.C.version >= CUPTI_V13_MIN)
		r = g.C.cuptiSubscribe_v2(&g.sub, (CUpti_CallbackFunc)api_callback, NULL, &sp);
	else /* CUDA 12: no name of the other subscriber */
		r = g.C.cuptiSubscribe(&g.sub, (CUpti_CallbackFunc)api_callback, NULL);
	if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
		send_error(AGENT_ERR_BUSY, (int32_t)r, "%s", other[0] ? other : "another CUPTI client");
		return;
	}
	if (r != CUPTI_SUCCESS) {
		report_cupti("cuptiSubscribe", r);
		return;
	}
	g.subscribed = true;
	atomic_store(&g.finalized, 0);
	g.C.cuptiEnableCallback(1, g.sub, CUPTI_CB_DOMAIN_STATE, CUPTI_CBID_STATE_FATAL_ERROR);
	g.C.cuptiSetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);
	set_buffer_attributes();
	memset(&g.stats, 0, sizeof(g.stats));
	g.cut = 0;
	g.canaries = 0;
	g.cv.canary_seen = 0;
	g.told_lost = false;
	g.told_foreign = g.told_graph = g.told_nvtx = 0;
	atomic_store(&g.foreign, 0);
	g.cv.records = g.cv.converted = g.cv.skipped = g.cv.unknown = g.cv.emit_failed = 0;
	g.cv.graph_kernels = g.cv.graph_launches = 0;
	pthread_mutex_lock(&g.lock);
	g.declined = 0;
	g.accepting = true;
	pthread_mutex_unlock(&g.lock);
	r = g.C.cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
	if (r != CUPTI_SUCCESS) {
		report_cupti("cuptiActivityRegisterCallbacks", r);
		g.C.cuptiUnsubscribe(g.sub);
		g.subscribed = false;
		return;
	}
	g.sessions++;
	{
		size_t before = 0; /* records CUPTI dropped outside captures (declined on purpose) */

		g.C.cuptiActivityGetNumDroppedRecords(NULL, 0, &before);
	}
	send_clock(AGENT_CLOCK_START);
	send_mem_state();
	/* NVTX on before the kinds: GPU work traced from here on finds its ranges. */
	agent_nvtx_enable(g.opts.flags & AGENT_START_NVTX);
	g.nvtx_domains = false;
	agent_nvtx_following(0);
	agent_nvtx_capture(g.C.cuptiGetTimestamp);
	g.driver_records = false;
	for (size_t i = ARRAY_SIZE(kinds); i-- > 0;) { /* API kinds first (see kinds[]) */
		r = g.C.cuptiActivityEnable(kinds[i]);
		if (r == CUPTI_SUCCESS && kinds[i] == CUPTI_ACTIVITY_KIND_DRIVER)
			g.driver_records = true;
		if (r == CUPTI_SUCCESS || kinds[i] != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
			continue; /* a missing optional kind only narrows the trace */
		/* Without kernels there is no point: undo everything. */
		report_cupti("cuptiActivityEnable(CONCURRENT_KERNEL)", r);
		agent_nvtx_capture(NULL);
		for (size_t j = i + 1; j < ARRAY_SIZE(kinds); j++)
			g.C.cuptiActivityDisable(kinds[j]);
		settle(UINT64_MAX, STOP_SETTLE_MS);
		pthread_mutex_lock(&g.lock);
		g.accepting = false;
		pthread_mutex_unlock(&g.lock);
		g.C.cuptiUnsubscribe(g.sub);
		g.subscribed = false;
		g.sub = NULL;
		return;
	}
	filter_api_records();
	canary_send();
	g.graph_trace = g.graph_told = false;
	graphs_follow();
	graphs_apply_options();
	atomic_store(&g.capturing, 1);
	nvtx_follow();
	pm_apply_options(&g.opts, g.devs, g.n_devs);
}

static void send_stats(void)
{
	size_t dropped = 0;

	/* Never called with g.lock held: CUPTI may call back into us. */
	if (cupti_usable() && g.C.cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped) == CUPTI_SUCCESS)
		g.stats.dropped_records += dropped;
	g.stats.records = g.cv.converted;
	g.stats.unknown_records = g.cv.unknown;
	pthread_mutex_lock(&g.lock);
	g.stats.dropped_buffers = g.declined + g.cv.emit_failed;
	pthread_mutex_unlock(&g.lock);
	g.stats.cut_records = g.cut;
	g.stats.foreign_buffers = atomic_load(&g.foreign);
	agent_client_send(&g.cl, AGENT_FRAME_STATS, &g.stats, sizeof(g.stats));
}

static void send_notices(unsigned held, bool lost);

/* A window closes: everything CUPTI holds from before now, complete. */
static void capture_flush(uint64_t token)
{
	struct agent_flush f = { .token = token };

	if (atomic_load(&g.capturing) && cupti_usable()) {
		uint64_t seq;

		pm_decode(); /* the window's counter samples up to now */
		canary_send();
		pthread_mutex_lock(&g.lock);
		seq = g.hand_seq;
		pthread_mutex_unlock(&g.lock);
		settle(seq, FLUSH_SETTLE_MS);
		send_stats();
		send_notices(0, canary_lost());
	}
	agent_client_send(&g.cl, AGENT_FRAME_FLUSHED, &f, sizeof(f));
}

/* Limits of this capture the user should read about: at each window's
 * FLUSH (so that window shows them) and at STOP; each said once a capture. */
static void send_notices(unsigned held, bool lost)
{
	struct agent_nvtx_counts nc;
	char ver[48];

	agent_nvtx_counts(&nc);
	if ((nc.dropped || nc.strings_dropped) && !g.told_nvtx++)
		send_error(AGENT_ERR_NOTICE, 0,
			   "NVTX: %llu ranges or launch stacks beyond the budget (%u queued per 100 ms, %u a "
			   "capture) were dropped; %llu range names beyond the string budget (%u names, %u "
			   "MiB) are shown as a placeholder",
			   (unsigned long long)nc.dropped, AGENT_NVTX_QUEUE, AGENT_NVTX_MAX_PER_CAPTURE,
			   (unsigned long long)nc.strings_dropped, AGENT_NVTX_MAX_STRINGS,
			   AGENT_NVTX_MAX_STRING_BYTES >> 20);

	if (g.cut)
		send_error(AGENT_ERR_NOTICE, 0,
			   "%llu CUPTI buffer(s) still held records of GPU work running %d ms after the capture "
			   "ended; a forced flush cut them there (the records from that point on are lost)",
			   (unsigned long long)g.cut, STOP_SETTLE_MS);
	if (held)
		send_error(AGENT_ERR_FOREIGN, 0,
			   "another profiler in this process took over CUPTI's activity buffers during the "
			   "capture (%u of profd's were never returned); GPU records after that are missing",
			   held);
	else if (lost)
		send_error(AGENT_ERR_FOREIGN, 0,
			   "another profiler in this process (e.g. PyTorch's) took over CUPTI's activity buffers "
			   "during the capture; GPU records from then on went to it and are missing here");
	else if (atomic_load(&g.foreign) && !g.told_foreign++)
		send_error(AGENT_ERR_NOTICE, 0,
			   "another profiler in this process (e.g. PyTorch's) was using CUPTI's activity "
			   "buffers; profd took them over for this capture, so that profiler's trace has a gap");
	if (g.cv.graph_kernels && g.sessions > 1 && g.C.version < CUPTI_GRAPH_CORR_FIXED && !g.told_graph++) {
		cupti_version_text(g.C.version, ver, sizeof(ver));
		send_error(AGENT_ERR_NOTICE, 0,
			   "CUDA graph kernels may link to the wrong launches: CUPTI %s mislabels cudaGraphLaunch "
			   "correlation ids after a process's first profiling session (fixed in CUDA 13.1 Update 1)",
			   ver);
	}
}

/* Unsubscribe from the agent thread and leave CUPTI initialised (@why it
 * cannot be finalized). CUPTI may still hold slabs: they stay its own
 * (never handed out again) until it returns them; the rest are reused. */
static void detach_without_finalize(const char *why)
{
	g.C.cuptiEnableDomain(0, g.sub, CUPTI_CB_DOMAIN_DRIVER_API);
	g.C.cuptiEnableDomain(0, g.sub, CUPTI_CB_DOMAIN_RUNTIME_API);
	g.C.cuptiUnsubscribe(g.sub);
	g.sub = NULL;
	g.subscribed = false;
	send_error(AGENT_ERR_NOT_FINALIZED, 0,
		   "%s: CUPTI unsubscribed but not finalized (some overhead may remain until the next "
		   "capture%s)", why,
		   g.C.version == CUPTI_V13_MIN ? "; CUPTI 13.0 keeps kernel tracing on until then" : "");
}

/* Wait for an API exit callback to unsubscribe + finalize; without one in
 * CLAIM_WAIT_MS, unsubscribe here and leave CUPTI initialised. */
static void detach(void)
{
	uint64_t deadline = agent_mono_ns() + CLAIM_WAIT_MS * 1000000ull;
	int armed = DETACH_ARMED;

	if (!g.subscribed)
		return;
	if (!cupti_usable()) {
		/* CUPTI died (fatal error) or exit is under way: nothing to detach
		 * from; keep the slabs, CUPTI may still point at them. */
		g.subscribed = false;
		g.sub = NULL;
		return;
	}
	if (g.C.version < CUPTI_FINALIZE_OK) {
		detach_without_finalize("CUPTI before 12.6 can crash finalizing in jobs that use CUDA graphs");
		return;
	}
	atomic_store(&g.finalize_done, 0);
	/* Our enable calls first, then arm: the callback that claims the
	 * detach may run at once, and CUPTI wants one subscriber's Enable*
	 * calls serialised, and none after cuptiFinalize. */
	g.C.cuptiEnableDomain(1, g.sub, CUPTI_CB_DOMAIN_DRIVER_API);
	g.C.cuptiEnableDomain(1, g.sub, CUPTI_CB_DOMAIN_RUNTIME_API);
	atomic_store(&g.detach, DETACH_ARMED);
	while (atomic_load(&g.detach) == DETACH_ARMED && agent_mono_ns() < deadline &&
	       !atomic_load(&g.exiting)) {
		struct pollfd p = { .fd = g.efd, .events = POLLIN };
		uint64_t v;

		if (poll(&p, 1, 20) > 0 && read(g.efd, &v, sizeof(v)) < 0) {
			/* nothing */
		}
	}
	if (atomic_compare_exchange_strong(&g.detach, &armed, DETACH_IDLE)) {
		if (atomic_load(&g.exiting)) {
			g.subscribed = false;
			return; /* the process is exiting: CUDA tears itself down, CUPTI with it */
		}
		detach_without_finalize("no CUDA call came within 2000 ms after the capture");
		return;
	}
	/* A callback claimed it; finalize synchronises every context and can
	 * take long (a rank blocked in a collective). */
	g.subscribed = false;
	g.sub = NULL;
	atomic_store(&g.detach, DETACH_IDLE);
	deadline = agent_mono_ns() + FINALIZE_WAIT_MS * 1000000ull;
	while (!atomic_load(&g.finalize_done) && agent_mono_ns() < deadline && !atomic_load(&g.exiting))
		usleep(10000);
	if (!atomic_load(&g.finalize_done)) {
		/* Never free what CUPTI may still write: keep the slabs until it
		 * returns; the next capture checks. */
		g.finalizing = true;
		g.stats.flags |= AGENT_STATS_SLABS_LEAKED;
		send_error(AGENT_ERR_NOTICE, 0,
			   "cuptiFinalize did not return within %d ms (a CUDA call is blocked); the agent "
			   "keeps its activity buffers for CUPTI until it does",
			   FINALIZE_WAIT_MS);
		return;
	}
	slabs_unmap();
}

static void capture_stop(bool connected, bool do_detach)
{
	unsigned held = 0;
	bool lost;
	uint64_t seq;

	if (!atomic_load(&g.capturing))
		return;
	/* Counters first: their last samples go out before CLOCK (stop), and
	 * PM sampling is off before any cuptiFinalize. */
	if (cupti_usable())
		pm_stop();
	if (!atomic_load(&g.exiting))
		canary_send();
	for (size_t i = 0; i < ARRAY_SIZE(kinds) && cupti_usable(); i++) {
		/* CUPTI 13.0 GA could deadlock disabling CONCURRENT_KERNEL (fixed in
		 * 13.0 Update 1, API 130001); finalize turns it off anyway. */
		if (kinds[i] == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && g.C.version == CUPTI_V13_MIN)
			continue;
		g.C.cuptiActivityDisable(kinds[i]);
	}
	graphs_stop();
	/* Complete records first; force only what is still out after that.
	 * Slabs handed out later hold only kernels of a kind CUPTI 13.0 GA
	 * keeps on: not this capture's to wait for. */
	pthread_mutex_lock(&g.lock);
	seq = g.hand_seq;
	pthread_mutex_unlock(&g.lock);
	if (!settle(seq, atomic_load(&g.exiting) ? EXIT_WAIT_MS / 2 : STOP_SETTLE_MS) && cupti_usable()) {
		g.C.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
		drain();
		held = slabs_held(seq);
	}
	pthread_mutex_lock(&g.lock);
	g.accepting = false; /* kinds CUPTI keeps on must not fill our slabs */
	pthread_mutex_unlock(&g.lock);
	lost = !held && canary_lost();
	g.cv.canary_tid = 0;
	if (connected) {
		send_clock(AGENT_CLOCK_STOP);
		send_stats();
		send_notices(held, lost);
	}
	atomic_store(&g.capturing, 0);
	agent_nvtx_capture(NULL);
	if (do_detach)
		detach();
}

/* ---- the agent thread ------------------------------------------------------ */

static void on_connected(void)
{
	struct agent_hello h;

	if (!g.inventory)
		take_inventory();
	load_cupti();
	agent_client_hello(&h, g.n_devs);
	h.cuda_driver_version = g.driver_version;
	h.cuda_runtime_version = g.runtime_version;
	h.cupti_version = g.cupti_ok ? g.C.version : 0;
	h.flags |= AGENT_HELLO_NVTX;
	agent_conv_reset(&g.cv);
	agent_nvtx_forget_ids();
	g.cv.devs = g.devs;
	g.cv.n_devs = g.n_devs;
	if (agent_client_send(&g.cl, AGENT_FRAME_HELLO, &h, sizeof(h)) < 0)
		return;
	for (uint32_t i = 0; i < g.n_devs; i++)
		if (agent_client_send(&g.cl, AGENT_FRAME_DEVICE, &g.devs[i], sizeof(g.devs[i])) < 0)
			return;
}

/*
 * START's options (agent-proto.h, v4): a shorter START (an older profd)
 * reads as zeros. The first START of a capture starts it; a START while
 * capturing only changes the options (capture_options()).
 */
static void take_start_options(const struct agent_frame_hdr *h, const uint8_t *p)
{
	struct agent_start st;

	memset(&st, 0, sizeof(st));
	memcpy(&st, p, h->length < sizeof(st) ? h->length : sizeof(st));
	/* A profd before v4 sends no flags: it wants NVTX, as it always got. */
	if (h->length <= AGENT_START_V3_SIZE)
		st.flags = AGENT_START_NVTX;
	st.pm_metrics[sizeof(st.pm_metrics) - 1] = 0;
	g.opts = st;
}

/* NVTX collection on or off as START says; on mid-capture also starts the
 * launch stacks (nvtx_follow()). Off leaves the API callbacks enabled for
 * the rest of the capture: they only look at an empty stack then. */
static void nvtx_apply_options(void)
{
	agent_nvtx_enable(g.opts.flags & AGENT_START_NVTX);
	nvtx_follow();
}

/* The options changed while a capture runs: apply what can change now. */
static void capture_options(void)
{
	nvtx_apply_options();
	graphs_apply_options();
	if (cupti_usable())
		pm_apply_options(&g.opts, g.devs, g.n_devs);
}

static void handle_command(const struct agent_frame_hdr *h, const uint8_t *p)
{
	switch (h->kind) {
	case AGENT_FRAME_START:
		take_start_options(h, p);
		if (atomic_load(&g.capturing))
			capture_options();
		else
			capture_start();
		break;
	case AGENT_FRAME_STOP:
		capture_stop(true, true);
		break;
	case AGENT_FRAME_FLUSH: {
		struct agent_flush f = { 0 };

		if (h->length >= sizeof(f))
			memcpy(&f, p, sizeof(f));
		capture_flush(f.token);
		break;
	}
	}
}

static void *agent_main(void *arg)
{
	uint64_t next_flush = 0;

	(void)arg;
	agent_conv_init(&g.cv, emit_records, api_name, NULL);
	g.cv.demangle = demangle;
	g.cv.graph_launch = graph_launch_ids;
	agent_client_init(&g.cl, NULL, PROFD_AGENT_SOCKET_DEFAULT);
	while (!atomic_load(&g.dead)) {
		struct pollfd p[2] = { { .fd = g.efd, .events = POLLIN }, { .fd = -1 } };
		int timeout = 1000, n;

		if (atomic_load(&g.exiting)) {
			/* Process exit: flush and send, but no detach dance. */
			capture_stop(g.cl.fd >= 0, false);
			atomic_store(&g.exit_done, 1);
			break;
		}
		if (g.cl.fd < 0) {
			if (atomic_load(&g.capturing))
				capture_stop(false, true); /* profd went away: never trace unobserved */
			if (agent_client_connect(&g.cl) == 0)
				on_connected();
		}
		if (g.cl.fd >= 0) {
			p[1].fd = g.cl.fd;
			p[1].events = POLLIN;
		} else {
			timeout = 200;
		}
		if (atomic_load(&g.capturing))
			timeout = FLUSH_PERIOD_MS;
		n = poll(p, 2, timeout);
		if (n < 0 && errno != EINTR)
			break;
		if (p[0].revents & POLLIN) {
			uint64_t v;

			if (read(g.efd, &v, sizeof(v)) < 0) {
				/* nothing to do: another wake will come */
			}
			drain();
		}
		if (g.cl.fd >= 0 && (p[1].revents & (POLLIN | POLLHUP | POLLERR))) {
			struct agent_frame_hdr h;
			uint8_t payload[sizeof(struct agent_start)];
			int r;

			while ((r = agent_client_recv(&g.cl, &h, payload, sizeof(payload))) > 0)
				handle_command(&h, payload);
		}
		if (atomic_load(&g.capturing) && cupti_usable() && agent_mono_ns() >= next_flush) {
			pm_decode();
			g.C.cuptiActivityFlushAll(0);
			drain();
			next_flush = agent_mono_ns() + FLUSH_PERIOD_MS * 1000000ull;
		}
	}
	/* CUPTI died (fatal error) or the process is exiting: let profd know
	 * by closing; a forked child never gets here (no agent thread). */
	if (!atomic_load(&g.exiting))
		agent_client_close(&g.cl);
	return NULL;
}

/* ---- process hooks ---------------------------------------------------------- */

static void on_fork_child(void)
{
	/* Only the forking thread exists here; CUDA is unusable; stay out. */
	atomic_store(&g.dead, 1);
	if (g.cl.fd >= 0)
		close(g.cl.fd);
	g.cl.fd = -1;
	if (g.efd >= 0)
		close(g.efd);
	g.efd = -1;
}

static void on_exit_hook(void)
{
	uint64_t deadline;

	if (atomic_load(&g.dead))
		return;
	atomic_store(&g.exiting, 1);
	wake();
	if (atomic_load(&g.capturing)) {
		/* A capture is live: let the agent thread flush what it has, briefly. */
		deadline = agent_mono_ns() + EXIT_WAIT_MS * 1000000ull;
		while (!atomic_load(&g.exit_done) && agent_mono_ns() < deadline)
			usleep(2000);
	}
	/* Whatever the agent thread is doing, it makes no CUPTI call from now
	 * on: the atexit handlers and destructors that follow unload CUDA. */
	atomic_store(&g.too_late, 1);
}

static void init_once(void)
{
	pthread_attr_t a;
	sigset_t all, old;
	pthread_t t;

	g.efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (g.efd < 0)
		return;
	pthread_atfork(NULL, NULL, on_fork_child);
	agent_nvtx_on_attach(wake);
	atexit(on_exit_hook);
	/* The agent thread takes no signals: the application's handlers keep
	 * running on its own threads. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &a, agent_main, NULL) == 0)
		pthread_setname_np(t, "profd-agent");
	pthread_attr_destroy(&a);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* Called by CUDA from inside the first cuInit when CUDA_INJECTION64_PATH
 * names this library. Never fails: problems are reported to profd. */
EXPORT int InitializeInjection(void);
EXPORT int InitializeInjection(void)
{
	/* Before the job's first NVTX call, with luck: see nvtx.h. */
	agent_nvtx_setup();
	pthread_once(&g.once, init_once);
	return 1;
}
