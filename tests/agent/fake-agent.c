/* SPDX-License-Identifier: MIT */
/*
 * fake-agent.c - speaks the agent wire protocol (proto/agent/agent-proto.h)
 * like libprofd-agent.so would, without CUDA: tests and benches drive a real
 * profd with it.
 *
 *   fake-agent --socket PATH --devices GPU-a,GPU-b [--name NAME]
 *              [--kernels N] [--events N --spread-ms MS] [--captures N]
 *              [--dropped N] [--no-flush-reply] [--error CODE:TEXT]
 *              [--proto-version N] [--stats-v2 CUT,FOREIGN,FLAGS]
 *              [--hostile-times N] [--fake-uuids N] [--tid N] [--print-options]
 *              [--pm-hostile] [--name-bytes N]
 *              [--python] [--python-slow] [--python-hostile] [--python-flood N] [--late-kernels]
 *              [--stream-log FILE] [--step-ms LIST] [--api-error CODE]
 *
 * On START it sends a clock anchor (its clock is CLOCK_MONOTONIC, as an
 * unknown agent clock would be) and, per device in the order given (=
 * local ordinal), N launches: a cuLaunchKernel API event on the main
 * thread plus the kernel on stream 7, then a cuMemcpyHtoDAsync_v2 + H2D
 * copy, a memset, an alloc and a free on stream 8. With --events it
 * instead streams that many kernel records evenly over --spread-ms, and
 * prints "streamed" once the last is sent.
 * It prints "connected" and "started" lines on stdout for tests to wait on.
 *
 * --proto-version N speaks wire protocol version N (HELLO and every frame;
 * a v1 STATS is AGENT_STATS_V1_SIZE bytes). --stats-v2 fills the v2 STATS
 * fields cut_records, foreign_buffers and flags.
 *
 * --hostile-times N adds, after each device's normal records, N rounds of
 * records whose times no CUPTI would report (hostile_round()): profd must
 * drop or clamp them, count them, and keep every normal record.
 *
 * --pm-hostile adds, after the last device's records, hardware counter
 * records (PM_METRICS, PM_SAMPLE) for device 0 with values no sampler
 * reports (pm_round()): infinite, negative, huge, of an unnamed metric, of
 * a device that announced no metrics, a count that does not match.
 *
 * --print-options prints each START's options (also a START while
 * capturing, which changes only them) as one line before anything else it
 * does with it: "options flags=0xF interval_us=N buffer_mb=N metrics=CSV"
 * (tests of docs/options.md assert what reached the agent).
 *
 * --name-bytes N gives every kernel launch of the burst a name of its own,
 * N bytes long (a templated C++ name such as a CUTLASS GEMM's is ~500):
 * the names, not the records, are then most of what a capture holds.
 *
 * --python (v5) adds the Python records of a scripted job (py_script()):
 * frames and stacks of /src/train.py, the stack of each launch on device
 * 0 (kernels, the copy, the memset, the allocation; not the free) by its
 * correlation, the sampler's
 * points on the launching thread and on a second thread without CUDA
 * calls (tid + 1). test_agent_pystacks.py knows every value. From v6 its
 * STATS say what the stacks cost; --python-slow makes the 90th percentile
 * beyond the agent's histogram and the sampler's time too short to say.
 * --python-hostile adds definitions profd must refuse (a redefined frame
 * and stack, an absurd line, a stack naming an undefined frame) and makes
 * kernel 1's launch name the refused stack.
 * --python-flood N defines N stacks of AGENT_PY_MAX_DEPTH frames before
 * the launches (more than a connection's string budget holds) and makes
 * kernel 0's launch name the last one.
 *
 * --late-kernels (v5) adds, after device 0's burst, LATE_N launches whose
 * correlation ids collide modulo 8192 (c, c + 8192, ... and ids across the
 * uint32 wrap) among many consecutive ones: each with its own PY_LAUNCH
 * (stack: one frame of /src/late.py at line 1 + i) and NVTX LAUNCH (range
 * "op<i>:MatMul"), all sent before any of their kernels ("late_gemm", one
 * per launch in launch order), as a real job's launches precede by up to
 * a flush period the buffer holding their kernels. late_corr() gives the
 * ids; test_agent_pystacks.py checks that every kernel keeps its own.
 *
 * --api-error CODE sends, at START, one cuLaunchKernel API record that
 * returned CODE (a failing CUDA call: the cuda-error trigger).
 *
 * --step-ms LIST sends, at START, one NVTX range "train_step" per
 * comma-separated duration in ms, back to back on the main thread and
 * ending now (step-time rules, daemon/trigger.c).
 *
 * --stream-log FILE writes, in streaming mode, one line per kernel record
 * sent: "CORRELATION WALL_START_NS" (its start on profd's clock, through
 * the START clock anchor), so a test knows exactly which records a span
 * holds. SIGUSR1 then kills the agent with SIGKILL between two batches
 * (after one is sent and logged): no goodbye to profd, and a log that
 * names exactly what was sent (a bare SIGKILL could land between a send
 * and its log's flush).
 *
 * --fake-uuids N sends, after the real devices, N more DEVICE frames with
 * made-up UUIDs on the spare ordinals (reused: a hostile process claiming
 * many GPUs); no records name them.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent-conn.h"
#include "agent-proto.h"
#include "agent-records.h"

static const char *arg_socket;
static char *arg_devices;
static const char *arg_name;
static uint32_t arg_tid; /* --tid N: API records claim thread N (as in another pid namespace) */
static unsigned arg_kernels = 5;
static unsigned long arg_events;
static unsigned arg_spread_ms = 1000;
static unsigned arg_captures = 1;
static unsigned arg_dropped;
static int arg_no_flush_reply;
static int arg_print_options;
static unsigned arg_error_code; /* --error CODE:TEXT: refuse START like a failing CUPTI */
static const char *arg_error_text = "";
static unsigned arg_proto_version = AGENT_PROTO_VERSION;
static unsigned long long arg_cut, arg_foreign;
static unsigned arg_stats_flags;
static unsigned long arg_hostile;
static unsigned arg_fake_uuids;
static int arg_pm_hostile;
static unsigned arg_name_bytes;
static int arg_python, arg_python_hostile, arg_python_slow;
static unsigned arg_python_flood;
static int arg_late_kernels;

