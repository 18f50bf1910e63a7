/* SPDX-License-Identifier: MIT */
/*
 * convert.h - CUPTI activity records -> our compact records (agent-proto.h).
 *
 * A pure function of its inputs: no CUPTI or CUDA calls, no I/O, so the
 * unit test feeds it synthetic CUpti_Activity* structs on a machine without
 * a GPU. The agent thread owns one struct agent_conv per connection.
 *
 * Output goes into @out; before a record would push it past @frame_max the
 * converter hands the batch to @emit (one RECORDS frame) and starts over,
 * so a frame never splits a record and a STRING record always precedes
 * the first record that uses its id.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cupti-abi.h"

#include "agent-proto.h"

struct agent_conv;

/* Hands a finished batch of records over (e.g. sends a RECORDS frame).
 * Returns 0, or -errno to make the converter drop the batch and count it. */
typedef int (*agent_conv_emit_cb)(void *ud, const void *records, size_t len);
/* Name of an API callback id ("cuLaunchKernel"), NULL if unknown. */
typedef const char *(*agent_conv_api_name_cb)(void *ud, uint32_t domain, uint32_t cbid);
/* Demangled form of an Itanium-mangled kernel name, malloc'd, or NULL to
 * keep the mangled one. Called once per distinct name (the converter
 * caches by mangled name). */
typedef char *(*agent_conv_demangle_cb)(void *ud, const char *mangled);
/* The ids of the graph launch with CUPTI correlation id @correlation (an
 * API record of agent_conv_is_graph_launch()): the executable graph
 * (cuptiGetGraphExecId at the call) and the graph it was instantiated
 * from; each left 0 when unknown. */
typedef void (*agent_conv_graph_launch_cb)(void *ud, uint32_t correlation, uint32_t *graph_id,
					   uint32_t *exec_id);

struct agent_conv_name {
	uint64_t hash;
	char *s;
	uint32_t id;
};

struct agent_conv {
	/* set by the owner */
	agent_conv_emit_cb emit;
	agent_conv_api_name_cb api_name;
	agent_conv_demangle_cb demangle; /* optional: NULL sends names as CUPTI has them */
	agent_conv_graph_launch_cb graph_launch; /* optional: NULL sends graph launches without ids */
	void *ud;
	size_t frame_max; /* <= AGENT_FRAME_MAX */
	/* GRAPH_TRACE records are the 48-byte CUpti_ActivityGraphTrace
	 * (CUPTI before 12.3, cupti-load.h): no end device or context to read. */
	bool graph_trace_v1;
	const struct agent_device *devs; /* by local ordinal */
	uint32_t n_devs;
	/* output batch */
	uint8_t *out;
	size_t len, cap;
	/* interned names */
	struct agent_conv_name *names;
	uint32_t n_names, names_cap, next_id;
	bool names_lost; /* a batch with STRING records was dropped */
	/* per (domain, cbid) verdict: 0 = not decided, 1 = keep, 2 = skip */
	uint8_t api_keep[2][1024];
	uint32_t api_name_id[2][1024];
	/* counters */
	uint64_t records, converted, skipped, unknown, emit_failed;
	uint64_t graph_kernels;  /* kernels launched from a CUDA graph */
	uint64_t graph_launches; /* GRAPH records (graph-level tracing) */
	/* the agent's buffer canary: its cuDriverGetVersion records from this
	 * thread (a kernel tid: the agent asks CUPTI for those) are counted
	 * here and never sent (agent-capture.c canary_send()) */
	uint32_t canary_tid;
	uint64_t canary_seen;
};

void agent_conv_init(struct agent_conv *cv, agent_conv_emit_cb emit, agent_conv_api_name_cb api_name,
		     void *ud);
/* Forget names (a new connection starts a new string table). */
void agent_conv_reset(struct agent_conv *cv);
void agent_conv_free(struct agent_conv *cv);

/* Convert one record. 1 = converted, 0 = skipped (a kind or API we do not
 * keep, or an incomplete record), -ENOMEM. */
int agent_conv_record(struct agent_conv *cv, const CUpti_Activity *rec);
/* Emit what is batched. 0 or the emit callback's error. */
int agent_conv_flush(struct agent_conv *cv);

/* For other record sources of the agent (nvtx.c): the STRING id of @s
 * (defined on first use; 0 on failure), and room for one record of @type
 * and @size bytes (8-aligned, zeroed, header set; NULL on failure). Intern
 * first: a STRING may hand the batch over and move earlier records. */
uint32_t agent_conv_intern(struct agent_conv *cv, const char *s);
void *agent_conv_rec(struct agent_conv *cv, uint16_t type, size_t size);

/* Whether (@domain: enum agent_api_domain, @cbid) launches a CUDA graph:
 * cuGraphLaunch(_ptsz), cudaGraphLaunch(_ptsz). */
bool agent_conv_is_graph_launch(uint32_t domain, uint32_t cbid);

/* Whether an API call by this name belongs in the trace (launches, copies,
 * memsets, allocations, synchronisation). */
bool agent_conv_api_wanted(const char *name);
