/* SPDX-License-Identifier: MIT */
/*
 * The agent wire-format parser (collectors/agent/agent-parse.h) on its own:
 * every frame kind in both versions, every way a header, a frame or a
 * record can be wrong, and a deterministic mutation loop over a valid
 * stream that must never crash and must only yield records within bounds.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include "agent-parse.h"
#include "harness.h"

/* ---- building streams ------------------------------------------------------ */

struct stream {
	uint8_t b[1 << 16];
	size_t n;
};

static void put_frame(struct stream *s, uint16_t version, uint16_t kind, const void *p, uint32_t len)
{
	struct agent_frame_hdr h;

	memset(&h, 0, sizeof(h));
	h.magic = AGENT_PROTO_MAGIC;
	h.version = version;
	h.kind = kind;
	h.length = len;
	memcpy(s->b + s->n, &h, sizeof(h));
	memcpy(s->b + s->n + sizeof(h), p, len);
	s->n += sizeof(h) + len;
}

static void put_hello(struct stream *s, uint16_t version)
{
	struct agent_hello h;

	memset(&h, 'x', sizeof(h)); /* strings without NUL: the parser adds one */
	h.pid = 4242;
	h.proto_version = version;
	put_frame(s, version, AGENT_FRAME_HELLO, &h, sizeof(h));
}

/* Records of every type into @b; returns the bytes used. */
static size_t put_records(uint8_t *b)
{
	static const char text[] = "kernel(float*)";
	size_t n = 0;
	struct agent_rec_string str;

	memset(&str, 0, sizeof(str));
	str.h.type = AGENT_REC_STRING;
	str.h.aux = sizeof(text) - 1;
	str.h.size = (uint16_t)(sizeof(str) + agent_rec_align(str.h.aux));
	str.id = 1;
	memset(b, 0, str.h.size);
	memcpy(b, &str, sizeof(str));
	memcpy(b + sizeof(str), text, str.h.aux);
	n += str.h.size;
	for (uint16_t t = AGENT_REC_KERNEL; t <= AGENT_REC_API; t++) {
		struct agent_rec h;

		memset(&h, 0, sizeof(h));
		h.type = t;
		h.size = (uint16_t)agent_rec_min_size(t);
		memset(b + n, 0x11 * t, h.size);
		memcpy(b + n, &h, sizeof(h));
		n += h.size;
	}
	return n;
}

/* A whole valid connection in @version: every agent -> daemon kind. */
static void valid_stream(struct stream *s, uint16_t version)
{
	uint8_t rec[1024];
	struct agent_device d;
	struct agent_clock ck;
	struct agent_error e;
	struct agent_flush f;
	struct agent_stats st;

	s->n = 0;
	put_hello(s, version);
	memset(&d, 0, sizeof(d));
	d.local_ordinal = 1;
	memset(d.uuid, 'u', sizeof(d.uuid));
	put_frame(s, version, AGENT_FRAME_DEVICE, &d, sizeof(d));
	memset(&ck, 0, sizeof(ck));
	ck.agent_ns = 1000;
	ck.wall_ns = 5000;
	put_frame(s, version, AGENT_FRAME_CLOCK, &ck, sizeof(ck));
	put_frame(s, version, AGENT_FRAME_RECORDS, rec, (uint32_t)put_records(rec));
	memset(&e, 'e', sizeof(e));
	e.code = AGENT_ERR_NOTICE;
	put_frame(s, version, AGENT_FRAME_ERROR, &e, sizeof(e));
	memset(&f, 0, sizeof(f));
	f.token = 9;
	put_frame(s, version, AGENT_FRAME_FLUSHED, &f, sizeof(f));
	memset(&st, 0x22, sizeof(st));
	put_frame(s, version, AGENT_FRAME_STATS, &st, agent_stats_size(version));
}

/* ---- walking streams as the receiver does ---------------------------------- */

struct walk {
	unsigned frames, records, strings;
	unsigned kinds; /* bit per frame kind seen */
	struct agent_frame last[AGENT_FRAME_STATS + 1];
	const char *why;
};

/* Every record the iterator yields must be within its own bounds. */
static void check_record(const struct agent_rec_view *v, const uint8_t *payload, size_t len, size_t end)
{
	size_t min = agent_rec_min_size(v->type);

	ASSERT_TRUE(min > 0);
	ASSERT_EQ(v->type, v->r.h.type);
	ASSERT_TRUE(v->r.h.size >= min && v->r.h.size % 8 == 0);
	ASSERT_TRUE(end <= len && v->r.h.size <= end);
	if (v->type != AGENT_REC_STRING) {
		ASSERT_TRUE(v->text == NULL);
		return;
	}
	ASSERT_TRUE(v->r.string.id >= 1 && v->r.string.id <= AGENT_MAX_STRINGS);
	ASSERT_TRUE(v->r.string.h.aux <= AGENT_MAX_STRING_LEN);
	ASSERT_TRUE((const uint8_t *)v->text >= payload + end - v->r.h.size);
	ASSERT_TRUE((const uint8_t *)v->text + v->r.string.h.aux <= payload + end);
}

/* 0: the whole stream was valid; -EAGAIN: it ends inside a frame;
 * -EBADMSG / -EPROTO: rejected (w->why); 1: a foreign-version HELLO. Every
 * payload is copied to a buffer of its exact size, so a read past it is an
 * ASan error. */
