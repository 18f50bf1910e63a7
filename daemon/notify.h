/* SPDX-License-Identifier: MIT */
/*
 * notify.h - the service manager's notification protocol (sd_notify(3)),
 * spoken directly: one datagram per message to $NOTIFY_SOCKET (a path, or
 * '@' for an abstract name). No libsystemd. Without NOTIFY_SOCKET every
 * call does nothing, so profd runs the same outside systemd.
 */
#pragma once

#include <stdint.h>

#include "base/macro.h" /* _printf_ */

/* Send "READY=1", "STOPPING=1", "STATUS=…", "WATCHDOG=1", "RELOADING=1".
 * 0, or -errno (callers log at debug level at most: systemd not listening
 * is no reason to stop). */
int notify_send(const char *msg);
int notify_status(const char *fmt, ...) _printf_(1, 2);

/*
 * The watchdog interval the manager asked for, as sd_watchdog_enabled()
 * reads it: WATCHDOG_USEC set and WATCHDOG_PID unset or ours. Returns how
 * often to send WATCHDOG=1 in ms (half the interval), 0 when off.
 */
uint64_t notify_watchdog_ms(void);
