/* SPDX-License-Identifier: MIT */
/*
 * The record mapping (collectors/agent/agent-map.c) driven directly: one agent
 * process's DEVICE, CLOCK and RECORDS payloads (built as the agent lays them
 * out, agent-proto.h) in, the hub's planes, lines, events and stats out.
 * The Python tests reach the same code through the daemon; these pin the
 * mapping itself: times through the clock anchor, names through the
 * process's strings, the correlation id that links a kernel to its launch,
 * and what is dropped (not capturing, an unknown device, a bad record).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent-map.h"
#include "agent-nvtx.h"
#include "agent-records.h"
#include "base/timeutil.h"
#include "harness.h"
#include "xspace/names.h"
#include "xspace/trace.h"

#define PID 4242u
#define TID 77u
#define AGENT_T0 1000000000000ull /* the agent's clock at the CLOCK anchor (1000 s) */

enum { S_GEMM = 1, S_LAUNCH = 2, S_RANGE = 3 };

static struct gpu_map gpus;
static struct collector_cfg cfg = { .gpus = &gpus };
static struct collector coll;
static struct agent_map map;
static struct agent_src src;
static int64_t wall0; /* CLOCK_REALTIME at the anchor */

/* A RECORDS payload under construction. */
static uint8_t payload[16384]; /* room for a few longest strings */
static size_t plen;

static void *put(uint16_t type, size_t size, uint32_t aux)
{
	void *h;

	if (plen + size > sizeof(payload))
		TEST_FAIL("payload full");
	h = agent_rec_lay(payload + plen, type, size, aux);
	plen += size;
	return h;
}

static void put_string(uint32_t id, const char *s)
{
	agent_rec_string_fill(put(AGENT_REC_STRING, agent_rec_string_size(s), (uint32_t)strlen(s)), id, s);
}

/* A kernel on @device over [@start, @end] of the agent's clock. */
static struct agent_rec_kernel *put_kernel_at(uint32_t device, uint64_t start, uint64_t end, uint32_t correlation)
{
	struct agent_rec_kernel *k = put(AGENT_REC_KERNEL, sizeof(*k), 0);

	k->start = start;
	k->end = end;
	k->device = device;
	k->context = 1;
	k->stream = 7;
	k->correlation = correlation;
	k->name_id = S_GEMM;
	k->regs = 32;
	k->grid[0] = 64;
	k->grid[1] = k->grid[2] = 1;
	k->block[0] = 128;
	k->block[1] = k->block[2] = 1;
	k->occ_pct_e4 = 500000; /* 50 % */
	return k;
}

/* A kernel on @device, [@t + 10 us, @t + 60 us) of the agent's clock. */
static void put_kernel(uint32_t device, uint64_t t, uint32_t correlation)
{
	put_kernel_at(device, t + 10000, t + 60000, correlation);
}

/* Its launch on thread TID, [@t, @t + 5 us). */
static void put_launch(uint64_t t, uint32_t correlation)
{
	struct agent_rec_api *a = put(AGENT_REC_API, sizeof(*a), 0);

	a->start = t;
	a->end = t + 5000;
	a->tid = TID;
	a->correlation = correlation;
	a->name_id = S_LAUNCH;
	a->domain = AGENT_API_DRIVER;
}

static int map_payload(bool take)
{
	const char *why = NULL;
	int r = agent_map_records(&src, payload, plen, take, &why);

	plen = 0;
	if (r < 0 && !why)
		TEST_FAIL("agent_map_records() = %d without a reason", r);
	return r;
}

/* One process with GPU 0 (local ordinal 0), its clock anchored at now;
 * the hub holds at most @max_events records (0: no limit). */
