/* SPDX-License-Identifier: MIT */
/*
 * hash.h - the one non-cryptographic hash of in-memory keys (the store's
 * interned names, the receiver's kernel-shape cache and NVTX steps, the
 * agent's name and NVTX string tables, profctl top's tables). Not for
 * anything a peer could use to attack a table: every table bounds its
 * probes or its size elsewhere. No value is persisted or compared across
 * processes: each table hashes its own keys. Header-only, so that the
 * in-job agent may use it (tools/check-layers).
 *
 * Multiply-xorshift mixing over two lanes of 8 bytes, so that the
 * multiplies of consecutive words overlap instead of forming one chain
 * (kernel names are ~120 bytes and one is interned per record: the hash
 * was a fifth of the store's build time). The length is mixed in first.
 * The last bytes are read as one 8-byte word that may overlap the previous
 * step (a key under 8 bytes is read in pieces): no library call for the
 * tail, and a key of constant size compiles to straight-line code.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define HASH_K1 0xff51afd7ed558ccdull
#define HASH_K2 0xc4ceb9fe1a85ec53ull

static inline uint64_t hash_step(uint64_t h, uint64_t w)
{
	h = (h ^ w) * HASH_K1;
	return h ^ (h >> 32);
}

static inline uint64_t hash_bytes64(const void *s, size_t len)
{
	const uint8_t *p = s;
	uint64_t a = 0x9e3779b97f4a7c15ull ^ len, b = 0x2545f4914f6cdd1dull, w = 0, v;
	size_t i = 0;

	for (; i + 16 <= len; i += 16) {
		memcpy(&w, p + i, 8);
		memcpy(&v, p + i + 8, 8);
		a = hash_step(a, w);
		b = hash_step(b, v);
	}
	if (i + 8 <= len) {
		memcpy(&w, p + i, 8);
		a = hash_step(a, w);
		i += 8;
	}
	if (i < len) {
		if (len >= 8) {
			memcpy(&w, p + len - 8, 8);
		} else {
			uint32_t lo = 0, hi = 0;

			if (len >= 4) {
				memcpy(&lo, p, 4);
				memcpy(&hi, p + len - 4, 4);
			} else {
				lo = (uint32_t)p[0] | (uint32_t)p[len / 2] << 8 | (uint32_t)p[len - 1] << 16;
			}
			w = (uint64_t)hi << 32 | lo;
		}
		b = hash_step(b, w);
	}
	a ^= b * HASH_K2;
	a ^= a >> 29;
	a *= HASH_K2;
	return a ^ (a >> 32);
}

static inline uint64_t hash_str64(const char *s) { return hash_bytes64(s, strlen(s)); }

/* An integer key (a correlation id): one step, straight-line code. */
static inline uint64_t hash_u64(uint64_t x) { return hash_bytes64(&x, sizeof(x)); }
