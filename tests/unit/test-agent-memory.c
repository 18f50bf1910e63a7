/* SPDX-License-Identifier: MIT */
/*
 * The memory profile's running totals (collectors/agent/agent-memory.c) with
 * records out of time order, across windows, with a release of unknown
 * size and one of more than is in use; read back through the XSpace writer
 * and protobuf-c's decoder.
 */
#include <string.h>

#include "agent-memory.h"
#include "agent-proto.h"
#include "harness.h"
#include "tensorflow/xplane.pb-c.h"
#include "xspace/xspace.h"

#define BASE 1700000000000000000LL
#define MIB (1ull << 20)

struct ev {
	int64_t t;
	const char *kind;
	int64_t in_use, peak, bytes;
	char alloc_name[32];
};

static const char *stat_name(const Tensorflow__Profiler__XPlane *p, int64_t id)
{
	for (size_t i = 0; i < p->n_stat_metadata; i++)
		if (p->stat_metadata[i]->key == id)
			return p->stat_metadata[i]->value->name;
	return "";
}

static const char *event_name(const Tensorflow__Profiler__XPlane *p, int64_t id)
{
	for (size_t i = 0; i < p->n_event_metadata; i++)
		if (p->event_metadata[i]->key == id)
			return p->event_metadata[i]->value->name;
	return "";
}

static void add(struct agent_memory *am, uint32_t pid, uint32_t plane, int64_t t, bool alloc, uint64_t bytes,
		uint64_t addr)
{
	struct agent_mem_event e = { .ts = BASE + t, .alloc = alloc, .bytes = bytes, .address = addr,
				     .mem_kind = AGENT_MEM_DEVICE, .group_id = -1 };

	agent_memory_add(am, pid, "job", plane, &e);
}

static char notes[4][256];
static unsigned n_notes;

static void note(void *ud, const char *text)
{
	(void)ud;
	if (n_notes < 4)
		snprintf(notes[n_notes++], sizeof(notes[0]), "%s", text);
}

/* Describe [@start, @stop) (offsets from BASE) and read the events back in
 * time order. */
static size_t window(struct agent_memory *am, int64_t start, int64_t stop, struct ev *out, size_t max)
{
	struct trace *t;
	struct xspace_out xo;
	struct xspace_info info = { .hostname = "h", .start_ns = BASE + start, .stop_ns = BASE + stop };
	Tensorflow__Profiler__XSpace *x;
	size_t n = 0;

	n_notes = 0;
	if (trace_new(0, &t) < 0)
		return 0;
	agent_memory_describe(am, t, BASE + start, BASE + stop, note, NULL);
	/* The encoder takes the trace. */
	if (xspace_encode(t, &info, 16, &xo) < 0 || !(x = tensorflow__profiler__xspace__unpack(NULL, xo.xspace_len,
											       xo.xspace)))
		return 0;
	for (size_t i = 0; i < x->n_planes; i++) {
		const Tensorflow__Profiler__XPlane *p = x->planes[i];

		if (strcmp(p->name, "/host:CPU") != 0)
			continue;
		for (size_t l = 0; l < p->n_lines; l++) {
			for (size_t k = 0; k < p->lines[l]->n_events && n < max; k++) {
				const Tensorflow__Profiler__XEvent *e = p->lines[l]->events[k];
				struct ev *o = &out[n++];

				memset(o, 0, sizeof(*o));
				o->t = p->lines[l]->timestamp_ns * 1000 + e->offset_ps;
				o->kind = strstr(event_name(p, e->metadata_id), "Deallocation") ? "free" : "alloc";
				for (size_t s = 0; s < e->n_stats; s++) {
					const char *sn = stat_name(p, e->stats[s]->metadata_id);

					if (!strcmp(sn, "bytes_allocated"))
						o->in_use = e->stats[s]->int64_value;
					else if (!strcmp(sn, "peak_bytes_in_use"))
						o->peak = e->stats[s]->int64_value;
					else if (!strcmp(sn, "allocation_bytes"))
						o->bytes = e->stats[s]->int64_value;
					else if (!strcmp(sn, "allocator_name"))
						snprintf(o->alloc_name, sizeof(o->alloc_name), "%s",
							 stat_name(p, (int64_t)e->stats[s]->ref_value));
				}
			}
		}
	}
	/* Lines hold one process's events; order them by time across lines. */
	for (size_t i = 1; i < n; i++)
		for (size_t j = i; j > 0 && out[j - 1].t > out[j].t; j--) {
			struct ev tmp = out[j];

			out[j] = out[j - 1];
			out[j - 1] = tmp;
		}
	tensorflow__profiler__xspace__free_unpacked(x, NULL);
	xspace_out_free(&xo);
	return n;
}

