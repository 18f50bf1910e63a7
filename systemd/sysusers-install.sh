#!/bin/sh
# SPDX-License-Identifier: MIT
# meson install script: create the profd user the unit runs as, when
# installing for real (no DESTDIR: packages do this in their own scripts),
# as root, on a machine with systemd-sysusers. Anything else: say what to do.
set -eu
file="$1"
if [ -n "${DESTDIR:-}" ]; then
	exit 0
fi
if [ "$(id -u)" = 0 ] && command -v systemd-sysusers >/dev/null 2>&1; then
	systemd-sysusers "$file"
	exit 0
fi
echo "profd.service runs as user profd: create it with 'systemd-sysusers $file' (as root)" >&2
