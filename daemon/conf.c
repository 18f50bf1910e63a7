/* SPDX-License-Identifier: MIT */
/*
 * conf.c - the table of profd's settings and everything derived from it:
 * option parsing (main.c builds getopt's list from it), values checked,
 * set, compared, copied and formatted, and the SIGHUP reload set. The text
 * forms (--help, --dump-config, the config file) are conf-text.c's, over
 * the same table (conf-table.h).
 *
 * A key is one row: its name is both the long option and the file key,
 * its default is text that goes through the same parser as any value (so
 * a default outside the bounds fails every start, in the tests first).
 * Config files are hostile input like any other: lines are bounded, every
 * value is checked against the row's bounds, and errors name FILE:LINE.
 */
#include <ctype.h>
#include <errno.h>
#include <grp.h>
#include <inttypes.h>
#include <limits.h>
#include <pwd.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h> /* strcasecmp() */
#include <unistd.h>

#include "base/file.h"
#include "base/log.h"
#include "base/macro.h"
#include "base/parse.h"
#include "base/utf8.h"
#include "capture-opts.h"
#include "config.h"
#include "collectors/agent/agent-nvtx.h"
#include "conf-table.h"
#include "conf.h"
#include "delivery.h"
#include "rpc.h"


#define F(field) offsetof(struct profd_conf, field)
#define H24 (UINT64_C(24) * 3600 * 1000)
#define H1 (UINT64_C(3600) * 1000)

