/* SPDX-License-Identifier: MIT */
/*
 * profctl-top-walk.c - `profctl top`'s walks over one XSpace file
 * (profctl-top.h): the capture window, hosts, errors and warnings, per
 * process host events, kernels, copies and GPU busy time, counters. The
 * tables by name (base/strtab.h), the correlation map (base/hash.h) and
 * the parsing of XProf's details strings live here.
 * It fills the caller's struct top; profctl-top.c prints it. The design:
 * profctl-top.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "base/parse.h"
#include "base/strtab.h"
#include "profctl-top.h"
#include "profctl.h"
#include "xspace/names.h"

#define COUNTERS_MAX 100000 /* (plane, counter) pairs: a hostile file gets a bounded summary */
#define SITES_MAX 100000    /* launch sites, likewise */

/* ---- tables: by name (base/strtab.h), by correlation id (base/hash.h) ---- */

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

/* The index into t->k of the kernel named @name, a new one the first time:
 * the names are interned in t->knames, whose id - 1 is that index. Or
 * -ENOMEM, -E2BIG (strtab_intern()). */
static int64_t kernel_index(struct top *t, struct xs_str name)
{
	int64_t id;
	int r;

	/* Room first: an id interned must always have its kernel. */
	if ((r = grow((void **)&t->k, &t->capk, t->nk, sizeof(*t->k))) < 0)
		return r;
	id = strtab_intern(&t->knames, name.p, name.len);
	if (id < 0)
		return id;
	if ((size_t)id > t->nk) {
		struct kernel *k = &t->k[t->nk++];

		memset(k, 0, sizeof(*k));
		k->name = name;
		k->min_ps = INT64_MAX;
	}
	return id - 1;
}

/* The index into t->s of launch site @name, a new one the first time (as
 * kernel_index()). */
static int64_t site_index(struct top *t, struct xs_str name)
{
	int64_t id;
	int r;

	if ((r = grow((void **)&t->s, &t->caps, t->ns, sizeof(*t->s))) < 0)
		return r;
	id = strtab_intern(&t->snames, name.p, name.len);
	if (id < 0)
		return id;
	if ((size_t)id > t->ns)
		t->s[t->ns++] = (struct site){.name = name};
	return id - 1;
}

/* A site already looked up: kernels launched from one line share one
 * python_frame string (a ref_value points at one place), so the memo
 * spares hashing it per kernel. Keys are views into the plane: reset per
 * plane. */
struct site_memo {
	const char *p;
	size_t len;
	size_t site;
};
#define SITE_MEMO 256 /* a power of two */

/* Add kernel @ev (@dur ps) to its launch site: python_frame on the event
 * or its metadata, "[no Python stack]" (as profctl flame says) without one. */
