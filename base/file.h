/* SPDX-License-Identifier: MIT */
/*
 * file.h - opening the files profd reads by name (config, token, TLS
 * certificates, keys and CAs) without ever blocking on them.
 *
 * Those paths come from the operator, but what is at the path at the moment
 * of the read may not be what was meant: a FIFO blocks open() until someone
 * writes it (and read() until they do), a device may never end. Both run on
 * the event loop (SIGHUP's reload) or before it starts, so one FIFO would
 * stall every call. Every such file is opened here: O_NONBLOCK (a FIFO's
 * open returns at once), O_NOCTTY, O_CLOEXEC, then fstat() on the open fd
 * (not the path, which may change meanwhile), and anything but a regular
 * file (or /dev/null, which reads as empty) is refused with FILE_ENOTREG.
 */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

/* What file_open_regular() returns (negated) for a FIFO, device, socket or
 * directory. Linux has no EFTYPE; EBADFD comes from nothing else that an
 * open()/fstat()/read() of a path returns, so callers can tell it apart
 * (file_strerror() says "not a regular file"). */
#define FILE_ENOTREG EBADFD

/* Open @path read-only as above; @st (may be NULL) gets its fstat(). The fd,
 * -FILE_ENOTREG when it is not a regular file, or another -errno. */
int file_open_regular(const char *path, struct stat *st);

/*
 * Read the whole regular file @path, at most @max bytes, as a NUL-terminated
 * string into *@ret (malloc'ed; the caller frees it, explicit_bzero() first
 * for secrets: this function wipes what it read when it fails). *@ret_private
 * (may be NULL) says whether group and others have no permission bits.
 * 0, -FILE_ENOTREG, -EFBIG (over @max), -EINVAL (a NUL byte inside: the files
 * read here are text, and a NUL would cut them short), -ENOMEM, -errno.
 */
int file_read_small(const char *path, size_t max, char **ret, bool *ret_private);

/* strerror() with FILE_ENOTREG spelled out. */
const char *file_strerror(int e);
