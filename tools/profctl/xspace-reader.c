/* SPDX-License-Identifier: MIT */
/*
 * xspace-reader.c - the XSpace pull parser (see xspace-reader.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "xspace-reader.h"
#include "xspace/names.h"

struct xs_file {
	const uint8_t *data;
	size_t len;
	bool mapped;
};

static struct xs_str str_of(const struct pb_field *f)
{
	return (struct xs_str){.p = (const char *)f->data, .len = f->len};
}

bool xs_str_eq(struct xs_str s, const char *lit)
{
	size_t n = strlen(lit);

	return s.len == n && memcmp(s.p, lit, n) == 0;
}

bool xs_str_has_prefix(struct xs_str s, const char *lit)
{
	size_t n = strlen(lit);

	return s.len >= n && memcmp(s.p, lit, n) == 0;
}

/* ---- file ----------------------------------------------------------- */

int xs_file_open(const char *path, struct xs_file **ret)
{
	struct xs_file *f;
	struct stat st;
	void *m = NULL;
	int fd, r;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	if (st.st_size > 0) {
		m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (m == MAP_FAILED) {
			r = -errno;
			close(fd);
			return r;
		}
	}
	close(fd);
	f = calloc(1, sizeof(*f));
	if (!f) {
		if (m)
			munmap(m, (size_t)st.st_size);
		return -ENOMEM;
	}
	f->data = m;
	f->len = (size_t)st.st_size;
	f->mapped = m != NULL;
	*ret = f;
	return 0;
}

int xs_file_from_bytes(const void *data, size_t len, struct xs_file **ret)
{
	struct xs_file *f = calloc(1, sizeof(*f));

	if (!f)
		return -ENOMEM;
	f->data = data;
	f->len = len;
	*ret = f;
	return 0;
}

struct xs_file *xs_file_close(struct xs_file *f)
{
	if (f) {
		if (f->mapped)
			munmap((void *)f->data, f->len);
		free(f);
	}
	return NULL;
}

size_t xs_file_size(const struct xs_file *f) { return f->len; }

void xs_file_advise_sequential(struct xs_file *f)
{
	if (f->mapped)
		(void)madvise((void *)f->data, f->len, MADV_SEQUENTIAL);
}

void xs_file_drop(const struct xs_file *f, const void *p, size_t len)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), a = (uintptr_t)p, b = a + len;

	if (!f->mapped || (const uint8_t *)p < f->data || (const uint8_t *)p + len > f->data + f->len)
		return;
	a = (a + page - 1) & ~(page - 1);
	b &= ~(page - 1);
	if (b > a)
		(void)madvise((void *)a, b - a, MADV_DONTNEED);
}

/* ---- space and planes ----------------------------------------------- */

int xs_next_plane(const struct xs_file *f, struct xs_space_iter *it, struct xs_plane *pl)
{
	struct pb_field fl;
	int r;

	if (!it->started) {
		it->c = pb_cursor_of(f->data, f->len);
		it->started = true;
	}
	while ((r = pb_next(&it->c, &fl)) > 0) {
		if (fl.num != XSPACE_PLANES || fl.wt != PB_LEN)
			continue;
		struct pb_cursor pc = pb_cursor_of(fl.data, fl.len);
		struct pb_field g;

		memset(pl, 0, sizeof(*pl));
		pl->raw = pc;
		while ((r = pb_next(&pc, &g)) > 0) {
			if (g.num == XPLANE_ID && g.wt == PB_VARINT)
				pl->id = (int64_t)g.u;
			else if (g.num == XPLANE_NAME && g.wt == PB_LEN)
				pl->name = str_of(&g);
		}
		return r < 0 ? r : 1;
	}
	return r;
}

int xs_space_strings(const struct xs_file *f, enum xs_space_field which,
		     void (*cb)(struct xs_str s, void *ud), void *ud)
{
	struct pb_cursor c = pb_cursor_of(f->data, f->len);
	struct pb_field fl;
	int r;

	while ((r = pb_next(&c, &fl)) > 0)
		if (fl.num == (uint32_t)which && fl.wt == PB_LEN)
			cb(str_of(&fl), ud);
	return r;
}

/* @fn on each plane-level stat of the Task Environment plane named
 * @names[k] (looked up once; a name the plane lacks matches nothing), with
 * that k. 1 found, 0 no such plane, -ENOMEM, -EBADMSG, -EINVAL (more
 * names than TASK_ENV_NAMES); a malformed stat ends the walk, what was
 * read stands. */
