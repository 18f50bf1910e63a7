/* SPDX-License-Identifier: MIT */
/*
 * profctl-flame.c - `profctl flame`: GPU time (or Python CPU time) by
 * Python stack, as an interactive SVG flame graph or folded stacks.
 *
 * DESIGN
 * ------
 * The XSpace already says everything (xspace/names.h, "Python stacks"):
 * every kernel, copy and memset on a /device:GPU:* plane carries the
 * launching thread's stack as python_stack ("outer;...;leaf", leaf-style
 * frames) and its leaf as python_frame. So the GPU graph is one streaming
 * walk: each such event adds its duration to the node stack + kernel name
 * of one merged tree (profctl-flame-tree.c). Events without a stack go
 * under "[no Python stack]", or under python_frame's own word for why
 * ("(thread without Python)", "(Python stack unavailable)").
 *
 * --cpu weighs the frame spans instead: events named "$file:line func"
 * with python_file on a /host: thread line nest like the calls they
 * stand for, so a per-line sweep (sorted by start, longest first) gives
 * each span its parents and its self time (its duration less its
 * children's).
 *
 * Filters: --device keeps GPU planes by ordinal; --pid keeps host lines
 * whose name holds "(pid N)" (or "(N)") and, for the GPU graph, the device
 * events whose correlation_id one of those lines launched (a first walk
 * over the host planes collects them). Every pass is each_plane() over
 * one kind of plane, one plane resident at a time.
 *
 * Memory is bounded whatever the file holds: the tree by FLAME_NODES_MAX
 * nodes and FLAME_DEPTH_MAX frames per stack, names by FLAME_NAME_MAX
 * bytes; --cpu holds one line's spans (80 bytes each, with the sweep's
 * stack) at a time; --pid holds 8 bytes per host launch of the chosen
 * processes. The span buffer and the id set are the walk's (struct walk),
 * freed by cmd_flame().
 */
#define _GNU_SOURCE /* asprintf */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/hash.h"
#include "base/parse.h"
#include "profctl-flame.h"
#include "profctl.h"
#include "xspace-reader.h"
#include "xspace/names.h"

#define FILTER_MAX 64 /* values per --pid / --device */

struct flame_opts {
	bool cpu, folded;
	uint32_t pids[FILTER_MAX], devs[FILTER_MAX];
	size_t npids, ndevs;
};

/* A stack string already turned into a node: kernels launched from one
 * line repeat the same stack many times (ref_value or not). Keys are views
 * into the file being walked; reset per file. */
struct stack_memo {
	const char *p;
	size_t len;
	uint32_t node;
};
#define STACK_MEMO 4096 /* a power of two */

struct span;

struct walk {
	struct flame *fl;
	const struct flame_opts *o;
	struct stack_memo *memo;
	struct u64vec corr; /* --pid: the correlation ids of the chosen processes, sorted */
	struct span *sp;    /* --cpu: one line's frame spans */
	size_t capsp;
};

/* Call @fn on each plane of @f whose name starts with @prefix, indexed,
 * then release it and drop its pages: one plane resident at a time. */
static int each_plane(struct xs_file *f, const char *prefix, int (*fn)(struct walk *wk, const struct xs_plane *pl),
		      struct walk *wk)
{
	struct xs_space_iter si = XS_SPACE_ITER_INIT;
	struct xs_plane pl;
	int r;

	while ((r = xs_next_plane(f, &si, &pl)) > 0) {
		if (!xs_str_has_prefix(pl.name, prefix))
			continue;
		if ((r = xs_plane_index(&pl)) >= 0)
			r = fn(wk, &pl);
		xs_plane_release(&pl);
		xs_file_drop(f, pl.raw.p, (size_t)(pl.raw.end - pl.raw.p));
		if (r < 0)
			return r;
	}
	return r;
}

static bool in_list(const uint32_t *v, size_t n, uint32_t x)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] == x)
			return true;
	return false;
}

/* The pid in a host line name "<process> (pid N)/<thread>" or
 * "<process> (N)/<thread>", looked for before the first '/'. */
