/* SPDX-License-Identifier: MIT */
/*
 * capture-opts: advanced_configuration -> struct capture_opts (every key,
 * its type, its bounds, the warnings), the PM metric list rules, and
 * capture-limits on a built trace (caps keep the earliest, GPUs by id,
 * NVTX off, distinct annotation texts).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "capture-limits.h"
#include "capture-opts.h"
#include "harness.h"
#include "xspace/names.h"

#define ACV(x) TENSORFLOW__PROFILE_OPTIONS__ADVANCED_CONFIG_VALUE__VALUE_##x

/* A ProfileOptions with up to 16 entries, built on the stack. */
struct req {
	Tensorflow__ProfileOptions o;
	Tensorflow__ProfileOptions__AdvancedConfigurationEntry e[16], *pe[16];
	Tensorflow__ProfileOptions__AdvancedConfigValue v[16];
};

static void req_init(struct req *r)
{
	memset(r, 0, sizeof(*r));
	tensorflow__profile_options__init(&r->o);
	r->o.advanced_configuration = r->pe;
}

static Tensorflow__ProfileOptions__AdvancedConfigValue *add(struct req *r, const char *key)
{
	size_t i = r->o.n_advanced_configuration++;

	tensorflow__profile_options__advanced_configuration_entry__init(&r->e[i]);
	tensorflow__profile_options__advanced_config_value__init(&r->v[i]);
	r->e[i].key = (char *)key;
	r->e[i].value = &r->v[i];
	r->pe[i] = &r->e[i];
	return &r->v[i];
}

static void add_int(struct req *r, const char *key, int64_t v)
{
	Tensorflow__ProfileOptions__AdvancedConfigValue *x = add(r, key);

	x->value_case = ACV(INT64_VALUE);
	x->int64_value = v;
}

static void add_bool(struct req *r, const char *key, bool v)
{
	Tensorflow__ProfileOptions__AdvancedConfigValue *x = add(r, key);

	x->value_case = ACV(BOOL_VALUE);
	x->bool_value = v;
}

static void add_str(struct req *r, const char *key, const char *v)
{
	Tensorflow__ProfileOptions__AdvancedConfigValue *x = add(r, key);

	x->value_case = ACV(STRING_VALUE);
	x->string_value = (char *)v;
}

static struct capture_opts parse(const struct req *r, uint64_t max_events, struct capture_warnings *w)
{
	struct capture_opts o;

	capture_opts_default(&o);
	memset(w, 0, sizeof(*w));
	capture_opts_parse(&o, r ? &r->o : NULL, max_events, w);
	return o;
}

TEST(defaults_nvtx_on_nothing_else)
{
	struct capture_warnings w;
	struct capture_opts o = parse(NULL, 100, &w);

	/* Python launch stacks cost nothing in a job without Python (the
	 * agent enables its callbacks only where it found an interpreter). */
	ASSERT_EQ(o.agent.flags, AGENT_START_NVTX | AGENT_START_PY_STACKS);
	ASSERT_EQ(o.agent.py_max_depth, 64);
	ASSERT_EQ(o.agent.py_sample_hz, 100);
	ASSERT_EQ(o.agent.pm_interval_us, 500);
	ASSERT_EQ(o.agent.pm_buffer_mb, 64);
	ASSERT_STREQ(o.agent.pm_metrics, "");
	ASSERT_EQ(o.max_api_events + o.max_gpu_events + o.max_annotations + o.num_chips, 0);
	ASSERT_EQ(w.n, 0);
}

