/* SPDX-License-Identifier: MIT */
/*
 * abort-trace.c - an LD_PRELOAD library that prints a backtrace on stderr
 * when the process aborts or faults ("abort-trace:" lines, addresses as
 * object(+offset) for addr2line), then dies as it would have. For jobs
 * of tests/gpu/ on a GPU machine without gdb: which library freed what
 * twice. Not part of profd: built by tools/device-bundle only.
 */
#define _GNU_SOURCE
#include <execinfo.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

static void on_fatal(int sig)
{
	static const char head[] = "abort-trace: backtrace\n";
	void *pc[64];
	int n = backtrace(pc, 64);

	if (write(2, head, sizeof(head) - 1) < 0) {
		/* nothing to do: dying anyway */
	}
	backtrace_symbols_fd(pc, n, 2);
	signal(sig, SIG_DFL);
	raise(sig);
}

__attribute__((constructor)) static void arm(void)
{
	void *pc[1];

	backtrace(pc, 1); /* loads libgcc_s now, not inside the handler */
	signal(SIGABRT, on_fatal);
	signal(SIGSEGV, on_fatal);
}
