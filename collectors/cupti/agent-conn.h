/* SPDX-License-Identifier: MIT */
/*
 * agent-conn.h - the agent's end of the profd agent socket: connect with
 * backoff, send frames without ever raising SIGPIPE, read daemon commands.
 * Plain POSIX; shared by libprofd-agent.so and tests/agent/fake-agent.c.
 * Single-threaded: only the agent thread uses a struct agent_client.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent-proto.h"

#define AGENT_HEALTHY_MS 5000u

struct agent_client {
	int fd; /* -1 when not connected */
	char path[108];
	uint32_t backoff_ms;    /* next wait before connecting again */
	uint64_t next_try_ns;   /* CLOCK_MONOTONIC */
	uint64_t connected_ns;  /* when the open connection was made */
	bool heard;             /* the daemon sent a frame on this connection */
	uint8_t rbuf[1024]; /* a few daemon frames; START (the largest) is 488 bytes */
	size_t rlen;
	uint64_t send_timeout_ms;
	uint16_t version; /* protocol version of every frame sent and expected (default: ours) */
};
_Static_assert(sizeof(((struct agent_client *)0)->rbuf) >= 2 * (sizeof(struct agent_frame_hdr) + sizeof(struct agent_start)),
	       "the receive buffer holds two STARTs");

/* @path NULL: $PROFD_AGENT_SOCKET, else @dflt. */
void agent_client_init(struct agent_client *c, const char *path, const char *dflt);
/* Try to connect if it is time to (backoff 100 ms doubling to 5 s).
 * 0 connected (or already), -EAGAIN not yet time, -errno failed.
 * The backoff only starts over after a connection proved healthy (it
 * lived AGENT_HEALTHY_MS or the daemon sent a command on it): a daemon
 * that accepts and at once drops us (connection limit, version mismatch)
 * sees one attempt per 5 s from each process, not a storm. */
int agent_client_connect(struct agent_client *c);
void agent_client_close(struct agent_client *c);
/* Send one frame (blocking up to the send timeout; MSG_NOSIGNAL). On any
 * error the connection is closed and -errno returned. */
int agent_client_send(struct agent_client *c, uint16_t kind, const void *payload, uint32_t len);
/* Read what is there without blocking; when a whole daemon frame is in,
 * fill @h and @payload (<= 64 bytes) and return 1; 0 = nothing yet;
 * -errno = connection closed or a malformed frame (then closed). */
int agent_client_recv(struct agent_client *c, struct agent_frame_hdr *h, void *payload, size_t max);
/* HELLO for this process: pid, ppid, comm, cmdline. */
void agent_client_hello(struct agent_hello *h, uint32_t n_devices);
uint64_t agent_mono_ns(void);
uint64_t agent_wall_ns(void);
