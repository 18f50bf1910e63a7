/* SPDX-License-Identifier: MIT */
/*
 * profctl-doctor.c - `profctl doctor [URL]`: find out why a capture would
 * come back empty, and say how to fix it.
 *
 * Local checks look at this machine (NVIDIA driver, NVML, CUPTI,
 * perf_event_paranoid, the agent socket); remote checks ask a daemon for
 * its Status (reachable, version, clock skew, collectors, agents). Every
 * check prints one line; a check that is not OK prints its fix below it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <glob.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/macro.h"
#include "base/parse.h"
#include "config.h"
#include "profctl.h"
#include "profd/profd.pb-c.h"
#include "rpc.h"

enum verdict { V_OK, V_WARN, V_FAIL, V_SKIP };

struct doctor {
	unsigned n[4];
	bool have_driver;
};

static void report(struct doctor *d, enum verdict v, const char *fix, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void report(struct doctor *d, enum verdict v, const char *fix, const char *fmt, ...)
{
	static const char *const tag[] = {"[ OK ]", "[WARN]", "[FAIL]", "[SKIP]"};
	va_list ap;

	d->n[v]++;
	printf("%s ", tag[v]);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	if (fix && (v == V_WARN || v == V_FAIL))
		printf("       fix: %s\n", fix);
}

/* ---- local -------------------------------------------------------------------- */

static void check_driver(struct doctor *d)
{
	FILE *f = fopen("/proc/driver/nvidia/version", "re");
	char line[256] = "";

	if (!f) {
		report(d, V_WARN,
		       "install the NVIDIA kernel driver (Debian 12: apt install nvidia-driver, from the non-free "
		       "component); in a container, "
		       "run with the NVIDIA container toolkit (docker run --gpus all). Without it only host "
		       "data is collected.",
		       "NVIDIA driver: not loaded (/proc/driver/nvidia/version missing)");
		return;
	}
	if (fgets(line, sizeof(line), f))
		line[strcspn(line, "\n")] = 0;
	fclose(f);
	d->have_driver = true;
	report(d, V_OK, NULL, "NVIDIA driver: %.200s", line);
}

typedef int (*nvml_init_fn)(void);
typedef int (*nvml_count_fn)(unsigned *);
typedef int (*nvml_ver_fn)(char *, unsigned);

static void check_nvml(struct doctor *d)
{
	void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	nvml_init_fn init;
	nvml_count_fn count;
	nvml_ver_fn ver;
	int (*shutdown)(void);
	unsigned n = 0;
	char v[96] = "?";
	int r;

	if (!h) {
		report(d, d->have_driver ? V_FAIL : V_WARN,
		       "install the driver's NVML library libnvidia-ml.so.1 (Debian 12: libnvidia-ml1 from non-free, part of "
		       "nvidia-driver); in a container set NVIDIA_DRIVER_CAPABILITIES=compute,utility",
		       "NVML: cannot load libnvidia-ml.so.1 (%s)", dlerror());
		return;
	}
	/* POSIX's way to turn dlsym()'s object pointer into a function pointer. */
	*(void **)&init = dlsym(h, "nvmlInit_v2");
	*(void **)&count = dlsym(h, "nvmlDeviceGetCount_v2");
	*(void **)&ver = dlsym(h, "nvmlSystemGetDriverVersion");
	*(void **)&shutdown = dlsym(h, "nvmlShutdown");
	if (!init || !count) {
		report(d, V_FAIL, "reinstall the NVIDIA driver; this libnvidia-ml.so.1 is too old or broken",
		       "NVML: libnvidia-ml.so.1 lacks nvmlInit_v2/nvmlDeviceGetCount_v2");
		dlclose(h);
		return;
	}
	r = init();
	if (r != 0) {
		report(d, V_FAIL,
		       "nvmlInit failed: check that the kernel module matches the user-space driver version "
		       "(nvidia-smi shows the mismatch) and that /dev/nvidia* are accessible",
		       "NVML: nvmlInit_v2 returned %d", r);
		dlclose(h);
		return;
	}
	(void)count(&n);
	if (ver)
		(void)ver(v, sizeof(v));
	if (shutdown)
		(void)shutdown();
	dlclose(h);
	if (n == 0)
		report(d, V_WARN, "NVML sees no GPU: check nvidia-smi and the container's device list",
		       "NVML: loaded (driver %s), 0 GPUs", v);
	else
		report(d, V_OK, NULL, "NVML: driver %s, %u GPU%s", v, n, n == 1 ? "" : "s");
}

