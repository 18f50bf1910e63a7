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
 *              socket; HELLO + DEVICE frames sent; CUPTI untouched, so CUDA
 *              calls cost nothing extra and no subscriber slot is held.
 *   START      subscribe, register buffer callbacks, anchor clocks, enable
 *              activity kinds (kernels, copies incl. peer, memsets, memory
 *              alloc/free, overhead, driver + runtime API records).
 *   capturing  every 100 ms cuptiActivityFlushAll(0); completed buffers are
 *              queued by CUPTI's callbacks (a mutex held for a few
 *              instructions, never across a CUPTI call) and converted +
 *              sent here. A full pool or a slow daemon drops whole buffers
 *              and counts them; CUDA threads never wait for the socket.
 *   FLUSH      forced flush, drain, FLUSHED.
 *   STOP       disable kinds, forced flush, drain, STATS, then detach:
 *              cuptiUnsubscribe + cuptiFinalize from the exit side of the
 *              next driver/runtime API callback (the only safe place,
 *              reference/cupti-agent.md §2.2); if no CUDA call happens
 *              within 2 s, detach without finalize and report it.
 *
 * Driver calls (device inventory) use the libcuda the process has already
 * loaded, found with dlopen(RTLD_NOLOAD); the agent links only CUPTI.
 * Kernel names are demangled here, with the C++ runtime's __cxa_demangle
 * (libstdc++, loaded on first use if the job has not): the job's own
 * names, in the job's own process, so profd never demangles what a
 * socket sent it.
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
#include <time.h>
#include <unistd.h>

#include <cuda.h>
#include <cupti.h>

#include "agent-conn.h"
#include "agent-proto.h"
#include "convert.h"

#define EXPORT __attribute__((visibility("default")))

#ifndef PROFD_AGENT_SOCKET_DEFAULT
#define PROFD_AGENT_SOCKET_DEFAULT "/run/profd/agent.sock"
#endif

#define BUF_SIZE (4u << 20)
#define BUF_COUNT 32u /* at most 128 MiB of activity buffers, during a capture only */
#define FLUSH_PERIOD_MS 100
#define FINALIZE_WAIT_MS 2000
#define EXIT_WAIT_MS 200

struct done_buf {
	uint8_t *buf;
	size_t valid;
};

static struct agent {
	pthread_once_t once;
	int efd; /* wakes the agent thread */
	atomic_int dead;    /* forked child: never touch CUDA/CUPTI */
	atomic_int exiting; /* atexit: flush once, then stop */
	atomic_int exit_done;
	atomic_int too_late; /* exit is tearing CUDA down: no more CUPTI calls */

	struct agent_client cl;
	struct agent_conv cv;
	bool hello_sent;

	/* inventory */
	bool inventory;
	uint32_t n_devs;
	struct agent_device devs[AGENT_MAX_DEVICES];
	uint32_t driver_version, runtime_version, cupti_version;

	/* capture */
	atomic_int capturing;
	CUpti_SubscriberHandle sub;
	bool subscribed;
	atomic_int finalize_pending; /* 1: the next API exit callback detaches */
	atomic_int finalize_done;
	struct agent_stats stats;

	/* buffer pool and completed queue (guarded by lock) */
	pthread_mutex_t lock;
	uint8_t *pool[BUF_COUNT];
	uint32_t n_free;
	struct done_buf done[BUF_COUNT];
	uint32_t n_done;
	uint8_t *slabs[BUF_COUNT];
	atomic_ullong declined; /* buffer requests we could not serve */
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
	return !atomic_load(&g.dead) && !atomic_load(&g.too_late);
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

static const char *cupti_str(CUptiResult r)
{
	const char *s = NULL;

	if (cuptiGetResultString(r, &s) != CUPTI_SUCCESS || !s)
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
			   g.cupti_version, g.driver_version);
	else
		send_error(AGENT_ERR_CUPTI, (int32_t)r, "%s: %s (%d)", call, cupti_str(r), (int)r);
}

/* ---- driver inventory (agent thread, after cuInit) ------------------------ */

