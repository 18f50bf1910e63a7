/* SPDX-License-Identifier: MIT */
/*
 * proc-parse.c - pure parsers for /proc/stat, /proc/meminfo, /proc/loadavg;
 * see proc-parse.h for the contract.
 *
 * DESIGN
 * ------
 * All three files are line-oriented text that the kernel always ends with
 * '\n'. Each parser walks the buffer line by line with a bounded cursor
 * (struct cur) whose end is the line's '\n', so no helper can run past the
 * line, and no line past @len. A buffer that does not end in '\n' was cut
 * short (a short read, a file rewritten under us) and is refused as a whole
 * rather than half-used: a counter computed from half a file is worse than
 * a gap in the counter track.
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "base/macro.h"
#include "proc-parse.h"

/* A cursor over one line, [p, end): end points at the line's '\n'. */
struct cur {
	const char *p, *end;
};

static inline bool cur_done(const struct cur *c) { return c->p >= c->end; }

static inline bool is_digit(char ch) { return ch >= '0' && ch <= '9'; }

/* Skips one or more blanks. -EINVAL if there is none. */
static int skip_blanks(struct cur *c)
{
	const char *start = c->p;

	while (c->p < c->end && (*c->p == ' ' || *c->p == '\t'))
		c->p++;
	return c->p > start ? 0 : -EINVAL;
}

/* Reads an unsigned decimal of at least one digit. 0, -EINVAL, -ERANGE. */
static int get_u64(struct cur *c, uint64_t *ret)
{
	uint64_t v = 0;
	const char *start = c->p;

	while (c->p < c->end && is_digit(*c->p)) {
		unsigned d = (unsigned)(*c->p - '0');

		if (v > (UINT64_MAX - d) / 10)
			return -ERANGE;
		v = v * 10 + d;
		c->p++;
	}
	if (c->p == start)
		return -EINVAL;
	*ret = v;
	return 0;
}

static int get_u32(struct cur *c, uint32_t *ret)
{
	uint64_t v;
	int r = get_u64(c, &v);

	if (r < 0)
		return r;
	if (v > UINT32_MAX)
		return -ERANGE;
	*ret = (uint32_t)v;
	return 0;
}

static bool skip_prefix(struct cur *c, const char *prefix)
{
	size_t n = strlen(prefix);

	if ((size_t)(c->end - c->p) < n || memcmp(c->p, prefix, n) != 0)
		return false;
	c->p += n;
	return true;
}

/*
 * Iterates the lines of @buf: sets @line to the next one and advances *@pos
 * past its '\n'. Returns 1 for a line, 0 at the end. The caller has checked
 * that the buffer ends in '\n', so every line has one.
 */
static int next_line(const char *buf, size_t len, size_t *pos, struct cur *line)
{
	const char *nl;

	if (*pos >= len)
		return 0;
	nl = memchr(buf + *pos, '\n', len - *pos);
	if (!nl) /* unreachable after the caller's check; refuse anyway */
		return -EINVAL;
	line->p = buf + *pos;
	line->end = nl;
	*pos = (size_t)(nl - buf) + 1;
	return 1;
}

static bool complete(const char *buf, size_t len)
{
	return buf && len > 0 && buf[len - 1] == '\n';
}

/* ---- /proc/stat -------------------------------------------------------- */

/* The columns after "cpuN": 4 on the oldest kernels we accept, 10 today. */
static int parse_cpu_times(struct cur *c, struct proc_cpu_times *ret)
{
	uint64_t v[10] = {0};
	unsigned n = 0;
	int r;

	while (!cur_done(c)) {
		r = skip_blanks(c);
		if (r < 0)
			return r;
		if (cur_done(c))
			break; /* trailing blanks */
		if (n == 10)
			return -EINVAL;
		r = get_u64(c, &v[n]);
		if (r < 0)
			return r;
		n++;
	}
	if (n < 4)
		return -EINVAL;
	*ret = (struct proc_cpu_times){
		.user = v[0], .nice = v[1], .system = v[2], .idle = v[3],
		.iowait = v[4], .irq = v[5], .softirq = v[6], .steal = v[7],
	};
	return 0;
}

