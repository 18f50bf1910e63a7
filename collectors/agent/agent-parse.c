/* SPDX-License-Identifier: MIT */
/*
 * agent-parse.c - the agent wire format checked (see agent-parse.h).
 *
 * Everything here runs on bytes a local process chose: sizes and ids are
 * compared against what is actually there before anything is read, by
 * subtraction from the known length (never by adding a peer's number to
 * an offset), and every fixed part is memcpy'd out so that no peer-chosen
 * offset is ever dereferenced unaligned.
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "agent-parse.h"

uint32_t agent_stats_size(uint16_t version)
{
	switch (version) {
	case 1: return AGENT_STATS_V1_SIZE;
	case 2:
	case 3:
	case 4: return AGENT_STATS_V4_SIZE;
	case 5: return AGENT_STATS_V5_SIZE;
	case 6: return sizeof(struct agent_stats);
	default: return 0;
	}
}
_Static_assert(AGENT_STATS_V5_SIZE == offsetof(struct agent_stats, py_timed), "v5's STATS ends at py_timed");
_Static_assert(AGENT_PROTO_VERSION == 6, "agent_stats_size() names every version this profd speaks");

static bool version_known(uint16_t v) { return v >= AGENT_PROTO_VERSION_MIN && v <= AGENT_PROTO_VERSION; }

/* Bounds of each kind's payload in @version: exact size, or up to
 * AGENT_FRAME_MAX. 1 fits, 0 does not, -1 no such kind. */
static int frame_len_ok(uint16_t version, uint16_t kind, uint32_t len)
{
	switch (kind) {
	case AGENT_FRAME_HELLO: return len == sizeof(struct agent_hello);
	case AGENT_FRAME_DEVICE: return len == sizeof(struct agent_device);
	case AGENT_FRAME_CLOCK: return len == sizeof(struct agent_clock);
	case AGENT_FRAME_RECORDS: return len <= AGENT_FRAME_MAX && len % 8 == 0;
	case AGENT_FRAME_ERROR: return len == sizeof(struct agent_error);
	case AGENT_FRAME_FLUSHED: return len == sizeof(struct agent_flush);
	case AGENT_FRAME_STATS: return len == agent_stats_size(version);
	default: return -1;
	}
}

int agent_parse_header(const struct agent_parse *ps, const struct agent_frame_hdr *h, const char **why)
{
	int fits;

	if (h->magic != AGENT_PROTO_MAGIC) {
		*why = "bad magic";
		return -EBADMSG;
	}
	if (ps->hello && h->version != ps->version) {
		/* One connection, one version: the one its HELLO spoke. */
		*why = "protocol version changed after HELLO";
		return -EPROTO;
	}
	if (!ps->hello && !version_known(h->version)) {
		/* Name the process if we can: HELLO's first 8 bytes are fixed. */
		if (h->kind == AGENT_FRAME_HELLO && h->length >= 8 && h->length <= AGENT_FRAME_MAX)
			return AGENT_PARSE_FOREIGN;
		*why = "protocol version mismatch";
		return -EPROTO;
	}
	fits = frame_len_ok(h->version, h->kind, h->length);
	if (fits <= 0) {
		*why = h->length > AGENT_FRAME_MAX ? "frame too long" :
		       fits == 0                   ? "bad frame length" :
						     "unknown frame kind";
		return -EBADMSG;
	}
	if (!ps->hello && h->kind != AGENT_FRAME_HELLO) {
		*why = "frame before HELLO";
		return -EBADMSG;
	}
	if (ps->hello && h->kind == AGENT_FRAME_HELLO) {
		*why = "second HELLO";
		return -EBADMSG;
	}
	return 0;
}

uint32_t agent_parse_foreign_pid(const uint8_t *payload)
{
	uint32_t pid;

	memcpy(&pid, payload, sizeof(pid));
	return pid;
}

/* Fixed-size strings from the peer end in NUL whatever it sent. */
#define FORCE_NUL(a) ((a)[sizeof(a) - 1] = 0)

int agent_parse_frame(struct agent_parse *ps, const struct agent_frame_hdr *h, const uint8_t *p,
		      struct agent_frame *ret, const char **why)
{
	/* The header is checked again, so that the parser alone is safe to
	 * feed anything (the unit test and the fuzzer do). */
	int r = agent_parse_header(ps, h, why);

