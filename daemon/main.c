/* SPDX-License-Identifier: MIT */
/*
 * main.c - profd: command line, start-up, signals, shutdown.
 *
 * Start-up order matters: gRPC starts threads in grpc_init(), so nothing
 * forks after rpc_global_init(). Shutdown (SIGTERM/SIGINT): open captures
 * are answered UNAVAILABLE, the server stops accepting and gives calls a
 * grace period, collectors close, and the loop must end with no handle
 * left (uv_loop_close() == 0); the exit code is 0.
 */
#define LOG_TOPIC "profd"

#include <getopt.h>
#include <grp.h>
#include <inttypes.h>
#include <netdb.h>
#include <pwd.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/log.h"
#include "base/parse.h"
#include "collectors/agent-nvtx.h"
#include "config.h"
#include "delivery.h"
#include "monitor.h"
#include "rpc.h"
#include "selfcheck.h"
#include "service.h"
#include "session.h"

#define MAX_LISTEN 16

static const char *arg_listen[MAX_LISTEN];
static size_t arg_n_listen;
static uint64_t arg_max_duration_ms = 10 * 60 * 1000;
static uint32_t arg_max_sessions = 16;
static uint64_t arg_max_events = 20000000;
static uint32_t arg_host_sample_hz = 10;
static uint32_t arg_nvml_sample_hz = 50;
static uint64_t arg_flush_timeout_ms = 500;
static const char *arg_agent_socket = PROFD_AGENT_SOCKET_DEFAULT;
static const char *arg_proc_root = "/proc";
static const char *arg_sys_root = "/sys";
static const char *arg_hostname;
static const char *arg_nvml_library;
static struct repo_allow arg_allow;
static struct rpc_limits arg_limits = RPC_LIMITS_DEFAULT;
static uint64_t arg_self_check_ms = 30 * 1000;

#define SELF_CHECK_FAILURES 3

/* ---- access options (rpc_server_auth; docs/security.md) -------------------
 * Kept in one block: parsed here, checked and loaded by rpc_server_set_auth().
 */
#define MAX_ALLOW_FROM 64

enum {
	OPT_ALLOW_FROM = 512, OPT_TLS_CERT, OPT_TLS_KEY, OPT_TLS_CLIENT_CA, OPT_TOKEN_FILE,
	OPT_AGENT_SOCKET_MODE, OPT_AGENT_SOCKET_GROUP, OPT_AGENT_ALLOW_UID,
};

#define ACCESS_LONG_OPTIONS                                                     \
	{"allow-from", required_argument, NULL, OPT_ALLOW_FROM},                \
	{"tls-cert", required_argument, NULL, OPT_TLS_CERT},                    \
	{"tls-key", required_argument, NULL, OPT_TLS_KEY},                      \
	{"tls-client-ca", required_argument, NULL, OPT_TLS_CLIENT_CA},          \
	{"token-file", required_argument, NULL, OPT_TOKEN_FILE},                \
	{"agent-socket-mode", required_argument, NULL, OPT_AGENT_SOCKET_MODE},  \
	{"agent-socket-group", required_argument, NULL, OPT_AGENT_SOCKET_GROUP}, \
	{"agent-allow-uid", required_argument, NULL, OPT_AGENT_ALLOW_UID}

#define ACCESS_HELP                                                                           \
	"Access (docs/security.md; without these options anyone who reaches the port may\n"   \
	"capture, as with TensorFlow's own profiler server):\n"                               \
	"      --allow-from CIDR      accept calls only from these addresses (repeatable;\n"  \
	"                             10.0.0.0/8, ::1/128, 192.0.2.7); others get\n"         \
	"                             PERMISSION_DENIED\n"                                    \
	"      --tls-cert FILE        serve TLS with this PEM certificate chain ...\n"        \
	"      --tls-key FILE         ... and this PEM private key\n"                         \
	"      --tls-client-ca FILE   require client certificates signed by these PEM CAs\n"  \
	"                             (mutual TLS)\n"                                         \
	"      --token-file FILE      require \"authorization: Bearer <token>\" on every\n"   \
	"                             call; the token is the file's trimmed content\n"       \
	"\n"

#define AGENT_ACCESS_HELP                                                                     \
	"Agent socket access (docs/security.md; by default every local user may connect):\n"   \
	"      --agent-socket-mode MODE  octal permission bits of the socket (default 0666)\n"  \
	"      --agent-socket-group GROUP  give the socket this group (name or gid); with\n"   \
	"                             --agent-socket-mode 0660 only its members connect\n"    \
	"      --agent-allow-uid USER accept agent connections only from this uid (name or\n"  \
	"                             number; repeatable; root is not implied)\n"             \
	"\n"

