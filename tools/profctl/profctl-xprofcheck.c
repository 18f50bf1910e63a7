/* SPDX-License-Identifier: MIT */
/*
 * profctl-xprofcheck.c - `profctl doctor FILE`: which XProf tools would
 * have content for an XSpace file, and why not.
 *
 * DESIGN
 * ------
 * One pass over the file (tools/profctl/xspace-reader.h) collects what XProf's
 * converters key on; the verdicts then follow XProf's own rules, each one
 * cited below with the openxla/xprof source it was read in. The check is
 * only as exact as those rules: it counts what a converter would take,
 * it does not run the converters. Stat types matter (reference protocol
 * §4.9): a number of the wrong type reads as 0 there, so it is counted as
 * missing here and named.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/macro.h"
#include "profctl.h"
#include "xspace-reader.h"
#include "xspace/names.h"

struct facts {
	uint64_t planes_traced, events_traced;  /* host and GPU planes */
	uint64_t kernels;                       /* GPU events with duration and kernel_details */
	uint64_t gpu_events;
	uint64_t tf_op, hlo_op; /* GPU events by op stat (hlo_op wins) */
	bool tf_op_flops;       /* a tf_op event carries a flops stat > 0 */
	uint64_t group_events, group_wrong_type;
	uint64_t mem_events, mem_wrong_type;
	bool host_exact;     /* a plane named exactly /host:CPU */
	bool hlo_protos;     /* /host:metadata carries "Hlo Proto" */
	unsigned gpu_planes, gpu_caps, gpu_peaks;
};

static bool plane_has_stat_name(const struct xs_plane *pl, const char *name)
{
	return xs_plane_stat_id(pl, name) >= 0;
}

/*
 * The device model XProf builds from a GPU plane's stats
 * (xprof/convert/xplane_to_op_stats.cc GetDeviceCapFromXPlane, peaks in
 * xprof/utils/hardware_type_utils.cc): vendor "Nvidia", compute capability,
 * clock_rate and core_count derive the FLOP peak; peak_teraflops_per_second
 * (double, > 0) replaces it; memory_bandwidth (uint64) is the HBM peak.
 */
static int gpu_caps(const struct xs_plane *pl, struct facts *fx)
{
	struct pb_cursor it = pl->raw;
	struct xs_stat st;
	bool vendor = false, cc = false, clock = false, cores = false, bw = false, peak = false;
	int r;

	while ((r = xs_plane_next_stat(pl, &it, &st)) > 0) {
		const struct xs_meta *m = xs_plane_stat_meta(pl, st.metadata_id);
		struct xs_str s;
		double v = 0;

		if (!m)
			continue;
		xs_stat_number(&st, &v);
		if (xs_str_eq(m->name, XN_STAT_DEVICE_VENDOR))
			vendor = xs_stat_str(pl, &st, &s) && xs_str_eq(s, XN_VENDOR_NVIDIA);
		else if (xs_str_eq(m->name, XN_STAT_CC_MAJOR))
			cc = v > 0;
		else if (xs_str_eq(m->name, XN_STAT_CLOCK_RATE))
			clock = v > 0;
		else if (xs_str_eq(m->name, XN_STAT_CORE_COUNT))
			cores = v > 0;
		else if (xs_str_eq(m->name, XN_STAT_MEMORY_BANDWIDTH))
			bw = st.kind == XS_STAT_UINT64 && st.u > 0;
		else if (xs_str_eq(m->name, XN_STAT_PEAK_TFLOPS))
			peak = st.kind == XS_STAT_DOUBLE && st.d > 0;
	}
	if (r < 0)
		return r;
	if (((vendor && cc && clock && cores) || peak) && bw)
		fx->gpu_caps++;
	if (peak)
		fx->gpu_peaks++;
	return 0;
}

