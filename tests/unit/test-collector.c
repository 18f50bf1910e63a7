/* SPDX-License-Identifier: MIT */
/*
 * The collector core (collectors/collector.c) over fake collectors: the
 * flush barrier waits for every running collector or the timeout, and an
 * answer that comes too late counts for nothing. This file supplies
 * collector_registry[] itself, so the real collectors are not linked in.
 */
#include <errno.h>
#include <stdio.h>
#include <stdint.h>

#include "base/timeutil.h"
#include "collector.h"
#include "harness.h"

struct fake {
	int starts, stops, flushes, closes, statuses;
	int64_t until_ns; /* of the last flush asked for */
	uv_timer_t timer; /* failing_init's */
};

static struct fake *fake(struct collector *c) { return collector_priv(c); }

static int fake_start(struct collector *c)
{
	fake(c)->starts++;
	return 0;
}

static void fake_stop(struct collector *c) { fake(c)->stops++; }

static void fake_close(struct collector *c)
{
	fake(c)->closes++;
	collector_closed(c);
}

/* Reports one agent whose name is the collector's. */
static void fake_status(struct collector *c, const struct collector_status_sink *sink)
{
	fake(c)->statuses++;
	sink->agent(sink->userdata, &(struct collector_agent){.pid = 1, .name = c->ops->name});
}

/* Has data in flight: answers only when the test says so. */
static void slow_flush(struct collector *c, int64_t until_ns)
{
	fake(c)->flushes++;
	fake(c)->until_ns = until_ns;
}

/* Nothing pending: answers at once, from inside flush. */
static void quick_flush(struct collector *c, int64_t until_ns)
{
	slow_flush(c, until_ns);
	collector_flushed(c);
}

static int absent_probe(const struct collector_cfg *cfg, char *why, size_t why_size)
{
	snprintf(why, why_size, "no such device here");
	return -ENODEV;
}

/* Fails after it initialised a handle, which it hands to the core to close. */
static int failing_init(struct collector *c)
{
	uv_timer_init(c->loop, &fake(c)->timer);
	snprintf(c->reason, sizeof(c->reason), "init failed on purpose");
	collector_init_failed_close(c, (uv_handle_t *)&fake(c)->timer);
	return -EIO;
}

#define FAKE_OPS_INIT(n, fl, pr, in)                                                              \
	{ .name = (n), .priv_size = sizeof(struct fake), .probe = (pr), .init = (in),             \
	  .start = fake_start, .flush = (fl), .stop = fake_stop, .close = fake_close,             \
	  .status = fake_status }
#define FAKE_OPS(n, fl, pr) FAKE_OPS_INIT(n, fl, pr, NULL)

static const struct collector_ops slow_ops = FAKE_OPS("fake.slow", slow_flush, NULL);
static const struct collector_ops slow2_ops = FAKE_OPS("fake.slow2", slow_flush, NULL);
static const struct collector_ops quick_ops = FAKE_OPS("fake.quick", quick_flush, NULL);
static const struct collector_ops noflush_ops = FAKE_OPS("fake.noflush", NULL, NULL);
static const struct collector_ops absent_ops = FAKE_OPS("fake.absent", slow_flush, absent_probe);
static const struct collector_ops broken_ops = FAKE_OPS_INIT("fake.broken", slow_flush, NULL, failing_init);

const struct collector_ops *const collector_registry[] = {
	&slow_ops, &slow2_ops, &quick_ops, &noflush_ops, &absent_ops, &broken_ops,
};
const size_t collector_registry_size = ARRAY_SIZE(collector_registry);

static uv_loop_t loop;
static struct trace *hub;
static struct collector_set *set;
static struct collector *slow, *slow2, *quick, *absent, *broken;
static const struct collector_cfg cfg;
static int done_calls, closed_calls;

static void on_done(void *userdata)
{
	done_calls++;
	ASSERT_TRUE(userdata == &done_calls);
}

static void on_closed(void *userdata) { closed_calls++; }