#define MAX_AGENT_ALLOW_UID 64

/* ---- steps from NVTX ranges (collectors/agent-nvtx.h; docs/agent.md, Steps) --
 * Kept in one block: --step-pattern is parsed here and handed to the agent
 * mapping once, at start-up.
 */
enum { OPT_STEP_PATTERN = 600 };

#define STEP_LONG_OPTIONS {"step-pattern", required_argument, NULL, OPT_STEP_PATTERN}

#define STEP_HELP                                                                              \
	"Steps (docs/agent.md, Steps):\n"                                                      \
	"      --step-pattern NAMES   NVTX range names that mark a training step, comma-\n"  \
	"                             separated (up to 32 names of [A-Za-z0-9_.-], each\n"   \
	"                             matched at the start of a range's name or its last\n"  \
	"                             part, any case). Default:\n"                            \
	"                             " AGENT_NVTX_STEP_PATTERNS_1 "\n"                      \
	"                             " AGENT_NVTX_STEP_PATTERNS_2 "\n"                      \
	"\n"

static const char *arg_step_pattern;

/* 1: taken, 0: not a step option, -EINVAL: bad value (said on stderr). */
static int parse_step_option(int c, const char *v)
{
	unsigned names = 1;
	size_t len = 0;

	if (c != OPT_STEP_PATTERN)
		return 0;
	for (const char *p = v; *p; p++) {
		if (*p == ',') {
			if (!len)
				break;
			names++;
			len = 0;
		} else if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
			   strchr("_.-", *p)) {
			len++;
			if (len > 63)
				break;
		} else {
			len = 0;
			break;
		}
	}
	if (!len || names > 32) {
		fprintf(stderr, "profd: invalid value \"%s\" for --step-pattern: expected up to 32 comma-"
			"separated names of [A-Za-z0-9_.-], 1-63 characters each\n", v);
		return -EINVAL;
	}
	arg_step_pattern = v;
	return 1;
}

static uint32_t arg_agent_socket_mode; /* 0: the receiver's default, 0666 */
static bool arg_agent_socket_chgrp;
static gid_t arg_agent_socket_gid;
static uid_t arg_agent_allow_uid[MAX_AGENT_ALLOW_UID];
static size_t arg_n_agent_allow_uid;

static bool all_digits(const char *v)
{
	if (!*v)
		return false;
	for (; *v; v++)
		if (*v < '0' || *v > '9')
			return false;
	return true;
}

/* Octal, at most 0777: setuid/setgid/sticky mean nothing on a socket. A mode
 * nobody may write to would let only root connect: surely a typo. */
static int parse_socket_mode(const char *v, uint32_t *ret)
{
	unsigned long m = 0;

	if (!*v || strlen(v) > 4)
		goto bad;
	for (const char *p = v; *p; p++) {
		if (*p < '0' || *p > '7')
			goto bad;
		m = m * 8 + (unsigned long)(*p - '0');
	}
	if (m > 0777 || (m & 0222) == 0)
		goto bad;
	*ret = (uint32_t)m;
	return 0;
bad:
	fprintf(stderr, "profd: invalid value \"%s\" for --agent-socket-mode: expected octal permission "
		"bits up to 0777 that let someone write (0666, 0660, 0600)\n", v);
	return -EINVAL;
}

/* Names are looked up once, at start-up: a missing group or user is an error
 * then, not a socket left wider open than asked. A number is taken as is
 * (ids without a name exist, e.g. in containers). */
static int parse_group(const char *v, gid_t *ret)
{
	struct group *g;
	uint32_t n;

	if (all_digits(v) && safe_atou32(v, &n) == 0 && n != (uint32_t)-1) {
		*ret = (gid_t)n;
		return 0;
	}
	errno = 0;
	g = *v ? getgrnam(v) : NULL;
	if (!g) {
		fprintf(stderr, "profd: --agent-socket-group: no group \"%s\" on this machine%s%s\n", v,
			errno ? ": " : "", errno ? strerror(errno) : "");
		return -EINVAL;
	}
	*ret = g->gr_gid;
	return 0;
}

static int parse_user(const char *v, uid_t *ret)
{
	struct passwd *pw;
	uint32_t n;

	if (all_digits(v) && safe_atou32(v, &n) == 0 && n != (uint32_t)-1) {
		*ret = (uid_t)n;
		return 0;
	}
	errno = 0;
	pw = *v ? getpwnam(v) : NULL;
	if (!pw) {
		fprintf(stderr, "profd: --agent-allow-uid: no user \"%s\" on this machine%s%s\n", v,
			errno ? ": " : "", errno ? strerror(errno) : "");
		return -EINVAL;
	}
	*ret = pw->pw_uid;
	return 0;
}

