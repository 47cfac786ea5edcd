#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Timestamps near 2^63 us (#10: stored, but never found).  A span at
# 9223372036854775000 us is accepted, read back by its trace id, and found
# by a search whose endTs covers it: the exact millisecond, one past
# (where endTs x 1000 no longer fits in 63 bits and used to wrap), and
# 9223372036900000 ms (a day's lookback still covers it); a search that
# ends before it does not return it; an endTs
# past 2^63-1 is a 400 naming it.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/collector_lib.bash"
coll_start "$T_TMP/c.db" || { fail "collector starts"; done_testing; exit; }
TS=9223372036854775000
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
	--data "[{\"traceId\":\"00000000000000a1\",\"id\":\"00000000000000b1\",\"name\":\"far\",\"timestamp\":$TS,\"duration\":5,\"localEndpoint\":{\"serviceName\":\"farsvc\"}}]" \
	"$URL/api/v2/spans")
ok "a span at $TS us: 202" test "$code" = 202
stored() { curl -s "$URL/api/v2/trace/00000000000000a1" | grep -q "\"timestamp\":$TS"; }
ok "read back by its trace id" wait_for 10 stored
found() { curl -s "$URL/api/v2/traces?serviceName=farsvc&endTs=$1&lookback=86400000" | grep -q '"name":"far"'; }
for e in 9223372036854775 9223372036854776 9223372036900000; do
	ok "found by a search with endTs=$e" found $e
done
ok "not returned by a search that ends today" bash -c \
	"! curl -s '$URL/api/v2/traces?serviceName=farsvc&lookback=86400000' | grep -q far"
code=$(curl -s -o "$T_TMP/body" -w '%{http_code}' "$URL/api/v2/traces?serviceName=farsvc&endTs=18446744073709551615")
ok "endTs=2^64-1: 400 naming endTs" bash -c "[ '$code' = 400 ] && grep -q '^endTs' '$T_TMP/body'"
ok "the collector is still up" coll_alive
done_testing
