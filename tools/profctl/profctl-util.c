/* SPDX-License-Identifier: MIT */
/*
 * profctl-util.c - output writer, atomic files, JSON and number formatting
 * shared by the profctl subcommands.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/macro.h"
#include "profctl-gzip.h"
#include "profctl.h"

#define OW_BUF (256u << 10)

int64_t now_unix_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void profctl_run_name(char *buf, size_t size)
{
	time_t t = time(NULL);
	struct tm tm;

	localtime_r(&t, &tm);
	strftime(buf, size, "%Y_%m_%d_%H_%M_%S", &tm);
}

const char *fmt_bytes(uint64_t n, char *buf, size_t size)
{
	static const char *const unit[] = {"B", "kB", "MB", "GB", "TB"};
	double v = (double)n;
	unsigned u = 0;

	while (v >= 1000 && u + 1 < ARRAY_SIZE(unit)) {
		v /= 1000;
		u++;
	}
	if (u == 0)
		snprintf(buf, size, "%" PRIu64 " B", n);
	else
		snprintf(buf, size, "%.*f %s", v < 10 ? 2 : v < 100 ? 1 : 0, v, unit[u]);
	return buf;
}

const char *fmt_ps(double ps, char *buf, size_t size)
{
	if (ps >= 1e12)
		snprintf(buf, size, "%.3f s", ps / 1e12);
	else if (ps >= 1e9)
		snprintf(buf, size, "%.3f ms", ps / 1e9);
	else
		snprintf(buf, size, "%.3f us", ps / 1e6);
	return buf;
}

int mkdir_p(const char *path, unsigned mode)
{
	char *p = strdup(path);
	int r = 0;

	if (!p)
		return -ENOMEM;
	for (char *s = p + 1;; s++) {
		if (*s != '/' && *s != 0)
			continue;
		char c = *s;

		*s = 0;
		if (mkdir(p, mode) < 0 && errno != EEXIST) {
			r = -errno;
			break;
		}
		*s = c;
		if (!c)
			break;
	}
	free(p);
	return r;
}

static int parent_dir(const char *path, char *dir, size_t size)
{
	const char *sl = strrchr(path, '/');

	if (!sl) {
		snprintf(dir, size, ".");
		return 0;
	}
	if ((size_t)(sl - path) + 1 > size)
		return -ENAMETOOLONG;
	if (sl == path)
		snprintf(dir, size, "/");
	else
		snprintf(dir, size, "%.*s", (int)(sl - path), path);
	return 0;
}

static int open_tmp(const char *path, char **ret_tmp)
{
	size_t n = strlen(path) + sizeof(".tmp.XXXXXX");
	char *tmp = malloc(n);
	int fd;

	if (!tmp)
		return -ENOMEM;
	snprintf(tmp, n, "%s.tmp.XXXXXX", path);
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		int r = -errno;

		free(tmp);
		return r;
	}
	(void)fchmod(fd, 0644);
	*ret_tmp = tmp;
	return fd;
}

int write_file_atomic(const char *path, const void *data, size_t len)
{
	char dir[PATH_MAX], *tmp = NULL;
	const uint8_t *p = data;
	int fd, r;

	r = parent_dir(path, dir, sizeof(dir));
	if (r < 0)
		return r;
	r = mkdir_p(dir, 0755);
	if (r < 0)
		return r;
	fd = open_tmp(path, &tmp);
	if (fd < 0)
		return fd;
	while (len > 0) {
		ssize_t k = write(fd, p, len);

		if (k < 0) {
			if (errno == EINTR)
				continue;
			r = -errno;
			goto fail;
		}
		p += k;
		len -= (size_t)k;
	}
	if (fsync(fd) < 0 || close(fd) < 0) {
		r = -errno;
		fd = -1;
		goto fail;
	}
	fd = -1;
	if (rename(tmp, path) < 0) {
		r = -errno;
		goto fail;
	}
	free(tmp);
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	unlink(tmp);
	free(tmp);
	return r;
}

/* ---- output writer ---------------------------------------------------- */