static const char *arg_allow_from[MAX_ALLOW_FROM];
static struct rpc_server_auth arg_auth = {.allow_from = arg_allow_from};

/* 1: an access option, taken; 0: not one of ours; -EINVAL: bad value. */
static int parse_access_option(int c, const char *v)
{
	switch (c) {
	case OPT_ALLOW_FROM:
		if (arg_auth.n_allow_from >= MAX_ALLOW_FROM) {
			fprintf(stderr, "profd: too many --allow-from ranges (at most %d)\n", MAX_ALLOW_FROM);
			return -EINVAL;
		}
		arg_allow_from[arg_auth.n_allow_from++] = v;
		return 1;
	case OPT_TLS_CERT: arg_auth.tls_cert = v; return 1;
	case OPT_TLS_KEY: arg_auth.tls_key = v; return 1;
	case OPT_TLS_CLIENT_CA: arg_auth.tls_client_ca = v; return 1;
	case OPT_TOKEN_FILE: arg_auth.token_file = v; return 1;
	case OPT_AGENT_SOCKET_MODE: return parse_socket_mode(v, &arg_agent_socket_mode) < 0 ? -EINVAL : 1;
	case OPT_AGENT_SOCKET_GROUP:
		arg_agent_socket_chgrp = true;
		return parse_group(v, &arg_agent_socket_gid) < 0 ? -EINVAL : 1;
	case OPT_AGENT_ALLOW_UID:
		if (arg_n_agent_allow_uid >= MAX_AGENT_ALLOW_UID) {
			fprintf(stderr, "profd: too many --agent-allow-uid users (at most %d)\n",
				MAX_AGENT_ALLOW_UID);
			return -EINVAL;
		}
		return parse_user(v, &arg_agent_allow_uid[arg_n_agent_allow_uid++]) < 0 ? -EINVAL : 1;
	default: return 0;
	}
}
/* ---- end of access options ----------------------------------------------- */

static void help(void)
{
	printf("Usage: profd [OPTIONS]\n"
	       "\n"
	       "Serve TensorFlow's ProfilerService on this machine so that TensorBoard/XProf's\n"
	       "Capture Profile dialog, tf.profiler.experimental.client.trace() and profctl can\n"
	       "capture GPU and host activity of every job here, with no profiler in the job.\n"
	       "\n"
	       "Listening:\n"
	       "  -l, --listen HOST:PORT     address to serve on; repeatable (default [::]:6009,\n"
	       "                             which takes IPv6 and IPv4). Port 0 picks a free port;\n"
	       "                             the log says which. A port in use is an error.\n"
	       "\n"
	       "Connections (see docs/protocol.md, Connections):\n"
	       "      --max-streams N        calls open at once per connection (default 100)\n"
	       "      --max-request-size N   largest request message in bytes, or NK / NM\n"
	       "                             (default 64K); larger: RESOURCE_EXHAUSTED\n"
	       "      --first-message-timeout DUR  cancel a call whose request has not arrived,\n"
	       "                             and drop a connection with no HTTP/2 handshake,\n"
	       "                             after DUR (default 10s; 0 = off)\n"
	       "      --idle-timeout DUR     close connections without calls after DUR\n"
	       "                             (default 5m; 0 = off)\n"
	       "      --keepalive DUR        ping connections that have calls every DUR\n"
	       "                             (default 60s; 0 = off)\n"
	       "      --keepalive-timeout DUR  drop them if a ping is unanswered (default 20s)\n"
	       "      --self-check DUR       connect to our own port every DUR and exit non-zero\n"
	       "                             after 3 unanswered rounds in a row (default 30s;\n"
	       "                             0 = off)\n"
	       "\n"
	       "Limits (every value a client sends is bounded):\n"
	       "      --max-duration DUR     longest capture and longest start delay (default 10m;\n"
	       "                             DUR is N, Nms, Ns, Nm or Nh)\n"
	       "      --max-sessions N       captures open at once; more get RESOURCE_EXHAUSTED\n"
	       "                             (default 16)\n"
	       "      --max-events N         events held for open captures; the rest are dropped\n"
	       "                             and counted in XSpace.warnings (default 20000000)\n"
	       "\n"
	       "Delivery:\n"
	       "      --repository-allow DIR also write captures whose repository_root lies under\n"
	       "                             DIR on this machine (repeatable). Without it profd\n"
	       "                             only returns data in the reply, which the client saves.\n"
	       "      --repository-max-depth N  most directories a repository_root may go below\n"
	       "                             an allowed DIR (default %u, 1-%u); deeper ones get the\n"
	       "                             data in the reply only, the reason in XSpace.errors\n"
	       "\n",
	       REPO_MAX_DEPTH_DEFAULT, REPO_MAX_DEPTH_LIMIT);
	/* In parts: ISO C compilers need take no string literal over 4095 bytes. */
	printf(ACCESS_HELP AGENT_ACCESS_HELP STEP_HELP);
	printf("Collectors:\n"
	       "      --host-sample-hz N     host counter rate during captures (default 10, 1-1000)\n"
	       "      --nvml-sample-hz N     GPU counter rate during captures (default 50, 1-1000)\n"
	       "      --agent-socket PATH    Unix socket for in-job agents (default\n"
	       "                             $PROFD_AGENT_SOCKET, else %s)\n"
	       "      --flush-timeout DUR    how long a closing capture waits for collectors\n"
	       "                             (default 500ms)\n"
	       "\n"
	       "Other:\n"
	       "      --hostname NAME        name written to XSpace.hostnames (default: gethostname)\n"
	       "      --proc-root DIR        read /proc from DIR (testing)\n"
	       "      --sys-root DIR         read /sys from DIR (testing)\n"
	       "      --nvml-library PATH    load NVML from PATH (testing)\n"
	       "      --log-level LEVEL      err, warn, notice, info (default) or debug\n"
	       "  -h, --help                 this text\n"
	       "      --version              print the version\n"
	       "\n"
	       "Logs go to stderr, with journald priorities when run by systemd.\n"
	       "Documentation: docs/ in the source tree; profctl(1) is the matching client.\n",
	       PROFD_AGENT_SOCKET_DEFAULT);
}

