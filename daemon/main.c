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

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <netdb.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent-path.h"
#include "agent-receiver.h"
#include "base/log.h"
#include "base/parse.h"
#include "capture-opts.h"
#include "collectors/agent/agent-nvtx.h"
#include "conf.h"
#include "config.h"
#include "delivery.h"
#include "monitor.h"
#include "notify.h"
#include "rpc.h"
#include "selfcheck.h"
#include "service.h"
#include "session.h"
#include "trigger.h"

#define SELF_CHECK_FAILURES 3

/*
 * Settings (conf.h): the flags as given, and the effective settings (the
 * config file, then the flags on top). SIGHUP re-reads the file into a
 * scratch struct and copies the reloadable keys over; the flags keep
 * winning. Owned by the loop thread.
 */
static struct profd_conf cli, cfg;
static const char *config_path = PROFD_CONFIG_FILE;
static bool config_given; /* --config: a missing file is an error */

enum { OPT_HELP = 'h', OPT_VERSION = 256, OPT_CONFIG, OPT_DUMP_CONFIG, OPT_DEFAULT_CONFIG };
enum action { RUN, DUMP_CONFIG, DEFAULT_CONFIG };

static void help(void)
{
	printf("Usage: profd [OPTIONS]\n"
	       "\n"
	       "Serve TensorFlow's ProfilerService on this machine so that TensorBoard/XProf's\n"
	       "Capture Profile dialog, tf.profiler.experimental.client.trace() and profctl can\n"
	       "capture GPU and host activity of every job here, with no profiler in the job.\n"
	       "\n"
	       "Every option below is also a key of the config file (the same name without\n"
	       "\"--\"); options given here override the file. DUR is N (ms), Nms, Ns, Nm or Nh.\n");
	conf_help(stdout);
	printf("\n"
	       "Configuration:\n"
	       "      --config FILE          read settings from FILE (an error if it is missing)\n"
	       "                             instead of the default file (missing is fine):\n"
	       "                             %s\n"
	       "                             SIGHUP re-reads it and applies the keys marked\n"
	       "                             \"reloaded on SIGHUP\"; others need a restart.\n"
	       "      --dump-config          print every key with its effective value (file\n"
	       "                             syntax: the output is a valid config) and exit\n"
	       "      --default-config       print a commented config with every default, exit\n"
	       "  -h, --help                 this text\n"
	       "      --version              print the version\n"
	       "\n"
	       "Logs go to stderr, with journald priorities when run by systemd.\n"
	       "Documentation: profd(8), profd.conf(5), profctl(1); docs/ in the source tree.\n",
	       PROFD_CONFIG_FILE);
}

/* Flags into `cli`, checked against the table as they come. */
static int parse_args(int argc, char **argv, enum action *action)
{
	static struct option opts[CONF_N_KEYS + 6];
	size_t n = 0;
	int c;

	for (size_t k = 0; k < conf_n_keys(); k++)
		opts[n++] = (struct option){conf_key_name(k), required_argument, NULL, CONF_OPT_BASE + (int)k};
	opts[n++] = (struct option){"config", required_argument, NULL, OPT_CONFIG};
	opts[n++] = (struct option){"dump-config", no_argument, NULL, OPT_DUMP_CONFIG};
	opts[n++] = (struct option){"default-config", no_argument, NULL, OPT_DEFAULT_CONFIG};
	opts[n++] = (struct option){"help", no_argument, NULL, OPT_HELP};
	opts[n++] = (struct option){"version", no_argument, NULL, OPT_VERSION};
	opts[n] = (struct option){NULL, 0, NULL, 0};

	*action = RUN;
	while ((c = getopt_long(argc, argv, "l:h", opts, NULL)) >= 0) {
		char why[256] = "";
		size_t key;
		int r;

		switch (c) {
		case 'l': key = CONF_LISTEN; break;
		case OPT_CONFIG:
			config_path = optarg;
			config_given = true;
			continue;
		case OPT_DUMP_CONFIG: *action = DUMP_CONFIG; continue;
		case OPT_DEFAULT_CONFIG: *action = DEFAULT_CONFIG; continue;
		case OPT_HELP:
			help();
			exit(EXIT_SUCCESS);
		case OPT_VERSION:
			printf("profd %s\n", PROFD_VERSION);
			exit(EXIT_SUCCESS);
		default:
			if (c < CONF_OPT_BASE || c >= CONF_OPT_BASE + (int)conf_n_keys()) {
				fprintf(stderr, "Try 'profd --help'.\n");
				return -EINVAL;
			}
			key = (size_t)(c - CONF_OPT_BASE);
		}
		/* An empty value clears a list; for allow-from that means "every
		 * address", which a flag should never say by accident (an unset
		 * shell variable). Leaving the flag out says it on purpose. */
		if (key == CONF_ALLOW_FROM && !*optarg) {
			fprintf(stderr, "profd: --allow-from needs an address or ADDRESS/PREFIX; an empty "
				"value would let every address call (leave the option out for that)\n");
			return -EINVAL;
		}
		r = conf_set(&cli, key, optarg, why, sizeof(why));
		if (r < 0) {
			fprintf(stderr, "profd: invalid value \"%s\" for --%s: %s\n", optarg, conf_key_name(key),
				r == -ENOMEM ? strerror(ENOMEM) : why);
			return r;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "profd: unexpected argument \"%s\"; try 'profd --help'.\n", argv[optind]);
		return -EINVAL;
	}
	return 0;
}

