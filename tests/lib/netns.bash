# SPDX-License-Identifier: MIT
# Multi-host tests on one machine: each "host" is a network namespace with
# its own address, all cabled to one switch (a bridge in a namespace of its
# own, so the root namespace's addresses, routes and firewall play no part).
# Source after tests/lib/lib.sh:
#
#   . "$TOP/tests/lib/netns.bash"
#   ns_init                       # skips the test (with the reason) if
#                                 # network namespaces cannot be made here
#   ns_add coll; ns_add a1 ...    # hosts 10.N.0.1, 10.N.0.2 ... on /24
#   ns_ip a1                      # -> 10.N.0.2
#   ns_run a1 CMD...              # CMD inside a1's namespace
#   ns_bg a1 CMD...               # the same in the background; its pid is
#                                 # in T_PIDS (killed at exit) and $NS_PID
#   ns_link a1 down|up            # pull a1's cable / plug it back
#   ns_reach a1 coll 9410         # a TCP connect from a1 to coll works
#
# Names carry this shell's pid (fay<pid>-<host>), so concurrent runs never
# meet; N (the second address byte) is derived from the pid for the same
# reason, although separate switches already keep runs apart.  Everything
# is deleted at exit (the switch namespace takes the cables with it), and
# ns_cleanup removes what a run killed with SIGKILL left behind: any
# fay<pid>-* namespace whose pid is no longer alive.

NS_PREFIX="fay$$"
NS_SW="$NS_PREFIX-sw"
NS_NET="10.$(( ($$ % 250) + 1 ))"
NS_HOSTS=()
declare -A NS_ADDR NS_PORT

# Delete the namespaces of runs that are gone (their pid not alive).
ns_cleanup_stale() {
	local ns pid
	for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
		case $ns in fay[0-9]*-*) ;; *) continue ;; esac
		pid=${ns#fay}
		pid=${pid%%-*}
		[ "$pid" = "$$" ] && continue
		kill -0 "$pid" 2>/dev/null || ip netns del "$ns" 2>/dev/null
	done
}

ns_teardown() {
	local h
	for h in "${NS_HOSTS[@]:-}"; do
		[ -n "$h" ] && ip netns del "$NS_PREFIX-$h" 2>/dev/null
	done
	ip netns del "$NS_SW" 2>/dev/null
	NS_HOSTS=()
}

# Make the switch; skip the whole test with the reason when this machine
# (or container) does not allow network namespaces.
# The multi-host cluster tests' needs: fay, curl and the query_work
# workload (its path in W); skips the test, saying which is missing.
ns_need_query_work() {
	W=$BUILD/tests/bin/query_work
	[ -x "$FAY" ] || skip_all "no fay binary at $FAY (build first)"
	[ -x "$W" ] || skip_all "query_work is not built (make)"
	command -v curl >/dev/null || skip_all "needs curl"
}

ns_init() {
	local why
	[ "$(id -u)" -eq 0 ] || skip_all "network namespaces need root"
	command -v ip >/dev/null || skip_all "needs ip (iproute2)"
	ns_cleanup_stale
	if ! why=$(ip netns add "$NS_SW" 2>&1); then
		skip_all "ip netns add is not permitted here: $why"
	fi
	# lib.sh's cleanup first (it kills the test's processes, some of them
	# inside the namespaces), then the namespaces.
	trap 't_cleanup; ns_teardown' EXIT
	if ! why=$(ip -n "$NS_SW" link add br0 type bridge 2>&1 &&
		   ip -n "$NS_SW" link set br0 up 2>&1 &&
		   ip -n "$NS_SW" link set lo up 2>&1); then
		skip_all "cannot make a bridge in a namespace: $why"
	fi
}