static void setup_budget(uint64_t max_events)
{
	struct agent_device d = { .local_ordinal = 0, .cc_major = 9, .sm_count = 132, .warp_size = 32 };
	const char *why = NULL;

	memset(&gpus, 0, sizeof(gpus));
	memset(&map, 0, sizeof(map));
	memset(&src, 0, sizeof(src));
	plen = 0;
	ASSERT_OK(trace_new(max_events, &coll.hub));
	coll.cfg = &cfg;
	agent_map_init(&map, &coll);
	agent_map_start(&map);
	agent_map_src_init(&map, &src);
	src.pid = PID;
	snprintf(src.name, sizeof(src.name), "trainer");
	snprintf(d.uuid, sizeof(d.uuid), "GPU-aaaaaaaa-0000-0000-0000-000000000001");
	snprintf(d.name, sizeof(d.name), "Fake H100");
	ASSERT_OK(agent_map_device(&src, &d, &why));
	ASSERT_TRUE(src.dev[0].known);
	wall0 = wall_ns();
	agent_map_clock(&src, &(struct agent_clock){ .agent_ns = AGENT_T0, .wall_ns = (uint64_t)wall0,
						     .which = AGENT_CLOCK_START });
}

static void setup(void) { setup_budget(0); }

static void teardown(void)
{
	agent_map_src_free(&src);
	agent_map_free(&map);
	coll.hub = trace_free(coll.hub);
}

/* The next event of @it, which must be there. */
static const struct trace_event *next_event(struct trace_iter *it)
{
	const struct trace_event *e = trace_iter_next(it);

	if (!e)
		TEST_FAIL("fewer events than expected");
	return e;
}

/* The only line of plane @name, which must hold @n_events records. */
static const struct trace_line *only_line(const char *name, uint64_t n_events)
{
	const struct trace_plane *p = trace_find_plane(coll.hub, name);

	if (!p)
		TEST_FAIL("no plane %s", name);
	if (p->n_lines != 1)
		TEST_FAIL("%s has %u lines, want 1", name, p->n_lines);
	if (p->lines[0]->count != n_events)
		TEST_FAIL("%s line \"%s\" has %" PRIu64 " events, want %" PRIu64, name, p->lines[0]->name,
			  p->lines[0]->count, n_events);
	return p->lines[0];
}

static const char *event_name(const struct trace_line *l, const struct trace_event *e)
{
	return strtab_get(&l->plane->events, e->meta, NULL);
}

/* The correlation id value stat: its metadata name and the value, which
 * carries the pid so that two processes' ids never meet. */
static void assert_correlation(const struct trace_line *l, const struct trace_event *e, uint32_t c)
{
	uint32_t sid = (uint32_t)trace_plane_stat_id(l->plane, XN_STAT_CORRELATION_ID);

	ASSERT_EQ(e->vstat, TRACE_VSTAT(TRACE_STAT_U64, sid));
	ASSERT_U64_EQ(e->value, (uint64_t)PID << 32 | c);
}

TEST(agent_map_kernel_and_launch_land_on_their_lines)
{
	struct trace_iter it;
	const struct trace_line *gl, *hl;
	const struct trace_event *e;
	char want[128];
	const char *details = "regs:32 static_shared:0 dynamic_shared:0 grid:64,1,1 block:128,1,1 occ_pct:50";

	setup();
	put_string(S_GEMM, "gemm_kernel(float*, int)");
	put_string(S_LAUNCH, "cuLaunchKernel");
	put_launch(AGENT_T0 + 1000, 9);
	put_kernel(0, AGENT_T0 + 1000, 9);
	ASSERT_OK(map_payload(true));

	/* The kernel: on GPU 0's plane, its stream's line, at anchor + offset. */
	snprintf(want, sizeof(want), XN_PLANE_GPU_FMT, 0u);
	gl = only_line(want, 1);
	ASSERT_TRUE(strstr(gl->name, "Stream #7(") == gl->name);
	trace_iter_init(&it, gl);
	e = trace_iter_next(&it);
	ASSERT_TRUE(e != NULL);
	ASSERT_STREQ(event_name(gl, e), "gemm_kernel(float*, int)");
	ASSERT_EQ(e->start_ns, wall0 + 1000 + 10000);
	ASSERT_EQ(e->dur_ns, 50000);
	assert_correlation(gl, e, 9);
	/* Its launch shape went into the plane's stat strings. */
	if (strtab_find(&gl->plane->stats, details, strlen(details)) == 0)
		TEST_FAIL("no kernel details \"%s\" on the GPU plane", details);

	/* The launch: on the host plane, the process's thread line, with the
	 * same correlation id (XProf's flow arrow). */
	hl = only_line(XN_PLANE_HOST, 1);
	snprintf(want, sizeof(want), XN_LINE_HOST_THREAD_FMT, "trainer", PID, TID);
	ASSERT_STREQ(hl->name, want);
	trace_iter_init(&it, hl);
	e = trace_iter_next(&it);
	ASSERT_TRUE(e != NULL);
	ASSERT_STREQ(event_name(hl, e), "cuLaunchKernel");
	ASSERT_EQ(e->start_ns, wall0 + 1000);
	ASSERT_EQ(e->dur_ns, 5000);
	assert_correlation(hl, e, 9);
	ASSERT_U64_EQ(src.held, 2);
	teardown();
}