enum {
	OPT_MAX_DURATION = 256, OPT_MAX_SESSIONS, OPT_MAX_EVENTS, OPT_REPO_ALLOW, OPT_REPO_DEPTH, OPT_HOST_HZ,
	OPT_NVML_HZ, OPT_AGENT_SOCKET, OPT_FLUSH_TIMEOUT, OPT_HOSTNAME, OPT_PROC_ROOT,
	OPT_SYS_ROOT, OPT_NVML_LIBRARY, OPT_LOG_LEVEL, OPT_VERSION, OPT_MAX_STREAMS,
	OPT_MAX_REQUEST_SIZE, OPT_FIRST_MESSAGE_TIMEOUT, OPT_IDLE_TIMEOUT, OPT_KEEPALIVE,
	OPT_KEEPALIVE_TIMEOUT, OPT_SELF_CHECK,
};

static int bad(const char *opt, const char *v, const char *why)
{
	fprintf(stderr, "profd: invalid value \"%s\" for %s: %s\n", v, opt, why);
	return -EINVAL;
}

/* "65536", "64K", "1M" (powers of 1024). */
static int parse_size(const char *s, uint64_t *ret)
{
	char num[32];
	size_t n = strlen(s);
	unsigned shift = 0;
	uint64_t v;

	if (n == 0 || n >= sizeof(num))
		return -EINVAL;
	memcpy(num, s, n + 1);
	if (num[n - 1] == 'K' || num[n - 1] == 'k')
		shift = 10;
	else if (num[n - 1] == 'M' || num[n - 1] == 'm')
		shift = 20;
	if (shift)
		num[n - 1] = 0;
	if (safe_atou64(num, &v) < 0 || v > (UINT64_MAX >> shift))
		return -ERANGE;
	*ret = v << shift;
	return 0;
}

/* A duration from 0 (when @zero_ok) or 1 ms up to @max_ms. */
static int parse_dur_opt(const char *opt, const char *v, bool zero_ok, uint64_t max_ms, uint64_t *ret)
{
	uint64_t ms;

	if (parse_duration_ms(v, &ms) < 0 || (ms == 0 && !zero_ok) || ms > max_ms)
		return bad(opt, v, zero_ok ? "expected 0 (off) or a duration up to the limit in --help"
					   : "expected a duration from 1ms up to the limit in --help");
	*ret = ms;
	return 0;
}

