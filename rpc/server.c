/* SPDX-License-Identifier: MIT */
/*
 * server.c - the gRPC C-core server behind rpc.h.
 *
 * DESIGN
 * ------
 * One completion queue serves as notification and call queue. A dedicated
 * thread blocks in grpc_completion_queue_next() and only moves (tag, ok)
 * pairs into a mutex-protected list, then uv_async_send(); the loop drains
 * the whole list (sends coalesce). Every struct rpc_call is touched only on
 * the loop thread.
 *
 * Call lifetime is a plain reference count, one reference per thing still
 * outstanding: the request/receive batch (later the handler, later the send
 * batch) and the RECV_CLOSE_ON_SERVER batch, which stays pending for the
 * whole call so that cancellation and deadlines are seen as soon as gRPC
 * sees them. `cancelled` is written by gRPC; it is read only after the close
 * event was handled on the loop (reference/grpc-core-notes.md §3).
 *
 * Shutdown: stop accepting, give open calls a grace period, cancel the rest,
 * and tear down only when the shutdown tag has arrived *and* our own live
 * count is 0 (the tag alone does not prove our calls were released).
 */
#define LOG_TOPIC "rpc"

#include <inttypes.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <grpc/support/log.h>
#include <grpc/support/time.h>

#include "auth.h"
#include "base/log.h"
#include "base/parse.h"
#include "base/timeutil.h"
#include "rpc.h"
#include "wirecheck.h"

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

const char *rpc_code_name(int code)
{
	static const char *const names[] = {
		"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
		"NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
		"FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL",
		"UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED",
	};

	return code >= 0 && (size_t)code < ARRAY_SIZE(names) ? names[code] : "?";
}

/* ---- completion-queue thread ------------------------------------------- */

static void push_event(struct rpc_server *s, struct tag *tag, int ok, bool cq_done)
{
	struct ev_node *n = calloc(1, sizeof(*n));

	if (!n)
		abort(); /* losing a completion would leak a call forever */
	n->tag = tag;
	n->ok = ok;
	n->cq_done = cq_done;
	uv_mutex_lock(&s->mu);
	if (s->tail)
		s->tail->next = n;
	else
		s->head = n;
	s->tail = n;
	uv_mutex_unlock(&s->mu);
	uv_async_send(&s->async);
}

/* [cq thread] */
static void cq_thread_main(void *arg)
{
	struct rpc_server *s = arg;

	/* named for `top -H` and bench/agent-stream's CPU per thread */
	(void)prctl(PR_SET_NAME, "profd-cq");
	for (;;) {
		grpc_event ev = grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);

		if (ev.type == GRPC_QUEUE_SHUTDOWN)
			break;
		if (ev.type == GRPC_OP_COMPLETE)
			push_event(s, ev.tag, ev.success, false);
	}
	push_event(s, NULL, 0, true);
}

/* ---- calls --------------------------------------------------------------- */

static void maybe_finish_shutdown(struct rpc_server *s);

static void call_unref(struct rpc_call *c)
{
	struct rpc_server *s = c->srv;

	if (--c->refs > 0)
		return;
	if (c->call)
		grpc_call_unref(c->call);
	grpc_call_details_destroy(&c->details);
	grpc_metadata_array_destroy(&c->md);
	if (c->recv_buf)
		grpc_byte_buffer_destroy(c->recv_buf);
	if (c->have_status_slice)
		grpc_slice_unref(c->status_slice);
	if (c->req)
		protobuf_c_message_free_unpacked(c->req, NULL);
	if (c->peer)
		gpr_free(c->peer);
	rpc_auth_peer_clear(&c->who);
	free(c);
	s->live--;
	maybe_finish_shutdown(s);
}

static int request_call(struct rpc_server *s)
{
	struct rpc_call *c = calloc(1, sizeof(*c));
	grpc_call_error e;

	if (!c)
		return -ENOMEM;
	c->srv = s;
	c->refs = 1;
	c->t_new = (struct tag){TAG_NEW_CALL, c};
	c->t_recv = (struct tag){TAG_RECV, c};
	c->t_send = (struct tag){TAG_SEND, c};
	c->t_close = (struct tag){TAG_CLOSE, c};
	grpc_call_details_init(&c->details);
	grpc_metadata_array_init(&c->md);
	s->live++;
	e = grpc_server_request_call(s->server, &c->call, &c->details, &c->md, s->cq, s->cq, &c->t_new);
	if (e != GRPC_CALL_OK) {
		log_error("grpc_server_request_call: %s", grpc_call_error_to_string(e));
		call_unref(c);
		return -EIO;
	}
	return 0;
}

