/* SPDX-License-Identifier: MIT */
/*
 * collector.c - the collector core: state machine, flush barrier, close,
 * and the facts collectors publish for each other. The core enforces the
 * order of ops, so collectors need not be idempotent; see collector.h.
 */
#define LOG_TOPIC "collector"

#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent-opts.h"
#include "base/log.h"
#include "base/macro.h"
#include "collector.h"

struct collector_set {
	uv_loop_t *loop;
	struct trace *hub;
	struct collector **v;
	size_t n;
	/* flush barrier */
	uv_timer_t flush_timer;
	unsigned flush_waiting;
	collector_set_cb flush_cb;
	void *flush_ud;
	/* close */
	unsigned close_waiting;
	collector_set_cb close_cb;
	void *close_ud;
	bool timer_closed;
	bool closing;          /* collector_set_close() ran */
	unsigned init_closing; /* handles of failed inits still closing */
	/* facts (collector.h), loop thread like the rest */
	struct host_proc_sample host;
	bool have_host;
	struct gpu_proc *gpu_procs;
	size_t n_gpu_procs, cap_gpu_procs;
};

static void flush_finish(struct collector_set *s)
{
	collector_set_cb cb = s->flush_cb;

	uv_timer_stop(&s->flush_timer);
	s->flush_cb = NULL;
	s->flush_waiting = 0;
	for (size_t i = 0; i < s->n; i++)
		s->v[i]->flush_pending = false;
	if (cb)
		cb(s->flush_ud);
}

void collector_flushed(struct collector *c)
{
	struct collector_set *s = c->set;

	if (!c->flush_pending)
		return;
	c->flush_pending = false;
	if (--s->flush_waiting == 0)
		flush_finish(s);
}

static void on_flush_timeout(uv_timer_t *t)
{
	struct collector_set *s = t->data;

	for (size_t i = 0; i < s->n; i++)
		if (s->v[i]->flush_pending)
			log_warn("%s: flush did not finish in time; its late data is not in this window",
				 s->v[i]->ops->name);
	flush_finish(s);
}

int collector_set_new(uv_loop_t *loop, const struct collector_cfg *cfg, struct trace *hub,
		      struct collector_set **ret)
{
	struct collector_set *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	s->loop = loop;
	s->hub = hub;
	s->v = calloc(collector_registry_size ? collector_registry_size : 1, sizeof(*s->v));
	if (!s->v) {
		free(s);
		return -ENOMEM;
	}
	uv_timer_init(loop, &s->flush_timer);
	s->flush_timer.data = s;
	for (size_t i = 0; i < collector_registry_size; i++) {
		const struct collector_ops *ops = collector_registry[i];
		struct collector *c = calloc(1, sizeof(*c));
		int r = 0;

		if (!c)
			goto oom;
		c->priv = ops->priv_size ? calloc(1, ops->priv_size) : NULL;
		if (ops->priv_size && !c->priv) {
			free(c);
			goto oom;
		}
		c->ops = ops;
		c->cfg = cfg;
		c->loop = loop;
		c->hub = hub;
		c->set = s;
		s->v[s->n++] = c;
		if (ops->probe)
			r = ops->probe(cfg, c->reason, sizeof(c->reason));
		if (r >= 0 && ops->init)
			r = ops->init(c);
		if (r < 0) {
			c->state = COLLECTOR_UNAVAILABLE;
			if (!c->reason[0])
				snprintf(c->reason, sizeof(c->reason), "initialisation failed: %s",
					 strerror(-r));
			log_info("%s: unavailable: %s", ops->name, c->reason);
		} else {
			c->state = COLLECTOR_READY;
			log_debug("%s: ready", ops->name);
		}
	}
	*ret = s;
	return 0;
oom:
	collector_set_free(s);
	return -ENOMEM;
}

void collector_set_start(struct collector_set *s)
{
	for (size_t i = 0; i < s->n; i++) {
		struct collector *c = s->v[i];
		int r;

		if (c->state != COLLECTOR_READY)
			continue;
		r = c->ops->start ? c->ops->start(c) : 0;
		if (r < 0) {
			/* Not fatal for the capture: the window says what is missing. */
			snprintf(c->reason, sizeof(c->reason), "start failed: %s", strerror(-r));
			log_warn("%s: %s", c->ops->name, c->reason);
			continue;
		}
		c->reason[0] = 0;
		c->state = COLLECTOR_RUNNING;
	}
}

