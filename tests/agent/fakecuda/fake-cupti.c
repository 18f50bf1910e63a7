/* SPDX-License-Identifier: MIT */
/*
 * fake-cupti.c - a stand-in for libcupti.so.13 so that the real, unmodified
 * libprofd-agent.so runs end to end on a machine without a GPU.
 *
 * It implements the CUPTI calls the agent makes, with CUPTI's rules as the
 * agent relies on them: one subscriber at a time, callbacks only for
 * enabled domains, activity records only for enabled kinds, written into
 * buffers the agent hands out (a declined buffer drops records and counts
 * them) and handed back by cuptiActivityFlushAll. A fake CUDA program
 * (fake-cuda-app.c) drives it through the fakecupti_* calls below, the way
 * the CUDA driver drives the real CUPTI. Everything is recorded for the
 * test to check: who subscribed, what is enabled, and which thread called
 * cuptiFinalize.
 *
 * Environment: FAKE_CUPTI_SUBSCRIBE=busy|privileges makes cuptiSubscribe_v2
 * fail as when another tool holds CUPTI / profiling is restricted;
 * FAKE_CUPTI_DROPPED=N: CUPTI lost N records of its own (reported once by
 * cuptiActivityGetNumDroppedRecords).
 *
 * Records in a buffer: an 8-byte size, then the CUPTI struct; this file
 * alone walks them (cuptiActivityGetNextRecord).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cupti.h>

#include "fake-cupti.h"

#define EXPORT __attribute__((visibility("default")))
#define MAX_DONE 256
#define MAX_KINDS 64

static struct {
	pthread_mutex_t lock;
	bool subscribed;
	CUpti_CallbackFunc cb;
	void *cb_ud;
	bool domain_on[CUPTI_CB_DOMAIN_SIZE];
	uint64_t kinds; /* 1 << CUpti_ActivityKind */
	CUpti_BuffersCallbackRequestFunc req;
	CUpti_BuffersCallbackCompleteFunc comp;
	uint8_t *buf; /* being filled */
	size_t size, used;
	struct {
		uint8_t *buf;
		size_t used;
	} done[MAX_DONE];
	unsigned n_done;
	uint32_t corr;
	size_t dropped;
	struct fakecupti_state st;
} f = { .lock = PTHREAD_MUTEX_INITIALIZER };

static uint64_t mono_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* ---- the CUPTI API the agent calls ---------------------------------------- */

/* After a fatal error CUPTI is gone: every call the agent still makes is
 * counted for the test (it must make none). */
static void counted_call(void)
{
	pthread_mutex_lock(&f.lock);
	if (f.st.fatal)
		f.st.calls_after_fatal++;
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
	counted_call();
	*v = 130001;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiSubscribe_v2(CUpti_SubscriberHandle *h, CUpti_CallbackFunc cb, void *ud,
				     CUpti_SubscriberParams *p)
{
	counted_call();
	const char *mode = getenv("FAKE_CUPTI_SUBSCRIBE");
	CUptiResult r = CUPTI_SUCCESS;

	pthread_mutex_lock(&f.lock);
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
		f.cb = cb;
		f.cb_ud = ud;
		*h = (CUpti_SubscriberHandle)&f;
	}
	pthread_mutex_unlock(&f.lock);
	return r;
}