/* The reply batch is done: gRPC wrote the message to the connection (or
 * gave up on it, @ok false). */
static void on_sent(struct rpc_call *c, int ok)
{
	if (c->reply_len >= REPLY_LOG_MIN)
		log_info("reply to %s: %zu bytes %s in %.1f ms", c->peer ? c->peer : "?", c->reply_len,
			 ok ? "sent" : "not sent", (double)(mono_ns() - c->reply_mono) / 1e6);
	call_unref(c);
}

static void payload_release(struct rpc_payload *p)
{
	if (p && p->free)
		p->free(p->opaque);
}

static int send_reply(struct rpc_call *c, int code, const char *msg, struct rpc_payload *payload)
{
	grpc_op ops[3];
	grpc_byte_buffer *bb = NULL;
	grpc_call_error e;
	size_t n = 0;

	memset(ops, 0, sizeof(ops));
	ops[n].op = GRPC_OP_SEND_INITIAL_METADATA;
	ops[n++].data.send_initial_metadata.count = 0;
	if (payload) {
		grpc_slice sl = payload->free
			? grpc_slice_new_with_user_data((void *)payload->data, payload->len,
							payload->free, payload->opaque)
			: grpc_slice_from_copied_buffer((const char *)payload->data, payload->len);

		bb = grpc_raw_byte_buffer_create(&sl, 1);
		grpc_slice_unref(sl); /* the byte buffer holds its own reference */
		c->reply_len = payload->len;
		c->reply_mono = mono_ns();
		ops[n].op = GRPC_OP_SEND_MESSAGE;
		ops[n++].data.send_message.send_message = bb;
	}
	c->status_slice = grpc_slice_from_copied_string(msg ? msg : "");
	c->have_status_slice = true;
	ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
	ops[n].data.send_status_from_server.status = (grpc_status_code)code;
	ops[n++].data.send_status_from_server.status_details = &c->status_slice;
	c->replied = true;
	c->refs++;
	e = grpc_call_start_batch(c->call, ops, n, &c->t_send, NULL);
	/* The batch took its own reference to the message; ours can go. */
	if (bb)
		grpc_byte_buffer_destroy(bb);
	if (e != GRPC_CALL_OK) {
		log_warn("reply to %s: %s", c->m ? c->m->path : "call", grpc_call_error_to_string(e));
		/* The client must still get a status, not wait for its deadline. */
		grpc_call_cancel_with_status(c->call, (grpc_status_code)code, msg ? msg : "", NULL);
		c->refs--;
		return -EIO;
	}
	return 0;
}

static const struct method *find_method(struct rpc_server *s, grpc_slice path)
{
	for (size_t i = 0; i < s->n_methods; i++)
		if (grpc_slice_str_cmp(path, s->methods[i].path) == 0)
			return &s->methods[i];
	return NULL;
}

/* ---- first-message deadline -------------------------------------------- */

static void wait_remove(struct rpc_call *c)
{
	struct rpc_server *s = c->srv;

	if (!c->waiting)
		return;
	c->waiting = false;
	if (c->wait_prev)
		c->wait_prev->wait_next = c->wait_next;
	else
		s->wait_head = c->wait_next;
	if (c->wait_next)
		c->wait_next->wait_prev = c->wait_prev;
	else
		s->wait_tail = c->wait_prev;
	c->wait_prev = c->wait_next = NULL;
}

static void on_first_msg_timer(uv_timer_t *t)
{
	struct rpc_server *s = t->data;
	uint64_t now = uv_now(s->loop);

	/*
	 * A stream that opened but never sent its request would otherwise hold
	 * its call (and a stream slot) until the client's deadline, which the
	 * client chooses. Cancelling it makes gRPC complete the pending
	 * RECV_MESSAGE, whose handler then drops the last references.
	 */
	while (s->wait_head && now - s->wait_head->accepted_ms >= s->lim.first_message_ms) {
		struct rpc_call *c = s->wait_head;

		wait_remove(c);
		c->timed_out = true;
		log_debug("%s: no request message within %" PRIu64 " ms, cancelling", rpc_call_peer(c),
			  s->lim.first_message_ms);
		grpc_call_cancel_with_status(c->call, GRPC_STATUS_DEADLINE_EXCEEDED,
					     "profd: the request message did not arrive in time", NULL);
	}
	if (!s->wait_head)
		uv_timer_stop(t);
}

