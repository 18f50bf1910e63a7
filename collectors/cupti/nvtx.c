/* SPDX-License-Identifier: MIT */
/*
 * nvtx.c - the agent as NVTX tool (see nvtx.h).
 *
 * NVTX hands its tool a table of function-pointer slots per module
 * (NvtxExportTableCallbacks.GetModuleFunctionTable); we fill the CORE
 * (push/pop, start/end, A and W) and CORE2 (domains, registered strings)
 * slots. Every entry point starts with one relaxed load of `capturing`
 * and returns at once when it is 0, so a job between captures pays a
 * call and a load per NVTX call.
 *
 * Ownership: `tstack` is the calling thread's own. `q` (the queue) and
 * `strs` (the string table) are shared: each under its mutex, held for a
 * copy, never across a call out. The agent thread alone reads the queue
 * out, maps NVTX string ids to the converter's (`conv_id`) and owns the
 * counters once a capture is closed.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <wchar.h>

#include "base/hash.h"
#include "nvtx-abi.h"
#include "nvtx.h"

#define EXPORT __attribute__((visibility("default")))
/* Push/pop levels a thread keeps; deeper ones are counted, not kept. */
_Static_assert((AGENT_NVTX_MAX_STRINGS & (AGENT_NVTX_MAX_STRINGS - 1)) == 0, "the slot table masks by it");
#define TSTACK_MAX 64u
/* Open start/end ranges at once (they may end on another thread). */
#define OPEN_MAX 4096u
/* Domains a process may create. */
#define DOMAINS_MAX 256u

/* One queued event: a finished range or a launch's stack. */
struct qev {
	uint64_t start, end, payload;
	uint32_t tid, correlation, domain, category, depth;
	uint8_t kind, payload_type, flags, n;
	struct agent_nvtx_level lv[AGENT_NVTX_MAX_LEVELS]; /* text = our string id */
};

struct level {
	uint64_t start, payload;
	uint32_t serial, text, domain, category;
	uint8_t payload_type;
};

struct tstack {
	uint64_t gen; /* the capture this stack belongs to */
	uint32_t n;   /* depth, may exceed TSTACK_MAX */
	struct level e[TSTACK_MAX];
};

static __thread struct tstack ts;

static struct {
	atomic_int capturing; /* 0, 1 or 2: see agent_nvtx_enable() */
	bool enabled;         /* START's AGENT_START_NVTX; agent thread */
	atomic_int attached;
	atomic_ullong gen;
	atomic_uint serial;
	/* cuptiGetTimestamp while a capture is open, NULL otherwise: after the
	 * capture CUPTI is finalized, and a call would start it again. */
	_Atomic(CUptiResult (*)(uint64_t *)) clock;
	void (*on_attach)(void);
	atomic_int following;

	pthread_mutex_t qlock;
	struct qev *q; /* AGENT_NVTX_QUEUE, allocated at the first capture */
	uint32_t q_head, q_n;
	struct agent_nvtx_counts counts;

	pthread_mutex_t slock;
	char *texts[AGENT_NVTX_MAX_STRINGS + 1]; /* [id], 1-based */
	uint64_t hashes[AGENT_NVTX_MAX_STRINGS + 1];
	uint32_t slots[AGENT_NVTX_MAX_STRINGS * 2]; /* open addressing by hash: id, 0 = empty */
	uint32_t n_texts;
	size_t text_bytes;
	uint32_t conv_id[AGENT_NVTX_MAX_STRINGS + 1]; /* agent thread: converter id, 0 = not sent */

	pthread_mutex_t olock; /* start/end ranges */
	struct level open[OPEN_MAX];
	uint32_t open_tid[OPEN_MAX];
	uint64_t open_key[OPEN_MAX]; /* 0 = free, else the id handed out */
	uint64_t next_key;

	uint32_t domains[DOMAINS_MAX]; /* domain handle - 1 -> name's string id */
	atomic_uint n_domains;
} N = {
	.enabled = true,
	.qlock = PTHREAD_MUTEX_INITIALIZER,
	.slock = PTHREAD_MUTEX_INITIALIZER,
	.olock = PTHREAD_MUTEX_INITIALIZER,
};

/* The placeholder for texts beyond the budget. */
#define OVER_TEXT "(NVTX string budget exceeded)"

/* 1: capturing and this capture wants NVTX (agent_nvtx_enable()); one load. */
static bool on(void) { return atomic_load_explicit(&N.capturing, memory_order_relaxed) == 1; }

