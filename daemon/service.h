/* SPDX-License-Identifier: MIT */
/*
 * service.h - tensorflow.ProfilerService and profd.Profd on top of the
 * session manager: request validation, encoding on the thread pool,
 * in-band and repository delivery. [loop thread]
 */
#pragma once

#include <stdint.h>

#include "delivery.h"
#include "rpc.h"
#include "session.h"

struct service_cfg {
	const char *hostname;          /* XSpace.hostnames[0] */
	uint64_t max_duration_ms;      /* also the longest start delay */
	const struct repo_allow *allow;
	const char *agent_socket;      /* reported by Status */
	const char *agent_hint;        /* likewise (agent-path.h) */
};

struct service;

int service_new(uv_loop_t *loop, const struct service_cfg *cfg, struct session_mgr *mgr,
		struct rpc_server *srv, struct service **ret);
/* Jobs still encoding (they hold no rpc reference after their call ends). */
unsigned service_jobs(const struct service *s);
/* SIGHUP reload (main.c): the limit for requests that arrive from now on;
 * captures already open keep the duration they were granted. */
void service_set_max_duration(struct service *s, uint64_t max_duration_ms);
struct service *service_free(struct service *s);
