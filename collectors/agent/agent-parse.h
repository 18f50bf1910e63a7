/* SPDX-License-Identifier: MIT */
/*
 * agent-parse.h - the agent wire format (agent-proto.h) checked: bytes in,
 * validated frames and records out. Pure: no I/O, no libuv, no trace store,
 * no allocation; every number from the peer is bounded before it is used.
 *
 * A connection's reader calls, per frame:
 *
 *   agent_parse_header()   on the 16 header bytes, before buffering the payload;
 *   agent_parse_frame()    on the whole payload: copies it out, aligned, with
 *                          its strings NUL-terminated and STATS widened to v2;
 *   agent_rec_next()       for a RECORDS payload: one validated record a call.
 *
 * Errors are -EBADMSG (malformed) or -EPROTO (version), with a static reason
 * string in *why for the one log line that closes the connection.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent-proto.h"

/**
 * struct agent_parse - what the parser remembers of one connection.
 * @hello:   a HELLO was accepted;
 * @version: the protocol version of that HELLO's header; every later frame
 *           must carry it (0 before HELLO).
 * Zero-initialise; the owner (the connection) embeds it.
 */
struct agent_parse {
	bool hello;
	uint16_t version;
};

/* agent_parse_header(): a HELLO of a version this profd does not speak. */
#define AGENT_PARSE_FOREIGN 1

/*
 * Check header @h before any payload byte is buffered. 0: @h->length
 * payload bytes follow and agent_parse_frame() takes them;
 * AGENT_PARSE_FOREIGN: a HELLO in a version outside AGENT_PROTO_VERSION_MIN..
 * AGENT_PROTO_VERSION whose payload holds at least the 8 fixed bytes (pid,
 * version): the caller may read agent_parse_foreign_pid() from it, then must
 * close; -EBADMSG / -EPROTO with *why.
 */
int agent_parse_header(const struct agent_parse *ps, const struct agent_frame_hdr *h, const char **why);
/* The pid of a foreign HELLO's payload (at least 8 bytes, see above). */
uint32_t agent_parse_foreign_pid(const uint8_t *payload);

/**
 * struct agent_frame - one checked frame.
 * @kind:    enum agent_frame_kind;
 * @u:       the payload of a fixed-size kind, copied; strings end in NUL,
 *           a v1 STATS has its v2 fields zero;
 * @records: RECORDS: the payload (borrowed from the caller's buffer) and
 *           @records_len, its size; walk it with agent_rec_iter.
 */
struct agent_frame {
	uint16_t kind;
	union {
		struct agent_hello hello;
		struct agent_device device;
		struct agent_clock clock;
		struct agent_error error;
		struct agent_flush flush;
		struct agent_stats stats;
	} u;
	const uint8_t *records;
	size_t records_len;
};

/*
 * The payload @p of a frame whose header agent_parse_header() accepted
 * (returned 0). A HELLO sets @ps's version. 0, or -EBADMSG with *why
 * (second HELLO, device ordinal out of range).
 */
int agent_parse_frame(struct agent_parse *ps, const struct agent_frame_hdr *h, const uint8_t *p,
		      struct agent_frame *ret, const char **why);

/* Payload bytes of a STATS frame in protocol @version (0 = not a version we speak). */
uint32_t agent_stats_size(uint16_t version);

/**
 * union agent_rec_any - the fixed part of any record, copied aligned.
 */
union agent_rec_any {
	struct agent_rec h;
	struct agent_rec_string string;
	struct agent_rec_kernel kernel;
	struct agent_rec_memcpy memcpy;
	struct agent_rec_memset memset;
	struct agent_rec_memory memory;
	struct agent_rec_memory2 memory2;
	struct agent_rec_mem_state mem_state;
	struct agent_rec_overhead overhead;
	struct agent_rec_api api;
	struct agent_rec_nvtx nvtx;
	struct agent_rec_graph graph;
	struct agent_rec_pm_metrics pm_metrics;
	struct agent_rec_pm_sample pm_sample;
	struct agent_rec_py_frame py_frame;
	struct agent_rec_py_stack py_stack;
	struct agent_rec_py_launch py_launch;
	struct agent_rec_py_sample py_sample;
};

/**
 * struct agent_rec_view - one validated record.
 * @type: enum agent_rec_type (= @r.h.type);
 * @r:    its fixed part (@r.h.size bytes were in the payload, 8-aligned,
 *        at least the type's first size, agent_rec_min_size()); fields of
 *        a later version that the record did not carry read 0;
 * @text: STRING: @r.string.h.aux bytes of text (no NUL), borrowed from the
 *        payload; id is 1..AGENT_MAX_STRINGS and the length at most
 *        AGENT_MAX_STRING_LEN. NULL for other types.
 * @levels, @n_levels: NVTX: its n_levels (1..AGENT_NVTX_MAX_LEVELS = aux)
 *        levels, outermost first, copied; kind known, end >= start.
 *        Text ids are not checked here (the mapping treats an unknown id
 *        as no text).
 * @pm_ids, @pm_values, @n_pm: PM_METRICS: its n_pm (1..AGENT_PM_MAX_METRICS
 *        = aux) STRING ids (unchecked, as NVTX's); PM_SAMPLE: its n_pm
 *        (0..AGENT_PM_MAX_METRICS = aux) values, copied (any double, NaN
 *        and infinities included: the mapping checks them); end >= start.
 * @py_frames, @n_py_frames: PY_STACK: its n_py_frames (1..AGENT_PY_MAX_DEPTH
 *        = aux) frame ids, outermost first, copied, each 1..AGENT_PY_MAX_FRAMES
 *        (whether they were defined is the mapping's question); the stack id
 *        is 1..AGENT_PY_MAX_STACKS and its flags known. PY_FRAME: id
 *        1..AGENT_PY_MAX_FRAMES, flags known; PY_LAUNCH / PY_SAMPLE: stack id
 *        0, AGENT_PY_STACK_DROPPED or 1..AGENT_PY_MAX_STACKS. The four
 *        Python types come only from a v5 agent.
 */
struct agent_rec_view {
	uint16_t type;
	union agent_rec_any r;
	const char *text;
	struct agent_nvtx_level levels[AGENT_NVTX_MAX_LEVELS];
	uint32_t n_levels;
	uint32_t n_pm;
	uint32_t pm_ids[AGENT_PM_MAX_METRICS];
	double pm_values[AGENT_PM_MAX_METRICS];
	uint32_t n_py_frames;
	uint32_t py_frames[AGENT_PY_MAX_DEPTH];
};

/**
 * struct agent_rec_iter - a walk over one RECORDS payload.
 * Private; set up by agent_rec_iter_init().
 */
struct agent_rec_iter {
	const uint8_t *p;
	size_t len, off;
	uint16_t version;
};

/* A walk over the RECORDS payload @p (@len bytes) of a connection that
 * speaks protocol @version (its HELLO's): record types of a later
 * version are refused. */
void agent_rec_iter_init(struct agent_rec_iter *it, uint16_t version, const uint8_t *p, size_t len);
/* 1: the next record is in *ret; 0: the payload is done; -EBADMSG with
 * *why: the rest of the payload is malformed (the records before it were
 * valid). After an error the iterator stays at the bad record. */
int agent_rec_next(struct agent_rec_iter *it, struct agent_rec_view *ret, const char **why);
/* Smallest size of a record of @type (its struct in the version that
 * introduced it; records grow at their end), 0 for an unknown type. */
size_t agent_rec_min_size(uint16_t type);
/* Size of @type's struct in this profd's version (>= the min size). */
size_t agent_rec_full_size(uint16_t type);
