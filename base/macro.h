/* SPDX-License-Identifier: MIT */
/*
 * macro.h - small helpers shared by every part of profd.
 *
 * The cleanup attribute is a GNU extension; the tree builds as gnu11.
 * Use it for local variables only (house style rule 7).
 */
#pragma once

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
/* <sys/param.h> (pulled in by <uv.h>) defines the same two. */
#ifndef MIN
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#endif
#ifndef MAX
#define MAX(a, b) ((a) > (b) ? (a) : (b))
#endif
#define _unused_ __attribute__((unused))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _likely_(x) __builtin_expect(!!(x), 1)
#define _unlikely_(x) __builtin_expect(!!(x), 0)

#define container_of(ptr, type, member) \
	((type *)((char *)(ptr) - __builtin_offsetof(type, member)))

static inline void freep(void *p) { free(*(void **)p); }
static inline void closep(int *fd) { if (*fd >= 0) close(*fd); }
#define _cleanup_(f) __attribute__((cleanup(f)))
#define _cleanup_free_ _cleanup_(freep)
#define _cleanup_close_ _cleanup_(closep)

/* Hand a _cleanup_ pointer to someone else: returns it and clears the local.
 * Functions rather than statement expressions, so that the tree stays ISO C
 * under -Wpedantic; take_ptr() returns void *, which converts back on
 * assignment. @p must be an object pointer lvalue, @fd an int lvalue. */
static inline void *take_ptr(void *pp)
{
	void **p = pp, *v = *p;

	*p = NULL;
	return v;
}
static inline int take_fd(int *fd)
{
	int v = *fd;

	*fd = -1;
	return v;
}
#define TAKE_PTR(p) take_ptr(&(p))
#define TAKE_FD(fd) take_fd(&(fd))

/* Check an argument of a function that crosses a module boundary. */
#define assert_return(expr, r) \
	do { if (_unlikely_(!(expr))) return (r); } while (0)