typedef CUresult (*fn_int)(int *);
typedef CUresult (*fn_dev_get)(CUdevice *, int);
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
	void *f = dlsym(RTLD_DEFAULT, "cudaRuntimeGetVersion");

	for (size_t i = 0; !f && i < sizeof(names) / sizeof(names[0]); i++) {
		void *h = dlopen(names[i], RTLD_NOW | RTLD_NOLOAD);

		if (h) {
			f = dlsym(h, "cudaRuntimeGetVersion");
			dlclose(h); /* drops only the reference NOLOAD took */
		}
	}
	return (fn_rt_ver)f;
}

static void take_inventory(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	fn_int drv_ver, count;
	fn_dev_get get;
	fn_attr ga;
	fn_name gname;
	fn_uuid guuid;
	fn_mem gmem;
	fn_rt_ver rt;
	uint32_t v;
	int n = 0;

	if (!h)
		h = dlopen("libcuda.so.1", RTLD_NOW);
	if (!h)
		return;
	drv_ver = (fn_int)dlsym(h, "cuDriverGetVersion");
	count = (fn_int)dlsym(h, "cuDeviceGetCount");
	get = (fn_dev_get)dlsym(h, "cuDeviceGet");
	ga = (fn_attr)dlsym(h, "cuDeviceGetAttribute");
	gname = (fn_name)dlsym(h, "cuDeviceGetName");
	guuid = (fn_uuid)dlsym(h, "cuDeviceGetUuid_v2");
	gmem = (fn_mem)dlsym(h, "cuDeviceTotalMem_v2");
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
	if (cuptiGetVersion(&v) == CUPTI_SUCCESS)
		g.cupti_version = v;
	if (n > (int)AGENT_MAX_DEVICES)
		n = AGENT_MAX_DEVICES;
	for (int i = 0; i < n; i++) {
		struct agent_device *d = &g.devs[g.n_devs];
		CUdevice dev;
		CUuuid u;
		size_t mem = 0;
		int dom, bus, slot;
		unsigned char *b = (unsigned char *)u.bytes;

		if (get(&dev, i) != CUDA_SUCCESS)
			continue;
		memset(d, 0, sizeof(*d));
		d->local_ordinal = (uint32_t)i;
		if (guuid(&u, dev) == CUDA_SUCCESS)
			snprintf(d->uuid, sizeof(d->uuid),
				 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
				 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11],
				 b[12], b[13], b[14], b[15]);
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
		/* DDR: two transfers per clock (as XLA computes it). */
		d->mem_bandwidth = 2ull * d->mem_clock_khz * 1000ull * d->bus_width_bits / 8;
		g.n_devs++;
	}
	g.inventory = true;
}

/* ---- CUPTI callbacks (any thread; no locks across CUPTI calls) ------------- */

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
	uint8_t *b = NULL;

	pthread_mutex_lock(&g.lock);
	if (g.n_free)
		b = g.pool[--g.n_free];
	pthread_mutex_unlock(&g.lock);
	if (!b)
		atomic_fetch_add(&g.declined, 1); /* CUPTI >= 12.9 accepts a declined buffer */
	*buffer = b;
	*size = b ? BUF_SIZE : 0;
	*max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
				      size_t valid)
{
	(void)ctx;
	(void)stream;
	(void)size;
	if (!buffer)
		return;
	pthread_mutex_lock(&g.lock);
	if (g.n_done < BUF_COUNT)
		g.done[g.n_done++] = (struct done_buf){ buffer, valid };
	pthread_mutex_unlock(&g.lock);
	wake();
}

/* Detach from the exit side of an API call: the one place the CUPTI guide
 * allows cuptiFinalize without the caller synchronising everything. */