static bool line_pid(struct xs_str name, uint32_t *pid)
{
	const char *sl = memchr(name.p, '/', name.len);
	size_t n = sl ? (size_t)(sl - name.p) : name.len;
	char buf[24];
	size_t i, k = 0;

	while (n && name.p[n - 1] == ' ')
		n--;
	if (!n || name.p[n - 1] != ')')
		return false;
	for (i = n - 1; i > 0 && name.p[i - 1] != '('; i--)
		;
	if (!i)
		return false;
	if (n - 1 - i > 4 && memcmp(name.p + i, "pid ", 4) == 0)
		i += 4;
	for (; i < n - 1 && k < sizeof(buf) - 1; i++)
		buf[k++] = name.p[i];
	buf[k] = 0;
	return k && safe_atou32(buf, pid) >= 0;
}

static bool line_wanted(const struct flame_opts *o, const struct xs_line *ln)
{
	uint32_t pid;

	if (xs_str_eq(ln->name, XN_LINE_COUNTERS) || xs_line_is_derived(ln))
		return false;
	return !o->npids || (line_pid(ln->name, &pid) && in_list(o->pids, o->npids, pid));
}

static bool plane_wanted(const struct flame_opts *o, const struct xs_plane *pl)
{
	size_t pre = strlen(XN_PLANE_GPU_PREFIX);
	char buf[16];
	uint32_t ord;

	if (!xs_str_has_prefix(pl->name, XN_PLANE_GPU_PREFIX))
		return false;
	if (!o->ndevs)
		return true;
	if (pl->name.len - pre >= sizeof(buf))
		return false;
	memcpy(buf, pl->name.p + pre, pl->name.len - pre);
	buf[pl->name.len - pre] = 0;
	return safe_atou32(buf, &ord) >= 0 && in_list(o->devs, o->ndevs, ord);
}

/* --pid for the GPU graph: the correlation ids the chosen processes' host
 * lines carry (each_plane() over the host planes, then sorted). */
static int corr_plane(struct walk *wk, const struct xs_plane *pl)
{
	int64_t corr = xs_plane_stat_id(pl, XN_STAT_CORRELATION_ID);
	struct xs_line_iter li = xs_plane_lines(pl);
	struct xs_line ln;
	int r = 0;

	while (corr >= 0 && r >= 0 && (r = xs_next_line(&li, &ln)) > 0) {
		struct pb_cursor ei = xs_line_events(&ln);
		struct xs_event ev;

		if (!line_wanted(wk->o, &ln))
			continue;
		while (r >= 0 && (r = xs_next_event(&ei, &ev)) > 0) {
			struct pb_cursor it = ev.raw;
			struct xs_stat st;
			uint64_t c;

			while (xs_event_next_stat(&it, &st) > 0) {
				if (st.metadata_id != corr || !xs_stat_u64(&st, &c))
					continue;
				r = u64vec_push(&wk->corr, c); /* one id per event */
				break;
			}
		}
	}
	return r;
}

/* ---- the GPU graph ---------------------------------------------------------- */

/* Stat ids of one plane (-1: the plane has no such stat). */
struct gpu_ids {
	int64_t kernel, memcpy, memset, stack, frame, corr;
};

/* What a device event says about itself. */
struct gpu_event {
	bool op; /* a kernel, copy or memset */
	bool has_corr;
	uint64_t corr;
	struct xs_str stack, frame;
};

/* Fold the stats at @it (an event's, or its metadata's when @meta) into
 * @ge; the event's own come first, so the metadata never overrides them. */
static int scan_gpu_stats(const struct xs_plane *pl, struct pb_cursor it, bool meta, const struct gpu_ids *id,
			  struct gpu_event *ge)
{
	struct xs_stat st;
	int r;

	while ((r = meta ? xs_meta_next_stat(&it, &st) : xs_event_next_stat(&it, &st)) > 0) {
		int64_t m = st.metadata_id;

		if (m < 0)
			continue; /* a hostile id must not match a stat the plane lacks (-1) */
		if (m == id->kernel || m == id->memcpy || m == id->memset)
			ge->op = true;
		else if (m == id->stack && !ge->stack.len)
			xs_stat_str(pl, &st, &ge->stack);
		else if (m == id->frame && !ge->frame.len)
			xs_stat_str(pl, &st, &ge->frame);
		else if (m == id->corr && !ge->has_corr)
			ge->has_corr = xs_stat_u64(&st, &ge->corr);
	}
	return r;
}