static uint64_t now(void)
{
	CUptiResult (*clock)(uint64_t *) = atomic_load_explicit(&N.clock, memory_order_acquire);
	uint64_t t = 0;

	if (clock)
		clock(&t);
	return t;
}

static uint32_t tid(void) { return (uint32_t)gettid(); }

/* The id of @s (@n bytes), interned; the placeholder's id when the table
 * is full; 0 when not even that fits. The slot table is twice the id
 * space, so a probe ends at an empty slot within a few steps. */
static uint32_t intern_n(const char *s, size_t n)
{
	const uint32_t mask = AGENT_NVTX_MAX_STRINGS * 2 - 1;
	uint64_t h;
	uint32_t id = 0, j;

	if (n > AGENT_NVTX_MAX_TEXT)
		n = AGENT_NVTX_MAX_TEXT;
	h = hash_bytes64(s, n);
	pthread_mutex_lock(&N.slock);
	for (j = (uint32_t)h & mask; N.slots[j]; j = (j + 1) & mask) {
		uint32_t i = N.slots[j];

		if (N.hashes[i] == h && strlen(N.texts[i]) == n && memcmp(N.texts[i], s, n) == 0) {
			id = i;
			break;
		}
	}
	if (!id && N.n_texts + 1 < AGENT_NVTX_MAX_STRINGS && N.text_bytes + n <= AGENT_NVTX_MAX_STRING_BYTES) {
		char *c = strndup(s, n);

		if (c) {
			id = ++N.n_texts;
			N.texts[id] = c;
			N.hashes[id] = h;
			N.slots[j] = id;
			N.text_bytes += n;
		}
	}
	if (!id) {
		N.counts.strings_dropped++;
		if (!N.texts[AGENT_NVTX_MAX_STRINGS])
			N.texts[AGENT_NVTX_MAX_STRINGS] = strdup(OVER_TEXT);
		id = N.texts[AGENT_NVTX_MAX_STRINGS] ? AGENT_NVTX_MAX_STRINGS : 0;
	}
	pthread_mutex_unlock(&N.slock);
	return id;
}

static uint32_t intern(const char *s) { return s ? intern_n(s, strnlen(s, AGENT_NVTX_MAX_TEXT)) : 0; }

/* Wide texts: ASCII kept, anything else becomes '?'. */
static uint32_t intern_w(const wchar_t *w)
{
	char b[AGENT_NVTX_MAX_TEXT];
	size_t n = 0;

	if (!w)
		return 0;
	for (; w[n] && n < sizeof(b); n++)
		b[n] = w[n] > 0 && w[n] < 0x80 ? (char)w[n] : '?';
	return intern_n(b, n);
}

/* Registered strings and domains are handles we gave out: small integers. */
static uint32_t handle_id(const void *h, uint32_t max)
{
	uintptr_t v = (uintptr_t)h;

	return v >= 1 && v <= max ? (uint32_t)v : 0;
}

static uint32_t domain_text(nvtxDomainHandle_t d)
{
	uint32_t i = handle_id(d, DOMAINS_MAX);

	return i && i <= atomic_load(&N.n_domains) ? N.domains[i - 1] : 0;
}

static void fill_level(struct level *l, const nvtxEventAttributes_t *a, uint32_t domain)
{
	memset(l, 0, sizeof(*l));
	l->domain = domain;
	if (!a)
		return;
	l->category = a->category;
	switch (a->messageType) {
	case NVTX_MESSAGE_TYPE_ASCII: l->text = intern(a->message.ascii); break;
	case NVTX_MESSAGE_TYPE_UNICODE: l->text = intern_w(a->message.unicode); break;
	case NVTX_MESSAGE_TYPE_REGISTERED: l->text = handle_id(a->message.registered, AGENT_NVTX_MAX_STRINGS); break;
	default: break;
	}
	switch (a->payloadType) {
	case NVTX_PAYLOAD_TYPE_UNSIGNED_INT64:
		l->payload_type = AGENT_NVTX_PAYLOAD_U64;
		l->payload = a->payload.ullValue;
		break;
	case NVTX_PAYLOAD_TYPE_UNSIGNED_INT32:
		l->payload_type = AGENT_NVTX_PAYLOAD_U64;
		l->payload = a->payload.uiValue;
		break;
	case NVTX_PAYLOAD_TYPE_INT64:
		l->payload_type = AGENT_NVTX_PAYLOAD_I64;
		l->payload = (uint64_t)a->payload.llValue;
		break;
	case NVTX_PAYLOAD_TYPE_INT32:
		l->payload_type = AGENT_NVTX_PAYLOAD_I64;
		l->payload = (uint64_t)(int64_t)a->payload.iValue;
		break;
	case NVTX_PAYLOAD_TYPE_DOUBLE:
	case NVTX_PAYLOAD_TYPE_FLOAT: {
		double d = a->payloadType == NVTX_PAYLOAD_TYPE_DOUBLE ? a->payload.dValue : a->payload.fValue;

		l->payload_type = AGENT_NVTX_PAYLOAD_DOUBLE;
		memcpy(&l->payload, &d, sizeof(d));
		break;
	}
	default: break;
	}
}

