/* SPDX-License-Identifier: MIT */
/*
 * agent-graphs.c - CUDA graphs in the agent: the executable graph of each
 * launch (the launch callbacks and the converter's lookup) and graph-level
 * tracing. Threads are said per function; state in `g` (agent-int.h) and
 * graph_slots below.
 */
#include <stdatomic.h>

#include "base/macro.h"

#include "agent-int.h"

/*
 * The executable graph of each graph launch, by correlation id: the API
 * record CUPTI writes later does not name it, so the launch's enter
 * callback (an application thread) notes it here and the converter (agent
 * thread) looks it up. A slot is a sequence: seq odd while written; a
 * reader takes it only when seq was even and unchanged around the read and
 * the slot holds that correlation id. An overwritten slot (more than
 * GRAPH_SLOTS launches between the call and its record) reads as unknown.
 */
#define GRAPH_SLOTS 4096u

static struct graph_slot {
	atomic_uint seq;
	atomic_uint corr, exec_id;
} graph_slots[GRAPH_SLOTS];

static const struct {
	CUpti_CallbackDomain domain;
	CUpti_CallbackId cbid;
} graph_launch_cbids[] = {
	{ CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch },
	{ CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz },
	{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000 },
	{ CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000 },
};

/* The parameters of the launch calls as CUPTI passes them: both take the
 * executable graph first (generated_cuda_meta.h's cuGraphLaunch_params,
 * generated_cuda_runtime_api_meta.h's cudaGraphLaunch_v10000_params, the
 * _ptsz twins alike; those headers do not compile on their own in C). */
struct graph_launch_params {
	CUgraphExec exec;
	CUstream stream;
};

/* Application thread, at the enter side of any API call we get. */
void agent_graph_launch_seen(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const CUpti_CallbackData *cb)
{
	uint32_t d = domain == CUPTI_CB_DOMAIN_DRIVER_API ? AGENT_API_DRIVER :
		     domain == CUPTI_CB_DOMAIN_RUNTIME_API ? AGENT_API_RUNTIME : 0;
	struct graph_slot *sl;
	uint32_t id = 0;
	unsigned seq;

	/* No CUPTI call once a detach on another thread began finalizing. */
	if (!d || !agent_conv_is_graph_launch(d, cbid) || !cb->functionParams || !g.C.cuptiGetGraphExecId ||
	    atomic_load(&g.finalized))
		return;
	if (g.C.cuptiGetGraphExecId(((const struct graph_launch_params *)cb->functionParams)->exec, &id) !=
	    CUPTI_SUCCESS)
		return;
	sl = &graph_slots[cb->correlationId % GRAPH_SLOTS];
	seq = atomic_load(&sl->seq);
	if ((seq & 1) || !atomic_compare_exchange_strong(&sl->seq, &seq, seq + 1))
		return; /* another thread writes it: this launch stays without its id */
	atomic_store(&sl->corr, cb->correlationId);
	atomic_store(&sl->exec_id, id);
	atomic_store(&sl->seq, seq + 2);
}

/* agent_conv_graph_launch_cb (agent thread). CUPTI tells the graph an
 * executable came from only at instantiation (a resource callback), which
 * jobs do before anyone profiles: graph_id stays 0. */
void agent_graph_launch_ids(void *ud, uint32_t correlation, uint32_t *graph_id, uint32_t *exec_id)
{
	struct graph_slot *sl = &graph_slots[correlation % GRAPH_SLOTS];
	unsigned seq = atomic_load(&sl->seq);
	uint32_t c, id;

	(void)ud;
	*graph_id = 0;
	*exec_id = 0;
	if (seq & 1)
		return;
	c = atomic_load(&sl->corr);
	id = atomic_load(&sl->exec_id);
	if (c == correlation && atomic_load(&sl->seq) == seq)
		*exec_id = id;
}

/* The launch callbacks, at capture start (the subscriber is new). Only
 * these cbids: a job's other calls pay nothing for them. */
void agent_graphs_follow(void)
{
	if (!g.C.cuptiGetGraphExecId)
		return;
	for (size_t i = 0; i < ARRAY_SIZE(graph_launch_cbids); i++)
		g.C.cuptiEnableCallback(1, g.sub, graph_launch_cbids[i].domain, graph_launch_cbids[i].cbid);
}

/*
 * Graph-level tracing (AGENT_START_GRAPH_TRACE): CUPTI then reports each
 * graph launch as one CUpti_ActivityGraphTrace2 instead of its nodes'
 * kernel/memcpy/memset records; kernels launched outside graphs are still
 * traced. It is an activity kind like any other, so it can be switched
 * while a capture runs: launches from then on follow the new setting.
 * Graphs instantiated before CUPTI attached cannot be traced this way
 * (CUPTI guide §2.3.7): they keep reporting nodes. Agent thread.
 */
void agent_graphs_apply_options(void)
{
	bool want = (g.opts.flags & AGENT_START_GRAPH_TRACE) != 0;
	CUptiResult r;

	if (want == g.graph_trace || !g.subscribed || !agent_cupti_usable())
		return;
	r = want ? g.C.cuptiActivityEnable(CUPTI_ACTIVITY_KIND_GRAPH_TRACE) :
		   g.C.cuptiActivityDisable(CUPTI_ACTIVITY_KIND_GRAPH_TRACE);
	if (r == CUPTI_SUCCESS) {
		g.graph_trace = want;
		return;
	}
	if (!g.graph_told) {
		g.graph_told = true;
		agent_err(AGENT_ERR_NOTICE, (int32_t)r, "CUDA graphs: %s graph-level tracing failed (%s); "
			  "graph launches are traced %s", want ? "enabling" : "disabling", agent_cupti_str(r),
			  want ? "per node" : "as a whole");
	}
}

/* Graph-level tracing off with the capture's other kinds. */
void agent_graphs_stop(void)
{
	if (g.graph_trace && agent_cupti_usable())
		g.C.cuptiActivityDisable(CUPTI_ACTIVITY_KIND_GRAPH_TRACE);
	g.graph_trace = false;
}
