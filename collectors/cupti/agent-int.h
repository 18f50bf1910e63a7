/* SPDX-License-Identifier: MIT */
/*
 * agent-int.h - what the files of libprofd-agent.so share: the agent's one
 * state `g`, its limits, and the calls one file makes into another.
 *
 *   agent.c            entry: InitializeInjection, fork/exit hooks, the
 *                      agent thread's loop and commands, ERROR frames, the
 *                      converter's hooks (API names, demangling, sending)
 *   agent-capture.c    the capture state machine: start, flush, stop,
 *                      detach, the buffer canary, notices, the API callback
 *   agent-slabs.c      the activity buffers: the pool, CUPTI's buffer
 *                      callbacks, drain and settle
 *   agent-inventory.c  the devices and the driver: inventory, MEM_STATE
 *   agent-graphs.c     CUDA graphs: launch callbacks, graph-level tracing
 *   pystack.c          Python stacks: launch sites, the sampler (pystack.h)
 *
 * Threads: the agent thread owns `g` except what the callbacks touch, which
 * is the slab table under g.lock (held for a few instructions, never across
 * a CUPTI call) and the atomics. CUPTI is called by the agent thread only,
 * except unsubscribe + finalize in the API-exit callback, which the agent
 * thread arms only once its own enable calls are done (CUPTI requires a
 * subscriber to serialise them). Each field below says who owns it.
 *
 * The library is built with hidden visibility: none of these names leaves
 * it (only InitializeInjection is exported).
 */
#pragma once

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "cuda-abi.h"

#include "agent-conn.h"
#include "agent-proto.h"
#include "convert.h"
#include "cupti-load.h"

#define SLAB_SIZE (4u << 20)
#define SLAB_COUNT 32u /* at most 128 MiB of activity buffers, touched only as used */
#define FLUSH_PERIOD_MS 100
#define FLUSH_SETTLE_MS 300  /* a window's FLUSH waits this long for buffers CUPTI holds */
#define STOP_SETTLE_MS 1500  /* STOP waits this long before a forced flush */
#define CLAIM_WAIT_MS 2000   /* for a CUDA call whose exit callback can finalize */
#define FINALIZE_WAIT_MS 5000 /* for that finalize to return */
#define EXIT_WAIT_MS 200
/* Callback ids of either API domain are below this. */
#define API_CBID_MAX ((unsigned)CUPTI_DRIVER_TRACE_CBID_SIZE > (unsigned)CUPTI_RUNTIME_TRACE_CBID_SIZE ? \
			      (unsigned)CUPTI_DRIVER_TRACE_CBID_SIZE : (unsigned)CUPTI_RUNTIME_TRACE_CBID_SIZE)
/* CUPTI fixed cudaGraphLaunch correlation ids after a first session here. */
#define CUPTI_GRAPH_CORR_FIXED 130101u

/* dlsym into a function pointer without the object-to-function cast. */
#define SYM(h, name, fp)                                      \
	do {                                                  \
		void *s_ = dlsym((h), (name));                \
		memcpy(&(fp), &s_, sizeof(s_));               \
	} while (0)

/* Driver calls of the agent thread (found with dlsym, agent_take_inventory()). */
typedef CUresult (*fn_dev_get)(CUdevice *, int);
typedef CUresult (*fn_pctx_state)(CUdevice, unsigned *, int *);
typedef CUresult (*fn_pctx_retain)(CUcontext *, CUdevice);
typedef CUresult (*fn_pctx_release)(CUdevice);
typedef CUresult (*fn_ctx_push)(CUcontext);
typedef CUresult (*fn_ctx_pop)(CUcontext *);
typedef CUresult (*fn_mem_info)(size_t *, size_t *);

enum slab_state { SLAB_FREE, SLAB_CUPTI, SLAB_DONE };

struct slab {
	enum slab_state state;
	uint64_t seq;  /* hand-out order, to know what a FLUSH must wait for */
	size_t valid;  /* DONE: bytes of records */
	uint64_t handed_ns; /* CUPTI: when it was handed out (agent_mono_ns()) */
};

/* g.detach: who runs the detach. */
enum { DETACH_IDLE, DETACH_ARMED, DETACH_CLAIMED };

struct agent {
	/* set up by InitializeInjection (agent.c), before the agent thread */
	pthread_once_t once;
	int efd; /* wakes the agent thread (agent_wake(), any thread) */
	/* atomics, any thread */
	atomic_int dead;    /* forked child or CUPTI fatal error: never touch CUPTI */
	atomic_int exiting; /* atexit: flush once, then stop */
	atomic_int exit_done;
	atomic_int too_late; /* exit is tearing CUDA down: no more CUPTI calls */

	/* agent thread */
	struct agent_client cl;
	struct agent_conv cv;

	/* CUPTI, loaded on the first connection (agent thread; the callbacks
	 * read C, written before the first subscribe) */
	struct cupti_lib C;
	bool cupti_tried, cupti_ok;
	int cupti_err; /* cupti_load()'s verdict */
	char cupti_why[768];
	bool untested_told;

	/* inventory (agent thread, agent-inventory.c) */
	bool inventory;
	uint32_t n_devs;
	struct agent_device devs[AGENT_MAX_DEVICES];
	uint32_t driver_version, runtime_version;
	/* for MEM_STATE (agent_send_mem_state()); NULL when the driver lacks one */
	struct {
		fn_dev_get get;
		fn_pctx_state state;
		fn_pctx_retain retain;
		fn_pctx_release release;
		fn_ctx_push push;
		fn_ctx_pop pop;
		fn_mem_info info;
	} mem;

