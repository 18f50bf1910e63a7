/* SPDX-License-Identifier: MIT */
/*
 * Decoding helpers shared by test-trace.c and test-xspace.c: both look at
 * what the writer produced through protobuf-c's generated XSpace parser
 * (an independent decoder), the store's tests to see its names and stats
 * as readers see them.
 */
#ifndef PROFD_TEST_XSPACE_DECODE_H
#define PROFD_TEST_XSPACE_DECODE_H

#include <string.h>

#include "tensorflow/xplane.pb-c.h"
#include "xspace/xspace.h"


static const Tensorflow__Profiler__XPlane *plane(const Tensorflow__Profiler__XSpace *x, const char *name)
{
	for (size_t i = 0; i < x->n_planes; i++)
		if (strcmp(x->planes[i]->name, name) == 0)
			return x->planes[i];
	return NULL;
}

static const char *meta_name(const Tensorflow__Profiler__XPlane *p, int64_t id, int stats)
{
	size_t n = stats ? p->n_stat_metadata : p->n_event_metadata;

	for (size_t i = 0; i < n; i++) {
		if (stats && p->stat_metadata[i]->key == id)
			return p->stat_metadata[i]->value->name;
		if (!stats && p->event_metadata[i]->key == id)
			return p->event_metadata[i]->value->name;
	}
	return NULL;
}

static Tensorflow__Profiler__XSpace *encode(struct trace *t, int64_t start, int64_t stop,
					    struct xspace_out *out)
{
	struct xspace_info info = {.hostname = "h1", .start_ns = start, .stop_ns = stop};

	if (xspace_encode(t, &info, 16, out) < 0)
		return NULL;
	return tensorflow__profiler__xspace__unpack(NULL, out->xspace_len, out->xspace);
}

#endif