static void wait_add(struct rpc_call *c)
{
	struct rpc_server *s = c->srv;
	uint64_t step;

	if (s->lim.first_message_ms == 0)
		return;
	c->waiting = true;
	c->accepted_ms = uv_now(s->loop);
	c->wait_prev = s->wait_tail;
	if (s->wait_tail)
		s->wait_tail->wait_next = c;
	else
		s->wait_head = c;
	s->wait_tail = c;
	if (uv_is_active((uv_handle_t *)&s->first_msg))
		return;
	/* A quarter of the deadline, so a stalled call lives at most 1.25x it. */
	step = s->lim.first_message_ms / 4;
	step = step < 20 ? 20 : step > 1000 ? 1000 : step;
	uv_timer_start(&s->first_msg, on_first_msg_timer, step, step);
}

static void on_new_call(struct rpc_call *c, int ok)
{
	struct rpc_server *s = c->srv;
	grpc_op op;

	if (!ok) { /* the request was killed by shutdown */
		call_unref(c);
		return;
	}
	if (!s->shutting_down)
		(void)request_call(s);
	c->peer = grpc_call_get_peer(c->call);

	memset(&op, 0, sizeof(op));
	op.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
	op.data.recv_close_on_server.cancelled = &c->cancelled;
	c->refs++;
	if (grpc_call_start_batch(c->call, &op, 1, &c->t_close, NULL) != GRPC_CALL_OK) {
		c->refs--;
		call_unref(c);
		return;
	}

	/* Access control first: a refused caller learns nothing, not even
	 * which methods exist. */
	{
		char msg[300];
		int code = rpc_auth_check(s->auth, c->call, &c->md, c->peer, &c->who, msg, sizeof(msg));

		if (code != RPC_OK) {
			log_info("%s refused: %s: %s", c->peer, rpc_code_name(code), msg);
			(void)send_reply(c, code, msg, NULL);
			call_unref(c); /* the request reference */
			return;
		}
	}

	c->m = find_method(s, c->details.method);
	if (!c->m) {
		char *path = grpc_slice_to_c_string(c->details.method);

		log_debug("%s: unknown method %s", c->peer, path);
		char msg[300];
		snprintf(msg, sizeof(msg), "profd does not implement method %s", path);
		gpr_free(path);
		(void)send_reply(c, RPC_UNIMPLEMENTED, msg, NULL);
		call_unref(c); /* the request reference */
		return;
	}
	memset(&op, 0, sizeof(op));
	op.op = GRPC_OP_RECV_MESSAGE;
	op.data.recv_message.recv_message = &c->recv_buf;
	wait_add(c);
	if (grpc_call_start_batch(c->call, &op, 1, &c->t_recv, NULL) != GRPC_CALL_OK) {
		wait_remove(c);
		/* Without a status the client would wait for its deadline. */
		grpc_call_cancel_with_status(c->call, GRPC_STATUS_INTERNAL, "profd could not read the request", NULL);
		call_unref(c);
	}
}

static void on_recv(struct rpc_call *c, int ok)
{
	grpc_byte_buffer_reader r;
	grpc_slice all;
	char where[256];
	const char *why;

	wait_remove(c);
	if (!ok || c->timed_out || (c->closed && c->cancelled)) {
		call_unref(c);
		return;
	}
	if (!c->recv_buf) {
		(void)send_reply(c, RPC_INVALID_ARGUMENT, "the request carried no message", NULL);
		call_unref(c);
		return;
	}
	if (!grpc_byte_buffer_reader_init(&r, c->recv_buf)) {
		(void)send_reply(c, RPC_INVALID_ARGUMENT, "the request message could not be read", NULL);
		call_unref(c);
		return;
	}
	all = grpc_byte_buffer_reader_readall(&r);
	grpc_byte_buffer_reader_destroy(&r);
	/* protobuf-c would cut a string at a NUL and takes invalid UTF-8: no
	 * handler ever sees a string other than the one the client sent. */
	if (wire_strings_check(c->m->desc, GRPC_SLICE_START_PTR(all), GRPC_SLICE_LENGTH(all), where,
			       sizeof(where), &why) < 0) {
		char msg[384];

		grpc_slice_unref(all);
		snprintf(msg, sizeof(msg), "%s %s", where, why);
		log_debug("%s: %s", c->peer, msg);
		(void)send_reply(c, RPC_INVALID_ARGUMENT, msg, NULL);
		call_unref(c);
		return;
	}
	c->req = protobuf_c_message_unpack(c->m->desc, NULL, GRPC_SLICE_LENGTH(all),
					   GRPC_SLICE_START_PTR(all));
	grpc_slice_unref(all);
	if (!c->req) {
		char msg[256];

		snprintf(msg, sizeof(msg), "the request is not a valid %s message", c->m->desc->name);
		log_debug("%s: %s", c->peer, msg);
		(void)send_reply(c, RPC_INVALID_ARGUMENT, msg, NULL);
		call_unref(c);
		return;
	}
	/* The request reference becomes the handler's. */
	c->with_handler = true;
	c->m->cb(c->m->userdata, c, c->req);
}