	if (r == AGENT_PARSE_FOREIGN) {
		*why = "protocol version mismatch";
		return -EPROTO;
	}
	if (r < 0)
		return r;
	ret->kind = h->kind;
	ret->records = NULL;
	ret->records_len = 0;
	switch (h->kind) {
	case AGENT_FRAME_HELLO:
		memcpy(&ret->u.hello, p, sizeof(ret->u.hello));
		FORCE_NUL(ret->u.hello.name);
		FORCE_NUL(ret->u.hello.cmdline);
		ps->hello = true;
		ps->version = h->version;
		return 0;
	case AGENT_FRAME_DEVICE:
		memcpy(&ret->u.device, p, sizeof(ret->u.device));
		FORCE_NUL(ret->u.device.uuid);
		FORCE_NUL(ret->u.device.pci_bus_id);
		FORCE_NUL(ret->u.device.name);
		if (ret->u.device.local_ordinal >= AGENT_MAX_DEVICES) {
			*why = "device ordinal out of range";
			return -EBADMSG;
		}
		return 0;
	case AGENT_FRAME_CLOCK:
		memcpy(&ret->u.clock, p, sizeof(ret->u.clock));
		return 0;
	case AGENT_FRAME_RECORDS:
		ret->records = p;
		ret->records_len = h->length;
		return 0;
	case AGENT_FRAME_ERROR:
		memcpy(&ret->u.error, p, sizeof(ret->u.error));
		FORCE_NUL(ret->u.error.text);
		return 0;
	case AGENT_FRAME_FLUSHED:
		memcpy(&ret->u.flush, p, sizeof(ret->u.flush));
		return 0;
	case AGENT_FRAME_STATS:
		/* An older agent sends a prefix; the fields it does not know are 0. */
		memset(&ret->u.stats, 0, sizeof(ret->u.stats));
		memcpy(&ret->u.stats, p, h->length);
		return 0;
	}
	*why = "unknown frame kind";
	return -EBADMSG;
}

size_t agent_rec_full_size(uint16_t type)
{
	switch (type) {
	case AGENT_REC_STRING: return sizeof(struct agent_rec_string);
	case AGENT_REC_KERNEL: return sizeof(struct agent_rec_kernel);
	case AGENT_REC_MEMCPY: return sizeof(struct agent_rec_memcpy);
	case AGENT_REC_MEMSET: return sizeof(struct agent_rec_memset);
	case AGENT_REC_MEMORY: return sizeof(struct agent_rec_memory);
	case AGENT_REC_OVERHEAD: return sizeof(struct agent_rec_overhead);
	case AGENT_REC_API: return sizeof(struct agent_rec_api);
	case AGENT_REC_NVTX: return sizeof(struct agent_rec_nvtx);
	case AGENT_REC_MEM_STATE: return sizeof(struct agent_rec_mem_state);
	case AGENT_REC_MEMORY2: return sizeof(struct agent_rec_memory2);
	case AGENT_REC_GRAPH: return sizeof(struct agent_rec_graph);
	case AGENT_REC_PM_METRICS: return sizeof(struct agent_rec_pm_metrics);
	case AGENT_REC_PM_SAMPLE: return sizeof(struct agent_rec_pm_sample);
	case AGENT_REC_PY_FRAME: return sizeof(struct agent_rec_py_frame);
	case AGENT_REC_PY_STACK: return sizeof(struct agent_rec_py_stack);
	case AGENT_REC_PY_LAUNCH: return sizeof(struct agent_rec_py_launch);
	case AGENT_REC_PY_SAMPLE: return sizeof(struct agent_rec_py_sample);
	default: return 0;
	}
}

/* The v3 sizes of the types that grew in v4 (the growth rule, agent-proto.h). */
size_t agent_rec_min_size(uint16_t type)
{
	switch (type) {
	case AGENT_REC_KERNEL: return AGENT_REC_KERNEL_V3_SIZE;
	case AGENT_REC_MEMCPY: return AGENT_REC_MEMCPY_V3_SIZE;
	case AGENT_REC_MEMSET: return AGENT_REC_MEMSET_V3_SIZE;
	case AGENT_REC_API: return AGENT_REC_API_V3_SIZE;
	default: return agent_rec_full_size(type);
	}
}

void agent_rec_iter_init(struct agent_rec_iter *it, uint16_t version, const uint8_t *p, size_t len)
{
	it->p = p;
	it->len = len;
	it->off = 0;
	it->version = version;
}

