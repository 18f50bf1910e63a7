# SPDX-License-Identifier: MIT
# plant.sh - sourced by the self-tests of the tree checks
# (test-check-layers.sh, test-check-names.sh): a copy of the sources to
# plant violations in, and plant() to plant one. Needs $src (the tree) and
# $check (the check script); sets $tmp (removed at exit).

# A copy of the source folders in $tmp, which the check must pass as the
# tree does.
copy_tree() {
	tmp=$(mktemp -d) || exit 1
	trap 'rm -rf "$tmp"' EXIT
	for d in base proto xspace rpc collectors daemon tools; do cp -r "$src/$d" "$tmp/"; done
	"$check" "$tmp" >/dev/null || { echo "FAIL: a clean copy fails"; exit 1; }
}

# plant FILE TEXT EXPECT: append TEXT to FILE, expect a failure whose output
# matches the extended regex EXPECT, then restore FILE.
plant() {
	printf '%s\n' "$2" >>"$tmp/$1"
	if out=$("$check" "$tmp"); then
		echo "FAIL: planted in $1 passed: $2"
		exit 1
	fi
	echo "$out" | grep -Eq "$3" || { echo "FAIL: $1 not reported as /$3/: $out"; exit 1; }
	cp "$src/$1" "$tmp/$1"
}
