/* SPDX-License-Identifier: MIT */
/* collectors.h - the ops tables registry.c lists. */
#pragma once

#include "collector.h"

/* host-proc.c: CPU, memory, load and context-switch counters from /proc. */
extern const struct collector_ops host_proc_collector_ops;
