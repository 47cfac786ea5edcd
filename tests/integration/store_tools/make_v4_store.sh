#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Make tests/data/store/v4.sql.gz: a schema 4 store written by a fay built
# from a commit before schema 5 (main at 5a05bb7 for the file in the
# tree), dumped as SQL, gzip'ed (data, not code).  tests/integration/store_migrate_v5.sh loads it
# and sends the same requests to a new store; the two must answer alike.
#
#   store_tools/make_v4_store.sh OLD_BUILD_DIR OUT.sql.gz
#
# What goes in (the same as store_migrate_v5.sh's feed()): Zipkin's
# fixtures and OTLP/JSON requests from same_answers.py (moved to BASE_MS
# below), and agent batches of whole spans, BlkKin partial records in one
# batch and split over two, a resent batch.
set -eu
OLD=$1 OUT=$2
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/v4_feed.bash"
T=$(mktemp -d /tmp/fay-v4.XXXXXX)
trap 'kill $PID 2>/dev/null || :; wait $PID 2>/dev/null || :; rm -rf "$T"' EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
WP=$(port) HP=$(port)
"$OLD/fay" collector --listen 127.0.0.1:$WP --http 127.0.0.1:$HP --otlp-http off --otlp-grpc off \
	--db "$T/v4.db" --retention 0 >"$T/log" 2>&1 &
PID=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$HP/health" >/dev/null && break; sleep 0.1; done
v4_feed "http://127.0.0.1:$HP" "127.0.0.1:$WP" "$OLD/tests/fay-wire-client"
kill $PID; wait $PID 2>/dev/null || true
[ "$(sqlite3 "$T/v4.db" 'PRAGMA user_version')" = 4 ] || { echo "not a schema 4 store" >&2; exit 1; }
{
	echo "-- A schema 4 fay store, written by $("$OLD/fay" --version 2>&1 | head -1)"
	echo "-- (tests/integration/store_tools/make_v4_store.sh; BASE_MS $V4_BASE_MS)"
	echo "PRAGMA application_id = 1178687827; PRAGMA user_version = 4;"
	sqlite3 "$T/v4.db" .dump
} | gzip -9n >"$OUT"