#define TASK_ENV_NAMES 2
static int task_env_stats(const struct xs_file *f, const char *const *names, unsigned n_names,
			  void (*fn)(struct xs_plane *pl, const struct xs_stat *st, unsigned k, void *ud), void *ud)
{
	struct xs_space_iter si = XS_SPACE_ITER_INIT;
	struct xs_plane pl;
	int r;

	if (n_names > TASK_ENV_NAMES)
		return -EINVAL;
	while ((r = xs_next_plane(f, &si, &pl)) > 0) {
		if (!xs_str_eq(pl.name, XN_PLANE_TASK_ENV))
			continue;
		if ((r = xs_plane_index(&pl)) < 0)
			return r;
		struct pb_cursor it = pl.raw;
		struct xs_stat st;
		int64_t id[TASK_ENV_NAMES];

		for (unsigned k = 0; k < n_names; k++)
			id[k] = xs_plane_stat_id(&pl, names[k]);
		while (xs_plane_next_stat(&pl, &it, &st) > 0)
			for (unsigned k = 0; k < n_names; k++)
				if (id[k] >= 0 && st.metadata_id == id[k])
					fn(&pl, &st, k, ud);
		xs_plane_release(&pl);
		return 1;
	}
	return r;
}

struct window_ud {
	uint64_t *start, *stop;
};

static void window_stat(struct xs_plane *pl, const struct xs_stat *st, unsigned k, void *ud)
{
	struct window_ud *w = ud;
	uint64_t v;

	(void)pl;
	if (xs_stat_u64(st, &v))
		*(k == 0 ? w->start : w->stop) = v;
}

int xs_space_window(const struct xs_file *f, uint64_t *ret_start_ns, uint64_t *ret_stop_ns)
{
	static const char *const names[] = {XN_STAT_PROFILE_START, XN_STAT_PROFILE_STOP};

	*ret_start_ns = *ret_stop_ns = 0;
	return task_env_stats(f, names, 2, window_stat, &(struct window_ud){ ret_start_ns, ret_stop_ns });
}

struct info_ud {
	void (*cb)(struct xs_str line, void *ud);
	void *ud;
};

static void info_stat(struct xs_plane *pl, const struct xs_stat *st, unsigned k, void *ud)
{
	struct info_ud *u = ud;
	struct xs_str s;

	(void)k;
	if (!xs_stat_str(pl, st, &s))
		return;
	for (size_t i = 0; i < s.len;) {
		const char *nl = memchr(s.p + i, '\n', s.len - i);
		size_t end = nl ? (size_t)(nl - s.p) : s.len;

		if (end > i)
			u->cb((struct xs_str){ .p = s.p + i, .len = end - i }, u->ud);
		i = end + 1;
	}
}

int xs_space_info(const struct xs_file *f, void (*cb)(struct xs_str line, void *ud), void *ud)
{
	static const char *const names[] = {XN_STAT_PROFD_INFO};

	return task_env_stats(f, names, 1, info_stat, &(struct info_ud){ cb, ud });
}

static int meta_cmp(const void *a, const void *b)
{
	const struct xs_meta *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

/* One map<int64, X*Metadata> entry: key, value {id, name, display_name, stats}. */
static int parse_meta_entry(const struct pb_field *fl, struct xs_meta *m)
{
	struct pb_cursor c = pb_cursor_of(fl->data, fl->len), v;
	struct pb_field g, h;
	bool have_id = false;
	int64_t key = 0;
	int r;

	memset(m, 0, sizeof(*m));
	while ((r = pb_next(&c, &g)) > 0) {
		if (g.num == PB_MAP_KEY && g.wt == PB_VARINT) {
			key = (int64_t)g.u;
		} else if (g.num == PB_MAP_VALUE && g.wt == PB_LEN) {
			v = pb_cursor_of(g.data, g.len);
			while ((r = pb_next(&v, &h)) > 0) {
				if (h.num == XMETADATA_ID && h.wt == PB_VARINT) {
					m->id = (int64_t)h.u;
					have_id = true;
				} else if (h.num == XMETADATA_NAME && h.wt == PB_LEN) {
					m->name = str_of(&h);
				} else if (h.num == XMETADATA_DISPLAY_NAME && h.wt == PB_LEN) {
					m->display_name = str_of(&h);
				} else if (h.num == XMETADATA_STATS && h.wt == PB_LEN) {
					m->has_stats = true;
				}
			}
			if (r < 0)
				return r;
			if (m->has_stats)
				m->stats = pb_cursor_of(g.data, g.len);
		}
	}
	if (r < 0)
		return r;
	/* The key is authoritative; .id is the same number when well formed. */
	if (!have_id || key)
		m->id = key;
	return 0;
}

static int push_meta(struct xs_meta **arr, size_t *n, size_t *cap, const struct xs_meta *m)
{
	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 64;
		struct xs_meta *p = realloc(*arr, nc * sizeof(**arr));

		if (!p)
			return -ENOMEM;
		*arr = p;
		*cap = nc;
	}
	(*arr)[(*n)++] = *m;
	return 0;
}