TEST(agent_map_keeps_strings_but_no_records_outside_a_capture)
{
	const struct trace_line *gl;
	struct trace_iter it;

	setup();
	/* Not capturing: the string is kept, the kernel is not. */
	put_string(S_GEMM, "early_kernel()");
	put_kernel(0, AGENT_T0, 1);
	ASSERT_OK(map_payload(false));
	ASSERT_U64_EQ(coll.hub->n_events, 0);
	ASSERT_EQ(coll.hub->n_planes, 0);
	/* Capturing: a kernel naming that string gets its name. */
	put_kernel(0, AGENT_T0 + 2000, 2);
	ASSERT_OK(map_payload(true));
	gl = only_line("/device:GPU:0", 1);
	trace_iter_init(&it, gl);
	ASSERT_STREQ(event_name(gl, trace_iter_next(&it)), "early_kernel()");
	teardown();
}

TEST(agent_map_counts_records_of_an_unknown_device)
{
	setup();
	put_string(S_GEMM, "k()");
	put_kernel(3, AGENT_T0, 1); /* device 3 was never described */
	put_kernel(0, AGENT_T0, 2);
	ASSERT_OK(map_payload(true));
	ASSERT_U64_EQ(src.tally[AT_BAD_DEVICE], 1);
	ASSERT_U64_EQ(coll.hub->n_events, 1);
	only_line("/device:GPU:0", 1);
	teardown();
}

/* Two windows overlap: each reports what its process's records had wrong
 * while it was open, whichever closes first (one counter reset by the first
 * close gave the longer window nothing). */
TEST(agent_map_overlapping_windows_each_count_their_own)
{
	uint64_t n[AT_N];

	setup();
	put_string(S_GEMM, "k()");
	put_kernel(3, AGENT_T0, 1);
	ASSERT_OK(map_payload(true)); /* before any window: counted in none */
	ASSERT_OK(agent_src_mark(&src, 100, true));
	put_kernel(3, AGENT_T0, 2);
	put_kernel(3, AGENT_T0, 3);
	ASSERT_OK(map_payload(true));
	ASSERT_OK(agent_src_mark(&src, 200, true));
	ASSERT_OK(agent_src_mark(&src, 200, true)); /* a second window at that instant shares it */
	ASSERT_OK(agent_src_mark(&src, 50, false)); /* a snapshot of a period the process missed */
	put_kernel(3, AGENT_T0, 4);
	ASSERT_OK(map_payload(true));
	ASSERT_U64_EQ(src.n_marks, 2);
	/* The later windows close first. */
	agent_src_window(&src, 200, n);
	ASSERT_U64_EQ(n[AT_BAD_DEVICE], 1);
	agent_src_unmark(&src, 200);
	agent_src_window(&src, 200, n);
	ASSERT_U64_EQ(n[AT_BAD_DEVICE], 1);
	agent_src_unmark(&src, 200);
	ASSERT_U64_EQ(src.n_marks, 1);
	agent_src_window(&src, 100, n);
	ASSERT_U64_EQ(n[AT_BAD_DEVICE], 3);
	ASSERT_U64_EQ(n[AT_BAD_TIME], 0);
	/* A recorder snapshot reaching back past its period's start: from the
	 * newest mark at or before it. */
	agent_src_window(&src, 150, n);
	ASSERT_U64_EQ(n[AT_BAD_DEVICE], 3);
	agent_src_unmark(&src, 100);
	ASSERT_U64_EQ(src.n_marks, 0);
	agent_src_unmark(&src, 100); /* one too many: nothing to give back */
	/* No mark at or before a window (the snapshot above): the process
	 * connected after it opened, and everything it counted is that
	 * window's. */
	agent_src_window(&src, 50, n);
	ASSERT_U64_EQ(n[AT_BAD_DEVICE], 4);
	/* A recorder's next period may start before a capture opened since:
	 * the latest mark at or before a window's start counts, not the last. */
	ASSERT_OK(agent_src_mark(&src, 500, true));
	put_kernel(3, AGENT_T0, 5);
	ASSERT_OK(map_payload(true));
	ASSERT_OK(agent_src_mark(&src, 400, true));
	put_kernel(3, AGENT_T0, 6);
	ASSERT_OK(map_payload(true));
	agent_src_window(&src, 450, n);
	ASSERT_U64_EQ(n[AT_BAD_DEVICE], 1);
	agent_src_window(&src, 600, n);
	ASSERT_U64_EQ(n[AT_BAD_DEVICE], 2);
	teardown();
}

