/* SPDX-License-Identifier: MIT */
/*
 * fuzz-xspace-reader.c - libFuzzer target for profctl's XSpace reader
 * (tools/profctl/xspace-reader.{c,h}): an input is an .xplane.pb file, which profctl
 * reads from wherever a user points it (a repository another job wrote, a
 * download). Walks it the way profctl's commands do: every plane indexed,
 * every line, event and stat, metadata lookups, the stat search XProf's
 * merge rule uses, the top-level strings. Built by run-fuzz.sh.
 *
 * The input is copied to a buffer of its exact size, so a read past it is
 * an ASan error; each view the reader hands out is checked to lie inside
 * it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tools/profctl/xspace-reader.h"

#define PROMISE(x) \
	do {       \
		if (!(x)) \
			abort(); \
	} while (0)

static const uint8_t *g_lo, *g_hi;

static void in_input(const void *p, size_t len)
{
	if (!len)
		return;
	PROMISE((const uint8_t *)p >= g_lo && (const uint8_t *)p <= g_hi && len <= (size_t)(g_hi - (const uint8_t *)p));
}

static void check_str(struct xs_str s) { in_input(s.p, s.len); }

static void on_string(struct xs_str s, void *ud)
{
	(void)ud;
	check_str(s);
}

/* One line of profd_info: inside the input, not empty, one line. */
static void on_info(struct xs_str s, void *ud)
{
	(void)ud;
	check_str(s);
	PROMISE(s.len > 0 && !memchr(s.p, '\n', s.len));
}

static void stat_values(const struct xs_plane *pl, const struct xs_stat *st)
{
	struct xs_str s;
	double d;
	uint64_t u;

	if (xs_stat_str(pl, st, &s))
		check_str(s);
	(void)xs_stat_number(st, &d);
	(void)xs_stat_u64(st, &u);
	if (st->kind == XS_STAT_STR || st->kind == XS_STAT_BYTES)
		check_str(st->s);
}

static void walk_plane(struct xs_plane *pl)
{
	struct xs_line_iter li;
	struct xs_line ln;
	struct pb_cursor it;
	struct xs_stat st;
	int64_t sid;
	unsigned budget = 1u << 16; /* bounds the work per input, not the reader */

	check_str(pl->name);
	if (xs_plane_index(pl) < 0)
		return;
	PROMISE(xs_plane_index(pl) == 0); /* idempotent */
	it = pl->raw;
	while (xs_plane_next_stat(pl, &it, &st) == 1 && budget--)
		stat_values(pl, &st);
	sid = xs_plane_stat_id(pl, "correlation_id");
	li = xs_plane_lines(pl);
	while (xs_next_line(&li, &ln) == 1 && budget--) {
		struct pb_cursor ev_it = xs_line_events(&ln);
		struct xs_event ev;

		check_str(ln.name);
		check_str(ln.display_name);
		(void)xs_line_is_derived(&ln);
		while (xs_next_event(&ev_it, &ev) == 1 && budget--) {
			const struct xs_meta *m = xs_plane_event_meta(pl, ev.metadata_id);
			struct pb_cursor sit = ev.raw;

			if (m) {
				struct pb_cursor mit = m->stats;

				check_str(m->name);
				check_str(m->display_name);
				while (m->has_stats && xs_meta_next_stat(&mit, &st) == 1 && budget--)
					stat_values(pl, &st);
			}
			while (xs_event_next_stat(&sit, &st) == 1 && budget--) {
				const struct xs_meta *sm = xs_plane_stat_meta(pl, st.metadata_id);

				if (sm)
					check_str(sm->name);
				stat_values(pl, &st);
				if (sid >= 0 && st.metadata_id == sid)
					(void)0;
			}
			if (xs_event_find_stat(pl, &ev, m, "kernel_details", &st) == 1)
				stat_values(pl, &st);
		}
	}
	xs_plane_release(pl);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *copy = malloc(size ? size : 1);
	struct xs_space_iter it = XS_SPACE_ITER_INIT;
	struct xs_plane pl;
	struct xs_file *f;
	int r;

	if (!copy)
		return 0;
	memcpy(copy, data, size);
	g_lo = copy;
	g_hi = copy + size;
	if (xs_file_from_bytes(copy, size, &f) < 0) {
		free(copy);
		return 0;
	}
	PROMISE(xs_file_size(f) == size);
	while ((r = xs_next_plane(f, &it, &pl)) == 1)
		walk_plane(&pl);
	PROMISE(r == 0 || r == -EBADMSG);
	for (int w = XS_SPACE_ERRORS; w <= XS_SPACE_HOSTNAMES; w++)
		(void)xs_space_strings(f, (enum xs_space_field)w, on_string, NULL);
	r = xs_space_info(f, on_info, NULL);
	PROMISE(r >= 0 || r == -EBADMSG || r == -ENOMEM);
	xs_file_close(f);
	free(copy);
	return 0;
}