/* Table order is enum conf_key's order and --help's. */
const struct conf_row conf_rows[CONF_N_KEYS] = {
	[CONF_LISTEN] = {"listen", "HOST:PORT", T_LISTEN, 0, 0, "[::]:6009", false,
		"Listening", "address to serve on; repeatable ([::] takes IPv6 and IPv4). Port 0 picks a "
		"free port; the log says which. A port in use is an error.", F(listen)},
	[CONF_MAX_STREAMS] = {"max-streams", "N", T_U32, 1, 100000, "100", false,
		"Connections (see docs/protocol.md, Connections)", "calls open at once per connection",
		F(max_streams)},
	[CONF_MAX_REQUEST_SIZE] = {"max-request-size", "N", T_SIZE, 1024, 64 << 20, "64K", false, NULL,
		"largest request message in bytes, or NK / NM; larger: RESOURCE_EXHAUSTED",
		F(max_request_size)},
	[CONF_FIRST_MESSAGE_TIMEOUT] = {"first-message-timeout", "DUR", T_DUR, 0, H1, "10s", false, NULL,
		"cancel a call whose request has not arrived, and drop a connection with no HTTP/2 "
		"handshake, after DUR; 0 = off", F(first_message_timeout_ms)},
	[CONF_IDLE_TIMEOUT] = {"idle-timeout", "DUR", T_DUR, 0, H24, "5m", false, NULL,
		"close connections without calls after DUR; 0 = off", F(idle_timeout_ms)},
	[CONF_KEEPALIVE] = {"keepalive", "DUR", T_DUR, 0, H24, "60s", false, NULL,
		"ping connections that have calls every DUR; 0 = off", F(keepalive_ms)},
	[CONF_KEEPALIVE_TIMEOUT] = {"keepalive-timeout", "DUR", T_DUR, 1, H1, "20s", false, NULL,
		"drop them if a ping is unanswered", F(keepalive_timeout_ms)},
	[CONF_SELF_CHECK] = {"self-check", "DUR", T_DUR, 0, H1, "30s", false, NULL,
		"connect to our own port every DUR and exit non-zero after 3 unanswered rounds in a row; "
		"0 = off",
		F(self_check_ms)},
	[CONF_MAX_DURATION] = {"max-duration", "DUR", T_DUR, 1, H24, "10m", true,
		"Limits (every value a client sends is bounded)",
		"longest capture and longest start delay", F(max_duration_ms)},
	[CONF_MAX_SESSIONS] = {"max-sessions", "N", T_U32, 1, 1024, "16", true, NULL,
		"captures open at once; more get RESOURCE_EXHAUSTED", F(max_sessions)},
	[CONF_MAX_EVENTS] = {"max-events", "N", T_U64, 1, UINT64_MAX, "20000000", false, NULL,
		"events held for open captures; the rest are dropped and counted in XSpace.warnings",
		F(max_events)},
	[CONF_MAX_BYTES] = {"max-bytes", "N", T_SIZE, 1 << 20, (uint64_t)1 << 50, "1024M", false, NULL,
		"bytes held in total for open captures and their replies: the live event store (at most "
		"half), the copies overlapping captures take and the encoded replies until sent; events "
		"beyond it are dropped and counted in XSpace.warnings", F(max_bytes)},
	[CONF_RECORDER_BYTES] = {"recorder-bytes", "N", T_SIZE, 1 << 20, (uint64_t)1 << 49, "256M", true,
		NULL, "the flight recorder's ring (StartContinuousProfiling, profctl record): record bytes "
		"kept while recording, the oldest evicted first (docs/recorder.md); part of max-bytes, "
		"at most half of it (the default shrinks to half of a smaller max-bytes)", F(recorder_bytes)},
	[CONF_SNAPSHOT_DIR] = {"snapshot-dir", "DIR", T_OPT, 0, 0, NULL, true, NULL,
		"where triggers (SIGUSR2 to profd, a traced job that dies or fails a CUDA call) write "
		"snapshots of the recorder, as a TensorBoard logdir "
		"with a reason.txt beside each; must exist; empty: triggers write nothing",
		F(snapshot_dir)},
	[CONF_SNAPSHOT_LAST] = {"snapshot-last", "DUR", T_DUR, 1, H24, "30s", true, NULL,
		"the newest DUR of the ring a triggered snapshot takes", F(snapshot_last_ms)},
	[CONF_SNAPSHOT_INTERVAL] = {"snapshot-interval", "DUR", T_DUR, 0, H24, "60s", true, NULL,
		"each trigger fires at most once per DUR; more are logged and skipped", F(snapshot_interval_ms)},
	[CONF_SNAPSHOT_MAX_COUNT] = {"snapshot-max-count", "N", T_U32, 1, 100000, "10", true, NULL,
		"triggered snapshots kept in snapshot-dir; the oldest are removed", F(snapshot_max_count)},
	[CONF_SNAPSHOT_MAX_BYTES] = {"snapshot-max-bytes", "N", T_SIZE, 1 << 20, (uint64_t)1 << 50, "1024M",
		true, NULL, "bytes the triggered snapshots in snapshot-dir take at most; the oldest are "
		"removed (the newest is always kept)", F(snapshot_max_bytes)},
	[CONF_SNAPSHOT_GPU_IDLE] = {"snapshot-gpu-idle", "DUR", T_DUR, 0, H24, "0", true, NULL,
		"also snapshot when a GPU has had 0 % utilization (NVML) for DUR while a traced job holds it; 0 = off", F(snapshot_gpu_idle_ms)},
	[CONF_SNAPSHOT_STEP_ABOVE] = {"snapshot-step-above", "DUR", T_DUR, 0, H24, "0", true, NULL,
		"also snapshot when a step (an NVTX range named by step-pattern) takes longer than DUR; 0 = off", F(snapshot_step_above_ms)},
	[CONF_SNAPSHOT_STEP_OUTLIER] = {"snapshot-step-outlier", "yes|no", T_BOOL, 0, 0, "no", true, NULL,
		"also snapshot when a step takes longer than the 99th percentile of its thread's last 128 steps (after 20)", F(snapshot_step_outlier)},
	[CONF_REPOSITORY_ALLOW] = {"repository-allow", "DIR", T_DIR, 0, 0, NULL, false, "Delivery",
		"also write captures whose repository_root lies under DIR on this machine (repeatable; "
		"must exist). Without it profd only returns data in the reply, which the client saves.",
		F(repository_allow)},
	[CONF_REPOSITORY_MAX_DEPTH] = {"repository-max-depth", "N", T_U32, 1, REPO_MAX_DEPTH_LIMIT,
		"32", false, NULL, "most directories a repository_root may go below an allowed DIR; deeper "
		"ones get the data in the reply only, the reason in XSpace.errors", F(repository_max_depth)},
	[CONF_ALLOW_FROM] = {"allow-from", "CIDR", T_CIDR, 0, 0, NULL, true,
		"Access (docs/security.md; without these anyone who reaches the port may capture, as with "
		"TensorFlow's own profiler server)",
		"accept calls only from these addresses (repeatable; 10.0.0.0/8, ::1/128, 192.0.2.7); "
		"others get PERMISSION_DENIED. An empty value on the command line is refused; a reload "
		"drops the list only for an explicit \"allow-from =\" line", F(allow_from)},
	[CONF_TLS_CERT] = {"tls-cert", "FILE", T_OPT, 0, 0, NULL, false, NULL,
		"serve TLS with this PEM certificate chain ...", F(tls_cert)},
	[CONF_TLS_KEY] = {"tls-key", "FILE", T_OPT, 0, 0, NULL, false, NULL,
		"... and this PEM private key", F(tls_key)},
	[CONF_TLS_CLIENT_CA] = {"tls-client-ca", "FILE", T_OPT, 0, 0, NULL, false, NULL,
		"require client certificates signed by these PEM CAs (mutual TLS)", F(tls_client_ca)},
	[CONF_TOKEN_FILE] = {"token-file", "FILE", T_OPT, 0, 0, NULL, false, NULL,
		"require \"authorization: Bearer <token>\" on every call; the token is the file's "
		"trimmed content", F(token_file)},
	[CONF_AGENT_SOCKET_MODE] = {"agent-socket-mode", "MODE", T_MODE, 0, 0777, "0666", false,
		"Agent socket access (docs/security.md; by default every local user may connect)",
		"octal permission bits of the socket; someone must be able to write", F(agent_socket_mode)},
	[CONF_AGENT_SOCKET_GROUP] = {"agent-socket-group", "GROUP", T_GROUP, 0, 0, NULL, false, NULL,
		"give the socket this group (name or gid); with agent-socket-mode 0660 only its members "
		"connect", F(agent_socket_group)},
	[CONF_AGENT_ALLOW_UID] = {"agent-allow-uid", "USER", T_USER, 0, 0, NULL, false, NULL,
		"accept agent connections only from this uid (name or number; repeatable; root is not "
		"implied)", F(agent_allow_uid)},
	[CONF_HOST_SAMPLE_HZ] = {"host-sample-hz", "N", T_U32, 1, 1000, "10", true, "Collectors",
		"host counter rate during captures (1 Hz while only the flight recorder runs)",
		F(host_sample_hz)},
	[CONF_NVML_SAMPLE_HZ] = {"nvml-sample-hz", "N", T_U32, 1, 1000, "50", false, NULL,
		"GPU counter rate during captures (1 Hz while only the flight recorder runs)",
		F(nvml_sample_hz)},
	[CONF_AGENT_SOCKET] = {"agent-socket", "PATH", T_OPT, 0, 0, PROFD_AGENT_SOCKET_DEFAULT, false,
		NULL, "Unix socket for in-job agents ($PROFD_AGENT_SOCKET moves the default; empty: "
		"none, no GPU data from agents); jobs need PROFD_AGENT_SOCKET=PATH when it is not the "
		"default. Its directory must be owned by root or profd's user and not writable by "
		"group or others, or sticky: else profd does not start", F(agent_socket)},
	[CONF_FLUSH_TIMEOUT] = {"flush-timeout", "DUR", T_DUR, 0, 60000, "500ms", true, NULL,
		"how long a closing capture waits for collectors (and in-job agents) to deliver",
		F(flush_timeout_ms)},
	[CONF_STEP_PATTERN] = {"step-pattern", "NAMES", T_STEPS, 0, 0, AGENT_NVTX_STEP_PATTERNS, true,
		NULL, "NVTX range names that mark a training step, comma-"
		"separated (up to 32 names of [A-Za-z0-9_.-], 1-63 characters each), each matched at the "
		"start of a range's name or its last part, any case (docs/agent.md, Steps)", F(step_pattern)},
	[CONF_PM_SAMPLE] = {"pm-sample", "METRICS", T_PM, 0, 0, NULL, true, NULL,
		"sample these GPU hardware counters (CUPTI PM sampling) in captures that do not set "
		"gpu_pm_sample_counters: up to 16 comma-separated metric names of [A-Za-z0-9_.], or "
		"\"default\" for the agent's default set; empty: off (docs/options.md)", F(pm_sample)},
	[CONF_PM_SAMPLE_INTERVAL] = {"pm-sample-interval", "DUR", T_USEC, CAPTURE_PM_INTERVAL_MIN_US,
		CAPTURE_PM_INTERVAL_MAX_US, "500us", true, NULL,
		"PM sampling interval (500us, 1ms; a bare number is microseconds); a request's "
		"gpu_pm_sample_interval_us overrides it", F(pm_sample_interval_us)},
	[CONF_PM_SAMPLE_BUFFER] = {"pm-sample-buffer", "MB", T_U32, CAPTURE_PM_BUFFER_MIN_MB,
		CAPTURE_PM_BUFFER_MAX_MB, "64", true, NULL,
		"PM sampling hardware buffer per GPU in MiB; a request's "
		"gpu_pm_sample_buffer_size_per_gpu_mb overrides it", F(pm_sample_buffer_mb)},
	[CONF_HOSTNAME] = {"hostname", "NAME", T_HOST, 0, 0, NULL, false, "Other",
		"name written to XSpace.hostnames and to the file names of captures that name no host: "
		"1-64 bytes of printable UTF-8, no '/', not starting with '.' (empty: gethostname)",
		F(hostname)},
	[CONF_PROC_ROOT] = {"proc-root", "DIR", T_PATH, 0, 0, "/proc", false, NULL,
		"read /proc from DIR (testing)", F(proc_root)},
	[CONF_SYS_ROOT] = {"sys-root", "DIR", T_PATH, 0, 0, "/sys", false, NULL,
		"read /sys from DIR (testing)", F(sys_root)},
	[CONF_NVML_LIBRARY] = {"nvml-library", "PATH", T_OPT, 0, 0, NULL, false, NULL,
		"load NVML from PATH (testing; empty: libnvidia-ml.so.1)", F(nvml_library)},
	[CONF_LOG_LEVEL] = {"log-level", "LEVEL", T_LEVEL, 0, 0, "info", true, NULL,
		"err, warn, notice, info or debug", F(log_level)},
	[CONF_IDLE_TRIM] = {"idle-trim", "yes|no", T_BOOL, 0, 0, "yes", true, NULL,
		"when idle (4 s after the last reply, once after start-up, and after each answered "
		"self-check: its connection runs gRPC code), also unmap the clean "
		"code and read-only data pages of profd and its libraries: they stay in the page cache "
		"and what runs again is faulted back, so an idle profd holds less RSS and PSS "
		"(docs/architecture.md, Idle footprint)", F(idle_trim)},
};