int xs_plane_index(struct xs_plane *pl)
{
	struct pb_cursor c = pl->raw;
	struct pb_field fl;
	size_t ecap = 0, scap = 0;
	struct xs_meta m;
	int r;

	if (pl->indexed)
		return 0;
	pl->n_lines = 0;
	while ((r = pb_next(&c, &fl)) > 0) {
		if (fl.wt != PB_LEN)
			continue;
		if (fl.num == XPLANE_LINES) {
			pl->n_lines++;
		} else if (fl.num == XPLANE_EVENT_METADATA || fl.num == XPLANE_STAT_METADATA) {
			r = parse_meta_entry(&fl, &m);
			if (r < 0)
				goto fail;
			r = fl.num == XPLANE_EVENT_METADATA ? push_meta(&pl->ev_meta, &pl->n_ev_meta, &ecap, &m)
					: push_meta(&pl->st_meta, &pl->n_st_meta, &scap, &m);
			if (r < 0)
				goto fail;
		}
	}
	if (r < 0)
		goto fail;
	if (pl->n_ev_meta)
		qsort(pl->ev_meta, pl->n_ev_meta, sizeof(*pl->ev_meta), meta_cmp);
	if (pl->n_st_meta)
		qsort(pl->st_meta, pl->n_st_meta, sizeof(*pl->st_meta), meta_cmp);
	pl->indexed = true;
	return 0;
fail:
	xs_plane_release(pl);
	return r;
}

void xs_plane_release(struct xs_plane *pl)
{
	free(pl->ev_meta);
	free(pl->st_meta);
	pl->ev_meta = pl->st_meta = NULL;
	pl->n_ev_meta = pl->n_st_meta = 0;
	pl->indexed = false;
}

