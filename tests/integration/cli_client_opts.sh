#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The options every client of a collector shares (cli/opts.h): --token,
# --token-file and, where a command asks a collector by URL, --cluster,
# one definition each.  For every command that takes them: its --help
# describes them with the shared text, and its parser takes them the
# shared way (a --token-file others may read is refused naming the mode;
# a missing one naming the file; the last of --token and --token-file
# counts, so a bad file given before --token is still read and refused).
# The tokens reaching a collector: tests/integration/auth_tokens.sh.
. "$(dirname "$0")/../lib/lib.sh"
[ -x "$FAY" ] || skip_all "no fay binary at $FAY (build first)"

printf 'tok\n' >"$T_TMP/open.tok" && chmod 644 "$T_TMP/open.tok"
# NAME|ARGS before the token options|ARGS after them
cmds=(
	"query|--cluster http://127.0.0.1:1|from s in cluster.syscall(\"read\") select count()"
	"sql|--collector http://127.0.0.1:1|SELECT 1"
	"traces ls|--server http://127.0.0.1:1|"
	"traces show|--server http://127.0.0.1:1|4bf92f3577b34da6a3ce929d0e0e4736"
	"capture|--cluster http://127.0.0.1:1|--list"
	"agent|--collector 127.0.0.1:1|"
)
for c in "${cmds[@]}"; do
	IFS='|' read -r name pre post <<<"$c"
	# shellcheck disable=SC2086
	"$FAY" $name --help >"$T_TMP/help" 2>&1
	ok "fay $name --help: a manual with the shared token rows" \
		bash -c "grep -q '^SYNOPSIS' '$T_TMP/help' && grep -q -- '^    --token-file FILE, --token T\$' '$T_TMP/help' &&
			 grep -q '(default \$FAY_TOKEN)' '$T_TMP/help'"
	run() { # shellcheck disable=SC2086
		timeout 20 "$FAY" $name $pre "$@" ${post:+"$post"} >"$T_TMP/out" 2>&1; }
	run --token-file "$T_TMP/open.tok"
	ok "fay $name --token-file FILE others may read: exit 2 naming the mode" \
		bash -c "[ $? = 2 ] && grep -q 'error: --token-file .*open.tok.*mode' '$T_TMP/out'" ||
		diag "$(head -3 "$T_TMP/out")"
	run --token-file "$T_TMP/none.tok" --token T
	ok "fay $name --token-file MISSING --token T: exit 2 naming the file" \
		bash -c "[ $? = 2 ] && grep -q 'error: --token-file .*none.tok' '$T_TMP/out'" ||
		diag "$(head -3 "$T_TMP/out")"
done
for name in query capture; do
	"$FAY" $name --help >"$T_TMP/help" 2>&1
	ok "fay $name --help: the shared --cluster row" \
		grep -q -- '^    --cluster URL$' "$T_TMP/help"
done
done_testing
