#!/bin/sh
# SPDX-License-Identifier: MIT
# meson install script: put the default config (profd --default-config) at
# the path profd reads, unless a config is there already. An existing file
# is the operator's: it is kept, and a newer default lands beside it as
# profd.conf.dist (as dpkg leaves .dpkg-dist), for a diff.
#   install-config.sh GENERATED /abs/sysconfdir/profd/profd.conf
set -eu
new=$1 conf=$2
# DESTDIR as meson applied it (absolute, whatever form it was given in).
destdir=${MESON_INSTALL_DESTDIR_PREFIX%"$MESON_INSTALL_PREFIX"}
dest=$destdir$conf
if [ -n "${MESON_INSTALL_DRY_RUN:-}" ]; then
	echo "Would install $new to $dest (kept if present; the new one then as $dest.dist)"
	exit 0
fi
if [ ! -e "$dest" ] && [ ! -L "$dest" ]; then
	install -D -m 0644 "$new" "$dest"
	exit 0
fi
if cmp -s "$new" "$dest"; then
	rm -f "$dest.dist" # the one left by an earlier install, now the same
	exit 0
fi
install -m 0644 "$new" "$dest.dist"
echo "profd: kept $conf (yours); the new default config is $conf.dist" >&2