static bool glob_first(const char *pattern, char *out, size_t size)
{
	glob_t g;
	bool found = false;

	if (glob(pattern, 0, NULL, &g) == 0 && g.gl_pathc > 0) {
		snprintf(out, size, "%s", g.gl_pathv[0]);
		found = true;
	}
	globfree(&g);
	return found;
}

static void check_cupti(struct doctor *d)
{
	static const char *const subdirs[] = {"extras/CUPTI/lib64", "lib64", "targets/x86_64-linux/lib",
					       "targets/sbsa-linux/lib", "lib"};
	const char *roots[8];
	size_t nroots = 0;
	char pat[1024], found[1024];
	const char *ld = getenv("LD_LIBRARY_PATH");

	if (getenv("CUDA_HOME"))
		roots[nroots++] = getenv("CUDA_HOME");
	if (getenv("CUDA_PATH"))
		roots[nroots++] = getenv("CUDA_PATH");
	roots[nroots++] = "/usr/local/cuda";
	roots[nroots++] = "/usr/local/cuda-*";
	roots[nroots++] = "/opt/cuda";
	for (size_t i = 0; i < nroots; i++)
		for (size_t k = 0; k < ARRAY_SIZE(subdirs); k++) {
			snprintf(pat, sizeof(pat), "%s/%s/libcupti.so*", roots[i], subdirs[k]);
			if (glob_first(pat, found, sizeof(found)))
				goto ok;
		}
	if (glob_first("/usr/lib/*-linux-gnu/libcupti.so*", found, sizeof(found)) ||
	    glob_first("/usr/lib64/libcupti.so*", found, sizeof(found)) ||
	    glob_first("/usr/local/lib/python3*/dist-packages/nvidia/cuda_cupti/lib/libcupti.so*", found,
		       sizeof(found)))
		goto ok;
	if (ld) {
		char *copy = strdup(ld), *save = NULL;

		for (char *dir = copy ? strtok_r(copy, ":", &save) : NULL; dir; dir = strtok_r(NULL, ":", &save)) {
			snprintf(pat, sizeof(pat), "%s/libcupti.so*", dir);
			if (glob_first(pat, found, sizeof(found))) {
				free(copy);
				goto ok;
			}
		}
		free(copy);
	}
	report(d, d->have_driver ? V_FAIL : V_WARN,
	       "the in-job agent uses the job's own CUPTI 12 or 13 at run time for GPU kernels and copies "
	       "(none is needed to build it): install NVIDIA's CUDA toolkit, or in the job's Python "
	       "environment pip install nvidia-cuda-cupti-cu12 (CUDA 13: nvidia-cuda-cupti; PyTorch's "
	       "CUDA wheels bring it); Debian 12's libcupti11.8 is too old for the agent; then "
	       "set CUDA_HOME or LD_LIBRARY_PATH to its directory",
	       "CUPTI: libcupti.so not found (looked in $CUDA_HOME, /usr/local/cuda*, /usr/lib, "
	       "$LD_LIBRARY_PATH)");
	return;
ok:
	report(d, V_OK, NULL, "CUPTI: %s", found);
}

static void check_paranoid(struct doctor *d)
{
	FILE *f = fopen("/proc/sys/kernel/perf_event_paranoid", "re");
	int v;

	if (!f || fscanf(f, "%d", &v) != 1) {
		if (f)
			fclose(f);
		report(d, V_WARN, "this kernel has no perf events (CONFIG_PERF_EVENTS); CPU counters are unavailable",
		       "perf_event_paranoid: cannot read /proc/sys/kernel/perf_event_paranoid");
		return;
	}
	fclose(f);
	if (v <= 1)
		report(d, V_OK, NULL, "perf_event_paranoid: %d (CPU-wide perf events allowed)", v);
	else
		report(d, geteuid() == 0 ? V_OK : V_WARN,
		       "sysctl -w kernel.perf_event_paranoid=1 (persist in /etc/sysctl.d/), or give profd "
		       "CAP_PERFMON (the systemd unit does)",
		       "perf_event_paranoid: %d (CPU-wide perf events need <= 1 or CAP_PERFMON%s)", v,
		       geteuid() == 0 ? "; running as root" : "");
}

