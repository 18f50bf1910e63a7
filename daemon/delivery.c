/* SPDX-License-Identifier: MIT */
/*
 * delivery.c - see delivery.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/macro.h"
#include "base/parse.h"
#include "delivery.h"

int repo_allow_add(struct repo_allow *a, const char *dir)
{
	char *real = realpath(dir, NULL), **v;
	struct stat st;

	if (!real)
		return -errno;
	if (stat(real, &st) < 0 || !S_ISDIR(st.st_mode)) {
		free(real);
		return -ENOTDIR;
	}
	v = realloc(a->dirs, (a->n + 1) * sizeof(*v));
	if (!v) {
		free(real);
		return -ENOMEM;
	}
	a->dirs = v;
	a->dirs[a->n++] = real;
	return 0;
}

void repo_allow_free(struct repo_allow *a)
{
	for (size_t i = 0; i < a->n; i++)
		free(a->dirs[i]);
	free(a->dirs);
	a->dirs = NULL;
	a->n = 0;
}

/* Is @path inside @dir, component-wise? Returns the rest (no leading '/'). */
static const char *below(const char *dir, const char *path)
{
	size_t n = strlen(dir);

	if (strcmp(dir, "/") == 0)
		return path + 1;
	if (strncmp(path, dir, n) != 0 || (path[n] != '/' && path[n] != 0))
		return NULL;
	while (path[n] == '/')
		n++;
	return path + n;
}

int repo_match(const struct repo_allow *a, const char *root, size_t *ret_dir, char **ret_rel)
{
	if (root[0] != '/')
		return 0;
	for (size_t i = 0; i < a->n; i++) {
		const char *rest = below(a->dirs[i], root);
		char *rel, *tok, *save;

		if (!rest)
			continue;
		rel = strdup(rest);
		if (!rel)
			return -ENOMEM;
		/* Every component must be a plain name. */
		char *copy = strdup(rest);
		if (!copy) {
			free(rel);
			return -ENOMEM;
		}
		for (tok = strtok_r(copy, "/", &save); tok; tok = strtok_r(NULL, "/", &save))
			if (!path_component_ok(tok)) {
				free(copy);
				free(rel);
				return -EINVAL;
			}
		free(copy);
		*ret_dir = i;
		*ret_rel = rel;
		return 1;
	}
	return 0;
}

/* openat() one directory level, creating it, refusing symbolic links. */
static int step(int dfd, const char *name)
{
	int fd;

	if (mkdirat(dfd, name, 0755) < 0 && errno != EEXIST)
		return -errno;
	fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		struct stat st;
		int e = errno;

		/* A symbolic link gives ELOOP or, with O_DIRECTORY, ENOTDIR; a
		 * regular file gives ENOTDIR too and must not be reported as a
		 * link, so look at what is there. */
		if (e == ENOTDIR && fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
			e = ELOOP;
		return -e;
	}
	return fd;
}

static int write_all(int fd, const uint8_t *p, size_t len)
{
	while (len) {
		ssize_t n = write(fd, p, MIN(len, (size_t)1 << 30));

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int repo_write(const char *dir, const char *rel, const char *session, const char *file,
	       const void *data, size_t len)
{
	_cleanup_free_ char *copy = strdup(rel);
	char tmp[NAME_MAX + 1], *tok, *save;
	int dfd, fd, r;

	if (!copy)
		return -ENOMEM;
	if (!path_component_ok(session) || !path_component_ok(file))
		return -EINVAL;
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	for (tok = strtok_r(copy, "/", &save); tok; tok = strtok_r(NULL, "/", &save)) {
		int nfd = step(dfd, tok);

		close(dfd);
		if (nfd < 0)
			return nfd;
		dfd = nfd;
	}
	fd = step(dfd, session);
	close(dfd);
	if (fd < 0)
		return fd;
	dfd = fd;

	/*
	 * The temporary file must be one we create: O_EXCL refuses anything
	 * planted at the name (a FIFO would block this thread forever, a hard
	 * link would let the write land outside the allowed directory), and
	 * O_NONBLOCK keeps even a surprise from blocking. The name is unique
	 * per write (two captures may target the same file); on a clash, a
	 * few fresh names are tried.
	 */
	static atomic_uint seq;
	fd = -EEXIST;
	for (int tries = 0; tries < 8 && fd == -EEXIST; tries++) {
		snprintf(tmp, sizeof(tmp), ".%.200s.%d.%u.tmp", file, (int)getpid(),
			 atomic_fetch_add(&seq, 1));
		fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
			    0644);
		if (fd < 0)
			fd = -errno;
	}
	if (fd < 0) {
		r = fd;
		goto out;
	}
	r = write_all(fd, data, len);
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	if (close(fd) < 0 && r == 0)
		r = -errno;
	if (r == 0 && renameat(dfd, tmp, dfd, file) < 0)
		r = -errno;
	if (r < 0)
		unlinkat(dfd, tmp, 0);
out:
	close(dfd);
	return r;
}