static void on_close(struct rpc_call *c)
{
	c->closed = true;
	if (c->cancelled && c->with_handler && c->cancel_cb) {
		rpc_cancel_cb cb = c->cancel_cb;

		c->with_handler = false;
		c->cancel_cb = NULL;
		cb(c, c->cancel_ud);
		call_unref(c); /* the handler's reference */
	}
	call_unref(c);
}

/* ---- public call API ----------------------------------------------------- */

int rpc_call_reply(struct rpc_call *c, int code, const char *msg, struct rpc_payload *payload)
{
	int r;

	if (!c->with_handler || c->replied) {
		payload_release(payload);
		return -EALREADY;
	}
	c->with_handler = false;
	if (c->closed && c->cancelled) {
		payload_release(payload);
		call_unref(c);
		return -ECANCELED;
	}
	/* send_reply() hands the payload to a slice, so it is freed either way. */
	r = send_reply(c, code, msg, payload);
	call_unref(c);
	return r;
}

static void free_plain(void *p) { free(p); }

int rpc_call_reply_msg(struct rpc_call *c, const ProtobufCMessage *msg)
{
	size_t len = protobuf_c_message_get_packed_size(msg);
	uint8_t *data = malloc(len ? len : 1);
	struct rpc_payload p = {.data = data, .len = len, .free = free_plain, .opaque = data};

	if (!data)
		return rpc_call_error(c, RPC_RESOURCE_EXHAUSTED, "out of memory packing the reply");
	protobuf_c_message_pack(msg, data);
	return rpc_call_reply(c, RPC_OK, NULL, &p);
}

int rpc_call_error(struct rpc_call *c, int code, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return rpc_call_reply(c, code, msg, NULL);
}

void rpc_call_on_cancel(struct rpc_call *c, rpc_cancel_cb cb, void *userdata)
{
	c->cancel_cb = cb;
	c->cancel_ud = userdata;
}

int64_t rpc_call_deadline_ns(const struct rpc_call *c)
{
	gpr_timespec d = c->details.deadline;

	if (gpr_time_cmp(d, gpr_inf_future(d.clock_type)) == 0)
		return INT64_MAX;
	d = gpr_convert_clock_type(d, GPR_CLOCK_REALTIME);
	return d.tv_sec * (int64_t)NSEC_PER_SEC + d.tv_nsec;
}

const char *rpc_call_peer(const struct rpc_call *c)
{
	return c->peer ? c->peer : "?";
}

/* ---- access control hooks (auth.c) ---------------------------------------- */

int rpc_server_set_auth(struct rpc_server *s, const struct rpc_server_auth *a, char *err, size_t err_size)
{
	assert_return(!s->started, -EBUSY);
	s->auth = rpc_auth_free(s->auth);
	return rpc_auth_new(a, &s->auth, err, err_size);
}

/* rpc_auth_check() runs on the loop thread, as this does: no call sees a
 * half-replaced struct, and none keeps a pointer into the old one. */
int rpc_server_reload_auth(struct rpc_server *s, const struct rpc_server_auth *a, char *err, size_t err_size)
{
	struct rpc_auth *x = NULL;
	int r = rpc_auth_new(a, &x, err, err_size);

	if (r < 0)
		return r;
	rpc_auth_free(s->auth);
	s->auth = x;
	return 0;
}

