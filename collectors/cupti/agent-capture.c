/* SPDX-License-Identifier: MIT */
/*
 * agent-capture.c - the agent's capture state machine (agent.c's DESIGN):
 * START (subscribe, kinds on, API records filtered at the source), the
 * options a START changes mid-capture, FLUSH, STOP, the detach through the
 * API-exit callback, the buffer canary and the notices a capture sends.
 * Agent thread, but api_callback() (application threads); state in `g`
 * (agent-int.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "base/macro.h"

#include "agent-int.h"
#include "nvtx.h"
#include "pmsample.h"
#include "pystack.h"

/* ---- CUPTI callbacks (application threads) -------------------------------- */

/* The NVTX range stack and the Python stack of this thread under the
 * call's correlation id, for the calls whose records we keep (api_off is
 * written before the domains are switched on and not after). */
static void nvtx_launch(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, uint32_t correlation)
{
	int d = domain == CUPTI_CB_DOMAIN_DRIVER_API ? 0 : 1;

	if (cbid < API_CBID_MAX && (g.api_off[d][cbid / 8] & (1u << (cbid % 8))))
		return;
	agent_nvtx_launch(correlation);
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
		agent_wake();
		return;
	}
	if (domain != CUPTI_CB_DOMAIN_DRIVER_API && domain != CUPTI_CB_DOMAIN_RUNTIME_API)
		return;
	if (cb->callbackSite == CUPTI_API_ENTER) {
		agent_graph_launch_seen(domain, cbid, cb);
		nvtx_launch(domain, cbid, cb->correlationId);
		agent_py_launch(domain, cbid, cb->correlationId);
		return;
	}
	if (cb->callbackSite != CUPTI_API_EXIT)
		return;
	/* After the exit hook, CUDA's own teardown still calls the driver and
	 * would reach an armed detach: no CUPTI call from then on (too_late),
	 * CUDA is being torn down. The process is ending anyway. */
	if (atomic_load(&g.too_late))
		return;
	if (!atomic_compare_exchange_strong(&g.detach, &armed, DETACH_CLAIMED))
		return;
	/* Unsubscribing drops our domains too; then CUPTI goes entirely. */
	atomic_store(&g.finalized, 1);
	g.C.cuptiUnsubscribe(g.sub);
	if (g.pm_ends)
		pm_disable_objects();
	else
		g.C.cuptiFinalize();
	atomic_store(&g.finalize_done, 1);
	agent_wake();
}

/* The driver and runtime API callbacks on, for the rest of the capture
 * (NVTX launch stacks, Python stacks). Agent thread. */
static bool api_domains_on(void)
{
	if (!g.subscribed || atomic_load(&g.detach) != DETACH_IDLE)
		return false;
	if (!g.api_domains) {
		g.C.cuptiEnableDomain(1, g.sub, CUPTI_CB_DOMAIN_DRIVER_API);
		g.C.cuptiEnableDomain(1, g.sub, CUPTI_CB_DOMAIN_RUNTIME_API);
		g.api_domains = true;
	}
	return true;
}

/* NVTX attached (now or since the capture started): API enter callbacks,
 * so that each launch inside a range is sent with its range stack. Only
 * then: a job without NVTX pays nothing per CUDA call. Agent thread. */
void agent_follow_nvtx(void)
{
	if (g.nvtx_domains || !agent_nvtx_enabled() || !atomic_load(&g.capturing) || !agent_nvtx_attached() ||
	    !api_domains_on())
		return;
	g.nvtx_domains = true;
	agent_nvtx_following(1);
}

/* Python stacks as START says (pystack.h): the API enter callbacks on
 * only when launch stacks are, i.e. when this process runs a CPython the
 * agent can walk: a job without Python pays nothing per CUDA call, and
 * one with Python pays only at the calls whose stack is taken. */
static void py_apply_options(bool fresh)
{
	if (!agent_py_apply(&g.opts, fresh, g.C.cuptiGetTimestamp) || g.api_domains || g.py_callbacks ||
	    !g.subscribed || atomic_load(&g.detach) != DETACH_IDLE)
		return;
	/* Only the calls whose stack is taken: on an H200 a torch loop
	 * launched 1.4 us slower with launch stacks on, and a framework op
	 * makes several other CUDA calls per launch. */
	agent_py_callbacks_on(g.sub);
	g.py_callbacks = true;
}

/* ---- capture (agent thread) ------------------------------------------------- */

