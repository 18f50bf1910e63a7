/* SPDX-License-Identifier: MIT */
/*
 * conf-table.h - the settings table of conf.c, for conf-text.c (--help,
 * --dump-config, the config file). Not part of conf.h: everyone else reads
 * settings through struct profd_conf and the conf_* calls. The table is
 * constant data, read from any thread.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "conf.h"

enum conf_type {
	T_U32,   /* decimal, min..max */
	T_U64,
	T_DUR,   /* "500ms", "10s", "10m", "1h"; min..max in ms (0 = off when min is 0) */
	T_SIZE,  /* "65536", "64K", "1M"; min..max bytes */
	T_PATH,  /* a non-empty string */
	T_OPT,   /* a string; empty = unset */
	T_HOST,  /* a host name for XSpace and file names (conf_host_ok()); empty = unset */
	T_STEPS, /* comma-separated step names (agent_nvtx_check_step_patterns()) */
	T_PM,    /* PM sampling metrics (capture_opts_set_pm_metrics()); empty = off */
	T_USEC,  /* "500us", "2ms", "1s", bare = us; min..max in us */
	T_LEVEL, /* err, warn, notice, info, debug */
	T_MODE,  /* octal permission bits */
	T_GROUP, /* group name or gid; empty = unset */
	T_BOOL,  /* yes or no (also true/false, on/off, 1/0); a bool field */
	T_LISTEN, T_CIDR, T_DIR, T_USER, /* repeatable: one value per flag or line */
};

struct conf_row {
	const char *name;   /* long option and file key */
	const char *arg;    /* metavar in --help */
	enum conf_type type;
	uint64_t min, max;
	const char *def;    /* default, in file syntax; NULL = unset / empty list */
	bool reload;        /* SIGHUP applies it (main.c: apply_reloadable()) */
	const char *section;/* --help heading where it changes; NULL = same as above */
	const char *help;   /* one paragraph; --help wraps it and adds default and bounds */
	size_t off;         /* field in struct profd_conf */
};

/* One row per key, in enum conf_key's order (conf.c). */
extern const struct conf_row conf_rows[CONF_N_KEYS];

/* Repeatable keys (one value per flag or line, struct conf_list). */
bool conf_type_is_list(enum conf_type t);
/* Key @key's field in @c. */
const void *conf_cfield(const struct profd_conf *c, size_t key);
/* What values row @r takes, in words for --help and for errors ("a
 * duration from 0 to 24h", "yes or no"), into @buf; returns @buf. */
const char *conf_row_bounds(const struct conf_row *r, char *buf, size_t size);
