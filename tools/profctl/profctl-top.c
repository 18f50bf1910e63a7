/* SPDX-License-Identifier: MIT */
/*
 * profctl-top.c - `profctl top`: a terminal summary of an XSpace file.
 *
 * DESIGN
 * ------
 * Streaming over the mmapped file (xspace-reader.h), in three walks:
 *   1. the Task Environment plane gives the capture window;
 *   2. host planes (/host:*): per-process event counts and times, where the
 *      process is the part of the line name before the first '/' (profd
 *      names host lines "<process> (<pid>)/<thread>"; CUPTI's
 *      "Host Threads/<tid>" groups as "Host Threads"), and a
 *      correlation_id -> process map;
 *   3. GPU planes (/device:GPU:*): kernels are events carrying
 *      kernel_details (on the event or its metadata, as XProf reads them),
 *      aggregated by name; copies are events carrying memcpy_details;
 *      busy % is the union of a GPU's kernel intervals over the window.
 * Counter lines ("_counters_") of host and GPU planes are summarized per
 * (plane, counter): points, min, mean, max, last. XSpace.errors and
 * .warnings are listed in full: they are where a capture says why a part
 * (GPU data, a collector) is missing.
 * Memory: one 16-byte interval per kernel of the GPU being walked, and the
 * correlation map (16 bytes per host launch); names stay views into the map
 * (the tables by name, base/strtab.h, keep a copy of each kernel and
 * process name to look them up by).
 *
 * Several FILEs (one per host of a multi-host capture, or several sessions)
 * are summarized one after the other, each on its own; --json then prints
 * one array with an object per file.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/parse.h"
#include "profctl.h"
#include "profctl-top.h"
#include "xspace-reader.h"
#include "xspace/names.h"

/* ---- output ----------------------------------------------------------------- */

enum sort_key { SORT_TOTAL, SORT_COUNT, SORT_MEAN, SORT_MAX };
static enum sort_key sort_by;

static int kernel_cmp(const void *a, const void *b)
{
	const struct kernel *x = a, *y = b;
	double vx, vy;

	switch (sort_by) {
	case SORT_COUNT: vx = (double)x->count; vy = (double)y->count; break;
	case SORT_MEAN: vx = (double)x->total_ps / (double)x->count; vy = (double)y->total_ps / (double)y->count; break;
	case SORT_MAX: vx = (double)x->max_ps; vy = (double)y->max_ps; break;
	default: vx = (double)x->total_ps; vy = (double)y->total_ps; break;
	}
	if (vx != vy)
		return vx > vy ? -1 : 1;
	if (x->name.len != y->name.len)
		return x->name.len < y->name.len ? -1 : 1;
	return memcmp(x->name.p, y->name.p, x->name.len);
}

static int proc_cmp(const void *a, const void *b)
{
	const struct proc *x = a, *y = b;

	if (x->kernel_ps != y->kernel_ps)
		return x->kernel_ps > y->kernel_ps ? -1 : 1;
	return x->host_ps > y->host_ps ? -1 : x->host_ps < y->host_ps;
}

static int site_cmp(const void *a, const void *b)
{
	const struct site *x = a, *y = b;

	if (x->ps != y->ps)
		return x->ps > y->ps ? -1 : 1;
	if (x->name.len != y->name.len)
		return x->name.len < y->name.len ? -1 : 1;
	return memcmp(x->name.p, y->name.p, x->name.len);
}

/* All sites' GPU time: the denominator of their shares. */
static double sites_ps(const struct top *t)
{
	double sum = 0;

	for (size_t i = 0; i < t->ns; i++)
		sum += (double)t->s[i].ps;
	return sum;
}

static const char *const dir_names[] = {"H2D", "D2H", "D2D", "P2P", "other"};

static double window_ps(const struct top *t)
{
	if (t->window_ps > 0)
		return (double)t->window_ps;
	if (t->span_hi > t->span_lo)
		return (double)(t->span_hi - t->span_lo);
	return 0;
}

static void json_str(struct ow *w, const char *p, size_t n)
{
	ow_putc(w, '"');
	json_escape(w, p, n);
	ow_putc(w, '"');
}