/* Room for one event in the queue, under qlock (NULL: dropped, counted). */
static struct qev *q_slot(void)
{
	struct agent_nvtx_counts *c = &N.counts;

	if (!N.q || N.q_n >= AGENT_NVTX_QUEUE || c->ranges + c->launches >= AGENT_NVTX_MAX_PER_CAPTURE) {
		c->dropped++;
		return NULL;
	}
	return &N.q[(N.q_head + N.q_n++) % AGENT_NVTX_QUEUE];
}

/* The levels of @st (plus @self when given) as wire levels: the outermost
 * AGENT_NVTX_MAX_LEVELS - 1 and the innermost. */
static uint8_t stack_levels(const struct tstack *st, const struct level *self, struct agent_nvtx_level *lv)
{
	uint32_t kept = st->n < TSTACK_MAX ? st->n : TSTACK_MAX;
	uint32_t total = kept + (self ? 1 : 0), k = 0;

	for (uint32_t i = 0; i < total; i++) {
		const struct level *l = i < kept ? &st->e[i] : self;

		if (total > AGENT_NVTX_MAX_LEVELS && k == AGENT_NVTX_MAX_LEVELS - 1 && i != total - 1)
			continue; /* the last slot is the innermost's */
		lv[k].serial = l->serial;
		lv[k].text_id = l->text;
		k++;
	}
	return (uint8_t)k;
}

static void queue_range(const struct level *l, uint64_t end, uint32_t t, uint32_t depth, uint8_t flags,
			const struct tstack *ancestors)
{
	struct qev *e;

	pthread_mutex_lock(&N.qlock);
	e = q_slot();
	if (e) {
		static const struct tstack none;

		memset(e, 0, sizeof(*e));
		e->kind = AGENT_NVTX_RANGE;
		e->start = l->start;
		e->end = end < l->start ? l->start : end;
		e->payload = l->payload;
		e->payload_type = l->payload_type;
		e->tid = t;
		e->domain = l->domain;
		e->category = l->category;
		e->depth = depth;
		e->flags = flags;
		e->n = stack_levels(ancestors ? ancestors : &none, l, e->lv);
		N.counts.ranges++;
	}
	pthread_mutex_unlock(&N.qlock);
}

/* This thread's stack for the current capture. */
static struct tstack *my_stack(void)
{
	uint64_t g = atomic_load_explicit(&N.gen, memory_order_relaxed);

	if (ts.gen != g) {
		ts.gen = g;
		ts.n = 0;
	}
	return &ts;
}

static int push(const nvtxEventAttributes_t *a, uint32_t domain)
{
	struct tstack *st;
	struct level l;

	if (!on())
		return 0;
	st = my_stack();
	fill_level(&l, a, domain);
	l.serial = atomic_fetch_add_explicit(&N.serial, 1, memory_order_relaxed) + 1;
	l.start = now();
	if (st->n < TSTACK_MAX)
		st->e[st->n] = l;
	return (int)st->n++;
}

static int pop(void)
{
	struct tstack *st;
	uint64_t end;

	if (!on())
		return 0;
	st = my_stack();
	if (st->n == 0)
		return -1; /* pushed before the capture opened */
	end = now();
	st->n--;
	if (st->n < TSTACK_MAX)
		queue_range(&st->e[st->n], end, tid(), st->n, 0, st);
	return (int)st->n;
}

