/* SPDX-License-Identifier: MIT */
/*
 * cupti-floor.c - the least an in-process CUPTI tracer can cost: a CUDA
 * injection library (CUDA_INJECTION64_PATH) that enables the activity
 * kinds FLOOR names and counts the records, nothing else. It is the
 * "traced in-process" peer for the launch-bound CUDA loop in
 * bench/gpu-cupti-floor.py: what CUPTI itself costs per launch with the
 * kinds and attributes profd's agent uses, one switch at a time, against
 * which the agent's own share of a traced launch can be read.
 *
 * FLOOR (tokens separated by commas or spaces, e.g. "k,r,pt0"):
 *   k  CONCURRENT_KERNEL    r  RUNTIME    d  DRIVER
 *   m  MEMCPY, MEMCPY2, MEMSET           M  MEMORY2    o  OVERHEAD
 *   pt0 / pt1  CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER (CUPTI's default: 1)
 *   z1         ZEROED_OUT_ACTIVITY_BUFFER = 1 (the tracer zeroes slabs itself)
 *   sys        cuptiSetThreadIdType(SYSTEM)
 *   sub        cuptiSubscribe with only the fatal-error callback, as the agent
 *   cb         with sub: the driver and runtime API callback domains on (an
 *              empty callback), as the agent's launch stacks turn them on
 * FLOOR_DELAY_MS (default 300): kinds go on this long after injection, from
 * a thread, as a capture arms them in a running job. Prints "floor: on"
 * then, and at exit the records seen per kind ("floor: records ...").
 *
 * Built by tools/device-bundle (gpu-bin/libcupti-floor.so) against the
 * CUDA 13 headers; needs libcupti.so.13 on LD_LIBRARY_PATH at run time.
 */
#include <cupti.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BUF_SIZE (4u << 20) /* the agent's slab size */
#define POOL 64

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uint8_t *pool[POOL];
static unsigned n_pool, n_bufs;
static int zeroed;
static unsigned long long counts[64], dropped_bufs;
static CUpti_SubscriberHandle sub;

static void on_request(uint8_t **buf, size_t *size, size_t *max)
{
	uint8_t *b = NULL;

	pthread_mutex_lock(&lock);
	if (n_pool)
		b = pool[--n_pool];
	else if (n_bufs < POOL && (b = aligned_alloc(8, BUF_SIZE)))
		n_bufs++, memset(b, 0, BUF_SIZE);
	pthread_mutex_unlock(&lock);
	*buf = b;
	*size = b ? BUF_SIZE : 0;
	*max = 0;
	if (!b)
		__atomic_fetch_add(&dropped_bufs, 1, __ATOMIC_RELAXED);
}

static void on_complete(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size, size_t valid)
{
	CUpti_Activity *r = NULL;
	unsigned long long c[64] = { 0 };

	(void)ctx, (void)stream, (void)size;
	while (cuptiActivityGetNextRecord(buf, valid, &r) == CUPTI_SUCCESS)
		c[(unsigned)r->kind < 64 ? (unsigned)r->kind : 63]++;
	if (zeroed)
		memset(buf, 0, valid);
	pthread_mutex_lock(&lock);
	for (int i = 0; i < 64; i++)
		counts[i] += c[i];
	pool[n_pool++] = buf;
	pthread_mutex_unlock(&lock);
}

static void on_api(void *ud, CUpti_CallbackDomain d, CUpti_CallbackId id, const void *data)
{
	(void)ud, (void)d, (void)id, (void)data;
}

static const char *spec(void)
{
	const char *s = getenv("FLOOR");

	return s ? s : "k";
}

static int has(const char *tok)
{
	const char *s = spec();
	size_t n = strlen(tok);

	for (const char *p = s; (p = strstr(p, tok)); p++)
		if ((p == s || p[-1] == ',' || p[-1] == ' ') && (p[n] == 0 || p[n] == ',' || p[n] == ' '))
			return 1;
	return 0;
}

static void report(void)
{
	static const struct {
		CUpti_ActivityKind k;
		const char *name;
	} names[] = {
		{ CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "kernel" }, { CUPTI_ACTIVITY_KIND_RUNTIME, "runtime" },
		{ CUPTI_ACTIVITY_KIND_DRIVER, "driver" },             { CUPTI_ACTIVITY_KIND_MEMCPY, "memcpy" },
		{ CUPTI_ACTIVITY_KIND_MEMSET, "memset" },             { CUPTI_ACTIVITY_KIND_MEMORY2, "memory2" },
		{ CUPTI_ACTIVITY_KIND_OVERHEAD, "overhead" },
	};
	unsigned long long other = 0;

	cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	pthread_mutex_lock(&lock);
	fprintf(stderr, "floor: records");
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		fprintf(stderr, " %s=%llu", names[i].name, counts[names[i].k]);
		counts[names[i].k] = 0;
	}
	for (int i = 0; i < 64; i++)
		other += counts[i];
	fprintf(stderr, " other=%llu buffers=%u dropped_buffers=%llu\n", other, n_bufs, dropped_bufs);
	pthread_mutex_unlock(&lock);
}

static void *arm(void *arg)
{
	static const struct {
		char tok;
		CUpti_ActivityKind k;
	} kinds[] = {
		{ 'k', CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL }, { 'm', CUPTI_ACTIVITY_KIND_MEMCPY },
		{ 'm', CUPTI_ACTIVITY_KIND_MEMCPY2 },           { 'm', CUPTI_ACTIVITY_KIND_MEMSET },
		{ 'M', CUPTI_ACTIVITY_KIND_MEMORY2 },           { 'o', CUPTI_ACTIVITY_KIND_OVERHEAD },
		{ 'd', CUPTI_ACTIVITY_KIND_DRIVER },            { 'r', CUPTI_ACTIVITY_KIND_RUNTIME },
	};
	const char *d = getenv("FLOOR_DELAY_MS");
	long ms = d ? atol(d) : 300;
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	const char *s = spec();
	char tok[2] = { 0, 0 };

	(void)arg;
	nanosleep(&ts, NULL);
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		tok[0] = kinds[i].tok;
		if (has(tok)) {
			CUptiResult r = cuptiActivityEnable(kinds[i].k);

			if (r != CUPTI_SUCCESS)
				fprintf(stderr, "floor: cuptiActivityEnable(%d) = %d\n", (int)kinds[i].k, (int)r);
		}
	}
	fprintf(stderr, "floor: on (%s)\n", s);
	return NULL;
}

int InitializeInjection(void);
int InitializeInjection(void)
{
	pthread_t t;
	size_t n = sizeof(uint8_t);
	uint8_t v;

	if (has("sub") && cuptiSubscribe(&sub, (CUpti_CallbackFunc)on_api, NULL) == CUPTI_SUCCESS) {
		cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_STATE, CUPTI_CBID_STATE_FATAL_ERROR);
		if (has("cb")) {
			cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_DRIVER_API);
			cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API);
		}
	}
	if (has("sys"))
		cuptiSetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);
	if (has("pt0") || has("pt1")) {
		v = has("pt1");
		cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER, &n, &v);
	}
	if (has("z1")) {
		v = 1, n = sizeof(v), zeroed = 1;
		cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, &n, &v);
	}
	if (cuptiActivityRegisterCallbacks(on_request, on_complete) != CUPTI_SUCCESS) {
		fprintf(stderr, "floor: cuptiActivityRegisterCallbacks failed\n");
		return 0;
	}
	atexit(report);
	if (pthread_create(&t, NULL, arm, NULL) == 0)
		pthread_detach(t);
	return 1;
}