static int walk(const uint8_t *b, size_t n, struct walk *w)
{
	struct agent_parse ps;
	size_t off = 0;

	memset(&ps, 0, sizeof(ps));
	memset(w, 0, sizeof(*w));
	while (n - off >= sizeof(struct agent_frame_hdr)) {
		struct agent_frame_hdr h;
		struct agent_frame f;
		uint8_t *payload;
		int r;

		memcpy(&h, b + off, sizeof(h));
		r = agent_parse_header(&ps, &h, &w->why);
		if (r < 0)
			return r;
		if (n - off - sizeof(h) < h.length)
			return -EAGAIN;
		if (r == AGENT_PARSE_FOREIGN) {
			ASSERT_TRUE(h.length >= 8);
			return 1;
		}
		payload = malloc(h.length ? h.length : 1);
		ASSERT_TRUE(payload);
		memcpy(payload, b + off + sizeof(h), h.length);
		r = agent_parse_frame(&ps, &h, payload, &f, &w->why);
		if (r == 0 && f.kind == AGENT_FRAME_RECORDS) {
			struct agent_rec_iter it;
			struct agent_rec_view v;

			agent_rec_iter_init(&it, h.version, f.records, f.records_len);
			while ((r = agent_rec_next(&it, &v, &w->why)) > 0) {
				check_record(&v, payload, h.length, it.off);
				w->records++;
				w->strings += v.type == AGENT_REC_STRING;
			}
		}
		if (r == 0 && f.kind <= AGENT_FRAME_STATS) {
			w->kinds |= 1u << f.kind;
			w->last[f.kind] = f;
		}
		free(payload);
		if (r < 0)
			return r;
		w->frames++;
		off += sizeof(h) + h.length;
	}
	return off == n ? 0 : -EAGAIN;
}

static int walk_one(struct stream *s, struct walk *w) { return walk(s->b, s->n, w); }

/* ---- valid frames ------------------------------------------------------------ */

TEST(agent_parse_every_kind_in_both_versions)
{
	for (uint16_t v = AGENT_PROTO_VERSION_MIN; v <= AGENT_PROTO_VERSION; v++) {
		struct stream *s = malloc(sizeof(*s));
		struct walk w;

		valid_stream(s, v);
		ASSERT_EQ(walk_one(s, &w), 0);
		ASSERT_EQ(w.frames, 7);
		ASSERT_EQ(w.records, 7);
		ASSERT_EQ(w.strings, 1);
		ASSERT_EQ(w.kinds, 0xfe);
		ASSERT_EQ(w.last[AGENT_FRAME_HELLO].u.hello.pid, 4242);
		ASSERT_EQ(w.last[AGENT_FRAME_HELLO].u.hello.name[63], 0);
		ASSERT_EQ(w.last[AGENT_FRAME_HELLO].u.hello.cmdline[511], 0);
		ASSERT_EQ(w.last[AGENT_FRAME_DEVICE].u.device.uuid[47], 0);
		ASSERT_EQ(w.last[AGENT_FRAME_DEVICE].u.device.local_ordinal, 1);
		ASSERT_EQ(w.last[AGENT_FRAME_ERROR].u.error.text[247], 0);
		ASSERT_U64_EQ(w.last[AGENT_FRAME_CLOCK].u.clock.wall_ns, 5000);
		ASSERT_U64_EQ(w.last[AGENT_FRAME_FLUSHED].u.flush.token, 9);
		ASSERT_U64_EQ(w.last[AGENT_FRAME_STATS].u.stats.records, 0x2222222222222222ull);
		/* v1 has no cut_records / foreign_buffers / flags: they read 0. */
		ASSERT_U64_EQ(w.last[AGENT_FRAME_STATS].u.stats.cut_records, v == 1 ? 0 : 0x2222222222222222ull);
		ASSERT_EQ(w.last[AGENT_FRAME_STATS].u.stats.flags, v == 1 ? 0 : 0x22222222);
		/* Before v6 there is no cost of the Python stacks: it reads 0. */
		ASSERT_U64_EQ(w.last[AGENT_FRAME_STATS].u.stats.py_sampler_wall_ns, v < 6 ? 0 : 0x2222222222222222ull);
		ASSERT_U64_EQ(w.last[AGENT_FRAME_STATS].u.stats.py_sample_drops, v < 5 ? 0 : 0x2222222222222222ull);
		free(s);
	}
}

TEST(agent_parse_stats_size_per_version)
{
	ASSERT_EQ(agent_stats_size(1), AGENT_STATS_V1_SIZE);
	ASSERT_EQ(agent_stats_size(2), AGENT_STATS_V4_SIZE);
	ASSERT_EQ(agent_stats_size(3), AGENT_STATS_V4_SIZE);
	ASSERT_EQ(agent_stats_size(4), AGENT_STATS_V4_SIZE);
	ASSERT_EQ(agent_stats_size(5), AGENT_STATS_V5_SIZE);
	ASSERT_EQ(agent_stats_size(6), sizeof(struct agent_stats));
	ASSERT_EQ(agent_stats_size(0), 0);
	ASSERT_EQ(agent_stats_size(7), 0);
}

/* ---- headers ------------------------------------------------------------------- */

static int header(struct agent_parse *ps, uint32_t magic, uint16_t version, uint16_t kind, uint32_t len,
		  const char **why)
{
	struct agent_frame_hdr h;

	memset(&h, 0, sizeof(h));
	h.magic = magic;
	h.version = version;
	h.kind = kind;
	h.length = len;
	*why = NULL;
	return agent_parse_header(ps, &h, why);
}

/* @expr gives @err, and the parser said @reason (in the caller's why). */
#define ASSERT_REJECT(expr, err, reason)   \
	do {                               \
		ASSERT_EQ(expr, err);      \
		ASSERT_STREQ(why, reason); \
	} while (0)

