/* SPDX-License-Identifier: MIT */
/*
 * agent-rx-socket.c - the gpu.agent receiver's listening socket
 * (agent-rx.h, agent-receiver.h): is another profd on the path, is its
 * directory safe, bind it with the asked mode and group, listen. Plain
 * syscalls at init (and from main.c's start-up check); it owns no state:
 * the fd it returns is agent-receiver.c's.
 */
#define _GNU_SOURCE
#define LOG_TOPIC "collector.agent"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "agent-receiver.h"
#include "agent-rx.h"
#include "base/log.h"

bool rx_socket_alive(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool alive;

	if (fd < 0)
		return false;
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	alive = connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
	close(fd);
	return alive;
}

/*
 * The socket's directory must be one only root or profd's own user can
 * change, or a sticky one of theirs (like /tmp, where nobody may remove or
 * rename what profd made). Otherwise its other writer could swap what is at
 * the socket's path at any moment, and anything profd did there by path
 * would land on what they chose. @st is the directory's fstat().
 */
static bool dir_safe(const struct stat *st)
{
	bool owner_ok = st->st_uid == 0 || st->st_uid == geteuid();

	return owner_ok && ((st->st_mode & 0022) == 0 || (st->st_mode & S_ISVTX));
}

/* The error for an unsafe directory; its length (snprintf's), as a
 * collector's reason may cut it where main.c's buffer holds all of it. */
static int dir_unsafe_why(const char *dir, const struct stat *st, char *why, size_t why_size)
{
	return snprintf(why, why_size, "agent socket directory %s (owner uid %u, mode %04o) can be changed "
			"by users other than root and profd's (uid %u): chmod go-w it and give it to root "
			"or profd's user, or make it sticky (chmod +t), or pass --agent-socket in a "
			"directory of profd's own", dir, (unsigned)st->st_uid,
			(unsigned)(st->st_mode & 07777), (unsigned)geteuid());
}

/* Split @path into its directory (".": none) and last component. */
static void split_path(const char *path, char *dir, size_t dir_size, const char **name)
{
	const char *slash = strrchr(path, '/');

	if (!slash) {
		snprintf(dir, dir_size, ".");
		*name = path;
	} else {
		snprintf(dir, dir_size, "%.*s", slash == path ? 1 : (int)(slash - path), path);
		*name = slash + 1;
	}
}

int agent_receiver_check_dir(const char *socket_path, char *why, size_t why_size)
{
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
	const char *name;
	struct stat st;

	if (!socket_path || !*socket_path || strlen(socket_path) >= sizeof(dir))
		return 0; /* no socket, or agent_probe() says why not */
	split_path(socket_path, dir, sizeof(dir), &name);
	if (stat(dir, &st) < 0)
		return 0; /* agent_init() makes it, or says why it cannot */
	if (!S_ISDIR(st.st_mode) || dir_safe(&st))
		return 0;
	return dir_unsafe_why(dir, &st, why, why_size) < 0 ? -EIO : -EPERM;
}

/* bind() @fd at @name in the directory @dfd: through /proc/self/fd, so the
 * directory is the one opened and checked, whatever its path names now;
 * by @path only where /proc is not mounted (or the name does not fit). */
static int bind_in(int fd, int dfd, const char *name, const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	size_t n = (size_t)snprintf(a.sun_path, sizeof(a.sun_path), "/proc/self/fd/%d/%s", dfd, name);

	if (n < sizeof(a.sun_path)) {
		if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0)
			return 0;
		if (errno != ENOENT || access("/proc/self/fd", F_OK) == 0)
			return -errno;
	}
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	return bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 ? 0 : -errno;
}

/* Bind and listen with plain syscalls first, so a failure leaves no libuv
 * handle behind (a handle closed now would still be on the loop's closing
 * list when a failed daemon start frees the collectors).
 *
 * No step names the socket by its full path after the directory was
 * checked: the directory is opened once, checked on that fd (dir_safe()),
 * and the socket is bound through the fd (/proc/self/fd/N/NAME; the plain
 * path only where /proc is missing). The file is born with its mode: bind()
 * gives it the socket inode's 0777 less the umask, so the umask is
 * ~MODE around bind() (process-wide, but at collector init nothing else
 * creates files); no chmod() follows. The group is set with fchownat(...,
 * AT_SYMLINK_NOFOLLOW) in the opened directory: had anyone swapped a link in
 * meanwhile, the link itself would get the group, never its target. Until
 * listen() every connect() is refused anyway, so there is no moment at
 * which the socket is reachable more widely than asked. */
int rx_listen_socket(const struct agent_receiver_cfg *cfg, const char *path, const char **step,
			 char *why, size_t why_size)
{
	mode_t mode = cfg->socket_mode ? (mode_t)cfg->socket_mode : 0666;
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
	const char *name;
	struct stat st;
	int fd = -1, dfd, r;
	mode_t old_umask;

	split_path(path, dir, sizeof(dir), &name);
	*step = "open its directory";
	dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	if (fstat(dfd, &st) < 0) {
		r = -errno;
		goto fail;
	}
	if (!dir_safe(&st)) {
		r = dir_unsafe_why(dir, &st, why, why_size) < 0 ? -EIO : -EPERM;
		goto fail;
	}
	*step = "socket";
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		r = -errno;
		goto fail;
	}
	*step = "bind";
	old_umask = umask(0777 & ~mode);
	r = bind_in(fd, dfd, name, path);
	umask(old_umask);
	if (r < 0)
		goto fail;
	*step = "chown (--agent-socket-group)";
	if (cfg->socket_chgrp && fchownat(dfd, name, (uid_t)-1, cfg->socket_gid, AT_SYMLINK_NOFOLLOW) < 0)
		goto fail_unlink;
	*step = "listen";
	if (listen(fd, 64) < 0)
		goto fail_unlink;
	close(dfd);
	return fd;
fail_unlink:
	r = -errno;
	unlinkat(dfd, name, 0); /* ours: bound a moment ago */
fail:
	if (fd >= 0)
		close(fd);
	close(dfd);
	return r;
}