_Static_assert(CONF_N_KEYS <= 64, "struct profd_conf.set has one bit per key");

size_t conf_n_keys(void) { return CONF_N_KEYS; }
const char *conf_key_name(size_t key) { return conf_rows[key].name; }
bool conf_key_reloadable(size_t key) { return conf_rows[key].reload; }
int conf_key_short(size_t key) { return key == CONF_LISTEN ? 'l' : 0; }

static void *field(struct profd_conf *c, size_t key) { return (char *)c + conf_rows[key].off; }
const void *conf_cfield(const struct profd_conf *c, size_t key) { return (const char *)c + conf_rows[key].off; }

bool conf_type_is_list(enum conf_type t) { return t >= T_LISTEN; }

static void list_clear(struct conf_list *l)
{
	for (uint32_t i = 0; i < l->n; i++)
		free(l->v[i]);
	l->n = 0;
}

static const char *const level_names[] = {
	[LOG_LEVEL_ERR] = "err", [LOG_LEVEL_WARN] = "warn", [LOG_LEVEL_NOTICE] = "notice",
	[LOG_LEVEL_INFO] = "info", [LOG_LEVEL_DEBUG] = "debug",
};

static bool all_digits(const char *v)
{
	if (!*v)
		return false;
	for (; *v; v++)
		if (*v < '0' || *v > '9')
			return false;
	return true;
}

