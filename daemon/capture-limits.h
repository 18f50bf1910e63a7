/* SPDX-License-Identifier: MIT */
/*
 * capture-limits.h - one window's own limits, applied to its snapshot.
 *
 * Agents collect the union of what the open windows ask (session.c), so a
 * window's snapshot may hold more than its request wanted. Before encoding,
 * the window's worker cuts its private snapshot down to the request's
 * advanced_configuration (docs/options.md): GPUs to profile, NVTX off, the
 * event caps and the annotation-string cap. Every cut is counted per kind
 * in the snapshot's warnings. It only removes records (the one allocation,
 * a bitmap of the host plane's event names for the annotation cap, is
 * skipped with a warning when it fails): never a failed capture.
 * [worker, snapshot owner]
 */
#pragma once

#include "capture-opts.h"
#include "xspace/trace.h"

void capture_limits_apply(struct trace *snap, const struct capture_opts *o, int64_t ts_ns);
