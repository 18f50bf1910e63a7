/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "macro.h"
#include "parse.h"

int safe_atou64(const char *s, uint64_t *ret)
{
	uint64_t v = 0;

	if (!s || !*s)
		return -EINVAL;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -EINVAL;
		if (v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
			return -ERANGE;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*ret = v;
	return 0;
}

int safe_atou32(const char *s, uint32_t *ret)
{
	uint64_t v;
	int r = safe_atou64(s, &v);

	if (r < 0)
		return r;
	if (v > UINT32_MAX)
		return -ERANGE;
	*ret = (uint32_t)v;
	return 0;
}

/* Digits then one of @units' suffixes (an empty suffix = a bare number),
 * scaled by its multiplier without overflow. */
int parse_with_units(const char *s, const struct parse_unit *units, size_t n_units, uint64_t *ret)
{
	char num[32];
	size_t n = strspn(s, "0123456789");
	uint64_t v;
	int r;

	if (n == 0 || n >= sizeof(num))
		return -EINVAL;
	memcpy(num, s, n);
	num[n] = 0;
	r = safe_atou64(num, &v);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n_units; i++)
		if (strcmp(s + n, units[i].suffix) == 0) {
			if (v > UINT64_MAX / units[i].mult)
				return -ERANGE;
			*ret = v * units[i].mult;
			return 0;
		}
	return -EINVAL;
}

int parse_duration_ms(const char *s, uint64_t *ret_ms)
{
	static const struct parse_unit units[] = {
		{"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}, {"", 1},
	};

	return parse_with_units(s, units, ARRAY_SIZE(units), ret_ms);
}

int parse_duration_us(const char *s, uint64_t *ret_us)
{
	static const struct parse_unit units[] = {
		{"us", 1}, {"ms", 1000}, {"s", 1000000}, {"", 1},
	};

	return parse_with_units(s, units, ARRAY_SIZE(units), ret_us);
}

int parse_host_port(const char *s, char *host, size_t host_size, uint16_t *ret_port)
{
	const char *colon, *h = s;
	size_t hlen;
	uint32_t port;

	if (strncmp(h, "grpc://", 7) == 0)
		h += 7;
	if (*h == '[') {
		const char *close = strchr(h, ']');

		if (!close || close[1] != ':')
			return -EINVAL;
		h++;
		hlen = (size_t)(close - h);
		colon = close + 1;
	} else {
		colon = strrchr(h, ':');
		if (!colon || memchr(h, ':', (size_t)(colon - h)))
			return -EINVAL; /* bare IPv6 needs brackets */
		hlen = (size_t)(colon - h);
	}
	if (hlen == 0 || hlen >= host_size || memchr(h, '/', hlen))
		return -EINVAL;
	if (safe_atou32(colon + 1, &port) < 0 || port > 65535)
		return -EINVAL;
	memcpy(host, h, hlen);
	host[hlen] = 0;
	*ret_port = (uint16_t)port;
	return 0;
}

bool path_component_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 255 || strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
		return false;
	for (const char *p = s; *p; p++)
		if (*p == '/' || (unsigned char)*p < 0x20 || *p == 0x7f)
			return false;
	return true;
}
