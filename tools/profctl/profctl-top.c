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
 * correlation map (16 bytes per host launch); names stay views into the map.
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

#include "base/hash.h"
#include "base/parse.h"
#include "profctl.h"
#include "xspace-reader.h"
#include "xspace/names.h"

/* ---- small hash tables (base/hash.h) ------------------------------------ */

struct kernel {
	struct xs_str name;
	uint64_t count;
	ps128 total_ps, min_ps, max_ps;
	double occ_sum;
	uint64_t occ_n;
	char grid[48], block[48];
	bool grid_varies, block_varies;
};

struct proc {
	struct xs_str name;
	uint64_t host_events, launches, kernels;
	ps128 host_ps, kernel_ps;
};

struct copy_dir {
	const char *name;
	uint64_t count, bytes;
	ps128 dur_ps;
};

struct gpu {
	char name[64];
	uint64_t kernels;
	ps128 busy_ps;
	ps128 first_ps, last_ps;
};

struct counter {
	struct xs_str plane, name;
	uint64_t points;
	double min, max, sum, last;
};

struct corr_slot {
	uint64_t key; /* corr + 1; 0 = empty */
	uint32_t proc;
};

struct top {
	/* kernels by name: open addressing over indexes into @k */
	struct kernel *k;
	size_t nk, capk;
	uint32_t *kidx; /* slot -> index + 1 */
	size_t kslots;
	struct proc *p;
	size_t np, capp;
	struct corr_slot *corr;
	size_t ncorr, corr_slots;
	struct copy_dir copies[5];
	struct gpu *g;
	size_t ng, capg;
	int64_t window_ps;
	bool window_from_env;
	ps128 span_lo, span_hi; /* all device events, ps, fallback window */
	char host[256];
	struct counter *cn;
	size_t ncn, capcn;
	struct xs_str *notes[2]; /* [0] XSpace.errors, [1] .warnings (views) */
	size_t nnotes[2], capnotes[2];
};

static int grow(void **arr, size_t *cap, size_t n, size_t elem)
{
	if (n < *cap)
		return 0;
	size_t nc = *cap ? *cap * 2 : 16;
	void *p = realloc(*arr, nc * elem);

	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = nc;
	return 0;
}

static struct kernel *kernel_get(struct top *t, struct xs_str name)
{
	size_t i;

	if (t->nk * 2 >= t->kslots) {
		size_t ns = t->kslots ? t->kslots * 2 : 256;
		uint32_t *nidx = calloc(ns, sizeof(*nidx));

		if (!nidx)
			return NULL;
		for (size_t j = 0; j < t->nk; j++) {
			i = hash_bytes64(t->k[j].name.p, t->k[j].name.len) & (ns - 1);
			while (nidx[i])
				i = (i + 1) & (ns - 1);
			nidx[i] = (uint32_t)j + 1;
		}
		free(t->kidx);
		t->kidx = nidx;
		t->kslots = ns;
	}
	i = hash_bytes64(name.p, name.len) & (t->kslots - 1);
	while (t->kidx[i]) {
		struct kernel *k = &t->k[t->kidx[i] - 1];

		if (k->name.len == name.len && memcmp(k->name.p, name.p, name.len) == 0)
			return k;
		i = (i + 1) & (t->kslots - 1);
	}
	if (grow((void **)&t->k, &t->capk, t->nk, sizeof(*t->k)) < 0)
		return NULL;
	struct kernel *k = &t->k[t->nk];

	memset(k, 0, sizeof(*k));
	k->name = name;
	k->min_ps = INT64_MAX;
	t->kidx[i] = (uint32_t)++t->nk;
	return k;
}

static int corr_put(struct top *t, uint64_t corr, uint32_t proc)
{
	size_t i;

	if (t->ncorr * 2 >= t->corr_slots) {
		size_t ns = t->corr_slots ? t->corr_slots * 2 : 1024;
		struct corr_slot *n = calloc(ns, sizeof(*n));

		if (!n)
			return -ENOMEM;
		for (size_t j = 0; j < t->corr_slots; j++) {
			if (!t->corr[j].key)
				continue;
			i = hash_u64(t->corr[j].key) & (ns - 1);
			while (n[i].key)
				i = (i + 1) & (ns - 1);
			n[i] = t->corr[j];
		}
		free(t->corr);
		t->corr = n;
		t->corr_slots = ns;
	}
	i = hash_u64(corr + 1) & (t->corr_slots - 1);
	while (t->corr[i].key && t->corr[i].key != corr + 1)
		i = (i + 1) & (t->corr_slots - 1);
	if (!t->corr[i].key)
		t->ncorr++;
	t->corr[i].key = corr + 1;
	t->corr[i].proc = proc;
	return 0;
}

