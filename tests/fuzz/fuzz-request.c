/* SPDX-License-Identifier: MIT */
/*
 * fuzz-request.c - libFuzzer target for request decoding and validation,
 * the path every gRPC call's bytes take before a handler runs
 * (rpc/server.c): rpc/wirecheck.c's string check, then protobuf-c's unpack
 * of ProfileRequest, MonitorRequest or TerminateRequest (the first input
 * byte picks one), then the name rules daemon/delivery.c applies to what
 * reaches the file system (session_id and host_name as file names,
 * repository_root matched against an allowed directory) and the GPU
 * options parsed from opts.advanced_configuration (daemon/capture-opts.c).
 *
 * Promises checked: a message wirecheck passes and protobuf-c unpacks
 * holds only NUL-free, valid UTF-8 strings of the length the wire said;
 * repo_name_ok() accepts no "", ".", ".." or name with '/'; repo_match()
 * never returns a relative path with a ".." or "." component or a leading
 * '/'. Built by run-fuzz.sh (the generated protobuf-c code comes from the
 * main build's proto library).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"
#include "daemon/capture-opts.h"
#include "daemon/delivery.h"
#include "rpc/wirecheck.h"
#include "tensorflow/profiler_service.pb-c.h"

#define PROMISE(x) \
	do {       \
		if (!(x)) \
			abort(); \
	} while (0)

static void clean_string(const char *s)
{
	if (s)
		PROMISE(utf8_valid(s, strlen(s)));
}

static void name_rule(const char *s)
{
	if (!s || !repo_name_ok(s))
		return;
	PROMISE(s[0] && s[0] != '.' && !strchr(s, '/'));
}

static void root_rule(const char *root)
{
	static char dir[] = "/srv/profiles";
	static char *dirs[] = {dir};
	struct repo_allow allow = {.dirs = dirs, .n = 1, .max_depth = 8};
	size_t idx = 99;
	char *rel = NULL;
	int r;

	if (!root)
		return;
	r = repo_match(&allow, root, &idx, &rel);
	PROMISE(r == 0 || r == 1 || r == -EINVAL || r == -ENAMETOOLONG || r == -E2BIG || r == -ENOMEM);
	if (r != 1)
		return;
	PROMISE(idx == 0 && rel);
	PROMISE(rel[0] != '/');
	/* Every component is one repo_name_ok() accepts ("a//b" is "a/b"). */
	for (char *c = rel, *slash; *c; c = slash + 1) {
		slash = strchr(c, '/');
		if (slash)
			*slash = 0;
		PROMISE(!*c || repo_name_ok(c));
		if (!slash)
			break;
	}
	free(rel);
}

/* The GPU options a request asks for in opts.advanced_configuration
 * (daemon/capture-opts.c): whatever the map holds, the result stays in
 * range and every warning is a bounded, valid string. */
static void options(const Tensorflow__ProfileOptions *po)
{
	struct capture_opts o;
	struct capture_warnings w;
	const uint64_t max_events = 20000000;

	memset(&w, 0, sizeof(w));
	capture_opts_default(&o);
	capture_opts_parse(&o, po, max_events, &w);
	PROMISE(w.n <= CAPTURE_WARN_MAX);
	for (uint32_t i = 0; i < w.n; i++) {
		size_t n = strnlen(w.msg[i], CAPTURE_WARN_LEN);

		PROMISE(n < CAPTURE_WARN_LEN && n > 0 && utf8_valid(w.msg[i], n));
	}
	PROMISE(o.max_api_events <= max_events && o.max_gpu_events <= max_events);
	PROMISE(o.num_chips <= CAPTURE_MAX_CHIPS);
	PROMISE(memchr(o.agent.pm_metrics, 0, sizeof(o.agent.pm_metrics)) != NULL);
	if (o.agent.flags & AGENT_START_PM_SAMPLING) {
		PROMISE(o.agent.pm_interval_us >= CAPTURE_PM_INTERVAL_MIN_US &&
			o.agent.pm_interval_us <= CAPTURE_PM_INTERVAL_MAX_US);
		PROMISE(o.agent.pm_buffer_mb >= CAPTURE_PM_BUFFER_MIN_MB &&
			o.agent.pm_buffer_mb <= CAPTURE_PM_BUFFER_MAX_MB);
	}
}

static void profile(const Tensorflow__ProfileRequest *q)
{
	clean_string(q->repository_root);
	clean_string(q->session_id);
	clean_string(q->host_name);
	for (size_t i = 0; i < q->n_tools; i++)
		clean_string(q->tools[i]);
	name_rule(q->session_id);
	name_rule(q->host_name);
	root_rule(q->repository_root);
	if (q->opts) {
		clean_string(q->opts->repository_path);
		clean_string(q->opts->session_id);
		root_rule(q->opts->repository_path);
	}
	options(q->opts); /* NULL: the defaults alone */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const ProtobufCMessageDescriptor *const descs[] = {
		&tensorflow__profile_request__descriptor,
		&tensorflow__monitor_request__descriptor,
		&tensorflow__terminate_request__descriptor,
	};
	const ProtobufCMessageDescriptor *d;
	ProtobufCMessage *m;
	uint8_t *copy;
	char where[256];
	const char *why = NULL;
	int r;

	if (size < 1)
		return 0;
	d = descs[data[0] % 3];
	size--;
	copy = malloc(size ? size : 1);
	if (!copy)
		return 0;
	memcpy(copy, data + 1, size);
	where[0] = 0;
	r = wire_strings_check(d, copy, size, where, sizeof(where), &why);
	if (r < 0) {
		PROMISE(r == -EILSEQ && why && where[0] && memchr(where, 0, sizeof(where)));
		free(copy);
		return 0;
	}
	PROMISE(r == 0);
	m = protobuf_c_message_unpack(d, NULL, size, copy);
	if (m) {
		if (d == &tensorflow__profile_request__descriptor)
			profile((const Tensorflow__ProfileRequest *)m);
		else if (d == &tensorflow__terminate_request__descriptor)
			clean_string(((const Tensorflow__TerminateRequest *)m)->session_id);
		protobuf_c_message_free_unpacked(m, NULL);
	}
	free(copy);
	return 0;
}
