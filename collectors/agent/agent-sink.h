/* SPDX-License-Identifier: MIT */
/*
 * agent-sink.h - the state of the record mapping and the calls every mapper
 * writes through: the one-way interface of the record mappers beside
 * agent-map.c (agent-nvtx.c, agent-pm.c, agent-py.c). [loop thread]
 *
 * The dependency runs one way: agent-map.c and agent-records.c hand
 * records to agent-nvtx.c, agent-pm.c and agent-py.c, which write only through the
 * calls below (implemented by agent-lines.c, which calls no mapper) and
 * never include agent-map.h.
 *
 * Ownership: the receiver embeds one struct agent_map (what all connections
 * share: planes, line and kernel caches, device capabilities, the capture's
 * warnings) and, in each connection, one struct agent_src (what the mapping
 * knows of that process: its pid, devices, strings and clock). Fields the
 * mappers touch directly (steps, derived lines, the host plane, the stat
 * buffer) are the loop thread's, like the rest.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent-derived.h"
#include "agent-memory.h"
#include "agent-parse.h"
#include "agent-proto.h"
#include "agent-steps.h"
#include "base/macro.h"
#include "collector.h"

/* Lines all agents together may add to one hub (the line index's bound). */
#define AGENT_MAP_MAX_LINES 262144u
#define AGENT_MAP_KCACHE 1024u
#define AGENT_MAP_MAX_NOTES 32u
/* Lines one process may add to a capture: a process naming thousands of
 * streams must not stall the loop or fill the plane. */
#define AGENT_MAP_MAX_LINES_PER_SRC 1024u
/* Fair share of the hub's event budget (--max-events): while n agent
 * connections capture, one may hold at most max(budget / n, the floor)
 * records of the hub; the rest of its records are dropped and counted. The
 * floor (never above the budget) keeps a process useful however many others
 * connect. */
#define AGENT_MAP_SHARE_FLOOR 1000u
/* GPU UUIDs one connection may add to the shared map (gpu-map.h) when NVML
 * has not listed the machine's GPUs: one process must not fill it. */
#define AGENT_MAP_MAX_NEW_GPUS_PER_SRC 16u
/* ...and all connections of one uid together, for the daemon's life: a
 * process that reconnects gets no fresh allowance (gpu_map_id_for_uid()). */
#define AGENT_MAP_MAX_NEW_GPUS_PER_UID 32u
/* String bytes held per connection and by all connections. */
#define AGENT_MAP_MAX_STRING_BYTES (4u << 20)
#define AGENT_MAP_MAX_STRING_BYTES_ALL (64u << 20)
/* How far a record may start before its process's clock anchor (CLOCK
 * start), and how far into the future it may start or end: clock skew
 * between CUPTI and CLOCK_REALTIME, never a real event. */
#define AGENT_MAP_TIME_SLACK_NS (10ll * 1000 * 1000 * 1000)

struct agent_nvtx_src;
struct agent_pm_src;
struct agent_py_src;

/*
 * What a process's records had wrong (or, for the NVTX hints, had at all):
 * running totals for as long as it is connected, never reset. Captures
 * overlap, so a window cannot own them: it reports what grew while it was
 * open, against the mark its opening left (agent_src_mark()).
 */
enum agent_tally {
	AT_BAD_DEVICE,     /* records naming an unknown device */
	AT_BAD_TIME,       /* records dropped for impossible times (place_times()) */
	AT_LONG_DUR,       /* records whose duration was cut at the horizon */
	AT_OVER_SHARE,     /* records dropped beyond the fair share */
	AT_OVER_BUDGET,    /* records the hub's budget refused */
	AT_PM_OVER,        /* PM samples beyond AGENT_PM_MAX_SAMPLES */
	AT_PM_BAD_VALUES,  /* PM values infinite, negative or too large */
	AT_PM_UNANNOUNCED, /* PM samples of a device with no METRICS */
	AT_PM_UNNAMED,     /* PM values past the announced names */
	AT_NVTX_DROPPED,   /* NVTX ranges beyond AGENT_NVTX_MAX_RANGES */
	AT_NVTX_GPU,       /* GPU records mapped (the NVTX hints' base) */
	AT_NVTX_ANNOTATED, /* ...of which inside an NVTX range */
	AT_NVTX_IN_STEP,   /* ...of which inside a step */
	AT_PY_BAD_DEFS,    /* Python definitions refused */
	AT_PY_OVER_BUDGET, /* Python definitions beyond the string budget */
	AT_PY_UNRESOLVED,  /* events naming a stack that could not be resolved */
	AT_PY_POINTS_DROPPED, /* launch and sample points beyond the span budget */
	/* The agent's own counts (STATS), made running totals here: the agent
	 * counts from its last fresh START, and while the flight recorder runs
	 * that START is the recorder's (agent_map_stats()). */
	AT_CUPTI_BUFFERS,  /* buffers the agent dropped: queue or socket full */
	AT_CUPTI_RECORDS,  /* records CUPTI dropped */
	AT_CUT,            /* records still incomplete when a capture had to end */
	AT_FOREIGN,        /* buffers of another profiler in the job */
	AT_PY_WALKS,       /* launch-site stacks taken */
	AT_PY_WALKS_LOST,  /* ...and walks abandoned */
	AT_PY_SAMPLES,     /* thread samples taken */
	AT_PY_SAMPLES_LOST, /* ...and abandoned */
	AT_N
};