static void send_clock(uint32_t which)
{
	struct agent_clock ck = { .which = which };
	uint64_t best = UINT64_MAX;

	for (int i = 0; i < 32; i++) {
		uint64_t a = agent_wall_ns(), c = 0, b;

		if (!agent_cupti_usable() || g.C.cuptiGetTimestamp(&c) != CUPTI_SUCCESS)
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

/* Recording mode (START flag RECORDING) leaves these off: the memory
 * timeline (MEMORY2: a record per allocation, a memory profile needs its
 * start state too) and CUPTI's own overhead records are capture-only
 * views; the recorder keeps what answers "what ran when". */
static bool full_only(CUpti_ActivityKind k)
{
	return k == CUPTI_ACTIVITY_KIND_MEMORY2 || k == CUPTI_ACTIVITY_KIND_OVERHEAD;
}

static bool recording(void) { return g.opts.flags & AGENT_START_RECORDING; }

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

	if (!g.canary_call || !g.driver_records || !agent_cupti_usable())
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
	if (g.told_lost || !g.cv.canary_seen || g.cv.canary_seen >= g.canaries || !agent_cupti_usable())
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
		agent_err(AGENT_ERR_VERSION, 0,
			  "no usable CUPTI: found CUPTI %s, whose records this agent cannot read (it reads "
			  "CUDA 13); set PROFD_CUPTI_PATH to a CUDA 13 libcupti.so.13. %s", ver, g.cupti_why);
		return false;
	}
	if (!g.cupti_ok) {
		agent_err(AGENT_ERR_NO_CUPTI, 0,
			  "no usable CUPTI found; set PROFD_CUPTI_PATH to a CUDA 13 libcupti.so.13. %s",
			  g.cupti_why);
		return false;
	}
	if (!g.untested_told && (g.C.version < CUPTI_TESTED_MIN || g.C.version > CUPTI_TESTED_MAX)) {
		g.untested_told = true;
		cupti_version_text(g.C.version, ver, sizeof(ver));
		agent_err(AGENT_ERR_NOTICE, 0, "CUPTI %s (%s) is not a version this agent was tested with "
			  "(13.0); tracing goes on", ver, g.C.path);
	}
	return true;
}