static int walk_plane(struct xs_plane *pl, struct facts *fx)
{
	bool gpu = xs_str_has_prefix(pl->name, XN_PLANE_GPU_PREFIX);
	/* The trace viewer takes every /host:CPU* plane
	 * (xprof/convert/xplane_to_trace_container.cc); op stats and the
	 * memory profile only the first one named exactly /host:CPU
	 * (xplane_to_op_stats.cc, xplane_to_memory_profile.cc FindPlaneWithName). */
	bool host = xs_str_has_prefix(pl->name, XN_PLANE_HOST);
	bool host_exact = xs_str_eq(pl->name, XN_PLANE_HOST) && !fx->host_exact;
	int64_t kd, tf, hlo, grp, bytes;
	struct xs_line_iter li;
	struct xs_line ln;
	uint64_t before;
	int r;

	if ((r = xs_plane_index(pl)) < 0)
		return r;
	if (xs_str_eq(pl->name, XN_PLANE_METADATA)) {
		/* HLO protos ride there as "Hlo Proto" stats (protocol §4.8). */
		fx->hlo_protos = plane_has_stat_name(pl, "Hlo Proto");
		return 0;
	}
	if (!gpu && !host)
		return 0;
	if (gpu) {
		fx->gpu_planes++;
		if ((r = gpu_caps(pl, fx)) < 0)
			return r;
	}
	if (host_exact)
		fx->host_exact = true;
	kd = xs_plane_stat_id(pl, XN_STAT_KERNEL_DETAILS);
	tf = xs_plane_stat_id(pl, XN_STAT_TF_OP);
	hlo = xs_plane_stat_id(pl, XN_STAT_HLO_OP);
	grp = xs_plane_stat_id(pl, XN_STAT_GROUP_ID);
	bytes = xs_plane_stat_id(pl, XN_STAT_BYTES_ALLOCATED);
	before = fx->events_traced;
	li = xs_plane_lines(pl);
	while ((r = xs_next_line(&li, &ln)) > 0) {
		struct pb_cursor ei = xs_line_events(&ln);
		struct xs_event ev;

		while ((r = xs_next_event(&ei, &ev)) > 0) {
			struct pb_cursor si = ev.raw;
			struct xs_stat st;
			bool has_kd = false, has_tf = false, has_hlo = false, mem_ok = false;

			fx->events_traced++;
			while ((r = xs_event_next_stat(&si, &st)) > 0) {
				if (st.metadata_id == kd && kd >= 0)
					has_kd = true;
				else if (st.metadata_id == tf && tf >= 0)
					has_tf = st.kind == XS_STAT_STR || st.kind == XS_STAT_REF;
				else if (st.metadata_id == hlo && hlo >= 0)
					has_hlo = true;
				/* group_id is read with IntValue on int64 only
				 * (xprof gpu_event_stats.cc, group_events.cc; §4.9). */
				else if (st.metadata_id == grp && grp >= 0)
					st.kind == XS_STAT_INT64 ? fx->group_events++ : fx->group_wrong_type++;
				else if (st.metadata_id == bytes && bytes >= 0)
					mem_ok = st.kind == XS_STAT_INT64;
			}
			if (r < 0)
				return r;
			if (gpu) {
				const struct xs_meta *m = xs_plane_event_meta(pl, ev.metadata_id);
				struct xs_stat ms;

				fx->gpu_events++;
				/* Kernel stats: GPU events with a duration and
				 * kernel_details, on the event or its metadata
				 * (xprof/convert/xplane_to_kernel_stats_db.cc). */
				if (!has_kd && m && xs_event_find_stat(pl, &ev, m, XN_STAT_KERNEL_DETAILS, &ms) > 0)
					has_kd = true;
				if (has_kd && ev.duration_ps > 0)
					fx->kernels++;
				/* Op metrics take a device event by its own hlo_op
				 * (resolved against an HLO proto, else the event is
				 * dropped even with tf_op) or tf_op
				 * (xprof/convert/xplane_to_op_metrics_db.cc,
				 * ConvertDeviceTraceXPlaneToOpMetricsDb; §4.9). */
				if (has_hlo)
					fx->hlo_op++;
				else if (has_tf)
					fx->tf_op++;
				/* FLOPs of a tf_op event: its own "flops" stat (XProf's
				 * kFlops; HLO ops get theirs from XLA's cost analysis of
				 * the HLO protos). Looked up until one is found. */
				double fl;

				if (has_tf && !has_hlo && !fx->tf_op_flops &&
				    xs_event_find_stat(pl, &ev, m, XN_STAT_FLOPS, &ms) > 0 && xs_stat_number(&ms, &fl) && fl > 0)
					fx->tf_op_flops = true;
			}
			/* The memory profile: MemoryAllocation/MemoryDeallocation
			 * with int64 numbers (xplane_to_memory_profile.cc). */
			if (host_exact) {
				const struct xs_meta *m = xs_plane_event_meta(pl, ev.metadata_id);

				if (m && (xs_str_eq(m->name, XN_EVENT_MEMORY_ALLOCATION) ||
					  xs_str_eq(m->name, XN_EVENT_MEMORY_DEALLOCATION)))
					mem_ok ? fx->mem_events++ : fx->mem_wrong_type++;
			}
		}
		if (r < 0)
			return r;
	}
	if (r < 0)
		return r;
	if (fx->events_traced != before)
		fx->planes_traced++;
	return 0;
}

