/* SPDX-License-Identifier: MIT */
/*
 * wirecheck.c - see wirecheck.h.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/macro.h"
#include "base/utf8.h"
#include "wirecheck.h"

/* Deeper nesting than any request message has; protobuf-c recurses without
 * a bound of its own, so nothing deeper is walked here either. */
#define MAX_NESTING 32

static int get_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	*v = 0;
	for (unsigned shift = 0; shift < 64; shift += 7) {
		if (*p >= end)
			return -1;
		uint8_t b = *(*p)++;

		*v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return 0;
	}
	return -1;
}

/* 1 found (where/why set), 0 clean, -1 malformed. */
static int walk(const ProtobufCMessageDescriptor *d, const uint8_t *p, const uint8_t *end, unsigned nesting,
		char *where, size_t where_size, size_t where_len, const char **why)
{
	if (nesting > MAX_NESTING)
		return -1;
	while (p < end) {
		const ProtobufCFieldDescriptor *f;
		uint64_t key, len;

		if (get_varint(&p, end, &key) < 0 || key >> 3 == 0 || key >> 3 > UINT32_MAX)
			return -1;
		switch (key & 7) {
		case 0:
			if (get_varint(&p, end, &len) < 0)
				return -1;
			continue;
		case 1:
			if (end - p < 8)
				return -1;
			p += 8;
			continue;
		case 5:
			if (end - p < 4)
				return -1;
			p += 4;
			continue;
		case 2:
			break;
		default: /* groups: protobuf-c does not take them either */
			return -1;
		}
		if (get_varint(&p, end, &len) < 0 || len > (uint64_t)(end - p))
			return -1;
		f = protobuf_c_message_descriptor_get_field(d, (unsigned)(key >> 3));
		if (f && (f->type == PROTOBUF_C_TYPE_STRING || f->type == PROTOBUF_C_TYPE_MESSAGE)) {
			int n = snprintf(where + where_len, where_size - where_len, ".%s", f->name);
			size_t wl = n < 0 ? where_len : MIN(where_len + (size_t)n, where_size - 1);
			int r;

			if (f->type == PROTOBUF_C_TYPE_STRING) {
				if (memchr(p, 0, (size_t)len)) {
					*why = "contains a NUL byte";
					return 1;
				}
				if (!utf8_valid((const char *)p, (size_t)len)) {
					*why = "is not valid UTF-8";
					return 1;
				}
			} else {
				r = walk(f->descriptor, p, p + len, nesting + 1, where, where_size, wl, why);
				if (r != 0)
					return r;
			}
			where[where_len] = 0;
		}
		p += len;
	}
	return 0;
}

int wire_strings_check(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len,
		       char *where, size_t where_size, const char **why)
{
	int n;

	if (where_size == 0)
		return 0;
	n = snprintf(where, where_size, "%s", desc->name);
	if (n < 0)
		where[0] = 0;
	/* What this walk cannot read is refused too: protobuf-c's unpacker is
	 * more lenient (it takes field number 0, found by fuzz-request), so
	 * "leave it to the unpacker" would let unchecked strings through. */
	switch (walk(desc, data, data + len, 0, where, where_size, strlen(where), why)) {
	case 0:
		return 0;
	case 1:
		return -EILSEQ;
	default:
		*why = "is not a well-formed protobuf message";
		return -EILSEQ;
	}
}
