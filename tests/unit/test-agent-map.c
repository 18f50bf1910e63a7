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
#include <string.h>

#include "agent-map.h"
#include "agent-records.h"
#include "base/timeutil.h"
#include "harness.h"
#include "xspace/names.h"
#include "xspace/trace.h"

#define PID 4242u
#define TID 77u
#define AGENT_T0 1000000000ull /* the agent's clock at the CLOCK anchor */

enum { S_GEMM = 1, S_LAUNCH = 2 };

static struct gpu_map gpus;
static struct collector_cfg cfg = { .gpus = &gpus };
static struct collector coll;
static struct agent_map map;
static struct agent_src src;
static int64_t wall0; /* CLOCK_REALTIME at the anchor */

/* A RECORDS payload under construction. */
static uint8_t payload[4096];
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

/* A kernel on @device, [@t + 10 us, @t + 60 us) of the agent's clock. */
static void put_kernel(uint32_t device, uint64_t t, uint32_t correlation)
{
	struct agent_rec_kernel *k = put(AGENT_REC_KERNEL, sizeof(*k), 0);

	k->start = t + 10000;
	k->end = t + 60000;
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

/* One process with GPU 0 (local ordinal 0), its clock anchored at now. */
static void setup(void)
{
	struct agent_device d = { .local_ordinal = 0, .cc_major = 9, .sm_count = 132, .warp_size = 32 };
	const char *why = NULL;

	memset(&gpus, 0, sizeof(gpus));
	memset(&map, 0, sizeof(map));
	memset(&src, 0, sizeof(src));
	plen = 0;
	ASSERT_OK(trace_new(0, &coll.hub));
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

static void teardown(void)
{
	agent_map_src_free(&src);
	agent_map_free(&map);
	coll.hub = trace_free(coll.hub);
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
	ASSERT_U64_EQ(src.bad_device, 1);
	ASSERT_U64_EQ(coll.hub->n_events, 1);
	only_line("/device:GPU:0", 1);
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

TEST_MAIN()
