/* SPDX-License-Identifier: MIT */
/*
 * conf-text.c - profd's settings as text, over conf.c's table
 * (conf-table.h): --help (each key's paragraph wrapped, with its default and
 * bounds), --dump-config (every key, or a commented template), and the
 * config file: a hostile input like any other, lines bounded, each value
 * set through conf_set(), errors naming FILE:LINE. No state of its own.
 */
#define _GNU_SOURCE /* memrchr() */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "base/file.h"
#include "base/log.h"
#include "base/utf8.h"
#include "conf-table.h"
#include "conf.h"

static size_t comma_cut(const char *p, size_t n, size_t room)
{
	size_t cut = 0;

	for (size_t i = 0; i < n && i < room; i++)
		if (p[i] == ',')
			cut = i + 1;
	return cut;
}

/* Print @text wrapped to @width; @col is where the cursor stands (0: start
 * the first line with @indent too), later lines start with @indent. A word
 * longer than a whole line (a default list of names) breaks after a comma. */
static void wrap(FILE *f, const char *text, size_t col, const char *indent, size_t width)
{
	size_t ind = strlen(indent);
	bool empty = true, glued = false; /* glued: the rest of a word broken at a comma */

	if (col == 0) {
		fputs(indent, f);
		col = ind;
	}
	for (const char *p = text; *p;) {
		size_t n, sep;

		if (!glued)
			while (*p == ' ')
				p++;
		n = strcspn(p, " ");
		if (n == 0)
			break;
		sep = empty || glued ? 0 : 1;
		if (n + ind > width) {
			size_t cut = comma_cut(p, n, col + sep < width ? width - col - sep : 0);

			if (cut == 0 && !empty) {
				fprintf(f, "\n%s", indent);
				col = ind;
				empty = true;
				sep = 0;
				cut = comma_cut(p, n, width - ind);
			}
			if (cut)
				n = cut;
		}
		if (!empty && col + sep + n > width) {
			fprintf(f, "\n%s", indent);
			col = ind;
			empty = true;
		} else if (sep) {
			fputc(' ', f);
			col++;
		}
		fwrite(p, 1, n, f);
		col += n;
		glued = p[n] != ' ' && p[n] != '\0';
		p += n;
		empty = false;
	}
	fputc('\n', f);
}

/* The row's help with its default and bounds, as one paragraph. */
static void describe(const struct conf_row *r, const char *def, char *buf, size_t size)
{
	char b[128];
	bool numeric = r->type == T_U32 || r->type == T_U64 || r->type == T_DUR || r->type == T_SIZE ||
		       r->type == T_USEC;

	snprintf(buf, size, "%s (default %s%s%s)%s", r->help, def[0] ? def : "none",
		 numeric ? "; " : "", numeric ? conf_row_bounds(r, b, sizeof(b)) : "",
		 r->reload ? "; reloaded on SIGHUP" : "");
}

void conf_help(FILE *f)
{
	char opt[64], text[768];

	for (size_t k = 0; k < CONF_N_KEYS; k++) {
		const struct conf_row *r = &conf_rows[k];
		size_t n;

		if (r->section) {
			snprintf(text, sizeof(text), "%s:", r->section);
			fputc('\n', f);
			wrap(f, text, 0, "", 80);
		}
		/* Defaults as the table has them, not as the environment moved them. */
		describe(r, r->def ? r->def : "", text, sizeof(text));
		n = (size_t)snprintf(opt, sizeof(opt), "  %s--%s %s", conf_key_short(k) ? "-l, " : "    ",
				     r->name, r->arg);
		fputs(opt, f);
		if (n + 2 > 29) {
			fputs("  ", f);
			n += 2;
		} else {
			for (; n < 29; n++)
				fputc(' ', f);
		}
		wrap(f, text, n, "                             ", 80);
	}
}

