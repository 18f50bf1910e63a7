/* SPDX-License-Identifier: MIT */
/*
 * fake-cuda-app.c - a "CUDA job" on a machine without a GPU: loads
 * $CUDA_INJECTION64_PATH and calls its InitializeInjection() as the CUDA
 * driver does inside cuInit, then makes CUDA calls as told on stdin, one
 * answer line each on stdout.
 *
 * The app does not link CUPTI, as a real job does not: its "driver" calls
 * reach the fake CUPTI (fake-cupti.c) only once something in the process
 * loaded it (the agent, through its search order, or the app's own
 * framework profiler below); before that they are plain calls.
 *
 *   launch N NAME DEV STREAM [DUR_NS]  N cudaLaunchKernel calls + their
 *                             kernels, each running DUR_NS (default 3 µs)
 *                             -> "launched N <wall ns before> <wall ns after>"
 *   graph N NAME DEV STREAM   N cudaGraphLaunch calls, one graph kernel each
 *   graphn NODES L NAME DEV STREAM [rt]  a new executable graph of NODES
 *                             kernel nodes launched L times by cuGraphLaunch
 *                             (rt: cudaGraphLaunch), each node 2 µs; with
 *                             graph-level tracing on, CUPTI records each
 *                             launch as a whole -> "graphn <exec id> <L>"
 *   threads T K NAME DEV      T threads, each launching K kernels on its own
 *                             stream (100 + thread) -> "threads <T*K>"
 *   memcpy N DEV BYTES        N cuMemcpyHtoDAsync_v2 + H2D copies -> "copied N"
 *   malloc DEV BYTES          cuMemAlloc_v2 + its MEMORY2 record -> "ptr 0x<hex>"
 *   mallocasync DEV BYTES     cuMemAllocAsync from the device's pool, on
 *                             stream 7 -> "ptr 0x<hex>"
 *   free 0x<hex>              cuMemFree_v2 -> "freed <bytes>"
 *   freeasync 0x<hex>         cuMemFreeAsync -> "freed <bytes>"
 *                             (both "error ..." for an address not live)
 *   memchurn N DEV BYTES      N malloc + free pairs, for budgets -> "churned N"
 *   busy MS                   cheap API calls (cuCtxGetCurrent) for MS ms,
 *                             as a training loop makes them -> "busy <calls>"
 *   sleep MS                  -> "slept"
 *   framework start|start-flushed|stop|state  a second CUPTI client in the
 *                             job (PyTorch's profiler, Kineto's way): registers
 *                             its own buffer callbacks and enables kernels,
 *                             without subscribing (start-flushed: after a forced
 *                             flush, so every buffer is back with its owner);
 *                             it loads CUPTI itself from $FAKE_APP_CUPTI when
 *                             nothing has yet
 *   fork                      fork; the child makes 100 API calls and exits
 *                             with the number of cuptiFinalize calls they
 *                             caused (must be 0) -> "child <that number>"
 *   fatal                     CUPTI hits a fatal error -> "fatal"
 *   nvtx push TEXT            nvtxRangePushA(TEXT), TEXT to the end of the
 *                             line, through NVTX v3 (fake-nvtx.c) -> "pushed <level>"
 *   nvtx pop                  nvtxRangePop() -> "popped <level>"
 *   nvtx bench N              N push+pop pairs -> "nvtx-bench <ns per pair>"
 *   nvtx domain NAME          nvtxDomainCreateA(NAME), as XLA decides whether
 *                             to emit ranges -> "domain 1" (a tool gave a
 *                             handle) or "domain 0" (NULL: no tool)
 *   nvtx dpush TEXT           in that domain, XLA's way: TEXT registered
 *                             (nvtxDomainRegisterStringA), then
 *                             nvtxDomainRangePushEx -> "pushed <level>"
 *   nvtx dpop                 nvtxDomainRangePop -> "popped <level>"
 *   state                     fake CUPTI's state, key=value pairs
 *   exit                      exit(0) at once (atexit handlers run)
 *   exit teardown             the same, and CUDA's own exit handler (one
 *                             registered before cuInit, so it runs after the
 *                             agent's) makes a driver call, as libcudart's
 *                             teardown does; it then prints "teardown " and
 *                             the state line (a finalize there is the agent's)
 * FAKE_APP_PRELOAD=1 loads $FAKE_APP_CUPTI before cuInit (a framework that
 * links CUPTI); FAKE_APP_NO_CUDART=1 skips loading libcudart.
 * First line: "ready <pid> <main tid>".
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cuda-abi.h"
#include "fake-cupti.h"
#include "nvtx-abi.h"

/* ---- the loaded CUPTI, found like the driver finds a tool's ---------------- */

