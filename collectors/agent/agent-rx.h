/* SPDX-License-Identifier: MIT */
/*
 * agent-rx.h - what the gpu.agent receiver's files share (agent-receiver.c,
 * agent-rx-conn.c, agent-rx-socket.c): its state and the calls between
 * them. Not an interface for anyone else (agent-receiver.h). [loop thread]
 *
 * Ownership: the collector's private area is one struct rx (agent-receiver.c
 * sets it up in init and frees it in close); each accepted connection is a
 * struct conn on rx->conns, created by rx_on_connection() and freed when
 * its pipe has closed (agent-rx-conn.c).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent-map.h"
#include "agent-opts.h"
#include "agent-parse.h"
#include "agent-proto.h"
#include "collector.h"

#define RX_CHUNK (64u << 10)
/*
 * The agent socket is open to every local user by default (jobs of any user
 * must reach it; --agent-socket-mode/-group/--agent-allow-uid narrow that),
 * so everything a connection can make profd hold is bounded: the
 * connections (overall and per uid), the time to say HELLO, and (in
 * agent-map.h) the string bytes and the lines one process may add.
 */
#define MAX_CONNS 256u
#define MAX_CONNS_PER_UID 64u
#define HELLO_DEADLINE_MS 2000u

struct conn {
	struct rx *rx;
	uv_pipe_t pipe;
	struct conn *next, *prev;
	uint8_t *buf;
	size_t len, cap;
	bool closing, capturing, flush_pending;
	struct agent_parse ps; /* ps.hello, ps.version: the agent's protocol version */
	struct agent_src src;  /* src.pid, src.name: who this is, for every message */
	uint32_t claimed_pid;  /* what HELLO said (differs inside a pid namespace) */
	uid_t uid;             /* SO_PEERCRED; 0 if unknown */
	int64_t accepted_mono;
	char cmdline[512];
	struct agent_stats stats;
};

struct rx {
	struct collector *c;
	uv_pipe_t server;
	char path[108];
	struct conn *conns;
	unsigned n_conns;
	unsigned pending_closes;
	bool closing;
	bool running;
	uint64_t start_token;
	struct agent_opts opts; /* the open windows' union (agent_options()), sent in START */
	uint64_t flush_token;
	unsigned flush_waiting;
	uv_timer_t sweep; /* closes connections silent past the HELLO deadline */
	unsigned agents_in_window;
	uint64_t refused_uid; /* connections closed for --agent-allow-uid */
	struct agent_map map;
	/* Pids of agents that left since the collectors started (a ring): a
	 * job that ended before its window closed still had an agent. */
	uint32_t left_pids[MAX_CONNS];
	unsigned n_left;
};

static inline struct rx *to_rx(struct collector *c) { return collector_priv(c); }

/* ---- agent-rx-conn.c: connections, frames in and out ---- */

/* libuv's connection callback of rx->server: accept, check the peer
 * (--agent-allow-uid, the connection limits), start reading. */
void rx_on_connection(uv_stream_t *server, int status);
/* Close @k (once; @why logged, NULL for a quiet close): unlinked now,
 * freed when its pipe has closed. */
void rx_conn_close(struct conn *k, const char *why);
/* One frame of @kind to @k; 0 or -errno (then @k is being closed). */
int rx_conn_send(struct conn *k, uint16_t kind, const void *payload, uint32_t len);
/* START with the current token and the open windows' options to @k;
 * rx_conn_start() then counts it capturing and restarts its mapping source
 * and statistics (nothing, when the send failed). */
int rx_conn_send_start(struct conn *k);
void rx_conn_start(struct conn *k);
/* rx->map.n_capturing from the connections (the fair share). */
void rx_count_capturing(struct rx *rx);
/* A closing receiver whose last handle has closed tells the core
 * (collector_closed()); otherwise nothing. */
void rx_maybe_closed(struct rx *rx);

/* The receiver's settings (agent-receiver.h); a collector_cfg without
 * them (tests, a daemon with no socket) reads as all defaults. */
const struct agent_receiver_cfg *rx_settings(const struct collector_cfg *cfg);

/* ---- agent-rx-socket.c: the listening socket ---- */

/* Another live profd answers on @path (then it is left alone). */
bool rx_socket_alive(const char *path);
/* A listening socket at @path with cfg's mode and group, its directory
 * checked first: the fd, or -errno with *@step the step that failed and,
 * for an unsafe directory, @why. */
int rx_listen_socket(const struct agent_receiver_cfg *cfg, const char *path, const char **step, char *why,
		     size_t why_size);