void conf_dump(FILE *f, const struct profd_conf *c, bool template)
{
	char v[4096], text[768];

	fprintf(f, "# profd configuration: \"key = value\" lines, '#' starts a comment line.\n"
		   "# Every key is also a command-line option (--key), which overrides the file.\n"
		   "# Repeatable keys take one value per line; an empty value clears the list.\n"
		   "# See profd.conf(5) and docs/config.md.\n");
	for (size_t k = 0; k < CONF_N_KEYS; k++) {
		const struct conf_row *r = &conf_rows[k];
		const struct conf_list *l = conf_type_is_list(r->type) ? conf_cfield(c, k) : NULL;

		if (template) {
			conf_format(c, k, v, sizeof(v));
			describe(r, v, text, sizeof(text));
			fprintf(f, "\n# %s %s\n", r->name, r->arg);
			wrap(f, text, 0, "#   ", 78);
		}
		if (l && l->n > 0) {
			for (uint32_t i = 0; i < l->n; i++)
				fprintf(f, "%s%s = %s\n", template ? "#" : "", r->name, l->v[i]);
			continue;
		}
		conf_format(c, k, v, sizeof(v));
		fprintf(f, "%s%s =%s%s\n", template ? "#" : "", r->name, v[0] ? " " : "", v);
	}
}

/* Trim ASCII white space at both ends, in place. */
static char *trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = 0;
	return s;
}

#define CONF_MAX_LINES 100000 /* a config file is a few dozen lines */

int conf_load(struct profd_conf *c, const char *path, char *err, size_t err_size)
{
	char line[4096], why[256], q[72];
	unsigned lineno = 0;
	int r = 0, fd = file_open_regular(path, NULL);
	FILE *f = NULL;

	/* Never fopen(): a FIFO at the path would block SIGHUP's reload, and
	 * with it every call, until someone writes to it (base/file.h). */
	if (fd >= 0 && !(f = fdopen(fd, "r"))) {
		int e = -errno;

		close(fd);
		fd = e;
	}
	if (!f) {
		r = fd;
		if (r != -ENOENT)
			snprintf(err, err_size, "%s: %s", path, file_strerror(r));
		else
			snprintf(err, err_size, "%s: no such file", path);
		return r;
	}
	/* Filled with a byte fgets() never writes last: the last NUL in the
	 * buffer is then the one fgets() ended the line with, and any NUL
	 * before it was in the file. */
	while (memset(line, 1, sizeof(line)), fgets(line, sizeof(line), f)) {
		const char *end = memrchr(line, 0, sizeof(line));
		size_t n = (size_t)(end - line), k;
		char *eq, *key, *val;

		lineno++;
		if (lineno > CONF_MAX_LINES) {
			snprintf(err, err_size, "%s:%u: too many lines (at most %d)", path, lineno, CONF_MAX_LINES);
			r = -E2BIG;
			break;
		}
		/* A NUL would hide the rest of the line from every check below:
		 * its length, a '#' before it, the value after it. */
		if (memchr(line, 0, n)) {
			snprintf(err, err_size, "%s:%u: NUL byte in the line (a config file is text)", path, lineno);
			r = -EINVAL;
			break;
		}
		if (n == sizeof(line) - 1 && line[n - 1] != '\n' && !feof(f)) {
			snprintf(err, err_size, "%s:%u: line longer than %zu bytes", path, lineno, sizeof(line) - 2);
			r = -E2BIG;
			break;
		}
		key = trim(line);
		if (!*key || *key == '#')
			continue;
		eq = strchr(key, '=');
		if (!eq) {
			snprintf(err, err_size, "%s:%u: expected \"key = value\", got \"%s\"", path, lineno,
				 ascii_quote(q, sizeof(q), key));
			r = -EINVAL;
			break;
		}
		*eq = 0;
		val = trim(eq + 1);
		key = trim(key);
		for (k = 0; k < CONF_N_KEYS; k++)
			if (strcmp(conf_rows[k].name, key) == 0)
				break;
		if (k == CONF_N_KEYS) {
			snprintf(err, err_size, "%s:%u: unknown key \"%s\" (profd --dump-config lists them)",
				 path, lineno, ascii_quote(q, sizeof(q), key));
			r = -EINVAL;
			break;
		}
		why[0] = 0;
		r = conf_set(c, k, val, why, sizeof(why));
		if (r < 0) {
			/* Quoted: the value may hold any byte but NUL and newline. */
			snprintf(err, err_size, "%s:%u: invalid value \"%s\" for %s: %s", path, lineno,
				 ascii_quote(q, sizeof(q), val),
				 conf_rows[k].name, r == -ENOMEM ? strerror(ENOMEM) : why);
			break;
		}
	}
	if (r == 0 && ferror(f)) {
		snprintf(err, err_size, "%s: read error", path);
		r = -EIO;
	}
	fclose(f);
	return r;
}
