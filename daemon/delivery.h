/* SPDX-License-Identifier: MIT */
/*
 * delivery.h - writing a capture into a client-named repository_root on
 * this machine, which is an arbitrary-path write unless fenced in.
 *
 * Only directories the operator named with --repository-allow are written
 * to. A request's repository_root is matched component-wise against them
 * after they were resolved with realpath() at start; the part below the
 * allowed directory is then walked with openat(O_NOFOLLOW) one component at
 * a time, so neither '..' nor a symbolic link planted inside can lead out.
 * Files appear atomically: a temporary file in the target directory, fsync,
 * rename.
 */
#pragma once

#include <stddef.h>

struct repo_allow {
	char **dirs; /* resolved absolute paths, no trailing '/' */
	size_t n;
};

/* Resolve and add @dir (must exist). 0, -errno. */
int repo_allow_add(struct repo_allow *a, const char *dir);
void repo_allow_free(struct repo_allow *a);

/*
 * Match @root. Returns 1 with *@ret_dir (index into a->dirs) and *@ret_rel
 * (malloc'ed path below it, "" for the directory itself) when @root lies in
 * an allowed directory; 0 when it does not (the caller delivers in-band
 * only); -EINVAL when it names an allowed directory but leaves it through
 * '..' or an empty / '.' component; -ENOMEM.
 */
int repo_match(const struct repo_allow *a, const char *root, size_t *ret_dir, char **ret_rel);

/*
 * Write @len bytes to <dir>/<rel>/<session>/<file>, creating directories
 * (0755). @session and @file must be single path components. 0, -ELOOP (a
 * symbolic link on the way), or another -errno. [any thread]
 */
int repo_write(const char *dir, const char *rel, const char *session, const char *file,
	       const void *data, size_t len);
