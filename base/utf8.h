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
 * @s[0..@n) made one line of readable text (a log line): control
 * characters, DEL and every byte that is not part of well-formed UTF-8 as
 * "\xNN", a backslash as "\\"; everything else (printable ASCII, valid
 * multi-byte characters) as is. Writes at most @size - 1 bytes and a NUL
 * (@size >= 1), never splitting an escape or a character, and returns the
 * bytes written. The log sink (log.c) runs every message through it, so
 * text a peer chose (agent, process and kernel names, command lines,
 * session ids, NVTX strings) can neither start a forged line nor make
 * the log invalid UTF-8.
 */
size_t utf8_escape(char *out, size_t size, const char *s, size_t n);
/*
 * @s quoted in a message (a status, a log line, a warning) when it came
 * from a peer: at most 64 bytes, anything but printable ASCII as '?', and
 * "..." when cut, so a hostile name can neither forge log lines nor make
 * the message invalid UTF-8. Writes and returns @buf (@size >= 4).
 */
const char *ascii_quote(char *buf, size_t size, const char *s);