	/* capture (agent thread, agent-capture.c, but the atomics) */
	struct agent_start opts;  /* the last START, its options (agent thread; v4) */
	atomic_int capturing;
	CUpti_SubscriberHandle sub; /* the API-exit callback uses it once it claimed the detach */
	bool subscribed;
	atomic_int detach;        /* DETACH_*: the API-exit callback claims an armed detach */
	atomic_int finalize_done; /* the claimed detach returned from cuptiFinalize */
	atomic_int finalized;     /* set before cuptiFinalize, cleared by the next subscribe:
				   * any CUPTI call in between would start CUPTI again */
	bool finalizing;          /* claimed, not yet seen done: slabs stay CUPTI's */
	bool pm_ends;             /* the armed detach disables PM sampling objects (which
				   * finalizes CUPTI) instead of calling cuptiFinalize */
	unsigned sessions;        /* captures started in this process */
	struct agent_stats stats;
	uint64_t cut;             /* buffers a forced flush handed over unfinished */
	uint64_t rec_cut;         /* of those, cut by recording mode's timed flush */
	uint64_t rec_forced;      /* recording mode's forced flushes this capture */
	bool rec_kinds;           /* the capture runs recording mode's kinds */
	unsigned told_foreign, told_graph, told_nvtx, told_rec_cut; /* notices of this capture already sent */
	bool nvtx_domains;        /* API callbacks on for NVTX launch stacks (agent_follow_nvtx()) */
	bool api_domains;         /* the driver and runtime API callbacks are on this capture */
	bool py_callbacks;        /* those of launch stacks' calls only (agent_py_callbacks_on()) */
	bool api_filter_known;
	bool graph_trace;         /* CUPTI_ACTIVITY_KIND_GRAPH_TRACE is on (agent_graphs_apply_options()) */
	bool graph_told;          /* the graph-trace refusal was reported this capture */
	/* driver, runtime: records switched off; the API enter callbacks read
	 * it, written before the domains are switched on and not after */
	uint8_t api_off[2][API_CBID_MAX / 8 + 1];
	bool driver_records;      /* CUPTI_ACTIVITY_KIND_DRIVER is on this capture */
	unsigned canaries;        /* canary calls made this capture */
	bool told_lost;           /* the canary's takeover notice was sent this capture */
	CUresult (*canary_call)(int *); /* cuDriverGetVersion: the buffer canary (canary_send()) */

	/* slabs (agent-slabs.c): state, free stack and done ring guarded by
	 * lock, which CUPTI's buffer callbacks (any thread) take too */
	pthread_mutex_t lock;
	uint8_t *region; /* SLAB_COUNT x SLAB_SIZE, NULL when none */
	struct slab slabs[SLAB_COUNT];
	uint32_t free_stack[SLAB_COUNT], n_free;
	uint32_t done_ring[SLAB_COUNT], done_head, n_done;
	uint64_t hand_seq;
	bool accepting;          /* hand slabs out: only while a capture runs */
	uint64_t declined;       /* requests refused (pool empty) during a capture */
	atomic_ullong foreign;   /* completed buffers that were not ours (atomic) */
};

/* The agent's state, defined in agent.c. */
extern struct agent g;

/* Whether the agent thread may still call into CUPTI. */
static inline bool agent_cupti_usable(void)
{
	return g.cupti_ok && !atomic_load(&g.dead) && !atomic_load(&g.too_late);
}

/* agent.c: wake the agent thread (any thread); ERROR frames (agent thread). */
void agent_wake(void);
/* Before starting an agent thread: block the application's asynchronous
 * signals, not faults (agent.c); *@old is restored after the create. */
void agent_mask_signals(sigset_t *old);
void agent_err(uint32_t code, int32_t detail, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
const char *agent_cupti_str(CUptiResult r);
/* A failed CUPTI call as an ERROR frame the daemon can explain. */
void agent_report_cupti(const char *call, CUptiResult r);

/* agent-capture.c (agent thread): the commands, and the launch stacks. */
void agent_capture_start(void);
void agent_capture_options(void);
void agent_capture_flush(uint64_t token);
void agent_capture_stop(bool connected, bool do_detach);
void agent_follow_nvtx(void);

/* agent-slabs.c: CUPTI's buffer callbacks (any thread); the rest agent thread. */
void CUPTIAPI agent_buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records);
void CUPTIAPI agent_buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
				     size_t valid);
int agent_slabs_map(void);
void agent_slabs_unmap(void);
unsigned agent_slabs_held(uint64_t seq);
void agent_drain(void);
bool agent_settle(uint64_t seq, unsigned ms);
bool agent_slabs_stale(uint64_t handed_before_ns);
void agent_capture_force_stale(void);

/* agent-inventory.c (agent thread). */
void agent_take_inventory(void);
void agent_send_mem_state(void);

/* agent-graphs.c: the launch's enter callback (application thread); the
 * rest agent thread. */
void agent_graph_launch_seen(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
			     const CUpti_CallbackData *cb);
void agent_graph_launch_ids(void *ud, uint32_t correlation, uint32_t *graph_id, uint32_t *exec_id);
void agent_graphs_follow(void);
void agent_graphs_apply_options(void);
void agent_graphs_stop(void);