static void setup(void)
{
	done_calls = closed_calls = 0;
	ASSERT_OK(uv_loop_init(&loop));
	ASSERT_OK(trace_new(0, &hub));
	ASSERT_OK(collector_set_new(&loop, &cfg, hub, &set));
	ASSERT_EQ(collector_set_count(set), 6);
	slow = collector_set_find(set, "fake.slow");
	slow2 = collector_set_find(set, "fake.slow2");
	quick = collector_set_find(set, "fake.quick");
	absent = collector_set_find(set, "fake.absent");
	broken = collector_set_find(set, "fake.broken");
	ASSERT_TRUE(slow && slow2 && quick && absent && broken);
	ASSERT_TRUE(collector_set_find(set, "fake.other") == NULL);
}

/* Close, free, and check that no handle is left behind. Only collectors
 * whose init succeeded are asked to close. */
static void teardown(void)
{
	collector_set_close(set, on_closed, NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	ASSERT_EQ(closed_calls, 1);
	ASSERT_EQ(fake(slow)->closes, 1);
	ASSERT_EQ(fake(absent)->closes, 0);
	ASSERT_EQ(fake(broken)->closes, 0);
	set = collector_set_free(set);
	hub = trace_free(hub);
	ASSERT_EQ(uv_loop_close(&loop), 0);
}

TEST(collector_probe_failure_is_kept_unavailable_with_its_reason)
{
	setup();
	ASSERT_EQ(absent->state, COLLECTOR_UNAVAILABLE);
	ASSERT_STREQ(absent->reason, "no such device here");
	ASSERT_EQ(slow->state, COLLECTOR_READY);
	collector_set_start(set);
	ASSERT_EQ(slow->state, COLLECTOR_RUNNING);
	ASSERT_EQ(fake(slow)->starts, 1);
	ASSERT_EQ(fake(absent)->starts, 0);
	ASSERT_EQ(absent->state, COLLECTOR_UNAVAILABLE);
	/* Starting again does not start twice (the core keeps the order). */
	collector_set_start(set);
	ASSERT_EQ(fake(slow)->starts, 1);
	collector_set_stop(set);
	collector_set_stop(set);
	ASSERT_EQ(fake(slow)->stops, 1);
	ASSERT_EQ(slow->state, COLLECTOR_READY);
	teardown();
}

TEST(collector_flush_waits_for_every_running_collector)
{
	setup();
	collector_set_start(set);
	collector_set_flush(set, 12345, 60000, on_done, &done_calls);
	/* Everyone with a flush op was asked, for the same instant ... */
	ASSERT_EQ(fake(slow)->flushes, 1);
	ASSERT_EQ(fake(slow2)->flushes, 1);
	ASSERT_EQ(fake(quick)->flushes, 1);
	ASSERT_EQ(fake(slow)->until_ns, 12345);
	/* ... except one that never started. */
	ASSERT_EQ(fake(absent)->flushes, 0);
	/* The quick one answered inside flush; two are outstanding. */
	ASSERT_EQ(done_calls, 0);
	collector_flushed(slow);
	ASSERT_EQ(done_calls, 0);
	/* A second answer from the same collector does not stand in for slow2. */
	collector_flushed(slow);
	ASSERT_EQ(done_calls, 0);
	collector_flushed(slow2);
	ASSERT_EQ(done_calls, 1);
	/* The barrier's timer is disarmed: running the loop adds nothing. */
	uv_run(&loop, UV_RUN_NOWAIT);
	ASSERT_EQ(done_calls, 1);
	teardown();
}

TEST(collector_flush_with_nothing_pending_completes_at_once)
{
	setup();
	/* Not started: nobody is asked, the callback runs before flush returns. */
	collector_set_flush(set, 1, 60000, on_done, &done_calls);
	ASSERT_EQ(done_calls, 1);
	ASSERT_EQ(fake(slow)->flushes + fake(quick)->flushes, 0);
	/* Started and then stopped: the same. */
	collector_set_start(set);
	collector_set_stop(set);
	collector_set_flush(set, 2, 60000, on_done, &done_calls);
	ASSERT_EQ(done_calls, 2);
	ASSERT_EQ(fake(slow)->flushes, 0);
	teardown();
}

TEST(collector_flush_timeout_ends_the_barrier_without_stragglers)
{
	int64_t t0;

	setup();
	collector_set_start(set);
	t0 = mono_ns();
	collector_set_flush(set, 100, 50, on_done, &done_calls);
	collector_flushed(slow);
	/* slow2 never answers. */
	uv_run(&loop, UV_RUN_DEFAULT);
	ASSERT_EQ(done_calls, 1);
	/* Not before the timeout (uv timers have ms granularity). */
	ASSERT_TRUE(mono_ns() - t0 >= 49 * (int64_t)NSEC_PER_MSEC);
	/* The straggler's answer after the barrier ended is ignored. */
	collector_flushed(slow2);
	ASSERT_EQ(done_calls, 1);
	teardown();
}

TEST(collector_late_answer_does_not_satisfy_a_newer_barrier)
{
	setup();
	collector_set_start(set);
	collector_set_flush(set, 100, 20, on_done, &done_calls);
	collector_flushed(slow);
	uv_run(&loop, UV_RUN_DEFAULT); /* slow2 times out */
	ASSERT_EQ(done_calls, 1);
	/* slow2's answer to the first barrier arrives between barriers ... */
	collector_flushed(slow2);
	/* ... and the next close asks everyone again, slow2 included. */
	collector_set_flush(set, 200, 60000, on_done, &done_calls);
	ASSERT_EQ(fake(slow2)->flushes, 2);
	ASSERT_EQ(fake(slow2)->until_ns, 200);
	collector_flushed(slow);
	/* Still waiting for slow2's answer to *this* request. */
	uv_run(&loop, UV_RUN_NOWAIT);
	ASSERT_EQ(done_calls, 1);
	collector_flushed(slow2);
	ASSERT_EQ(done_calls, 2);
	teardown();
}

TEST(collector_close_waits_for_every_collector_and_stops_running_ones)
{
	setup();
	collector_set_start(set);
	collector_set_close(set, on_closed, NULL);
	/* Stopped before being closed; the flush timer is still closing. */
	ASSERT_EQ(fake(slow)->stops, 1);
	ASSERT_EQ(fake(absent)->stops, 0);
	ASSERT_EQ(closed_calls, 0);
	uv_run(&loop, UV_RUN_DEFAULT);
	ASSERT_EQ(closed_calls, 1);
	for (size_t i = 0; i < collector_set_count(set); i++)
		ASSERT_EQ(collector_set_get(set, i)->state, COLLECTOR_CLOSED);
	ASSERT_TRUE(collector_set_get(set, 6) == NULL);
	set = collector_set_free(set);
	hub = trace_free(hub);
	ASSERT_EQ(uv_loop_close(&loop), 0);
}

static void count_handle(uv_handle_t *h, void *arg) { ++*(int *)arg; }

/* As the session manager does: free the set from the close callback. No
 * handle may still be open then (the failed init's timer lives in the
 * set's memory). */
static int handles_at_close = -1;
static void on_closed_free(void *userdata)
{
	handles_at_close = 0;
	uv_walk(&loop, count_handle, &handles_at_close);
	closed_calls++;
	set = collector_set_free(set);
}

TEST(collector_failed_init_is_unavailable_and_never_closed)
{
	struct fake *b;

	setup();
	ASSERT_EQ(broken->state, COLLECTOR_UNAVAILABLE);
	ASSERT_STREQ(broken->reason, "init failed on purpose");
	collector_set_start(set);
	ASSERT_EQ(fake(broken)->starts, 0);
	/* Closed before the loop ever turned: the set's close waits for the
	 * handle the failed init handed over (its memory is the collector's
	 * private data), and close is called for no collector that failed. */
	b = fake(broken);
	collector_set_close(set, on_closed_free, NULL);
	ASSERT_EQ(closed_calls, 0);
	ASSERT_EQ(b->closes, 0);
	ASSERT_EQ(fake(absent)->closes, 0);
	ASSERT_EQ(fake(quick)->closes, 1);
	ASSERT_EQ(broken->state, COLLECTOR_CLOSED);
	uv_run(&loop, UV_RUN_DEFAULT);
	ASSERT_EQ(closed_calls, 1);
	ASSERT_EQ(handles_at_close, 0);
	ASSERT_TRUE(set == NULL);
	hub = trace_free(hub);
	ASSERT_EQ(uv_loop_close(&loop), 0);
}

static void count_agent(void *userdata, const struct collector_agent *a)
{
	ASSERT_EQ(a->pid, 1);
	++*(int *)userdata;
}

/* Status asks only collectors whose init succeeded, whatever their state. */
TEST(collector_status_asks_every_available_collector)
{
	int agents = 0;
	const struct collector_status_sink sink = {.agent = count_agent, .userdata = &agents};

	setup();
	collector_set_status(set, &sink);
	ASSERT_EQ(agents, 4); /* slow, slow2, quick, noflush: ready */
	collector_set_start(set);
	collector_set_status(set, &sink);
	ASSERT_EQ(agents, 8);
	ASSERT_EQ(fake(slow)->statuses, 2);
	ASSERT_EQ(fake(absent)->statuses, 0);
	ASSERT_EQ(fake(broken)->statuses, 0);
	collector_set_status(NULL, &sink);
	ASSERT_EQ(agents, 8);
	teardown();
}

/* Facts go through the set: a reader before any producer published gets
 * "none yet"; a published table is copied, filtered by time, one per pid. */
TEST(collector_facts_read_none_yet_then_what_was_published)
{
	struct host_proc_sample hs = {.mem_total = 8, .have_mem = true}, got;
	struct gpu_proc seen[] = {
		{.pid = 10, .first_ns = 100, .last_ns = 200, .name = "train"},
		{.pid = 11, .first_ns = 300, .last_ns = 400, .name = "eval"},
		{.pid = 10, .first_ns = 150, .last_ns = 250, .name = "train"}, /* on a second GPU */
		{.pid = 12, .first_ns = 900, .last_ns = 950, .name = "later"},
	};
	struct gpu_proc out[8];
	int pids[8];

	setup();
	ASSERT_EQ(collector_set_host_sample(set, &got), -ENODEV);
	ASSERT_EQ(collector_set_host_sample(NULL, &got), -ENODEV);
	ASSERT_EQ(collector_set_gpu_pids(set, pids, 8, 0), 0);
	ASSERT_EQ(collector_set_gpu_procs(NULL, out, 8, 0, INT64_MAX), 0);

	collector_publish_host_sample(quick, &hs);
	hs.mem_total = 9; /* copied: the producer's later changes are its own */
	ASSERT_OK(collector_set_host_sample(set, &got));
	ASSERT_TRUE(got.have_mem && !got.have_cpu);
	ASSERT_EQ(got.mem_total, 8);

	ASSERT_OK(collector_publish_gpu_procs(slow, seen, ARRAY_SIZE(seen)));
	seen[0].pid = 99;
	ASSERT_EQ(collector_set_gpu_pids(set, pids, 8, 0), 3);
	ASSERT_EQ(pids[0], 10);
	ASSERT_EQ(pids[1], 11);
	ASSERT_EQ(pids[2], 12);
	ASSERT_EQ(collector_set_gpu_pids(set, pids, 1, 0), 1); /* at most @max */
	/* [250, 800]: the first sighting of 10 ended before, its second did not. */
	ASSERT_EQ(collector_set_gpu_procs(set, out, 8, 250, 800), 2);
	ASSERT_EQ(out[0].pid, 11);
	ASSERT_STREQ(out[0].name, "eval");
	ASSERT_EQ(out[1].pid, 10);
	ASSERT_EQ(collector_set_gpu_pids(set, pids, 8, 500), 1);

	/* A new table replaces the old one whole. */
	ASSERT_OK(collector_publish_gpu_procs(slow, NULL, 0));
	ASSERT_EQ(collector_set_gpu_pids(set, pids, 8, 0), 0);
	teardown();
}

TEST_MAIN()
