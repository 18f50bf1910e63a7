/* SPDX-License-Identifier: MIT */
/*
 * agent-memory.h - the memory profile: the agent's MEMORY / MEMORY2 and
 * MEM_STATE records -> MemoryAllocation / MemoryDeallocation events on
 * /host:CPU with the stats XProf's memory profile reads
 * (xprof/convert/xplane_to_memory_profile.cc). [loop thread]
 *
 * DESIGN
 * ------
 * An allocator is one (process, GPU plane): XProf keys a profile on the
 * event's allocator_name (else device_ordinal). Running totals
 * (bytes_allocated = in use after the event, peak_bytes_in_use) need the
 * records in time order, and CUPTI hands buffers over in no particular
 * order, so records are kept here (bounded: AGENT_MEMORY_MAX_RECORDS a
 * capture, the rest counted) and turned into events when a window is
 * described: sorted per allocator by time, summed from the level MEM_STATE
 * reported when the capture opened, and those inside the window written
 * into its snapshot. The list lives from agent_memory_start() (a capture)
 * to the next, so a window's first event already carries the level that
 * earlier windows of the same capture reached.
 *
 * Owned by struct agent_map (agent-map.h), which calls in here; no I/O.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "base/buf.h"
#include "xspace/trace.h"

/* Distinct op names (tf_op) one capture keeps for memory events. */
#define AGENT_MEMORY_MAX_OPS 1024u
/* Records one capture keeps for the memory profile (all processes). */
#define AGENT_MEMORY_MAX_RECORDS (1u << 18)
/* (process, GPU) allocators one capture tracks. */
#define AGENT_MEMORY_MAX_ALLOCATORS 256u

struct agent_mem_rec {
	int64_t ts;        /* wall ns */
	uint64_t bytes;
	uint64_t address;
	uint64_t seq;      /* arrival order: ties in time keep it */
	int64_t group_id;  /* step, -1 = none */
	const char *tf_op; /* interned in agent_memory.ops, NULL = none */
	uint32_t alloc;    /* index into agent_memory.allocs */
	uint8_t op;        /* enum agent_mem_op */
	uint8_t mem_kind;  /* enum agent_mem_kind */
	uint8_t pool_type; /* enum agent_pool_type */
	uint8_t _pad;
};

struct agent_mem_allocator {
	uint32_t pid;
	uint32_t plane;     /* n of /device:GPU:<n> */
	char comm[64];
	uint64_t base;      /* bytes in use when the capture opened (MEM_STATE) */
	bool base_known;
	bool base_unknown;  /* the agent said it could not measure it (v3) */
	uint64_t records;   /* kept this capture */
	uint64_t dropped;   /* refused by AGENT_MEMORY_MAX_RECORDS */
};

struct agent_memory {
	struct agent_mem_rec *recs;
	uint32_t n, cap;
	uint64_t seq;
	struct agent_mem_allocator allocs[AGENT_MEMORY_MAX_ALLOCATORS];
	uint32_t n_allocs;
	uint64_t allocs_refused; /* records of allocators beyond the table */
	char **ops;              /* distinct tf_op texts of the capture */
	uint32_t n_ops, ops_cap;
	struct buf sb;
};

/* A new capture: forget the previous one's records and levels. */
void agent_memory_start(struct agent_memory *am);
void agent_memory_free(struct agent_memory *am);

/**
 * struct agent_mem_event - one allocation or release, validated by the caller.
 * @ts: wall ns; @tf_op: the op it happened in (the enclosing NVTX range),
 * NULL when unknown; @group_id: its step, -1 when unknown.
 */
struct agent_mem_event {
	int64_t ts;
	bool alloc;
	uint64_t bytes, address;
	uint8_t mem_kind, pool_type;
	const char *tf_op;
	int64_t group_id;
};

/* @ev of process @pid (@comm) on plane @plane. Dropped beyond the budget
 * (counted per allocator, noted by agent_memory_describe()). */
void agent_memory_add(struct agent_memory *am, uint32_t pid, const char *comm, uint32_t plane,
		      const struct agent_mem_event *ev);
/* MEM_STATE: @used bytes were in use on @plane when @pid's capture opened;
 * !@known: the agent could not tell (said in the window's warnings). A v1/v2
 * agent sends none: its profile counts from 0 without a word, as it did. */
void agent_memory_state(struct agent_memory *am, uint32_t pid, const char *comm, uint32_t plane, bool known,
			uint64_t used);

/*
 * Write the events of [@start_ns, @stop_ns) into @snap's /host:CPU, one line
 * per process ("<comm> (pid N)/GPU memory"). Calls @note once per
 * allocator with a text for its drops or an unknown starting level.
 */
void agent_memory_describe(struct agent_memory *am, struct trace *snap, int64_t start_ns, int64_t stop_ns,
			   void (*note)(void *ud, const char *text), void *ud);
