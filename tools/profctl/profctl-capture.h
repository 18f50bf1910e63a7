/* SPDX-License-Identifier: MIT */
/*
 * profctl-capture.h - what `profctl capture`'s two files share: the run
 * (struct capture, the main thread's, profctl-capture.c) and each host's
 * part of it (struct host), which one host thread (profctl-capture-host.c)
 * fills while the main thread only reads it under cap->lock.
 */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tensorflow/profiler_service.pb-c.h"

#define MAX_HOSTS 1024
#define MAX_FILES 16
#define NOTES_SHOWN 3       /* XSpace errors + warnings printed per host without -v */
#define NOTES_KEPT_MAX 4096 /* with -v: a hostile server's list is still bounded */
#define NOTE_MAX 1024       /* bytes of one line kept */
#define INFOS_KEPT 32       /* profd's information lines printed per host */

enum host_state {
	HOST_WAITING = 0,
	HOST_DATA,
	HOST_EMPTY,
	HOST_FAILED,
};

struct host {
	char *name;            /* "host:port" as given, grpc:// removed: host_name and file name */
	pthread_t thread;
	struct capture *cap;
	/* written by the host thread, read by main under cap->lock */
	enum host_state state;
	int code;              /* gRPC code (>= 0) or -errno */
	bool local;            /* failed here (writing the logdir), not on the host: no retry */
	char msg[512];
	uint64_t bytes;
	size_t n_files;
	char *files[MAX_FILES];
	uint64_t file_sizes[MAX_FILES];
	/* the XSpace's own errors and warnings (what a capture says is missing) */
	size_t n_errors, n_warnings;
	char **notes;          /* errors first; at most cap->notes_kept; "E"/"W" + text */
	size_t n_notes;
	/* profd's information lines (steps found, what Python stacks cost) */
	size_t n_infos;        /* in the capture */
	char **infos;          /* at most INFOS_KEPT; "I" + text */
	size_t n_infos_kept;
};

/* --option KEY=VALUE: ProfileOptions.advanced_configuration (docs/options.md). */
#define MAX_OPTIONS 32
#define MAX_OPTION_KEY 128

struct capture {
	/* options */
	const char *logdir;
	char *repo_root;       /* <logdir>/plugins/profile */
	char session_id[256];
	uint64_t duration_ms, delay_ms;
	uint32_t attempts;
	uint64_t grace_ms;     /* how long a reply may take after the window ends */
	uint32_t host_level, device_level, python_level;
	bool allow_empty;
	bool progress;
	size_t notes_kept;     /* NOTES_SHOWN, or NOTES_KEPT_MAX with -v */
	/* --option: built once, read by every host thread */
	char *opt_text[MAX_OPTIONS]; /* "KEY\0VALUE", owned */
	Tensorflow__ProfileOptions__AdvancedConfigurationEntry opt_e[MAX_OPTIONS], *opt_pe[MAX_OPTIONS];
	Tensorflow__ProfileOptions__AdvancedConfigValue opt_v[MAX_OPTIONS];
	size_t n_options;
	/* run state */
	int64_t deadline_ns;   /* session creation + delay + duration + grace */
	bool told_waiting;     /* the "still waiting" notice was printed (not a terminal) */
	int64_t start_ns;      /* this attempt's start_timestamp_ns */
	struct host *hosts;
	size_t n_hosts;
	pthread_mutex_t lock;
	pthread_cond_t changed; /* a host left HOST_WAITING (signalled under lock) */
};

/* A host thread (arg: its struct host): one Profile call, the reply's
 * tool data written under the logdir, the state set under cap->lock and
 * cap->changed signalled. */
void *capture_host_thread(void *arg);
/* @h failed with gRPC code or -errno @code and a message. */
void capture_host_failed(struct host *h, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Free @h's kept XSpace errors and warnings (before a retry, at the end). */
void capture_host_free_notes(struct host *h);
