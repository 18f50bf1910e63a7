/* SPDX-License-Identifier: MIT */
/*
 * fuzz-agent-parse.c - libFuzzer target for the agent wire-format parser
 * (collectors/agent/agent-parse.h): an input is the byte stream of one agent
 * connection, walked exactly as agent-receiver.c's on_read() walks it.
 * Built by clang with -fsanitize=fuzzer,address,undefined (run-fuzz.sh).
 *
 * Beyond "no crash, no sanitizer report", every record the parser yields
 * is checked against its own bounds, and each payload is copied to a
 * buffer of its exact size so that a read past it is an ASan error.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent-parse.h"

/* A violated promise of the parser: stop here, libFuzzer keeps the input. */
#define PROMISE(x) \
	do {       \
		if (!(x)) \
			abort(); \
	} while (0)

static void check_record(const struct agent_rec_view *v, const uint8_t *payload, size_t len, size_t end)
{
	size_t min = agent_rec_min_size(v->type);

	PROMISE(min > 0 && v->type == v->r.h.type);
	PROMISE(v->r.h.size >= min && v->r.h.size % 8 == 0);
	PROMISE(end <= len && v->r.h.size <= end);
	if (v->type == AGENT_REC_PY_STACK) {
		/* Python stacks (v5): the frames the mapping will look up. */
		PROMISE(v->n_py_frames >= 1 && v->n_py_frames <= AGENT_PY_MAX_DEPTH);
		PROMISE(v->r.py_stack.id >= 1 && v->r.py_stack.id <= AGENT_PY_MAX_STACKS);
		for (uint32_t i = 0; i < v->n_py_frames; i++)
			PROMISE(v->py_frames[i] >= 1 && v->py_frames[i] <= AGENT_PY_MAX_FRAMES);
	} else {
		PROMISE(v->n_py_frames == 0);
	}
	if (v->type == AGENT_REC_PY_FRAME)
		PROMISE(v->r.py_frame.id >= 1 && v->r.py_frame.id <= AGENT_PY_MAX_FRAMES);
	if (v->type != AGENT_REC_STRING) {
		PROMISE(v->text == NULL);
		return;
	}
	PROMISE(v->r.string.id >= 1 && v->r.string.id <= AGENT_MAX_STRINGS);
	PROMISE(v->r.string.h.aux <= AGENT_MAX_STRING_LEN);
	PROMISE((const uint8_t *)v->text >= payload + end - v->r.h.size);
	PROMISE((const uint8_t *)v->text + v->r.string.h.aux <= payload + end);
}

/* One frame's payload; 0 or the parser's -errno. */
static int frame(struct agent_parse *ps, const struct agent_frame_hdr *h, const uint8_t *payload)
{
	struct agent_frame f;
	struct agent_rec_iter it;
	struct agent_rec_view v;
	const char *why = NULL;
	int r = agent_parse_frame(ps, h, payload, &f, &why);

	if (r < 0) {
		PROMISE(why && why[0]);
		return r;
	}
	PROMISE(f.kind == h->kind);
	switch (f.kind) {
	case AGENT_FRAME_HELLO:
		PROMISE(ps->hello && ps->version == h->version);
		PROMISE(memchr(f.u.hello.name, 0, sizeof(f.u.hello.name)));
		PROMISE(memchr(f.u.hello.cmdline, 0, sizeof(f.u.hello.cmdline)));
		break;
	case AGENT_FRAME_DEVICE:
		PROMISE(f.u.device.local_ordinal < AGENT_MAX_DEVICES);
		PROMISE(memchr(f.u.device.uuid, 0, sizeof(f.u.device.uuid)));
		PROMISE(memchr(f.u.device.name, 0, sizeof(f.u.device.name)));
		break;
	case AGENT_FRAME_ERROR:
		PROMISE(memchr(f.u.error.text, 0, sizeof(f.u.error.text)));
		break;
	case AGENT_FRAME_STATS:
		if (h->version == 1)
			PROMISE(f.u.stats.cut_records == 0 && f.u.stats.foreign_buffers == 0 && f.u.stats.flags == 0);
		if (h->version < 6)
			PROMISE(f.u.stats.py_timed == 0 && f.u.stats.py_sampler_wall_ns == 0);
		break;
	case AGENT_FRAME_RECORDS:
		agent_rec_iter_init(&it, h->version, f.records, f.records_len);
		while ((r = agent_rec_next(&it, &v, &why)) > 0)
			check_record(&v, payload, h->length, it.off);
		if (r < 0)
			PROMISE(why && why[0]);
		return r;
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct agent_parse ps;
	size_t off = 0;

	memset(&ps, 0, sizeof(ps));
	while (size - off >= sizeof(struct agent_frame_hdr)) {
		struct agent_frame_hdr h;
		const char *why = NULL;
		uint8_t *payload;
		int r;

		memcpy(&h, data + off, sizeof(h));
		r = agent_parse_header(&ps, &h, &why);
		if (r < 0) {
			PROMISE(why && why[0]);
			return 0;
		}
		PROMISE(h.length <= AGENT_FRAME_MAX);
		if (size - off - sizeof(h) < h.length)
			return 0; /* the receiver would wait for more */
		if (r == AGENT_PARSE_FOREIGN) {
			PROMISE(!ps.hello && h.kind == AGENT_FRAME_HELLO && h.length >= 8);
			(void)agent_parse_foreign_pid(data + off + sizeof(h));
			return 0;
		}
		payload = malloc(h.length ? h.length : 1);
		if (!payload)
			return 0;
		memcpy(payload, data + off + sizeof(h), h.length);
		r = frame(&ps, &h, payload);
		free(payload);
		if (r < 0)
			return 0;
		off += sizeof(h) + h.length;
	}
	return 0;
}
