/* SPDX-License-Identifier: MIT */
/*
 * capture-opts.c - ProfileOptions.advanced_configuration -> struct
 * capture_opts; see capture-opts.h and docs/options.md.
 *
 * Every value is a client's: integers are range-checked before any
 * conversion, strings are bounded and checked character by character, and
 * a key or text quoted in a warning is cut and made printable ASCII.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/utf8.h"
#include "capture-opts.h"

#define ACV_CASE(x) TENSORFLOW__PROFILE_OPTIONS__ADVANCED_CONFIG_VALUE__VALUE_##x

enum val_type { V_INT, V_BOOL, V_STRING };

void capture_opts_default(struct capture_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->agent.flags = AGENT_START_NVTX | AGENT_START_PY_STACKS;
	o->agent.py_max_depth = CAPTURE_PY_DEPTH_DEFAULT;
	o->agent.py_sample_hz = CAPTURE_PY_SAMPLE_HZ_DEFAULT;
	o->agent.pm_interval_us = CAPTURE_PM_INTERVAL_DEFAULT_US;
	o->agent.pm_buffer_mb = CAPTURE_PM_BUFFER_DEFAULT_MB;
}

void capture_warn(struct capture_warnings *w, const char *fmt, ...)
{
	va_list ap;

	if (w->n >= CAPTURE_WARN_MAX) {
		if (w->left_out < UINT32_MAX)
			w->left_out++;
		return;
	}
	va_start(ap, fmt);
	vsnprintf(w->msg[w->n++], CAPTURE_WARN_LEN, fmt, ap);
	va_end(ap);
}

static bool metric_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_' || c == '.';
}

static bool blank(char c) { return c == ' ' || c == '\t'; }

int capture_opts_set_pm_metrics(struct agent_opts *o, const char *csv, char *why, size_t why_size)
{
	char out[AGENT_PM_METRICS_MAX] = {0};
	size_t len = 0;
	unsigned n = 0;
	const char *p = csv;
	size_t k;

	while (blank(*p))
		p++;
	k = strlen(p);
	while (k && blank(p[k - 1]))
		k--;
	if (k == strlen("default") && memcmp(p, "default", k) == 0) {
		o->flags |= AGENT_START_PM_SAMPLING;
		memset(o->pm_metrics, 0, sizeof(o->pm_metrics));
		return 0;
	}
	while (*p) {
		const char *b, *e;

		while (blank(*p))
			p++;
		b = p;
		while (*p && *p != ',')
			p++;
		e = p;
		if (*p == ',')
			p++;
		while (e > b && blank(e[-1]))
			e--;
		if (e == b)
			continue; /* empty item: skipped, as upstream does */
		for (const char *c = b; c < e; c++)
			if (!metric_char(*c)) {
				snprintf(why, why_size, "metric names are [A-Za-z0-9_.] (byte %zu of the list)",
					 (size_t)(c - csv) + 1);
				return -EINVAL;
			}
		if (++n > AGENT_PM_MAX_METRICS) {
			snprintf(why, why_size, "more than %u metrics", AGENT_PM_MAX_METRICS);
			return -EINVAL;
		}
		if (len + (len > 0) + (size_t)(e - b) >= sizeof(out)) {
			snprintf(why, why_size, "the metric list is longer than %u bytes",
				 AGENT_PM_METRICS_MAX - 1);
			return -EINVAL;
		}
		if (len)
			out[len++] = ',';
		memcpy(out + len, b, (size_t)(e - b));
		len += (size_t)(e - b);
	}
	/* Upstream: sampling is on when the list names a metric. */
	if (n)
		o->flags |= AGENT_START_PM_SAMPLING;
	else
		o->flags &= ~(uint64_t)AGENT_START_PM_SAMPLING;
	memcpy(o->pm_metrics, out, sizeof(out));
	return 0;
}

static const char *type_name(int value_case)
{
	switch (value_case) {
	case ACV_CASE(INT64_VALUE):
		return "int64";
	case ACV_CASE(BOOL_VALUE):
		return "bool";
	case ACV_CASE(STRING_VALUE):
		return "string";
	default:
		return "unset";
	}
}