TEST(agent_parse_header_rejects)
{
	struct agent_parse ps;
	const char *why;

	memset(&ps, 0, sizeof(ps));
	ASSERT_REJECT(header(&ps, 0xdeadbeef, 2, AGENT_FRAME_HELLO, 608, &why), -EBADMSG, "bad magic");
	ASSERT_REJECT(header(&ps, AGENT_PROTO_MAGIC, 2, AGENT_FRAME_RECORDS, AGENT_FRAME_MAX + 8, &why), -EBADMSG,
		      "frame too long");
	ASSERT_REJECT(header(&ps, AGENT_PROTO_MAGIC, 2, AGENT_FRAME_RECORDS, 0xfffffff0u, &why), -EBADMSG,
		      "frame too long");
	ASSERT_REJECT(header(&ps, AGENT_PROTO_MAGIC, 2, AGENT_FRAME_RECORDS, 12, &why), -EBADMSG,
		      "bad frame length");
	ASSERT_REJECT(header(&ps, AGENT_PROTO_MAGIC, 2, AGENT_FRAME_HELLO, 607, &why), -EBADMSG,
		      "bad frame length");
	ASSERT_REJECT(header(&ps, AGENT_PROTO_MAGIC, 2, 99, 8, &why), -EBADMSG, "unknown frame kind");
	/* Daemon -> agent kinds are never valid from an agent. */
	ASSERT_REJECT(header(&ps, AGENT_PROTO_MAGIC, 2, AGENT_FRAME_START, 16, &why), -EBADMSG,
		      "unknown frame kind");
	ASSERT_REJECT(header(&ps, AGENT_PROTO_MAGIC, 2, AGENT_FRAME_RECORDS, 8, &why), -EBADMSG,
		      "frame before HELLO");
	ASSERT_REJECT(header(&ps, AGENT_PROTO_MAGIC, 1, AGENT_FRAME_STATS, 40, &why), -EBADMSG,
		      "frame before HELLO");
	/* Versions outside the range: a HELLO is named (pid readable), the rest refused. */
	ASSERT_EQ(header(&ps, AGENT_PROTO_MAGIC, 7, AGENT_FRAME_HELLO, 608, &why), AGENT_PARSE_FOREIGN);
	ASSERT_EQ(header(&ps, AGENT_PROTO_MAGIC, 0, AGENT_FRAME_HELLO, 8, &why), AGENT_PARSE_FOREIGN);
	ASSERT_REJECT(header(&ps, AGENT_PROTO_MAGIC, 7, AGENT_FRAME_HELLO, 4, &why), -EPROTO,
		      "protocol version mismatch");
	ASSERT_REJECT(header(&ps, AGENT_PROTO_MAGIC, 7, AGENT_FRAME_HELLO, AGENT_FRAME_MAX + 1, &why), -EPROTO,
		      "protocol version mismatch");
	ASSERT_REJECT(header(&ps, AGENT_PROTO_MAGIC, AGENT_PROTO_VERSION + 1, AGENT_FRAME_CLOCK, 24, &why), -EPROTO,
		      "protocol version mismatch");
	/* STATS size is the version's. */
	ps.hello = true;
	ps.version = 1;
	ASSERT_EQ(header(&ps, AGENT_PROTO_MAGIC, 1, AGENT_FRAME_STATS, 40, &why), 0);
	ASSERT_REJECT(header(&ps, AGENT_PROTO_MAGIC, 1, AGENT_FRAME_STATS, 64, &why), -EBADMSG,
		      "bad frame length");
	ps.version = 2;
	ASSERT_EQ(header(&ps, AGENT_PROTO_MAGIC, 2, AGENT_FRAME_STATS, 64, &why), 0);
	ASSERT_REJECT(header(&ps, AGENT_PROTO_MAGIC, 2, AGENT_FRAME_STATS, 40, &why), -EBADMSG,
		      "bad frame length");
	/* After HELLO: one version, one HELLO. */
	ASSERT_REJECT(header(&ps, AGENT_PROTO_MAGIC, 1, AGENT_FRAME_CLOCK, 24, &why), -EPROTO,
		      "protocol version changed after HELLO");
	ASSERT_REJECT(header(&ps, AGENT_PROTO_MAGIC, 7, AGENT_FRAME_HELLO, 608, &why), -EPROTO,
		      "protocol version changed after HELLO");
	ASSERT_REJECT(header(&ps, AGENT_PROTO_MAGIC, 2, AGENT_FRAME_HELLO, 608, &why), -EBADMSG, "second HELLO");
	ASSERT_EQ(header(&ps, AGENT_PROTO_MAGIC, 2, AGENT_FRAME_RECORDS, AGENT_FRAME_MAX, &why), 0);
	ASSERT_EQ(header(&ps, AGENT_PROTO_MAGIC, 2, AGENT_FRAME_RECORDS, 0, &why), 0);
}

TEST(agent_parse_foreign_hello_names_its_pid)
{
	struct stream *s = malloc(sizeof(*s));
	struct walk w;

	s->n = 0;
	put_hello(s, 9);
	ASSERT_EQ(walk_one(s, &w), 1);
	ASSERT_EQ(agent_parse_foreign_pid(s->b + sizeof(struct agent_frame_hdr)), 4242);
	free(s);
}

TEST(agent_parse_truncated_streams_wait)
{
	struct stream *s = malloc(sizeof(*s));
	struct walk w;
	size_t full;

	valid_stream(s, 2);
	full = s->n;
	/* Every prefix either is whole frames or waits for more; none is an error. */
	for (size_t n = 0; n < full; n++) {
		int r = walk(s->b, n, &w);

		ASSERT_TRUE(r == 0 || r == -EAGAIN);
	}
	free(s);
}

