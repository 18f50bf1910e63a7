/* SPDX-License-Identifier: MIT */
/*
 * profctl.c - command-line client for profd and any TensorFlow/JAX
 * profiler server: main, subcommand dispatch and the top-level help.
 *
 * Each subcommand lives in its own file (profctl-<name>.c), parses its own
 * options with getopt_long and prints its own --help. Everything they share
 * is in profctl.h.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/macro.h"
#include "config.h"
#include "profctl.h"
#include "rpc.h"

struct subcommand {
	const char *name;
	int (*fn)(int argc, char **argv);
	bool needs_grpc;
	const char *summary;
};

static const struct subcommand subcommands[] = {
	{"capture", cmd_capture, true, "capture a profile from one or more hosts into a TensorBoard logdir"},
	{"monitor", cmd_monitor, true, "print a server's Monitor text (once, or repeatedly with --watch)"},
	{"terminate", cmd_terminate, true, "stop a running capture early (its data is still returned)"},
	{"status", cmd_status, true, "show a profd daemon's version, sessions, collectors and agents"},
	{"export", cmd_export, false, "convert an .xplane.pb file to Perfetto / Chrome trace JSON"},
	{"top", cmd_top, false, "summarize an .xplane.pb: top kernels, GPU busy %, copies, processes"},
	{"flame", cmd_flame, false, "flame graph (SVG or folded) of GPU time by Python launch stack"},
	{"doctor", cmd_doctor, true, "check this machine (and optionally a daemon) for profiling problems"},
	{"record", cmd_record, true, "start, stop or show the flight recorder of profd daemons"},
	{"snapshot", cmd_snapshot, true, "write the flight recorder's last seconds of many hosts, one span"},
};

static const char *current_sub = "profctl";

int profctl_err(int code, const char *fmt, ...)
{
	va_list ap;

	if (strcmp(current_sub, "profctl") == 0)
		fprintf(stderr, "profctl: ");
	else
		fprintf(stderr, "profctl %s: ", current_sub);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return code;
}

int profctl_usage_err(const char *sub, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "profctl %s: ", sub);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry 'profctl %s --help'.\n", sub);
	return PROFCTL_EXIT_USAGE;
}

/*
 * Security options (rpc_client_auth): accepted before or after the command
 * name, for every command, and taken out of argv before the command parses
 * its own options, so that no subcommand needs to know about them.
 * 1: taken (with its value), 0: not one, -1: missing value.
 */
static int take_security_option(char **argv, int i, int argc, struct rpc_client_auth *a, int *ret_used)
{
	const struct {
		const char *name;
		const char **slot;
	} opts[] = {
		{"--tls-ca", &a->tls_ca},
		{"--tls-cert", &a->tls_cert},
		{"--tls-key", &a->tls_key},
		{"--tls-server-name", &a->tls_server_name},
		{"--token-file", &a->token_file},
	};

	for (size_t k = 0; k < ARRAY_SIZE(opts); k++) {
		size_t n = strlen(opts[k].name);
		const char **slot = opts[k].slot;

		if (strncmp(argv[i], opts[k].name, n) != 0)
			continue;
		if (argv[i][n] == '=') {
			*slot = argv[i] + n + 1;
			*ret_used = 1;
			return 1;
		}
		if (argv[i][n] != 0)
			continue;
		if (i + 1 >= argc) {
			fprintf(stderr, "profctl: %s needs a value\nTry 'profctl --help'.\n", opts[k].name);
			return -1;
		}
		*slot = argv[i + 1];
		*ret_used = 2;
		return 1;
	}
	return 0;
}

/* Remove the security options from argv (up to a "--"); 0, or -1 after a
 * usage message. */
static int strip_security_options(int *argc, char **argv, struct rpc_client_auth *a)
{
	int i = 1, used;

	while (i < *argc && strcmp(argv[i], "--") != 0) {
		int r = take_security_option(argv, i, *argc, a, &used);

		if (r < 0)
			return -1;
		if (r == 0) {
			i++;
			continue;
		}
		memmove(&argv[i], &argv[i + used], (size_t)(*argc - i - used + 1) * sizeof(*argv));
		*argc -= used;
	}
	return 0;
}