static enum flame_kind frame_kind(const char *s, size_t len)
{
	struct xs_str v = {s, len};

	return xs_str_eq(v, XN_PYTHON_NO_PYTHON) || xs_str_eq(v, XN_PYTHON_DROPPED) ? FK_NOSTACK : FK_FRAME;
}

/* The node of stack @s (outermost first, XN_PYTHON_STACK_SEP between
 * frames; empty frames skipped); past FLAME_DEPTH_MAX frames the outermost
 * are replaced by one XN_PYTHON_STACK_TRUNCATED. Sets *@clipped when a bound of the
 * tree stopped it short. */
static int64_t stack_node(struct flame *fl, struct xs_str s, bool *clipped)
{
	const char *p = s.p, *end = s.p + s.len;
	size_t frames = 0, skip = 0;
	int64_t node = 0;

	for (const char *q = p; q < end;) {
		const char *e = memchr(q, XN_PYTHON_STACK_SEP[0], (size_t)(end - q));

		e = e ? e : end;
		frames += e > q;
		q = e + 1;
	}
	if (frames > FLAME_DEPTH_MAX) {
		skip = frames - FLAME_DEPTH_MAX;
		node = flame_child(fl, 0, XN_PYTHON_STACK_TRUNCATED, strlen(XN_PYTHON_STACK_TRUNCATED), FK_FRAME);
		if (node <= 0) {
			*clipped = node == 0;
			return node;
		}
	}
	while (p < end) {
		const char *e = memchr(p, XN_PYTHON_STACK_SEP[0], (size_t)(end - p));
		int64_t c;

		e = e ? e : end;
		if (e > p && skip) {
			skip--;
		} else if (e > p) {
			c = flame_child(fl, (uint32_t)node, p, (size_t)(e - p), frame_kind(p, (size_t)(e - p)));
			if (c < 0)
				return c;
			if (c == node) {
				*clipped = true;
				return node;
			}
			node = c;
		}
		p = e + 1;
	}
	return node;
}

/* The node an event's stack ends at: python_stack, else python_frame alone,
 * else FLAME_NO_STACK. */
static int64_t event_stack(struct walk *wk, const struct gpu_event *ge, bool *clipped)
{
	struct flame *fl = wk->fl;

	if (ge->stack.len) {
		uint64_t h = hash_bytes64(ge->stack.p, ge->stack.len);
		struct stack_memo *m = &wk->memo[h & (STACK_MEMO - 1)];
		int64_t node;

		if (m->p && m->len == ge->stack.len && (m->p == ge->stack.p || !memcmp(m->p, ge->stack.p, m->len)))
			return m->node;
		node = stack_node(fl, ge->stack, clipped);
		if (node > 0 && !*clipped)
			*m = (struct stack_memo){ge->stack.p, ge->stack.len, (uint32_t)node};
		return node;
	}
	if (ge->frame.len)
		return flame_child(fl, 0, ge->frame.p, ge->frame.len, frame_kind(ge->frame.p, ge->frame.len));
	return flame_child(fl, 0, FLAME_NO_STACK, strlen(FLAME_NO_STACK), FK_NOSTACK);
}

static int walk_gpu_line(struct walk *wk, const struct xs_plane *pl, const struct xs_line *ln,
			 const struct gpu_ids *id)
{
	struct pb_cursor ei = xs_line_events(ln);
	struct xs_event ev;
	int r;

	while ((r = xs_next_event(&ei, &ev)) > 0) {
		const struct xs_meta *m = xs_plane_event_meta(pl, ev.metadata_id);
		struct xs_str name = m && m->name.len ? m->name : (struct xs_str){XN_EVENT_UNKNOWN_KERNEL,
										   strlen(XN_EVENT_UNKNOWN_KERNEL)};
		struct gpu_event ge = {0};
		bool clipped = false;
		int64_t node, leaf;

		if ((r = scan_gpu_stats(pl, ev.raw, false, id, &ge)) < 0 ||
		    (m && m->has_stats && (r = scan_gpu_stats(pl, m->stats, true, id, &ge)) < 0))
			return r;
		if (!ge.op || (wk->o->npids && !(ge.has_corr && u64vec_has(&wk->corr, ge.corr))))
			continue;
		node = event_stack(wk, &ge, &clipped);
		if (node < 0)
			return (int)node;
		leaf = flame_child(wk->fl, (uint32_t)node, name.p, name.len, FK_LEAF);
		if (leaf < 0)
			return (int)leaf;
		wk->fl->clipped += clipped || leaf == node;
		wk->fl->events++;
		flame_add(wk->fl, (uint32_t)leaf, ev.duration_ps > 0 ? (uint64_t)ev.duration_ps : 0);
	}
	return r;
}