static struct agent_client cl;
static uint8_t batch[AGENT_FRAME_MAX];
static size_t blen;
static uint32_t corr = 1;
static uint32_t n_devs;
static uint64_t records_sent;

static void send_batch(void)
{
	if (blen && agent_client_send(&cl, AGENT_FRAME_RECORDS, batch, (uint32_t)blen) < 0) {
		fprintf(stderr, "fake-agent: send failed\n");
		exit(3);
	}
	blen = 0;
}

static void *put(uint16_t type, size_t size, uint32_t aux)
{
	struct agent_rec *h;

	if (blen + size > sizeof(batch))
		send_batch();
	h = agent_rec_lay(batch + blen, type, size, aux);
	blen += size;
	records_sent++;
	return h;
}

static void put_string(uint32_t id, const char *s)
{
	agent_rec_string_fill(put(AGENT_REC_STRING, agent_rec_string_size(s), (uint32_t)strlen(s)), id, s);
}

enum { S_KERNEL = 1, S_LAUNCH = 2, S_MEMCPY = 3, S_GEMM = 4, S_STEP = 5, S_OWN = 100 };

static void put_kernel(uint32_t dev, uint64_t t, uint32_t name, uint32_t c, uint32_t grid)
{
	struct agent_rec_kernel *k = put(AGENT_REC_KERNEL, sizeof(*k), 0);

	k->start = t + 10000;
	k->end = t + 60000;
	k->device = dev;
	k->context = 1 + dev;
	k->stream = 7;
	k->correlation = c;
	k->name_id = name;
	k->regs = 32;
	k->static_smem = 0;
	k->dynamic_smem = 16384;
	k->grid[0] = (int32_t)grid;
	k->grid[1] = k->grid[2] = 1;
	k->block[0] = 128;
	k->block[1] = k->block[2] = 1;
	k->occ_pct_e4 = 500000; /* 50 % */
}

static uint32_t main_tid(void) { return arg_tid ? arg_tid : (uint32_t)syscall(SYS_gettid); }

static void put_api(uint64_t t, uint32_t name, uint32_t c, uint32_t cbid)
{
	struct agent_rec_api *a = put(AGENT_REC_API, sizeof(*a), 0);

	a->start = t;
	a->end = t + 5000;
	a->tid = main_tid();
	a->correlation = c;
	a->cbid = cbid;
	a->name_id = name;
	a->domain = AGENT_API_DRIVER;
}

/*
 * One round of records with impossible times, on device @dev, around agent
 * time @t (inside the capture). Each kind names one rule of the receiver;
 * tests/agent/test_agent_hostile.py counts HOSTILE_PER_ROUND of them per
 * round. Correlation ids are 0 so no flow links them to normal records.
 */