static int parse_args(int argc, char **argv)
{
	static const struct option opts[] = {
		{"listen", required_argument, NULL, 'l'},
		{"max-duration", required_argument, NULL, OPT_MAX_DURATION},
		{"max-sessions", required_argument, NULL, OPT_MAX_SESSIONS},
		{"max-events", required_argument, NULL, OPT_MAX_EVENTS},
		{"repository-allow", required_argument, NULL, OPT_REPO_ALLOW},
		{"repository-max-depth", required_argument, NULL, OPT_REPO_DEPTH},
		{"host-sample-hz", required_argument, NULL, OPT_HOST_HZ},
		{"nvml-sample-hz", required_argument, NULL, OPT_NVML_HZ},
		{"agent-socket", required_argument, NULL, OPT_AGENT_SOCKET},
		{"flush-timeout", required_argument, NULL, OPT_FLUSH_TIMEOUT},
		{"hostname", required_argument, NULL, OPT_HOSTNAME},
		{"proc-root", required_argument, NULL, OPT_PROC_ROOT},
		{"sys-root", required_argument, NULL, OPT_SYS_ROOT},
		{"nvml-library", required_argument, NULL, OPT_NVML_LIBRARY},
		{"log-level", required_argument, NULL, OPT_LOG_LEVEL},
		{"max-streams", required_argument, NULL, OPT_MAX_STREAMS},
		{"max-request-size", required_argument, NULL, OPT_MAX_REQUEST_SIZE},
		{"first-message-timeout", required_argument, NULL, OPT_FIRST_MESSAGE_TIMEOUT},
		{"idle-timeout", required_argument, NULL, OPT_IDLE_TIMEOUT},
		{"keepalive", required_argument, NULL, OPT_KEEPALIVE},
		{"keepalive-timeout", required_argument, NULL, OPT_KEEPALIVE_TIMEOUT},
		{"self-check", required_argument, NULL, OPT_SELF_CHECK},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, OPT_VERSION},
		ACCESS_LONG_OPTIONS,
		STEP_LONG_OPTIONS,
		{NULL, 0, NULL, 0},
	};
	int c, r;

	/* The agents' own override works for the daemon too; --agent-socket wins. */
	if (getenv("PROFD_AGENT_SOCKET") && *getenv("PROFD_AGENT_SOCKET"))
		arg_agent_socket = getenv("PROFD_AGENT_SOCKET");
	while ((c = getopt_long(argc, argv, "l:h", opts, NULL)) >= 0) {
		r = parse_access_option(c, optarg);
		if (r == 0)
			r = parse_step_option(c, optarg);
		if (r < 0)
			return r;
		if (r > 0)
			continue;
		switch (c) {
		case 'l': {
			char host[256];
			uint16_t port;

			if (arg_n_listen >= MAX_LISTEN)
				return bad("--listen", optarg, "too many addresses (at most 16)");
			if (parse_host_port(optarg, host, sizeof(host), &port) < 0)
				return bad("--listen", optarg, "expected HOST:PORT or [IPV6]:PORT");
			arg_listen[arg_n_listen++] = optarg;
			break;
		}
		case OPT_MAX_DURATION:
			if (parse_duration_ms(optarg, &arg_max_duration_ms) < 0 || arg_max_duration_ms == 0 ||
			    arg_max_duration_ms > 24ULL * 3600 * 1000)
				return bad("--max-duration", optarg, "expected a duration from 1ms to 24h");
			break;
		case OPT_MAX_SESSIONS:
			if (safe_atou32(optarg, &arg_max_sessions) < 0 || arg_max_sessions == 0 ||
			    arg_max_sessions > 1024)
				return bad("--max-sessions", optarg, "expected 1-1024");
			break;
		case OPT_MAX_EVENTS:
			if (safe_atou64(optarg, &arg_max_events) < 0 || arg_max_events == 0)
				return bad("--max-events", optarg, "expected a positive number");
			break;
		case OPT_REPO_ALLOW:
			r = repo_allow_add(&arg_allow, optarg);
			if (r < 0)
				return bad("--repository-allow", optarg, strerror(-r));
			break;
		case OPT_REPO_DEPTH:
			if (safe_atou32(optarg, &arg_allow.max_depth) < 0 || arg_allow.max_depth == 0 ||
			    arg_allow.max_depth > REPO_MAX_DEPTH_LIMIT)
				return bad("--repository-max-depth", optarg, "expected 1-1024");
			break;
		case OPT_HOST_HZ:
		case OPT_NVML_HZ: {
			uint32_t *v = c == OPT_HOST_HZ ? &arg_host_sample_hz : &arg_nvml_sample_hz;

			if (safe_atou32(optarg, v) < 0 || *v == 0 || *v > 1000)
				return bad(c == OPT_HOST_HZ ? "--host-sample-hz" : "--nvml-sample-hz", optarg,
					   "expected 1-1000");
			break;
		}
		case OPT_FLUSH_TIMEOUT:
			if (parse_duration_ms(optarg, &arg_flush_timeout_ms) < 0 || arg_flush_timeout_ms > 60000)
				return bad("--flush-timeout", optarg, "expected a duration up to 60s");
			break;
		case OPT_MAX_STREAMS:
			if (safe_atou32(optarg, &arg_limits.max_streams) < 0 || arg_limits.max_streams == 0 ||
			    arg_limits.max_streams > 100000)
				return bad("--max-streams", optarg, "expected 1-100000");
			break;
		case OPT_MAX_REQUEST_SIZE: {
			uint64_t v;

			if (parse_size(optarg, &v) < 0 || v < 1024 || v > 64 << 20)
				return bad("--max-request-size", optarg, "expected 1K to 64M");
			arg_limits.max_request_bytes = (uint32_t)v;
			break;
		}
		case OPT_FIRST_MESSAGE_TIMEOUT:
			if (parse_dur_opt("--first-message-timeout", optarg, true, 3600 * 1000,
					  &arg_limits.first_message_ms) < 0)
				return -EINVAL;
			break;
		case OPT_IDLE_TIMEOUT:
			if (parse_dur_opt("--idle-timeout", optarg, true, 24ULL * 3600 * 1000, &arg_limits.idle_ms) < 0)
				return -EINVAL;
			break;
		case OPT_KEEPALIVE:
			if (parse_dur_opt("--keepalive", optarg, true, 24ULL * 3600 * 1000, &arg_limits.keepalive_ms) < 0)
				return -EINVAL;
			break;
		case OPT_KEEPALIVE_TIMEOUT:
			if (parse_dur_opt("--keepalive-timeout", optarg, false, 3600 * 1000,
					  &arg_limits.keepalive_timeout_ms) < 0)
				return -EINVAL;
			break;
		case OPT_SELF_CHECK:
			if (parse_dur_opt("--self-check", optarg, true, 3600 * 1000, &arg_self_check_ms) < 0)
				return -EINVAL;
			break;
		case OPT_AGENT_SOCKET: arg_agent_socket = optarg; break;
		case OPT_HOSTNAME: arg_hostname = optarg; break;
		case OPT_PROC_ROOT: arg_proc_root = optarg; break;
		case OPT_SYS_ROOT: arg_sys_root = optarg; break;
		case OPT_NVML_LIBRARY: arg_nvml_library = optarg; break;
		case OPT_LOG_LEVEL:
			if (log_parse_level(optarg, &log_max_level) < 0)
				return bad("--log-level", optarg, "expected err, warn, notice, info or debug");
			break;
		case 'h':
			help();
			exit(EXIT_SUCCESS);
		case OPT_VERSION:
			printf("profd %s\n", PROFD_VERSION);
			exit(EXIT_SUCCESS);
		default:
			fprintf(stderr, "Try 'profd --help'.\n");
			return -EINVAL;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "profd: unexpected argument \"%s\"; try 'profd --help'.\n", argv[optind]);
		return -EINVAL;
	}
	if (arg_n_listen == 0)
		arg_listen[arg_n_listen++] = "[::]:6009";
	return 0;
}

