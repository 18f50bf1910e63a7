/* SPDX-License-Identifier: MIT */
/*
 * proc-read.c - the shared procfs reader (proc-read.h). Runs on whichever
 * thread owns the reader; no state outside struct proc_reader.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/macro.h"
#include "proc-read.h"

int proc_reader_open(struct proc_reader *r, const char *root, size_t initial, size_t max)
{
	*r = (struct proc_reader)PROC_READER_INIT;
	r->max = max;
	r->root_fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (r->root_fd < 0)
		return -errno;
	/* +1: room for the NUL after a file of exactly @initial bytes. */
	r->size = MIN(MAX(initial, (size_t)64), max) + 1;
	r->buf = malloc(r->size);
	if (!r->buf) {
		proc_reader_close(r);
		return -ENOMEM;
	}
	return 0;
}

void proc_reader_close(struct proc_reader *r)
{
	/* A buffer means proc_reader_open() succeeded: a zeroed reader (fd 0,
	 * never opened) closes nothing. */
	if (r->buf && r->root_fd >= 0)
		close(r->root_fd);
	free(r->buf);
	*r = (struct proc_reader)PROC_READER_INIT;
}

/* Paths are ours ("stat", "<pid>/cmdline"), but a reader must not be
 * talked out of its root: openat() ignores the fd for an absolute path. */
static bool rel_ok(const char *rel)
{
	const char *p = rel;

	if (!rel[0] || rel[0] == '/')
		return false;
	for (;;) {
		size_t n = strcspn(p, "/");

		if (n == 2 && p[0] == '.' && p[1] == '.')
			return false;
		if (!p[n])
			return true;
		p += n + 1;
	}
}

/* Reads @fd to its end or @limit bytes into r->buf, growing it up to
 * r->max (+1 for the NUL). @truncate: stop at @limit quietly (a head
 * read), else a longer file is -EFBIG. */
static ssize_t read_all(struct proc_reader *r, int fd, size_t limit, bool truncate)
{
	size_t len = 0;

	for (;;) {
		ssize_t n;

		if (len + 1 >= r->size) {
			size_t size;
			char *p, c;

			if (len >= limit) {
				if (truncate)
					break;
				/* One more byte tells a file of exactly @limit from a longer one. */
				do
					n = read(fd, &c, 1);
				while (n < 0 && errno == EINTR);
				if (n < 0)
					return -errno;
				if (n > 0)
					return -EFBIG;
				break;
			}
			size = MIN(r->size * 2, limit + 1);
			p = realloc(r->buf, size);
			if (!p)
				return -ENOMEM;
			r->buf = p;
			r->size = size;
		}
		n = read(fd, r->buf + len, MIN(r->size - 1, limit) - len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		len += (size_t)n;
		if (len >= limit && truncate)
			break;
	}
	r->buf[len] = '\0';
	return (ssize_t)len;
}

static ssize_t read_rel(struct proc_reader *r, const char *rel, size_t head)
{
	_cleanup_close_ int fd = -1;

	if (!rel_ok(rel))
		return -EINVAL;
	if (r->root_fd < 0 || !r->buf)
		return -EBADF;
	fd = openat(r->root_fd, rel, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return -errno;
	return read_all(r, fd, head ? MIN(head, r->max) : r->max, head != 0);
}

ssize_t proc_reader_read(struct proc_reader *r, const char *rel)
{
	return read_rel(r, rel, 0);
}

ssize_t proc_reader_read_pid(struct proc_reader *r, int pid, const char *file, size_t head)
{
	char rel[64];

	if (pid <= 0)
		return -EINVAL;
	if ((size_t)snprintf(rel, sizeof(rel), "%d/%s", pid, file) >= sizeof(rel))
		return -ENAMETOOLONG;
	return read_rel(r, rel, head);
}