/* Names are looked up when the value is read: a missing group or user is an
 * error then, not a socket left wider open than asked. A number is taken as
 * is (ids without a name exist, e.g. in containers). */
int conf_resolve_group(const char *v, gid_t *ret)
{
	struct group *g;
	uint32_t n;

	if (all_digits(v) && safe_atou32(v, &n) == 0 && n != (uint32_t)-1) {
		*ret = (gid_t)n;
		return 0;
	}
	g = *v ? getgrnam(v) : NULL;
	if (!g)
		return -ENOENT;
	*ret = g->gr_gid;
	return 0;
}

int conf_resolve_user(const char *v, uid_t *ret)
{
	struct passwd *pw;
	uint32_t n;

	if (all_digits(v) && safe_atou32(v, &n) == 0 && n != (uint32_t)-1) {
		*ret = (uid_t)n;
		return 0;
	}
	pw = *v ? getpwnam(v) : NULL;
	if (!pw)
		return -ENOENT;
	*ret = pw->pw_uid;
	return 0;
}

static int parse_bool(const char *v, bool *ret)
{
	static const char *const yes[] = {"yes", "true", "on", "1"}, *const no[] = {"no", "false", "off", "0"};

	for (size_t i = 0; i < ARRAY_SIZE(yes); i++) {
		if (strcasecmp(v, yes[i]) == 0 || strcasecmp(v, no[i]) == 0) {
			*ret = strcasecmp(v, yes[i]) == 0;
			return 0;
		}
	}
	return -EINVAL;
}