static int corr_get(const struct top *t, uint64_t corr)
{
	if (!t->corr_slots)
		return -1;
	size_t i = hash_u64(corr + 1) & (t->corr_slots - 1);

	while (t->corr[i].key) {
		if (t->corr[i].key == corr + 1)
			return (int)t->corr[i].proc;
		i = (i + 1) & (t->corr_slots - 1);
	}
	return -1;
}

static int proc_index(struct top *t, struct xs_str line_name)
{
	struct xs_str n = line_name;
	const char *sl = memchr(n.p, '/', n.len);

	if (sl)
		n.len = (size_t)(sl - n.p);
	if (!n.len)
		n = (struct xs_str){"(unnamed)", 9};
	for (size_t i = 0; i < t->np; i++)
		if (t->p[i].name.len == n.len && memcmp(t->p[i].name.p, n.p, n.len) == 0)
			return (int)i;
	if (grow((void **)&t->p, &t->capp, t->np, sizeof(*t->p)) < 0)
		return -ENOMEM;
	memset(&t->p[t->np], 0, sizeof(t->p[0]));
	t->p[t->np].name = n;
	return (int)t->np++;
}

/* ---- details parsing ------------------------------------------------------- */

/* Value of "key:" in a space-separated details string, as a view. */
static bool detail(struct xs_str s, const char *key, struct xs_str *out)
{
	size_t kl = strlen(key);
	const char *p = s.p, *end = s.p + s.len;

	while (p < end) {
		const char *tok = p, *te;

		while (p < end && *p != ' ' && *p != '\n')
			p++;
		te = p;
		while (p < end && (*p == ' ' || *p == '\n'))
			p++;
		if ((size_t)(te - tok) > kl && memcmp(tok, key, kl) == 0 && tok[kl] == ':') {
			out->p = tok + kl + 1;
			out->len = (size_t)(te - tok) - kl - 1;
			return true;
		}
	}
	return false;
}

static bool detail_double(struct xs_str s, const char *key, double *out)
{
	struct xs_str v;
	char tmp[64], *end;

	if (!detail(s, key, &v) || v.len == 0 || v.len >= sizeof(tmp))
		return false;
	memcpy(tmp, v.p, v.len);
	tmp[v.len] = 0;
	*out = strtod(tmp, &end);
	return *end == 0;
}

static void detail_copy(struct xs_str s, const char *key, char *out, size_t size, const char *dflt)
{
	struct xs_str v;

	if (detail(s, key, &v) && v.len < size) {
		memcpy(out, v.p, v.len);
		out[v.len] = 0;
	} else {
		snprintf(out, size, "%s", dflt);
	}
}

enum { CP_H2D, CP_D2H, CP_D2D, CP_P2P, CP_OTHER };

static int copy_direction(struct xs_str ev_name, struct xs_str details)
{
	struct xs_str src = {0}, dst = {0};

	if (xs_str_eq(ev_name, XN_EVENT_MEMCPY_H2D))
		return CP_H2D;
	if (xs_str_eq(ev_name, XN_EVENT_MEMCPY_D2H))
		return CP_D2H;
	if (xs_str_eq(ev_name, XN_EVENT_MEMCPY_D2D))
		return CP_D2D;
	if (xs_str_eq(ev_name, XN_EVENT_MEMCPY_P2P))
		return CP_P2P;
	detail(details, "kind_src", &src);
	detail(details, "kind_dst", &dst);
	bool sh = xs_str_eq(src, "pageable") || xs_str_eq(src, "pinned");
	bool dh = xs_str_eq(dst, "pageable") || xs_str_eq(dst, "pinned");
	bool sd = xs_str_eq(src, "device") || xs_str_eq(src, "array");
	bool dd = xs_str_eq(dst, "device") || xs_str_eq(dst, "array");

	if (sh && dd)
		return CP_H2D;
	if (sd && dh)
		return CP_D2H;
	if (sd && dd)
		return CP_D2D;
	return CP_OTHER;
}

/* ---- walks ----------------------------------------------------------------- */

static int walk_env(struct xs_file *f, struct top *t)
{
	uint64_t start, stop;
	int r = xs_space_window(f, &start, &stop);

	if (r > 0 && start && stop > start && stop - start <= (uint64_t)INT64_MAX / 1000) {
		t->window_ps = (int64_t)(stop - start) * 1000;
		t->window_from_env = true;
	}
	return r < 0 ? r : 0;
}

struct notes_ud {
	struct top *t;
	int which;
	int err;
};