static void check_socket(struct doctor *d, const char *path)
{
	struct stat st;

	if (stat(path, &st) < 0) {
		report(d, V_FAIL,
		       "start profd on this machine (systemctl start profd; it creates the socket), or pass "
		       "the path profd uses with --agent-socket",
		       "agent socket %s: %s", path, strerror(errno));
		return;
	}
	if (!S_ISSOCK(st.st_mode)) {
		report(d, V_FAIL, "remove the file and restart profd, which recreates the socket",
		       "agent socket %s: exists but is not a socket", path);
		return;
	}
	if (access(path, W_OK) < 0) {
		report(d, V_FAIL,
		       "jobs connect as their own user: add it to the socket's group (ls -l shows it) or run "
		       "profd with a more open socket mode",
		       "agent socket %s: not writable by uid %u (%s)", path, (unsigned)geteuid(), strerror(errno));
		return;
	}
	if (strcmp(path, PROFD_AGENT_SOCKET_DEFAULT) != 0)
		report(d, V_OK, NULL, "agent socket %s: present and writable; not the default (%s), so jobs need "
		       "PROFD_AGENT_SOCKET=%s", path, PROFD_AGENT_SOCKET_DEFAULT, path);
	else
		report(d, V_OK, NULL, "agent socket %s: present and writable", path);
}

/* ---- remote ------------------------------------------------------------------- */

