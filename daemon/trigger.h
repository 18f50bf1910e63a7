/* SPDX-License-Identifier: MIT */
/*
 * trigger.h - snapshots of the flight recorder that profd writes by
 * itself, on trouble (docs/recorder.md, Triggers).
 *
 * A trigger (SIGUSR2 to profd today) takes the recorder's newest
 * @last_ms, without starting a new period (GetSnapshot's periods are the
 * clients'), and writes it where TensorBoard and XProf look, under the
 * operator's directory:
 *
 *   <dir>/plugins/profile/<YYYY_MM_DD_HH_MM_SS_mmm>-<reason>/<host>.xplane.pb
 *   <dir>/plugins/profile/<YYYY_MM_DD_HH_MM_SS_mmm>-<reason>/reason.txt
 *
 * Bounded: each reason fires at most once per @min_interval_ms, one
 * snapshot is encoded at a time, and after each write the oldest of the
 * runs profd made there (names of that form, nothing else) are removed
 * until at most @max_count remain holding at most @max_bytes (the newest
 * is always kept). Files go through daemon/delivery.h's writer: atomic,
 * no symbolic link followed.
 *
 * Triggers (their reasons name the runs): SIGUSR2 (daemon/main.c), a job that exits or is killed while
 * its agent is armed ("process-exit", from the agent receiver), a CUDA
 * call of a traced job that failed for good ("cuda-error": an illegal
 * address, a launch failure, out of memory; agent_cuda_error_fatal()), the
 * gpu-idle rule: while recording, a GPU whose utilization (NVML) has been
 * 0 for @gpu_idle_ms while a traced job holds it (an agent has that
 * device), checked every second; and the slow-step rule: a step (an NVTX
 * range named by --step-pattern) longer than @step_above_ms, or with
 * @step_p99 longer than the 99th percentile of the last TRIGGER_STEPS
 * steps of its thread (once TRIGGER_STEPS_MIN were seen), checked on the
 * steps that ended since the last check.
 *
 * Threads: the loop thread's, but while a snapshot is encoded and written:
 * then the worker owns the job (trigger.c).
 */
#pragma once

#include <stdint.h>

#include <uv.h>

#include "session.h"

struct trigger;

struct trigger_cfg {
	const char *dir;          /* absolute and resolved; NULL: triggers write nothing */
	uint64_t last_ms;         /* span of a snapshot (the newest of the ring) */
	uint64_t min_interval_ms; /* per reason */
	uint32_t max_count;       /* runs kept in the directory */
	uint64_t max_bytes;       /* their bytes */
	const char *hostname;     /* names the file; borrowed for the trigger's life */
	uint64_t gpu_idle_ms;     /* the gpu-idle rule: 0 off (trigger.c) */
	uint64_t step_above_ms;   /* the slow-step rule: a step longer than this; 0 off */
	bool step_p99;            /* ... or longer than the p99 of its thread's recent steps */
};

int trigger_new(uv_loop_t *loop, struct session_mgr *m, const struct trigger_cfg *cfg, struct trigger **ret);
/* SIGHUP reload: the settings of the next trigger (@cfg's strings copied). 0, -ENOMEM. */
int trigger_set_cfg(struct trigger *t, const struct trigger_cfg *cfg);
/*
 * Fire: @reason is a short word for the run's name ("sigusr2"), @detail a
 * line for reason.txt. 0 when a snapshot is on its way; -ENOTDIR no
 * directory configured, -ENOENT not recording, -EAGAIN rate-limited or one
 * is still being written, -ENOMEM. Each outcome is logged.
 */
int trigger_fire(struct trigger *t, const char *reason, const char *detail);
/* The same on the next loop turn, for callers inside collector code
 * (a job's disconnect: re-entering the collectors there is not safe).
 * One waits at a time; -EAGAIN (logged) while one does, -ESHUTDOWN after
 * trigger_close(). */
int trigger_fire_soon(struct trigger *t, const char *reason, const char *detail);
/* The daemon stops: no more triggers; closes the trigger's handle (the
 * loop must run once more before trigger_free()). */
void trigger_close(struct trigger *t);
/* Snapshots written (for tests through the log and for status). */
uint64_t trigger_written(const struct trigger *t);
/* The daemon stops: a snapshot in flight finishes on its own and is freed
 * by it; @t goes now. */
struct trigger *trigger_free(struct trigger *t);