TEST(agent_parse_frame_rejects)
{
	struct stream *s = malloc(sizeof(*s));
	struct agent_device d;
	struct walk w;

	s->n = 0;
	put_hello(s, 2);
	memset(&d, 0, sizeof(d));
	d.local_ordinal = AGENT_MAX_DEVICES;
	put_frame(s, 2, AGENT_FRAME_DEVICE, &d, sizeof(d));
	ASSERT_EQ(walk_one(s, &w), -EBADMSG);
	ASSERT_STREQ(w.why, "device ordinal out of range");
	s->n = 0;
	put_hello(s, 1);
	put_hello(s, 1);
	ASSERT_EQ(walk_one(s, &w), -EBADMSG);
	ASSERT_STREQ(w.why, "second HELLO");
	free(s);
}

/* ---- records ------------------------------------------------------------------- */

static int one_record(const uint8_t *b, size_t len, struct agent_rec_view *v, const char **why)
{
	struct agent_rec_iter it;

	*why = NULL;
	agent_rec_iter_init(&it, AGENT_PROTO_VERSION, b, len);
	return agent_rec_next(&it, v, why);
}

static size_t rec(uint8_t *b, uint16_t type, uint16_t size, uint32_t aux)
{
	struct agent_rec h;

	memset(b, 0, 8192);
	memset(&h, 0, sizeof(h));
	h.type = type;
	h.size = size;
	h.aux = aux;
	memcpy(b, &h, sizeof(h));
	return size;
}

TEST(agent_parse_record_sizes)
{
	static uint8_t b[8192];
	struct agent_rec_view v;
	const char *why;

	for (uint16_t t = AGENT_REC_KERNEL; t <= AGENT_REC_API; t++) {
		uint16_t min = (uint16_t)agent_rec_min_size(t);

		ASSERT_TRUE(min >= 16);
		ASSERT_EQ(one_record(b, rec(b, t, min, 0), &v, &why), 1);
		ASSERT_EQ(v.type, t);
		/* Larger than the struct (a newer agent's longer record) is fine. */
		ASSERT_EQ(one_record(b, rec(b, t, (uint16_t)(min + 64), 0), &v, &why), 1);
		ASSERT_REJECT(one_record(b, rec(b, t, (uint16_t)(min - 8), 0), &v, &why), -EBADMSG, "bad record size");
		ASSERT_REJECT(one_record(b, rec(b, t, (uint16_t)(min + 4), 0), &v, &why), -EBADMSG, "bad record size");
		rec(b, t, 0, 0);
		ASSERT_REJECT(one_record(b, min, &v, &why), -EBADMSG, "bad record size");
		/* Larger than what is left of the payload. */
		rec(b, t, (uint16_t)(min + 8), 0);
		ASSERT_REJECT(one_record(b, min, &v, &why), -EBADMSG, "bad record size");
		rec(b, t, 0xfff8, 0);
		ASSERT_REJECT(one_record(b, sizeof(b), &v, &why), -EBADMSG, "bad record size");
	}
	ASSERT_REJECT(one_record(b, rec(b, 0, 16, 0), &v, &why), -EBADMSG, "unknown record type");
	ASSERT_REJECT(one_record(b, rec(b, 64, 16, 0), &v, &why), -EBADMSG, "unknown record type");
	ASSERT_REJECT(one_record(b, rec(b, 0xffff, 16, 0), &v, &why), -EBADMSG, "unknown record type");
	ASSERT_REJECT(one_record(b, 4, &v, &why), -EBADMSG, "truncated record header");
	ASSERT_EQ(one_record(b, 0, &v, &why), 0);
}

/* The growth rule (v4): a v3 agent's shorter KERNEL, MEMCPY, MEMSET and API
 * read with the v4 fields 0, whatever bytes lie after the record; a v4
 * record carries them. */
TEST(agent_parse_records_grow_at_their_end)
{
	static uint8_t b[512];
	struct agent_rec_kernel k;
	struct agent_rec_api a;
	struct agent_rec_view v;
	const char *why;

	ASSERT_EQ(agent_rec_min_size(AGENT_REC_KERNEL), AGENT_REC_KERNEL_V3_SIZE);
	ASSERT_EQ(agent_rec_full_size(AGENT_REC_KERNEL), sizeof(k));
	ASSERT_EQ(agent_rec_min_size(AGENT_REC_API), AGENT_REC_API_V3_SIZE);
	ASSERT_EQ(agent_rec_full_size(AGENT_REC_API), sizeof(a));
	ASSERT_EQ(agent_rec_min_size(AGENT_REC_MEMCPY), AGENT_REC_MEMCPY_V3_SIZE);
	ASSERT_EQ(agent_rec_min_size(AGENT_REC_MEMSET), AGENT_REC_MEMSET_V3_SIZE);
	memset(&k, 0, sizeof(k));
	k.h.type = AGENT_REC_KERNEL;
	k.h.size = sizeof(k);
	k.graph_id = 7;
	k.graph_node_id = 0x123456789ull;
	memset(b, 0xab, sizeof(b));
	memcpy(b, &k, sizeof(k));
	ASSERT_EQ(one_record(b, sizeof(k), &v, &why), 1);
	ASSERT_EQ(v.r.kernel.graph_id, 7);
	ASSERT_U64_EQ(v.r.kernel.graph_node_id, 0x123456789ull);
	/* The same bytes cut to v3's size: the node id is not read from what follows. */
	k.h.size = AGENT_REC_KERNEL_V3_SIZE;
	memcpy(b, &k, sizeof(k));
	ASSERT_EQ(one_record(b, AGENT_REC_KERNEL_V3_SIZE, &v, &why), 1);
	ASSERT_EQ(v.r.kernel.graph_id, 7);
	ASSERT_U64_EQ(v.r.kernel.graph_node_id, 0);
	memset(&a, 0, sizeof(a));
	a.h.type = AGENT_REC_API;
	a.h.size = AGENT_REC_API_V3_SIZE;
	a.graph_exec_id = 99;
	memset(b, 0xcd, sizeof(b));
	memcpy(b, &a, sizeof(a));
	ASSERT_EQ(one_record(b, AGENT_REC_API_V3_SIZE, &v, &why), 1);
	ASSERT_EQ(v.r.api.graph_exec_id, 0);
	ASSERT_EQ(v.r.api.graph_id, 0);
}

