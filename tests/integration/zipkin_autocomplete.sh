#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Zipkin's autocomplete routes against a real collector, with the cases of
# Zipkin's own tests (openzipkin/zipkin: zipkin-tests ITAutocompleteTags,
# zipkin-server ITZipkinServerAutocomplete): without keys both answer [];
# with --autocomplete-keys the keys come back as configured and the values
# of those keys' tags (sorted, once each), never a key not configured; the
# values survive a restart (they are in the store, schema 3).
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/collector_lib.bash"

DB=$T_TMP/fay.db
NOW=$(( $(date +%s) * 1000000 ))
post() { curl -s -o /dev/null -w '%{http_code}' -X POST -H 'Content-Type: application/json' --data "$1" "$URL/api/v2/spans"; }
get() { curl -s "$URL$1"; }
span() {  # span ID TAGS-JSON
	printf '[{"traceId":"00000000000000a1","id":"%s","name":"whopper","timestamp":%s,"duration":10,"localEndpoint":{"serviceName":"svc"},"tags":%s}]' "$1" "$NOW" "$2"
}

ok "collector without --autocomplete-keys" coll_start "$DB"
ok "autocompleteKeys: 200 []" [ "$(curl -s -w ' %{http_code}' "$URL/api/v2/autocompleteKeys")" = "[] 200" ]
ok "autocompleteValues?key=environment: 200 []" [ "$(curl -s -w ' %{http_code}' "$URL/api/v2/autocompleteValues?key=environment")" = "[] 200" ]
ok "autocompleteValues without key: 400 naming it" bash -c "curl -s -w '%{http_code}' '$URL/api/v2/autocompleteValues' | tr -d '\n' | grep -q '^key: required.*400$'"
ok "a span with an environment tag: 202" [ "$(post "$(span 1 '{"environment":"prod"}')")" = 202 ]
ok "... not recorded: the key is not configured" [ "$(get '/api/v2/autocompleteValues?key=environment')" = "[]" ]
coll_stop

ok "collector with --autocomplete-keys 'environment, clnt/finagle.version,http.host'" \
	coll_start "$DB" --autocomplete-keys 'environment, clnt/finagle.version,http.host'
ok "autocompleteKeys: the keys, in the order given" \
	[ "$(get /api/v2/autocompleteKeys)" = '["environment","clnt/finagle.version","http.host"]' ]
# cache_control PATH: the answer's Cache-Control header ("" when none)
cache_control() { curl -s -D - -o /dev/null "$URL$1" | tr -d '\r' | sed -n 's/^[Cc]ache-[Cc]ontrol: //p'; }
# ITZipkinServerAutocomplete: keys are cached; values once there are more than 3
ok "autocompleteKeys: Cache-Control max-age=300, must-revalidate" \
	[ "$(cache_control /api/v2/autocompleteKeys)" = "max-age=300, must-revalidate" ]
ok "autocompleteValues with no values: not cached" \
	[ -z "$(cache_control '/api/v2/autocompleteValues?key=clnt/finagle.version')" ]
for i in 0 1 2; do
	post "$(span "1$i" "{\"clnt/finagle.version\":\"6.45.$i\"}")" >/dev/null
done
ok "... nor with 3" [ -z "$(cache_control '/api/v2/autocompleteValues?key=clnt/finagle.version')" ]
for i in 3 1 0 2; do
	post "$(span "1$i" "{\"clnt/finagle.version\":\"6.45.$i\"}")" >/dev/null
done
# getTagsAndValues: two spans with the same tags: the value once
for i in 1 2; do
	post "$(span "2$i" '{"http.method":"GET","http.host":"host1"}')" >/dev/null
done
ok "values of clnt/finagle.version, sorted" \
	[ "$(get '/api/v2/autocompleteValues?key=clnt/finagle.version')" = '["6.45.0","6.45.1","6.45.2","6.45.3"]' ]
ok "... with 4 values: Cache-Control max-age=300, must-revalidate" \
	[ "$(cache_control '/api/v2/autocompleteValues?key=clnt/finagle.version')" = "max-age=300, must-revalidate" ]
ok "http.host: host1 once" [ "$(get '/api/v2/autocompleteValues?key=http.host')" = '["host1"]' ]
ok "http.method (not configured): [] (ignores_when_key_not_in_autocompleteTags)" \
	[ "$(get '/api/v2/autocompleteValues?key=http.method')" = '[]' ]
ok "environment: nothing recorded before the key was configured" \
	[ "$(get '/api/v2/autocompleteValues?key=environment')" = '[]' ]
coll_stop
ok "restart with the same keys" coll_start "$DB" --autocomplete-keys environment,http.host
ok "values kept across the restart" [ "$(get '/api/v2/autocompleteValues?key=http.host')" = '["host1"]' ]
ok "a key no longer configured: []" [ "$(get '/api/v2/autocompleteValues?key=clnt/finagle.version')" = '[]' ]
ok "POST is not allowed: 405" [ "$(curl -s -o /dev/null -w '%{http_code}' -X POST "$URL/api/v2/autocompleteKeys")" = 405 ]
coll_stop
ok "the store is at schema 5 (autocomplete since 3)" [ "$(sqlite3 "$DB" 'PRAGMA user_version')" = 5 ]

done_testing