static void note_cb(struct xs_str s, void *ud)
{
	struct notes_ud *u = ud;
	struct top *t = u->t;

	if (u->err || (u->err = grow((void **)&t->notes[u->which], &t->capnotes[u->which], t->nnotes[u->which],
				     sizeof(struct xs_str))) < 0)
		return;
	t->notes[u->which][t->nnotes[u->which]++] = s;
}

static int walk_notes(struct xs_file *f, struct top *t)
{
	struct notes_ud e = {t, 0, 0}, w = {t, 1, 0};
	int r;

	if ((r = xs_space_strings(f, XS_SPACE_ERRORS, note_cb, &e)) < 0 ||
	    (r = xs_space_strings(f, XS_SPACE_WARNINGS, note_cb, &w)) < 0)
		return r;
	return e.err < 0 ? e.err : w.err;
}

/*
 * Fold one "_counters_" line into the per-(plane, counter) summary. A
 * point is a zero-length event whose first numeric stat is the value
 * (docs/counters.md); the counter is the event's metadata name.
 */
static int walk_counters(struct top *t, const struct xs_plane *pl, const struct xs_line *ln)
{
	struct pb_cursor ei = xs_line_events(ln);
	struct xs_event ev;
	int r;

	while ((r = xs_next_event(&ei, &ev)) > 0) {
		const struct xs_meta *m = xs_plane_event_meta(pl, ev.metadata_id);
		struct pb_cursor it = ev.raw;
		struct xs_stat st;
		struct xs_str name;
		struct counter *c = NULL;
		double v;
		bool have = false;

		if (!m)
			continue;
		name = m->display_name.len ? m->display_name : m->name;
		while (!have && (r = xs_event_next_stat(&it, &st)) > 0)
			have = xs_stat_number(&st, &v);
		if (r < 0)
			return r;
		if (!have || !isfinite(v))
			continue;
		/* A handful of counters per plane: a linear search is enough. */
		for (size_t i = t->ncn; i-- > 0;)
			if (t->cn[i].name.len == name.len && !memcmp(t->cn[i].name.p, name.p, name.len) &&
			    t->cn[i].plane.len == pl->name.len && !memcmp(t->cn[i].plane.p, pl->name.p, pl->name.len)) {
				c = &t->cn[i];
				break;
			}
		if (!c) {
			if (t->ncn >= 100000)
				continue; /* hostile file: a bounded summary */
			if ((r = grow((void **)&t->cn, &t->capcn, t->ncn, sizeof(*t->cn))) < 0)
				return r;
			c = &t->cn[t->ncn++];
			*c = (struct counter){.plane = pl->name, .name = name, .min = v, .max = v};
		}
		c->points++;
		c->min = v < c->min ? v : c->min;
		c->max = v > c->max ? v : c->max;
		c->sum += v;
		c->last = v;
	}
	return r;
}

static void hostname_cb(struct xs_str s, void *ud)
{
	struct top *t = ud;

	if (!t->host[0])
		snprintf(t->host, sizeof(t->host), "%.*s", (int)s.len, s.p);
}

static int walk_host(struct xs_file *f, struct top *t)
{
	struct xs_space_iter si = XS_SPACE_ITER_INIT;
	struct xs_plane pl;
	int r;

	while ((r = xs_next_plane(f, &si, &pl)) > 0) {
		if (!xs_str_has_prefix(pl.name, XN_PLANE_HOST_PREFIX))
			continue;
		if ((r = xs_plane_index(&pl)) < 0)
			return r;
		int64_t corr = xs_plane_stat_id(&pl, XN_STAT_CORRELATION_ID);
		struct xs_line_iter li = xs_plane_lines(&pl);
		struct xs_line ln;

		while ((r = xs_next_line(&li, &ln)) > 0) {
			struct pb_cursor ei = xs_line_events(&ln);
			struct xs_event ev;
			int pi;

			if (xs_str_eq(ln.name, XN_LINE_COUNTERS)) {
				if ((r = walk_counters(t, &pl, &ln)) < 0)
					break;
				continue;
			}
			if (xs_line_is_derived(&ln))
				continue; /* derived lines repeat the work of other lines */
			pi = proc_index(t, ln.name);
			if (pi < 0) {
				r = pi;
				break;
			}
			while ((r = xs_next_event(&ei, &ev)) > 0) {
				struct proc *p = &t->p[pi];
				struct pb_cursor it = ev.raw;
				struct xs_stat st;
				uint64_t c;

				p->host_events++;
				p->host_ps += ev.duration_ps > 0 ? ev.duration_ps : 0;
				while (corr >= 0 && xs_event_next_stat(&it, &st) > 0) {
					if (st.metadata_id != corr || !xs_stat_u64(&st, &c))
						continue;
					p->launches++;
					if ((r = corr_put(t, c, (uint32_t)pi)) < 0)
						break;
				}
				if (r < 0)
					break;
			}
			if (r < 0)
				break;
		}
		xs_plane_release(&pl);
		xs_file_drop(f, pl.raw.p, (size_t)(pl.raw.end - pl.raw.p));
		if (r < 0)
			return r;
	}
	return r;
}

