/* SPDX-License-Identifier: MIT */
/*
 * server-int.h - what rpc/'s server files share (server.c, call.c): the
 * server and call state and the calls between them. Not part of rpc.h.
 *
 * Ownership: struct rpc_server is server.c's (new .. free); each struct
 * rpc_call is call.c's, from call_request() until its last reference is
 * dropped. Both are touched only on the loop thread, except the event
 * list (head, tail) under mu, which the completion-queue thread fills.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <grpc/grpc.h>

#include "auth.h"
#include "rpc.h"

#define OUTSTANDING_REQUESTS 8
#define DRAIN_MS 200 /* at shutdown, once no call is left: time for replies to drain */

enum tag_kind { TAG_NEW_CALL, TAG_RECV, TAG_SEND, TAG_CLOSE, TAG_SHUTDOWN };

struct tag {
	enum tag_kind kind;
	void *ptr;
};

struct method {
	char *path;
	const ProtobufCMessageDescriptor *desc;
	rpc_handler_cb cb;
	void *userdata;
};

struct rpc_call {
	struct rpc_server *srv;
	grpc_call *call;
	grpc_call_details details;
	grpc_metadata_array md;
	grpc_byte_buffer *recv_buf;
	grpc_slice status_slice;
	bool have_status_slice;
	int cancelled; /* written by gRPC, read after `closed` */
	bool closed;
	bool replied;
	bool with_handler; /* the handler holds a reference */
	int refs;
	const struct method *m;
	ProtobufCMessage *req;
	rpc_cancel_cb cancel_cb;
	void *cancel_ud;
	char *peer;
	struct rpc_auth_peer who; /* what the access check learnt (auth.c) */
	/* Waiting for the request message: on the server's wait list since
	 * accepted_ms (loop time); timed_out once the server cancelled it. */
	bool waiting, timed_out;
	uint64_t accepted_ms;
	struct rpc_call *wait_prev, *wait_next;
	struct tag t_new, t_recv, t_send, t_close;
	/* The reply message: its size and when it was handed to gRPC, so the
	 * time to send a large one is logged (bench/agent-stream reads it). */
	size_t reply_len;
	int64_t reply_mono;
};

/* Replies from this size on log how long they took to send, at info. */
#define REPLY_LOG_MIN ((size_t)1 << 20)

struct ev_node {
	struct tag *tag;
	int ok;
	bool cq_done;
	struct ev_node *next;
};

struct rpc_server {
	uv_loop_t *loop;
	grpc_server *server;
	grpc_completion_queue *cq;
	uv_thread_t cq_thread;
	bool thread_started;
	uv_async_t async;
	uv_timer_t grace;
	/* Cancels calls whose request message has not arrived in time; runs
	 * only while the wait list (oldest first, all with one deadline) is
	 * non-empty. */
	uv_timer_t first_msg;
	struct rpc_call *wait_head, *wait_tail;
	struct rpc_limits lim;
	uv_mutex_t mu;
	struct ev_node *head, *tail; /* guarded by mu */
	struct method *methods;
	size_t n_methods;
	struct rpc_auth *auth; /* NULL: open; ours, read-only once listening */
	bool started, shutting_down, shutdown_tag_seen, destroyed, grace_cut;
	unsigned live;
	int open_handles;
	struct tag t_shutdown;
	void (*done)(void *);
	void *done_ud;
};

/* ---- call.c: one call's steps, dispatched by server.c's on_async() ---- */

/* Ask gRPC for one more incoming call; 0 or -errno. */
int call_request(struct rpc_server *s);
void call_on_new(struct rpc_call *c, int ok);
void call_on_recv(struct rpc_call *c, int ok);
void call_on_sent(struct rpc_call *c, int ok);
void call_on_close(struct rpc_call *c);

/* ---- server.c ---- */

/* Shutting down: tear down once the shutdown tag has arrived and no call
 * is left (called as calls go away). */
void server_maybe_finish_shutdown(struct rpc_server *s);