#define HOSTILE_PER_ROUND 8
static void hostile_round(uint32_t dev, uint64_t t, uint64_t anchor)
{
	struct agent_rec_kernel *k;
	struct agent_rec_memcpy *m;
	struct agent_rec_memset *s;
	struct agent_rec_api *a;

	/* A 2^62 ns kernel starting inside the window. */
	put_kernel(dev, t, S_KERNEL, 0, 99);
	k = (struct agent_rec_kernel *)(batch + blen - sizeof(*k));
	k->end = k->start + (1ull << 62);
	/* Starting near UINT64_MAX (past INT64_MAX: no wall time). */
	put_kernel(dev, t, S_KERNEL, 0, 99);
	k = (struct agent_rec_kernel *)(batch + blen - sizeof(*k));
	k->start = UINT64_MAX - 5;
	k->end = UINT64_MAX;
	/* Ending before it starts. */
	m = put(AGENT_REC_MEMCPY, sizeof(*m), 0);
	m->start = t + 50000;
	m->end = t + 1000;
	m->device = m->dst_device = dev;
	m->stream = 8;
	m->copy_kind = AGENT_COPY_D2H;
	/* A duration of INT64_MAX ns. */
	s = put(AGENT_REC_MEMSET, sizeof(*s), 0);
	s->start = t + 1000;
	s->end = s->start + (uint64_t)INT64_MAX;
	s->device = dev;
	s->stream = 8;
	/* An API call of 2^62 ns. */
	put_api(t, S_LAUNCH, 0, 307);
	a = (struct agent_rec_api *)(batch + blen - sizeof(*a));
	a->end = a->start + (1ull << 62);
	/* Long before the clock anchor (an hour, or agent time 1). */
	put_api(t, S_LAUNCH, 0, 307);
	a = (struct agent_rec_api *)(batch + blen - sizeof(*a));
	a->start = anchor > 3600000000000ull ? anchor - 3600000000000ull : 1;
	a->end = a->start + 5000;
	/* Thirty years in the future, short and 2^62 ns long. */
	put_kernel(dev, t, S_KERNEL, 0, 99);
	k = (struct agent_rec_kernel *)(batch + blen - sizeof(*k));
	k->start = t + 1000000000000000000ull;
	k->end = k->start + 1000;
	put_api(t, S_LAUNCH, 0, 307);
	a = (struct agent_rec_api *)(batch + blen - sizeof(*a));
	a->start = t + 1000000000000000000ull;
	a->end = a->start + (1ull << 62);
}

static uint64_t clock_anchor;

/* ---- --python: the scripted job (the header comment) ---- */

enum { S_PY_TRAIN = 50, S_PY_MAIN, S_PY_FORWARD, S_PY_STEP, S_PY_LOADER, S_PY_FETCH };
enum { F_MAIN = 1, F_FWD22, F_FWD25, F_STEP, F_FETCH, F_ABSURD };
enum { ST_FWD = 1, ST_FWD25, ST_STEP, ST_LOADER, ST_BAD, ST_FLOOD = 1000 };

static void put_py_frame(uint32_t id, uint32_t file, uint32_t name, uint32_t first, uint32_t line)
{
	struct agent_rec_py_frame *f = put(AGENT_REC_PY_FRAME, sizeof(*f), 0);

	f->id = id;
	f->file_id = file;
	f->name_id = name;
	f->firstlineno = first;
	f->line = line;
}

static void put_py_stack(uint32_t id, uint32_t flags, const uint32_t *frames, uint32_t n)
{
	struct agent_rec_py_stack *st = put(AGENT_REC_PY_STACK, agent_rec_align(sizeof(*st) + n * 4), n);

	st->id = id;
	st->flags = flags;
	memcpy(st + 1, frames, n * sizeof(uint32_t));
}

static void put_py_launch(uint64_t t, uint32_t c, uint32_t stack)
{
	struct agent_rec_py_launch *l = put(AGENT_REC_PY_LAUNCH, sizeof(*l), 0);

	l->ts = t;
	l->tid = main_tid();
	l->correlation = c;
	l->stack_id = stack;
}

static void put_py_sample(uint64_t t, uint32_t tid, uint32_t stack)
{
	struct agent_rec_py_sample *sm = put(AGENT_REC_PY_SAMPLE, sizeof(*sm), 0);

	sm->ts = t;
	sm->tid = tid;
	sm->stack_id = stack;
}

/* The definitions, before any record names them. */
static void py_define(void)
{
	static const uint32_t fwd[] = { F_MAIN, F_FWD22 }, fwd25[] = { F_MAIN, F_FWD25 },
			      step[] = { F_MAIN, F_FWD22, F_STEP }, loader[] = { F_FETCH },
			      bad[] = { F_MAIN, 99 /* never defined */ };

	put_string(S_PY_TRAIN, "/src/train.py");
	put_string(S_PY_MAIN, "main");
	put_string(S_PY_FORWARD, "forward");
	put_string(S_PY_STEP, "Model.step;inner"); /* a ';' in a name: written ',' in stacks */
	put_string(S_PY_LOADER, "/usr/lib/python3/loader.py");
	put_string(S_PY_FETCH, "fetch");
	put_py_frame(F_MAIN, S_PY_TRAIN, S_PY_MAIN, 1, 10);
	put_py_frame(F_FWD22, S_PY_TRAIN, S_PY_FORWARD, 20, 22);
	put_py_frame(F_FWD25, S_PY_TRAIN, S_PY_FORWARD, 20, 25);
	put_py_frame(F_STEP, S_PY_TRAIN, S_PY_STEP, 30, 31);
	put_py_frame(F_FETCH, S_PY_LOADER, S_PY_FETCH, 5, 7);
	put_py_stack(ST_FWD, 0, fwd, 2);
	put_py_stack(ST_FWD25, 0, fwd25, 2);
	put_py_stack(ST_STEP, 0, step, 3);
	put_py_stack(ST_LOADER, AGENT_PY_STACK_TRUNCATED, loader, 1);
	if (arg_python_hostile) {
		put_py_frame(F_MAIN, S_PY_LOADER, S_PY_FETCH, 2, 3);        /* redefined: keeps its first meaning */
		put_py_frame(F_ABSURD, S_PY_TRAIN, S_PY_MAIN, 1, 0x7fffffff); /* no file has that line */
		put_py_stack(ST_BAD, 0, bad, 2);                            /* an undefined frame */
		put_py_stack(ST_FWD, 0, loader, 1);                         /* redefined */
	}
	for (uint32_t i = 0; i < arg_python_flood; i++) {
		uint32_t frames[AGENT_PY_MAX_DEPTH];

		for (uint32_t k = 0; k < AGENT_PY_MAX_DEPTH; k++)
			frames[k] = F_MAIN;
		put_py_stack(ST_FLOOD + i, 0, frames, AGENT_PY_MAX_DEPTH);
	}
}

