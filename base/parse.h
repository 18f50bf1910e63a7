/* SPDX-License-Identifier: MIT */
/*
 * parse.h - strict parsers for command-line and config values. They never
 * accept trailing junk, signs on unsigned values, or overflow.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Decimal only. 0, -EINVAL or -ERANGE. */
int safe_atou64(const char *s, uint64_t *ret);
int safe_atou32(const char *s, uint32_t *ret);
/* A number with a unit suffix: digits, then one of @units' suffixes (""
 * = a bare number) exactly; scaled by its mult. 0, -EINVAL or -ERANGE. */
struct parse_unit {
	const char *suffix;
	uint64_t mult;
};
int parse_with_units(const char *s, const struct parse_unit *units, size_t n_units, uint64_t *ret);
/* "500ms", "10s", "10m", "1h" or a bare number of milliseconds. */
int parse_duration_ms(const char *s, uint64_t *ret_ms);
/* "500us", "2ms", "1s"; a bare number is microseconds. */
int parse_duration_us(const char *s, uint64_t *ret_us);
/*
 * Split "host:port", "[v6]:port", "grpc://host:port". @host gets the host
 * without brackets. 0 or -EINVAL.
 */
int parse_host_port(const char *s, char *host, size_t host_size, uint16_t *ret_port);
/* True if @s is usable as one path component: non-empty, at most 255
 * bytes, no '/', not "." or "..", no control characters. */
bool path_component_ok(const char *s);