static struct {
	void *h;
	__typeof__(fakecupti_api) *api;
	__typeof__(fakecupti_kernel) *kernel;
	__typeof__(fakecupti_memcpy) *memcpy_;
	__typeof__(fakecupti_memory) *memory;
	__typeof__(fakecupti_fatal) *fatal;
	__typeof__(fakecupti_get_state) *get_state;
	__typeof__(cuptiActivityRegisterCallbacks) *register_cb;
	__typeof__(cuptiActivityEnable) *enable;
	__typeof__(cuptiActivityDisable) *disable;
	__typeof__(cuptiActivityFlushAll) *flush;
	__typeof__(cuptiActivityGetNextRecord) *next;
	__typeof__(fakecupti_graph_instantiate) *graph_instantiate;
	__typeof__(fakecupti_graph_launch) *graph_launch;
	__typeof__(fakecupti_graph_run) *graph_run;
	__typeof__(cuptiGetGraphExecId) *graph_exec_id;
} cu;

#define SYM(name, fp)                                         \
	do {                                                  \
		void *s_ = dlsym(cu.h, (name));               \
		memcpy(&(fp), &s_, sizeof(s_));               \
	} while (0)

static void bind_cupti(void *h)
{
	cu.h = h;
	SYM("fakecupti_api", cu.api);
	SYM("fakecupti_kernel", cu.kernel);
	SYM("fakecupti_memcpy", cu.memcpy_);
	SYM("fakecupti_memory", cu.memory);
	SYM("fakecupti_fatal", cu.fatal);
	SYM("fakecupti_get_state", cu.get_state);
	SYM("cuptiActivityRegisterCallbacks", cu.register_cb);
	SYM("cuptiActivityEnable", cu.enable);
	SYM("cuptiActivityDisable", cu.disable);
	SYM("cuptiActivityFlushAll", cu.flush);
	SYM("cuptiActivityGetNextRecord", cu.next);
	SYM("fakecupti_graph_instantiate", cu.graph_instantiate);
	SYM("fakecupti_graph_launch", cu.graph_launch);
	SYM("fakecupti_graph_run", cu.graph_run);
	SYM("cuptiGetGraphExecId", cu.graph_exec_id);
}

/* The CUPTI the process has loaded, if any (the agent loads it lazily). */
static bool have_cupti(void)
{
	static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	void *h;

	if (cu.h)
		return true;
	pthread_mutex_lock(&m);
	if (!cu.h && (h = dlopen("libcupti.so.13", RTLD_NOW | RTLD_NOLOAD)))
		bind_cupti(h);
	pthread_mutex_unlock(&m);
	return cu.h != NULL;
}

static uint32_t api(CUpti_CallbackDomain d, CUpti_CallbackId cbid, const char *fname)
{
	return have_cupti() ? cu.api(d, cbid, fname) : 0;
}

static void kernel(uint32_t corr, uint32_t dev, uint32_t stream, const char *name, uint64_t dur,
		   uint32_t graph)
{
	if (have_cupti())
		cu.kernel(corr, dev, stream, name, dur, graph);
}

/* graphn: one executable graph of @nodes kernel nodes launched @launches
 * times, by the driver's cuGraphLaunch or (@rt) the runtime's
 * cudaGraphLaunch. Returns the graph's exec id (0 without CUPTI). */
static uint32_t graph_launches(unsigned nodes, unsigned launches, const char *name, uint32_t dev,
			       uint32_t stream, bool rt)
{
	CUgraphExec exec;
	uint32_t id = 0;

	if (!have_cupti())
		return 0;
	/* The fake CUPTI holds a fixed number of executable graphs: past it a
	 * test would launch nothing and not know it, so stop loudly. */
	if (!(exec = cu.graph_instantiate())) {
		fprintf(stderr, "fake-cuda-app: graphn: the fake CUPTI's limit of executable graphs "
			"(64 per process) is reached; nothing launched\n");
		exit(3);
	}
	cu.graph_exec_id(exec, &id);
	for (unsigned i = 0; i < launches; i++) {
		uint32_t c = rt ? cu.graph_launch(CUPTI_CB_DOMAIN_RUNTIME_API,
						  CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
						  "cudaGraphLaunch_v10000", exec, NULL)
				: cu.graph_launch(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,
						  "cuGraphLaunch", exec, NULL);

		cu.graph_run(c, dev, stream, exec, nodes, name, 2000);
	}
	return id;
}