TEST(agent_map_maps_records_before_a_bad_one)
{
	struct agent_rec_kernel *k;

	setup();
	put_string(S_GEMM, "k()");
	put_kernel(0, AGENT_T0, 1);
	/* A kernel record claiming more bytes than the payload holds. */
	k = put(AGENT_REC_KERNEL, sizeof(*k), 0);
	k->h.size = (uint16_t)(sizeof(*k) + 64);
	ASSERT_EQ(map_payload(true), -EBADMSG);
	ASSERT_U64_EQ(coll.hub->n_events, 1);
	teardown();
}

/* The time rules (agent_map_place_times()) on every kind of hostile stamp:
 * only records inside [start anchor - slack, now + slack] are kept, and an
 * endless one is cut at the horizon. */
TEST(agent_map_drops_records_outside_the_process_times)
{
	const uint64_t slack = AGENT_MAP_TIME_SLACK_NS;
	const struct trace_line *gl;
	const struct trace_event *e;
	struct trace_iter it;

	setup();
	put_string(S_GEMM, "k()");
	put_kernel_at(0, AGENT_T0 - slack - 1000, AGENT_T0 - slack, 1); /* before the anchor's slack */
	put_kernel_at(0, AGENT_T0 + 3600 * slack, AGENT_T0 + 3600 * slack + 1, 2); /* past the horizon */
	put_kernel_at(0, AGENT_T0 + 2000, AGENT_T0 + 1000, 3); /* ends before it starts */
	put_kernel_at(0, UINT64_MAX, UINT64_MAX, 4);           /* not a time */
	put_kernel_at(0, INT64_MAX, INT64_MAX, 5);             /* overflows with the clock offset */
	put_kernel_at(0, 0, AGENT_T0, 6);                      /* CUPTI's "no time": dropped, not counted */
	put_kernel_at(0, AGENT_T0 - slack + 1000, AGENT_T0 - slack + 3000, 7); /* within the slack */
	put_kernel_at(0, AGENT_T0 + 1000, UINT64_MAX, 8);      /* endless */
	ASSERT_OK(map_payload(true));
	ASSERT_U64_EQ(src.tally[AT_BAD_TIME], 5);
	ASSERT_U64_EQ(src.tally[AT_LONG_DUR], 1);
	ASSERT_U64_EQ(src.held, 2);

	gl = only_line("/device:GPU:0", 2);
	trace_iter_init(&it, gl);
	e = next_event(&it);
	ASSERT_EQ(e->start_ns, wall0 - (int64_t)slack + 1000);
	ASSERT_EQ(e->dur_ns, 2000);
	assert_correlation(gl, e, 7);
	e = next_event(&it);
	ASSERT_EQ(e->start_ns, wall0 + 1000);
	ASSERT_EQ(e->start_ns + e->dur_ns, src.horizon);
	ASSERT_TRUE(src.horizon >= wall0 + (int64_t)slack);
	assert_correlation(gl, e, 8);
	teardown();
}

/* Enumerations, ordinals, name ids and launch shapes out of range map to
 * "unknown" and "other", never index past a table. */
