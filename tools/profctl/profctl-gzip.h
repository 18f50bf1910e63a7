/* SPDX-License-Identifier: MIT */
/*
 * profctl-gzip.h - struct ow's gzip stage on a second thread
 * (profctl-gzip.c). Used by the writer in profctl-util.c only.
 */
#pragma once

#include "profctl.h"

/* Start the stage (w->z); @buf_size is the size of w->buf. 0 or -errno. */
int owz_start(struct ow *w, size_t buf_size);
/* Hand w->buf's w->len bytes to the thread (@finish: the last ones) and
 * give the writer the other buffer. Errors reach w->err (sticky). */
void owz_flush(struct ow *w, int finish);
/* Wait until everything handed over is written; errors reach w->err.
 * Call before the file is closed. */
void owz_finish(struct ow *w);
/* Stop the thread and free the stage (after owz_finish()). */
void owz_free(struct ow *w);