int ow_open(struct ow *w, const char *path, bool gzip)
{
	memset(w, 0, sizeof(*w));
	w->fd = -1;
	w->gzip = gzip;
	w->cap = OW_BUF;
	w->buf = malloc(w->cap);
	if (!w->buf)
		return -ENOMEM;
	if (gzip) {
		/* Compressed on a second thread (profctl-gzip.c). */
		int r = owz_start(w, OW_BUF);

		if (r < 0) {
			ow_abort(w);
			return r;
		}
	}
	if (strcmp(path, "-") == 0) {
		w->fd = STDOUT_FILENO;
		w->is_stdout = true;
		return 0;
	}
	w->path = strdup(path);
	if (!w->path) {
		ow_abort(w);
		return -ENOMEM;
	}
	w->fd = open_tmp(path, &w->tmp_path);
	if (w->fd < 0) {
		int r = w->fd;

		w->fd = -1;
		ow_abort(w);
		return r;
	}
	return 0;
}

static void write_all(struct ow *w, const uint8_t *p, size_t n)
{
	while (n > 0 && !w->err) {
		ssize_t k = write(w->fd, p, n);

		if (k < 0) {
			if (errno != EINTR)
				w->err = -errno;
			continue;
		}
		p += k;
		n -= (size_t)k;
		w->bytes_out += (uint64_t)k;
	}
}

static void ow_flush(struct ow *w, bool finish)
{
	if (w->gzip)
		owz_flush(w, finish);
	else
		write_all(w, w->buf, w->len);
	w->len = 0;
}

void ow_write(struct ow *w, const void *p, size_t n)
{
	const uint8_t *s = p;

	while (n > 0) {
		size_t k = w->cap - w->len < n ? w->cap - w->len : n;

		memcpy(w->buf + w->len, s, k);
		w->len += k;
		s += k;
		n -= k;
		if (w->len == w->cap)
			ow_flush(w, false);
	}
}

void ow_printf(struct ow *w, const char *fmt, ...)
{
	char tmp[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n < sizeof(tmp)) {
		ow_write(w, tmp, (size_t)n);
		return;
	}
	char *big = malloc((size_t)n + 1);

	if (!big) {
		w->err = -ENOMEM;
		return;
	}
	va_start(ap, fmt);
	vsnprintf(big, (size_t)n + 1, fmt, ap);
	va_end(ap);
	ow_write(w, big, (size_t)n);
	free(big);
}

static void ow_release(struct ow *w)
{
	owz_free(w);
	free(w->buf);
	free(w->path);
	free(w->tmp_path);
	memset(w, 0, sizeof(*w));
	w->fd = -1;
}

int ow_commit(struct ow *w)
{
	int r;

	ow_flush(w, true);
	if (w->z)
		owz_finish(w);
	r = w->err;
	if (!w->is_stdout && w->fd >= 0) {
		if (!r && fsync(w->fd) < 0)
			r = -errno;
		if (close(w->fd) < 0 && !r)
			r = -errno;
		w->fd = -1;
		if (!r && rename(w->tmp_path, w->path) < 0)
			r = -errno;
		if (r)
			unlink(w->tmp_path);
	}
	ow_release(w);
	return r;
}

void ow_abort(struct ow *w)
{
	if (w->z)
		owz_finish(w); /* the thread may still be writing to w->fd */
	if (!w->is_stdout && w->fd >= 0) {
		close(w->fd);
		if (w->tmp_path)
			unlink(w->tmp_path);
	}
	ow_release(w);
}

/* ---- JSON --------------------------------------------------------------- */

size_t utf8_len(const uint8_t *p, size_t n)
{
	uint8_t c = p[0];
	size_t k;
	uint32_t cp;

	if (c < 0xc2 || c > 0xf4)
		return 0;
	k = c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
	if (k > n)
		return 0;
	cp = c & (0x7f >> k);
	for (size_t i = 1; i < k; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (p[i] & 0x3f);
	}
	if ((k == 3 && (cp < 0x800 || (cp >= 0xd800 && cp < 0xe000))) || (k == 4 && (cp < 0x10000 || cp > 0x10ffff)))
		return 0;
	return k;
}

static bool json_keep(uint8_t c) { return c >= 0x20 && c != '"' && c != '\\'; }

