/* SPDX-License-Identifier: MIT */
/*
 * nvml.c - device counters from NVML, with no agent in the job: the
 * collector ops (init, start/stop/flush of the sampler, describe, close),
 * the loop side of the hand-off (uv_async), and what the bench calls.
 * Loop thread, except the sampler (nvml-sampler.c) and nvml_bench_tick().
 *
 * FILES
 * -----
 *   nvml.c           this: the collector's life on the loop thread
 *   nvml-bind.c      the library: dlopen, symbols, errors, opening GPUs
 *   nvml-sampler.c   the sampler thread: ticks, NVML calls, batches
 *   nvml-counters.c  batches -> counter points, warnings, plane stats
 *   nvml-internal.h  the state they share, and who owns which field
 *
 * DESIGN
 * ------
 * libnvidia-ml.so.1 is dlopen()ed (collectors/nvml/nvml-api.h has our own
 * declarations); a host without it gets "no GPU counters: ..." in every
 * window's warnings and profd runs on. At init every GPU is numbered
 * through the shared GPU map (gpu-map.h) in NVML index order, and its
 * capabilities (name, SMs, clocks, memory, bandwidth, compute capability)
 * are read once; describe() writes them as plane stats of /device:GPU:<n>
 * into each window, so XProf sees the device model even with no agent.
 *
 * NVML calls can block for milliseconds (nvmlDeviceGetPcieThroughput
 * samples for 20 ms), so a sampler thread of our own makes them. While a
 * window is open it ticks at cfg->nvml_sample_hz and, per GPU:
 *   every tick   memory used/total, temperature; utilization, power and
 *                clocks from the driver's sample buffer
 *                (nvmlDeviceGetSamples, each sample with its own time) or,
 *                where the driver keeps none, polled;
 *   ~5 Hz        PCIe and NVLink throughput, GPM metrics on Hopper+;
 *   ~2 Hz        the compute processes, joined with /proc.
 * A tick's results go into a locked batch; uv_async wakes the loop, which
 * appends counter events to the hub. Nothing is cached across hub
 * generations: planes and metadata ids are looked up per batch (a few per
 * GPU), so the hub generation rule holds trivially.
 *
 * Counter events follow the upstream CUPTI PM-sampling form that XProf's
 * trace viewer reads from a `_counters_` line: event metadata name = the
 * counter, duration 0, one double stat whose metadata name is the counter
 * name too (docs/nvml.md).
 *
 * Failures never fail a capture: NOT_SUPPORTED drops that counter for the
 * GPU; GPU_IS_LOST stops sampling that GPU and warns; other errors warn
 * once per GPU and call per window and keep trying.
 */
#define LOG_TOPIC "collector.nvml"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent-opts.h"
#include "base/log.h"
#include "base/timeutil.h"
#include "collectors.h"
#include "nvml-internal.h"

static void on_async(uv_async_t *h);

/* ---- init ------------------------------------------------------------------ */

static int nvml_init(struct collector *c)
{
	struct nvml *nv = to_nv(c);
	const char *lib = c->cfg->nvml_library && c->cfg->nvml_library[0] ? c->cfg->nvml_library
										: NVML_DEFAULT_LIBRARY;
	unsigned count = 0;
	int r;

	nv->proc = (struct proc_reader)PROC_READER_INIT; /* priv is zeroed: fd 0 is not ours */
	r = nvml_bind_open(nv, lib, c->cfg->gpus, c->reason, sizeof(c->reason), &count);
	if (r < 0)
		return r;
	/* Every GPU of the machine is in the map now: agents may name only
	 * these (a local process cannot fill the map with made-up UUIDs). */
	if (nv->n_gpus == count)
		c->cfg->gpus->complete = true;
	nv->hz = c->cfg->nvml_sample_hz ? c->cfg->nvml_sample_hz : 50;
	/* Not fatal: without it processes are named "pid<n>" and get no CPU, RSS
	 * or thread counters (reads fail with -EBADF). */
	r = proc_reader_open(&nv->proc, c->cfg->proc_root ? c->cfg->proc_root : "/proc", PROC_BUF_INITIAL,
			     PROC_BUF_MAX);
	if (r < 0)
		log_warn("%s: %s; GPU processes are listed without /proc details",
			 c->cfg->proc_root ? c->cfg->proc_root : "/proc", strerror(-r));
	nv->clk_tck = sysconf(_SC_CLK_TCK);
	if (nv->clk_tck <= 0)
		nv->clk_tck = 100;
	uv_mutex_init(&nv->lock);
	uv_cond_init(&nv->cond);
	/* The thread before the loop's handle: close() is not called after a
	 * failed init, and this failure then leaves no handle to close. The
	 * thread waits for start (nv->running) before it uses nv->async. */
	r = uv_thread_create(&nv->thread, nvml_sampler_main, nv);
	if (r == 0) {
		r = uv_async_init(c->loop, &nv->async, on_async);
		if (r == 0) {
			nv->async.data = c;
			return 0;
		}
		uv_mutex_lock(&nv->lock);
		nv->quit = true;
		uv_cond_signal(&nv->cond);
		uv_mutex_unlock(&nv->lock);
		uv_thread_join(&nv->thread);
	}
	snprintf(c->reason, sizeof(c->reason), "could not start the sampler thread: %s", uv_strerror(r));
	uv_cond_destroy(&nv->cond);
	uv_mutex_destroy(&nv->lock);
	nvml_bind_unload(nv);
	return r;
}