static void print_json(struct ow *w, const struct top *t, size_t limit, const char *file)
{
	double win = window_ps(t);

	ow_puts(w, "{\"file\":");
	json_str(w, file, strlen(file));
	ow_puts(w, ",\"host\":");
	json_str(w, t->host, strlen(t->host));
	for (int k = 0; k < 2; k++) {
		ow_puts(w, k ? "],\"warnings\":[" : ",\"errors\":[");
		for (size_t i = 0; i < t->nnotes[k]; i++) {
			if (i)
				ow_putc(w, ',');
			json_str(w, t->notes[k][i].p, t->notes[k][i].len);
		}
	}
	ow_puts(w, "],\"counters\":[");
	for (size_t i = 0; i < t->ncn; i++) {
		const struct counter *c = &t->cn[i];

		ow_puts(w, i ? ",{\"plane\":" : "{\"plane\":");
		json_str(w, c->plane.p, c->plane.len);
		ow_puts(w, ",\"name\":");
		json_str(w, c->name.p, c->name.len);
		ow_printf(w, ",\"points\":%" PRIu64 ",\"min\":", c->points);
		json_double(w, c->min);
		ow_puts(w, ",\"mean\":");
		json_double(w, c->sum / (double)c->points);
		ow_puts(w, ",\"max\":");
		json_double(w, c->max);
		ow_puts(w, ",\"last\":");
		json_double(w, c->last);
		ow_putc(w, '}');
	}
	ow_putc(w, ']');
	ow_puts(w, ",\"window_ns\":");
	json_double(w, win / 1000);
	ow_printf(w, ",\"window_source\":\"%s\",\"kernels\":[", t->window_from_env ? "task_environment" : "event_span");
	for (size_t i = 0; i < t->nk && i < limit; i++) {
		const struct kernel *k = &t->k[i];

		ow_puts(w, i ? ",{\"name\":" : "{\"name\":");
		json_str(w, k->name.p, k->name.len);
		ow_printf(w, ",\"count\":%" PRIu64 ",\"total_ns\":", k->count);
		json_double(w, (double)k->total_ps / 1000);
		ow_puts(w, ",\"mean_ns\":");
		json_double(w, (double)k->total_ps / 1000 / (double)k->count);
		ow_puts(w, ",\"min_ns\":");
		json_double(w, (double)k->min_ps / 1000);
		ow_puts(w, ",\"max_ns\":");
		json_double(w, (double)k->max_ps / 1000);
		ow_puts(w, ",\"occupancy_pct\":");
		if (k->occ_n)
			json_double(w, k->occ_sum / (double)k->occ_n);
		else
			ow_puts(w, "null");
		ow_puts(w, ",\"grid\":");
		if (k->grid_varies)
			ow_puts(w, "\"varies\"");
		else
			json_str(w, k->grid, strlen(k->grid));
		ow_puts(w, ",\"block\":");
		if (k->block_varies)
			ow_puts(w, "\"varies\"");
		else
			json_str(w, k->block, strlen(k->block));
		ow_putc(w, '}');
	}
	if (t->has_python) {
		double all = sites_ps(t);

		ow_puts(w, "],\"launch_sites\":[");
		for (size_t i = 0; i < t->ns && i < limit; i++) {
			const struct site *st = &t->s[i];

			ow_puts(w, i ? ",{\"site\":" : "{\"site\":");
			json_str(w, st->name.p, st->name.len);
			ow_puts(w, ",\"gpu_ns\":");
			json_double(w, (double)st->ps / 1000);
			ow_puts(w, ",\"share_pct\":");
			json_double(w, all > 0 ? 100.0 * (double)st->ps / all : 0);
			ow_printf(w, ",\"kernels\":%" PRIu64 "}", st->kernels);
		}
	}
	ow_puts(w, "],\"gpus\":[");
	for (size_t i = 0; i < t->ng; i++) {
		const struct gpu *g = &t->g[i];

		ow_puts(w, i ? ",{\"plane\":" : "{\"plane\":");
		json_str(w, g->name, strlen(g->name));
		ow_printf(w, ",\"kernels\":%" PRIu64 ",\"busy_ns\":", g->kernels);
		json_double(w, (double)g->busy_ps / 1000);
		ow_puts(w, ",\"busy_pct\":");
		json_double(w, win > 0 ? 100.0 * (double)g->busy_ps / win : 0);
		ow_putc(w, '}');
	}
	ow_puts(w, "],\"copies\":[");
	bool first = true;
	for (size_t i = 0; i < 5; i++) {
		const struct copy_dir *c = &t->copies[i];

		if (!c->count)
			continue;
		ow_printf(w, "%s{\"direction\":\"%s\",\"count\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"duration_ns\":",
			  first ? "" : ",", dir_names[i], c->count, c->bytes);
		json_double(w, (double)c->dur_ps / 1000);
		ow_puts(w, ",\"bandwidth_gbps\":");
		json_double(w, c->dur_ps > 0 ? (double)c->bytes / ((double)c->dur_ps / 1000) : 0);
		ow_putc(w, '}');
		first = false;
	}
	ow_puts(w, "],\"processes\":[");
	for (size_t i = 0; i < t->np; i++) {
		const struct proc *p = &t->p[i];

		ow_puts(w, i ? ",{\"name\":" : "{\"name\":");
		json_str(w, p->name.p, p->name.len);
		ow_printf(w, ",\"host_events\":%" PRIu64 ",\"host_ns\":", p->host_events);
		json_double(w, (double)p->host_ps / 1000);
		ow_printf(w, ",\"launches\":%" PRIu64 ",\"kernels\":%" PRIu64 ",\"kernel_ns\":", p->launches, p->kernels);
		json_double(w, (double)p->kernel_ps / 1000);
		ow_putc(w, '}');
	}
	ow_puts(w, "]}");
}