TEST(agent_memory_totals_out_of_order)
{
	struct agent_memory am = { 0 };
	struct ev e[16];

	agent_memory_start(&am);
	agent_memory_state(&am, 7, "job", 0, true, 100 * MIB);
	/* Arrival order is not time order (CUPTI buffers complete in any order). */
	add(&am, 7, 0, 3000, false, 4 * MIB, 0xa000);
	add(&am, 7, 0, 1000, true, 4 * MIB, 0xa000);
	add(&am, 7, 0, 2000, true, 8 * MIB, 0xb000);
	add(&am, 7, 0, 4000, false, 0, 0xb000); /* size unknown: its allocation's */
	ASSERT_EQ(window(&am, 0, 10000, e, 16), 4);
	ASSERT_STREQ(e[0].kind, "alloc");
	ASSERT_EQ(e[0].in_use, (int64_t)(104 * MIB));
	ASSERT_EQ(e[1].in_use, (int64_t)(112 * MIB));
	ASSERT_STREQ(e[2].kind, "free");
	ASSERT_EQ(e[2].in_use, (int64_t)(108 * MIB));
	ASSERT_EQ(e[2].peak, (int64_t)(112 * MIB));
	ASSERT_EQ(e[3].in_use, (int64_t)(100 * MIB));
	ASSERT_EQ(e[3].bytes, (int64_t)(8 * MIB));
	ASSERT_STREQ(e[3].alloc_name, "GPU:0 pid 7");
	ASSERT_EQ(n_notes, 0);
	agent_memory_free(&am);
}

TEST(agent_memory_a_window_starts_at_the_level_earlier_ones_reached)
{
	struct agent_memory am = { 0 };
	struct ev e[16];

	agent_memory_start(&am);
	add(&am, 9, 1, 500, true, 10 * MIB, 0x1000);
	add(&am, 9, 1, 1500, true, 5 * MIB, 0x2000);
	/* A release of more than is known to be in use ends at 0, not below. */
	add(&am, 9, 1, 2500, false, 100 * MIB, 0x3000);
	ASSERT_EQ(window(&am, 1000, 3000, e, 16), 2);
	ASSERT_EQ(e[0].in_use, (int64_t)(15 * MIB)); /* the first window's 10 MiB included */
	ASSERT_EQ(e[0].peak, (int64_t)(15 * MIB));
	ASSERT_EQ(e[1].in_use, 0);
	ASSERT_EQ(e[1].peak, (int64_t)(15 * MIB));
	/* No MEM_STATE from this (v1/v2) agent: counted from 0, nothing said. */
	ASSERT_EQ(n_notes, 0);
	agent_memory_free(&am);
}

TEST(agent_memory_unknown_level_and_allocator_limit_are_said)
{
	struct agent_memory am = { 0 };
	struct ev e[4];

	agent_memory_start(&am);
	agent_memory_state(&am, 5, "job", 0, false, 0);
	add(&am, 5, 0, 100, true, MIB, 0x10);
	for (uint32_t pid = 100; pid < 100 + AGENT_MEMORY_MAX_ALLOCATORS; pid++)
		add(&am, pid, 0, 200, true, 1, 0x20);
	ASSERT_EQ(window(&am, 0, 50, e, 4), 0);
	ASSERT_EQ(n_notes, 2);
	ASSERT_TRUE(strstr(notes[0], "pid 5 (job)") && strstr(notes[0], "is unknown"));
	ASSERT_TRUE(strstr(notes[1], "1 GPU memory records of more than 256"));
	/* A new capture forgets it all. */
	agent_memory_start(&am);
	ASSERT_EQ(window(&am, 0, 1000, e, 4), 0);
	ASSERT_EQ(n_notes, 0);
	agent_memory_free(&am);
}

TEST_MAIN()