/* Minimal sd_notify(): no libsystemd needed. */
static void notify(const char *msg)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	size_t n;
	int fd;

	if (!path || (path[0] != '/' && path[0] != '@') || (n = strlen(path)) >= sizeof(sa.sun_path))
		return;
	memcpy(sa.sun_path, path, n);
	if (sa.sun_path[0] == '@')
		sa.sun_path[0] = 0;
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	(void)!sendto(fd, msg, strlen(msg), MSG_NOSIGNAL, (struct sockaddr *)&sa,
		      (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n));
	close(fd);
}

struct daemon {
	uv_loop_t loop;
	uv_signal_t sigterm, sigint;
	uv_timer_t watchdog; /* live only under a service manager's watchdog */
	bool watchdog_on;
	struct selfcheck *selfcheck;
	struct rpc_server *srv;
	struct session_mgr *mgr;
	struct service *svc;
	bool stopping, failed;
	int steps_left;
};

static void on_signal_closed(uv_handle_t *h) { (void)h; }

static void shutdown_step_done(void *userdata)
{
	struct daemon *d = userdata;

	if (--d->steps_left == 0) {
		uv_close((uv_handle_t *)&d->sigterm, on_signal_closed);
		uv_close((uv_handle_t *)&d->sigint, on_signal_closed);
	}
}

