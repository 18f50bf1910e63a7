/* SPDX-License-Identifier: MIT */
/*
 * log.c - see log.h. Thread-safe: one write(2) per line, so lines from the
 * completion-queue thread and the loop thread never interleave.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#include "log.h"
#include "utf8.h"

int log_max_level = LOG_LEVEL_INFO;
static int to_journal;

static const char *const level_names[8] = {
	[LOG_LEVEL_ERR] = "err",     [LOG_LEVEL_WARN] = "warn",
	[LOG_LEVEL_NOTICE] = "notice", [LOG_LEVEL_INFO] = "info",
	[LOG_LEVEL_DEBUG] = "debug",
};

void log_open(void)
{
	const char *js = getenv("JOURNAL_STREAM");
	struct stat st;
	unsigned long long dev, ino;

	to_journal = 0;
	if (js && sscanf(js, "%llu:%llu", &dev, &ino) == 2 && fstat(STDERR_FILENO, &st) == 0)
		to_journal = (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

int log_parse_level(const char *s, int *ret_level)
{
	for (int i = LOG_LEVEL_ERR; i <= LOG_LEVEL_DEBUG; i++)
		if (strcasecmp(s, level_names[i]) == 0 || (s[0] == '0' + i && s[1] == 0)) {
			*ret_level = i;
			return 0;
		}
	return -EINVAL;
}

int log_internal(int level, int err, const char *topic, const char *fmt, ...)
{
	char line[2048];
	size_t n = 0;
	va_list ap;

	if (to_journal) {
		n = (size_t)snprintf(line, sizeof(line), "<%d>%s: ", level, topic);
	} else {
		struct timespec ts;
		struct tm tm;

		clock_gettime(CLOCK_REALTIME, &ts);
		gmtime_r(&ts.tv_sec, &tm);
		n = strftime(line, sizeof(line), "%Y-%m-%dT%H:%M:%S", &tm);
		n += (size_t)snprintf(line + n, sizeof(line) - n, ".%03ldZ %s %s: ",
				      ts.tv_nsec / 1000000, level_names[level], topic);
	}
	if (n < sizeof(line) - 2) {
		char msg[sizeof(line)];

		va_start(ap, fmt);
		int m = vsnprintf(msg, sizeof(msg), fmt, ap);
		va_end(ap);
		/* Messages carry peer-sent text (session ids, paths, agent,
		 * process and kernel names): a newline in one would start a
		 * forged line, with a journald priority prefix of the peer's
		 * choosing, and a stray byte would make the log invalid UTF-8.
		 * One escaping rule for every line (utf8_escape()). */
		if (m > 0)
			n += utf8_escape(line + n, sizeof(line) - 1 - n, msg, MIN((size_t)m, sizeof(msg) - 1));
	}
	if (err)
		n += (size_t)snprintf(line + n, sizeof(line) - n, ": %s", strerror(abs(err)));
	n = MIN(n, sizeof(line) - 2);
	line[n++] = '\n';
	(void)!write(STDERR_FILENO, line, n);
	return -abs(err);
}