static void json_subst(struct ow *w, uint8_t c)
{
	switch (c) {
	case '"': ow_write(w, "\\\"", 2); break;
	case '\\': ow_write(w, "\\\\", 2); break;
	case '\n': ow_write(w, "\\n", 2); break;
	case '\t': ow_write(w, "\\t", 2); break;
	case '\r': ow_write(w, "\\r", 2); break;
	default:
		if (c < 0x20)
			ow_printf(w, "\\u%04x", c);
		else
			ow_write(w, "\\ufffd", 6);
	}
}

void json_escape(struct ow *w, const char *s, size_t len)
{
	ow_escape(w, s, len, json_keep, json_subst);
}

/* XML text and attribute values: the five markup characters as entities;
 * what XML 1.0 cannot hold at all (invalid UTF-8, control characters but
 * tab and newline) as U+FFFD, so that any name keeps the SVG well-formed. */
static bool xml_keep(uint8_t c)
{
	return (c >= 0x20 && c != 0x7f && c != '&' && c != '<' && c != '>' && c != '"' && c != '\'') || c == '\n' ||
	       c == '\t';
}

static void xml_subst(struct ow *w, uint8_t c)
{
	switch (c) {
	case '&': ow_puts(w, "&amp;"); break;
	case '<': ow_puts(w, "&lt;"); break;
	case '>': ow_puts(w, "&gt;"); break;
	case '"': ow_puts(w, "&quot;"); break;
	case '\'': ow_puts(w, "&apos;"); break;
	default: ow_puts(w, "&#xfffd;");
	}
}

void xml_escape(struct ow *w, const char *s, size_t len)
{
	ow_escape(w, s, len, xml_keep, xml_subst);
}

/*
 * Integers without printf: an export writes several per event (tens of
 * millions for a large capture), and vfprintf's format parsing was a fifth
 * of its time. Digits are produced back to front.
 */
void ow_u64(struct ow *w, uint64_t v)
{
	char tmp[20], *p = tmp + sizeof(tmp);

	do {
		*--p = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	ow_write(w, p, (size_t)(tmp + sizeof(tmp) - p));
}

void ow_i64(struct ow *w, int64_t v)
{
	if (v < 0) {
		ow_putc(w, '-');
		ow_u64(w, -(uint64_t)v); /* also right for INT64_MIN */
	} else {
		ow_u64(w, (uint64_t)v);
	}
}

void json_double(struct ow *w, double v)
{
	if (!isfinite(v)) {
		ow_write(w, "null", 4);
		return;
	}
	if (v == (double)(int64_t)v && fabs(v) < 1e15) {
		ow_i64(w, (int64_t)v);
		return;
	}
	char tmp[32];

	snprintf(tmp, sizeof(tmp), "%.15g", v);
	if (strtod(tmp, NULL) != v)
		snprintf(tmp, sizeof(tmp), "%.17g", v);
	ow_puts(w, tmp);
}

/* ---- sorted id sets ------------------------------------------------------- */

int u64vec_push(struct u64vec *a, uint64_t x)
{
	if (a->n == a->cap) {
		size_t nc = a->cap ? a->cap * 2 : 4096;
		uint64_t *p = realloc(a->v, nc * sizeof(*p));

		if (!p)
			return -ENOMEM;
		a->v = p;
		a->cap = nc;
	}
	a->v[a->n++] = x;
	return 0;
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

void u64vec_sort_unique(struct u64vec *a)
{
	size_t k = 0;

	if (!a->n)
		return;
	qsort(a->v, a->n, sizeof(*a->v), u64_cmp);
	for (size_t i = 1; i < a->n; i++)
		if (a->v[i] != a->v[k])
			a->v[++k] = a->v[i];
	a->n = k + 1;
}

bool u64vec_find(const struct u64vec *a, uint64_t x, size_t *idx)
{
	size_t lo = 0, hi = a->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (a->v[mid] == x) {
			*idx = mid;
			return true;
		}
		if (a->v[mid] < x)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

bool u64vec_has(const struct u64vec *a, uint64_t x)
{
	size_t idx;

	return u64vec_find(a, x, &idx);
}
