/* SPDX-License-Identifier: MIT */
/*
 * nvml-counters.c - the NVML collector's counter mapping, on the loop
 * thread: a delivered batch becomes counter points (trace_counter_append()
 * on each /device:GPU:<n> plane's `_counters_` line, named per
 * xspace/names.h), warnings (notes; a lost GPU's text kept for describe),
 * the per-GPU list of processes seen, and, per window, the plane stats of
 * each GPU's capabilities. Planes and ids are looked up per batch, never
 * cached, so the hub generation rule (collector.h) holds trivially.
 */
#define LOG_TOPIC "collector.nvml"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent-proto.h" /* agent_mem_bandwidth() */
#include "base/log.h"
#include "base/timeutil.h"
#include "gpu-peaks.h"
#include "nvml-internal.h"
#include "xspace/names.h"

static const char *const ctr_name[C_N] = {
	[C_GPU_UTIL] = XN_COUNTER_GPU_UTIL,
	[C_MEM_UTIL] = XN_COUNTER_MEM_UTIL,
	[C_MEM_USED] = XN_COUNTER_GPU_MEM_USED,
	[C_MEM_TOTAL] = XN_COUNTER_GPU_MEM_TOTAL,
	[C_POWER] = XN_COUNTER_POWER,
	[C_SM_CLOCK] = XN_COUNTER_SM_CLOCK,
	[C_MEM_CLOCK] = XN_COUNTER_MEM_CLOCK,
	[C_TEMP] = XN_COUNTER_GPU_TEMP,
	[C_PCIE_TX] = XN_COUNTER_PCIE_TX,
	[C_PCIE_RX] = XN_COUNTER_PCIE_RX,
	[C_NVLINK_TX] = XN_COUNTER_NVLINK_TX,
	[C_NVLINK_RX] = XN_COUNTER_NVLINK_RX,
	[C_SM_ACTIVE] = XN_COUNTER_SM_ACTIVE,
	[C_SM_OCC] = XN_COUNTER_SM_OCCUPANCY,
	[C_TENSOR] = XN_COUNTER_TENSOR_ACTIVE,
	[C_FP64] = XN_COUNTER_FP64_ACTIVE,
	[C_FP32] = XN_COUNTER_FP32_ACTIVE,
	[C_FP16] = XN_COUNTER_FP16_ACTIVE,
	[C_DRAM_BW] = XN_COUNTER_DRAM_BW_UTIL,
};


static void remember_proc(struct gpu *g, const struct proc_seen *ps)
{
	struct gproc *slot = NULL, *oldest = NULL;

	for (unsigned i = 0; i < g->n_procs; i++) {
		if (g->procs[i].pid == ps->pid && strcmp(g->procs[i].name, ps->name) == 0) {
			slot = &g->procs[i];
			break;
		}
		if (!oldest || g->procs[i].last_ns < oldest->last_ns)
			oldest = &g->procs[i];
	}
	if (!slot) {
		slot = g->n_procs < MAX_PROCS_KEPT ? &g->procs[g->n_procs++] : oldest;
		memset(slot, 0, sizeof(*slot));
		slot->pid = ps->pid;
		slot->first_ns = ps->ts;
		snprintf(slot->name, sizeof(slot->name), "%s", ps->name);
	}
	slot->last_ns = ps->ts;
	slot->gpu_mem_mib = ps->gpu_mem_mib;
	if (ps->cmdline[0])
		snprintf(slot->cmdline, sizeof(slot->cmdline), "%s", ps->cmdline);
}

/* The processes every GPU saw, for host.io and the agent receiver: they
 * read them through the set (collector_set_gpu_procs()), never from us.
 * Published only when a batch brought sightings (~2 Hz), on the loop. */
static void publish_procs(struct collector *c)
{
	struct nvml *nv = to_nv(c);
	struct gpu_proc *v;
	size_t n = 0;

	for (unsigned i = 0; i < nv->n_gpus; i++)
		n += nv->gpus[i].n_procs;
	v = calloc(n ? n : 1, sizeof(*v));
	if (v) {
		n = 0;
		for (unsigned i = 0; i < nv->n_gpus; i++)
			for (unsigned j = 0; j < nv->gpus[i].n_procs; j++) {
				const struct gproc *pr = &nv->gpus[i].procs[j];

				v[n].pid = pr->pid;
				v[n].first_ns = pr->first_ns;
				v[n].last_ns = pr->last_ns;
				snprintf(v[n++].name, sizeof(v->name), "%s", pr->name);
			}
	}
	if (!v || collector_publish_gpu_procs(c, v, n) < 0)
		log_warn("nvml: out of memory; other collectors see the GPU processes of an earlier tick");
	free(v);
}