int proc_stat_parse(const char *buf, size_t len, struct proc_stat *out)
{
	struct proc_cpu_times total;
	uint64_t ctxt = 0;
	bool have_total = false, have_ctxt = false;
	uint32_t n = 0;
	int64_t last_id = -1;
	size_t pos = 0;
	struct cur line;
	int r;

	if (!out || !complete(buf, len))
		return -EINVAL;
	while ((r = next_line(buf, len, &pos, &line)) > 0) {
		bool first = line.p == buf;

		if (skip_prefix(&line, "cpu")) {
			struct proc_cpu_times t;
			uint64_t id;

			if (!cur_done(&line) && (*line.p == ' ' || *line.p == '\t')) {
				/* The aggregate line, and only as the first line. */
				if (!first)
					return -EINVAL;
				r = parse_cpu_times(&line, &total);
				if (r < 0)
					return r;
				have_total = true;
				continue;
			}
			if (!have_total)
				return -EINVAL;
			r = get_u64(&line, &id);
			if (r < 0)
				return r;
			if (id >= PROC_MAX_CPUS)
				return -ERANGE;
			if ((int64_t)id <= last_id)
				return -EINVAL;
			r = parse_cpu_times(&line, &t);
			if (r < 0)
				return r;
			if (out->cpus) {
				if (n >= out->cpus_cap)
					return -E2BIG;
				out->cpus[n].id = (uint32_t)id;
				out->cpus[n].t = t;
			}
			last_id = (int64_t)id;
			n++;
		} else if (skip_prefix(&line, "ctxt")) {
			if (have_ctxt)
				return -EINVAL;
			r = skip_blanks(&line);
			if (r < 0)
				return r;
			r = get_u64(&line, &ctxt);
			if (r < 0)
				return r;
			if (!cur_done(&line))
				return -EINVAL;
			have_ctxt = true;
		} else if (first || cur_done(&line)) {
			/* The file starts with "cpu" and has no empty lines. */
			return -EINVAL;
		}
		/* Other lines (intr, btime, processes, softirq...) are skipped. */
	}
	if (r < 0)
		return r;
	if (!have_total || !have_ctxt || n == 0)
		return -EINVAL;
	out->total = total;
	out->n_cpus = n;
	out->ctxt = ctxt;
	return 0;
}

/* Adds @b - @a to *@sum. -ERANGE if the counter went backwards or the sum
 * overflows. */
static int add_delta(uint64_t a, uint64_t b, uint64_t *delta, uint64_t *sum)
{
	if (b < a)
		return -ERANGE;
	*delta = b - a;
	return __builtin_add_overflow(*sum, *delta, sum) ? -ERANGE : 0;
}

int proc_cpu_util(const struct proc_cpu_times *prev, const struct proc_cpu_times *cur,
		  double *ret_pct)
{
	uint64_t total = 0, d_idle, d_iowait = 0, d;
	int r = 0;

	/* The kernel documents that per-CPU iowait can go down (the task that
	 * waited moved CPU): read a decrease as "no iowait", not as a reset. */
	if (cur->iowait >= prev->iowait)
		r = add_delta(prev->iowait, cur->iowait, &d_iowait, &total);
	if (r < 0 || (r = add_delta(prev->idle, cur->idle, &d_idle, &total)) < 0 ||
	    (r = add_delta(prev->user, cur->user, &d, &total)) < 0 ||
	    (r = add_delta(prev->nice, cur->nice, &d, &total)) < 0 ||
	    (r = add_delta(prev->system, cur->system, &d, &total)) < 0 ||
	    (r = add_delta(prev->irq, cur->irq, &d, &total)) < 0 ||
	    (r = add_delta(prev->softirq, cur->softirq, &d, &total)) < 0 ||
	    (r = add_delta(prev->steal, cur->steal, &d, &total)) < 0)
		return r;
	if (total == 0)
		return -EAGAIN;
	/* idle + iowait <= total, so busy cannot wrap. Past 2^53 ticks the two
	 * conversions to double round apart and the share can come out a hair
	 * above 100 (found by fuzz-proc): clamp. */
	*ret_pct = MIN(100.0, 100.0 * (double)(total - d_idle - d_iowait) / (double)total);
	return 0;
}

/* ---- /proc/meminfo ----------------------------------------------------- */

enum {
	MI_TOTAL = 1 << 0,
	MI_FREE = 1 << 1,
	MI_AVAILABLE = 1 << 2,
	MI_BUFFERS = 1 << 3,
	MI_CACHED = 1 << 4,
};

static bool is_key_char(char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || is_digit(ch) ||
	       ch == '_' || ch == '(' || ch == ')';
}

