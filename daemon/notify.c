/* SPDX-License-Identifier: MIT */
/*
 * notify.c - sd_notify(3)'s datagram protocol without libsystemd.
 *
 * A fresh socket per message: profd sends a handful (READY, STATUS, the
 * watchdog every few seconds, STOPPING), and a kept socket would be one more
 * descriptor for --self-check's "out of descriptors" case to worry about.
 * Runs on the loop thread (main.c).
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/parse.h"
#include "notify.h"

int notify_send(const char *msg)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	size_t n;
	ssize_t w;
	int fd, r = 0;

	if (!path || !*path)
		return 0;
	n = strlen(path);
	if ((path[0] != '/' && path[0] != '@') || n < 2 || n > sizeof(sa.sun_path))
		return -EINVAL;
	/* A path needs its NUL inside sun_path; an abstract name is counted by
	 * the address length and may use the whole array. */
	if (path[0] == '/' && n == sizeof(sa.sun_path))
		return -EINVAL;
	memcpy(sa.sun_path, path, n);
	if (sa.sun_path[0] == '@')
		sa.sun_path[0] = 0;
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	w = sendto(fd, msg, strlen(msg), MSG_NOSIGNAL, (struct sockaddr *)&sa,
		   (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + (path[0] == '/')));
	if (w < 0)
		r = -errno;
	close(fd);
	return r;
}

int notify_status(const char *fmt, ...)
{
	char msg[512] = "STATUS=";
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg + 7, sizeof(msg) - 7, fmt, ap);
	va_end(ap);
	/* One line: a newline would start another assignment. */
	for (char *p = msg; *p; p++)
		if (*p == '\n')
			*p = ' ';
	return notify_send(msg);
}

uint64_t notify_watchdog_ms(void)
{
	const char *usec = getenv("WATCHDOG_USEC"), *pid = getenv("WATCHDOG_PID");
	uint64_t us, p, ms;

	if (!usec || safe_atou64(usec, &us) < 0 || us == 0)
		return 0;
	if (pid && (safe_atou64(pid, &p) < 0 || p != (uint64_t)getpid()))
		return 0;
	ms = us / 2000;
	return ms ? ms : 1;
}
