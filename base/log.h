/* SPDX-License-Identifier: MIT */
/*
 * log.h - leveled logging to stderr, journald-friendly.
 *
 * Define LOG_TOPIC before including this header to name the source
 * ("rpc", "session", "collector.host"). Arguments are not evaluated when the
 * level is filtered out. log_*_errno() evaluate to the negative errno they
 * were given, so "return log_warn_errno(r, ...)" logs and returns at once.
 *
 * Output: when stderr is the journal ($JOURNAL_STREAM matches it) lines are
 * "<N>topic: message" so journald keeps the priority; otherwise
 * "2026-11-22T10:00:00.123Z level topic: message".
 */
#pragma once

#include "macro.h"

#ifndef LOG_TOPIC
#define LOG_TOPIC "profd"
#endif

enum log_level {
	LOG_LEVEL_ERR = 3,
	LOG_LEVEL_WARN = 4,
	LOG_LEVEL_NOTICE = 5,
	LOG_LEVEL_INFO = 6,
	LOG_LEVEL_DEBUG = 7,
};

extern int log_max_level;

/* Set up the sink (journal detection). [main thread, before other threads] */
void log_open(void);
/* "err", "warn", "notice", "info", "debug" or a digit 3-7. 0 or -EINVAL. */
int log_parse_level(const char *s, int *ret_level);
int log_internal(int level, int err, const char *topic, const char *fmt, ...) _printf_(4, 5);

/* Evaluates to -abs(@err) whether or not the line is logged. ISO C (no
 * statement expression): @level appears twice, so it must be a constant
 * (every caller passes a LOG_LEVEL_*); @err and the format arguments are
 * evaluated at most once, the arguments only when the level is enabled. */
#define log_full_errno(level, err, ...)                                                   \
	((level) <= log_max_level ? log_internal((level), (err), LOG_TOPIC, __VA_ARGS__) \
				  : -abs(err))

#define log_error(...) (void)log_full_errno(LOG_LEVEL_ERR, 0, __VA_ARGS__)
#define log_warn(...) (void)log_full_errno(LOG_LEVEL_WARN, 0, __VA_ARGS__)
#define log_notice(...) (void)log_full_errno(LOG_LEVEL_NOTICE, 0, __VA_ARGS__)
#define log_info(...) (void)log_full_errno(LOG_LEVEL_INFO, 0, __VA_ARGS__)
#define log_debug(...) (void)log_full_errno(LOG_LEVEL_DEBUG, 0, __VA_ARGS__)
#define log_error_errno(e, ...) log_full_errno(LOG_LEVEL_ERR, e, __VA_ARGS__)
#define log_warn_errno(e, ...) log_full_errno(LOG_LEVEL_WARN, e, __VA_ARGS__)
#define log_debug_errno(e, ...) log_full_errno(LOG_LEVEL_DEBUG, e, __VA_ARGS__)