/* "65536", "64K", "1M" (powers of 1024). */
static int parse_size(const char *s, uint64_t *ret)
{
	static const struct parse_unit units[] = {
		{"", 1}, {"K", 1024}, {"k", 1024}, {"M", 1u << 20}, {"m", 1u << 20},
	};

	return parse_with_units(s, units, ARRAY_SIZE(units), ret);
}

/* Octal, at most 0777: setuid/setgid/sticky mean nothing on a socket. A mode
 * nobody may write to would let only root connect: surely a typo. */
static int parse_mode(const char *v, uint32_t *ret)
{
	unsigned long m = 0;

	if (!*v || strlen(v) > 4)
		return -EINVAL;
	for (const char *p = v; *p; p++) {
		if (*p < '0' || *p > '7')
			return -EINVAL;
		m = m * 8 + (unsigned long)(*p - '0');
	}
	if (m > 0777 || (m & 0222) == 0)
		return -EINVAL;
	*ret = (uint32_t)m;
	return 0;
}

static const char *fmt_dur(uint64_t ms, char *buf, size_t size)
{
	if (ms == 0)
		snprintf(buf, size, "0");
	else if (ms % H1 == 0)
		snprintf(buf, size, "%" PRIu64 "h", ms / H1);
	else if (ms % 60000 == 0)
		snprintf(buf, size, "%" PRIu64 "m", ms / 60000);
	else if (ms % 1000 == 0)
		snprintf(buf, size, "%" PRIu64 "s", ms / 1000);
	else
		snprintf(buf, size, "%" PRIu64 "ms", ms);
	return buf;
}

static const char *fmt_size(uint64_t v, char *buf, size_t size)
{
	if (v && v % (1 << 20) == 0)
		snprintf(buf, size, "%" PRIu64 "M", v >> 20);
	else if (v && v % 1024 == 0)
		snprintf(buf, size, "%" PRIu64 "K", v >> 10);
	else
		snprintf(buf, size, "%" PRIu64, v);
	return buf;
}

static const char *fmt_usec(uint64_t us, char *buf, size_t size)
{
	if (us && us % 1000000 == 0)
		snprintf(buf, size, "%" PRIu64 "s", us / 1000000);
	else if (us && us % 1000 == 0)
		snprintf(buf, size, "%" PRIu64 "ms", us / 1000);
	else
		snprintf(buf, size, "%" PRIu64 "us", us);
	return buf;
}

