/* SPDX-License-Identifier: MIT */
/*
 * buf.h - a growable byte buffer. Used for small encodings (stat sets,
 * metadata, messages); the large XSpace output has its own exact-size
 * allocation (xspace.h).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct buf {
	uint8_t *data;
	size_t len;
	size_t cap;
	bool oom; /* sticky: a grow failed; callers check once at the end */
};

#define BUF_INIT {0}

int buf_reserve(struct buf *b, size_t extra);
void buf_free(struct buf *b);
void buf_reset(struct buf *b);

static inline void buf_put(struct buf *b, const void *p, size_t n)
{
	if (b->cap - b->len < n && buf_reserve(b, n) < 0)
		return;
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
}

static inline void buf_putc(struct buf *b, uint8_t c) { buf_put(b, &c, 1); }
