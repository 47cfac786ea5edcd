# SPDX-License-Identifier: MIT
# Sourced by tests that start a `fay query` in the background and must
# know when its probes are attached (not a test itself).
#
#   query_bg N OUT ERR CMD...
#       Start CMD (a fay query, or what runs one: timeout, setpriv) in the
#       background, its stdout to OUT and stderr to ERR (the same path:
#       both there).  Both files are emptied here first, in this shell,
#       so no line of an earlier query is read as this one's (the child's
#       own redirection may open the file after a poll has begun).  Then
#       wait until ERR holds N lines saying "attached" (fay query prints
#       one per probe), at most QUERY_BG_WAIT seconds (default 40: slow
#       on a loaded machine).  QBG: its pid (also in T_PIDS, killed at
#       exit).  Returns 0 once attached; 1 when the deadline passed or
#       CMD exited first.
#       With QUERY_BG_HOSTS set (a fay query --cluster), N is a number of
#       hosts: distinct "fay: HOST: attached" lines, for the query prints
#       every attached host again each time one more answers (after 2 s
#       without all answers, as under load), so its lines add up to N
#       before N hosts have attached.

# _qbg_attached ERR: the "attached" lines of ERR, or with QUERY_BG_HOSTS
# the hosts they name
_qbg_attached() {
	if [ -n "${QUERY_BG_HOSTS:-}" ]; then
		hosts_attached "$1"
	else
		grep -c attached "$1"
	fi
}

query_bg() {
	local n=$1 out=$2 err=$3 end
	shift 3
	: >"$out"
	: >"$err"
	if [ "$out" = "$err" ]; then
		"$@" >"$out" 2>&1 &
	else
		"$@" >"$out" 2>"$err" &
	fi
	QBG=$!
	T_PIDS+=($QBG)
	end=$((SECONDS + ${QUERY_BG_WAIT:-40}))
	while [ $SECONDS -lt $end ]; do
		[ "$(_qbg_attached "$err")" -ge "$n" ] && return 0
		kill -0 "$QBG" 2>/dev/null || break
		sleep 0.1
	done
	[ "$(_qbg_attached "$err")" -ge "$n" ]
}
