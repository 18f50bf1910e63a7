/* SPDX-License-Identifier: MIT */
/*
 * agent-map.c - validated agent records -> the trace store (agent-map.h).
 *
 * DESIGN
 * ------
 * Mapping to XSpace (docs/protocol.md "The XSpace", docs/agent.md):
 *   - device records go to /device:GPU:<n>, n = gpu_map_id(device UUID), so
 *     ranks that each call their GPU "device 0" land on the right plane;
 *   - one line per (process, stream), named "Stream #<id>(Compute,...)"
 *     from the event types seen (XProf reads the name: "Compute"), with the
 *     display name "<comm> <pid> / Stream #<id>(...)" (what the trace
 *     viewer shows);
 *   - host API calls go to /host:CPU, one line per (process, thread), named
 *     "<comm> (pid <pid>)/tid <tid>";
 *   - line ids: 1, 2, ... per plane in order of first appearance. XProf
 *     keeps only the low 32 bits of a line id as the track id, and takes
 *     ids from 0xdeadbeef up as its own derived lines, so ids built from
 *     pid << 32 | tid merged two containers' tid 1 into one track. Whose a
 *     line is lives in the map's line index (struct line_slot), not in it;
 *   - correlation_id (uint64) = pid << 32 | CUPTI correlation id on both
 *     sides, so launch->kernel flows never cross processes.
 * Lines are found through a small open-addressed cache; kernels repeat, so
 * a launch shape's metadata id and stat set are cached too (struct kshape).
 *
 * Four files, by job (agent-map-parts.h is what they share):
 *   agent-map.c       this one: the map and its sources, the inputs
 *                     (strings, DEVICE, CLOCK, a RECORDS payload handed to
 *                     the mapper of each record type);
 *   agent-lines.c     planes, lines, times, strings and notes: the write
 *                     side of every mapper (agent-sink.h);
 *   agent-records.c   activity records -> events;
 *   agent-describe.c  what a closing window gets: capabilities, versions,
 *                     notes, steps, the memory profile and derived lines.
 * agent-nvtx.c, agent-pm.c and agent-py.c map their record types through
 * agent-sink.h.
 */
#define LOG_TOPIC "collector.agent"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent-map.h"
#include "agent-map-parts.h"
#include "agent-nvtx.h"
#include "agent-pm.h"
#include "agent-py.h"
#include "base/log.h"
#include "base/timeutil.h"
#include "xspace/names.h"

/* ---- the map and its sources --------------------------------------------- */

void agent_map_init(struct agent_map *m, struct collector *c)
{
	m->c = c;
	m->gen_seen = c->hub->generation;
	agent_derived_init(&m->derived);
}

void agent_map_free(struct agent_map *m)
{
	free(m->lines);
	m->lines = NULL;
	m->lines_cap = m->n_lines = 0;
	for (unsigned i = 0; i < m->n_notes; i++)
		free(m->notes[i]);
	m->n_notes = 0;
	for (unsigned i = 0; i < m->n_infos; i++)
		free(m->infos[i]);
	m->n_infos = 0;
	agent_memory_free(&m->mem);
	agent_derived_free(&m->derived);
	agent_steps_free(&m->steps);
	buf_free(&m->sb);
}

void agent_map_src_init(struct agent_map *m, struct agent_src *s)
{
	s->m = m;
	s->str_epoch = ++m->next_epoch;
	s->version = AGENT_PROTO_VERSION;
}

void agent_map_src_free(struct agent_src *s)
{
	agent_nvtx_src_free(s);
	agent_pm_src_free(s);
	agent_py_src_free(s);
	free(s->marks);
	s->marks = NULL;
	s->n_marks = s->marks_cap = 0;
	for (uint32_t i = 0; i <= s->n_strings && s->strings; i++)
		free(s->strings[i]);
	free(s->strings);
	s->strings = NULL;
	s->n_strings = s->strings_cap = 0;
	s->m->string_bytes -= s->string_bytes;
	s->string_bytes = 0;
}