/* PM_METRICS and PM_SAMPLE (v4): counts within AGENT_PM_MAX_METRICS and
 * within the record, the ids and values copied out. */
TEST(agent_parse_pm_records)
{
	static uint8_t b[512];
	struct agent_rec_pm_metrics m;
	struct agent_rec_pm_sample s;
	struct agent_rec_view v;
	const char *why;
	uint32_t ids[3] = { 4, 5, 6 };
	double vals[3] = { 1.5, 0.0, 99.0 };

	memset(&m, 0, sizeof(m));
	m.h.type = AGENT_REC_PM_METRICS;
	m.h.aux = 3;
	m.h.size = (uint16_t)agent_rec_align(sizeof(m) + sizeof(ids));
	m.device = 1;
	memset(b, 0, sizeof(b));
	memcpy(b, &m, sizeof(m));
	memcpy(b + sizeof(m), ids, sizeof(ids));
	ASSERT_EQ(one_record(b, m.h.size, &v, &why), 1);
	ASSERT_EQ(v.n_pm, 3);
	ASSERT_EQ(v.pm_ids[2], 6);
	ASSERT_EQ(v.r.pm_metrics.device, 1);
	m.h.aux = 5; /* one more than the record holds (3 ids padded to 4) */
	memcpy(b, &m, sizeof(m));
	ASSERT_REJECT(one_record(b, m.h.size, &v, &why), -EBADMSG, "bad PM metric count");
	m.h.aux = 0;
	memcpy(b, &m, sizeof(m));
	ASSERT_REJECT(one_record(b, m.h.size, &v, &why), -EBADMSG, "bad PM metric count");
	m.h.aux = AGENT_PM_MAX_METRICS + 1;
	m.h.size = (uint16_t)agent_rec_align(sizeof(m) + m.h.aux * 4u);
	memcpy(b, &m, sizeof(m));
	ASSERT_REJECT(one_record(b, m.h.size, &v, &why), -EBADMSG, "bad PM metric count");

	memset(&s, 0, sizeof(s));
	s.h.type = AGENT_REC_PM_SAMPLE;
	s.h.aux = 3;
	s.h.size = sizeof(s) + sizeof(vals);
	s.start = 100;
	s.end = 200;
	memcpy(b, &s, sizeof(s));
	memcpy(b + sizeof(s), vals, sizeof(vals));
	ASSERT_EQ(one_record(b, s.h.size, &v, &why), 1);
	ASSERT_EQ(v.n_pm, 3);
	ASSERT_TRUE(v.pm_values[2] == 99.0);
	s.end = 99;
	memcpy(b, &s, sizeof(s));
	ASSERT_REJECT(one_record(b, s.h.size, &v, &why), -EBADMSG, "PM sample ends before it starts");
	s.end = 200;
	s.h.aux = 4;
	memcpy(b, &s, sizeof(s));
	ASSERT_REJECT(one_record(b, s.h.size, &v, &why), -EBADMSG, "bad PM value count");
}

/* MEMORY2 and MEM_STATE (v3): sized like the others, and the fields the
 * memory profile adds and subtracts are checked. */
TEST(agent_parse_memory_records)
{
	static uint8_t b[512];
	struct agent_rec_memory2 m;
	struct agent_rec_mem_state st;
	struct agent_rec_view v;
	const char *why;

	ASSERT_EQ(agent_rec_min_size(AGENT_REC_MEMORY2), sizeof(m));
	ASSERT_EQ(agent_rec_min_size(AGENT_REC_MEM_STATE), sizeof(st));
	memset(&m, 0, sizeof(m));
	m.h.type = AGENT_REC_MEMORY2;
	m.h.size = sizeof(m);
	m.op = AGENT_MEMOP_FREE;
	m.pool_type = AGENT_POOL_LOCAL;
	m.bytes = 1234;
	memcpy(b, &m, sizeof(m));
	ASSERT_EQ(one_record(b, sizeof(m), &v, &why), 1);
	ASSERT_EQ(v.type, AGENT_REC_MEMORY2);
	ASSERT_U64_EQ(v.r.memory2.bytes, 1234);
	ASSERT_EQ(v.r.memory2.pool_type, AGENT_POOL_LOCAL);
	for (unsigned op = 0; op < 256; op += 3) {
		if (op == AGENT_MEMOP_ALLOC || op == AGENT_MEMOP_FREE)
			continue;
		m.op = (uint8_t)op;
		memcpy(b, &m, sizeof(m));
		ASSERT_REJECT(one_record(b, sizeof(m), &v, &why), -EBADMSG, "bad memory operation");
	}
	memset(&st, 0, sizeof(st));
	st.h.type = AGENT_REC_MEM_STATE;
	st.h.size = sizeof(st);
	st.device = AGENT_MAX_DEVICES - 1;
	st.source = AGENT_MEMSTATE_DEVICE;
	st.used_bytes = 5;
	memcpy(b, &st, sizeof(st));
	ASSERT_EQ(one_record(b, sizeof(st), &v, &why), 1);
	ASSERT_U64_EQ(v.r.mem_state.used_bytes, 5);
	st.device = AGENT_MAX_DEVICES;
	memcpy(b, &st, sizeof(st));
	ASSERT_REJECT(one_record(b, sizeof(st), &v, &why), -EBADMSG, "bad memory state");
	st.device = 0;
	st.source = AGENT_MEMSTATE_DEVICE + 1;
	memcpy(b, &st, sizeof(st));
	ASSERT_REJECT(one_record(b, sizeof(st), &v, &why), -EBADMSG, "bad memory state");
}