int proc_meminfo_parse(const char *buf, size_t len, struct proc_meminfo *out)
{
	static const struct {
		const char *key;
		unsigned bit;
		size_t off;
	} known[] = {
		{"MemTotal", MI_TOTAL, offsetof(struct proc_meminfo, total)},
		{"MemFree", MI_FREE, offsetof(struct proc_meminfo, free)},
		{"MemAvailable", MI_AVAILABLE, offsetof(struct proc_meminfo, available)},
		{"Buffers", MI_BUFFERS, offsetof(struct proc_meminfo, buffers)},
		{"Cached", MI_CACHED, offsetof(struct proc_meminfo, cached)},
	};
	struct proc_meminfo m = {0};
	unsigned seen = 0;
	size_t pos = 0;
	struct cur line;
	int r;

	if (!out || !complete(buf, len))
		return -EINVAL;
	while ((r = next_line(buf, len, &pos, &line)) > 0) {
		const char *key = line.p;
		size_t key_len;
		uint64_t v;

		while (!cur_done(&line) && is_key_char(*line.p))
			line.p++;
		key_len = (size_t)(line.p - key);
		if (key_len == 0 || cur_done(&line) || *line.p != ':')
			return -EINVAL;
		line.p++;
		/* The kernel pads the label to a fixed width itself, so a label
		 * that fills the width is followed by the digits at once. */
		(void)skip_blanks(&line);
		r = get_u64(&line, &v);
		if (r < 0)
			return r;
		if (skip_prefix(&line, " kB")) {
			if (v > UINT64_MAX / 1024)
				return -ERANGE;
			v *= 1024;
		}
		if (!cur_done(&line))
			return -EINVAL;
		for (size_t i = 0; i < ARRAY_SIZE(known); i++) {
			if (strlen(known[i].key) != key_len || memcmp(known[i].key, key, key_len) != 0)
				continue;
			if (seen & known[i].bit)
				return -EINVAL;
			seen |= known[i].bit;
			*(uint64_t *)((char *)&m + known[i].off) = v;
		}
	}
	if (r < 0)
		return r;
	if ((seen & (MI_TOTAL | MI_FREE)) != (MI_TOTAL | MI_FREE))
		return -EINVAL;
	m.has_available = seen & MI_AVAILABLE;
	if (!m.has_available) {
		/* The pre-3.14 estimate; it overstates what can be had. */
		if (__builtin_add_overflow(m.free, m.buffers, &m.available) ||
		    __builtin_add_overflow(m.available, m.cached, &m.available))
			return -ERANGE;
	}
	*out = m;
	return 0;
}

/* ---- /proc/loadavg ----------------------------------------------------- */

/*
 * A load average as the kernel prints it ("%lu.%02lu"). At most 9 integer
 * and 6 fraction digits, so the scaled integer stays below 2^53 and the one
 * division below rounds once: "0.52" gives the double nearest to 0.52.
 */
static int get_decimal(struct cur *c, double *ret)
{
	uint64_t ip = 0, frac = 0, scale = 1;
	unsigned n_int = 0, n_frac = 0;

	while (c->p < c->end && is_digit(*c->p)) {
		if (++n_int > 9)
			return -ERANGE;
		ip = ip * 10 + (uint64_t)(*c->p++ - '0');
	}
	if (n_int == 0 || cur_done(c) || *c->p != '.')
		return -EINVAL;
	c->p++;
	while (c->p < c->end && is_digit(*c->p)) {
		if (++n_frac > 6)
			return -ERANGE;
		frac = frac * 10 + (uint64_t)(*c->p++ - '0');
		scale *= 10;
	}
	if (n_frac == 0)
		return -EINVAL;
	*ret = (double)(ip * scale + frac) / (double)scale;
	return 0;
}

int proc_loadavg_parse(const char *buf, size_t len, struct proc_loadavg *out)
{
	struct proc_loadavg l;
	size_t pos = 0;
	struct cur c;
	int r;

	if (!out || !complete(buf, len))
		return -EINVAL;
	r = next_line(buf, len, &pos, &c);
	if (r <= 0)
		return -EINVAL;
	if (pos != len) /* exactly one line */
		return -EINVAL;
	if ((r = get_decimal(&c, &l.load1)) < 0 || (r = skip_blanks(&c)) < 0 ||
	    (r = get_decimal(&c, &l.load5)) < 0 || (r = skip_blanks(&c)) < 0 ||
	    (r = get_decimal(&c, &l.load15)) < 0 || (r = skip_blanks(&c)) < 0 ||
	    (r = get_u32(&c, &l.running)) < 0)
		return r;
	if (!skip_prefix(&c, "/"))
		return -EINVAL;
	if ((r = get_u32(&c, &l.threads)) < 0 || (r = skip_blanks(&c)) < 0 ||
	    (r = get_u32(&c, &l.last_pid)) < 0)
		return r;
	if (!cur_done(&c))
		return -EINVAL;
	*out = l;
	return 0;
}
