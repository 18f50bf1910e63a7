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
 *
 * Two files (server-int.h is what they share): this one, the server's life,
 * the completion-queue thread and the loop side that dispatches its events;
 * call.c, each call's steps and the rpc_call_* API.
 */
#define LOG_TOPIC "rpc"

#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/log.h>
#include <grpc/support/time.h>

#include "auth.h"
#include "base/log.h"
#include "base/parse.h"
#include "rpc.h"
#include "server-int.h"

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
			case TAG_NEW_CALL: call_on_new(c, n->ok); break;
			case TAG_RECV: call_on_recv(c, n->ok); break;
			case TAG_SEND: call_on_sent(c, n->ok); break;
			case TAG_CLOSE: call_on_close(c); break;
			case TAG_SHUTDOWN:
				s->shutdown_tag_seen = true;
				server_maybe_finish_shutdown(s);
				break;
			}
		}
		free(n);
	}
}

static void on_grace(uv_timer_t *t);

void server_maybe_finish_shutdown(struct rpc_server *s)
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
		int r = call_request(s);

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
