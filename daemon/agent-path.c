/* SPDX-License-Identifier: MIT */
/*
 * agent-path.c - the agent jobs should load, from where profd runs (see
 * agent-path.h). Pure apart from readlink()/realpath()/access().
 */
#include "agent-path.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"

#define AGENT_SO "libprofd-agent.so"

/* false, and @dst empty, when @src does not fit. */
static bool copy_str(char *dst, size_t size, const char *src)
{
	size_t n = strlen(src);

	if (n >= size) {
		dst[0] = '\0';
		return false;
	}
	memcpy(dst, src, n + 1);
	return true;
}

/* "/a/b/c" -> "/a/b" in place; "/c" -> "". */
static void strip_last(char *p)
{
	char *slash = strrchr(p, '/');

	if (slash)
		*slash = '\0';
	else
		p[0] = '\0';
}

/* When @dir ends with the path components @suffix ("sbin"), cut them off. */
static bool strip_suffix(char *dir, const char *suffix)
{
	size_t n = strlen(dir), k = strlen(suffix);

	if (k == 0 || k >= n || strcmp(dir + n - k, suffix) != 0 || dir[n - k - 1] != '/')
		return false;
	dir[n - k - 1] = '\0';
	return true;
}

static bool same_dir(const char *a, const char *b)
{
	char ra[PATH_MAX], rb[PATH_MAX];

	return realpath(a, ra) && realpath(b, rb) && strcmp(ra, rb) == 0;
}

/*
 * The prefix the running profd was installed under: its directory less the
 * configured sbindir ("sbin"), so a DESTDIR install or a moved prefix finds
 * its own agent. An absolute sbindir, or an executable elsewhere, falls
 * back to the configured prefix.
 */
static void install_agent(const char *exe_dir, char *out, size_t size)
{
	char root[PATH_MAX];
	const char *libdir = PROFD_LIBDIR;

	if (libdir[0] == '/') {
		snprintf(out, size, "%s/%s", libdir, AGENT_SO);
		return;
	}
	if (!copy_str(root, sizeof(root), exe_dir) || PROFD_SBINDIR[0] == '/' ||
	    !strip_suffix(root, PROFD_SBINDIR))
		copy_str(root, sizeof(root), PROFD_PREFIX);
	snprintf(out, size, "%s/%s/%s", root, libdir, AGENT_SO);
}

static void set_found(struct agent_path *ap, const char *path)
{
	ap->found = true;
	copy_str(ap->path, sizeof(ap->path), path);
	snprintf(ap->hint, sizeof(ap->hint), "start the job with CUDA_INJECTION64_PATH=%s", ap->path);
}

int agent_path_resolve(const char *exe, const char *env_path, struct agent_path *ap)
{
	char self[PATH_MAX], dir[PATH_MAX], want[PATH_MAX];

	memset(ap, 0, sizeof(*ap));
	if (env_path && env_path[0]) {
		/* Jobs resolve a relative path against their own cwd: refuse it. */
		char why[64] = "not an absolute path";
		int r = -EINVAL;

		if (env_path[0] == '/' && strlen(env_path) >= sizeof(ap->path)) {
			snprintf(why, sizeof(why), "longer than %d bytes", PATH_MAX - 1);
			r = -ENAMETOOLONG;
		}
		if (r == -ENAMETOOLONG || env_path[0] != '/') {
			snprintf(ap->hint, sizeof(ap->hint),
				 "PROFD_AGENT_PATH was ignored (%s); start the job with "
				 "CUDA_INJECTION64_PATH=<path of " AGENT_SO ">", why);
			return r;
		}
		/* The jobs' view (a container mount): profd may not see it. */
		set_found(ap, env_path);
		return 0;
	}
	if (!exe) {
		ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

		self[n > 0 ? n : 0] = '\0';
		exe = self;
	}
	if (!copy_str(dir, sizeof(dir), exe))
		dir[0] = '\0';
	strip_last(dir);

	bool in_build = dir[0] && same_dir(dir, PROFD_BUILD_SBIN_DIR);

	if (!HAVE_CUPTI_AGENT) {
		snprintf(ap->hint, sizeof(ap->hint),
			 "this profd was built without " AGENT_SO " (-Dcupti=disabled; the agent needs no "
			 "CUDA to build: docs/agent.md, \"Building the agent\"); start the job with "
			 "CUDA_INJECTION64_PATH=<path of a " AGENT_SO " from the same release>");
		return 0;
	}
	if (in_build)
		copy_str(want, sizeof(want), PROFD_AGENT_BUILD_PATH);
	else
		install_agent(dir, want, sizeof(want));
	if (access(want, R_OK) == 0) {
		set_found(ap, want);
		return 0;
	}
	copy_str(ap->path, sizeof(ap->path), want);
	snprintf(ap->hint, sizeof(ap->hint),
		 "%s is missing (%s): %s, or start the job with CUDA_INJECTION64_PATH=<path of a "
		 AGENT_SO " from the same release>",
		 AGENT_SO, ap->path,
		 in_build ? "run ninja to build it" : "install it with meson install");
	return 0;
}
