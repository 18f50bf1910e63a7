/* SPDX-License-Identifier: MIT */
/* collectors.h - the ops tables registry.c lists. */
#pragma once

#include "collector.h"
