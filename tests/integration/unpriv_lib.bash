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
#   unpriv_workloads NAME
#                         skip unless setpriv, the user nobody and
#                         query_work are there; U=nobody, UID_U its uid;
#                         unpriv_dir NAME, holding copies of fay, wroot
#                         (root's query_work) and $UN (NAMEwork$$, the
#                         user's: its comm is this run's alone, for the
#                         syscall queries to filter on)
#   held_pair             start wroot calls 300 as root and $UN calls 200
#                         as $U, each waiting for its go file ($D/go.root,
#                         $D/go.user: QW_WAIT) before it calls; RPID, UPID
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

unpriv_workloads() {
	command -v setpriv >/dev/null || skip_all "needs setpriv (util-linux)"
	U=nobody
	id "$U" >/dev/null 2>&1 || skip_all "no user $U"
	UID_U=$(id -u "$U")
	W=$BUILD/tests/bin/query_work
	[ -x "$W" ] || skip_all "query_work is not built (make)"
	unpriv_dir "$1"
	cp "$FAY" "$D/fay"
	cp "$W" "$D/wroot"
	UN=$1work$$
	cp "$W" "$D/$UN"
	chown "$U" "$D/$UN"
	chmod 755 "$D"/*
}

held_pair() {
	QW_WAIT=$D/go.root "$D/wroot" calls 300 >/dev/null &
	RPID=$!; T_PIDS+=($RPID)
	# (setpriv itself in the background: $! of a function is a root subshell)
	setpriv --reuid "$U" --regid nogroup --clear-groups --bounding-set -all \
		env QW_WAIT="$D/go.user" "$D/$UN" calls 200 >/dev/null &
	UPID=$!; T_PIDS+=($UPID)
	_is_user() { [ "$(awk '/^Uid:/ { print $2 }' /proc/$UPID/status 2>/dev/null)" = "$UID_U" ]; }
	wait_for 30 _is_user
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
