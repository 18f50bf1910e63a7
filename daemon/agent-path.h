/* SPDX-License-Identifier: MIT */
/*
 * agent-path.h - which libprofd-agent.so should jobs load?
 *
 * Every hint profd gives (the agent-socket log line, the "no GPU data"
 * capture warning, Status for `profctl doctor`) names the agent jobs put in
 * CUDA_INJECTION64_PATH. That path is worked out here, at run time, from
 * where this profd runs, never from a path fixed at build time that may not
 * exist:
 *   - $PROFD_AGENT_PATH when set: the path jobs see, which in containers
 *     differs from profd's own view (docker/, docs/deploy.md);
 *   - profd run from its build tree: the build tree's agent;
 *   - profd run from an install (any DESTDIR or moved prefix): <prefix of
 *     the running profd>/<libdir>/libprofd-agent.so;
 *   - no agent there: a sentence saying why (not built: no CUPTI headers at
 *     build time; built but not installed) instead of a path.
 * main() calls it once at start-up, before the loop runs; the result is
 * plain strings in a struct the caller owns.
 */
#pragma once

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

/**
 * struct agent_path - the answer.
 * @found: @path names an existing agent (or $PROFD_AGENT_PATH).
 * @path:  the agent jobs should load; when !@found the place it was
 *         expected at, or "" when this build has none.
 * @hint:  what to tell an operator: "start the job with
 *         CUDA_INJECTION64_PATH=<path>" or why there is no agent to load.
 */
struct agent_path {
	bool found;
	char path[PATH_MAX];
	char hint[PATH_MAX + 512];
};

/*
 * Resolve for a profd whose executable is @exe (an absolute path; NULL =
 * /proc/self/exe). @env_path is $PROFD_AGENT_PATH (NULL or "" = unset).
 * 0, or -EINVAL / -ENAMETOOLONG when @env_path is not absolute or does not
 * fit in @path (then @ap->hint says so and names no path).
 */
int agent_path_resolve(const char *exe, const char *env_path, struct agent_path *ap);