TEST(every_key)
{
	struct req r;
	struct capture_warnings w;
	struct capture_opts o;

	req_init(&r);
	add_int(&r, "gpu_max_callback_api_events", 11);
	add_int(&r, "gpu_max_activity_api_events", 12);
	add_int(&r, "gpu_max_annotation_strings", 13);
	add_int(&r, "gpu_num_chips_to_profile_per_task", 2);
	add_bool(&r, "gpu_enable_nvtx_tracking", false);
	add_bool(&r, "gpu_enable_cupti_activity_graph_trace", true);
	add_str(&r, "gpu_pm_sample_counters", "a.b, c_d");
	add_int(&r, "gpu_pm_sample_interval_us", 1000);
	add_int(&r, "gpu_pm_sample_buffer_size_per_gpu_mb", 256);
	add_str(&r, "override_hostname", "h");
	add_bool(&r, "python_launch_stacks", false);
	add_int(&r, "python_stack_depth", 10);
	add_int(&r, "python_sample_hz", 1000);
	o = parse(&r, 1000, &w);
	ASSERT_EQ(w.n, 0);
	ASSERT_EQ(o.agent.py_max_depth, 10);
	ASSERT_EQ(o.agent.py_sample_hz, 1000);
	ASSERT_EQ(o.max_api_events, 11);
	ASSERT_EQ(o.max_gpu_events, 12);
	ASSERT_EQ(o.max_annotations, 13);
	ASSERT_EQ(o.num_chips, 2);
	ASSERT_EQ(o.agent.flags, AGENT_START_GRAPH_TRACE | AGENT_START_PM_SAMPLING);
	ASSERT_STREQ(o.agent.pm_metrics, "a.b,c_d");
	ASSERT_EQ(o.agent.pm_interval_us, 1000);
	ASSERT_EQ(o.agent.pm_buffer_mb, 256);
}

TEST(bounds)
{
	struct req r;
	struct capture_warnings w;
	struct capture_opts o;

	req_init(&r);
	add_int(&r, "gpu_max_activity_api_events", INT64_MAX); /* lowered to --max-events */
	add_int(&r, "gpu_max_callback_api_events", -1);
	add_int(&r, "gpu_num_chips_to_profile_per_task", 4097);
	add_int(&r, "gpu_pm_sample_interval_us", 9);
	add_int(&r, "gpu_pm_sample_buffer_size_per_gpu_mb", 1);
	add_int(&r, "python_stack_depth", 129);
	add_int(&r, "python_sample_hz", 0);
	add_bool(&r, "python_launch_stacks", true);
	o = parse(&r, 5000, &w);
	ASSERT_EQ(o.agent.py_max_depth, 64);
	ASSERT_EQ(o.agent.py_sample_hz, 100);
	ASSERT_EQ(o.max_gpu_events, 5000);
	ASSERT_EQ(o.max_api_events, 0);
	ASSERT_EQ(o.num_chips, 0);
	ASSERT_EQ(o.agent.pm_interval_us, 500);
	ASSERT_EQ(o.agent.pm_buffer_mb, 64);
	ASSERT_EQ(w.n, 6);
	ASSERT_STREQ(w.msg[4], "advanced_configuration: python_stack_depth=129 is out of range 1..128 (ignored)");
	ASSERT_STREQ(w.msg[5], "advanced_configuration: python_sample_hz=0 is out of range 1..1000 (ignored)");
	ASSERT_STREQ(w.msg[0], "advanced_configuration: gpu_max_callback_api_events=-1 is out of range "
			       "0..9223372036854775807 (ignored)");
	ASSERT_STREQ(w.msg[1], "advanced_configuration: gpu_num_chips_to_profile_per_task=4097 is out of "
			       "range 0..4096 (ignored)");
	ASSERT_STREQ(w.msg[2], "advanced_configuration: gpu_pm_sample_interval_us=9 is out of range "
			       "10..1000000 (ignored)");
	ASSERT_STREQ(w.msg[3], "advanced_configuration: gpu_pm_sample_buffer_size_per_gpu_mb=1 is out of "
			       "range 64..4096 (64 used)");
	/* The upper ends are allowed. */
	req_init(&r);
	add_int(&r, "gpu_pm_sample_interval_us", 1000000);
	add_int(&r, "gpu_pm_sample_buffer_size_per_gpu_mb", 4096);
	add_int(&r, "gpu_num_chips_to_profile_per_task", 4096);
	add_int(&r, "python_stack_depth", 128);
	add_int(&r, "python_sample_hz", 1);
	o = parse(&r, 5000, &w);
	ASSERT_EQ(w.n, 0);
	ASSERT_EQ(o.agent.py_max_depth, 128);
	ASSERT_EQ(o.agent.py_sample_hz, 1);
	ASSERT_EQ(o.agent.pm_interval_us, 1000000);
	ASSERT_EQ(o.agent.pm_buffer_mb, 4096);
	ASSERT_EQ(o.num_chips, 4096);
}