static void verdict(const char *tool, bool ok, const char *fmt, ...) _printf_(3, 4);
static void verdict(const char *tool, bool ok, const char *fmt, ...)
{
	va_list ap;

	printf("  %-20s %-4s ", tool, ok ? "yes" : "no");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

static void report(const struct facts *fx)
{
	/* Events with hlo_op count only when /host:metadata has the HLO
	 * protos (the plane may come after the GPU planes: decided here). */
	uint64_t ops = fx->tf_op + (fx->hlo_protos ? fx->hlo_op : 0);
	bool steps = fx->group_events > 0;
	char why[256] = "";

	verdict("trace_viewer", fx->events_traced > 0, "%" PRIu64 " events on %" PRIu64 " host/GPU planes",
		fx->events_traced, fx->planes_traced);
	if (fx->kernels)
		verdict("kernel_stats", true, "%" PRIu64 " kernels with kernel_details", fx->kernels);
	else
		verdict("kernel_stats", false, "no GPU event with a duration and kernel_details (is the profd "
			"agent in the job? CUDA_INJECTION64_PATH)");
	if (fx->mem_events)
		verdict("memory_profile", true, "%" PRIu64 " MemoryAllocation/MemoryDeallocation events on /host:CPU",
			fx->mem_events);
	else if (fx->mem_wrong_type)
		verdict("memory_profile", false, "%" PRIu64 " memory events, but bytes_allocated is not int64 (XProf "
			"reads it as 0)", fx->mem_wrong_type);
	else
		verdict("memory_profile", false, "no MemoryAllocation/MemoryDeallocation event on %s (no "
			"allocation during the capture, or no agent)", fx->host_exact ? XN_PLANE_HOST : "a " XN_PLANE_HOST " plane");
	if (fx->hlo_op && !fx->hlo_protos)
		snprintf(why, sizeof(why), "; %" PRIu64 " events with hlo_op are dropped: no HLO proto in "
			 XN_PLANE_METADATA, fx->hlo_op);
	if (ops)
		verdict("framework_op_stats", true, "%" PRIu64 " GPU events with tf_op or a resolvable hlo_op%s", ops,
			why);
	else
		verdict("framework_op_stats", false, "no GPU event carries tf_op (op names: NVTX ranges around "
			"the job's ops, e.g. torch.cuda.nvtx.range or XLA's annotations)%s", why);
	/* The overview's step-time graph and the input pipeline need steps:
	 * group_id on events (xprof/convert/xplane_to_step_events.cc,
	 * group_events.cc). */
	if (ops && steps)
		verdict("overview_page", true, "op metrics and %" PRIu64 " events in steps", fx->group_events);
	else if (ops)
		verdict("overview_page", true, "op metrics, but no steps: the step-time graph stays empty "
			"(no event carries an int64 group_id)");
	else
		verdict("overview_page", false, "no op metrics (see framework_op_stats)%s",
			steps ? "" : " and no steps (no event carries an int64 group_id)");
	if (steps)
		verdict("input_pipeline", true, "%" PRIu64 " events in steps", fx->group_events);
	else
		verdict("input_pipeline", false, "no steps: no event carries an int64 group_id%s",
			fx->group_wrong_type ? " (some carry one of another type, which XProf reads as 0)" : "");
	/* Roofline: op metrics against the device's peaks (xprof
	 * roofline_model tool via op_stats; peaks from
	 * xplane_to_op_stats.cc GetPerfEnvFromXPlane). */
	bool flops = fx->tf_op_flops || (fx->hlo_protos && fx->hlo_op);

	if (ops && fx->gpu_caps && flops)
		verdict("roofline", true, "op metrics on %u GPU planes with a device model%s", fx->gpu_caps,
			fx->gpu_peaks ? " and peak_teraflops_per_second" : "");
	else if (ops && fx->gpu_caps)
		verdict("roofline", false, "no FLOP counts (profd has no cost model): every op has 0 FLOPs, so "
			"the chart has no points; FLOPs come from XLA's HLO protos (hlo_op) or a flops stat "
			"on the op's events");
	else if (!ops)
		verdict("roofline", false, "no op metrics (see framework_op_stats)");
	else
		verdict("roofline", false, "no GPU plane has the device model stats (device_vendor, "
			"compute_cap_major, clock_rate, core_count, memory_bandwidth)");
	/* xprof/convert/xplane_to_tool_names.cc leaves pod_viewer out. */
	verdict("pod_viewer", false, "not offered by XProf for these captures (xplane_to_tool_names.cc)");
}

int doctor_xspace_file(const char *path)
{
	struct xs_space_iter it = XS_SPACE_ITER_INIT;
	struct facts fx = {0};
	struct xs_file *f = NULL;
	struct xs_plane pl;
	int r = xs_file_open(path, &f);

	if (r < 0) {
		fprintf(stderr, "profctl doctor: %s: %s\n", path, strerror(-r));
		return PROFCTL_EXIT_FAIL;
	}
	while ((r = xs_next_plane(f, &it, &pl)) > 0) {
		r = walk_plane(&pl, &fx);
		xs_plane_release(&pl);
		if (r < 0)
			break;
	}
	xs_file_close(f);
	if (r < 0) {
		fprintf(stderr, "profctl doctor: %s: not a readable XSpace (%s)\n", path, strerror(-r));
		return PROFCTL_EXIT_FAIL;
	}
	printf("XProf tools with content in %s:\n", path);
	report(&fx);
	return PROFCTL_EXIT_OK;
}
