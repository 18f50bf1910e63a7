/* SPDX-License-Identifier: MIT */
/*
 * delivery.c - see delivery.h.
 */
#define _GNU_SOURCE /* O_PATH */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/openat2.h> /* struct open_how, RESOLVE_* */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/macro.h"
#include "base/utf8.h"
#include "delivery.h"

bool repo_name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > NAME_MAX || s[0] == '.' || !utf8_valid(s, n))
		return false;
	for (const char *p = s; *p; p++)
		if (*p == '/' || (unsigned char)*p < 0x20 || *p == 0x7f)
			return false;
	return true;
}

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
	unsigned max_depth = a->max_depth ? a->max_depth : REPO_MAX_DEPTH_DEFAULT;

	if (root[0] != '/')
		return 0;
	/* Before anything is copied: a hostile root may be megabytes long. */
	if (strnlen(root, PATH_MAX) >= PATH_MAX)
		return -ENAMETOOLONG;
	for (size_t i = 0; i < a->n; i++) {
		const char *rest = below(a->dirs[i], root);
		char *rel, *copy, *tok, *save;
		unsigned depth = 0;
		int r = 1;

		if (!rest)
			continue;
		rel = strdup(rest);
		copy = strdup(rest);
		if (!rel || !copy) {
			free(rel);
			free(copy);
			return -ENOMEM;
		}
		/* Every component must be a plain name; the depth is checked
		 * after them, so a '..' is always reported as such. */
		for (tok = strtok_r(copy, "/", &save); tok && r == 1; tok = strtok_r(NULL, "/", &save)) {
			if (!repo_name_ok(tok))
				r = -EINVAL;
			depth++;
		}
		free(copy);
		if (r == 1 && depth > max_depth)
			r = -E2BIG;
		if (r < 0) {
			free(rel);
			return r;
		}
		*ret_dir = i;
		*ret_rel = rel;
		return 1;
	}
	return 0;
}

int repo_path_fits(const char *dir, const char *rel, const char *session, const char *file)
{
	size_t n = strlen(dir) + 1 + strlen(rel) + 1 + strlen(session) + 1 + strlen(file);

	return n < PATH_MAX ? 0 : -ENAMETOOLONG;
}

/*
 * openat() of one name below @dfd that never leaves it: openat2() with
 * RESOLVE_BENEATH and RESOLVE_NO_SYMLINKS where the kernel has it (5.6+),
 * else O_NOFOLLOW. The callers pass single components that repo_name_ok()
 * accepted (no '/', no '..'), so the plain openat() is already confined;
 * openat2() makes it so even if one ever is not. The fd or -errno.
 */
static int open_beneath(int dfd, const char *name, int flags, mode_t mode)
{
	static atomic_bool no_openat2;
	int fd;

	flags |= O_NOFOLLOW | O_CLOEXEC;
	if (!atomic_load_explicit(&no_openat2, memory_order_relaxed)) {
		struct open_how how = {
			.flags = (uint64_t)flags,
			.mode = flags & O_CREAT ? mode : 0,
			.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
		};

		fd = (int)syscall(SYS_openat2, dfd, name, &how, sizeof(how));
		if (fd >= 0 || (errno != ENOSYS && errno != EPERM)) /* EPERM: a seccomp filter */
			return fd >= 0 ? fd : -errno;
		atomic_store_explicit(&no_openat2, true, memory_order_relaxed);
	}
	fd = openat(dfd, name, flags, mode);
	return fd >= 0 ? fd : -errno;
}

