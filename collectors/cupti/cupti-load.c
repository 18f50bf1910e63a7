/* SPDX-License-Identifier: MIT */
/*
 * cupti-load.c - find and load the job's CUPTI; see cupti-load.h.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/macro.h"
#include "cupti-load.h"

/* Newest first: a CUDA 12 job on a CUDA 13 driver traces with either. */
static const char *const sonames[] = { "libcupti.so.13", "libcupti.so.12" };

struct search {
	struct cupti_lib *lib;
	char *why;
	size_t why_size;
	size_t why_len;
	int err; /* -ENOENT until something loaded; -EPROTO once a version was refused */
};

/* Append to the "where it looked" text, cutting at the buffer's end. */
static void say(struct search *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(struct search *s, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (s->why_len + 1 >= s->why_size)
		return;
	va_start(ap, fmt);
	n = vsnprintf(s->why + s->why_len, s->why_size - s->why_len, fmt, ap);
	va_end(ap);
	if (n > 0)
		s->why_len = s->why_len + (size_t)n < s->why_size ? s->why_len + (size_t)n : s->why_size - 1;
}

void cupti_version_text(uint32_t v, char *out, size_t size)
{
	static const char *const v12[CUPTI_V12_END - CUPTI_V12_MIN] = {
		"12.0", "12.2", "12.3", "12.4", "12.5", "12.6", "12.7", "12.8", "12.9", "12.9 Update 1",
	};

	if (v >= 100000 && v % 100)
		snprintf(out, size, "%u.%u Update %u", v / 10000, v / 100 % 100, v % 100);
	else if (v >= 100000)
		snprintf(out, size, "%u.%u", v / 10000, v / 100 % 100);
	else if (v >= CUPTI_V12_MIN && v < CUPTI_V12_END)
		snprintf(out, size, "%s (API v%u)", v12[v - CUPTI_V12_MIN], v);
	else
		snprintf(out, size, "API v%u (CUDA 11 or older)", v);
}

/* Resolve every entry point from @h and check the version. 0 = usable. */
static int take(struct search *s, void *h, const char *path, bool job_loaded)
{
	struct cupti_lib l = { .handle = h, .job_loaded = job_loaded };
	char ver[48];
	void *sym;

#define CUPTI_FN_RESOLVE(name)                                                  \
	sym = dlsym(h, #name);                                                  \
	if (!sym) {                                                             \
		say(s, "%s lacks " #name "; ", path);                           \
		return -ENOENT;                                                 \
	}                                                                       \
	memcpy(&l.name, &sym, sizeof(sym));
	CUPTI_FUNCS(CUPTI_FN_RESOLVE)
#undef CUPTI_FN_RESOLVE
#define CUPTI_FN_OPTIONAL(name)                                                 \
	sym = dlsym(h, #name);                                                  \
	memcpy(&l.name, &sym, sizeof(sym));
	CUPTI_OPTIONAL_FUNCS(CUPTI_FN_OPTIONAL)
#undef CUPTI_FN_OPTIONAL
	if (l.cuptiGetVersion(&l.version) != CUPTI_SUCCESS) {
		say(s, "%s: cuptiGetVersion failed; ", path);
		return -ENOENT;
	}
	if (!cupti_layout_known(l.version)) {
		cupti_version_text(l.version, ver, sizeof(ver));
		s->lib->version = l.version; /* the caller names what it refused */
		say(s, "%s is CUPTI %s, whose records this agent cannot read (it reads CUDA 12-13); ",
		    path, ver);
		s->err = -EPROTO;
		return -EPROTO;
	}
	snprintf(l.path, sizeof(l.path), "%s", path);
	*s->lib = l;
	return 0;
}

/* dlopen @path and take it; closes what it cannot use. */
static int try_path(struct search *s, const char *path)
{
	void *h;
	int r;

	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char *e = dlerror();

		/* A missing file is the common case: name it briefly. */
		if (strchr(path, '/') && access(path, F_OK) < 0)
			say(s, "%s (absent); ", path);
		else
			say(s, "%s (%s); ", path, e ? e : "cannot load");
		return -ENOENT;
	}
	r = take(s, h, path, false);
	if (r < 0)
		dlclose(h);
	return r;
}

struct find_loaded {
	const char *prefix;
	char path[512];
};

static int find_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	struct find_loaded *f = data;
	const char *base;

	(void)size;
	if (!info->dlpi_name || !info->dlpi_name[0])
		return 0;
	base = strrchr(info->dlpi_name, '/');
	base = base ? base + 1 : info->dlpi_name;
	if (strncmp(base, f->prefix, strlen(f->prefix)) != 0)
		return 0;
	snprintf(f->path, sizeof(f->path), "%s", info->dlpi_name);
	return 1;
}

/* Path of a loaded object whose file name starts with @prefix, or "". */
static void loaded_path(const char *prefix, char *out, size_t size)
{
	struct find_loaded f = { .prefix = prefix };

	dl_iterate_phdr(find_cb, &f);
	snprintf(out, size, "%s", f.path);
}

static bool is_dir(const char *p)
{
	struct stat st;

	return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The candidates in a folder, newest soname first. */
static int try_dir(struct search *s, const char *dir)
{
	char p[600];
	bool any = false;

	for (size_t i = 0; i < ARRAY_SIZE(sonames); i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, sonames[i]);
		if (access(p, F_OK) < 0)
			continue;
		any = true;
		if (try_path(s, p) == 0)
			return 0;
	}
	if (!any) {
		/* Only where no soname is: libcupti.so is usually a link to one. */
		snprintf(p, sizeof(p), "%s/libcupti.so", dir);
		if (access(p, F_OK) == 0)
			return try_path(s, p);
		say(s, "%s (none); ", dir);
	}
	return -ENOENT;
}

int cupti_load(struct cupti_lib *lib, char *why, size_t why_size)
{
	struct search s = { .lib = lib, .why = why, .why_size = why_size, .err = -ENOENT };
	char path[512], dir[600];
	const char *env, *root;
	void *h;

	memset(lib, 0, sizeof(*lib));
	if (why_size)
		why[0] = 0;
	say(&s, "Looked at: ");

	/* 1. The job's own copy: never load a second CUPTI next to it. */
	loaded_path("libcupti.so", path, sizeof(path));
	if (path[0] && (h = dlopen(path, RTLD_NOW | RTLD_NOLOAD))) {
		if (take(&s, h, path, true) == 0)
			return 0;
		dlclose(h); /* drops only our reference: the job keeps its copy */
		say(&s, "the job loaded it itself, so no other copy is tried");
		return s.err;
	}

	/* 2. The user's choice, and only it. */
	env = getenv("PROFD_CUPTI_PATH");
	if (env && env[0]) {
		if (is_dir(env) ? try_dir(&s, env) == 0 : try_path(&s, env) == 0)
			return 0;
		say(&s, "PROFD_CUPTI_PATH names no usable libcupti");
		return s.err;
	}

	/* 3. Beside the CUDA runtime the job loaded. */
	loaded_path("libcudart.so", path, sizeof(path));
	if (path[0] && strrchr(path, '/')) {
		*strrchr(path, '/') = 0;
		if (try_dir(&s, path) == 0)
			return 0;
		snprintf(dir, sizeof(dir), "%s/../../cuda_cupti/lib", path);
		if (is_dir(dir) && try_dir(&s, dir) == 0)
			return 0;
	}

	/* 4. The CUDA root, then the loader's search path. */
	root = getenv("CUDA_HOME");
	if (!root || !root[0])
		root = getenv("CUDA_PATH");
	if (!root || !root[0])
		root = "/usr/local/cuda";
	for (const char *sub = "lib64\0lib\0extras/CUPTI/lib64\0"; *sub; sub += strlen(sub) + 1) {
		snprintf(dir, sizeof(dir), "%s/%s", root, sub);
		if (is_dir(dir) && try_dir(&s, dir) == 0)
			return 0;
	}
	for (size_t i = 0; i < ARRAY_SIZE(sonames); i++)
		if (try_path(&s, sonames[i]) == 0)
			return 0;
	return s.err;
}