/* The stack of kernel @i's launch on device 0. */
static uint32_t py_kernel_stack(unsigned i)
{
	static const uint32_t script[] = { ST_FWD, ST_FWD, ST_FWD25, ST_STEP, 0 };

	if (i == 0 && arg_python_flood)
		return ST_FLOOD + arg_python_flood - 1;
	if (i == 1 && arg_python_hostile)
		return ST_BAD;
	return i < sizeof(script) / sizeof(script[0]) ? script[i] : ST_FWD;
}

/* The sampler's points, around device 0's launches from @t0. */
static void py_samples(uint64_t t0)
{
	uint32_t tid = main_tid();

	put_py_sample(t0 + 50000, tid, ST_FWD);
	put_py_sample(t0 + 250000, tid, ST_FWD25);
	put_py_sample(t0 + 450000, tid, AGENT_PY_STACK_DROPPED);
	put_py_sample(t0 + 10000, tid + 1, ST_LOADER);
	put_py_sample(t0 + 20000, tid + 1, ST_LOADER);
	put_py_sample(t0 + 30000, tid + 1, 0);
}

/* ---- --late-kernels (the header comment) ---- */

enum { S_LATE = 60, S_LATE_FILE, S_LATE_FN, S_LATE_OP = 1000 };
enum { F_LATE = 10000, ST_LATE = 10000 };
/* 64 ids 8192 apart, 8 more across the uint32 wrap (the same residue),
 * 10000 consecutive ones (more than the 8192 slots profd once had). */
#define LATE_COLLIDE 64u
#define LATE_WRAP 8u
#define LATE_RUN 10000u
#define LATE_N (LATE_COLLIDE + LATE_WRAP + LATE_RUN)

/* Launch @i's correlation id (none is 0). */
static uint32_t late_corr(uint32_t i)
{
	if (i < LATE_COLLIDE)
		return 1000000u + i * 8192u;
	i -= LATE_COLLIDE;
	if (i < LATE_WRAP) /* uint32 arithmetic: 4 ids below 2^32, 4 from 576 on */
		return 1000000u % 8192u + (i - LATE_WRAP / 2) * 8192u;
	return 500000u + (i - LATE_WRAP);
}

static void late_kernels(uint64_t t)
{
	put_string(S_LATE, "late_gemm()");
	put_string(S_LATE_FILE, "/src/late.py");
	put_string(S_LATE_FN, "launch");
	for (uint32_t i = 0; i < LATE_N; i++) {
		uint32_t frame = F_LATE + i;
		char op[32];
		struct agent_rec_nvtx *r;
		struct agent_nvtx_level *lv;

		snprintf(op, sizeof(op), "op%u:MatMul", i);
		put_string(S_LATE_OP + i, op);
		r = put(AGENT_REC_NVTX, sizeof(*r) + sizeof(struct agent_nvtx_level), 1);
		lv = (struct agent_nvtx_level *)(r + 1);
		r->start = r->end = t + i * 10000ull;
		r->tid = main_tid();
		r->correlation = late_corr(i);
		r->kind = AGENT_NVTX_LAUNCH;
		lv->serial = 0;
		lv->text_id = S_LATE_OP + i;
		put_py_frame(frame, S_LATE_FILE, S_LATE_FN, 1, 1 + i);
		put_py_stack(ST_LATE + i, 0, &frame, 1);
		put_py_launch(t + i * 10000ull, late_corr(i), ST_LATE + i);
	}
	for (uint32_t i = 0; i < LATE_N; i++) {
		struct agent_rec_kernel *k;

		put_kernel(0, t + i * 10000ull, S_LATE, late_corr(i), 32);
		k = (struct agent_rec_kernel *)(batch + blen - sizeof(*k));
		k->end = k->start + 5000;
	}
}

static void put_pm_sample(uint32_t dev, uint64_t t, unsigned n, const double *v)
{
	struct agent_rec_pm_sample *r = put(AGENT_REC_PM_SAMPLE, sizeof(*r) + n * sizeof(double), n);

	r->start = t;
	r->end = t + 1000000;
	r->device = dev;
	memcpy(r + 1, v, n * sizeof(double));
}

/* --pm-hostile: one good value per metric among hostile ones (the header
 * comment); test_agent_pm.py knows each count. */