static int gpu_plane(struct walk *wk, const struct xs_plane *pl)
{
	struct gpu_ids id = {
		.kernel = xs_plane_stat_id(pl, XN_STAT_KERNEL_DETAILS),
		.memcpy = xs_plane_stat_id(pl, XN_STAT_MEMCPY_DETAILS),
		.memset = xs_plane_stat_id(pl, XN_STAT_MEMSET_DETAILS),
		.stack = xs_plane_stat_id(pl, XN_STAT_PYTHON_STACK),
		.frame = xs_plane_stat_id(pl, XN_STAT_PYTHON_FRAME),
		.corr = xs_plane_stat_id(pl, XN_STAT_CORRELATION_ID),
	};
	struct xs_line_iter li = xs_plane_lines(pl);
	struct xs_line ln;
	int r;

	if (!plane_wanted(wk->o, pl))
		return 0;
	while ((r = xs_next_line(&li, &ln)) > 0) {
		if (xs_str_eq(ln.name, XN_LINE_COUNTERS) || xs_line_is_derived(&ln))
			continue;
		if ((r = walk_gpu_line(wk, pl, &ln, &id)) < 0)
			break;
	}
	return r;
}

/* ---- the CPU graph (--cpu) -------------------------------------------------- */

struct span {
	ps128 start, end;
	const char *name; /* without the '$' */
	uint32_t len;
};

static int span_cmp(const void *a, const void *b)
{
	const struct span *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	if (x->end != y->end)
		return x->end > y->end ? -1 : 1; /* the enclosing one first */
	if (x->len != y->len)
		return x->len < y->len ? -1 : 1;
	return memcmp(x->name, y->name, x->len);
}

/* An open span of the sweep: its node and its self time so far. */
struct open_span {
	ps128 end;
	uint32_t node;
	uint64_t self_ps;
};

static uint64_t ps_len(ps128 a, ps128 b)
{
	ps128 d = b - a;

	return d <= 0 ? 0 : d > (ps128)UINT64_MAX ? UINT64_MAX : (uint64_t)d;
}

/* Nest one line's spans (sorted) and add each one's self time. A span that
 * starts inside another but ends after it (a hostile file: the writer
 * nests them) is cut at its parent's end. */
static int sweep_spans(struct flame *fl, struct span *sp, size_t n)
{
	struct open_span *st = malloc((n + 1) * sizeof(*st));
	size_t depth = 0;

	if (!st)
		return -ENOMEM;
	st[0] = (struct open_span){.end = 0, .node = 0};
	for (size_t i = 0; i <= n; i++) {
		/* Close what ends before this span starts (everything at the end). */
		while (depth && (i == n || st[depth].end <= sp[i].start)) {
			flame_add(fl, st[depth].node, st[depth].self_ps);
			depth--;
		}
		if (i == n)
			break;
		ps128 end = depth && sp[i].end > st[depth].end ? st[depth].end : sp[i].end;
		uint64_t dur = ps_len(sp[i].start, end);
		int64_t node = flame_child(fl, st[depth].node, sp[i].name, sp[i].len, FK_FRAME);

		if (node < 0) {
			free(st);
			return (int)node;
		}
		if (depth) {
			uint64_t p = st[depth].self_ps;

			st[depth].self_ps = p > dur ? p - dur : 0;
		}
		fl->clipped += node == st[depth].node;
		fl->events++;
		st[++depth] = (struct open_span){.end = end, .node = (uint32_t)node, .self_ps = dur};
	}
	free(st);
	return 0;
}

