# SPDX-License-Identifier: MIT
# Helpers for the tests that run fay as an unprivileged user (sourced
# after lib.sh and collector_lib.bash; they set U, the user, and D, a
# directory of copies of the binaries the user can execute).
#
#   unpriv_dir NAME       D: a new directory /tmp/fay-NAME.XXXXXX the user
#                         can enter, removed at exit with every process
#                         run from it (their path starts with $D/)
#   as CAPS CMD...        run CMD as $U with CAPS ("+bpf,+perfmon", "" for
#                         none) inheritable and ambient, nothing else
#   agent_as_user CAPS HOST
#                         start fay agent as $U for the collector that
#                         coll_start started (state and shm in $D), as
#                         host HOST; APID is its pid; passes or fails
#                         "the agent as $U connects"

unpriv_dir() {
	D=$(mktemp -d "/tmp/fay-$1.XXXXXX")
	chmod 755 "$D"
	# as ... & is a subshell: killing its pid leaves setpriv's command
	# running, so the user's processes are found by their path
	trap 'pkill -f "^$D/" 2>/dev/null; t_cleanup; rm -rf "$D"' EXIT
}

as() {
	local caps=$1
	shift
	if [ -n "$caps" ]; then
		setpriv --reuid "$U" --regid nogroup --clear-groups --inh-caps "$caps" \
			--ambient-caps "$caps" --bounding-set "$caps" "$@"
	else
		setpriv --reuid "$U" --regid nogroup --clear-groups --bounding-set -all "$@"
	fi
}

agent_as_user() {
	local caps=$1 host=$2
	mkdir -p "$D/state" "$D/shm"
	chown "$U" "$D/state" "$D/shm"
	as "$caps" "$D/fay" agent --collector 127.0.0.1:$WP --state-dir "$D/state" \
		--shm-dir "$D/shm" --host "$host" >"$T_TMP/agent.log" 2>&1 &
	APID=$!
	T_PIDS+=($APID)
	peers() { curl -s "$URL/api/cluster/peers" | grep -q "\"host\":\"$host\""; }
	ok "the agent as $U connects" wait_for 30 peers
}
