/* SPDX-License-Identifier: MIT */
/*
 * file.c - see file.h.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h> /* makedev() */
#include <unistd.h>

#include "file.h"

int file_open_regular(const char *path, struct stat *st)
{
	struct stat s;
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	if (fstat(fd, &s) < 0) {
		int e = -errno;

		close(fd);
		return e;
	}
	/* /dev/null too: "--config /dev/null" is the usual way to say "no
	 * file", and it reads as empty without ever blocking. */
	if (!S_ISREG(s.st_mode) && !(S_ISCHR(s.st_mode) && s.st_rdev == makedev(1, 3))) {
		close(fd);
		return -FILE_ENOTREG;
	}
	if (st)
		*st = s;
	return fd;
}

int file_read_small(const char *path, size_t max, char **ret, bool *ret_private)
{
	struct stat st;
	char *buf;
	size_t len = 0;
	int fd, r = 0;

	fd = file_open_regular(path, &st);
	if (fd < 0)
		return fd;
	if (ret_private)
		*ret_private = (st.st_mode & 0077) == 0;
	buf = malloc(max + 1);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	for (;;) {
		ssize_t k = read(fd, buf + len, max + 1 - len);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			r = -errno;
			break;
		}
		if (k == 0)
			break;
		len += (size_t)k;
		if (len > max) {
			r = -EFBIG;
			break;
		}
	}
	close(fd);
	if (r == 0 && memchr(buf, 0, len))
		r = -EINVAL;
	if (r < 0) {
		explicit_bzero(buf, max + 1);
		free(buf);
		return r;
	}
	buf[len] = 0;
	*ret = buf;
	return 0;
}

const char *file_strerror(int e)
{
	if (e < 0)
		e = -e;
	return e == FILE_ENOTREG ? "not a regular file" : strerror(e);
}
