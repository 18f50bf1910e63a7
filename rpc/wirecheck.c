/* SPDX-License-Identifier: MIT */
/*
 * wirecheck.c - see wirecheck.h.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/macro.h"
#include "base/pbread.h"
#include "base/utf8.h"
#include "wirecheck.h"

/* Deeper nesting than any request message has; protobuf-c recurses without
 * a bound of its own, so nothing deeper is walked here either. */
#define MAX_NESTING 32

/* 1 found (where/why set), 0 clean, -1 malformed. */
static int walk(const ProtobufCMessageDescriptor *d, const uint8_t *p, const uint8_t *end, unsigned nesting,
		char *where, size_t where_size, size_t where_len, const char **why)
{
	struct pb_cursor c = pb_cursor_of(p, (size_t)(end - p));
	struct pb_field fl;
	int r;

	if (nesting > MAX_NESTING)
		return -1;
	/* pb_next() refuses field number 0, truncated values and groups
	 * (protobuf-c does not take groups either). */
	while ((r = pb_next(&c, &fl)) > 0) {
		const ProtobufCFieldDescriptor *f;

		if (fl.wt != PB_LEN)
			continue;
		f = protobuf_c_message_descriptor_get_field(d, fl.num);
		if (f && (f->type == PROTOBUF_C_TYPE_STRING || f->type == PROTOBUF_C_TYPE_MESSAGE)) {
			int n = snprintf(where + where_len, where_size - where_len, ".%s", f->name);
			size_t wl = n < 0 ? where_len : MIN(where_len + (size_t)n, where_size - 1);

			if (f->type == PROTOBUF_C_TYPE_STRING) {
				if (memchr(fl.data, 0, fl.len)) {
					*why = "contains a NUL byte";
					return 1;
				}
				if (!utf8_valid((const char *)fl.data, fl.len)) {
					*why = "is not valid UTF-8";
					return 1;
				}
			} else {
				r = walk(f->descriptor, fl.data, fl.data + fl.len, nesting + 1, where, where_size, wl, why);
				if (r != 0)
					return r;
			}
			where[where_len] = 0;
		}
	}
	return r < 0 ? -1 : 0;
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
