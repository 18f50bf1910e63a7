/* SPDX-License-Identifier: MIT */
/*
 * agent.c - libprofd-agent.so: loaded into a CUDA process through
 * CUDA_INJECTION64_PATH; streams CUPTI activity to profd during captures.
 * This file is its entry: InitializeInjection, the fork and exit hooks, the
 * agent thread's loop and the commands it reads; the other files are named
 * in agent-int.h, which also says who owns each field of the state `g`.
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
 *              queued by CUPTI's callbacks and converted + sent here. In
 *              recording mode (START flag RECORDING: only the flight
 *              recorder is open) fewer kinds, and a buffer CUPTI has held
 *              for AGENT_RECORD_FLUSH_MS is taken back by a forced flush,
 *              so a killed job loses at most about its last second.
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
 * (agent-capture.c holds START to detach; agent-slabs.c the buffers.)
 *
 * Kernel names are demangled here, with the C++ runtime's __cxa_demangle
 * (libstdc++, loaded on first use if the job has not): the job's own names,
 * in the job's own process, so profd never demangles what a socket sent it.
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
#include <unistd.h>

#include "base/macro.h"

#include "agent-int.h"
#include "nvtx.h"
#include "pmsample.h"
#include "pystack.h"

#define EXPORT __attribute__((visibility("default")))

#ifndef PROFD_AGENT_SOCKET_DEFAULT
#define PROFD_AGENT_SOCKET_DEFAULT "/run/profd/agent.sock"
#endif

struct agent g = {
	.once = PTHREAD_ONCE_INIT,
	.efd = -1,
	.lock = PTHREAD_MUTEX_INITIALIZER,
};

void agent_wake(void)
{
	uint64_t one = 1;

	if (g.efd >= 0 && write(g.efd, &one, sizeof(one)) < 0) {
		/* the counter is saturated: the thread is awake anyway */
	}
}

/* ---- ERROR frames (agent thread) --------------------------------------------- */

void agent_err(uint32_t code, int32_t detail, const char *fmt, ...)
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
	agent_err(code, detail, "%s", text);
}

const char *agent_cupti_str(CUptiResult r)
{
	const char *s = NULL;

	if (!g.cupti_ok || g.C.cuptiGetResultString(r, &s) != CUPTI_SUCCESS || !s)
		return "unknown CUPTI error";
	return s;
}

/* Map a failed CUPTI call to an ERROR frame the daemon can explain. */
void agent_report_cupti(const char *call, CUptiResult r)
{
	if (r == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES)
		agent_err(AGENT_ERR_PRIVILEGES, (int32_t)r, "%s: %s", call, agent_cupti_str(r));
	else if (r == CUPTI_ERROR_NOT_INITIALIZED)
		agent_err(AGENT_ERR_VERSION, (int32_t)r,
			  "%s: %s (CUPTI %u needs a newer driver than %u)", call, agent_cupti_str(r),
			  g.C.version, g.driver_version);
	else
		agent_err(AGENT_ERR_CUPTI, (int32_t)r, "%s: %s (%d)", call, agent_cupti_str(r), (int)r);
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

/* ---- the converter's hooks (agent thread) ----------------------------------- */

static const char *api_name(void *ud, uint32_t domain, uint32_t cbid)
{
	const char *n = NULL;

	(void)ud;
	if (!agent_cupti_usable() ||
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

/* ---- the agent thread ------------------------------------------------------ */

static void on_connected(void)
{
	struct agent_hello h;

	if (!g.inventory)
		agent_take_inventory();
	load_cupti();
	agent_client_hello(&h, g.n_devs);
	h.cuda_driver_version = g.driver_version;
	h.cuda_runtime_version = g.runtime_version;
	h.cupti_version = g.cupti_ok ? g.C.version : 0;
	h.flags |= AGENT_HELLO_NVTX;
	agent_conv_reset(&g.cv);
	agent_nvtx_forget_ids();
	agent_py_forget_ids();
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
 * capturing only changes the options (agent_capture_options()).
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
	/* Recording mode is the minimum whatever else a START says: the
	 * flight recorder's cost must not depend on the daemon clearing flags. */
	if (st.flags & AGENT_START_RECORDING)
		st.flags &= AGENT_START_RECORDING | AGENT_START_NVTX | AGENT_START_GRAPH_TRACE;
	g.opts = st;
}

static void handle_command(const struct agent_frame_hdr *h, const uint8_t *p)
{
	switch (h->kind) {
	case AGENT_FRAME_START:
		take_start_options(h, p);
		if (atomic_load(&g.capturing))
			agent_capture_options();
		else
			agent_capture_start();
		break;
	case AGENT_FRAME_STOP:
		agent_capture_stop(true, true);
		break;
	case AGENT_FRAME_FLUSH: {
		struct agent_flush f = { 0 };

		if (h->length >= sizeof(f))
			memcpy(&f, p, sizeof(f));
		agent_capture_flush(f.token);
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
	g.cv.graph_launch = agent_graph_launch_ids;
	agent_client_init(&g.cl, NULL, PROFD_AGENT_SOCKET_DEFAULT);
	while (!atomic_load(&g.dead)) {
		struct pollfd p[2] = { { .fd = g.efd, .events = POLLIN }, { .fd = -1 } };
		int timeout = 1000, n;

		if (atomic_load(&g.exiting)) {
			/* Process exit: flush and send, but no detach dance. */
			agent_capture_stop(g.cl.fd >= 0, false);
			atomic_store(&g.exit_done, 1);
			break;
		}
		if (g.cl.fd < 0) {
			if (atomic_load(&g.capturing))
				agent_capture_stop(false, true); /* profd went away: never trace unobserved */
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
			agent_drain();
		}
		if (g.cl.fd >= 0 && (p[1].revents & (POLLIN | POLLHUP | POLLERR))) {
			struct agent_frame_hdr h;
			uint8_t payload[sizeof(struct agent_start)];
			int r;

			while ((r = agent_client_recv(&g.cl, &h, payload, sizeof(payload))) > 0)
				handle_command(&h, payload);
		}
		if (atomic_load(&g.capturing) && agent_cupti_usable() && agent_mono_ns() >= next_flush) {
			pm_decode();
			g.C.cuptiActivityFlushAll(0);
			agent_drain();
			agent_capture_force_stale();
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
	agent_wake();
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

/* The agent's threads take no asynchronous signals: the application's
 * handlers keep running on its own threads. Faults stay deliverable: a
 * blocked SIGSEGV raised by a fault kills the process without running any
 * handler, so the job's crash reporter (faulthandler, a backtrace hook)
 * would say nothing of a fault in our threads or in the CUPTI threads
 * they start, which inherit the mask (an H200 job died so, silently). */
void agent_mask_signals(sigset_t *old)
{
	static const int faults[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS };
	sigset_t mask;

	sigfillset(&mask);
	for (size_t i = 0; i < ARRAY_SIZE(faults); i++)
		sigdelset(&mask, faults[i]);
	pthread_sigmask(SIG_SETMASK, &mask, old);
}

static void init_once(void)
{
	pthread_attr_t a;
	sigset_t old;
	pthread_t t;

	g.efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (g.efd < 0)
		return;
	pthread_atfork(NULL, NULL, on_fork_child);
	agent_nvtx_on_attach(agent_wake);
	atexit(on_exit_hook);
	agent_mask_signals(&old);
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
