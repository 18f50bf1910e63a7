/* SPDX-License-Identifier: MIT */
/*
 * call.c - one gRPC call of the server behind rpc.h: accepting it, the
 * first-message deadline, receiving and decoding the request (wirecheck.h),
 * running the handler, sending the reply (zero copy), the close event and
 * the reference count that ends it; the public rpc_call_* API and the
 * access facts (auth.c) a handler reads. [loop thread]
 *
 * It owns each struct rpc_call (server-int.h); the call lifetime rules are
 * server.c's DESIGN.
 */
#define LOG_TOPIC "rpc"

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/support/alloc.h>
#include <grpc/support/log.h>
#include <grpc/support/time.h>

#include "auth.h"
#include "base/log.h"
#include "base/timeutil.h"
#include "rpc.h"
#include "server-int.h"
#include "wirecheck.h"

/* ---- calls --------------------------------------------------------------- */

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
	server_maybe_finish_shutdown(s);
}

int call_request(struct rpc_server *s)
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
void call_on_sent(struct rpc_call *c, int ok)
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

void call_on_new(struct rpc_call *c, int ok)
{
	struct rpc_server *s = c->srv;
	grpc_op op;

	if (!ok) { /* the request was killed by shutdown */
		call_unref(c);
		return;
	}
	if (!s->shutting_down)
		(void)call_request(s);
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

void call_on_recv(struct rpc_call *c, int ok)
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

void call_on_close(struct rpc_call *c)
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