static void pm_round(uint64_t t)
{
	static const uint32_t ids[3] = { 20, 21, 99 /* never defined */ };
	const double s1[3] = { 42.0, __builtin_nan(""), 7.0 };
	const double s2[3] = { __builtin_inf(), -1.0, 1.0 };
	const double s3[3] = { 1e300, 3.0, 1.0 };
	const double s4[2] = { 5.0, 5.0 };
	struct agent_rec_pm_metrics *m;

	put_string(20, "good_metric.pct");
	put_string(21, "other_metric.sum");
	m = put(AGENT_REC_PM_METRICS, sizeof(*m) + sizeof(uint32_t) * 4, 3);
	m->device = 0;
	m->interval_us = 1000;
	memcpy(m + 1, ids, sizeof(ids));
	put_pm_sample(0, t, 3, s1);
	put_pm_sample(0, t + 1000000, 3, s2);
	put_pm_sample(0, t + 2000000, 3, s3);
	put_pm_sample(0, t + 3000000, 2, s4); /* not the announced count */
	put_pm_sample(0, 0, 3, s1);           /* no time: dropped like any record */
	if (n_devs > 1)
		put_pm_sample(1, t, 2, s4); /* device 1 announced nothing */
}

/* --name-bytes: kernel @i of device @d's own name, arg_name_bytes long
 * (distinct in its first bytes, padded like a long template argument list). */
static void put_own_name(uint32_t id, uint32_t d, unsigned i)
{
	char name[AGENT_MAX_STRING_LEN + 1];
	size_t n = arg_name_bytes < AGENT_MAX_STRING_LEN ? arg_name_bytes : AGENT_MAX_STRING_LEN;
	int k = snprintf(name, sizeof(name), "cutlass::Kernel<gemm_%u_%u", d, i);

	for (size_t j = (size_t)k; j < n; j++)
		name[j] = j + 1 == n ? '>' : "_Tile128x256"[j % 12];
	name[n > (size_t)k ? n : (size_t)k] = 0;
	put_string(id, name);
}

static void burst(void)
{
	uint64_t t = agent_mono_ns();

	put_string(S_KERNEL, "fake_gemm(float*, float*, int)"); /* agents send names demangled */
	put_string(S_LAUNCH, "cuLaunchKernel");
	put_string(S_MEMCPY, "cuMemcpyHtoDAsync_v2");
	bool py = arg_python || arg_python_hostile || arg_python_flood;

	if (py)
		py_define();
	for (uint32_t d = 0; d < n_devs; d++) {
		struct agent_rec_memcpy *m;
		struct agent_rec_memset *s;
		struct agent_rec_memory *a;
		bool py_dev = py && d == 0;

		if (py_dev)
			py_samples(t);
		for (unsigned i = 0; i < arg_kernels; i++, t += 100000) {
			uint32_t name = S_KERNEL;

			if (arg_name_bytes && i < AGENT_MAX_STRINGS - S_OWN) {
				name = S_OWN + i;
				put_own_name(name, d, i);
			}
			if (py_dev)
				put_py_launch(t, corr, py_kernel_stack(i));
			put_api(t, S_LAUNCH, corr, 307);
			put_kernel(d, t, name, corr++, 64 + d);
		}
		if (py_dev) {
			put_py_launch(t, corr, AGENT_PY_STACK_DROPPED); /* the copy */
			put_py_launch(t + 100000, corr + 1, ST_FWD);    /* the memset */
		}
		put_api(t, S_MEMCPY, corr, 279);
		m = put(AGENT_REC_MEMCPY, sizeof(*m), 0);
		m->start = t + 10000;
		m->end = t + 30000;
		m->bytes = 1 << 20;
		m->device = m->dst_device = d;
		m->context = 1 + d;
		m->stream = 8;
		m->correlation = corr++;
		m->copy_kind = AGENT_COPY_H2D;
		m->src_kind = AGENT_MEM_PAGEABLE;
		m->dst_kind = AGENT_MEM_DEVICE;
		m->async = 1;
		t += 100000;
		s = put(AGENT_REC_MEMSET, sizeof(*s), 0);
		s->start = t;
		s->end = t + 2000;
		s->bytes = 4096;
		s->device = d;
		s->context = 1 + d;
		s->stream = 8;
		s->correlation = corr++;
		s->mem_kind = AGENT_MEM_DEVICE;
		s->async = 1;
		t += 10000;
		for (int op = AGENT_MEMOP_ALLOC; op <= AGENT_MEMOP_FREE; op++, t += 10000) {
			if (py_dev && op == AGENT_MEMOP_ALLOC)
				put_py_launch(t, corr, ST_STEP); /* the free's call had no stack */
			a = put(AGENT_REC_MEMORY, sizeof(*a), 0);
			a->ts = t;
			a->bytes = 1 << 20;
			a->address = 0x7f0000000000ull;
			a->device = d;
			a->context = 1 + d;
			a->stream = UINT32_MAX;
			a->correlation = corr++;
			a->op = (uint8_t)op;
			a->mem_kind = AGENT_MEM_DEVICE;
		}
		for (unsigned long i = 0; i < arg_hostile; i++)
			hostile_round(d, t, clock_anchor);
		if (arg_late_kernels && d == 0)
			late_kernels(t += 100000);
	}
	if (arg_pm_hostile)
		pm_round(t);
	send_batch();
}