static void CUPTIAPI api_callback(void *ud, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
				  const void *data)
{
	const CUpti_CallbackData *cb = data;
	int one = 1;

	(void)ud;
	(void)cbid;
	if (atomic_load(&g.dead))
		return; /* a forked child: the detach belongs to the parent */
	if (domain == CUPTI_CB_DOMAIN_STATE) {
		/* CUPTI hit a fatal error and finalizes itself: never touch it again. */
		atomic_store(&g.dead, 1);
		return;
	}
	if ((domain != CUPTI_CB_DOMAIN_DRIVER_API && domain != CUPTI_CB_DOMAIN_RUNTIME_API) ||
	    cb->callbackSite != CUPTI_API_EXIT)
		return;
	if (!atomic_compare_exchange_strong(&g.finalize_pending, &one, 0))
		return;
	cuptiEnableDomain(0, g.sub, CUPTI_CB_DOMAIN_DRIVER_API);
	cuptiEnableDomain(0, g.sub, CUPTI_CB_DOMAIN_RUNTIME_API);
	cuptiUnsubscribe(g.sub);
	cuptiFinalize();
	atomic_store(&g.finalize_done, 1);
	wake();
}

static const char *api_name(void *ud, uint32_t domain, uint32_t cbid)
{
	const char *n = NULL;

	(void)ud;
	if (cuptiGetCallbackName(domain == AGENT_API_DRIVER ? CUPTI_CB_DOMAIN_DRIVER_API :
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
		fn = (cxa_demangle_fn)(h ? dlsym(h, "__cxa_demangle") : dlsym(RTLD_DEFAULT, "__cxa_demangle"));
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

		if (!cupti_usable() || cuptiGetTimestamp(&c) != CUPTI_SUCCESS)
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

/* Convert and send every completed buffer; return them to the pool. */
static void drain(void)
{
	for (;;) {
		struct done_buf d;
		CUpti_Activity *rec = NULL;

		pthread_mutex_lock(&g.lock);
		if (!g.n_done) {
			pthread_mutex_unlock(&g.lock);
			break;
		}
		d = g.done[0];
		memmove(&g.done[0], &g.done[1], (g.n_done - 1) * sizeof(g.done[0]));
		g.n_done--;
		pthread_mutex_unlock(&g.lock);

		g.stats.buffers++;
		while (cupti_usable() &&
		       cuptiActivityGetNextRecord(d.buf, d.valid, &rec) == CUPTI_SUCCESS) {
			agent_conv_record(&g.cv, rec);
			if (rec->kind == CUPTI_ACTIVITY_KIND_OVERHEAD)
				free(((CUpti_ActivityOverhead3 *)rec)->overheadData);
		}
		pthread_mutex_lock(&g.lock);
		g.pool[g.n_free++] = d.buf;
		pthread_mutex_unlock(&g.lock);
	}
	agent_conv_flush(&g.cv);
}

static const CUpti_ActivityKind kinds[] = {
	CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMCPY2,
	CUPTI_ACTIVITY_KIND_MEMSET,            CUPTI_ACTIVITY_KIND_MEMORY2, CUPTI_ACTIVITY_KIND_OVERHEAD,
	CUPTI_ACTIVITY_KIND_DRIVER,            CUPTI_ACTIVITY_KIND_RUNTIME,
};

static bool pool_alloc(void)
{
	for (uint32_t i = 0; i < BUF_COUNT; i++) {
		if (!g.slabs[i] && posix_memalign((void **)&g.slabs[i], 8, BUF_SIZE) != 0)
			return false;
		g.pool[i] = g.slabs[i];
	}
	g.n_free = BUF_COUNT;
	g.n_done = 0;
	return true;
}

static void pool_release(void)
{
	pthread_mutex_lock(&g.lock);
	g.n_free = 0;
	g.n_done = 0;
	pthread_mutex_unlock(&g.lock);
	for (uint32_t i = 0; i < BUF_COUNT; i++) {
		free(g.slabs[i]);
		g.slabs[i] = NULL;
	}
}

static void detach(void);

static void capture_start(void)
{
	CUpti_SubscriberParams sp = { .structSize = CUpti_SubscriberParams_STRUCT_SIZE };
	char other[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN + 64] = "";
	CUptiResult r;
	uint32_t v = 0;

	if (atomic_load(&g.capturing) || atomic_load(&g.dead))
		return;
	if (g.subscribed) {
		/* A previous detach is still pending: finish it first. */
		detach();
		if (g.subscribed)
			return;
	}
	r = cuptiGetVersion(&v);
	if (r != CUPTI_SUCCESS) {
		report_cupti("cuptiGetVersion", r);
		return;
	}
	g.cupti_version = v;
	if (!pool_alloc()) {
		send_error(AGENT_ERR_CUPTI, -ENOMEM, "out of memory for activity buffers");
		pool_release();
		return;
	}
	sp.subscriberName = "profd";
	sp.oldSubscriberName = other;
	sp.oldSubscriberSize = sizeof(other);
	r = cuptiSubscribe_v2(&g.sub, (CUpti_CallbackFunc)api_callback, NULL, &sp);
	if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
		send_error(AGENT_ERR_BUSY, (int32_t)r, "%s", other[0] ? other : "another CUPTI client");
		pool_release();
		return;
	}
	if (r != CUPTI_SUCCESS) {
		report_cupti("cuptiSubscribe_v2", r);
		pool_release();
		return;
	}
	g.subscribed = true;
	cuptiEnableCallback(1, g.sub, CUPTI_CB_DOMAIN_STATE, CUPTI_CBID_STATE_FATAL_ERROR);
	cuptiSetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);
	r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
	if (r != CUPTI_SUCCESS) {
		report_cupti("cuptiActivityRegisterCallbacks", r);
		cuptiUnsubscribe(g.sub);
		g.subscribed = false;
		pool_release();
		return;
	}
	memset(&g.stats, 0, sizeof(g.stats));
	atomic_store(&g.declined, 0);
	g.cv.records = g.cv.converted = g.cv.skipped = g.cv.unknown = g.cv.emit_failed = 0;
	send_clock(AGENT_CLOCK_START);
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		r = cuptiActivityEnable(kinds[i]);
		if (r == CUPTI_SUCCESS || kinds[i] != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
			continue; /* a missing optional kind only narrows the trace */
		/* Without kernels there is no point: undo everything. */
		report_cupti("cuptiActivityEnable(CONCURRENT_KERNEL)", r);
		for (size_t j = 0; j < i; j++)
			cuptiActivityDisable(kinds[j]);
		cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
		drain();
		cuptiUnsubscribe(g.sub);
		g.subscribed = false;
		g.sub = NULL;
		pool_release();
		return;
	}
	atomic_store(&g.capturing, 1);
}

static void send_stats(void)
{
	size_t dropped = 0;

	/* Never called with g.lock held: CUPTI may call back into us. */
	if (cupti_usable() && cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped) == CUPTI_SUCCESS)
		g.stats.dropped_records += dropped;
	g.stats.records = g.cv.converted;
	g.stats.unknown_records = g.cv.unknown;
	g.stats.dropped_buffers = atomic_load(&g.declined) + g.cv.emit_failed;
	agent_client_send(&g.cl, AGENT_FRAME_STATS, &g.stats, sizeof(g.stats));
}