/* What a row accepts, for errors and --help. */
const char *conf_row_bounds(const struct conf_row *r, char *buf, size_t size)
{
	char a[32], b[32];

	switch (r->type) {
	case T_U32:
	case T_U64:
		if (r->max == UINT64_MAX)
			snprintf(buf, size, "%" PRIu64 " or more", r->min);
		else
			snprintf(buf, size, "%" PRIu64 "-%" PRIu64, r->min, r->max);
		break;
	case T_DUR:
		if (r->min == 0)
			snprintf(buf, size, "a duration from 0 to %s", fmt_dur(r->max, a, sizeof(a)));
		else
			snprintf(buf, size, "a duration from %s to %s", fmt_dur(r->min, a, sizeof(a)),
				 fmt_dur(r->max, b, sizeof(b)));
		break;
	case T_USEC:
		snprintf(buf, size, "a duration from %s to %s", fmt_usec(r->min, a, sizeof(a)),
			 fmt_usec(r->max, b, sizeof(b)));
		break;
	case T_PM:
		snprintf(buf, size, "\"default\" or up to %u comma-separated metric names of "
			 "[A-Za-z0-9_.], %u bytes in all", AGENT_PM_MAX_METRICS, AGENT_PM_METRICS_MAX - 1);
		break;
	case T_SIZE:
		snprintf(buf, size, "a size from %s to %s", fmt_size(r->min, a, sizeof(a)),
			 fmt_size(r->max, b, sizeof(b)));
		break;
	case T_PATH: snprintf(buf, size, "a non-empty path"); break;
	case T_LEVEL: snprintf(buf, size, "err, warn, notice, info or debug"); break;
	case T_BOOL: snprintf(buf, size, "yes or no"); break;
	case T_MODE:
		snprintf(buf, size, "octal permission bits up to 0777 that let someone write (0666, 0660, 0600)");
		break;
	case T_LISTEN: snprintf(buf, size, "HOST:PORT or [IPV6]:PORT"); break;
	case T_CIDR: snprintf(buf, size, "an address or ADDRESS/PREFIX with the host bits 0"); break;
	case T_DIR: snprintf(buf, size, "an existing directory"); break;
	case T_GROUP: snprintf(buf, size, "a group of this machine (name or gid)"); break;
	case T_USER: snprintf(buf, size, "a user of this machine (name or uid)"); break;
	case T_OPT: snprintf(buf, size, "any text"); break;
	case T_HOST:
		snprintf(buf, size, "1-%d bytes of printable UTF-8 without '/', not starting with '.'",
			 HOST_NAME_MAX);
		break;
	case T_STEPS: snprintf(buf, size, "up to 32 comma-separated names of [A-Za-z0-9_.-], 1-63 characters each"); break;
	}
	return buf;
}

/*
 * The host name goes into XSpace.hostnames (a proto3 string: invalid UTF-8
 * breaks Python clients' Status), into the file name of every capture that
 * names no host (where service.c refuses what repo_name_ok() refuses: then
 * every such capture would fail), and into a HOST_NAME_MAX buffer.
 */
bool conf_host_ok(const char *v)
{
	return strlen(v) <= HOST_NAME_MAX && repo_name_ok(v);
}

static int set_str(char **dst, const char *v)
{
	char *s = NULL;

	if (*v && !(s = strdup(v)))
		return -ENOMEM;
	free(*dst);
	*dst = s;
	return 0;
}

/* The check each list type makes of one value. */
static int check_item(const struct conf_row *r, const char *v)
{
	char host[256];
	uint16_t port;
	gid_t g;
	uid_t u;

	switch (r->type) {
	case T_LISTEN: return parse_host_port(v, host, sizeof(host), &port);
	case T_DIR: {
		struct repo_allow a = {0};
		int e = repo_allow_add(&a, v);

		repo_allow_free(&a);
		return e;
	}
	case T_USER: return conf_resolve_user(v, &u);
	case T_GROUP: return conf_resolve_group(v, &g);
	default: return 0;
	}
}