/* ---- loop side: runs, flushes, hand-off ---------------------------------- */

static void on_async(uv_async_t *h)
{
	struct collector *c = h->data;
	struct nvml *nv = to_nv(c);
	bool flush;
	bool current;

	uv_mutex_lock(&nv->lock);
	current = nv->pending_epoch == nv->epoch && nv->running;
	nvml_batch_move(&nv->work, &nv->pending);
	/* A late answer to an earlier request (that barrier timed out) must
	 * not satisfy a newer one: its values stop before the newer window's end. */
	flush = nv->pending_flush && nv->pending_flush_seq == nv->flush_seq;
	nv->pending_flush = false;
	uv_mutex_unlock(&nv->lock);
	if (current && c->state == COLLECTOR_RUNNING)
		nvml_append_batch(c, &nv->work);
	else
		nvml_batch_clear(&nv->work);
	if (flush && nv->flushing) {
		nv->flushing = false;
		collector_flushed(c);
	}
}

static int nvml_start(struct collector *c)
{
	struct nvml *nv = to_nv(c);

	/* A new run: what was lost says so again only if it still is (the
	 * sampler re-probes it and notes the answer). */
	for (unsigned i = 0; i < nv->n_gpus; i++)
		nv->gpus[i].lost_seen = false;

	uv_mutex_lock(&nv->lock);
	nv->running = true;
	nv->epoch++;
	uv_cond_signal(&nv->cond);
	uv_mutex_unlock(&nv->lock);
	return 0;
}

/* Only the flight recorder open: NVML at RECORDER_COUNTER_HZ (docs/
 * recorder.md, Cost); the sampler picks the rate up at its next wake. */
static void nvml_options(struct collector *c, const struct agent_opts *o)
{
	struct nvml *nv = to_nv(c);

	uv_mutex_lock(&nv->lock);
	nv->slow_hz = o->counters_slow ? MIN(RECORDER_COUNTER_HZ, nv->hz) : 0;
	uv_cond_signal(&nv->cond);
	uv_mutex_unlock(&nv->lock);
}

static void nvml_stop(struct collector *c)
{
	struct nvml *nv = to_nv(c);

	uv_mutex_lock(&nv->lock);
	nv->running = false;
	nv->epoch++;
	nv->flush_req = false;
	uv_mutex_unlock(&nv->lock);
	if (nv->flushing) {
		nv->flushing = false;
		collector_flushed(c);
	}
}

static void nvml_flush(struct collector *c, int64_t until_ns)
{
	struct nvml *nv = to_nv(c);

	/* One more tick now, so the window ends with fresh values; they are
	 * stamped just inside the window (measured a few ms after it). */
	uv_mutex_lock(&nv->lock);
	nv->flush_req = true;
	nv->flush_until = until_ns;
	nv->flush_seq++;
	nv->flushing = true;
	uv_cond_signal(&nv->cond);
	uv_mutex_unlock(&nv->lock);
}

/* ---- describe and close ---------------------------------------------------- */