static size_t string_rec(uint8_t *b, uint32_t id, uint32_t aux, uint16_t size)
{
	struct agent_rec_string s;

	rec(b, AGENT_REC_STRING, size, aux);
	memcpy(&s, b, sizeof(s));
	s.id = id;
	memcpy(b, &s, sizeof(s));
	memset(b + sizeof(s), 'k', size > sizeof(s) ? size - sizeof(s) : 0);
	return size;
}

TEST(agent_parse_string_records)
{
	static uint8_t b[8192];
	struct agent_rec_view v;
	const char *why;

	ASSERT_EQ(one_record(b, string_rec(b, 1, 5, 24), &v, &why), 1);
	ASSERT_EQ(v.r.string.id, 1);
	ASSERT_TRUE(v.text == (const char *)b + 16);
	ASSERT_EQ(one_record(b, string_rec(b, AGENT_MAX_STRINGS, 0, 16), &v, &why), 1);
	ASSERT_EQ(one_record(b, string_rec(b, 7, AGENT_MAX_STRING_LEN, 16 + AGENT_MAX_STRING_LEN), &v, &why), 1);
	ASSERT_REJECT(one_record(b, string_rec(b, 0, 5, 24), &v, &why), -EBADMSG, "bad string id");
	ASSERT_REJECT(one_record(b, string_rec(b, AGENT_MAX_STRINGS + 1, 5, 24), &v, &why), -EBADMSG,
		      "bad string id");
	ASSERT_REJECT(one_record(b, string_rec(b, UINT32_MAX, 5, 24), &v, &why), -EBADMSG, "bad string id");
	ASSERT_REJECT(one_record(b, string_rec(b, 1, 9, 24), &v, &why), -EBADMSG, "bad string length");
	ASSERT_REJECT(one_record(b, string_rec(b, 1, AGENT_MAX_STRING_LEN + 8, 16 + AGENT_MAX_STRING_LEN + 8),
				 &v, &why), -EBADMSG, "bad string length");
	ASSERT_REJECT(one_record(b, string_rec(b, 1, UINT32_MAX - 7, 24), &v, &why), -EBADMSG,
		      "bad string length");
	ASSERT_REJECT(one_record(b, string_rec(b, 1, 0, 8), &v, &why), -EBADMSG, "bad record size");
}

/* An NVTX record of @n levels (serial i + 1, text 10 + i) in @size bytes. */
static size_t nvtx_rec(uint8_t *b, uint32_t n, uint16_t size, uint8_t kind, uint64_t start, uint64_t end)
{
	struct agent_rec_nvtx r;

	rec(b, AGENT_REC_NVTX, size, n);
	memcpy(&r, b, sizeof(r));
	r.kind = kind;
	r.start = start;
	r.end = end;
	r.correlation = 77;
	memcpy(b, &r, sizeof(r));
	for (uint32_t i = 0; i < n && sizeof(r) + (i + 1) * 8 <= size; i++) {
		struct agent_nvtx_level l = { .serial = i + 1, .text_id = 10 + i };

		memcpy(b + sizeof(r) + i * 8, &l, sizeof(l));
	}
	return size;
}

TEST(agent_parse_nvtx_records)
{
	static uint8_t b[8192];
	struct agent_rec_view v;
	const char *why;

	ASSERT_EQ(one_record(b, nvtx_rec(b, 2, 56 + 16, AGENT_NVTX_RANGE, 5, 9), &v, &why), 1);
	ASSERT_EQ(v.type, AGENT_REC_NVTX);
	ASSERT_EQ(v.n_levels, 2);
	ASSERT_EQ(v.levels[0].serial, 1);
	ASSERT_EQ(v.levels[1].text_id, 11);
	ASSERT_EQ(v.r.nvtx.correlation, 77);
	ASSERT_EQ(one_record(b, nvtx_rec(b, AGENT_NVTX_MAX_LEVELS, 56 + 8 * AGENT_NVTX_MAX_LEVELS,
					 AGENT_NVTX_LAUNCH, 5, 5), &v, &why), 1);
	ASSERT_EQ(v.n_levels, AGENT_NVTX_MAX_LEVELS);
	/* Room for more levels than it claims is fine (a newer agent's record). */
	ASSERT_EQ(one_record(b, nvtx_rec(b, 1, 56 + 64, AGENT_NVTX_RANGE, 1, 2), &v, &why), 1);
	ASSERT_EQ(v.n_levels, 1);
	ASSERT_REJECT(one_record(b, nvtx_rec(b, 0, 64, AGENT_NVTX_RANGE, 1, 2), &v, &why), -EBADMSG,
		      "bad NVTX level count");
	ASSERT_REJECT(one_record(b, nvtx_rec(b, AGENT_NVTX_MAX_LEVELS + 1, 56 + 8 * 9, AGENT_NVTX_RANGE, 1, 2),
				 &v, &why), -EBADMSG, "bad NVTX level count");
	ASSERT_REJECT(one_record(b, nvtx_rec(b, 3, 56 + 16, AGENT_NVTX_RANGE, 1, 2), &v, &why), -EBADMSG,
		      "bad NVTX level count");
	ASSERT_REJECT(one_record(b, nvtx_rec(b, UINT32_MAX, 56 + 16, AGENT_NVTX_RANGE, 1, 2), &v, &why),
		      -EBADMSG, "bad NVTX level count");
	ASSERT_REJECT(one_record(b, nvtx_rec(b, 1, 64, 0, 1, 2), &v, &why), -EBADMSG, "unknown NVTX record kind");
	ASSERT_REJECT(one_record(b, nvtx_rec(b, 1, 64, 3, 1, 2), &v, &why), -EBADMSG, "unknown NVTX record kind");
	ASSERT_REJECT(one_record(b, nvtx_rec(b, 1, 64, AGENT_NVTX_RANGE, 9, 2), &v, &why), -EBADMSG,
		      "NVTX range ends before it starts");
	/* The fixed part alone, without a level, is too short for any valid record. */
	ASSERT_REJECT(one_record(b, nvtx_rec(b, 1, 56, AGENT_NVTX_RANGE, 1, 2), &v, &why), -EBADMSG,
		      "bad NVTX level count");
}

