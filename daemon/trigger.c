/* SPDX-License-Identifier: MIT */
/*
 * trigger.c - the flight recorder's own snapshots (trigger.h): rate limit,
 * the snapshot window, the encoder and the writes on a worker, and the
 * directory's bounds.
 */
#define LOG_TOPIC "trigger"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "base/macro.h"
#include "base/timeutil.h"
#include "collectors/agent/agent-nvtx.h"
#include "delivery.h"
#include "trigger.h"
#include "window-job.h"
#include "xspace/names.h"
#include "xspace/xspace.h"

#define TRIGGER_REL "plugins/profile" /* below the directory: a TensorBoard logdir */
#define TRIGGER_REASONS 8             /* reasons rate-limited apart */
#define TRIGGER_REASON_MAX 32
#define TRIGGER_RUN_MAX 96
#define TRIGGER_TEXT_MAX 1024                /* reason.txt */
#define TRIGGER_GPUS 64                      /* GPU planes the gpu-idle rule watches */
#define TRIGGER_WATCH_MS 1000
#define TRIGGER_TRACKS 64    /* NVTX lines the slow-step rule follows */
#define TRIGGER_STEPS 128    /* recent steps per line for the p99 */
#define TRIGGER_STEPS_MIN 20 /* steps seen before the p99 counts */

struct trigger_job;

struct trigger {
	uv_loop_t *loop;
	struct session_mgr *mgr;
	struct trigger_cfg cfg; /* cfg.dir owned (a copy) */
	struct {
		char reason[TRIGGER_REASON_MAX];
		int64_t last_mono; /* when it last fired */
	} fired[TRIGGER_REASONS];
	struct trigger_job *job; /* in flight, at most one */
	uint64_t written;
	/* trigger_fire_soon(): one waiting */
	uv_timer_t soon;
	bool soon_pending, closing;
	char soon_reason[TRIGGER_REASON_MAX];
	char soon_detail[256];
	/* the gpu-idle rule: per plane id below TRIGGER_GPUS */
	uv_timer_t watch;
	int64_t idle_since[TRIGGER_GPUS]; /* the first 0 % sample of the idle run; 0: busy */
	uint32_t holder[TRIGGER_GPUS];    /* a pid with an agent on it this tick; 0: none */
	/* the slow-step rule: one track per NVTX line of the hub */
	struct step_track {
		const struct trace_line *line; /* NULL: free; valid while the hub's generation holds */
		int64_t cursor;                /* the latest step start seen */
		int64_t hist[TRIGGER_STEPS];   /* durations, a ring */
		uint32_t n;                    /* steps seen (saturating) */
	} tracks[TRIGGER_TRACKS];
	uint64_t tracks_gen; /* hub->generation the lines belong to */
};

/* One snapshot: what the worker needs is copied in, so that a reload or
 * the trigger's end never pulls anything from under it. */
struct trigger_job {
	struct window_job win;
	struct trigger *t; /* NULL once the trigger is gone */
	char *dir, *file, *text;
	char run[TRIGGER_RUN_MAX];
	char hostname[256];
	uint32_t max_count;
	uint64_t max_bytes;
	/* worker out */
	int err;
	uint64_t bytes;
	unsigned pruned;
};

static void job_free(struct trigger_job *j)
{
	if (j->t)
		j->t->job = NULL;
	window_job_release(&j->win);
	free(j->dir);
	free(j->file);
	free(j->text);
	free(j);
}

/* ---- the directory's bounds (worker) ------------------------------------ */

/* A run profd made: "YYYY_MM_DD_HH_MM_SS_mmm-<reason>". */
static bool our_run(const char *name)
{
	static const char shape[] = "dddd_dd_dd_dd_dd_dd_ddd-";

	for (size_t i = 0; i < sizeof(shape) - 1; i++)
		if (shape[i] == 'd' ? (name[i] < '0' || name[i] > '9') : name[i] != shape[i])
			return false;
	return name[sizeof(shape) - 1] != 0;
}

/* Bytes of the regular files in run @name (not following links); with
 * @remove, unlink them and the run. */
