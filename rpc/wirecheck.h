/* SPDX-License-Identifier: MIT */
/*
 * wirecheck.h - refuse request strings that protobuf-c would hand over
 * silently altered.
 *
 * protobuf-c keeps a string field as a C string: an embedded NUL cuts it
 * short without a word ("a\0/../x" arrives as "a"), and it does not check
 * proto3's UTF-8 rule the C++ parser enforces. This walks the wire bytes
 * with the message's descriptor before unpacking and finds the first
 * string field, at any nesting (map entries included), that holds a NUL or
 * is not valid UTF-8. Wire data it cannot walk (field number 0, groups,
 * truncation, nesting past 32) is refused as well: protobuf-c's parser
 * takes some of it (field 0), and its strings would then go unchecked.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

/*
 * 0 when every string field is clean, else -EILSEQ with @where set to the
 * field's path, e.g. "tensorflow.ProfileRequest.opts.session_id", and @why
 * to "contains a NUL byte", "is not valid UTF-8" or "is not a well-formed
 * protobuf message". [any thread]
 */
int wire_strings_check(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len,
		       char *where, size_t where_size, const char **why);