static void nvml_describe(struct collector *c, struct trace *snap, int64_t start_ns, int64_t stop_ns)
{
	struct nvml *nv = to_nv(c);

	if (c->state == COLLECTOR_UNAVAILABLE || !nv->n_gpus) {
		trace_diag(snap, start_ns, false, "no GPU counters: %s", c->reason);
		return;
	}
	for (unsigned i = 0; i < nv->n_gpus; i++) {
		struct gpu *g = &nv->gpus[i];

		nvml_plane_caps(snap, g, start_ns, stop_ns);
		if (g->lost_seen)
			trace_diag(snap, start_ns, false, "%s", g->lost_text);
	}
}

/* How long shutdown waits for the sampler thread to leave an NVML call. */
#define CLOSE_WAIT_NS (2000ull * 1000000ull)

static void on_async_closed(uv_handle_t *h)
{
	struct collector *c = h->data;
	struct nvml *nv = to_nv(c);

	nvml_batch_free(&nv->pending);
	nvml_batch_free(&nv->work);
	uv_cond_destroy(&nv->cond);
	uv_mutex_destroy(&nv->lock);
	nvml_bind_unload(nv);
	collector_closed(c);
}

static void on_abandoned_async_closed(uv_handle_t *h)
{
	collector_closed(h->data);
}

/* The sampler is stuck inside an NVML call (a wedged GPU or driver can
 * block one for minutes). Shutdown must not wait for it: leave the thread
 * and everything it may touch (this struct, its lock, the library)
 * behind, reachable from here, and close only the loop's handle. The
 * thread never delivers again (its epoch is stale) and exits by itself
 * if the call ever returns; process exit ends it otherwise. */
static struct nvml *abandoned;

static void abandon(struct collector *c)
{
	struct nvml *nv = to_nv(c);

	log_warn("nvml: an NVML call has not returned for %llu ms; shutting down without waiting "
		 "for it", (unsigned long long)(CLOSE_WAIT_NS / 1000000));
	abandoned = nv;
	c->priv = NULL; /* not freed by the collector set */
	uv_close((uv_handle_t *)&nv->async, on_abandoned_async_closed);
}

static void nvml_close(struct collector *c)
{
	struct nvml *nv = to_nv(c);
	uint64_t deadline = uv_hrtime() + CLOSE_WAIT_NS, now;
	bool exited;

	uv_mutex_lock(&nv->lock);
	nv->quit = true;
	nv->epoch++; /* whatever it is sampling now is never delivered */
	uv_cond_signal(&nv->cond);
	while (!nv->exited && (now = uv_hrtime()) < deadline)
		uv_cond_timedwait(&nv->cond, &nv->lock, deadline - now);
	exited = nv->exited;
	uv_mutex_unlock(&nv->lock);
	if (!exited) {
		abandon(c);
		return;
	}
	uv_thread_join(&nv->thread);
	uv_close((uv_handle_t *)&nv->async, on_async_closed);
}

/* ---- for the bench ---------------------------------------------------------- */

int nvml_bench_tick(const char *library, unsigned n_iter, double *ret_us_per_tick, unsigned *ret_gpus)
{
	struct nvml *nv = calloc(1, sizeof(*nv));
	struct batch b = {0};
	unsigned count = 0;
	char why[256];
	int r;

	if (!nv)
		return -ENOMEM;
	nv->proc = (struct proc_reader)PROC_READER_INIT;
	/* The init path minus the GPU map, the thread and the handles. */
	r = nvml_bind_open(nv, library, NULL, why, sizeof(why), &count);
	if (r == 0) {
		nv->hz = 50;
		(void)proc_reader_open(&nv->proc, "/proc", PROC_BUF_INITIAL, PROC_BUF_MAX);
		nv->clk_tck = sysconf(_SC_CLK_TCK);
		nvml_run_begin(nv, &b);
		int64_t t0 = mono_ns();
		for (unsigned i = 0; i < n_iter; i++) {
			nvml_sample_all(nv, &b, i, INT64_MAX);
			nvml_batch_clear(&b);
		}
		*ret_us_per_tick = n_iter ? (double)(mono_ns() - t0) / 1e3 / n_iter : 0;
		*ret_gpus = nv->n_gpus;
	}
	nvml_batch_free(&b);
	nvml_bind_unload(nv);
	free(nv);
	return r;
}

const struct collector_ops nvml_collector_ops = {
	.name = NVML_NAME,
	.priv_size = sizeof(struct nvml),
	.probe = nvml_bind_probe,
	.init = nvml_init,
	.start = nvml_start,
	.flush = nvml_flush,
	.describe = nvml_describe,
	.options = nvml_options,
	.stop = nvml_stop,
	.close = nvml_close,
};