/* open_beneath() of a directory: -ELOOP for a symbolic link at @name. */
static int open_dir(int dfd, const char *name, int flags)
{
	int fd = open_beneath(dfd, name, flags | O_DIRECTORY, 0);
	struct stat st;

	/* A symbolic link gives ELOOP or, with O_DIRECTORY, ENOTDIR; a
	 * regular file gives ENOTDIR too and must not be reported as a link,
	 * so look at what is there. */
	if (fd == -ENOTDIR && fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
		fd = -ELOOP;
	return fd;
}

/* One directory level, creating it, refusing symbolic links. */
static int step(int dfd, const char *name, bool *made)
{
	*made = mkdirat(dfd, name, 0755) == 0;
	if (!*made && errno != EEXIST)
		return -errno;
	return open_dir(dfd, name, O_RDONLY);
}

/*
 * The allowed directory, opened anew for each write by the path resolved
 * at start (realpath(): no link in it), one component at a time from '/'
 * without following any symbolic link. Someone who renames it (or a
 * parent) and puts a link in its place gets -ELOOP, never a write at the
 * link's target; a real directory made at the path is written to (it is
 * the allowed path). O_PATH: search permission is enough on the way.
 */
static int open_allowed(const char *path)
{
	_cleanup_free_ char *copy = strdup(path);
	char *tok, *save;
	int dfd;

	if (!copy)
		return -ENOMEM;
	dfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	for (tok = strtok_r(copy, "/", &save); tok && dfd >= 0; tok = strtok_r(NULL, "/", &save)) {
		int fd = open_dir(dfd, tok, O_PATH);

		close(dfd);
		dfd = fd;
	}
	return dfd;
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

/*
 * One directory of the walk: its fd, the name it has in the one above, and
 * whether this write created it (and so removes it when the write fails).
 */
struct level {
	const char *name;
	int fd;
	bool made;
};

/* Close every level; on failure first remove the directories this write
 * made, deepest first, each through its parent's fd (never a path, which
 * a link swapped in meanwhile could redirect). rmdir refuses a directory
 * that is not empty: one another capture wrote into meanwhile stays. */
static void levels_close(struct level *lv, size_t n, bool failed)
{
	for (size_t i = n; i-- > 0;) {
		if (lv[i].fd >= 0)
			close(lv[i].fd);
		if (failed && i > 0 && lv[i].made)
			unlinkat(lv[i - 1].fd, lv[i].name, AT_REMOVEDIR);
	}
}

int repo_write(const char *dir, const char *rel, const char *session, const char *file,
	       const void *data, size_t len)
{
	_cleanup_free_ char *copy = strdup(rel);
	_cleanup_free_ struct level *lv = NULL;
	char tmp[NAME_MAX + 1], *tok, *save;
	size_t n = 0, max = 3; /* the allowed directory, the session, and one per '/' or name */
	int dfd, fd, r;

	if (!copy)
		return -ENOMEM;
	if (!repo_name_ok(session) || !repo_name_ok(file))
		return -EINVAL;
	for (const char *p = rel; *p; p++)
		max += *p == '/';
	lv = calloc(max, sizeof(*lv));
	if (!lv)
		return -ENOMEM;
	dfd = open_allowed(dir);
	if (dfd < 0)
		return dfd;
	lv[n].name = dir;
	lv[n++].fd = dfd;
	for (tok = strtok_r(copy, "/", &save);; tok = strtok_r(NULL, "/", &save)) {
		const char *name = tok ? tok : session;

		lv[n].name = name;
		lv[n].fd = step(dfd, name, &lv[n].made);
		r = lv[n].fd;
		n++;
		if (r < 0)
			goto fail;
		dfd = r;
		if (!tok)
			break;
	}

	/*
	 * The temporary file must be one we create: O_EXCL refuses anything
	 * planted at the name (a FIFO would block this thread forever, a hard
	 * link would let the write land outside the allowed directory), and
	 * O_NONBLOCK keeps even a surprise from blocking. The name is random
	 * (64 bits from getrandom()), so nobody can plant at it ahead; on a
	 * clash, a few fresh names are tried.
	 */
	fd = -EEXIST;
	for (int tries = 0; tries < 8 && fd == -EEXIST; tries++) {
		uint64_t rnd;

		if (getrandom(&rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
			fd = errno ? -errno : -EIO;
			break;
		}
		snprintf(tmp, sizeof(tmp), ".%.200s.%016" PRIx64 ".tmp", file, rnd);
		fd = open_beneath(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NONBLOCK, 0644);
	}
	if (fd < 0) {
		r = fd;
		goto fail;
	}
	r = write_all(fd, data, len);
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	if (close(fd) < 0 && r == 0)
		r = -errno;
	if (r == 0 && renameat(dfd, tmp, dfd, file) < 0)
		r = -errno;
	if (r < 0) {
		unlinkat(dfd, tmp, 0);
		goto fail;
	}
	levels_close(lv, n, false);
	return 0;
fail:
	levels_close(lv, n, true);
	return r;
}