TEST(types_are_upstreams)
{
	struct req r;
	struct capture_warnings w;
	struct capture_opts o;

	req_init(&r);
	add_str(&r, "gpu_max_activity_api_events", "10");
	add_int(&r, "gpu_enable_nvtx_tracking", 0);
	add_bool(&r, "gpu_pm_sample_counters", true);
	add(&r, "gpu_enable_cupti_activity_graph_trace"); /* no value case */
	add_int(&r, "override_hostname", 7);
	add_int(&r, "python_launch_stacks", 0);
	o = parse(&r, 100, &w);
	ASSERT_EQ(o.max_gpu_events, 0);
	ASSERT_EQ(o.agent.flags, AGENT_START_NVTX | AGENT_START_PY_STACKS);
	ASSERT_EQ(w.n, 6);
	ASSERT_STREQ(w.msg[5], "advanced_configuration: python_launch_stacks takes a value of type bool, "
			       "got int64 (ignored)");
	ASSERT_STREQ(w.msg[0], "advanced_configuration: gpu_max_activity_api_events takes a value of type "
			       "int64, got string (ignored)");
	ASSERT_STREQ(w.msg[1], "advanced_configuration: gpu_enable_nvtx_tracking takes a value of type "
			       "bool, got int64 (ignored)");
	ASSERT_STREQ(w.msg[2], "advanced_configuration: gpu_pm_sample_counters takes a value of type "
			       "string, got bool (ignored)");
	ASSERT_STREQ(w.msg[3], "advanced_configuration: gpu_enable_cupti_activity_graph_trace takes a value "
			       "of type bool, got unset (ignored)");
	ASSERT_STREQ(w.msg[4], "advanced_configuration: override_hostname takes a value of type string, "
			       "got int64 (ignored)");
}

TEST(unknown_keys_hostile_names_bounded_warnings)
{
	struct req r;
	struct capture_warnings w;
	char names[12][8];

	req_init(&r);
	add_int(&r, "gpu_foo\n\x01" "bar", 1);
	for (int i = 0; i < 12; i++) {
		snprintf(names[i], sizeof(names[i]), "k%d", i);
		add_bool(&r, names[i], true);
	}
	(void)parse(&r, 100, &w);
	ASSERT_EQ(w.n, CAPTURE_WARN_MAX);
	ASSERT_EQ(w.left_out, 13 - CAPTURE_WARN_MAX);
	ASSERT_STREQ(w.msg[0], "advanced_configuration: unknown key 'gpu_foo??bar' (ignored)");
	ASSERT_STREQ(w.msg[1], "advanced_configuration: unknown key 'k0' (ignored)");
}

TEST(range_profiling_is_named_not_supported)
{
	struct req r;
	struct capture_warnings w;

	req_init(&r);
	add_str(&r, "gpu_range_profiling_counters", "x");
	add_bool(&r, "gpu_range_profiling_allow_multipass", true);
	(void)parse(&r, 100, &w);
	ASSERT_EQ(w.n, 2);
	ASSERT_TRUE(strstr(w.msg[0], "gpu_range_profiling_counters: CUPTI range profiling is not supported"));
}

