/* SPDX-License-Identifier: MIT */
/*
 * selfcheck.h - does the server still accept connections?
 *
 * gRPC 1.51 stops accepting for good after one failed accept4() (EMFILE,
 * ENFILE, ENOBUFS ...) while the process stays up, so a service manager's
 * restart-on-failure never fires. A self-check connects to our own port
 * every interval and counts a round as passed when the server answers
 * (any bytes, or a close: both need an accept()). After @max_failures
 * rounds in a row without an answer it calls @failed once and stops.
 * @answered (may be NULL) is called on each answered round: the server's
 * threads just ran connection code, which the idle path may want to trim
 * again (daemon/footprint.c).
 * [loop thread]
 */
#pragma once

#include <stdint.h>

#include <uv.h>

struct selfcheck;

/* @target is copied. */
int selfcheck_new(uv_loop_t *loop, const struct sockaddr *target, uint64_t interval_ms,
		  unsigned max_failures, void (*failed)(void *ud), void (*answered)(void *ud), void *ud,
		  struct selfcheck **ret);
/* Stop probing and close every handle; frees @sc once they are closed. */
void selfcheck_free(struct selfcheck *sc);
