/* SPDX-License-Identifier: MIT */
#include <stdint.h>
#include <string.h>

#include "utf8.h"

/* Length of the well-formed sequence at @p (at most @n bytes), 0 if none. */
static size_t seq_len(const uint8_t *p, size_t n)
{
	uint8_t c = p[0];
	size_t len;
	uint8_t lo = 0x80, hi = 0xbf;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		len = 2;
	else if (c >= 0xe0 && c <= 0xef) {
		len = 3;
		if (c == 0xe0)
			lo = 0xa0; /* no overlongs */
		else if (c == 0xed)
			hi = 0x9f; /* no surrogates */
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4;
		if (c == 0xf0)
			lo = 0x90;
		else if (c == 0xf4)
			hi = 0x8f; /* <= U+10FFFF */
	} else {
		return 0;
	}
	if (n < len || p[1] < lo || p[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++)
		if ((p[i] & 0xc0) != 0x80)
			return 0;
	return len;
}

bool utf8_valid(const char *s, size_t n)
{
	const uint8_t *p = (const uint8_t *)s;

	for (size_t i = 0; i < n;) {
		if (p[i] < 0x80) { /* the common case */
			i++;
			continue;
		}
		size_t l = seq_len(p + i, n - i);

		if (!l)
			return false;
		i += l;
	}
	return true;
}

void utf8_fix(char *s, size_t n)
{
	uint8_t *p = (uint8_t *)s;

	for (size_t i = 0; i < n;) {
		size_t l = seq_len(p + i, n - i);

		if (!l) {
			p[i++] = '?';
			continue;
		}
		i += l;
	}
}

size_t utf8_escape(char *out, size_t size, const char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	const uint8_t *p = (const uint8_t *)s;
	size_t o = 0;

	for (size_t i = 0; i < n;) {
		size_t l = p[i] >= 0x20 && p[i] != 0x7f && p[i] != '\\' ? seq_len(p + i, n - i) : 0;

		if (l) {
			if (o + l >= size)
				break;
			memcpy(out + o, p + i, l);
			o += l;
			i += l;
		} else if (p[i] == '\\') {
			if (o + 2 >= size)
				break;
			out[o++] = '\\';
			out[o++] = '\\';
			i++;
		} else {
			if (o + 4 >= size)
				break;
			out[o++] = '\\';
			out[o++] = 'x';
			out[o++] = hex[p[i] >> 4];
			out[o++] = hex[p[i] & 0xf];
			i++;
		}
	}
	if (size)
		out[o] = 0;
	return o;
}

const char *ascii_quote(char *buf, size_t size, const char *s)
{
	size_t i = 0;

	for (; s[i] && i + 4 < size && i < 64; i++)
		buf[i] = (unsigned char)s[i] >= 0x20 && (unsigned char)s[i] < 0x7f ? s[i] : '?';
	if (s[i])
		memcpy(buf + i, "...", 4);
	else
		buf[i] = 0;
	return buf;
}