struct ival {
	ps128 lo, hi;
};

static int ival_cmp(const void *a, const void *b)
{
	const struct ival *x = a, *y = b;

	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static ps128 union_len(struct ival *v, size_t n)
{
	ps128 total = 0, lo, hi;

	if (!n)
		return 0;
	qsort(v, n, sizeof(*v), ival_cmp);
	lo = v[0].lo;
	hi = v[0].hi;
	for (size_t i = 1; i < n; i++) {
		if (v[i].lo > hi) {
			total += hi - lo;
			lo = v[i].lo;
			hi = v[i].hi;
		} else if (v[i].hi > hi) {
			hi = v[i].hi;
		}
	}
	return total + (hi - lo);
}

/*
 * What one kernel shape (an event name and its kernel_details string) gives,
 * parsed once: kernel launches repeat a few shapes millions of times, and
 * hashing the ~120-byte name and parsing the details per event was most of
 * `top`'s time. Keyed by the metadata and the details' place in the file
 * (a ref_value points at one stat metadata name; an inline string is
 * somewhere else each time and simply misses), so valid for one plane.
 */
struct shape_memo {
	const struct xs_meta *m; /* NULL: empty */
	const char *dp;
	size_t dl;
	size_t kernel; /* index into top.k */
	bool has_occ;
	double occ;
	char grid[48], block[48];
};
#define SHAPE_MEMO 1024 /* a power of two */

static int walk_gpus(struct xs_file *f, struct top *t)
{
	struct shape_memo *memo = calloc(SHAPE_MEMO, sizeof(*memo));
	struct xs_space_iter si = XS_SPACE_ITER_INIT;
	struct xs_plane pl;
	struct ival *iv = NULL;
	size_t niv = 0, capiv = 0;
	int r;

	if (!memo)
		return -ENOMEM;
	t->span_lo = INT64_MAX;
	t->span_hi = INT64_MIN;
	while ((r = xs_next_plane(f, &si, &pl)) > 0) {
		if (!xs_str_has_prefix(pl.name, XN_PLANE_GPU_PREFIX))
			continue;
		memset(memo, 0, SHAPE_MEMO * sizeof(*memo)); /* the keys are this plane's */
		if ((r = xs_plane_index(&pl)) < 0)
			break;
		if ((r = grow((void **)&t->g, &t->capg, t->ng, sizeof(*t->g))) < 0)
			break;
		struct gpu *g = &t->g[t->ng++];
		int64_t kd = xs_plane_stat_id(&pl, XN_STAT_KERNEL_DETAILS), md = xs_plane_stat_id(&pl, XN_STAT_MEMCPY_DETAILS);
		int64_t corr = xs_plane_stat_id(&pl, XN_STAT_CORRELATION_ID);
		struct xs_line_iter li = xs_plane_lines(&pl);
		struct xs_line ln;

		memset(g, 0, sizeof(*g));
		snprintf(g->name, sizeof(g->name), "%.*s", (int)pl.name.len, pl.name.p);
		niv = 0;
		while ((r = xs_next_line(&li, &ln)) > 0) {
			struct pb_cursor ei = xs_line_events(&ln);
			struct xs_event ev;

			if (xs_str_eq(ln.name, XN_LINE_COUNTERS)) {
				if ((r = walk_counters(t, &pl, &ln)) < 0)
					break;
				continue;
			}
			if (xs_line_is_derived(&ln))
				continue; /* derived lines repeat the work of other lines */
			while ((r = xs_next_event(&ei, &ev)) > 0) {
				const struct xs_meta *m = xs_plane_event_meta(&pl, ev.metadata_id);
				ps128 start = (ps128)ln.timestamp_ns * 1000 + ev.offset_ps;
				int64_t dur = ev.duration_ps > 0 ? ev.duration_ps : 0;
				struct xs_stat st;
				struct xs_str details;
				struct xs_str name = m ? m->name : (struct xs_str){"(unknown)", 9};
				uint64_t c;

				if (start < t->span_lo)
					t->span_lo = start;
				if (start + dur > t->span_hi)
					t->span_hi = start + dur;
				if (kd >= 0 && (r = xs_event_find_stat(&pl, &ev, m, XN_STAT_KERNEL_DETAILS, &st)) > 0 &&
				    xs_stat_str(&pl, &st, &details)) {
					uintptr_t h = ((uintptr_t)m >> 4) ^ ((uintptr_t)details.p >> 3) ^ details.len;
					struct shape_memo *sm = &memo[(h ^ (h >> 11)) & (SHAPE_MEMO - 1)];

					if (!m || sm->m != m || sm->dp != details.p || sm->dl != details.len) {
						struct kernel *nk = kernel_get(t, name);

						if (!nk) {
							r = -ENOMEM;
							break;
						}
						sm->m = m;
						sm->dp = details.p;
						sm->dl = details.len;
						sm->kernel = (size_t)(nk - t->k);
						sm->has_occ = detail_double(details, "occ_pct", &sm->occ);
						detail_copy(details, "grid", sm->grid, sizeof(sm->grid), "1,1,1");
						detail_copy(details, "block", sm->block, sizeof(sm->block), "1,1,1");
					}
					struct kernel *k = &t->k[sm->kernel];

					k->count++;
					k->total_ps += dur;
					if (dur < k->min_ps)
						k->min_ps = dur;
					if (dur > k->max_ps)
						k->max_ps = dur;
					if (sm->has_occ) {
						k->occ_sum += sm->occ;
						k->occ_n++;
					}
					if (k->count == 1) {
						memcpy(k->grid, sm->grid, sizeof(sm->grid));
						memcpy(k->block, sm->block, sizeof(sm->block));
					} else {
						k->grid_varies |= strcmp(k->grid, sm->grid) != 0;
						k->block_varies |= strcmp(k->block, sm->block) != 0;
					}
					if ((r = grow((void **)&iv, &capiv, niv, sizeof(*iv))) < 0)
						break;
					iv[niv++] = (struct ival){start, start + dur};
					g->kernels++;
					if (corr >= 0) {
						struct pb_cursor it = ev.raw;
						struct xs_stat cs;

						while (xs_event_next_stat(&it, &cs) > 0)
							if (cs.metadata_id == corr && xs_stat_u64(&cs, &c)) {
								int pi = corr_get(t, c);

								if (pi >= 0) {
									t->p[pi].kernels++;
									t->p[pi].kernel_ps += dur;
								}
								break;
							}
					}
				} else if (r < 0) {
					break;
				} else if (md >= 0 && (r = xs_event_find_stat(&pl, &ev, m, XN_STAT_MEMCPY_DETAILS, &st)) > 0 &&
					   xs_stat_str(&pl, &st, &details)) {
					struct copy_dir *cd = &t->copies[copy_direction(name, details)];
					double size;

					cd->count++;
					cd->dur_ps += dur;
					/* a double past 2^64 does not convert: saturate */
					if (detail_double(details, "size", &size) && size > 0)
						cd->bytes += size < 1.8e19 - (double)cd->bytes ? (uint64_t)size
											: UINT64_MAX - cd->bytes;
				} else if (r < 0) {
					break;
				}
				r = 0;
			}
			if (r < 0)
				break;
		}
		if (r >= 0) {
			g->busy_ps = union_len(iv, niv);
			if (niv) {
				g->first_ps = iv[0].lo;
				g->last_ps = iv[niv - 1].hi;
			}
		}
		xs_plane_release(&pl);
		xs_file_drop(f, pl.raw.p, (size_t)(pl.raw.end - pl.raw.p));
		if (r < 0)
			break;
	}
	free(iv);
	free(memo);
	return r;
}

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
		"  -n, --limit N       kernels to list (default 20; 0 = all)\n"
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
	if ((r = walk_env(f, &t)) < 0 || (r = xs_space_strings(f, XS_SPACE_HOSTNAMES, hostname_cb, &t)) < 0 ||
	    (r = walk_notes(f, &t)) < 0 || (r = walk_host(f, &t)) < 0 || (r = walk_gpus(f, &t)) < 0) {
		rc = -profctl_err(PROFCTL_EXIT_FAIL, "%s: %s", path,
				  r == -EBADMSG ? "not a valid XSpace (malformed protobuf)" : strerror(-r));
		goto out;
	}
	if (t.nk)
		qsort(t.k, t.nk, sizeof(*t.k), kernel_cmp);
	if (t.np)
		qsort(t.p, t.np, sizeof(*t.p), proc_cmp);
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
	free(t.k);
	free(t.kidx);
	free(t.p);
	free(t.corr);
	free(t.g);
	free(t.cn);
	free(t.notes[0]);
	free(t.notes[1]);
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