/* The protocol version that introduced record @type (agent-proto.h's
 * history). Only the Python types are held to it: older types were always
 * taken from any version, and an agent that sent them early still works. */
static uint16_t rec_since(uint16_t type)
{
	switch (type) {
	case AGENT_REC_PY_FRAME:
	case AGENT_REC_PY_STACK:
	case AGENT_REC_PY_LAUNCH:
	case AGENT_REC_PY_SAMPLE: return 5;
	default: return 0;
	}
}

/* A stack id where a PY_LAUNCH or PY_SAMPLE names one. */
static bool py_stack_ref_ok(uint32_t id)
{
	return id == 0 || id == AGENT_PY_STACK_DROPPED || id <= AGENT_PY_MAX_STACKS;
}

/* The Python records (v5): ids within the per-connection bounds, flags
 * this profd knows, PY_STACK's aux frame ids (1..AGENT_PY_MAX_DEPTH) in
 * the record. Frame ids of a stack are bounded here; whether they were
 * defined is the mapping's (agent-py.c) question. */
static int check_py(const uint8_t *at, struct agent_rec_view *ret, const char **why)
{
	const uint32_t frame_flags = AGENT_PY_FRAME_GENERATOR | AGENT_PY_FRAME_LINE_UNKNOWN;

	switch (ret->type) {
	case AGENT_REC_PY_FRAME: {
		const struct agent_rec_py_frame *f = &ret->r.py_frame;

		if (f->id == 0 || f->id > AGENT_PY_MAX_FRAMES) {
			*why = "bad Python frame id";
			return -EBADMSG;
		}
		if (f->flags & ~frame_flags) {
			*why = "unknown Python frame flags";
			return -EBADMSG;
		}
		return 0;
	}
	case AGENT_REC_PY_STACK: {
		const struct agent_rec_py_stack *st = &ret->r.py_stack;
		uint32_t k = st->h.aux;

		if (st->id == 0 || st->id > AGENT_PY_MAX_STACKS) {
			*why = "bad Python stack id";
			return -EBADMSG;
		}
		if (st->flags & ~(uint32_t)AGENT_PY_STACK_TRUNCATED) {
			*why = "unknown Python stack flags";
			return -EBADMSG;
		}
		/* k <= AGENT_PY_MAX_DEPTH first: then the product cannot wrap. */
		if (k == 0 || k > AGENT_PY_MAX_DEPTH || sizeof(*st) + k * sizeof(uint32_t) > st->h.size) {
			*why = "bad Python stack depth";
			return -EBADMSG;
		}
		memcpy(ret->py_frames, at + sizeof(*st), k * sizeof(uint32_t));
		for (uint32_t i = 0; i < k; i++)
			if (ret->py_frames[i] == 0 || ret->py_frames[i] > AGENT_PY_MAX_FRAMES) {
				*why = "bad Python frame id in a stack";
				return -EBADMSG;
			}
		ret->n_py_frames = k;
		return 0;
	}
	case AGENT_REC_PY_LAUNCH:
	case AGENT_REC_PY_SAMPLE:
		if (!py_stack_ref_ok(ret->type == AGENT_REC_PY_LAUNCH ? ret->r.py_launch.stack_id
								     : ret->r.py_sample.stack_id)) {
			*why = "bad Python stack id";
			return -EBADMSG;
		}
		return 0;
	default: return 0;
	}
}

/* NVTX: aux levels (1..AGENT_NVTX_MAX_LEVELS) must fit in the record, its
 * kind be known, and a RANGE end no earlier than it starts. */
static int check_nvtx(const struct agent_rec_nvtx *n, const uint8_t *at, struct agent_rec_view *ret,
		      const char **why)
{
	uint32_t k = n->h.aux;

	if (k == 0 || k > AGENT_NVTX_MAX_LEVELS || sizeof(*n) + k * sizeof(struct agent_nvtx_level) > n->h.size) {
		*why = "bad NVTX level count";
		return -EBADMSG;
	}
	if (n->kind != AGENT_NVTX_RANGE && n->kind != AGENT_NVTX_LAUNCH) {
		*why = "unknown NVTX record kind";
		return -EBADMSG;
	}
	if (n->end < n->start) {
		*why = "NVTX range ends before it starts";
		return -EBADMSG;
	}
	memcpy(ret->levels, at + sizeof(*n), k * sizeof(struct agent_nvtx_level));
	ret->n_levels = k;
	return 0;
}

