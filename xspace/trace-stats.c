/* SPDX-License-Identifier: MIT */
/*
 * trace-stats.c - the names and stats of a plane (trace.h): event and stat
 * names interned as valid UTF-8, stats built into a caller's buffer and
 * interned as stat sets, plane stats set. The tables are the plane's (struct
 * trace_plane), so the same single-writer rule as the rest of the store
 * holds: only the loop thread writes a hub's planes.
 */
#include <errno.h>
#include <string.h>

#include "base/pbread.h"
#include "base/pbwire.h"
#include "base/utf8.h"
#include "names.h"
#include "pbfields.h"
#include "trace.h"

/* One-byte LEN keys: a stat set's entries are XEvent.stats, plane stats XPlane.stats. */
#define TAG_EVENT_STAT PB_KEY1(XEVENT_STATS, PB_LEN)
#define TAG_PLANE_STAT PB_KEY1(XPLANE_STATS, PB_LEN)

/* Intern @name as valid UTF-8 (see base/utf8.h): names from outside go
 * into proto3 string fields. A name already in the table is valid (the
 * table only holds valid text), so it is found without validating it
 * again; only a new name is checked (and mended). */
static int64_t intern_text(struct strtab *t, const char *name)
{
	size_t n = strlen(name);
	uint32_t known = strtab_find(t, name, n);
	char *fixed;
	int64_t id;

	if (known)
		return known;
	if (utf8_valid(name, n))
		return strtab_intern(t, name, n);
	fixed = strndup(name, n);
	if (!fixed)
		return -ENOMEM;
	utf8_fix(fixed, n);
	id = strtab_intern(t, fixed, n);
	free(fixed);
	return id;
}

int64_t trace_plane_event_id(struct trace_plane *p, const char *name)
{
	return intern_text(&p->events, name);
}

int64_t trace_plane_stat_id(struct trace_plane *p, const char *name)
{
	return intern_text(&p->stats, name);
}


/* Appends one XStat entry (tag, length, body) for @name with a body tail
 * of @vlen bytes already encoded in @v. */
static int put_stat(struct trace_plane *p, struct buf *b, const char *name, const uint8_t *v,
		    size_t vlen)
{
	int64_t id = trace_plane_stat_id(p, name);
	uint8_t hdr[32], *q;

	if (id < 0)
		return (int)id;
	q = pb_put_varint_field(hdr + 8, XSTAT_METADATA_ID, (uint64_t)id);
	/* Frame: tag + len(varint) + [metadata_id field] + value. */
	size_t body = (size_t)(q - (hdr + 8)) + vlen;
	uint8_t pre[16], *r = pb_put_len_hdr(pre, XEVENT_STATS, body);

	buf_put(b, pre, (size_t)(r - pre));
	buf_put(b, hdr + 8, (size_t)(q - (hdr + 8)));
	buf_put(b, v, vlen);
	return b->oom ? -ENOMEM : 0;
}

int trace_stat_u64(struct trace_plane *p, struct buf *b, const char *name, uint64_t v)
{
	uint8_t tmp[16];

	return put_stat(p, b, name, tmp, (size_t)(pb_put_varint_field(tmp, XSTAT_UINT64_VALUE, v) - tmp));
}

int trace_stat_i64(struct trace_plane *p, struct buf *b, const char *name, int64_t v)
{
	uint8_t tmp[16];

	return put_stat(p, b, name, tmp, (size_t)(pb_put_varint_field(tmp, XSTAT_INT64_VALUE, (uint64_t)v) - tmp));
}

int trace_stat_double(struct trace_plane *p, struct buf *b, const char *name, double v)
{
	uint8_t tmp[16];
	uint64_t bits;

	memcpy(&bits, &v, sizeof(bits));
	return put_stat(p, b, name, tmp, (size_t)(pb_put_fixed64_field(tmp, XSTAT_DOUBLE_VALUE, bits) - tmp));
}

int trace_stat_str(struct trace_plane *p, struct buf *b, const char *name, const char *v)
{
	struct buf tmp = BUF_INIT;
	size_t n = strlen(v);
	int r;

	pbb_string_field(&tmp, XSTAT_STR_VALUE, v);
	if (!tmp.oom && !utf8_valid(v, n))
		utf8_fix((char *)tmp.data + tmp.len - n, n);
	r = tmp.oom ? -ENOMEM : put_stat(p, b, name, tmp.data, tmp.len);
	buf_free(&tmp);
	return r;
}

int trace_stat_str_ref(struct trace_plane *p, struct buf *b, const char *name, const char *v)
{
	int64_t ref = trace_plane_stat_id(p, v);
	uint8_t tmp[16];

	if (ref < 0)
		return (int)ref;
	return put_stat(p, b, name, tmp, (size_t)(pb_put_varint_field(tmp, XSTAT_REF_VALUE, (uint64_t)ref) - tmp));
}

int64_t trace_plane_statset(struct trace_plane *p, struct buf *b)
{
	int64_t id;

	if (b->oom) {
		buf_reset(b);
		return -ENOMEM;
	}
	if (b->len == 0)
		return 0;
	id = strtab_intern(&p->statsets, b->data, b->len);
	buf_reset(b);
	return id;
}

size_t trace_stat_entry(const uint8_t *q, const uint8_t *end, uint64_t *ret_id)
{
	struct pb_cursor c = pb_cursor_of(q + 1, (size_t)(end - q - 1)), v;
	uint64_t len;

	/* Tag (any), length, then XStat.metadata_id (field 1, a varint) first,
	 * as every stat builder here writes it. */
	if (pb_read_varint(&c, &len) < 0 || (uint64_t)(c.end - c.p) < len || len < 2 || c.p[0] != PB_KEY1(XSTAT_METADATA_ID, PB_VARINT))
		return 0;
	v = pb_cursor_of(c.p + 1, (size_t)len - 1);
	if (pb_read_varint(&v, ret_id) < 0)
		return 0;
	return (size_t)(c.p - q) + (size_t)len;
}

int trace_plane_set_stats(struct trace_plane *p, struct buf *b)
{
	const uint8_t *q = b->data, *end = b->data + b->len;
	int r = 0;

	if (b->oom) {
		buf_reset(b);
		return -ENOMEM;
	}
	while (q < end) {
		uint64_t id, old_id;
		size_t n = trace_stat_entry(q, end, &id);

		if (!n) {
			r = -EINVAL;
			break;
		}
		/* Drop an earlier value of the same stat, then append this one. */
		struct buf *ps = &p->plane_stats;
		for (size_t off = 0; off < ps->len;) {
			size_t m = trace_stat_entry(ps->data + off, ps->data + ps->len, &old_id);

			if (!m)
				break;
			if (old_id == id) {
				memmove(ps->data + off, ps->data + off + m, ps->len - off - m);
				ps->len -= m;
			} else {
				off += m;
			}
		}
		size_t at = ps->len;
		buf_put(ps, q, n);
		if (ps->oom) {
			r = -ENOMEM;
			break;
		}
		ps->data[at] = TAG_PLANE_STAT;
		q += n;
	}
	buf_reset(b);
	return r;
}