static uint64_t now_ns(clockid_t c)
{
	struct timespec t;

	clock_gettime(c, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* Kernel names live as long as the program, like a loaded module's. */
static const char *keep_name(const char *s)
{
	static char *names[64];
	static unsigned n;

	for (unsigned i = 0; i < n; i++)
		if (strcmp(names[i], s) == 0)
			return names[i];
	if (n == 64)
		return "too_many_names";
	names[n] = strdup(s);
	return names[n] ? names[n++] : "oom";
}

static int inject(void)
{
	const char *path = getenv("CUDA_INJECTION64_PATH");
	void *h;
	int (*init)(void);

	if (!path || !*path)
		return 0; /* a job without the agent */
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "fake-cuda-app: %s\n", dlerror());
		return -1;
	}
	*(void **)&init = dlsym(h, "InitializeInjection");
	if (!init || init() != 1) {
		fprintf(stderr, "fake-cuda-app: InitializeInjection missing or failed\n");
		return -1;
	}
	return 0;
}

static void launch(unsigned n, const char *name, unsigned dev, unsigned stream, uint64_t dur)
{
	for (unsigned i = 0; i < n; i++) {
		uint32_t c = api(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
				 "cudaLaunchKernel_v7000");

		kernel(c, dev, stream, name, dur, 0);
	}
}

/* The NVTX commands: NVTX v3's API as a job compiles it in (fake-nvtx.c,
 * its own function table in this binary), so NVTX reaches the agent the
 * way a job's does: through NVTX_INJECTION64_PATH, read at the first NVTX
 * call. */
static void nvtx_command(const char *args)
{
	static nvtxDomainHandle_t domain;
	unsigned long long n;
	char text[512];

	snprintf(text, sizeof(text), "%s", strchr(args, ' ') ? strchr(args, ' ') + 1 : "");
	text[strcspn(text, "\n")] = 0;
	if (strncmp(args, "domain ", 7) == 0) {
		domain = nvtxDomainCreateA(text);
		printf("domain %d\n", domain != NULL);
		return;
	}
	if (strncmp(args, "dpush ", 6) == 0) {
		nvtxEventAttributes_t a = { .version = NVTX_VERSION, .size = NVTX_EVENT_ATTRIB_STRUCT_SIZE,
					    .messageType = NVTX_MESSAGE_TYPE_REGISTERED };

		a.message.registered = nvtxDomainRegisterStringA(domain, text);
		printf("pushed %d\n", nvtxDomainRangePushEx(domain, &a));
		return;
	}
	if (strncmp(args, "dpop", 4) == 0) {
		printf("popped %d\n", nvtxDomainRangePop(domain));
		return;
	}

	if (strncmp(args, "push ", 5) == 0) {
		printf("pushed %d\n", nvtxRangePushA(text));
	} else if (strncmp(args, "pop", 3) == 0) {
		printf("popped %d\n", nvtxRangePop());
	} else if (sscanf(args, "bench %llu", &n) == 1 && n > 0) {
		uint64_t t0 = now_ns(CLOCK_MONOTONIC);

		for (unsigned long long i = 0; i < n; i++) {
			nvtxRangePushA("bench");
			nvtxRangePop();
		}
		printf("nvtx-bench %.1f\n", (double)(now_ns(CLOCK_MONOTONIC) - t0) / (double)n);
	} else {
		printf("error unknown nvtx command\n");
	}
}

struct thread_job {
	pthread_t t;
	unsigned k, dev, stream;
	const char *name;
};

static void *thread_main(void *arg)
{
	struct thread_job *j = arg;

	launch(j->k, j->name, j->dev, j->stream, 3000);
	return NULL;
}

/* ---- device memory ----------------------------------------------------------- */

/* fake-cuda.c's allocator (the app links the fake driver). */
uint64_t fakecuda_mem_alloc(int d, uint64_t bytes);
int fakecuda_mem_free(uint64_t addr, int *d, uint64_t *bytes);