static void print_text(const struct top *t, size_t limit)
{
	double win = window_ps(t);
	uint64_t launches = 0;
	char a[32], b[32], c[32], d[32], e[32];

	for (size_t i = 0; i < t->nk; i++)
		launches += t->k[i].count;
	printf("host %s, window %s (%s)\n\n", t->host[0] ? t->host : "?", fmt_ps(win, a, sizeof(a)),
	       t->window_from_env ? XN_PLANE_TASK_ENV : "first to last device event");
	/* First: they say why a section below is empty (no GPU data, a collector off). */
	for (int k = 0; k < 2; k++) {
		if (!t->nnotes[k])
			continue;
		printf("%s (XSpace.%s):\n", k ? "Warnings" : "Errors", k ? "warnings" : "errors");
		for (size_t i = 0; i < t->nnotes[k]; i++)
			printf("  %.*s\n", (int)t->notes[k][i].len, t->notes[k][i].p);
		printf("\n");
	}
	printf("Top kernels by %s (%zu distinct, %" PRIu64 " launches):\n",
	       sort_by == SORT_COUNT ? "count" : sort_by == SORT_MEAN ? "mean time" : sort_by == SORT_MAX ? "max time" : "total time",
	       t->nk, launches);
	if (!t->nk) {
		printf("  (no kernels: no /device:GPU: events with kernel_details)\n");
	} else {
		printf("  %12s %7s %12s %12s %12s %6s %-14s %-14s %s\n", "total", "count", "mean", "min", "max", "occ%",
		       "grid", "block", "name");
		for (size_t i = 0; i < t->nk && i < limit; i++) {
			const struct kernel *k = &t->k[i];
			char occ[16];

			if (k->occ_n)
				snprintf(occ, sizeof(occ), "%.1f", k->occ_sum / (double)k->occ_n);
			else
				snprintf(occ, sizeof(occ), "-");
			printf("  %12s %7" PRIu64 " %12s %12s %12s %6s %-14s %-14s %.*s\n",
			       fmt_ps((double)k->total_ps, a, sizeof(a)), k->count,
			       fmt_ps((double)k->total_ps / (double)k->count, b, sizeof(b)),
			       fmt_ps((double)k->min_ps, c, sizeof(c)), fmt_ps((double)k->max_ps, d, sizeof(d)), occ,
			       k->grid_varies ? "varies" : k->grid, k->block_varies ? "varies" : k->block,
			       (int)k->name.len, k->name.p);
		}
		if (t->nk > limit)
			printf("  ... %zu more (use -n)\n", t->nk - limit);
	}
	if (t->has_python) {
		double all = sites_ps(t);

		printf("\nTop launch sites by GPU time (python_frame of the kernels; %zu sites):\n", t->ns);
		printf("  %12s %7s %9s  %s\n", "GPU time", "share", "kernels", "site");
		for (size_t i = 0; i < t->ns && i < limit; i++) {
			const struct site *st = &t->s[i];

			printf("  %12s %6.2f%% %9" PRIu64 "  %.*s\n", fmt_ps((double)st->ps, a, sizeof(a)),
			       all > 0 ? 100.0 * (double)st->ps / all : 0.0, st->kernels, (int)st->name.len, st->name.p);
		}
		if (t->ns > limit)
			printf("  ... %zu more (use -n)\n", t->ns - limit);
	}
	printf("\nGPU busy (union of kernel intervals / window):\n");
	if (!t->ng)
		printf("  (no /device:GPU: planes)\n");
	for (size_t i = 0; i < t->ng; i++) {
		const struct gpu *g = &t->g[i];

		printf("  %-18s %6.2f%%  %s busy, %" PRIu64 " kernels\n", g->name,
		       win > 0 ? 100.0 * (double)g->busy_ps / win : 0.0, fmt_ps((double)g->busy_ps, a, sizeof(a)),
		       g->kernels);
	}
	printf("\nCopies (memcpy_details):\n");
	bool any = false;
	for (size_t i = 0; i < 5; i++) {
		const struct copy_dir *cd = &t->copies[i];

		if (!cd->count)
			continue;
		any = true;
		printf("  %-5s %7" PRIu64 " copies %12s in %12s  %8.2f GB/s\n", dir_names[i], cd->count,
		       fmt_bytes(cd->bytes, a, sizeof(a)), fmt_ps((double)cd->dur_ps, b, sizeof(b)),
		       cd->dur_ps > 0 ? (double)cd->bytes / ((double)cd->dur_ps / 1000) : 0.0);
	}
	if (!any)
		printf("  (none)\n");
	printf("\nProcesses (host lines; GPU time joined by correlation_id):\n");
	if (!t->np)
		printf("  (no /host: lines)\n");
	else
		printf("  %-28s %10s %12s %9s %9s %12s\n", "process", "events", "host time", "launches", "kernels",
		       "GPU time");
	for (size_t i = 0; i < t->np; i++) {
		const struct proc *p = &t->p[i];

		printf("  %-28.*s %10" PRIu64 " %12s %9" PRIu64 " %9" PRIu64 " %12s\n", (int)p->name.len, p->name.p,
		       p->host_events, fmt_ps((double)p->host_ps, a, sizeof(a)), p->launches, p->kernels,
		       fmt_ps((double)p->kernel_ps, e, sizeof(e)));
	}
	printf("\nCounters (\"_counters_\" lines: points, min, mean, max, last):\n");
	if (!t->ncn)
		printf("  (none)\n");
	for (size_t i = 0; i < t->ncn; i++) {
		const struct counter *cn = &t->cn[i];

		printf("  %-12.*s %-32.*s %7" PRIu64 " %12.6g %12.6g %12.6g %12.6g\n", (int)cn->plane.len, cn->plane.p,
		       (int)cn->name.len, cn->name.p, cn->points, cn->min, cn->sum / (double)cn->points, cn->max,
		       cn->last);
	}
}