EXPORT CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle h)
{
	counted_call();
	(void)h;
	pthread_mutex_lock(&f.lock);
	f.st.unsubscribe_calls++;
	f.subscribed = false;
	f.cb = NULL;
	memset(f.domain_on, 0, sizeof(f.domain_on));
	pthread_mutex_unlock(&f.lock);
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiEnableDomain(uint32_t on, CUpti_SubscriberHandle h, CUpti_CallbackDomain d)
{
	counted_call();
	(void)h;
	if ((unsigned)d >= CUPTI_CB_DOMAIN_SIZE)
		return CUPTI_ERROR_INVALID_PARAMETER;
	pthread_mutex_lock(&f.lock);
	f.domain_on[d] = on;
	pthread_mutex_unlock(&f.lock);
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiEnableCallback(uint32_t on, CUpti_SubscriberHandle h, CUpti_CallbackDomain d,
				       CUpti_CallbackId cbid)
{
	counted_call();
	(void)h;
	(void)on;
	(void)d;
	(void)cbid; /* only the STATE domain's fatal-error callback is asked for */
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiSetThreadIdType(CUpti_ActivityThreadIdType t)
{
	counted_call();
	(void)t;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc req,
						  CUpti_BuffersCallbackCompleteFunc comp)
{
	counted_call();
	pthread_mutex_lock(&f.lock);
	f.req = req;
	f.comp = comp;
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

EXPORT CUptiResult cuptiActivityEnable(CUpti_ActivityKind k)
{
	counted_call();
	return kind_set(k, true);
}

EXPORT CUptiResult cuptiActivityDisable(CUpti_ActivityKind k)
{
	counted_call();
	return kind_set(k, false);
}

/* Move the buffer being filled to the completed list (lock held). */
static void retire(void)
{
	if (f.buf && f.n_done < MAX_DONE) {
		f.done[f.n_done].buf = f.buf;
		f.done[f.n_done].used = f.used;
		f.n_done++;
	}
	f.buf = NULL;
	f.used = f.size = 0;
}

EXPORT CUptiResult cuptiActivityFlushAll(uint32_t flag)
{
	counted_call();
	CUpti_BuffersCallbackCompleteFunc comp;
	unsigned n;
	typeof(f.done[0]) done[MAX_DONE];

	(void)flag;
	pthread_mutex_lock(&f.lock);
	f.st.flushes++;
	if (f.used)
		retire();
	n = f.n_done;
	memcpy(done, f.done, n * sizeof(done[0]));
	f.n_done = 0;
	comp = f.comp;
	pthread_mutex_unlock(&f.lock);
	/* CUPTI calls back without its own locks held: the agent takes its own. */
	for (unsigned i = 0; i < n && comp; i++)
		comp(NULL, 0, done[i].buf, 0, done[i].used);
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityGetNextRecord(uint8_t *buf, size_t valid, CUpti_Activity **rec)
{
	counted_call();
	uint8_t *p = *rec ? (uint8_t *)*rec - 8 : buf;

	if (*rec) {
		uint64_t sz;

		memcpy(&sz, p, sizeof(sz));
		p += 8 + sz;
	}
	if (p + 8 > buf + valid)
		return CUPTI_ERROR_MAX_LIMIT_REACHED;
	*rec = (CUpti_Activity *)(p + 8);
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext ctx, uint32_t stream, size_t *n)
{
	counted_call();
	(void)ctx;
	(void)stream;
	const char *extra = getenv("FAKE_CUPTI_DROPPED");
	static bool extra_told;

	pthread_mutex_lock(&f.lock);
	*n = f.dropped;
	if (extra && !extra_told) {
		*n += strtoul(extra, NULL, 10);
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
	counted_call();
	pthread_mutex_lock(&f.lock);
	f.st.finalize_calls++;
	f.st.finalize_tid = gettid();
	f.st.finalized_while_subscribed |= f.subscribed;
	f.kinds = 0; /* CUPTI is torn down: the next subscriber starts afresh */
	f.req = NULL;
	f.comp = NULL;
	pthread_mutex_unlock(&f.lock);
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiGetCallbackName(CUpti_CallbackDomain d, uint32_t cbid, const char **name)
{
	counted_call();
	*name = NULL;
	if (d == CUPTI_CB_DOMAIN_RUNTIME_API && cbid == CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000)
		*name = "cudaLaunchKernel_v7000";
	else if (d == CUPTI_CB_DOMAIN_DRIVER_API && cbid == CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2)
		*name = "cuMemcpyHtoDAsync_v2";
	else if (d == CUPTI_CB_DOMAIN_DRIVER_API && cbid == CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent)
		*name = "cuCtxGetCurrent";
	return *name ? CUPTI_SUCCESS : CUPTI_ERROR_INVALID_PARAMETER;
}

/* ---- the driver's side: what a CUDA program's calls make CUPTI do --------- */

/* Room for a record of @size in the current buffer, asking the agent for a
 * new one when needed; NULL (and one more dropped record) if it declines.
 * Called and returns with the lock held (dropped around the request). */
static void *reserve(size_t size)
{
	CUpti_BuffersCallbackRequestFunc req;
	uint8_t *b = NULL;
	size_t bsize = 0, max = 0;
	uint64_t sz = (size + 7) & ~(size_t)7;
	void *p;

	if (f.buf && f.used + 8 + sz > f.size)
		retire();
	if (!f.buf) {
		req = f.req;
		pthread_mutex_unlock(&f.lock);
		if (req)
			req(&b, &bsize, &max); /* outside the lock: it takes the agent's */
		pthread_mutex_lock(&f.lock);
		if (!b || bsize < 8 + sz) {
			f.dropped++;
			f.st.declined++;
			return NULL;
		}
		if (f.buf) /* another thread got one meanwhile */
			retire();
		f.buf = b;
		f.size = bsize;
		f.used = 0;
	}
	memcpy(f.buf + f.used, &sz, 8);
	p = f.buf + f.used + 8;
	memset(p, 0, sz);
	f.used += 8 + sz;
	return p;
}

static bool kind_on(CUpti_ActivityKind k)
{
	return (f.kinds >> k) & 1;
}

static void callback(CUpti_CallbackDomain d, CUpti_CallbackId cbid, const char *fname, uint32_t corr,
		     CUpti_ApiCallbackSite site)
{
	CUpti_CallbackFunc cb;
	void *ud;
	CUpti_CallbackData data = {
		.callbackSite = site, .functionName = fname, .correlationId = corr,
	};

	pthread_mutex_lock(&f.lock);
	cb = f.subscribed && f.domain_on[d] ? f.cb : NULL;
	ud = f.cb_ud;
	pthread_mutex_unlock(&f.lock);
	if (cb)
		cb(ud, d, cbid, &data);
}

EXPORT uint32_t fakecupti_api(CUpti_CallbackDomain d, CUpti_CallbackId cbid, const char *fname)
{
	CUpti_ActivityKind kind = d == CUPTI_CB_DOMAIN_DRIVER_API ? CUPTI_ACTIVITY_KIND_DRIVER
								  : CUPTI_ACTIVITY_KIND_RUNTIME;
	uint64_t t0 = mono_ns();
	uint32_t corr;

	pthread_mutex_lock(&f.lock);
	corr = ++f.corr;
	f.st.api_calls++;
	pthread_mutex_unlock(&f.lock);
	callback(d, cbid, fname, corr, CUPTI_API_ENTER);
	pthread_mutex_lock(&f.lock);
	if (kind_on(kind)) {
		CUpti_ActivityAPI *a = reserve(sizeof(*a));

		if (a) {
			a->kind = kind;
			a->cbid = cbid;
			a->start = t0;
			a->end = mono_ns();
			a->processId = (uint32_t)getpid();
			a->threadId = (uint32_t)gettid();
			a->correlationId = corr;
		}
	}
	pthread_mutex_unlock(&f.lock);
	callback(d, cbid, fname, corr, CUPTI_API_EXIT);
	return corr;
}

/* Fill the fields every device activity record has, for a record of
 * @kind that ran @dur_ns from now; the struct's layout comes with @type. */
#define DEVICE_REC(r, type, k, corr_, device, stream, dur_ns)                        \
	do {                                                                         \
		uint64_t t_ = mono_ns();                                             \
		pthread_mutex_lock(&f.lock);                                         \
		if (!kind_on(k) || !((r) = reserve(sizeof(type)))) {                 \
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
			     uint64_t dur_ns)
{
	CUpti_ActivityKernel10 *k;

	DEVICE_REC(k, CUpti_ActivityKernel10, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, corr, device,
		   stream, dur_ns);
	k->gridX = 128;
	k->gridY = k->gridZ = 1;
	k->blockX = 256;
	k->blockY = k->blockZ = 1;
	k->registersPerThread = 32;
	k->name = name; /* the caller keeps it alive, as CUPTI keeps module names */
	f.st.kernels_recorded++;
	pthread_mutex_unlock(&f.lock);
}

EXPORT void fakecupti_memcpy(uint32_t corr, uint32_t device, uint32_t stream, uint64_t bytes,
			     uint64_t dur_ns)
{
	CUpti_ActivityMemcpy6 *m;

	DEVICE_REC(m, CUpti_ActivityMemcpy6, CUPTI_ACTIVITY_KIND_MEMCPY, corr, device, stream, dur_ns);
	m->copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
	m->srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
	m->dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
	m->bytes = bytes;
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
	s->domains_enabled = 0;
	for (unsigned i = 0; i < CUPTI_CB_DOMAIN_SIZE; i++)
		s->domains_enabled += f.domain_on[i];
	pthread_mutex_unlock(&f.lock);
}