TEST(agent_map_bounds_hostile_kinds_devices_and_names)
{
	const char *copy = "kind_src:unknown kind_dst:unknown size:18446744073709551615 dest:0 async:1";
	const char *shape = "regs:32 static_shared:0 dynamic_shared:0 grid:-1,1,1 block:128,1,1 occ_pct:0";
	struct agent_rec_memcpy *c;
	struct agent_rec_kernel *k;
	const struct trace_line *gl;
	const struct trace_event *e;
	struct trace_iter it;

	setup();
	c = put(AGENT_REC_MEMCPY, sizeof(*c), 0);
	c->start = AGENT_T0 + 1000;
	c->end = AGENT_T0 + 2000;
	c->bytes = UINT64_MAX;
	c->stream = 7;
	c->correlation = 3;
	c->dst_device = UINT32_MAX;
	c->copy_kind = 200;
	c->src_kind = 99;
	c->dst_kind = 255;
	c->async = 7;
	put_kernel_at(UINT32_MAX, AGENT_T0 + 1000, AGENT_T0 + 2000, 4);        /* no such ordinal */
	put_kernel_at(AGENT_MAX_DEVICES, AGENT_T0 + 1000, AGENT_T0 + 2000, 4); /* one past the table */
	k = put_kernel_at(0, AGENT_T0 + 3000, AGENT_T0 + 4000, 5);
	k->name_id = UINT32_MAX; /* never sent */
	k->grid[0] = -1;
	k->occ_pct_e4 = UINT32_MAX; /* unknown */
	ASSERT_OK(map_payload(true));
	ASSERT_U64_EQ(src.tally[AT_BAD_DEVICE], 2);
	ASSERT_U64_EQ(src.tally[AT_BAD_TIME], 0);

	gl = only_line("/device:GPU:0", 2);
	trace_iter_init(&it, gl);
	e = next_event(&it);
	ASSERT_STREQ(event_name(gl, e), XN_EVENT_MEMCPY_OTHER);
	ASSERT_EQ(e->start_ns, wall0 + 1000);
	assert_correlation(gl, e, 3);
	e = next_event(&it);
	ASSERT_STREQ(event_name(gl, e), XN_EVENT_UNKNOWN_KERNEL);
	assert_correlation(gl, e, 5);
	if (strtab_find(&gl->plane->stats, copy, strlen(copy)) == 0)
		TEST_FAIL("no copy details \"%s\" on the GPU plane", copy);
	if (strtab_find(&gl->plane->stats, shape, strlen(shape)) == 0)
		TEST_FAIL("no kernel details \"%s\" on the GPU plane", shape);
	teardown();
}

/* With three processes capturing into a hub of 1500 records, one process
 * holds at most its share, max(1500 / 3, min(AGENT_MAP_SHARE_FLOOR, 1500))
 * = 1000; the rest of its records are dropped and counted. */
TEST(agent_map_holds_a_process_to_its_fair_share)
{
	setup_budget(1500);
	map.n_capturing = 3; /* the receiver's count of capturing connections */
	put_string(S_GEMM, "k()");
	for (uint32_t i = 0; i < 1200; i++) {
		put_kernel(0, AGENT_T0 + 1000ull * i, i);
		if (plen + sizeof(struct agent_rec_kernel) > sizeof(payload))
			ASSERT_OK(map_payload(true));
	}
	ASSERT_OK(map_payload(true));
	ASSERT_U64_EQ(src.held, 1000);
	ASSERT_U64_EQ(src.tally[AT_OVER_SHARE], 200);
	ASSERT_EQ(src.share_n, 3);
	ASSERT_U64_EQ(coll.hub->n_events, 1000);
	ASSERT_U64_EQ(coll.hub->dropped, 0); /* the hub's own budget was never reached */
	teardown();
}

/* A finished NVTX range (string @text_id, push number @serial) on thread
 * TID over [@start, @end] of the agent's clock. */
static void put_range_of(uint32_t text_id, uint32_t serial, uint64_t start, uint64_t end)
{
	struct agent_rec_nvtx *r = put(AGENT_REC_NVTX, sizeof(*r) + sizeof(struct agent_nvtx_level), 1);
	struct agent_nvtx_level l = { .serial = serial, .text_id = text_id };

	r->start = start;
	r->end = end;
	r->tid = TID;
	r->kind = AGENT_NVTX_RANGE;
	memcpy(r + 1, &l, sizeof(l));
}

