/* SPDX-License-Identifier: MIT */
/*
 * proc-read.h - the one reader of procfs files: host.proc, host.io and the
 * per-pid reads of host.io and nvml all go through it.
 *
 * A reader opens its proc root (cfg->proc_root, "/proc" or a fixture tree
 * in tests) once as a directory fd and reads every file relative to it
 * with openat(): no path is rebuilt per read, and a root that is replaced
 * under a running daemon keeps being the one it opened. Each read returns
 * the whole file (procfs files must be read in one go to be consistent)
 * in the reader's own buffer, NUL-ended, grown on demand up to a ceiling
 * the owner picks: a hostile or runaway file is refused, not swallowed.
 *
 * Threads: a reader is not locked. It belongs to one thread at a time:
 * host.proc's and host.io's to the loop, nvml's to its sampler thread.
 * The bytes in @buf are valid until that owner's next read or close.
 */
#pragma once

#include <stddef.h>
#include <sys/types.h>

/**
 * struct proc_reader - a proc root and the buffer its reads land in.
 * @root_fd: directory fd of the root; -1 when it could not be opened
 *           (every read then fails with -EBADF).
 * @buf:     the last file read, NUL-ended; owned.
 * @size:    bytes allocated at @buf.
 * @max:     the longest file accepted, in bytes.
 */
struct proc_reader {
	int root_fd;
	char *buf;
	size_t size, max;
};

#define PROC_READER_INIT {.root_fd = -1}

/*
 * proc_reader_open - open @root (a directory) for reads of files of at
 * most @max bytes, with an @initial-byte buffer. 0 or -errno; on failure
 * @r is still safe to read from (-EBADF) and to close.
 */
int proc_reader_open(struct proc_reader *r, const char *root, size_t initial, size_t max);
/* Close and free; for a reader that is open, failed to open, or is all
 * zero bytes (a collector's zeroed private data before init). */
void proc_reader_close(struct proc_reader *r);

/*
 * proc_reader_read - all of @rel (relative to the root: "stat",
 * "net/dev"; an absolute path or a ".." component is -EINVAL) into
 * @r->buf. Returns the length; -EFBIG when the file is longer than
 * @r->max, -ENOMEM, or the -errno of openat()/read().
 */
ssize_t proc_reader_read(struct proc_reader *r, const char *rel);

/*
 * proc_reader_read_pid - <root>/<@pid>/<@file>, as proc_reader_read().
 * @head: 0 for the whole file, else read only its first @head bytes (for
 *        /proc/<pid>/cmdline, whose length the process chooses and whose
 *        start is all profd shows). -EINVAL for @pid <= 0.
 */
ssize_t proc_reader_read_pid(struct proc_reader *r, int pid, const char *file, size_t head);
