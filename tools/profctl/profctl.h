/* SPDX-License-Identifier: MIT */
/*
 * profctl.h - what the profctl subcommands share: entry points, exit codes,
 * a buffered (optionally gzip) output writer that commits atomically, and
 * small formatting helpers.
 *
 * Errors follow the tree's rule: functions return 0 or -errno; only the
 * subcommand entry points turn them into messages on stderr and exit codes.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <protobuf-c/protobuf-c.h>

/* Event times and sums in ps: a line timestamp_ns x 1000 overflows int64
 * for epoch ns, and hostile files can hold INT64_MAX durations. */
__extension__ typedef __int128 ps128;

/* Exit codes, documented in `profctl --help`. */
enum {
	PROFCTL_EXIT_OK = 0,
	PROFCTL_EXIT_FAIL = 1,   /* the operation failed (no host returned data, RPC error, check failed) */
	PROFCTL_EXIT_USAGE = 2,  /* bad command line */
};

int cmd_capture(int argc, char **argv);
int cmd_monitor(int argc, char **argv);
int cmd_terminate(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_top(int argc, char **argv);
int cmd_flame(int argc, char **argv);
int cmd_doctor(int argc, char **argv);
int cmd_record(int argc, char **argv);
struct Profd__RecorderStatus;
/* Status.recorder as one line ("recording for 12.3 s, ..."), times
 * against the daemon's own clock @now_unix_ns (profctl-record.c). */
void profctl_print_recorder(const struct Profd__RecorderStatus *rs, uint64_t now_unix_ns);
int cmd_snapshot(int argc, char **argv);
/* doctor FILE: which XProf tools an XSpace file fills (profctl-xprofcheck.c). */
int doctor_xspace_file(const char *path);

/* "profctl: <sub>: <message>\n" on stderr; returns @code. */
int profctl_err(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Usage error: the message plus "Try 'profctl <sub> --help'." Returns 2. */
int profctl_usage_err(const char *sub, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Every unary RPC's deadline unless a command needs more. */
#define PROFCTL_RPC_TIMEOUT_MS 10000

/* Usage error (2) unless @url is HOST:PORT / [IPV6]:PORT (grpc:// allowed). */
int profctl_check_url(const char *sub, const char *url);
/*
 * Advice for a failed call: @code is the gRPC code (>= 0) and @msg the
 * status message, which tells a name that does not resolve from a server
 * that refuses. NULL when there is nothing useful to add.
 */
const char *profctl_rpc_hint(int code, const char *msg);
/*
 * One unary call to @url. 0 with *@ret the decoded reply (free with
 * protobuf_c_message_free_unpacked()), or 1 after printing why it failed,
 * with profctl_rpc_hint()'s advice.
 */
int profctl_call(const char *url, const char *path, const ProtobufCMessage *req,
		 const ProtobufCMessageDescriptor *desc, uint64_t timeout_ms, ProtobufCMessage **ret);

/* "1.5 MB", "312 B" (decimal units). Returns @buf. */
const char *fmt_bytes(uint64_t n, char *buf, size_t size);
/* "1.234 ms", "15.0 us", "2.50 s" from picoseconds. Returns @buf. */
const char *fmt_ps(double ps, char *buf, size_t size);

/* Host name -> file-name stem: every ':' (and '/') becomes '_' (TF's
 * SaveProfile): "node1:6009" -> "node1_6009". */
void profctl_file_stem(const char *name, char *out, size_t size);

/* A run's name from the local time, as TensorFlow's client names sessions:
 * YYYY_MM_DD_HH_MM_SS (capture's session id, snapshot's run). */
void profctl_run_name(char *buf, size_t size);

/* Wall clock in ns (CLOCK_REALTIME). */
int64_t now_unix_ns(void);

/* ---- output writer ---------------------------------------------------- */

/**
 * struct ow - buffered output to a file (written atomically: a temporary
 * in the same directory, renamed over @path by ow_commit()) or to stdout
 * ("-"). With @gzip the stream is gzip-compressed with zlib.
 * Errors are sticky in @err; check ow_commit()'s result once at the end.
 */
struct ow {
	int fd;
	bool is_stdout;
	bool gzip;
	char *path;
	char *tmp_path;
	uint8_t *buf;
	size_t len, cap;
	void *z;      /* the gzip stage (profctl-gzip.c) when gzip */
	uint64_t bytes_out;
	int err;
};

int ow_open(struct ow *w, const char *path, bool gzip);
void ow_write(struct ow *w, const void *p, size_t n);
static inline void ow_putc(struct ow *w, char c)
{
	if (w->len < w->cap)
		w->buf[w->len++] = (uint8_t)c;
	else
		ow_write(w, &c, 1);
}
static inline void ow_puts(struct ow *w, const char *s);
void ow_printf(struct ow *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Decimal integers, without printf (the export's hot path). */
void ow_u64(struct ow *w, uint64_t v);
void ow_i64(struct ow *w, int64_t v);
/* Flush, finish gzip, fsync, rename into place. 0 or -errno; frees. */
int ow_commit(struct ow *w);
/* Drop the temporary file; frees. Safe after a failed commit. */
void ow_abort(struct ow *w);

#include <string.h>
static inline void ow_puts(struct ow *w, const char *s) { ow_write(w, s, strlen(s)); }

/*
 * Write @len bytes to @path atomically (temp file + fsync + rename), with
 * the parent directories created as needed. 0 or -errno.
 */
int write_file_atomic(const char *path, const void *data, size_t len);
/* mkdir -p. 0 or -errno. */
int mkdir_p(const char *path, unsigned mode);

/* Length of a valid UTF-8 sequence of 2 to 4 bytes at @p (max @n bytes), or 0. */
size_t utf8_len(const uint8_t *p, size_t n);
/*
 * Write @s with valid multi-byte UTF-8 sequences and the ASCII bytes
 * @keep() accepts as they are, and every other byte (an invalid UTF-8 byte
 * included) through @subst(). The one loop of every escaper (JSON, XML,
 * folded stacks); inline, so that @keep is inlined on export's hot path.
 */
static inline void ow_escape(struct ow *w, const char *s, size_t len, bool (*keep)(uint8_t c),
			     void (*subst)(struct ow *w, uint8_t c))
{
	const uint8_t *p = (const uint8_t *)s, *end = p + len, *run = p;

	while (p < end) {
		size_t k = *p < 0x80 ? keep(*p) : utf8_len(p, (size_t)(end - p));

		if (k) {
			p += k;
			continue;
		}
		ow_write(w, run, (size_t)(p - run));
		subst(w, *p);
		run = ++p;
	}
	ow_write(w, run, (size_t)(p - run));
}
/* JSON string body with escapes; invalid UTF-8 becomes U+FFFD. No quotes. */
void json_escape(struct ow *w, const char *s, size_t len);
/* XML text or attribute value with entities; invalid UTF-8 and control
 * characters (but tab, newline) become U+FFFD. No quotes. */
void xml_escape(struct ow *w, const char *s, size_t len);
/* A double as JSON (non-finite values become null). */
void json_double(struct ow *w, double v);

/* ---- sorted id sets (correlation ids) -------------------------------------- */

/* A growable array of uint64; zero it to start, free(v) to end. */
struct u64vec {
	uint64_t *v;
	size_t n, cap;
};

/* 0 or -ENOMEM. */
int u64vec_push(struct u64vec *a, uint64_t x);
/* Sort and drop repeats: the form u64vec_find() needs. */
void u64vec_sort_unique(struct u64vec *a);
/* Binary search in a sorted vector; *@idx = the position when found. */
bool u64vec_find(const struct u64vec *a, uint64_t x, size_t *idx);
bool u64vec_has(const struct u64vec *a, uint64_t x);