static void put_range(uint64_t start, uint64_t end) { put_range_of(S_RANGE, 1, start, end); }

/* The NVTX range budget bounds the ranges a process holds in the hub now,
 * not all it ever sent: while the flight recorder runs the hub is never
 * emptied, only trimmed (its ring, a period's end), and a budget counted
 * per hub ran out after 2^20 ranges for the rest of the recording. */
TEST(agent_map_nvtx_budget_counts_what_the_hub_holds)
{
	const uint64_t over = 10, more = 1000;
	const struct trace_line *l = NULL;
	uint64_t i, held;
	int64_t cut;

	setup();
	put_string(S_RANGE, "op");
	for (i = 0; i < AGENT_NVTX_MAX_RANGES + over; i++) {
		put_range(AGENT_T0 + 10 * i, AGENT_T0 + 10 * i + 5);
		if (plen + 128 > sizeof(payload))
			ASSERT_OK(map_payload(true));
	}
	ASSERT_OK(map_payload(true));
	ASSERT_U64_EQ(src.tally[AT_NVTX_DROPPED], over);
	{
		const struct trace_plane *p = trace_find_plane(coll.hub, XN_PLANE_HOST);

		ASSERT_TRUE(p != NULL);
		for (uint32_t j = 0; j < p->n_lines; j++)
			if (p->lines[j]->count == AGENT_NVTX_MAX_RANGES)
				l = p->lines[j];
	}
	ASSERT_TRUE(l != NULL);
	/* The ring (or a window's end) frees the older half. */
	cut = wall0 + 10 * (int64_t)(AGENT_NVTX_MAX_RANGES / 2);
	trace_trim(coll.hub, cut);
	held = l->count;
	ASSERT_TRUE(held < AGENT_NVTX_MAX_RANGES && held >= AGENT_NVTX_MAX_RANGES / 2);
	for (i = AGENT_NVTX_MAX_RANGES + over; i < AGENT_NVTX_MAX_RANGES + over + more; i++) {
		put_range(AGENT_T0 + 10 * i, AGENT_T0 + 10 * i + 5);
		if (plen + 128 > sizeof(payload))
			ASSERT_OK(map_payload(true));
	}
	ASSERT_OK(map_payload(true));
	ASSERT_U64_EQ(src.tally[AT_NVTX_DROPPED], over); /* none dropped since the trim */
	ASSERT_U64_EQ(l->count, held + more);
	ASSERT_U64_EQ(agent_map_held(&src, AGENT_MAP_LINE_NVTX), held + more);
	teardown();
}

/* Steps past the process's table (AGENT_NVTX_MAX_STEPS) still get a step
 * each: a recording hub is never emptied, and its table once ran full
 * after 4096 steps, leaving every later step of the recording without one. */
TEST(agent_map_steps_keep_coming_past_the_process_table)
{
	const uint32_t total = AGENT_NVTX_MAX_STEPS + 904;
	const struct trace_plane *p;
	const struct trace_line *l = NULL;
	const struct trace_event *e = NULL;
	struct trace_iter it;
	struct buf b = BUF_INIT;

	setup();
	put_string(S_RANGE, "train_step");
	for (uint32_t i = 1; i <= total; i++) {
		put_range_of(S_RANGE, i, AGENT_T0 + 1000ull * i, AGENT_T0 + 1000ull * i + 900);
		if (plen + 128 > sizeof(payload))
			ASSERT_OK(map_payload(true));
	}
	ASSERT_OK(map_payload(true));
	ASSERT_EQ(map.steps.base + map.steps.n, total);
	p = trace_find_plane(coll.hub, XN_PLANE_HOST);
	ASSERT_TRUE(p != NULL);
	for (uint32_t j = 0; j < p->n_lines; j++)
		if (p->lines[j]->count == total)
			l = p->lines[j];
	ASSERT_TRUE(l != NULL);
	trace_iter_init(&it, l);
	for (const struct trace_event *x; (x = trace_iter_next(&it));)
		e = x;
	/* The last step is a step: root, step_num and group_id (its hub id). */
	trace_stat_i64(l->plane, &b, XN_STAT_IS_ROOT, 1);
	trace_stat_i64(l->plane, &b, XN_STAT_STEP_NUM, total);
	trace_stat_i64(l->plane, &b, XN_STAT_GROUP_ID, total);
	ASSERT_TRUE(e && (int64_t)e->statset == trace_plane_statset(l->plane, &b));
	buf_free(&b);
	teardown();
}