TEST(pm_metric_lists)
{
	struct agent_opts o;
	char why[128], many[1024] = "";

	memset(&o, 0, sizeof(o));
	ASSERT_OK(capture_opts_set_pm_metrics(&o, "default", why, sizeof(why)));
	ASSERT_EQ(o.flags, AGENT_START_PM_SAMPLING);
	ASSERT_STREQ(o.pm_metrics, "");
	memset(&o, 0, sizeof(o));
	ASSERT_OK(capture_opts_set_pm_metrics(&o, " default ", why, sizeof(why)));
	ASSERT_EQ(o.flags, AGENT_START_PM_SAMPLING);
	ASSERT_STREQ(o.pm_metrics, "");
	ASSERT_OK(capture_opts_set_pm_metrics(&o, " , ,", why, sizeof(why)));
	ASSERT_EQ(o.flags, 0); /* no metric: off, as upstream */
	ASSERT_OK(capture_opts_set_pm_metrics(&o, "", why, sizeof(why)));
	ASSERT_EQ(o.flags, 0);
	ASSERT_EQ(capture_opts_set_pm_metrics(&o, "a,b c", why, sizeof(why)), -EINVAL);
	ASSERT_TRUE(strstr(why, "[A-Za-z0-9_.]"));
	ASSERT_EQ(capture_opts_set_pm_metrics(&o, "a;b", why, sizeof(why)), -EINVAL);
	ASSERT_EQ(o.flags, 0); /* a refused list changes nothing */
	/* AGENT_PM_MAX_METRICS names fit, one more does not. */
	for (unsigned i = 0; i < AGENT_PM_MAX_METRICS; i++)
		snprintf(many + strlen(many), sizeof(many) - strlen(many), "%sm%u", i ? "," : "", i);
	ASSERT_OK(capture_opts_set_pm_metrics(&o, many, why, sizeof(why)));
	ASSERT_STREQ(o.pm_metrics, many);
	strcat(many, ",x");
	ASSERT_EQ(capture_opts_set_pm_metrics(&o, many, why, sizeof(why)), -EINVAL);
	ASSERT_TRUE(strstr(why, "more than 16 metrics"));
	/* The csv must fit AGENT_PM_METRICS_MAX with its NUL. */
	memset(many, 'a', AGENT_PM_METRICS_MAX);
	many[AGENT_PM_METRICS_MAX] = 0;
	ASSERT_EQ(capture_opts_set_pm_metrics(&o, many, why, sizeof(why)), -EINVAL);
	ASSERT_TRUE(strstr(why, "longer than 447 bytes"));
	many[AGENT_PM_METRICS_MAX - 1] = 0;
	ASSERT_OK(capture_opts_set_pm_metrics(&o, many, why, sizeof(why)));
	ASSERT_EQ(strlen(o.pm_metrics), AGENT_PM_METRICS_MAX - 1);
}

/* ---- capture-limits on a built trace ---------------------------------------- */

static void put(struct trace_plane *p, int64_t line, const char *lname, const char *ev, int64_t t)
{
	struct trace_line *l = trace_line(p, line, lname);
	struct trace_event e = {.start_ns = t, .dur_ns = 1};
	int64_t m = trace_plane_event_id(p, ev);

	ASSERT_TRUE(l && m > 0);
	e.meta = (uint32_t)m;
	ASSERT_OK(trace_line_append(l, &e));
}

static uint64_t line_count(struct trace *t, const char *plane, int64_t line)
{
	struct trace_plane *p = trace_find_plane(t, plane);

	for (uint32_t i = 0; p && i < p->n_lines; i++)
		if (p->lines[i]->id == line)
			return p->lines[i]->count;
	return UINT64_MAX;
}

static bool has_diag(const struct trace *t, const char *text)
{
	for (uint32_t i = 0; i < t->n_diags; i++)
		if (strcmp(t->diags[i].text, text) == 0)
			return true;
	return false;
}