/* The tallies as a window opening at @at_ns found them; @refs windows
 * opened at that instant. */
struct agent_mark {
	int64_t at_ns;
	uint32_t refs;
	uint64_t n[AT_N];
};
/* Marks one process keeps: one per distinct open window's start (at most
 * --max-sessions, 1024, and the flight recorder's period); past it the
 * oldest goes, and a window that lost its mark reports from an older one. */
#define AGENT_MAX_MARKS 1100u

struct agent_map_dev {
	bool known;
	uint32_t plane; /* n of /device:GPU:<n> */
	struct agent_device d;
};

/**
 * struct agent_src - one agent process, as the mapping sees it.
 * @pid, @name: set by the receiver (the kernel's pid, HELLO's comm);
 * @driver_version, @runtime_version, @cupti_version: from HELLO, for
 *               /host:metadata;
 * the rest is private to agent-map.c.
 */
struct agent_src {
	/* public */
	uint32_t pid;
	char name[64];
	uint32_t driver_version, runtime_version, cupti_version;
	uint32_t hello_flags; /* HELLO's enum agent_hello_flag */
	uint16_t version;     /* HELLO's protocol version (AGENT_PROTO_VERSION until then) */
	/* read-only */
	struct agent_map_dev dev[AGENT_MAX_DEVICES];
	uint32_t n_devices;
	/* private */
	struct agent_map *m;
	char **strings; /* [id], id 1..n_strings */
	uint32_t n_strings, strings_cap;
	size_t string_bytes;
	uint64_t str_epoch; /* changes whenever an id may name a new string */
	int64_t clock_off;  /* wall = ts + clock_off */
	int64_t earliest;   /* no record starts before (the start anchor - slack) */
	int64_t horizon;    /* nor starts or ends after (now + slack), per payload */
	bool clock_known;
	uint32_t n_lines;   /* lines this process created in the current hub */
	uint64_t lines_gen; /* the map's resets when n_lines was counted */
	uint64_t lines_refused;
	uint64_t tally[AT_N]; /* enum agent_tally's running totals */
	struct agent_mark *marks; /* by @at_ns, oldest first */
	uint32_t n_marks, marks_cap;
	uint64_t held;       /* records of this process in the hub (its fair share) */
	uint64_t held_gen, held_trims; /* the hub's generation and trims when held was right */
	unsigned share_n;    /* capturing connections when the last one was dropped */
	uint32_t new_gpus;   /* UUIDs this connection added to the GPU map */
	uint32_t uid;        /* the peer's uid (SO_PEERCRED; agent-receiver.c sets it), else 0 */
	struct agent_nvtx_src *nvtx; /* agent-nvtx.c's, NULL until the first NVTX record */
	struct agent_pm_src *pm;     /* agent-pm.c's, NULL until the first PM record */
	struct agent_py_src *py;     /* agent-py.c's, NULL until the first Python record */
	uint64_t gpus_refused;
};

/*
 * The kernel cache key: everything that decides a kernel's metadata id and
 * stat set. Always memset to 0 before it is filled (no padding garbage):
 * it is hashed over its bytes and compared with memcmp, so a field added
 * here needs no other edit.
 */
struct kshape {
	const struct trace_plane *p;
	uint64_t epoch; /* the source's string epoch: the name an id means */
	uint32_t name_id, context, regs, static_smem, dynamic_smem, occ;
	int32_t grid[3], block[3];
	uint32_t graph_id; /* a graph node's ids are stats of the event */
	uint64_t graph_node_id;
};

#define AGENT_MAP_SID_CACHE 16 /* a power of two */

struct kcache_ent {
	struct kshape key; /* key.p == NULL: empty */
	int64_t meta, statset;
};

/* One entry of the line index: key -> line and the process that owns it. */
struct line_slot {
	uint64_t k1, k2;
	struct trace_line *line; /* NULL: empty */
	uint32_t mask;           /* stream lines: the event types seen (ev_type_bit) */
	uint32_t pid;            /* owner */
};

/**
 * struct agent_map - what all connections' records share.
 * Zero-initialise, then agent_map_init(); agent_map_free() at close.
 */