/* A restarted process (agent_map_src_restart()) has no clock: its records
 * wait for an anchor, and a stop anchor maps them without a lower bound. */
TEST(agent_map_takes_no_records_before_a_clock)
{
	setup();
	agent_map_src_restart(&src);
	put_string(S_GEMM, "k()");
	put_kernel(0, AGENT_T0, 1);
	ASSERT_OK(map_payload(true));
	ASSERT_U64_EQ(coll.hub->n_events, 0);
	agent_map_clock(&src, &(struct agent_clock){ .agent_ns = AGENT_T0, .wall_ns = (uint64_t)wall0,
						     .which = AGENT_CLOCK_STOP });
	ASSERT_EQ(src.earliest, 0);
	put_kernel(0, AGENT_T0, 2);
	ASSERT_OK(map_payload(true));
	only_line("/device:GPU:0", 1);
	teardown();
}

/* A process may send AGENT_MAP_MAX_STRING_BYTES of strings, resent ids
 * included; one byte more ends its payload with a reason. */
TEST(agent_map_refuses_string_bytes_beyond_the_budget)
{
	static char big[AGENT_MAX_STRING_LEN + 1];
	const char *why = NULL;

	setup();
	memset(big, 'x', AGENT_MAX_STRING_LEN);
	for (uint32_t i = 0; i < AGENT_MAP_MAX_STRING_BYTES / AGENT_MAX_STRING_LEN; i++) {
		put_string(1 + i % 4, big);
		ASSERT_OK(map_payload(true));
	}
	put_string(S_GEMM, "k"); /* the one byte more */
	ASSERT_EQ(agent_map_records(&src, payload, plen, true, &why), -EBADMSG);
	ASSERT_STREQ(why, "too many string bytes");
	plen = 0;
	teardown();
}

/* ---- Python records (agent-py.c) ------------------------------------------------ */

static uint64_t py_rnd_state = 0x2545f4914f6cdd1dull;

static uint32_t py_rnd(uint32_t n)
{
	/* xorshift64: deterministic, so a failure reproduces. */
	py_rnd_state ^= py_rnd_state << 13;
	py_rnd_state ^= py_rnd_state >> 7;
	py_rnd_state ^= py_rnd_state << 17;
	return (uint32_t)(py_rnd_state % n);
}

/* A stack id as PY_LAUNCH / PY_SAMPLE may name one: none, dropped, or one
 * of 1..40 (some never defined). */
static uint32_t py_any_stack(void)
{
	uint32_t r = py_rnd(44);

	return r == 40 ? 0 : r == 41 ? AGENT_PY_STACK_DROPPED : 1 + r % 40;
}

static int cmp_span(const void *a, const void *b)
{
	const struct trace_event *x = a, *y = b;
	int64_t xe = x->start_ns + x->dur_ns, ye = y->start_ns + y->dur_ns;

	if (x->start_ns != y->start_ns)
		return x->start_ns < y->start_ns ? -1 : 1;
	return xe > ye ? -1 : xe < ye;
}

/* Every two events of @l are disjoint or nested. */
static void assert_nested(const struct trace_line *l)
{
	struct trace_event *ev = calloc(l->count + 1, sizeof(*ev));
	int64_t ends[AGENT_PY_MAX_DEPTH + 2];
	uint32_t n = 0, depth = 0;
	struct trace_iter it;
	const struct trace_event *e;

	ASSERT_TRUE(ev);
	trace_iter_init(&it, l);
	while ((e = trace_iter_next(&it)))
		ev[n++] = *e;
	qsort(ev, n, sizeof(*ev), cmp_span);
	for (uint32_t i = 0; i < n; i++) {
		int64_t end = ev[i].start_ns + ev[i].dur_ns;

		ASSERT_TRUE(ev[i].dur_ns >= 0);
		while (depth && ends[depth - 1] <= ev[i].start_ns)
			depth--;
		if (depth)
			ASSERT_TRUE(end <= ends[depth - 1]);
		ASSERT_TRUE(depth < AGENT_PY_MAX_DEPTH + 2);
		ends[depth++] = end;
	}
	free(ev);
}

