/* SPDX-License-Identifier: MIT */
/*
 * pbwire.h - protobuf wire-format primitives for the hand-written encoders
 * (the XSpace writer and small replies); pbread.h reads. Two families:
 *   pb_*_size()  bytes a field will take, to size messages before writing;
 *   pb_put_*()   write into a raw cursor (caller guarantees room) and return
 *                the advanced cursor;
 *   pbb_*()      append to a struct buf.
 * Field numbers and wire types follow the protobuf encoding spec.
 */
#pragma once

#include <stdint.h>
#include <string.h>

#include "buf.h"
#include "pbread.h" /* the wire types, PB_VARINT.. */

/* Without a loop: the encoder sizes every record's fields with it. */
static inline size_t pb_varint_size(uint64_t v)
{
	unsigned bits = 64 - (unsigned)__builtin_clzll(v | 1);

	return (bits * 9 + 64) >> 6; /* == ceil(bits / 7) for 1..64 */
}

static inline size_t pb_tag_size(uint32_t field) { return pb_varint_size((uint64_t)field << 3); }

/* Size of a varint field (int64 fields encode negatives as 10-byte uint64). */
static inline size_t pb_varint_field_size(uint32_t field, uint64_t v)
{
	return pb_tag_size(field) + pb_varint_size(v);
}

static inline size_t pb_len_field_size(uint32_t field, size_t len)
{
	return pb_tag_size(field) + pb_varint_size(len) + len;
}

static inline uint8_t *pb_put_varint(uint8_t *p, uint64_t v)
{
	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	return p;
}

static inline uint8_t *pb_put_tag(uint8_t *p, uint32_t field, int wt)
{
	return pb_put_varint(p, ((uint64_t)field << 3) | (uint32_t)wt);
}

static inline uint8_t *pb_put_varint_field(uint8_t *p, uint32_t field, uint64_t v)
{
	return pb_put_varint(pb_put_tag(p, field, PB_VARINT), v);
}

static inline uint8_t *pb_put_len_hdr(uint8_t *p, uint32_t field, size_t len)
{
	return pb_put_varint(pb_put_tag(p, field, PB_LEN), len);
}

static inline uint8_t *pb_put_bytes_field(uint8_t *p, uint32_t field, const void *d, size_t len)
{
	p = pb_put_len_hdr(p, field, len);
	memcpy(p, d, len);
	return p + len;
}

static inline uint8_t *pb_put_fixed64_field(uint8_t *p, uint32_t field, uint64_t v)
{
	p = pb_put_tag(p, field, PB_I64);
	for (int i = 0; i < 8; i++)
		*p++ = (uint8_t)(v >> (8 * i));
	return p;
}

/* Appending variants; a failed grow sets b->oom. */
static inline void pbb_varint_field(struct buf *b, uint32_t field, uint64_t v)
{
	uint8_t tmp[24];

	buf_put(b, tmp, (size_t)(pb_put_varint_field(tmp, field, v) - tmp));
}

static inline void pbb_bytes_field(struct buf *b, uint32_t field, const void *d, size_t len)
{
	uint8_t tmp[16];

	buf_put(b, tmp, (size_t)(pb_put_len_hdr(tmp, field, len) - tmp));
	buf_put(b, d, len);
}

static inline void pbb_string_field(struct buf *b, uint32_t field, const char *s)
{
	pbb_bytes_field(b, field, s, strlen(s));
}

static inline void pbb_fixed64_field(struct buf *b, uint32_t field, uint64_t v)
{
	uint8_t tmp[16];

	buf_put(b, tmp, (size_t)(pb_put_fixed64_field(tmp, field, v) - tmp));
}
