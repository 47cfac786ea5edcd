# SPDX-License-Identifier: MIT
# Sourced by store_migrate_v5.sh and make_v4_store.sh (not a test): the
# requests that made tests/data/store/v4.sql.gz, to send the same to a new
# store.  Every time is fixed (V4_BASE_MS), so the two stores hold the
# same spans.
V4_BASE_MS=1795980000000   # 2026-11-29 18:40 UTC
V4_T_NS=$(( (V4_BASE_MS + 9000000) * 1000000 ))
V4_SAME=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/same_answers.py

# v4_feed URL WIRE_ADDR CLIENT: the same requests to one collector
v4_feed() {
	local url=$1 a=$2 client=$3
	python3 "$V4_SAME" post "$V4_BASE_MS" "$url" >/dev/null &&
	"$client" -a "$a" -i a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1 -H host-a -T "$V4_T_NS" -n 6 -m 25 send >/dev/null &&
	"$client" -a "$a" -i c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3 -H host-c -T $((V4_T_NS + 120000000000)) -s 1 partial >/dev/null &&
	"$client" -a "$a" -i c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3 -H host-c -T $((V4_T_NS + 180000000000)) -s 2 partial-split >/dev/null &&
	"$client" -a "$a" -i c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3 -H host-c -T $((V4_T_NS + 240000000000)) -s 4 -m 5 dup >/dev/null
}
