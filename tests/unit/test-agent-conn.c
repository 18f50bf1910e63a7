/* SPDX-License-Identifier: MIT */
/*
 * test-agent-conn.c - the agent's socket client against a real listening
 * socket: how often it comes back to a daemon that keeps dropping it.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "agent-conn.h"
#include "harness.h"

static char dir[32], path[64];

static int listener(void)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	snprintf(dir, sizeof(dir), "/tmp/profd-conn-XXXXXX");
	ASSERT_TRUE(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/agent.sock", dir);
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	ASSERT_OK(bind(fd, (struct sockaddr *)&a, sizeof(a)));
	ASSERT_OK(listen(fd, 64));
	return fd;
}

static void cleanup(int lfd)
{
	close(lfd);
	unlink(path);
	rmdir(dir);
}

/* Drive the client for @ms as the agent thread does: connect when due,
 * read, and let a daemon that closes at once (after @say_start, a START
 * frame) drop it. Returns the number of connections the daemon accepted. */
static unsigned run(struct agent_client *c, int lfd, unsigned ms, bool say_start)
{
	uint64_t end = agent_mono_ns() + ms * 1000000ull;
	unsigned accepted = 0;

	while (agent_mono_ns() < end) {
		int fd;

		agent_client_connect(c);
		while ((fd = accept(lfd, NULL, NULL)) >= 0) {
			struct agent_frame_hdr h = { .magic = AGENT_PROTO_MAGIC,
						     .version = AGENT_PROTO_VERSION,
						     .kind = AGENT_FRAME_START };

			accepted++;
			if (say_start)
				ASSERT_EQ(write(fd, &h, sizeof(h)), (int)sizeof(h));
			close(fd); /* refused: connection limit, version mismatch, ... */
		}
		if (c->fd >= 0) {
			struct agent_frame_hdr h;
			uint8_t p[64];

			poll(&(struct pollfd){ .fd = c->fd, .events = POLLIN }, 1, 5);
			while (agent_client_recv(c, &h, p, sizeof(p)) > 0)
				;
		} else {
			usleep(5000);
		}
	}
	return accepted;
}

/* Connections a dropping daemon accepts from one client in @ms; leaves the
 * client's final backoff in *@backoff. */
static unsigned tries(unsigned ms, bool say_start, uint32_t *backoff)
{
	struct agent_client c;
	int lfd = listener();
	unsigned n;

	agent_client_init(&c, path, NULL);
	n = run(&c, lfd, ms, say_start);
	*backoff = c.backoff_ms;
	agent_client_close(&c);
	cleanup(lfd);
	return n;
}

TEST(conn_backs_off_from_a_daemon_that_drops_it)
{
	uint32_t backoff;
	unsigned n = tries(1600, false, &backoff);

	/* Tries at 0, 100, 300, 700 and 1500 ms (waits of 100, 200, 400, 800):
	 * 4 or 5 in 1.6 s, not one per 100 ms. The 4th is due 900 ms before
	 * the end and a 6th only at 3.1 s, so a loaded machine still sees 4 or 5. */
	ASSERT_BETWEEN(n, 4, 5);
	/* the last drop seen (backoff doubled n times) or not yet (n - 1) */
	if (backoff != 100u << n && backoff != 100u << (n - 1))
		TEST_FAIL("after %u tries the backoff is %" PRIu32 " ms, want %u or %u", n, backoff,
			  100u << (n - 1), 100u << n);
}

TEST(conn_comes_back_soon_after_a_healthy_connection)
{
	uint32_t backoff;

	/* a daemon that sent a command proved itself: each drop retries in 100 ms */
	ASSERT_BETWEEN(tries(1000, true, &backoff), 6, 11); /* never reset: 4 */
}

TEST_MAIN()
