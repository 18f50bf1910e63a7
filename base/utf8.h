/* SPDX-License-Identifier: MIT */
/*
 * utf8.h - keep text that ends up in proto3 `string` fields valid UTF-8.
 *
 * proto3 parsers (Python, C++) reject a message whose string field holds
 * invalid UTF-8, so one odd byte in a kernel name, a process's comm (cut
 * at 15 bytes, possibly inside a character) or an agent's text would make
 * a whole capture unreadable in XProf. Text from outside is checked where
 * it enters the event store, and bad bytes become '?'.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* True if @s[0..@n) is well-formed UTF-8 (no overlongs, no surrogates). */
bool utf8_valid(const char *s, size_t n);
/* Replace every byte that is not part of a well-formed sequence by '?'. */
void utf8_fix(char *s, size_t n);
/*
 * @s quoted in a message (a status, a log line, a warning) when it came
 * from a peer: at most 64 bytes, anything but printable ASCII as '?', and
 * "..." when cut, so a hostile name can neither forge log lines nor make
 * the message invalid UTF-8. Writes and returns @buf (@size >= 4).
 */
const char *ascii_quote(char *buf, size_t size, const char *s);