/* Streaming mode state. */
static unsigned long stream_sent;
static uint64_t stream_t0;
static FILE *stream_log;     /* --stream-log */
static const char *arg_step_ms; /* --step-ms */
static int arg_api_error;       /* --api-error */

/* --step-ms: the steps, ending at @now (agent clock). */
static void put_steps(uint64_t now)
{
	uint64_t total = 0, t;
	char *list = strdup(arg_step_ms), *save = NULL;

	if (!list)
		return;
	for (char *p = strtok_r(list, ",", &save); p; p = strtok_r(NULL, ",", &save))
		total += strtoull(p, NULL, 10) * 1000000ull;
	strcpy(list, arg_step_ms);
	put_string(S_STEP, "train_step");
	t = now - total;
	save = NULL;
	for (char *p = strtok_r(list, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
		struct agent_rec_nvtx *r = put(AGENT_REC_NVTX, sizeof(*r) + sizeof(struct agent_nvtx_level), 1);
		struct agent_nvtx_level *lv = (struct agent_nvtx_level *)(r + 1);
		static uint32_t serial;

		r->start = t;
		t += strtoull(p, NULL, 10) * 1000000ull;
		r->end = t;
		r->tid = arg_tid ? arg_tid : (uint32_t)syscall(SYS_gettid);
		r->kind = AGENT_NVTX_RANGE;
		lv->serial = ++serial;
		lv->text_id = S_STEP;
	}
	free(list);
	send_batch();
}

static volatile sig_atomic_t die_asked; /* SIGUSR1: see --stream-log */

static void on_usr1(int sig)
{
	(void)sig;
	die_asked = 1;
}

static int64_t stream_clock_off; /* wall - agent clock, from the START anchor */

static void stream_due(bool all)
{
	uint64_t now = agent_mono_ns();
	unsigned long before = stream_sent;
	unsigned long due = all ? arg_events :
			   (unsigned long)((double)arg_events * (double)(now - stream_t0) / (arg_spread_ms * 1e6));

	if (due > arg_events)
		due = arg_events;
	if (stream_sent == 0 && due)
		put_string(S_GEMM, "stream_gemm()");
	while (stream_sent < due) {
		/* Spread kernels over time and over 4 streams per device. */
		uint32_t d = (uint32_t)(stream_sent % n_devs);
		struct agent_rec_kernel *k;

		put_kernel(d, now - 100000, S_GEMM, corr++, 32);
		k = (struct agent_rec_kernel *)(batch + blen - sizeof(*k));
		k->stream = 7 + (uint32_t)(stream_sent / n_devs % 4);
		if (stream_log)
			fprintf(stream_log, "%u %lld\n", k->correlation,
				(long long)((int64_t)k->start + stream_clock_off));
		stream_sent++;
	}
	send_batch();
	if (stream_log)
		fflush(stream_log); /* a test may SIGKILL us: what was sent is logged */
	/* Tests whose machine may be slower than the spread wait for this. */
	if (before < arg_events && stream_sent == arg_events)
		printf("streamed\n");
}

/* STATS as this agent's protocol version has it. */
static void send_stats(void)
{
	struct agent_stats st = {
		.records = records_sent, .dropped_buffers = arg_dropped,
		.cut_records = arg_cut, .foreign_buffers = arg_foreign, .flags = arg_stats_flags,
	};

	if (arg_python) {
		/* py_define()'s script: 6 launch stacks taken, the copy's walk
		 * dropped; 5 samples taken, one dropped. */
		st.py_stacks = 6;
		st.py_dropped = 1;
		st.py_samples = 5;
		st.py_sample_drops = 1;
		/* v6: what they cost: 3 launches timed, median 0.48 us, 90 %
		 * under 0.90 us; the sampler 8 ms of CPU in 1.5 s. */
		st.py_timed = 3;
		st.py_launch_p50_ns = 480;
		st.py_launch_p90_ns = 900;
		st.py_sampler_cpu_ns = 8000000;
		st.py_sampler_wall_ns = 1500000000;
		if (arg_python_slow) { /* --python-slow: past the agent's histogram */
			st.py_launch_p90_ns = AGENT_PY_COST_BEYOND;
			st.py_sampler_wall_ns = 99000000; /* under 0.1 s: no share said */
		}
	}
	agent_client_send(&cl, AGENT_FRAME_STATS, &st,
			  cl.version == 1   ? AGENT_STATS_V1_SIZE
			  : cl.version <= 4 ? AGENT_STATS_V4_SIZE
			  : cl.version == 5 ? AGENT_STATS_V5_SIZE
					    : sizeof(st));
}

static void send_hello(void)
{
	struct agent_hello h;
	char *save = NULL, *devs = strdup(arg_devices);

	agent_client_hello(&h, 0);
	h.proto_version = cl.version;
	h.cuda_driver_version = 13000;
	h.cupti_version = 130001;
	n_devs = 0;
	for (char *u = strtok_r(devs, ",", &save); u; u = strtok_r(NULL, ",", &save))
		n_devs++;
	h.n_devices = n_devs;
	agent_client_send(&cl, AGENT_FRAME_HELLO, &h, sizeof(h));
	free(devs);
	devs = strdup(arg_devices);
	save = NULL;
	uint32_t i = 0;
	for (char *u = strtok_r(devs, ",", &save); u; u = strtok_r(NULL, ",", &save), i++) {
		struct agent_device d = {
			.local_ordinal = i, .cc_major = 9, .cc_minor = 0, .sm_count = 132,
			.sm_clock_khz = 1980000, .mem_clock_khz = 2619000, .bus_width_bits = 5120,
			.warp_size = 32, .max_threads_per_block = 1024, .max_threads_per_sm = 2048,
			.max_blocks_per_sm = 32, .regs_per_block = 65536, .regs_per_sm = 65536,
			.smem_per_block = 49152, .smem_per_block_optin = 232448, .smem_per_sm = 233472,
			.reserved_smem_per_block = 1024, .mem_bytes = 85899345920ull,
		};

		d.mem_bandwidth = 2ull * d.mem_clock_khz * 1000 * d.bus_width_bits / 8;
		snprintf(d.uuid, sizeof(d.uuid), "%s", u);
		snprintf(d.pci_bus_id, sizeof(d.pci_bus_id), "00000000:%02x:00.0", 0x18 + i);
		snprintf(d.name, sizeof(d.name), "Fake H100 %s", u);
		agent_client_send(&cl, AGENT_FRAME_DEVICE, &d, sizeof(d));
	}
	for (uint32_t k = 0; k < arg_fake_uuids && i < AGENT_MAX_DEVICES; k++) {
		struct agent_device d;

		memset(&d, 0, sizeof(d));
		d.local_ordinal = i + k % (AGENT_MAX_DEVICES - i);
		snprintf(d.uuid, sizeof(d.uuid), "GPU-fake%04x-%08x-0000-0000-000000000000", k & 0xffffu,
			 (unsigned)getpid());
		snprintf(d.name, sizeof(d.name), "Fake claim %u", k);
		agent_client_send(&cl, AGENT_FRAME_DEVICE, &d, sizeof(d));
	}
	free(devs);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },   { "devices", required_argument, NULL, 'd' },
		{ "name", required_argument, NULL, 'n' },     { "kernels", required_argument, NULL, 'k' },
		{ "events", required_argument, NULL, 'e' },   { "spread-ms", required_argument, NULL, 'S' },
		{ "captures", required_argument, NULL, 'c' }, { "dropped", required_argument, NULL, 'D' },
		{ "no-flush-reply", no_argument, &arg_no_flush_reply, 1 },
		{ "print-options", no_argument, &arg_print_options, 1 },
		{ "error", required_argument, NULL, 'E' },    { "proto-version", required_argument, NULL, 'V' },
		{ "stats-v2", required_argument, NULL, 'T' }, { "hostile-times", required_argument, NULL, 'H' },
		{ "fake-uuids", required_argument, NULL, 'U' }, { "tid", required_argument, NULL, 't' },
		{ "pm-hostile", no_argument, &arg_pm_hostile, 1 },
		{ "name-bytes", required_argument, NULL, 'B' },
		{ "python", no_argument, &arg_python, 1 },
		{ "python-slow", no_argument, &arg_python_slow, 1 },
		{ "python-hostile", no_argument, &arg_python_hostile, 1 },
		{ "python-flood", required_argument, NULL, 'F' },
		{ "late-kernels", no_argument, &arg_late_kernels, 1 },
		{ "stream-log", required_argument, NULL, 'L' },
		{ "step-ms", required_argument, NULL, 'P' },
		{ "api-error", required_argument, NULL, 'A' },
		{ NULL, 0, NULL, 0 },
	};
	unsigned captures = 0;
	bool capturing = false;
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 's': arg_socket = optarg; break;
		case 'd': arg_devices = optarg; break;
		case 'n': arg_name = optarg; break;
		case 'k': arg_kernels = (unsigned)atoi(optarg); break;
		case 'e': arg_events = strtoul(optarg, NULL, 10); break;
		case 'S': arg_spread_ms = (unsigned)atoi(optarg); break;
		case 'c': arg_captures = (unsigned)atoi(optarg); break;
		case 'D': arg_dropped = (unsigned)atoi(optarg); break;
		case 'E':
			arg_error_code = (unsigned)atoi(optarg);
			arg_error_text = strchr(optarg, ':') ? strchr(optarg, ':') + 1 : "";
			break;
		case 'B': arg_name_bytes = (unsigned)atoi(optarg); break;
		case 'F': arg_python_flood = (unsigned)atoi(optarg); break;
		case 'P': arg_step_ms = optarg; break;
		case 'A': arg_api_error = atoi(optarg); break;
		case 'L':
			stream_log = fopen(optarg, "w");
			if (!stream_log)
				return 2;
			break;
		case 'U': arg_fake_uuids = (unsigned)atoi(optarg); break;
		case 't': arg_tid = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'H': arg_hostile = strtoul(optarg, NULL, 10); break;
		case 'V': arg_proto_version = (unsigned)atoi(optarg); break;
		case 'T':
			if (sscanf(optarg, "%llu,%llu,%u", &arg_cut, &arg_foreign, &arg_stats_flags) != 3)
				return 2;
			break;
		case 0: break;
		default: return 2;
		}
	}
	if (!arg_devices)
		arg_devices = (char *)"GPU-00000000-0000-0000-0000-000000000000";
	if (arg_name)
		prctl(PR_SET_NAME, arg_name);
	setvbuf(stdout, NULL, _IOLBF, 0);
	sigaction(SIGUSR1, &(struct sigaction){ .sa_handler = on_usr1 }, NULL); /* poll() ends early */
	agent_client_init(&cl, arg_socket, "/run/profd/agent.sock");
	cl.version = (uint16_t)arg_proto_version;
	for (int i = 0; agent_client_connect(&cl) < 0; i++) {
		if (i > 200) {
			fprintf(stderr, "fake-agent: cannot connect to %s\n", cl.path);
			return 1;
		}
		usleep(50000);
	}
	send_hello();
	printf("connected\n");
	for (;;) {
		struct pollfd p = { .fd = cl.fd, .events = POLLIN };
		struct agent_frame_hdr h;
		uint8_t payload[sizeof(struct agent_start)];
		int r;

		if (cl.fd < 0)
			return capturing ? 4 : 0;
		poll(&p, 1, capturing && arg_events ? 2 : 200);
		while ((r = agent_client_recv(&cl, &h, payload, sizeof(payload))) > 0) {
			if (h.kind == AGENT_FRAME_START && arg_print_options) {
				struct agent_start st;

				memset(&st, 0, sizeof(st));
				memcpy(&st, payload, h.length < sizeof(st) ? h.length : sizeof(st));
				st.pm_metrics[sizeof(st.pm_metrics) - 1] = 0;
				printf("options flags=0x%llx interval_us=%u buffer_mb=%u metrics=%s",
				       (unsigned long long)st.flags, st.pm_interval_us, st.pm_buffer_mb,
				       st.pm_metrics);
				/* v5's fields, only where this agent speaks v5 */
				if (cl.version >= 5)
					printf(" py_hz=%u py_depth=%u", st.py_sample_hz, st.py_max_depth);
				printf("\n");
			}
			if (h.kind == AGENT_FRAME_START && !capturing && arg_error_code) {
				struct agent_error e = { .code = arg_error_code, .detail = 35 };

				snprintf(e.text, sizeof(e.text), "%s", arg_error_text);
				agent_client_send(&cl, AGENT_FRAME_ERROR, &e, sizeof(e));
				printf("refused\n");
			} else if (h.kind == AGENT_FRAME_START && !capturing) {
				struct agent_clock ck = { .agent_ns = agent_mono_ns(), .wall_ns = agent_wall_ns() };

				/* session.c starts collectors just before it stamps the
				 * window start; real CUPTI setup takes far longer. */
				usleep(2000);
				clock_anchor = ck.agent_ns;
				capturing = true;
				agent_client_send(&cl, AGENT_FRAME_CLOCK, &ck, sizeof(ck));
				if (arg_step_ms)
					put_steps(agent_mono_ns());
				if (arg_api_error) {
					struct agent_rec_api *api;

					put_string(S_LAUNCH, "cuLaunchKernel");
					put_api(agent_mono_ns() - 100000, S_LAUNCH, corr++, 307);
					api = (struct agent_rec_api *)(batch + blen - sizeof(*api));
					api->ret = arg_api_error;
					send_batch();
				}
				printf("started\n");
				if (arg_events) {
					stream_sent = 0;
					stream_t0 = agent_mono_ns();
					stream_clock_off = (int64_t)(ck.wall_ns - ck.agent_ns);
				} else {
					burst();
				}
			} else if (h.kind == AGENT_FRAME_FLUSH) {
				struct agent_flush f;

				if (arg_no_flush_reply)
					continue;
				memcpy(&f, payload, sizeof(f));
				if (arg_events)
					stream_due(false);
				send_stats();
				agent_client_send(&cl, AGENT_FRAME_FLUSHED, &f, sizeof(f));
			} else if (h.kind == AGENT_FRAME_STOP && arg_error_code) {
				printf("stopped\n");
				if (++captures >= arg_captures)
					return 0;
			} else if (h.kind == AGENT_FRAME_STOP && capturing) {
				capturing = false;
				send_stats();
				printf("stopped\n");
				if (++captures >= arg_captures)
					return 0;
			}
		}
		if (r < 0)
			return capturing ? 4 : 0;
		if (capturing && arg_events)
			stream_due(false);
		if (die_asked)
			raise(SIGKILL);
	}
}
