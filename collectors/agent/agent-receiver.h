/* SPDX-License-Identifier: MIT */
/*
 * agent-receiver.h - what the daemon needs of the "gpu.agent" collector
 * besides its ops: its name, its settings and the start-up check of the
 * socket's directory. Status reads its agents through the ops (collector.h).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "collector.h"

#define AGENT_RECEIVER_NAME "gpu.agent"

/**
 * struct agent_receiver_cfg - the receiver's settings (collector_cfg.agent,
 * borrowed for the daemon's life).
 * @socket:       where agents connect (--agent-socket); NULL or "" = none.
 * @socket_mode:  permission bits of the socket; 0 = 0666.
 * @socket_chgrp: give the socket the group @socket_gid.
 * @allow_uids:   when @n_allow_uids > 0, the only peer uids the socket
 *                accepts (docs/security.md).
 * @hint:         how jobs load the agent, or why there is none
 *                (daemon/agent-path.h); NULL = a generic hint.
 */
struct agent_receiver_cfg {
	const char *socket;
	uint32_t socket_mode;
	bool socket_chgrp;
	gid_t socket_gid;
	const uid_t *allow_uids;
	size_t n_allow_uids;
	const char *hint;
	/* An armed job's agent disconnected: the job exited or was killed
	 * (the flight recorder's process-death trigger, daemon/trigger.h).
	 * Called from inside the connection's close: it must not re-enter
	 * the collectors (defer). NULL: nobody is told. [loop] */
	void (*job_gone)(void *userdata, uint32_t pid, const char *name);
	void *job_gone_ud;
	/* A CUDA call returned an error that ends the job's CUDA work or its
	 * step (agent_cuda_error_fatal(): an illegal address, a launch
	 * failure, out of memory ...): @api the call, @ret its result. Called
	 * from inside the record's decoding: defer, as @job_gone. [loop] */
	void (*cuda_error)(void *userdata, uint32_t pid, const char *name, const char *api, int32_t ret);
	void *cuda_error_ud;
};

/* Whether a CUDA driver or runtime result @ret is one of the errors that
 * mean the job is failing (the numbers are the same in both APIs), not
 * one frameworks meet in normal operation (not ready, already enabled,
 * not found while probing). */
bool agent_cuda_error_fatal(int32_t ret);

/*
 * Whether the directory of @socket_path (--agent-socket) is safe for the
 * socket: owned by root or profd's user and not writable by group or
 * others, or sticky. 0 (also when there is no socket or no directory yet),
 * or -EPERM with the directory and the fix in @why. main.c refuses to start
 * on -EPERM; agent_init() checks again on the directory it opens.
 * [start-up]
 */
int agent_receiver_check_dir(const char *socket_path, char *why, size_t why_size);