void agent_map_src_restart(struct agent_src *s)
{
	s->clock_known = false;
	agent_py_src_restart(s);
}

/* A new hub: every process starts with no lines in it (each source's line
 * count starts over when it next maps records, by @m->resets). */
static void reset_caches(struct agent_map *m)
{
	m->resets++;
	/* The line index follows the hub's generation (line_index_sync()):
	 * a capture starting beside an open one keeps the hub's lines. */
	memset(m->gpu_planes, 0, sizeof(m->gpu_planes));
	memset(m->kcache, 0, sizeof(m->kcache));
	m->host_plane = NULL;
	memset(m->sid_cache, 0, sizeof(m->sid_cache));
	agent_steps_reset(&m->steps);
}

void agent_map_start(struct agent_map *m)
{
	collector_hub_changed(m->c, &m->gen_seen);
	reset_caches(m);
	agent_memory_start(&m->mem);
	agent_derived_start(&m->derived);
	m->py_spans = false;
}

/* ---- inputs ------------------------------------------------------------------ */

/* @id and @len were bounded by the parser (1..AGENT_MAX_STRINGS,
 * <= AGENT_MAX_STRING_LEN); the byte budgets are ours. */
static int add_string(struct agent_src *s, uint32_t id, const char *text, uint32_t len)
{
	struct agent_map *m = s->m;
	char *str;

	if (id >= s->strings_cap) {
		uint32_t cap = s->strings_cap ? s->strings_cap : 256;
		char **v;

		while (cap <= id)
			cap *= 2;
		v = realloc(s->strings, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		memset(v + s->strings_cap, 0, (cap - s->strings_cap) * sizeof(*v));
		s->strings = v;
		s->strings_cap = cap;
	}
	if (s->string_bytes + len > AGENT_MAP_MAX_STRING_BYTES ||
	    m->string_bytes + len > AGENT_MAP_MAX_STRING_BYTES_ALL)
		return -E2BIG;
	str = strndup(text, len);
	if (!str)
		return -ENOMEM;
	s->string_bytes += len;
	m->string_bytes += len;
	/* Names arrive demangled by the agent, in the job's own process: the
	 * daemon never runs a demangler on untrusted input (a crafted mangled
	 * name can expand exponentially). */
	s->str_epoch = ++m->next_epoch; /* cached names may refer to this id */
	free(s->strings[id]);
	s->strings[id] = str;
	if (id > s->n_strings)
		s->n_strings = id;
	return 0;
}

int agent_map_records(struct agent_src *s, const uint8_t *p, size_t len, bool take, const char **why)
{
	struct agent_map *m = s->m;
	struct agent_rec_iter it;
	struct agent_rec_view v;
	int r;

	take = take && s->clock_known;
	/* Records arrive after they happen: nothing of this payload can
	 * start or end later than now (plus slack). */
	s->horizon = trace_sat_add(wall_ns(), AGENT_MAP_TIME_SLACK_NS);
	if (take && collector_hub_changed(m->c, &m->gen_seen))
		reset_caches(m);
	if (take && s->lines_gen != m->resets) {
		/* Its lines were counted in a hub since left behind. */
		s->n_lines = 0;
		s->lines_gen = m->resets;
	}
	agent_rec_iter_init(&it, s->version, p, len);
	while ((r = agent_rec_next(&it, &v, why)) > 0) {
		switch (v.type) {
		case AGENT_REC_STRING:
			switch (add_string(s, v.r.string.id, v.text, v.r.string.h.aux)) {
			case 0: break;
			case -E2BIG: *why = "too many string bytes"; return -EBADMSG;
			default: *why = "out of memory"; return -ENOMEM;
			}
			break;
		case AGENT_REC_NVTX: agent_nvtx_record(s, &v, take); break;
		case AGENT_REC_PM_METRICS:
		case AGENT_REC_PM_SAMPLE: agent_pm_record(s, &v, take); break;
		case AGENT_REC_PY_FRAME:
		case AGENT_REC_PY_STACK:
		case AGENT_REC_PY_LAUNCH:
		case AGENT_REC_PY_SAMPLE: agent_py_record(s, &v, take); break;
		default: if (take) agent_records_put(s, &v); break;
		}
	}
	return r;
}

int agent_map_device(struct agent_src *s, const struct agent_device *d, const char **why)
{
	struct agent_map *m = s->m;
	struct gpu_map *g = m->c->cfg->gpus;
	uint32_t before = g->n;
	int n;

	/* Without NVML's list any UUID is accepted: one process claiming
	 * hundreds would leave no plane for a real job's GPU. (DEVICE frames
	 * may repeat an ordinal, so AGENT_MAX_DEVICES bounds nothing here.) */
	if (!g->complete && s->new_gpus >= AGENT_MAP_MAX_NEW_GPUS_PER_SRC &&
	    d->uuid[0] && gpu_map_find(g, d->uuid) < 0) {
		if (s->gpus_refused++ == 0)
			agent_map_note(m, "pid %u (%s) reported more than %u distinct GPUs; GPU %s and any "
					  "later new ones of this process are not traced", s->pid, s->name,
				       AGENT_MAP_MAX_NEW_GPUS_PER_SRC, d->uuid);
		return 0;
	}
	n = gpu_map_id_for_uid(g, d->uuid, d->pci_bus_id, d->name, s->uid, AGENT_MAP_MAX_NEW_GPUS_PER_UID);
	if (g->n != before)
		s->new_gpus++;
	if (n == -EDQUOT) {
		if (s->gpus_refused++ == 0)
			agent_map_note(m, "pid %u (%s): uid %u has added %u GPUs to profd's GPU map, the most one "
					  "user may without NVML; GPU %s and any later new ones of this process "
					  "are not traced", s->pid, s->name, s->uid, AGENT_MAP_MAX_NEW_GPUS_PER_UID,
				       d->uuid);
		return 0;
	}
	if (n == -ENOSPC) {
		/* Not the agent's fault: its records for this device are skipped. */
		agent_map_note(m, "more than %u distinct GPUs seen; GPU %s of pid %u is not traced", GPU_MAP_MAX,
			       d->uuid, s->pid);
		return 0;
	}
	if (n == -ENOENT) {
		agent_map_note(m, "pid %u (%s) reports GPU %s, which NVML does not list on this machine; its "
				  "records are skipped", s->pid, s->name, d->uuid);
		return 0;
	}
	if (n < 0) {
		*why = "bad device uuid";
		return -EBADMSG;
	}
	/* The parser bounded local_ordinal to AGENT_MAX_DEVICES. */
	if (!s->dev[d->local_ordinal].known)
		s->n_devices++;
	s->dev[d->local_ordinal] = (struct agent_map_dev){ .known = true, .plane = (uint32_t)n, .d = *d };
	m->caps[n] = *d;
	m->caps_known[n] = true;
	log_debug("pid %u: device %u = %s (%s) -> " XN_PLANE_GPU_FMT, s->pid, d->local_ordinal, d->uuid, d->name,
		  (unsigned)n);
	return 0;
}

void agent_map_clock(struct agent_src *s, const struct agent_clock *ck)
{
	if (ck->which == AGENT_CLOCK_START || !s->clock_known) {
		/* Two's complement: any pair of stamps gives an offset; to_wall()
		 * refuses what does not land on a time. */
		s->clock_off = (int64_t)(ck->wall_ns - ck->agent_ns);
		s->clock_known = true;
		/* Only a start anchor bounds records from below: a stop anchor
		 * (the start one was missed) comes after the records it maps. */
		s->earliest = ck->which == AGENT_CLOCK_START && ck->wall_ns <= INT64_MAX ?
				      trace_sat_sub((int64_t)ck->wall_ns, AGENT_MAP_TIME_SLACK_NS) : 0;
	}
}