struct agent_map {
	struct collector *c;
	uint64_t gen_seen;
	/*
	 * The lines agents made in the hub, by key (process and thread, or
	 * process, plane and stream): open addressing, grown, never lossy,
	 * since line ids no longer say whose a line is. Valid for hub
	 * generation @lines_gen; emptied when the hub's contents move out.
	 */
	struct line_slot *lines;
	uint32_t lines_cap, n_lines;
	uint64_t lines_gen;
	/* last line id given per plane: [0] /host:CPU, [1 + n] /device:GPU:n */
	uint32_t last_line_id[GPU_MAP_MAX + 1];
	struct trace_plane *gpu_planes[GPU_MAP_MAX];
	struct trace_plane *host_plane;
	struct buf sb;
	uint64_t resets; /* reset_caches() calls: a new hub or capture */
	struct kcache_ent kcache[AGENT_MAP_KCACHE];
	uint64_t next_epoch;
	/* The correlation_id stat id per plane, direct-mapped by plane pointer:
	 * records alternate GPUs, so a last-plane cache missed on most of them
	 * (and interned the name again each time). Cleared with the hub. */
	struct {
		const struct trace_plane *p;
		int64_t sid;
	} sid_cache[AGENT_MAP_SID_CACHE];
	size_t string_bytes; /* held by all sources */
	/* device capabilities by plane number, for the plane stats */
	struct agent_device caps[GPU_MAP_MAX];
	bool caps_known[GPU_MAP_MAX];
	/* agent connections capturing now, for the fair share (the receiver
	 * keeps it) */
	unsigned n_capturing;
	/* the agents were asked for no NVTX (AGENT_START_NVTX off; the receiver
	 * keeps it): NVTX hints would mislead (agent_nvtx_describe()) */
	bool nvtx_off;
	/* a window of this capture asked for Python frame spans
	 * (AGENT_START_PY_SAMPLE, python_tracer_level >= 1; the receiver sets
	 * it, agent_map_start() clears it): launches and samples are kept as
	 * points for them (agent-py.h) */
	bool py_spans;
	/* the capture's memory profile (agent-memory.h) */
	struct agent_memory mem;
	struct agent_derived derived; /* Steps / op lines of GPU work in NVTX steps */
	struct agent_steps steps;     /* the hub's steps, numbered per window */
	/* messages for the next window's warnings, and its information lines
	 * (agent_map_info()) */
	char *notes[AGENT_MAP_MAX_NOTES];
	unsigned n_notes;
	char *infos[AGENT_MAP_MAX_NOTES];
	unsigned n_infos;
};

/* The time rules of one record (agent ns -> wall ns,
 * bounded; false: dropped), a line within @s's line budget, the text of
 * string @id (or @dflt). */
bool agent_map_place_times(struct agent_src *s, uint64_t start, uint64_t end, int64_t *ret_start,
			   int64_t *ret_dur);
/* A host-plane line of @s's own besides its thread lines (@kind: one of
 * AGENT_MAP_LINE_*, @key: e.g. the thread id), named @name at creation, with
 * the plane's next small id. NULL when refused or out of memory. */
#define AGENT_MAP_LINE_NVTX (UINT64_C(1) << 61)
struct trace_line *agent_map_aux_line(struct agent_src *s, uint64_t kind, uint32_t key, const char *name);
/* The records @s's lines hold in the hub now: all of them (@kind 0) or
 * those of its aux lines of @kind. What a budget of records held counts
 * after trace_trim() freed some (the hub's trims moved): a capture's end,
 * the flight recorder's ring. */
uint64_t agent_map_held(const struct agent_src *s, uint64_t kind);
const char *agent_map_str(const struct agent_src *s, uint32_t id, const char *dflt);
/* The line of @s's thread @tid on the hub's /host:CPU (its CUDA API
 * events; agent-py.c's frame spans go on it too). NULL when refused (a
 * line budget) or out of memory. */
struct trace_line *agent_lines_host_thread(struct agent_src *s, uint32_t tid);
/* The plane of @s's device @device (its number in
 * *@plane_no); NULL when the device is unknown (counted) or on failure. */
struct trace_plane *agent_map_gpu_plane(struct agent_src *s, uint32_t device, uint32_t *plane_no);

/* A warning for the capture's XSpace, once per text (at most
 * AGENT_MAP_MAX_NOTES per window). */
void agent_map_note(struct agent_map *m, const char *fmt, ...) _printf_(2, 3);
/* An information line for the window (not a warning: nothing is wrong);
 * XSpace has no list for them, so they go into the Task Environment
 * plane's XN_STAT_PROFD_INFO stat, one per line (docs/agent.md "Steps"). */
void agent_map_info(struct agent_map *m, const char *fmt, ...) _printf_(2, 3);