int conf_set(struct profd_conf *c, size_t key, const char *v, char *why, size_t why_size)
{
	const struct conf_row *r = &conf_rows[key];
	void *p = field(c, key);
	uint64_t u64 = 0;
	uint32_t u32 = 0;
	int e = 0;

	switch (r->type) {
	case T_U32:
		e = safe_atou32(v, &u32) < 0 || u32 < r->min || u32 > r->max ? -EINVAL : 0;
		if (!e)
			*(uint32_t *)p = u32;
		break;
	case T_U64:
		e = safe_atou64(v, &u64) < 0 || u64 < r->min || u64 > r->max ? -EINVAL : 0;
		if (!e)
			*(uint64_t *)p = u64;
		break;
	case T_DUR:
		e = parse_duration_ms(v, &u64) < 0 || u64 < r->min || u64 > r->max ? -EINVAL : 0;
		if (!e)
			*(uint64_t *)p = u64;
		break;
	case T_SIZE:
		e = parse_size(v, &u64) < 0 || u64 < r->min || u64 > r->max ? -EINVAL : 0;
		if (!e)
			*(uint64_t *)p = u64;
		break;
	case T_USEC:
		e = parse_duration_us(v, &u64) < 0 || u64 < r->min || u64 > r->max ? -EINVAL : 0;
		if (!e)
			*(uint64_t *)p = u64;
		break;
	case T_PM: {
		struct agent_opts o = {0};

		if (capture_opts_set_pm_metrics(&o, v, why, why_size) < 0)
			return -EINVAL;
		e = set_str((char **)p, v);
		break;
	}
	case T_LEVEL: e = log_parse_level(v, (int *)p) < 0 ? -EINVAL : 0; break;
	case T_BOOL: e = parse_bool(v, (bool *)p); break;
	case T_MODE: e = parse_mode(v, (uint32_t *)p); break;
	case T_PATH:
		e = *v ? set_str((char **)p, v) : -EINVAL;
		break;
	case T_GROUP:
		if (*v && check_item(r, v) < 0) {
			snprintf(why, why_size, "no group \"%s\" on this machine", v);
			return -EINVAL;
		}
		e = set_str((char **)p, v);
		break;
	case T_OPT: e = set_str((char **)p, v); break;
	case T_HOST: e = !*v || conf_host_ok(v) ? set_str((char **)p, v) : -EINVAL; break;
	case T_STEPS:
		e = agent_nvtx_check_step_patterns(v) < 0 ? -EINVAL : set_str((char **)p, v);
		break;
	case T_LISTEN: case T_CIDR: case T_DIR: case T_USER: {
		struct conf_list *l = p;

		/* The first value given replaces the default list. */
		if (!(c->set & (UINT64_C(1) << key)) || !*v)
			list_clear(l);
		if (!*v)
			break;
		if (l->n >= CONF_MAX_LIST) {
			snprintf(why, why_size, "too many values (at most %d)", CONF_MAX_LIST);
			return -E2BIG;
		}
		if (r->type == T_CIDR && rpc_allow_from_check(v, why, why_size) < 0)
			return -EINVAL;
		e = check_item(r, v);
		if (e < 0 && r->type == T_USER) {
			snprintf(why, why_size, "no user \"%s\" on this machine", v);
			return -EINVAL;
		}
		if (e < 0 && r->type == T_DIR) {
			snprintf(why, why_size, "%s", strerror(-e));
			return -EINVAL;
		}
		if (e < 0)
			break;
		if (!(l->v[l->n] = strdup(v)))
			return -ENOMEM;
		l->n++;
		break;
	}
	}
	if (e == -ENOMEM)
		return e;
	if (e < 0) {
		char b[128];

		snprintf(why, why_size, "expected %s", conf_row_bounds(r, b, sizeof(b)));
		return -EINVAL;
	}
	c->set |= UINT64_C(1) << key;
	return 0;
}

int conf_init(struct profd_conf *c)
{
	char why[256];
	const char *env = getenv("PROFD_AGENT_SOCKET");

	memset(c, 0, sizeof(*c));
	for (size_t k = 0; k < CONF_N_KEYS; k++) {
		if (!conf_rows[k].def)
			continue;
		if (conf_set(c, k, conf_rows[k].def, why, sizeof(why)) < 0) {
			/* A table bug (or out of memory); the tests start profd. */
			log_error("default of %s: %s", conf_rows[k].name, why);
			conf_free(c);
			return -ENOMEM;
		}
	}
	/* The agents' own override works for the daemon too; an explicit
	 * agent-socket (flag or file) wins. */
	if (env && *env && set_str(&c->agent_socket, env) < 0) {
		conf_free(c);
		return -ENOMEM;
	}
	c->set = 0;
	return 0;
}

void conf_free(struct profd_conf *c)
{
	for (size_t k = 0; k < CONF_N_KEYS; k++) {
		enum conf_type t = conf_rows[k].type;

		if (conf_type_is_list(t))
			list_clear(field(c, k));
		else if (t == T_PATH || t == T_OPT || t == T_HOST || t == T_GROUP || t == T_STEPS || t == T_PM) {
			free(*(char **)field(c, k));
			*(char **)field(c, k) = NULL;
		}
	}
}

