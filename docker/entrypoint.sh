#!/bin/sh
# Container entrypoint: share the agent with the jobs, then become profd.
#
# The image keeps the agent at /opt/profd/lib/libprofd-agent.so. Jobs cannot
# see the image, only the directory mounted from the host ($PROFD_AGENT_DIR,
# default /run/profd, which also holds the agent socket), so the agent is
# copied there at every start and profd is told that path (PROFD_AGENT_PATH)
# for its hints. The copy replaces the file by rename: jobs that already
# mapped the previous one keep it.
set -eu
dir=${PROFD_AGENT_DIR:-/run/profd}
agent=/opt/profd/lib/libprofd-agent.so
mkdir -p "$dir"
if [ -f "$agent" ]; then
	cp "$agent" "$dir/.libprofd-agent.so.new"
	chmod 0755 "$dir/.libprofd-agent.so.new"
	mv -f "$dir/.libprofd-agent.so.new" "$dir/libprofd-agent.so"
	export PROFD_AGENT_PATH="${PROFD_AGENT_PATH:-$dir/libprofd-agent.so}"
fi
exec /opt/profd/sbin/profd "$@"