void nvml_append_batch(struct collector *c, struct batch *b)
{
	struct nvml *nv = to_nv(c);
	struct trace_plane *planes[MAX_GPUS] = {0};

	for (size_t i = 0; i < b->n_notes; i++) {
		struct note *n = &b->notes[i];
		struct gpu *g = &nv->gpus[n->gpu];

		if (n->lost) {
			if (!g->lost_seen) {
				g->lost_seen = true;
				g->lost_ns = n->ts;
				snprintf(g->lost_text, sizeof(g->lost_text), "%s", n->text);
				log_warn("%s", n->text);
			}
		} else {
			log_warn("%s", n->text);
		}
		trace_diag(c->hub, n->ts, false, "%s", n->text);
	}
	for (size_t i = 0; i < b->n_procs; i++)
		remember_proc(&nv->gpus[b->procs[i].gpu], &b->procs[i]);
	if (b->n_procs)
		publish_procs(c);
	for (size_t i = 0; i < b->n_recs; i++) {
		struct rec *r = &b->recs[i];
		struct trace_plane *p = planes[r->gpu];
		struct trace_line *l;
		const char *name = r->ctr >= 0 ? ctr_name[r->ctr] : r->name;

		if (!name)
			continue;
		if (!p) {
			struct gpu *g = &nv->gpus[r->gpu];

			p = planes[r->gpu] = trace_plane(c->hub, g->plane, g->id);
			if (!p)
				continue;
		}
		l = trace_counter_line(p);
		if (l && trace_counter_append(l, NULL, name, r->ts, r->v) == -ENOBUFS)
			break; /* budget spent: the hub counts drops */
	}
	nvml_batch_clear(b);
}

void nvml_plane_caps(struct trace *snap, const struct gpu *g, int64_t start_ns, int64_t stop_ns)
{
	struct trace_plane *p = trace_plane(snap, g->plane, g->id);
	struct buf b = BUF_INIT;

	if (!p)
		return;
	gpu_caps_stats(p, &b, &(struct gpu_caps){
		.name = g->name,
		.uuid = g->uuid,
		.pci_bus_id = g->pci,
		.sm_clock_khz = (uint64_t)g->max_sm_mhz * 1000,
		.sm_count = g->sm_count,
		.cc_major = g->cc_major,
		.cc_minor = g->cc_minor,
		.mem_bandwidth = agent_mem_bandwidth((uint64_t)g->max_mem_mhz * 1000, g->bus_width),
		.mem_bytes = g->mem_total,
	});
	/* Who used this GPU in the window; the command line only for a caller
	 * who may see it (trace.hide_cmdlines, docs/security.md). */
	char list[2048];
	size_t off = 0;
	unsigned n = 0;
	list[0] = 0;
	for (unsigned i = 0; i < g->n_procs; i++) {
		const struct gproc *pr = &g->procs[i];

		if (pr->last_ns < start_ns - (int64_t)NSEC_PER_SEC || pr->first_ns > stop_ns)
			continue;
		int k = snap->hide_cmdlines
				? snprintf(list + off, sizeof(list) - off, "%s%d %s gpu_mem=%.0fMiB", n ? "; " : "",
					   pr->pid, pr->name, pr->gpu_mem_mib)
				: snprintf(list + off, sizeof(list) - off, "%s%d %s (%s) gpu_mem=%.0fMiB",
					   n ? "; " : "", pr->pid, pr->name, pr->cmdline[0] ? pr->cmdline : "?",
					   pr->gpu_mem_mib);
		if (k < 0 || (size_t)k >= sizeof(list) - off)
			break;
		off += (size_t)k;
		n++;
	}
	if (n)
		trace_stat_str(p, &b, XN_STAT_GPU_PROCESSES, list);
	trace_plane_set_stats(p, &b);
	buf_free(&b);
}