/* An int64 in [@min, @max], or a warning. */
static bool int_in(const Tensorflow__ProfileOptions__AdvancedConfigValue *v, const char *key,
		   int64_t min, int64_t max, struct capture_warnings *w)
{
	if (v->int64_value < min || v->int64_value > max) {
		capture_warn(w, "advanced_configuration: %s=%" PRId64 " is out of range %" PRId64
			     "..%" PRId64 " (ignored)", key, v->int64_value, min, max);
		return false;
	}
	return true;
}

/* An event cap: 0 = none (upstream's meaning); above --max-events = --max-events. */
static void set_cap(uint64_t *cap, const Tensorflow__ProfileOptions__AdvancedConfigValue *v,
		    const char *key, uint64_t max_events, struct capture_warnings *w)
{
	if (!int_in(v, key, 0, INT64_MAX, w))
		return;
	*cap = (uint64_t)v->int64_value;
	if (max_events && *cap > max_events)
		*cap = max_events;
}

static void set_flag(struct agent_opts *o, uint64_t flag, bool on)
{
	if (on)
		o->flags |= flag;
	else
		o->flags &= ~flag;
}

struct key {
	const char *name;
	enum val_type type;
};

enum key_id {
	K_MAX_CALLBACK, K_MAX_ACTIVITY, K_MAX_ANNOTATIONS, K_NUM_CHIPS, K_NVTX, K_GRAPH_TRACE,
	K_PM_COUNTERS, K_PM_INTERVAL, K_PM_BUFFER, K_RANGE_COUNTERS, K_RANGE_MULTIPASS,
	K_OVERRIDE_HOSTNAME, K_PY_STACKS, K_PY_DEPTH, K_PY_HZ, K_SNAPSHOT_LAST_MS, K_TPU_CIRCULAR, K_N
};

static const struct key keys[K_N] = {
	[K_MAX_CALLBACK] = {"gpu_max_callback_api_events", V_INT},
	[K_MAX_ACTIVITY] = {"gpu_max_activity_api_events", V_INT},
	[K_MAX_ANNOTATIONS] = {"gpu_max_annotation_strings", V_INT},
	[K_NUM_CHIPS] = {"gpu_num_chips_to_profile_per_task", V_INT},
	[K_NVTX] = {"gpu_enable_nvtx_tracking", V_BOOL},
	[K_GRAPH_TRACE] = {"gpu_enable_cupti_activity_graph_trace", V_BOOL},
	[K_PM_COUNTERS] = {"gpu_pm_sample_counters", V_STRING},
	[K_PM_INTERVAL] = {"gpu_pm_sample_interval_us", V_INT},
	[K_PM_BUFFER] = {"gpu_pm_sample_buffer_size_per_gpu_mb", V_INT},
	[K_RANGE_COUNTERS] = {"gpu_range_profiling_counters", V_STRING},
	[K_RANGE_MULTIPASS] = {"gpu_range_profiling_allow_multipass", V_BOOL},
	[K_OVERRIDE_HOSTNAME] = {"override_hostname", V_STRING},
	[K_PY_STACKS] = {"python_launch_stacks", V_BOOL},
	[K_PY_DEPTH] = {"python_stack_depth", V_INT},
	[K_PY_HZ] = {"python_sample_hz", V_INT},
	[K_SNAPSHOT_LAST_MS] = {"snapshot_last_ms", V_INT},
	[K_TPU_CIRCULAR] = {"tpu_circular_buffer_tracing", V_BOOL},
};

static const int want_case[] = {
	[V_INT] = ACV_CASE(INT64_VALUE),
	[V_BOOL] = ACV_CASE(BOOL_VALUE),
	[V_STRING] = ACV_CASE(STRING_VALUE),
};

static void apply(struct capture_opts *o, enum key_id k,
		  const Tensorflow__ProfileOptions__AdvancedConfigValue *v, uint64_t max_events,
		  struct capture_warnings *w)
{
	const char *key = keys[k].name;
	char why[128], q[72];

