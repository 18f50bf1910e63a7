/* SPDX-License-Identifier: MIT */
/*
 * delivery.h - writing a capture into a client-named repository_root on
 * this machine, which is an arbitrary-path write unless fenced in.
 *
 * Only directories the operator named with --repository-allow are written
 * to. A request's repository_root is matched component-wise against them
 * after they were resolved with realpath() at start. Each write opens the
 * allowed directory again by that path, one component at a time from '/',
 * and then walks the part below it the same way: openat2() with
 * RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS per component, or openat(O_NOFOLLOW)
 * on kernels without it. No symbolic link is followed anywhere, so neither
 * '..' nor a link planted inside can lead out, and neither can a link put
 * in the place of the allowed directory or of a parent after it was renamed
 * away: that write fails with -ELOOP (the reply still carries the capture,
 * and XSpace.errors says why). A renamed directory gets no more captures;
 * a directory made again at the allowed path does.
 * Files appear atomically: a temporary file in the target directory, fsync,
 * rename. A write that fails takes back what it made: the temporary file
 * and every directory it created for this capture (so a full disk or a
 * refused rename leaves no empty tree behind).
 *
 * Bounds: every name must be a visible, valid UTF-8 path component, and a
 * repository_root may go at most max_depth directories below the allowed
 * directory, the whole path shorter than PATH_MAX. One request once made
 * profd create a million nested directories.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define REPO_MAX_DEPTH_DEFAULT 32 /* --repository-max-depth */
#define REPO_MAX_DEPTH_LIMIT 1024

struct repo_allow {
	char **dirs; /* resolved absolute paths, no trailing '/' */
	size_t n;
	uint32_t max_depth; /* components of repository_root below a dir; 0: the default */
};

/*
 * True if @s may name a directory or file profd creates: 1-255 bytes of
 * valid UTF-8, no '/', no control character, and not starting with '.'
 * (which refuses ".", ".." and hidden names such as "...xplane.pb").
 */
bool repo_name_ok(const char *s);

/* Resolve and add @dir (must exist). 0, -errno. */
int repo_allow_add(struct repo_allow *a, const char *dir);
void repo_allow_free(struct repo_allow *a);

/*
 * Match @root. Returns 1 with *@ret_dir (index into a->dirs) and *@ret_rel
 * (malloc'ed path below it, "" for the directory itself) when @root lies in
 * an allowed directory; 0 when it does not (the caller delivers in-band
 * only); -EINVAL when it names an allowed directory but has a component
 * repo_name_ok() refuses ('..' and '.' included); -ENAMETOOLONG when @root
 * is PATH_MAX bytes or longer; -E2BIG when it goes more than max_depth
 * directories below; -ENOMEM.
 */
int repo_match(const struct repo_allow *a, const char *root, size_t *ret_dir, char **ret_rel);

/* Whether <dir>/<rel>/<session>/<file> is shorter than PATH_MAX: 0 or -ENAMETOOLONG. */
int repo_path_fits(const char *dir, const char *rel, const char *session, const char *file);

/*
 * Write @len bytes to <dir>/<rel>/<session>/<file>, creating directories
 * (0755); @dir is one of repo_allow's (absolute, resolved). @session and
 * @file must pass repo_name_ok(). 0, -ELOOP (a symbolic link on the way,
 * from '/' down), or another -errno; on failure the temporary file and the
 * directories this call created are removed. [any thread]
 */
int repo_write(const char *dir, const char *rel, const char *session, const char *file,
	       const void *data, size_t len);
