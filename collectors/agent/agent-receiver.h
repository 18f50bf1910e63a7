/* SPDX-License-Identifier: MIT */
/*
 * agent-receiver.h - read-only view of the agents connected to the
 * "gpu.agent" collector, for the Status RPC. [loop thread]
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "collector.h"

#define AGENT_RECEIVER_NAME "gpu.agent"

struct agent_receiver_info {
	uint32_t pid;
	uint32_t version;   /* wire protocol version the agent speaks */
	const char *name;    /* borrowed until the next loop iteration */
	const char *cmdline; /* borrowed likewise */
	uint32_t n_devices;
};

struct agent_receiver_device {
	uint32_t plane_id;     /* n of /device:GPU:<n> */
	int32_t local_ordinal; /* ordinal inside the process */
	const char *uuid;      /* borrowed, as above */
	const char *name;
};

/*
 * Whether the directory of @socket_path (--agent-socket) is safe for the
 * socket: owned by root or profd's user and not writable by group or
 * others, or sticky. 0 (also when there is no socket or no directory yet),
 * or -EPERM with the directory and the fix in @why. main.c refuses to start
 * on -EPERM; agent_init() checks again on the directory it opens.
 * [start-up]
 */
int agent_receiver_check_dir(const char *socket_path, char *why, size_t why_size);

/* Number of connected agents that said HELLO; 0 if @c is not the
 * receiver or is unavailable. */
size_t agent_receiver_count(struct collector *c);
/* Agent @i (0-based), 0 or -ENOENT. */
int agent_receiver_get(struct collector *c, size_t i, struct agent_receiver_info *ret);
/* Device @j of agent @i, 0 or -ENOENT. */
int agent_receiver_device(struct collector *c, size_t i, size_t j, struct agent_receiver_device *ret);
