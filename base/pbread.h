/* SPDX-License-Identifier: MIT */
/*
 * pbread.h - the one protobuf wire-format reader (pbwire.h writes): a
 * cursor over a byte range read field by field, for the request check
 * (rpc/wirecheck.c), the XSpace pull parser (tools/profctl/xspace-reader.c) and
 * the stat-set index (xspace/trace.c).
 *
 * Every byte read may come from a peer: each read is bounded by the
 * cursor's end, a varint longer than 10 bytes is refused, and a length
 * is checked against the bytes left before anything is skipped. Nothing
 * is allocated and nothing is copied: a length-delimited field is a view
 * into the range. Header-only: the callers' loops inline it.
 */
#pragma once

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

/* Wire types (the protobuf encoding spec). */
enum { PB_VARINT = 0, PB_I64 = 1, PB_LEN = 2, PB_I32 = 5 };

/** struct pb_cursor - a byte range being read field by field. */
struct pb_cursor {
	const uint8_t *p;
	const uint8_t *end;
};

/**
 * struct pb_field - one decoded field.
 * @num:  field number.
 * @wt:   wire type (PB_VARINT, PB_I64 fixed64, PB_LEN length-delimited, PB_I32 fixed32).
 * @u:    the value of a varint / fixed64 / fixed32 field.
 * @data, @len: the payload of a length-delimited field (a view).
 */
struct pb_field {
	uint32_t num;
	int wt;
	uint64_t u;
	const uint8_t *data;
	size_t len;
};

static inline struct pb_cursor pb_cursor_of(const void *p, size_t len)
{
	return (struct pb_cursor){.p = p, .end = (const uint8_t *)p + len};
}

/* A varint at @c into *@ret: 0, or -EBADMSG when it runs past the end or
 * over 10 bytes (then *@ret is unset and @c is somewhere inside it). */
static inline int pb_read_varint(struct pb_cursor *c, uint64_t *ret)
{
	uint64_t v = 0;

	for (unsigned shift = 0; shift < 64; shift += 7) {
		if (c->p >= c->end)
			return -EBADMSG;
		uint8_t b = *c->p++;

		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*ret = v;
			return 0;
		}
	}
	return -EBADMSG;
}

/* Next field of @c: 1, 0 at the end, -EBADMSG for what protobuf does not
 * allow (field number 0 or over 2^32-1, a truncated value, groups). */
static inline int pb_next(struct pb_cursor *c, struct pb_field *f)
{
	uint64_t key, n;

	if (c->p >= c->end)
		return 0;
	if (pb_read_varint(c, &key) < 0 || (key >> 3) == 0 || (key >> 3) > UINT32_MAX)
		return -EBADMSG;
	f->num = (uint32_t)(key >> 3);
	f->wt = (int)(key & 7);
	f->data = NULL;
	f->len = 0;
	f->u = 0;
	switch (f->wt) {
	case PB_VARINT:
		return pb_read_varint(c, &f->u) < 0 ? -EBADMSG : 1;
	case PB_I64:
		if (c->end - c->p < 8)
			return -EBADMSG;
		for (int i = 7; i >= 0; i--)
			f->u = (f->u << 8) | c->p[i];
		c->p += 8;
		return 1;
	case PB_I32:
		if (c->end - c->p < 4)
			return -EBADMSG;
		f->u = (uint64_t)c->p[0] | (uint64_t)c->p[1] << 8 | (uint64_t)c->p[2] << 16 |
		       (uint64_t)c->p[3] << 24;
		c->p += 4;
		return 1;
	case PB_LEN:
		if (pb_read_varint(c, &n) < 0 || n > (uint64_t)(c->end - c->p))
			return -EBADMSG;
		f->data = c->p;
		f->len = (size_t)n;
		c->p += n;
		return 1;
	default: /* groups (3, 4) and 6, 7: no message we read uses them */
		return -EBADMSG;
	}
}