static void capture_flush(uint64_t token)
{
	struct agent_flush f = { .token = token };

	if (atomic_load(&g.capturing) && cupti_usable()) {
		cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
		drain();
		send_stats();
	}
	agent_client_send(&g.cl, AGENT_FRAME_FLUSHED, &f, sizeof(f));
}

/* Wait for an API exit callback to unsubscribe + finalize; without one in
 * FINALIZE_WAIT_MS, unsubscribe here and leave CUPTI initialised. */
static void detach(void)
{
	uint64_t deadline = agent_mono_ns() + FINALIZE_WAIT_MS * 1000000ull;
	int one = 1;

	if (!g.subscribed)
		return;
	if (!cupti_usable()) {
		/* CUPTI died (fatal error) or exit is under way: nothing to detach
		 * from; keep the slabs, CUPTI may still point at them. */
		g.subscribed = false;
		g.sub = NULL;
		return;
	}
	atomic_store(&g.finalize_done, 0);
	atomic_store(&g.finalize_pending, 1);
	cuptiEnableDomain(1, g.sub, CUPTI_CB_DOMAIN_DRIVER_API);
	cuptiEnableDomain(1, g.sub, CUPTI_CB_DOMAIN_RUNTIME_API);
	while (!atomic_load(&g.finalize_done) && agent_mono_ns() < deadline &&
	       !atomic_load(&g.exiting)) {
		struct pollfd p = { .fd = g.efd, .events = POLLIN };
		uint64_t v;

		if (poll(&p, 1, 20) > 0 && read(g.efd, &v, sizeof(v)) < 0) {
			/* nothing */
		}
	}
	if (atomic_load(&g.exiting) && atomic_compare_exchange_strong(&g.finalize_pending, &one, 0)) {
		/* The process is exiting: CUDA tears itself down, CUPTI with it. */
		return;
	}
	if (atomic_compare_exchange_strong(&g.finalize_pending, &one, 0)) {
		/* No CUDA call came: detach without finalize. */
		cuptiEnableDomain(0, g.sub, CUPTI_CB_DOMAIN_DRIVER_API);
		cuptiEnableDomain(0, g.sub, CUPTI_CB_DOMAIN_RUNTIME_API);
		cuptiUnsubscribe(g.sub);
		send_error(AGENT_ERR_NOT_FINALIZED, 0,
			   "no CUDA call within %d ms after the capture: CUPTI unsubscribed but not "
			   "finalized (some overhead may remain until the next capture)",
			   FINALIZE_WAIT_MS);
		/* CUPTI still exists: keep the slabs (reused by the next capture)
		 * rather than free memory it might still point at. */
		g.subscribed = false;
		g.sub = NULL;
		return;
	} else {
		/* The callback won; it finishes quickly (finalize syncs contexts). */
		for (int i = 0; i < 500 && !atomic_load(&g.finalize_done); i++)
			usleep(10000);
	}
	g.subscribed = false;
	g.sub = NULL;
	pool_release();
}