bool rpc_call_has_token(const struct rpc_call *c) { return c->who.token; }
bool rpc_call_authenticated(const struct rpc_call *c) { return c->who.token || c->who.cert; }
bool rpc_call_access_open(const struct rpc_call *c) { return c->who.open; }
bool rpc_call_sees_cmdlines(const struct rpc_call *c) { return c->who.open || rpc_call_authenticated(c); }

const char *rpc_call_identity(const struct rpc_call *c)
{
	return c->who.identity ? c->who.identity : rpc_call_peer(c);
}

/* ---- loop side ----------------------------------------------------------- */

static void on_handle_closed(uv_handle_t *h)
{
	struct rpc_server *s = h->data;

	if (--s->open_handles == 0 && s->done)
		s->done(s->done_ud);
}

static void on_async(uv_async_t *a)
{
	struct rpc_server *s = a->data;
	struct ev_node *n, *next;

	uv_mutex_lock(&s->mu);
	n = s->head;
	s->head = s->tail = NULL;
	uv_mutex_unlock(&s->mu);

	for (; n; n = next) {
		next = n->next;
		if (n->cq_done) {
			/* The CQ thread has exited: finish the teardown. */
			uv_thread_join(&s->cq_thread);
			s->thread_started = false;
			grpc_completion_queue_destroy(s->cq);
			s->cq = NULL;
			uv_close((uv_handle_t *)&s->async, on_handle_closed);
			uv_close((uv_handle_t *)&s->grace, on_handle_closed);
			uv_close((uv_handle_t *)&s->first_msg, on_handle_closed);
		} else {
			struct rpc_call *c = n->tag->ptr;

			switch (n->tag->kind) {
			case TAG_NEW_CALL: on_new_call(c, n->ok); break;
			case TAG_RECV: on_recv(c, n->ok); break;
			case TAG_SEND: on_sent(c, n->ok); break;
			case TAG_CLOSE: on_close(c); break;
			case TAG_SHUTDOWN:
				s->shutdown_tag_seen = true;
				maybe_finish_shutdown(s);
				break;
			}
		}
		free(n);
	}
}

static void on_grace(uv_timer_t *t);

static void maybe_finish_shutdown(struct rpc_server *s)
{
	/*
	 * gRPC delivers the shutdown tag only once every connection is gone,
	 * and a client that keeps an idle channel does not close it on
	 * GOAWAY: the exit then waited the whole grace period for nothing.
	 * With no call of ours left, cut the grace short; the short delay
	 * lets the last replies drain before the connections are cut.
	 */
	if (s->shutting_down && s->live == 0 && !s->shutdown_tag_seen && !s->destroyed &&
	    !s->grace_cut) {
		s->grace_cut = true;
		if (uv_timer_get_due_in(&s->grace) > DRAIN_MS)
			uv_timer_start(&s->grace, on_grace, DRAIN_MS, 0);
	}
	if (!s->shutting_down || !s->shutdown_tag_seen || s->live > 0 || s->destroyed)
		return;
	s->destroyed = true;
	uv_timer_stop(&s->grace);
	grpc_server_destroy(s->server);
	s->server = NULL;
	grpc_completion_queue_shutdown(s->cq);
}

static void on_grace(uv_timer_t *t)
{
	struct rpc_server *s = t->data;

	if (s->live)
		log_info("cancelling %u call(s) still open at shutdown", s->live);
	grpc_server_cancel_all_calls(s->server);
}

static grpc_arg int_arg(const char *key, int64_t v)
{
	grpc_arg a;

	memset(&a, 0, sizeof(a));
	a.type = GRPC_ARG_INTEGER;
	a.key = (char *)key;
	a.value.integer = v > INT_MAX ? INT_MAX : (int)v;
	return a;
}