static int cpu_plane(struct walk *wk, const struct xs_plane *pl)
{
	struct xs_line_iter li = xs_plane_lines(pl);
	struct xs_line ln;
	int r = 0;

	if (xs_plane_stat_id(pl, XN_STAT_PYTHON_FILE) < 0)
		return 0; /* no frame spans here */
	while ((r = xs_next_line(&li, &ln)) > 0) {
		struct pb_cursor ei = xs_line_events(&ln);
		struct xs_event ev;
		size_t n = 0;

		if (!line_wanted(wk->o, &ln))
			continue;
		while ((r = xs_next_event(&ei, &ev)) > 0) {
			const struct xs_meta *m = xs_plane_event_meta(pl, ev.metadata_id);
			struct xs_stat st;

			if (!m || m->name.len < 2 || m->name.p[0] != '$')
				continue; /* not "$<frame>": a bare "$" names nothing */
			if ((r = xs_event_find_stat(pl, &ev, m, XN_STAT_PYTHON_FILE, &st)) < 0)
				return r;
			if (!r)
				continue;
			if (n == wk->capsp) {
				size_t nc = wk->capsp ? wk->capsp * 2 : 1024;
				struct span *p = realloc(wk->sp, nc * sizeof(*p));

				if (!p)
					return -ENOMEM;
				wk->sp = p;
				wk->capsp = nc;
			}
			wk->sp[n++] = (struct span){
				.start = ev.offset_ps,
				.end = (ps128)ev.offset_ps + (ev.duration_ps > 0 ? ev.duration_ps : 0),
				.name = m->name.p + 1,
				.len = (uint32_t)(m->name.len - 1 < UINT32_MAX ? m->name.len - 1 : UINT32_MAX),
			};
		}
		if (r < 0)
			return r;
		qsort(wk->sp, n, sizeof(*wk->sp), span_cmp);
		if ((r = sweep_spans(wk->fl, wk->sp, n)) < 0)
			return r;
	}
	return r;
}

/* ---- files and the command -------------------------------------------------- */

