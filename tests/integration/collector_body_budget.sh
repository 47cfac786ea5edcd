#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# An OTLP/HTTP body counts against --max-memory at its peak: it grows by
# realloc() as it arrives (16 KiB, doubled), and while a step copies, the
# old and the new buffer are both held, so both are charged until the old
# one is freed.  A body that says its Content-Length is held in no more
# than that.  Measured by fay_collector_memory_peak_bytes, and at the exact
# boundary: --max-memory one byte short of the connection (64 KiB) plus
# the last step's two buffers answers 503 + Retry-After, that sum serves it.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/collector_lib.bash"

CONN=$((64 << 10))
MIB=$((1 << 20))
# 1 MiB + 1 of valid OTLP JSON (no spans): a chunked body grows
# ... 512 KiB -> 1 MiB -> 2 MiB; with its Content-Length ... 1 MiB -> 1 MiB + 1
python3 -c 'import sys; b = b"{\"resourceSpans\":[]}"; sys.stdout.buffer.write(b + b" " * ((1 << 20) + 1 - len(b)))' \
	>"$T_TMP/body.json"
CHUNKED_PEAK=$((CONN + MIB + 2 * MIB))
SAID_PEAK=$((CONN + MIB + MIB + 1))

# post PORT chunked|said: the HTTP status of one POST of the body
post() {
	local te=()
	[ "$2" = chunked ] && te=(-H 'Transfer-Encoding: chunked')
	curl -s -D "$T_TMP/h" -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' \
		"${te[@]}" --data-binary @"$T_TMP/body.json" "http://127.0.0.1:$1/v1/traces"
}
# post_ok PORT KIND: 200, retrying a 503 as a client told Retry-After does
# (the test's own earlier connections may still be closing, 64 KiB each)
post_ok() {
	local i
	for i in $(seq 50); do
		case $(post "$@") in
		200) return 0 ;;
		503) sleep 0.2 ;;
		*) return 1 ;;
		esac
	done
	return 1
}

OP=$(free_port)
coll_start "$T_TMP/c.db" --otlp-http 127.0.0.1:$OP || { fail "collector starts"; done_testing; exit; }
ok "a chunked 1 MiB + 1 body on --otlp-http: 200" test "$(post $OP chunked)" = 200
peak=$(metric fay_collector_memory_peak_bytes)
ok "the peak charged covers its last step, 1 MiB and 2 MiB held at once: $peak >= $CHUNKED_PEAK" \
	test "${peak:-0}" -ge $CHUNKED_PEAK
ok "every byte of it is given back" wait_for 20 metric_is fay_collector_memory_bytes $CONN
coll_stop

# boundary KIND PEAK: one byte short of PEAK refused, PEAK served
boundary() {
	coll_start "$T_TMP/$1-short.db" --otlp-http 127.0.0.1:$OP --max-memory $(($2 - 1)) ||
		fail "collector starts with --max-memory $(($2 - 1))"
	ok "$1: --max-memory $(($2 - 1)): 503" test "$(post $OP "$1")" = 503
	ok "$1: ... with Retry-After" grep -qi '^Retry-After: 1' "$T_TMP/h"
	ok "$1: ... counted: fay_collector_http_busy_total" test "$(metric fay_collector_http_busy_total)" -ge 1
	ok "$1: ... and its bytes given back" wait_for 20 metric_is fay_collector_memory_bytes $CONN
	coll_stop
	coll_start "$T_TMP/$1-fits.db" --otlp-http 127.0.0.1:$OP --max-memory $2 ||
		fail "collector starts with --max-memory $2"
	ok "$1: --max-memory $2: 200" post_ok $OP "$1"
	ok "$1: the peak charged is that limit exactly" test "$(metric fay_collector_memory_peak_bytes)" = $2
	coll_stop
}
boundary chunked $CHUNKED_PEAK
boundary said $SAID_PEAK
done_testing