/* Defaults, then the config file, then the flags, into @out (freed on error,
 * the reason in @err). */
static int load_settings(struct profd_conf *out, char *err, size_t err_size)
{
	int r = conf_init(out);

	if (r < 0) {
		snprintf(err, err_size, "out of memory");
		return r;
	}
	r = conf_load(out, config_path, err, err_size);
	if (r == -ENOENT && !config_given)
		r = 0; /* no file at the default place: defaults and flags */
	if (r >= 0 && (r = conf_overlay(out, &cli)) < 0)
		snprintf(err, err_size, "out of memory");
	/* Triggers write there: it must be a directory now (and is resolved
	 * when applied), so that a reload with a typo changes nothing. */
	if (r >= 0 && out->snapshot_dir && out->snapshot_dir[0]) {
		struct stat st;

		if (stat(out->snapshot_dir, &st) < 0) {
			snprintf(err, err_size, "snapshot-dir %s: %s", out->snapshot_dir, strerror(errno));
			r = -EINVAL;
		} else if (!S_ISDIR(st.st_mode)) {
			snprintf(err, err_size, "snapshot-dir %s: not a directory", out->snapshot_dir);
			r = -EINVAL;
		}
	}
	/* The ring lives in the hub, which holds at most half of max-bytes:
	 * the default follows a smaller max-bytes, a value given is checked. */
	if (r >= 0 && out->recorder_bytes > out->max_bytes / 2) {
		if (out->set & (UINT64_C(1) << CONF_RECORDER_BYTES)) {
			snprintf(err, err_size, "recorder-bytes %" PRIu64 " is more than half of max-bytes %"
				 PRIu64 " (the live event store's share, which the ring is part of)",
				 out->recorder_bytes, out->max_bytes);
			r = -EINVAL;
		} else {
			out->recorder_bytes = out->max_bytes / 2;
		}
	}
	if (r < 0)
		conf_free(out);
	return r;
}

struct daemon {
	uv_loop_t loop;
	uv_signal_t sigterm, sigint, sighup, sigusr2;
	uv_timer_t watchdog; /* live only under a service manager's watchdog */
	bool watchdog_on;
	struct selfcheck *selfcheck;
	struct rpc_server *srv;
	struct session_mgr *mgr;
	struct service *svc;
	struct trigger *trigger;   /* the recorder's own snapshots (SIGUSR2) */
	const char *hostname;      /* main()'s, for the daemon's life */
	struct collector_cfg ccfg; /* borrowed by the collectors for the daemon's life */
	struct agent_receiver_cfg agent_cfg; /* ccfg.agent, likewise */
	char listening[256];       /* for STATUS= */
	bool stopping, failed;
	int steps_left;
};

static void on_signal_closed(uv_handle_t *h) { (void)h; }

static void count_agent(void *userdata, const struct collector_agent *a)
{
	(void)a;
	++*(size_t *)userdata;
}