void collector_set_options(struct collector_set *s, const struct agent_opts *o)
{
	for (size_t i = 0; i < s->n; i++) {
		struct collector *c = s->v[i];

		if ((c->state == COLLECTOR_READY || c->state == COLLECTOR_RUNNING) && c->ops->options)
			c->ops->options(c, o);
	}
}

void collector_set_stop(struct collector_set *s)
{
	for (size_t i = 0; i < s->n; i++) {
		struct collector *c = s->v[i];

		if (c->state != COLLECTOR_RUNNING)
			continue;
		if (c->ops->stop)
			c->ops->stop(c);
		c->state = COLLECTOR_READY;
	}
}

void collector_set_flush(struct collector_set *s, int64_t until_ns, uint64_t timeout_ms,
			 collector_set_cb cb, void *userdata)
{
	/* One barrier at a time: the session manager serialises closes. */
	assert(!s->flush_cb);
	s->flush_cb = cb;
	s->flush_ud = userdata;
	s->flush_waiting = 1; /* held until every flush was asked for */
	for (size_t i = 0; i < s->n; i++) {
		struct collector *c = s->v[i];

		if (c->state != COLLECTOR_RUNNING || !c->ops->flush)
			continue;
		c->flush_pending = true;
		s->flush_waiting++;
		c->ops->flush(c, until_ns);
	}
	/* A timer counts from the loop's cached time, taken when this loop
	 * iteration began: without the update the flushes asked above (and
	 * whatever ran before them) would shorten the timeout. */
	uv_update_time(s->loop);
	uv_timer_start(&s->flush_timer, on_flush_timeout, timeout_ms, 0);
	if (--s->flush_waiting == 0)
		flush_finish(s);
}

void collector_set_describe(struct collector_set *s, struct trace *snap, int64_t start_ns,
			    int64_t stop_ns)
{
	for (size_t i = 0; i < s->n; i++) {
		struct collector *c = s->v[i];

		if (c->ops->describe)
			c->ops->describe(c, snap, start_ns, stop_ns);
	}
}

void collector_set_window(struct collector_set *s, int64_t start_ns, enum collector_window w)
{
	for (size_t i = 0; i < s->n; i++) {
		struct collector *c = s->v[i];

		if ((c->state == COLLECTOR_READY || c->state == COLLECTOR_RUNNING) && c->ops->window)
			c->ops->window(c, start_ns, w);
	}
}

/* One thing collector_set_close() waits for is done. */
static void close_step(struct collector_set *s)
{
	if (--s->close_waiting == 0 && s->close_cb)
		s->close_cb(s->close_ud);
}

void collector_closed(struct collector *c)
{
	c->state = COLLECTOR_CLOSED;
	close_step(c->set);
}

static void on_timer_closed(uv_handle_t *h)
{
	struct collector_set *s = h->data;

	s->timer_closed = true;
	close_step(s);
}

static void on_init_handle_closed(uv_handle_t *h)
{
	struct collector_set *s = h->data;

	s->init_closing--;
	if (s->closing)
		close_step(s);
}

void collector_init_failed_close(struct collector *c, uv_handle_t *h)
{
	struct collector_set *s = c->set;

	s->init_closing++;
	h->data = s;
	uv_close(h, on_init_handle_closed);
}

void collector_set_close(struct collector_set *s, collector_set_cb cb, void *userdata)
{
	collector_set_stop(s);
	s->close_cb = NULL;
	s->closing = true;
	/* held while asking, and the handles failed inits still close (their
	 * collectors' private data is freed only after the callback) */
	s->close_waiting = 1 + s->init_closing;
	for (size_t i = 0; i < s->n; i++) {
		struct collector *c = s->v[i];
		/* A failed probe or init opened nothing that is still open:
		 * close is only for collectors whose init succeeded. */
		bool inited = c->state != COLLECTOR_UNAVAILABLE;

		s->close_waiting++;
		c->state = COLLECTOR_CLOSING;
		if (inited && c->ops->close)
			c->ops->close(c);
		else
			collector_closed(c);
	}
	s->close_waiting++;
	uv_close((uv_handle_t *)&s->flush_timer, on_timer_closed);
	s->close_cb = cb;
	s->close_ud = userdata;
	if (--s->close_waiting == 0 && cb)
		cb(userdata);
}

