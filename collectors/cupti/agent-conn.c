/* SPDX-License-Identifier: MIT */
/*
 * agent-conn.c - the agent's socket client; see agent-conn.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "agent-conn.h"

#define BACKOFF_MIN_MS 100u
#define BACKOFF_MAX_MS 5000u

uint64_t agent_mono_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

uint64_t agent_wall_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_REALTIME, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

void agent_client_init(struct agent_client *c, const char *path, const char *dflt)
{
	const char *env = getenv(AGENT_SOCKET_ENV);

	memset(c, 0, sizeof(*c));
	c->fd = -1;
	c->backoff_ms = BACKOFF_MIN_MS;
	c->send_timeout_ms = 2000;
	c->version = AGENT_PROTO_VERSION;
	snprintf(c->path, sizeof(c->path), "%s", path ? path : env && *env ? env : dflt);
}

/* Wait the current backoff before the next attempt and double it. */
static void schedule_retry(struct agent_client *c, uint64_t now)
{
	c->next_try_ns = now + (uint64_t)c->backoff_ms * 1000000ull;
	c->backoff_ms = c->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : c->backoff_ms * 2;
}

void agent_client_close(struct agent_client *c)
{
	uint64_t now = agent_mono_ns();

	if (c->fd >= 0) {
		close(c->fd);
		if (c->heard || now - c->connected_ns >= AGENT_HEALTHY_MS * 1000000ull)
			c->backoff_ms = BACKOFF_MIN_MS; /* a daemon that went away: come back soon */
	}
	c->fd = -1;
	c->rlen = 0;
	c->heard = false;
	schedule_retry(c, now);
}

int agent_client_connect(struct agent_client *c)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd, r;

	if (c->fd >= 0)
		return 0;
	if (agent_mono_ns() < c->next_try_ns)
		return -EAGAIN;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", c->path);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		static atomic_flag told = ATOMIC_FLAG_INIT;

		r = -errno;
		close(fd);
		/* The job's only sign that profd is not where it looks: one line,
		 * once per process (retries stay quiet). */
		if (!atomic_flag_test_and_set(&told))
			fprintf(stderr, "profd agent: cannot reach profd's agent socket %s (%s); no GPU profiling "
				"until it can. If profd listens elsewhere (profd --agent-socket), set "
				AGENT_SOCKET_ENV "=<that path> for this job\n", c->path, strerror(-r));
		schedule_retry(c, agent_mono_ns());
		return r;
	}
	c->fd = fd;
	c->rlen = 0;
	c->heard = false;
	c->connected_ns = agent_mono_ns();
	return 0;
}

/* Write all of @iov, waiting for room at most the send timeout overall. */
static int write_all(struct agent_client *c, struct iovec *iov, int n)
{
	uint64_t deadline = agent_mono_ns() + c->send_timeout_ms * 1000000ull;

	while (n > 0) {
		struct msghdr m = { .msg_iov = iov, .msg_iovlen = (size_t)n };
		ssize_t w = sendmsg(c->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (w < 0) {
			struct pollfd p = { .fd = c->fd, .events = POLLOUT };
			uint64_t now = agent_mono_ns();

			if (errno == EINTR)
				continue;
			if (errno != EAGAIN || now >= deadline)
				return errno == EAGAIN ? -ETIMEDOUT : -errno;
			poll(&p, 1, (int)((deadline - now) / 1000000ull) + 1);
			continue;
		}
		while (n > 0 && (size_t)w >= iov->iov_len) {
			w -= (ssize_t)iov->iov_len;
			iov++;
			n--;
		}
		if (n > 0) {
			iov->iov_base = (char *)iov->iov_base + w;
			iov->iov_len -= (size_t)w;
		}
	}
	return 0;
}

int agent_client_send(struct agent_client *c, uint16_t kind, const void *payload, uint32_t len)
{
	struct agent_frame_hdr h = {
		.magic = AGENT_PROTO_MAGIC, .version = c->version, .kind = kind, .length = len,
	};
	struct iovec iov[2] = { { &h, sizeof(h) }, { (void *)payload, len } };
	int r;

	if (c->fd < 0)
		return -ENOTCONN;
	r = write_all(c, iov, len ? 2 : 1);
	if (r < 0)
		agent_client_close(c);
	return r;
}

int agent_client_recv(struct agent_client *c, struct agent_frame_hdr *h, void *payload, size_t max)
{
	if (c->fd < 0)
		return -ENOTCONN;
	for (;;) {
		if (c->rlen >= sizeof(*h)) {
			memcpy(h, c->rbuf, sizeof(*h));
			if (h->magic != AGENT_PROTO_MAGIC || h->version != c->version ||
			    h->length > max || h->length > sizeof(c->rbuf) - sizeof(*h) ||
			    (h->kind != AGENT_FRAME_START && h->kind != AGENT_FRAME_STOP &&
			     h->kind != AGENT_FRAME_FLUSH)) {
				agent_client_close(c);
				return -EBADMSG;
			}
			if (c->rlen >= sizeof(*h) + h->length) {
				size_t n = sizeof(*h) + h->length;

				memcpy(payload, c->rbuf + sizeof(*h), h->length);
				memmove(c->rbuf, c->rbuf + n, c->rlen - n);
				c->rlen -= n;
				c->heard = true;
				return 1;
			}
		}
		ssize_t r = recv(c->fd, c->rbuf + c->rlen, sizeof(c->rbuf) - c->rlen, MSG_DONTWAIT);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EAGAIN)
			return 0;
		if (r <= 0) {
			int e = r < 0 ? -errno : -ECONNRESET;

			agent_client_close(c);
			return e;
		}
		c->rlen += (size_t)r;
	}
}

static void read_file(const char *path, char *out, size_t size, bool nul_to_space)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	out[0] = 0;
	if (fd < 0)
		return;
	n = read(fd, out, size - 1);
	close(fd);
	if (n <= 0)
		return;
	out[n] = 0;
	while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == 0))
		out[--n] = 0;
	if (nul_to_space)
		for (ssize_t i = 0; i < n; i++)
			if (out[i] == 0)
				out[i] = ' ';
}

void agent_client_hello(struct agent_hello *h, uint32_t n_devices)
{
	memset(h, 0, sizeof(*h));
	h->pid = (uint32_t)getpid();
	h->ppid = (uint32_t)getppid();
	h->proto_version = AGENT_PROTO_VERSION;
	h->n_devices = n_devices;
	read_file("/proc/self/comm", h->name, sizeof(h->name), false);
	read_file("/proc/self/cmdline", h->cmdline, sizeof(h->cmdline), true);
}