/*
 * Random Python records a hostile or broken agent may send, all valid for
 * the parser: frames and stacks defined twice, naming undefined frames or
 * strings, absurd lines, deep stacks, launches and samples naming
 * undefined stacks on more threads than a process may have spans on, API
 * events and kernels of random correlations. The mapping never fails the
 * connection for them, and the frame spans it builds always nest.
 */
TEST(agent_map_python_records_from_a_hostile_agent)
{
	struct trace *snap;
	uint32_t corr = 1;

	setup();
	map.py_spans = true;
	put_string(10, "/src/a.py");
	put_string(11, "f;g");
	ASSERT_OK(map_payload(true));
	for (unsigned round = 0; round < 300; round++) {
		for (unsigned i = 0; i < 20; i++) {
			uint64_t t = AGENT_T0 + py_rnd(1000000) * 1000ull;

			switch (py_rnd(5)) {
			case 0: {
				struct agent_rec_py_frame *f = put(AGENT_REC_PY_FRAME, sizeof(*f), 0);

				f->id = 1 + py_rnd(60);
				f->file_id = py_rnd(3) ? 10 : 1 + py_rnd(AGENT_MAX_STRINGS);
				f->name_id = py_rnd(3) ? 11 : 0;
				f->firstlineno = py_rnd(4) ? py_rnd(1000) : UINT32_MAX;
				f->line = py_rnd(4) ? py_rnd(1000) : 0x80000000u;
				break;
			}
			case 1: {
				uint32_t n = 1 + py_rnd(py_rnd(8) ? 6 : AGENT_PY_MAX_DEPTH);
				struct agent_rec_py_stack *st =
					put(AGENT_REC_PY_STACK, agent_rec_align(sizeof(*st) + 4 * n), n);
				uint32_t *fr = (uint32_t *)(st + 1);

				st->id = 1 + py_rnd(40);
				st->flags = py_rnd(2) ? AGENT_PY_STACK_TRUNCATED : 0;
				for (uint32_t k = 0; k < n; k++)
					fr[k] = 1 + py_rnd(py_rnd(10) ? 4 : 70);
				break;
			}
			case 2: {
				struct agent_rec_py_sample *sm = put(AGENT_REC_PY_SAMPLE, sizeof(*sm), 0);

				sm->ts = t;
				sm->tid = py_rnd(3) ? TID : py_rnd(400);
				sm->stack_id = py_any_stack();
				break;
			}
			default: {
				struct agent_rec_py_launch *l = put(AGENT_REC_PY_LAUNCH, sizeof(*l), 0);
				struct agent_rec_api *a;

				l->ts = t;
				l->tid = TID;
				l->correlation = corr;
				l->stack_id = py_any_stack();
				a = put(AGENT_REC_API, sizeof(*a), 0);
				a->start = t;
				a->end = t + py_rnd(3) * 4000;
				a->tid = py_rnd(4) ? TID : py_rnd(400);
				a->correlation = corr;
				a->name_id = S_LAUNCH;
				a->domain = AGENT_API_DRIVER;
				put_kernel(0, t, corr++);
				break;
			}
			}
		}
		ASSERT_OK(map_payload(true));
	}
	ASSERT_OK(trace_new(0, &snap));
	{
		uint64_t n[AT_N];

		agent_src_window(&src, INT64_MIN, n);
		agent_map_describe_python(&src, snap, INT64_MIN, INT64_MAX, n);
	}
	{
		const struct trace_plane *p = trace_find_plane(snap, XN_PLANE_HOST);

		ASSERT_TRUE(p && p->n_lines > 0);
		for (uint32_t j = 0; j < p->n_lines; j++)
			assert_nested(p->lines[j]);
	}
	/* The refusals were counted and said. */
	ASSERT_TRUE(map.n_notes >= 1);
	trace_free(snap);
	teardown();
}

TEST_MAIN()