/* ---- Python records (v5) ---------------------------------------------------------- */

static size_t py_stack_rec(uint8_t *b, uint32_t id, uint32_t flags, uint32_t n, uint16_t size,
			   const uint32_t *frames, uint32_t n_frames)
{
	struct agent_rec_py_stack st;

	rec(b, AGENT_REC_PY_STACK, size, n);
	memcpy(&st, b, sizeof(st));
	st.id = id;
	st.flags = flags;
	memcpy(b, &st, sizeof(st));
	memcpy(b + sizeof(st), frames, n_frames * sizeof(uint32_t));
	return size;
}

static size_t py_frame_rec(uint8_t *b, uint32_t id, uint32_t flags)
{
	struct agent_rec_py_frame f;

	rec(b, AGENT_REC_PY_FRAME, sizeof(f), 0);
	memcpy(&f, b, sizeof(f));
	f.id = id;
	f.file_id = 1;
	f.name_id = 2;
	f.firstlineno = 10;
	f.line = 12;
	f.flags = flags;
	memcpy(b, &f, sizeof(f));
	return sizeof(f);
}

static size_t py_point_rec(uint8_t *b, uint16_t type, uint32_t stack_id)
{
	struct agent_rec_py_launch l;
	struct agent_rec_py_sample sm;

	if (type == AGENT_REC_PY_LAUNCH) {
		rec(b, type, sizeof(l), 0);
		memcpy(&l, b, sizeof(l));
		l.correlation = 5;
		l.stack_id = stack_id;
		memcpy(b, &l, sizeof(l));
		return sizeof(l);
	}
	rec(b, type, sizeof(sm), 0);
	memcpy(&sm, b, sizeof(sm));
	sm.stack_id = stack_id;
	memcpy(b, &sm, sizeof(sm));
	return sizeof(sm);
}