static void help(FILE *f)
{
	fprintf(f,
		"Usage: profctl top FILE.xplane.pb... [-n N] [--sort total|count|mean|max]\n"
		"                   [--json]\n"
		"\n"
		"Summarize a captured XSpace in the terminal:\n"
		"  - top kernels (GPU events with kernel_details): count, total, mean, min and\n"
		"    max time, mean occupancy (occ_pct), grid and block (\"varies\" if they do);\n"
		"  - when the kernels carry Python launch stacks (python_frame), the top\n"
		"    launch sites: the Python line each kernel was launched from, with its\n"
		"    GPU time, share of all kernels' time and kernel count;\n"
		"  - per-GPU busy %%: the union of its kernel intervals over the capture window\n"
		"    (profile_start_time..profile_stop_time from the Task Environment plane, or\n"
		"    first to last device event when it is missing);\n"
		"  - copy volume and bandwidth per direction (H2D, D2H, D2D, P2P) from\n"
		"    memcpy events (memcpy_details size:);\n"
		"  - per process: host events and time, launches, and the GPU kernel time of\n"
		"    its launches (joined by correlation_id). The process is the part of a\n"
		"    host line's name before the first '/';\n"
		"  - counters (\"_counters_\" lines of host and GPU planes): points, min,\n"
		"    mean, max and last value;\n"
		"  - every XSpace error and warning (why GPU data or a collector is missing).\n"
		"\n"
		"Several FILEs (e.g. a multi-host capture's DIR/*.xplane.pb) are summarized\n"
		"one after the other; with --json, as one array of objects.\n"
		"\n"
		"Options:\n"
		"  -n, --limit N       kernels and launch sites to list (default 20; 0 = all)\n"
		"  -s, --sort KEY      total (default), count, mean or max\n"
		"      --json          one JSON object per file (times in ns) for scripts;\n"
		"                      an array of them when several FILEs are given\n"
		"  -h, --help          this text\n"
		"\n"
		"Exit status: 0 ok; 1 a file could not be read (the others are still\n"
		"summarized); 2 bad usage.\n");
}