#define ASYNC_STREAM 7u
/* Where a device's cudaMallocAsync pool lives, and how much it holds. */
#define POOL_OF(dev) (0x7e0000000000ull + ((uint64_t)(dev) << 32))
#define POOL_SIZE (1ull << 30)

/* malloc / mallocasync / free / freeasync (the top comment); false: not
 * one of them. */
static bool mem_command(const char *line)
{
	unsigned dev;
	unsigned long long bytes, addr;
	char word[16];
	bool async;

	if (sscanf(line, "%15s", word) != 1)
		return false;
	async = strcmp(word, "mallocasync") == 0 || strcmp(word, "freeasync") == 0;
	if (strcmp(word, "malloc") == 0 || strcmp(word, "mallocasync") == 0) {
		uint32_t c;
		uint64_t a;

		if (sscanf(line, "%*s %u %llu", &dev, &bytes) != 2) {
			printf("error usage: %s DEV BYTES\n", word);
			return true;
		}
		c = api(CUPTI_CB_DOMAIN_DRIVER_API,
			async ? CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync : CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2,
			async ? "cuMemAllocAsync" : "cuMemAlloc_v2");
		a = fakecuda_mem_alloc((int)dev, bytes);
		if (!a) {
			printf("error out of memory\n");
			return true;
		}
		if (have_cupti())
			cu.memory(c, dev, ASYNC_STREAM, true, a, bytes, async ? POOL_OF(dev) : 0, POOL_SIZE);
		printf("ptr 0x%llx\n", (unsigned long long)a);
		return true;
	}
	if (strcmp(word, "free") == 0 || strcmp(word, "freeasync") == 0) {
		uint64_t b;
		uint32_t c;
		int d;

		if (sscanf(line, "%*s %llx", &addr) != 1) {
			printf("error usage: %s 0x<hex>\n", word);
			return true;
		}
		c = api(CUPTI_CB_DOMAIN_DRIVER_API,
			async ? CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync : CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2,
			async ? "cuMemFreeAsync" : "cuMemFree_v2");
		if (fakecuda_mem_free(addr, &d, &b) < 0) {
			printf("error not allocated\n");
			return true;
		}
		if (have_cupti())
			cu.memory(c, (uint32_t)d, ASYNC_STREAM, false, addr, b, async ? POOL_OF(d) : 0, POOL_SIZE);
		printf("freed %llu\n", (unsigned long long)b);
		return true;
	}
	if (strcmp(word, "memchurn") == 0 && sscanf(line, "%*s %llu %u %llu", &addr, &dev, &bytes) == 3) {
		for (unsigned long long i = 0; i < addr; i++) {
			uint32_t c = api(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2,
					 "cuMemAlloc_v2");
			uint64_t a = fakecuda_mem_alloc((int)dev, bytes), b;
			int d;

			if (!a)
				break;
			if (have_cupti())
				cu.memory(c, dev, 0, true, a, bytes, 0, 0);
			c = api(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, "cuMemFree_v2");
			if (fakecuda_mem_free(a, &d, &b) == 0 && have_cupti())
				cu.memory(c, dev, 0, false, a, b, 0, 0);
		}
		printf("churned %llu\n", addr);
		return true;
	}
	return false;
}

/* ---- a framework's own profiler (Kineto's pattern) ------------------------ */

#define FW_BUF (1u << 20)
#define FW_MAX 64

static struct {
	bool on;
	uint8_t *bufs[FW_MAX]; /* the buffers it handed CUPTI */
	unsigned n_bufs;
	uint64_t records, buffers, unknown;
	pthread_mutex_t lock;
} fw = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void CUPTIAPI fw_request(uint8_t **buffer, size_t *size, size_t *max)
{
	uint8_t *b = NULL;

	pthread_mutex_lock(&fw.lock);
	if (fw.n_bufs < FW_MAX && (b = calloc(1, FW_BUF)))
		fw.bufs[fw.n_bufs++] = b;
	pthread_mutex_unlock(&fw.lock);
	*buffer = b;
	*size = b ? FW_BUF : 0;
	*max = 0;
}

static void CUPTIAPI fw_complete(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size, size_t valid)
{
	CUpti_Activity *r = NULL;
	bool mine = false;

	(void)ctx;
	(void)stream;
	(void)size;
	pthread_mutex_lock(&fw.lock);
	for (unsigned i = 0; i < fw.n_bufs; i++)
		mine |= fw.bufs[i] == buf;
	if (!mine) {
		/* Kineto logs "unknown buffer" and leaves it alone. */
		fw.unknown++;
		pthread_mutex_unlock(&fw.lock);
		return;
	}
	fw.buffers++;
	while (cu.next(buf, valid, &r) == CUPTI_SUCCESS)
		fw.records++;
	pthread_mutex_unlock(&fw.lock);
}