static int add_site(struct top *t, struct site_memo *memo, const struct xs_plane *pl, const struct xs_event *ev,
		    const struct xs_meta *m, int64_t dur)
{
	static const struct xs_str none = {"[no Python stack]", 17};
	struct xs_stat st;
	struct xs_str name = none;
	int r = xs_event_find_stat(pl, ev, m, XN_STAT_PYTHON_FRAME, &st);

	if (r < 0)
		return r;
	if (r > 0 && (!xs_stat_str(pl, &st, &name) || !name.len))
		name = none;
	uintptr_t h = ((uintptr_t)name.p >> 3) ^ name.len;
	struct site_memo *sm = &memo[(h ^ (h >> 9)) & (SITE_MEMO - 1)];

	if (sm->p != name.p || sm->len != name.len) {
		int64_t si = site_index(t, name);

		if (si == -ENOSPC)
			return 0; /* hostile file: a bounded summary */
		if (si < 0)
			return (int)si;
		*sm = (struct site_memo){name.p, name.len, (size_t)si};
	}
	t->s[sm->site].kernels++;
	t->s[sm->site].ps += dur;
	return 0;
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
	int64_t id;
	int r;

	if (sl)
		n.len = (size_t)(sl - n.p);
	if (!n.len)
		n = (struct xs_str){"(unnamed)", 9};
	/* Room first: an id interned must always have its process. */
	if ((r = grow((void **)&t->p, &t->capp, t->np, sizeof(*t->p))) < 0)
		return r;
	id = strtab_intern(&t->pnames, n.p, n.len);
	if (id < 0)
		return (int)id;
	if ((size_t)id > t->np) {
		memset(&t->p[t->np], 0, sizeof(t->p[0]));
		t->p[t->np++].name = n;
	}
	return (int)(id - 1);
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

/* The index into t->cn of counter @name of plane @plane, a new one starting
 * at @v the first time. Its key in t->cnames is the plane's length, the
 * plane and the name, so no two pairs share one. -ENOSPC past COUNTERS_MAX
 * (top_walk()), -ENOMEM, -E2BIG. */
static int64_t counter_index(struct top *t, struct xs_str plane, struct xs_str name, double v)
{
	uint64_t plen = plane.len;
	size_t klen = sizeof(plen) + plane.len + name.len; /* views into one file: no overflow */
	int64_t id;
	int r;

	if (klen > t->ckey_cap) {
		char *k = realloc(t->ckey, klen);

		if (!k)
			return -ENOMEM;
		t->ckey = k;
		t->ckey_cap = klen;
	}
	memcpy(t->ckey, &plen, sizeof(plen));
	memcpy(t->ckey + sizeof(plen), plane.p, plane.len);
	memcpy(t->ckey + sizeof(plen) + plane.len, name.p, name.len);
	/* Room first: an id interned must always have its counter. */
	if ((r = grow((void **)&t->cn, &t->capcn, t->ncn, sizeof(*t->cn))) < 0)
		return r;
	id = strtab_intern(&t->cnames, t->ckey, klen);
	if (id < 0)
		return id;
	if ((size_t)id > t->ncn)
		t->cn[t->ncn++] = (struct counter){.plane = plane, .name = name, .min = v, .max = v};
	return id - 1;
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
		struct counter *c;
		int64_t ci;
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
		ci = counter_index(t, pl->name, name, v);
		if (ci == -ENOSPC)
			continue; /* hostile file: a bounded summary */
		if (ci < 0)
			return (int)ci;
		c = &t->cn[ci];
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
	struct site_memo *smemo = calloc(SITE_MEMO, sizeof(*smemo));
	struct xs_space_iter si = XS_SPACE_ITER_INIT;
	struct xs_plane pl;
	struct ival *iv = NULL;
	size_t niv = 0, capiv = 0;
	int r;

	if (!memo || !smemo) {
		free(memo);
		free(smemo);
		return -ENOMEM;
	}
	t->span_lo = INT64_MAX;
	t->span_hi = INT64_MIN;
	while ((r = xs_next_plane(f, &si, &pl)) > 0) {
		if (!xs_str_has_prefix(pl.name, XN_PLANE_GPU_PREFIX))
			continue;
		memset(memo, 0, SHAPE_MEMO * sizeof(*memo)); /* the keys are this plane's */
		memset(smemo, 0, SITE_MEMO * sizeof(*smemo));
		if ((r = xs_plane_index(&pl)) < 0)
			break;
		if ((r = grow((void **)&t->g, &t->capg, t->ng, sizeof(*t->g))) < 0)
			break;
		struct gpu *g = &t->g[t->ng++];
		int64_t kd = xs_plane_stat_id(&pl, XN_STAT_KERNEL_DETAILS), md = xs_plane_stat_id(&pl, XN_STAT_MEMCPY_DETAILS);
		int64_t corr = xs_plane_stat_id(&pl, XN_STAT_CORRELATION_ID);
		bool python = xs_plane_stat_id(&pl, XN_STAT_PYTHON_FRAME) >= 0;
		struct xs_line_iter li = xs_plane_lines(&pl);
		struct xs_line ln;

		t->has_python |= python;
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
						int64_t ki = kernel_index(t, name);

						if (ki < 0) {
							r = (int)ki;
							break;
						}
						sm->m = m;
						sm->dp = details.p;
						sm->dl = details.len;
						sm->kernel = (size_t)ki;
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
					if (python && (r = add_site(t, smemo, &pl, &ev, m, dur)) < 0)
						break;
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
	free(smemo);
	return r;
}

int top_walk(struct xs_file *f, struct top *t)
{
	int r;

	strtab_init(&t->cnames, COUNTERS_MAX);
	strtab_init(&t->snames, SITES_MAX);
	if ((r = walk_env(f, t)) < 0 || (r = xs_space_strings(f, XS_SPACE_HOSTNAMES, hostname_cb, t)) < 0 ||
	    (r = walk_notes(f, t)) < 0 || (r = walk_host(f, t)) < 0 || (r = walk_gpus(f, t)) < 0)
		return r;
	return 0;
}

void top_free(struct top *t)
{
	free(t->k);
	strtab_free(&t->knames);
	free(t->p);
	strtab_free(&t->pnames);
	free(t->corr);
	free(t->g);
	free(t->cn);
	strtab_free(&t->cnames);
	free(t->s);
	strtab_free(&t->snames);
	free(t->ckey);
	free(t->notes[0]);
	free(t->notes[1]);
}
