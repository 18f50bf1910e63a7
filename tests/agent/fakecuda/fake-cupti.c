/* SPDX-License-Identifier: MIT */
/*
 * fake-cupti.c - a stand-in for libcupti.so.13 so that the real, unmodified
 * libprofd-agent.so runs end to end on a machine without a GPU.
 *
 * It implements the CUPTI calls the agent makes, with CUPTI's rules where
 * the agent depends on them, unkind where the real one is unkind:
 *   - one subscriber at a time; callbacks only for enabled domains; a
 *     subscriber's Enable* calls and cuptiFinalize must not overlap, and no
 *     call may follow cuptiFinalize before the next subscribe (counted);
 *   - the Activity API is per process: a second client (a "framework
 *     profiler" in the fake app) that registers buffer callbacks replaces
 *     the first's, and buffers CUPTI holds go to whoever is registered when
 *     they complete; kinds are shared;
 *   - per-thread buffers are on by default (one buffer per CUDA-calling
 *     thread); CUPTI zeroes each new buffer on the requesting thread unless
 *     the client promised zeroed buffers (then a dirty one is counted); a
 *     buffer handed in while CUPTI still holds it is counted;
 *   - a record is complete only when its work has finished (a kernel's end
 *     time): cuptiActivityFlushAll(0) returns only buffers whose records are
 *     all complete, FORCED returns everything and an incomplete record reads
 *     as CUPTI_ERROR_INVALID_KIND;
 *   - API records can be switched off per callback id;
 *   - an API record's threadId is the low 32 bits of the calling thread's
 *     pthread_self() unless cuptiSetThreadIdType(SYSTEM) asked for its
 *     kernel tid (gettid()), as CUPTI 13.0 on an H200 does (the probe,
 *     tests/gpu/cupti-probe.cc, prints both).
 *
 * Environment: FAKE_CUPTI_SUBSCRIBE=busy|privileges makes cuptiSubscribe_v2
 * fail as when another tool holds CUPTI / profiling is restricted;
 * FAKE_CUPTI_DROPPED=N: CUPTI lost N records of its own (reported once);
 * FAKE_CUPTI_VERSION=N: what cuptiGetVersion says (default 130001); the
 * agent goes by it (cuptiSubscribe on CUDA 12, per-API switches from 12.5);
 * FAKE_CUPTI_STRESS=1: every Enable of the DRIVER/RUNTIME domain runs an API
 * call on another thread before it returns (the detach race, made wide);
 * FAKE_CUPTI_FINALIZE_MS=N: cuptiFinalize takes N ms, then hands back the
 * buffers it held (as a final flush);
 * FAKE_CUPTI_RACE_LAUNCH=1: a kernel is launched after every activity kind
 * switched on or off (race_launch()).
 *
 * Records in a buffer: a 16-byte header (size, the time the record is
 * complete, UINT64_MAX once a forced flush cut it), then the CUPTI struct;
 * this file alone walks them (cuptiActivityGetNextRecord).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/macro.h"
#include "fake-cupti.h"
#include "fake-pm.h"

#define EXPORT __attribute__((visibility("default")))
#define MAX_HELD 512
#define MAX_SLOTS 256
#define MAX_KINDS 64
#define HDR 16
#define CUT UINT64_MAX

struct held {
	uint8_t *buf;
	size_t size, used;
	uint64_t complete_at; /* when its last record completes */
};

static struct {
	pthread_mutex_t lock;
	bool subscribed;
	CUpti_CallbackFunc cb;
	void *cb_ud;
	bool domain_on[CUPTI_CB_DOMAIN_SIZE];
	/* cuptiEnableCallback of single API calls (graph launches) */
	uint8_t drv_cb[CUPTI_DRIVER_TRACE_CBID_SIZE], rt_cb[CUPTI_RUNTIME_TRACE_CBID_SIZE];
	uint64_t api_callbacks; /* API-enter callbacks delivered */
	uint64_t kinds; /* 1 << CUpti_ActivityKind */
	uint8_t drv_off[CUPTI_DRIVER_TRACE_CBID_SIZE], rt_off[CUPTI_RUNTIME_TRACE_CBID_SIZE];
	CUpti_BuffersCallbackRequestFunc req;
	CUpti_BuffersCallbackCompleteFunc comp;
	uint8_t per_thread, zeroed;
	CUpti_ActivityThreadIdType tid_type;
	struct {
		int tid; /* 0: the one buffer of all threads */
		struct held h;
	} slot[MAX_SLOTS];
	unsigned n_slots;
	struct held done[MAX_HELD]; /* retired, waiting for a flush */
	unsigned n_done;
	uint32_t corr;
	size_t dropped;
	bool finalized;
	int in_enable;
	struct fakecupti_state st;
} f = { .lock = PTHREAD_MUTEX_INITIALIZER, .per_thread = 1 };