static void help(FILE *f)
{
	fprintf(f,
		"Usage: profctl COMMAND [OPTIONS] [ARGS]\n"
		"\n"
		"Client for profd and any server of tensorflow.ProfilerService (TensorFlow,\n"
		"JAX). Captures land where TensorBoard/XProf look for them; exported traces\n"
		"open in ui.perfetto.dev and chrome://tracing.\n"
		"\n"
		"Commands:\n");
	for (size_t i = 0; i < ARRAY_SIZE(subcommands); i++)
		fprintf(f, "  %-10s %s\n", subcommands[i].name, subcommands[i].summary);
	fprintf(f,
		"\n"
		"Run 'profctl COMMAND --help' for a command's options.\n"
		"\n"
		"URLs are HOST:PORT, [IPV6]:PORT or grpc://HOST:PORT (profd and TensorFlow\n"
		"servers conventionally listen on port 6009).\n"
		"\n"
		"Examples:\n"
		"  profctl capture node1:6009,node2:6009 --logdir /tmp/tb --duration-ms 2000\n"
		"  profctl top /tmp/tb/plugins/profile/*/node1_6009.xplane.pb\n"
		"  profctl export node1_6009.xplane.pb -o trace.json.gz\n"
		"  profctl flame /tmp/tb/plugins/profile/SESSION -o gpu.svg\n"
		"  profctl doctor localhost:6009\n"
		"\n"
		"Exit status: 0 success; 1 the operation failed (no host returned data, the\n"
		"RPC failed, a doctor check failed); 2 bad command line.\n"
		"\n"
		"Options:\n"
		"  -h, --help     this text\n"
		"      --version  print the version\n"
		"\n"
		"Security (any command, before or after its name; docs/security.md):\n"
		"      --tls-ca FILE           use TLS; trust server certificates signed by\n"
		"                              these PEM CAs\n"
		"      --tls-cert FILE         client certificate (PEM) for mutual TLS ...\n"
		"      --tls-key FILE          ... and its private key\n"
		"      --tls-server-name NAME  the name the server certificate must carry, when\n"
		"                              it differs from the URL's host\n"
		"      --token-file FILE       send \"authorization: Bearer <token>\", the token\n"
		"                              being the file's trimmed content\n");
}

int main(int argc, char **argv)
{
	const struct subcommand *sc = NULL;
	struct rpc_client_auth auth;
	char err[512] = "";
	int r;

	memset(&auth, 0, sizeof(auth));
	if (strip_security_options(&argc, argv, &auth) < 0)
		return PROFCTL_EXIT_USAGE;
	if (argc < 2) {
		help(stderr);
		return PROFCTL_EXIT_USAGE;
	}
	if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "help") == 0) {
		if (argc > 2 && strcmp(argv[1], "help") == 0) {
			/* "profctl help capture" == "profctl capture --help" */
			char *hv[] = {argv[2], (char *)"--help", NULL};

			for (size_t i = 0; i < ARRAY_SIZE(subcommands); i++)
				if (strcmp(subcommands[i].name, argv[2]) == 0) {
					current_sub = subcommands[i].name;
					return subcommands[i].fn(2, hv);
				}
		}
		help(stdout);
		return PROFCTL_EXIT_OK;
	}
	if (strcmp(argv[1], "--version") == 0) {
		printf("profctl %s\n", PROFD_VERSION);
		return PROFCTL_EXIT_OK;
	}
	for (size_t i = 0; i < ARRAY_SIZE(subcommands); i++)
		if (strcmp(subcommands[i].name, argv[1]) == 0)
			sc = &subcommands[i];
	if (!sc) {
		fprintf(stderr, "profctl: unknown command \"%s\"\nTry 'profctl --help'.\n", argv[1]);
		return PROFCTL_EXIT_USAGE;
	}
	current_sub = sc->name;
	r = rpc_client_set_auth(&auth, err, sizeof(err));
	if (r < 0)
		return profctl_err(PROFCTL_EXIT_USAGE, "%s", err[0] ? err : strerror(-r));
	if (sc->needs_grpc)
		rpc_global_init();
	r = sc->fn(argc - 1, argv + 1);
	if (sc->needs_grpc)
		rpc_global_shutdown();
	return r;
}
