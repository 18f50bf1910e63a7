/* SPDX-License-Identifier: MIT */
/*
 * agent-receiver.h - what the daemon needs of the "gpu.agent" collector
 * besides its ops: its name and the start-up check of the socket's
 * directory. Status reads its agents through the ops (collector.h).
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "collector.h"

#define AGENT_RECEIVER_NAME "gpu.agent"

/*
 * Whether the directory of @socket_path (--agent-socket) is safe for the
 * socket: owned by root or profd's user and not writable by group or
 * others, or sticky. 0 (also when there is no socket or no directory yet),
 * or -EPERM with the directory and the fix in @why. main.c refuses to start
 * on -EPERM; agent_init() checks again on the directory it opens.
 * [start-up]
 */
int agent_receiver_check_dir(const char *socket_path, char *why, size_t why_size);