/*
 * Summarize one file: to @w as JSON, else as text (with a header line when
 * @several). 0, or 1 after printing why the file could not be read.
 */
static int top_one(const char *path, struct ow *w, size_t limit, bool several, size_t *n_json)
{
	struct top t = {0};
	struct xs_file *f = NULL;
	int r, rc = 0;

	r = xs_file_open(path, &f);
	if (r < 0)
		return -profctl_err(PROFCTL_EXIT_FAIL, "cannot read %s: %s", path, strerror(-r));
	if ((r = top_walk(f, &t)) < 0) {
		rc = -profctl_err(PROFCTL_EXIT_FAIL, "%s: %s", path,
				  r == -EBADMSG ? "not a valid XSpace (malformed protobuf)" : strerror(-r));
		goto out;
	}
	if (t.nk)
		qsort(t.k, t.nk, sizeof(*t.k), kernel_cmp);
	if (t.np)
		qsort(t.p, t.np, sizeof(*t.p), proc_cmp);
	if (t.ns)
		qsort(t.s, t.ns, sizeof(*t.s), site_cmp);
	if (w) {
		if ((*n_json)++)
			ow_putc(w, ',');
		print_json(w, &t, limit, path);
	} else {
		if (several)
			printf("==> %s <==\n", path);
		print_text(&t, limit);
		if (several)
			printf("\n");
	}
out:
	top_free(&t);
	xs_file_close(f);
	return rc;
}

int cmd_top(int argc, char **argv)
{
	enum { OPT_JSON = 0x100 };
	static const struct option opts[] = {
		{"limit", required_argument, NULL, 'n'},
		{"sort", required_argument, NULL, 's'},
		{"json", no_argument, NULL, OPT_JSON},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	struct ow w;
	size_t n_json = 0;
	uint32_t limit = 20;
	bool json = false;
	int c, r, rc = PROFCTL_EXIT_OK;

	optind = 1;
	sort_by = SORT_TOTAL;
	while ((c = getopt_long(argc, argv, "hn:s:", opts, NULL)) >= 0) {
		switch (c) {
		case 'h':
			help(stdout);
			return PROFCTL_EXIT_OK;
		case 'n':
			if (safe_atou32(optarg, &limit) < 0)
				return profctl_usage_err("top", "-n \"%s\": expected a number", optarg);
			break;
		case 's':
			if (!strcmp(optarg, "total"))
				sort_by = SORT_TOTAL;
			else if (!strcmp(optarg, "count"))
				sort_by = SORT_COUNT;
			else if (!strcmp(optarg, "mean"))
				sort_by = SORT_MEAN;
			else if (!strcmp(optarg, "max"))
				sort_by = SORT_MAX;
			else
				return profctl_usage_err("top", "--sort \"%s\": expected total, count, mean or max", optarg);
			break;
		case OPT_JSON:
			json = true;
			break;
		default:
			return profctl_usage_err("top", "bad option");
		}
	}
	if (optind >= argc)
		return profctl_usage_err("top", "expected at least one FILE");
	if (json && (r = ow_open(&w, "-", false)) < 0)
		return profctl_err(PROFCTL_EXIT_FAIL, "%s", strerror(-r));
	if (json && argc - optind > 1)
		ow_putc(&w, '[');
	for (int i = optind; i < argc; i++) {
		if (top_one(argv[i], json ? &w : NULL, limit ? limit : SIZE_MAX, argc - optind > 1, &n_json) < 0)
			rc = PROFCTL_EXIT_FAIL;
	}
	if (json) {
		ow_puts(&w, argc - optind > 1 ? "]\n" : "\n");
		if ((r = ow_commit(&w)) < 0)
			rc = profctl_err(PROFCTL_EXIT_FAIL, "writing stdout: %s", strerror(-r));
	}
	return rc;
}