static uint64_t mono_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static unsigned env_u(const char *name, unsigned dflt)
{
	const char *v = getenv(name);

	return v && *v ? (unsigned)strtoul(v, NULL, 10) : dflt;
}

/* ---- the CUPTI API the agent calls ---------------------------------------- */

/* After a fatal error or cuptiFinalize CUPTI is gone: every call the agent
 * still makes is counted for the test (it must make none). */
static void counted_call(void)
{
	pthread_mutex_lock(&f.lock);
	if (f.st.fatal)
		f.st.calls_after_fatal++;
	if (f.finalized)
		f.st.calls_after_finalize++;
	pthread_mutex_unlock(&f.lock);
}

EXPORT CUptiResult cuptiGetResultString(CUptiResult r, const char **s)
{
	counted_call();
	switch (r) {
	case CUPTI_SUCCESS: *s = "CUPTI_SUCCESS"; break;
	case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES: *s = "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"; break;
	case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
		*s = "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED";
		break;
	default: *s = "CUPTI_ERROR_UNKNOWN"; break;
	}
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiGetVersion(uint32_t *v)
{
	*v = env_u("FAKE_CUPTI_VERSION", 130001);
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiSubscribe_v2(CUpti_SubscriberHandle *h, CUpti_CallbackFunc cb, void *ud,
				     CUpti_SubscriberParams *p)
{
	const char *mode = getenv("FAKE_CUPTI_SUBSCRIBE");
	CUptiResult r = CUPTI_SUCCESS;

	pthread_mutex_lock(&f.lock);
	if (f.st.fatal)
		f.st.calls_after_fatal++;
	f.st.subscribe_calls++;
	if (mode && strcmp(mode, "privileges") == 0) {
		r = CUPTI_ERROR_INSUFFICIENT_PRIVILEGES;
	} else if (f.subscribed || (mode && strcmp(mode, "busy") == 0)) {
		if (p && p->oldSubscriberName && p->oldSubscriberSize)
			snprintf(p->oldSubscriberName, p->oldSubscriberSize, "%s",
				 f.subscribed ? "profd" : "Nsight Systems");
		r = CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
	} else {
		f.subscribed = true;
		f.finalized = false; /* a new CUPTI session starts here */
		f.cb = cb;
		f.cb_ud = ud;
		*h = (CUpti_SubscriberHandle)&f;
	}
	pthread_mutex_unlock(&f.lock);
	return r;
}

/* CUDA 12's call: no parameters, so no name of the other subscriber. */
EXPORT CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *h, CUpti_CallbackFunc cb, void *ud)
{
	return cuptiSubscribe_v2(h, cb, ud, NULL);
}

EXPORT CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle h)
{
	counted_call();
	(void)h;
	pthread_mutex_lock(&f.lock);
	f.st.unsubscribe_calls++;
	f.subscribed = false;
	f.cb = NULL;
	/* Enabled callbacks are the subscriber's: a new one starts with none. */
	memset(f.domain_on, 0, sizeof(f.domain_on));
	memset(f.drv_cb, 0, sizeof(f.drv_cb));
	memset(f.rt_cb, 0, sizeof(f.rt_cb));
	pthread_mutex_unlock(&f.lock);
	return CUPTI_SUCCESS;
}

static void *stress_call(void *arg)
{
	(void)arg;
	fakecupti_api(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent, "cuCtxGetCurrent");
	return NULL;
}

