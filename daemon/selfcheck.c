/* SPDX-License-Identifier: MIT */
/*
 * selfcheck.c - see selfcheck.h. Each round is one TCP connection to our
 * own listener that sends the HTTP/2 client preface and an empty SETTINGS
 * frame; a server that accepted answers with its SETTINGS (or, should the
 * listener ever speak TLS, closes the connection): either counts. A round
 * still unanswered when the next one is due has failed.
 *
 * Ownership: the struct selfcheck owns its timer and at most one live
 * probe at a time; a probe being closed owns itself and frees itself in
 * its close callback, so a new round never waits for the old one.
 */
#define LOG_TOPIC "selfcheck"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "selfcheck.h"

struct probe {
	struct selfcheck *sc;
	uv_tcp_t tcp;
	uv_connect_t conn;
	uv_write_t wr;
	char buf[64];
};

struct selfcheck {
	uv_loop_t *loop;
	uv_timer_t timer;
	struct sockaddr_storage target;
	unsigned max_failures, failures;
	bool answered, fired, freeing;
	int open; /* the timer and probes not yet closed */
	struct probe *probe;
	void (*failed)(void *);
	void (*answered_cb)(void *);
	void *ud;
};

/* Client preface + an empty SETTINGS frame (RFC 9113 3.4, 6.5). */
static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\4\0\0\0\0\0";

static void sc_maybe_free(struct selfcheck *sc)
{
	if (sc->freeing && sc->open == 0)
		free(sc);
}

static void probe_closed_counted(uv_handle_t *h)
{
	struct probe *p = h->data;
	struct selfcheck *sc = p->sc;

	free(p);
	sc->open--;
	sc_maybe_free(sc);
}

static void probe_close(struct selfcheck *sc)
{
	struct probe *p = sc->probe;

	if (!p)
		return;
	sc->probe = NULL;
	/* Closing cancels the pending connect/write/read; their callbacks run
	 * with UV_ECANCELED and see the probe is no longer current. */
	uv_close((uv_handle_t *)&p->tcp, probe_closed_counted);
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
	struct probe *p = h->data;

	(void)hint;
	*buf = uv_buf_init(p->buf, sizeof(p->buf));
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
	struct probe *p = st->data;
	struct selfcheck *sc = p->sc;

	(void)buf;
	if (n == 0 || sc->probe != p)
		return;
	/* Bytes or an orderly close: the server accepted the connection. */
	if (n > 0 || n == UV_EOF || n == UV_ECONNRESET) {
		sc->answered = true;
		sc->failures = 0;
		if (sc->answered_cb)
			sc->answered_cb(sc->ud);
	}
	probe_close(sc);
}

static void on_write(uv_write_t *w, int status)
{
	(void)w;
	(void)status; /* a failed write shows up as a read error or no answer */
}

static void on_connect(uv_connect_t *req, int status)
{
	struct probe *p = req->data;
	struct selfcheck *sc = p->sc;
	uv_buf_t b = uv_buf_init((char *)preface, sizeof(preface) - 1);

	if (status == UV_ECANCELED || sc->probe != p)
		return;
	if (status < 0) {
		log_debug("connect: %s", uv_strerror(status));
		probe_close(sc);
		return;
	}
	if (uv_write(&p->wr, (uv_stream_t *)&p->tcp, &b, 1, on_write) < 0 ||
	    uv_read_start((uv_stream_t *)&p->tcp, on_alloc, on_read) < 0)
		probe_close(sc);
}

static void probe_start(struct selfcheck *sc)
{
	struct probe *p = calloc(1, sizeof(*p));
	int r;

	if (!p)
		return; /* counts as a failed round */
	p->sc = sc;
	if (uv_tcp_init(sc->loop, &p->tcp) < 0) {
		free(p);
		return;
	}
	p->tcp.data = p->conn.data = p;
	sc->open++;
	sc->probe = p;
	r = uv_tcp_connect(&p->conn, &p->tcp, (const struct sockaddr *)&sc->target, on_connect);
	if (r < 0) {
		/* EMFILE lands here when we are out of descriptors ourselves. */
		log_debug("connect: %s", uv_strerror(r));
		probe_close(sc);
	}
}

static void on_timer(uv_timer_t *t)
{
	struct selfcheck *sc = t->data;

	if (!sc->answered) {
		sc->failures++;
		log_warn("self-check: the server did not answer a connection to itself (%u of %u)",
			 sc->failures, sc->max_failures);
	}
	probe_close(sc);
	if (sc->failures >= sc->max_failures) {
		uv_timer_stop(&sc->timer);
		if (!sc->fired) {
			sc->fired = true;
			sc->failed(sc->ud);
		}
		return;
	}
	sc->answered = false;
	probe_start(sc);
}

static void timer_closed(uv_handle_t *h)
{
	struct selfcheck *sc = h->data;

	sc->open--;
	sc_maybe_free(sc);
}

int selfcheck_new(uv_loop_t *loop, const struct sockaddr *target, uint64_t interval_ms,
		  unsigned max_failures, void (*failed)(void *ud), void (*answered)(void *ud), void *ud,
		  struct selfcheck **ret)
{
	struct selfcheck *sc = calloc(1, sizeof(*sc));
	size_t len = target->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);

	if (!sc)
		return -ENOMEM;
	sc->loop = loop;
	memcpy(&sc->target, target, len);
	sc->max_failures = max_failures ? max_failures : 1;
	sc->failed = failed;
	sc->answered_cb = answered;
	sc->ud = ud;
	sc->answered = true; /* nothing to judge before the first round */
	uv_timer_init(loop, &sc->timer);
	sc->timer.data = sc;
	sc->open = 1;
	uv_timer_start(&sc->timer, on_timer, interval_ms, interval_ms);
	*ret = sc;
	return 0;
}

void selfcheck_free(struct selfcheck *sc)
{
	if (!sc || sc->freeing)
		return;
	sc->freeing = true;
	probe_close(sc);
	uv_close((uv_handle_t *)&sc->timer, timer_closed);
}