static struct trace *sample(void)
{
	struct trace *t;
	struct trace_plane *host, *g0, *g1, *g2;

	ASSERT_OK(trace_new(0, &t));
	host = trace_plane(t, XN_PLANE_HOST, 0);
	g2 = trace_plane(t, "/device:GPU:2", 3);
	g0 = trace_plane(t, "/device:GPU:0", 1);
	g1 = trace_plane(t, "/device:GPU:1", 2);
	ASSERT_TRUE(host && g0 && g1 && g2);
	/* API calls on two threads, interleaved in time: 10, 11, 20, 21, 30, 31 */
	for (int i = 1; i <= 3; i++) {
		put(host, 1, "app (pid 5)/tid 5", "cuLaunchKernel", i * 10);
		put(host, 2, "app (pid 5)/tid 6", "cuMemcpy", i * 10 + 1);
	}
	/* NVTX texts a, b, a, c on one line */
	put(host, 3, "app (pid 5)/tid 5/NVTX", "a", 1);
	put(host, 3, "app (pid 5)/tid 5/NVTX", "b", 2);
	put(host, 3, "app (pid 5)/tid 5/NVTX", "a", 3);
	put(host, 3, "app (pid 5)/tid 5/NVTX", "c", 4);
	/* a host line that is no agent's */
	put(host, 4, "Process CPU", "cpu", 5);
	/* device events: GPU:0 at 100..104 and a derived line; GPU:1 at 50, 150 */
	for (int i = 0; i < 5; i++)
		put(g0, 1, "Stream #7(Compute)", "k", 100 + i);
	put(g0, 0xdeadbeef, "Steps", "1", 100);
	put(g1, 1, "Stream #3(Compute)", "k", 50);
	put(g1, 1, "Stream #3(Compute)", "k", 150);
	put(g2, 1, "Stream #1(Compute)", "k", 60);
	return t;
}

TEST(limits_nothing_set_changes_nothing)
{
	struct trace *t = sample();
	struct capture_opts o;
	uint64_t n = t->n_events;

	capture_opts_default(&o);
	capture_limits_apply(t, &o, 0);
	ASSERT_EQ(t->n_events, n);
	ASSERT_EQ(t->n_diags, 0);
	trace_free(t);
}

TEST(limits_api_cap_keeps_the_earliest_across_threads)
{
	struct trace *t = sample();
	struct capture_opts o;

	capture_opts_default(&o);
	o.max_api_events = 3; /* 10, 11, 20 */
	capture_limits_apply(t, &o, 0);
	ASSERT_EQ(line_count(t, XN_PLANE_HOST, 1), 2);
	ASSERT_EQ(line_count(t, XN_PLANE_HOST, 2), 1);
	ASSERT_EQ(line_count(t, XN_PLANE_HOST, 3), 4); /* NVTX is not API */
	ASSERT_EQ(line_count(t, XN_PLANE_HOST, 4), 1);
	ASSERT_TRUE(has_diag(t, "gpu_max_callback_api_events=3: 3 CUDA API events beyond the cap were dropped"));
	trace_free(t);
}