/* PM_METRICS: aux names (1..AGENT_PM_MAX_METRICS) must fit; PM_SAMPLE: aux
 * values (0..AGENT_PM_MAX_METRICS) must fit and the interval not run
 * backwards. */
static int check_pm(const struct agent_rec_view *v, const uint8_t *at, struct agent_rec_view *ret,
		    const char **why)
{
	uint32_t k = v->r.h.aux;
	size_t fixed = agent_rec_full_size(v->type);

	if (v->type == AGENT_REC_PM_METRICS) {
		if (k == 0 || k > AGENT_PM_MAX_METRICS || fixed + k * sizeof(uint32_t) > v->r.h.size) {
			*why = "bad PM metric count";
			return -EBADMSG;
		}
		memcpy(ret->pm_ids, at + fixed, k * sizeof(uint32_t));
	} else {
		if (k > AGENT_PM_MAX_METRICS || fixed + k * sizeof(double) > v->r.h.size) {
			*why = "bad PM value count";
			return -EBADMSG;
		}
		if (v->r.pm_sample.end < v->r.pm_sample.start) {
			*why = "PM sample ends before it starts";
			return -EBADMSG;
		}
		memcpy(ret->pm_values, at + fixed, k * sizeof(double));
	}
	ret->n_pm = k;
	return 0;
}

int agent_rec_next(struct agent_rec_iter *it, struct agent_rec_view *ret, const char **why)
{
	const uint8_t *at = it->p + it->off;
	size_t left = it->len - it->off;
	struct agent_rec h;
	size_t min, full;

	if (left == 0)
		return 0;
	if (left < sizeof(h)) {
		*why = "truncated record header";
		return -EBADMSG;
	}
	memcpy(&h, at, sizeof(h));
	min = agent_rec_min_size(h.type);
	if (!min) {
		*why = "unknown record type";
		return -EBADMSG;
	}
	if (it->version < rec_since(h.type)) {
		*why = "record type of a later protocol version";
		return -EBADMSG;
	}
	if (h.size < min || h.size % 8 || h.size > left) {
		*why = "bad record size";
		return -EBADMSG;
	}
	ret->type = h.type;
	ret->text = NULL;
	ret->n_levels = 0;
	ret->n_pm = 0;
	ret->n_py_frames = 0;
	/* Growth rule: copy what the sender's version had, zero the rest. */
	full = agent_rec_full_size(h.type);
	if (h.size < full) {
		memcpy(&ret->r, at, h.size);
		memset((uint8_t *)&ret->r + h.size, 0, full - h.size);
	} else {
		memcpy(&ret->r, at, full);
	}
	if (h.type == AGENT_REC_NVTX && check_nvtx(&ret->r.nvtx, at, ret, why) < 0)
		return -EBADMSG;
	if ((h.type == AGENT_REC_PM_METRICS || h.type == AGENT_REC_PM_SAMPLE) && check_pm(ret, at, ret, why) < 0)
		return -EBADMSG;
	if (check_py(at, ret, why) < 0)
		return -EBADMSG;
	if (h.type == AGENT_REC_STRING) {
		/* aux <= AGENT_MAX_STRING_LEN first: then min + aux cannot wrap. */
		if (h.aux > AGENT_MAX_STRING_LEN || min + h.aux > h.size) {
			*why = "bad string length";
			return -EBADMSG;
		}
		if (ret->r.string.id == 0 || ret->r.string.id > AGENT_MAX_STRINGS) {
			*why = "bad string id";
			return -EBADMSG;
		}
		ret->text = (const char *)at + min;
	}
	/* The memory profile's running totals add and subtract these: a
	 * record that is neither an allocation nor a release, or a state of
	 * a device no process can have, is a broken agent. */
	if (h.type == AGENT_REC_MEMORY2 && ret->r.memory2.op != AGENT_MEMOP_ALLOC &&
	    ret->r.memory2.op != AGENT_MEMOP_FREE) {
		*why = "bad memory operation";
		return -EBADMSG;
	}
	if (h.type == AGENT_REC_MEM_STATE &&
	    (ret->r.mem_state.device >= AGENT_MAX_DEVICES || ret->r.mem_state.source > AGENT_MEMSTATE_DEVICE)) {
		*why = "bad memory state";
		return -EBADMSG;
	}
	it->off += h.size;
	return 1;
}
