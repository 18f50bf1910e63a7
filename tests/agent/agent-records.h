/* SPDX-License-Identifier: MIT */
/*
 * agent-records.h - laying out RECORDS payload records (agent-proto.h) the
 * way libprofd-agent.so does, for the fake agent (fake-agent.c) and the
 * record mapping's unit test (tests/unit/test-agent-map.c). The caller owns
 * the buffer and checks the room.
 */
#pragma once

#include <stdint.h>
#include <string.h>

#include "agent-proto.h"

/* Record @type of @size bytes at @at: zeroed, its header filled. */
static inline void *agent_rec_lay(void *at, uint16_t type, size_t size, uint32_t aux)
{
	struct agent_rec *h = at;

	memset(h, 0, size);
	h->type = type;
	h->size = (uint16_t)size;
	h->aux = aux;
	return h;
}

/* The bytes a STRING record of @s takes (its aux is strlen(@s)). */
static inline size_t agent_rec_string_size(const char *s)
{
	return sizeof(struct agent_rec_string) + agent_rec_align((uint32_t)strlen(s));
}

/* Fill a STRING record laid out with agent_rec_string_size(@s). */
static inline void agent_rec_string_fill(struct agent_rec_string *r, uint32_t id, const char *s)
{
	r->id = id;
	memcpy(r + 1, s, strlen(s));
}