static void stop(struct daemon *d)
{
	d->stopping = true;
	notify("STOPPING=1");
	if (d->watchdog_on) {
		d->watchdog_on = false;
		uv_close((uv_handle_t *)&d->watchdog, on_signal_closed);
	}
	selfcheck_free(d->selfcheck); /* also from inside its own callback */
	d->selfcheck = NULL;
	d->steps_left = 2;
	/*
	 * Answer open captures first (UNAVAILABLE "profd is shutting down"),
	 * then stop the server. The sessions must be failed before the server
	 * shutdown: waiting for the server first left every open capture
	 * hanging for the whole grace period and then cancelled it with
	 * gRPC's generic "Cancelling all calls". Encoder jobs already running
	 * own their snapshot, so collectors may close while they finish.
	 */
	session_mgr_shutdown(d->mgr, shutdown_step_done, d);
	rpc_server_shutdown(d->srv, 2000, shutdown_step_done, d);
}

static void on_signal(uv_signal_t *h, int signum)
{
	struct daemon *d = h->data;

	if (d->stopping)
		return;
	log_info("%s: shutting down", strsignal(signum));
	stop(d);
}

/*
 * gRPC stopped accepting connections (after an accept4() failure such as
 * EMFILE it never tries again) while everything else runs: exit non-zero,
 * so that Restart=on-failure brings up a fresh process.
 */
static void on_selfcheck_failed(void *ud)
{
	struct daemon *d = ud;

	if (d->stopping)
		return;
	log_error("the server no longer accepts connections (%d self-checks in a row were not answered; "
		  "out of file descriptors?): exiting so that it is restarted", SELF_CHECK_FAILURES);
	d->failed = true;
	stop(d);
}

/*
 * WATCHDOG=1 from a loop timer: a loop that is stuck (or a process that
 * is gone) stops the pings and systemd's WatchdogSec= restarts it. Enabled
 * as sd_watchdog_enabled() would: WATCHDOG_USEC set, WATCHDOG_PID unset or
 * ours; pinged at half the interval.
 */
static void on_watchdog(uv_timer_t *t)
{
	(void)t;
	notify("WATCHDOG=1");
}

static void watchdog_start(struct daemon *d)
{
	const char *usec = getenv("WATCHDOG_USEC"), *pid = getenv("WATCHDOG_PID");
	uint64_t us, p, ms;

	if (!usec || safe_atou64(usec, &us) < 0 || us == 0)
		return;
	if (pid && (safe_atou64(pid, &p) < 0 || p != (uint64_t)getpid()))
		return;
	ms = us / 2000;
	if (ms == 0)
		ms = 1;
	uv_timer_init(&d->loop, &d->watchdog);
	d->watchdog.data = d;
	uv_timer_start(&d->watchdog, on_watchdog, ms, ms);
	d->watchdog_on = true;
	log_debug("watchdog: pinging every %" PRIu64 " ms", ms);
}

/* Where the self-check connects: the first --listen address, with a
 * wildcard host replaced by the IPv4 loopback (gRPC's [::] is dual-stack). */
static int selfcheck_target(const char *listen, int port, struct sockaddr_storage *ret)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *ai = NULL;
	char host[256], port_s[16];
	uint16_t unused;

	if (parse_host_port(listen, host, sizeof(host), &unused) < 0)
		return -EINVAL;
	if (strcmp(host, "::") == 0 || strcmp(host, "0.0.0.0") == 0)
		snprintf(host, sizeof(host), "127.0.0.1");
	snprintf(port_s, sizeof(port_s), "%d", port);
	if (getaddrinfo(host, port_s, &hints, &ai) != 0 || !ai)
		return -EADDRNOTAVAIL;
	memcpy(ret, ai->ai_addr, ai->ai_addrlen);
	freeaddrinfo(ai);
	return 0;
}

