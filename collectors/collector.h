/* SPDX-License-Identifier: MIT */
/*
 * collector.h - the one interface every data source implements.
 *
 * DESIGN
 * ------
 * A collector appends events to the daemon's live trace (the "hub",
 * xspace/trace.h) while at least one capture or monitor window is
 * open. The session manager drives all collectors together through a
 * struct collector_set:
 *
 *   probe -> init          at daemon start; a collector whose probe or init
 *                          fails is kept as "unavailable" with its reason
 *                          (status, XSpace warnings), never started and
 *                          never closed.
 *   start                  the first window opened
 *   flush -> flushed       a window is closing: make every event up to
 *                          @until_ns visible in the hub (agents drain their
 *                          buffers), then call collector_flushed(). The set
 *                          waits at most a bounded time for stragglers.
 *   describe               add plane stats and warnings to a closing
 *                          window's snapshot (e.g. "NVML unavailable: ...").
 *   stop                   the last window closed
 *   close                  daemon exit, after a successful init: uv_close()
 *                          every handle, then call collector_closed() from
 *                          the last close callback.
 *
 * Hub rule: when the last window closes, the hub's planes move into that
 * window's snapshot and the hub starts empty; hub->generation then changes.
 * A collector that caches plane/line pointers or metadata ids must check
 * the generation (collector_hub_changed()) before using them.
 *
 * Facts: what one collector learns and others (or Monitor) need, e.g. the
 * GPU processes NVML saw, is published by its producer into the set and
 * read through the set (collector_set_gpu_procs() ...). Nobody looks a
 * collector up by name, and start order does not matter: a reader asking
 * before the producer published, or when it is unavailable, gets "none yet".
 *
 * Threads: every op, collector_flushed() and collector_closed() run on the
 * loop thread, which owns struct collector, the set, its facts and the hub. Only
 * nvml.c has a thread of its own (the sampler: NVML calls block for
 * milliseconds); it never touches the hub, and hands finished batches to
 * the loop under its own mutex + uv_async_send(), where they are appended.
 * The agent receiver needs no thread: its socket is a uv_pipe_t on the
 * loop. Blocking work without a thread of its own goes to uv_queue_work().
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <uv.h>

#include "gpu-map.h"
#include "proc-parse.h"
#include "xspace/trace.h"

struct collector;
struct collector_set;

/**
 * struct collector_cfg - daemon settings collectors may read (borrowed for
 * the daemon's life).
 * @proc_root:      "/proc" normally; tests point it at a fixture tree.
 * @sys_root:       "/sys" likewise.
 * @host_sample_hz: host counter rate during windows.
 * @hostname:       this machine's name, as XSpace.hostnames has it.
 * @gpus:           the daemon's one GPU map (gpu-map.h); collectors number
 *                  /device:GPU:<n> planes only through it.
 * @agent:          the agent receiver's own settings, defined in its header
 *                  and read only by it; NULL = no agent socket.
 */
struct agent_receiver_cfg; /* agent-receiver.h */

struct collector_cfg {
	const char *proc_root;
	const char *sys_root;
	uint32_t host_sample_hz;
	uint32_t nvml_sample_hz;
	const char *nvml_library; /* NULL = libnvidia-ml.so.1 */
	const struct agent_receiver_cfg *agent;
	const char *hostname;
	struct gpu_map *gpus; /* shared, mutable: GPU UUID -> plane number */
};

/**
 * struct collector_ops - one data source; one implementation per file.
 * @name:      stable id in logs, status and warnings ("host.proc").
 * @priv_size: zeroed private bytes allocated for @init (collector_priv()).
 * @probe:     can this host run us? 0, or -errno with a one-line reason and
 *             its fix written to @why. No side effects. NULL = always.
 * @init:      open files, init handles; arm nothing. On failure release
 *             everything it took before returning: @close is not called
 *             after a failed @probe or @init. libuv closes a handle only on a
 *             later loop turn, so do what can fail before the first
 *             uv_*_init(), or hand a handle already initialised to
 *             collector_init_failed_close().
 * @start:     the first window opened: begin appending to c->hub.
 * @flush:     a window closes at @until_ns: get pending data into the hub
 *             and call collector_flushed(c) (at once if nothing is pending).
 *             Answer only the latest request: when a barrier times out the
 *             next close asks again, and a late answer to the old request
 *             must not count for the new one (number requests, as nvml.c
 *             and agent-receiver.c do). NULL = nothing is ever pending.
 * @describe:  add what a reader of this window must know to @snap (plane
 *             stats, warnings). NULL = nothing.
 * @options:   the GPU options the open windows ask for changed (their
 *             union, agent-opts.h); called before @start and whenever a
 *             window opens or closes with other options. NULL = ignored.
 * @stop:      the last window closed: disarm.
 * @close:     uv_close() handles; call collector_closed(c) once all are
 *             closed (at once if none). Called only after a successful
 *             @init. NULL = nothing to close.
 * @status:    what Status lists of this collector beyond its name, state
 *             and reason: each connected agent, through @sink. Called only
 *             after a successful @init. NULL = nothing.
 */
