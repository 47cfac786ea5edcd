# SPDX-License-Identifier: MIT
# Sourced by tests/integration/query_*.sh (not a test itself: no .sh): run
# fay query and compare its output exactly.

# fq ARGS...: fay query -q, stdout in $T_TMP/out, stderr in $T_TMP/err, rc in $RC
fq() {
	timeout 60 "$FAY" query -q "$@" >"$T_TMP/out" 2>"$T_TMP/err"
	RC=$?
}
# same OUT WANT WHAT: exact comparison of a file with a string (and RC 0)
same() {
	local got
	got=$(cat "$1")
	if [ "$got" = "$2" ] && [ "$RC" -eq 0 ]; then
		pass "$3"
	else
		fail "$3 (rc=$RC)" "got:  $(echo "$got" | head -c 1500)" "want: $2" "$(head -c 600 "$T_TMP/err")"
	fi
}