int main(int argc, char **argv)
{
	struct daemon d = {0};
	char hostname[HOST_NAME_MAX + 1] = "localhost";
	int r, ret = EXIT_FAILURE;

	log_open();
	if (parse_args(argc, argv) < 0)
		return EXIT_FAILURE;
	agent_nvtx_set_step_patterns(arg_step_pattern);
	signal(SIGPIPE, SIG_IGN);
	if (arg_hostname)
		snprintf(hostname, sizeof(hostname), "%s", arg_hostname);
	else if (gethostname(hostname, sizeof(hostname)) < 0)
		snprintf(hostname, sizeof(hostname), "localhost");

	rpc_global_init();
	uv_loop_init(&d.loop);

	static struct gpu_map gpus;
	struct collector_cfg ccfg = {
		.gpus = &gpus,
		.proc_root = arg_proc_root,
		.sys_root = arg_sys_root,
		.host_sample_hz = arg_host_sample_hz,
		.nvml_sample_hz = arg_nvml_sample_hz,
		.nvml_library = arg_nvml_library,
		.agent_socket = arg_agent_socket,
		.agent_socket_mode = arg_agent_socket_mode,
		.agent_socket_chgrp = arg_agent_socket_chgrp,
		.agent_socket_gid = arg_agent_socket_gid,
		.agent_allow_uids = arg_agent_allow_uid,
		.n_agent_allow_uids = arg_n_agent_allow_uid,
		.hostname = hostname,
	};
	struct session_mgr_cfg mcfg = {
		.max_sessions = arg_max_sessions,
		.max_events = arg_max_events,
		.flush_timeout_ms = arg_flush_timeout_ms,
	};
	struct service_cfg scfg = {
		.hostname = hostname,
		.max_duration_ms = arg_max_duration_ms,
		.allow = &arg_allow,
		.agent_socket = arg_agent_socket,
	};

	r = session_mgr_new(&d.loop, &mcfg, &ccfg, &d.mgr);
	if (r < 0) {
		log_error_errno(r, "could not set up collectors");
		goto out;
	}
	r = rpc_server_new_with(&d.loop, &arg_limits, &d.srv);
	if (r >= 0) {
		char err[512] = "";

		r = rpc_server_set_auth(d.srv, &arg_auth, err, sizeof(err));
		if (r < 0) {
			log_error("%s", err[0] ? err : strerror(-r));
			goto out;
		}
	}
	if (r >= 0)
		r = service_new(&d.loop, &scfg, d.mgr, d.srv, &d.svc);
	if (r < 0) {
		log_error_errno(r, "could not set up the server");
		goto out;
	}
	int first_port = 0;

	for (size_t i = 0; i < arg_n_listen; i++) {
		int port = rpc_server_listen(d.srv, arg_listen[i]);

		if (port == -EADDRINUSE) {
			log_error("cannot listen on %s: address in use (is another profd running?)", arg_listen[i]);
			goto out;
		}
		if (port < 0) {
			log_error("cannot listen on %s (address in use, or not an address of this host)",
				  arg_listen[i]);
			goto out;
		}
		if (i == 0)
			first_port = port;
		log_info("listening on %s (port %d)", arg_listen[i], port);
	}
	r = rpc_server_start(d.srv);
	if (r < 0) {
		log_error_errno(r, "could not start the server");
		goto out;
	}
	uv_signal_init(&d.loop, &d.sigterm);
	uv_signal_init(&d.loop, &d.sigint);
	d.sigterm.data = d.sigint.data = &d;
	uv_signal_start(&d.sigterm, on_signal, SIGTERM);
	uv_signal_start(&d.sigint, on_signal, SIGINT);
	if (arg_self_check_ms) {
		struct sockaddr_storage target;

		r = selfcheck_target(arg_listen[0], first_port, &target);
		if (r >= 0)
			r = selfcheck_new(&d.loop, (struct sockaddr *)&target, arg_self_check_ms,
					  SELF_CHECK_FAILURES, on_selfcheck_failed, &d, &d.selfcheck);
		if (r < 0)
			log_warn("self-check off: cannot connect to %s", arg_listen[0]);
	}
	watchdog_start(&d);
	notify("READY=1");
	log_info("profd %s ready on %s", PROFD_VERSION, hostname);

	uv_run(&d.loop, UV_RUN_DEFAULT);
	ret = d.failed ? EXIT_FAILURE : EXIT_SUCCESS;
	if (rpc_server_live_calls(d.srv) || service_jobs(d.svc)) {
		log_error("%u call(s) and %u job(s) still alive at exit", rpc_server_live_calls(d.srv),
			  service_jobs(d.svc));
		ret = EXIT_FAILURE;
	}
out:
	if ((d.srv || d.mgr) && ret != EXIT_SUCCESS && !d.stopping) {
		/* Failed start: tear down what exists, so no handle outlives the loop. */
		if (d.srv)
			rpc_server_shutdown(d.srv, 0, NULL, NULL);
		if (d.mgr)
			session_mgr_shutdown(d.mgr, NULL, NULL);
		uv_run(&d.loop, UV_RUN_DEFAULT);
	}
	d.svc = service_free(d.svc);
	d.srv = rpc_server_free(d.srv);
	d.mgr = session_mgr_free(d.mgr);
	if (uv_loop_close(&d.loop) != 0) {
		log_error("handles left open at exit");
		ret = EXIT_FAILURE;
	}
	rpc_global_shutdown();
	repo_allow_free(&arg_allow);
	log_info("exit %d", ret);
	return ret;
}