static nvtxRangeId_t start(const nvtxEventAttributes_t *a, uint32_t domain)
{
	struct level l;
	nvtxRangeId_t id = 0;

	if (!on())
		return 0;
	fill_level(&l, a, domain);
	l.serial = atomic_fetch_add_explicit(&N.serial, 1, memory_order_relaxed) + 1;
	l.start = now();
	pthread_mutex_lock(&N.olock);
	for (uint32_t i = 0; i < OPEN_MAX; i++) {
		uint32_t j = (uint32_t)(N.next_key + i) % OPEN_MAX;

		if (!N.open_key[j]) {
			/* The id encodes the slot; the key check refuses a stale one. */
			id = ++N.next_key * OPEN_MAX + j;
			N.open_key[j] = id;
			N.open[j] = l;
			N.open_tid[j] = tid();
			break;
		}
	}
	if (!id)
		N.counts.dropped++;
	pthread_mutex_unlock(&N.olock);
	return id;
}

static void end(nvtxRangeId_t id)
{
	uint32_t j = (uint32_t)(id % OPEN_MAX), t = 0;
	struct level l;
	bool found = false;
	uint64_t e;

	/* Only a start made during a capture has an id: free its slot even
	 * when the capture has closed since, else it would stay taken. */
	if (!id)
		return;
	e = on() ? now() : 0;
	pthread_mutex_lock(&N.olock);
	if (N.open_key[j] == id) {
		l = N.open[j];
		t = N.open_tid[j];
		N.open_key[j] = 0;
		found = true;
	}
	pthread_mutex_unlock(&N.olock);
	if (found && on())
		queue_range(&l, e, t, 0, AGENT_NVTX_START_END, NULL);
}

/* ---- the entry points NVTX calls -------------------------------------------- */

static int NVTX_API push_ex(const nvtxEventAttributes_t *a) { return push(a, 0); }

static int NVTX_API push_a(const char *m)
{
	nvtxEventAttributes_t a = { .messageType = NVTX_MESSAGE_TYPE_ASCII, .message.ascii = m };

	return on() ? push(&a, 0) : 0;
}

static int NVTX_API push_w(const wchar_t *m)
{
	nvtxEventAttributes_t a = { .messageType = NVTX_MESSAGE_TYPE_UNICODE, .message.unicode = m };

	return on() ? push(&a, 0) : 0;
}

static int NVTX_API pop_core(void) { return pop(); }

static nvtxRangeId_t NVTX_API start_ex(const nvtxEventAttributes_t *a) { return start(a, 0); }

static nvtxRangeId_t NVTX_API start_a(const char *m)
{
	nvtxEventAttributes_t a = { .messageType = NVTX_MESSAGE_TYPE_ASCII, .message.ascii = m };

	return on() ? start(&a, 0) : 0;
}

static nvtxRangeId_t NVTX_API start_w(const wchar_t *m)
{
	nvtxEventAttributes_t a = { .messageType = NVTX_MESSAGE_TYPE_UNICODE, .message.unicode = m };

	return on() ? start(&a, 0) : 0;
}

static void NVTX_API end_core(nvtxRangeId_t id) { end(id); }

static int NVTX_API d_push(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
	return on() ? push(a, domain_text(d)) : 0;
}

static int NVTX_API d_pop(nvtxDomainHandle_t d)
{
	(void)d; /* one stack per thread for every domain: ranges nest in time */
	return pop();
}

static nvtxRangeId_t NVTX_API d_start(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
	return on() ? start(a, domain_text(d)) : 0;
}

static void NVTX_API d_end(nvtxDomainHandle_t d, nvtxRangeId_t id)
{
	(void)d;
	end(id);
}

/* Registration happens once, usually before any capture: always served. */
static nvtxStringHandle_t NVTX_API d_reg_a(nvtxDomainHandle_t d, const char *s)
{
	(void)d;
	return (nvtxStringHandle_t)(uintptr_t)intern(s);
}

static nvtxStringHandle_t NVTX_API d_reg_w(nvtxDomainHandle_t d, const wchar_t *s)
{
	(void)d;
	return (nvtxStringHandle_t)(uintptr_t)intern_w(s);
}

static nvtxDomainHandle_t new_domain(uint32_t text)
{
	unsigned n = atomic_load(&N.n_domains);

	/* Several threads may create domains: claim a slot, then fill it. A
	 * reader never sees an unfilled slot for a handle it was not given. */
	while (n < DOMAINS_MAX && !atomic_compare_exchange_weak(&N.n_domains, &n, n + 1))
		;
	if (n >= DOMAINS_MAX)
		return NULL; /* the default domain */
	N.domains[n] = text;
	return (nvtxDomainHandle_t)(uintptr_t)(n + 1);
}