static int flame_file(const char *path, struct walk *wk)
{
	struct xs_file *f = NULL;
	int r = xs_file_open(path, &f);

	if (r < 0)
		return profctl_err(-1, "cannot read %s: %s", path, strerror(-r));
	xs_file_advise_sequential(f);
	memset(wk->memo, 0, STACK_MEMO * sizeof(*wk->memo)); /* views into the previous file */
	wk->corr.n = 0;
	if (!wk->o->cpu && wk->o->npids && (r = each_plane(f, XN_PLANE_HOST_PREFIX, corr_plane, wk)) >= 0)
		u64vec_sort_unique(&wk->corr);
	if (r >= 0)
		r = wk->o->cpu ? each_plane(f, XN_PLANE_HOST_PREFIX, cpu_plane, wk)
			       : each_plane(f, XN_PLANE_GPU_PREFIX, gpu_plane, wk);
	xs_file_close(f);
	if (r == -EBADMSG)
		return profctl_err(-1, "%s: not a valid XSpace (malformed protobuf)", path);
	if (r < 0)
		return profctl_err(-1, "%s: %s", path, strerror(-r));
	return 0;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A directory stands for its *.xplane.pb files (one capture session of a
 * multi-host capture), in name order. */
static int flame_dir(const char *dir, struct walk *wk, int *n_ok)
{
	static const char suffix[] = ".xplane.pb";
	DIR *d = opendir(dir);
	struct dirent *de;
	char **names = NULL;
	size_t n = 0, cap = 0;
	int rc = 0;

	if (!d)
		return profctl_err(-1, "cannot read %s: %s", dir, strerror(errno));
	while ((de = readdir(d))) {
		size_t len = strlen(de->d_name);

		if (len <= sizeof(suffix) - 1 || strcmp(de->d_name + len - (sizeof(suffix) - 1), suffix) != 0)
			continue;
		if (n == cap) {
			size_t nc = cap ? cap * 2 : 16;
			char **p = realloc(names, nc * sizeof(*p));

			if (!p) {
				rc = profctl_err(-1, "%s", strerror(ENOMEM));
				break;
			}
			names = p;
			cap = nc;
		}
		if (asprintf(&names[n], "%s/%s", dir, de->d_name) < 0) {
			rc = profctl_err(-1, "%s", strerror(ENOMEM));
			break;
		}
		n++;
	}
	closedir(d);
	if (!rc && !n)
		rc = profctl_err(-1, "%s: no *.xplane.pb files in this directory", dir);
	if (n)
		qsort(names, n, sizeof(*names), name_cmp);
	for (size_t i = 0; i < n; i++) {
		if (!rc && flame_file(names[i], wk) < 0)
			rc = -1;
		else if (!rc)
			(*n_ok)++;
		free(names[i]);
	}
	free(names);
	return rc;
}

static void help(FILE *f)
{
	fprintf(f,
		"Usage: profctl flame FILE|DIR... -o OUT.svg [--folded] [--cpu]\n"
		"                     [--pid PID[,PID...]] [--device N[,N...]] [--title TEXT]\n"
		"\n"
		"A flame graph of GPU time by the Python stack that launched it: each\n"
		"kernel, copy and memset on a /device:GPU:* plane weighs its duration, under\n"
		"its python_stack (outermost frame at the bottom) with the kernel name on\n"
		"top. Events without a stack go under \"" FLAME_NO_STACK "\", or under what\n"
		"python_frame says instead (\"" XN_PYTHON_NO_PYTHON "\",\n"
		"\"" XN_PYTHON_DROPPED "\"). Several FILEs, or a DIR of *.xplane.pb\n"
		"(all hosts of a capture), merge into one graph.\n"
		"\n"
		"The SVG is self-contained and interactive in a browser: hover for a frame's\n"
		"time and share, click to zoom into it, \"Reset Zoom\" (or Escape) to go\n"
		"back, \"Search\" (or Ctrl-F) highlights the frames a regular expression\n"
		"matches and shows their share of the total.\n"
		"\n"
		"Options:\n"
		"  -o, --output FILE   where to write (required; - for stdout)\n"
		"      --folded        write folded stacks instead, one \"frame;...;leaf NS\"\n"
		"                      line per stack with weight in ns (speedscope,\n"
		"                      inferno, flamegraph.pl read it)\n"
		"      --cpu           weigh Python CPU time instead: the frame spans\n"
		"                      (\"$file:line func\" events with python_file on /host:\n"
		"                      thread lines, python_tracer_level >= 1) by self time\n"
		"      --pid LIST      only these processes (host lines named \"... (pid N)/...\";\n"
		"                      for GPU time, the device events their launches made)\n"
		"      --device LIST   only these GPU ordinals (/device:GPU:N)\n"
		"      --title TEXT    the SVG's title\n"
		"  -h, --help          this text\n"
		"\n"
		"Bounds, whatever the input: %u distinct nodes (more weight stays on the\n"
		"parent), %u frames per stack (the innermost; the rest become\n"
		"\"" XN_PYTHON_STACK_TRUNCATED "\"), names cut at %u bytes. Frames narrower than 0.1 pixel\n"
		"are left out of the SVG (not of --folded).\n"
		"\n"
		"Exit status: 0 ok; 1 a file could not be read (the graph of the others is\n"
		"still written) or the output could not be written; 2 bad usage.\n",
		FLAME_NODES_MAX, FLAME_DEPTH_MAX, FLAME_NAME_MAX);
}

/* "1,2,3" -> @v. 0, or -EINVAL. */
static int parse_list(const char *s, uint32_t *v, size_t *n)
{
	char buf[256], *save = NULL;

	if (strlen(s) >= sizeof(buf))
		return -EINVAL;
	snprintf(buf, sizeof(buf), "%s", s);
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (*n >= FILTER_MAX || safe_atou32(t, &v[*n]) < 0)
			return -EINVAL;
		(*n)++;
	}
	return *n ? 0 : -EINVAL;
}

