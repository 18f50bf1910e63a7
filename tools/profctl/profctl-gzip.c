/* SPDX-License-Identifier: MIT */
/*
 * profctl-gzip.c - the gzip stage of the output writer (struct ow) on a
 * thread of its own, so that `profctl export --gzip` formats JSON and
 * compresses at the same time (deflate costs about as much as formatting).
 *
 * Two buffers take turns: the writer fills one while the thread deflates
 * and writes the other. owz_flush() hands the full buffer over once the
 * thread is done with the previous one, and gives the writer that one.
 * Who owns what: the writer owns w->buf; the thread owns g->in while
 * g->busy; everything else in struct owz is under g->lock. The thread's
 * errors and byte count reach w->err / w->bytes_out only at owz_flush()
 * and owz_finish(), on the writer's thread.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zlib.h>

#include "profctl-gzip.h"

struct owz {
	z_stream z;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cv;
	uint8_t *in;        /* the buffer being deflated, while @busy */
	size_t in_len;
	int flush;          /* Z_NO_FLUSH or Z_FINISH for @in */
	bool busy, quit;
	int err;            /* sticky; the thread's */
	uint64_t bytes_out; /* written by the thread, not yet added to w->bytes_out */
	uint8_t *spare;     /* the buffer not in the writer's hands */
	uint8_t *zbuf;
	size_t buf_size;
	int fd;
};

static int write_all(int fd, const uint8_t *p, size_t n, uint64_t *bytes)
{
	while (n > 0) {
		ssize_t k = write(fd, p, n);

		if (k < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += k;
		n -= (size_t)k;
		*bytes += (uint64_t)k;
	}
	return 0;
}

/* Deflate @g->in and write what comes out. [gzip thread] */
static int deflate_in(struct owz *g, uint64_t *bytes)
{
	int zr, r = 0;

	g->z.next_in = g->in;
	g->z.avail_in = (uInt)g->in_len;
	do {
		g->z.next_out = g->zbuf;
		g->z.avail_out = (uInt)g->buf_size;
		zr = deflate(&g->z, g->flush);
		if (zr == Z_STREAM_ERROR)
			return -EIO;
		r = write_all(g->fd, g->zbuf, g->buf_size - g->z.avail_out, bytes);
	} while (g->z.avail_out == 0 && r == 0);
	return r;
}

static void *owz_thread(void *arg)
{
	struct owz *g = arg;

	pthread_mutex_lock(&g->lock);
	for (;;) {
		while (!g->busy && !g->quit)
			pthread_cond_wait(&g->cv, &g->lock);
		if (!g->busy)
			break; /* quit, nothing left */
		int err = g->err;
		pthread_mutex_unlock(&g->lock);
		uint64_t bytes = 0;
		/* After an error the rest is dropped: the file is not committed. */
		if (!err)
			err = deflate_in(g, &bytes);
		pthread_mutex_lock(&g->lock);
		g->err = err;
		g->bytes_out += bytes;
		g->busy = false;
		pthread_cond_broadcast(&g->cv);
	}
	pthread_mutex_unlock(&g->lock);
	return NULL;
}

/* What owz_start() set up, once no thread uses it. */
static void owz_release(struct owz *g)
{
	deflateEnd(&g->z);
	pthread_cond_destroy(&g->cv);
	pthread_mutex_destroy(&g->lock);
	free(g->spare);
	free(g->zbuf);
	free(g);
}

int owz_start(struct ow *w, size_t buf_size)
{
	struct owz *g = calloc(1, sizeof(*g));

	if (!g)
		return -ENOMEM;
	g->buf_size = buf_size;
	g->spare = malloc(buf_size);
	g->zbuf = malloc(buf_size);
	/* 15 + 16: a gzip wrapper, so `zcat` and the viewers read it. */
	if (!g->spare || !g->zbuf || deflateInit2(&g->z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
		free(g->spare);
		free(g->zbuf);
		free(g);
		return -ENOMEM;
	}
	pthread_mutex_init(&g->lock, NULL);
	pthread_cond_init(&g->cv, NULL);
	g->fd = -1;
	if (pthread_create(&g->thread, NULL, owz_thread, g) != 0) {
		owz_release(g);
		return -EAGAIN;
	}
	w->z = g;
	return 0;
}

/* Wait until the thread is idle; pass on its error and byte count. [writer] */
static void wait_idle(struct ow *w, struct owz *g)
{
	pthread_mutex_lock(&g->lock);
	while (g->busy)
		pthread_cond_wait(&g->cv, &g->lock);
	if (g->err && !w->err)
		w->err = g->err;
	w->bytes_out += g->bytes_out;
	g->bytes_out = 0;
	pthread_mutex_unlock(&g->lock);
}

void owz_flush(struct ow *w, int finish)
{
	struct owz *g = w->z;
	uint8_t *full = w->buf;

	wait_idle(w, g);
	pthread_mutex_lock(&g->lock);
	g->fd = w->fd; /* known by now: ow_open() opens the file after owz_start() */
	g->in = full;
	g->in_len = w->len;
	g->flush = finish ? Z_FINISH : Z_NO_FLUSH;
	g->busy = true;
	w->buf = g->spare;
	g->spare = full;
	pthread_cond_broadcast(&g->cv);
	pthread_mutex_unlock(&g->lock);
	w->len = 0;
}

void owz_finish(struct ow *w)
{
	wait_idle(w, w->z);
}

void owz_free(struct ow *w)
{
	struct owz *g = w->z;

	if (!g)
		return;
	pthread_mutex_lock(&g->lock);
	g->quit = true;
	pthread_cond_broadcast(&g->cv);
	pthread_mutex_unlock(&g->lock);
	pthread_join(g->thread, NULL);
	owz_release(g);
	w->z = NULL;
}