static nvtxDomainHandle_t NVTX_API d_create_a(const char *name) { return new_domain(intern(name)); }
static nvtxDomainHandle_t NVTX_API d_create_w(const wchar_t *name) { return new_domain(intern_w(name)); }

static void set_slot(NvtxFunctionTable t, unsigned size, unsigned id, NvtxFunctionPointer f)
{
	if (t && id <= size && t[id])
		*t[id] = f;
}

#define FP(f) ((NvtxFunctionPointer)(void (*)(void))(f))

/* Called by each NVTX copy in the process on its first call, when
 * NVTX_INJECTION64_PATH names this library. 1 = attached. */
EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get);
EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get)
{
	const NvtxExportTableCallbacks *cb = get ? get(NVTX_ETID_CALLBACKS) : NULL;
	NvtxFunctionTable t = NULL;
	unsigned n = 0;

	if (!cb || cb->struct_size < sizeof(*cb) || !cb->GetModuleFunctionTable)
		return 0;
	if (cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &t, &n)) {
		set_slot(t, n, NVTX_CBID_CORE_RangePushEx, FP(push_ex));
		set_slot(t, n, NVTX_CBID_CORE_RangePushA, FP(push_a));
		set_slot(t, n, NVTX_CBID_CORE_RangePushW, FP(push_w));
		set_slot(t, n, NVTX_CBID_CORE_RangePop, FP(pop_core));
		set_slot(t, n, NVTX_CBID_CORE_RangeStartEx, FP(start_ex));
		set_slot(t, n, NVTX_CBID_CORE_RangeStartA, FP(start_a));
		set_slot(t, n, NVTX_CBID_CORE_RangeStartW, FP(start_w));
		set_slot(t, n, NVTX_CBID_CORE_RangeEnd, FP(end_core));
	}
	if (cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &t, &n)) {
		set_slot(t, n, NVTX_CBID_CORE2_DomainRangePushEx, FP(d_push));
		set_slot(t, n, NVTX_CBID_CORE2_DomainRangePop, FP(d_pop));
		set_slot(t, n, NVTX_CBID_CORE2_DomainRangeStartEx, FP(d_start));
		set_slot(t, n, NVTX_CBID_CORE2_DomainRangeEnd, FP(d_end));
		set_slot(t, n, NVTX_CBID_CORE2_DomainRegisterStringA, FP(d_reg_a));
		set_slot(t, n, NVTX_CBID_CORE2_DomainRegisterStringW, FP(d_reg_w));
		set_slot(t, n, NVTX_CBID_CORE2_DomainCreateA, FP(d_create_a));
		set_slot(t, n, NVTX_CBID_CORE2_DomainCreateW, FP(d_create_w));
	}
	atomic_store(&N.attached, 1);
	if (N.on_attach) {
		N.on_attach();
		/* Once per NVTX copy, and only mid-capture: bounded, never a hang. */
		for (int i = 0; i < 100 && on() && !atomic_load(&N.following); i++)
			usleep(1000);
	}
	return 1;
}

/* ---- the agent's side ----------------------------------------------------------- */

void agent_nvtx_setup(void)
{
	static const int here;
	Dl_info info;

	/* The user's own NVTX tool (Nsight Systems, say) wins: only one can be. */
	if (getenv("NVTX_INJECTION64_PATH"))
		return;
	if (dladdr(&here, &info) && info.dli_fname && info.dli_fname[0] == '/')
		setenv("NVTX_INJECTION64_PATH", info.dli_fname, 0);
}

bool agent_nvtx_attached(void) { return atomic_load(&N.attached) != 0; }

void agent_nvtx_on_attach(void (*fn)(void)) { N.on_attach = fn; }

void agent_nvtx_following(int v) { atomic_store(&N.following, v); }

/*
 * `capturing` is 0 (no capture), 1 (capturing, NVTX wanted) or 2
 * (capturing, NVTX not wanted), so that the entry points keep their single
 * load. Turning NVTX on mid-capture voids the threads' stacks: ranges
 * pushed while it was off are unknown, and their pops must not close the
 * ones pushed after.
 */
void agent_nvtx_enable(bool enable)
{
	int cur;

	N.enabled = enable;
	cur = atomic_load(&N.capturing);
	if (cur == 0 || cur == (enable ? 1 : 2))
		return;
	if (enable)
		atomic_fetch_add(&N.gen, 1);
	atomic_store(&N.capturing, enable ? 1 : 2);
}