int cmd_flame(int argc, char **argv)
{
	enum { OPT_FOLDED = 0x100, OPT_CPU, OPT_PID, OPT_DEVICE, OPT_TITLE };
	static const struct option opts[] = {
		{"output", required_argument, NULL, 'o'},
		{"folded", no_argument, NULL, OPT_FOLDED},
		{"cpu", no_argument, NULL, OPT_CPU},
		{"pid", required_argument, NULL, OPT_PID},
		{"device", required_argument, NULL, OPT_DEVICE},
		{"title", required_argument, NULL, OPT_TITLE},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	struct flame_opts o = {0};
	struct flame fl;
	struct walk wk = {.fl = &fl, .o = &o};
	const char *out = NULL, *title = NULL;
	char sub[160], a[32];
	int c, r, rc = PROFCTL_EXIT_OK, n_ok = 0;
	struct ow w;

	optind = 1;
	while ((c = getopt_long(argc, argv, "ho:", opts, NULL)) >= 0) {
		switch (c) {
		case 'h':
			help(stdout);
			return PROFCTL_EXIT_OK;
		case 'o': out = optarg; break;
		case OPT_FOLDED: o.folded = true; break;
		case OPT_CPU: o.cpu = true; break;
		case OPT_TITLE: title = optarg; break;
		case OPT_PID:
			if (parse_list(optarg, o.pids, &o.npids) < 0)
				return profctl_usage_err("flame", "--pid \"%s\": expected PID[,PID...] (at most %d)",
							 optarg, FILTER_MAX);
			break;
		case OPT_DEVICE:
			if (parse_list(optarg, o.devs, &o.ndevs) < 0)
				return profctl_usage_err("flame", "--device \"%s\": expected N[,N...] (at most %d)",
							 optarg, FILTER_MAX);
			break;
		default:
			return profctl_usage_err("flame", "bad option");
		}
	}
	if (optind >= argc)
		return profctl_usage_err("flame", "expected at least one FILE or DIR");
	if (!out)
		return profctl_usage_err("flame", "expected -o OUT (- for stdout)");
	if (o.cpu && o.ndevs)
		return profctl_usage_err("flame", "--device selects GPU planes; --cpu reads host lines");
	wk.memo = calloc(STACK_MEMO, sizeof(*wk.memo));
	if (!wk.memo || (r = flame_init(&fl, "all")) < 0) {
		free(wk.memo);
		return profctl_err(PROFCTL_EXIT_FAIL, "%s", strerror(ENOMEM));
	}
	for (int i = optind; i < argc; i++) {
		struct stat sb;

		if (stat(argv[i], &sb) == 0 && S_ISDIR(sb.st_mode))
			r = flame_dir(argv[i], &wk, &n_ok);
		else if ((r = flame_file(argv[i], &wk)) == 0)
			n_ok++;
		if (r < 0)
			rc = PROFCTL_EXIT_FAIL;
	}
	if (!n_ok) {
		rc = PROFCTL_EXIT_FAIL;
		goto out;
	}
	if ((r = flame_finish(&fl)) < 0) {
		rc = profctl_err(PROFCTL_EXIT_FAIL, "%s", strerror(-r));
		goto out;
	}
	if (fl.clipped)
		profctl_err(0, "%" PRIu64 " of %" PRIu64 " events hit a bound of the graph (%u nodes, %u frames, "
			    "%u-byte names); their weight stays on a shorter stack", fl.clipped, fl.events,
			    FLAME_NODES_MAX, FLAME_DEPTH_MAX, FLAME_NAME_MAX);
	if ((r = ow_open(&w, out, false)) < 0) {
		rc = profctl_err(PROFCTL_EXIT_FAIL, "cannot write %s: %s", out, strerror(-r));
		goto out;
	}
	if (o.folded) {
		flame_write_folded(&w, &fl);
	} else {
		snprintf(sub, sizeof(sub), "%s %s in %" PRIu64 " %s, %d file%s",
			 fmt_ps((double)fl.n[0].total_ps, a, sizeof(a)), o.cpu ? "Python self time" : "GPU time",
			 fl.events, o.cpu ? "frame spans" : "kernels, copies and memsets", n_ok, n_ok == 1 ? "" : "s");
		flame_write_svg(&w, &fl,
				title ? title : o.cpu ? "Python CPU time by stack" : "GPU time by Python launch stack",
				sub);
	}
	if ((r = ow_commit(&w)) < 0)
		rc = profctl_err(PROFCTL_EXIT_FAIL, "writing %s: %s", out, strerror(-r));
out:
	flame_free(&fl);
	free(wk.memo);
	free(wk.corr.v);
	free(wk.sp);
	return rc;
}