static void framework(const char *what)
{
	const char *path = getenv("FAKE_APP_CUPTI");

	bool flushed = strcmp(what, "start-flushed") == 0;

	if (flushed || strcmp(what, "start") == 0) {
		if (!have_cupti() && path) {
			void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL); /* the framework links its CUPTI */

			if (h)
				bind_cupti(h);
		}
		if (!have_cupti()) {
			printf("framework no-cupti\n");
			return;
		}
		if (flushed)
			cu.flush(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED); /* PyTorch 2.11 flushes first */
		cu.register_cb(fw_request, fw_complete);
		cu.enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
		fw.on = true;
		printf("framework started\n");
	} else if (strcmp(what, "stop") == 0 && fw.on) {
		cu.flush(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
		cu.disable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
		fw.on = false;
		printf("framework stopped\n");
	} else {
		pthread_mutex_lock(&fw.lock);
		printf("framework records=%" PRIu64 " buffers=%" PRIu64 " unknown=%" PRIu64 "\n", fw.records,
		       fw.buffers, fw.unknown);
		pthread_mutex_unlock(&fw.lock);
	}
}

static void print_state(void);

/* Set by "exit teardown": the exit handler below acts as CUDA's. */
static bool teardown_call;

/* Registered before cuInit loads the agent: runs after the agent's own
 * atexit hook, while the process tears CUDA down. */
static void at_teardown(void)
{
	if (!teardown_call)
		return;
	api(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent, "cuCtxGetCurrent");
	printf("teardown ");
	print_state();
	fflush(stdout);
}

static void print_state(void)
{
	struct fakecupti_state s = { 0 };

	if (have_cupti())
		cu.get_state(&s);
	printf("cupti=%d subscribed=%d kinds=%" PRIu64 " domains=%u subscribes=%u unsubscribes=%u "
	       "finalizes=%u finalize_tid=%d finalized_while_subscribed=%d flushes=%u "
	       "api_calls=%" PRIu64 " api_records=%" PRIu64 " kernels=%" PRIu64 " declined=%" PRIu64
	       " calls_after_fatal=%u calls_after_finalize=%u finalize_while_enabling=%u "
	       "dirty_buffers=%u reissued=%u per_thread=%u registrations=%u\n",
	       cu.h != NULL, s.subscribed, s.kinds_enabled, s.domains_enabled, s.subscribe_calls,
	       s.unsubscribe_calls, s.finalize_calls, s.finalize_tid, s.finalized_while_subscribed, s.flushes,
	       s.api_calls, s.api_records, s.kernels_recorded, s.declined, s.calls_after_fatal,
	       s.calls_after_finalize, s.finalize_while_enabling, s.dirty_buffers, s.reissued, s.per_thread,
	       s.registrations);
}