bool agent_nvtx_enabled(void) { return N.enabled; }

void agent_nvtx_capture(CUptiResult (*clock)(uint64_t *ts))
{
	if (clock) {
		pthread_mutex_lock(&N.qlock);
		if (!N.q)
			N.q = calloc(AGENT_NVTX_QUEUE, sizeof(*N.q));
		N.q_head = N.q_n = 0;
		memset(&N.counts, 0, sizeof(N.counts));
		pthread_mutex_unlock(&N.qlock);
		atomic_store(&N.clock, clock);
		pthread_mutex_lock(&N.olock);
		memset(N.open_key, 0, sizeof(N.open_key)); /* never ended: forgotten */
		pthread_mutex_unlock(&N.olock);
		atomic_fetch_add(&N.gen, 1); /* stacks of an earlier capture are void */
		atomic_store(&N.capturing, N.enabled ? 1 : 2);
	} else {
		atomic_store(&N.capturing, 0);
		atomic_store(&N.clock, NULL);
	}
}

void agent_nvtx_launch(uint32_t correlation)
{
	struct tstack *st;
	struct qev *e;

	if (!on())
		return;
	st = my_stack();
	if (st->n == 0)
		return;
	pthread_mutex_lock(&N.qlock);
	e = q_slot();
	if (e) {
		memset(e, 0, sizeof(*e));
		e->kind = AGENT_NVTX_LAUNCH;
		e->start = e->end = now();
		e->tid = tid();
		e->correlation = correlation;
		e->depth = st->n - 1;
		e->n = stack_levels(st, NULL, e->lv);
		N.counts.launches++;
	}
	pthread_mutex_unlock(&N.qlock);
}

void agent_nvtx_forget_ids(void) { memset(N.conv_id, 0, sizeof(N.conv_id)); }

/* Our string id -> the converter's (a STRING record the first time). */
static uint32_t conv_id(struct agent_conv *cv, uint32_t id)
{
	const char *text;

	if (!id || id > AGENT_NVTX_MAX_STRINGS)
		return 0;
	if (N.conv_id[id])
		return N.conv_id[id];
	pthread_mutex_lock(&N.slock);
	text = N.texts[id]; /* never freed or changed once set */
	pthread_mutex_unlock(&N.slock);
	N.conv_id[id] = text ? agent_conv_intern(cv, text) : 0;
	return N.conv_id[id];
}

static void emit(struct agent_conv *cv, const struct qev *e)
{
	struct agent_nvtx_level lv[AGENT_NVTX_MAX_LEVELS];
	uint32_t dom = conv_id(cv, e->domain);
	size_t size = sizeof(struct agent_rec_nvtx) + e->n * sizeof(lv[0]);
	struct agent_rec_nvtx *r;

	/* Strings first: interning may hand the batch over and move it. */
	for (uint8_t i = 0; i < e->n; i++) {
		lv[i].serial = e->lv[i].serial;
		lv[i].text_id = conv_id(cv, e->lv[i].text_id);
	}
	r = agent_conv_rec(cv, AGENT_REC_NVTX, size);
	if (!r)
		return;
	r->h.aux = e->n;
	r->start = e->start;
	r->end = e->end;
	r->payload = e->payload;
	r->tid = e->tid;
	r->correlation = e->correlation;
	r->domain_id = dom;
	r->category = e->category;
	r->kind = e->kind;
	r->payload_type = e->payload_type;
	r->flags = e->flags;
	r->depth = e->depth;
	memcpy(r + 1, lv, e->n * sizeof(lv[0]));
}

void agent_nvtx_drain(struct agent_conv *cv)
{
	struct qev batch[64];

	for (;;) {
		uint32_t n = 0;

		pthread_mutex_lock(&N.qlock);
		while (n < 64 && N.q_n) {
			batch[n++] = N.q[N.q_head];
			N.q_head = (N.q_head + 1) % AGENT_NVTX_QUEUE;
			N.q_n--;
		}
		pthread_mutex_unlock(&N.qlock);
		if (!n)
			return;
		for (uint32_t i = 0; i < n; i++)
			emit(cv, &batch[i]);
	}
}

void agent_nvtx_counts(struct agent_nvtx_counts *ret)
{
	pthread_mutex_lock(&N.qlock);
	*ret = N.counts;
	pthread_mutex_unlock(&N.qlock);
}