EXPORT CUptiResult cuptiEnableDomain(uint32_t on, CUpti_SubscriberHandle h, CUpti_CallbackDomain d)
{
	counted_call();
	(void)h;
	if ((unsigned)d >= CUPTI_CB_DOMAIN_SIZE)
		return CUPTI_ERROR_INVALID_PARAMETER;
	pthread_mutex_lock(&f.lock);
	f.in_enable++;
	f.domain_on[d] = on;
	pthread_mutex_unlock(&f.lock);
	if (on && env_u("FAKE_CUPTI_STRESS", 0) &&
	    (d == CUPTI_CB_DOMAIN_DRIVER_API || d == CUPTI_CB_DOMAIN_RUNTIME_API)) {
		/* An application thread calls the driver while we are in here. */
		pthread_t t;

		if (pthread_create(&t, NULL, stress_call, NULL) == 0)
			pthread_join(t, NULL);
	}
	pthread_mutex_lock(&f.lock);
	f.in_enable--;
	pthread_mutex_unlock(&f.lock);
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiEnableCallback(uint32_t on, CUpti_SubscriberHandle h, CUpti_CallbackDomain d,
				       CUpti_CallbackId cbid)
{
	counted_call();
	(void)h;
	/* The STATE domain's fatal-error callback always reaches the
	 * subscriber here; API callbacks one by one as asked. */
	pthread_mutex_lock(&f.lock);
	if (d == CUPTI_CB_DOMAIN_DRIVER_API && cbid < CUPTI_DRIVER_TRACE_CBID_SIZE)
		f.drv_cb[cbid] = on ? 1 : 0;
	else if (d == CUPTI_CB_DOMAIN_RUNTIME_API && cbid < CUPTI_RUNTIME_TRACE_CBID_SIZE)
		f.rt_cb[cbid] = on ? 1 : 0;
	pthread_mutex_unlock(&f.lock);
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiSetThreadIdType(CUpti_ActivityThreadIdType t)
{
	counted_call();
	if (t != CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT && t != CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM)
		return CUPTI_ERROR_INVALID_PARAMETER;
	pthread_mutex_lock(&f.lock);
	f.tid_type = t;
	pthread_mutex_unlock(&f.lock);
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivitySetAttribute(CUpti_ActivityAttribute a, size_t *size, void *value)
{
	counted_call();
	if (!size || !value || *size < 1)
		return CUPTI_ERROR_INVALID_PARAMETER;
	pthread_mutex_lock(&f.lock);
	if (a == CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER)
		f.per_thread = *(uint8_t *)value;
	else if (a == CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER)
		f.zeroed = *(uint8_t *)value;
	pthread_mutex_unlock(&f.lock);
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc req,
						  CUpti_BuffersCallbackCompleteFunc comp)
{
	counted_call();
	pthread_mutex_lock(&f.lock);
	f.req = req;
	f.comp = comp;
	f.st.registrations++;
	pthread_mutex_unlock(&f.lock);
	return CUPTI_SUCCESS;
}

static CUptiResult kind_set(CUpti_ActivityKind k, bool on)
{
	if ((unsigned)k >= MAX_KINDS)
		return CUPTI_ERROR_INVALID_KIND;
	pthread_mutex_lock(&f.lock);
	if (on)
		f.kinds |= 1ull << k;
	else
		f.kinds &= ~(1ull << k);
	pthread_mutex_unlock(&f.lock);
	return CUPTI_SUCCESS;
}

static uint32_t api_call(CUpti_CallbackDomain d, CUpti_CallbackId cbid, const char *fname, const void *params);

/* FAKE_CUPTI_RACE_LAUNCH=1: another thread of the job launches a kernel
 * right after every change of the activity kinds, as a busy job's threads
 * do while the agent switches them one by one. Each launch is recorded as
 * CUPTI would: an API record if RUNTIME is on, a kernel record if
 * CONCURRENT_KERNEL is on. */
static void race_launch(void)
{
	static const char name[] = "_Z6vecAddPKfS0_Pfi";
	uint32_t corr;

	if (!env_u("FAKE_CUPTI_RACE_LAUNCH", 0))
		return;
	corr = api_call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
			"cudaLaunchKernel_v7000", NULL);
	fakecupti_kernel(corr, 0, 7, name, 1000, 0);
}

EXPORT CUptiResult cuptiActivityEnable(CUpti_ActivityKind k)
{
	CUptiResult r;

	counted_call();
	r = kind_set(k, true);
	race_launch();
	return r;
}

EXPORT CUptiResult cuptiActivityDisable(CUpti_ActivityKind k)
{
	CUptiResult r;

	counted_call();
	r = kind_set(k, false);
	race_launch();
	return r;
}

EXPORT CUptiResult cuptiActivityEnableDriverApi(CUpti_CallbackId cbid, uint8_t on)
{
	counted_call();
	if (cbid >= CUPTI_DRIVER_TRACE_CBID_SIZE)
		return CUPTI_ERROR_INVALID_PARAMETER;
	pthread_mutex_lock(&f.lock);
	f.drv_off[cbid] = !on;
	pthread_mutex_unlock(&f.lock);
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityEnableRuntimeApi(CUpti_CallbackId cbid, uint8_t on)
{
	counted_call();
	if (cbid >= CUPTI_RUNTIME_TRACE_CBID_SIZE)
		return CUPTI_ERROR_INVALID_PARAMETER;
	pthread_mutex_lock(&f.lock);
	f.rt_off[cbid] = !on;
	pthread_mutex_unlock(&f.lock);
	return CUPTI_SUCCESS;
}

/* Whether every record of @h is complete at @now. */
static bool complete(const struct held *h, uint64_t now) { return h->complete_at <= now; }

/* Mark what is still running in @h as cut (a forced flush). */
static void cut_incomplete(struct held *h, uint64_t now)
{
	for (size_t off = 0; off + HDR <= h->used;) {
		uint64_t sz, at;

		memcpy(&sz, h->buf + off, 8);
		memcpy(&at, h->buf + off + 8, 8);
		if (at > now)
			memcpy(h->buf + off + 8, &(uint64_t){ CUT }, 8);
		off += HDR + sz;
	}
}

/* Hand @n buffers to whoever is registered now; lock not held. */
static void deliver(struct held *list, unsigned n)
{
	CUpti_BuffersCallbackCompleteFunc comp;

	pthread_mutex_lock(&f.lock);
	comp = f.comp;
	pthread_mutex_unlock(&f.lock);
	for (unsigned i = 0; i < n && comp; i++)
		comp(NULL, 0, list[i].buf, list[i].size, list[i].used);
}

/* Take out of CUPTI's hands what a flush returns (lock held): complete
 * buffers, or all with @forced (cutting what is still running). */
static unsigned collect(struct held *out, bool forced)
{
	uint64_t now = mono_ns();
	unsigned n = 0, keep = 0;

	for (unsigned i = 0; i < f.n_slots; i++) {
		struct held *h = &f.slot[i].h;

		if (h->buf && h->used && (forced || complete(h, now)) && f.n_done < MAX_HELD) {
			f.done[f.n_done++] = *h;
			*h = (struct held){ 0 };
		}
	}
	for (unsigned i = 0; i < f.n_done; i++) {
		if (forced || complete(&f.done[i], now)) {
			if (forced)
				cut_incomplete(&f.done[i], now);
			out[n++] = f.done[i];
		} else {
			f.done[keep++] = f.done[i];
		}
	}
	f.n_done = keep;
	return n;
}

EXPORT CUptiResult cuptiActivityFlushAll(uint32_t flag)
{
	static struct held out[MAX_HELD + MAX_SLOTS];
	static pthread_mutex_t serial = PTHREAD_MUTEX_INITIALIZER;
	unsigned n;

	counted_call();
	pthread_mutex_lock(&serial); /* `out` is shared by concurrent flushes */
	pthread_mutex_lock(&f.lock);
	f.st.flushes++;
	n = collect(out, flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	pthread_mutex_unlock(&f.lock);
	/* CUPTI calls back without its own locks held: the client takes its own. */
	deliver(out, n);
	pthread_mutex_unlock(&serial);
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityGetNextRecord(uint8_t *buf, size_t valid, CUpti_Activity **rec)
{
	uint8_t *p = *rec ? (uint8_t *)*rec - HDR : buf;
	uint64_t at;

	counted_call();
	if (*rec) {
		uint64_t sz;

		memcpy(&sz, p, sizeof(sz));
		p += HDR + sz;
	}
	if (p + HDR > buf + valid)
		return CUPTI_ERROR_MAX_LIMIT_REACHED;
	memcpy(&at, p + 8, 8);
	if (at == CUT)
		return CUPTI_ERROR_INVALID_KIND; /* still being written when it was flushed */
	*rec = (CUpti_Activity *)(p + HDR);
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext ctx, uint32_t stream, size_t *n)
{
	static bool extra_told;

	counted_call();
	(void)ctx;
	(void)stream;
	pthread_mutex_lock(&f.lock);
	*n = f.dropped;
	if (!extra_told && f.kinds) { /* lost while tracing: told to the first asker after that */
		*n += env_u("FAKE_CUPTI_DROPPED", 0);
		extra_told = true;
	}
	f.dropped = 0;
	pthread_mutex_unlock(&f.lock);
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiGetTimestamp(uint64_t *ts)
{
	counted_call();
	*ts = mono_ns();
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiFinalize(void)
{
	static struct held out[MAX_HELD + MAX_SLOTS];
	unsigned ms = env_u("FAKE_CUPTI_FINALIZE_MS", 0), n = 0;

	counted_call();
	pthread_mutex_lock(&f.lock);
	f.st.finalize_calls++;
	f.st.finalize_tid = gettid();
	f.st.finalized_while_subscribed |= f.subscribed;
	if (f.in_enable)
		f.st.finalize_while_enabling++;
	pthread_mutex_unlock(&f.lock);
	if (ms) {
		/* Synchronising every context: a rank stuck in a collective. Then
		 * the buffers CUPTI still held come back, written to the last. */
		usleep(ms * 1000u);
		pthread_mutex_lock(&f.lock);
		n = collect(out, true);
		pthread_mutex_unlock(&f.lock);
		for (unsigned i = 0; i < n; i++) {
			volatile uint8_t *b = out[i].buf;

			b[0] = b[0]; /* CUPTI writes them: a freed one trips ASan */
		}
		deliver(out, n);
	}
	pthread_mutex_lock(&f.lock);
	/* CUPTI is torn down: the next subscriber starts afresh. */
	f.kinds = 0;
	f.req = NULL;
	f.comp = NULL;
	f.subscribed = false;
	f.cb = NULL;
	memset(f.domain_on, 0, sizeof(f.domain_on));
	memset(f.drv_off, 0, sizeof(f.drv_off));
	memset(f.rt_off, 0, sizeof(f.rt_off));
	f.per_thread = 1;
	f.zeroed = 0;
	f.tid_type = CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT;
	f.n_slots = f.n_done = 0;
	f.finalized = true;
	pthread_mutex_unlock(&f.lock);
	fakepm_finalize();
	return CUPTI_SUCCESS;
}

void fakecupti_finalized_by_pm(void)
{
	pthread_mutex_lock(&f.lock);
	f.finalized = true;
	pthread_mutex_unlock(&f.lock);
}

EXPORT CUptiResult cuptiGetCallbackName(CUpti_CallbackDomain d, uint32_t cbid, const char **name)
{
	static const struct {
		CUpti_CallbackDomain d;
		uint32_t cbid;
		const char *name;
	} names[] = {
		{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, "cudaLaunchKernel_v7000" },
		{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, "cudaGraphLaunch_v10000" },
		{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000,
		  "cudaGraphLaunch_ptsz_v10000" },
		{ CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, "cuGraphLaunch" },
		{ CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz, "cuGraphLaunch_ptsz" },
		{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020, "cudaGetDevice_v3020" },
		{ CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2, "cuMemcpyHtoDAsync_v2" },
		{ CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent, "cuCtxGetCurrent" },
		{ CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, "cuLaunchKernel" },
		{ CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, "cuMemAlloc_v2" },
		{ CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, "cuMemFree_v2" },
		{ CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync, "cuMemAllocAsync" },
		{ CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync, "cuMemFreeAsync" },
	};

	counted_call();
	*name = NULL;
	for (size_t i = 0; i < ARRAY_SIZE(names); i++)
		if (names[i].d == d && names[i].cbid == cbid)
			*name = names[i].name;
	return *name ? CUPTI_SUCCESS : CUPTI_ERROR_INVALID_PARAMETER;
}

/* ---- the driver's side: what a CUDA program's calls make CUPTI do --------- */

/* Whether CUPTI holds @b now (lock held). */
static bool held(const uint8_t *b)
{
	for (unsigned i = 0; i < f.n_slots; i++)
		if (f.slot[i].h.buf == b)
			return true;
	for (unsigned i = 0; i < f.n_done; i++)
		if (f.done[i].buf == b)
			return true;
	return false;
}

/* This thread's current buffer (per-thread buffers), or the one of all. */
static struct held *current(void)
{
	int tid = f.per_thread ? gettid() : 0;

	for (unsigned i = 0; i < f.n_slots; i++)
		if (f.slot[i].tid == tid)
			return &f.slot[i].h;
	if (f.n_slots == MAX_SLOTS)
		return &f.slot[0].h;
	f.slot[f.n_slots].tid = tid;
	f.slot[f.n_slots].h = (struct held){ 0 };
	return &f.slot[f.n_slots++].h;
}

/* Room for a record of @size complete at @at, asking the client for a new
 * buffer when needed; NULL (and one more dropped record) if it declines.
 * Called and returns with the lock held (dropped around the request). */
static void *reserve(size_t size, uint64_t at)
{
	CUpti_BuffersCallbackRequestFunc req;
	uint8_t *b = NULL;
	size_t bsize = 0, max = 0;
	uint64_t sz = (size + 7) & ~(size_t)7;
	struct held *h = current();
	void *p;

	if (h->buf && h->used + HDR + sz > h->size) {
		if (f.n_done < MAX_HELD)
			f.done[f.n_done++] = *h;
		*h = (struct held){ 0 };
	}
	if (!h->buf) {
		req = f.req;
		pthread_mutex_unlock(&f.lock);
		if (req)
			req(&b, &bsize, &max); /* outside the lock: it takes the client's */
		pthread_mutex_lock(&f.lock);
		if (!b || bsize < HDR + sz) {
			f.dropped++;
			f.st.declined++;
			return NULL;
		}
		if (held(b))
			f.st.reissued++;
		if (!f.zeroed) {
			memset(b, 0, bsize); /* on the application's thread */
		} else {
			for (size_t i = 0; i < bsize; i += 8) {
				uint64_t w;

				memcpy(&w, b + i, 8);
				if (w) {
					f.st.dirty_buffers++;
					break;
				}
			}
		}
		h = current(); /* the table may have moved while unlocked */
		if (h->buf && f.n_done < MAX_HELD) /* this thread raced itself: keep both */
			f.done[f.n_done++] = *h;
		*h = (struct held){ .buf = b, .size = bsize };
	}
	memcpy(h->buf + h->used, &sz, 8);
	memcpy(h->buf + h->used + 8, &at, 8);
	p = h->buf + h->used + HDR;
	memset(p, 0, sz);
	h->used += HDR + sz;
	if (at > h->complete_at)
		h->complete_at = at;
	return p;
}

static bool kind_on(CUpti_ActivityKind k)
{
	return (f.kinds >> k) & 1;
}

/* Whether the subscriber asked for API call @cbid of @d alone (lock held). */
static bool cbid_on(CUpti_CallbackDomain d, CUpti_CallbackId cbid)
{
	if (d == CUPTI_CB_DOMAIN_DRIVER_API)
		return cbid < CUPTI_DRIVER_TRACE_CBID_SIZE && f.drv_cb[cbid];
	if (d == CUPTI_CB_DOMAIN_RUNTIME_API)
		return cbid < CUPTI_RUNTIME_TRACE_CBID_SIZE && f.rt_cb[cbid];
	return false;
}

/* @params: the call's parameter struct, as CUPTI passes it (NULL: none). */
static void callback(CUpti_CallbackDomain d, CUpti_CallbackId cbid, const char *fname, uint32_t corr,
		     CUpti_ApiCallbackSite site, const void *params)
{
	CUpti_CallbackFunc cb;
	void *ud;
	CUpti_CallbackData data = {
		.callbackSite = site, .functionName = fname, .correlationId = corr, .functionParams = params,
	};

	pthread_mutex_lock(&f.lock);
	cb = f.subscribed && (f.domain_on[d] || cbid_on(d, cbid)) ? f.cb : NULL;
	ud = f.cb_ud;
	if (cb && site == CUPTI_API_ENTER)
		f.api_callbacks++;
	pthread_mutex_unlock(&f.lock);
	if (cb)
		cb(ud, d, cbid, &data);
}

/* CUpti_ActivityAPI.threadId of the calling thread, as the real CUPTI
 * writes it (this file's head). Under f.lock. */
static uint32_t thread_id(void)
{
	if (f.tid_type == CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM)
		return (uint32_t)gettid();
	return (uint32_t)(uintptr_t)pthread_self();
}

static uint32_t api_call(CUpti_CallbackDomain d, CUpti_CallbackId cbid, const char *fname, const void *params)
{
	bool drv = d == CUPTI_CB_DOMAIN_DRIVER_API;
	CUpti_ActivityKind kind = drv ? CUPTI_ACTIVITY_KIND_DRIVER : CUPTI_ACTIVITY_KIND_RUNTIME;
	uint64_t t0 = mono_ns();
	uint32_t corr;

	pthread_mutex_lock(&f.lock);
	corr = ++f.corr;
	f.st.api_calls++;
	pthread_mutex_unlock(&f.lock);
	callback(d, cbid, fname, corr, CUPTI_API_ENTER, params);
	pthread_mutex_lock(&f.lock);
	if (kind_on(kind) && !(drv ? f.drv_off[cbid % CUPTI_DRIVER_TRACE_CBID_SIZE]
				   : f.rt_off[cbid % CUPTI_RUNTIME_TRACE_CBID_SIZE])) {
		uint64_t t1 = mono_ns();
		CUpti_ActivityAPI *a = reserve(sizeof(*a), t1);

		if (a) {
			a->kind = kind;
			a->cbid = cbid;
			a->start = t0;
			a->end = t1;
			a->processId = (uint32_t)getpid();
			a->threadId = thread_id();
			a->correlationId = corr;
			f.st.api_records++;
		}
	}
	pthread_mutex_unlock(&f.lock);
	callback(d, cbid, fname, corr, CUPTI_API_EXIT, params);
	return corr;
}

/* What a test asks of the subscription: whether API call @cbid of @d
 * reaches the subscriber now, and how many API calls have reached it. */
EXPORT unsigned fakecupti_callback_on(CUpti_CallbackDomain d, CUpti_CallbackId cbid);
EXPORT unsigned fakecupti_callback_on(CUpti_CallbackDomain d, CUpti_CallbackId cbid)
{
	unsigned on;

	pthread_mutex_lock(&f.lock);
	on = f.subscribed && (((unsigned)d < CUPTI_CB_DOMAIN_SIZE && f.domain_on[d]) || cbid_on(d, cbid));
	pthread_mutex_unlock(&f.lock);
	return on;
}

EXPORT uint64_t fakecupti_api_callbacks(void);
EXPORT uint64_t fakecupti_api_callbacks(void)
{
	uint64_t n;

	pthread_mutex_lock(&f.lock);
	n = f.api_callbacks;
	pthread_mutex_unlock(&f.lock);
	return n;
}

EXPORT uint32_t fakecupti_api(CUpti_CallbackDomain d, CUpti_CallbackId cbid, const char *fname)
{
	return api_call(d, cbid, fname, NULL);
}

/* Fill the fields every device activity record has, for a record of
 * @kind that runs @dur_ns from now; the struct's layout comes with @type. */
#define DEVICE_REC(r, type, k, corr_, device, stream, dur_ns)                        \
	do {                                                                         \
		uint64_t t_ = mono_ns();                                             \
		pthread_mutex_lock(&f.lock);                                         \
		if (!kind_on(k) || !((r) = reserve(sizeof(type), t_ + (dur_ns)))) { \
			pthread_mutex_unlock(&f.lock);                               \
			return;                                                      \
		}                                                                    \
		(r)->kind = (k);                                                     \
		(r)->start = t_;                                                     \
		(r)->end = t_ + (dur_ns);                                            \
		(r)->deviceId = (device);                                            \
		(r)->contextId = 1;                                                  \
		(r)->streamId = (stream);                                            \
		(r)->correlationId = (corr_);                                        \
	} while (0)

EXPORT void fakecupti_kernel(uint32_t corr, uint32_t device, uint32_t stream, const char *name,
			     uint64_t dur_ns, uint32_t graph)
{
	CUpti_ActivityKernel10 *k;

	DEVICE_REC(k, CUpti_ActivityKernel10, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, corr, device,
		   stream, dur_ns);
	k->gridX = 128;
	k->gridY = k->gridZ = 1;
	k->blockX = 256;
	k->blockY = k->blockZ = 1;
	k->registersPerThread = 32;
	k->graphId = graph;
	k->name = name; /* the caller keeps it alive, as CUPTI keeps module names */
	f.st.kernels_recorded++;
	pthread_mutex_unlock(&f.lock);
}

EXPORT void fakecupti_memcpy(uint32_t corr, uint32_t device, uint32_t stream, uint64_t bytes,
			     uint64_t dur_ns)
{
	CUpti_ActivityMemcpy6 *m;

	fakepm_copy(device, bytes); /* the copy moves data whether traced or not */
	DEVICE_REC(m, CUpti_ActivityMemcpy6, CUPTI_ACTIVITY_KIND_MEMCPY, corr, device, stream, dur_ns);
	m->copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
	m->srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
	m->dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
	m->bytes = bytes;
	pthread_mutex_unlock(&f.lock);
}

EXPORT void fakecupti_memory(uint32_t corr, uint32_t device, uint32_t stream, bool alloc, uint64_t address,
			     uint64_t bytes, uint64_t pool, uint64_t pool_size)
{
	uint64_t t = mono_ns();
	CUpti_ActivityMemory4 *m;

	pthread_mutex_lock(&f.lock);
	if (!kind_on(CUPTI_ACTIVITY_KIND_MEMORY2) || !(m = reserve(sizeof(*m), t))) {
		pthread_mutex_unlock(&f.lock);
		return;
	}
	m->kind = CUPTI_ACTIVITY_KIND_MEMORY2;
	m->memoryOperationType = alloc ? CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION :
					 CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
	m->memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
	m->correlationId = corr;
	m->address = address;
	m->bytes = bytes;
	m->timestamp = t;
	m->processId = (uint32_t)getpid();
	m->deviceId = device;
	m->contextId = 1;
	m->streamId = pool ? stream : 0;
	m->isAsync = pool ? 1 : 0;
	if (pool) {
		m->memoryPoolConfig.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL;
		m->memoryPoolConfig.address = pool;
		m->memoryPoolConfig.pool.size = pool_size;
	}
	pthread_mutex_unlock(&f.lock);
}

EXPORT void fakecupti_fatal(void)
{
	CUpti_CallbackFunc cb;
	void *ud;
	CUpti_StateData data = { 0 };

	pthread_mutex_lock(&f.lock);
	cb = f.subscribed ? f.cb : NULL;
	ud = f.cb_ud;
	f.st.fatal = true;
	pthread_mutex_unlock(&f.lock);
	if (cb)
		cb(ud, CUPTI_CB_DOMAIN_STATE, CUPTI_CBID_STATE_FATAL_ERROR, &data);
}

EXPORT void fakecupti_get_state(struct fakecupti_state *s)
{
	pthread_mutex_lock(&f.lock);
	*s = f.st;
	s->subscribed = f.subscribed;
	s->kinds_enabled = f.kinds;
	s->per_thread = f.per_thread;
	s->domains_enabled = 0;
	for (unsigned i = 0; i < CUPTI_CB_DOMAIN_SIZE; i++)
		s->domains_enabled += f.domain_on[i];
	pthread_mutex_unlock(&f.lock);
}

/* ---- CUDA graphs ------------------------------------------------------------ */

/*
 * Executable graphs: a handle points into this table, as a CUgraphExec
 * points at the driver's object. Ids count from 40 so that a test tells
 * an exec id from a small constant.
 */
#define MAX_EXECS 64

static struct fake_exec {
	uint32_t id;
} execs[MAX_EXECS];
static unsigned n_execs;

EXPORT CUgraphExec fakecupti_graph_instantiate(void)
{
	struct fake_exec *e = NULL;

	pthread_mutex_lock(&f.lock);
	if (n_execs < MAX_EXECS) {
		e = &execs[n_execs++];
		e->id = 40 + n_execs;
	}
	pthread_mutex_unlock(&f.lock);
	return (CUgraphExec)e;
}

static const struct fake_exec *exec_of(CUgraphExec h)
{
	const struct fake_exec *e = (const struct fake_exec *)h;

	return e >= execs && e < execs + n_execs ? e : NULL;
}

EXPORT CUptiResult cuptiGetGraphExecId(CUgraphExec graphExec, uint32_t *pId)
{
	const struct fake_exec *e;

	counted_call();
	if (!pId)
		return CUPTI_ERROR_INVALID_PARAMETER;
	pthread_mutex_lock(&f.lock);
	e = exec_of(graphExec);
	*pId = e ? e->id : 0;
	pthread_mutex_unlock(&f.lock);
	return e ? CUPTI_SUCCESS : CUPTI_ERROR_INVALID_PARAMETER;
}

EXPORT uint32_t fakecupti_graph_launch(CUpti_CallbackDomain d, CUpti_CallbackId cbid, const char *fname,
				       CUgraphExec exec, CUstream stream)
{
	/* cuGraphLaunch_params and cudaGraphLaunch_v10000_params alike */
	struct {
		CUgraphExec exec;
		CUstream stream;
	} params = { exec, stream };

	return api_call(d, cbid, fname, &params);
}

/*
 * The GPU runs launch @corr of @exec: @nodes kernel nodes one after the
 * other, @node_dur_ns each. With CUPTI_ACTIVITY_KIND_GRAPH_TRACE on, one
 * CUpti_ActivityGraphTrace2 for the whole launch and no node records (the
 * kind's point: no visibility into the nodes); else one kernel record per
 * node carrying graphId (the executable's id, what cuptiGetGraphExecId
 * gives) and a graphNodeId unique to the node.
 */
EXPORT void fakecupti_graph_run(uint32_t corr, uint32_t device, uint32_t stream, CUgraphExec exec,
				unsigned nodes, const char *name, uint64_t node_dur_ns)
{
	uint64_t t = mono_ns();
	const struct fake_exec *e;
	uint32_t id;

	pthread_mutex_lock(&f.lock);
	e = exec_of(exec);
	id = e ? e->id : 0;
	if (kind_on(CUPTI_ACTIVITY_KIND_GRAPH_TRACE)) {
		CUpti_ActivityGraphTrace2 *g = reserve(sizeof(*g), t + nodes * node_dur_ns);

		if (g) {
			g->kind = CUPTI_ACTIVITY_KIND_GRAPH_TRACE;
			g->correlationId = corr;
			g->start = t;
			g->end = t + nodes * node_dur_ns;
			g->deviceId = g->endDeviceId = device;
			g->contextId = g->endContextId = 1;
			g->streamId = stream;
			g->graphId = id;
		}
		pthread_mutex_unlock(&f.lock);
		return;
	}
	for (unsigned i = 0; i < nodes && kind_on(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL); i++) {
		uint64_t s0 = t + i * node_dur_ns;
		CUpti_ActivityKernel10 *k = reserve(sizeof(*k), s0 + node_dur_ns);

		if (!k)
			break;
		k->kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
		k->start = s0;
		k->end = s0 + node_dur_ns;
		k->deviceId = device;
		k->contextId = 1;
		k->streamId = stream;
		k->correlationId = corr;
		k->gridX = 64;
		k->gridY = k->gridZ = 1;
		k->blockX = 128;
		k->blockY = k->blockZ = 1;
		k->registersPerThread = 32;
		k->graphId = id;
		k->graphNodeId = ((uint64_t)id << 32) | (i + 1);
		k->name = name;
		f.st.kernels_recorded++;
	}
	pthread_mutex_unlock(&f.lock);
}