static const struct xs_meta *find_meta(const struct xs_meta *a, size_t n, int64_t id)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (a[mid].id == id)
			return &a[mid];
		if (a[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

const struct xs_meta *xs_plane_event_meta(const struct xs_plane *pl, int64_t id)
{
	return find_meta(pl->ev_meta, pl->n_ev_meta, id);
}

const struct xs_meta *xs_plane_stat_meta(const struct xs_plane *pl, int64_t id)
{
	return find_meta(pl->st_meta, pl->n_st_meta, id);
}

int64_t xs_plane_stat_id(const struct xs_plane *pl, const char *name)
{
	for (size_t i = 0; i < pl->n_st_meta; i++)
		if (xs_str_eq(pl->st_meta[i].name, name))
			return pl->st_meta[i].id;
	return -1;
}

/* ---- stats ---------------------------------------------------------- */

static int parse_stat(const struct pb_field *fl, struct xs_stat *st)
{
	struct pb_cursor c = pb_cursor_of(fl->data, fl->len);
	struct pb_field g;
	int r;

	memset(st, 0, sizeof(*st));
	while ((r = pb_next(&c, &g)) > 0) {
		switch (g.num) {
		case XSTAT_METADATA_ID:
			st->metadata_id = (int64_t)g.u;
			break;
		case XSTAT_DOUBLE_VALUE:
			if (g.wt == PB_I64) {
				memcpy(&st->d, &g.u, sizeof(st->d));
				st->kind = XS_STAT_DOUBLE;
			}
			break;
		case XSTAT_UINT64_VALUE:
			st->u = g.u;
			st->kind = XS_STAT_UINT64;
			break;
		case XSTAT_INT64_VALUE:
			st->i = (int64_t)g.u;
			st->kind = XS_STAT_INT64;
			break;
		case XSTAT_STR_VALUE:
		case XSTAT_BYTES_VALUE:
			if (g.wt == PB_LEN) {
				st->s = str_of(&g);
				st->kind = g.num == XSTAT_STR_VALUE ? XS_STAT_STR : XS_STAT_BYTES;
			}
			break;
		case XSTAT_REF_VALUE:
			st->u = g.u;
			st->kind = XS_STAT_REF;
			break;
		default:
			break;
		}
	}
	return r;
}

static int next_stat_field(struct pb_cursor *it, uint32_t num, struct xs_stat *st)
{
	struct pb_field fl;
	int r;

	while ((r = pb_next(it, &fl)) > 0) {
		if (fl.num != num || fl.wt != PB_LEN)
			continue;
		r = parse_stat(&fl, st);
		return r < 0 ? r : 1;
	}
	return r;
}

int xs_event_next_stat(struct pb_cursor *it, struct xs_stat *st) { return next_stat_field(it, XEVENT_STATS, st); }
int xs_meta_next_stat(struct pb_cursor *it, struct xs_stat *st) { return next_stat_field(it, XMETADATA_STATS, st); }

int xs_plane_next_stat(const struct xs_plane *pl, struct pb_cursor *it, struct xs_stat *st)
{
	(void)pl;
	return next_stat_field(it, XPLANE_STATS, st);
}

bool xs_stat_str(const struct xs_plane *pl, const struct xs_stat *st, struct xs_str *out)
{
	if (st->kind == XS_STAT_STR || st->kind == XS_STAT_BYTES) {
		*out = st->s;
		return true;
	}
	if (st->kind == XS_STAT_REF) {
		const struct xs_meta *m = xs_plane_stat_meta(pl, (int64_t)st->u);

		if (m) {
			*out = m->name;
			return true;
		}
	}
	return false;
}

bool xs_stat_number(const struct xs_stat *st, double *out)
{
	switch (st->kind) {
	case XS_STAT_DOUBLE:
		*out = st->d;
		return true;
	case XS_STAT_UINT64:
		*out = (double)st->u;
		return true;
	case XS_STAT_INT64:
		*out = (double)st->i;
		return true;
	default:
		return false;
	}
}

bool xs_stat_u64(const struct xs_stat *st, uint64_t *out)
{
	if (st->kind == XS_STAT_UINT64) {
		*out = st->u;
		return true;
	}
	if (st->kind == XS_STAT_INT64 && st->i >= 0) {
		*out = (uint64_t)st->i;
		return true;
	}
	return false;
}

int xs_event_find_stat(const struct xs_plane *pl, const struct xs_event *ev,
		       const struct xs_meta *meta, const char *name, struct xs_stat *out)
{
	int64_t id = xs_plane_stat_id(pl, name);
	struct pb_cursor it;
	int r;

	if (id < 0)
		return 0;
	it = ev->raw;
	while ((r = xs_event_next_stat(&it, out)) > 0)
		if (out->metadata_id == id)
			return 1;
	if (r < 0 || !meta || !meta->has_stats)
		return r;
	it = meta->stats;
	while ((r = xs_meta_next_stat(&it, out)) > 0)
		if (out->metadata_id == id)
			return 1;
	return r;
}

/* ---- lines and events ----------------------------------------------- */

int xs_next_line(struct xs_line_iter *it, struct xs_line *ln)
{
	struct pb_field fl, g;
	int r;

	while ((r = pb_next(&it->c, &fl)) > 0) {
		if (fl.num != XPLANE_LINES || fl.wt != PB_LEN)
			continue;
		struct pb_cursor c = pb_cursor_of(fl.data, fl.len);

		memset(ln, 0, sizeof(*ln));
		ln->raw = c;
		ln->index = it->index++;
		while ((r = pb_next(&c, &g)) > 0) {
			switch (g.num) {
			case XLINE_ID: ln->id = (int64_t)g.u; break;
			case XLINE_NAME: if (g.wt == PB_LEN) ln->name = str_of(&g); break;
			case XLINE_TIMESTAMP_NS: ln->timestamp_ns = (int64_t)g.u; break;
			case XLINE_DURATION_PS: ln->duration_ps = (int64_t)g.u; break;
			case XLINE_DISPLAY_ID: ln->display_id = (int64_t)g.u; break;
			case XLINE_DISPLAY_NAME: if (g.wt == PB_LEN) ln->display_name = str_of(&g); break;
			default: break;
			}
		}
		if (r < 0)
			return r;
		if (!ln->display_id)
			ln->display_id = ln->id;
		if (!ln->display_name.len)
			ln->display_name = ln->name;
		return 1;
	}
	return r;
}

int xs_next_event(struct pb_cursor *it, struct xs_event *ev)
{
	struct pb_field fl, g;
	int r;

	while ((r = pb_next(it, &fl)) > 0) {
		if (fl.num != XLINE_EVENTS || fl.wt != PB_LEN)
			continue;
		struct pb_cursor c = pb_cursor_of(fl.data, fl.len);

		memset(ev, 0, sizeof(*ev));
		ev->raw = c;
		while ((r = pb_next(&c, &g)) > 0) {
			switch (g.num) {
			case XEVENT_METADATA_ID: ev->metadata_id = (int64_t)g.u; break;
			case XEVENT_OFFSET_PS: ev->offset_ps = (int64_t)g.u; break;
			case XEVENT_DURATION_PS: ev->duration_ps = (int64_t)g.u; break;
			case XEVENT_NUM_OCCURRENCES: ev->num_occurrences = (int64_t)g.u; break;
			default: break;
			}
		}
		return r < 0 ? r : 1;
	}
	return r;
}