static Profd__StatusResponse *check_remote(struct doctor *d, const char *url, int64_t skew_warn_ms)
{
	Profd__StatusRequest req = PROFD__STATUS_REQUEST__INIT;
	ProtobufCMessage *m = NULL;
	struct rpc_client *cl;
	char msg[512] = "";
	int64_t t0, t1;
	int r;

	r = rpc_client_new(url, &cl);
	if (r < 0) {
		report(d, V_FAIL, "check the URL (HOST:PORT or [IPV6]:PORT)", "%s: cannot create a channel: %s",
		       url, strerror(-r));
		return NULL;
	}
	t0 = now_unix_ns();
	r = rpc_client_call(cl, "/profd.Profd/Status", &req.base, &profd__status_response__descriptor, 5000, &m,
			    msg, sizeof(msg));
	t1 = now_unix_ns();
	rpc_client_free(cl);
	if (r == RPC_UNIMPLEMENTED) {
		report(d, V_WARN, "this is a TensorFlow/JAX profiler server, not profd: capture works, the "
		       "daemon checks do not apply",
		       "%s: reachable, but it does not serve /profd.Profd/Status", url);
		return NULL;
	}
	if (r != RPC_OK) {
		report(d, V_FAIL,
		       "start profd there (systemctl start profd), check that it listens on that address "
		       "(profd --listen) and that no firewall blocks the port",
		       "%s: not reachable: %s%s%s", url, r >= 0 ? rpc_code_name(r) : strerror(-r), msg[0] ? ": " : "",
		       msg);
		return NULL;
	}
	Profd__StatusResponse *s = (Profd__StatusResponse *)m;

	report(d, V_OK, NULL, "%s: reachable (profd on %s, round trip %.1f ms)", url, s->hostname,
	       (double)(t1 - t0) / 1e6);
	if (strcmp(s->version, PROFD_VERSION) == 0)
		report(d, V_OK, NULL, "version: daemon %s, profctl %s", s->version, PROFD_VERSION);
	else
		report(d, V_WARN, "upgrade the older of the two so both run the same release",
		       "version: daemon %s, profctl %s differ", s->version, PROFD_VERSION);

	/* The daemon read its clock somewhere inside [t0, t1]. */
	double mid = ((double)t0 + (double)t1) / 2, skew_ms = ((double)s->now_unix_ns - mid) / 1e6;
	double unc_ms = (double)(t1 - t0) / 2e6;

	if (s->now_unix_ns == 0)
		report(d, V_WARN, "upgrade profd", "time skew: the daemon does not report its clock");
	else if (skew_ms - unc_ms > (double)skew_warn_ms || -skew_ms - unc_ms > (double)skew_warn_ms)
		report(d, V_WARN,
		       "synchronize the clocks (chrony or systemd-timesyncd); multi-host captures start at a "
		       "wall-clock instant and their timelines are compared by wall clock",
		       "time skew: the daemon's clock is %+.1f ms from this one (+/- %.1f ms)", skew_ms, unc_ms);
	else
		report(d, V_OK, NULL, "time skew: %+.1f ms (+/- %.1f ms)", skew_ms, unc_ms);

	for (size_t i = 0; i < s->n_collectors; i++) {
		const Profd__CollectorStatus *c = s->collectors[i];

		if (c->available)
			report(d, V_OK, NULL, "collector %s: available", c->name);
		else
			report(d, V_WARN, c->reason && c->reason[0] ? c->reason : "see the daemon's log",
			       "collector %s: unavailable", c->name);
	}
	if (s->n_collectors == 0)
		report(d, V_WARN, "upgrade profd; this build has no collectors and returns empty traces",
		       "collectors: the daemon reports none");
	if (s->n_agents == 0) {
		/* The daemon knows where its agent is (daemon/agent-path.h); profctl may
		 * run on another machine or from another install, so it never guesses. */
		const char *hint = s->agent_hint && s->agent_hint[0]
					   ? s->agent_hint
					   : "start GPU jobs with CUDA_INJECTION64_PATH naming the daemon's "
					     "libprofd-agent.so (its path is in the daemon's log: \"agents connect "
					     "to ...\")";
		const char *sock = s->agent_socket ? s->agent_socket : "";
		/* Jobs find only the default socket by themselves; a daemon
		 * whose hint does not name it yet gets it added here. */
		bool name_sock = sock[0] && strcmp(sock, PROFD_AGENT_SOCKET_DEFAULT) != 0 &&
				 !strstr(hint, "PROFD_AGENT_SOCKET");
		char fix[5120];

		snprintf(fix, sizeof(fix), "%s%s%s, with the job able to write the agent socket", hint,
			 name_sock ? " and PROFD_AGENT_SOCKET=" : "", name_sock ? sock : "");
		report(d, V_WARN, fix,
		       "agents: none connected to %s (GPU kernels are only traced in jobs that load the agent)",
		       s->agent_socket && s->agent_socket[0] ? s->agent_socket : "the daemon");
	} else
		report(d, V_OK, NULL, "agents: %zu connected", s->n_agents);
	return s;
}

static bool is_local(const char *url)
{
	char host[256];
	uint16_t port;

	if (parse_host_port(url, host, sizeof(host), &port) < 0)
		return false;
	return !strcmp(host, "localhost") || !strncmp(host, "127.", 4) || !strcmp(host, "::1");
}