TEST(agent_parse_python_records)
{
	static uint8_t b[8192];
	static uint32_t frames[AGENT_PY_MAX_DEPTH + 2];
	struct agent_rec_view v;
	struct agent_rec_iter it;
	const char *why;

	for (uint32_t i = 0; i < AGENT_PY_MAX_DEPTH + 2; i++)
		frames[i] = i + 1;
	/* PY_FRAME: ids 1..AGENT_PY_MAX_FRAMES, known flags. */
	ASSERT_EQ(one_record(b, py_frame_rec(b, 1, AGENT_PY_FRAME_GENERATOR | AGENT_PY_FRAME_LINE_UNKNOWN), &v,
			     &why), 1);
	ASSERT_EQ(v.type, AGENT_REC_PY_FRAME);
	ASSERT_EQ(v.r.py_frame.line, 12);
	ASSERT_EQ(one_record(b, py_frame_rec(b, AGENT_PY_MAX_FRAMES, 0), &v, &why), 1);
	ASSERT_REJECT(one_record(b, py_frame_rec(b, 0, 0), &v, &why), -EBADMSG, "bad Python frame id");
	ASSERT_REJECT(one_record(b, py_frame_rec(b, AGENT_PY_MAX_FRAMES + 1, 0), &v, &why), -EBADMSG,
		      "bad Python frame id");
	ASSERT_REJECT(one_record(b, py_frame_rec(b, 1, 1u << 2), &v, &why), -EBADMSG, "unknown Python frame flags");
	/* PY_STACK: 1..AGENT_PY_MAX_DEPTH frames that fit, padded to 8. */
	ASSERT_EQ(one_record(b, py_stack_rec(b, 7, AGENT_PY_STACK_TRUNCATED, 3, 16 + 16, frames, 3), &v, &why), 1);
	ASSERT_EQ(v.n_py_frames, 3);
	ASSERT_EQ(v.py_frames[0], 1);
	ASSERT_EQ(v.py_frames[2], 3);
	ASSERT_EQ(v.r.py_stack.id, 7);
	ASSERT_EQ(one_record(b, py_stack_rec(b, AGENT_PY_MAX_STACKS, 0, AGENT_PY_MAX_DEPTH,
					     16 + 4 * AGENT_PY_MAX_DEPTH, frames, AGENT_PY_MAX_DEPTH), &v, &why), 1);
	ASSERT_EQ(v.n_py_frames, AGENT_PY_MAX_DEPTH);
	ASSERT_REJECT(one_record(b, py_stack_rec(b, 7, 0, 0, 24, frames, 1), &v, &why), -EBADMSG,
		      "bad Python stack depth");
	ASSERT_REJECT(one_record(b, py_stack_rec(b, 7, 0, 3, 24, frames, 2), &v, &why), -EBADMSG,
		      "bad Python stack depth");
	ASSERT_REJECT(one_record(b, py_stack_rec(b, 7, 0, AGENT_PY_MAX_DEPTH + 1, 16 + 4 * (AGENT_PY_MAX_DEPTH + 2),
						 frames, AGENT_PY_MAX_DEPTH + 1), &v, &why), -EBADMSG,
		      "bad Python stack depth");
	ASSERT_REJECT(one_record(b, py_stack_rec(b, 7, 0, UINT32_MAX, 24, frames, 2), &v, &why), -EBADMSG,
		      "bad Python stack depth");
	ASSERT_REJECT(one_record(b, py_stack_rec(b, 0, 0, 1, 24, frames, 1), &v, &why), -EBADMSG,
		      "bad Python stack id");
	ASSERT_REJECT(one_record(b, py_stack_rec(b, AGENT_PY_MAX_STACKS + 1, 0, 1, 24, frames, 1), &v, &why),
		      -EBADMSG, "bad Python stack id");
	ASSERT_REJECT(one_record(b, py_stack_rec(b, 7, 2, 1, 24, frames, 1), &v, &why), -EBADMSG,
		      "unknown Python stack flags");
	frames[1] = 0;
	ASSERT_REJECT(one_record(b, py_stack_rec(b, 7, 0, 2, 24, frames, 2), &v, &why), -EBADMSG,
		      "bad Python frame id in a stack");
	frames[1] = AGENT_PY_MAX_FRAMES + 1;
	ASSERT_REJECT(one_record(b, py_stack_rec(b, 7, 0, 2, 24, frames, 2), &v, &why), -EBADMSG,
		      "bad Python frame id in a stack");
	/* PY_LAUNCH / PY_SAMPLE: stack 0 (no Python), DROPPED, or a stack id in range. */
	for (uint16_t t = AGENT_REC_PY_LAUNCH; t <= AGENT_REC_PY_SAMPLE; t++) {
		ASSERT_EQ(one_record(b, py_point_rec(b, t, 0), &v, &why), 1);
		ASSERT_EQ(one_record(b, py_point_rec(b, t, AGENT_PY_STACK_DROPPED), &v, &why), 1);
		ASSERT_EQ(one_record(b, py_point_rec(b, t, AGENT_PY_MAX_STACKS), &v, &why), 1);
		ASSERT_EQ(v.type, t);
		ASSERT_REJECT(one_record(b, py_point_rec(b, t, AGENT_PY_MAX_STACKS + 1), &v, &why), -EBADMSG,
			      "bad Python stack id");
		ASSERT_REJECT(one_record(b, rec(b, t, (uint16_t)(agent_rec_min_size(t) - 8), 0), &v, &why), -EBADMSG,
			      "bad record size");
	}
	/* Only a v5 agent sends them: a v4 connection's is refused, and its
	 * older record types still pass. */
	for (uint16_t t = AGENT_REC_PY_FRAME; t <= AGENT_REC_PY_SAMPLE; t++) {
		size_t n = t == AGENT_REC_PY_FRAME ? py_frame_rec(b, 1, 0) :
			   t == AGENT_REC_PY_STACK ? py_stack_rec(b, 7, 0, 1, 24, frames, 1) :
						     py_point_rec(b, t, 0);

		why = NULL;
		agent_rec_iter_init(&it, 4, b, n);
		ASSERT_EQ(agent_rec_next(&it, &v, &why), -EBADMSG);
		ASSERT_STREQ(why, "record type of a later protocol version");
	}
	agent_rec_iter_init(&it, 4, b, rec(b, AGENT_REC_API, (uint16_t)agent_rec_min_size(AGENT_REC_API), 0));
	ASSERT_EQ(agent_rec_next(&it, &v, &why), 1);
}

/* ---- mutations ------------------------------------------------------------------- */

static uint64_t rnd_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	/* xorshift64: deterministic, so a failure reproduces. */
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return rnd_state;
}

TEST(agent_parse_mutations_never_escape_bounds)
{
	struct stream *base = malloc(sizeof(*base)), *s = malloc(sizeof(*s));
	unsigned outcome[4] = { 0, 0, 0, 0 };

	for (unsigned i = 0; i < 20000; i++) {
		struct walk w;
		unsigned flips = 1 + (unsigned)(rnd() % 8);
		int r;

		valid_stream(base, (uint16_t)(1 + i % 2));
		memcpy(s->b, base->b, base->n);
		s->n = base->n;
		for (unsigned j = 0; j < flips; j++) {
			size_t at = (size_t)(rnd() % s->n);

			switch (rnd() % 4) {
			case 0: s->b[at] ^= (uint8_t)(1u << (rnd() % 8)); break;
			case 1: s->b[at] = (uint8_t)rnd(); break;
			case 2: s->b[at] = (uint8_t)(rnd() % 2 ? 0xff : 0); break;
			default: s->n = at + 1; break; /* truncate */
			}
		}
		r = walk_one(s, &w);
		if (r < 0 && r != -EAGAIN)
			ASSERT_TRUE(w.why && w.why[0]);
		outcome[r == 0 ? 0 : r == -EAGAIN ? 1 : r == 1 ? 2 : 3]++;
	}
	/* The loop reached every outcome: valid, incomplete, rejected. */
	ASSERT_TRUE(outcome[0] > 0 && outcome[1] > 0 && outcome[3] > 0);
	free(base);
	free(s);
}

TEST_MAIN()