static uint64_t run_walk(int parent, const char *name, bool remove)
{
	int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	uint64_t bytes = 0;
	struct dirent *e;
	DIR *d;

	if (fd < 0)
		return 0;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return 0;
	}
	while ((e = readdir(d))) {
		struct stat st;

		if (e->d_name[0] == '.' || fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		bytes += S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;
		if (remove)
			(void)unlinkat(dirfd(d), e->d_name, 0);
	}
	closedir(d);
	if (remove && unlinkat(parent, name, AT_REMOVEDIR) < 0)
		log_warn("could not remove %s: %s", name, strerror(errno));
	return bytes;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Remove the oldest of our runs until @max_count and @max_bytes hold; the
 * newest (@keep) stays. Returns how many went. */
static unsigned prune(const char *dir, const char *keep, uint32_t max_count, uint64_t max_bytes)
{
	char path[sizeof(TRIGGER_REL)];
	char **names = NULL;
	uint64_t *sizes = NULL, total = 0;
	size_t n = 0, cap = 0, gone = 0;
	struct dirent *e;
	DIR *d;
	int fd;

	/* Down from the directory one component at a time, no link followed
	 * (as the writer goes, delivery.h): nothing outside is ever removed. */
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	snprintf(path, sizeof(path), "%s", TRIGGER_REL);
	for (char *save = NULL, *c = strtok_r(path, "/", &save); fd >= 0 && c; c = strtok_r(NULL, "/", &save)) {
		int next = openat(fd, c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

		close(fd);
		fd = next;
	}
	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	while ((e = readdir(d))) {
		if (!our_run(e->d_name))
			continue;
		if (n == cap) {
			size_t c = cap ? 2 * cap : 32;
			char **v = reallocarray(names, c, sizeof(*v));

			if (!v)
				break;
			names = v;
			cap = c;
		}
		if (!(names[n] = strdup(e->d_name)))
			break;
		n++;
	}
	qsort(names, n, sizeof(*names), cmp_names); /* the time stamp first: oldest first */
	sizes = calloc(n ? n : 1, sizeof(*sizes));
	for (size_t i = 0; sizes && i < n; i++)
		total += sizes[i] = run_walk(dirfd(d), names[i], false);
	for (size_t i = 0; sizes && i < n; i++) {
		if (n - gone <= max_count && total <= max_bytes)
			break;
		if (strcmp(names[i], keep) == 0)
			continue;
		run_walk(dirfd(d), names[i], true);
		total -= sizes[i];
		gone++;
	}
	closedir(d);
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	free(sizes);
	return (unsigned)gone;
}

/* ---- the snapshot ------------------------------------------------------- */

static void job_work(struct window_job *w)
{
	struct trigger_job *j = container_of(w, struct trigger_job, win);
	struct xspace_info info = {.hostname = j->hostname, .start_ns = w->start_ns, .stop_ns = w->stop_ns};
	struct trace *snap = w->snap;
	struct xspace_out out;
	int r;

	w->snap = NULL; /* the encoder takes it */
	r = xspace_encode(snap, &info, 0, &out);
	if (r < 0) {
		j->err = r;
		return;
	}
	j->bytes = out.xspace_len;
	r = repo_write(j->dir, TRIGGER_REL, j->run, j->file, out.xspace, out.xspace_len);
	xspace_out_free(&out);
	if (r == 0)
		r = repo_write(j->dir, TRIGGER_REL, j->run, "reason.txt", j->text, strlen(j->text));
	j->err = r;
	if (r == 0)
		j->pruned = prune(j->dir, j->run, j->max_count, j->max_bytes);
}

static void job_done(struct window_job *w, enum window_job_err what, int err)
{
	struct trigger_job *j = container_of(w, struct trigger_job, win);

	if (what != WINDOW_JOB_OK)
		j->err = err;
	if (j->err)
		log_warn("trigger: snapshot %s not written: %s", j->run, strerror(-j->err));
	else
		log_notice("trigger: snapshot written to %s/" TRIGGER_REL "/%s (%" PRIu64 " bytes; %u older "
			   "removed)", j->dir, j->run, j->bytes, j->pruned);
	if (!j->err && j->t)
		j->t->written++;
	job_free(j);
}

static const struct window_job_ops trigger_ops = {
	.work = job_work,
	.done = job_done,
};

/* The per-reason rate limit: true (and stamped) when @reason may fire. */
static bool rate_ok(struct trigger *t, const char *reason)
{
	int64_t now = mono_ns();
	size_t slot = 0, oldest = 0;

	for (size_t i = 0; i < TRIGGER_REASONS; i++) {
		if (strcmp(t->fired[i].reason, reason) == 0) {
			slot = i;
			goto found;
		}
		if (t->fired[i].last_mono < t->fired[oldest].last_mono)
			oldest = i;
	}
	slot = oldest; /* a new reason takes the slot used longest ago */
	snprintf(t->fired[slot].reason, sizeof(t->fired[slot].reason), "%s", reason);
	t->fired[slot].last_mono = 0;
found:
	if (t->fired[slot].last_mono &&
	    now - t->fired[slot].last_mono < (int64_t)(t->cfg.min_interval_ms * NSEC_PER_MSEC))
		return false;
	t->fired[slot].last_mono = now;
	return true;
}

int trigger_fire(struct trigger *t, const char *reason, const char *detail)
{
	struct session_record_status st;
	struct trigger_job *j;
	struct timespec ts;
	struct tm tm;
	char when[64];
	size_t n;
	int r;

	if (!t->cfg.dir) {
		log_info("trigger %s: no snapshot-dir configured; nothing written", reason);
		return -ENOTDIR;
	}
	session_mgr_record_status(t->mgr, &st);
	if (!st.on) {
		log_info("trigger %s: the flight recorder is not recording; nothing written", reason);
		return -ENOENT;
	}
	if (t->job) {
		log_info("trigger %s: a snapshot is still being written; this one is skipped", reason);
		return -EAGAIN;
	}
	if (!rate_ok(t, reason)) {
		log_info("trigger %s: rate-limited (at most one per %" PRIu64 " ms); nothing written", reason,
			 t->cfg.min_interval_ms);
		return -EAGAIN;
	}
	j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	clock_gettime(CLOCK_REALTIME, &ts);
	localtime_r(&ts.tv_sec, &tm);
	n = strftime(j->run, sizeof(j->run), "%Y_%m_%d_%H_%M_%S", &tm);
	snprintf(j->run + n, sizeof(j->run) - n, "_%03ld-%.*s", ts.tv_nsec / 1000000L, TRIGGER_REASON_MAX - 1,
		 reason);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S%z", &tm);
	snprintf(j->hostname, sizeof(j->hostname), "%s", t->cfg.hostname);
	j->max_count = t->cfg.max_count;
	j->max_bytes = t->cfg.max_bytes;
	j->dir = strdup(t->cfg.dir);
	j->file = malloc(strlen(t->cfg.hostname) + sizeof(".xplane.pb"));
	if (j->file) {
		size_t k;

		for (k = 0; t->cfg.hostname[k]; k++) /* TF's rule: ':' -> '_' */
			j->file[k] = t->cfg.hostname[k] == ':' ? '_' : t->cfg.hostname[k];
		memcpy(j->file + k, ".xplane.pb", sizeof(".xplane.pb"));
	}
	j->text = malloc(TRIGGER_TEXT_MAX);
	if (j->text)
		snprintf(j->text, TRIGGER_TEXT_MAX, "reason: %s\ndetail: %s\ntime: %s\nhost: %s\nspan_ms: %" PRIu64
			 "\nrecording_since_unix_ns: %" PRId64 "\n", reason, detail, when, t->cfg.hostname,
			 t->cfg.last_ms, st.since_ns);
	if (!j->dir || !j->file || !j->text || !repo_name_ok(j->run) || !repo_name_ok(j->file)) {
		job_free(j);
		log_warn("trigger %s: out of memory or an unusable host name; nothing written", reason);
		return -ENOMEM;
	}
	log_notice("trigger %s: snapshot %s of the last %" PRIu64 " ms (%s)", reason, j->run, t->cfg.last_ms,
		   detail);
	/* The job may be done and freed inside the open (window-job.h). */
	j->t = t;
	t->job = j;
	r = window_job_open_snapshot(&j->win, &trigger_ops, t->loop, t->mgr, t->cfg.last_ms, 0, NULL, false);
	if (r < 0) {
		job_free(j);
		log_warn("trigger %s: no snapshot: %s", reason, strerror(-r));
	}
	return r;
}

/* ---- the slow-step rule ------------------------------------------------- */

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

/* The 99th percentile of @k's recent steps (nearest rank). */
static int64_t track_p99(const struct step_track *k)
{
	int64_t v[TRIGGER_STEPS];
	uint32_t n = k->n < TRIGGER_STEPS ? k->n : TRIGGER_STEPS;

	memcpy(v, k->hist, n * sizeof(*v));
	qsort(v, n, sizeof(*v), cmp_i64);
	return v[(99 * n + 99) / 100 - 1];
}

static struct step_track *track_of(struct trigger *t, const struct trace_line *l)
{
	struct step_track *free_slot = NULL;

	for (size_t i = 0; i < TRIGGER_TRACKS; i++) {
		if (t->tracks[i].line == l)
			return &t->tracks[i];
		if (!t->tracks[i].line && !free_slot)
			free_slot = &t->tracks[i];
	}
	if (free_slot) {
		memset(free_slot, 0, sizeof(*free_slot));
		free_slot->line = l;
		free_slot->cursor = INT64_MIN;
	}
	return free_slot;
}

/* One step of @k's line that ended since the last look: fire when it is
 * slow, then count it. */
static void step_seen(struct trigger *t, struct step_track *k, const char *name, const struct trace_event *e)
{
	int64_t dur = e->dur_ns > 0 ? e->dur_ns : 0, p99 = 0;
	bool over = t->cfg.step_above_ms && dur > (int64_t)(t->cfg.step_above_ms * NSEC_PER_MSEC);
	char detail[256];

	if (!over && t->cfg.step_p99 && k->n >= TRIGGER_STEPS_MIN) {
		p99 = track_p99(k);
		over = dur > p99;
	}
	if (over) {
		if (p99)
			snprintf(detail, sizeof(detail), "step '%s' on %s took %.3f ms, above the p99 of its last "
				 "%u steps (%.3f ms)", name, k->line->name, (double)dur / 1e6,
				 k->n < TRIGGER_STEPS ? k->n : TRIGGER_STEPS, (double)p99 / 1e6);
		else
			snprintf(detail, sizeof(detail), "step '%s' on %s took %.3f ms, above %" PRIu64 " ms",
				 name, k->line->name, (double)dur / 1e6, t->cfg.step_above_ms);
		(void)trigger_fire(t, "slow-step", detail);
	}
	k->hist[k->n % TRIGGER_STEPS] = dur;
	if (k->n < UINT32_MAX)
		k->n++;
}

/* The steps on the host plane's NVTX lines that ended since the last tick
 * (a line's records are in the order they ended; only chunks that reach
 * past the cursor are read). */
static void watch_steps(struct trigger *t, const struct trace *hub)
{
	const struct trace_plane *p = NULL;

	if (hub->generation != t->tracks_gen) { /* the lines moved out: start over */
		memset(t->tracks, 0, sizeof(t->tracks));
		t->tracks_gen = hub->generation;
	}
	for (uint32_t i = 0; i < hub->n_planes; i++)
		if (strcmp(hub->planes[i]->name, XN_PLANE_HOST) == 0)
			p = hub->planes[i];
	for (uint32_t i = 0; p && i < p->n_lines; i++) {
		const struct trace_line *l = p->lines[i];
		size_t len = strlen(l->name), sfx = strlen("/NVTX");
		struct step_track *k;

		if (len < sfx || strcmp(l->name + len - sfx, "/NVTX") != 0 || !(k = track_of(t, l)))
			continue;
		for (const struct trace_chunk *c = l->head; c; c = c->next) {
			if (c->max_end_ns <= k->cursor)
				continue;
			for (uint32_t j = 0; j < c->n; j++) {
				const struct trace_event *e = &c->ev[j];
				size_t nlen;
				const char *name = strtab_get(&p->events, e->meta, &nlen);

				if (e->start_ns <= k->cursor || !name || !agent_nvtx_is_step(name))
					continue;
				k->cursor = e->start_ns;
				step_seen(t, k, name, e);
			}
		}
	}
}

/* ---- the gpu-idle rule -------------------------------------------------- */

/* Which traced job holds each GPU plane: collector_set_status() reports
 * an agent, then its devices. */
struct holders {
	uint32_t pid;     /* the agent whose devices follow */
	uint32_t *holder; /* the trigger's table */
};

static void note_device(void *userdata, const struct collector_agent_device *d)
{
	struct holders *h = userdata;

	if (d->plane_id < TRIGGER_GPUS)
		h->holder[d->plane_id] = h->pid;
}

static void note_agent(void *userdata, const struct collector_agent *a)
{
	((struct holders *)userdata)->pid = a->pid;
}

static void on_watch(uv_timer_t *h)
{
	struct trigger *t = h->data;
	struct session_record_status st;
	struct holders hs = {.holder = t->holder};
	const struct collector_status_sink sink = {.agent = note_agent, .device = note_device, .userdata = &hs};
	const struct trace *hub;
	struct collector_set *set;

	session_mgr_record_status(t->mgr, &st);
	set = session_mgr_collectors(t->mgr);
	if (!st.on || !set) {
		memset(t->idle_since, 0, sizeof(t->idle_since));
		memset(t->tracks, 0, sizeof(t->tracks));
		return;
	}
	hub = session_mgr_hub(t->mgr);
	if (t->cfg.step_above_ms || t->cfg.step_p99)
		watch_steps(t, hub);
	if (!t->cfg.gpu_idle_ms)
		return;
	memset(t->holder, 0, sizeof(t->holder));
	collector_set_status(set, &sink);
	for (uint32_t i = 0; i < hub->n_planes; i++) {
		const struct trace_plane *p = hub->planes[i];
		char detail[160];
		int64_t ts, id = p->id;
		double util;

		if (strncmp(p->name, XN_PLANE_GPU_PREFIX, strlen(XN_PLANE_GPU_PREFIX)) != 0 || id < 0 ||
		    id >= TRIGGER_GPUS || trace_counter_latest(p, XN_COUNTER_GPU_UTIL, &ts, &util) < 0)
			continue;
		if (util > 0) {
			t->idle_since[id] = 0;
			continue;
		}
		if (!t->idle_since[id] || ts < t->idle_since[id])
			t->idle_since[id] = ts;
		if (!t->holder[id] || ts - t->idle_since[id] < (int64_t)(t->cfg.gpu_idle_ms * NSEC_PER_MSEC))
			continue;
		snprintf(detail, sizeof(detail), "%s idle (0 %% utilization) for %.1f s while pid %u holds it",
			 p->name, (double)(ts - t->idle_since[id]) / 1e9, t->holder[id]);
		t->idle_since[id] = 0; /* a new run must build up again */
		(void)trigger_fire(t, "gpu-idle", detail);
	}
}

static void watch_update(struct trigger *t)
{
	if (t->closing)
		return;
	if (t->cfg.gpu_idle_ms || t->cfg.step_above_ms || t->cfg.step_p99)
		uv_timer_start(&t->watch, on_watch, TRIGGER_WATCH_MS, TRIGGER_WATCH_MS);
	else
		uv_timer_stop(&t->watch);
}

static void on_soon(uv_timer_t *h)
{
	struct trigger *t = h->data;

	t->soon_pending = false;
	(void)trigger_fire(t, t->soon_reason, t->soon_detail);
}

int trigger_fire_soon(struct trigger *t, const char *reason, const char *detail)
{
	if (t->closing)
		return -ESHUTDOWN;
	if (t->soon_pending) {
		log_info("trigger %s: another trigger waits to fire; this one is skipped (%s)", reason, detail);
		return -EAGAIN;
	}
	snprintf(t->soon_reason, sizeof(t->soon_reason), "%s", reason);
	snprintf(t->soon_detail, sizeof(t->soon_detail), "%s", detail);
	t->soon_pending = true;
	uv_timer_start(&t->soon, on_soon, 0, 0);
	return 0;
}

static void on_soon_closed(uv_handle_t *h) { (void)h; }

void trigger_close(struct trigger *t)
{
	if (!t || t->closing)
		return;
	t->closing = true;
	uv_close((uv_handle_t *)&t->soon, on_soon_closed);
	uv_close((uv_handle_t *)&t->watch, on_soon_closed);
}

int trigger_set_cfg(struct trigger *t, const struct trigger_cfg *cfg)
{
	char *dir = cfg->dir ? strdup(cfg->dir) : NULL;

	if (cfg->dir && !dir)
		return -ENOMEM;
	free((char *)t->cfg.dir);
	t->cfg = *cfg;
	t->cfg.dir = dir;
	if (t->loop) /* not during trigger_new(): the timer is not there yet */
		watch_update(t);
	return 0;
}

int trigger_new(uv_loop_t *loop, struct session_mgr *m, const struct trigger_cfg *cfg, struct trigger **ret)
{
	struct trigger *t = calloc(1, sizeof(*t));
	int r;

	if (!t)
		return -ENOMEM;
	t->mgr = m;
	r = trigger_set_cfg(t, cfg);
	if (r < 0) {
		free(t);
		return r;
	}
	t->loop = loop;
	uv_timer_init(loop, &t->soon);
	t->soon.data = t;
	uv_timer_init(loop, &t->watch);
	t->watch.data = t;
	watch_update(t);
	*ret = t;
	return 0;
}

uint64_t trigger_written(const struct trigger *t) { return t->written; }

struct trigger *trigger_free(struct trigger *t)
{
	if (!t)
		return NULL;
	if (t->job)
		t->job->t = NULL;
	free((char *)t->cfg.dir);
	free(t);
	return NULL;
}
