/* SPDX-License-Identifier: MIT */
/*
 * conf.h - profd's settings: one table (conf.c) names every key, and drives
 * the command-line options, the config file (profd.conf(5)), the defaults
 * and bounds --help prints, --dump-config, and which keys SIGHUP reloads.
 *
 * (Not "config.h": that name is the build's generated header.)
 *
 * A struct profd_conf owns its strings. The daemon keeps two: the flags as
 * given (cli, with `set` saying which) and the effective settings (file,
 * then the flags on top). Everything here runs on the main/loop thread.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define CONF_MAX_LIST 64 /* values of one repeatable key */

struct conf_list {
	char *v[CONF_MAX_LIST];
	uint32_t n;
};

struct profd_conf {
	struct conf_list listen;
	uint32_t max_streams;
	uint64_t max_request_size;
	uint64_t first_message_timeout_ms;
	uint64_t idle_timeout_ms;
	uint64_t keepalive_ms;
	uint64_t keepalive_timeout_ms;
	uint64_t self_check_ms;
	uint64_t max_duration_ms;
	uint32_t max_sessions;
	uint64_t max_events;
	uint64_t max_bytes;
	uint64_t recorder_bytes;           /* the flight recorder's ring, <= max_bytes / 2 */
	char *snapshot_dir;                /* triggered snapshots (trigger.h); NULL: none */
	uint64_t snapshot_last_ms;
	uint64_t snapshot_interval_ms;
	uint32_t snapshot_max_count;
	uint64_t snapshot_max_bytes;
	uint64_t snapshot_gpu_idle_ms;     /* the gpu-idle rule; 0: off */
	uint64_t snapshot_step_above_ms;   /* the slow-step rule; 0: off */
	bool snapshot_step_outlier;
	struct conf_list repository_allow;
	uint32_t repository_max_depth;
	struct conf_list allow_from;
	char *tls_cert, *tls_key, *tls_client_ca, *token_file; /* NULL: unset */
	uint32_t agent_socket_mode;
	char *agent_socket_group;          /* NULL: unset; checked to exist */
	struct conf_list agent_allow_uid;  /* names or numbers, checked to exist */
	uint32_t host_sample_hz;
	uint32_t nvml_sample_hz;
	char *agent_socket;                /* NULL: no agent socket */
	uint64_t flush_timeout_ms;
	char *hostname;                    /* NULL: gethostname() */
	char *proc_root, *sys_root;
	char *nvml_library;                /* NULL: libnvidia-ml.so.1 */
	char *step_pattern;                /* NVTX step names, csv (agent-nvtx.h) */
	char *pm_sample;                   /* PM metrics csv, "default"; NULL: off (capture-opts.h) */
	uint64_t pm_sample_interval_us;
	uint32_t pm_sample_buffer_mb;
	int log_level;
	bool idle_trim;                    /* unmap clean code pages when idle (footprint.c) */
	uint64_t set;                      /* bit i: key i was given (flag or file line) */
};