	switch (k) {
	case K_MAX_CALLBACK:
		set_cap(&o->max_api_events, v, key, max_events, w);
		break;
	case K_MAX_ACTIVITY:
		set_cap(&o->max_gpu_events, v, key, max_events, w);
		break;
	case K_MAX_ANNOTATIONS:
		set_cap(&o->max_annotations, v, key, max_events, w);
		break;
	case K_NUM_CHIPS:
		if (int_in(v, key, 0, CAPTURE_MAX_CHIPS, w))
			o->num_chips = (uint32_t)v->int64_value;
		break;
	case K_NVTX:
		set_flag(&o->agent, AGENT_START_NVTX, v->bool_value);
		break;
	case K_GRAPH_TRACE:
		set_flag(&o->agent, AGENT_START_GRAPH_TRACE, v->bool_value);
		break;
	case K_PY_STACKS:
		set_flag(&o->agent, AGENT_START_PY_STACKS, v->bool_value);
		break;
	case K_PY_DEPTH:
		if (int_in(v, key, 1, AGENT_PY_MAX_DEPTH, w))
			o->agent.py_max_depth = (uint32_t)v->int64_value;
		break;
	case K_PY_HZ:
		if (int_in(v, key, 1, CAPTURE_PY_SAMPLE_HZ_MAX, w))
			o->agent.py_sample_hz = (uint32_t)v->int64_value;
		break;
	case K_PM_COUNTERS:
		if (capture_opts_set_pm_metrics(&o->agent, v->string_value, why, sizeof(why)) < 0)
			capture_warn(w, "advanced_configuration: %s=\"%s\": %s (ignored)", key,
				     ascii_quote(q, sizeof(q), v->string_value), why);
		break;
	case K_PM_INTERVAL:
		if (int_in(v, key, CAPTURE_PM_INTERVAL_MIN_US, CAPTURE_PM_INTERVAL_MAX_US, w))
			o->agent.pm_interval_us = (uint32_t)v->int64_value;
		break;
	case K_PM_BUFFER:
		/* Upstream clamps; so does profd, and says so. */
		if (v->int64_value < CAPTURE_PM_BUFFER_MIN_MB || v->int64_value > CAPTURE_PM_BUFFER_MAX_MB) {
			uint32_t c = v->int64_value < CAPTURE_PM_BUFFER_MIN_MB ? CAPTURE_PM_BUFFER_MIN_MB
									       : CAPTURE_PM_BUFFER_MAX_MB;
			capture_warn(w, "advanced_configuration: %s=%" PRId64 " is out of range %u..%u "
				     "(%u used)", key, v->int64_value, CAPTURE_PM_BUFFER_MIN_MB,
				     CAPTURE_PM_BUFFER_MAX_MB, c);
			o->agent.pm_buffer_mb = c;
		} else {
			o->agent.pm_buffer_mb = (uint32_t)v->int64_value;
		}
		break;
	case K_RANGE_COUNTERS:
	case K_RANGE_MULTIPASS:
		capture_warn(w, "advanced_configuration: %s: CUPTI range profiling is not supported by "
			     "profd (ignored)", key);
		break;
	case K_SNAPSHOT_LAST_MS:
		/* StartContinuousProfiling's: how much of the ring a snapshot
		 * takes (0: all of it); a capture ignores it. */
		if (int_in(v, key, 0, INT64_MAX, w))
			o->snapshot_last_ms = (uint64_t)v->int64_value;
		break;
	case K_TPU_CIRCULAR:
		/* XProf sets it on every StartContinuousProfiling: the TPU's
		 * trace ring. profd's recorder is a ring anyway: nothing to do,
		 * nothing to warn about. */
	case K_OVERRIDE_HOSTNAME:
	case K_N:
		break; /* the service reads it */
	}
}

void capture_opts_parse(struct capture_opts *o, const Tensorflow__ProfileOptions *po,
			uint64_t max_events, struct capture_warnings *w)
{
	char q[72];

	for (size_t i = 0; po && i < po->n_advanced_configuration; i++) {
		const Tensorflow__ProfileOptions__AdvancedConfigurationEntry *e = po->advanced_configuration[i];
		const Tensorflow__ProfileOptions__AdvancedConfigValue *v = e->value;
		const char *name = e->key ? e->key : "";
		int value_case = v ? (int)v->value_case : 0;
		enum key_id k = 0;

		while (k < K_N && strcmp(keys[k].name, name) != 0)
			k++;
		if (k == K_N) {
			capture_warn(w, "advanced_configuration: unknown key '%s' (ignored)",
				     ascii_quote(q, sizeof(q), name));
			continue;
		}
		if (value_case != want_case[keys[k].type]) {
			/* Upstream refuses a value of another type, too. */
			capture_warn(w, "advanced_configuration: %s takes a value of type %s, "
				     "got %s (ignored)", name, type_name(want_case[keys[k].type]),
				     type_name(value_case));
			continue;
		}
		apply(o, k, v, max_events, w);
	}
}
