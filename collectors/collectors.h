/* SPDX-License-Identifier: MIT */
/* collectors.h - the ops tables registry.c lists. */
#pragma once

#include "collector.h"

extern const struct collector_ops agent_receiver_collector_ops;