struct collector_set *collector_set_free(struct collector_set *s)
{
	if (!s)
		return NULL;
	for (size_t i = 0; i < s->n; i++) {
		free(s->v[i]->priv);
		free(s->v[i]);
	}
	free(s->gpu_procs);
	free(s->v);
	free(s);
	return NULL;
}

void collector_set_status(struct collector_set *s, const struct collector_status_sink *sink)
{
	for (size_t i = 0; s && i < s->n; i++) {
		struct collector *c = s->v[i];

		/* As for close: only a successful init has anything to report. */
		if (c->state != COLLECTOR_UNAVAILABLE && c->ops->status)
			c->ops->status(c, sink);
	}
}

size_t collector_set_count(const struct collector_set *s) { return s->n; }

const struct collector *collector_set_get(const struct collector_set *s, size_t i)
{
	return i < s->n ? s->v[i] : NULL;
}

struct collector *collector_set_find(struct collector_set *s, const char *name)
{
	for (size_t i = 0; i < s->n; i++)
		if (strcmp(s->v[i]->ops->name, name) == 0)
			return s->v[i];
	return NULL;
}

/* ---- facts ----------------------------------------------------------------- */

void collector_publish_host_sample(struct collector *c, const struct host_proc_sample *v)
{
	c->set->host = *v;
	c->set->have_host = true;
}

int collector_set_host_sample(const struct collector_set *s, struct host_proc_sample *ret)
{
	if (!s || !s->have_host)
		return -ENODEV;
	*ret = s->host;
	return 0;
}

int collector_publish_gpu_procs(struct collector *c, const struct gpu_proc *v, size_t n)
{
	struct collector_set *s = c->set;

	if (n > s->cap_gpu_procs) {
		struct gpu_proc *p = n <= SIZE_MAX / sizeof(*p) ? realloc(s->gpu_procs, n * sizeof(*p)) : NULL;

		if (!p)
			return -ENOMEM;
		s->gpu_procs = p;
		s->cap_gpu_procs = n;
	}
	if (n)
		memcpy(s->gpu_procs, v, n * sizeof(*v));
	s->n_gpu_procs = n;
	return 0;
}

/* collector_set_gpu_pids() and collector_set_gpu_procs(): fill @pids or
 * @procs (the other is NULL). */
static size_t gpu_procs(const struct collector_set *s, int *pids, struct gpu_proc *procs, size_t max,
			int64_t since_ns, int64_t until_ns)
{
	size_t n = 0;

	for (size_t i = 0; s && i < s->n_gpu_procs && n < max; i++) {
		const struct gpu_proc *pr = &s->gpu_procs[i];
		bool dup = false;

		if (pr->last_ns < since_ns || pr->first_ns > until_ns)
			continue;
		for (size_t k = 0; k < n; k++)
			dup |= (pids ? pids[k] : procs[k].pid) == pr->pid;
		if (dup)
			continue;
		if (pids)
			pids[n++] = pr->pid;
		else
			procs[n++] = *pr;
	}
	return n;
}

size_t collector_set_gpu_procs(const struct collector_set *s, struct gpu_proc *out, size_t max,
			       int64_t since_ns, int64_t until_ns)
{
	return gpu_procs(s, NULL, out, max, since_ns, until_ns);
}

size_t collector_set_gpu_pids(const struct collector_set *s, int *pids, size_t max, int64_t since_ns)
{
	return gpu_procs(s, pids, NULL, max, since_ns, INT64_MAX);
}

uint64_t collector_counter_period_ms(const struct collector *c, bool slow)
{
	uint32_t hz = c->cfg->host_sample_hz ? c->cfg->host_sample_hz : 10;

	if (slow && hz > RECORDER_COUNTER_HZ)
		hz = RECORDER_COUNTER_HZ;
	return MAX(1000 / hz, 1u);
}

void collector_counter_rate(const struct collector *c, uv_timer_t *t, bool *slow, bool want)
{
	if (*slow == want)
		return;
	*slow = want;
	uv_timer_set_repeat(t, collector_counter_period_ms(c, want));
	if (uv_is_active((const uv_handle_t *)t))
		uv_timer_again(t);
}