int rpc_server_new_with(uv_loop_t *loop, const struct rpc_limits *lim, struct rpc_server **ret)
{
	struct rpc_server *s = calloc(1, sizeof(*s));
	grpc_arg args[10];
	grpc_channel_args ca = {.num_args = 0, .args = args};

	if (!s)
		return -ENOMEM;
	s->lim = *lim;
	/*
	 * Connection and stream bounds; every one of these is something a
	 * client could otherwise hold open or make us buffer.
	 * - No SO_REUSEPORT: gRPC sets it by default, and then a second profd
	 *   on the same port starts and the kernel splits connections between
	 *   the two at random. Without it the second one fails to bind.
	 * - The receive limit is checked by gRPC before our RECV_MESSAGE
	 *   completes; requests are a few hundred bytes. gRPC 1.51 still reads
	 *   one oversized message whole before it refuses it (its flow control
	 *   admits a message once the length prefix is seen; turning off BDP
	 *   probing and shrinking the lookahead did not change that), so the
	 *   transient cost is the message size per stream, freed at once.
	 * - Idle connections (no call) are closed; keepalive pings find dead
	 *   peers of connections that do have calls (not without calls: the
	 *   idle timeout covers those), and clients may ping us no more than
	 *   gRPC's own policy allows (5 min without data, 2 strikes).
	 * - A connection that never finishes the HTTP/2 handshake is dropped
	 *   after the first-message deadline too.
	 */
	args[ca.num_args++] = int_arg(GRPC_ARG_ALLOW_REUSEPORT, 0);
	args[ca.num_args++] = int_arg(GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, lim->max_request_bytes);
	args[ca.num_args++] = int_arg(GRPC_ARG_MAX_CONCURRENT_STREAMS, lim->max_streams);
	if (lim->idle_ms)
		args[ca.num_args++] = int_arg(GRPC_ARG_MAX_CONNECTION_IDLE_MS, (int64_t)lim->idle_ms);
	if (lim->keepalive_ms) {
		args[ca.num_args++] = int_arg(GRPC_ARG_KEEPALIVE_TIME_MS, (int64_t)lim->keepalive_ms);
		args[ca.num_args++] = int_arg(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, (int64_t)lim->keepalive_timeout_ms);
	}
	args[ca.num_args++] = int_arg(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 0);
	args[ca.num_args++] = int_arg(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5 * 60 * 1000);
	args[ca.num_args++] = int_arg(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 2);
	if (lim->first_message_ms)
		args[ca.num_args++] = int_arg(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS,
					      (int64_t)lim->first_message_ms);
	s->loop = loop;
	s->cq = grpc_completion_queue_create_for_next(NULL);
	s->server = grpc_server_create(&ca, NULL);
	grpc_server_register_completion_queue(s->server, s->cq, NULL);
	uv_mutex_init(&s->mu);
	uv_async_init(loop, &s->async, on_async);
	uv_timer_init(loop, &s->grace);
	uv_timer_init(loop, &s->first_msg);
	s->async.data = s->grace.data = s->first_msg.data = s;
	s->open_handles = 3;
	s->t_shutdown = (struct tag){TAG_SHUTDOWN, s};
	*ret = s;
	return 0;
}

int rpc_server_new(uv_loop_t *loop, struct rpc_server **ret)
{
	struct rpc_limits lim = RPC_LIMITS_DEFAULT;

	return rpc_server_new_with(loop, &lim, ret);
}

int rpc_server_add_method(struct rpc_server *s, const char *path,
			  const ProtobufCMessageDescriptor *request, rpc_handler_cb cb, void *userdata)
{
	struct method *m;

	assert_return(!s->started, -EBUSY);
	m = realloc(s->methods, (s->n_methods + 1) * sizeof(*m));
	if (!m)
		return -ENOMEM;
	s->methods = m;
	m[s->n_methods] = (struct method){strdup(path), request, cb, userdata};
	if (!m[s->n_methods].path)
		return -ENOMEM;
	s->n_methods++;
	return 0;
}

/*
 * -EADDRINUSE if something listens on @addr's port already (-EADDRNOTAVAIL,
 * -EACCES: see below). gRPC would
 * fail too (SO_REUSEPORT is off), but it only returns 0 and dumps its own
 * error; this says why, before gRPC is asked. Binds like gRPC does
 * (SO_REUSEADDR, dual-stack for IPv6), so TIME_WAIT leftovers pass.
 */