struct agent_opts; /* agent-opts.h */
struct collector_status_sink;

/**
 * collector_counter_period_ms() - a host counter timer's period: 1 /
 * cfg->host_sample_hz (default 10 Hz), or 1 / RECORDER_COUNTER_HZ while
 * only the flight recorder runs (@slow, agent_opts.counters_slow).
 */
uint64_t collector_counter_period_ms(const struct collector *c, bool slow);

/**
 * collector_counter_rate() - follow agent_opts.counters_slow (@want) with
 * the repeating timer @t: *@slow remembers the rate it runs at; a running
 * timer is re-armed at once with the new period.
 */
void collector_counter_rate(const struct collector *c, uv_timer_t *t, bool *slow, bool want);

enum collector_window {
	COLLECTOR_WINDOW_OPEN,  /* a window opens now */
	COLLECTOR_WINDOW_SHARE, /* a recorder snapshot takes its period's mark too */
	COLLECTOR_WINDOW_LEAVE, /* one of the above is done with its mark */
};

struct collector_ops {
	const char *name;
	size_t priv_size;
	int (*probe)(const struct collector_cfg *cfg, char *why, size_t why_size);
	int (*init)(struct collector *c);
	int (*start)(struct collector *c);
	void (*flush)(struct collector *c, int64_t until_ns);
	void (*describe)(struct collector *c, struct trace *snap, int64_t start_ns, int64_t stop_ns);
	/* A window stamped @start_ns opens, shares an open one's mark or
	 * leaves, described or aborted: what a collector counts across
	 * overlapping windows is reported per window against what it was at
	 * the opening. */
	void (*window)(struct collector *c, int64_t start_ns, enum collector_window w);
	void (*options)(struct collector *c, const struct agent_opts *o);
	void (*stop)(struct collector *c);
	void (*close)(struct collector *c);
	void (*status)(struct collector *c, const struct collector_status_sink *sink);
};

enum collector_state {
	COLLECTOR_UNAVAILABLE, /* probe or init failed: see reason */
	COLLECTOR_READY,
	COLLECTOR_RUNNING,
	COLLECTOR_CLOSING,
	COLLECTOR_CLOSED,
};

struct collector {
	/* read-only */
	const struct collector_ops *ops;
	const struct collector_cfg *cfg;
	uv_loop_t *loop;
	struct trace *hub;
	enum collector_state state;
	char reason[256];
	/* private */
	void *priv;
	struct collector_set *set;
	bool flush_pending;
};

static inline void *collector_priv(struct collector *c) { return c->priv; }

/* [loop] The flush asked for is done. */
void collector_flushed(struct collector *c);
/* [loop] All handles are closed: the core may free the collector. */
void collector_closed(struct collector *c);
/* [loop] From a failing @init only: uv_close() @h, which it had initialised
 * (its data pointer is taken). The core keeps the collector's private data,
 * which holds @h, until the close is done; init then returns its error. */
void collector_init_failed_close(struct collector *c, uv_handle_t *h);
/* True once per hub generation change: re-resolve cached planes and ids.
 * @seen is the collector's own copy of the generation. */
static inline bool collector_hub_changed(const struct collector *c, uint64_t *seen)
{
	if (*seen == c->hub->generation)
		return false;
	*seen = c->hub->generation;
	return true;
}

/* ---- the set (session manager side) ----------------------------------- */

typedef void (*collector_set_cb)(void *userdata);

/* Probe and init every compiled-in collector (collectors/registry.c).
 * Never fails for an unavailable collector, only for -ENOMEM. */
int collector_set_new(uv_loop_t *loop, const struct collector_cfg *cfg, struct trace *hub,
		      struct collector_set **ret);
void collector_set_start(struct collector_set *s);
/* Hand every collector (running or ready) the open windows' union of GPU options. */
void collector_set_options(struct collector_set *s, const struct agent_opts *o);
void collector_set_stop(struct collector_set *s);
/* Ask every running collector to flush up to @until_ns; @cb runs once all
 * are done or @timeout_ms passed, whichever comes first. */
void collector_set_flush(struct collector_set *s, int64_t until_ns, uint64_t timeout_ms,
			 collector_set_cb cb, void *userdata);