int main(void)
{
	char line[512], name[256], word[32];
	unsigned n, k, dev, stream;
	unsigned long long ms, bytes, dur;
	int version = 0, got;
	char how[8];

	atexit(at_teardown);
	/* A framework loads its CUDA runtime privately (RTLD_LOCAL); cuInit
	 * loads the driver, which then injects the agent. */
	if (!getenv("FAKE_APP_NO_CUDART") && !dlopen("libcudart.so.13", RTLD_NOW | RTLD_LOCAL)) {
		fprintf(stderr, "fake-cuda-app: %s\n", dlerror());
		return 1;
	}
	/* A framework that links CUPTI itself has it loaded before cuInit. */
	if (getenv("FAKE_APP_PRELOAD") && getenv("FAKE_APP_CUPTI")) {
		void *h = dlopen(getenv("FAKE_APP_CUPTI"), RTLD_NOW | RTLD_LOCAL);

		if (!h) {
			fprintf(stderr, "fake-cuda-app: %s\n", dlerror());
			return 1;
		}
		bind_cupti(h);
	}
	if (cuDriverGetVersion(&version) != CUDA_SUCCESS || inject() < 0)
		return 1;
	printf("ready %d %d\n", getpid(), gettid());
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		dur = 3000;
		if (mem_command(line)) {
			/* answered */
		} else if ((got = sscanf(line, "launch %u %255s %u %u %llu", &n, name, &dev, &stream, &dur)) >= 4) {
			uint64_t t0 = now_ns(CLOCK_REALTIME);

			launch(n, keep_name(name), dev, stream, dur);
			printf("launched %u %" PRIu64 " %" PRIu64 "\n", n, t0, now_ns(CLOCK_REALTIME));
		} else if (sscanf(line, "graph %u %255s %u %u", &n, name, &dev, &stream) == 4) {
			const char *kn = keep_name(name);

			for (unsigned i = 0; i < n; i++) {
				uint32_t c = api(CUPTI_CB_DOMAIN_RUNTIME_API,
						 CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, "cudaGraphLaunch_v10000");

				kernel(c, dev, stream, kn, 3000, 1);
			}
			printf("graphed %u\n", n);
		} else if ((got = sscanf(line, "graphn %u %u %255s %u %u %7s", &n, &k, name, &dev, &stream,
					 how)) >= 5) {
			bool rt = got == 6 && strcmp(how, "rt") == 0;
			uint32_t id = graph_launches(n, k, keep_name(name), dev, stream, rt);

			printf("graphn %u %u\n", id, k);
		} else if (sscanf(line, "threads %u %u %255s %u", &n, &k, name, &dev) == 4) {
			struct thread_job *jobs = calloc(n, sizeof(*jobs));
			const char *kn = keep_name(name);

			for (unsigned i = 0; jobs && i < n; i++) {
				jobs[i] = (struct thread_job){ .k = k, .dev = dev, .stream = 100 + i, .name = kn };
				pthread_create(&jobs[i].t, NULL, thread_main, &jobs[i]);
			}
			for (unsigned i = 0; jobs && i < n; i++)
				pthread_join(jobs[i].t, NULL);
			free(jobs);
			printf("threads %u\n", n * k);
		} else if (sscanf(line, "memcpy %u %u %llu", &n, &dev, &bytes) == 3) {
			for (unsigned i = 0; i < n; i++) {
				uint32_t c = api(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2,
						 "cuMemcpyHtoDAsync_v2");

				if (have_cupti())
					cu.memcpy_(c, dev, 8, bytes, 5000);
			}
			printf("copied %u\n", n);
		} else if (sscanf(line, "busy %llu", &ms) == 1) {
			uint64_t end = now_ns(CLOCK_MONOTONIC) + ms * 1000000ull, calls = 0;

			while (now_ns(CLOCK_MONOTONIC) < end) {
				api(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent, "cuCtxGetCurrent");
				calls++;
				usleep(200);
			}
			printf("busy %" PRIu64 "\n", calls);
		} else if (sscanf(line, "sleep %llu", &ms) == 1) {
			usleep((useconds_t)(ms * 1000));
			printf("slept\n");
		} else if (sscanf(line, "framework %31s", word) == 1) {
			framework(word);
		} else if (strncmp(line, "fork", 4) == 0) {
			/* A data-loader worker: forked after CUDA started, never uses it. */
			int st = -1;
			pid_t c;

			fflush(stdout);
			c = fork();
			if (c == 0) {
				struct fakecupti_state a = { 0 }, b = { 0 };

				if (have_cupti())
					cu.get_state(&a);
				for (int i = 0; i < 100; i++)
					api(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent,
					    "cuCtxGetCurrent");
				if (have_cupti())
					cu.get_state(&b);
				/* _exit, as multiprocessing workers do; exit() would also run
				 * LeakSanitizer in a child whose other threads are gone. */
				_exit((int)(b.finalize_calls - a.finalize_calls));
			}
			if (c > 0 && waitpid(c, &st, 0) == c && WIFEXITED(st))
				st = WEXITSTATUS(st);
			printf("child %d\n", st);
		} else if (strncmp(line, "fatal", 5) == 0) {
			if (have_cupti())
				cu.fatal();
			printf("fatal\n");
		} else if (strncmp(line, "nvtx ", 5) == 0) {
			nvtx_command(line + 5);
		} else if (strncmp(line, "state", 5) == 0) {
			print_state();
		} else if (strncmp(line, "exit", 4) == 0) {
			teardown_call = strncmp(line, "exit teardown", 13) == 0;
			fflush(stdout);
			exit(0);
		} else {
			printf("error unknown command\n");
		}
		fflush(stdout);
	}
	return 0;
}