static int addr_in_use(const char *addr)
{
	struct addrinfo hints, *ai = NULL;
	char host[256], port_s[8];
	uint16_t port;
	int r = 0;

	if (parse_host_port(addr, host, sizeof(host), &port) < 0 || port == 0)
		return 0; /* gRPC reports what it makes of it */
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	snprintf(port_s, sizeof(port_s), "%u", port);
	if (getaddrinfo(host, port_s, &hints, &ai) != 0)
		return 0;
	for (struct addrinfo *p = ai; p && r == 0; p = p->ai_next) {
		int fd = socket(p->ai_family, p->ai_socktype | SOCK_CLOEXEC, p->ai_protocol), one = 1, zero = 0;

		if (fd < 0)
			continue;
		(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (p->ai_family == AF_INET6)
			(void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
		/* Also the two other reasons a user can fix: an address this
		 * host does not have, a port below 1024 without the privilege. */
		if (bind(fd, p->ai_addr, p->ai_addrlen) < 0 &&
		    (errno == EADDRINUSE || errno == EADDRNOTAVAIL || errno == EACCES))
			r = -errno;
		close(fd);
	}
	freeaddrinfo(ai);
	return r;
}

/*
 * gRPC's own log lines, through ours (journald priorities, one line each).
 * While a port is being added they go to debug: a failed bind makes gRPC
 * print a nested error dump, and the caller logs one line that says what
 * went wrong instead. gRPC logs from its own threads, hence the atomic.
 */
static _Atomic bool grpc_log_quiet;

static void grpc_log(gpr_log_func_args *a)
{
	int level = a->severity == GPR_LOG_SEVERITY_ERROR ? LOG_LEVEL_ERR
		  : a->severity == GPR_LOG_SEVERITY_INFO ? LOG_LEVEL_INFO : LOG_LEVEL_DEBUG;

	if (grpc_log_quiet)
		level = LOG_LEVEL_DEBUG;
	if (level <= log_max_level)
		log_internal(level, 0, "grpc", "%s (%s:%d)", a->message, a->file, a->line);
}

int rpc_server_listen(struct rpc_server *s, const char *addr)
{
	grpc_server_credentials *creds;
	int port, r = addr_in_use(addr);

	if (r < 0)
		return r;
	gpr_set_log_function(grpc_log);
	/* TLS or plain, as rpc_server_set_auth() said (auth.c). */
	creds = rpc_auth_server_credentials(s->auth);
	grpc_log_quiet = true;
	port = grpc_server_add_http2_port(s->server, addr, creds);
	grpc_log_quiet = false;
	grpc_server_credentials_release(creds);
	return port > 0 ? port : -EADDRNOTAVAIL;
}

int rpc_server_start(struct rpc_server *s)
{
	grpc_server_start(s->server);
	s->started = true;
	if (uv_thread_create(&s->cq_thread, cq_thread_main, s) != 0)
		return -EAGAIN;
	s->thread_started = true;
	for (int i = 0; i < OUTSTANDING_REQUESTS; i++) {
		int r = request_call(s);

		if (r < 0)
			return r;
	}
	return 0;
}

void rpc_server_shutdown(struct rpc_server *s, uint64_t grace_ms, void (*done)(void *), void *ud)
{
	s->done = done;
	s->done_ud = ud;
	if (s->shutting_down)
		return;
	s->shutting_down = true;
	if (!s->thread_started) {
		/*
		 * Never started (or its CQ thread could not be created): no
		 * thread, no calls. gRPC asserts (abort) when a
		 * server that has listening ports is destroyed without a shutdown,
		 * which is the case when a later --listen address failed; so shut
		 * it down and drain the queue here, there being no CQ thread.
		 */
		grpc_server_shutdown_and_notify(s->server, s->cq, &s->t_shutdown);
		while (grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).tag !=
		       &s->t_shutdown)
			;
		grpc_server_destroy(s->server);
		s->server = NULL;
		s->destroyed = true;
		grpc_completion_queue_shutdown(s->cq);
		while (grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
		       GRPC_QUEUE_SHUTDOWN)
			;
		grpc_completion_queue_destroy(s->cq);
		s->cq = NULL;
		uv_close((uv_handle_t *)&s->async, on_handle_closed);
		uv_close((uv_handle_t *)&s->grace, on_handle_closed);
		uv_close((uv_handle_t *)&s->first_msg, on_handle_closed);
		return;
	}
	grpc_server_shutdown_and_notify(s->server, s->cq, &s->t_shutdown);
	uv_timer_start(&s->grace, on_grace, grace_ms, 0);
}

struct rpc_server *rpc_server_free(struct rpc_server *s)
{
	if (!s)
		return NULL;
	for (size_t i = 0; i < s->n_methods; i++)
		free(s->methods[i].path);
	free(s->methods);
	rpc_auth_free(s->auth);
	uv_mutex_destroy(&s->mu);
	free(s);
	return NULL;
}

unsigned rpc_server_live_calls(const struct rpc_server *s)
{
	return s->live;
}

void rpc_global_init(void)
{
	grpc_init();
}

void rpc_global_shutdown(void)
{
	grpc_shutdown_blocking();
}