static void help(FILE *f)
{
	fprintf(f,
		"Usage: profctl doctor [URL] [--agent-socket PATH] [--max-skew-ms N]\n"
		"       profctl doctor FILE.xplane.pb...\n"
		"\n"
		"With a FILE (an XSpace, e.g. from profctl capture): which XProf tools would\n"
		"have content (trace viewer, kernel stats, memory profile, framework op stats,\n"
		"overview, input pipeline, roofline, pod viewer), and why not, by XProf's own\n"
		"rules. Exit 1 only when the file cannot be read as an XSpace.\n"
		"\n"
		"Check this machine, and the daemon at URL if given, for what keeps profiles\n"
		"from being complete. Each check prints [ OK ], [WARN], [FAIL] or [SKIP]; every\n"
		"WARN and FAIL is followed by the fix.\n"
		"\n"
		"Local checks:\n"
		"  NVIDIA driver          /proc/driver/nvidia/version\n"
		"  NVML                   dlopen libnvidia-ml.so.1, nvmlInit, GPU count\n"
		"  CUPTI                  libcupti.so under $CUDA_HOME, /usr/local/cuda*,\n"
		"                         /usr/lib, $LD_LIBRARY_PATH (the in-job agent needs it)\n"
		"  perf_event_paranoid    /proc/sys/kernel/perf_event_paranoid\n"
		"  agent socket           exists, is a socket, writable by this user\n"
		"                         (default %s,\n"
		"                         or the daemon's when URL is local)\n"
		"Remote checks (with URL, through /profd.Profd/Status):\n"
		"  reachable, version (vs this profctl), time skew (vs this clock),\n"
		"  collectors available and why not, agents connected\n"
		"\n"
		"Options:\n"
		"      --agent-socket PATH   socket to check (default above)\n"
		"      --max-skew-ms N       clock difference that is still OK (default 50)\n"
		"  -h, --help                this text\n"
		"\n"
		"Exit status: 0 no check failed (warnings allowed); 1 a check failed;\n"
		"2 bad usage.\n",
		PROFD_AGENT_SOCKET_DEFAULT);
}

int cmd_doctor(int argc, char **argv)
{
	enum { OPT_SOCKET = 0x100, OPT_SKEW };
	static const struct option opts[] = {
		{"agent-socket", required_argument, NULL, OPT_SOCKET},
		{"max-skew-ms", required_argument, NULL, OPT_SKEW},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	struct doctor d = {.have_driver = false};
	const char *sock = NULL, *url = NULL;
	Profd__StatusResponse *s = NULL;
	uint64_t skew = 50;
	char host[256];
	uint16_t port;
	struct stat sb;
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) >= 0) {
		switch (c) {
		case 'h':
			help(stdout);
			return PROFCTL_EXIT_OK;
		case OPT_SOCKET:
			sock = optarg;
			break;
		case OPT_SKEW:
			if (safe_atou64(optarg, &skew) < 0 || skew > 3600000)
				return profctl_usage_err("doctor", "--max-skew-ms \"%s\": expected 0-3600000", optarg);
			break;
		default:
			return profctl_usage_err("doctor", "bad option");
		}
	}
	/* Existing files (a glob over a multi-host capture): the XSpace
	 * read-back check of each (profctl-xprofcheck.c). */
	if (optind < argc && stat(argv[optind], &sb) == 0 && S_ISREG(sb.st_mode)) {
		int ret = PROFCTL_EXIT_OK;

		for (int i = optind; i < argc; i++) {
			if (i > optind)
				putchar('\n');
			if (doctor_xspace_file(argv[i]) != PROFCTL_EXIT_OK)
				ret = PROFCTL_EXIT_FAIL;
		}
		return ret;
	}
	if (argc - optind > 1)
		return profctl_usage_err("doctor", "at most one URL");
	if (optind < argc) {
		url = argv[optind];
		if (parse_host_port(url, host, sizeof(host), &port) < 0 || port == 0)
			return profctl_usage_err("doctor", "\"%s\" is not HOST:PORT or [IPV6]:PORT", url);
	}

	printf("Remote (%s):\n", url ? url : "no URL given");
	if (url)
		s = check_remote(&d, url, (int64_t)skew);
	else
		report(&d, V_SKIP, NULL, "daemon checks: pass URL (e.g. localhost:6009) to check a daemon");

	printf("\nLocal (this machine):\n");
	check_driver(&d);
	check_nvml(&d);
	check_cupti(&d);
	check_paranoid(&d);
	if (!sock)
		sock = s && s->agent_socket && s->agent_socket[0] && is_local(url) ? s->agent_socket
										 : PROFD_AGENT_SOCKET_DEFAULT;
	check_socket(&d, sock);
	if (s)
		protobuf_c_message_free_unpacked(&s->base, NULL);

	printf("\n%u ok, %u warning%s, %u failed, %u skipped\n", d.n[V_OK], d.n[V_WARN], d.n[V_WARN] == 1 ? "" : "s",
	       d.n[V_FAIL], d.n[V_SKIP]);
	return d.n[V_FAIL] ? PROFCTL_EXIT_FAIL : PROFCTL_EXIT_OK;
}