void agent_capture_start(void)
{
	CUpti_SubscriberParams sp = { .structSize = CUpti_SubscriberParams_STRUCT_SIZE };
	char other[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN + 64] = "";
	CUptiResult r;
	int e;

	if (atomic_load(&g.capturing) || atomic_load(&g.dead) || !cupti_ready())
		return;
	if (g.finalizing) {
		if (!atomic_load(&g.finalize_done)) {
			agent_err(AGENT_ERR_NOTICE, 0, "no GPU data: the previous capture's cuptiFinalize has "
				  "not returned yet (a CUDA call blocked, e.g. in a collective)");
			return;
		}
		g.finalizing = false;
		if (!g.pm_ends)
			agent_slabs_unmap(); /* CUPTI is gone: the slabs it kept are ours again */
		pm_cupti_gone();
	}
	if (g.subscribed) {
		/* A previous detach is still pending: finish it first. */
		detach();
		if (g.subscribed || g.finalizing)
			return;
	}
	e = agent_slabs_map();
	if (e < 0) {
		agent_err(AGENT_ERR_CUPTI, e, "out of memory for activity buffers");
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
		agent_err(AGENT_ERR_BUSY, (int32_t)r, "%s", other[0] ? other : "another CUPTI client");
		return;
	}
	if (r != CUPTI_SUCCESS) {
		agent_report_cupti("cuptiSubscribe", r);
		return;
	}
	g.subscribed = true;
	atomic_store(&g.finalized, 0);
	g.C.cuptiEnableCallback(1, g.sub, CUPTI_CB_DOMAIN_STATE, CUPTI_CBID_STATE_FATAL_ERROR);
	/* API records' thread ids: CUPTI's default is the low 32 bits of
	 * pthread_self(), SYSTEM gives gettid() (both seen on an H200,
	 * tests/gpu/cupti-probe.cc), the id NVTX ranges, Python stacks, the
	 * buffer canary and /proc use. Without it a thread's API line and its
	 * NVTX line part, and the canary never matches. */
	g.C.cuptiSetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);
	set_buffer_attributes();
	memset(&g.stats, 0, sizeof(g.stats));
	g.cut = 0;
	g.canaries = 0;
	g.cv.canary_seen = 0;
	g.told_lost = false;
	g.told_foreign = g.told_graph = g.told_nvtx = g.told_rec_cut = 0;
	atomic_store(&g.foreign, 0);
	g.cv.records = g.cv.converted = g.cv.skipped = g.cv.unknown = g.cv.emit_failed = 0;
	g.cv.graph_kernels = g.cv.graph_launches = 0;
	pthread_mutex_lock(&g.lock);
	g.declined = 0;
	g.accepting = true;
	pthread_mutex_unlock(&g.lock);
	r = g.C.cuptiActivityRegisterCallbacks(agent_buffer_requested, agent_buffer_completed);
	if (r != CUPTI_SUCCESS) {
		agent_report_cupti("cuptiActivityRegisterCallbacks", r);
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
	g.rec_kinds = recording();
	g.rec_cut = g.rec_forced = 0;
	if (!g.rec_kinds)
		agent_send_mem_state();
	/* NVTX on before the kinds: GPU work traced from here on finds its ranges. */
	agent_nvtx_enable(g.opts.flags & AGENT_START_NVTX);
	g.nvtx_domains = g.api_domains = g.py_callbacks = false;
	agent_nvtx_following(0);
	agent_nvtx_capture(g.C.cuptiGetTimestamp);
	g.driver_records = false;
	for (size_t i = ARRAY_SIZE(kinds); i-- > 0;) { /* API kinds first (see kinds[]) */
		if (g.rec_kinds && full_only(kinds[i]))
			continue;
		r = g.C.cuptiActivityEnable(kinds[i]);
		if (r == CUPTI_SUCCESS && kinds[i] == CUPTI_ACTIVITY_KIND_DRIVER)
			g.driver_records = true;
		if (r == CUPTI_SUCCESS || kinds[i] != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
			continue; /* a missing optional kind only narrows the trace */
		/* Without kernels there is no point: undo everything. */
		agent_report_cupti("cuptiActivityEnable(CONCURRENT_KERNEL)", r);
		agent_nvtx_capture(NULL);
		for (size_t j = i + 1; j < ARRAY_SIZE(kinds); j++)
			g.C.cuptiActivityDisable(kinds[j]);
		agent_settle(UINT64_MAX, STOP_SETTLE_MS);
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
	agent_graphs_follow();
	agent_graphs_apply_options();
	atomic_store(&g.capturing, 1);
	agent_follow_nvtx();
	py_apply_options(true);
	pm_apply_options(&g.opts, g.devs, g.n_devs);
}

static void send_stats(void)
{
	struct agent_py_counts pc;
	size_t dropped = 0;

	/* Never called with g.lock held: CUPTI may call back into us. */
	if (agent_cupti_usable() && g.C.cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped) == CUPTI_SUCCESS)
		g.stats.dropped_records += dropped;
	g.stats.records = g.cv.converted;
	g.stats.unknown_records = g.cv.unknown;
	pthread_mutex_lock(&g.lock);
	g.stats.dropped_buffers = g.declined + g.cv.emit_failed;
	pthread_mutex_unlock(&g.lock);
	g.stats.cut_records = g.cut;
	g.stats.foreign_buffers = atomic_load(&g.foreign);
	agent_py_counts(&pc);
	g.stats.py_stacks = pc.stacks;
	g.stats.py_dropped = pc.dropped;
	g.stats.py_samples = pc.samples;
	g.stats.py_sample_drops = pc.sample_drops;
	g.stats.py_timed = pc.timed;
	g.stats.py_launch_p50_ns = pc.launch_p50_ns;
	g.stats.py_launch_p90_ns = pc.launch_p90_ns;
	g.stats.py_sampler_cpu_ns = pc.sampler_cpu_ns;
	g.stats.py_sampler_wall_ns = pc.sampler_wall_ns;
	agent_client_send(&g.cl, AGENT_FRAME_STATS, &g.stats, sizeof(g.stats));
}

static void send_notices(unsigned held, bool lost);

/* A window closes: everything CUPTI holds from before now, complete. */
void agent_capture_flush(uint64_t token)
{
	struct agent_flush f = { .token = token };

	if (atomic_load(&g.capturing) && agent_cupti_usable()) {
		uint64_t seq;
		bool settled;

		pm_decode(); /* the window's counter samples up to now */
		pm_tell_holes();
		canary_send();
		pthread_mutex_lock(&g.lock);
		seq = g.hand_seq;
		pthread_mutex_unlock(&g.lock);
		/* The canary is judged only when every slab came back: one still
		 * held (a kernel running past the window) may hold it too. */
		settled = agent_settle(seq, FLUSH_SETTLE_MS);
		send_stats();
		send_notices(0, settled && canary_lost());
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
		agent_err(AGENT_ERR_NOTICE, 0,
			  "NVTX: %llu ranges or launch stacks beyond the budget (%u queued per 100 ms, %u a "
			  "capture) were dropped; %llu range names beyond the string budget (%u names, %u "
			  "MiB) are shown as a placeholder",
			  (unsigned long long)nc.dropped, AGENT_NVTX_QUEUE, AGENT_NVTX_MAX_PER_CAPTURE,
			  (unsigned long long)nc.strings_dropped, AGENT_NVTX_MAX_STRINGS,
			  AGENT_NVTX_MAX_STRING_BYTES >> 20);

	if (g.rec_cut && !g.told_rec_cut++)
		agent_err(AGENT_ERR_NOTICE, 0,
			  "recording: %llu CUPTI buffer(s) still held records of GPU work running when the "
			  "recorder's %u ms flush took them back (work running over ~1 s, e.g. a stuck "
			  "collective); those records are lost, the rest of each buffer is kept",
			  (unsigned long long)g.rec_cut, AGENT_RECORD_FLUSH_MS);
	if (g.cut)
		agent_err(AGENT_ERR_NOTICE, 0,
			  "%llu CUPTI buffer(s) still held records of GPU work running %d ms after the capture "
			  "ended; a forced flush cut them there (the records from that point on are lost)",
			  (unsigned long long)g.cut, STOP_SETTLE_MS);
	if (held)
		agent_err(AGENT_ERR_FOREIGN, 0,
			  "another profiler in this process took over CUPTI's activity buffers during the "
			  "capture (%u of profd's were never returned); GPU records after that are missing",
			  held);
	else if (lost)
		agent_err(AGENT_ERR_FOREIGN, 0,
			  "another profiler in this process (e.g. PyTorch's) took over CUPTI's activity buffers "
			  "during the capture; GPU records from then on went to it and are missing here");
	else if (atomic_load(&g.foreign) && !g.told_foreign++)
		agent_err(AGENT_ERR_NOTICE, 0,
			  "another profiler in this process (e.g. PyTorch's) was using CUPTI's activity "
			  "buffers; profd took them over for this capture, so that profiler's trace has a gap");
	if (g.cv.graph_kernels && g.sessions > 1 && g.C.version < CUPTI_GRAPH_CORR_FIXED && !g.told_graph++) {
		cupti_version_text(g.C.version, ver, sizeof(ver));
		agent_err(AGENT_ERR_NOTICE, 0,
			  "CUDA graph kernels may link to the wrong launches: CUPTI %s mislabels cudaGraphLaunch "
			  "correlation ids after a process's first profiling session (fixed in CUDA 13.1 Update 1)",
			  ver);
	}
}

/* Unsubscribe from the agent thread and leave CUPTI initialised (@why it
 * cannot be finalized; NULL: by choice, said in docs/agent.md, not in the
 * capture). CUPTI may still hold slabs: they stay its own (never handed
 * out again) until it returns them; the rest are reused. */
static void detach_without_finalize(const char *why)
{
	g.C.cuptiEnableDomain(0, g.sub, CUPTI_CB_DOMAIN_DRIVER_API);
	g.C.cuptiEnableDomain(0, g.sub, CUPTI_CB_DOMAIN_RUNTIME_API);
	g.C.cuptiUnsubscribe(g.sub);
	g.sub = NULL;
	g.subscribed = false;
	if (why)
		agent_err(AGENT_ERR_NOT_FINALIZED, 0,
			  "%s: CUPTI unsubscribed but not finalized (some overhead may remain until the "
			  "next capture%s)", why,
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
	if (!agent_cupti_usable()) {
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
	/* Read by the callback that claims the detach (published by the arm). */
	g.pm_ends = pm_holds_objects();
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
		agent_err(AGENT_ERR_NOTICE, 0,
			  "cuptiFinalize did not return within %d ms (a CUDA call is blocked); the agent "
			  "keeps its activity buffers for CUPTI until it does",
			  FINALIZE_WAIT_MS);
		return;
	}
	/* After a PM sampling object's disable the slabs stay mapped: that
	 * finalize is CUPTI's own, and whether it returned every buffer is
	 * not known; those it holds stay its own. */
	if (!g.pm_ends)
		agent_slabs_unmap();
	pm_cupti_gone(); /* the PM sampling objects went with CUPTI */
}

void agent_capture_stop(bool connected, bool do_detach)
{
	unsigned held = 0;
	bool lost;
	uint64_t seq;

	if (!atomic_load(&g.capturing))
		return;
	/* Counters first: their last samples go out before CLOCK (stop), and
	 * PM sampling is off before any cuptiFinalize. */
	if (agent_cupti_usable())
		pm_stop();
	/* The sampler stamps with CUPTI's clock: joined before any finalize.
	 * What it and the launches queued goes out with the drains below. */
	agent_py_stop();
	if (!atomic_load(&g.exiting))
		canary_send();
	for (size_t i = 0; i < ARRAY_SIZE(kinds) && agent_cupti_usable(); i++) {
		/* CUPTI 13.0 GA could deadlock disabling CONCURRENT_KERNEL (fixed in
		 * 13.0 Update 1, API 130001); finalize turns it off anyway. */
		if (kinds[i] == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && g.C.version == CUPTI_V13_MIN)
			continue;
		g.C.cuptiActivityDisable(kinds[i]);
	}
	agent_graphs_stop();
	/* Complete records first; force only what is still out after that.
	 * Slabs handed out later hold only kernels of a kind CUPTI 13.0 GA
	 * keeps on: not this capture's to wait for. */
	pthread_mutex_lock(&g.lock);
	seq = g.hand_seq;
	pthread_mutex_unlock(&g.lock);
	if (!agent_settle(seq, atomic_load(&g.exiting) ? EXIT_WAIT_MS / 2 : STOP_SETTLE_MS) &&
	    agent_cupti_usable()) {
		g.C.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
		agent_drain();
		held = agent_slabs_held(seq);
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

/* NVTX collection on or off as START says; on mid-capture also starts the
 * launch stacks (agent_follow_nvtx()). Off leaves the API callbacks enabled for
 * the rest of the capture: they only look at an empty stack then. */
static void nvtx_apply_options(void)
{
	agent_nvtx_enable(g.opts.flags & AGENT_START_NVTX);
	agent_follow_nvtx();
}

/* Recording mode on or off mid-capture (a Profile window opened or closed
 * while recording): the capture-only kinds follow; a capture that joins
 * gets the memory state its memory profile starts from. */
static void kinds_apply_options(void)
{
	bool rec = recording();

	if (rec == g.rec_kinds || !agent_cupti_usable())
		return;
	g.rec_kinds = rec;
	if (!rec)
		agent_send_mem_state();
	for (size_t i = 0; i < ARRAY_SIZE(kinds); i++) {
		if (!full_only(kinds[i]))
			continue;
		if (rec)
			g.C.cuptiActivityDisable(kinds[i]);
		else
			g.C.cuptiActivityEnable(kinds[i]);
	}
}

/*
 * Recording mode's bound on what a killed job loses: flush(0) (the 100 ms
 * tick) returns only buffers whose records are all complete, and CUPTI
 * keeps writing into a buffer until it is full; a kernel that runs long
 * (a rank stuck in a collective: what the recorder is for) keeps every
 * record after it in that buffer from profd. So a buffer CUPTI has held
 * for AGENT_RECORD_FLUSH_MS is taken back by force: the records still in
 * flight then are cut (lost, counted, said once), the rest reach profd.
 * Only when some buffer is that old: a busy job whose buffers complete
 * within the second never pays for a forced flush. Agent thread.
 */
void agent_capture_force_stale(void)
{
	uint64_t cut = g.cut;

	if (!g.rec_kinds || !agent_cupti_usable() ||
	    !agent_slabs_stale(agent_mono_ns() - AGENT_RECORD_FLUSH_MS * 1000000ull))
		return;
	g.C.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	agent_drain();
	g.rec_forced++;
	g.rec_cut += g.cut - cut;
	g.cut = cut; /* not the end-of-capture cut send_notices() reports */
}

/* The options changed while a capture runs: apply what can change now. */
void agent_capture_options(void)
{
	kinds_apply_options();
	nvtx_apply_options();
	py_apply_options(false);
	agent_graphs_apply_options();
	if (agent_cupti_usable())
		pm_apply_options(&g.opts, g.devs, g.n_devs);
}