/* Key indices, in table order (conf.c checks the two agree). */
enum conf_key {
	CONF_LISTEN, CONF_MAX_STREAMS, CONF_MAX_REQUEST_SIZE, CONF_FIRST_MESSAGE_TIMEOUT,
	CONF_IDLE_TIMEOUT, CONF_KEEPALIVE, CONF_KEEPALIVE_TIMEOUT, CONF_SELF_CHECK,
	CONF_MAX_DURATION, CONF_MAX_SESSIONS, CONF_MAX_EVENTS, CONF_MAX_BYTES, CONF_RECORDER_BYTES,
	CONF_SNAPSHOT_DIR, CONF_SNAPSHOT_LAST, CONF_SNAPSHOT_INTERVAL, CONF_SNAPSHOT_MAX_COUNT,
	CONF_SNAPSHOT_MAX_BYTES, CONF_SNAPSHOT_GPU_IDLE, CONF_SNAPSHOT_STEP_ABOVE, CONF_SNAPSHOT_STEP_OUTLIER,
	CONF_REPOSITORY_ALLOW,
	CONF_REPOSITORY_MAX_DEPTH, CONF_ALLOW_FROM, CONF_TLS_CERT, CONF_TLS_KEY, CONF_TLS_CLIENT_CA,
	CONF_TOKEN_FILE, CONF_AGENT_SOCKET_MODE, CONF_AGENT_SOCKET_GROUP, CONF_AGENT_ALLOW_UID,
	CONF_HOST_SAMPLE_HZ, CONF_NVML_SAMPLE_HZ, CONF_AGENT_SOCKET, CONF_FLUSH_TIMEOUT, CONF_STEP_PATTERN,
	CONF_PM_SAMPLE, CONF_PM_SAMPLE_INTERVAL, CONF_PM_SAMPLE_BUFFER,
	CONF_HOSTNAME, CONF_PROC_ROOT, CONF_SYS_ROOT, CONF_NVML_LIBRARY, CONF_LOG_LEVEL, CONF_IDLE_TRIM,
	CONF_N_KEYS
};

/* getopt_long() values of the keys' options are CONF_OPT_BASE + key. */
#define CONF_OPT_BASE 1024

/* Every key at its default (PROFD_AGENT_SOCKET in the environment moves the
 * agent socket's default, as it does for the agents). 0, -ENOMEM. */
int conf_init(struct profd_conf *c);
void conf_free(struct profd_conf *c);

size_t conf_n_keys(void);
const char *conf_key_name(size_t key);
bool conf_key_reloadable(size_t key);
int conf_key_short(size_t key); /* 'l' for listen, else 0 */

/*
 * Set @key from text, as a flag or a file line gives it: validated against
 * the table's bounds. The first value given for a repeatable key replaces
 * its default; later ones add; an empty value clears the list. 0, or
 * -EINVAL / -E2BIG with the reason in @why ("expected 1-1024").
 */
int conf_set(struct profd_conf *c, size_t key, const char *value, char *why, size_t why_size);

/*
 * Read @path into @c (usually fresh from conf_init()). -ENOENT when the file
 * does not exist (the caller decides whether that is fine); any other error
 * is printed to @err as "PATH:LINE: what" (or "PATH: what") and @c is left
 * partly set: parse into a scratch struct and keep it only on 0.
 */
int conf_load(struct profd_conf *c, const char *path, char *err, size_t err_size);

/* Copy @key's value (deep) from @src to @dst. 0, -ENOMEM. */
int conf_copy_key(struct profd_conf *dst, const struct profd_conf *src, size_t key);
/* Copy every key @src->set names. 0, -ENOMEM. */
int conf_overlay(struct profd_conf *dst, const struct profd_conf *src);
bool conf_key_equal(const struct profd_conf *a, const struct profd_conf *b, size_t key);

/* @key's value as file syntax would write it ("10m", "64K", "0666"); lists
 * joined by ", " (for log lines). Returns @buf. */
const char *conf_format(const struct profd_conf *c, size_t key, char *buf, size_t size);

/*
 * Every key with its value, in file syntax, so that the output is a valid
 * config. @template: a commented default file instead, each key explained
 * and commented out.
 */
void conf_dump(FILE *f, const struct profd_conf *c, bool template);

/* --help's option lines, section by section, defaults from the table. */
void conf_help(FILE *f);

/* Names resolved as conf_set() checked them (start-up, main.c). 0, -ENOENT. */
int conf_resolve_group(const char *v, gid_t *ret);
int conf_resolve_user(const char *v, uid_t *ret);

/* Whether @v may be profd's host name (the hostname key, and what
 * gethostname() says when it is unset): 1-HOST_NAME_MAX bytes of valid UTF-8
 * without control characters or '/', not starting with '.'. */
bool conf_host_ok(const char *v);
