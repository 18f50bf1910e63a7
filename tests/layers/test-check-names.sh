#!/bin/sh
# The names check (tools/check-names) passes on the tree, and fails on a
# copy of it with one violation of each of its rules planted in turn: a
# literal name argument (in a call spread over lines), a literal copy of a
# names.h value, a name macro defined outside names.h, an XN_* name defined
# twice and one used nowhere.
set -u
src=${PROFD_SRC:?}
check="$src/tools/check-names"
out=$("$check" "$src") || { echo "FAIL: the tree spells names outside xspace/names.h:"; echo "$out"; exit 1; }
. "$(dirname "$0")/plant.sh"
copy_tree

plant collectors/host/host-io.c 'static void planted(struct trace_plane *p, struct buf *b)
{
	trace_stat_u64(p, b,
		       /* a comment, "with a string" */
		       "my_new_stat", 1);
}' 'host-io.c:[0-9]+: trace_stat_u64\(\): name argument is the literal "my_new_stat"'
plant collectors/nvml/nvml-counters.c 'static void planted(struct trace *t) { trace_plane(t, 1 ? "/host:CPU" : XN_PLANE_HOST, 0); }' \
	'nvml-counters.c:[0-9]+: trace_plane\(\): .*"/host:CPU"; use XN_PLANE_HOST'
plant tools/profctl/profctl-top.c 'static const char *const planted[] = { "gpu_util_pct" };' \
	'profctl-top.c:[0-9]+: the literal "gpu_util_pct" spells XN_COUNTER_GPU_UTIL'
plant tools/profctl/profctl-top.c 'static bool planted(struct xs_str ev_name) { return xs_str_eq(ev_name, "Memcpy"); }' \
	'profctl-top.c:[0-9]+: xs_str_eq\(\): name argument is the literal "Memcpy"'
plant collectors/agent/agent-pm.c '#define PLANTED_NAME "planted"
static void planted(struct trace_plane *p) { trace_plane_stat_id(p, PLANTED_NAME); }' \
	'agent-pm.c:[0-9]+: trace_plane_stat_id\(\): name argument PLANTED_NAME is defined as a string'
plant xspace/names.h '#define XN_STAT_PLANTED "planted"' 'XN_STAT_PLANTED is used nowhere'
plant xspace/names.h '#define XN_PLANE_HOST "/host:CPU"' 'XN_PLANE_HOST is defined twice'

# A string that is not a name stays allowed, in a builder's value argument too.
printf '%s\n' 'static void planted(struct trace_plane *p, struct buf *b) { trace_stat_str(p, b, XN_STAT_TF_OP, "not a name"); }' \
	>>"$tmp/collectors/host/host-io.c"
out=$("$check" "$tmp") || { echo "FAIL: a literal value was reported: $out"; exit 1; }
echo "ok"