/* STATUS= for `systemctl status`: where we listen, what is going on. */
static void update_status(struct daemon *d)
{
	size_t agents = 0;
	const struct collector_status_sink sink = {.agent = count_agent, .userdata = &agents};

	collector_set_status(session_mgr_collectors(d->mgr), &sink);
	notify_status("listening on %s; %u capture(s) open, %zu agent(s) connected", d->listening,
		      session_mgr_active(d->mgr), agents);
}

static void shutdown_step_done(void *userdata)
{
	struct daemon *d = userdata;

	if (--d->steps_left == 0) {
		uv_close((uv_handle_t *)&d->sigterm, on_signal_closed);
		uv_close((uv_handle_t *)&d->sigint, on_signal_closed);
		uv_close((uv_handle_t *)&d->sighup, on_signal_closed);
		uv_close((uv_handle_t *)&d->sigusr2, on_signal_closed);
	}
}

static void stop(struct daemon *d)
{
	d->stopping = true;
	notify_send("STOPPING=1");
	notify_status("shutting down");
	if (d->watchdog_on) {
		d->watchdog_on = false;
		uv_close((uv_handle_t *)&d->watchdog, on_signal_closed);
	}
	trigger_close(d->trigger);
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

/* SIGUSR2: a snapshot of the flight recorder into snapshot-dir (trigger.h). */
static void on_sigusr2(uv_signal_t *h, int signum)
{
	struct daemon *d = h->data;

	(void)signum;
	if (!d->stopping)
		(void)trigger_fire(d->trigger, "sigusr2", "SIGUSR2 to profd");
}

/* A job whose agent was armed exited or was killed (agent receiver). */
static void on_job_gone(void *userdata, uint32_t pid, const char *name)
{
	struct daemon *d = userdata;
	char detail[128];

	if (d->stopping || !d->trigger)
		return;
	snprintf(detail, sizeof(detail), "pid %u (%s) exited or was killed while traced", pid, name);
	(void)trigger_fire_soon(d->trigger, "process-exit", detail);
}

/* A traced job's CUDA call failed for good (agent receiver). */
static void on_cuda_error(void *userdata, uint32_t pid, const char *name, const char *api, int32_t ret)
{
	struct daemon *d = userdata;
	char detail[256];

	if (d->stopping || !d->trigger)
		return;
	snprintf(detail, sizeof(detail), "pid %u (%s): %s returned CUDA error %d", pid, name, api, ret);
	(void)trigger_fire_soon(d->trigger, "cuda-error", detail);
}

/* The triggers' settings from @c; the directory resolved into @dir
 * (empty: none). */
static void trigger_cfg_of(const struct profd_conf *c, const char *hostname, char dir[PATH_MAX],
			   struct trigger_cfg *t)
{
	dir[0] = 0;
	if (c->snapshot_dir && c->snapshot_dir[0] && !realpath(c->snapshot_dir, dir)) {
		log_warn("snapshot-dir %s: %s; triggers write nothing", c->snapshot_dir, strerror(errno));
		dir[0] = 0;
	}
	*t = (struct trigger_cfg){
		.dir = dir[0] ? dir : NULL,
		.last_ms = c->snapshot_last_ms,
		.min_interval_ms = c->snapshot_interval_ms,
		.max_count = c->snapshot_max_count,
		.max_bytes = c->snapshot_max_bytes,
		.hostname = hostname,
		.gpu_idle_ms = c->snapshot_gpu_idle_ms,
		.step_above_ms = c->snapshot_step_above_ms,
		.step_p99 = c->snapshot_step_outlier,
	};
}

/* What rpc_server_set_auth() takes, from @c's access keys. */
static void access_of(const struct profd_conf *c, struct rpc_server_auth *auth)
{
	*auth = (struct rpc_server_auth){
		.allow_from = (const char *const *)c->allow_from.v,
		.n_allow_from = c->allow_from.n,
		.tls_cert = c->tls_cert,
		.tls_key = c->tls_key,
		.tls_client_ca = c->tls_client_ca,
		.token_file = c->token_file,
	};
}

/*
 * New address ranges for the running server. The TLS and token keys are not
 * reloadable, so the current ones are passed: the listening ports were made
 * with them. First of all reload steps, because it can fail.
 */
static int reload_allow_from(struct daemon *d, const struct profd_conf *next, char *err, size_t err_size)
{
	struct rpc_server_auth auth;

	access_of(&cfg, &auth);
	auth.allow_from = (const char *const *)next->allow_from.v;
	auth.n_allow_from = next->allow_from.n;
	return rpc_server_reload_auth(d->srv, &auth, err, err_size);
}

/* A window's GPU options when its request sets none (docs/options.md):
 * NVTX on, PM sampling as --pm-sample* say. conf_set() checked the list. */
static void gpu_defaults(const struct profd_conf *c, struct agent_opts *o)
{
	struct capture_opts def;
	char why[128];

	capture_opts_default(&def);
	def.agent.pm_interval_us = (uint32_t)c->pm_sample_interval_us;
	def.agent.pm_buffer_mb = c->pm_sample_buffer_mb;
	if (c->pm_sample && capture_opts_set_pm_metrics(&def.agent, c->pm_sample, why, sizeof(why)) < 0)
		log_warn("pm-sample: %s; PM sampling stays off", why);
	*o = def.agent;
}

/* The reloadable settings of `cfg`, pushed to their owners. Each takes
 * effect for what starts from now on; open captures keep what they got. */
static void apply_reloadable(struct daemon *d)
{
	log_max_level = cfg.log_level;
	agent_nvtx_set_step_patterns(cfg.step_pattern);
	session_mgr_set_limits(d->mgr, cfg.max_sessions, cfg.flush_timeout_ms);
	session_mgr_set_idle_trim(d->mgr, cfg.idle_trim);
	/* max-bytes needs a restart: a reload checked the ring against the
	 * file's value, the hub still has the running one's half. */
	{
		uint64_t max = session_mgr_max_bytes(d->mgr);

		session_mgr_set_recorder_bytes(d->mgr, max ? MIN(cfg.recorder_bytes, max / 2) : cfg.recorder_bytes);
	}
	{
		struct agent_opts gpu;

		gpu_defaults(&cfg, &gpu);
		session_mgr_set_gpu_default(d->mgr, &gpu);
	}
	service_set_max_duration(d->svc, cfg.max_duration_ms);
	{
		char dir[PATH_MAX];
		struct trigger_cfg tc;

		trigger_cfg_of(&cfg, d->hostname, dir, &tc);
		if (trigger_set_cfg(d->trigger, &tc) < 0)
			log_error("reload: out of memory for the trigger settings");
	}
	d->ccfg.host_sample_hz = cfg.host_sample_hz;
}

/*
 * SIGHUP: re-read the file (and lay the flags over it again). All or
 * nothing: a file with any error changes nothing. Keys that cannot change
 * in a running daemon are reported, not applied.
 */
static void on_sighup(uv_signal_t *h, int signum)
{
	struct daemon *d = h->data;
	struct profd_conf next;
	char err[512] = "", a[512], b[512];
	unsigned changed = 0, restart = 0;

	(void)signum;
	if (d->stopping)
		return;
	if (load_settings(&next, err, sizeof(err)) < 0) {
		log_error("reload: %s; keeping the current settings", err);
		notify_status("reload failed: %s", err);
		return;
	}
	/* A file that lost its allow-from lines (emptied, half written by an
	 * editor, the wrong file) must not open the port to everyone: only an
	 * explicit "allow-from =" line does that on reload. */
	if (cfg.allow_from.n && !next.allow_from.n && !(next.set & (UINT64_C(1) << CONF_ALLOW_FROM))) {
		log_error("reload: %s has no allow-from line: that would let every address call; keeping "
			  "the current settings (write \"allow-from =\" to open access on purpose)", config_path);
		notify_status("reload failed: %s has no allow-from line", config_path);
		conf_free(&next);
		return;
	}
	if (!conf_key_equal(&cfg, &next, CONF_ALLOW_FROM) && reload_allow_from(d, &next, err, sizeof(err)) < 0) {
		log_error("reload: %s; keeping the current settings", err);
		notify_status("reload failed: %s", err);
		conf_free(&next);
		return;
	}
	for (size_t k = 0; k < conf_n_keys(); k++) {
		if (conf_key_equal(&cfg, &next, k))
			continue;
		if (!*conf_format(&cfg, k, a, sizeof(a)))
			snprintf(a, sizeof(a), "(none)");
		if (!*conf_format(&next, k, b, sizeof(b)))
			snprintf(b, sizeof(b), "(none)");
		if (!conf_key_reloadable(k)) {
			log_warn("reload: %s changed (%s -> %s) but needs a restart; still using %s",
				 conf_key_name(k), a, b, a);
			restart++;
			continue;
		}
		/* Only a list (allow-from, already applied) can fail, for memory:
		 * then the log shows the old value while the server has the new. */
		if (conf_copy_key(&cfg, &next, k) < 0)
			log_error("reload: %s: out of memory recording the new value", conf_key_name(k));
		log_info("reload: %s: %s -> %s", conf_key_name(k), a, b);
		if (k == CONF_ALLOW_FROM && !cfg.allow_from.n)
			log_warn("reload: allow-from cleared: every address that reaches the port may call now");
		changed++;
	}
	conf_free(&next);
	apply_reloadable(d);
	log_info("reload of %s: %u setting(s) changed%s", config_path, changed,
		 restart ? ", some need a restart (above)" : "");
	update_status(d);
}

/* The server's threads just ran their connection code (the self-check's
 * own connection): let the idle path unmap it again (idle-trim). */
static void on_selfcheck_answered(void *ud)
{
	struct daemon *d = ud;

	if (!d->stopping && d->mgr)
		session_mgr_idle_hint(d->mgr);
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
 * is gone) stops the pings and systemd's WatchdogSec= restarts it. The
 * same tick refreshes STATUS=.
 */
static void on_watchdog(uv_timer_t *t)
{
	struct daemon *d = t->data;

	notify_send("WATCHDOG=1");
	update_status(d);
}

static void watchdog_start(struct daemon *d)
{
	uint64_t ms = notify_watchdog_ms();

	if (!ms)
		return;
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

/* The settings as the parts take them; names resolved (conf_set checked). */
static int setup_access(struct rpc_server_auth *auth, struct repo_allow *allow, uid_t *uids)
{
	int r;

	access_of(&cfg, auth);
	allow->max_depth = cfg.repository_max_depth;
	for (uint32_t i = 0; i < cfg.repository_allow.n; i++) {
		r = repo_allow_add(allow, cfg.repository_allow.v[i]);
		if (r < 0)
			return log_error_errno(r, "repository-allow %s", cfg.repository_allow.v[i]);
	}
	for (uint32_t i = 0; i < cfg.agent_allow_uid.n; i++) {
		r = conf_resolve_user(cfg.agent_allow_uid.v[i], &uids[i]);
		if (r < 0)
			return log_error_errno(r, "agent-allow-uid: no user \"%s\"", cfg.agent_allow_uid.v[i]);
	}
	return 0;
}

int main(int argc, char **argv)
{
	static struct gpu_map gpus;
	static struct agent_path agent; /* the agent jobs load, for every hint (agent-path.h) */
	static uid_t uids[CONF_MAX_LIST];
	struct daemon d = {0};
	struct rpc_limits limits = RPC_LIMITS_DEFAULT;
	struct rpc_server_auth auth;
	struct repo_allow allow = {0};
	char hostname[HOST_NAME_MAX + 1] = "localhost", err[512] = "";
	enum action action;
	gid_t gid = 0;
	int r, ret = EXIT_FAILURE;

	log_open();
	if (conf_init(&cli) < 0 || parse_args(argc, argv, &action) < 0)
		goto out_conf;
	if (action == DEFAULT_CONFIG) {
		/* The table's defaults, whatever this shell's environment says. */
		unsetenv("PROFD_AGENT_SOCKET");
		if (conf_init(&cfg) < 0)
			goto out_conf;
		conf_dump(stdout, &cfg, true);
		ret = EXIT_SUCCESS;
		goto out_conf;
	}
	if (load_settings(&cfg, err, sizeof(err)) < 0) {
		fprintf(stderr, "profd: %s\n", err);
		goto out_conf_cli;
	}
	if (action == DUMP_CONFIG) {
		conf_dump(stdout, &cfg, false);
		ret = EXIT_SUCCESS;
		goto out_conf;
	}
	log_max_level = cfg.log_level;
	agent_nvtx_set_step_patterns(cfg.step_pattern);
	if (cfg.agent_socket_group && conf_resolve_group(cfg.agent_socket_group, &gid) < 0) {
		log_error("agent-socket-group: no group \"%s\" on this machine", cfg.agent_socket_group);
		goto out_conf;
	}
	if (setup_access(&auth, &allow, uids) < 0)
		goto out_conf;
	/* Before anything is bound: a socket directory others can change would
	 * let them redirect what profd does at the socket's path. */
	if (agent_receiver_check_dir(cfg.agent_socket, err, sizeof(err)) < 0) {
		log_error("%s", err);
		goto out_conf;
	}
	limits.max_streams = cfg.max_streams;
	limits.max_request_bytes = (uint32_t)cfg.max_request_size; /* <= 64M, the table's bound */
	limits.first_message_ms = cfg.first_message_timeout_ms;
	limits.idle_ms = cfg.idle_timeout_ms;
	limits.keepalive_ms = cfg.keepalive_ms;
	limits.keepalive_timeout_ms = cfg.keepalive_timeout_ms;

	signal(SIGPIPE, SIG_IGN);
	if (cfg.hostname)
		snprintf(hostname, sizeof(hostname), "%s", cfg.hostname);
	else if (gethostname(hostname, sizeof(hostname)) < 0 || !conf_host_ok(hostname)) {
		log_warn("the machine's host name is not usable in XSpace or a file name; using "
			 "\"localhost\" (set hostname in the config)");
		snprintf(hostname, sizeof(hostname), "localhost");
	}

	rpc_global_init();
	uv_loop_init(&d.loop);

	agent_path_resolve(NULL, getenv("PROFD_AGENT_PATH"), &agent);
	/* Jobs find only the default socket on their own: then every hint (the
	 * log line, Status, the XSpace "no GPU data" warnings) names the other. */
	if (cfg.agent_socket && cfg.agent_socket[0] && strcmp(cfg.agent_socket, PROFD_AGENT_SOCKET_DEFAULT) != 0) {
		size_t n = strlen(agent.hint);

		snprintf(agent.hint + n, sizeof(agent.hint) - n,
			 " and PROFD_AGENT_SOCKET=%s (this profd's agent socket is not the default)",
			 cfg.agent_socket);
	}
	d.agent_cfg = (struct agent_receiver_cfg){
		.socket = cfg.agent_socket,
		.socket_mode = cfg.agent_socket_mode,
		.socket_chgrp = cfg.agent_socket_group != NULL,
		.socket_gid = gid,
		.allow_uids = uids,
		.n_allow_uids = cfg.agent_allow_uid.n,
		.hint = agent.hint,
		.job_gone = on_job_gone,
		.job_gone_ud = &d,
		.cuda_error = on_cuda_error,
		.cuda_error_ud = &d,
	};
	d.ccfg = (struct collector_cfg){
		.gpus = &gpus,
		.proc_root = cfg.proc_root,
		.sys_root = cfg.sys_root,
		.host_sample_hz = cfg.host_sample_hz,
		.nvml_sample_hz = cfg.nvml_sample_hz,
		.nvml_library = cfg.nvml_library,
		.agent = &d.agent_cfg,
		.hostname = hostname,
	};
	struct session_mgr_cfg mcfg = {
		.max_sessions = cfg.max_sessions,
		.max_events = cfg.max_events,
		.max_bytes = cfg.max_bytes,
		.recorder_bytes = cfg.recorder_bytes,
		.flush_timeout_ms = cfg.flush_timeout_ms,
		.idle_trim = cfg.idle_trim,
	};
	struct service_cfg scfg = {
		.hostname = hostname,
		.max_duration_ms = cfg.max_duration_ms,
		.allow = &allow,
		.agent_socket = cfg.agent_socket,
		.agent_hint = agent.hint,
	};

	if (cfg.agent_socket && strcmp(cfg.agent_socket, PROFD_AGENT_SOCKET_DEFAULT) != 0)
		log_notice("agent socket %s is not the default (%s): jobs need PROFD_AGENT_SOCKET=%s in "
			   "their environment (next to CUDA_INJECTION64_PATH) to find it",
			   cfg.agent_socket, PROFD_AGENT_SOCKET_DEFAULT, cfg.agent_socket);
	gpu_defaults(&cfg, &mcfg.gpu);
	r = session_mgr_new(&d.loop, &mcfg, &d.ccfg, &d.mgr);
	if (r < 0) {
		log_error_errno(r, "could not set up collectors");
		goto out;
	}
	r = rpc_server_new_with(&d.loop, &limits, &d.srv);
	if (r >= 0) {
		r = rpc_server_set_auth(d.srv, &auth, err, sizeof(err));
		if (r < 0) {
			log_error("%s", err[0] ? err : strerror(-r));
			goto out;
		}
	}
	if (r >= 0)
		r = service_new(&d.loop, &scfg, d.mgr, d.srv, &d.svc);
	if (r >= 0) {
		char dir[PATH_MAX];
		struct trigger_cfg tc;

		d.hostname = hostname;
		trigger_cfg_of(&cfg, hostname, dir, &tc);
		r = trigger_new(&d.loop, d.mgr, &tc, &d.trigger);
	}
	if (r < 0) {
		log_error_errno(r, "could not set up the server");
		goto out;
	}
	int first_port = 0;

	for (size_t i = 0; i < cfg.listen.n; i++) {
		const char *addr = cfg.listen.v[i];
		int port = rpc_server_listen(d.srv, addr);
		size_t used = strlen(d.listening);

		if (port == -EADDRINUSE) {
			log_error("cannot listen on %s: address in use (is another profd running?)", addr);
			goto out;
		}
		if (port == -EADDRNOTAVAIL) {
			log_error("cannot listen on %s: not an address of this host (or not a HOST:PORT gRPC "
				  "can resolve); [::]:PORT or 0.0.0.0:PORT take every address", addr);
			goto out;
		}
		if (port == -EACCES) {
			log_error("cannot listen on %s: permission denied (ports below 1024 need root or "
				  "CAP_NET_BIND_SERVICE; profd's default is 6009)", addr);
			goto out;
		}
		if (port < 0) {
			log_error_errno(port, "cannot listen on %s", addr);
			goto out;
		}
		if (i == 0)
			first_port = port;
		snprintf(d.listening + used, sizeof(d.listening) - used, "%s%s (port %d)", i ? ", " : "", addr,
			 port);
		log_info("listening on %s (port %d)", addr, port);
	}
	r = rpc_server_start(d.srv);
	if (r < 0) {
		log_error_errno(r, "could not start the server");
		goto out;
	}
	uv_signal_init(&d.loop, &d.sigterm);
	uv_signal_init(&d.loop, &d.sigint);
	uv_signal_init(&d.loop, &d.sighup);
	uv_signal_init(&d.loop, &d.sigusr2);
	d.sigterm.data = d.sigint.data = d.sighup.data = d.sigusr2.data = &d;
	uv_signal_start(&d.sigterm, on_signal, SIGTERM);
	uv_signal_start(&d.sigint, on_signal, SIGINT);
	uv_signal_start(&d.sighup, on_sighup, SIGHUP);
	uv_signal_start(&d.sigusr2, on_sigusr2, SIGUSR2);
	if (cfg.self_check_ms) {
		struct sockaddr_storage target;

		r = selfcheck_target(cfg.listen.v[0], first_port, &target);
		if (r >= 0)
			r = selfcheck_new(&d.loop, (struct sockaddr *)&target, cfg.self_check_ms,
					  SELF_CHECK_FAILURES, on_selfcheck_failed, on_selfcheck_answered, &d,
					  &d.selfcheck);
		if (r < 0)
			log_warn("self-check off: cannot connect to %s", cfg.listen.v[0]);
	}
	watchdog_start(&d);
	/* After every listen(): a unit ordered after us may connect at once. */
	notify_send("READY=1");
	update_status(&d);
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
		trigger_close(d.trigger);
		if (d.srv)
			rpc_server_shutdown(d.srv, 0, NULL, NULL);
		if (d.mgr)
			session_mgr_shutdown(d.mgr, NULL, NULL);
		uv_run(&d.loop, UV_RUN_DEFAULT);
	}
	d.trigger = trigger_free(d.trigger);
	d.svc = service_free(d.svc);
	d.srv = rpc_server_free(d.srv);
	d.mgr = session_mgr_free(d.mgr);
	if (uv_loop_close(&d.loop) != 0) {
		log_error("handles left open at exit");
		ret = EXIT_FAILURE;
	}
	rpc_global_shutdown();
	log_info("exit %d", ret);
out_conf:
	conf_free(&cfg);
out_conf_cli:
	conf_free(&cli);
	repo_allow_free(&allow);
	return ret;
}