TEST(limits_gpu_cap_and_ties)
{
	struct trace *t;
	struct trace_plane *g;
	struct capture_opts o;

	/* device cap over planes: 50, 60, 100, 101 kept; derived lines untouched */
	t = sample();
	capture_opts_default(&o);
	o.max_gpu_events = 4;
	capture_limits_apply(t, &o, 0);
	ASSERT_EQ(line_count(t, "/device:GPU:1", 1), 1);
	ASSERT_EQ(line_count(t, "/device:GPU:2", 1), 1);
	ASSERT_EQ(line_count(t, "/device:GPU:0", 1), 2);
	ASSERT_EQ(line_count(t, "/device:GPU:0", 0xdeadbeef), 1);
	ASSERT_TRUE(has_diag(t, "gpu_max_activity_api_events=4: 4 GPU activity events beyond the cap were dropped"));
	trace_free(t);
	/* Ten events at one time: exactly the cap is kept. */
	ASSERT_OK(trace_new(0, &t));
	g = trace_plane(t, "/device:GPU:0", 1);
	for (int i = 0; i < 10; i++)
		put(g, 1, "Stream #1()", "k", INT64_MAX - 1);
	put(g, 2, "Stream #2()", "k", INT64_MIN);
	o.max_gpu_events = 6;
	capture_limits_apply(t, &o, 0);
	ASSERT_EQ(line_count(t, "/device:GPU:0", 1), 5);
	ASSERT_EQ(line_count(t, "/device:GPU:0", 2), 1);
	ASSERT_EQ(t->n_events, 6);
	trace_free(t);
}

TEST(limits_chips_by_id)
{
	struct trace *t = sample();
	struct capture_opts o;

	capture_opts_default(&o);
	o.num_chips = 2;
	capture_limits_apply(t, &o, 0);
	ASSERT_TRUE(trace_find_plane(t, "/device:GPU:0") && trace_find_plane(t, "/device:GPU:1"));
	ASSERT_TRUE(!trace_find_plane(t, "/device:GPU:2"));
	ASSERT_TRUE(has_diag(t, "gpu_num_chips_to_profile_per_task=2: 1 GPU plane(s) left out: /device:GPU:2"));
	trace_free(t);
}

TEST(limits_nvtx_off_and_annotation_cap)
{
	struct trace *t = sample();
	struct capture_opts o;

	capture_opts_default(&o);
	o.agent.flags = 0;
	capture_limits_apply(t, &o, 0);
	ASSERT_EQ(line_count(t, XN_PLANE_HOST, 3), 0);
	ASSERT_EQ(line_count(t, XN_PLANE_HOST, 1), 3);
	ASSERT_TRUE(has_diag(t, "gpu_enable_nvtx_tracking=false: 4 NVTX ranges another capture asked for "
				"were left out"));
	trace_free(t);
	t = sample();
	capture_opts_default(&o);
	o.max_annotations = 2; /* a, b kept (a twice); c goes */
	capture_limits_apply(t, &o, 0);
	ASSERT_EQ(line_count(t, XN_PLANE_HOST, 3), 3);
	ASSERT_TRUE(has_diag(t, "gpu_max_annotation_strings=2: 1 NVTX ranges with texts beyond the first 2 "
				"distinct ones were dropped"));
	trace_free(t);
}

/* A window at python_tracer_level 0 (no AGENT_START_PY_SAMPLE) beside one
 * that asked for frame spans: the spans leave its snapshot, the API calls
 * around them stay; the window that asked keeps them. */
TEST(limits_python_spans_only_where_asked)
{
	struct capture_opts o;

	for (int asked = 0; asked <= 1; asked++) {
		struct trace *t = sample();
		struct trace_plane *host = trace_find_plane(t, XN_PLANE_HOST);

		put(host, 1, "app (pid 5)/tid 5", "$train.py:20 forward", 9);
		put(host, 1, "app (pid 5)/tid 5", XN_PYTHON_STACK_TRUNCATED, 8);
		put(host, 4, "Process CPU", "$not_an_agent_line", 6);
		capture_opts_default(&o);
		if (asked)
			o.agent.flags |= AGENT_START_PY_SAMPLE;
		capture_limits_apply(t, &o, 0);
		ASSERT_EQ(line_count(t, XN_PLANE_HOST, 1), asked ? 5 : 3);
		ASSERT_EQ(line_count(t, XN_PLANE_HOST, 4), 2);
		ASSERT_EQ(has_diag(t, "python_tracer_level=0: 2 Python frame spans another capture asked for were "
				      "left out"), !asked);
		trace_free(t);
	}
}

TEST_MAIN()
