# SPDX-License-Identifier: MIT
# Sourced by tests that need ClickHouse (after lib.sh): start Debian's
# clickhouse-server with its own config, data directory and free loopback
# ports (HTTP, native TCP, interserver), as root, wait until it answers,
# and stop it when the test exits.  One server per test file: start it
# once and give every collector of the file its own database.
#
#   ch_start NODE            one node; ch_url NODE prints its HTTP URL
#   ch_cluster NAME          two nodes NAME1 and NAME2 sharing a
#                            remote_servers cluster called NAME
#   ch_q NODE 'SQL'          run SQL on a node over HTTP, print the answer
#   ch_kill NODE / ch_restart NODE   kill -9 / start again on the same data
CH_SERVER=${CH_SERVER:-$(command -v clickhouse-server || echo /usr/bin/clickhouse-server)}
[ -x "$CH_SERVER" ] || skip_all "needs clickhouse-server (scripts/install-deps)"
command -v curl >/dev/null || skip_all "needs curl"

declare -A CH_HTTP CH_TCP CH_PID CH_DIR

# _ch_config NODE CLUSTER_XML: write NODE's config.xml and users.xml
_ch_config() {
	local n=$1 remote=$2 d=${CH_DIR[$1]}
	mkdir -p "$d/data/tmp" "$d/data/user_files"
	cat >"$d/config.xml" <<XML
<?xml version="1.0"?>
<yandex>
  <logger><level>warning</level><log>$d/server.log</log>
    <errorlog>$d/err.log</errorlog><console>0</console></logger>
  <http_port>${CH_HTTP[$n]}</http_port>
  <tcp_port>${CH_TCP[$n]}</tcp_port>
  <interserver_http_port>${CH_IS[$n]}</interserver_http_port>
  <listen_host>127.0.0.1</listen_host>
  <max_concurrent_queries>100</max_concurrent_queries>
  <uncompressed_cache_size>67108864</uncompressed_cache_size>
  <mark_cache_size>67108864</mark_cache_size>
  <path>$d/data/</path>
  <tmp_path>$d/data/tmp/</tmp_path>
  <user_files_path>$d/data/user_files/</user_files_path>
  <format_schema_path>$d/data/format_schemas/</format_schema_path>
  <users_config>$d/users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <timezone>UTC</timezone>
  <mlock_executable>false</mlock_executable>
  <remote_servers>$remote</remote_servers>
</yandex>
XML
	cat >"$d/users.xml" <<XML
<?xml version="1.0"?>
<yandex>
  <profiles><default><max_memory_usage>1000000000</max_memory_usage></default></profiles>
  <users><default><password></password>
    <networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
    <profile>default</profile><quota>default</quota></default></users>
  <quotas><default><interval><duration>3600</duration><queries>0</queries>
    <errors>0</errors><result_rows>0</result_rows><read_rows>0</read_rows>
    <execution_time>0</execution_time></interval></default></quotas>
</yandex>
XML
}
declare -A CH_IS

# ch_url NODE: the node's HTTP URL
ch_url() { echo "http://127.0.0.1:${CH_HTTP[$1]}"; }

ch_ping() { curl -sf "$(ch_url "$1")/ping" 2>/dev/null | grep -q Ok; }

# ch_restart NODE: start the node's server (again) on its data directory
ch_restart() {
	local n=$1 t0=$SECONDS
	"$CH_SERVER" --config-file="${CH_DIR[$n]}/config.xml" >>"${CH_DIR[$n]}/stdout.log" 2>&1 &
	CH_PID[$n]=$!
	T_PIDS+=(${CH_PID[$n]})
	if ! wait_for 60 ch_ping "$n"; then
		diag "clickhouse $n did not start: $(tail -3 "${CH_DIR[$n]}/err.log" 2>/dev/null)"
		return 1
	fi
	diag "clickhouse $n up in $((SECONDS - t0)) s on HTTP ${CH_HTTP[$n]}"
}

# _ch_node NODE REMOTE_XML: allocate ports, write config, start
_ch_node() {
	local n=$1
	CH_DIR[$n]=$T_TMP/ch-$n
	CH_HTTP[$n]=$(free_port)
	CH_TCP[$n]=$(free_port)
	CH_IS[$n]=$(free_port)
	_ch_config "$n" "$2"
	ch_restart "$n"
}

# ch_start NODE: one server on its own
ch_start() { _ch_node "$1" ""; }

# ch_cluster NAME: two servers NAME1 and NAME2, each with the cluster NAME
# (two shards, one replica each) in its remote_servers
ch_cluster() {
	local c=$1 a=${1}1 b=${1}2 xml
	CH_TCP[$a]=$(free_port)
	CH_TCP[$b]=$(free_port)
	xml="<$c>"
	for n in $a $b; do
		xml+="<shard><replica><host>127.0.0.1</host><port>${CH_TCP[$n]}</port></replica></shard>"
	done
	xml+="</$c>"
	for n in $a $b; do
		CH_DIR[$n]=$T_TMP/ch-$n
		CH_HTTP[$n]=$(free_port)
		CH_IS[$n]=$(free_port)
		_ch_config "$n" "$xml"
		ch_restart "$n" || return 1
	done
}

# ch_q NODE SQL: the answer of SQL on NODE (TabSeparated); fails on an error
ch_q() { curl -sfS "$(ch_url "$1")/" --data-binary "$2"; }

# ch_kill NODE: kill -9 the node's server and wait for it to be gone
ch_kill() {
	kill -9 "${CH_PID[$1]}" 2>/dev/null
	wait "${CH_PID[$1]}" 2>/dev/null
	return 0
}

# ch_coll_start NODE DB [ARGS...]: coll_start (collector_lib.bash) on
# NODE's database DB (and $T_TMP/DB.db), up to 30 s for the schema
ch_coll_start() {
	local n=$1 db=$2
	shift 2
	COLL_WAIT=30 coll_start "$T_TMP/$db.db" --clickhouse "$(ch_url "$n")/$db" "$@"
}
