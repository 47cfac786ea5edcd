#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# fay traces show TRACE_ID: the id is read by the one hex-id parser
# (spanrec_parse_trace): 16 or 32 hex digits, either case; anything else
# is refused before any request, exit 2, naming the id.
. "$(dirname "$0")/../lib/lib.sh"
[ -x "$FAY" ] || skip_all "no fay binary at $FAY (build first)"

P=$(free_port)    # nothing listens there: a good id gets as far as the request
show() { timeout 20 "$FAY" traces show --server "http://127.0.0.1:$P" "$1" >"$T_TMP/out" 2>&1; }
for id in 4bf92f3577b34da 4bf92f3577b34da6a 4bf92f3577b34da6a3ce929d0e0e473 \
	4bf92f3577b34da6a3ce929d0e0e4736a 4bf92f3577b34dag 4bf92f3577b34da-a3ce929d0e0e4736 ""; do
	show "$id"
	ok "'$id': exit 2, must be 16 or 32 hex digits" \
		bash -c "[ $? = 2 ] && grep -q \"error: trace id '$id': must be 16 or 32 hex digits\" '$T_TMP/out'" ||
		diag "$(head -3 "$T_TMP/out")"
done
for id in 4bf92f3577b34da6 4BF92F3577B34DA6A3CE929D0E0E4736; do
	show "$id"
	ok "'$id': a trace id (the request is made)" \
		bash -c "! grep -q 'error: trace id' '$T_TMP/out' && grep -q '127.0.0.1:$P' '$T_TMP/out'" ||
		diag "$(head -3 "$T_TMP/out")"
done
done_testing
