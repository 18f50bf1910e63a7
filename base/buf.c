/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>

#include "buf.h"

int buf_reserve(struct buf *b, size_t extra)
{
	size_t want, cap;
	uint8_t *p;

	if (b->oom)
		return -ENOMEM;
	if (b->cap - b->len >= extra)
		return 0;
	want = b->len + extra;
	if (want < b->len)
		goto fail;
	cap = b->cap ? b->cap : 64;
	while (cap < want)
		cap = cap * 2 > cap ? cap * 2 : want;
	p = realloc(b->data, cap);
	if (!p)
		goto fail;
	b->data = p;
	b->cap = cap;
	return 0;
fail:
	b->oom = true;
	return -ENOMEM;
}

void buf_reset(struct buf *b)
{
	b->len = 0;
	b->oom = false;
}

void buf_free(struct buf *b)
{
	free(b->data);
	*b = (struct buf)BUF_INIT;
}