static size_t value_size(enum conf_type t)
{
	switch (t) {
	case T_U32: case T_MODE: return sizeof(uint32_t);
	case T_U64: case T_DUR: case T_SIZE: case T_USEC: return sizeof(uint64_t);
	case T_LEVEL: return sizeof(int);
	case T_BOOL: return sizeof(bool);
	default: return 0;
	}
}

bool conf_key_equal(const struct profd_conf *a, const struct profd_conf *b, size_t key)
{
	enum conf_type t = conf_rows[key].type;

	if (conf_type_is_list(t)) {
		const struct conf_list *x = conf_cfield(a, key), *y = conf_cfield(b, key);

		if (x->n != y->n)
			return false;
		for (uint32_t i = 0; i < x->n; i++)
			if (strcmp(x->v[i], y->v[i]) != 0)
				return false;
		return true;
	}
	if (value_size(t))
		return memcmp(conf_cfield(a, key), conf_cfield(b, key), value_size(t)) == 0;
	{
		const char *x = *(char *const *)conf_cfield(a, key), *y = *(char *const *)conf_cfield(b, key);

		return x == y || (x && y && strcmp(x, y) == 0);
	}
}

int conf_copy_key(struct profd_conf *dst, const struct profd_conf *src, size_t key)
{
	enum conf_type t = conf_rows[key].type;

	if (conf_type_is_list(t)) {
		struct conf_list *d = field(dst, key);
		const struct conf_list *s = conf_cfield(src, key);

		list_clear(d);
		for (uint32_t i = 0; i < s->n; i++) {
			if (!(d->v[i] = strdup(s->v[i])))
				return -ENOMEM;
			d->n++;
		}
	} else if (value_size(t)) {
		memcpy(field(dst, key), conf_cfield(src, key), value_size(t));
	} else {
		const char *s = *(char *const *)conf_cfield(src, key);
		int e = set_str(field(dst, key), s ? s : "");

		if (e < 0)
			return e;
	}
	dst->set |= src->set & (UINT64_C(1) << key);
	return 0;
}

int conf_overlay(struct profd_conf *dst, const struct profd_conf *src)
{
	for (size_t k = 0; k < CONF_N_KEYS; k++) {
		int e;

		if ((src->set & (UINT64_C(1) << k)) && (e = conf_copy_key(dst, src, k)) < 0)
			return e;
	}
	return 0;
}

const char *conf_format(const struct profd_conf *c, size_t key, char *buf, size_t size)
{
	const void *p = conf_cfield(c, key);
	size_t used = 0;

	buf[0] = 0;
	switch (conf_rows[key].type) {
	case T_U32: snprintf(buf, size, "%" PRIu32, *(const uint32_t *)p); break;
	case T_U64: snprintf(buf, size, "%" PRIu64, *(const uint64_t *)p); break;
	case T_DUR: fmt_dur(*(const uint64_t *)p, buf, size); break;
	case T_SIZE: fmt_size(*(const uint64_t *)p, buf, size); break;
	case T_USEC: fmt_usec(*(const uint64_t *)p, buf, size); break;
	case T_MODE: snprintf(buf, size, "%04" PRIo32, *(const uint32_t *)p); break;
	case T_BOOL: snprintf(buf, size, "%s", *(const bool *)p ? "yes" : "no"); break;
	case T_LEVEL: {
		int l = *(const int *)p;

		snprintf(buf, size, "%s", l >= LOG_LEVEL_ERR && l <= LOG_LEVEL_DEBUG ? level_names[l] : "info");
		break;
	}
	case T_PATH: case T_OPT: case T_HOST: case T_GROUP: case T_STEPS: case T_PM: {
		const char *s = *(char *const *)p;

		snprintf(buf, size, "%s", s ? s : "");
		break;
	}
	case T_LISTEN: case T_CIDR: case T_DIR: case T_USER: {
		const struct conf_list *l = p;

		for (uint32_t i = 0; i < l->n && used + 1 < size; i++) {
			int n = snprintf(buf + used, size - used, "%s%s", i ? ", " : "", l->v[i]);

			if (n < 0)
				break;
			used += (size_t)n;
		}
		break;
	}
	}
	return buf;
}

/* The longest part of the @n bytes at @p that ends with ',' and is at most
 * @room long; 0 if none. */