# ns_add NAME: a host: its namespace, loopback up, a veth to the switch
# (eth0 inside, port p<i> on the switch), address NS_NET.0.<i>/24.
ns_add() {
	local name=$1 i=$(( ${#NS_HOSTS[@]} + 1 )) ns="$NS_PREFIX-$1"
	ip netns add "$ns" || return 1
	NS_HOSTS+=("$name")
	NS_ADDR[$name]="$NS_NET.0.$i"
	NS_PORT[$name]="p$i"
	ip -n "$ns" link set lo up &&
	ip -n "$NS_SW" link add "p$i" type veth peer name eth0 netns "$ns" &&
	ip -n "$NS_SW" link set "p$i" master br0 &&
	ip -n "$NS_SW" link set "p$i" up &&
	ip -n "$ns" addr add "$NS_NET.0.$i/24" dev eth0 &&
	ip -n "$ns" link set eth0 up
}

ns_ip() { echo "${NS_ADDR[$1]}"; }

# ns_root: plug this (the root) namespace into the switch too, at
# NS_NET.0.254 (ns_ip root), for servers that stay here (a ClickHouse on
# loopback, collectors that reach it) beside hosts in namespaces.  The
# cable goes with the switch at exit (a veth dies with its other end).
ns_root() {
	local ifc="fr$$"
	ip link add "$ifc" type veth peer name p254 netns "$NS_SW" &&
	ip -n "$NS_SW" link set p254 master br0 &&
	ip -n "$NS_SW" link set p254 up &&
	ip addr add "$NS_NET.0.254/24" dev "$ifc" &&
	ip link set "$ifc" up &&
	NS_ADDR[root]="$NS_NET.0.254"
}

# ns_hosts NAME...: ns_add each; a namespace that cannot be made fails the
# test and ends it.
ns_hosts() {
	for h in "$@"; do
		ns_add "$h" || { fail "namespace $h"; done_testing; exit; }
	done
}

# ns_collector HOST LOG ARGS...: `fay collector ARGS` in HOST's namespace
# (a network stack of its own: always the agent port 0.0.0.0:9410 and HTTP
# on 127.0.0.1:9411), its output to LOG, at most 15 minutes; NS_PID is its
# pid (killed at exit).  Returns 0 once its /health answers, 1 if it does
# not within 30 s.
ns_collector() {
	local h=$1 log=$2; shift 2
	ns_bg "$h" timeout 900 "$FAY" collector --listen 0.0.0.0:9410 --http 127.0.0.1:9411 \
		"$@" >"$log" 2>&1
	wait_for 30 ns_run "$h" curl -sfo /dev/null http://127.0.0.1:9411/health
}

# ns_run HOST CMD...: run CMD in HOST's namespace (foreground).
ns_run() {
	local h=$1; shift
	ip netns exec "$NS_PREFIX-$h" "$@"
}

# ns_bg HOST CMD...: the same, in the background (ip netns exec execs CMD,
# so the pid is CMD's).  Sets NS_PID; the pid is killed at exit.
ns_bg() {
	local h=$1; shift
	ip netns exec "$NS_PREFIX-$h" "$@" &
	NS_PID=$!
	T_PIDS+=($NS_PID)
}

# ns_enter HOST CMD...: run CMD in HOST's network namespace alone
# (nsenter --net), keeping the host's mounts: `ip netns exec` mounts a
# sysfs of the namespace's own, without the cgroup2 file system below it
# (agents with --cgroup, workloads in a cgroup need the real /sys).
ns_enter() {
	local h=$1; shift
	nsenter --net="/run/netns/$NS_PREFIX-$h" "$@"
}

# ns_enter_bg HOST CMD...: ns_enter in the background; the pid is killed
# at exit (nsenter execs CMD, so the pid is CMD's: not a subshell whose
# death would leave CMD running).
ns_enter_bg() {
	local h=$1; shift
	nsenter --net="/run/netns/$NS_PREFIX-$h" "$@" &
	T_PIDS+=($!)
}

# ns_link HOST down|up: the switch port of HOST goes down or up (a pulled
# cable: HOST's eth0 loses its carrier, nothing is sent or received).
ns_link() {
	ip -n "$NS_SW" link set "${NS_PORT[$1]}" "$2"
}

# ns_reach FROM TO PORT: a TCP connection from host FROM to TO's address
# and PORT succeeds within 2 s.
ns_reach() {
	ns_run "$1" timeout 2 bash -c "exec 3<>/dev/tcp/${NS_ADDR[$2]}/$3" 2>/dev/null
}