static void capture_stop(bool connected, bool do_detach)
{
	if (!atomic_load(&g.capturing))
		return;
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]) && cupti_usable(); i++) {
		/* CUPTI 13.0 GA could deadlock disabling CONCURRENT_KERNEL (fixed in
		 * 13.0 Update 1, API 130001); finalize turns it off anyway. */
		if (kinds[i] == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && g.cupti_version < 130001)
			continue;
		cuptiActivityDisable(kinds[i]);
	}
	if (cupti_usable())
		cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	drain();
	atomic_store(&g.capturing, 0);
	if (connected) {
		send_clock(AGENT_CLOCK_STOP);
		send_stats();
	}
	if (do_detach)
		detach();
}

/* ---- the agent thread ------------------------------------------------------ */

static void on_connected(void)
{
	struct agent_hello h;

	if (!g.inventory)
		take_inventory();
	agent_client_hello(&h, g.n_devs);
	h.cuda_driver_version = g.driver_version;
	h.cuda_runtime_version = g.runtime_version;
	h.cupti_version = g.cupti_version;
	agent_conv_reset(&g.cv);
	g.cv.devs = g.devs;
	g.cv.n_devs = g.n_devs;
	if (agent_client_send(&g.cl, AGENT_FRAME_HELLO, &h, sizeof(h)) < 0)
		return;
	for (uint32_t i = 0; i < g.n_devs; i++)
		if (agent_client_send(&g.cl, AGENT_FRAME_DEVICE, &g.devs[i], sizeof(g.devs[i])) < 0)
			return;
}

static void handle_command(const struct agent_frame_hdr *h, const uint8_t *p)
{
	switch (h->kind) {
	case AGENT_FRAME_START:
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
			uint8_t payload[64];
			int r;

			while ((r = agent_client_recv(&g.cl, &h, payload, sizeof(payload))) > 0)
				handle_command(&h, payload);
		}
		if (atomic_load(&g.capturing) && cupti_usable() && agent_mono_ns() >= next_flush) {
			cuptiActivityFlushAll(0);
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
	pthread_once(&g.once, init_once);
	return 1;
}