void collector_set_describe(struct collector_set *s, struct trace *snap, int64_t start_ns,
			    int64_t stop_ns);
/* A window stamped @start_ns opens, shares or leaves (collector_ops.window);
 * every opening or share is matched by one leaving, the same @start_ns. */
void collector_set_window(struct collector_set *s, int64_t start_ns, enum collector_window w);
/* Close every collector; @cb runs once all are closed; then free. */
void collector_set_close(struct collector_set *s, collector_set_cb cb, void *userdata);
struct collector_set *collector_set_free(struct collector_set *s);

/**
 * struct collector_agent - a job process whose agent is connected, as
 * Status lists it. Strings are borrowed for the sink call only.
 * @version:   wire protocol version the agent speaks.
 * @name:      comm; @cmdline: its command line (Status shows it only to
 *             callers allowed to see it, docs/security.md).
 * @n_devices: how many @device calls follow at most.
 */
struct collector_agent {
	uint32_t pid;
	uint32_t version;
	const char *name;
	const char *cmdline;
	uint32_t n_devices;
};

/* A GPU an agent uses: /device:GPU:<@plane_id>, its @local_ordinal inside
 * the process. Strings borrowed as above. */
struct collector_agent_device {
	uint32_t plane_id;
	int32_t local_ordinal;
	const char *uuid;
	const char *name;
};

/**
 * struct collector_status_sink - where @status reports, on the loop thread.
 * @agent:  once per connected agent (that said HELLO); required ...
 * @device: ... then once per GPU of that agent; NULL = not wanted.
 */
struct collector_status_sink {
	void (*agent)(void *userdata, const struct collector_agent *a);
	void (*device)(void *userdata, const struct collector_agent_device *d);
	void *userdata;
};

/* [loop] Every available collector's @status, in registry order. */
void collector_set_status(struct collector_set *s, const struct collector_status_sink *sink);

size_t collector_set_count(const struct collector_set *s);
const struct collector *collector_set_get(const struct collector_set *s, size_t i);
/* Find a collector by name (tests); NULL if absent. Daemon code and other
 * collectors use the ops and the facts below instead. */
struct collector *collector_set_find(struct collector_set *s, const char *name);

/* The registry: every compiled-in collector, in start order. */
extern const struct collector_ops *const collector_registry[];
extern const size_t collector_registry_size;

/* ---- facts: published by one collector, read by others ----------------
 * The set keeps a copy of each fact; a producer replaces it whole, a
 * reader copies it out. Loop thread only, like the rest of the set: a
 * producer with a thread of its own (nvml) publishes from its loop-side
 * handler, never from that thread. */

/**
 * struct host_proc_sample - host.proc's newest readings, from its last
 * tick, its start baseline or a window's flush (whichever came last).
 * @cpu:            the aggregate /proc/stat "cpu" line; @have_cpu.
 * @mem_total, @mem_available: /proc/meminfo in bytes; @have_mem.
 */
struct host_proc_sample {
	struct proc_cpu_times cpu;
	uint64_t mem_total, mem_available;
	bool have_cpu, have_mem;
};
/* [loop] Producer (host.proc): replace the host sample. */
void collector_publish_host_sample(struct collector *c, const struct host_proc_sample *v);
/* [loop] Copy the newest host sample to @ret. 0; -ENODEV when none was
 * published yet (host.proc unavailable, or no window opened so far). A
 * reading that failed is absent (have_* 0). */
int collector_set_host_sample(const struct collector_set *s, struct host_proc_sample *ret);

/**
 * struct gpu_proc - a process NVML saw on a GPU.
 * @pid:       as NVML reports it (profd's pid namespace when it can see it).
 * @first_ns, @last_ns: wall-clock span it was seen in.
 * @name:      comm; "pid<n>" when profd cannot see it in /proc (e.g.
 *             another pid namespace).
 */
struct gpu_proc {
	int pid;
	int64_t first_ns, last_ns;
	char name[64];
};
/* [loop] Producer (nvml): replace the table of GPU processes seen (@n
 * entries, copied). 0, or -ENOMEM with the previous table kept. */
int collector_publish_gpu_procs(struct collector *c, const struct gpu_proc *v, size_t n);
/* [loop] The GPU processes seen in [@since_ns, @until_ns], in the
 * producer's order, at most @max, one per pid; 0 when none yet. */
size_t collector_set_gpu_procs(const struct collector_set *s, struct gpu_proc *out, size_t max,
			       int64_t since_ns, int64_t until_ns);
/* [loop] Their pids only, seen since @since_ns; as collector_set_gpu_procs(). */
size_t collector_set_gpu_pids(const struct collector_set *s, int *pids, size_t max, int64_t since_ns);
