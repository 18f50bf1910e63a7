/* SPDX-License-Identifier: MIT */
/*
 * proc-pid-parse.c - see proc-pid-parse.h.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "proc-pid-parse.h"

/* Parse an unsigned decimal at *p (skipping leading blanks); advances *p. */
static int next_u64(const char **p, const char *end, uint64_t *ret)
{
	const char *q = *p;
	uint64_t v = 0;

	while (q < end && (*q == ' ' || *q == '\t'))
		q++;
	if (q >= end || *q < '0' || *q > '9')
		return -EINVAL;
	while (q < end && *q >= '0' && *q <= '9') {
		if (v > (UINT64_MAX - 9) / 10)
			return -EINVAL;
		v = v * 10 + (uint64_t)(*q++ - '0');
	}
	*p = q;
	*ret = v;
	return 0;
}

/* Skip one blank-separated field (which may be signed). */
static int skip_field(const char **p, const char *end)
{
	const char *q = *p;

	while (q < end && *q == ' ')
		q++;
	if (q >= end)
		return -EINVAL;
	while (q < end && *q != ' ' && *q != '\n')
		q++;
	*p = q;
	return 0;
}

int proc_pid_stat_parse(const char *buf, size_t len, struct proc_pid_stat *out)
{
	const char *end = buf + len, *open, *close = NULL, *p;
	struct proc_pid_stat s = {0};
	uint64_t v;

	open = memchr(buf, '(', len);
	if (!open)
		return -EINVAL;
	/* comm may itself contain ")": the last one closes it. */
	for (p = open; p < end; p++)
		if (*p == ')')
			close = p;
	if (!close || close + 2 >= end)
		return -EINVAL;
	size_t n = (size_t)(close - open - 1);
	if (n >= sizeof(s.comm))
		n = sizeof(s.comm) - 1;
	memcpy(s.comm, open + 1, n);
	p = close + 1;
	while (p < end && *p == ' ')
		p++;
	if (p >= end)
		return -EINVAL;
	s.state = *p++;
	/* Fields after state, numbered as in proc(5): ppid is field 4. */
	for (int field = 4; field <= 24; field++) {
		switch (field) {
		case 14: case 15: case 20: case 22: case 24:
			if (next_u64(&p, end, &v) < 0)
				return -EINVAL;
			if (field == 14)
				s.utime = v;
			else if (field == 15)
				s.stime = v;
			else if (field == 20)
				s.num_threads = v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
			else if (field == 22)
				s.starttime = v;
			else
				s.rss_pages = v;
			break;
		default:
			if (skip_field(&p, end) < 0)
				return -EINVAL;
		}
	}
	*out = s;
	return 0;
}

/* The value of "Key:" at line start, as a number; -ENOENT when absent. */
static int status_value(const char *buf, size_t len, const char *key, uint64_t *ret)
{
	size_t klen = strlen(key);
	const char *p = buf, *end = buf + len;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *eol = nl ? nl : end;

		if ((size_t)(eol - p) > klen && memcmp(p, key, klen) == 0 && p[klen] == ':') {
			const char *q = p + klen + 1;

			return next_u64(&q, eol, ret);
		}
		p = eol + 1;
	}
	return -ENOENT;
}

int proc_pid_status_parse(const char *buf, size_t len, uint64_t *ret_rss_bytes,
			  uint32_t *ret_threads)
{
	uint64_t rss_kb = 0, threads = 0;
	int r;

	if (len == 0 || !memchr(buf, ':', len))
		return -EINVAL;
	r = status_value(buf, len, "VmRSS", &rss_kb);
	if (r < 0 && r != -ENOENT)
		return r;
	r = status_value(buf, len, "Threads", &threads);
	if (r < 0 && r != -ENOENT)
		return r;
	*ret_rss_bytes = rss_kb * 1024;
	*ret_threads = threads > UINT32_MAX ? UINT32_MAX : (uint32_t)threads;
	return 0;
}

size_t proc_pid_cmdline_format(const char *buf, size_t len, char *out, size_t out_size)
{
	size_t n = 0;

	if (!out_size)
		return 0;
	while (len && buf[len - 1] == '\0')
		len--;
	for (size_t i = 0; i < len && n + 1 < out_size; i++) {
		unsigned char ch = (unsigned char)buf[i];

		out[n++] = ch == '\0' ? ' ' : (ch < 0x20 || ch == 0x7f) ? '?' : (char)ch;
	}
	out[n] = '\0';
	return n;
}
